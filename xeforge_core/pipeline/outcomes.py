"""What a run of the CoVeR loop on a stage takes and comes to, and what every step of it shares.

:class:`LoopOptions` (how the loop runs), :class:`Attempt` (one candidate of one iteration) and
:class:`StageOutcome` (one stage's end),
the run device resolved once per run (:func:`resolve_run_device`) and the progress emitter
(:func:`stage_emitter`). Below both the loop (:mod:`xeforge_core.pipeline.loop`) and the
preparatory first-version step (:mod:`xeforge_core.pipeline.first_version`), which use them.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xeforge_core.devices import DeviceInfo, detect_device
from xeforge_core.pipeline.controller import ProgressFn, StageController, VerifyFn, default_verify
from xeforge_core.session.records import CandidateRecord
from xeforge_core.verdict import INCONSISTENT_PROBLEM, Verdict
from xeforge_core.vocab.status import AttemptStatus, OutcomeStatus

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.verify import VerifyOptions


#: ``decide(candidate record, verdict) -> approve?`` or ``(approve?, reason)``: a person's decision.
DecideFn = Callable[[CandidateRecord, Verdict], "bool | tuple[bool, str]"]

#: The smallest measured speedup accepted (a smaller gain is within timing noise).
DEFAULT_MIN_SPEEDUP = 1.03


@dataclass
class LoopOptions:
    """How the CoVeR loop runs.

    ``iterations`` (>= 1) bounds the refinements per stage, ``best_of`` (>= 1) the candidates per
    iteration; ``auto`` approves the best acceptable candidate; ``decide`` asks a person instead
    (see :data:`DecideFn`); ``min_speedup`` is the acceptance threshold on a timing device;
    ``verify_options`` go to the verifier, ``verify_fn`` replaces it (default:
    :func:`xeforge_core.verify.verify`); ``context`` overrides fields of the engine's
    ``ProposalContext`` (``search_space``, ``options``, ``prompt``); ``portability=False`` skips
    the preparatory stage in :func:`run_pipeline`; ``on_progress`` receives dicts ``{"event",
    "message", "stage", "iteration", "fraction"}``; ``cancel`` (a ``threading.Event`` or a
    callable returning ``True``) stops the loop between steps and is passed to the verifier.
    Raises ``ValueError`` for ``iterations`` or ``best_of`` below 1.
    """

    iterations: int = 3
    best_of: int = 1
    auto: bool = False
    decide: DecideFn | None = None
    min_speedup: float = DEFAULT_MIN_SPEEDUP
    verify_options: VerifyOptions | None = None
    verify_fn: VerifyFn | None = None
    context: dict[str, Any] = field(default_factory=dict)
    portability: bool = True
    on_progress: ProgressFn | None = None
    cancel: Any = None
    #: called with the controller after a plain-PyTorch problem got its first Triton version
    #: (the CLI re-plans the stages for the new code there)
    on_first_version: Callable[[StageController], None] | None = None

    def __post_init__(self) -> None:
        if self.iterations < 1 or self.best_of < 1:
            raise ValueError("iterations and best_of must be at least 1")


@dataclass
class Attempt:
    """One candidate of one CoVeR iteration: ``iteration`` (1-based), ``index`` within the
    best-of-k batch (0-based), the kept candidate's id, the engine/model, its classification
    ``status``, the verdict, the measured speedup (``None`` when not measured) and a one-line
    ``reason``."""

    iteration: int
    index: int
    status: AttemptStatus
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
        return self.status.acceptable

    def to_dict(self, *, with_source: bool = False) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("verdict", "source", "candidate")}
        data["status"] = str(self.status)
        data["verdict_kind"] = self.verdict.kind.value if self.verdict else None
        data["verdict_reason"] = self.verdict.reason if self.verdict else None
        if with_source:
            data["source"] = self.source
            data["verdict"] = self.verdict.to_dict() if self.verdict else None
        return data


@dataclass
class StageOutcome:
    """What one run of the loop on a stage came to.

    ``status``: see :class:`~xeforge_core.vocab.status.OutcomeStatus` (``version`` is the new
    version's id when ``approved``; ``best`` the candidate awaiting a decision when ``review``).
    ``iterations`` is the number of CoVeR iterations run; ``speedup`` the approved (or awaiting)
    candidate's measured speedup over the version the stage started from (``None``: not
    measured); ``speed_measured`` whether any timing exists.
    """

    stage: str
    status: OutcomeStatus
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
            "stage": self.stage, "status": str(self.status), "reason": self.reason,
            "iterations": self.iterations, "best": self.best, "version": self.version,
            "speedup": self.speedup, "speed_measured": self.speed_measured,
            "verdict_kind": self.verdict_kind, "seconds": round(self.seconds, 3),
            "attempts": [a.to_dict() for a in self.attempts],
        }



def resolve_run_device(controller: StageController, verify_fn: VerifyFn) -> DeviceInfo | str | None:
    """The run device, detected once (a worker probes it) when the product's verifier will use
    it and it is given as a string or not at all; kept on ``controller``."""

    device = controller.device
    if verify_fn is default_verify() and not isinstance(device, DeviceInfo):
        controller.device = device = detect_device(device)
    return device


def stage_emitter(on_progress: ProgressFn | None, stage: str) -> Callable[..., None]:
    """``emit(event, message, iteration, fraction)`` for ``stage``: a progress dict to
    ``on_progress`` (a broken display never stops the loop)."""
    def emit(event: str, message: str, iteration: int | None = None, fraction: float | None = None) -> None:
        if on_progress is None:
            return
        payload: dict[str, Any] = {"event": event, "message": message, "stage": stage, "iteration": iteration}
        if fraction is not None:
            payload["fraction"] = max(0.0, min(1.0, fraction))
        with contextlib.suppress(Exception):  # a broken progress display must not stop the loop
            on_progress(payload)
    return emit


def kind_and_reason(verdict: Verdict) -> str:
    """A failed verdict in one phrase for a stage's reason: ``wrong_answer wrong answer on ...``,
    or the reason alone where it already starts with its kind (``inconclusive: the baseline's
    ...``)."""
    kind, reason = verdict.kind.value, verdict.reason or ""
    return reason if reason.startswith(f"{kind}:") else f"{kind} {reason}".strip()


def inconsistent_problem(outcomes: list[StageOutcome]) -> str:
    """The message of the first ``inconsistent_problem`` finding in the verdicts of ``outcomes``
    (the problem's baseline disagrees with its reference, so no candidate can be judged faster
    than a right one), else ``""``."""
    for outcome in outcomes:
        for verdict in [a.verdict for a in outcome.attempts] + [outcome.verdict]:
            for finding in (verdict.findings if verdict is not None else []):
                if finding.rule == INCONSISTENT_PROBLEM:
                    return finding.message
    return ""
