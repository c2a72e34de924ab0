"""Compare outputs, element by element: against the float64 truth where the baseline job
computed one, else with dtype-aware tolerances.

Where the truth was also computed in float64 (``worker/truth64.py``), float32, float16 and
bfloat16 outputs are judged by the float64-calibrated bound of ``xeforge_core.precision``
(``worker/calibrated.py``); explicit tolerances (the user's or the spec's ``rtol``/``atol``)
still decide when given, with the float64 measurements reported beside them. Everything below
describes the tolerance check, used for the other outputs and where there is no float64 truth.
Either way the first element outside the bound is reported by its coordinates in the expected
output's shape, with both values.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (the rule of
``torch.isclose`` / ``torch.testing.assert_close``), NaN positions match, and Inf positions and
signs match. Every element of tuple/list outputs is compared.

Default tolerances (``DEFAULT_TOLERANCES``, (rtol, atol) by the expected output's dtype):

==========  ======  ======  ==========================================================
dtype       rtol    atol    where it comes from
==========  ======  ======  ==========================================================
float64     1e-5    1e-8    torch.testing (1e-7, 1e-7) with rtol widened for reassociation
float32     1e-2    1e-2    KernelBench's correctness check (atol = rtol = 1e-2); covers
                            tf32 ``tl.dot`` (10-bit mantissa) and reordered reductions
float16     1e-2    1e-2    KernelBench; about 10 fp16 ulps at 1.0 (torch.testing: 1e-3)
bfloat16    2e-2    2e-2    torch.testing's 1.6e-2 (two bf16 ulps) rounded up
float8      1.25e-1 1.25e-1 one e4m3 ulp at 1.0
integers    0       0       exact
==========  ======  ======  ==========================================================

With the defaults, ``atol`` is multiplied by ``max(1, rms(expected))``: the absolute rounding
error of a sum (a GEMM, a reduction) grows with the magnitude of its terms, so an output of RMS
50 is held to an absolute error 50x larger near zero. Tolerances given by the spec's variant
(``rtol``/``atol``) or by the user (options) are used as given, the user's first.

A tolerance is *vacuous* when ``atol`` exceeds ``|expected|`` for most (over half) of the
elements: almost any answer would pass. That is flagged as a warning, and the output is then
also judged relative to its scale: the normwise relative error
``||actual - expected||_2 / ||expected||_2`` must not exceed the dtype's default ``rtol``;
except where the expected output is itself rounding noise (RMS under ``NOISE_FLOOR_ULPS``
machine epsilons), where only ``atol`` is asked.

An output whose dtype or shape differs from the expected one fails unless the options allow the
change; nothing is cast before comparing to hide a precision downgrade (with the change allowed,
both sides are compared in float64 under the looser of the two dtypes' tolerances).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from xeforge_core.precision import DOWNGRADES, KERNELBENCH_TOLERANCE
from xeforge_core.verdict import OutputComparison
from xeforge_core.worker.calibrated import Calibrated, Truth64, applies, compare_calibrated, unravel
from xeforge_core.worker.expected import StoredTensor, flat_chunks

DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-5, 1e-8),
    torch.float32: (1e-2, 1e-2),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.complex64: (1e-2, 1e-2),
    torch.complex128: (1e-5, 1e-8),
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        DEFAULT_TOLERANCES[getattr(torch, _name)] = (1.25e-1, 1.25e-1)


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for ``dtype``; exact (0, 0) for integer and bool dtypes."""
    if dtype in DEFAULT_TOLERANCES:
        return DEFAULT_TOLERANCES[dtype]
    if dtype.is_floating_point or dtype.is_complex:
        return (1e-2, 1e-2)
    return (0.0, 0.0)


@dataclass
class Tolerance:
    """Tolerances in force: ``explicit`` when given by the user or the spec (no scaling)."""

    rtol: float | None = None
    atol: float | None = None
    explicit: bool = False

    def for_dtype(self, dtype: torch.dtype) -> tuple[float, float, bool]:
        """(rtol, atol, explicit?) for an expected output of ``dtype``."""
        d_rtol, d_atol = default_tolerance(dtype)
        rtol = d_rtol if self.rtol is None else float(self.rtol)
        atol = d_atol if self.atol is None else float(self.atol)
        return rtol, atol, self.explicit and (self.rtol is not None or self.atol is not None)


def resolve_tolerance(options: dict[str, Any], variant: dict[str, Any]) -> Tolerance:
    """User options first, then the variant's rtol/atol, else dtype defaults. Values may be
    strings (YAML reads ``1e-5`` as a string)."""

    def num(v: Any) -> float | None:
        if v is None or v == "":
            return None
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    rtol = num(options.get("rtol"))
    atol = num(options.get("atol"))
    if rtol is None:
        rtol = num(variant.get("rtol"))
    if atol is None:
        atol = num(variant.get("atol"))
    return Tolerance(rtol=rtol, atol=atol, explicit=rtol is not None or atol is not None)


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


#: Elements compared per step on the device (float64 copies of two chunks: 256 MiB).
COMPARE_CHUNK = 1 << 24


def _expected_meta(expected: Any) -> tuple[list[int], torch.dtype, int]:
    """(shape, dtype, numel) of an expected tensor or :class:`StoredTensor`."""
    if isinstance(expected, StoredTensor):
        return list(expected.shape), expected.dtype, expected.numel()
    return list(expected.shape), expected.dtype, expected.numel()


def _pairs(actual: torch.Tensor, expected: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Aligned flat chunks of ``actual`` (where it lives) and ``expected`` (moved there)."""
    flat = actual.detach().reshape(-1)
    start = 0
    for e in flat_chunks(expected, COMPARE_CHUNK, flat.device):
        yield flat[start:start + e.numel()], e
        start += e.numel()


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.complex128 if t.dtype.is_complex else torch.float64)


def _unwritten_note(count: int, dtype: torch.dtype | None = None) -> str:
    """What ``count`` poisoned outputs where the expected output has values mean: memory the
    kernel never wrote (fresh outputs are poisoned: NaN, the integer maximum for an integer
    ``dtype``), or, for floating point, arithmetic that overflowed into NaN."""
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex) and dtype != torch.bool:
        return (f"{count} output element(s) left unwritten, or computed from memory nothing wrote (out-of-bounds or "
                f"uninitialised reads): they hold {torch.iinfo(dtype).max}, the {_dtype_name(dtype)} maximum the "
                "verifier fills fresh integer outputs with, where the expected output has other values")
    return (f"{count} output element(s) left unwritten, or computed from memory nothing wrote (out-of-bounds or "
            "uninitialised reads), or overflowed (Inf - Inf, Inf / Inf): they hold NaN, the poison of fresh memory "
            "and of such arithmetic, where the expected output has values")


def _poison_count_chunk(a: torch.Tensor, e: torch.Tensor) -> int:
    """Elements still holding the poison of fresh memory (NaN, or the integer max) where the
    expected output has a value. For an integer output, only meaningful where the expected
    output never takes the maximum itself (:func:`_reaches_int_poison`)."""
    if a.dtype.is_floating_point:
        exp_nan = torch.isnan(e) if e.dtype.is_floating_point or e.dtype.is_complex else torch.zeros_like(a, dtype=torch.bool)
        return int((torch.isnan(a) & ~exp_nan).sum())
    if a.dtype == torch.bool or a.dtype.is_complex:
        return 0
    big = torch.iinfo(a.dtype).max
    return int(((a == big) & (e != big)).sum())


def _reaches_int_poison(a: torch.Tensor, e: torch.Tensor) -> bool:
    """Whether the expected chunk ``e`` of an integer output ``a`` holds the integer maximum the
    verifier poisons fresh integer outputs with. Where it does (a saturating int8 quantisation
    writes 127 wherever a row's largest value lands), the maximum is a value the kernel computes,
    and a wrong 127 is a wrong value, not evidence of an unwritten element."""
    if a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool:
        return False
    return bool((e == torch.iinfo(a.dtype).max).any())


def _kernelbench_exact_mismatches(a: torch.Tensor, e: torch.Tensor, tol: float) -> int:
    """Elements of an integer or boolean chunk that KernelBench's ``torch.allclose(ref, new,
    atol=tol, rtol=tol)`` refuses: ``|a - e| > tol + tol * |e|`` (booleans: any difference)."""
    if e.dtype == torch.bool or a.dtype == torch.bool:
        return int((a != e).sum())
    diff = (a.double() - e.double()).abs()
    return int((diff > tol + tol * e.double().abs()).sum())


#: An expected output whose RMS is under this many machine epsilons of its dtype (at 1.0, the
#: scale of the verifier's inputs) is rounding noise: a normwise relative error means nothing
#: there (a mean of group-normalised values is about 1e-8 in float32, any order of summation
#: changes it entirely), so it is held to the elementwise ``atol`` only.
NOISE_FLOOR_ULPS = 10


def _first(comp: OutputComparison, flat_index: int, actual: float | int | bool, expected: float | int | bool) -> None:
    """Record the first element outside the bound (coordinates in the expected shape)."""
    comp.first_mismatch = unravel(flat_index, comp.expected_shape)
    comp.first_actual, comp.first_expected = actual, expected


def _calibrated_into(comp: OutputComparison, cal: Calibrated, hints: tuple[str, ...]) -> None:
    """Copy what the float64 comparison measured into ``comp`` (the downgrades that would
    accept it, those the source shows first)."""
    comp.error_ratio, comp.bound_factor = cal.ratio, cal.factor
    comp.rel_error, comp.ref_rel_error = cal.rel_error, cal.ref_rel_error
    comp.kernelbench_tol, comp.kernelbench_mismatches = cal.kernelbench_tol, cal.kernelbench_mismatches
    accepted = cal.accepted_by
    comp.needs = [h for h in hints if h in accepted] + [n for n in accepted if n not in hints]


def compare_tensor(index: int, actual: Any, expected: Any, tol: Tolerance, *, allow_dtype_change: bool,
                   allow_shape_change: bool, poisoned: bool, calibration: Truth64 | None = None,
                   allowed: tuple[str, ...] = (), hints: tuple[str, ...] = ()) -> tuple[OutputComparison, list[str]]:
    """Compare one output. ``expected`` is a tensor (any device) or a :class:`StoredTensor`;
    the comparison runs where ``actual`` lives, ``COMPARE_CHUNK`` elements at a time, so device
    memory grows by two float64 chunks and host memory not at all. Returns the comparison and
    warnings (vacuous tolerance).

    ``calibration``: the float64 truth of this output (saved by the baseline job), or ``None``.
    With it, a float32/float16/bfloat16 output is judged by the float64-calibrated bound
    (``worker/calibrated.py``) under the ``allowed`` downgrades,
    unless the tolerances are explicit (the user's or the spec's ``rtol``/``atol``), which then
    decide while the float64 measurements are still reported. ``hints``: the downgrades the
    candidate's source shows, named first when its error is a precision change."""
    warnings: list[str] = []
    if not isinstance(expected, (torch.Tensor, StoredTensor)):
        same = (not isinstance(actual, torch.Tensor)) and actual == expected
        return OutputComparison(index=index, shape=[], dtype=type(actual).__name__, expected_shape=[],
                                expected_dtype=type(expected).__name__, passed=bool(same),
                                numel=1, mismatches=0 if same else 1,
                                note="" if same else f"non-tensor output {actual!r} != expected {expected!r}"), warnings
    exp_shape, e_dtype, e_numel = _expected_meta(expected)
    exp_dtype = _dtype_name(e_dtype)
    if not isinstance(actual, torch.Tensor):
        return OutputComparison(index=index, shape=[], dtype=type(actual).__name__, expected_shape=exp_shape,
                                expected_dtype=exp_dtype, numel=e_numel, mismatches=e_numel,
                                note=f"output {index} is a {type(actual).__name__}, expected a tensor"), warnings
    comp = OutputComparison(index=index, shape=list(actual.shape), dtype=_dtype_name(actual.dtype),
                            expected_shape=exp_shape, expected_dtype=exp_dtype, numel=e_numel)
    a = actual.detach()
    notes: list[str] = []
    if a.dtype != e_dtype:
        msg = f"output {index} dtype changed: expected {exp_dtype}, got {_dtype_name(a.dtype)}"
        if not allow_dtype_change:
            comp.note = msg + " (an output dtype change is not allowed; nothing is cast to hide it)"
            comp.mismatches = comp.numel
            return comp, warnings
        notes.append(msg + " (allowed)")
    if list(a.shape) != exp_shape:
        msg = f"output {index} shape changed: expected {exp_shape}, got {list(a.shape)}"
        if not (allow_shape_change and a.numel() == e_numel):
            if a.numel() == e_numel:  # say whether only the shape differs (a loss as [1] for a 0-d scalar)
                same, _ = compare_tensor(index, a.reshape(exp_shape), expected, tol, allow_dtype_change=allow_dtype_change,
                                         allow_shape_change=False, poisoned=poisoned, calibration=calibration,
                                         allowed=allowed, hints=hints)
                if same.passed:
                    msg += (f"; its {e_numel} value(s) match in that shape, so only the shape differs "
                            "(--allow-shape-change accepts it)")
            comp.note = msg
            comp.mismatches = comp.numel
            return comp, warnings
        notes.append(msg + " (allowed)")

    rtol, atol, explicit = tol.for_dtype(e_dtype)
    if a.dtype != e_dtype:
        r2, a2, _ = tol.for_dtype(a.dtype)
        rtol, atol = max(rtol, r2), max(atol, a2)
    if comp.numel == 0:
        comp.passed = True
        comp.note = "; ".join(notes)
        return comp, warnings

    exact = not (e_dtype.is_floating_point or e_dtype.is_complex) and not (
        a.dtype.is_floating_point or a.dtype.is_complex)
    cal = None
    if calibration is not None and applies(e_dtype) and not a.dtype.is_complex:
        cal = compare_calibrated(a, expected, calibration, allowed, poisoned=poisoned)
        _calibrated_into(comp, cal, hints)
        if not explicit:
            return _judged_by_float64(comp, cal, notes, allowed, hints), warnings
    comp.check = "tolerance"
    unwritten = 0
    if exact:
        mismatches, max_abs = 0, 0.0
        offset = 0
        reaches_poison = False
        # KernelBench compares every output with its float32 tolerance (its default precision)
        comp.kernelbench_tol, comp.kernelbench_mismatches = KERNELBENCH_TOLERANCE["float32"], 0
        for ac, ec in _pairs(a, expected):
            diff = (ac.long() - ec.long()).abs() if e_dtype != torch.bool else (ac != ec).long()
            bad = int((diff != 0).sum())
            if bad and comp.first_mismatch is None:
                i = int(torch.nonzero(diff)[0, 0])
                _first(comp, offset + i, ac[i].item(), ec[i].item())  # integers shown whole
            mismatches += bad
            offset += ec.numel()
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
            comp.kernelbench_mismatches += _kernelbench_exact_mismatches(ac, ec, comp.kernelbench_tol)
            if poisoned:
                unwritten += _poison_count_chunk(ac, ec)
                reaches_poison = reaches_poison or _reaches_int_poison(ac, ec)
        if reaches_poison:
            unwritten = 0
        comp.mismatches = mismatches
        comp.max_abs_error = max_abs
        comp.max_rel_error = max_abs
    else:
        if not explicit:  # pass 1: the RMS of the expected output where both sides are finite
            sq, count = 0.0, 0
            for ac, ec in _pairs(a, expected):
                a64, e64 = _wide(ac), _wide(ec)
                finite = torch.isfinite(a64) & torch.isfinite(e64)
                ee = e64[finite]
                sq += float(ee.abs().pow(2).sum())
                count += int(ee.numel())
            if count:
                atol = atol * max(1.0, math.sqrt(sq / count))
        nan_mm = inf_mm = mismatches = vacuous = finite_n = 0
        max_abs = max_rel = 0.0
        diff_sq = ref_sq = 0.0
        ref_max = 0.0
        offset = 0
        for ac, ec in _pairs(a, expected):
            a64, e64 = _wide(ac), _wide(ec)
            nan_a, nan_e = torch.isnan(a64), torch.isnan(e64)
            inf_a, inf_e = torch.isinf(a64), torch.isinf(e64)
            nan_mm += int((nan_a != nan_e).sum())
            inf_bad = (inf_a | inf_e) & ~(nan_a | nan_e) & (a64 != e64)
            inf_mm += int(inf_bad.sum())
            finite = torch.isfinite(a64) & torch.isfinite(e64)
            ae, ee = a64[finite], e64[finite]
            err = (ae - ee).abs()
            bound = atol + rtol * ee.abs()
            outside = int((err > bound).sum())
            mismatches += outside
            if comp.first_mismatch is None and (outside or bool((nan_a != nan_e).any()) or bool(inf_bad.any())):
                full = (nan_a != nan_e) | inf_bad | (finite & ((a64 - e64).abs() > atol + rtol * e64.abs()))
                i = int(torch.nonzero(full)[0, 0])
                _first(comp, offset + i, _scalar(a64[i]), _scalar(e64[i]))
            offset += ec.numel()
            if err.numel():
                max_abs = max(max_abs, float(err.max()))
                max_rel = max(max_rel, float((err / ee.abs().clamp_min(1e-30)).max()))
                ref_max = max(ref_max, float(ee.abs().max()))
                vacuous += int((ee.abs() < atol).sum())
                finite_n += int(ee.numel())
                diff_sq += float((ae - ee).abs().pow(2).sum())
                ref_sq += float(ee.abs().pow(2).sum())
            if poisoned and ac.dtype.is_floating_point:
                unwritten += _poison_count_chunk(ac, ec)
        comp.nan_mismatch, comp.inf_mismatch = nan_mm, inf_mm
        comp.mismatches = mismatches + nan_mm + inf_mm
        comp.max_abs_error, comp.max_rel_error = max_abs, max_rel
        ref_rms = math.sqrt(ref_sq / finite_n) if finite_n else 0.0
        noise = NOISE_FLOOR_ULPS * torch.finfo(e_dtype).eps if e_dtype.is_floating_point else 0.0
        if finite_n and ref_max > 0 and ref_rms <= noise:
            # the truth is rounding noise (a mean of normalised values, a cancelling sum): its
            # relative error means nothing, so the elementwise tolerance is all that is asked
            if vacuous / finite_n > 0.5:
                warnings.append(f"output {index}: the expected values are rounding noise (RMS {ref_rms:.3g}, "
                                f"under {NOISE_FLOOR_ULPS} ulps of {exp_dtype} at 1.0): compared against atol "
                                f"{atol:.3g} only")
        elif finite_n and ref_max > 0:
            vacuous_share = vacuous / finite_n
            if vacuous_share > 0.5:
                warnings.append(f"output {index}: atol {atol:.3g} exceeds |expected| for "
                                f"{vacuous_share:.0%} of the elements (a vacuous tolerance); judged "
                                "relative to the output's scale as well")
                d_rtol, _ = default_tolerance(e_dtype)
                norm_rel = math.sqrt(diff_sq) / max(math.sqrt(ref_sq), 1e-30)
                if norm_rel > d_rtol:
                    comp.mismatches = max(comp.mismatches, 1)
                    notes.append(f"normwise relative error {norm_rel:.3g} exceeds {d_rtol:g} relative to "
                                 "the output's scale")
        unwritten_nan = unwritten if poisoned and a.dtype.is_floating_point else 0
        if comp.nan_mismatch and comp.nan_mismatch != unwritten_nan:
            notes.append(f"NaN placement differs at {comp.nan_mismatch} element(s)")
        if comp.inf_mismatch:
            notes.append(f"Inf placement or sign differs at {comp.inf_mismatch} element(s)")
    if poisoned and unwritten:
        notes.append(_unwritten_note(unwritten, a.dtype) + _first_text(comp))
    comp.passed = comp.mismatches == 0
    if not comp.passed and not any("left unwritten" in n for n in notes):
        notes.insert(0, f"{comp.mismatches} of {comp.numel} element(s) outside rtol {rtol:g}, "
                        f"atol {atol:.3g}" + _first_text(comp))
    comp.note = "; ".join(notes)
    return comp, warnings


def _scalar(value: torch.Tensor) -> Any:
    """A 0-d tensor as a JSON-able number (complex as its string)."""
    v = value.item()
    return str(v) if isinstance(v, complex) else float(v)


def _first_text(comp: OutputComparison) -> str:
    """``" (first at [3, 17]: got 1.25, expected 1.5)"`` or ""."""
    if comp.first_mismatch is None:
        return ""
    return (f" (first at {comp.first_mismatch}: got {_num(comp.first_actual)}, expected "
            f"{_num(comp.first_expected)})")


def _num(value: Any) -> str:
    return f"{value:.7g}" if isinstance(value, float) else str(value)


def _accumulators_not_allowed(hints: tuple[str, ...], allowed: tuple[str, ...]) -> list[str]:
    """The accumulation downgrades among ``hints`` that no allowed accumulation at least as
    coarse covers (``bf16-accumulation`` allowed covers a float16 accumulator too), finest first."""
    widest = max((DOWNGRADES[a].unit_roundoff for a in allowed if a in DOWNGRADES and DOWNGRADES[a].accumulation),
                 default=0.0)
    return [n for n in DOWNGRADES if n in hints and DOWNGRADES[n].accumulation and DOWNGRADES[n].unit_roundoff > widest]


def _judged_by_float64(comp: OutputComparison, cal: Calibrated, notes: list[str],
                       allowed: tuple[str, ...] = (), hints: tuple[str, ...] = ()) -> OutputComparison:
    """Fill ``comp`` from a float64-calibrated comparison that decides it (``allowed``: the
    downgrades whose terms widened the bound, named beside the problem's own factor).

    An output that passes only through the allowances (outside the problem's own bound) while
    the source (``hints``) keeps an accumulator in a precision that is not allowed fails: an
    accumulator's error grows with the length summed, so at the checked sizes (a few tiles) it
    hides inside an operand allowance (a float16 accumulator errs like TF32 products over two
    tiles of K, and 10-20 times more over the published K), and no allowed downgrade vouches
    for it. ``comp.needs`` then lists only what is not allowed yet."""
    comp.check = "float64"
    comp.nan_mismatch, comp.inf_mismatch = cal.nan_mismatch, cal.inf_mismatch
    comp.mismatches = cal.mismatches
    comp.max_abs_error, comp.max_rel_error = cal.max_abs_error, cal.max_rel_error
    if cal.first_index is not None:
        _first(comp, cal.first_index, cal.first_actual, cal.first_expected)
    if comp.nan_mismatch and comp.nan_mismatch != cal.unwritten:
        notes.append(f"NaN placement differs at {comp.nan_mismatch} element(s)")
    if comp.inf_mismatch:
        notes.append(f"Inf placement or sign differs at {comp.inf_mismatch} element(s)")
    if cal.unwritten:
        notes.append(_unwritten_note(cal.unwritten) + _first_text(comp))
    comp.passed = comp.mismatches == 0
    unallowed = _accumulators_not_allowed(hints, allowed)
    if comp.passed and allowed and cal.outside_own and unallowed:
        comp.passed, comp.mismatches = False, cal.outside_own
        comp.needs = unallowed  # allowing these (and nothing else) lets the output pass
        notes.insert(0, f"{cal.outside_own} of {comp.numel} element(s) outside the problem's own float64-calibrated "
                        f"bound ({cal.factor:g}x the reference's error scale), inside it only with what --allow "
                        f"{', '.join(allowed)} adds, while the source keeps {DOWNGRADES[unallowed[0]].what}, which "
                        "is not allowed: an accumulator's error grows with the length summed, past what the checked "
                        f"sizes show (normwise relative error {cal.rel_error:.3g} vs the float64 truth, the reference's "
                        f"{cal.ref_rel_error:.3g})")
    elif not comp.passed and not cal.unwritten and cal.mismatches <= (cal.nan_mismatch or 0) + (cal.inf_mismatch or 0):
        # every mismatch is a NaN or an Inf: the errors measured over the finite elements say nothing
        notes.insert(0, f"{comp.mismatches} of {comp.numel} element(s) NaN or Inf where the float64 truth is not, or "
                        f"placed otherwise (the finite ones are within the bound)" + _first_text(comp))
    elif not comp.passed and not cal.unwritten:
        notes.insert(0, f"{comp.mismatches} of {comp.numel} element(s) outside the float64-calibrated bound "
                        f"({_ratio(cal.ratio)}, {cal.factor:g}x allowed"
                        + (f" plus what --allow {', '.join(allowed)} adds" if allowed else "")
                        + f"; normwise relative error {cal.rel_error:.3g} vs the float64 truth, the reference's "
                        f"{cal.ref_rel_error:.3g})" + _first_text(comp))
    comp.note = "; ".join(notes)
    return comp


def _ratio(value: float) -> str:
    """The largest error in units of the reference's own error scale, as the verdict says it (an
    infinite ratio: errors where the reference is exact)."""
    if math.isinf(value):
        return "errors where the reference is exact: its own error scale is 0 there"
    return f"error up to {value:.3g}x the reference's own error scale"


def compare_outputs(actual: list[Any], expected: list[Any], tol: Tolerance, *, allow_dtype_change: bool = False,
                    allow_shape_change: bool = False, poisoned: bool = False,
                    calibration: list[Truth64 | None] | None = None,
                    allowed: tuple[str, ...] = (), hints: tuple[str, ...] = ()
                    ) -> tuple[bool, list[OutputComparison], list[str], str]:
    """Compare flat output lists. ``calibration``: the float64 truth of each output, aligned
    with ``expected`` (see :func:`compare_tensor`). Returns (passed, per-output comparisons,
    warnings, note)."""
    comps: list[OutputComparison] = []
    warnings: list[str] = []
    note = ""
    if len(actual) != len(expected):
        note = f"returned {len(actual)} output(s), expected {len(expected)}"
    for i, exp in enumerate(expected):
        if i >= len(actual):
            break
        cal = calibration[i] if calibration is not None and i < len(calibration) else None
        c, w = compare_tensor(i, actual[i], exp, tol, allow_dtype_change=allow_dtype_change,
                              allow_shape_change=allow_shape_change, poisoned=poisoned, calibration=cal,
                              allowed=allowed, hints=hints)
        comps.append(c)
        warnings += w
    passed = not note and all(c.passed for c in comps)
    return passed, comps, warnings, note


def summarize_failure(comps: list[OutputComparison], note: str) -> str:
    """One phrase on the first failing output."""
    if note:
        return note
    for c in comps:
        if not c.passed:
            err = "" if c.max_abs_error is None or math.isnan(c.max_abs_error) else \
                f", max abs error {c.max_abs_error:.3g}"
            text = c.note if c.note.startswith(f"output {c.index}") else f"output {c.index}: {c.note}"
            if "left unwritten" in c.note or "changed" in c.note:
                err = ""
            return text + err
    return ""


def bitwise_equal(a: Any, b: Any) -> bool:
    """Bitwise equality of two tensors (NaN-aware: identical NaN bits are equal)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a = a.detach().reshape(-1).contiguous()
    b = b.detach().reshape(-1).contiguous()
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    try:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    except RuntimeError:
        return torch.equal(a, b)
