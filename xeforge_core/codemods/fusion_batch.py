"""fusion codemod, part 3: a host loop launching one kernel per batch element becomes one
launch with a batch axis.

Recognised form (a statement of a host function)::

    for i in range(batch):
        ai, bi, ci = a[i], b[i], out[i]          # or one assignment per slice
        kernel[grid](ai, bi, ci, ..., ai.stride(0), ai.stride(1), ...)

where the loop body is only the slicing assignments and the launch, every slice is
``tensor[i]`` of a host tensor, and the kernel reads no ``tl.program_id`` axis at or beyond
the grid's length. The rewrite:

* the kernel gets one batch-stride parameter per sliced pointer (``stride_<ptr>_batch``) and
  starts with ``pid_batch = tl.program_id(<axis>)`` and ``<ptr> += pid_batch.to(tl.int64) *
  stride_<ptr>_batch`` (64-bit: the batch offset can pass 2^31 elements);
* the launch grid gets the batch count as its last axis (``(gm, gn)`` -> ``(gm, gn, batch)``);
* the launch passes the whole tensors; ``ai.stride(k)`` becomes ``a.stride(k + 1)`` and
  ``ai.shape[k]`` / ``ai.size(k)`` become ``a.shape[k + 1]`` / ``a.size(k + 1)``;
* the loop disappears.

One launch instead of ``batch`` launches: the tiles of every batch element are in flight at
once (Triton tutorial on batched GEMM grids; knowledge rule ``fuse_when_intermediate_disappears``
covers the launch count). Loops it does not recognise are reported and left unchanged.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.common import PROGRAM_ID, code_of, dotted_name, int_value, is_autotune_decorator
from xeforge_core.codemods.host import drop_unused_assigns, grid_of, host_functions, launch_counts, launch_of
from xeforge_core.codemods.kernel_edit import (
    block_stmts,
    body_of,
    calls_named,
    fresh_name,
    once_defs,
    parse_expr,
    with_body,
)


def _slices(stmt: cst.BaseStatement, var: str) -> dict[str, str] | None:
    """``{alias: tensor}`` for ``a_i, b_i = a[i], b[i]`` / ``a_i = a[i]``; ``None`` otherwise."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    a = stmt.body[0]
    if len(a.targets) != 1:
        return None
    t, v = a.targets[0].target, a.value
    pairs = []
    if isinstance(t, cst.Name):
        pairs = [(t, v)]
    elif isinstance(t, (cst.Tuple, cst.List)) and isinstance(v, (cst.Tuple, cst.List)) and len(t.elements) == len(
            v.elements):
        pairs = [(te.value, ve.value) for te, ve in zip(t.elements, v.elements)]
    else:
        return None
    out = {}
    for tn, vv in pairs:
        if not (isinstance(tn, cst.Name) and isinstance(vv, cst.Subscript) and isinstance(vv.value, cst.Name)
                and len(vv.slice) == 1 and isinstance(vv.slice[0].slice, cst.Index)
                and isinstance(vv.slice[0].slice.value, cst.Name) and vv.slice[0].slice.value.value == var):
            return None
        out[tn.value] = vv.value.value
    return out


class _ShiftAliases(cst.CSTTransformer):
    """``ai`` -> ``a``; ``ai.stride(k)`` -> ``a.stride(k + 1)``; ``ai.shape[k]``/``ai.size(k)`` likewise."""

    def __init__(self, aliases: dict[str, str]) -> None:
        super().__init__()
        self.aliases = aliases
        self.unknown: list[str] = []

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        f = original.func
        if (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value in self.aliases
                and f.attr.value in ("stride", "size") and len(original.args) == 1):
            k = int_value(original.args[0].value)
            if k is None:
                self.unknown.append(code_of(original))
                return updated
            return parse_expr(f"{self.aliases[f.value.value]}.{f.attr.value}({k + 1})")
        return updated

    def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
        v = original.value
        if (isinstance(v, cst.Attribute) and isinstance(v.value, cst.Name) and v.value.value in self.aliases
                and v.attr.value == "shape" and len(original.slice) == 1
                and isinstance(original.slice[0].slice, cst.Index)):
            k = int_value(original.slice[0].slice.value)
            if k is None:
                self.unknown.append(code_of(original))
                return updated
            return parse_expr(f"{self.aliases[v.value.value]}.shape[{k + 1}]")
        return updated

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.aliases[updated.value]) if updated.value in self.aliases else updated


def _plan_loop(loop: cst.For, kernels: dict[str, cst.FunctionDef], host_defs: dict[str, cst.BaseExpression]
               ) -> tuple[str, cst.FunctionDef, cst.Call] | str:
    if not (isinstance(loop.target, cst.Name) and isinstance(loop.iter, cst.Call)
            and dotted_name(loop.iter.func) == "range" and len(loop.iter.args) == 1) or loop.orelse is not None:
        return "the loop is not `for i in range(n)`"
    var = loop.target.value
    count = loop.iter.args[0].value
    stmts = block_stmts(loop.body)
    aliases: dict[str, str] = {}
    launch = None
    for s in stmts:
        found = launch_of(s, kernels)
        if found is not None:
            if launch is not None:
                return "the loop body launches more than one kernel"
            launch = found
            continue
        sl = _slices(s, var)
        if sl is None:
            return f"the loop body has `{code_of(s).strip()}`, not only `x_i = x[{var}]` slices and one launch"
        aliases.update(sl)
    if launch is None:
        return "the loop body launches no kernel"
    name, call = launch
    fn = kernels[name]
    if any(is_autotune_decorator(d) for d in fn.decorators):
        return f"kernel {name} is autotuned"
    if var in {n.value for n in _names(call)}:
        return f"the launch of {name} uses the loop index {var} directly"
    grid = grid_of(call)
    if isinstance(grid, cst.Name) and grid.value in host_defs:
        grid = host_defs[grid.value]
    if isinstance(grid, cst.Lambda):
        body = grid.body
    else:
        body = grid
    if not isinstance(body, cst.Tuple):
        return f"the launch grid of {name} is not a tuple"
    axis = len(body.elements)
    if axis >= 3:
        return f"the launch grid of {name} already has three axes"
    used_axes = set()
    for c in calls_named(fn.body, PROGRAM_ID):
        a = int_value(c.args[0].value) if c.args else None
        if a is None:
            return f"kernel {name} reads a program id whose axis is not a literal"
        used_axes.add(a)
    if any(a >= axis for a in used_axes):
        return f"kernel {name} already reads program id axis {max(used_axes)}"
    params = [p.name.value for p in fn.params.params]
    sliced: list[tuple[str, str]] = []   # (pointer param, host tensor)
    pos = 0
    for a in call.args:
        pname = None
        if a.keyword is None:
            pname = params[pos] if pos < len(params) else None
            pos += 1
        elif a.keyword.value in params:
            pname = a.keyword.value
        if pname and isinstance(a.value, cst.Name) and a.value.value in aliases:
            sliced.append((pname, aliases[a.value.value]))
    if not sliced:
        return f"no argument of {name} is a slice of a batched tensor"
    # the kernel: batch strides, batch program id, pointer offsets
    taken = set(params) | {n.value for n in _names(fn.body)}
    pid = fresh_name("pid_batch", taken)
    new_params = list(fn.params.params)
    insert_at = next((i for i, p in enumerate(new_params) if p.default is not None
                      or (p.annotation is not None and "constexpr" in code_of(p.annotation.annotation))), len(new_params))
    strides = []
    for pname, _ in sliced:
        sname = fresh_name(f"stride_{pname.removesuffix('_ptr')}_batch", taken)
        strides.append(sname)
    added = [cst.Param(cst.Name(s), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for s in strides]
    new_params[insert_at:insert_at] = added
    new_params = [p.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                  if i < len(new_params) - 1 else p.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                  for i, p in enumerate(new_params)]
    head = [cst.parse_statement(f"{pid} = tl.program_id({axis})")]
    head[0] = head[0].with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(
        f"# one launch for the whole batch: grid axis {axis} is the batch element"))])
    for (pname, _), sname in zip(sliced, strides):
        head.append(cst.parse_statement(f"{pname} += {pid}.to(tl.int64) * {sname}"))
    stmts = body_of(fn)
    doc = 1 if stmts and isinstance(stmts[0], cst.SimpleStatementLine) and isinstance(stmts[0].body[0], cst.Expr) \
        and isinstance(stmts[0].body[0].value, cst.SimpleString) else 0
    new_fn = with_body(fn.with_changes(params=fn.params.with_changes(params=new_params)),
                       stmts[:doc] + head + stmts[doc:])
    # the launch
    shifter = _ShiftAliases(aliases)
    new_call = call.visit(shifter)
    if shifter.unknown:
        return f"the launch of {name} uses `{shifter.unknown[0]}`, whose batch axis cannot be dropped"
    new_grid_body = body.with_changes(elements=[*[e.with_changes(comma=cst.Comma(
        whitespace_after=cst.SimpleWhitespace(" "))) for e in body.elements], cst.Element(count)])
    new_grid: cst.BaseExpression = grid.with_changes(body=new_grid_body) if isinstance(grid, cst.Lambda) else new_grid_body
    args = list(new_call.args)
    kw_at = next((i for i, a in enumerate(args) if a.keyword is not None), len(args))
    pos_params = params[:kw_at]
    stride_args = [cst.Arg(parse_expr(f"{tensor}.stride(0)"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                   for _, tensor in sliced]
    if insert_at <= len(pos_params):
        args[insert_at:insert_at] = stride_args
    else:
        args = args + [cst.Arg(keyword=cst.Name(s), value=parse_expr(f"{t}.stride(0)"),
                               equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                     whitespace_after=cst.SimpleWhitespace("")))
                       for s, (_, t) in zip(strides, sliced)]
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) if i < len(args) - 1
            else a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for i, a in enumerate(args)]
    new_call = new_call.with_changes(func=new_call.func.with_changes(
        slice=[cst.SubscriptElement(cst.Index(new_grid))]), args=args)  # type: ignore[attr-defined]
    return name, new_fn, new_call


def _aliases_of(loop: cst.For) -> list[str]:
    out: list[str] = []
    for s in block_stmts(loop.body):
        sl = _slices(s, loop.target.value) if isinstance(loop.target, cst.Name) else None
        if sl:
            out.extend(sl)
    return out


def _names(node: cst.CSTNode) -> list[cst.Name]:
    out: list[cst.Name] = []

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n)

    node.visit(_V())
    return out


def batch_step(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> tuple[cst.Module, list[str]] | str:
    """One launch-batching rewrite (module docstring) in ``module``, or the reasons none applies."""
    reasons: list[str] = []
    counts = launch_counts(module, kernels)
    for fn in host_functions(module):
        if not isinstance(fn.body, cst.IndentedBlock):
            continue
        for stmt in fn.body.body:
            if not isinstance(stmt, cst.For):
                continue
            got = _plan_loop(stmt, kernels, once_defs(fn.body.body, fn.body))
            if isinstance(got, str):
                if "launches no kernel" not in got:
                    reasons.append(f"loop `for {code_of(stmt.target)} in {code_of(stmt.iter)}`: {got}")
                continue
            name, new_fn, new_call = got
            if counts.get(name, 0) != 1:
                reasons.append(f"kernel {name} is launched elsewhere too")
                continue
            edits: dict[int, Any] = {id(stmt): cst.SimpleStatementLine(body=[cst.Expr(new_call)],
                                                                       leading_lines=stmt.leading_lines)}

            class _T(cst.CSTTransformer):
                def leave_For(self, original: cst.For, updated: cst.For, edits: dict[int, Any] = edits):
                    return edits.get(id(original), updated)

                def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef,
                                      name: str = name, new_fn: cst.FunctionDef = new_fn):
                    return new_fn if original.name.value == name and original is kernels[name] else updated

            note = (f"the host loop launching {name} once per batch element is one launch with the batch as grid axis "
                    f"{len(grid_of(new_call).body.elements) - 1 if isinstance(grid_of(new_call), cst.Lambda) else len(grid_of(new_call).elements) - 1}; "  # type: ignore[attr-defined]
                    "each sliced pointer is offset by its batch stride in the kernel")
            return drop_unused_assigns(module.visit(_T()), {"grid"} | set(_aliases_of(stmt))), [note]
    return "; ".join(reasons) or "no host loop launches a kernel once per batch element"
