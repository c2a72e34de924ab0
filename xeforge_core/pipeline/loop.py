"""The CoVeR loop (Chain of Verification and Refinement) for one stage, over a controller.

For one stage, :func:`run_stage` asks an engine for ``best_of`` candidates per iteration; the
controller (:mod:`xeforge_core.pipeline.controller`) keeps each one and verifies it against the
CURRENT version (the current version is the baseline of the verification, so a stage's speedup
is relative to the version it started from). When no candidate is acceptable, the most useful
verdict's :meth:`~xeforge_core.verdict.Verdict.feedback` goes back to the engine, which refines
its candidate, up to ``iterations`` times. How the loop runs is one :class:`LoopOptions` object.

Acceptance (the same rule for ``auto`` and for what is offered to a person):

* a candidate that is not correct (any verdict other than ``ok``) is never accepted;
* on a device that measures speed (cuda, xpu), a correct candidate is accepted only when
  ``verdict.speed_call`` calls it faster (the speedup's confidence interval lies above 1; the
  one rule of ``xeforge_core.verdict.speedup_call``) and its speedup is at least
  ``min_speedup`` (default 1.03, the least gain worth a commit), and no timed variant is
  measurably slower (a candidate faster over the variants' geometric mean but slower at one
  benchmark shape is a regression there: on the H200 a GELU kept 1.15x faster at a 7 µs
  published size was 0.96x at a 122 µs one). Slower, equal ("no measurable difference") or
  inconclusive timings are never accepted automatically;
* on cpu (Triton's interpreter) there is no speed evidence: the performance step is
  ``not_measured``. There, a correct candidate is acceptable and, when approved, its commit
  says ``Speedup: not measured`` and ``Note: speed not measured``. That is what lets a whole
  pipeline run end to end in CI; speed claims come only from a GPU run.

With ``auto`` the best acceptable candidate is approved (one commit) and the other candidates of
the stage stay kept as ``superseded``; with a ``decide`` callback (the CLI's approve/reject
prompt) the person decides, a rejection is fed back to the engine and the loop continues; with
neither, the stage stops in ``review`` with the best candidate awaiting the UI's decision. If
nothing beats the current version, the stage ends ``kept_current`` with the reason. An engine
that cannot propose for the stage at all (the rules engine where no codemod serves it, per
``vocab.stages``) is answered at once, before any worker starts.

Verification failures of any kind, including an exception from the verifier itself, become
verdicts; the loop always survives its candidates.

Before the first stage, :func:`prepare_portability` runs the preparatory *portability* stage: a
kernel that cannot run correctly on the run device as written (it hard-codes ``"xpu"`` on an
NVIDIA GPU or the cpu interpreter, passes an Intel-only option, launches an autotuned kernel with
a fixed grid) is made device-agnostic with the rules engine's codemod, verified, and committed
with ``Stage: portability``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from xeforge_core.analysis import analyze
from xeforge_core.engines.registry import EngineSpec, get_engine_spec
from xeforge_core.pipeline.controller import (
    Cancelled,
    StageController,
    VerifyFn,
    check_cancel,
    default_verify,
)
from xeforge_core.pipeline.first_version import FIRST_VERSION, first_version_due, prepare_first_version
from xeforge_core.pipeline.outcomes import (
    DEFAULT_MIN_SPEEDUP,
    Attempt,
    LoopOptions,
    StageOutcome,
    inconsistent_problem,
    kind_and_reason,
    resolve_run_device,
    stage_emitter,
)
from xeforge_core.session.approval import SessionError
from xeforge_core.units import plural
from xeforge_core.verdict import StepStatus, Verdict, VerdictKind, speedup_call
from xeforge_core.vocab.stages import PORTABILITY
from xeforge_core.vocab.status import AttemptStatus, OutcomeStatus, StageStatus

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.engines.base import Engine, ProposalContext
    from xeforge_core.problem import Problem

# --------------------------------------------------------------------------------------------
# acceptance


def classify(verdict: Verdict, *, min_speedup: float = DEFAULT_MIN_SPEEDUP
             ) -> tuple[AttemptStatus, str, float | None]:
    """Classify a verdict for acceptance: returns ``(status, reason, measured_speedup)`` where
    ``status`` is ``faster``, ``correct`` (speed not measured), ``not_faster`` or ``failed``."""
    if not verdict.passed:
        return AttemptStatus.FAILED, f"{verdict.kind.value}: {verdict.reason}".rstrip(": "), None
    step = verdict.step("performance")
    speed = verdict.speedup
    if speed is None or (step is not None and step.status is not StepStatus.PASSED):
        status = step.status if step is not None else None
        if status is None or status in (StepStatus.NOT_MEASURED, StepStatus.SKIPPED):
            return AttemptStatus.CORRECT, "correct; speed not measured on this device", None
        why = step.summary or status.value
        return AttemptStatus.NOT_FASTER, f"correct, but the timing is {status.value}: {why}", speed
    suspects = [p.suspect for p in verdict.performance if p.suspect]
    call = verdict.speed_call  # the one rule: faster only when the speedup's interval is above 1
    note = f" ({'; '.join(suspects)})" if suspects else ""
    slower_at = [(p.variant, c) for p in verdict.performance
                 if (c := speedup_call(p.speedup, p.speedup_low, p.speedup_high)).slower]
    if call.faster and slower_at:
        where = "; ".join(f"{v}: {c.text}" for v, c in slower_at)
        return (AttemptStatus.NOT_FASTER,
                f"correct and {call.text} over the variants, but slower at {where}{note}", speed)
    if call.faster and speed >= min_speedup:
        return AttemptStatus.FASTER, f"correct and {call.text}", speed
    if call.faster:
        return (AttemptStatus.NOT_FASTER,
                f"correct, {call.text}, but below the {min_speedup:.2f}x minimum gain{note}", speed)
    if call.slower:
        return AttemptStatus.NOT_FASTER, f"correct but slower than the current version ({call.text}){note}", speed
    return AttemptStatus.NOT_FASTER, f"correct, {speed:.3f}x: {call.text}{note}", speed


# --------------------------------------------------------------------------------------------
# the loop


def run_stage(controller: StageController, stage: str, engine: Engine,
              options: LoopOptions | None = None) -> StageOutcome:
    """Run the CoVeR loop for ``stage`` with ``engine`` on ``controller``'s session (see the
    module docstring). Returns a :class:`StageOutcome` and leaves the stage's status to match it;
    never raises for a bad candidate or a failing engine (those become attempts)."""
    options = options or LoopOptions()
    started = time.monotonic()
    emit = stage_emitter(options.on_progress, stage)
    engine_name = str(getattr(engine, "name", type(engine).__name__))
    spec = _engine_spec(engine_name)
    if spec is not None and not spec.can_propose(stage):
        outcome = StageOutcome(stage=stage, status=OutcomeStatus.KEPT_CURRENT,
                               reason=f"kept current: {spec.cannot_propose_reason(stage)}")
        controller.mark_stage(stage, outcome.status.stage_status, outcome.reason, outcome=outcome.to_dict())
        emit("done", f"stage {stage}: {outcome.status} - {outcome.reason}", None, fraction=1.0)
        return outcome
    verify_fn = options.verify_fn or default_verify()
    device = resolve_run_device(controller, verify_fn)
    controller.mark_stage(stage, StageStatus.RUNNING, "CoVeR loop running")
    start_version = controller.version
    ctx = controller.context(stage, options.context)
    current = ctx.current_code

    attempts: list[Attempt] = []
    seen: dict[str, Attempt] = {}
    feedback: str | None = None
    outcome: StageOutcome | None = None
    iteration = 0
    n_iter, k = options.iterations, options.best_of
    try:
        for iteration in range(1, n_iter + 1):
            check_cancel(options.cancel)
            batch: list[Attempt] = []
            for index in range(k):
                check_cancel(options.cancel)
                emit("propose", f"iteration {iteration}/{n_iter}: asking {engine_name} for candidate {index + 1}/{k}",
                     iteration, fraction=(iteration - 1 + index / k) / n_iter)
                attempt = _one_attempt(controller, engine, engine_name, stage, ctx, feedback, iteration, index,
                                       current, seen, verify_fn, device, options, emit, start_version)
                batch.append(attempt)
                attempts.append(attempt)
                check_cancel(options.cancel)  # a Cancel while the engine or the verifier worked
                if attempt.status in (AttemptStatus.NOT_APPLICABLE, AttemptStatus.ENGINE_ERROR) and index == 0:
                    break  # a deterministic engine would answer the same again
            # stop when the engine has nothing new to offer (a deterministic engine repeats itself)
            idle = (AttemptStatus.NOT_APPLICABLE, AttemptStatus.ENGINE_ERROR, AttemptStatus.DUPLICATE)
            if all(a.status in idle for a in batch):
                earlier = [a for a in attempts if a.verdict is not None and a.status != AttemptStatus.DUPLICATE]
                # after verified attempts, their summary is the reason (the engine only adds that
                # it has nothing else to offer)
                reason = (_why_kept(attempts, iteration, options.min_speedup) if earlier
                          else f"{engine_name}: {batch[0].reason}")
                outcome = _kept(stage, attempts, iteration, reason)
                break
            verified = [a for a in batch if a.verdict is not None and a.status != AttemptStatus.DUPLICATE]
            if iteration == 1 and verified and all(a.verdict.kind is VerdictKind.ENVIRONMENT for a in verified):
                v = verified[0].verdict
                outcome = StageOutcome(stage=stage, status=OutcomeStatus.FAILED, attempts=attempts,
                                       iterations=iteration, verdict=v,
                                       reason=("the current version cannot be verified: "
                                               if _baseline_hangs(v) or v.problem_at_fault else
                                               "the current version cannot be verified on this device: ")
                                       + (v.reason or "").strip())
                break
            pool = [a for a in attempts if a.acceptable and a.candidate_id is not None]
            if pool:
                best = max(pool, key=lambda a: (a.speedup or 0.0, -a.iteration, -a.index))
                if options.auto:
                    outcome = _approve(controller, stage, best, attempts, iteration, emit)
                    break
                if options.decide is not None:
                    answer = options.decide(controller.candidate(best.candidate_id), best.verdict)
                    ok, why = (answer if isinstance(answer, tuple) else (bool(answer), ""))
                    if ok:
                        outcome = _approve(controller, stage, best, attempts, iteration, emit)
                        break
                    controller.reject(best.candidate_id, why or "rejected by the user")
                    best.status = AttemptStatus.REJECTED
                    best.reason = f"rejected by the user{': ' + why if why else ''}"
                    emit("reject", f"{best.candidate_id} rejected", iteration)
                    if spec is not None and spec.deterministic:  # asking again gives the same candidate
                        outcome = _kept(stage, attempts, iteration,
                                        f"{best.candidate_id} {best.reason}; the {engine_name} engine is deterministic "
                                        "and has no other rewrite for this stage (the llm or manual engine can "
                                        "propose another)")
                        break
                    feedback = ("A person reviewed your previous candidate and rejected it"
                                + (f": {why}" if why else ".") + " Propose a different improvement.")
                    ctx.history.append(feedback)
                    continue
                outcome = StageOutcome(
                    stage=stage, status=OutcomeStatus.REVIEW, attempts=attempts, iterations=iteration,
                    reason=f"{best.candidate_id} is {best.reason}; awaiting a decision",
                    best=best.candidate_id, speedup=best.speedup, speed_measured=best.speedup is not None,
                    verdict=best.verdict, best_source=best.source)
                break
            feedback = _feedback(batch or attempts, options.min_speedup)
            if feedback:
                ctx.history.append(feedback)
        if outcome is None:
            outcome = _kept(stage, attempts, iteration, _why_kept(attempts, n_iter, options.min_speedup))
    except Cancelled:
        outcome = StageOutcome(stage=stage, status=OutcomeStatus.CANCELLED, attempts=attempts, iterations=iteration,
                               reason="cancelled by the user; candidates verified so far are kept")
    outcome.seconds = time.monotonic() - started
    extra: dict[str, Any] = {"outcome": outcome.to_dict()}
    if outcome.status is OutcomeStatus.APPROVED:
        extra["start"] = start_version
    controller.mark_stage(stage, outcome.status.stage_status, outcome.reason, **extra)
    emit("done", f"stage {stage}: {outcome.status} - {outcome.reason}", iteration, fraction=1.0)
    return outcome


def prepare_portability(controller: StageController, options: LoopOptions | None = None, *,
                        force: bool = False) -> StageOutcome | None:
    """Run the preparatory portability stage when the current version cannot run correctly on
    the run device as written.

    When it names a device other than the run device's (``"xpu"`` on cuda or cpu, ``"cuda"`` on
    xpu or cpu), passes an Intel-only compile option off xpu, or launches an autotuned kernel
    with a grid that fixes the tile sizes (:func:`xeforge_core.codemods.portability.
    portability_needs`), the rules engine's portability codemod rewrites it; the result is
    verified (against the original where the original runs here, else as its own baseline and
    against the PyTorch reference when the problem has one) and, when correct, approved as
    ``Stage: portability``. Returns ``None`` when nothing needs porting, else the outcome
    (``approved``, ``kept_current`` when the codemod does not apply, ``failed`` when the ported
    code does not verify, or ``cancelled``). ``force`` tries the codemod even when no reason
    was found (the verifier said the current version cannot run here). Raises nothing for a
    bad kernel.
    """
    options = options or LoopOptions()
    outcome = _prepare_portability(controller, options, force)
    if outcome is not None and outcome.status is not OutcomeStatus.CANCELLED:
        controller.mark_stage(PORTABILITY, outcome.status.stage_status, outcome.reason)
    return outcome


def run_pipeline(controller: StageController, engine: Engine, options: LoopOptions | None = None
                 ) -> list[StageOutcome]:
    """Run every remaining stage of the plan (from the first open stage on, so a resumed session
    continues where it stopped), after the portability stage when needed (unless
    ``options.portability`` is false).

    Stops early when a stage is left in ``review`` (a decision is awaited), is ``cancelled``, or
    ``failed`` (the current version cannot be verified here, so no later stage could be either).
    Returns the outcomes in order (the portability outcome first when there was one).
    """
    options = options or LoopOptions()
    resolve_run_device(controller, options.verify_fn or default_verify())
    outcomes: list[StageOutcome] = []

    if first_version_due(controller, getattr(engine, "name", "")):
        first = prepare_first_version(controller, options)  # a plain-PyTorch problem: TorchInductor's kernels
        outcomes.append(first)
        if first.status is not OutcomeStatus.APPROVED:
            return outcomes
        if options.on_first_version is not None:
            options.on_first_version(controller)
            planned = controller.session.plan
            stage_emitter(options.on_progress, FIRST_VERSION)(
                "plan", "stages planned on the first Triton version: " + ", ".join(planned) if planned else
                "no stage has work on the first Triton version (its analysis found nothing a stage changes): "
                "it is the result")
    if options.portability:
        prep = prepare_portability(controller, options)
        if prep is not None:
            outcomes.append(prep)
            if prep.status in (OutcomeStatus.FAILED, OutcomeStatus.CANCELLED):
                return outcomes
    done: set[str] = set()
    ported = any(o.stage == PORTABILITY for o in outcomes) or not options.portability
    while True:
        stage = next((s for s in controller.plan if controller.stage_status(s).open), None)
        if stage is None or stage in done:
            break
        done.add(stage)
        outcome = run_stage(controller, stage, engine, options)
        outcomes.append(outcome)
        if (outcome.status is OutcomeStatus.FAILED and not ported and outcome.verdict is not None
                and outcome.verdict.kind is VerdictKind.ENVIRONMENT and not _baseline_hangs(outcome.verdict)):
            # the current version cannot run here although no reason to port was found: try the
            # portability codemod once, then the stage again
            ported = True
            prep = prepare_portability(controller, options, force=True)
            if prep is not None:
                outcomes.append(prep)
                if prep.status is OutcomeStatus.APPROVED:
                    controller.mark_stage(stage, StageStatus.PENDING, "re-run after the portability step")
                    done.discard(stage)
                    continue
        if outcome.status in (OutcomeStatus.REVIEW, OutcomeStatus.CANCELLED, OutcomeStatus.FAILED):
            break
        if inconsistent_problem([outcome]):
            # the baseline disagrees with its reference: every later stage would say so again
            stage_emitter(options.on_progress, stage)(
                "stopped", "the problem is inconsistent (its baseline disagrees with its reference): the stages "
                "after this one are not run")
            break
    return outcomes


# --------------------------------------------------------------------------------------------
# internals


def _engine_spec(name: str) -> EngineSpec | None:
    try:
        return get_engine_spec(name)
    except ValueError:  # an engine the registry does not list (a test's or a caller's own)
        return None


def _baseline_hangs(verdict: Verdict) -> bool:
    """Whether an ``environment`` verdict is a baseline that hangs (its own fault: porting it to
    the device would not help)."""
    step = next((s for s in verdict.steps if s.name == "baseline"), None)
    return step is not None and (step.evidence or {}).get("baseline_kind") == VerdictKind.TIMEOUT.value


def _describe(args: tuple, kwargs: dict) -> str:
    if args:
        first = args[0]
        if isinstance(first, dict):
            return str(first.get("message") or first.get("event") or first)
        if hasattr(first, "message") and not isinstance(first, str):
            return str(first.message)
        return " ".join(str(a) for a in args)
    return str(kwargs.get("message", ""))


def _device_type(device: DeviceInfo | str | None) -> str:
    if device is None:
        return "cpu"
    if isinstance(device, str):
        return device.split(":")[0] or "cpu"
    return str(getattr(device, "type", None) or "cpu")


def _one_attempt(controller: StageController, engine: Engine, engine_name: str, stage: str, ctx: ProposalContext,
                 feedback: str | None, iteration: int, index: int, current: str, seen: dict[str, Attempt],
                 verify_fn: VerifyFn, device: DeviceInfo | str | None, options: LoopOptions,
                 emit: Callable[..., None],
                 start_version: str) -> Attempt:
    t0 = time.monotonic()
    try:
        cand = controller.propose(stage, engine, feedback, ctx)
    except Exception as exc:
        return Attempt(iteration=iteration, index=index, status=AttemptStatus.ENGINE_ERROR, engine=engine_name,
                       reason=f"the engine failed: {type(exc).__name__}: {exc}", seconds=time.monotonic() - t0)
    code = cand.code or ""
    name = cand.engine or engine_name
    if not cand.applicable or not code.strip() or code.strip() == current.strip():
        why = cand.not_applicable_reason or cand.rationale or "the candidate is identical to the current version"
        emit("not_applicable", f"{name}: {why}", iteration)
        return Attempt(iteration=iteration, index=index, status=AttemptStatus.NOT_APPLICABLE, reason=why,
                       engine=name, model=cand.model, candidate=cand, rationale=cand.rationale,
                       seconds=time.monotonic() - t0)
    if code in seen:
        prev = seen[code]
        emit("duplicate", f"same code as {prev.candidate_id}", iteration)
        return Attempt(iteration=iteration, index=index, status=AttemptStatus.DUPLICATE, engine=name,
                       model=cand.model, candidate=cand, reason=f"same code as {prev.candidate_id} ({prev.status})",
                       candidate_id=prev.candidate_id, verdict=prev.verdict, speedup=prev.speedup,
                       source=code, rationale=cand.rationale, seconds=time.monotonic() - t0)
    # kept before it is verified: whatever happens during verification, the candidate stays; its
    # parent is the version the stage started from, the one it is verified against
    rec = controller.keep(stage, cand, engine=name, iteration=iteration, parent=start_version)
    emit("verify", f"verifying {rec.id} against the current version", iteration)

    def forward(*args: Any, **kwargs: Any) -> None:
        emit("verify_progress", _describe(args, kwargs), iteration)

    verdict = controller.verify(rec.id, code, device=device, options=options.verify_options, verify_fn=verify_fn,
                                on_progress=forward, cancel=options.cancel)
    status, reason, speed = classify(verdict, min_speedup=options.min_speedup)
    emit("verdict", f"{rec.id}: {reason}", iteration)
    attempt = Attempt(iteration=iteration, index=index, status=status, reason=reason, engine=name, model=cand.model,
                      candidate=cand, candidate_id=rec.id, verdict=verdict, speedup=speed, source=code,
                      rationale=cand.rationale, seconds=time.monotonic() - t0)
    seen[code] = attempt
    return attempt


def _approve(controller: StageController, stage: str, best: Attempt, attempts: list[Attempt], iteration: int,
             emit: Callable[..., None]) -> StageOutcome:
    assert best.candidate_id is not None
    try:
        version = controller.approve(best.candidate_id)
    except SessionError as exc:  # e.g. someone else changed the current version meanwhile
        return StageOutcome(stage=stage, status=OutcomeStatus.REVIEW, attempts=attempts, iterations=iteration,
                            reason=f"{best.candidate_id} could not be approved: {exc}", best=best.candidate_id,
                            speedup=best.speedup, speed_measured=best.speedup is not None,
                            verdict=best.verdict, best_source=best.source)
    emit("approve", f"approved {best.candidate_id} as {version[:10]}", iteration)
    measured = best.speedup is not None
    reason = (f"approved {best.candidate_id}: {best.reason}" if measured
              else f"approved {best.candidate_id}: correct; speed not measured on this device")
    return StageOutcome(stage=stage, status=OutcomeStatus.APPROVED, attempts=attempts, iterations=iteration,
                        reason=reason, best=best.candidate_id, version=version, speedup=best.speedup,
                        speed_measured=measured, verdict=best.verdict, best_source=best.source)


def _kept(stage: str, attempts: list[Attempt], iteration: int, reason: str) -> StageOutcome:
    timed = [a for a in attempts if a.speedup is not None]
    best = max(timed, key=lambda a: a.speedup or 0.0) if timed else None
    last = next((a.verdict for a in reversed(attempts) if a.verdict is not None), None)
    return StageOutcome(stage=stage, status=OutcomeStatus.KEPT_CURRENT, attempts=attempts, iterations=iteration,
                        reason=f"kept current: {reason}", best=best.candidate_id if best else None,
                        speedup=None, speed_measured=bool(timed), verdict=best.verdict if best else last)


def _why_kept(attempts: list[Attempt], iterations: int, min_speedup: float) -> str:
    verified = [a for a in attempts if a.verdict is not None and a.status != AttemptStatus.DUPLICATE]
    if not verified:
        reasons = [a.reason for a in attempts if a.reason]
        return reasons[-1] if reasons else "no candidate was proposed"
    within = f"in {plural(iterations, 'iteration')}"
    correct = [a for a in verified if a.verdict is not None and a.verdict.passed]
    rejected = [a for a in attempts if a.status == AttemptStatus.REJECTED]
    if rejected and len(rejected) == len(correct):
        return f"every acceptable candidate was rejected by the user ({len(rejected)})"
    if correct:
        timed = [a for a in correct if a.speedup is not None]
        if timed:
            best = max(timed, key=lambda a: a.speedup or 0.0)
            return (f"no candidate beat the current version by {min_speedup:.2f}x {within}; "
                    f"the best correct one, {best.candidate_id}, ran at {best.speedup:.3f}x")
        return f"no correct candidate had a conclusive timing {within}"
    kinds: dict[str, int] = {}
    for a in verified:
        kinds[a.verdict.kind.value] = kinds.get(a.verdict.kind.value, 0) + 1  # type: ignore[union-attr]
    summary = ", ".join(f"{n} {k}" for k, n in kinds.items())
    last = verified[-1]
    return (f"no correct candidate {within} ({summary}); last: "
            f"{last.verdict.kind.value} {last.verdict.reason}".rstrip())  # type: ignore[union-attr]


def _feedback(batch: list[Attempt], min_speedup: float) -> str | None:
    """The most useful verdict text for the next attempt: a correct-but-slow candidate's timing
    (so the engine keeps what was right) else the latest failure."""
    verified = [a for a in batch if a.verdict is not None and a.status != AttemptStatus.REJECTED]
    if not verified:
        return None
    slow = [a for a in verified if a.status == AttemptStatus.NOT_FASTER]
    pick = max(slow, key=lambda a: a.speedup or 0.0) if slow else verified[-1]
    text = pick.verdict.feedback()  # type: ignore[union-attr]
    if pick.status == AttemptStatus.NOT_FASTER:
        text += (f"\nThe candidate is correct but not faster than the current version (needs at least "
                 f"{min_speedup:.2f}x). Keep it correct and make it faster.")
    return text


def _prepare_portability(controller: StageController, options: LoopOptions, force: bool) -> StageOutcome | None:
    from xeforge_core.codemods.portability import portability_needs
    from xeforge_core.engines.rules import port_to_device_agnostic

    verify_fn = options.verify_fn or default_verify()
    emit = stage_emitter(options.on_progress, PORTABILITY)
    original = controller.current()
    current = original.kernel.source
    dev_type = _device_type(controller.device)
    foreign = portability_needs(current, dev_type)
    if not foreign:
        analysis = analyze(current, "xpu" if dev_type == "xpu" else "cuda")
        if not analysis.runs_on(dev_type):
            foreign = [f"breaks rule {rid}" for rid in sorted(
                {str(i.rule_id) for i in analysis.portability_issues})] or ["hard-codes another device"]
    if not foreign and not force:
        return None
    foreign = foreign or ["cannot run here as written (the verifier said so)"]
    device = resolve_run_device(controller, verify_fn)
    started = time.monotonic()
    emit("propose", f"the kernel {'; '.join(foreign)}; porting it to run on {dev_type}", 1)
    cand = port_to_device_agnostic(current)
    if not cand.applicable or cand.code.strip() == current.strip():
        why = cand.not_applicable_reason or cand.rationale or "nothing to port"
        return StageOutcome(stage=PORTABILITY, status=OutcomeStatus.KEPT_CURRENT, iterations=1,
                            reason=f"portability codemod does not apply: {why}", seconds=time.monotonic() - started)
    code = cand.code
    rationale = cand.rationale or "device-agnostic host code"
    rec = controller.keep(PORTABILITY, cand, engine="rules", model="portability", iteration=1, rationale=rationale)

    def forward(*args: Any, **kwargs: Any) -> None:
        emit("verify_progress", _describe(args, kwargs), 1)

    def check(problem: Problem) -> Verdict:
        return controller.verify(rec.id, code, problem=problem, device=device, options=options.verify_options,
                                 verify_fn=verify_fn, on_progress=forward, cancel=options.cancel)

    try:
        # Against the original first: where it runs here (a kernel whose only need is its grid, or
        # an Intel option the interpreter ignores), the port must give its answers. Where it cannot
        # run (an environment verdict), the port is verified as its own baseline.
        verdict = check(original)
        against_original = verdict.kind is not VerdictKind.ENVIRONMENT
        problem = original
        if not against_original:
            problem = original.with_kernel_source(code, label="baseline")
            verdict = check(problem)
    except Cancelled:
        return StageOutcome(stage=PORTABILITY, status=OutcomeStatus.CANCELLED, iterations=1, best=rec.id,
                            reason="cancelled by the user; the ported candidate is kept unverified",
                            seconds=time.monotonic() - started)
    attempt = Attempt(iteration=1, index=0,
                      status=AttemptStatus.CORRECT if verdict.passed else AttemptStatus.FAILED,
                      reason=verdict.reason or verdict.kind.value, engine="rules", model="portability",
                      candidate_id=rec.id, verdict=verdict, source=code, rationale=rationale)
    if not verdict.passed:
        controller.reject(rec.id, f"the ported code does not verify: {verdict.kind.value}")
        outcome = StageOutcome(stage=PORTABILITY, status=OutcomeStatus.FAILED, attempts=[attempt], iterations=1,
                               reason=f"the ported code does not verify: {kind_and_reason(verdict)}",
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
        version = controller.approve(rec.id, note=note, speed_neutral=True,
                                     message=f"portability: run correctly on {dev_type} and any other device")
        emit("approve", f"portability: committed {version[:10]}", 1)
        outcome = StageOutcome(stage=PORTABILITY, status=OutcomeStatus.APPROVED, attempts=[attempt], iterations=1,
                               reason=note, best=rec.id, version=version, verdict=verdict)
    outcome.seconds = time.monotonic() - started
    return outcome
