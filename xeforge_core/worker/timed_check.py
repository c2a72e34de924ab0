"""The timed size checked too: the candidate's output at each performance variant against the truth's.

Correctness is judged at sizes the verifier chooses (reduced, odd, derived from the tiles), where
the float64 truth is cheap; the performance variant (a spec's ``bench-gpu``, or a KernelBench
problem's published size) is only timed. A kernel wrong only at such a size (a branch taken only
when a dimension is an exact multiple of a tile, a tail loop that skips the last whole block, a
grid capped for sizes below the published one) would pass with its speedup shown. The timing job
has both outputs at hand after timing, so it compares them here, grossly: a mismatch larger than
:data:`GROSS_RELATIVE` of the output's largest magnitude, NaNs in other places, or other shapes.
Rounding never comes near that bound; an unwritten tile or a skipped block of a reduction does.
The verdict is not decided here: a mismatch makes the host verify that variant against the
float64 truth (``xeforge_core.verify._check_timed_size``), which decides.

The truth here is the PyTorch reference where the problem has one (eager, float32, the
problem's dtype), else the baseline. Where the reference and a Triton baseline both exist and the
baseline misses the reference by as much (a TF32 baseline in a float32 problem), the mismatch is
the problem's at that size, not the candidate's, and is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

#: A timed output further than this fraction of the truth's largest magnitude from it is a
#: mismatch worth a float64 check (fp16 GEMMs with K = 8192 stay near 1e-3 of it).
GROSS_RELATIVE = 0.02
#: Elements compared at once (the outputs at a published size can be gigabytes).
CHUNK = 1 << 24


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in _tensors(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in _tensors(item)]
    return []


def _float_mismatch(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float, int, int]:
    """(largest |got - want| where both are finite, largest finite |want|, elements past the
    gross bound, elements whose NaN or infinity differs), chunk by chunk in float32."""
    a, b = got.detach().reshape(-1), want.detach().reshape(-1)
    worst, scale, nonfinite = 0.0, 0.0, 0
    for start in range(0, b.numel(), CHUNK):
        y = b[start:start + CHUNK].float()
        finite = torch.isfinite(y)
        if bool(finite.any()):
            scale = max(scale, float(y[finite].abs().max()))
    bound = GROSS_RELATIVE * scale
    beyond = 0
    for start in range(0, b.numel(), CHUNK):
        x, y = a[start:start + CHUNK].float(), b[start:start + CHUNK].float()
        both = torch.isfinite(x) & torch.isfinite(y)
        same_special = (torch.isnan(x) & torch.isnan(y)) | (~torch.isnan(x) & ~torch.isnan(y) & (x == y))
        nonfinite += int((~both & ~same_special).sum())
        if bool(both.any()):
            diff = (x - y).abs()[both]
            worst = max(worst, float(diff.max()))
            beyond += int((diff > bound).sum())
    return worst, scale, beyond, nonfinite


def gross_mismatch(got: Any, want: Any) -> str:
    """What differs grossly between two forward outputs (``""`` when nothing does): a count or
    shape or dtype class, NaN or infinity placement, or elements further than
    :data:`GROSS_RELATIVE` of ``want``'s largest finite magnitude; integer and boolean outputs
    must be equal. ``got`` and ``want`` are tensors or (nested) lists, tuples or dicts of them."""
    a, b = _tensors(got), _tensors(want)
    if len(a) != len(b):
        return f"{len(a)} output tensor(s) against {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if tuple(x.shape) != tuple(y.shape):
            return f"output {i}: shape {tuple(x.shape)} against {tuple(y.shape)}"
        if y.numel() == 0:
            continue
        if y.dtype.is_floating_point or y.dtype.is_complex:
            if y.dtype.is_complex:
                x, y = torch.view_as_real(x), torch.view_as_real(y)
            worst, scale, beyond, nonfinite = _float_mismatch(x, y)
            if nonfinite:
                return f"output {i}: {nonfinite} element(s) where one side is NaN or infinite and the other is not"
            if beyond:
                return (f"output {i}: {beyond} of {y.numel()} element(s) further than {GROSS_RELATIVE:g} of the "
                        f"largest magnitude ({scale:.4g}) from it, up to {worst:.4g}")
        elif not torch.equal(x.to(y.dtype), y):
            differ = int((x.to(y.dtype) != y).sum())
            return f"output {i}: {differ} of {y.numel()} element(s) differ"
    return ""


def check_timed_outputs(output: Any, callables: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Compare ``output`` (the candidate's, after timing) with the truth's at the same inputs.

    Returns ``{"against": "reference" | "baseline", "mismatch": text}`` (``mismatch`` empty when
    they agree), with ``"baseline_too": text`` where a Triton baseline misses the reference
    alike, or ``{"skipped": why}`` when the truth's output could not be made (out of device
    memory at this size, or it raised: its failure is not the candidate's)."""
    against = "reference" if "reference" in callables else "baseline"
    try:
        want = callables[against]()
    except torch.OutOfMemoryError:
        return {"against": against, "skipped": "out of device memory for one more output at this size"}
    except Exception as exc:  # noqa: BLE001 - the truth's own failure is reported, never the candidate's
        return {"against": against, "skipped": f"the {against} raised: {type(exc).__name__}: {exc}"[:300]}
    found = {"against": against, "mismatch": gross_mismatch(output, want)}
    del want
    if found["mismatch"] and against == "reference" and "baseline" in callables:
        try:
            baseline_off = gross_mismatch(callables["baseline"](), callables["reference"]())
        except Exception:  # noqa: BLE001 - out of memory or a failure: the candidate's mismatch stands
            baseline_off = ""
        if baseline_off:
            found["baseline_too"] = baseline_off
    return found
