"""fusion codemod, part 4: a row reduction of a tile kernel's output moves into its epilogue.

The producer stores a 2-D intermediate ``T`` once, at the top level of its body, tile by tile
(``tl.store(t_ptr + R * s0 + C * s1, value, mask=M)``, as in :mod:`fusion_epilogue`). The
consumer, launched next over one program per row of ``T``, sums that row in a loop::

    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)             # or a scalar: acc = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(t_ptr + row * stride + offs, mask=offs < n_cols, other=0.0)
                                                    # scalar form: acc += tl.sum(tl.load(...), axis=0)
    ... tl.sum(acc, axis=0) ...                     # scalar form: ... acc ...

with ``n_cols`` the width of ``T`` and the launch grid its height. A row of ``T`` spans several
of the producer's tiles, so no single program holds it: each tile adds the partial sums of its
rows (the stored value, rounded to ``T``'s dtype as the store did, masked by the store's mask)
into a float32 buffer of one element per row with ``tl.atomic_add``; the consumer keeps only
what follows its loop, reading the row's total from that buffer. ``T`` (``M x N`` elements
written once and read once) becomes ``M`` floats: the round trip of the intermediate through
global memory is gone (knowledge rule ``fuse_when_intermediate_disappears``; Xe-Forge
fusion_patterns: GEMM + reduction epilogues).

The buffer is zeroed by its allocation at every call (``torch.zeros``); the sums are added in
an order that can change between runs, so the result is as exact as the consumer's own
float32 accumulation but not bitwise repeatable. A producer that is autotuned is left alone:
the autotuner would run it several times into the same buffer (the autotuning codemod gives
kernels with atomics ``reset_to_zero``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst

from xeforge_core.codemods.common import (
    PROGRAM_ID,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    is_constexpr_param,
)
from xeforge_core.codemods.fusion_chain import FusedParam, FusionError, build_params, fused_name, launch_args
from xeforge_core.codemods.fusion_epilogue import _product, _stride_of, _tile_coords
from xeforge_core.codemods.host import (
    HostFacts,
    Launch,
    fix_commas,
    host_facts,
    host_functions,
    launch_counts,
    option_args,
    tl_dtype,
)
from xeforge_core.codemods.kernel_edit import (
    TL_ARANGE,
    TL_LOAD,
    TL_STORE,
    Edits,
    base_and_offset,
    body_of,
    call_arg,
    calls_named,
    comment_line,
    fresh_name,
    parse_expr,
    parse_stmts,
    pointer_terms,
    read_names,
    simple_assign,
    walk,
    with_body,
)

_TL_SUM = {"tl.sum", "triton.language.sum"}
_TL_ZEROS = {"tl.zeros", "triton.language.zeros"}


@dataclass
class _RowSum:
    """How the consumer sums a row of ``T``: its pointer parameter, the row variable, the
    accumulator, whether it is a vector (summed after the loop) or a scalar, and the loop."""

    ptr: str
    row: str
    acc: str
    vector: bool
    loop: cst.For
    init: cst.BaseStatement


def _is_zero(expr: cst.BaseExpression | None) -> bool:
    if isinstance(expr, cst.Integer):
        return int(expr.value) == 0
    if isinstance(expr, cst.Float):
        return float(expr.value) == 0.0
    return False


def _same_dim(arg: cst.BaseExpression | None, dim: cst.BaseExpression, tensor: str, k: int) -> bool:
    """Whether a launch argument is ``T``'s size along ``k``: the allocation's own expression for
    it, ``T.shape[k]`` or ``T.size(k)``."""
    if arg is None:
        return False
    text = code_of(arg).replace(" ", "")
    return text in (code_of(dim).replace(" ", ""), f"{tensor}.shape[{k}]", f"{tensor}.size({k})")


def _grid_rows(launch: Launch) -> cst.BaseExpression | None:
    """``X`` of a one-axis launch grid ``(X,)``."""
    g = launch.grid
    if isinstance(g, (cst.Tuple, cst.List)) and len(g.elements) == 1:
        return g.elements[0].value
    return None


def _loop_range(loop: cst.For) -> tuple[str, cst.BaseExpression, cst.BaseExpression] | None:
    """``(var, stop, step)`` of ``for var in range(0, stop, step)`` (or ``tl.range``)."""
    it = loop.iter
    if not (isinstance(loop.target, cst.Name) and isinstance(it, cst.Call)
            and dotted_name(it.func) in ("range", "tl.range", "triton.language.range")):
        return None
    args = [a.value for a in it.args if a.keyword is None]
    if len(args) != 3 or int_value(args[0]) != 0:
        return None
    return loop.target.value, args[1], args[2]


def _row_sum(fn: cst.FunctionDef, launch: Launch, facts: HostFacts, tensor: str,
             shape: cst.Tuple | cst.List) -> _RowSum | str:
    """The consumer's row sum of ``tensor`` (module docstring), or why it is not one."""
    name = fn.name.value
    ptrs = {p for p, a in launch.bound.items() if isinstance(a.value, cst.Name) and facts.root(a.value.value) == tensor}
    if len(ptrs) != 1:
        return f"kernel {name} takes {tensor} as {len(ptrs)} parameters"
    ptr = next(iter(ptrs))
    rows = _grid_rows(launch)
    if rows is None or not _same_dim(rows, shape.elements[0].value, tensor, 0):
        return f"kernel {name} is not launched over one program per row of {tensor}"
    top = body_of(fn)
    loops = [s for s in top if isinstance(s, cst.For)]
    nested = [n for n in walk(fn.body) if isinstance(n, (cst.For, cst.While))]
    if len(loops) != 1 or len(nested) != 1:
        return f"kernel {name} does not sum {tensor} in one top-level loop"
    loop = loops[0]
    rng = _loop_range(loop)
    if rng is None:
        return f"kernel {name}: the loop is not `for start in range(0, n_cols, BLOCK)`"
    var, stop, step = rng
    if not (isinstance(stop, cst.Name) and _same_dim(launch.bound.get(stop.value).value
                                                     if stop.value in launch.bound else None,
                                                     shape.elements[1].value, tensor, 1)):
        return f"kernel {name}: the loop does not run over the whole width of {tensor}"
    # the program id of the row, defined once at the top level
    row = None
    defs = {a[0]: a[1] for a in map(simple_assign, top) if a is not None}
    for n, v in defs.items():
        if isinstance(v, cst.Call) and dotted_name(v.func) in PROGRAM_ID and int_value(call_arg(v, 0, "axis")) == 0:
            row = n
    if row is None:
        return f"kernel {name} has no `row = tl.program_id(0)`"
    # inside the loop: `offs = start + tl.arange(0, BLOCK)`, then the one accumulation
    inner = list(loop.body.body) if isinstance(loop.body, cst.IndentedBlock) else []
    offs = None
    acc_stmt = None
    acc_line = None
    for s in inner:
        a = simple_assign(s)
        if a is not None:
            terms = pointer_terms(a[1])
            if (len(terms) == 2 and any(isinstance(t, cst.Name) and t.value == var for t in terms)
                    and any(isinstance(t, cst.Call) and dotted_name(t.func) in TL_ARANGE
                            and code_of(call_arg(t, 1, "end") or cst.Name("_")) == code_of(step) for t in terms)):
                offs = a[0]
            continue
        if (isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.AugAssign)
                and isinstance(s.body[0].operator, cst.AddAssign) and isinstance(s.body[0].target, cst.Name)
                and acc_stmt is None):
            acc_stmt, acc_line = s.body[0], s
            continue
        return f"kernel {name}: the loop does more than sum {tensor}"
    if offs is None or acc_stmt is None:
        return f"kernel {name}: the loop does not add `tl.load({ptr} + {row} * stride + offs)` to an accumulator"
    acc = acc_stmt.target.value  # type: ignore[union-attr]
    value = acc_stmt.value
    vector = True
    if isinstance(value, cst.Call) and dotted_name(value.func) in _TL_SUM:
        vector = False
        value = call_arg(value, 0, "input")
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "to" \
            and code_of(value.args[0].value) in ("tl.float32", "triton.language.float32"):
        value = value.func.value
    if not (isinstance(value, cst.Call) and dotted_name(value.func) in TL_LOAD):
        return f"kernel {name}: the loop adds `{code_of(acc_stmt.value)}`, not a load of {tensor}"
    load = value
    split = base_and_offset(call_arg(load, 0, "pointer") or cst.Name("_"), {ptr})
    if split is None or split[1] is None:
        return f"kernel {name} reads {tensor} through a derived pointer"
    terms = pointer_terms(split[1])
    row_term = [t for t in terms if _product(t, {}) is not None]
    col_term = [t for t in terms if isinstance(t, cst.Name) and t.value == offs]
    if len(terms) != 2 or len(row_term) != 1 or len(col_term) != 1:
        return f"kernel {name} reads {tensor} at `{code_of(split[1])}`, not at row * stride + offs"
    factor, stride = _product(row_term[0], {})  # type: ignore[misc]
    if not (isinstance(factor, cst.Name) and factor.value == row) or _stride_of(launch, stride, tensor, facts) != 0:
        return f"kernel {name} reads {tensor} at `{code_of(split[1])}`, not at its row * {tensor}.stride(0)"
    mask = call_arg(load, 1, "mask")
    if mask is None or code_of(mask).replace(" ", "") != f"{offs}<{code_of(stop)}":
        return f"kernel {name}: the load of {tensor} is not masked by `{offs} < {code_of(stop)}`"
    if not _is_zero(call_arg(load, 2, "other")):
        return f"kernel {name}: the masked load of {tensor} has no `other=0`"
    # the accumulator: float32 zeros before the loop, read after it only as its sum (vector form)
    init = None
    for s in top[:top.index(loop)]:
        a = simple_assign(s)
        if a is not None and a[0] == acc:
            init = s
            v = a[1]
            zeros_f32 = (isinstance(v, cst.Call) and dotted_name(v.func) in _TL_ZEROS
                         and "float32" in code_of(v))
            if vector and not zeros_f32 or not vector and not (zeros_f32 or _is_zero(v)):
                return f"kernel {name}: the accumulator {acc} does not start as float32 zeros"
    if init is None:
        return f"kernel {name}: the accumulator {acc} is not set before the loop"
    if read_names(cst.Module(body=[s for s in inner if s is not acc_line])) & {acc}:
        return f"kernel {name} reads the accumulator {acc} inside the loop"
    after = top[top.index(loop) + 1:]
    if vector:
        sums = [c for s in after for c in calls_named(s, _TL_SUM)
                if isinstance(call_arg(c, 0, "input"), cst.Name) and call_arg(c, 0, "input").value == acc]  # type: ignore[union-attr]
        bare = sum(1 for s in after for n in walk(s) if isinstance(n, cst.Name) and n.value == acc)
        if bare != len(sums) or any(int_value(call_arg(c, 1, "axis")) not in (0, None) for c in sums):
            return f"kernel {name} uses the accumulator {acc} other than as tl.sum({acc}, axis=0)"
    if any(calls_named(s, TL_LOAD | TL_STORE) and read_names(s) & {ptr} for s in after):
        return f"kernel {name} reads {tensor} after its loop"
    return _RowSum(ptr=ptr, row=row, acc=acc, vector=vector, loop=loop, init=init)


class _SumToName(cst.CSTTransformer):
    """``tl.sum(acc, axis=0)`` (vector form) or ``acc`` (scalar form) -> ``total``."""

    def __init__(self, acc: str, total: str, vector: bool) -> None:
        self.acc, self.total, self.vector = acc, total, vector

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        first = call_arg(updated, 0, "input")
        if self.vector and dotted_name(updated.func) in _TL_SUM and isinstance(first, cst.Name) \
                and first.value == self.acc:
            return cst.Name(self.total)
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return cst.Name(self.total) if not self.vector and updated.value == self.acc else updated


def _without_tensor(expr: cst.BaseExpression, tensor: str, shape: cst.Tuple | cst.List) -> cst.BaseExpression:
    """A launch argument with ``T``'s metadata (``T.shape[k]``, ``T.size(k)``, ``T.stride(k)``)
    spelled from its allocation (a fresh contiguous ``(rows, cols)`` tensor), since ``T`` is
    gone. Raises :class:`FusionError` when it still needs ``T``."""
    rows, cols = (code_of(e.value) for e in shape.elements)
    text = code_of(expr)
    for k, dim in ((0, rows), (1, cols)):
        text = text.replace(f"{tensor}.shape[{k}]", f"({dim})").replace(f"{tensor}.size({k})", f"({dim})")
    text = text.replace(f"{tensor}.stride(0)", f"({cols})").replace(f"{tensor}.stride(1)", "1")
    out = parse_expr(text)
    if tensor in read_names(out):
        raise FusionError(f"a launch argument `{code_of(expr)}` needs {tensor}, which the fusion removes")
    return out


def _kept_params(fn: cst.FunctionDef, launch: Launch, body: list[cst.BaseStatement], swap: dict[str, str],
                 tensor: str, shape: cst.Tuple | cst.List) -> list[FusedParam]:
    """``fn``'s parameters that ``body`` still reads, with their launch arguments (``swap``:
    parameter -> the host name passed to it instead of ``tensor``)."""
    reads: set[str] = set()
    for s in body:
        reads |= read_names(s)
    out = []
    for p in fn.params.params:
        n = p.name.value
        if n not in reads:
            continue
        arg = launch.bound.get(n)
        host = cst.Name(swap[n]) if n in swap else (
            _without_tensor(arg.value, tensor, shape) if arg is not None else None)
        out.append(FusedParam(n, p, host, is_constexpr_param(p)))
    return out


def _plan(facts: HostFacts, prod: Launch, cons: Launch, kernels: dict[str, cst.FunctionDef], taken: set[str]
          ) -> tuple[dict[int, Any], list[cst.FunctionDef], dict[str, str], list[str]]:
    """Statement edits, the two new kernels, kernel renames (old -> new) and notes; or raises
    :class:`FusionError`."""
    pfn, cfn = kernels[prod.kernel], kernels[cons.kernel]
    if any(is_autotune_decorator(d) for d in pfn.decorators + cfn.decorators):
        raise FusionError(f"{prod.kernel} or {cons.kernel} is autotuned: the autotuner would run the atomic sums "
                          "several times into one buffer")
    shared = set()
    for a in cons.bound.values():
        if isinstance(a.value, cst.Name):
            root = facts.root(a.value.value)
            if root in facts.allocs and any(isinstance(pa.value, cst.Name) and facts.root(pa.value.value) == root
                                            for pa in prod.bound.values()):
                shared.add(root)
    if len(shared) != 1:
        raise FusionError(f"{cons.kernel} reads {len(shared)} tensor(s) that {prod.kernel} is passed, not one")
    tensor = shared.pop()
    alloc = facts.allocs[tensor]
    if alloc.func != "torch.empty" or alloc.alias_of is not None or not (
            isinstance(alloc.shape, (cst.Tuple, cst.List)) and len(alloc.shape.elements) == 2):
        raise FusionError(f"{tensor} is not a fresh 2-D torch.empty allocation")
    if any(n != tensor and facts.root(n) == tensor for n in facts.allocs):
        raise FusionError(f"{tensor} has views")
    skip = {prod.index, cons.index, facts.body.index(alloc.stmt)}
    if facts.reads_outside(tensor, skip):
        raise FusionError(f"{tensor} is also used outside the two launches; it has to stay in global memory")
    device = next((a.value for a in alloc.call.args if a.keyword is not None and a.keyword.value == "device"), None)
    if device is None:
        raise FusionError(f"the allocation of {tensor} names no device for the row-sum buffer")
    got = _tile_coords(pfn, prod, facts, tensor)
    if isinstance(got, str):
        raise FusionError(got)
    store_stmt, _, pmask, value, row_expr, rest = got
    pptr = rest.split("|", 1)[0]
    found = _row_sum(cfn, cons, facts, tensor, alloc.shape)
    if isinstance(found, str):
        raise FusionError(found)
    by_host = {code_of(a.value).replace(" ", "") + "|False": p for p, a in prod.bound.items()}
    dtype = tl_dtype(facts.dtype_of(tensor), by_host)
    if dtype is None:
        raise FusionError(f"the dtype of {tensor} is not known from its allocation")

    names = set(kernels) | taken
    buf = fresh_name(f"{tensor}_rowsum", set(facts.allocs) | read_names(facts.fn))
    # producer: the store becomes the rows' partial sums, added atomically
    tile = fresh_name(f"{tensor}_tile", set(read_names(pfn)))
    as_f32 = f"({code_of(value)}).to(tl.float32)" if dtype == "tl.float32" \
        else f"({code_of(value)}).to({dtype}).to(tl.float32)"  # rounded to T's dtype, as the store did
    masked = f"tl.where({code_of(pmask)}, {as_f32}, 0.0)" if pmask is not None else as_f32
    row_mask = f", mask=tl.max(({code_of(pmask)}).to(tl.int32), axis=1, keep_dims=True) > 0" if pmask is not None else ""
    new_stmts = parse_stmts(f"{tile} = {masked}\n"
                            f"tl.atomic_add({pptr} + {code_of(row_expr)}, tl.sum({tile}, axis=1, keep_dims=True)"
                            f"{row_mask})\n")
    new_stmts[0] = new_stmts[0].with_changes(leading_lines=[*store_stmt.leading_lines, comment_line(
        f"row-sum epilogue fused from {cons.kernel}: the tile's rows add their partial sums into {buf}; "
        f"{tensor} is never stored")])
    pbody: list[cst.BaseStatement] = []
    for s in body_of(pfn):
        pbody.extend(new_stmts if s is store_stmt else [s])
    pname = fused_name([prod.kernel, "rowsum"], names)
    pparams = _kept_params(pfn, prod, pbody, {pptr: buf}, tensor, alloc.shape)
    pkernel = with_body(pfn.with_changes(name=cst.Name(pname), params=build_params(pparams)), pbody)
    # consumer: what follows the loop, with the row's total read from the buffer
    total = fresh_name(f"{found.acc}_total", set(read_names(cfn)))
    cbody: list[cst.BaseStatement] = []
    for s in body_of(cfn):
        if s is found.init or s is found.loop:
            continue
        cbody.append(s.visit(_SumToName(found.acc, total, found.vector)))  # type: ignore[arg-type]
        a = simple_assign(s)
        if a is not None and a[0] == found.row:
            cbody.extend(parse_stmts(f"{total} = tl.load({found.ptr} + {found.row})\n"))
    cname = fused_name([cons.kernel, "finish"], names | {pname})
    cparams = _kept_params(cfn, cons, cbody, {found.ptr: buf}, tensor, alloc.shape)
    ckernel = with_body(cfn.with_changes(name=cst.Name(cname), params=build_params(cparams)), cbody)
    # host: the buffer replaces the intermediate; both launches call the new kernels
    rows = code_of(alloc.shape.elements[0].value)
    new_alloc = parse_stmts(f"{buf} = torch.zeros(({rows},), dtype=torch.float32, device={code_of(device)})\n")[0]
    edits: dict[int, Any] = {id(alloc.stmt): new_alloc.with_changes(leading_lines=alloc.stmt.leading_lines)}
    for launch, kernel, params in ((prod, pkernel, pparams), (cons, ckernel, cparams)):
        call = launch.call.with_changes(
            func=launch.call.func.with_changes(value=cst.Name(kernel.name.value)),  # type: ignore[attr-defined]
            args=launch_args(params) + option_args(launch))
        edits[id(launch.stmt)] = launch.stmt.with_changes(body=[cst.Expr(call)])
    notes = [f"the row sum of {cons.kernel} over {tensor} runs in the epilogue of {prod.kernel}: each tile adds its "
             f"rows' partial sums into a float32 buffer {buf} ({rows} floats) with tl.atomic_add, and {cname} keeps "
             f"what {cons.kernel} did after its loop; {tensor} ({rows} x {code_of(alloc.shape.elements[1].value)}) "
             "is never stored or read back"]
    return edits, [pkernel, ckernel], {prod.kernel: pname, cons.kernel: cname}, notes


def reduction_step(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> tuple[cst.Module, list[str]] | str:
    """One row-sum epilogue fusion (module docstring) in ``module``, or the reasons none applies."""
    reasons: list[str] = []
    taken = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        for prod, cons in zip(facts.launches, facts.launches[1:]):
            if not any(isinstance(n, cst.For) for n in walk(kernels[cons.kernel].body)):
                continue  # not a reduction: the elementwise epilogue step's case
            try:
                edits, new_kernels, renamed, notes = _plan(facts, prod, cons, kernels, taken)
            except FusionError as exc:
                reasons.append(f"{prod.kernel} -> {cons.kernel}: {exc}")
                continue
            counts = launch_counts(module, kernels)
            by_old = dict(zip(renamed, new_kernels))
            body: list[Any] = []
            for s in module.body:
                if isinstance(s, cst.FunctionDef) and s.name.value in by_old:
                    body.append(by_old[s.name.value])
                    if counts.get(s.name.value, 0) > 1:
                        body.append(s)  # launched elsewhere too: kept
                    continue
                body.append(s)
            module = module.with_changes(body=body)
            return fix_commas(module.visit(Edits(statements=edits))), notes
    return "; ".join(reasons) or "no launch sums the rows of what the launch before it wrote"
