"""The doctor's verdict: trusted, degraded or unusable, from explicit criteria.

Pure logic over recorded results (no device needed), so it is unit-tested on fault tables.
The criteria, in the order they are shown to the user:

1. **hang**: any check or op that hung (no result, no error). A device that can hang without
   an error cannot be supervised: **unusable** on its own.
2. **below Python**: a failure below the Python layer (driver/runtime error text such as Level
   Zero ``UR_RESULT_ERROR_*``, or the process killed by a signal). Shown as evidence; it makes
   the device **unusable** when it spans more than one op class.
3. **op classes**: failures (error, driver error, crash or wrong result) in more than one op
   class (e.g. reduction *and* indexing+cast) mean each per-op workaround uncovers the next
   failure: **unusable**. Exactly one failing class: **degraded** (that class named; the rest
   verified).
4. **faster than the CPU**: when timings are available, the device's time for the model, with
   every failing op run on the CPU and its tensors copied both ways, against the CPU's time.
   A device that does not beat the CPU once those round-trips are counted is **unusable for
   this model** (there is nothing to gain from it).
5. Otherwise **trusted**.

Trust covers what the device can measure: on Triton's interpreter (the cpu device) kernels run
as Python on the host, so a trusted verdict there means correctness can be trusted and timing
is not measured (``DeviceVerdict.timing`` says so, and so does the advice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

TRUSTED = "trusted"
DEGRADED = "degraded"
UNUSABLE = "unusable"

_FAILED = ("error", "driver_error", "crash", "wrong", "hang")


@dataclass
class Observation:
    """One recorded result: a battery check or a replayed op. ``status`` as in
    ``doctor.battery.CheckResult``."""

    name: str
    op_class: str
    status: str
    detail: str = ""


@dataclass
class SpeedEvidence:
    """Measured times (µs): the model on the CPU, and on the device with failing ops moved to
    the CPU (their CPU time plus the copy time of their tensors both ways)."""

    cpu_us: float
    device_us: float
    fallback_us: float = 0.0
    how: str = ""

    @property
    def device_total_us(self) -> float:
        return self.device_us + self.fallback_us


@dataclass
class Criterion:
    """One criterion as shown to the user: what was asked, whether it holds (``None``: not
    checked, e.g. speed without a model), the evidence."""

    name: str
    holds: bool | None
    evidence: str

    @property
    def mark(self) -> str:
        """``x`` holds, blank fails, ``-`` not checked (the text report's check box)."""
        return "-" if self.holds is None else ("x" if self.holds else " ")


@dataclass
class DeviceVerdict:
    """``status`` (trusted / degraded / unusable), the criteria with evidence, the failing op
    classes, and one sentence saying what to do."""

    status: str
    criteria: list[Criterion] = field(default_factory=list)
    failing_classes: list[str] = field(default_factory=list)
    advice: str = ""
    #: what the verdict covers for speed: "measured" on a GPU, or why timing is not measured
    #: (e.g. "not measured: Triton's interpreter runs kernels as Python on the host")
    timing: str = "measured"

    @property
    def headline(self) -> str:
        """One line: ``TRUSTED``, or ``TRUSTED for correctness; timing not measured: ...``."""
        return headline_text(self.status, self.timing)


def headline_text(status: str, timing: str = "measured") -> str:
    """The verdict's one line from its ``status`` and ``timing`` (see ``DeviceVerdict``)."""
    head = status.upper()
    if timing != "measured" and status != UNUSABLE:
        head += f" for correctness; timing {timing}"
    return head


#: Why the interpreter measures no speed (shown by the doctor and the Home page).
INTERPRETER_TIMING = "not measured: Triton's interpreter runs kernels as Python on the host"


def decide(observations: Sequence[Observation], speed: SpeedEvidence | None = None, *,
           speed_note: str = "not measured (no model given)",
           stack_problems: Sequence[str] = (), interpreter: bool = False) -> DeviceVerdict:
    """Apply the criteria (module docstring) to ``observations`` and optional ``speed``.

    ``speed_note`` says why speed was not measured when ``speed`` is None. ``stack_problems``
    (from the stack report) are shown as a criterion of their own; they are evidence for the
    user and do not change the status by themselves. ``interpreter``: kernels run in Triton's
    interpreter on this device, so a passing device is trusted for correctness only and the
    verdict says timing is not measured.
    """
    failed = [o for o in observations if o.status in _FAILED]
    hangs = [o for o in failed if o.status == "hang"]
    below = [o for o in failed if o.status in ("driver_error", "crash")]
    classes = sorted({o.op_class for o in failed})
    below_classes = sorted({o.op_class for o in below})

    def names(items: Sequence[Observation]) -> str:
        return ", ".join(f"{o.name} ({o.op_class})" for o in items[:6]) + (" ..." if len(items) > 6 else "")

    criteria = [
        Criterion("no hang", not hangs, names(hangs) if hangs else "every check and op returned"),
        Criterion("no failure below the Python layer", not below,
                  names(below) if below else "no driver/runtime error, no process killed by a signal"),
        Criterion("failures confined to at most one op class", len(classes) <= 1,
                  ("failing classes: " + ", ".join(classes)) if classes else "nothing failed"),
    ]
    if speed is not None:
        beats = speed.device_total_us < speed.cpu_us
        criteria.append(Criterion(
            "beats the CPU with round-trips for failing ops counted", beats,
            f"device {speed.device_total_us:.1f} µs (kernels {speed.device_us:.1f} + CPU fallback and "
            f"copies {speed.fallback_us:.1f}) vs CPU {speed.cpu_us:.1f} µs"
            + (f"; {speed.how}" if speed.how else "")))
    else:
        beats = True  # nothing measured against it: the other criteria decide
        criteria.append(Criterion("beats the CPU with round-trips for failing ops counted", None, speed_note))
    criteria.append(Criterion("consistent runtime stack", not stack_problems,
                              "; ".join(stack_problems) if stack_problems else
                              "one version of each runtime library, none shadowed"))

    if hangs:
        status = UNUSABLE
        advice = ("The device hung without an error: it cannot be supervised. Stop patching ops and "
                  "run this model on a supported runtime (OpenVINO on the iGPU or CPU, the CPU, or a "
                  "supported GPU).")
    elif len(classes) > 1:
        status = UNUSABLE
        advice = ("Failures span " + ", ".join(classes) + ": each per-op workaround would uncover the "
                  "next failure. Move the work to a supported runtime instead.")
    elif len(below_classes) > 1:
        status = UNUSABLE
        advice = "Driver-level failures in several op classes: move the work to a supported runtime."
    elif not beats:
        status = UNUSABLE
        advice = ("The device is slower than the CPU for this model once the failing ops' round-trips "
                  "are counted: run it on the CPU (or OpenVINO) instead.")
    elif classes:
        status = DEGRADED
        advice = (f"Only {classes[0]} fails: keep those ops on the CPU (or rewrite them as Triton "
                  "kernels); everything else was verified on the device.")
    elif interpreter:
        status = TRUSTED
        advice = ("Every check passed: correctness can be trusted here. Timing is not measured: "
                  "Triton's interpreter runs kernels as Python on the host, so its times say nothing "
                  "about a GPU. Measure speed on a GPU (xpu or cuda).")
    else:
        status = TRUSTED
        advice = "Every check passed: the device can be trusted for verification and timing."
    if interpreter and status == DEGRADED:
        advice += " Timing is not measured on the interpreter."
    return DeviceVerdict(status, criteria, classes, advice,
                         timing=INTERPRETER_TIMING if interpreter else "measured")
