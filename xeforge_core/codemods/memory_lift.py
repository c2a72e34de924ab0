"""memory_access codemod, part 3: one program per output element becomes ``BLOCK_P`` outputs
a program.

Recognised: a kernel launched once on a 1-D grid ``(E,)`` whose program id ``pid =
tl.program_id(0)`` is the index of the one output element it computes (no ``pid * BLOCK``),
with either

* no ``tl.arange`` at all (every value a scalar: max pooling with nine scalar gathers), or
* 1-D aranges of one length ``B`` along a second axis, where some load adds a value derived
  from ``pid`` without a stride (``x[b, r, j]`` at ``... + r * stride_r + j``): neighbouring
  programs read neighbouring addresses, but each program alone reads one element per row with
  a stride of the whole inner dim (uncoalesced).

The rewrite makes ``pid`` a block of ``BLOCK_P`` consecutive outputs,
``pid = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)`` (``[None, :]`` in the second
case, where every other ``tl.arange(0, B)`` becomes ``[:, None]``, so the tile is
``[B, BLOCK_P]`` with the contiguous axis last); every load and store is masked with
``pid < n_out``; shape constructors (``tl.zeros([B])``, ``tl.full([], ...)``) take the new
axis; the grid becomes ``(triton.cdiv(E, BLOCK_P),)`` and ``n_out = E`` is passed. ``BLOCK_P``
and ``num_warps`` come from the target's search space (kinds ``lifted`` / ``lifted_2d``).
Refused, with the reason: control flow or loop bounds that depend on ``pid`` (each lane would
need its own), reductions without an explicit ``axis=0``, kernels that already index 2-D
tiles, and kernels whose ``pid`` only ever appears multiplied by a stride (a row kernel: its
row is already contiguous).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.common import (
    PROGRAM_ID,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    is_constexpr_param,
    keyword_arg,
)
from xeforge_core.codemods.host import Launch, grid_view, host_facts, host_functions, launch_counts
from xeforge_core.codemods.kernel_edit import (
    TL_ARANGE,
    TL_LOAD,
    TL_STORE,
    Edits,
    all_names,
    assigned_names,
    body_of,
    call_arg,
    calls_named,
    comment_line,
    fresh_name,
    indexes_2d_tiles,
    module_kernels,
    once_defs,
    parse_expr,
    pointer_terms,
    read_names,
    simple_assign,
    walk,
    with_body,
    with_commas,
)
from xeforge_core.codemods.spaces import SpaceError, default_config

_REDUCE = {"tl.sum", "tl.max", "tl.min", "tl.argmax", "tl.argmin", "tl.reduce", "tl.xor_sum",
           "triton.language.sum", "triton.language.max", "triton.language.min"}
_SHAPED = {"tl.zeros": 0, "tl.full": 0, "triton.language.zeros": 0, "triton.language.full": 0}


def _pid_derived(stmts: list[cst.BaseStatement], pid: str) -> set[str]:
    """Names whose value depends on ``pid``: through assignments anywhere in the body, and
    loop targets whose range does."""
    pieces: list[tuple[list[str], cst.CSTNode]] = []
    for s in stmts:
        for n in walk(s):
            if isinstance(n, cst.SimpleStatementLine):
                pieces.append((assigned_names(n), n))
            elif isinstance(n, cst.For):
                pieces.append((assigned_names(n.target), n.iter))
    derived = {pid}
    changed = True
    while changed:
        changed = False
        for names, node in pieces:
            if read_names(node) & derived:
                for n in names:
                    if n not in derived:
                        derived.add(n)
                        changed = True
    return derived


def _expanded_terms(expr: cst.BaseExpression | None, defs: dict[str, cst.BaseExpression], depth: int = 4
                    ) -> list[cst.BaseExpression]:
    """The terms of a pointer sum with names defined as sums expanded (``base + offs`` with
    ``base = x_ptr + row * stride`` gives ``x_ptr``, ``row * stride``, ``offs``)."""
    if expr is None:
        return []
    out: list[cst.BaseExpression] = []
    for t in pointer_terms(expr):
        d = defs.get(t.value) if isinstance(t, cst.Name) else None
        if depth and d is not None and len(pointer_terms(d)) > 1:
            out.extend(_expanded_terms(d, defs, depth - 1))
        else:
            out.append(t)
    return out


def _is_pointer(name: str, defs: dict[str, cst.BaseExpression], pointers: set[str]) -> bool:
    seen = 0
    while name in defs and seen < 4:
        if read_names(defs[name]) & pointers:
            return True
        d = defs[name]
        if not isinstance(d, cst.Name):
            return False
        name = d.value
        seen += 1
    return name in pointers


def plan_lift(fn: cst.FunctionDef, launch: Launch, grid_len: int | None) -> tuple[str, str, cst.FunctionDef] | str:
    """``(mode, pid name, new kernel)`` with ``mode`` ``"1d"``/``"2d"``; or why not."""
    name = fn.name.value
    if any(is_autotune_decorator(d) for d in fn.decorators):
        return f"kernel {name} is autotuned"
    if grid_len != 1:
        return f"kernel {name} is not launched on a 1-D grid"
    stmts = body_of(fn)
    nodes = walk(fn.body)
    pids = calls_named(fn.body, PROGRAM_ID)
    if len(pids) != 1 or int_value(pids[0].args[0].value if pids[0].args else None) != 0:
        return f"kernel {name} does not read tl.program_id(0) exactly once"
    pid_stmt = next((s for s in stmts if simple_assign(s) and simple_assign(s)[1] is pids[0]), None)
    if pid_stmt is None:
        return f"kernel {name}: tl.program_id(0) is not assigned to a name at the top of the kernel"
    pid = simple_assign(pid_stmt)[0]  # type: ignore[index]
    if indexes_2d_tiles(fn):
        return f"kernel {name} already indexes 2-D tiles"
    derived = _pid_derived(stmts, pid)
    defs = once_defs(stmts, fn.body)
    from xeforge_core.codemods.memory_rows import early_return

    guards: dict[int, str] = {}
    for s in stmts:
        if early_return(s) and read_names(s.test) & derived:  # type: ignore[attr-defined]
            kept = _negated(s.test)  # type: ignore[attr-defined]
            if kept is None:
                return (f"kernel {name}: the guard `if {code_of(s.test)}: return` is not one comparison; "  # type: ignore[attr-defined]
                        "it cannot become a mask")
            guards[id(s)] = kept
    guard_nodes = {id(n) for s in stmts if id(s) in guards for n in walk(s)}
    for n in nodes:
        if id(n) in guard_nodes:
            continue
        if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Multiply):
            for a, b in ((n.left, n.right), (n.right, n.left)):
                if isinstance(a, cst.Name) and a.value == pid and isinstance(b, cst.Name) and b.value in {
                        p.name.value for p in fn.params.params if is_constexpr_param(p)}:
                    return f"kernel {name} already handles a block of outputs ({pid} * {b.value})"
        if isinstance(n, (cst.If, cst.While)) and read_names(n.test) & derived:
            return f"kernel {name}: `{code_of(n.test)}` depends on {pid}; every lane would need its own branch"
        if isinstance(n, cst.For) and read_names(n.iter) & derived:
            return f"kernel {name}: the loop bound `{code_of(n.iter)}` depends on {pid}"
    aranges = calls_named(fn.body, TL_ARANGE)
    lengths = {code_of(a.args[1].value) for a in aranges if len(a.args) == 2}
    mode = "1d" if not aranges else "2d"
    if mode == "2d":
        if len(lengths) != 1 or any(int_value(a.args[0].value) != 0 for a in aranges):
            return f"kernel {name} uses aranges of several lengths ({', '.join(sorted(lengths))})"
        unit = False
        pointers = {p.name.value for p in fn.params.params if "ptr" in p.name.value.lower()}
        for c in calls_named(fn.body, TL_LOAD):
            for t in _expanded_terms(call_arg(c, 0, "pointer"), defs):
                if isinstance(t, cst.Name) and t.value in derived and not _is_pointer(t.value, defs, pointers):
                    unit = True
        if not unit:
            return (f"kernel {name}: {pid} only appears scaled by a stride in its loads (one row a program, already "
                    "contiguous); more outputs a program would not make the loads contiguous")
        for c in calls_named(fn.body, _REDUCE):
            axis = call_arg(c, 1, "axis")
            if int_value(axis) != 0:
                return f"kernel {name}: `{code_of(c)}` reduces without axis=0; with a second axis it would mix outputs"
    for s in stmts:
        a = simple_assign(s)
        if a is not None and isinstance(a[1], (cst.Integer, cst.Float)):
            loops = [n for n in nodes if isinstance(n, cst.For) and a[0] in assigned_names(n)]
            if loops:
                return f"kernel {name}: `{a[0]}` starts as a scalar literal and is updated in a loop"
    # the rewrite
    taken = all_names(fn) | {p.name.value for p in fn.params.params}
    bp = fresh_name("BLOCK_P", taken)
    n_out = fresh_name("n_out", taken)
    out_mask = fresh_name("out_mask", taken)
    vec = f"tl.program_id(0) * {bp} + tl.arange(0, {bp})"
    new_pid = f"({vec})[None, :]" if mode == "2d" else vec
    shape_new = (lambda shp: f"[{shp}, {bp}]" if shp else f"[1, {bp}]") if mode == "2d" else (
        lambda shp: f"[{shp}, {bp}]" if shp else f"[{bp}]")

    class _T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            f = dotted_name(updated.func)
            if original is pids[0]:
                return parse_expr(new_pid)
            if f in TL_ARANGE and mode == "2d":
                return parse_expr(f"{code_of(updated)}[:, None]")
            if f in _SHAPED and updated.args:
                shape = updated.args[0].value
                if isinstance(shape, (cst.List, cst.Tuple)):
                    inner = ", ".join(code_of(e.value) for e in shape.elements)
                    return updated.with_changes(args=[updated.args[0].with_changes(value=parse_expr(shape_new(inner))),
                                                      *updated.args[1:]])
            if f in TL_LOAD or f in TL_STORE:
                return _masked(updated, out_mask, 1 if f in TL_LOAD else 2)
            return updated

    new_stmts: list[cst.BaseStatement] = []
    for s in stmts:
        if id(s) in guards:
            # an early return of the lanes past the end becomes part of the store/load mask
            new_stmts.append(cst.parse_statement(f"{out_mask} = {out_mask} & ({guards[id(s)]})").with_changes(
                leading_lines=[*s.leading_lines, comment_line(f"was `if {code_of(s.test)}: return` "  # type: ignore[attr-defined]
                                                                "(each lane of the block decides for itself)")]))
            continue
        ns = s.visit(_T())
        new_stmts.append(ns)  # type: ignore[arg-type]
        if s is pid_stmt:
            ns = ns.with_changes(leading_lines=[*s.leading_lines, comment_line(  # type: ignore[attr-defined]
                f"{bp} consecutive outputs a program (was one): neighbouring lanes read neighbouring addresses")])
            new_stmts[-1] = ns  # type: ignore[assignment]
            new_stmts.append(cst.parse_statement(f"{out_mask} = {pid} < {n_out}"))
    params = list(fn.params.params)
    plain_end = max((i for i, p in enumerate(params) if not is_constexpr_param(p) and p.default is None), default=-1) + 1
    params.insert(plain_end, cst.Param(cst.Name(n_out)))
    const_end = max((i for i, p in enumerate(params) if p.default is None), default=-1) + 1
    params.insert(const_end, cst.parse_module(f"def f({bp}: tl.constexpr):\n    pass\n").body[0].params.params[0])  # type: ignore[attr-defined]
    params = with_commas(params)
    new_fn = with_body(fn.with_changes(params=fn.params.with_changes(params=params)), new_stmts)
    return mode, f"{n_out}|{bp}", new_fn


_FLIP = {cst.GreaterThanEqual: "<", cst.GreaterThan: "<=", cst.LessThan: ">=", cst.LessThanEqual: ">",
         cst.Equal: "!=", cst.NotEqual: "=="}


def _negated(test: cst.BaseExpression) -> str | None:
    """``a < b`` for ``a >= b`` (one comparison, operator flipped): the lanes that go on past
    an early-return guard; ``None`` for any other test."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    op = _FLIP.get(type(test.comparisons[0].operator))
    if op is None:
        return None
    return f"{code_of(test.left)} {op} {code_of(test.comparisons[0].comparator)}"


def _masked(call: cst.Call, mask: str, position: int) -> cst.Call:
    args = list(call.args)
    for i, a in enumerate(args):
        if (a.keyword is not None and a.keyword.value == "mask") or (a.keyword is None and i == position):
            args[i] = a.with_changes(value=parse_expr(f"({code_of(a.value)}) & {mask}"))
            return call.with_changes(args=args)
    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(keyword_arg("mask", cst.Name(mask)))
    return call.with_changes(args=args)


def _launch(lc: Launch, old_fn: cst.FunctionDef, new_fn: cst.FunctionDef, n_out: str, bp: str, cfg: dict[str, Any],
            total: cst.BaseExpression) -> cst.Call:
    new_params = [p.name.value for p in new_fn.params.params]
    old_params = [p.name.value for p in old_fn.params.params]
    values: dict[str, cst.BaseExpression] = {p: a.value for p, a in lc.bound.items()}
    values[n_out] = total
    block = int(next(iter(cfg["kwargs"].values())))
    values[bp] = cst.Integer(str(block))
    was_positional = {old_params[i] for i, a in enumerate([a for a in lc.call.args if a.keyword is None])
                      if i < len(old_params)}
    args: list[cst.Arg] = []
    positional = True
    for p in new_params:
        if p not in values:
            positional = False
            continue
        if positional and (p in was_positional or p == n_out):
            args.append(cst.Arg(values[p]))
        else:
            positional = False
            args.append(keyword_arg(p, values[p]))
    for k, a in lc.options.items():
        if k != "num_warps":
            args.append(keyword_arg(k, a.value))
    args.append(keyword_arg("num_warps", cst.Integer(str(cfg["num_warps"]))))
    args = with_commas(args)
    grid = parse_expr(f"(triton.cdiv({code_of(total)}, {block}),)")
    return lc.call.with_changes(func=lc.call.func.with_changes(slice=[cst.SubscriptElement(cst.Index(grid))]),  # type: ignore[attr-defined]
                                args=args)


def apply_lift(module: cst.Module, target: str, arch: str | None, notes: list[str], reasons: list[str],
               touched: set[str] | None = None) -> cst.Module:
    """Rewrite every recognised one-output-per-program kernel of ``module`` (module docstring)."""
    touched = touched if touched is not None else set()
    kernels = module_kernels(module)
    counts = launch_counts(module, kernels)
    kernel_edits: dict[str, cst.FunctionDef] = {}
    stmt_edits: dict[int, Any] = {}
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        for lc in facts.all_launches():
            if lc.kernel in touched or lc.kernel in kernel_edits or counts.get(lc.kernel) != 1:
                continue
            view = grid_view(lc)
            if view.is_lambda and view.meta_keys - set(lc.bound) and not any(
                    is_autotune_decorator(d) for d in kernels[lc.kernel].decorators):
                reasons.append(f"kernel {lc.kernel}: the launch grid reads meta-parameters the launch does not pass "
                               f"({', '.join(sorted(view.meta_keys - set(lc.bound)))})")
                continue
            glen = len(view.elements) if view.elements is not None else None
            got = plan_lift(kernels[lc.kernel], lc, glen)
            if isinstance(got, str):
                reasons.append(got)
                continue
            mode, names, new_fn = got
            n_out, bp = names.split("|")
            try:
                cfg, sid = default_config(target, arch, "lifted" if mode == "1d" else "lifted_2d")
            except SpaceError as exc:
                reasons.append(str(exc))
                continue
            total = view.elements[0]  # type: ignore[index]
            call = _launch(lc, kernels[lc.kernel], new_fn, n_out, bp, cfg, total)
            kernel_edits[lc.kernel] = new_fn
            stmt_edits[id(lc.stmt)] = lc.stmt.with_changes(body=[cst.Expr(call)])
            touched.add(lc.kernel)
            notes.append(f"kernel {lc.kernel}: one program per output element became {bp}="
                         f"{next(iter(cfg['kwargs'].values()))} consecutive outputs a program"
                         f"{' on a [BLOCK, BLOCK_P] tile with the contiguous axis last' if mode == '2d' else ''}, "
                         f"num_warps={cfg['num_warps']} (search space {sid}, kind {'lifted' if mode == '1d' else 'lifted_2d'}); "
                         f"the grid is cdiv({code_of(total)}, {bp}) and every load and store is masked at the end")
    if not kernel_edits:
        return module

    return module.visit(Edits(kernel_edits, stmt_edits))
