"""Compare one output against the float64 truth, with the bound ``xeforge_core.precision``
states: ``|c - t| <= K * max(|r - t|, E, sigma) + 2u |t| + tiny`` elementwise, widened by the
terms of the allowed downgrades; ``t`` the float64 truth rebuilt as the truth's own output
``r`` plus its saved deviation, ``sigma`` the saved sensitivity and, for a downgrade that
truncates, the saved drift (``worker/truth64.py``).

NaN positions must match the truth's output and Inf positions and signs too (as in
``worker/compare.py``); elements where the truth's output is not finite are judged by that
placement alone. The comparison runs on the device, :data:`CHUNK` elements at a time, so host
memory does not grow with the output. Besides pass or fail it measures what the verdict
reports: the candidate's largest error in units of the reference's error scale (``ratio``: the
smallest ``K`` under which it would pass), the normwise relative errors of the candidate and of
the reference against the float64 truth, the first element outside the bound (its flat index,
value and the truth's), which single downgrade would accept the output (``accepted_by``), and
how many elements KernelBench's tolerance would refuse (``torch.allclose(ref, out, atol=tol,
rtol=tol)`` against the truth's own output).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import zip_longest

import torch

from xeforge_core.precision import (
    DOWNGRADES,
    UNIT_ROUNDOFF,
    allowance_terms,
    kernelbench_tolerance,
    own_factor,
)
from xeforge_core.worker.expected import StoredTensor, flat_chunks

#: Elements compared per step on the device (float64 copies of four chunks: 128 MiB).
CHUNK = 1 << 22


@dataclass(frozen=True)
class Truth64:
    """The float64 truth of one output, as the baseline job saved it: the ``deviation`` from the
    truth's own output and the ``sensitivity`` (tensors or :class:`StoredTensor`, float32), the
    RMS of the deviation (``ref_rms``, ``E``) and of the sensitivity (``sensitivity_rms``), and
    the ``drift`` under a shrink of every input (``None`` where it was not saved: a downgrade
    that truncates is then held to its rounding terms alone)."""

    deviation: torch.Tensor | StoredTensor
    sensitivity: torch.Tensor | StoredTensor
    ref_rms: float
    sensitivity_rms: float
    drift: torch.Tensor | StoredTensor | None = None


@dataclass
class Calibrated:
    """What one calibrated comparison measured (errors against the float64 truth)."""

    dtype: str
    factor: float
    mismatches: int = 0
    nan_mismatch: int = 0
    inf_mismatch: int = 0
    unwritten: int = 0
    ratio: float = 0.0
    rel_error: float = 0.0
    ref_rel_error: float = 0.0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    first_index: int | None = None
    first_actual: float | None = None
    first_expected: float | None = None
    kernelbench_tol: float | None = None
    kernelbench_mismatches: int | None = None
    #: elements outside the problem's own bound (no downgrade allowed)
    outside_own: int = 0
    #: elements outside the bound with only that downgrade allowed, per downgrade
    outside_with: dict[str, int] = field(default_factory=dict)

    @property
    def accepted_by(self) -> list[str]:
        """The downgrades that alone accept this output where the problem's own precision does
        not (finest first): those it needs, or, when it passed, those of the allowed that let it
        pass. ``[]`` when its own precision accepts it, or no single downgrade would (a
        misplaced NaN or Inf counts against every one)."""
        if self.outside_own == 0:
            return []
        return [n for n in DOWNGRADES if self.outside_with.get(n, 1) == 0]


def unravel(index: int, shape: list[int] | tuple[int, ...]) -> list[int]:
    """The coordinates of flat (C-order) ``index`` in ``shape`` (``[]`` for a 0-d tensor)."""
    coords: list[int] = []
    for size in reversed([int(s) for s in shape]):
        size = max(size, 1)
        coords.append(index % size)
        index //= size
    return list(reversed(coords))


def applies(dtype: torch.dtype) -> bool:
    """Whether an output of ``dtype`` can be judged against the float64 truth."""
    return str(dtype).replace("torch.", "") in UNIT_ROUNDOFF


def _zero(like: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=like.dtype, device=like.device)


def _widened(bound: torch.Tensor, terms: list[tuple[float, float, float]], sens: torch.Tensor,
             abs_t: torch.Tensor, tiny: float, drift: torch.Tensor | None) -> torch.Tensor:
    for factor, floor_u, drift_factor in terms:
        term = factor * sens + 2 * floor_u * abs_t + tiny
        if drift_factor and drift is not None:
            term = term + drift_factor * drift
        bound = torch.maximum(bound, term)
    return bound


def compare_calibrated(actual: torch.Tensor, truth: torch.Tensor | StoredTensor, t64: Truth64,
                       allowed: tuple[str, ...] = (), *, poisoned: bool = False) -> Calibrated:
    """Judge ``actual`` (any shape with the truth's number of elements) against the truth's
    output ``truth`` (its dtype is the problem's: float32, float16 or bfloat16) and its float64
    record ``t64``, under the ``allowed`` downgrades. ``poisoned``: fresh device memory held
    NaN, so NaN where the truth has a value counts as unwritten. An ``actual`` of a coarser
    floating-point dtype than the truth's (an output dtype change the caller allowed) is held
    to that dtype's rounding (the ``2u|t|`` term with its unit roundoff): its one rounding of
    each element is what the change allows. Raises ``ValueError`` for a dtype the check does
    not cover."""
    dtype_name = str(truth.dtype).replace("torch.", "")
    factor = own_factor(dtype_name)
    if factor is None:
        raise ValueError(f"no float64-calibrated bound for {dtype_name}")
    u = max(UNIT_ROUNDOFF[dtype_name], UNIT_ROUNDOFF.get(str(actual.dtype).replace("torch.", ""), 0.0))
    tiny = torch.finfo(truth.dtype).tiny
    allowed_terms = allowance_terms(dtype_name, allowed)
    each = {n: allowance_terms(dtype_name, (n,)) for n in DOWNGRADES}
    kb = kernelbench_tolerance(dtype_name)
    res = Calibrated(dtype=dtype_name, factor=factor, kernelbench_tol=kb, kernelbench_mismatches=0 if kb else None,
                     outside_with={n: 0 for n in DOWNGRADES})
    flat = actual.detach().reshape(-1)
    device = flat.device
    err_sq = ref_sq = truth_sq = 0.0
    start = 0
    drifts = flat_chunks(t64.drift, CHUNK, device) if t64.drift is not None else iter(())
    parts = zip_longest(flat_chunks(truth, CHUNK, device), flat_chunks(t64.deviation, CHUNK, device),
                        flat_chunks(t64.sensitivity, CHUNK, device), drifts)
    for r, d, sig, g in parts:
        n = r.numel()
        a64 = flat[start:start + n].to(torch.float64)
        r64 = r.to(torch.float64)
        d64 = d.to(torch.float64)
        t = r64 + d64
        abs_t = t.abs()
        sig64 = sig.to(torch.float64)
        scale = torch.maximum(d64.abs(), sig64).clamp_min(t64.ref_rms)
        sens = sig64.clamp_min(t64.sensitivity_rms)
        drift = g.to(torch.float64) if g is not None else None
        nan_a, nan_r = torch.isnan(a64), torch.isnan(r64)
        nan_bad = nan_a != nan_r
        inf_bad = (torch.isinf(a64) | torch.isinf(r64)) & ~(nan_a | nan_r) & (a64 != r64)
        finite = torch.isfinite(a64) & torch.isfinite(r64)
        err = torch.where(finite, (a64 - t).abs(), _zero(t))
        floor = 2 * u * abs_t + tiny
        own = factor * scale + floor
        bound = _widened(own, allowed_terms, sens, abs_t, tiny, drift)
        placement = nan_bad | inf_bad
        bad = (finite & (err > bound)) | placement
        count = int(bad.sum())
        res.mismatches += count
        res.nan_mismatch += int(nan_bad.sum())
        res.inf_mismatch += int(inf_bad.sum())
        outside_own = int(((finite & (err > own)) | placement).sum())
        res.outside_own += outside_own
        for name, terms in each.items():
            res.outside_with[name] += int(((finite & (err > _widened(own, terms, sens, abs_t, tiny, drift)))
                                           | placement).sum()) if outside_own else 0
        if count and res.first_index is None:
            i = int(torch.nonzero(bad)[0, 0])
            res.first_index = start + i
            res.first_actual = float(a64[i])
            res.first_expected = float(t[i]) if bool(torch.isfinite(r64[i])) else float(r64[i])
        excess = (err - floor).clamp_min(0)
        over = torch.where(excess > 0, excess / scale.clamp_min(1e-300), _zero(excess))
        over = torch.where((scale == 0) & (excess > 0), torch.full_like(excess, math.inf), over)
        if n:
            res.ratio = max(res.ratio, float(over.max()))
            res.max_abs_error = max(res.max_abs_error, float(err.max()))
            res.max_rel_error = max(res.max_rel_error, float((err / abs_t.clamp_min(1e-30)).max()))
        err_sq += float(err.pow(2).sum())
        ref_sq += float(torch.where(finite, d64, _zero(t)).pow(2).sum())
        truth_sq += float(torch.where(finite, t, _zero(t)).pow(2).sum())
        if kb is not None:
            close = torch.isclose(a64, r64, rtol=kb, atol=kb)
            res.kernelbench_mismatches = (res.kernelbench_mismatches or 0) + int((~close).sum())
        if poisoned:
            res.unwritten += int((nan_a & ~nan_r).sum())
        start += n
    norm = math.sqrt(truth_sq)
    res.rel_error = math.sqrt(err_sq) / norm if norm > 0 else (0.0 if err_sq == 0 else math.inf)
    res.ref_rel_error = math.sqrt(ref_sq) / norm if norm > 0 else 0.0
    return res
