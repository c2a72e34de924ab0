"""Static facts about a kernel module that the fault classes need (libcst, nothing executed).

``ModuleFacts(source)`` parses the module once and answers: which functions are Triton kernels
(``@triton.jit``) and which are host code, the line and text of any node, the enclosing kernel
and loop of a node, the simple assignments of a kernel, and which Triton calls a node is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from xeforge_core.codemods.common import NameReads, bind_launch_args, dotted_name, int_value, is_kernel

#: Prefixes under which the ``triton.language`` functions are called.
_TL_PREFIXES = ("tl.", "triton.language.")

#: Reductions and scans whose ``axis`` a fault can change (Triton's ``triton.language`` reference).
REDUCTIONS = ("sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "cumsum", "cumprod",
              "associative_scan")


class _Collect(cst.CSTVisitor):
    def __init__(self, keep: Callable[[cst.CSTNode], bool]) -> None:
        super().__init__()
        self.keep = keep
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.keep(node):
            self.found.append(node)
        return True


def tl_name(node: cst.CSTNode) -> str | None:
    """``"load"`` for ``tl.load(...)`` / ``triton.language.load(...)``, else ``None``."""
    if not isinstance(node, cst.Call):
        return None
    name = dotted_name(node.func)
    for prefix in _TL_PREFIXES:
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            return name[len(prefix):]
    return None


def arg(call: cst.Call, keyword: str, position: int | None) -> cst.Arg | None:
    """The argument of ``call`` given as ``keyword=`` or at ``position`` (0-based), or ``None``."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        return positional[position]
    return None


def names_in(node: cst.CSTNode) -> list[str]:
    """Names read in ``node`` (attribute names and keywords excluded), in order of first read."""
    reads = NameReads()
    node.visit(reads)
    return list(reads.reads)


class ModuleFacts:
    """One parsed module: kernels, host functions, positions and parents of every node, and
    which code cannot run (``is_dead``).

    ``launched``: the kernels a call of the module was seen to launch (the verifier's compile
    step records them); the kernels considered are then those and the ``@triton.jit`` helpers
    they call, and host functions that launch only other kernels are dead code. ``None``: every
    kernel of the module.
    """

    def __init__(self, source: str, launched: set[str] | None = None) -> None:
        self.source = source
        wrapper = MetadataWrapper(cst.parse_module(source))
        self.module = wrapper.module
        self._pos = wrapper.resolve(PositionProvider)
        self._parents = wrapper.resolve(ParentNodeProvider)
        functions = [n for n in self.collect(self.module, lambda n: isinstance(n, cst.FunctionDef))]
        every: list[cst.FunctionDef] = [f for f in functions if is_kernel(f)]  # type: ignore[arg-type]
        self.all_kernel_names = {f.name.value for f in every}
        self._dead: set[int] = set()
        self._find_dead_branches(functions, every)
        live = self._reachable(every, launched)
        self.kernels = [f for f in every if f.name.value in live]
        self.kernel_names = {f.name.value for f in self.kernels}
        if launched is not None:
            self._find_dead_hosts(functions)

    def _reachable(self, kernels: list[cst.FunctionDef], launched: set[str] | None) -> set[str]:
        """``launched`` and the kernels they call, transitively (all kernels when unknown)."""
        names = {f.name.value for f in kernels}
        start = (launched or set()) & names
        if not start:
            return names
        by_name = {f.name.value: f for f in kernels}
        seen, todo = set(start), list(start)
        while todo:
            fn = by_name[todo.pop()]
            for call in self.collect(fn, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Name)
                                     and not self.is_dead(n)):
                callee = call.func.value  # type: ignore[attr-defined]
                if callee in names and callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        return seen

    def launches(self) -> list[tuple[str, cst.Call]]:
        """``(kernel name, call)`` of every ``kernel[grid](...)`` launch in the module."""
        return [(dotted_name(c.func.value), c) for c in self.collect(  # type: ignore[attr-defined]
            self.module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Subscript)
            and dotted_name(n.func.value) in self.all_kernel_names)]

    def _find_dead_branches(self, functions: list[cst.CSTNode], kernels: list[cst.FunctionDef]) -> None:
        """The branch of ``if FLAG:`` / ``if not FLAG:`` in a kernel that cannot run: every launch
        passes the constexpr ``FLAG`` the same literal."""
        values: dict[tuple[str, str], set[Any]] = {}
        for kernel, call in self.launches():
            fn = next(f for f in functions if isinstance(f, cst.FunctionDef) and f.name.value == kernel)
            params = [p.name.value for p in fn.params.params]  # type: ignore[attr-defined]
            bound, _, _ = bind_launch_args(params, call)
            for p in params:
                a = bound.get(p)
                literal = _literal(a.value) if a is not None else _MISSING
                values.setdefault((kernel, p), set()).add(literal)
        for fn in kernels:
            for node in self.collect(fn, lambda n: isinstance(n, cst.If)):
                test, negate = node.test, False  # type: ignore[attr-defined]
                if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                    test, negate = test.expression, True
                if not isinstance(test, cst.Name):
                    continue
                seen = values.get((fn.name.value, test.value), set())
                if len(seen) != 1 or _MISSING in seen:
                    continue
                taken = bool(next(iter(seen))) != negate
                dead = node.orelse if taken else node.body  # type: ignore[attr-defined]
                if dead is not None:
                    self._dead.add(id(dead))

    def _find_dead_hosts(self, functions: list[cst.CSTNode]) -> None:
        """Host functions that launch only kernels that did not run."""
        launches = self.launches()
        for fn in functions:
            if isinstance(fn, cst.FunctionDef) and fn.name.value not in self.all_kernel_names:
                targets = {k for k, c in launches if any(a is fn for a in self.ancestors(c))}
                if targets and not targets & self.kernel_names:
                    self._dead.add(id(fn))

    def is_dead(self, node: cst.CSTNode) -> bool:
        """``node`` lies in code that cannot run (see ``_find_dead``)."""
        return id(node) in self._dead or any(id(a) in self._dead for a in self.ancestors(node))

    # -- nodes
    def collect(self, root: cst.CSTNode, keep: Callable[[cst.CSTNode], bool]) -> list[cst.CSTNode]:
        """Every node under ``root`` (itself included) for which ``keep`` is true, in source order."""
        v = _Collect(keep)
        root.visit(v)
        return v.found

    def line(self, node: cst.CSTNode) -> int:
        """The 1-based line where ``node`` starts."""
        return self._pos[node].start.line

    def code(self, node: cst.CSTNode) -> str:
        """The source text of ``node``."""
        return self.module.code_for_node(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        p = self.parent(node)
        while p is not None:
            yield p
            p = self.parent(p)

    def function_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost function holding ``node``."""
        return next((a for a in self.ancestors(node) if isinstance(a, cst.FunctionDef)), None)

    def in_kernel(self, node: cst.CSTNode) -> bool:
        fn = self.function_of(node)
        return fn is not None and is_kernel(fn)

    def in_loop(self, node: cst.CSTNode) -> bool:
        """Inside a ``for``/``while`` loop of its function."""
        for a in self.ancestors(node):
            if isinstance(a, (cst.For, cst.While)):
                return True
            if isinstance(a, cst.FunctionDef):
                return False
        return False

    def statement_of(self, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
        return next((a for a in self.ancestors(node) if isinstance(a, cst.SimpleStatementLine)), None)

    def owner(self, node: cst.CSTNode) -> str:
        """The name of the function holding ``node`` (``<module>`` at top level)."""
        fn = self.function_of(node)
        return fn.name.value if fn is not None else "<module>"

    # -- kernels
    def kernel_calls(self, name: str) -> list[cst.Call]:
        """Every ``tl.<name>(...)`` call inside a kernel, in source order."""
        return [n for k in self.kernels for n in self.collect(k, lambda n: tl_name(n) == name)]  # type: ignore[misc]

    def assignments(self, fn: cst.FunctionDef) -> list[tuple[str, cst.SimpleStatementLine, cst.BaseExpression]]:
        """``(name, statement, value)`` of every ``name = value`` / ``name += value`` in ``fn``, in order."""
        out = []
        for stmt in self.collect(fn, lambda n: isinstance(n, cst.SimpleStatementLine)):
            for small in stmt.body:  # type: ignore[attr-defined]
                if isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name):
                    out.append((small.targets[0].target.value, stmt, small.value))
                elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
                    out.append((small.target.value, stmt, small.value))
        return out  # type: ignore[return-value]

    def flows_into(self, fn: cst.FunctionDef, roots: list[cst.BaseExpression], depth: int = 4) -> set[str]:
        """Names whose values reach the expressions ``roots`` in ``fn`` through simple
        assignments (up to ``depth`` steps back)."""
        assigns = self.assignments(fn)
        found: set[str] = set()
        frontier = {n for r in roots for n in names_in(r)}
        for _ in range(depth):
            new = frontier - found
            if not new:
                break
            found |= new
            frontier = {n for name, _, value in assigns if name in new for n in names_in(value)}
        return found

    def uses_2d_tiles(self, fn: cst.FunctionDef) -> bool:
        """The kernel broadcasts index vectors into 2-D tiles (``[:, None]`` / ``[None, :]``)."""
        return bool(self.collect(fn, lambda n: isinstance(n, cst.SubscriptElement)
                                 and isinstance(n.slice, cst.Index) and isinstance(n.slice.value, cst.Name)
                                 and n.slice.value.value == "None"))


_MISSING = object()


def _literal(node: cst.BaseExpression) -> Any:
    """The value of a ``True``/``False``/``None``/number literal, else a marker of "not known"."""
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    value = int_value(node)
    if value is not None:
        return value
    if isinstance(node, cst.Float):
        return float(node.evaluated_value)
    return _MISSING


def axis_of(call: cst.Call) -> tuple[cst.Arg, int] | None:
    """The ``axis`` argument of a reduction call and its integer value, when it is a literal."""
    a = arg(call, "axis", 1)
    if a is None:
        return None
    value = int_value(a.value)
    return (a, value) if value is not None else None
