"""Propose, verify, approve, reject and skip for one session: the only writer of candidate state.

The CoVeR loop (:mod:`xeforge_core.pipeline.loop`), the UI's workbench and the CLI change a
candidate's state only through a controller, so the rules hold in every path: a candidate is kept
*before* it is verified (a crashing worker loses nothing), its verdict is attached to it, approving
one supersedes the other pending candidates of its stage and marks the stage done, rejecting the
candidate a stage was waiting on puts the stage back to ``pending``.

Two controllers share these rules:

* :class:`SessionController` over a git :class:`~xeforge_core.session.Session` (the product);
* :class:`MemoryController`, the same in memory, for runs without a repository (the pipeline
  benchmark on a GPU machine without GitPython).
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xeforge_core import verify as verify_module
from xeforge_core.analysis import analyze
from xeforge_core.engines.base import Candidate, ProposalContext
from xeforge_core.errors import XeForgeError
from xeforge_core.problem import ProblemError
from xeforge_core.session.approval import SessionError, check_approval
from xeforge_core.session.records import CandidateRecord
from xeforge_core.target import Target, resolve
from xeforge_core.verdict import Verdict, VerdictKind
from xeforge_core.vocab.status import CandidateStatus, StageStatus

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.engines.base import Engine
    from xeforge_core.problem import Problem
    from xeforge_core.session.session import Session
    from xeforge_core.verify import VerifyOptions

#: ``verify(problem, candidate_source, device=, options=, on_progress=, cancel=) -> Verdict``.
VerifyFn = Callable[..., Verdict]
#: A progress callback: receives one dict per event (``event``, ``message``, ...).
ProgressFn = Callable[[Any], None]


class Cancelled(XeForgeError):
    """The user cancelled (checked between steps; the loop turns it into a ``cancelled``
    outcome)."""


def check_cancel(cancel: Any) -> None:
    """Raise :class:`Cancelled` when ``cancel`` (a ``threading.Event`` or a callable returning
    ``True``) is set."""
    if cancel is None:
        return
    is_set = getattr(cancel, "is_set", None)
    if is_set() if callable(is_set) else bool(cancel()):
        raise Cancelled("cancelled by the user")


def default_verify() -> VerifyFn:
    """The product's verifier, :func:`xeforge_core.verify.verify` (workers, sandbox, cache),
    looked up when called."""
    return verify_module.verify


def launched_at_published_size(verdict: Verdict | None) -> list[str] | None:
    """The names of the Triton kernels ``verdict`` saw launched, where its runs covered the size
    that is timed (a timing run on a GPU, or correctness checked at a KernelBench problem's
    published sizes, variant ``module``); ``None`` otherwise: a kernel chosen by size may run only
    at the published size, which the interpreter's smaller checked sizes miss."""
    if verdict is None or not verdict.kernels:
        return None
    if not verdict.performance and not any(r.variant == "module" for r in verdict.correctness):
        return None
    return sorted({k.name for k in verdict.kernels})


class StageController(abc.ABC):
    """What one session's candidates may undergo; see the module docstring.

    ``target`` is the hardware the session optimizes for; ``device`` the run device as given
    (``DeviceInfo``, a device string or ``None``: the loop resolves it once).
    """

    device: DeviceInfo | str | None

    # ------------------------------------------------------------------ what subclasses keep

    @property
    @abc.abstractmethod
    def target(self) -> Target:
        ...

    @property
    @abc.abstractmethod
    def plan(self) -> list[str]:
        """The stage plan, in order."""

    @property
    @abc.abstractmethod
    def version(self) -> str:
        """An id of the current version (a commit sha for a session)."""

    @abc.abstractmethod
    def current(self) -> Problem:
        """The problem whose kernel is the current version (the baseline of every verification)."""

    @abc.abstractmethod
    def original_source(self) -> str:
        """The baseline kernel's source (commit 0)."""

    @abc.abstractmethod
    def current_verdict(self) -> Verdict | None:
        """The verdict that admitted the current version; ``None`` for the baseline or a version
        no verification admitted."""

    @abc.abstractmethod
    def candidate(self, candidate_id: str) -> CandidateRecord:
        """The record of a kept candidate. Raises ``SessionError`` when unknown."""

    @abc.abstractmethod
    def stage_status(self, stage: str) -> StageStatus:
        """The stage's status (``pending`` for a stage never touched)."""

    @abc.abstractmethod
    def mark_stage(self, stage: str, status: StageStatus, reason: str = "", **extra: Any) -> None:
        """Set a stage's status, with the reason (and JSON-able extra fields)."""

    @abc.abstractmethod
    def _keep(self, stage: str, source: str, *, engine: str, model: str | None, iteration: int | None,
              rationale: str, verdict: Verdict | None, parent: str | None) -> CandidateRecord: ...

    @abc.abstractmethod
    def _record_verdict(self, candidate_id: str, verdict: Verdict) -> None: ...

    @abc.abstractmethod
    def _approve(self, candidate_id: str, *, message: str | None, note: str, speed_neutral: bool) -> str: ...

    @abc.abstractmethod
    def _set_status(self, candidate_id: str, status: CandidateStatus, reason: str) -> None: ...

    # ------------------------------------------------------------------ proposals

    def launched(self) -> list[str] | None:
        """The kernels the current version's verdict saw launched where it covered the timed size
        (:func:`launched_at_published_size`); ``None`` where nothing says, or the verdict of an
        older session cannot be read (every kernel is then tuned)."""
        try:
            return launched_at_published_size(self.current_verdict())
        except Exception:  # an unreadable verdict of an older session: nothing known
            return None

    def context(self, stage: str, overrides: dict[str, Any] | None = None) -> ProposalContext:
        """The :class:`~xeforge_core.engines.base.ProposalContext` for ``stage`` now: the baseline
        and current code, the problem, the analysis of the current code for the target, the
        target and the plan. ``overrides`` replace fields (``search_space``, ``options``,
        ``prompt``, ``analysis``)."""

        problem = self.current()
        current = problem.kernel.source
        fields: dict[str, Any] = {
            "stage": stage, "original_code": self.original_source(), "current_code": current,
            "problem": problem, "target": self.target, "plan": self.plan, "launched": self.launched()}
        known = {f.name for f in dataclasses.fields(ProposalContext)}
        fields.update({k: v for k, v in (overrides or {}).items() if k in known})
        if fields.get("analysis") is None:
            fields["analysis"] = analyze(current, self.target.family, problem)
        return ProposalContext(**fields)

    def propose(self, stage: str, engine: Engine, feedback: str | None = None,
                context: ProposalContext | None = None) -> Candidate:
        """Ask ``engine`` for a candidate for ``stage`` (``context``: default :meth:`context`).
        Engines do not raise for "nothing to do"; an engine that raises is the caller's to report."""
        return engine.propose(stage, context or self.context(stage), feedback)

    def keep(self, stage: str, candidate: Candidate | str, *, engine: str | None = None, model: str | None = None,
             iteration: int | None = None, rationale: str | None = None, verdict: Verdict | None = None,
             parent: str | None = None) -> CandidateRecord:
        """Keep a candidate (a :class:`Candidate` or code) of ``stage`` as ``pending``, proposed
        against ``parent`` (default: the current version), before it is verified; ``verdict``
        when it already has one for exactly this code."""
        if isinstance(candidate, Candidate):
            code = candidate.code
            engine = engine or candidate.engine
            model = model if model is not None else candidate.model
            rationale = rationale if rationale is not None else candidate.rationale
        else:
            code = candidate
        return self._keep(stage, code, engine=engine or "manual", model=model, iteration=iteration,
                          rationale=rationale or "", verdict=verdict, parent=parent)

    # ------------------------------------------------------------------ verification

    def verify(self, candidate_id: str | None, source: str, *, problem: Problem | None = None,
               device: DeviceInfo | str | None = None, options: VerifyOptions | None = None,
               verify_fn: VerifyFn | None = None,
               on_progress: ProgressFn | None = None, cancel: Any = None) -> Verdict:
        """Verify ``source`` against the current version (or ``problem``, whose kernel is then the
        baseline) on ``device`` (default: the controller's) and attach the verdict to candidate
        ``candidate_id`` when given. Every failure becomes a verdict (a problem that cannot be
        verified: ``environment``; a verifier that raised: ``runtime_error``); only a
        cancellation raises (:class:`Cancelled`)."""
        verify_fn = verify_fn or default_verify()
        baseline = problem if problem is not None else self.current()
        try:
            verdict = verify_fn(baseline, source, device=device if device is not None else self.device,
                                options=options, on_progress=on_progress, cancel=cancel)
        except Exception as exc:  # the loop survives a failing verifier: it becomes a verdict
            check_cancel(cancel)  # ... unless it failed because the user cancelled
            if isinstance(exc, ProblemError):  # the problem (spec, variants) cannot be verified at all
                verdict = Verdict(kind=VerdictKind.ENVIRONMENT, reason=f"the problem cannot be verified: {exc}",
                                  error_text=str(exc))
            else:
                verdict = Verdict(kind=VerdictKind.RUNTIME_ERROR,
                                  reason=f"verification failed: {type(exc).__name__}: {exc}", error_text=str(exc))
        if not isinstance(verdict, Verdict):
            check_cancel(cancel)  # a verifier stopped by the user reaches no verdict
            verdict = Verdict(kind=VerdictKind.RUNTIME_ERROR, reason="the verifier returned no verdict")
        if candidate_id is not None:
            self._record_verdict(candidate_id, verdict)
        return verdict

    # ------------------------------------------------------------------ decisions

    def approve(self, candidate_id: str, *, message: str | None = None, note: str = "",
                speed_neutral: bool = False) -> str:
        """Make the candidate the current version: the other pending candidates of its stage
        are superseded and the stage is done. Returns the new version's id. Raises
        ``SessionError`` when the candidate cannot be approved (rejected, already approved,
        proposed against another version)."""
        return self._approve(candidate_id, message=message, note=note, speed_neutral=speed_neutral)

    def reject(self, candidate_id: str, reason: str = "rejected by the user") -> CandidateRecord:
        """Reject the candidate (it stays kept, with its verdict). A stage that was waiting for
        a decision on it is ``pending`` again: idle, ready for another proposal."""
        self._set_status(candidate_id, CandidateStatus.REJECTED, reason)
        rec = self.candidate(candidate_id)
        if self.stage_status(rec.stage) is StageStatus.REVIEW:
            self.mark_stage(rec.stage, StageStatus.PENDING, f"{candidate_id} rejected: {reason}")
        return rec

    def supersede(self, candidate_id: str, reason: str) -> None:
        """Mark a pending candidate superseded (another one was preferred); others are left."""
        if self.candidate(candidate_id).status == CandidateStatus.PENDING:
            self._set_status(candidate_id, CandidateStatus.SUPERSEDED, reason)

    def skip(self, stage: str, reason: str = "skipped by the user") -> None:
        """Skip ``stage``: its pending candidates are superseded."""
        self._close_stage(stage, StageStatus.SKIPPED, reason)

    def keep_current(self, stage: str, reason: str = "kept the current version") -> None:
        """End ``stage`` without a change; its pending candidates are superseded."""
        self._close_stage(stage, StageStatus.KEPT_CURRENT, reason)

    def _close_stage(self, stage: str, status: StageStatus, reason: str) -> None:
        for rec in self._pending(stage):
            self._set_status(rec.id, CandidateStatus.SUPERSEDED, f"stage {stage} {status.value.replace('_', ' ')}")
        self.mark_stage(stage, status, reason)

    @abc.abstractmethod
    def _pending(self, stage: str) -> list[CandidateRecord]: ...


class SessionController(StageController):
    """The controller of a git :class:`~xeforge_core.session.Session` (see the module docstring).
    ``device`` is the run device (default: the one the session was created on)."""

    def __init__(self, session: Session, device: DeviceInfo | str | None = None) -> None:
        self.session = session
        self.device = device if device is not None else _fingerprint_device(session.device)

    @property
    def target(self) -> Target:
        return self.session.target

    @property
    def plan(self) -> list[str]:
        return self.session.plan

    @property
    def version(self) -> str:
        return self.session.head

    def current(self) -> Problem:
        return self.session.problem("head")

    def original_source(self) -> str:
        return self.session.source("baseline")

    def current_verdict(self) -> Verdict | None:
        return self.session.verdict_of("head")

    def candidate(self, candidate_id: str) -> CandidateRecord:
        return self.session.candidate(candidate_id)

    def stage_status(self, stage: str) -> StageStatus:
        return StageStatus(self.session.stages.get(stage, {}).get("status") or StageStatus.PENDING)

    def mark_stage(self, stage: str, status: StageStatus, reason: str = "", **extra: Any) -> None:
        self.session.mark_stage(stage, StageStatus(status), reason, **extra)

    def _keep(self, stage: str, source: str, *, engine: str, model: str | None, iteration: int | None,
              rationale: str, verdict: Verdict | None, parent: str | None) -> CandidateRecord:
        return self.session.add_candidate(stage, source, engine=engine, model=model, iteration=iteration,
                                          rationale=rationale, verdict=verdict, parent=parent or "head")

    def _record_verdict(self, candidate_id: str, verdict: Verdict) -> None:
        self.session.record_verdict(candidate_id, verdict)

    def _approve(self, candidate_id: str, *, message: str | None, note: str, speed_neutral: bool) -> str:
        return self.session.approve(candidate_id, message=message, note=note, speed_neutral=speed_neutral).sha

    def _set_status(self, candidate_id: str, status: CandidateStatus, reason: str) -> None:
        if status is CandidateStatus.REJECTED:
            self.session.reject(candidate_id, reason)
        elif status is CandidateStatus.SUPERSEDED:
            self.session.supersede(candidate_id, reason)
        else:  # pragma: no cover - approvals go through _approve
            raise ValueError(f"cannot set a candidate to {status}")

    def _pending(self, stage: str) -> list[CandidateRecord]:
        return self.session.candidates(stage, status=CandidateStatus.PENDING)


def _fingerprint_device(fp: dict[str, Any]) -> str | None:
    """The device string of a session's recorded fingerprint (``cuda:1``, ``cpu``)."""
    kind = fp.get("type")
    if not kind:
        return None
    index = fp.get("index")
    return f"{kind}:{index}" if index is not None and kind != "cpu" else str(kind)


@dataclass
class _MemoryState:
    problem: Problem
    original: str
    versions: list[str] = field(default_factory=list)
    candidates: dict[str, CandidateRecord] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)


class MemoryController(StageController):
    """The controller of a run without a repository: the same rules as a session, history kept
    in memory only. ``problem``'s kernel is the current version; ``original_source`` the
    baseline's code (default: the problem's kernel); ``target`` the hardware (``None``: resolved
    from ``device``); ``plan`` the stages."""

    def __init__(self, problem: Problem, *, device: DeviceInfo | str | None = None,
                 target: Target | str | None = None, original_source: str | None = None,
                 plan: list[str] | None = None) -> None:
        self.device = device
        self._target = resolve(device, target)
        self._plan = list(plan or [])
        self._m = _MemoryState(problem=problem, original=original_source or problem.kernel.source,
                               versions=["memory:0"])

    @property
    def target(self) -> Target:
        return self._target

    @property
    def plan(self) -> list[str]:
        return list(self._plan)

    @property
    def version(self) -> str:
        return self._m.versions[-1]

    def current(self) -> Problem:
        return self._m.problem

    def original_source(self) -> str:
        return self._m.original

    def current_verdict(self) -> Verdict | None:
        return next((c.verdict for c in self._m.candidates.values() if c.approved_as == self.version), None)

    def source(self, candidate_id: str) -> str:
        """The code of a kept candidate."""
        return self._m.sources[candidate_id]

    def candidate(self, candidate_id: str) -> CandidateRecord:
        try:
            return self._m.candidates[candidate_id]
        except KeyError:
            raise SessionError(f"unknown candidate {candidate_id!r}") from None

    def stage_status(self, stage: str) -> StageStatus:
        return StageStatus(self._m.stages.get(stage, {}).get("status", StageStatus.PENDING))

    def mark_stage(self, stage: str, status: StageStatus, reason: str = "", **extra: Any) -> None:
        self._m.stages.setdefault(stage, {}).update(extra, status=StageStatus(status), reason=reason)

    def _keep(self, stage: str, source: str, *, engine: str, model: str | None, iteration: int | None,
              rationale: str, verdict: Verdict | None, parent: str | None) -> CandidateRecord:
        number = 1 + sum(1 for c in self._m.candidates.values() if c.stage == stage)
        cid = f"{stage}/{number}"
        rec = CandidateRecord(id=cid, stage=stage, number=number, sha="", parent=parent or self.version,
                              engine=engine, model=model, iteration=iteration, rationale=rationale,
                              status=CandidateStatus.PENDING, reason="", time=time.time(), verdict=verdict)
        self._m.candidates[cid] = rec
        self._m.sources[cid] = source
        return rec

    def _record_verdict(self, candidate_id: str, verdict: Verdict) -> None:
        self.candidate(candidate_id).verdict = verdict

    def _approve(self, candidate_id: str, *, message: str | None, note: str, speed_neutral: bool) -> str:
        rec = self.candidate(candidate_id)
        check_approval(rec, self.version, unchanged=self._m.sources[candidate_id] == self._m.problem.kernel.source)
        version = f"memory:{len(self._m.versions)}"
        self._m.versions.append(version)
        self._m.problem = self._m.problem.with_kernel_source(self._m.sources[candidate_id], label="baseline")
        rec.status, rec.reason, rec.approved_as = CandidateStatus.APPROVED, note, version
        for other in self._pending(rec.stage):
            other.status, other.reason = CandidateStatus.SUPERSEDED, f"{rec.id} was approved"
        if self.stage_status(rec.stage).open:
            self.mark_stage(rec.stage, StageStatus.DONE, f"approved {rec.id}")
        return version

    def _set_status(self, candidate_id: str, status: CandidateStatus, reason: str) -> None:
        rec = self.candidate(candidate_id)
        rec.status, rec.reason = status, reason

    def _pending(self, stage: str) -> list[CandidateRecord]:
        return [c for c in self._m.candidates.values() if c.stage == stage and c.status == CandidateStatus.PENDING]
