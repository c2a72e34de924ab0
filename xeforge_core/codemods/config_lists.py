"""An autotuned kernel's config list as its author wrote it, read without running it.

Published solutions write ``@triton.autotune(configs=...)`` as a literal list of
``triton.Config(...)``, as a module-level name or argument-free function giving one, or as a
comprehension over literal value lists::

    configs=[triton.Config({"BLOCK_SIZE": bs}, num_warps=nw)
             for bs in [256, 512, 1024] for nw in (4, 8)]

:func:`literal_configs` returns each of them as a literal :class:`libcst.List` of the configs in
the order Triton would see them. A comprehension is expanded only where every value is known
from the text: each ``for`` binds names (or a tuple of names) over a literal list or tuple of
integers and strings, ``range()`` of integer literals, or a module-level name bound once to such
a list; no ``if`` clause (top-level ``for`` loops that only append to an empty list count as the
comprehension they spell); at most :data:`MAX_EXPANDED` configs. Nothing is imported or
evaluated, so a comprehension calling anything else gives ``None``.
"""

from __future__ import annotations

import itertools

import libcst as cst

from xeforge_core.codemods.common import int_value

#: Configs a comprehension may expand to (a search of 6 blocks x 4 counts x 2 warp counts is 48).
MAX_EXPANDED = 512


def _module_value(module: cst.Module, name: str, *, only: bool = True) -> cst.BaseExpression | None:
    """The value a top-level ``name = ...`` binds, when exactly one statement binds it and (with
    ``only``) no other top-level statement changes it (:func:`touches`)."""
    found = [s.body[0].value for s in module.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
             and isinstance(s.body[0], cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name
                                                            for t in s.body[0].targets)]
    if len(found) != 1 or (only and sum(touches(s, name) for s in module.body) != 1):
        return None
    return found[0]


def _literal(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """An integer or string literal (a tuple of them) as it stands, else ``None``."""
    if int_value(node) is not None or isinstance(node, cst.SimpleString):
        return node
    if isinstance(node, cst.Tuple) and all(_literal(e.value) is not None for e in node.elements):
        return node
    return None


def _values(module: cst.Module, it: cst.BaseExpression, local: set[str] | frozenset[str] = frozenset()
            ) -> list[cst.BaseExpression] | None:
    """The literal values a comprehension's ``for`` iterates over, or ``None`` (also for a name
    an outer ``for`` of the comprehension binds: ``local``)."""
    if isinstance(it, cst.Name):
        if it.value in local:
            return None
        bound = _module_value(module, it.value)
        return _values(module, bound) if isinstance(bound, (cst.List, cst.Tuple)) else None
    if isinstance(it, (cst.List, cst.Tuple)):
        got = [_literal(e.value) if isinstance(e, cst.Element) else None for e in it.elements]
        return None if any(v is None for v in got) else got  # type: ignore[return-value]
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and 1 <= len(it.args) <= 3:
        ints = [int_value(a.value) if a.keyword is None and a.star == "" else None for a in it.args]
        if any(v is None for v in ints) or (len(ints) == 3 and ints[2] == 0):
            return None
        values = range(*ints)  # type: ignore[arg-type]
        return None if len(values) > MAX_EXPANDED else [cst.Integer(str(v)) for v in values]
    return None


def _bind(target: cst.BaseExpression, value: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    if isinstance(target, cst.Name):
        return {target.value: value}
    if isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, cst.Tuple) and len(target.elements) == len(value.elements):
        out: dict[str, cst.BaseExpression] = {}
        for t, v in zip(target.elements, value.elements, strict=True):
            if isinstance(t, cst.StarredElement) or isinstance(v, cst.StarredElement):
                return None
            got = _bind(t.value, v.value)
            if got is None:
                return None
            out.update(got)
        return out
    return None


def _target_names(target: cst.BaseExpression) -> set[str]:
    names: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

    target.visit(_V())
    return names


class _Substitute(cst.CSTTransformer):
    def __init__(self, names: dict[str, cst.BaseExpression]) -> None:
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.names.get(original.value, updated)

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        return original  # ``triton.Config`` keeps its names, whatever the loop calls its variables

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)


def expand_comprehension(module: cst.Module, comp: cst.ListComp) -> cst.List | None:
    """The literal list ``comp`` builds (module docstring), or ``None`` where a value is not
    known from the text, a clause is an ``if``, or it would exceed :data:`MAX_EXPANDED`."""
    loops: list[tuple[cst.BaseExpression, list[cst.BaseExpression]]] = []
    clause: cst.CompFor | None = comp.for_in
    local: set[str] = set()
    while clause is not None:
        if clause.ifs or clause.asynchronous is not None:
            return None
        values = _values(module, clause.iter, local)
        if values is None:
            return None
        loops.append((clause.target, values))
        local |= _target_names(clause.target)
        clause = clause.inner_for_in
    total = 1
    for _, values in loops:
        total *= len(values)
    if total > MAX_EXPANDED:
        return None
    elements: list[cst.Element] = []
    for combo in itertools.product(*(values for _, values in loops)):
        names: dict[str, cst.BaseExpression] = {}
        for (target, _), value in zip(loops, combo, strict=True):
            bound = _bind(target, value)
            if bound is None:
                return None
            names.update(bound)
        elements.append(cst.Element(comp.elt.visit(_Substitute(names))))  # type: ignore[arg-type]
    return cst.List(elements=elements)


def touches(stmt: cst.CSTNode, name: str) -> bool:
    """Whether a statement binds ``name`` (``=``, ``+=``, ``del``), assigns or deletes an item of
    it, or calls one of its methods (``name.append(...)``, ``name.sort()``, ...)."""
    hit = False

    def named(node: cst.CSTNode) -> bool:
        """``name`` itself, an item of it, or an attribute of it."""
        if isinstance(node, (cst.Subscript, cst.Attribute)):
            return named(node.value)
        return isinstance(node, cst.Name) and node.value == name

    class _V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal hit
            hit = hit or named(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal hit
            hit = hit or named(node.target)

        def visit_Del(self, node: cst.Del) -> None:
            nonlocal hit
            hit = hit or any(named(n) for n in ([node.target] + [e.value for e in getattr(node.target, "elements", [])]))

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal hit
            hit = hit or (isinstance(node.func, cst.Attribute) and named(node.func.value))

    stmt.visit(_V())
    return hit


def _loop_as_comprehension(loop: cst.For, name: str) -> cst.ListComp | None:
    """``for a in A: for b in B: name.append(X)`` as ``[X for a in A for b in B]``; ``None`` for
    any other body (an ``if``, a second statement, an ``else``)."""
    clauses: list[tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]] = []
    node: cst.CSTNode = loop
    while isinstance(node, cst.For):
        if node.orelse is not None or node.asynchronous is not None or not isinstance(node.body, cst.IndentedBlock):
            return None
        clauses.append((node.target, node.iter))
        stmts = [s for s in node.body.body if not (isinstance(s, cst.SimpleStatementLine) and all(
            isinstance(x, cst.Pass) for x in s.body))]
        if len(stmts) != 1:
            return None
        node = stmts[0]
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1 and isinstance(node.body[0], cst.Expr)):
        return None
    call = node.body[0].value
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name)
            and call.func.value.value == name and call.func.attr.value == "append" and len(call.args) == 1):
        return None
    comp: cst.CompFor | None = None
    for target, it in reversed(clauses):
        comp = cst.CompFor(target=target, iter=it, inner_for_in=comp)
    assert comp is not None
    return cst.ListComp(elt=call.args[0].value, for_in=comp)


def _appended(module: cst.Module, name: str) -> cst.List | None:
    """The list a module builds as ``name = []`` then top-level ``for`` loops that only
    ``name.append(...)`` (every other top-level statement leaves ``name`` alone)."""
    elements: list[cst.Element] = []
    for stmt in module.body:
        if not touches(stmt, name):
            continue
        if isinstance(stmt, cst.SimpleStatementLine):
            if _module_value(cst.Module(body=[stmt]), name) is None:
                return None  # an append, an extend or a += outside the loops
            continue  # the one `name = []` (the caller checked it)
        comp = _loop_as_comprehension(stmt, name) if isinstance(stmt, cst.For) else None
        got = expand_comprehension(module, comp) if comp is not None else None
        if got is None:
            return None
        elements += got.elements
    return cst.List(elements=elements) if elements and len(elements) <= MAX_EXPANDED else None


def literal_configs(module: cst.Module, expr: cst.BaseExpression) -> cst.List | None:
    """The literal list an autotune decorator's ``configs=`` gives: the list itself, a
    comprehension over literal values (expanded), a module-level name assigned either once
    (``configs=_configs``) or an empty list once and filled by top-level loops of
    ``configs.append(...)``, or an argument-free module-level function that only returns one
    (``configs=_get_configs()``); ``None`` for anything else."""
    if isinstance(expr, cst.List):
        return expr
    if isinstance(expr, cst.ListComp):
        return expand_comprehension(module, expr)
    if isinstance(expr, cst.Name):
        bound = _module_value(module, expr.value, only=False)
        if isinstance(bound, cst.List) and not bound.elements:
            return _appended(module, expr.value)
        if _module_value(module, expr.value) is None:  # changed after it was bound
            return None
        return literal_configs(module, bound) if isinstance(bound, (cst.List, cst.ListComp)) else None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and not expr.args:
        defs = [s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == expr.func.value]
        if len(defs) != 1 or defs[0].params.params or not isinstance(defs[0].body, cst.IndentedBlock):
            return None
        stmts = [s for s in defs[0].body.body if not (
            isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1 and isinstance(s.body[0], cst.Expr)
            and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
        if (len(stmts) == 1 and isinstance(stmts[0], cst.SimpleStatementLine) and len(stmts[0].body) == 1
                and isinstance(stmts[0].body[0], cst.Return)
                and isinstance(stmts[0].body[0].value, (cst.List, cst.ListComp))):
            return literal_configs(module, stmts[0].body[0].value)
    return None


__all__ = ["MAX_EXPANDED", "expand_comprehension", "literal_configs", "touches"]
