"""block_pointers codemod: the tl.dot operands of a K loop are read through tensor descriptors.

Recognised, in a kernel whose loop ``for k0 in range(0, K, BLOCK_K)`` feeds ``tl.dot``: an
operand load ``tl.load(p + X * s0 + Y * s1, mask=..., other=0)`` (directly or through a pointer
name defined in the loop) where ``X``/``Y`` are ``offs[:, None]``/``offs[None, :]`` of two
index names, one the loop's ``k0 + tl.arange(0, BLOCK_K)``, the other a tile index ``pid *
BLOCK + tl.arange(0, BLOCK)``; the mask only bounds-checks those two names (``offs < D``); and
one of ``s0``/``s1`` is passed ``T.stride(1)`` or ``T.stride(-1)`` at the launch (the
contiguous dim; a descriptor's last dim must have stride 1).

The rewrite builds ``tl.make_tensor_descriptor(p, shape=[D0, D1], strides=[s, s_unit],
block_shape=[B0, B1])`` before the loop, ordered so the contiguous dim is last, and loads the
tile with ``desc.load([offset0, offset1])`` (``.T`` when the contiguous dim was the tile's first
axis). Out-of-bounds rows and columns come back as zeros, which is what the mask and
``other=0`` gave. On Hopper the load is one TMA copy into shared memory, pipelined across the
loop's stages; on Xe a 2-D block read (knowledge rules ``block_io_for_dot_operands``,
``descriptor_no_boundary_check``). A descriptor needs every operand's base address and
non-unit strides to be multiples of 16 bytes (a fp16 row a multiple of 8 elements): Triton's
interpreter asserts it, and on the H200 a device-built descriptor over a 37-column fp16 operand
read wrong tiles without a word (2026-12-04). So the rewritten kernel is a second kernel,
``<kernel>_descriptor``, and the launch picks it only where ``_descriptor_aligned`` holds for
the operands the descriptors read; elsewhere the original kernel's pointer loads run, and the
module is right at every shape. Device-side descriptors need global scratch memory on NVIDIA
(Triton >= 3.3): the launch first gives Triton an allocator on the operands' device.

Applies only where the installed Triton has tensor descriptors (probed, FACTS.md: Triton 3.9
removed block pointers; 3.6 has both).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.common import (
    CodemodResult,
    code_of,
    dotted_name,
    int_value,
    is_constexpr_param,
    not_applicable,
    parse_kernels,
    still_parses,
)
from xeforge_core.codemods.host import host_facts, host_functions, launch_counts
from xeforge_core.codemods.kernel_edit import (
    TL_ARANGE,
    TL_LOAD,
    Edits,
    all_names,
    assigned_names,
    block_stmts,
    call_arg,
    calls_named,
    drop_dead_defs,
    fresh_name,
    insert_before_kernels,
    parse_expr,
    pointer_terms,
    read_names,
    simple_assign,
    walk,
)
from xeforge_core.codemods.registry import CodemodSettings, register

NAME = "block_pointers"
ALLOC_HELPER = "_descriptor_scratch"
ALIGNED_HELPER = "_descriptor_aligned"
_ALIGNED_SRC = f"""

def {ALIGNED_HELPER}(*tensors):
    \"\"\"Whether every tensor can back a tensor descriptor: its base address and each stride but
    the unit one a multiple of 16 bytes (NVIDIA's TMA and Xe's 2-D block reads need it).\"\"\"
    return all(t.data_ptr() % 16 == 0 and all(s * t.element_size() % 16 == 0 for s in t.stride() if s != 1)
               for t in tensors)
"""
_HELPER_SRC = f'''

def {ALLOC_HELPER}(tensor):
    """Kernels that build tensor descriptors on the device ask Triton for global scratch
    memory on NVIDIA GPUs: give it an allocator on ``tensor``'s device (not needed on the cpu)."""
    if tensor.device.type != "cpu" and hasattr(triton, "set_allocator"):
        device = tensor.device
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device=device))
'''


def _defs_everywhere(fn: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    counts: dict[str, int] = {}
    for n in assigned_names(fn.body):
        counts[n] = counts.get(n, 0) + 1
    out: dict[str, cst.BaseExpression] = {}

    class _V(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            a = simple_assign(node)
            if a is not None and counts.get(a[0]) == 1:
                out[a[0]] = a[1]

    fn.body.visit(_V())
    return out


def _index_of(expr: cst.BaseExpression) -> tuple[str, int] | None:
    """``(name, axis)`` for ``name[:, None]`` (axis 0) / ``name[None, :]`` (axis 1)."""
    if not (isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and len(expr.slice) == 2):
        return None
    kinds = []
    for el in expr.slice:
        s = el.slice
        if isinstance(s, cst.Slice) and s.lower is None and s.upper is None:
            kinds.append(":")
        elif isinstance(s, cst.Index) and isinstance(s.value, cst.Name) and s.value.value == "None":
            kinds.append("None")
        else:
            return None
    if kinds == [":", "None"]:
        return expr.value.value, 0
    if kinds == ["None", ":"]:
        return expr.value.value, 1
    return None


def _arange_parts(expr: cst.BaseExpression | None) -> tuple[cst.BaseExpression, str] | None:
    """``(offset, BLOCK)`` for ``offset + tl.arange(0, BLOCK)`` (either order)."""
    if expr is None:
        return None
    terms = pointer_terms(expr)
    if len(terms) != 2:
        return None
    for a, b in ((terms[0], terms[1]), (terms[1], terms[0])):
        if isinstance(b, cst.Call) and dotted_name(b.func) in TL_ARANGE and len(b.args) == 2 \
                and int_value(b.args[0].value) == 0 and isinstance(b.args[1].value, cst.Name):
            return a, b.args[1].value.value
    return None


def _mask_bounds(mask: cst.BaseExpression | None) -> dict[str, str] | None:
    """``{index name: bound}`` for a mask that is only ``(a[:, None] < A) & (b[None, :] < B)``
    checks (either may be a name defined as ``a < A``); ``None`` for anything else."""
    if mask is None:
        return {}
    parts: list[cst.BaseExpression] = []

    def split(e: cst.BaseExpression) -> None:
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.BitAnd):
            split(e.left)
            split(e.right)
        else:
            parts.append(e)

    split(mask)
    out: dict[str, str] = {}
    for p in parts:
        if not (isinstance(p, cst.Comparison) and len(p.comparisons) == 1
                and isinstance(p.comparisons[0].operator, cst.LessThan)
                and isinstance(p.comparisons[0].comparator, cst.Name)):
            return None
        left = p.left
        idx = _index_of(left)
        if idx is None:
            return None
        out[idx[0]] = p.comparisons[0].comparator.value
    return out


def _expand_mask(mask: cst.BaseExpression | None, defs: dict[str, cst.BaseExpression]) -> cst.BaseExpression | None:
    """``mask_m[:, None] & mask_k[None, :]`` with ``mask_m = offs_m < M`` becomes
    ``(offs_m[:, None] < M) & (offs_k[None, :] < K)``; other masks unchanged."""
    if mask is None:
        return None

    class _T(cst.CSTTransformer):
        def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
            idx = _index_of(updated)
            if idx is None or idx[0] not in defs:
                return updated
            d = defs[idx[0]]
            if isinstance(d, cst.Comparison) and len(d.comparisons) == 1 and isinstance(d.left, cst.Name):
                sub = updated.with_changes(value=d.left)
                return d.with_changes(left=sub, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            return updated

    return mask.visit(_T())


def _stride_index(v: cst.BaseExpression) -> tuple[str, int] | None:
    if (isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "stride"
            and isinstance(v.func.value, cst.Name) and len(v.args) == 1):
        k = int_value(v.args[0].value)
        return (v.func.value.value, k) if k is not None else None
    return None


def _unit_stride(launch: Any, param: str) -> bool:
    """Whether ``param`` is passed ``T.stride(-1)``, or ``T.stride(k)`` with ``k >= 1`` the
    highest dim of ``T`` whose stride the launch passes (its last, contiguous dim)."""
    arg = launch.bound.get(param)
    got = _stride_index(arg.value) if arg is not None else None
    if got is None:
        return False
    tensor, k = got
    if k == -1:
        return True
    dims = [si[1] for a in launch.call.args if (si := _stride_index(a.value)) is not None and si[0] == tensor]
    return k >= 1 and k == max(dims)


def _plan(fn: cst.FunctionDef, launch: Any) -> tuple[cst.FunctionDef, list[str]] | str:
    name = fn.name.value
    params = {p.name.value for p in fn.params.params}
    constexprs = {p.name.value for p in fn.params.params if is_constexpr_param(p)}
    defs = _defs_everywhere(fn)
    taken = all_names(fn) | params
    loops: list[cst.For] = []

    class _Loops(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            if calls_named(node.body, {"tl.dot", "triton.language.dot"}) and isinstance(node.target, cst.Name):
                loops.append(node)

    fn.body.visit(_Loops())
    if not loops:
        return f"kernel {name} has no loop feeding tl.dot"
    notes: list[str] = []
    edits: dict[int, cst.For] = {}
    heads: dict[int, list[cst.BaseStatement]] = {}
    for loop in loops:
        it = loop.iter
        args = [a.value for a in it.args] if isinstance(it, cst.Call) and dotted_name(it.func) == "range" else []
        if len(args) != 3 or int_value(args[0]) != 0 or not all(isinstance(a, cst.Name) for a in args[1:]):
            return f"kernel {name}: the dot loop is not `for k0 in range(0, K, BLOCK_K)`"
        k_bound, k_block = args[1].value, args[2].value  # type: ignore[union-attr]
        kvar = loop.target.value  # type: ignore[union-attr]
        stmts = block_stmts(loop.body)
        local = {}
        for s in stmts:
            a = simple_assign(s)
            if a is not None:
                local[a[0]] = a[1]
        head: list[cst.BaseStatement] = []
        new_stmts: list[cst.BaseStatement] = []
        replaced = 0
        for s in stmts:
            loads = [c for c in calls_named(s, TL_LOAD)] if isinstance(s, cst.SimpleStatementLine) else []
            plan_by_call: dict[int, cst.BaseExpression] = {}
            for call in loads:
                got = _operand(call, local, defs, kvar, k_bound, k_block, constexprs, params, launch, taken)
                if isinstance(got, str):
                    continue
                desc_stmt, load_expr, note = got
                head.append(desc_stmt)
                plan_by_call[id(call)] = load_expr
                notes.append(note)
            if plan_by_call:
                class _R(cst.CSTTransformer):
                    def leave_Call(self, original: cst.Call, updated: cst.Call, m=plan_by_call) -> cst.BaseExpression:
                        return m.get(id(original), updated)

                s = s.visit(_R())
                replaced += len(plan_by_call)
            new_stmts.append(s)
        if not replaced:
            continue
        pointer_names = {n for n, v in local.items() if read_names(v) & params and "ptr" in code_of(v)}
        new_stmts = drop_dead_defs(new_stmts, pointer_names | {p for p in params if "ptr" in p})
        # index vectors only the removed pointer arithmetic used
        outside = read_names(fn.body.with_changes(body=[b for b in block_stmts(fn.body) if b is not loop]))
        changed = True
        while changed:
            changed = False
            reads = outside | set().union(*(read_names(x) for x in new_stmts))
            for x in list(new_stmts):
                a = simple_assign(x)
                if a is not None and a[0] not in reads and calls_named(a[1], TL_ARANGE):
                    new_stmts.remove(x)
                    changed = True
        edits[id(loop)] = loop.with_changes(body=loop.body.with_changes(body=new_stmts),  # type: ignore[attr-defined]
                                            leading_lines=loop.leading_lines)
        heads[id(loop)] = head
    if not edits:
        return (f"kernel {name}: no tl.dot operand is loaded as `ptr + rows * stride + cols * stride` with bounds-only "
                "masks, other=0 and a unit stride the launch passes as `.stride(1)`")

    class _Apply(cst.CSTTransformer):
        def leave_For(self, original: cst.For, updated: cst.For):
            if id(original) in edits:
                new = edits[id(original)]
                head = heads[id(original)]
                first = head[0].with_changes(leading_lines=[*original.leading_lines, cst.EmptyLine(comment=cst.Comment(
                    "# dot operands through tensor descriptors: one 2-D block read a tile (TMA on Hopper)"))])
                return cst.FlattenSentinel([first, *head[1:], new.with_changes(leading_lines=[])])  # type: ignore[list-item]
            return updated

    return fn.visit(_Apply()), notes  # type: ignore[return-value]


def _operand(call: cst.Call, local: dict[str, cst.BaseExpression], defs: dict[str, cst.BaseExpression], kvar: str,
             k_bound: str, k_block: str, constexprs: set[str], params: set[str], launch: Any, taken: set[str]
             ) -> tuple[cst.BaseStatement, cst.BaseExpression, str] | str:
    ptr = call_arg(call, 0, "pointer")
    if isinstance(ptr, cst.Name) and ptr.value in local:
        ptr = local[ptr.value]
    if ptr is None:
        return "no pointer"
    other = call_arg(call, 2, "other")
    if other is not None and not (isinstance(other, (cst.Float, cst.Integer)) and float(other.value) == 0.0):
        return "other is not 0"
    if any(a.keyword is not None and a.keyword.value not in ("mask", "other") for a in call.args):
        return "extra load options"
    terms = pointer_terms(ptr)
    bases = [t for t in terms if isinstance(t, cst.Name) and t.value in params]
    if len(bases) != 1 or len(terms) != 3:
        return "not ptr + two strided terms"
    base = bases[0].value
    axes: dict[int, tuple[str, str]] = {}   # axis -> (index name, stride param)
    for t in terms:
        if t is bases[0]:
            continue
        if not (isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)):
            return "a term is not index * stride"
        for idx_e, st in ((t.left, t.right), (t.right, t.left)):
            idx = _index_of(idx_e)
            if idx is not None and isinstance(st, cst.Name) and st.value in params:
                axes[idx[1]] = (idx[0], st.value)
                break
        else:
            return "a term is not index[:, None] * stride"
    if set(axes) != {0, 1}:
        return "not a 2-D tile"
    mask_name = call_arg(call, 1, "mask")
    if isinstance(mask_name, cst.Name):
        mask_name = local.get(mask_name.value) or defs.get(mask_name.value) or mask_name
    mask_name = _expand_mask(mask_name, {**defs, **local})
    if mask_name is not None and mask_name.lpar:
        mask_name = mask_name.with_changes(lpar=[], rpar=[])
    bounds = _mask_bounds(mask_name)
    if bounds is None and isinstance(mask_name, cst.BaseExpression):
        return "the mask is not bounds checks"
    shape: dict[int, str] = {}
    block: dict[int, str] = {}
    offset: dict[int, str] = {}
    for axis, (iname, _) in axes.items():
        d = local.get(iname) or defs.get(iname)
        parts = _arange_parts(d)
        if parts is None or parts[1] not in constexprs:
            return f"`{iname}` is not offset + tl.arange(0, BLOCK)"
        off, blk = parts
        block[axis] = blk
        offset[axis] = code_of(off)
        if isinstance(off, cst.Name) and off.value == kvar:
            shape[axis] = k_bound
        else:
            bound = (bounds or {}).get(iname)
            if bound is None or bound not in params:
                return f"no bounds check gives the size of `{iname}`"
            shape[axis] = bound
    if block.get(0) != k_block and block.get(1) != k_block:
        return "neither axis walks the K loop"
    unit = [ax for ax, (_, st) in axes.items() if _unit_stride(launch, st)]
    if len(unit) != 1:
        return "the contiguous dim is not known (no stride passed as .stride(1))"
    last = unit[0]
    first = 1 - last
    desc = fresh_name(f"{base.removesuffix('_ptr')}_desc", taken)
    stmt = cst.parse_statement(
        f"{desc} = tl.make_tensor_descriptor({base}, shape=[{shape[first]}, {shape[last]}], "
        f"strides=[{axes[first][1]}, {axes[last][1]}], block_shape=[{block[first]}, {block[last]}])")
    load = f"{desc}.load([{offset[first]}, {offset[last]}])" + (".T" if last == 0 else "")
    note = (f"{base}: tile [{block[0]}, {block[1]}] read through a tensor descriptor over [{shape[first]}, "
            f"{shape[last]}]" + (" (contiguous along the tile's first axis: loaded transposed)" if last == 0 else ""))
    return stmt, parse_expr(load), note


def _descriptor_bases(fn: cst.FunctionDef) -> list[str]:
    """The pointer parameters ``fn``'s ``tl.make_tensor_descriptor`` calls read, in order."""
    out: list[str] = []
    for call in calls_named(fn.body, {"tl.make_tensor_descriptor"}):
        base = call_arg(call, 0, "base")
        if isinstance(base, cst.Name) and base.value not in out:
            out.append(base.value)
    return out


def _own_grid(host: cst.FunctionDef, launch: Any) -> tuple[cst.BaseExpression | None, cst.SimpleStatementLine | None]:
    """The launch's grid as an expression each of the two launches can own, and the assignment
    it came from: a grid name assigned once in the host function and read by this launch only
    (``grid = (cdiv(m, BLOCK_M), ...)``) is inlined, so the autotuning stage can still rewrite
    each launch's grid; ``(None, None)`` where it stays as it is."""
    grid = launch.grid
    if not isinstance(grid, cst.Name):
        return None, None
    found = [(st, a[1]) for st in block_stmts(host.body) if (a := simple_assign(st)) is not None and a[0] == grid.value]
    uses = sum(1 for n in walk(host.body) if isinstance(n, cst.Name) and n.value == grid.value)
    if len(found) != 1 or uses != 2:  # its one assignment and this launch
        return None, None
    return found[0][1], found[0][0]


def _dispatch(launch: Any, twin: str, operands: list[cst.BaseExpression], grid: cst.BaseExpression | None) -> cst.If:
    """``if _descriptor_aligned(operands): twin[grid](...)`` else the original launch, each
    with its own copy of ``grid`` when given."""

    class _Launch(cst.CSTTransformer):
        def __init__(self, kernel: str) -> None:
            super().__init__()
            self.kernel = kernel

        def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.Subscript:
            if isinstance(updated.value, cst.Name) and updated.value.value == launch.kernel:
                updated = updated.with_changes(value=cst.Name(self.kernel))
                if grid is not None:
                    updated = updated.with_changes(slice=[cst.SubscriptElement(cst.Index(grid))])
            return updated

    original = launch.stmt.with_changes(leading_lines=[])
    test = cst.parse_expression(f"{ALIGNED_HELPER}({', '.join(code_of(o) for o in operands)})")
    return cst.If(test=test, body=cst.IndentedBlock(body=[original.visit(_Launch(twin))]),
                  orelse=cst.Else(body=cst.IndentedBlock(body=[original.visit(_Launch(launch.kernel))])))


def use_descriptors(source: str, *, target: str = "xpu", **_: Any) -> CodemodResult:
    """Apply the tensor-descriptor rewrite (module docstring) to ``source``.

    Returns a :class:`CodemodResult`: changed with one note per operand, or not applicable with
    the reason (no such Triton API installed, no operand in the recognised form)."""
    from xeforge_core.knowledge import installed_triton_pointer_api

    api = installed_triton_pointer_api()
    if not api.get("tensor_descriptor"):
        return not_applicable(NAME, source, f"the installed Triton ({api.get('version') or 'not found'}) has no "
                              "tl.make_tensor_descriptor")
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    module, kernels = found
    if "import torch" not in source:
        return not_applicable(NAME, source, "the module does not import torch (the allocator needs it)")
    counts = launch_counts(module, kernels)
    reasons: list[str] = []
    kernel_edits: dict[str, cst.FunctionDef] = {}
    stmt_edits: dict[int, Any] = {}
    notes: list[str] = []
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        for lc in facts.launches:
            if counts.get(lc.kernel) != 1 or lc.kernel in kernel_edits:
                continue
            got = _plan(kernels[lc.kernel], lc)
            if isinstance(got, str):
                reasons.append(got)
                continue
            new_fn, knotes = got
            tensor = next((a.value for a in lc.call.args if a.keyword is None and isinstance(a.value, cst.Name)), None)
            if tensor is None:
                reasons.append(f"kernel {lc.kernel}: no tensor argument to find the device from")
                continue
            bases = _descriptor_bases(new_fn)
            operands = [lc.bound[b].value for b in bases if b in lc.bound]
            if not operands or len(operands) != len(bases):
                reasons.append(f"kernel {lc.kernel}: the launch does not pass every operand a descriptor reads")
                continue
            twin = fresh_name(f"{lc.kernel}_descriptor", all_names(module))
            kernel_edits[lc.kernel] = cst.FlattenSentinel([  # type: ignore[assignment]
                kernels[lc.kernel], new_fn.with_changes(name=cst.Name(twin), leading_lines=[cst.EmptyLine()] * 2)])
            grid, grid_stmt = _own_grid(fn, lc)
            if grid_stmt is not None:
                stmt_edits[id(grid_stmt)] = cst.RemoveFromParent()
            stmt_edits[id(lc.stmt)] = cst.FlattenSentinel([
                cst.parse_statement(f"{ALLOC_HELPER}({code_of(tensor)})").with_changes(leading_lines=lc.stmt.leading_lines),
                _dispatch(lc, twin, operands, grid)])
            notes.extend(f"kernel {lc.kernel}: {n}" for n in knotes)
            notes.append(f"kernel {lc.kernel}: the descriptor version is {twin}, launched where "
                         f"{ALIGNED_HELPER}({', '.join(code_of(o) for o in operands)}) holds (16-byte aligned "
                         f"operands); {lc.kernel}'s pointer loads run elsewhere")
    if not kernel_edits:
        return not_applicable(NAME, source, "; ".join(dict.fromkeys(reasons)) or "no dot operand to rewrite")

    module = insert_before_kernels(module.visit(Edits(kernel_edits, stmt_edits)), _HELPER_SRC, ALLOC_HELPER)
    module = insert_before_kernels(module, _ALIGNED_SRC, ALIGNED_HELPER)
    code = module.code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    return CodemodResult(codemod=NAME, source=code, changed=True, notes=notes + [f"not changed: {r}" for r in reasons])


@register("block_pointers", "tl.dot operands through tensor descriptors (or block pointers)")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return use_descriptors(source, target=settings.target)
