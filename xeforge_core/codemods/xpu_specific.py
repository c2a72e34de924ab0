"""xpu_specific codemod: num_warps, GRF mode and tile swizzling from the target's profile.

For each ``@triton.jit`` kernel that calls ``tl.dot`` and is launched once:

* **tile swizzling** (both targets): a 2-D launch grid ``(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))``
  with ``pid_m = tl.program_id(0)`` / ``pid_n = tl.program_id(1)`` becomes a 1-D grid whose
  program ids are grouped ``GROUP_SIZE_M`` tile-rows at a time, so that programs running together
  share A and B tiles in L2 (``GROUP_SIZE_M`` becomes a constexpr parameter; the launch passes
  ``options["group_size_m"]``, default 8). Xe-Forge ``xpu_optimizations.yaml`` via
  ``xe-hardware-notes.md`` "Tiles / grids": swizzling needs a 1-D grid; ``GROUP_SIZE_M=1`` is
  the no-swizzle fallback.
* **num_warps** (both targets; kernels not autotuned): a launch value that is not a power of two
  is rounded down to one; a launch without one gets one sized to the tile: 32 for tiles of
  256×256 and more on xpu (with GRF 256), 16 (xpu) / 8 (cuda) from 128×128, 8 / 4 from 64×64,
  else 4 (``xpu_warp_count`` rule in the same notes: do not force 32 warps below 256×256). It
  never exceeds the profile's ``max_warps_per_workgroup`` (32 with GRF 256).
* **GRF mode** (xpu only; kernels not autotuned): ``grf_mode="256"`` at the launch for tiles of
  128×128 and more when the profile lists GRF 256 (large register file for large GEMM tiles,
  same notes, "Registers / GRF"). On cuda there is no GRF mode: the note says so.

Autotuned kernels keep warps and GRF in their configs (the autotuning stage owns them).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.autotune import _BLOCK, _calls_dot, _Collect, _Scope
from xeforge_core.codemods.common import (
    PROGRAM_ID,
    CodemodResult,
    bind_launch_args,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    is_constexpr_param,
    is_kernel,
    keyword_arg,
    not_applicable,
    parse_kernels,
    program_id_tiles,
    still_parses,
)
from xeforge_core.codemods.registry import CodemodSettings, register
from xeforge_core.codemods.spaces import profile_value, resolve_profile

NAME = "xpu_specific"
_SWIZZLE_NAMES = {"pid", "num_pid_m", "num_pid_n", "num_pid_in_group", "group_id", "first_pid_m",
                  "group_size_m", "GROUP_SIZE_M"}


def _pow2_floor(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def _warps_for(tile: int, target: str, large_grf: bool) -> int:
    if target == "xpu":
        if tile >= 256 * 256 and large_grf:
            return 32
        return 16 if tile >= 128 * 128 else 8 if tile >= 64 * 64 else 4
    return 8 if tile >= 128 * 128 else 4


def _program_ids(fn: cst.FunctionDef) -> tuple[dict[int, tuple[str, cst.SimpleStatementLine]], int, set[str]]:
    """``axis -> (name, statement)`` for ``name = tl.program_id(axis)`` statements, the total
    number of ``tl.program_id`` calls, and every name used in the kernel."""
    found: dict[int, tuple[str, cst.SimpleStatementLine]] = {}
    calls = 0
    names: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal calls
            if dotted_name(node.func) in PROGRAM_ID:
                calls += 1

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            if len(node.body) != 1 or not isinstance(node.body[0], cst.Assign):
                return
            a = node.body[0]
            if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
                return
            v = a.value
            if isinstance(v, cst.Call) and dotted_name(v.func) in PROGRAM_ID \
                    and v.args:
                axis = int_value(v.args[0].value)
                if axis is not None:
                    found[axis] = (a.targets[0].target.value, node)

    fn.visit(_V())
    return found, calls, names


def _cdiv_parts(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    if isinstance(expr, cst.Call) and dotted_name(expr.func) in {"triton.cdiv", "cdiv"} and len(expr.args) == 2:
        return expr.args[0].value, expr.args[1].value
    return None


def _append_spaced(orig: list[Any], new: list[Any]) -> list[Any]:
    """``orig + new`` with the separators ``orig`` already uses: new items (and the old last one)
    take the separator between the original items; the last new item takes the original trailing
    comma (or none)."""
    if not new:
        return list(orig)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if not orig:
        return [n.with_changes(comma=space) for n in new[:-1]] + [new[-1]]
    sep = orig[-2].comma if len(orig) >= 2 and isinstance(orig[-2].comma, cst.Comma) else space
    trailing = orig[-1].comma
    out = list(orig[:-1]) + [orig[-1].with_changes(comma=sep)]
    out.extend(n.with_changes(comma=sep) for n in new[:-1])
    out.append(new[-1].with_changes(comma=trailing))
    return out


class _Plan:
    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.kernel_fn: Any = None  # new FunctionDef
        self.call_new: cst.Call | None = None
        self.grid_line: tuple[cst.SimpleStatementLine, Any] | None = None
        self.notes: list[str] = []


def _swizzle(fn: cst.FunctionDef, call: cst.Call, host_scope: _Scope, bound: dict[str, cst.Arg],
             blocks: set[str], group: int) -> tuple[cst.FunctionDef, cst.BaseExpression, Any, str] | str:
    """Kernel and grid rewritten for a swizzled 1-D grid, or the reason it cannot be."""
    name = fn.name.value
    pids, calls, used = _program_ids(fn)
    if set(pids) != {0, 1} or calls != 2:
        return f"kernel {name}: not the plain 2-D tile grid (pid_m = tl.program_id(0), pid_n = tl.program_id(1))"
    if used & _SWIZZLE_NAMES:
        clash = sorted(used & _SWIZZLE_NAMES)[0]
        return f"kernel {name} already uses the name {clash}; the swizzle would shadow it"
    pid_m, line_m = pids[0]
    pid_n, line_n = pids[1]
    axes = program_id_tiles(fn, blocks)
    bm, bn = (next(iter(axes[a])) if len(axes.get(a, ())) == 1 else None for a in (0, 1))
    if not bm or not bn:
        return f"kernel {name}: could not tell which BLOCK_* tiles axis 0 and axis 1"
    grid = call.func.slice[0].slice.value if isinstance(call.func, cst.Subscript) else None
    grid_line = None
    if isinstance(grid, cst.Name):
        vals = host_scope.values.get(grid.value) or []
        lines = host_scope.assigns.get(grid.value) or []
        if len(vals) != 1 or len(lines) != 1 or host_scope.reads.get(grid.value, 0) != 1:
            return f"kernel {name}: the launch grid `{grid.value}` is assigned or used more than once"
        grid_line = lines[0]
        grid = vals[0]
    lam = None
    if isinstance(grid, cst.Lambda):
        lam, grid = grid, grid.body
    if not isinstance(grid, cst.Tuple) or len(grid.elements) != 2:
        return f"kernel {name}: the launch grid is not a 2-tuple of tile counts"
    parts = [_cdiv_parts(e.value) for e in grid.elements]
    if parts[0] is None or parts[1] is None:
        return f"kernel {name}: the launch grid is not (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))"
    # kernel size parameters passed as the grid's numerators
    size_params = []
    from xeforge_core.codemods.autotune import gemm_dims

    dims = gemm_dims(fn) or {}
    for axis, (numer, _) in enumerate(parts):
        text = code_of(numer)
        match = [p for p, a in bound.items() if code_of(a.value) == text]
        if len(match) > 1:  # the same value passed twice (a size and a contiguous stride): take the size
            match = [p for p in match if p == dims.get("MN"[axis])] or match
        if len(match) != 1:
            return f"kernel {name}: the grid's `{text}` is not one of the kernel's arguments"
        size_params.append(match[0])
    m_param, n_param = size_params
    swz = (
        f"pid = tl.program_id(0)\n"
        f"num_pid_m = tl.cdiv({m_param}, {bm})\n"
        f"num_pid_n = tl.cdiv({n_param}, {bn})\n"
        f"num_pid_in_group = GROUP_SIZE_M * num_pid_n\n"
        f"group_id = pid // num_pid_in_group\n"
        f"first_pid_m = group_id * GROUP_SIZE_M\n"
        f"group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)\n"
        f"{pid_m} = first_pid_m + ((pid % num_pid_in_group) % group_size_m)\n"
        f"{pid_n} = (pid % num_pid_in_group) // group_size_m\n"
    )
    new_stmts = list(cst.parse_module(swz).body)
    new_stmts[0] = new_stmts[0].with_changes(leading_lines=line_m.leading_lines)

    class _K(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
            if original is line_m:
                return cst.FlattenSentinel(new_stmts)
            if original is line_n:
                return cst.RemoveFromParent()
            return updated

    new_fn = fn.visit(_K())
    params = list(new_fn.params.params)
    has_default = any(p.default is not None for p in params)
    group_param = cst.parse_module(
        f"def f(GROUP_SIZE_M: tl.constexpr{' = 1' if has_default else ''}):\n    pass\n").body[0].params.params[0]
    params = _append_spaced(params, [group_param])
    new_fn = new_fn.with_changes(params=new_fn.params.with_changes(params=params))
    flat = cst.Tuple(elements=[cst.Element(cst.BinaryOperation(
        left=grid.elements[0].value, operator=cst.Multiply(
            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")),
        right=grid.elements[1].value))])
    new_grid: cst.BaseExpression = lam.with_changes(body=flat) if lam is not None else flat
    return new_fn, new_grid, grid_line, f"{m_param}/{bm} x {n_param}/{bn}"


def apply_xpu_knobs(source: str, *, target: str = "xpu", arch: str | None = None, profile: Any = None,
                    options: dict[str, Any] | None = None) -> CodemodResult:
    """Apply tile swizzling, num_warps and GRF-mode knobs (module docstring) for ``target``
    (``xpu`` or ``cuda``). ``profile`` is a knowledge-base ``HardwareProfile`` (or its dict);
    by default the target's reference profile. ``options``: ``group_size_m`` (default 8),
    ``swizzle``/``num_warps``/``grf_mode`` (``False`` to skip a knob).
    Returns a :class:`CodemodResult`, not applicable with the reasons when nothing applies."""
    options = dict(options or {})
    target = "cuda" if target == "cpu" else target
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    parsed, kernels = found
    profile = resolve_profile(profile, target, arch)
    grf_modes = [str(m) for m in (profile_value(profile, "grf_modes") or [])]
    max_warps = profile_value(profile, "max_warps_per_workgroup") or (64 if target == "xpu" else 32)
    group = int(options.get("group_size_m", 8))
    collect = _Collect(set(kernels))
    parsed.visit(collect)
    reasons: list[str] = []
    plans: dict[str, _Plan] = {}
    by_call: dict[int, _Plan] = {}
    grid_lines: dict[int, Any] = {}
    for name, fn in kernels.items():
        if not _calls_dot(fn):
            reasons.append(f"kernel {name} has no tl.dot: these knobs are for GEMM-like tiles")
            continue
        launches = [lc for lc in collect.launches if lc.kernel == name]
        if len(launches) != 1:
            reasons.append(f"kernel {name} is launched {len(launches)} times in this module; "
                           "expected exactly one launch")
            continue
        launch = launches[0]
        call = launch.call
        params = list(fn.params.params)
        pnames = [p.name.value for p in params]
        blocks = {p.name.value for p in params if is_constexpr_param(p) and _BLOCK.match(p.name.value)}
        host_scope = collect.scopes.get(id(launch.host), _Scope()) if launch.host else _Scope()
        bound, opts, _ = bind_launch_args(pnames, call)
        autotuned = any(is_autotune_decorator(d) for d in fn.decorators)
        plan = _Plan(name)
        new_fn = fn
        new_call = call
        added: list[cst.Arg] = []
        # swizzle
        if options.get("swizzle", True):
            if "GROUP_SIZE_M" in pnames:
                reasons.append(f"kernel {name} already has GROUP_SIZE_M tile swizzling")
            else:
                got = _swizzle(fn, call, host_scope, bound, blocks, group)
                if isinstance(got, str):
                    reasons.append(got)
                else:
                    new_fn, new_grid, grid_line, dims = got
                    if grid_line is not None:
                        grid_lines[id(grid_line)] = grid_line.with_changes(
                            body=[grid_line.body[0].with_changes(value=new_grid)])
                    else:
                        new_call = new_call.with_changes(func=call.func.with_changes(
                            slice=[cst.SubscriptElement(cst.Index(new_grid))]))
                    added.append(keyword_arg("GROUP_SIZE_M", cst.Integer(str(group))))
                    plan.notes.append(f"kernel {name}: 1-D grid with GROUP_SIZE_M={group} tile swizzling over "
                                      f"{dims} tiles (programs that run together share tiles in L2)")
        # tile area for warps / GRF
        def _val(b: str, bound: dict[str, cst.Arg] = bound, host_scope: _Scope = host_scope) -> int | None:
            arg = bound.get(b)
            if arg is None:
                return None
            v = int_value(arg.value)
            if v is None and isinstance(arg.value, cst.Name):
                lits = host_scope.literals.get(arg.value.value) or collect.scopes[0].literals.get(arg.value.value)
                v = lits[0] if lits and len(lits) == 1 else None
            return v

        tile_dims = [_val(b) for b in sorted(blocks) if b != "BLOCK_K" and not b.endswith("_K")]
        tile = None
        if len(tile_dims) >= 2 and all(t is not None for t in tile_dims[:2]):
            tile = tile_dims[0] * tile_dims[1]  # type: ignore[operator]
        large_grf = target == "xpu" and "256" in grf_modes and tile is not None and tile >= 128 * 128
        if autotuned:
            reasons.append(f"kernel {name} is autotuned: num_warps and GRF mode belong in its configs")
        else:
            if options.get("grf_mode", True):
                if target != "xpu":
                    plan.notes.append(f"kernel {name}: GRF mode is an Intel-backend option with no meaning on "
                                      f"{target}; not applied")
                elif "grf_mode" in opts:
                    reasons.append(f"kernel {name} already sets grf_mode")
                elif large_grf:
                    added.append(keyword_arg("grf_mode", cst.SimpleString('"256"')))
                    plan.notes.append(f"kernel {name}: grf_mode=\"256\" (large register file for "
                                      f"{tile_dims[0]}x{tile_dims[1]} tiles)")
                else:
                    reasons.append(f"kernel {name}: tiles are small or unknown; default GRF mode kept")
            if options.get("num_warps", True):
                cap = min(int(max_warps), 32) if (large_grf or "grf_mode" in opts) else int(max_warps)
                if "num_warps" in opts:
                    v = int_value(opts["num_warps"].value)
                    if v is not None and (v & (v - 1) or v > cap):
                        nv = min(_pow2_floor(v), cap)
                        new_call = new_call.with_changes(args=[
                            a.with_changes(value=cst.Integer(str(nv))) if a.keyword is not None
                            and a.keyword.value == "num_warps" else a for a in new_call.args])
                        plan.notes.append(f"kernel {name}: num_warps {v} -> {nv} (a power of two, at most {cap})")
                    else:
                        reasons.append(f"kernel {name}: num_warps is already set to a valid value")
                elif tile is not None:
                    nv = min(_warps_for(tile, target, large_grf), cap)
                    added.append(keyword_arg("num_warps", cst.Integer(str(nv))))
                    plan.notes.append(f"kernel {name}: num_warps={nv} for {tile_dims[0]}x{tile_dims[1]} tiles "
                                      f"on {target}")
                else:
                    reasons.append(f"kernel {name}: tile sizes are not literals; num_warps left to the default")
        if not plan.notes or all("not applied" in n for n in plan.notes):
            reasons.extend(plan.notes)
            continue
        if added:
            new_call = new_call.with_changes(args=_append_spaced(list(new_call.args), added))
        plan.kernel_fn = new_fn
        plan.call_new = new_call
        plans[name] = plan
        by_call[id(call)] = plan
    if not plans:
        return not_applicable(NAME, source, "; ".join(reasons) or "no kernel to tune")

    class _Apply(cst.CSTTransformer):
        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
            plan = plans.get(original.name.value)
            if plan is not None and is_kernel(original) and plan.kernel_fn is not original:
                return plan.kernel_fn
            return updated

        def leave_Call(self, original: cst.Call, updated: cst.Call):
            plan = by_call.get(id(original))
            return plan.call_new if plan is not None else updated

        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
            return grid_lines.get(id(original), updated)

    code = parsed.visit(_Apply()).code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    notes = [n for p in plans.values() for n in p.notes]
    notes.extend(f"not changed: {r}" for r in reasons)
    return CodemodResult(codemod=NAME, source=code, changed=code != source, notes=notes)


@register("xpu_specific", "tile swizzling, num_warps and GRF mode for the target")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return apply_xpu_knobs(source, target=settings.target, arch=settings.arch, profile=settings.profile,
                           options=settings.options)
