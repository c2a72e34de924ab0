"""Host-side facts for the fusion and memory-access codemods: the kernel launches of each
host function (in order), the tensors it allocates, and how names are used.

Read statically from libcst nodes; nothing is executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from xeforge_core.codemods.common import bind_launch_args, code_of, dotted_name, is_kernel
from xeforge_core.codemods.kernel_edit import expr_stmt_call, read_names, simple_assign

_ALLOC = {"torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.empty_like", "torch.zeros_like",
          "torch.ones_like", "torch.full_like", "torch.empty_strided"}
_VIEWS = {"view", "reshape", "flatten", "view_as", "contiguous"}

#: torch dtype spelling -> Triton dtype spelling
TORCH_TO_TL = {"torch.float32": "tl.float32", "torch.float": "tl.float32", "torch.float16": "tl.float16",
               "torch.half": "tl.float16", "torch.bfloat16": "tl.bfloat16", "torch.float64": "tl.float64",
               "torch.int32": "tl.int32", "torch.int64": "tl.int64", "torch.int8": "tl.int8"}


def tl_dtype(torch_dtype: str | None, by_host: dict[str, str]) -> str | None:
    """The Triton dtype of a tensor allocated with ``dtype=torch_dtype``: a fixed one
    (``torch.float32`` -> ``tl.float32``) or, for ``x.dtype`` where the host tensor ``x`` is
    passed to the kernel as parameter ``p`` (``by_host``: ``"x|False" -> "p"``),
    ``p.dtype.element_ty``; ``None`` when neither is known."""
    if not torch_dtype:
        return None
    if torch_dtype in TORCH_TO_TL:
        return TORCH_TO_TL[torch_dtype]
    if torch_dtype.endswith(".dtype"):
        param = by_host.get(f"{torch_dtype[:-len('.dtype')]}|False")
        if param:
            return f"{param}.dtype.element_ty"
    return None


@dataclass
class Launch:
    """One launch ``kernel[grid](args)`` that is a whole top-level statement of a host function."""

    kernel: str
    call: cst.Call
    stmt: cst.SimpleStatementLine
    index: int
    grid: cst.BaseExpression
    bound: dict[str, cst.Arg]
    options: dict[str, cst.Arg]
    #: the statements of the block the launch is in (the host body for a top-level launch; a
    #: branch of an ``if``/``with``/``try`` for a launch under one), ``index`` counts in it
    block: list[cst.BaseStatement] = field(default_factory=list)

    def arg_text(self, param: str) -> str | None:
        a = self.bound.get(param)
        return code_of(a.value) if a is not None else None


@dataclass
class Alloc:
    """``name = torch.empty(...)`` (or zeros/empty_like/...) or a view ``name = other.view(...)``."""

    name: str
    stmt: cst.SimpleStatementLine
    func: str
    call: cst.Call
    shape: cst.BaseExpression | None = None
    like: str | None = None
    dtype: str | None = None
    alias_of: str | None = None


@dataclass
class HostFacts:
    """One host function: its top-level statements, launches, allocations and name reads."""

    fn: cst.FunctionDef
    body: list[cst.BaseStatement]
    launches: list[Launch] = field(default_factory=list)
    nested_launches: list[str] = field(default_factory=list)
    #: launches that are a whole statement of a branch (``if``/``else``/``with``/``try``) of the
    #: host function: a host wrapper that picks a kernel by shape or device
    branch_launches: list[Launch] = field(default_factory=list)

    def all_launches(self) -> list[Launch]:
        """Top-level launches, then those inside branches (source order within each)."""
        return self.launches + self.branch_launches
    allocs: dict[str, Alloc] = field(default_factory=dict)

    def reads_outside(self, name: str, skip: set[int], data_only: bool = False) -> int:
        """How many top-level statements other than those at indices ``skip`` read ``name``
        (with ``data_only``: read its data, not only its shape, strides, dtype or device)."""
        return sum(1 for i, s in enumerate(self.body)
                   if i not in skip and name in read_names(s) and (not data_only or reads_data(s, name)))

    def root(self, name: str) -> str:
        """The allocation a (chain of) view(s) refers to."""
        seen = set()
        while name in self.allocs and self.allocs[name].alias_of and name not in seen:
            seen.add(name)
            name = self.allocs[name].alias_of  # type: ignore[assignment]
        return name

    def dtype_of(self, name: str) -> str | None:
        """The torch dtype of an allocation (following views and ``*_like``), else ``None``."""
        seen = set()
        while name in self.allocs and name not in seen:
            seen.add(name)
            a = self.allocs[name]
            if a.dtype:
                return a.dtype
            nxt = a.alias_of or a.like
            if nxt is None:
                return None
            name = nxt
        return None

    def shape_text(self, name: str) -> str | None:
        """The shape expression of a fresh allocation (``empty_like(x)`` gives ``x``'s), as text."""
        seen = set()
        while name in self.allocs and name not in seen:
            seen.add(name)
            a = self.allocs[name]
            if a.shape is not None:
                return code_of(a.shape).replace(" ", "")
            if a.like is None:
                return None
            name = a.like
        return None


_META_ATTRS = {"shape", "dtype", "device", "ndim", "is_cuda"}
_META_CALLS = {"stride", "size", "numel", "dim", "element_size", "is_contiguous"}


def reads_data(node: cst.CSTNode, name: str) -> bool:
    """Whether ``node`` uses tensor ``name`` other than for its metadata (``x.shape``,
    ``x.stride(0)``, ``x.numel()``, ``torch.empty_like(x)``, ...)."""
    found = False

    class _V(cst.CSTVisitor):
        def visit_Attribute(self, n: cst.Attribute) -> bool:
            meta = n.attr.value in _META_ATTRS or n.attr.value in _META_CALLS
            return not (isinstance(n.value, cst.Name) and n.value.value == name and meta)

        def visit_Call(self, n: cst.Call) -> bool:
            if dotted_name(n.func) in _ALLOC and dotted_name(n.func).endswith("_like") and n.args \
                    and isinstance(n.args[0].value, cst.Name) and n.args[0].value.value == name:
                for a in n.args[1:]:
                    a.visit(self)
                return False
            return True

        def visit_Name(self, n: cst.Name) -> None:
            nonlocal found
            if n.value == name:
                found = True

    node.visit(_V())
    return found


def _kw(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def _alloc_of(name: str, value: cst.BaseExpression, stmt: cst.SimpleStatementLine) -> Alloc | None:
    if not isinstance(value, cst.Call):
        return None
    func = dotted_name(value.func)
    if func in _ALLOC:
        pos = [a for a in value.args if a.keyword is None and not a.star]
        alloc = Alloc(name=name, stmt=stmt, func=func, call=value)
        dtype = _kw(value, "dtype")
        alloc.dtype = (dotted_name(dtype) or None) if dtype is not None else None
        if func.endswith("_like"):
            if pos and isinstance(pos[0].value, cst.Name):
                alloc.like = pos[0].value.value
            else:
                return None
        elif pos:
            alloc.shape = pos[0].value if len(pos) == 1 or func == "torch.full" else cst.Tuple(
                elements=[cst.Element(a.value) for a in pos])
        return alloc
    if isinstance(value.func, cst.Attribute) and value.func.attr.value in _VIEWS \
            and isinstance(value.func.value, cst.Name):
        return Alloc(name=name, stmt=stmt, func=value.func.attr.value, call=value, alias_of=value.func.value.value)
    return None


def launch_of(stmt: cst.BaseStatement, kernels: dict[str, cst.FunctionDef]) -> tuple[str, cst.Call] | None:
    """``(kernel, call)`` when ``stmt`` is a bare ``kernel[grid](...)`` of one of ``kernels``."""
    call = expr_stmt_call(stmt)
    if call is None or not isinstance(call.func, cst.Subscript) or not isinstance(call.func.value, cst.Name):
        return None
    name = call.func.value.value
    return (name, call) if name in kernels else None


def grid_of(call: cst.Call) -> cst.BaseExpression:
    """The grid expression of a launch ``kernel[grid](...)``."""
    return call.func.slice[0].slice.value  # type: ignore[attr-defined, union-attr]


def _launch_at(stmt: cst.BaseStatement, i: int, block: list[cst.BaseStatement],
               kernels: dict[str, cst.FunctionDef]) -> Launch | None:
    found = launch_of(stmt, kernels)
    if found is None:
        return None
    name, call = found
    params = [p.name.value for p in kernels[name].params.params]
    bound, options, _ = bind_launch_args(params, call)
    return Launch(kernel=name, call=call, stmt=stmt, index=i,  # type: ignore[arg-type]
                  grid=grid_of(call), bound=bound, options=options, block=block)


_BRANCHES = (cst.If, cst.Else, cst.With, cst.Try, cst.ExceptHandler, cst.Finally)


def _branch_blocks(stmt: cst.BaseStatement) -> list[list[cst.BaseStatement]]:
    """The statement lists of the branches of a compound statement (``if``/``elif``/``else``,
    ``with``, ``try``/``except``/``finally``; not loops, whose launches repeat, nor nested
    functions), recursively."""
    out: list[list[cst.BaseStatement]] = []
    if not isinstance(stmt, _BRANCHES):
        return out
    parts: list[cst.CSTNode] = [stmt]
    if isinstance(stmt, cst.If) and stmt.orelse is not None:
        parts.append(stmt.orelse)
    if isinstance(stmt, cst.Try):
        parts += [*stmt.handlers, *([stmt.orelse] if stmt.orelse else []), *([stmt.finalbody] if stmt.finalbody else [])]
    for part in parts:
        if isinstance(part, cst.If) and part is not stmt:
            out += _branch_blocks(part)
            continue
        body = getattr(part, "body", None)
        if isinstance(body, cst.IndentedBlock):
            block = list(body.body)
            out.append(block)
            for inner in block:
                out += _branch_blocks(inner)
    return out


def host_facts(fn: cst.FunctionDef, kernels: dict[str, cst.FunctionDef]) -> HostFacts:
    """The facts of one host function: launches at its top level in ``launches``, launches in
    its branches in ``branch_launches``."""
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    facts = HostFacts(fn=fn, body=body)
    for i, stmt in enumerate(body):
        launch = _launch_at(stmt, i, body, kernels)
        if launch is not None:
            facts.launches.append(launch)
            continue
        assign = simple_assign(stmt)
        if assign is not None:
            alloc = _alloc_of(assign[0], assign[1], stmt)  # type: ignore[arg-type]
            if alloc is not None:
                facts.allocs[alloc.name] = alloc
        else:
            for k in kernels:
                if f"{k}[" in code_of(stmt):
                    facts.nested_launches.append(k)
            for block in _branch_blocks(stmt):
                for j, inner in enumerate(block):
                    launch = _launch_at(inner, j, block, kernels)
                    if launch is not None:
                        facts.branch_launches.append(launch)
    return facts


@dataclass
class GridView:
    """A launch grid as the memory-access codemods read it.

    ``elements``: the grid's axes (``None`` when it is not a tuple, a lambda returning one, or a
    name assigned one in the launch's block); in a ``lambda META: (...)`` grid every
    ``META["X"]`` is replaced by what the launch passes for ``X``. ``meta_keys``: the keys such a
    lambda reads; ``assign``: the statement assigning a named grid; ``is_lambda``: the grid is a
    function of the chosen meta-parameters."""

    elements: list[cst.BaseExpression] | None
    meta_keys: set[str] = field(default_factory=set)
    assign: cst.SimpleStatementLine | None = None
    is_lambda: bool = False
    value: cst.BaseExpression | None = None


def _defined_before(lc: Launch, name: str) -> tuple[cst.SimpleStatementLine, cst.BaseExpression] | None:
    """The last ``name = value`` before the launch in its own block, when no other statement of
    the block in between assigns ``name``."""
    from xeforge_core.codemods.kernel_edit import assigned_names

    for stmt in reversed(lc.block[:lc.index]):
        a = simple_assign(stmt)
        if a is not None and a[0] == name:
            return stmt, a[1]  # type: ignore[return-value]
        if name in assigned_names(stmt):
            return None
    return None


def grid_view(lc: Launch) -> GridView:
    """The launch's grid (:class:`GridView`): inline, or a name assigned once before the launch
    in the same block; a lambda's ``META[...]`` reads resolved through the launch's arguments."""
    grid = lc.grid
    assign = None
    if isinstance(grid, cst.Name):
        found = _defined_before(lc, grid.value)
        if found is None:
            return GridView(None)
        assign, grid = found
    if isinstance(grid, cst.Tuple):
        return GridView([e.value for e in grid.elements], assign=assign, value=grid)
    if isinstance(grid, cst.Lambda) and len(grid.params.params) == 1 and isinstance(grid.body, cst.Tuple):
        meta = grid.params.params[0].name.value
        keys: set[str] = set()
        bound = {k: a.value for k, a in lc.bound.items()}

        class _Meta(cst.CSTTransformer):
            def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
                if isinstance(updated.value, cst.Name) and updated.value.value == meta and len(updated.slice) == 1:
                    key = getattr(updated.slice[0].slice, "value", None)
                    if isinstance(key, cst.SimpleString):
                        name = str(key.evaluated_value)
                        keys.add(name)
                        if name in bound:
                            return bound[name]
                return updated

        body = grid.body.visit(_Meta())
        return GridView([e.value for e in body.elements], meta_keys=keys, assign=assign,  # type: ignore[attr-defined]
                        is_lambda=True, value=grid)
    return GridView(None, assign=assign, value=grid)


def host_functions(module: cst.Module) -> list[cst.FunctionDef]:
    """Module-level functions and methods of module-level classes that are not kernels."""
    out: list[cst.FunctionDef] = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and not is_kernel(s):
            out.append(s)
        elif isinstance(s, cst.ClassDef) and isinstance(s.body, cst.IndentedBlock):
            out.extend(m for m in s.body.body if isinstance(m, cst.FunctionDef))
    return out


def launch_counts(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> dict[str, int]:
    """How many launches (``name[...](...)``) of each kernel the module's host code has."""
    counts = dict.fromkeys(kernels, 0)

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if isinstance(f, cst.Subscript) and isinstance(f.value, cst.Name) and f.value.value in counts:
                counts[f.value.value] += 1

    module.visit(_V())
    return counts


# ---------------------------------------------------------------------------------------------
# host-side edits shared by the fusion rewrites


def movable(stmts: list[cst.BaseStatement]) -> bool:
    """Only assignments between the launches (allocations, sizes): nothing that runs a kernel
    or reads a result."""
    for s in stmts:
        if not isinstance(s, cst.SimpleStatementLine):
            return False
        for small in s.body:
            if not isinstance(small, (cst.Assign, cst.AnnAssign)):
                return False
    return True


def dead_allocations(facts: HostFacts, temps: list[str], rewritten: set[int]) -> dict[int, Any]:
    """Removals for the allocation (and view) statements of ``temps`` that nothing reads any
    more once the statements in ``rewritten`` are replaced (repeated until none is left)."""
    removed: set[int] = set(rewritten)
    edits: dict[int, Any] = {}
    changed = True
    while changed:
        changed = False
        for name, alloc in facts.allocs.items():
            sid = id(alloc.stmt)
            if sid in removed or facts.root(name) not in temps:
                continue
            readers = [s for s in facts.body if id(s) not in removed and s is not alloc.stmt
                       and name in read_names(s)]
            if not readers:
                removed.add(sid)
                edits[sid] = cst.RemoveFromParent()
                changed = True
    return edits


def option_args(launch: Launch) -> list[cst.Arg]:
    """The launch's option keywords (``num_warps=...``, ``num_stages=...``), to pass on to the
    launch that replaces it."""
    args = [a for a in launch.call.args if a.keyword is not None and a.keyword.value in launch.options]
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(args) - 1 else a
            for i, a in enumerate(args)]


def with_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    """``args`` with a comma after every argument but the last."""
    out = []
    for i, a in enumerate(args):
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT
        out.append(a.with_changes(comma=comma))
    return out


def drop_unused_literals(module: cst.Module) -> cst.Module:
    """Remove host statements ``NAME = <number>`` whose name the function no longer reads
    (tile sizes of launches that were fused away)."""
    return drop_unused_assigns(module, set())


def drop_unused_assigns(module: cst.Module, names: set[str]) -> cst.Module:
    """Remove host statements ``NAME = <number>``, and ``NAME = ...`` for ``NAME`` in
    ``names``, whose name the function no longer reads."""

    class _T(cst.CSTTransformer):
        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
            if is_kernel(updated) or not isinstance(updated.body, cst.IndentedBlock):
                return updated
            reads = read_names(updated.body)
            body = []
            for s in updated.body.body:
                a = simple_assign(s)
                if a is not None and (isinstance(a[1], (cst.Integer, cst.Float)) or a[0] in names) \
                        and a[0] not in reads:
                    continue
                body.append(s)
            return updated.with_changes(body=updated.body.with_changes(body=body))

    return module.visit(_T())


def fix_commas(module: cst.Module) -> cst.Module:
    """``module`` with the commas between call arguments restored where an edit dropped some."""

    class _T(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            if updated is original or not updated.args:
                return updated
            last = updated.args[-1]
            if any(isinstance(a.comma, cst.MaybeSentinel) for a in updated.args[:-1]):
                return updated.with_changes(args=with_commas(list(updated.args[:-1])) + [last])
            return updated

    return module.visit(_T())
