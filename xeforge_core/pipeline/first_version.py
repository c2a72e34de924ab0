"""The preparatory first-version step: a plain-PyTorch problem gets TorchInductor's kernels as
version 1, verified like every candidate, before the stages run.

When the session's current version is the problem's plain-PyTorch ``Model`` (a KernelBench
problem without a Triton version) and the engine is the rules engine, which writes no kernel
itself, :func:`prepare_first_version` asks TorchInductor for one
(:func:`xeforge_core.inductor.first_version.inductor_first_version`), keeps it as a candidate of
stage ``first_version``, verifies it against the problem (correctness against the reference,
integrity checks, timing against eager where the device measures speed) and approves it when
it passes, with a rationale naming TorchInductor and the operations left to torch. The LLM and
manual engines write their first version their own way, so they never get here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from xeforge_core.inductor.first_version import FIRST_VERSION, inductor_first_version, is_plain_pytorch
from xeforge_core.pipeline.controller import Cancelled, StageController, default_verify
from xeforge_core.pipeline.outcomes import (
    Attempt,
    LoopOptions,
    StageOutcome,
    kind_and_reason,
    resolve_run_device,
    stage_emitter,
)
from xeforge_core.vocab.status import AttemptStatus, OutcomeStatus, StageStatus

if TYPE_CHECKING:
    from xeforge_core.engines.base import Candidate


def first_version_notes(outcomes: list[StageOutcome]) -> list[str]:
    """What the first version's candidate notes (the operations that are not Triton yet and
    why), in order, without repeats; empty when no first version was made."""
    notes: list[str] = []
    for o in outcomes:
        if o.stage != FIRST_VERSION:
            continue
        for a in o.attempts:
            for n in getattr(a.candidate, "notes", None) or []:
                if n not in notes:
                    notes.append(n)
    return notes


def traced_at_published_size(problem: Any, verdict: Any, device: str, code: str) -> Candidate | None:
    """A first version traced again at the published size, for one traced at the verifier's
    reduced size (``trace_overrides``) that gave a wrong answer: TorchInductor's index
    expressions may hold at the traced sizes only (KernelBench level 2 problem 19 with torch
    2.11: right at the reduced sizes, wrong at the published one, its output strides formulas of
    the sizes that read as a relation of the traced ones folded in). ``None`` where the verdict is no wrong answer, nothing was reduced, or the
    new trace gives the same ``code`` or none. ``device``: where to generate, as for
    :func:`inductor_first_version`."""
    from xeforge_core.inductor.first_version import trace_overrides
    from xeforge_core.verdict import VerdictKind

    if verdict.kind is not VerdictKind.WRONG_ANSWER or not trace_overrides(problem):
        return None
    again = inductor_first_version(problem, device=device, published_size=True)
    if not again.applicable or again.code == code:
        return None
    again.rationale += ("; traced at the published size: the version traced at the verifier's reduced size was a "
                        f"wrong answer ({verdict.reason[:200]})")
    return again


def first_version_due(controller: StageController, engine_name: str) -> bool:
    """Whether the rules engine must start from a first Triton version: the current version is
    plain PyTorch."""
    return engine_name == "rules" and is_plain_pytorch(controller.current())


def prepare_first_version(controller: StageController, options: LoopOptions, *,
                          candidate: Candidate | None = None) -> StageOutcome:
    """Generate (or take ``candidate``), verify and approve the first Triton version.

    Returns the outcome: ``approved`` (the new current version), ``failed`` (Inductor gave no
    code, or the code does not verify: the reason says which), ``cancelled``."""
    from xeforge_core.devices import DeviceInfo

    verify_fn = options.verify_fn or default_verify()
    emit = stage_emitter(options.on_progress, FIRST_VERSION)
    started = time.monotonic()
    device = resolve_run_device(controller, verify_fn)
    dev_type = device.type if isinstance(device, DeviceInfo) else str(device or "cpu").split(":")[0]
    where = dev_type if dev_type in ("cuda", "xpu") else "cpu"  # where TorchInductor generates
    current = controller.current()
    generated = candidate is None  # traced here: a wrong answer may be traced again at the published size
    if candidate is None:
        emit("propose", f"asking TorchInductor for the Triton kernels of {current.name} ({dev_type})", 1)
        candidate = inductor_first_version(current, device=where)
    if not candidate.applicable:  # kept as the attempt: its notes name the library calls Inductor left
        tried = Attempt(iteration=1, index=0, status=AttemptStatus.NOT_APPLICABLE, engine="rules",
                        model="torchinductor", reason=candidate.not_applicable_reason or "", candidate=candidate,
                        rationale=candidate.rationale)
        outcome = StageOutcome(stage=FIRST_VERSION, status=OutcomeStatus.FAILED, iterations=1, attempts=[tried],
                               reason=candidate.not_applicable_reason, seconds=time.monotonic() - started)
        controller.mark_stage(FIRST_VERSION, StageStatus.FAILED, outcome.reason)
        return outcome
    attempts: list[Attempt] = []
    while True:
        iteration = len(attempts) + 1
        rec = controller.keep(FIRST_VERSION, candidate, engine="rules", model="torchinductor", iteration=iteration,
                              rationale=candidate.rationale)

        def forward(*args: Any, _iteration: int = iteration, **kwargs: Any) -> None:
            emit("verify_progress", " ".join(str(a) for a in args), _iteration)

        try:
            verdict = controller.verify(rec.id, candidate.code, device=device, options=options.verify_options,
                                        verify_fn=verify_fn, on_progress=forward, cancel=options.cancel)
        except Cancelled:
            return StageOutcome(stage=FIRST_VERSION, status=OutcomeStatus.CANCELLED, attempts=attempts,
                                iterations=iteration, best=rec.id,
                                reason="cancelled by the user; the first version is kept unverified",
                                seconds=time.monotonic() - started)
        attempts.append(Attempt(iteration=iteration, index=0,
                                status=AttemptStatus.CORRECT if verdict.passed else AttemptStatus.FAILED,
                                reason=verdict.reason or verdict.kind.value, engine="rules", model="torchinductor",
                                candidate_id=rec.id, candidate=candidate, verdict=verdict, source=candidate.code,
                                rationale=candidate.rationale))
        if verdict.passed:
            break
        controller.reject(rec.id, f"the TorchInductor version does not verify: {verdict.kind.value}")
        again = traced_at_published_size(current, verdict, where, candidate.code) if generated and iteration == 1 else None
        if again is None:
            reason = f"the TorchInductor version does not verify: {kind_and_reason(verdict)}"
            controller.mark_stage(FIRST_VERSION, StageStatus.FAILED, reason)
            return StageOutcome(stage=FIRST_VERSION, status=OutcomeStatus.FAILED, attempts=attempts,
                                iterations=iteration, reason=reason, verdict=verdict, best=rec.id,
                                seconds=time.monotonic() - started)
        emit("propose", "the version traced at the reduced size is wrong at another size: asking TorchInductor "
                        "again, traced at the published size", iteration + 1)
        candidate = again
    note = candidate.rationale + "; verified against the problem's Model; later speedups are relative to it"
    version = controller.approve(rec.id, note=note, speed_neutral=True,
                                 message="first version: TorchInductor's Triton kernels for the PyTorch model")
    emit("approve", f"first version: committed {version[:10]}", len(attempts))
    controller.mark_stage(FIRST_VERSION, StageStatus.DONE, note)
    return StageOutcome(stage=FIRST_VERSION, status=OutcomeStatus.APPROVED, attempts=attempts,
                        iterations=len(attempts), reason=note, best=rec.id, version=version, verdict=verdict,
                        seconds=time.monotonic() - started)
