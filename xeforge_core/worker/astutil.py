"""AST helpers shared by the worker's static integrity rules and the parent's static reading of
modules (``xeforge_core.analysis``, ``xeforge_core.problem.module``). Standard library only, so
both sides may import it."""

from __future__ import annotations

import ast


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
