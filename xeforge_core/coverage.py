"""Launch-grid coverage: every grid axis that grows with the input is checked with several
programs.

A candidate that ignores ``tl.program_id(1)`` is right whenever axis 1 has one program, which
is exactly what a small correctness shape gives a tiled kernel (a 40x48 GEMM in one 64x64
tile). The candidate job records the grid of every launch at each correctness variant, and runs
the candidate once at a *probe*: the first correctness variant with every size doubled. An
axis whose program count grew there grows with the input. When such an axis ran with fewer than
``MIN_PROGRAMS`` programs at every checked variant, ``derive_grid_variant`` scales the first
variant up (by a power of two, predicted from the growth seen at the probe) until each such
axis has at least ``MIN_PROGRAMS`` programs, within a size budget, and the verifier checks the
candidate there against the truth as well. Nothing here runs kernels: the worker reports the
grids, this module decides. The verifier does this only where no size was derived from the
kernels' tiles (``xeforge_core.sizes``, whose size gives every growing axis 3 programs already);
its size budget is the one that module keeps to as well.
"""

from __future__ import annotations

import math
from typing import Any

from xeforge_core.problem.model import Problem, Variant
from xeforge_core.problem.scaling import scaled_variant, variant_input_elements

#: Programs each growing grid axis should have in at least one checked variant ("3 is better"
#: than 2: an off-by-one in the program-to-tile mapping shows only past the second program).
MIN_PROGRAMS = 3

#: Largest scale factor a derived variant may use.
MAX_SCALE = 64

#: Largest input (elements) a derived variant may have: on cpu (Triton's interpreter) and on a GPU.
BUDGET_ELEMENTS = {"cpu": 1 << 20, "gpu": 1 << 26}

#: Largest flop count of a derived variant on cpu: about 20 s in Triton's interpreter at its
#: measured 1.5e8 FLOP/s (``verify.INTERPRETER_FLOP_PER_S``).
CPU_FLOP_BUDGET = 3e9


def grid_probe_variant(problem: Problem, variant: Variant) -> Variant | None:
    """``variant`` with every size doubled, named ``<name>-probe`` (``None`` when nothing
    scales)."""
    return scaled_variant(problem, variant, 2, f"{variant.name}-probe",
                          why="grid probe: every size doubled to see which grid axes grow")


def _axes(grid: Any) -> list[int]:
    return [int(g) for g in (list(grid) + [1, 1, 1])[:3]]


def growing_axes(base: dict[str, Any], probe: dict[str, Any]) -> dict[str, list[tuple[int, int, int]]]:
    """``{kernel: [(axis, programs at base, programs at probe), ...]}`` for the axes whose
    program count grew from the base variant to the probe."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for kernel, g0 in base.items():
        g1 = probe.get(kernel)
        if g1 is None:
            continue
        a, b = _axes(g0), _axes(g1)
        grew = [(i, a[i], b[i]) for i in range(3) if b[i] > a[i] and a[i] >= 1]
        if grew:
            out[kernel] = grew
    return out


def coverage_gaps(grids: dict[str, dict[str, Any]], base_name: str, probe: dict[str, Any]
                  ) -> list[tuple[str, int, int, int, float]]:
    """``(kernel, axis, programs at the base variant, most programs seen at any checked
    variant, growth per doubling)`` for each growing axis that never reached ``MIN_PROGRAMS``."""
    base = grids.get(base_name) or {}
    gaps = []
    for kernel, axes in growing_axes(base, probe).items():
        for axis, g0, g1 in axes:
            seen = max((_axes(per[kernel])[axis] for per in grids.values() if kernel in per), default=g0)
            if seen < MIN_PROGRAMS:
                gaps.append((kernel, axis, g0, seen, g1 / g0))
    return gaps


def derive_grid_variant(problem: Problem, base: Variant, grids: dict[str, dict[str, Any]],
                        probe: dict[str, Any], *, device_type: str) -> tuple[Variant | None, str]:
    """The derived variant that gives every growing axis ``MIN_PROGRAMS`` programs (or at least
    2 when the budget allows no more), and a sentence on what was done; ``(None, "")`` when
    coverage is already there, ``(None, why)`` when no variant fits the budget.

    Args:
        problem: the problem (its spec or inputs module is scaled).
        base: the first correctness variant (the one probed).
        grids: ``{variant: {kernel: [g0, g1, g2]}}`` seen at the correctness variants.
        probe: ``{kernel: [g0, g1, g2]}`` seen at the probe.
        device_type: ``cpu`` (interpreter budget) or a GPU type.
    """
    gaps = coverage_gaps(grids, base.name, probe)
    if not gaps:
        return None, ""
    budget = BUDGET_ELEMENTS["cpu" if device_type == "cpu" else "gpu"]

    def doublings(target: int) -> int:
        need = 1
        for _, _, g0, _, growth in gaps:
            if growth <= 1:
                continue
            need = max(need, math.ceil(math.log(target / max(g0, 1)) / math.log(growth) - 1e-9))
        return need

    what = "; ".join(f"axis {axis} of {kernel} ran {seen} program{'s' if seen != 1 else ''}"
                     for kernel, axis, _, seen, _ in gaps)
    for target in (MIN_PROGRAMS, 2):
        k = doublings(target)
        while k >= 1:
            scale = 2 ** k
            if scale > MAX_SCALE:
                k -= 1
                continue
            name = f"{base.name}-grid{scale}"
            why = (f"launch-grid coverage: {what} at every checked size, so {base.name} was scaled by {scale} "
                   f"to give each axis that grows with the input at least {target} programs")
            variant = scaled_variant(problem, base, scale, name, why=why)
            if variant is None:
                return None, f"{what} at every checked size, and the problem's sizes cannot be scaled"
            elements = variant_input_elements(problem, variant)
            too_big = elements is not None and elements > budget
            if device_type == "cpu" and variant.flop and variant.flop > CPU_FLOP_BUDGET:
                too_big = True
            if not too_big:
                return variant, why
            k -= 1
        if doublings(target) < 1:
            break
    return None, (f"{what} at every checked size; no larger variant fits the size budget "
                  f"({budget} input elements on {device_type}), so that axis is checked with few programs")
