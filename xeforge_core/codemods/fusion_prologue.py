"""fusion codemod, part 5: a gather kernel moves into the operand load of the kernel that reads
what it stored (an im2col producer into its GEMM: an implicit GEMM).

The mirror of :mod:`fusion_epilogue`. The producer is loop-free and stores one 2-D tile of an
intermediate ``T`` (a fresh ``torch.empty((rows, cols))``) once, at the top level of its body, as
``tl.store(t_ptr + R[:, None] * S + Q[None, :], value, mask=M)``: element ``T[r, q]`` is a
function of ``r``, ``q`` and the kernel's scalar arguments only (the statements ``value`` depends
on read no program id except through ``R`` and ``Q``). The consumer, launched next, reads ``T``
at one place, ``x = tl.load(t_ptr + X[:, None] * S2 + Y[None, :], mask=m, other=o)``, where
``S`` and ``S2`` are passed the same host value (``T``'s row length ``cols``, or
``T.stride(0)``): the matching is by the host value both index with, not by names. Then the
consumer's load becomes the producer's computation at ``R = X``, ``Q = Y``, placed where the load
was (inside the consumer's loop), every load of it masked by ``m`` too (lanes the consumer does
not read are not gathered), the value converted to ``T``'s dtype as the store did, and ``o``
where ``m`` is false. The producer's launch and ``T`` disappear: a ``rows x cols`` intermediate
(nine times the input for a 3x3 convolution) is never written or read back (knowledge rule
``fuse_when_intermediate_disappears``).

What is refused, with the reason: a producer with a loop, an autotuned producer (its configs
would be lost), a producer whose value depends on its program ids other than through its row
and column vectors, a consumer that reads ``T`` at more than one place or through a derived
pointer, and offsets that do not match by host value.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.common import (
    PROGRAM_ID,
    code_of,
    dotted_name,
    is_autotune_decorator,
    is_constexpr_param,
)
from xeforge_core.codemods.fusion_chain import (
    FusedParam,
    FusionError,
    build_params,
    fuse_adjacent,
    fused_name,
    intermediate_tile,
    is_docstring,
    order_params,
)
from xeforge_core.codemods.host import (
    HostFacts,
    Launch,
    drop_unused_assigns,
    tl_dtype,
)
from xeforge_core.codemods.kernel_edit import (
    TL_LOAD,
    TL_STORE,
    assigned_names,
    base_and_offset,
    body_of,
    call_arg,
    calls_named,
    comment_line,
    expr_stmt_call,
    fresh_name,
    once_defs,
    parse_expr,
    pointer_terms,
    read_names,
    rename,
    resolve,
    simple_assign,
    walk,
)


def _axis_name(expr: cst.BaseExpression, axis: int) -> str | None:
    """``v`` for ``v[:, None]`` (``axis`` 0) or ``v[None, :]`` (``axis`` 1), else ``None``."""
    if not (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and len(expr.slice) == 2):
        return None
    parts = []
    for el in expr.slice:
        if isinstance(el.slice, cst.Slice) and el.slice.lower is None and el.slice.upper is None:
            parts.append(":")
        elif isinstance(el.slice, cst.Index) and isinstance(el.slice.value, cst.Name) and el.slice.value.value == "None":
            parts.append("None")
        else:
            return None
    return expr.value.value if parts == ([":", "None"] if axis == 0 else ["None", ":"]) else None


def _row_length(launch: Launch, param: str, tensor: str, cols: str) -> str | None:
    """The host text of what ``param`` is passed, when it is ``tensor``'s row length (its shape's
    second entry, the same host expression, or ``tensor.stride(0)``); else ``None``."""
    arg = launch.bound.get(param)
    if arg is None:
        return None
    text = code_of(arg.value).replace(" ", "")
    if text == cols or text in (f"{tensor}.stride(0)", f"{tensor}.shape[1]", f"{tensor}.size(1)"):
        return cols
    return None


def _unit_column_step(launch: Launch, step: cst.BaseExpression, tensor: str) -> bool:
    """Whether ``step`` is 1 or a parameter passed ``tensor.stride(1)`` (or 1)."""
    if isinstance(step, cst.Integer):
        return step.value == "1"
    if not isinstance(step, cst.Name) or step.value not in launch.bound:
        return False
    return code_of(launch.bound[step.value].value).replace(" ", "") in ("1", f"{tensor}.stride(1)")


def _rows_cols(offset: cst.BaseExpression, launch: Launch, params: set[str], tensor: str,
               cols: str) -> tuple[str, str] | str:
    """``(row vector, column vector)`` for an offset ``R[:, None] * S + Q[None, :]`` (or
    ``+ Q[None, :] * S1``, ``S1`` passed ``tensor.stride(1)``) whose ``S`` is passed ``tensor``'s
    row length, or why not."""
    terms = pointer_terms(offset)
    if len(terms) != 2:
        return f"`{code_of(offset)}` is not rows[:, None] * row_length + columns[None, :]"
    row = col = None
    for t in terms:
        if isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply):
            for a, b in ((t.left, t.right), (t.right, t.left)):
                if isinstance(b, cst.Name) and b.value in params and _axis_name(a, 0) \
                        and _row_length(launch, b.value, tensor, cols):
                    row = _axis_name(a, 0)
            for a, b in ((t.left, t.right), (t.right, t.left)):
                if _axis_name(a, 1) and _unit_column_step(launch, b, tensor):
                    col = _axis_name(a, 1)
        elif _axis_name(t, 1):
            col = _axis_name(t, 1)
    if row is None or col is None:
        return (f"`{code_of(offset)}` is not rows[:, None] * S + columns[None, :] with S passed {tensor}'s row "
                f"length ({cols})")
    return row, col


def _slice(stmts: list[cst.BaseStatement], roots: set[str], stop: set[str]) -> list[cst.BaseStatement]:
    """The top-level ``name = value`` statements the names in ``roots`` depend on (transitively,
    not through ``stop``), in source order."""
    defs = {a[0]: (i, a[1]) for i, s in enumerate(stmts) if (a := simple_assign(s)) is not None}
    need: set[str] = set()
    todo = [n for n in roots if n in defs and n not in stop]
    while todo:
        n = todo.pop()
        if n in need:
            continue
        need.add(n)
        todo += [m for m in read_names(defs[n][1]) if m in defs and m not in stop and m not in need]
    return [s for i, s in enumerate(stmts) if (a := simple_assign(s)) is not None and a[0] in need]


def _tile_2d(expr: cst.BaseExpression | None, defs: dict[str, cst.BaseExpression], depth: int = 0) -> bool:
    """Whether ``expr`` (following ``defs``) broadcasts a vector to a 2-D tile (``v[:, None]``)."""
    if expr is None or depth > 12:
        return False
    for n in walk(expr):
        if isinstance(n, cst.Subscript) and (_axis_name(n, 0) or _axis_name(n, 1)):
            return True
        if isinstance(n, cst.Name) and n.value in defs and _tile_2d(defs[n.value], defs, depth + 1):
            return True
    return False


def _and_load_masks(stmt: cst.BaseStatement, extra: str, defs: dict[str, cst.BaseExpression]) -> cst.BaseStatement:
    """Every 2-D ``tl.load`` in ``stmt`` (its pointer a tile: :func:`_tile_2d`) also masked by the
    2-D ``extra`` (``mask=extra`` where it had none); a load of lower rank keeps its own mask."""

    class _T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            if dotted_name(updated.func) not in TL_LOAD or not _tile_2d(call_arg(updated, 0, "pointer"), defs):
                return updated
            args = list(updated.args)
            for i, a in enumerate(args):
                if (a.keyword is not None and a.keyword.value == "mask") or (a.keyword is None and i == 1):
                    args[i] = a.with_changes(value=parse_expr(f"({code_of(a.value)}) & ({extra})"))
                    return updated.with_changes(args=args)
            args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(keyword=cst.Name("mask"), value=parse_expr(extra), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
            return updated.with_changes(args=args)

    return stmt.visit(_T())  # type: ignore[return-value]


def _plan(facts: HostFacts, prod: Launch, cons: Launch, kernels: dict[str, cst.FunctionDef],
          taken: set[str]) -> tuple[cst.FunctionDef, list[FusedParam], str, list[str]]:
    pfn, cfn = kernels[prod.kernel], kernels[cons.kernel]
    if any(is_autotune_decorator(d) for d in pfn.decorators):
        raise FusionError(f"kernel {prod.kernel} is autotuned")
    if any(isinstance(n, (cst.For, cst.While, cst.If)) for n in walk(pfn.body)):
        raise FusionError(f"kernel {prod.kernel} has a loop or a branch: only a straight-line gather moves into a load")
    tensor, aliases = intermediate_tile(facts, prod, cons)
    cols = code_of(facts.allocs[tensor].shape.elements[1].value).replace(" ", "")  # type: ignore[union-attr]

    # the producer: straight-line `name = value` statements, each name assigned once, and one
    # top-level store of T at R[:, None] * cols + Q[None, :]; nothing else it does may be lost
    counts: dict[str, int] = {}
    for n in assigned_names(pfn.body):
        counts[n] = counts.get(n, 0) + 1
    for st in body_of(pfn):
        call = expr_stmt_call(st)
        if is_docstring(st) or (call is not None and dotted_name(call.func) in TL_STORE):
            continue
        a = simple_assign(st)
        if a is None or counts.get(a[0], 0) != 1:
            raise FusionError(f"kernel {prod.kernel}: `{code_of(st).strip().splitlines()[0]}` is not a single "
                              "assignment of a name assigned once: only a straight-line gather moves into a load")
    pparams = {p.name.value for p in pfn.params.params}
    pt = {p for p, a in prod.bound.items() if isinstance(a.value, cst.Name) and facts.root(a.value.value) == tensor}
    pstmts = body_of(pfn)
    pdefs = once_defs(pstmts, pfn.body)
    stores = [(s, c) for s in pstmts if (c := expr_stmt_call(s)) is not None and dotted_name(c.func) in TL_STORE
              and base_and_offset(resolve(call_arg(c, 0, "pointer"), pdefs), pt) is not None]  # type: ignore[arg-type]
    every = [c for c in calls_named(pfn.body, TL_STORE | TL_LOAD)
             if (p := resolve(call_arg(c, 0, "pointer"), pdefs)) is not None and read_names(p) & pt]
    if len(stores) != 1 or len(every) != 1 or len(calls_named(pfn.body, TL_STORE)) != 1:
        raise FusionError(f"kernel {prod.kernel} does not store {tensor} exactly once, and nothing else")
    store_stmt, store = stores[0]
    split = base_and_offset(resolve(call_arg(store, 0, "pointer"), pdefs), pt)  # type: ignore[arg-type]
    if split is None or split[1] is None:
        raise FusionError(f"kernel {prod.kernel} stores {tensor} without an offset")
    got = _rows_cols(split[1], prod, pparams, tensor, cols)
    if isinstance(got, str):
        raise FusionError(f"kernel {prod.kernel} stores {tensor} at {got}")
    prow, pcol = got
    value = call_arg(store, 1, "value")
    if value is None:
        raise FusionError(f"kernel {prod.kernel}: the store of {tensor} has no value")
    gather = _slice(pstmts, read_names(value), {prow, pcol})
    reads: set[str] = read_names(value)
    for s in gather:
        reads |= read_names(s)
    pid_names = {n for n, v in pdefs.items() if calls_named(v, PROGRAM_ID)} | {prow, pcol}
    if calls_named(value, PROGRAM_ID) or any(calls_named(s, PROGRAM_ID) for s in gather) \
            or (reads & pid_names) - {prow, pcol}:
        raise FusionError(f"kernel {prod.kernel}: the value it stores depends on its program ids other than through "
                          f"{prow} and {pcol}")
    if reads & pt:
        raise FusionError(f"kernel {prod.kernel} reads {tensor}")
    if any(isinstance(n, cst.Call) and (dotted_name(n.func) or "").startswith(("tl.atomic", "triton.language.atomic"))
           for s in gather for n in walk(s)):
        raise FusionError(f"kernel {prod.kernel} computes its value with atomics")

    # the consumer: one load of T at X[:, None] * cols + Y[None, :], as `x = tl.load(...)`
    cparams = {p.name.value for p in cfn.params.params}
    ct = {p for p, a in cons.bound.items() if isinstance(a.value, cst.Name) and facts.root(a.value.value) == tensor}
    uses = [c for c in calls_named(cfn.body, TL_STORE | TL_LOAD) if read_names(call_arg(c, 0, "pointer") or
                                                                               cst.Name("_")) & ct]
    if len(uses) != 1 or dotted_name(uses[0].func) not in TL_LOAD:
        raise FusionError(f"kernel {cons.kernel} does not read {tensor} at exactly one load (and write it never)")
    load = uses[0]
    csplit = base_and_offset(call_arg(load, 0, "pointer"), ct)  # type: ignore[arg-type]
    if csplit is None or csplit[1] is None:
        raise FusionError(f"kernel {cons.kernel} reads {tensor} through a derived pointer")
    got = _rows_cols(csplit[1], cons, cparams, tensor, cols)
    if isinstance(got, str):
        raise FusionError(f"kernel {cons.kernel} reads {tensor} at {got}")
    crow, ccol = got
    load_stmt = next((s for s in walk(cfn.body) if isinstance(s, cst.SimpleStatementLine)
                      and (a := simple_assign(s)) is not None and a[1] is load), None)
    if load_stmt is None:
        raise FusionError(f"kernel {cons.kernel} reads {tensor} inside an expression, not as `x = tl.load(...)`")
    if sum(1 for n in walk(cfn.body) if isinstance(n, cst.Name) and n.value in ct) != 1:
        raise FusionError(f"kernel {cons.kernel} uses {tensor} other than by that load")

    # parameters: the consumer's (minus T), then the producer's the gather reads
    by_host = {code_of(a.value).replace(" ", "") + f"|{is_constexpr_param(p)}": p.name.value
               for p in cfn.params.params if (a := cons.bound.get(p.name.value)) is not None}
    params = [FusedParam(p.name.value, p, cons.bound[p.name.value].value if p.name.value in cons.bound else None,
                         is_constexpr_param(p)) for p in cfn.params.params if p.name.value not in ct]
    names = cparams | set(assigned_names(cfn.body))
    pmap: dict[str, str] = {prow: crow, pcol: ccol}
    for p in pfn.params.params:
        n = p.name.value
        if n not in reads or n in pt:
            continue
        a = prod.bound.get(n)
        key = (code_of(a.value).replace(" ", "") if a is not None else "") + f"|{is_constexpr_param(p)}"
        if a is not None and key in by_host:
            pmap[n] = by_host[key]
            continue
        if a is None and p.default is None:
            raise FusionError(f"kernel {prod.kernel}: parameter {n} is not passed")
        new = fresh_name(n, names)
        pmap[n] = new
        params.append(FusedParam(new, p.with_changes(name=cst.Name(new)), a.value if a is not None else None,
                                 is_constexpr_param(p)))
    for n in assigned_names(pfn.body):
        if n not in pmap:
            pmap[n] = fresh_name(n, names)
    dtype = tl_dtype(facts.dtype_of(tensor), {code_of(fp.host).replace(" ", "") + f"|{fp.constexpr}": fp.name
                                              for fp in params if fp.host is not None})
    if dtype is None:
        raise FusionError(f"the dtype of {tensor} is not known from its allocation")

    # the consumer's load becomes the gather at (X, Y)
    target = simple_assign(load_stmt)[0]  # type: ignore[index]
    mask, other = call_arg(load, 1, "mask"), call_arg(load, 2, "other")
    inlined = [rename(s.with_changes(leading_lines=[]), pmap) for s in gather]
    if mask is not None:  # lanes the consumer does not read are not gathered (2-D loads: the mask's rank)
        gdefs = {a[0]: a[1] for st in inlined if (a := simple_assign(st)) is not None}
        inlined = [_and_load_masks(st, code_of(mask), gdefs) for st in inlined]  # type: ignore[arg-type]
    gathered = code_of(rename(value, pmap))
    final = (f"tl.where({code_of(mask)}, ({gathered}).to({dtype}), {code_of(other)})"
             if mask is not None and other is not None else f"({gathered}).to({dtype})")
    last = cst.parse_statement(f"{target} = {final}")
    first = inlined[0] if inlined else last
    note = comment_line(f"prologue fused from {prod.kernel}: {tensor}[{crow}, {ccol}] gathered here, "
                        f"never stored")
    first = first.with_changes(leading_lines=[*load_stmt.leading_lines, note])  # type: ignore[union-attr]
    replacement = [first, *inlined[1:], last] if inlined else [first]

    class _Swap(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                      updated: cst.SimpleStatementLine) -> Any:
            return cst.FlattenSentinel(replacement) if original is load_stmt else updated

    swapped = cfn.visit(_Swap())
    body_reads = read_names(swapped.body)  # type: ignore[union-attr]
    for fp in list(params):
        if fp.host is not None and read_names(fp.host) & aliases:  # T's strides: only its load used them
            if fp.name in body_reads:
                raise FusionError(f"kernel {cons.kernel} reads `{fp.name}` ({code_of(fp.host)}) besides the load")
            params.remove(fp)
    params = order_params([fp for fp in params if fp.name not in ct])
    name = fused_name([prod.kernel, cons.kernel], taken)
    kernel = swapped.with_changes(name=cst.Name(name), params=build_params(params))  # type: ignore[union-attr]
    notes = [f"kernel {prod.kernel} (a gather into {tensor}) runs inside {cons.kernel}'s load of it, on the tile "
             f"the load reads; the two launches are now one kernel {name} and the {tensor} round trip through "
             "global memory is gone"]
    return kernel, params, tensor, notes


def prologue_step(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> tuple[cst.Module, list[str]] | str:
    """One prologue fusion (module docstring) in ``module``, or the reasons none applies."""
    got = fuse_adjacent(module, kernels, _plan, launch="consumer")
    if isinstance(got, list):
        return "; ".join(got) or "no launch reads a tile of what the launch before it gathered"
    module, notes, gone = got
    grid = gone.grid.value if isinstance(gone.grid, cst.Name) else None
    return drop_unused_assigns(module, {grid} if grid else set()), notes
