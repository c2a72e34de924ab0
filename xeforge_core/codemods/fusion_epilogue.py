"""fusion codemod, part 2: an elementwise kernel moves into the epilogue of the kernel that
produces its input.

The producer stores a tile of an intermediate ``T`` once, at the top level of its body, as
``tl.store(t_ptr + R * s0 + C * s1, value, mask=M)`` where ``s0``/``s1`` are ``T.stride(0)`` /
``T.stride(1)`` at the launch (``R``, ``C``: the tile's row and column coordinates, e.g.
``offs_m[:, None]`` and ``offs_n[None, :]`` of a GEMM). The consumer, launched next, is loop-free
(elementwise) and reads ``T`` either

* flat: ``tl.load(t_ptr + offs)`` with ``offs = pid * BLOCK + tl.arange(0, BLOCK)``; ``T`` is a
  fresh contiguous allocation, so the flat index of the producer's element is its store offset
  ``R * s0 + C * s1`` and ``offs`` becomes that expression; or
* by rows and columns: ``tl.load(t_ptr + r * sr + c * sc)`` with ``sr``/``sc`` bound to
  ``T.stride(0)``/``T.stride(1)``; the definitions of ``r`` and ``c`` become ``R`` and ``C``.

Either way every address the consumer computes is the one it computed before, for the element
the producer holds in registers; the consumer's body replaces the producer's store (the value is
converted to ``T``'s dtype first, as the store did), its stores also take the producer's store
mask (tile lanes outside the output must not write), and the consumer's launch and ``T``
disappear (knowledge rule ``fuse_when_intermediate_disappears``; Xe-Forge fusion_patterns:
bias, activation, scale and residual epilogues). A consumer with a loop (a row reduction across
the producer's tiles) is left alone here (rule ``gemm_needs_2d_tiles``); a row sum is
:mod:`fusion_reduce`'s case.
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
    order_params,
)
from xeforge_core.codemods.host import (
    HostFacts,
    Launch,
    tl_dtype,
)
from xeforge_core.codemods.kernel_edit import (
    TL_ARANGE,
    TL_LOAD,
    TL_STORE,
    assigned_names,
    base_and_offset,
    body_of,
    call_arg,
    calls_named,
    comment_line,
    drop_dead_defs,
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
    with_body,
)


def _stride_of(launch: Launch, param: str, tensor: str, facts: HostFacts) -> int | None:
    """``k`` when ``param`` is passed ``tensor.stride(k)`` (``tensor`` or a view of it)."""
    arg = launch.bound.get(param)
    if arg is None:
        return None
    v = arg.value
    if (isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "stride"
            and isinstance(v.func.value, cst.Name) and facts.root(v.func.value.value) == tensor
            and len(v.args) == 1 and isinstance(v.args[0].value, cst.Integer)):
        return int(v.args[0].value.value)
    return None


def _product(term: cst.BaseExpression, names: dict[str, cst.BaseExpression]) -> tuple[cst.BaseExpression, str] | None:
    """``(factor, stride_param)`` for ``factor * stride`` / ``stride * factor`` (through a name
    defined as such)."""
    if isinstance(term, cst.Name) and term.value in names:
        term = names[term.value]
    if isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Multiply):
        for a, b in ((term.left, term.right), (term.right, term.left)):
            if isinstance(b, cst.Name):
                return a, b.value
    return None


def _tile_coords(fn: cst.FunctionDef, launch: Launch, facts: HostFacts, tensor: str
                 ) -> tuple[cst.SimpleStatementLine, cst.BaseExpression, cst.BaseExpression | None, cst.BaseExpression,
                            cst.BaseExpression, str] | str:
    """The producer's single top-level store of ``tensor``: (statement, offset, mask, value,
    pointer param...) plus the row/column coordinate check; or why not."""
    params = {p.name.value for p in fn.params.params}
    ptr_params = {p for p, a in launch.bound.items() if isinstance(a.value, cst.Name)
                  and facts.root(a.value.value) == tensor}
    stores = []
    defs = once_defs(body_of(fn), fn.body)
    for s in body_of(fn):
        call = expr_stmt_call(s)
        if call is not None and dotted_name(call.func) in TL_STORE:
            split = base_and_offset(resolve(call_arg(call, 0, "pointer"), defs), ptr_params)  # type: ignore[arg-type]
            if split is not None:
                stores.append((s, call, split))
    nested = [c for c in calls_named(fn.body, TL_STORE)
              if base_and_offset(resolve(call_arg(c, 0, "pointer"), defs), ptr_params) is not None]  # type: ignore[arg-type]
    if len(stores) != 1 or len(nested) != 1:
        return f"kernel {fn.name.value} stores {tensor} {len(nested)} time(s), not once at the top level of its body"
    stmt, call, (ptr, offset) = stores[0]
    if offset is None:
        return f"kernel {fn.name.value} stores {tensor} without an offset"
    terms = pointer_terms(offset)
    if len(terms) != 2:
        return f"kernel {fn.name.value} stores {tensor} at `{code_of(offset)}`, not at rows * stride + columns * stride"
    coords: dict[int, cst.BaseExpression] = {}
    for t in terms:
        prod = _product(t, {})
        if prod is None or prod[1] not in params:
            return f"kernel {fn.name.value}: store offset term `{code_of(t)}` is not coordinate * stride parameter"
        k = _stride_of(launch, prod[1], tensor, facts)
        if k is None:
            return (f"kernel {fn.name.value}: `{prod[1]}` is not passed {tensor}.stride(0) or {tensor}.stride(1), so "
                    "the store offset cannot be matched to rows and columns")
        coords[k] = prod[0]
    if set(coords) != {0, 1}:
        return f"kernel {fn.name.value}: the store offset does not cover both dims of {tensor}"
    value = call_arg(call, 1, "value")
    mask = call_arg(call, 2, "mask")
    if value is None:
        return f"kernel {fn.name.value}: the store of {tensor} has no value"
    return stmt, offset, mask, value, coords[0], ptr + "|" + code_of(coords[1])  # type: ignore[return-value]


def _consumer_index(fn: cst.FunctionDef, launch: Launch, facts: HostFacts, tensor: str
                    ) -> tuple[str, dict[str, Any]] | str:
    """How the consumer reads ``tensor``: ``("flat", {"offs": name, "defs": [names...]})`` or
    ``("2d", {"row": name, "col": name, "defs": [...]})``; or why it is not an elementwise read."""
    name = fn.name.value
    if any(isinstance(n, (cst.For, cst.While)) for n in walk(fn.body)):
        return (f"kernel {name} loops over {tensor} (a reduction across the producer's tiles); it stays a separate "
                "launch (rule gemm_needs_2d_tiles)")
    ptr_params = {p for p, a in launch.bound.items() if isinstance(a.value, cst.Name)
                  and facts.root(a.value.value) == tensor}
    stored, _ = _pointer_uses(fn, TL_STORE, ptr_params)
    if stored:
        return f"kernel {name} also writes {tensor}"
    loads, bad = _pointer_uses(fn, TL_LOAD, ptr_params)
    if bad or not loads:
        return f"kernel {name} reads {tensor} through a derived pointer"
    offsets = {code_of(o).replace(" ", "") for _, o in loads if o is not None}
    if len(offsets) != 1:
        return f"kernel {name} reads {tensor} at several offsets"
    offset = loads[0][1]
    defs: dict[str, cst.BaseExpression] = {}
    counts: dict[str, int] = {}
    for n in assigned_names(fn.body):
        counts[n] = counts.get(n, 0) + 1
    for s in body_of(fn):
        a = simple_assign(s)
        if a is not None:
            defs[a[0]] = a[1]
    constexprs = {p.name.value for p in fn.params.params if is_constexpr_param(p)}
    if isinstance(offset, cst.Name) and counts.get(offset.value) == 1:
        d = defs.get(offset.value)
        if d is not None and _is_flat_index(d, defs, constexprs):
            return "flat", {"offs": offset.value}
        return f"kernel {name} reads {tensor} at `{offset.value}`, which is not program_id * BLOCK + tl.arange(0, BLOCK)"
    terms = pointer_terms(offset) if offset is not None else []
    if len(terms) == 2:
        found: dict[int, str] = {}
        for t in terms:
            prod = _product(t, defs)
            if prod is None or not isinstance(prod[0], cst.Name):
                return f"kernel {name} reads {tensor} at `{code_of(offset)}`, not at row * stride + column * stride"
            k = _stride_of(launch, prod[1], tensor, facts)
            if k is None:
                return f"kernel {name}: `{prod[1]}` is not passed {tensor}.stride(0) or .stride(1)"
            found[k] = prod[0].value
        if set(found) == {0, 1} and all(counts.get(v) == 1 for v in found.values()):
            for v in found.values():
                if not _is_index(defs.get(v), defs, constexprs):
                    return f"kernel {name}: `{v}` is not built from tl.program_id and tl.arange"
            return "2d", {"row": found[0], "col": found[1]}
    return f"kernel {name} reads {tensor} at `{code_of(offset) if offset is not None else ''}`, which the fusion cannot map"


def _pointer_uses(fn: cst.FunctionDef, names: set[str], ptr_params: set[str]
                  ) -> tuple[list[tuple[cst.Call, cst.BaseExpression | None]], bool]:
    out = []
    bad = False
    defs = once_defs(body_of(fn), fn.body)
    pointer_defs = {n for n, v in defs.items() if read_names(v) & ptr_params}
    for c in calls_named(fn.body, names):
        ptr = resolve(call_arg(c, 0, "pointer"), defs)
        if ptr is None:
            continue
        split = base_and_offset(ptr, ptr_params)
        if split is not None:
            out.append((c, split[1]))
        elif read_names(ptr) & ptr_params:
            bad = True
    for s in body_of(fn):
        if calls_named(s, TL_LOAD | TL_STORE):
            continue
        a = simple_assign(s)
        if a is not None and a[0] in pointer_defs:
            continue
        if read_names(s) & ptr_params:
            bad = True
    return out, bad


def _is_pid(expr: cst.BaseExpression | None, defs: dict[str, cst.BaseExpression]) -> bool:
    if isinstance(expr, cst.Name):
        expr = defs.get(expr.value)
    return isinstance(expr, cst.Call) and dotted_name(expr.func) in PROGRAM_ID


def _is_flat_index(expr: cst.BaseExpression, defs: dict[str, cst.BaseExpression], constexprs: set[str]) -> bool:
    terms = pointer_terms(expr)
    if len(terms) != 2:
        return False
    has_arange = any(isinstance(t, cst.Call) and dotted_name(t.func) in TL_ARANGE for t in terms)
    has_pid = any(isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)
                  and (_is_pid(t.left, defs) or _is_pid(t.right, defs)) for t in terms)
    return has_arange and has_pid


def _is_index(expr: cst.BaseExpression | None, defs: dict[str, cst.BaseExpression], constexprs: set[str]) -> bool:
    if expr is None:
        return False
    if _is_pid(expr, defs):
        return True
    return _is_flat_index(expr, defs, constexprs)


def _and_mask(call: cst.Call, extra: cst.BaseExpression) -> cst.Call:
    """``tl.store(p, v, mask=m)`` -> ``mask=(m) & (extra)``; adds ``mask=extra`` when absent."""
    args = list(call.args)
    for i, a in enumerate(args):
        if (a.keyword is not None and a.keyword.value == "mask") or (a.keyword is None and i == 2):
            new = parse_expr(f"({code_of(a.value)}) & ({code_of(extra)})")
            args[i] = a.with_changes(value=new)
            return call.with_changes(args=args)
    last = args[-1]
    args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(keyword=cst.Name("mask"), value=extra, equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


def _plan(facts: HostFacts, prod: Launch, cons: Launch, kernels: dict[str, cst.FunctionDef],
          taken: set[str]) -> tuple[cst.FunctionDef, list[FusedParam], str, list[str]]:
    pfn, cfn = kernels[prod.kernel], kernels[cons.kernel]
    if any(is_autotune_decorator(d) for d in cfn.decorators):
        raise FusionError(f"kernel {cons.kernel} is autotuned")
    # the intermediate: a fresh allocation the producer stores and the consumer loads, used nowhere else
    tensor, _ = intermediate_tile(facts, prod, cons)
    shape = facts.allocs[tensor].shape
    got = _tile_coords(pfn, prod, facts, tensor)
    if isinstance(got, str):
        raise FusionError(got)
    store_stmt, offset, pmask, value, row_expr, rest = got
    col_expr = parse_expr(rest.split("|", 1)[1])
    index = _consumer_index(cfn, cons, facts, tensor)
    if isinstance(index, str):
        raise FusionError(index)
    mode, info = index

    # parameters: the producer's (minus the intermediate), then the consumer's new ones
    params: list[FusedParam] = []
    by_host: dict[str, str] = {}
    names: set[str] = set()
    pmap: dict[str, str] = {}
    tparams_p = set()
    for p in pfn.params.params:
        n = p.name.value
        a = prod.bound.get(n)
        if a is not None and isinstance(a.value, cst.Name) and facts.root(a.value.value) == tensor:
            tparams_p.add(n)
            names.add(n)
            continue
        host = _contiguous_stride(a.value, tensor, shape, facts) if a is not None else None
        params.append(FusedParam(n, p, host, is_constexpr_param(p)))
        names.add(n)
        pmap[n] = n
        if a is not None:
            by_host[code_of(a.value).replace(" ", "") + f"|{is_constexpr_param(p)}"] = n
    for n in assigned_names(pfn.body):
        names.add(n)
    kmap: dict[str, str] = {}
    tparams_c = set()
    dead_defs = set()
    for p in cfn.params.params:
        n = p.name.value
        a = cons.bound.get(n)
        if a is None and p.default is None:
            raise FusionError(f"kernel {cons.kernel}: parameter {n} is not passed")
        if a is not None and isinstance(a.value, cst.Name) and facts.root(a.value.value) == tensor:
            tparams_c.add(n)
            kmap[n] = n
            continue
        key = (code_of(a.value).replace(" ", "") if a is not None else "") + f"|{is_constexpr_param(p)}"
        if a is not None and key in by_host:
            kmap[n] = by_host[key]
            continue
        new = fresh_name(n, names)
        kmap[n] = new
        host = _contiguous_stride(a.value, tensor, shape, facts) if a is not None else None
        params.append(FusedParam(new, p.with_changes(name=cst.Name(new)), host, is_constexpr_param(p)))
    for n in assigned_names(cfn.body):
        if n not in kmap:
            kmap[n] = fresh_name(n, names) if n in names else n
            names.add(kmap[n])
    # the consumer's body (renamed), its index definitions replaced by the producer's coordinates
    if mode == "flat":
        subst = {kmap[info["offs"]]: offset}
    else:
        subst = {kmap[info["row"]]: row_expr, kmap[info["col"]]: col_expr}
    dtype = tl_dtype(facts.dtype_of(tensor), by_host)
    if dtype is None:
        raise FusionError(f"the dtype of {tensor} is not known from its allocation")
    local = fresh_name(f"{tensor}_val", names)
    tparams = {kmap[t] for t in tparams_c}
    new_body: list[cst.BaseStatement] = []
    for s in body_of(cfn):
        if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Expr) \
                and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            continue
        s = rename(s, kmap)  # type: ignore[assignment]
        a = simple_assign(s)
        if a is not None and a[0] in subst:
            s = s.with_changes(body=[s.body[0].with_changes(value=subst[a[0]])])  # type: ignore[union-attr]
            dead_defs |= read_names(a[1])
        new_body.append(s)
    # drop index definitions nothing reads any more (the consumer's program ids)
    changed = True
    while changed:
        changed = False
        reads = set()
        for s in new_body:
            reads |= read_names(s)
        for s in list(new_body):
            a = simple_assign(s)
            if a is not None and a[0] not in reads and (_is_pid(a[1], {}) or a[0] in dead_defs) and not calls_named(
                    s, TL_LOAD):
                new_body.remove(s)
                changed = True
    reads = set()
    for s in new_body:
        reads |= read_names(s)
    params = [fp for fp in params if fp.name in pmap or fp.name in reads]
    tl_mask = pmask

    cdefs = once_defs(new_body, cfn.body)

    class _T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            f = dotted_name(updated.func)
            ptr = resolve(call_arg(updated, 0, "pointer"), cdefs)
            if f in TL_LOAD and ptr is not None and base_and_offset(ptr, tparams) is not None:
                m, o = call_arg(updated, 1, "mask"), call_arg(updated, 2, "other")
                if m is not None and o is not None:
                    return parse_expr(f"tl.where({code_of(m)}, {local}, {code_of(o)})")
                return cst.Name(local)
            if f in TL_STORE and tl_mask is not None:
                return _and_mask(updated, tl_mask)
            return updated

    epilogue = drop_dead_defs([s.visit(_T()) for s in new_body], tparams)  # type: ignore[misc]
    if any(read_names(s) & tparams for s in epilogue):
        raise FusionError(f"kernel {cons.kernel} uses {tensor} other than by loading it")
    head = cst.parse_statement(f"{local} = ({code_of(value)}).to({dtype})")
    head = head.with_changes(leading_lines=[*store_stmt.leading_lines, comment_line(
        f"epilogue fused from {cons.kernel}: applied to the tile in registers, {tensor} is never stored")])
    body: list[cst.BaseStatement] = []
    for s in body_of(pfn):
        if s is store_stmt:
            body.append(head)
            body.extend(epilogue)  # type: ignore[arg-type]
        else:
            body.append(s)
    body = drop_dead_defs(body, tparams_p)
    if any(read_names(s) & tparams_p for s in body):
        raise FusionError(f"kernel {prod.kernel} uses {tensor} besides its final store")
    params = order_params(params)
    name = fused_name([prod.kernel, cons.kernel], taken)
    kernel = with_body(pfn.with_changes(name=cst.Name(name), params=build_params(params)), body)
    notes = [f"kernel {cons.kernel} ({mode} elementwise read of {tensor}) runs in the epilogue of {prod.kernel} on its "
             f"output tile; the two launches are now one kernel {name} and the {tensor} round trip through global "
             "memory is gone"]
    return kernel, params, tensor, notes


def _contiguous_stride(value: cst.BaseExpression, tensor: str, shape: Any, facts: HostFacts) -> cst.BaseExpression:
    """``T.stride(0)`` -> ``n`` and ``T.stride(1)`` -> ``1`` for the eliminated ``T`` of shape
    ``(m, n)`` (a fresh contiguous allocation); other expressions unchanged."""
    if (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "stride"
            and isinstance(value.func.value, cst.Name) and facts.root(value.func.value.value) == tensor
            and value.func.value.value == tensor and len(value.args) == 1 and isinstance(value.args[0].value, cst.Integer)):
        k = int(value.args[0].value.value)
        return shape.elements[1].value if k == 0 else cst.Integer("1")
    return value


def epilogue_step(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> tuple[cst.Module, list[str]] | str:
    """One epilogue fusion (module docstring) in ``module``, or the reasons none applies."""
    got = fuse_adjacent(module, kernels, _plan, launch="producer")
    if isinstance(got, list):
        return "; ".join(got) or "no launch reads what the launch before it wrote"
    return got[0], got[1]
