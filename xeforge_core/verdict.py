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
    outside ``atol + rtol * |expected|``; ``nan_mismatch``/``inf_mismatch`` count positions
    where NaN/Inf placement differs.
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


@dataclass
class CorrectnessRun:
    """Correctness of one (variant, seed, input distribution, autotune config) combination,
    against ``against`` (``baseline`` or ``reference``)."""

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
    def isolation_summary(self) -> str:
        """The isolation line of this verdict ("sandboxed (bubblewrap 0.8.0): no network, ..."
        or "not sandboxed: process isolation only (<reason>)"); "" when not recorded (a verdict
        from before the sandbox existed)."""
        return str(self.isolation.get("summary", "")) if self.isolation else ""

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

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
                    f"wrong on variant {run.variant} seed {run.seed} ({run.distribution})"
                    f" vs {run.against}: max abs error {worst:.3g} {run.note}".rstrip()
                )
                break
        for p in self.performance:
            lines.append(
                f"variant {p.variant}: baseline {p.baseline.median_us:.1f} µs, candidate "
                f"{p.candidate.median_us:.1f} µs, speedup {p.speedup:.2f}x"
            )
        return "\n".join(lines)


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


_NESTED: dict[tuple[type, str], type] = {}


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
