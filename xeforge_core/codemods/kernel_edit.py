"""Editing helpers for kernel bodies shared by the fusion and memory-access codemods.

Everything here works on libcst nodes and never executes code: renaming names, finding which
names a statement assigns or reads, rendering expressions with names substituted, and value
numbering of straight-line code (which loads read the same memory).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import libcst as cst

from xeforge_core.codemods.common import code_of, dotted_name

TL_LOAD = {"tl.load", "triton.language.load"}
TL_STORE = {"tl.store", "triton.language.store"}
TL_ARANGE = {"tl.arange", "triton.language.arange"}


class Rename(cst.CSTTransformer):
    """Rename variables: every ``Name`` in ``mapping`` except attribute names (``a.b``: only
    ``a``) and keyword names of call arguments (``f(x=1)``)."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        super().__init__()
        self.mapping = dict(mapping)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.mapping.get(updated.value)
        return updated.with_changes(value=new) if new else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


class Substitute(cst.CSTTransformer):
    """Replace reads of names by expressions (``mapping``: name -> expression); the expression
    is parenthesised where it would otherwise bind differently."""

    def __init__(self, mapping: Mapping[str, cst.BaseExpression]) -> None:
        super().__init__()
        self.mapping = dict(mapping)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        new = self.mapping.get(updated.value)
        if new is None:
            return updated
        if isinstance(new, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)):
            return new
        return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def rename(node: cst.CSTNode, mapping: Mapping[str, str]) -> cst.CSTNode:
    """``node`` with the names in ``mapping`` renamed (see :class:`Rename`)."""
    return node.visit(Rename(mapping)) if mapping else node


def substitute(node: cst.CSTNode, mapping: Mapping[str, cst.BaseExpression]) -> cst.CSTNode:
    """``node`` with reads of the names in ``mapping`` replaced by expressions."""
    return node.visit(Substitute(mapping)) if mapping else node


def _targets(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in node.elements:
            out.extend(_targets(el.value))
        return out
    return []


def assigned_names(node: cst.CSTNode) -> list[str]:
    """Names assigned anywhere in ``node`` (assignment, augmented and annotated assignment
    targets, ``for`` targets), in order of appearance, with repeats."""
    out: list[str] = []

    class _V(cst.CSTVisitor):
        def visit_Assign(self, n: cst.Assign) -> None:
            for t in n.targets:
                out.extend(_targets(t.target))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            out.extend(_targets(n.target))

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            out.extend(_targets(n.target))

        def visit_For(self, n: cst.For) -> None:
            out.extend(_targets(n.target))

    node.visit(_V())
    return out


def read_names(node: cst.CSTNode) -> set[str]:
    """Names read in ``node`` (not attribute names, not keyword names, not assignment targets
    of plain ``=``; an augmented assignment's target counts as read)."""
    out: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

        def visit_AssignTarget(self, n: cst.AssignTarget) -> bool:
            if not isinstance(n.target, (cst.Name, cst.Tuple, cst.List)):
                n.target.visit(self)
            return False

        def visit_For(self, n: cst.For) -> bool:
            n.iter.visit(self)
            n.body.visit(self)
            return False

    node.visit(_V())
    return out


def all_names(node: cst.CSTNode) -> set[str]:
    """Every variable name that occurs in ``node`` (read or written)."""
    return read_names(node) | set(assigned_names(node))


def fresh_name(base: str, taken: set[str]) -> str:
    """``base`` if free, else ``base_2``, ``base_3``, ...; the result is added to ``taken``."""
    name = base
    i = 2
    stem = re.sub(r"_\d+$", "", base)
    while name in taken:
        name = f"{stem}_{i}"
        i += 1
    taken.add(name)
    return name


def calls_named(node: cst.CSTNode, names: set[str]) -> list[cst.Call]:
    """Calls in ``node`` whose function is one of the dotted ``names``, in order."""
    out: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if dotted_name(n.func) in names:
                out.append(n)

    node.visit(_V())
    return out


def call_arg(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """The argument at ``position`` (positional) or named ``keyword``, else ``None``."""
    pos = 0
    for a in call.args:
        if a.keyword is not None:
            if a.keyword.value == keyword:
                return a.value
            continue
        if a.star:
            return None
        if pos == position:
            return a.value
        pos += 1
    return None


def pointer_terms(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The terms of a sum ``a + b + c`` (left to right); a non-sum is one term."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add) and not expr.lpar:
        return pointer_terms(expr.left) + pointer_terms(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return pointer_terms(expr.with_changes(lpar=[], rpar=[]))
    return [expr]


def join_sum(terms: list[cst.BaseExpression]) -> cst.BaseExpression:
    """``terms[0] + terms[1] + ...``."""
    expr = terms[0]
    for t in terms[1:]:
        expr = cst.BinaryOperation(left=expr, operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                                               whitespace_after=cst.SimpleWhitespace(" ")),
                                   right=t)
    return expr


def base_and_offset(expr: cst.BaseExpression, pointers: set[str]) -> tuple[str, cst.BaseExpression | None] | None:
    """Split a pointer expression ``p + off1 + off2`` whose first term is one of ``pointers``
    into ``(p, off1 + off2)`` (``None`` offset for a bare ``p``); ``None`` if no term is a
    pointer name or more than one is."""
    terms = pointer_terms(expr)
    hits = [i for i, t in enumerate(terms) if isinstance(t, cst.Name) and t.value in pointers]
    if len(hits) != 1:
        return None
    rest = [t for i, t in enumerate(terms) if i != hits[0]]
    return terms[hits[0]].value, (join_sum(rest) if rest else None)  # type: ignore[union-attr]


def parse_expr(text: str) -> cst.BaseExpression:
    """An expression parsed from source text."""
    return cst.parse_expression(text)


def parse_stmts(text: str) -> list[cst.BaseStatement]:
    """Statements parsed from source text (no indentation)."""
    return list(cst.parse_module(text).body)


def stmt_text(node: cst.CSTNode) -> str:
    """The source of a node without its leading/trailing blank lines and comments."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        node = node.with_changes(leading_lines=[])
    return code_of(node).strip()


def simple_assign(stmt: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """``(name, value)`` for a statement line ``name = value``, else ``None``."""
    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name)):
        return stmt.body[0].targets[0].target.value, stmt.body[0].value
    return None


def once_defs(stmts: Iterable[cst.BaseStatement], within: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """``name -> value`` for the top-level ``name = value`` statements of ``stmts`` whose name
    is assigned exactly once anywhere in ``within``."""
    counts: dict[str, int] = {}
    for n in assigned_names(within):
        counts[n] = counts.get(n, 0) + 1
    out = {}
    for s in stmts:
        a = simple_assign(s)
        if a is not None and counts.get(a[0]) == 1:
            out[a[0]] = a[1]
    return out


def resolve(expr: cst.BaseExpression | None, defs: Mapping[str, cst.BaseExpression], depth: int = 4
            ) -> cst.BaseExpression | None:
    """``expr`` with a bare name replaced by its single definition (repeatedly)."""
    while depth and isinstance(expr, cst.Name) and expr.value in defs:
        expr = defs[expr.value]
        depth -= 1
    return expr


def drop_dead_defs(stmts: list[cst.BaseStatement], reading: set[str]) -> list[cst.BaseStatement]:
    """Remove top-level ``name = value`` statements whose name nothing reads and whose value
    reads one of ``reading`` (pointer arithmetic left over after a load or store is gone)."""
    stmts = list(stmts)
    changed = True
    while changed:
        changed = False
        reads: set[str] = set()
        for s in stmts:
            reads |= read_names(s)
        for s in list(stmts):
            a = simple_assign(s)
            if a is not None and a[0] not in reads and read_names(a[1]) & reading:
                stmts.remove(s)
                changed = True
    return stmts


def expr_stmt_call(stmt: cst.CSTNode) -> cst.Call | None:
    """The call of a statement line that is one bare call expression, else ``None``."""
    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, cst.Call)):
        return stmt.body[0].value
    return None


def body_of(fn: cst.FunctionDef) -> list[cst.BaseStatement]:
    """The statements of a function body, docstring included."""
    body = fn.body
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    return [cst.SimpleStatementLine(body=list(body.body))]


def with_body(fn: cst.FunctionDef, stmts: Iterable[cst.BaseStatement]) -> cst.FunctionDef:
    """``fn`` with its body replaced (an indented block)."""
    stmts = list(stmts) or [cst.SimpleStatementLine([cst.Pass()])]
    body = fn.body if isinstance(fn.body, cst.IndentedBlock) else cst.IndentedBlock(body=[])
    return fn.with_changes(body=body.with_changes(body=stmts))


def block_stmts(block: cst.BaseSuite) -> list[cst.BaseStatement]:
    """Statements of an indented block (or a one-line suite)."""
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    return [cst.SimpleStatementLine(body=list(block.body))]  # type: ignore[attr-defined]


def comment_line(text: str) -> cst.EmptyLine:
    """A ``# text`` line to put in ``leading_lines``."""
    return cst.EmptyLine(comment=cst.Comment(f"# {text}"))


class ValueNumbers:
    """Value numbering of straight-line code: equal numbers mean equal values.

    ``bind(name, expr)`` records an assignment; ``number(expr)`` gives the number of an
    expression from its structure and the numbers of the names it reads; a name rebound by
    an opaque statement (augmented assignment, loop) gets a fresh number via ``opaque``.
    """

    def __init__(self) -> None:
        self.env: dict[str, int] = {}
        self.terms: dict[str, tuple[int, ...]] = {}
        self.table: dict[str, int] = {}
        self._next = 0

    def _new(self) -> int:
        self._next += 1
        return self._next

    def key(self, expr: cst.BaseExpression) -> str:
        """The canonical text of ``expr``: names replaced by their value numbers."""
        env = self.env

        class _K(cst.CSTTransformer):
            def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
                vn = env.get(updated.value)
                return updated.with_changes(value=f"v{vn}__" if vn is not None else updated.value)

            def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
                return updated.with_changes(attr=original.attr)

            def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
                return updated.with_changes(keyword=original.keyword)

        return re.sub(r"\s+", "", code_of(expr.visit(_K())))

    def number(self, expr: cst.BaseExpression) -> int:
        if isinstance(expr, cst.Name) and expr.value in self.env:
            return self.env[expr.value]
        k = self.key(expr)
        if k not in self.table:
            self.table[k] = self._new()
        return self.table[k]

    def bind(self, name: str, expr: cst.BaseExpression) -> int:
        terms = self.sum_terms(expr)
        vn = self.number(expr)
        self.env[name] = vn
        self.terms[name] = terms
        return vn

    def opaque(self, name: str) -> None:
        self.env[name] = self._new()
        self.terms.pop(name, None)

    def sum_terms(self, expr: cst.BaseExpression) -> tuple[int, ...]:
        """The value numbers of the terms of a sum, names bound to sums expanded, sorted: equal
        for ``base + offs`` and ``x_ptr + row * stride + offs`` when ``base = x_ptr + row * stride``."""
        out: list[int] = []
        for t in pointer_terms(expr):
            if isinstance(t, cst.Name) and t.value in self.terms and len(self.terms[t.value]) > 1:
                out.extend(self.terms[t.value])
            else:
                out.append(self.number(t))
        return tuple(sorted(out))


def walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every node under ``node`` (itself included), in visiting order."""
    out: list[cst.CSTNode] = []

    class _V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            out.append(n)
            return True

    node.visit(_V())
    return out


def with_commas(items: list[Any]) -> list[Any]:
    """Parameters or arguments separated by ``", "``, the last one without a comma."""
    return [x.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) if i < len(items) - 1
            else x.with_changes(comma=cst.MaybeSentinel.DEFAULT) for i, x in enumerate(items)]


def module_kernels(module: cst.Module) -> dict[str, cst.FunctionDef]:
    """Top-level ``@triton.jit`` functions of ``module`` by name."""
    from xeforge_core.codemods.common import is_kernel

    return {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and is_kernel(s)}


class Edits(cst.CSTTransformer):
    """Replace kernels by name (``kernels``) and statement lines by identity (``statements``:
    ``id(original) -> replacement``, a ``RemoveFromParent`` or a ``FlattenSentinel``)."""

    def __init__(self, kernels: Mapping[str, cst.FunctionDef] | None = None,
                 statements: Mapping[int, Any] | None = None) -> None:
        super().__init__()
        self.kernels = dict(kernels or {})
        self.statements = dict(statements or {})

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        from xeforge_core.codemods.common import is_kernel

        if is_kernel(original) and original.name.value in self.kernels:
            return self.kernels[original.name.value]
        return updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine) -> Any:
        return self.statements.get(id(original), updated)


def insert_before_kernels(module: cst.Module, source: str, name: str) -> cst.Module:
    """``module`` with the module-level code ``source`` inserted before its first kernel,
    unless a top-level function ``name`` already exists."""
    from xeforge_core.codemods.common import is_kernel

    if any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in module.body):
        return module
    body = list(module.body)
    at = next((i for i, s in enumerate(body) if isinstance(s, cst.FunctionDef) and is_kernel(s)), len(body))
    new = list(cst.parse_module(source.lstrip("\n")).body)
    new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(),  # type: ignore[attr-defined]
                                                *getattr(new[0], "leading_lines", [])])
    body[at:at] = new
    return module.with_changes(body=body)


def indexes_2d_tiles(fn: cst.FunctionDef) -> bool:
    """Whether kernel ``fn`` broadcasts a block to a second axis (``x[:, None]``, ``x[None, :]``):
    it works on 2-D tiles."""
    return any(isinstance(n, cst.Subscript) and any(isinstance(e.slice, cst.Index) and isinstance(
        e.slice.value, cst.Name) and e.slice.value.value == "None" for e in n.slice) for n in walk(fn.body))
