"""The verdict: what verification established about a candidate, step by step, with evidence.

Everything here is plain data (stdlib dataclasses) so that the verification worker, which may
import only torch, triton, numpy and the standard library, can build it, and so that it
round-trips through JSON (``Verdict.to_dict`` / ``Verdict.from_dict``) for the cache, git
trailers, the CLI's ``--json`` and the UI.

Kinds (``VerdictKind``):

* ``ok``            every step passed (performance may still be "not measured" on cpu).
* ``compile_error`` the module does not import, or a Triton kernel does not compile.
* ``runtime_error`` a Python exception while running (not a compile error, not a driver fault).
* ``crash``         the worker died by a signal, or the error text is a driver fault
                    (Level Zero ``UR_RESULT_ERROR_*``, CUDA "illegal memory access", ...).
* ``timeout``       the worker did not finish inside the hard wall-clock limit (a hang).
* ``oom``           out of host or device memory.
* ``wrong_answer``  outputs differ from the baseline (or the reference) beyond tolerance.
* ``cheating``      an integrity rule was broken (``Finding.rule`` names which).
* ``environment``   the *baseline* failed in the same environment: the fault is not the
                    candidate's (e.g. an incompatible numpy, a driver error).
* ``inconclusive``  the truth cannot judge the candidate: its output did not change while its
                    inputs did (it ignores them), so matching it proves nothing; or it is
                    random (two calls on the same inputs differ: dropout in training mode), so
                    no candidate can match it element by element.
* ``inconsistent``  the candidate matches the reference, but the problem's own baseline does
                    not: the problem is inconsistent (its baseline is wrong), and a speedup over
                    that baseline means nothing.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


class VerdictKind(str, enum.Enum):
    """Outcome class of one verification (see module docstring)."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OOM = "oom"
    WRONG_ANSWER = "wrong_answer"
    CHEATING = "cheating"
    ENVIRONMENT = "environment"
    INCONCLUSIVE = "inconclusive"
    INCONSISTENT = "inconsistent"

    @property
    def passed(self) -> bool:
        return self is VerdictKind.OK


class StepStatus(str, enum.Enum):
    """Status of one verification step."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_MEASURED = "not_measured"
    INCONCLUSIVE = "inconclusive"


#: The rule prefix of the findings that record an escape attempt (``sandbox_network``, ...).
ESCAPE_RULE_PREFIX = "sandbox_"


#: The rule of the finding a candidate's verdict carries when the problem's baseline disagrees
#: with its reference (the candidate is judged against the reference; the baseline is wrong).
INCONSISTENT_PROBLEM = "inconsistent_problem"


@dataclass
class Finding:
    """One structure/integrity/lint finding.

    ``rule`` is a stable id (e.g. ``torch_fallback``, ``mutates_input``, ``cached_output``,
    ``kb:pow2_num_warps``); ``line`` is a 1-based line in the candidate source when known.
    ``severity`` is ``error`` (fails the verdict as ``cheating`` or structure failure),
    ``warning`` or ``info``.
    """

    rule: str
    message: str
    severity: str = "error"
    line: int | None = None


@dataclass
class CompiledKernelInfo:
    """Metadata of one compiled Triton kernel, as the compiler reported it.

    ``registers`` and ``spills`` are per thread (``None`` where the backend does not report
    them, e.g. the interpreter); ``shared_bytes`` is shared memory / SLM per program in bytes;
    ``ir`` maps an IR name (``ttir``, ``ttgir``, ``llir``, ``ptx``, ``spv``, ``amdgcn``) to its
    text (binary forms are omitted).
    """

    name: str
    num_warps: int | None = None
    num_stages: int | None = None
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None
    local_bytes: int | None = None
    grf_mode: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    ir: dict[str, str] = field(default_factory=dict)


@dataclass
class OutputComparison:
    """Comparison of one output tensor (element ``index`` of a tuple output) on one run.

    Errors are absolute / relative maxima over all elements; ``mismatches`` counts elements
    outside the bound (``check``: ``float64``, the float64-calibrated bound of
    ``xeforge_core.precision``, or ``tolerance``, ``atol + rtol * |expected|``);
    ``nan_mismatch``/``inf_mismatch`` count positions where NaN/Inf placement differs.
    ``first_mismatch`` gives the coordinates (in the expected output's shape) of the first
    element outside the bound, with the candidate's value there and the expected one.
    Measured against the float64 truth where it was computed (``None`` elsewhere):
    ``error_ratio``, the candidate's largest error in units of the reference's own error scale
    (it passes when at most ``bound_factor``); ``rel_error`` / ``ref_rel_error``, the normwise
    relative errors of the candidate and of the reference; ``needs``, the precision downgrades
    that would accept the error when it is one. ``kernelbench_mismatches``: elements that
    KernelBench's ``allclose`` at ``kernelbench_tol`` would refuse.
    """

    index: int
    shape: list[int]
    dtype: str
    expected_shape: list[int]
    expected_dtype: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    mismatches: int = 0
    numel: int = 0
    nan_mismatch: int = 0
    inf_mismatch: int = 0
    passed: bool = False
    note: str = ""
    check: str = ""
    first_mismatch: list[int] | None = None
    first_actual: bool | int | float | None = None
    first_expected: bool | int | float | None = None
    error_ratio: float | None = None
    bound_factor: float | None = None
    rel_error: float | None = None
    ref_rel_error: float | None = None
    needs: list[str] = field(default_factory=list)
    kernelbench_tol: float | None = None
    kernelbench_mismatches: int | None = None


#: The input distribution that stands for a problem's own ``get_inputs()`` (without a spec).
OWN_INPUTS = "module"


#: Joins a redraw's distribution and the one input position it redraws (``normal@1``): a partial
#: redraw, whose other inputs are the problem's own (``xeforge_core.worker.domain``).
PARTIAL = "@"


def inputs_label(distribution: str) -> str:
    """An input distribution as a verdict names it: ``get_inputs()`` for a problem's own inputs
    (:data:`OWN_INPUTS`), ``normal at get_inputs()[1]`` for a partial redraw (``normal@1``: the
    input at position 1, counted from 0), else the distribution (``normal``, ``uniform``)."""
    if distribution == OWN_INPUTS:
        return "get_inputs()"
    base, sep, position = distribution.partition(PARTIAL)
    return f"{base} at get_inputs()[{position}]" if sep else distribution


@dataclass
class CorrectnessRun:
    """Correctness of one (variant, seed, input distribution, autotune config) combination,
    against ``against`` (``baseline`` or ``reference``). ``distribution`` is ``module`` for the
    problem's own ``get_inputs()`` (``inputs_label`` names it so). ``check`` is how its outputs
    were judged (``float64``: the float64-calibrated bound, ``tolerance``: ``rtol``/``atol``, or
    both, ``float64+tolerance``); ``kernelbench`` whether KernelBench's tolerance would pass it
    (``None`` where it has none for the dtype)."""

    variant: str
    seed: int
    distribution: str
    against: str
    passed: bool
    rtol: float
    atol: float
    config: str | None = None
    outputs: list[OutputComparison] = field(default_factory=list)
    note: str = ""
    check: str = ""
    kernelbench: bool | None = None


@dataclass
class CheckedSize:
    """One size correctness was checked at: the variant's name, its sizes (the spec's dims, or
    the inputs module's size constants: ``{"M": 161, "K": 73}``), why it was chosen, and for a
    size the verifier derived from the kernels' tiles, what the candidate's kernels did there
    (``coverage``: grid programs, loop trips, partial tiles, one line per kernel) and which of
    its aims it missed (``gaps``: an axis with fewer than 3 programs, a loop of 1 trip, a size
    a tile divides), each naming the kernel."""

    variant: str
    sizes: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    coverage: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)


@dataclass
class TimingStats:
    """Timing of one callable on one variant. Times in microseconds (µs).

    ``cv`` is the coefficient of variation (stdev / mean) of the trials; ``method`` says how
    the calls were timed (``events``, ``graph``, ``back_to_back``).
    """

    median_us: float
    mean_us: float
    min_us: float
    cv: float
    trials: int
    method: str = "events"
    # -- how each sample was taken (worker/timing.py); defaults describe verdicts made before
    #: calls of the callable inside one timed sample (a graph replay or back-to-back batch)
    calls_per_sample: int = 1
    #: host time to issue one call (µs): Python, the launch itself; ``None`` when not measured
    host_us: float | None = None
    #: samples taken again because the host was still issuing the call when timing started
    late: int = 0
    #: ``flushed`` (L2 written over before every sample) or ``warm`` (back-to-back calls)
    l2: str = ""


@dataclass
class LaunchTraffic:
    """The kernel launches of one call of the candidate, as the launch hook saw them: how many,
    the bytes of their tensor arguments summed over the launches (``traffic_bytes``: each launch
    can read or write each tensor it is given once; a launch that touches only part of a tensor
    moves less, one that reads its data again past the caches more), and the launch giving the
    most bytes: its kernel, its number of programs (the launch grid's product) and its bytes.
    ``compute_units`` is the device's SM (NVIDIA) or Xe-core count as torch reports it."""

    launches: int
    traffic_bytes: float
    busiest_kernel: str = ""
    busiest_programs: int | None = None
    busiest_bytes: float = 0.0
    compute_units: int | None = None


@dataclass
class PerformanceResult:
    """Baseline vs candidate timing on one variant, interleaved in one run.

    ``speedup`` = baseline median / candidate median. ``tflops`` and ``gbps`` are the
    candidate's achieved TFLOP/s and GB/s; ``roofline_fraction`` is achieved / attainable
    at the kernel's arithmetic intensity on the device profile (``None`` without a profile).
    """

    variant: str
    baseline: TimingStats
    candidate: TimingStats
    speedup: float
    reference: TimingStats | None = None
    flop: float | None = None
    bytes_moved: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    launch_bound: bool = False
    suspect: str = ""
    # -- the speedup's uncertainty and how it was timed (worker/timing.py); see speedup_call()
    #: lower / upper end of the speedup's confidence interval (``None``: not measured)
    speedup_low: float | None = None
    speedup_high: float | None = None
    #: confidence level of that interval (0.95: 95 %)
    confidence: float = 0.95
    #: how the interval was computed, e.g. ``paired bootstrap of the ratio of medians``
    interval_method: str = ""
    #: why the timing method (``baseline.method``) was chosen, from the measured costs
    method_reason: str = ""
    #: milliseconds of untimed interleaved samples run before the trials (steady clocks), and
    #: whether the per-block medians had stopped moving by then
    settle_ms: float | None = None
    steady: bool | None = None
    #: what the baseline is: ``baseline`` (a Triton kernel) or ``eager`` (the PyTorch reference
    #: itself, for a KernelBench / KernelAgent problem: the speedup is then over eager PyTorch)
    baseline_label: str = "baseline"
    #: the candidate's launches in one call (``None``: not recorded), for ``roofline_gap``
    traffic: LaunchTraffic | None = None
    #: ``memory`` or ``compute``: which roof bounds the candidate at its FLOP per byte on the
    #: device profile (``""``: not known, e.g. without a profile)
    bound: str = ""

    @property
    def call(self) -> SpeedupCall:
        """Faster, slower or no measurable difference, by :func:`speedup_call` (the one rule)."""
        return speedup_call(self.speedup, self.speedup_low, self.speedup_high, self.confidence)

    @property
    def eager_speedup(self) -> float | None:
        """Speedup over eager PyTorch: the speedup itself when the baseline is eager, else
        reference median / candidate median when the reference was timed, else ``None``."""
        if self.baseline_label == "eager":
            return self.speedup
        if self.reference is not None and self.candidate.median_us > 0:
            return self.reference.median_us / self.candidate.median_us
        return None


@dataclass
class Step:
    """One verification step (``compile``, ``structure``, ``correctness``, ``performance``)
    with its status, the wall time it took (seconds) and its evidence (free-form, JSON-able)."""

    name: str
    status: StepStatus
    seconds: float = 0.0
    summary: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    """The full verdict on one candidate against one baseline.

    ``kind`` is the overall outcome; ``reason`` one human sentence on why; ``source_line`` the
    1-based candidate line an error maps to, when known. ``stdout``/``stderr`` are the
    worker's captured, truncated streams. ``device`` is the fingerprint dict of the device used.
    """

    kind: VerdictKind
    reason: str = ""
    steps: list[Step] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    kernels: list[CompiledKernelInfo] = field(default_factory=list)
    correctness: list[CorrectnessRun] = field(default_factory=list)
    performance: list[PerformanceResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the sizes correctness was checked at, with why each was chosen (``CheckedSize``)
    sizes: list[CheckedSize] = field(default_factory=list)
    source_line: int | None = None
    error_text: str = ""
    stdout: str = ""
    stderr: str = ""
    device: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    # -- sandbox (xeforge_core.sandbox): how the worker that judged the candidate was isolated:
    # ``Isolation.to_dict()``, with "sandboxed" (bool), "reason" (why not) and "summary" (the
    # line to show: "sandboxed (...)" or "not sandboxed: process isolation only (...)").
    isolation: dict[str, Any] = field(default_factory=dict)

    #: per worker job (``baseline``, ``candidate``, ``timing``): ``peak_device_bytes`` (torch's
    #: allocator peak), ``peak_host_rss_bytes`` (the job's process group, polled on GPUs) and
    #: ``seconds`` of wall time
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)

    #: the precision the verdict held the candidate to (``worker/precision_report.py``):
    #: ``dtype``, ``allowed`` downgrades and where each came from, ``applied`` (one phrase),
    #: ``check`` (``float64`` or ``tolerance``), ``factor``, ``fallback`` (why the float64 truth
    #: was not used, "" when it was), the measured ``error_ratio`` / ``rel_error`` /
    #: ``ref_rel_error``, and ``kernelbench`` (its tolerance and what it would say)
    precision: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.kind is VerdictKind.OK

    @property
    def speedup(self) -> float | None:
        """Geometric mean of the per-variant speedups, or ``None`` if nothing was timed."""
        values = [p.speedup for p in self.performance if p.speedup and p.speedup > 0]
        if not values:
            return None
        product = 1.0
        for v in values:
            product *= v
        return product ** (1.0 / len(values))

    @property
    def escape_findings(self) -> list[Finding]:
        """The findings that record an attempt to leave the job (network, a write outside the
        job directory, a private read, a process: ``worker_outcome._escape_finding``, rules
        ``sandbox_*``), in the order found."""
        return [f for f in self.findings if f.rule.startswith(ESCAPE_RULE_PREFIX)]

    @property
    def escape_headline(self) -> str:
        """One line naming the escape attempts, for a verdict's headline ("" when none): an
        ``ok`` whose candidate tried to reach the network must not read as a clean pass. At most
        ``shown`` attempts are quoted, the rest counted."""
        found = self.escape_findings
        if not found:
            return ""
        shown = 2
        head = "; ".join(f.message for f in found[:shown])
        more = f"; and {len(found) - shown} more (see the findings)" if len(found) > shown else ""
        noun = "attempt" if len(found) == 1 else "attempts"
        return f"security warning, {len(found)} escape {noun} seen by the worker: {head}{more}"

    @property
    def isolation_summary(self) -> str:
        """The isolation line of this verdict ("sandboxed (bubblewrap 0.8.0): no network, ..."
        or "not sandboxed: process isolation only (<reason>)"); "" when not recorded (a verdict
        from before the sandbox existed)."""
        return str(self.isolation.get("summary", "")) if self.isolation else ""

    # -- the one faster / slower / no-measurable-difference rule, over all timed variants
    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        """Confidence interval of :attr:`speedup` (the geometric mean over the variants), by
        :func:`combine_speedups`; ``None`` if nothing was timed or a variant has no interval."""
        parts = [(p.speedup, p.speedup_low, p.speedup_high) for p in self.performance
                 if p.speedup and p.speedup > 0]
        combined = combine_speedups(parts, geometric_mean=True) if parts else None
        if combined is None or combined[1] is None or combined[2] is None:
            return None
        return combined[1], combined[2]

    @property
    def speed_call(self) -> SpeedupCall:
        """The verdict's faster / slower / no measurable difference call (:func:`speedup_call`
        on :attr:`speedup` and :attr:`speedup_interval`); ``not_measured`` without timings."""
        interval = self.speedup_interval
        confidence = min((p.confidence for p in self.performance), default=SPEEDUP_CONFIDENCE)
        return speedup_call(self.speedup, interval[0] if interval else None,
                            interval[1] if interval else None, confidence)

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def problem_at_fault(self) -> bool:
        """True for an ``environment`` verdict whose baseline failed in the problem's own code
        (``xeforge_core.verify.problem_fault``): the input is what is wrong, the CLI exits 2."""
        baseline = self.step("baseline")
        return (self.kind is VerdictKind.ENVIRONMENT and baseline is not None
                and bool(baseline.evidence.get("problem_fault")))

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        return _from_plain(cls, data)

    def feedback(self) -> str:
        """A compact text of this verdict for an engine's next attempt (the CoVeR loop)."""
        lines = [f"verdict: {self.kind.value}" + (f" - {self.reason}" if self.reason else "")]
        if self.source_line:
            lines.append(f"at candidate line {self.source_line}")
        if self.error_text:
            lines.append("error:\n" + self.error_text[-2000:])
        for f in self.findings:
            where = f" (line {f.line})" if f.line else ""
            lines.append(f"[{f.severity}] {f.rule}{where}: {f.message}")
        for run in self.correctness:
            if not run.passed:
                worst = max((o.max_abs_error or 0.0 for o in run.outputs), default=0.0)
                lines.append(
                    f"wrong on variant {run.variant} seed {run.seed} ({inputs_label(run.distribution)})"
                    f" vs {run.against}: max abs error {worst:.3g} {run.note}".rstrip()
                )
                break
        for p in self.performance:
            lines.append(
                f"variant {p.variant}: baseline {p.baseline.median_us:.1f} µs, candidate "
                f"{p.candidate.median_us:.1f} µs, speedup {p.speedup:.2f}x"
            )
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Speedup calls: the one rule that says "faster", "slower" or "no measurable difference".
# The CLI, the workbench, the CoVeR loop, batch summaries and reports all call speedup_call().

#: Confidence level of the speedup intervals the timing worker reports (95 %).
SPEEDUP_CONFIDENCE = 0.95

#: Half-width, as a fraction of the speedup, of the band assumed around a speedup that carries
#: no interval (a verdict recorded before intervals were measured, or a test's bare number):
#: 3 %, the noise threshold the CoVeR loop applied to such speedups before (its
#: ``DEFAULT_MIN_SPEEDUP`` of 1.03).
ASSUMED_NOISE_BAND = 0.03


class SpeedupKind(str, enum.Enum):
    """What a speedup and its interval establish (see :func:`speedup_call`)."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no_difference"
    NOT_MEASURED = "not_measured"


def _x(value: float) -> str:
    """A speedup as text: three decimals below 2x (where the interval is narrow), two above."""
    if value != value or value in (float("inf"), float("-inf")):
        return f"{value}x"
    return f"{value:.3f}x" if value < 2 else f"{value:.2f}x"


@dataclass(frozen=True)
class SpeedupCall:
    """The call on one speedup: ``kind``, the speedup (baseline time / candidate time) and the
    interval it was judged on (``low``..``high`` at ``confidence``). ``assumed`` is true when no
    interval was measured and the :data:`ASSUMED_NOISE_BAND` stood in for one."""

    kind: SpeedupKind
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    confidence: float = SPEEDUP_CONFIDENCE
    assumed: bool = False

    @property
    def faster(self) -> bool:
        return self.kind is SpeedupKind.FASTER

    @property
    def slower(self) -> bool:
        return self.kind is SpeedupKind.SLOWER

    @property
    def margin_pct(self) -> float | None:
        """How far the interval reaches from 1, in percent (the ``x`` of "no measurable
        difference (±x%)"): ``max(high - 1, 1 - low) * 100``; ``None`` when not measured."""
        if self.low is None or self.high is None:
            return None
        return max(self.high - 1.0, 1.0 - self.low) * 100.0

    def _ci(self) -> str:
        if self.assumed:
            return f"no interval measured; ±{ASSUMED_NOISE_BAND * 100:g}% assumed"
        return f"{self.confidence * 100:g}% CI {_x(self.low or 0.0)}-{_x(self.high or 0.0)}"

    @property
    def text(self) -> str:
        """One phrase: ``1.842x faster (95% CI 1.801x-1.880x)``, ``slower: 0.912x (95% CI
        0.903x-0.921x)``, ``no measurable difference (±1.5%)`` or ``not measured``."""
        if self.kind is SpeedupKind.NOT_MEASURED or self.speedup is None:
            return "not measured"
        if self.kind is SpeedupKind.FASTER:
            return f"{_x(self.speedup)} faster ({self._ci()})"
        if self.kind is SpeedupKind.SLOWER:
            return f"slower: {_x(self.speedup)} ({self._ci()})"
        margin = self.margin_pct or 0.0
        return f"no measurable difference (±{margin:.2g}%)" if margin < 1 else \
            f"no measurable difference (±{margin:.1f}%)"

    @property
    def short(self) -> str:
        """A badge: ``1.84x faster``, ``0.91x slower`` or ``no measurable difference (±1.5%)``."""
        if self.kind is SpeedupKind.FASTER:
            return f"{self.speedup:.2f}x faster"
        if self.kind is SpeedupKind.SLOWER:
            return f"{self.speedup:.2f}x slower"
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "speedup": self.speedup, "low": self.low, "high": self.high,
                "confidence": self.confidence, "assumed": self.assumed, "text": self.text}


def _finite_positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value > 0


def speedup_call(speedup: float | None, low: float | None = None, high: float | None = None,
                 confidence: float = SPEEDUP_CONFIDENCE) -> SpeedupCall:
    """THE rule: a candidate is *faster* only when the whole confidence interval of its speedup
    lies above 1 (``low > 1``), *slower* only when it lies below 1 (``high < 1``), and otherwise
    there is *no measurable difference*; the interval excluding 1 is the usual reading of a
    confidence interval as a two-sided test at level ``1 - confidence`` (e.g. Wasserman, *All
    of Statistics*, 2004, §10.1: a test rejects when the interval excludes the null value).

    ``speedup`` is baseline time / candidate time (> 1: the candidate is faster); ``low`` and
    ``high`` the interval's ends (any order; an interval that leaves out ``speedup`` is widened
    to hold it). Without a usable interval (``None``, NaN, not positive) the band
    ``speedup x (1 ± ASSUMED_NOISE_BAND)`` stands in for it and the call says so
    (``assumed``). ``speedup`` ``None``, NaN or not positive: ``not_measured``. An infinite
    speedup (a candidate timed at 0 µs) is faster when its interval allows it; the timing
    worker flags such a result as suspect."""
    if not _finite_positive(speedup):
        return SpeedupCall(SpeedupKind.NOT_MEASURED, None, None, None, confidence)
    s = float(speedup)  # type: ignore[arg-type]
    assumed = not (_finite_positive(low) and _finite_positive(high))
    if assumed:
        lo, hi = s * (1.0 - ASSUMED_NOISE_BAND), s * (1.0 + ASSUMED_NOISE_BAND)
    else:
        lo, hi = sorted((float(low), float(high)))  # type: ignore[arg-type]
        lo, hi = min(lo, s), max(hi, s)
    if lo > 1.0:
        kind = SpeedupKind.FASTER
    elif hi < 1.0:
        kind = SpeedupKind.SLOWER
    else:
        kind = SpeedupKind.NO_DIFFERENCE
    return SpeedupCall(kind, s, lo, hi, confidence, assumed)


def combine_speedups(parts: list[tuple[float, float | None, float | None]], *,
                     geometric_mean: bool = False) -> tuple[float, float | None, float | None] | None:
    """The product (or, with ``geometric_mean``, the geometric mean) of independent speedups
    ``(speedup, low, high)``, with an interval: on the log scale the centre is the sum (mean)
    of the logs and the half-widths add in quadrature, as the variances of independent
    estimates do (the delta method; e.g. Casella & Berger, *Statistical Inference*, 2nd ed.,
    2002, §5.5.4), the lower and upper half-widths separately so an asymmetric interval stays
    so. One part comes back as it is. Returns ``(speedup, low, high)``, ``low``/``high``
    ``None`` when any part lacks an interval, or ``None`` when ``parts`` is empty or holds a
    speedup that is not a positive number."""
    import math

    if not parts or not all(_finite_positive(p[0]) for p in parts):
        return None
    if len(parts) == 1:
        s, lo, hi = parts[0]
        ok = _finite_positive(lo) and _finite_positive(hi)
        return float(s), (min(lo, hi) if ok else None), (max(lo, hi) if ok else None)  # type: ignore[type-var]
    n = len(parts) if geometric_mean else 1
    centre = sum(math.log(p[0]) for p in parts) / n
    if not all(_finite_positive(p[1]) and _finite_positive(p[2]) for p in parts) \
            or any(math.isinf(p[0]) for p in parts):
        return math.exp(centre), None, None
    down = math.sqrt(sum(max(0.0, math.log(p[0]) - math.log(min(p[1], p[2]))) ** 2 for p in parts)) / n
    up = math.sqrt(sum(max(0.0, math.log(max(p[1], p[2])) - math.log(p[0])) ** 2 for p in parts)) / n
    return math.exp(centre), math.exp(centre - down), math.exp(centre + up)


def _to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v) for v in obj]
    return obj


def _from_plain(cls: type, data: dict[str, Any]) -> Any:
    import typing

    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in names:
            continue
        kwargs[key] = _coerce(hints[key], value)
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    import typing

    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", typing.Union)):
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        return [_coerce(args[0], v) for v in value] if args else list(value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _from_plain(hint, value)
    return value
