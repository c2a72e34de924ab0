"""AST helpers shared by the worker's static integrity rules and the parent's static reading of
modules (``xeforge_core.analysis``, ``xeforge_core.problem.module``). Standard library only, so
both sides may import it."""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Iterable

_PARSE_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time. CPython 3.11 keeps the AST constructor's recursion
    depth in state shared by the interpreter, so two threads parsing at once (the workbench's
    page and its background loop, ``xeforge batch``'s device threads) can fail with
    ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905). Raises
    what ``ast.parse`` raises (``SyntaxError``, ``ValueError`` for null bytes, ``RecursionError``)."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def dotted_name(node: ast.AST) -> str:
    """``tl.math.exp`` for a Name/Attribute chain, ``name`` for a Name, else ``""``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def name_closure(roots: Iterable[str], refers: Callable[[str], Iterable[str]]) -> set[str]:
    """Every name reachable from ``roots`` (included) by following ``refers(name)``, the names a
    definition refers to: what a model's methods or a kernel's body reach, transitively."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [n for n in refers(name) if n not in seen]
    return seen
