"""Whether the truth's own output is computed from memory nothing wrote.

A baseline whose kernel reads past the end of a tensor (a per-column ``scale`` of 3 elements read
for all 257 columns, because the spec's ``inits`` size it by another dimension) returns, at those
elements, whatever the neighbouring memory held. The baseline job saves that as the truth; a
candidate that runs in another process, where fresh memory is poisoned with NaN, then "leaves
elements unwritten" against it, and the fault would be pinned on the candidate. So the baseline
job calls the truth once more per variant on a freshly built model and fresh inputs:

* in Triton's interpreter (cpu) under :class:`xeforge_core.worker.bounds.BoundsCheck`, which
  names every load, store or atomic outside the storages passed to the launch (kernel, line,
  argument, lanes);
* on a GPU after poisoning the caching allocator's free memory with NaN
  (``DeviceOps.poison_allocator``): an element that held a value in the first call and is NaN
  now was computed from memory nothing wrote (compute-sanitizer's memcheck would name the
  access; it is not run here, the NaN is the evidence). Where the fresh blocks happen to hold
  stale finite values instead, the two calls still differ beyond the tolerance: with the same
  weights, inputs and autotune choice, a kernel that reads only what was written gives the same
  answer (up to the rounding of atomics, which the tolerance covers).

Worker-side: torch, triton (through ``bounds``) and the standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from xeforge_core.worker.bounds import BoundsCheck
from xeforge_core.worker.compare import Tolerance, compare_outputs, summarize_failure


def _place(access: dict[str, Any]) -> str:
    """``kernel k reads out of bounds at line 37 (argument s_ptr, 254 lane(s), the first 1 byte(s)
    after its 6-byte storage)`` for one place ``BoundsCheck`` recorded."""
    verb = {"read": "reads", "write": "writes", "atomic": "updates"}.get(access.get("access", ""), "accesses")
    where = f" at line {access['line']}" if access.get("line") else ""
    text = f"kernel {access.get('kernel') or '?'} {verb} out of bounds{where}"
    if access.get("argument"):
        text += (f" (argument {access['argument']}, {access.get('count', 1)} lane(s), the first "
                 f"{access.get('distance')} byte(s) {access.get('side')} its {access.get('allocation')}-byte "
                 "storage)")
    return text


def _poison_surfaced(first: list[Any], again: list[Any]) -> int:
    """Floating-point elements finite in ``first`` and NaN in ``again`` (outputs aligned)."""
    count = 0
    for a, b in zip(first, again):
        if (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype.is_floating_point and b.dtype.is_floating_point):
            count += int((torch.isfinite(a) & torch.isnan(b)).sum())
    return count


def unwritten_truth(ops: Any, call_fresh: Callable[[], list[Any]], outputs: list[Any], truth: str,
                    variant: str, tol: Tolerance | None = None) -> str | None:
    """Why the truth's ``outputs`` (flat, as saved) on ``variant`` depend on memory nothing
    wrote, or ``None`` where nothing shows it.

    ``ops`` is the worker's ``DeviceOps``; ``call_fresh()`` builds the truth's model and inputs
    afresh and returns its flat outputs (it may raise ``WorkerError``: then nothing is
    concluded); ``truth`` names it (``baseline``/``reference``). On cpu the call runs under the
    interpreter's bounds check, on a GPU after poisoning fresh memory (see the module docstring);
    ``tol`` (the variant's tolerance, default: the dtype's) judges whether the GPU's two calls
    differ.
    """
    from xeforge_core.worker.errors import WorkerError

    try:
        if ops.interpreter:
            with BoundsCheck() as check:
                call_fresh()
            if not check.accesses:
                return None
            places = "; ".join(_place(a) for a in check.accesses[:3])
            return (f"on variant {variant} the {truth}'s own {places}: {check.lanes} lane(s) in all touch memory "
                    "outside every tensor passed to the launch, so its output there is not a function of its "
                    "inputs")
        ops.poison_allocator(64 << 20)
        again = call_fresh()
    except WorkerError:
        return None
    surfaced = _poison_surfaced(outputs, again)
    if not surfaced:
        same, comps, _, note = compare_outputs(again, outputs, tol or Tolerance(), poisoned=False)
        if same:
            return None
        return (f"on variant {variant} the {truth} called again on freshly allocated (NaN-poisoned) weights and "
                f"inputs of the same values gives another answer ({summarize_failure(comps, note)}): its output "
                "depends on memory nothing wrote (out-of-bounds or uninitialised reads) or on state its model "
                "keeps between calls")
    return (f"on variant {variant} {surfaced} element(s) of the {truth}'s own output held values, and hold NaN when "
            "it is called again on freshly allocated (NaN-poisoned) weights and inputs: the "
            f"{truth} computes them from memory nothing wrote (out-of-bounds or uninitialised reads)")


def unwritten_truth_summary(truth: str, info: dict[str, Any]) -> str:
    """The verdict's sentence for ``info`` (``{"variant", "note"}``) saved by the baseline job."""
    return (f"the {truth}'s output is not determined by its inputs and weights: {info['note']}. No candidate can be checked against it "
            f"element by element; the fault is the {truth}'s (or its spec's: check that the inits size every "
            "tensor the kernels index), not the candidate's")
