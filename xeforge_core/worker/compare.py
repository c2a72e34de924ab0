"""Compare outputs, element by element, with dtype-aware tolerances.

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
``||actual - expected||_2 / ||expected||_2`` must not exceed the dtype's default ``rtol``.

An output whose dtype or shape differs from the expected one fails unless the options allow the
change; nothing is cast before comparing to hide a precision downgrade (with the change allowed,
both sides are compared in float64 under the looser of the two dtypes' tolerances).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from xeforge_core.verdict import OutputComparison

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


def _poison_count(actual: torch.Tensor, expected: torch.Tensor) -> int:
    """Elements still holding the poison of fresh memory (NaN, or the integer max) where the
    expected output has a value."""
    if actual.dtype.is_floating_point:
        return int((torch.isnan(actual) & ~torch.isnan(expected.to(actual.dtype)
                                                       if expected.dtype.is_floating_point
                                                       else expected.double())).sum())
    if actual.dtype == torch.bool or actual.dtype.is_complex:
        return 0
    big = torch.iinfo(actual.dtype).max
    return int(((actual == big) & (expected != big)).sum())


def compare_tensor(index: int, actual: Any, expected: Any, tol: Tolerance, *, allow_dtype_change: bool,
                   allow_shape_change: bool, poisoned: bool) -> tuple[OutputComparison, list[str]]:
    """Compare one output. Returns the comparison and warnings (vacuous tolerance)."""
    warnings: list[str] = []
    if not isinstance(expected, torch.Tensor):
        same = (not isinstance(actual, torch.Tensor)) and actual == expected
        return OutputComparison(index=index, shape=[], dtype=type(actual).__name__, expected_shape=[],
                                expected_dtype=type(expected).__name__, passed=bool(same),
                                numel=1, mismatches=0 if same else 1,
                                note="" if same else f"non-tensor output {actual!r} != expected {expected!r}"), warnings
    exp_shape = list(expected.shape)
    exp_dtype = _dtype_name(expected.dtype)
    if not isinstance(actual, torch.Tensor):
        return OutputComparison(index=index, shape=[], dtype=type(actual).__name__, expected_shape=exp_shape,
                                expected_dtype=exp_dtype, numel=expected.numel(), mismatches=expected.numel(),
                                note=f"output {index} is a {type(actual).__name__}, expected a tensor"), warnings
    comp = OutputComparison(index=index, shape=list(actual.shape), dtype=_dtype_name(actual.dtype),
                            expected_shape=exp_shape, expected_dtype=exp_dtype, numel=expected.numel())
    a, e = actual.detach().cpu(), expected.detach().cpu()
    notes: list[str] = []
    if a.dtype != e.dtype:
        msg = f"output {index} dtype changed: expected {exp_dtype}, got {_dtype_name(a.dtype)}"
        if not allow_dtype_change:
            comp.note = msg + " (an output dtype change is not allowed; nothing is cast to hide it)"
            comp.mismatches = comp.numel
            return comp, warnings
        notes.append(msg + " (allowed)")
    if list(a.shape) != exp_shape:
        msg = f"output {index} shape changed: expected {exp_shape}, got {list(a.shape)}"
        if not (allow_shape_change and a.numel() == e.numel()):
            comp.note = msg
            comp.mismatches = comp.numel
            return comp, warnings
        notes.append(msg + " (allowed)")
        a = a.reshape(e.shape)

    rtol, atol, explicit = tol.for_dtype(e.dtype)
    if a.dtype != e.dtype:
        r2, a2, _ = tol.for_dtype(a.dtype)
        rtol, atol = max(rtol, r2), max(atol, a2)
    if comp.numel == 0:
        comp.passed = True
        comp.note = "; ".join(notes)
        return comp, warnings

    exact = not (e.dtype.is_floating_point or e.dtype.is_complex) and not (
        a.dtype.is_floating_point or a.dtype.is_complex)
    if exact:
        diff = (a.long() - e.long()).abs() if e.dtype != torch.bool else (a != e).long()
        comp.mismatches = int((diff != 0).sum())
        comp.max_abs_error = float(diff.max()) if diff.numel() else 0.0
        comp.max_rel_error = comp.max_abs_error
    else:
        a64 = a.to(torch.complex128 if a.dtype.is_complex else torch.float64)
        e64 = e.to(torch.complex128 if e.dtype.is_complex else torch.float64)
        nan_a, nan_e = torch.isnan(a64), torch.isnan(e64)
        inf_a, inf_e = torch.isinf(a64), torch.isinf(e64)
        comp.nan_mismatch = int((nan_a != nan_e).sum())
        comp.inf_mismatch = int(((inf_a | inf_e) & ~(nan_a | nan_e) & (a64 != e64)).sum())
        finite = torch.isfinite(a64) & torch.isfinite(e64)
        ae, ee = a64[finite], e64[finite]
        if not explicit and ee.numel():
            rms = float(ee.abs().pow(2).mean().sqrt())
            atol = atol * max(1.0, rms)
        err = (ae - ee).abs()
        bound = atol + rtol * ee.abs()
        comp.mismatches = int((err > bound).sum()) + comp.nan_mismatch + comp.inf_mismatch
        comp.max_abs_error = float(err.max()) if err.numel() else 0.0
        comp.max_rel_error = float((err / ee.abs().clamp_min(1e-30)).max()) if err.numel() else 0.0
        if ee.numel() and float(ee.abs().max()) > 0:
            vacuous_share = float((ee.abs() < atol).double().mean())
            if vacuous_share > 0.5:
                warnings.append(f"output {index}: atol {atol:.3g} exceeds |expected| for "
                                f"{vacuous_share:.0%} of the elements (a vacuous tolerance); judged "
                                "relative to the output's scale as well")
                d_rtol, _ = default_tolerance(e.dtype)
                norm_rel = float((ae - ee).norm() / ee.norm().clamp_min(1e-30))
                if norm_rel > d_rtol:
                    comp.mismatches = max(comp.mismatches, 1)
                    notes.append(f"normwise relative error {norm_rel:.3g} exceeds {d_rtol:g} relative to "
                                 "the output's scale")
        unwritten_nan = _poison_count(a, e) if poisoned and a.dtype.is_floating_point else 0
        if comp.nan_mismatch and comp.nan_mismatch != unwritten_nan:
            notes.append(f"NaN placement differs at {comp.nan_mismatch} element(s)")
        if comp.inf_mismatch:
            notes.append(f"Inf placement or sign differs at {comp.inf_mismatch} element(s)")
    if poisoned:
        unwritten = _poison_count(a, e)
        if unwritten:
            notes.append(f"{unwritten} output element(s) left unwritten, or computed from memory nothing "
                         "wrote (out-of-bounds or uninitialised reads): they hold NaN, the poison of fresh "
                         "memory, where the expected output has values")
    comp.passed = comp.mismatches == 0
    if not comp.passed and not any("left unwritten" in n for n in notes):
        notes.insert(0, f"{comp.mismatches} of {comp.numel} element(s) outside rtol {rtol:g}, "
                        f"atol {atol:.3g}")
    comp.note = "; ".join(notes)
    return comp, warnings


def compare_outputs(actual: list[Any], expected: list[Any], tol: Tolerance, *, allow_dtype_change: bool = False,
                    allow_shape_change: bool = False, poisoned: bool = False
                    ) -> tuple[bool, list[OutputComparison], list[str], str]:
    """Compare flat output lists. Returns (passed, per-output comparisons, warnings, note)."""
    comps: list[OutputComparison] = []
    warnings: list[str] = []
    note = ""
    if len(actual) != len(expected):
        note = f"returned {len(actual)} output(s), expected {len(expected)}"
    for i, exp in enumerate(expected):
        if i >= len(actual):
            break
        c, w = compare_tensor(i, actual[i], exp, tol, allow_dtype_change=allow_dtype_change,
                              allow_shape_change=allow_shape_change, poisoned=poisoned)
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
