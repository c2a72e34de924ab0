"""autotune_grid codemod: make the fixed launch grid of an autotuned kernel follow the config
the autotuner chose.

An autotuned kernel launched as ``kernel[(triton.cdiv(M, 128), triton.cdiv(N, 128))](...)``
is correct only for the configs whose tiles are 128 x 128: every other config launches too few
programs (part of the output is never written) or too many. Which config the autotuner picks
depends on the device, so such a kernel can pass on one GPU and be wrong on the next; the
verifier catches it by running every config (knowledge rule ``autotune_grid_uses_meta``; seen
on the H200 with Xe-Forge cases 39 and 55, whose configs range over 64 and 128).

For each ``@triton.autotune`` kernel launched with a tuple grid (inline, or through a variable
assigned once in the launching function and read only by the launch):

* the tuned tile sizes are the kernel's ``BLOCK_*`` constexpr parameters that the launch does
  not pass and that have no default (the autotuner must supply them);
* launch-grid axis ``i`` belongs to tile ``BLOCK_X`` when the kernel multiplies
  ``tl.program_id(i)`` (directly or through the name it is assigned to) by ``BLOCK_X``;
* in that axis's grid element, the literal divisor of ``triton.cdiv(n, <int>)`` becomes
  ``META["BLOCK_X"]`` and the grid becomes ``lambda META: (...)``.

Kernels it cannot handle are listed with the reason (a swizzled 1-D grid, an axis that two tile
sizes share, a grid assigned in several places, a divisor that is not a literal).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from xeforge_core.codemods.autotune import _BLOCK, _Collect, _lambda, _Launch, _meta
from xeforge_core.codemods.common import (
    CodemodResult,
    bind_launch_args,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    is_constexpr_param,
    not_applicable,
    parse_kernels,
    program_id_tiles,
    still_parses,
)

NAME = "autotune_grid"
_CDIV = {"triton.cdiv", "cdiv", "tl.cdiv"}


class _Divisors(cst.CSTTransformer):
    """Replace the literal divisor of ``cdiv(n, <int>)`` with ``META[key]``."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.replaced: list[int] = []

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if dotted_name(updated.func) in _CDIV and len(updated.args) == 2:
            v = int_value(updated.args[1].value)
            if v is not None:
                self.replaced.append(v)
                return updated.with_changes(args=[updated.args[0], updated.args[1].with_changes(value=_meta(self.key))])
        return updated


@dataclass
class _GridPlan:
    kernel: str
    old: cst.BaseExpression          # the tuple expression (inline or assigned)
    new: cst.Lambda
    note: str


def _plan(fn: cst.FunctionDef, launch: _Launch, collect: _Collect) -> _GridPlan | str:
    name = fn.name.value
    params = list(fn.params.params)
    bound, _, unmatched = bind_launch_args([p.name.value for p in params], launch.call)
    if unmatched and unmatched[0].star:
        return f"kernel {name} is launched with *args/**kwargs; its tuned parameters cannot be told apart"
    tiles = {p.name.value for p in params if is_constexpr_param(p) and _BLOCK.match(p.name.value)
             and p.name.value not in bound and p.default is None}
    if not tiles:
        return f"kernel {name}: no BLOCK_* tile size is left to the autotuner"
    call = launch.call
    grid = call.func.slice[0].slice.value if isinstance(call.func, cst.Subscript) else None
    expr = grid
    if isinstance(grid, cst.Name):
        scope = collect.scopes.get(id(launch.host), None) if launch.host else collect.scopes[0]
        vals = scope.values.get(grid.value, []) if scope else []
        if len(vals) != 1 or scope.reads.get(grid.value, 0) != 1:
            return (f"kernel {name}: the launch grid `{grid.value}` is assigned or read in more than one "
                    "place; it cannot be rewritten safely")
        expr = vals[0]
    if isinstance(expr, cst.Lambda):
        return f"kernel {name}: the launch grid is already a function of the chosen config"
    if not isinstance(expr, cst.Tuple):
        return f"kernel {name}: the launch grid `{code_of(expr) if expr is not None else '?'}` is not a tuple"
    axes = program_id_tiles(fn, tiles)
    shared = {a: t for a, t in axes.items() if len(t) > 1}
    if shared:
        a, t = next(iter(shared.items()))
        return f"kernel {name}: program id {a} is multiplied by several tile sizes ({', '.join(sorted(t))})"
    if not axes:
        return (f"kernel {name}: no tl.program_id(axis) is multiplied by a tuned tile size (a swizzled "
                "or 1-D grid); the grid's tile sizes cannot be matched to axes")
    elements = list(expr.elements)
    changed: list[str] = []
    for i, el in enumerate(elements):
        tile = next(iter(axes.get(i, set())), None)
        if tile is None:
            continue
        rw = _Divisors(tile)
        new_value = el.value.visit(rw)
        if rw.replaced:
            elements[i] = el.with_changes(value=new_value)
            changed.append(f"axis {i}: {', '.join(str(v) for v in rw.replaced)} -> META[\"{tile}\"]")
    if not changed:
        return (f"kernel {name}: the launch grid `{code_of(expr)}` has no literal triton.cdiv divisor on the "
                f"axes of its tuned tiles ({', '.join(sorted(tiles))})")
    new = _lambda(expr.with_changes(elements=elements))
    note = (f"kernel {name} is autotuned over {', '.join(sorted(tiles))} but its launch grid fixed the tile "
            f"sizes ({'; '.join(changed)}); the grid now reads them from the chosen config, so every config "
            "covers the whole output")
    return _GridPlan(kernel=name, old=expr, new=new, note=note)


class _Apply(cst.CSTTransformer):
    def __init__(self, plans: list[_GridPlan]) -> None:
        super().__init__()
        self.by_id = {id(p.old): p.new for p in plans}

    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.BaseExpression:
        return self.by_id.get(id(original), updated)


def _plans(source: str) -> tuple[cst.Module, list[_GridPlan], list[str]] | CodemodResult:
    """The parsed module, a plan per fixable launch and the reasons for the others."""
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    parsed, kernels = found
    collect = _Collect(set(kernels))
    parsed.visit(collect)
    plans: list[_GridPlan] = []
    reasons: list[str] = []
    for name, fn in kernels.items():
        if not any(is_autotune_decorator(d) for d in fn.decorators):
            continue
        for launch in (lc for lc in collect.launches if lc.kernel == name):
            plan = _plan(fn, launch, collect)
            if isinstance(plan, str):
                reasons.append(plan)
            else:
                plans.append(plan)
    return parsed, plans, reasons


def kernels_with_fixed_grids(source: str) -> list[str]:
    """The autotuned kernels of ``source`` whose launch grid this codemod would make follow the
    chosen config (empty when none, or when ``source`` does not parse)."""
    found = _plans(source)
    return [] if isinstance(found, CodemodResult) else list(dict.fromkeys(p.kernel for p in found[1]))


def grid_follows_autotune(source: str) -> CodemodResult:
    """Apply the rewrite in the module docstring to ``source`` (a kernel module).

    Returns a :class:`CodemodResult`: changed with one note per kernel fixed, or not applicable
    with the reasons (no autotuned kernel, grids already reading META, or a grid it cannot
    match to the kernel's program ids). Never executes the code; raises nothing on bad input.
    """
    found = _plans(source)
    if isinstance(found, CodemodResult):
        return found
    parsed, plans, reasons = found
    if not plans:
        return not_applicable(NAME, source, "; ".join(reasons) or "no autotuned kernel with a fixed launch grid")
    code = parsed.visit(_Apply(plans)).code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    return CodemodResult(codemod=NAME, source=code, changed=code != source,
                         notes=[p.note for p in plans] + [f"not rewritten: {r}" for r in reasons])
