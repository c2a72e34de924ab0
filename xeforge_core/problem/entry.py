"""How the harness enters a kernel module, read statically: the model class to instantiate, or
KernelAgent's ``kernel_function``. Standard library only (and the shared AST helpers), so the
problem model can use it without importing the module reader.
"""

from __future__ import annotations

import ast

from xeforge_core.worker.astutil import parse as parse_python


def top_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, looking into ``if``/``try``/``with`` blocks at module level."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += top_level_statements(stmt.body) + top_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += top_level_statements(stmt.body) + top_level_statements(stmt.orelse) + top_level_statements(stmt.finalbody)
            for handler in stmt.handlers:
                out += top_level_statements(handler.body)
        elif isinstance(stmt, ast.With):
            out += top_level_statements(stmt.body)
    return out


#: The function KernelAgent's kernel modules define instead of a model class.
KERNEL_FUNCTION = "kernel_function"


def entry_point(source: str, preferred: str = "Model") -> tuple[str, str]:
    """How the harness runs a candidate module: ``("class", NAME)`` to instantiate a model class
    (``preferred`` if the module defines it, else ``ModelNew``, else ``Model``), or
    ``("function", "kernel_function")`` for a KernelAgent-style module that defines only that
    function. A module that does not parse, or defines neither, gives ``("class", preferred)``:
    running it then says what is missing."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return "class", preferred
    body = top_level_statements(tree.body)
    classes = {n.name for n in body if isinstance(n, ast.ClassDef)}
    classes |= {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name) and isinstance(n.value, ast.Name) and n.value.id in classes}
    for name in (preferred, "ModelNew", "Model"):
        if name in classes:
            return "class", name
    functions = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if KERNEL_FUNCTION in functions:
        return "function", KERNEL_FUNCTION
    return "class", preferred


def mentions_triton_jit(source: str) -> bool:
    """Whether the module defines a function decorated ``@triton.jit`` / ``@jit`` (called or
    not), read statically; ``False`` when it does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "jit":
                    return True
    return False
