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
problem's dtype), else the baseline; each side runs once more on fresh inputs of its own (a
kernel that writes its input in place would otherwise be compared on inputs already processed). Where the reference and a Triton baseline both exist and the
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
#: Integer outputs (indices) count as grossly wrong where more than this share of elements differ.
INTEGER_SHARE = 0.01
#: Elements compared at once (the outputs at a published size can be gigabytes).
CHUNK = 1 << 24


def flat_tensors(out: Any) -> list[torch.Tensor]:
    """The tensors of a forward output (a tensor, or nested lists, tuples or dicts of them), in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in flat_tensors(item)]
    if isinstance(out, dict):
        return [t for item in out.values() for t in flat_tensors(item)]
    return []


def _float_mismatch(got: torch.Tensor, want: torch.Tensor, relative: float) -> tuple[float, float, int, int]:
    """(largest |got - want| where both are finite, largest finite |want|, elements past the
    gross bound, elements whose NaN or infinity differs), chunk by chunk in float32."""
    a, b = got.detach().reshape(-1), want.detach().reshape(-1)
    worst, scale, nonfinite = 0.0, 0.0, 0
    for start in range(0, b.numel(), CHUNK):
        y = b[start:start + CHUNK].float()
        finite = torch.isfinite(y)
        if bool(finite.any()):
            scale = max(scale, float(y[finite].abs().max()))
    bound = relative * scale
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


def gross_mismatch(got: Any, want: Any, relative: float = GROSS_RELATIVE) -> str:
    """What differs grossly between two forward outputs (``""`` when nothing does): a count or
    shape or dtype class, NaN or infinity placement, or elements further than ``relative`` (by
    default :data:`GROSS_RELATIVE`) of ``want``'s largest finite magnitude; integer and boolean
    outputs must be equal. ``got`` and ``want`` are tensors or (nested) lists, tuples or dicts of
    them."""
    a, b = flat_tensors(got), flat_tensors(want)
    if len(a) != len(b):
        return f"{len(a)} output tensor(s) against {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if tuple(x.shape) != tuple(y.shape):
            return f"output {i}: shape {tuple(x.shape)} against {tuple(y.shape)}"
        if y.numel() == 0:
            continue
        if y.dtype.is_floating_point or y.dtype.is_complex:
            if y.dtype.is_complex:
                if not x.dtype.is_complex:
                    return f"output {i}: {x.dtype} against {y.dtype}"
                x, y = torch.view_as_real(x), torch.view_as_real(y)
            worst, scale, beyond, nonfinite = _float_mismatch(x, y, relative)
            if nonfinite:
                return f"output {i}: {nonfinite} element(s) where one side is NaN or infinite and the other is not"
            if beyond:
                return (f"output {i}: {beyond} of {y.numel()} element(s) further than {relative:g} of the "
                        f"largest magnitude ({scale:.4g}) from it, up to {worst:.4g}")
        elif not torch.equal(x.to(y.dtype), y):
            # indices of equal values (an argmax over float16, where ties are common at large
            # sizes) may differ without a fault: a few differing elements are not gross
            differ = int((x.to(y.dtype) != y).sum())
            if differ > INTEGER_SHARE * y.numel():
                return f"output {i}: {differ} of {y.numel()} element(s) differ"
    return ""


def check_timed_outputs(call: Callable[[str], Any], names: list[str]) -> dict[str, Any]:
    """Compare the candidate's output with the truth's at the timed size, each computed by
    ``call(name)`` (``name`` among ``names``: ``candidate``, ``baseline``, ``reference``) on fresh
    inputs of its own, so neither sees inputs another call modified in place.

    Returns ``{"against": "reference" | "baseline", "mismatch": text}`` (``mismatch`` empty when
    they agree), with ``"baseline_too": text`` where a Triton baseline misses the reference
    alike, or ``{"skipped": why}`` when the comparison could not be made (out of device memory
    for one more input set and output at this size, or a call raised: the timed calls ran, so a
    failure here is not held against the candidate)."""
    against = "reference" if "reference" in names else "baseline"
    found: dict[str, Any] = {"against": against}
    try:
        got = call("candidate")
        want = call(against)
        found["mismatch"] = gross_mismatch(got, want)
        del got
        if found["mismatch"] and against == "reference" and "baseline" in names:
            found["baseline_too"] = gross_mismatch(call("baseline"), want)
            if not found["baseline_too"]:
                del found["baseline_too"]
    except torch.OutOfMemoryError:
        return {"against": against, "skipped": "out of device memory for one more input set at this size"}
    except Exception as exc:  # noqa: BLE001 - the comparison's own failure is reported, never the candidate's
        return {"against": against, "skipped": f"{type(exc).__name__}: {exc}"[:300]}
    return found
