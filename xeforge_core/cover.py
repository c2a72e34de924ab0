"""The CoVeR loop for one stage: propose, verify, refine; then approve, or keep the current version.

For one stage, :func:`run_stage` asks an engine for ``best_of`` candidates per iteration, verifies
each against the CURRENT version (the current version is the baseline of the verification, so a
stage's speedup is relative to the version it started from), and, when no candidate is
acceptable, feeds the most useful verdict's :meth:`~xeforge_core.verdict.Verdict.feedback` back
to the engine and tries again, up to ``iterations`` times.

Acceptance (the same rule for ``auto`` and for what is offered to a person):

* a candidate that is not correct (any verdict other than ``ok``) is never accepted;
* on a device that measures speed (cuda, xpu), a correct candidate is accepted only when
  ``verdict.speed_call`` calls it faster (the speedup's confidence interval lies above 1; the
  one rule of ``xeforge_core.verdict.speedup_call``) and its speedup is at least
  ``min_speedup`` (default 1.03, the least gain worth a commit). Slower, equal ("no measurable
  difference") or inconclusive timings are never accepted automatically;
* on cpu (Triton's interpreter) there is no speed evidence: the performance step is
  ``not_measured``. There, a correct candidate is acceptable and, when approved, its commit
  says ``Speedup: not measured`` and ``Note: speed not measured``. That is what lets a whole
  pipeline run end to end in CI; speed claims come only from a GPU run.

With ``auto=True`` the best acceptable candidate is approved (one commit) and the other
candidates of the stage stay under their refs as ``superseded``; with a ``decide`` callback
(the CLI's approve/reject prompt) the person decides, a rejection is fed back to the engine and
the loop continues; with neither, the stage stops with the best candidate ``pending`` for the UI.
If nothing beats the current version, the stage ends ``kept_current`` with the reason.

Every candidate is kept in the session (``refs/candidates/<stage>/<n>``, with its iteration)
*before* it is verified, and its verdict is attached afterwards, so the UI can show every CoVeR
iteration and a verification worker that crashes (or a process that dies) loses nothing that
was committed. Verification failures of any kind, including an exception from ``verify_fn``
itself, become verdicts; the loop always survives its candidates.

Before the first stage, :func:`prepare_portability` makes a kernel that hard-codes another
device (``"xpu"`` on an NVIDIA GPU or the cpu interpreter) runnable here with the rules engine's
portability codemod, verified, as a preparatory commit with ``Stage: portability``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.verdict import StepStatus, Verdict, VerdictKind

ProgressFn = Callable[[dict[str, Any]], None]
DecideFn = Callable[[Any, Verdict], "bool | tuple[bool, str]"]

DEFAULT_MIN_SPEEDUP = 1.03
PORTABILITY_STAGE = "portability"

# classification of one attempt
FASTER = "faster"                 # correct and measurably faster: acceptable
CORRECT_UNMEASURED = "correct"    # correct, speed not measured (cpu): acceptable
NOT_FASTER = "not_faster"         # correct but slower, equal or inconclusive timing
FAILED = "failed"                 # any verdict other than ok
NOT_APPLICABLE = "not_applicable"  # the engine had nothing to propose
DUPLICATE = "duplicate"           # same code as an earlier attempt of this stage
ENGINE_ERROR = "engine_error"     # the engine raised


@dataclass
class StageState:
    """A stage's inputs without a git session (history is then kept in memory only).

    ``problem`` has the current version as its kernel; ``original_source`` is the baseline's
    code (defaults to the problem's kernel); ``device`` is a ``DeviceInfo``, a device string or
    ``None`` (auto-detect); ``target`` is ``xpu``/``cuda``/``cpu``.
    """

    problem: Any
    original_source: str | None = None
    device: Any = None
    target: str | None = None

    @property
    def current_source(self) -> str:
        return self.problem.kernel.source


@dataclass
class Attempt:
    """One candidate of one CoVeR iteration: ``iteration`` (1-based), ``index`` within the
    best-of-k batch (0-based), the session candidate id (``None`` without a session), the
    engine/model, its classification ``status`` (``faster``, ``correct``, ``not_faster``,
    ``failed``, ``not_applicable``, ``duplicate``, ``engine_error``), the verdict, the measured
    speedup (``None`` when not measured) and a one-line ``reason``."""

    iteration: int
    index: int
    status: str
    reason: str
    engine: str
    model: str | None = None
    candidate_id: str | None = None
    candidate: Any = None
    verdict: Verdict | None = None
    speedup: float | None = None
    source: str | None = None
    rationale: str = ""
    seconds: float = 0.0

    @property
    def acceptable(self) -> bool:
        return self.status in (FASTER, CORRECT_UNMEASURED)

    def to_dict(self, *, with_source: bool = False) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("verdict", "source", "candidate")}
        data["verdict_kind"] = self.verdict.kind.value if self.verdict else None
        data["verdict_reason"] = self.verdict.reason if self.verdict else None
        if with_source:
            data["source"] = self.source
            data["verdict"] = self.verdict.to_dict() if self.verdict else None
        return data


@dataclass
class StageOutcome:
    """What one stage came to.

    ``status``: ``approved`` (a candidate became the new current version: ``version`` is its
    sha), ``pending`` (an acceptable candidate, ``best``, awaits a person's decision),
    ``kept_current`` (nothing beat the current version; ``reason`` says why), ``failed`` (the
    current version itself cannot be verified here, e.g. an ``environment`` verdict) or
    ``cancelled``. ``speedup`` is the approved (or pending) candidate's measured speedup over
    the version the stage started from (``None``: not measured); ``speed_measured`` says
    whether any timing exists.
    """

    stage: str
    status: str
    reason: str
    attempts: list[Attempt] = field(default_factory=list)
    iterations: int = 0
    best: str | None = None
    version: str | None = None
    speedup: float | None = None
    speed_measured: bool = False
    verdict: Verdict | None = None
    best_source: str | None = None
    seconds: float = 0.0

    @property
    def verdict_kind(self) -> str | None:
        return self.verdict.kind.value if self.verdict else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage, "status": self.status, "reason": self.reason,
            "iterations": self.iterations, "best": self.best, "version": self.version,
            "speedup": self.speedup, "speed_measured": self.speed_measured,
            "verdict_kind": self.verdict_kind, "seconds": round(self.seconds, 3),
            "attempts": [a.to_dict() for a in self.attempts],
        }


class _Cancelled(Exception):
    pass


# --------------------------------------------------------------------------------------------
# public helpers


def classify(verdict: Verdict, *, min_speedup: float = DEFAULT_MIN_SPEEDUP) -> tuple[str, str, float | None]:
    """Classify a verdict for acceptance: returns ``(status, reason, measured_speedup)`` where
    ``status`` is ``faster``, ``correct`` (speed not measured), ``not_faster`` or ``failed``."""
    if not verdict.passed:
        return FAILED, f"{verdict.kind.value}: {verdict.reason}".rstrip(": "), None
    step = verdict.step("performance")
    speed = verdict.speedup
    if speed is None or (step is not None and step.status is not StepStatus.PASSED):
        status = step.status if step is not None else None
        if status is None or status in (StepStatus.NOT_MEASURED, StepStatus.SKIPPED):
            return CORRECT_UNMEASURED, "correct; speed not measured on this device", None
        why = step.summary or status.value
        return NOT_FASTER, f"correct, but the timing is {status.value}: {why}", speed
    suspects = [p.suspect for p in verdict.performance if p.suspect]
    call = verdict.speed_call  # the one rule: faster only when the speedup's interval is above 1
    if call.faster and speed >= min_speedup:
        return FASTER, f"correct and {call.text}", speed
    note = f" ({'; '.join(suspects)})" if suspects else ""
    if call.faster:
        return NOT_FASTER, f"correct, {call.text}, but below the {min_speedup:.2f}x minimum gain{note}", speed
    if call.slower:
        return NOT_FASTER, f"correct but slower than the current version ({call.text}){note}", speed
    return NOT_FASTER, f"correct, {speed:.3f}x: {call.text}{note}", speed


# --------------------------------------------------------------------------------------------
# the loop


def run_stage(
    session_or_state: Any = None,
    stage_id: str | None = None,
    engine: Any = None,
    *,
    stage: str | None = None,
    problem: Any = None,
    verify_fn: Callable[..., Verdict] | None = None,
    iterations: int = 3,
    best_of: int = 1,
    auto: bool = False,
    decide: DecideFn | None = None,
    min_speedup: float = DEFAULT_MIN_SPEEDUP,
    device: Any = None,
    verify_options: Any = None,
    context: Any = None,
    on_progress: ProgressFn | None = None,
    cancel: Any = None,
) -> StageOutcome:
    """Run the CoVeR loop for ``stage_id`` with ``engine`` on a :class:`~xeforge_core.session.
    Session` (candidates and decisions are committed) or a :class:`StageState` (in memory).

    ``verify_fn(problem, candidate_source, device=, options=, on_progress=, cancel=) ->
    Verdict`` defaults to :func:`xeforge_core.verify.verify`; ``iterations`` (>= 1) bounds the
    refinements, ``best_of`` (>= 1) the candidates per iteration. ``auto`` approves the best
    acceptable candidate; ``decide(candidate_record_or_attempt, verdict) -> bool | (bool,
    reason)`` asks a person instead. ``context`` overrides fields of the engine's
    ``ProposalContext`` (``target``, ``arch``, ``profile``, ``search_space``, ``options``,
    ``prompt``), or is a whole ``ProposalContext`` to start from. Without a session, ``problem``
    (whose kernel is the current version) may be given instead of a :class:`StageState`, and
    ``stage`` is accepted for ``stage_id``. ``on_progress`` receives dicts ``{"event", "message", "stage", "iteration",
    "fraction"}``; ``cancel`` is a ``threading.Event`` (or a callable returning ``True``) that
    stops the loop between steps and is passed to ``verify_fn``.

    Returns a :class:`StageOutcome`; never raises for a bad candidate or a failing engine
    (those become attempts). Raises ``ValueError`` for ``iterations``/``best_of`` below 1, a
    missing stage or engine, or neither a session nor a problem.
    """
    if iterations < 1 or best_of < 1:
        raise ValueError("iterations and best_of must be at least 1")
    stage_id = stage_id or stage
    if not stage_id or engine is None:
        raise ValueError("run_stage needs a stage id and an engine")
    if session_or_state is None:
        if problem is None:
            raise ValueError("run_stage needs a Session, a StageState or a problem")
        base_ctx = context if context is not None and not isinstance(context, dict) else None
        session_or_state = StageState(problem=problem, device=device,
                                      original_source=getattr(base_ctx, "original_code", None),
                                      target=getattr(base_ctx, "target", None))
    if verify_fn is None:
        from xeforge_core.verify import verify as verify_fn  # noqa: PLC0415
    started = time.monotonic()
    session = _as_session(session_or_state)
    state = session_or_state if session is None else None
    emit = _emitter(on_progress, stage_id)

    if session is not None:
        session.mark_stage(stage_id, "running", "CoVeR loop running")
        problem = session.problem("head")
        start_head = session.head
        original = session.source("baseline")
        dev = device if device is not None else _session_device(session)
    else:
        problem = state.problem
        start_head = None
        original = state.original_source or state.current_source
        dev = device if device is not None else state.device
    dev = _resolve_device(dev, verify_fn)
    current = problem.kernel.source
    ctx = _proposal_context(stage_id, original, current, problem, session, state, dev, context)
    engine_name = str(getattr(engine, "name", type(engine).__name__))

    attempts: list[Attempt] = []
    seen: dict[str, Attempt] = {}
    feedback: str | None = None
    outcome: StageOutcome | None = None
    iteration = 0
    try:
        for iteration in range(1, iterations + 1):
            _check(cancel)
            batch: list[Attempt] = []
            for index in range(best_of):
                _check(cancel)
                emit("propose", f"iteration {iteration}/{iterations}: asking {engine_name} for candidate "
                     f"{index + 1}/{best_of}", iteration, fraction=(iteration - 1 + index / best_of) / iterations)
                attempt = _one_attempt(
                    engine, engine_name, stage_id, ctx, feedback, iteration, index, current, problem,
                    session, seen, verify_fn, dev, verify_options, min_speedup, emit, cancel, start_head)
                batch.append(attempt)
                attempts.append(attempt)
                if attempt.status in (NOT_APPLICABLE, ENGINE_ERROR) and index == 0:
                    break  # a deterministic engine would answer the same again
            # stop when the engine has nothing new to offer (a deterministic engine repeats itself)
            if all(a.status in (NOT_APPLICABLE, ENGINE_ERROR, DUPLICATE) for a in batch):
                engine_says = f"{engine_name}: {batch[0].reason}"
                earlier = [a for a in attempts if a.verdict is not None and a.status != DUPLICATE]
                # after verified attempts, their summary is the reason (the engine only adds that
                # it has nothing else to offer)
                reason = _why_kept(attempts, iteration, min_speedup) if earlier else engine_says
                outcome = _kept(stage_id, attempts, iteration, reason)
                break
            verified = [a for a in batch if a.verdict is not None and a.status != DUPLICATE]
            if iteration == 1 and verified and all(a.verdict.kind is VerdictKind.ENVIRONMENT for a in verified):
                v = verified[0].verdict
                outcome = StageOutcome(stage=stage_id, status="failed", attempts=attempts, iterations=iteration,
                                       reason="the current version cannot be verified on this device: "
                                              f"{v.reason}".strip(), verdict=v)
                break
            pool = [a for a in attempts if a.acceptable and (a.candidate_id is not None or session is None)]
            if pool:
                best = max(pool, key=lambda a: (a.speedup or 0.0, -a.iteration, -a.index))
                if auto:
                    outcome = _approve(session, stage_id, best, attempts, iteration, emit)
                    break
                if decide is not None:
                    subject = session.candidate(best.candidate_id) if session and best.candidate_id else best
                    answer = decide(subject, best.verdict)
                    ok, why = (answer if isinstance(answer, tuple) else (bool(answer), ""))
                    if ok:
                        outcome = _approve(session, stage_id, best, attempts, iteration, emit)
                        break
                    if session is not None and best.candidate_id:
                        session.reject(best.candidate_id, why or "rejected by the user")
                    best.status = "rejected"
                    best.reason = f"rejected by the user{': ' + why if why else ''}"
                    emit("reject", f"{best.candidate_id or 'candidate'} rejected", iteration)
                    feedback = ("A person reviewed your previous candidate and rejected it"
                                + (f": {why}" if why else ".") + " Propose a different improvement.")
                    ctx.history.append(feedback)
                    continue
                outcome = StageOutcome(
                    stage=stage_id, status="pending", attempts=attempts, iterations=iteration,
                    reason=f"{best.candidate_id or 'a candidate'} is {best.reason}; awaiting a decision",
                    best=best.candidate_id, speedup=best.speedup, speed_measured=best.speedup is not None,
                    verdict=best.verdict, best_source=best.source)
                break
            feedback = _feedback(batch or attempts, min_speedup)
            if feedback:
                ctx.history.append(feedback)
        if outcome is None:
            outcome = _kept(stage_id, attempts, iteration, _why_kept(attempts, iterations, min_speedup))
    except _Cancelled:
        outcome = StageOutcome(stage=stage_id, status="cancelled", attempts=attempts, iterations=iteration,
                               reason="cancelled by the user; candidates verified so far are kept")
    outcome.seconds = time.monotonic() - started

    if session is not None:
        if outcome.status == "approved":
            session.mark_stage(stage_id, "done", outcome.reason, outcome=outcome.to_dict(), start=start_head)
        elif outcome.status == "kept_current":
            session.mark_stage(stage_id, "kept_current", outcome.reason, outcome=outcome.to_dict())
        elif outcome.status == "failed":
            session.mark_stage(stage_id, "failed", outcome.reason, outcome=outcome.to_dict())
        else:  # pending or cancelled: the stage stays open for a decision or another run
            session.mark_stage(stage_id, "running", outcome.reason, outcome=outcome.to_dict())
    emit("done", f"stage {stage_id}: {outcome.status} - {outcome.reason}", iteration, fraction=1.0)
    return outcome


def prepare_portability(
    session: Any,
    *,
    verify_fn: Callable[..., Verdict] | None = None,
    device: Any = None,
    verify_options: Any = None,
    on_progress: ProgressFn | None = None,
    cancel: Any = None,
    force: bool = False,
) -> StageOutcome | None:
    """Make a kernel that cannot run correctly here as written runnable, before any stage.

    When the current version names a device other than the session's (``"xpu"`` on cuda or
    cpu, ``"cuda"`` on xpu or cpu), passes an Intel-only compile option off xpu, or launches an
    autotuned kernel with a grid that fixes the tile sizes
    (:func:`xeforge_core.codemods.portability.portability_needs`), the rules engine's
    portability codemod rewrites it; the
    result is verified (as its own baseline, since the original cannot run here, and against
    the PyTorch reference when the problem has one) and, when correct, committed as ``Stage:
    portability``. Returns ``None`` when nothing needs porting, else the outcome
    (``approved``, ``kept_current`` when the codemod does not apply, or ``failed`` when the
    ported code does not verify). ``force`` tries the codemod even when no device string was
    found (the verifier said the current version cannot run here). Raises nothing for a bad
    kernel.
    """
    outcome = _prepare_portability(session, verify_fn=verify_fn, device=device, verify_options=verify_options,
                                   on_progress=on_progress, cancel=cancel, force=force)
    if outcome is not None:
        status = {"approved": "done", "failed": "failed", "kept_current": "kept_current"}.get(outcome.status)
        if status is not None:
            session.mark_stage(PORTABILITY_STAGE, status, outcome.reason)
    return outcome


def _prepare_portability(
    session: Any,
    *,
    verify_fn: Callable[..., Verdict] | None,
    device: Any,
    verify_options: Any,
    on_progress: ProgressFn | None,
    cancel: Any,
    force: bool,
) -> StageOutcome | None:
    if verify_fn is None:
        from xeforge_core.verify import verify as verify_fn  # noqa: PLC0415
    emit = _emitter(on_progress, PORTABILITY_STAGE)
    dev = device if device is not None else _session_device(session)
    dev_type = _device_type(dev) or str(session.device.get("type") or "cpu")
    current = session.source("head")
    from xeforge_core.codemods.portability import portability_needs  # noqa: PLC0415  (libcst)

    foreign = portability_needs(current, dev_type)
    if not foreign:
        try:
            from xeforge_core.analysis import analyze

            analysis = analyze(current, "xpu" if dev_type == "xpu" else "cuda")
            if not analysis.runs_on(dev_type):
                foreign = [f"breaks rule {rid}" for rid in sorted(
                    {str(getattr(i, "rule_id", "device")) for i in analysis.portability_issues})] or [
                    "hard-codes another device"]
        except Exception:  # analysis is advisory here
            foreign = []
    if not foreign and not force:
        return None
    foreign = foreign or ["cannot run here as written (the verifier said so)"]
    dev = _resolve_device(dev, verify_fn)
    started = time.monotonic()
    emit("propose", f"the kernel {'; '.join(foreign)}; porting it to run on {dev_type}", 1)
    code, rationale, applicable = _port(current)
    if not applicable:
        outcome = StageOutcome(stage=PORTABILITY_STAGE, status="kept_current", iterations=1,
                               reason=f"portability codemod does not apply: {rationale}")
        outcome.seconds = time.monotonic() - started
        return outcome
    rec = session.add_candidate(PORTABILITY_STAGE, code, engine="rules", model="portability", iteration=1,
                                rationale=rationale)
    original = session.problem("head")
    try:
        # Against the original first: where it runs here (a kernel whose only need is its grid, or
        # an Intel option the interpreter ignores), the port must give its answers. Where it cannot
        # run (an environment verdict), the port is verified as its own baseline.
        verdict = _safe_verify(verify_fn, original, code, dev, verify_options, emit, 1, cancel)
        against_original = verdict.kind is not VerdictKind.ENVIRONMENT
        problem = original
        if not against_original:
            problem = original.with_kernel_source(code, label="baseline")
            verdict = _safe_verify(verify_fn, problem, code, dev, verify_options, emit, 1, cancel)
    except _Cancelled:
        return StageOutcome(stage=PORTABILITY_STAGE, status="cancelled", iterations=1, best=rec.id,
                            reason="cancelled by the user; the ported candidate is kept unverified",
                            seconds=time.monotonic() - started)
    session.record_verdict(rec.id, verdict)
    attempt = Attempt(iteration=1, index=0, status=FAILED if not verdict.passed else CORRECT_UNMEASURED,
                      reason=verdict.reason or verdict.kind.value, engine="rules", model="portability",
                      candidate_id=rec.id, verdict=verdict, source=code, rationale=rationale)
    if not verdict.passed:
        session.reject(rec.id, f"the ported code does not verify: {verdict.kind.value}")
        outcome = StageOutcome(stage=PORTABILITY_STAGE, status="failed", attempts=[attempt], iterations=1,
                               reason=f"the ported code does not verify: {verdict.kind.value} {verdict.reason}",
                               verdict=verdict, best=rec.id)
    else:
        if against_original:
            note = (f"the kernel {'; '.join(foreign)}; the ported version runs the original's answers on "
                    f"{dev_type} (verified against the original, which runs here); later speedups are "
                    "relative to it")
        else:
            note = (f"the kernel {'; '.join(foreign)}, so it cannot run correctly on {dev_type} as written; "
                    "the ported version was verified on its own (compile, structure, determinism"
                    + (", against the reference" if getattr(problem, "reference", None) else "")
                    + "); later speedups are relative to it")
        version = session.approve(rec.id, note=note, speed_neutral=True,
                                  message=f"portability: run correctly on {dev_type} and any other device")
        emit("approve", f"portability: committed {version.short}", 1)
        outcome = StageOutcome(stage=PORTABILITY_STAGE, status="approved", attempts=[attempt], iterations=1,
                               reason=note, best=rec.id, version=version.sha, verdict=verdict)
    outcome.seconds = time.monotonic() - started
    return outcome


def run_pipeline(
    session: Any,
    engine: Any,
    *,
    verify_fn: Callable[..., Verdict] | None = None,
    iterations: int = 3,
    best_of: int = 1,
    auto: bool = False,
    decide: DecideFn | None = None,
    min_speedup: float = DEFAULT_MIN_SPEEDUP,
    device: Any = None,
    verify_options: Any = None,
    context: Any = None,
    portability: bool = True,
    on_progress: ProgressFn | None = None,
    cancel: Any = None,
) -> list[StageOutcome]:
    """Run every remaining stage of ``session``'s plan (from ``session.current_stage`` on, so a
    resumed session continues where it stopped), after the portability step when needed.

    Arguments are those of :func:`run_stage`, applied to each stage (``portability=False``
    skips the preparatory step). Stops early when a stage is left ``pending`` (a decision is
    awaited), is ``cancelled``, or ``failed`` (the current version cannot be verified here, so
    no later stage could be either). Returns the outcomes in order (the portability outcome
    first when there was one).
    """
    if verify_fn is None:
        from xeforge_core.verify import verify as verify_fn  # noqa: PLC0415
    dev = device if device is not None else _session_device(session)
    dev = _resolve_device(dev, verify_fn)
    outcomes: list[StageOutcome] = []
    if portability:
        prep = prepare_portability(session, verify_fn=verify_fn, device=dev, verify_options=verify_options,
                                   on_progress=on_progress, cancel=cancel)
        if prep is not None:
            outcomes.append(prep)
            if prep.status in ("failed", "cancelled"):
                return outcomes
    done: set[str] = set()
    ported = any(o.stage == PORTABILITY_STAGE for o in outcomes) or not portability
    while True:
        stage = session.current_stage
        if stage is None or stage in done:
            break
        done.add(stage)
        outcome = run_stage(session, stage, engine, verify_fn=verify_fn, iterations=iterations, best_of=best_of,
                            auto=auto, decide=decide, min_speedup=min_speedup, device=dev,
                            verify_options=verify_options, context=context, on_progress=on_progress,
                            cancel=cancel)
        outcomes.append(outcome)
        if (outcome.status == "failed" and not ported and outcome.verdict is not None
                and outcome.verdict.kind is VerdictKind.ENVIRONMENT):
            # the current version cannot run here although no device string was found: try the
            # portability codemod once, then the stage again
            ported = True
            prep = prepare_portability(session, verify_fn=verify_fn, device=dev, verify_options=verify_options,
                                       on_progress=on_progress, cancel=cancel, force=True)
            if prep is not None:
                outcomes.append(prep)
                if prep.status == "approved":
                    session.mark_stage(stage, "pending", "re-run after the portability step")
                    done.discard(stage)
                    continue
        if outcome.status in ("pending", "cancelled", "failed"):
            break
    return outcomes


# --------------------------------------------------------------------------------------------
# internals


def _as_session(obj: Any) -> Any:
    from xeforge_core.session import Session

    if isinstance(obj, Session):
        return obj
    if isinstance(obj, StageState):
        return None
    raise TypeError(f"run_stage needs a Session or a StageState, not {type(obj).__name__}")


def _check(cancel: Any) -> None:
    if cancel is None:
        return
    is_set = getattr(cancel, "is_set", None)
    if (is_set() if callable(is_set) else bool(cancel())):
        raise _Cancelled()


def _emitter(on_progress: ProgressFn | None, stage: str) -> Callable[..., None]:
    def emit(event: str, message: str, iteration: int | None = None, fraction: float | None = None) -> None:
        if on_progress is None:
            return
        payload = {"event": event, "message": message, "stage": stage, "iteration": iteration}
        if fraction is not None:
            payload["fraction"] = max(0.0, min(1.0, fraction))
        with contextlib.suppress(Exception):  # a broken progress display must not stop the loop
            on_progress(payload)
    return emit


def _describe(args: tuple, kwargs: dict) -> str:
    if args:
        first = args[0]
        if isinstance(first, dict):
            return str(first.get("message") or first.get("event") or first)
        if hasattr(first, "message") and not isinstance(first, str):
            return str(first.message)
        return " ".join(str(a) for a in args)
    return str(kwargs.get("message", ""))


def _resolve_device(device: Any, verify_fn: Callable[..., Verdict]) -> Any:
    """Detect the device once per stage (not once per verification) when the real verifier is
    used and the device is given as a string or not at all."""
    from xeforge_core.verify import verify as real_verify

    if verify_fn is not real_verify or (device is not None and not isinstance(device, str)):
        return device
    from xeforge_core.devices import detect_device

    return detect_device(device)


def _device_type(device: Any) -> str | None:
    if device is None:
        return None
    if isinstance(device, str):
        return device.split(":")[0]
    if isinstance(device, dict):
        return device.get("type")
    return getattr(device, "type", None)


def _session_device(session: Any) -> Any:
    fp = session.device
    kind = fp.get("type")
    if not kind:
        return None
    index = fp.get("index")
    return f"{kind}:{index}" if index is not None and kind != "cpu" else kind


def _proposal_context(stage: str, original: str, current: str, problem: Any, session: Any, state: Any,
                      device: Any, overrides: dict[str, Any] | None) -> Any:
    from xeforge_core.engines.base import ProposalContext

    if overrides is not None and not isinstance(overrides, dict):
        # a whole context given by the caller: use it, on the current code of this run
        return dataclasses.replace(overrides, stage=stage, current_code=current,
                                   original_code=overrides.original_code or original,
                                   problem=overrides.problem or problem, history=list(overrides.history))
    dev_type = _device_type(device) or (session.device.get("type") if session is not None else None)
    target = (session.target if session is not None else getattr(state, "target", None)) or dev_type or "xpu"
    if target not in ("xpu", "cuda"):
        target = "xpu" if dev_type == "xpu" else ("cuda" if dev_type == "cuda" else target)
    profile = getattr(device, "profile", None)
    analysis = None
    try:
        from xeforge_core.analysis import analyze

        analysis = analyze(current, target, problem)
    except Exception:  # analysis is advisory; engines work without it
        analysis = None
    fields = {"stage": stage, "original_code": original, "current_code": current, "problem": problem,
              "analysis": analysis, "target": target if target in ("xpu", "cuda") else "cuda",
              "profile": profile}
    known = {f.name for f in dataclasses.fields(ProposalContext)}
    for key, value in (overrides or {}).items():
        if key in known:
            fields[key] = value
    return ProposalContext(**fields)


def _one_attempt(engine: Any, engine_name: str, stage: str, ctx: Any, feedback: str | None, iteration: int,
                 index: int, current: str, problem: Any, session: Any, seen: dict[str, Attempt],
                 verify_fn: Callable[..., Verdict], device: Any, options: Any, min_speedup: float,
                 emit: Callable[..., None], cancel: Any, start_head: str | None = None) -> Attempt:
    t0 = time.monotonic()
    try:
        cand = engine.propose(stage, ctx, feedback)
    except Exception as exc:
        return Attempt(iteration=iteration, index=index, status=ENGINE_ERROR, engine=engine_name,
                       reason=f"the engine failed: {type(exc).__name__}: {exc}", seconds=time.monotonic() - t0)
    code = getattr(cand, "code", None) or ""
    name = str(getattr(cand, "engine", "") or engine_name)
    model = getattr(cand, "model", None)
    rationale = str(getattr(cand, "rationale", "") or "")
    if not getattr(cand, "applicable", True) or not code.strip() or code.strip() == current.strip():
        why = (getattr(cand, "not_applicable_reason", "") or rationale
               or "the candidate is identical to the current version")
        emit("not_applicable", f"{name}: {why}", iteration)
        return Attempt(iteration=iteration, index=index, status=NOT_APPLICABLE, reason=why, engine=name,
                       model=model, candidate=cand, rationale=rationale, seconds=time.monotonic() - t0)
    if code in seen:
        prev = seen[code]
        emit("duplicate", f"same code as {prev.candidate_id or 'an earlier attempt'}", iteration)
        return Attempt(iteration=iteration, index=index, status=DUPLICATE, engine=name, model=model, candidate=cand,
                       reason=f"same code as {prev.candidate_id or 'an earlier attempt'} ({prev.status})",
                       candidate_id=prev.candidate_id, verdict=prev.verdict, speedup=prev.speedup,
                       source=code, rationale=rationale, seconds=time.monotonic() - t0)
    cid = None
    if session is not None:
        # kept before it is verified: whatever happens during verification, the candidate stays
        # its parent is the version the stage started from: the one it is verified against
        rec = session.add_candidate(stage, code, engine=name, model=model, iteration=iteration,
                                    rationale=rationale, parent=start_head or "head")
        cid = rec.id
    emit("verify", f"verifying {cid or 'candidate'} against the current version", iteration)
    verdict = _safe_verify(verify_fn, problem, code, device, options, emit, iteration, cancel)
    status, reason, speed = classify(verdict, min_speedup=min_speedup)
    if session is not None and cid is not None:
        session.record_verdict(cid, verdict)
    emit("verdict", f"{cid or 'candidate'}: {reason}", iteration)
    if cid is not None:
        with contextlib.suppress(AttributeError, TypeError):
            cand.candidate_id = cid  # lets a caller that keeps candidates itself see it is kept
    attempt = Attempt(iteration=iteration, index=index, status=status, reason=reason, engine=name, model=model,
                      candidate=cand,
                      candidate_id=cid, verdict=verdict, speedup=speed, source=code, rationale=rationale,
                      seconds=time.monotonic() - t0)
    seen[code] = attempt
    return attempt


def _safe_verify(verify_fn: Callable[..., Verdict], problem: Any, code: str, device: Any, options: Any,
                 emit: Callable[..., None], iteration: int, cancel: Any) -> Verdict:
    def forward(*args: Any, **kwargs: Any) -> None:
        emit("verify_progress", _describe(args, kwargs), iteration)

    try:
        verdict = verify_fn(problem, code, device=device, options=options, on_progress=forward, cancel=cancel)
    except Exception as exc:  # the loop survives a failing verifier: it becomes a verdict
        _check(cancel)  # ... unless it failed because the user cancelled
        if isinstance(exc, ValueError) and hasattr(exc, "field") and hasattr(exc, "file"):
            # a ProblemError: the problem (spec, variants) cannot be verified, whatever the candidate
            return Verdict(kind=VerdictKind.ENVIRONMENT, reason=f"the problem cannot be verified: {exc}",
                           error_text=str(exc))
        return Verdict(kind=VerdictKind.RUNTIME_ERROR, reason=f"verification failed: {type(exc).__name__}: {exc}",
                       error_text=str(exc))
    if not isinstance(verdict, Verdict):
        return Verdict(kind=VerdictKind.RUNTIME_ERROR, reason="the verifier returned no verdict")
    return verdict


def _approve(session: Any, stage: str, best: Attempt, attempts: list[Attempt], iteration: int,
             emit: Callable[..., None]) -> StageOutcome:
    from xeforge_core.session import SessionError

    version_sha = None
    if session is not None and best.candidate_id:
        try:
            version = session.approve(best.candidate_id)
        except SessionError as exc:  # e.g. someone else changed the current version meanwhile
            return StageOutcome(stage=stage, status="pending", attempts=attempts, iterations=iteration,
                                reason=f"{best.candidate_id} could not be approved: {exc}", best=best.candidate_id,
                                speedup=best.speedup, speed_measured=best.speedup is not None,
                                verdict=best.verdict, best_source=best.source)
        version_sha = version.sha
        for a in attempts:
            if a is not best and a.candidate_id and a.candidate_id != best.candidate_id and a.status != DUPLICATE:
                session.supersede(a.candidate_id, f"{best.candidate_id} was approved")
        emit("approve", f"approved {best.candidate_id} as {version.short}", iteration)
    measured = best.speedup is not None
    reason = (f"approved {best.candidate_id or 'candidate'}: {best.reason}" if measured
              else f"approved {best.candidate_id or 'candidate'}: correct; speed not measured on this device")
    return StageOutcome(stage=stage, status="approved", attempts=attempts, iterations=iteration, reason=reason,
                        best=best.candidate_id, version=version_sha, speedup=best.speedup,
                        speed_measured=measured, verdict=best.verdict, best_source=best.source)


def _kept(stage: str, attempts: list[Attempt], iteration: int, reason: str) -> StageOutcome:
    timed = [a for a in attempts if a.speedup is not None]
    best = max(timed, key=lambda a: a.speedup or 0.0) if timed else None
    return StageOutcome(stage=stage, status="kept_current", attempts=attempts, iterations=iteration,
                        reason=f"kept current: {reason}", best=best.candidate_id if best else None,
                        speedup=None, speed_measured=bool(timed),
                        verdict=best.verdict if best else next((a.verdict for a in reversed(attempts)
                                                                if a.verdict is not None), None))


def _why_kept(attempts: list[Attempt], iterations: int, min_speedup: float) -> str:
    verified = [a for a in attempts if a.verdict is not None and a.status != DUPLICATE]
    if not verified:
        reasons = [a.reason for a in attempts if a.reason]
        return reasons[-1] if reasons else "no candidate was proposed"
    correct = [a for a in verified if a.verdict is not None and a.verdict.passed]
    rejected = [a for a in attempts if a.status == "rejected"]
    if rejected and len(rejected) == len(correct):
        return f"every acceptable candidate was rejected by the user ({len(rejected)})"
    if correct:
        timed = [a for a in correct if a.speedup is not None]
        if timed:
            best = max(timed, key=lambda a: a.speedup or 0.0)
            return (f"no candidate beat the current version by {min_speedup:.2f}x in {iterations} iteration(s); "
                    f"the best correct one, {best.candidate_id or 'a candidate'}, ran at {best.speedup:.3f}x")
        return f"no correct candidate had a conclusive timing in {iterations} iteration(s)"
    kinds: dict[str, int] = {}
    for a in verified:
        kinds[a.verdict.kind.value] = kinds.get(a.verdict.kind.value, 0) + 1  # type: ignore[union-attr]
    summary = ", ".join(f"{n} {k}" for k, n in kinds.items())
    last = verified[-1]
    return (f"no correct candidate in {iterations} iteration(s) ({summary}); last: "
            f"{last.verdict.kind.value} {last.verdict.reason}".rstrip())  # type: ignore[union-attr]


def _feedback(batch: list[Attempt], min_speedup: float) -> str | None:
    """The most useful verdict text for the next attempt: a correct-but-slow candidate's timing
    (so the engine keeps what was right) else the latest failure."""
    verified = [a for a in batch if a.verdict is not None and a.status not in ("rejected",)]
    if not verified:
        return None
    slow = [a for a in verified if a.status == NOT_FASTER]
    pick = max(slow, key=lambda a: a.speedup or 0.0) if slow else verified[-1]
    text = pick.verdict.feedback()  # type: ignore[union-attr]
    if pick.status == NOT_FASTER:
        text += (f"\nThe candidate is correct but not faster than the current version (needs at least "
                 f"{min_speedup:.2f}x). Keep it correct and make it faster.")
    return text


def _port(source: str) -> tuple[str, str, bool]:
    """``(code, rationale, applicable)`` from the rules engine's portability codemod."""
    from xeforge_core.engines.rules import port_to_device_agnostic

    cand = port_to_device_agnostic(source)
    applicable = bool(getattr(cand, "applicable", True)) and cand.code.strip() != source.strip()
    why = cand.rationale or getattr(cand, "not_applicable_reason", "")
    return cand.code, why or "device-agnostic host code", applicable
