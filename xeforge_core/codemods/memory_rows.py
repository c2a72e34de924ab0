"""memory_access codemod, part 1: one program per row with the block covering the row.

A row kernel is launched with a 1-D grid (one program per row, ``tl.program_id(0)``) and walks
its row in fixed blocks: ``for start in range(0, n_cols, BLOCK)`` (or ``for i in
range(nb)`` / ``range(1, nb)`` with ``nb = tl.cdiv(n_cols, BLOCK)``). With 128-wide blocks a
4096-wide row takes 32 trips per pass, and a softmax or a normalisation makes two or three
passes, each loading the row again.

The rewrite keeps that kernel for wide rows and adds the case the row fits one block:

* the kernel gets ``ROW_FITS: tl.constexpr``; under ``if ROW_FITS:`` every row loop runs once
  (``start = 0``; ``range(1, nb)`` not at all), so the code is straight-line and the repeated
  loads of the same addresses are merged (:mod:`xeforge_core.codemods.dedupe`): each element is
  read from global memory once and the statistics stay in registers;
* the launch takes the block size, ``ROW_FITS`` and ``num_warps`` from ``_row_launch(n_cols,
  block, num_warps)``, a helper written into the module from the target's search space (kind
  ``row``: block size -> warps; rows wider than its largest block keep the streaming loop with
  the block and warps they had).

Source of the choices: knowledge/search_spaces (kind ``row``) for the target, HOPPER.md /
xe-hardware-notes (contiguous, vectorised loads; enough bytes in flight). Kernels it does not
recognise are left unchanged with the reason.
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
from xeforge_core.codemods.dedupe import dedupe
from xeforge_core.codemods.host import HostFacts, Launch, grid_view
from xeforge_core.codemods.kernel_edit import (
    TL_ARANGE,
    TL_LOAD,
    TL_STORE,
    all_names,
    block_stmts,
    body_of,
    call_arg,
    calls_named,
    comment_line,
    fresh_name,
    indexes_2d_tiles,
    once_defs,
    parse_expr,
    pointer_terms,
    read_names,
    resolve,
    simple_assign,
    with_body,
    with_commas,
)

HELPER = "_row_launch"
TABLE = "_ROW_WARPS"
_RANGE = {"range", "tl.range", "triton.language.range"}


def _grid_len(launch: Launch, facts: HostFacts) -> int | None:
    elements = grid_view(launch).elements
    return None if elements is None else len(elements)


def early_return(stmt: cst.BaseStatement) -> bool:
    """``if <test>: return`` (no value, no ``else``): a guard that ends the program early, e.g.
    ``if pid >= n_rows: return`` for a grid rounded up."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None:
        return False
    body = block_stmts(stmt.body)
    return len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and len(body[0].body) == 1 \
        and isinstance(body[0].body[0], cst.Return) and body[0].body[0].value is None


def row_loop(loop: cst.For, defs: dict[str, cst.BaseExpression], params: set[str], constexprs: set[str]
             ) -> tuple[str, str, str] | None:
    """``(kind, L, B)`` for a loop along the row: kind ``"step"`` (``range(0, L, B)``),
    ``"all"`` (``range(nb)``/``range(0, nb)``) or ``"rest"`` (``range(1, nb)``) with
    ``nb = tl.cdiv(L, B)``; ``None`` otherwise."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted_name(it.func) in _RANGE) or not isinstance(loop.target, cst.Name):
        return None
    args = [a.value for a in it.args if a.keyword is None]
    if len(args) == 3 and int_value(args[0]) == 0 and isinstance(args[1], cst.Name) and isinstance(args[2], cst.Name) \
            and args[1].value in params and args[2].value in constexprs:
        return "step", args[1].value, args[2].value
    if len(args) in (1, 2):
        lo = int_value(args[0]) if len(args) == 2 else 0
        nb = args[-1]
        if lo not in (0, 1) or not isinstance(nb, cst.Name):
            return None
        d = defs.get(nb.value)
        if isinstance(d, cst.Call) and dotted_name(d.func) in {"tl.cdiv", "triton.cdiv", "triton.language.cdiv"} \
                and len(d.args) == 2 and isinstance(d.args[0].value, cst.Name) and isinstance(d.args[1].value, cst.Name) \
                and d.args[0].value.value in params and d.args[1].value.value in constexprs:
            return ("all" if lo == 0 else "rest"), d.args[0].value.value, d.args[1].value.value
    return None


def _has_inner_loop(loop: cst.For) -> bool:
    found = False

    class _V(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            nonlocal found
            if n is not loop:
                found = True

        def visit_While(self, n: cst.While) -> None:
            nonlocal found
            found = True

        def visit_Break(self, n: cst.Break) -> None:
            nonlocal found
            found = True

        def visit_Continue(self, n: cst.Continue) -> None:
            nonlocal found
            found = True

    loop.visit(_V())
    return found


def _strided_loads(fn: cst.FunctionDef, stmts: list[cst.BaseStatement], defs: dict[str, cst.BaseExpression]) -> str:
    params = {p.name.value for p in fn.params.params}
    constexprs = {p.name.value for p in fn.params.params if is_constexpr_param(p)}
    """The first load in a row loop whose arange-derived offset is multiplied by a stride
    (not added as is), else an empty string."""
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for s in _all_statements(fn):
            a = simple_assign(s)
            if a is None or a[0] in derived:
                continue
            if calls_named(a[1], TL_ARANGE) or read_names(a[1]) & derived:
                derived.add(a[0])
                changed = True
    for loop in (s for s in stmts if isinstance(s, cst.For)):
        for c in calls_named(loop.body, TL_LOAD):
            ptr = resolve(call_arg(c, 0, "pointer"), defs)
            if ptr is None:
                continue
            terms = [resolve(t, defs) for t in pointer_terms(ptr)]
            if not (read_names(ptr) & derived or calls_named(ptr, TL_ARANGE)):
                continue
            unit = any((isinstance(t, cst.Name) and t.value in derived) or (
                isinstance(t, cst.Call) and dotted_name(t.func) in TL_ARANGE) for t in terms)
            # `offs * stride` with a run-time stride is contiguous when the stride is 1 (Triton
            # specialises integer arguments equal to 1) and no other term is added as is
            bare = [t for t in terms if isinstance(t, cst.Name) and t.value not in derived and t.value not in params]
            scaled = any(isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply) and any(
                isinstance(x, cst.Name) and x.value in params and x.value not in constexprs for x in (t.left, t.right))
                and read_names(t) & derived for t in terms)
            if not unit and not (scaled and not bare):
                return code_of(ptr)
    return ""


def _all_statements(fn: cst.FunctionDef) -> list[cst.SimpleStatementLine]:
    out: list[cst.SimpleStatementLine] = []

    class _V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            out.append(n)

    fn.body.visit(_V())
    return out


def _written_params(fn: cst.FunctionDef) -> set[str]:
    """Pointer parameters the kernel stores through (names defined from them followed)."""
    params = {p.name.value for p in fn.params.params}
    defs = once_defs(body_of(fn), fn.body)
    out = set()
    for c in calls_named(fn.body, TL_STORE):
        ptr = call_arg(c, 0, "pointer")
        names = read_names(ptr) if ptr is not None else set()
        for _ in range(4):
            names |= {r for n in list(names) if n in defs for r in read_names(defs[n])}
        out |= names & params
    return out


def plan_rows(fn: cst.FunctionDef, launch: Launch, facts: HostFacts) -> tuple[cst.FunctionDef, str, str, dict[str, Any],
                                                                              int] | str:
    """The kernel rewritten for a row that fits one block, the row-length and block parameter
    names, launch facts and the number of merged loads; or the reason it does not apply."""
    name = fn.name.value
    if any(is_autotune_decorator(d) for d in fn.decorators):
        return f"kernel {name} is autotuned: its configs own the block size"
    if _grid_len(launch, facts) != 1:
        return f"kernel {name} is not launched on a 1-D grid (one program per row)"
    axes = {int_value(c.args[0].value) for c in calls_named(fn.body, PROGRAM_ID) if c.args}
    if axes != {0}:
        return f"kernel {name} reads program ids {sorted(a for a in axes if a is not None)}, not only axis 0"
    params = {p.name.value for p in fn.params.params}
    constexprs = {p.name.value for p in fn.params.params if is_constexpr_param(p)}
    if indexes_2d_tiles(fn):
        return f"kernel {name} works on 2-D tiles; the row rewrite handles 1-D rows"
    if "ROW_FITS" in params:
        return f"kernel {name} already has a one-block path for rows (ROW_FITS)"
    stmts = body_of(fn)
    defs = once_defs(stmts, fn.body)
    loops: list[tuple[int, tuple[str, str, str]]] = []
    for i, s in enumerate(stmts):
        if early_return(s) and not loops:
            continue  # a guard before the row loops stays in front of both paths
        if isinstance(s, (cst.While, cst.If, cst.With, cst.Try)):
            return f"kernel {name} has a `{code_of(s).split(':')[0].strip()}` block the rewrite does not follow"
        if isinstance(s, cst.For):
            form = row_loop(s, defs, params, constexprs)
            if form is None:
                return f"kernel {name}: `for {code_of(s.target)} in {code_of(s.iter)}` is not a walk along the row in BLOCK steps"
            if _has_inner_loop(s):
                return f"kernel {name}: a row loop has a nested loop or a break"
            loops.append((i, form))
    if not loops:
        return f"kernel {name} has no loop along its row"
    lengths = {f[1] for _, f in loops}
    blocks = {f[2] for _, f in loops}
    if len(lengths) != 1 or len(blocks) != 1:
        return f"kernel {name} walks more than one length or block size ({', '.join(sorted(lengths | blocks))})"
    length, block = lengths.pop(), blocks.pop()
    strided = _strided_loads(fn, stmts, defs)
    if strided:
        return (f"kernel {name}: its loop walks a strided axis (`{strided}`): lanes of one block are a stride apart, "
                "so a longer block would not make the loads contiguous")
    if launch.bound.get(length) is None:
        return f"kernel {name}: the row length {length} is not passed at the launch"
    first = loops[0][0]
    prefix, rest = stmts[:first], stmts[first:]
    # the one-block path
    taken = set(params) | all_names(fn.body) | {"ROW_FITS"}
    single: list[cst.BaseStatement] = []
    for s in rest:
        if isinstance(s, cst.For):
            form = row_loop(s, defs, params, constexprs)
            if form is None:  # pragma: no cover - checked above
                return f"kernel {name}: unexpected loop"
            if form[0] == "rest":
                continue
            single.append(cst.parse_statement(f"{s.target.value} = 0"))  # type: ignore[attr-defined]
            single.extend(block_stmts(s.body))
        else:
            single.append(s)
    if any(not isinstance(s, cst.SimpleStatementLine) for s in single):
        return f"kernel {name}: the row loops contain blocks the rewrite does not follow"
    single, merged = dedupe(single, _written_params(fn), taken, context=prefix)
    single = [s.with_changes(leading_lines=[ll for ll in s.leading_lines if ll.comment is not None])  # type: ignore[attr-defined]
              for s in single]
    branch = cst.If(
        test=cst.Name("ROW_FITS"),
        body=cst.IndentedBlock(body=single),
        orelse=cst.Else(body=cst.IndentedBlock(body=[s.with_changes(leading_lines=[]) if i == 0 else s  # type: ignore[attr-defined]
                                                     for i, s in enumerate(rest)])),
        leading_lines=[comment_line(f"ROW_FITS: the whole row is one block ({block} >= {length}); one pass, "
                                    "each element loaded once"),
                       ])
    new_params = list(fn.params.params)
    at = next((i for i, p in enumerate(new_params) if p.name.value == block), len(new_params) - 1) + 1
    has_default_before = any(p.default is not None for p in new_params[:at])
    fits = cst.parse_module(f"def f(ROW_FITS: tl.constexpr{' = False' if has_default_before else ''}):\n    pass\n"
                            ).body[0].params.params[0]  # type: ignore[attr-defined]
    new_params.insert(at, fits)
    new_params = with_commas(new_params)
    new_fn = with_body(fn.with_changes(params=fn.params.with_changes(params=new_params)), [*prefix, branch])
    info = {"length_arg": launch.bound[length].value, "block_arg": launch.bound.get(block),
            "block_default": next((p.default for p in fn.params.params if p.name.value == block), None),
            "param_order": [p.name.value for p in new_params]}
    return new_fn, length, block, info, merged


def helper_source(table: dict[int, int], space_id: str) -> list[cst.BaseStatement]:
    """The module-level table and ``_row_launch`` helper for the target's row configs."""
    items = ", ".join(f"{k}: {v}" for k, v in sorted(table.items()))
    text = f'''# One program per row: block size -> num_warps when the block covers the row (search space
# {space_id}, kind "row"); rows wider than the largest block keep their streaming loop.
{TABLE} = {{{items}}}


def {HELPER}(n_cols, block, num_warps):
    """(BLOCK, ROW_FITS, num_warps) for one program per row of ``n_cols`` elements: the next
    power of two covering the row with its warps from {TABLE}, or, for rows wider than the
    table, the streaming ``block`` and ``num_warps`` given."""
    row = triton.next_power_of_2(max(int(n_cols), 1))
    for size in sorted({TABLE}):
        if row <= size:
            return row, True, {TABLE}[size]
    return block, False, num_warps
'''
    return list(cst.parse_module(text).body)


def launch_edit(launch: Launch, fn: cst.FunctionDef, block: str, info: dict[str, Any], host_names: set[str]
                ) -> tuple[cst.SimpleStatementLine, cst.Call]:
    """The statement computing the row launch values and the launch that uses them."""
    block_arg = info["block_arg"]
    block_value = code_of(block_arg.value) if block_arg is not None else code_of(info["block_default"])
    warps = launch.options.get("num_warps")
    warps_value = code_of(warps.value) if warps is not None else "4"
    rb, rf, rw = (fresh_name(n, host_names) for n in ("row_block", "row_fits", "row_warps"))
    stmt = cst.parse_statement(f"{rb}, {rf}, {rw} = {HELPER}({code_of(info['length_arg'])}, {block_value}, "
                               f"{warps_value})")
    params = [p.name.value for p in fn.params.params]
    args: list[cst.Arg] = []
    pos = 0
    positional_ok = True
    for a in launch.call.args:
        if a.keyword is None and not a.star:
            pname = params[pos] if pos < len(params) else None
            pos += 1
            if pname == block:
                positional_ok = False
                continue
            if not positional_ok and pname:
                a = keyword_arg(pname, a.value)
            args.append(a)
        elif a.keyword is not None and a.keyword.value in (block, "num_warps"):
            continue
        else:
            args.append(a)
    args += [keyword_arg(block, cst.Name(rb)), keyword_arg("ROW_FITS", cst.Name(rf)),
             keyword_arg("num_warps", cst.Name(rw))]
    args = with_commas(args)
    return stmt, launch.call.with_changes(args=args)  # type: ignore[return-value]


__all__ = ["HELPER", "TABLE", "helper_source", "launch_edit", "plan_rows", "row_loop", "parse_expr"]
