"""Static facts about a kernel module that the fault classes need (libcst, nothing executed).

``ModuleFacts(source)`` parses the module once and answers: which functions are Triton kernels
(``@triton.jit``) and which are host code, the line and text of any node, the enclosing kernel
and loop of a node, the simple assignments of a kernel, and which Triton calls a node is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from xeforge_core.codemods.common import NameReads, dotted_name, int_value, is_kernel

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
    """One parsed module: kernels, host functions, positions and parents of every node."""

    def __init__(self, source: str) -> None:
        self.source = source
        wrapper = MetadataWrapper(cst.parse_module(source))
        self.module = wrapper.module
        self._pos = wrapper.resolve(PositionProvider)
        self._parents = wrapper.resolve(ParentNodeProvider)
        functions = [n for n in self.collect(self.module, lambda n: isinstance(n, cst.FunctionDef))]
        self.kernels: list[cst.FunctionDef] = [f for f in functions if is_kernel(f)]  # type: ignore[arg-type]
        self.kernel_names = {f.name.value for f in self.kernels}

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


def axis_of(call: cst.Call) -> tuple[cst.Arg, int] | None:
    """The ``axis`` argument of a reduction call and its integer value, when it is a literal."""
    a = arg(call, "axis", 1)
    if a is None:
        return None
    value = int_value(a.value)
    return (a, value) if value is not None else None
