"""persistent_kernel codemod: a tile-grid kernel becomes a persistent loop over its tiles.

Recognised: a kernel (not autotuned) launched once on a grid ``(cdiv(M, BM), cdiv(N, BN))`` or
``(cdiv(M, BM), cdiv(N, BN), batch)`` whose body starts with ``pid_m = tl.program_id(0)``,
``pid_n = tl.program_id(1)`` (and ``pid_b = tl.program_id(2)``), reading no other program id.

The rewrite launches about ``PROGRAMS_PER_UNIT`` programs per compute unit (SM / Xe core, read
from the device at run time; the search space's ``persistent`` kind gives the count) and each
program walks the tiles ``tile_id = pid, pid + programs, ...`` in a ``tl.range(...,
flatten=True)`` loop, so the compiler can overlap one tile's epilogue (its stores) with the next
tile's loads and there is no tail of half-empty waves. Statements that reassign a pointer
parameter (``a_ptr += pid_b * stride``, from batching) become tile-local names. The grid is
``(min(tiles, units * PROGRAMS_PER_UNIT),)``.

Knowledge rule ``persistent_only_large_grids``: it pays only with many tiles and a short
K loop per tile (store- or latency-bound). A batched (3-D) grid is rewritten; a 2-D grid only
when the problem's roofline is memory-bound (its intensity, from the spec's input bytes, below
the device's ridge point), else the codemod declines, saying so. Source: Triton
tutorial 09-persistent-matmul; Xe-Forge persistent_kernel_patterns.yaml.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.autotune import gemm_dims
from xeforge_core.codemods.common import (
    PROGRAM_ID,
    CodemodResult,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    not_applicable,
    parse_kernels,
    still_parses,
)
from xeforge_core.codemods.host import host_facts, host_functions, launch_counts
from xeforge_core.codemods.kernel_edit import (
    Edits,
    all_names,
    body_of,
    calls_named,
    fresh_name,
    insert_before_kernels,
    once_defs,
    parse_expr,
    rename,
    simple_assign,
    with_body,
    with_commas,
)
from xeforge_core.codemods.registry import CodemodSettings, register
from xeforge_core.codemods.spaces import SpaceError, default_config

NAME = "persistent_kernel"
UNITS_HELPER = "_compute_units"

_HELPER_SRC = f'''

def {UNITS_HELPER}(tensor):
    """Compute units (SMs, Xe cores) of the device ``tensor`` lives on, read at run time; a few
    on the cpu (Triton's interpreter), so a persistent loop still visits several tiles."""
    dev = tensor.device
    if dev.type == "cpu":
        return 2
    props = getattr(torch, dev.type).get_device_properties(dev)
    return getattr(props, "multi_processor_count", None) or getattr(props, "gpu_subslice_count", None) or 32
'''


def _problem_bound(problem: Any, profile: Any) -> tuple[str, str]:
    """(bound, why) from the roofline of the problem's default variant: ``memory``,
    ``compute`` or ``unknown``."""
    if problem is None:
        return "unknown", ""
    try:
        from xeforge_core.knowledge import HardwareProfile
        from xeforge_core.pipeline.prompts import problem_context

        prof = profile if isinstance(profile, HardwareProfile) else None
        if prof is None:
            from xeforge_core.codemods.spaces import resolve_profile

            found = resolve_profile(profile, "cuda", None)
            prof = found if isinstance(found, HardwareProfile) else None
        ctx = problem_context(problem, None, prof)
    except Exception:  # noqa: BLE001 - advisory only
        return "unknown", ""
    ai, ridge = ctx.get("arithmetic_intensity"), ctx.get("ridge_point")
    why = f"intensity {ai:.0f} FLOP/byte vs the ridge point {ridge:.0f}" if ai and ridge else ""
    return ctx.get("bound") or "unknown", why


def _plan(fn: cst.FunctionDef, grid: cst.BaseExpression, taken: set[str]) -> tuple[cst.FunctionDef, str] | str:
    name = fn.name.value
    if any(is_autotune_decorator(d) for d in fn.decorators):
        return f"kernel {name} is autotuned (make it persistent before autotuning)"
    if not isinstance(grid, cst.Tuple) or len(grid.elements) not in (2, 3):
        return f"kernel {name}: the launch grid is not a 2-D or 3-D tuple of tile counts"
    stmts = body_of(fn)
    pids: dict[int, tuple[int, str]] = {}
    for i, s in enumerate(stmts):
        a = simple_assign(s)
        if a is not None and isinstance(a[1], cst.Call) and dotted_name(a[1].func) in PROGRAM_ID and a[1].args:
            axis = int_value(a[1].args[0].value)
            if axis is not None:
                pids[axis] = (i, a[0])
    calls = calls_named(fn.body, PROGRAM_ID)
    axes = len(grid.elements)
    if set(pids) != set(range(axes)) or len(calls) != axes:
        return f"kernel {name}: not `pid = tl.program_id(axis)` once per grid axis (axes 0..{axes - 1})"
    dims = gemm_dims(fn)
    if dims is None:
        return f"kernel {name}: could not tell its M and N size parameters from the masks of its tiles"
    params = {p.name.value for p in fn.params.params}
    blocks = {p.name.value for p in fn.params.params if p.name.value in ("BLOCK_M", "BLOCK_N")}
    if blocks != {"BLOCK_M", "BLOCK_N"}:
        return f"kernel {name} has no BLOCK_M and BLOCK_N tile parameters"
    pm, pn = pids[0][1], pids[1][1]
    pb = pids[2][1] if axes == 3 else None
    taken |= all_names(fn) | params
    tile = fresh_name("tile_id", taken)
    npm, npn, ntiles = (fresh_name(n, taken) for n in ("num_pid_m", "num_pid_n", "num_tiles"))
    nbatch = fresh_name("n_batch", taken) if pb else None
    # pointer parameters reassigned in the body become tile-local names
    local: dict[str, str] = {}
    body: list[cst.BaseStatement] = []
    pid_lines = {i for i, _ in pids.values()}
    for i, s in enumerate(stmts):
        if i in pid_lines:
            continue
        if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.AugAssign) \
                and isinstance(s.body[0].target, cst.Name) and s.body[0].target.value in params:
            aug = s.body[0]
            target = aug.target.value  # type: ignore[attr-defined]
            new = fresh_name(f"{target}_tile", taken)
            op = code_of(aug.operator).strip().rstrip("=").strip()
            value = rename(aug.value, local)
            body.append(cst.parse_statement(f"{new} = {local.get(target, target)} {op} {code_of(value)}").with_changes(
                leading_lines=s.leading_lines))
            local[target] = new
            continue
        body.append(rename(s, local))  # type: ignore[arg-type]
    head = [
        f"{npm} = tl.cdiv({dims['M']}, BLOCK_M)",
        f"{npn} = tl.cdiv({dims['N']}, BLOCK_N)",
        f"{ntiles} = {npm} * {npn}" + (f" * {nbatch}" if nbatch else ""),
    ]
    loop_head = [f"{pm} = ({tile} // {npn}) % {npm}", f"{pn} = {tile} % {npn}"]
    if pb:
        loop_head.append(f"{pb} = {tile} // ({npm} * {npn})")
    head_stmts = [cst.parse_statement(t) for t in head]
    head_stmts[0] = head_stmts[0].with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(
        "# persistent: each program walks the tiles pid, pid + programs, ...; flatten lets one tile's "
        "stores overlap the next tile's loads"))])
    loop_src = f"for {tile} in tl.range(tl.program_id(0), {ntiles}, tl.num_programs(0), flatten=True):\n    pass\n"
    loop = cst.parse_statement(loop_src)
    loop_body = [cst.parse_statement(t) for t in loop_head] + body
    loop = loop.with_changes(body=loop.body.with_changes(body=loop_body))  # type: ignore[attr-defined]
    new_params = list(fn.params.params)
    if nbatch:
        at = max(i for i, p in enumerate(new_params) if p.annotation is None and p.default is None) + 1
        new_params.insert(at, cst.Param(cst.Name(nbatch)))
    new_params = with_commas(new_params)
    doc = [stmts[0]] if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(
        stmts[0].body[0], cst.Expr) and isinstance(stmts[0].body[0].value, cst.SimpleString) else []
    new_fn = with_body(fn.with_changes(params=fn.params.with_changes(params=new_params)), [*doc, *head_stmts, loop])
    return new_fn, nbatch or ""


def make_persistent(source: str, *, target: str = "xpu", arch: str | None = None, problem: Any = None,
                    profile: Any = None, **_: Any) -> CodemodResult:
    """Apply the persistent rewrite (module docstring) to ``source`` for ``target``.

    ``problem`` (a ``Problem``) and ``profile`` decide, by the roofline of the problem's default
    variant, whether the problem is memory-bound enough for a persistent grid to pay.
    Returns a :class:`CodemodResult`: changed with one note per kernel, or not applicable with
    the reason. Never executes the code."""
    target = "cuda" if target == "cpu" else target
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    module, kernels = found
    bound, why = _problem_bound(problem, profile)
    if "import torch" not in source:
        return not_applicable(NAME, source, "the module does not import torch, which the grid needs to read the "
                              "device's compute units")
    try:
        cfg, sid = default_config(target, arch, "persistent")
    except SpaceError as exc:
        return not_applicable(NAME, source, str(exc))
    per_unit = int(next(iter(cfg["kwargs"].values()), 2))
    counts = launch_counts(module, kernels)
    reasons: list[str] = []
    kernel_edits: dict[str, cst.FunctionDef] = {}
    stmt_edits: dict[int, Any] = {}
    notes: list[str] = []
    taken = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        host_defs = once_defs(facts.body, fn.body)
        for lc in facts.launches:
            if counts.get(lc.kernel) != 1 or lc.kernel in kernel_edits:
                continue
            grid = lc.grid
            if isinstance(grid, cst.Name):
                grid = host_defs.get(grid.value, grid)
            if bound == "compute" and isinstance(grid, cst.Tuple) and len(grid.elements) == 2:
                reasons.append(f"kernel {lc.kernel}: a 2-D tile grid of a compute-bound problem ({why}): each tile's K "
                               "loop is long, so a persistent grid would only trim the launch tail (rule "
                               "persistent_only_large_grids)")
                continue
            got = _plan(kernels[lc.kernel], grid, set(taken))
            if isinstance(got, str):
                reasons.append(got)
                continue
            new_fn, nbatch = got
            els = [code_of(e.value) for e in grid.elements]  # type: ignore[union-attr]
            tiles = " * ".join(f"({e})" if " " in e and not e.startswith("triton.cdiv") else e for e in els)
            first_tensor = next((a.value for a in lc.call.args if a.keyword is None and isinstance(a.value, cst.Name)),
                                None)
            if first_tensor is None:
                reasons.append(f"kernel {lc.kernel}: no tensor argument to read the device from")
                continue
            new_grid = parse_expr(f"(min({tiles}, {UNITS_HELPER}({code_of(first_tensor)}) * {per_unit}),)")
            args = list(lc.call.args)
            if nbatch:
                params = [p.name.value for p in kernels[lc.kernel].params.params]
                npos = len([a for a in args if a.keyword is None])
                at = max(i for i, p in enumerate(kernels[lc.kernel].params.params)
                         if p.annotation is None and p.default is None) + 1
                if at <= npos:
                    args.insert(at, cst.Arg(parse_expr(els[2]), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
                else:
                    reasons.append(f"kernel {lc.kernel}: its size arguments are passed by keyword")
                    continue
                del params
            call = lc.call.with_changes(func=lc.call.func.with_changes(  # type: ignore[attr-defined]
                slice=[cst.SubscriptElement(cst.Index(new_grid))]), args=args)
            kernel_edits[lc.kernel] = new_fn
            stmt_edits[id(lc.stmt)] = lc.stmt.with_changes(body=[cst.Expr(call)])
            notes.append(f"kernel {lc.kernel}: persistent over its {'batched ' if nbatch else ''}tiles, "
                         f"{per_unit} program(s) per compute unit read from the device ({UNITS_HELPER}; search space "
                         f"{sid}, kind persistent), tiles walked in a flattened tl.range loop")
    if not kernel_edits:
        return not_applicable(NAME, source, "; ".join(reasons) or "no tile-grid kernel")

    module = insert_before_kernels(module.visit(Edits(kernel_edits, stmt_edits)), _HELPER_SRC, UNITS_HELPER)
    code = module.code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    return CodemodResult(codemod=NAME, source=code, changed=True, notes=notes + [f"not changed: {r}" for r in reasons])


@register("persistent_kernel", "a persistent grid of about one program per compute unit for large tile counts")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return make_persistent(source, target=settings.target, arch=settings.arch, problem=settings.problem,
                           profile=settings.profile)
