"""Problem formats: one module per format, one registry (:data:`FORMATS`).

A format says how a kernel module is laid out and how the harness enters it: the attribute it
enters by (a model class to instantiate, or a function to call bound to the problem's reference
``Model``), the class of the same file that is the truth, the sibling files that complete it (a
YAML spec, a PyTorch reference), and the functions that build its inputs. The loader
(``problem.loader``), the static readers (``problem.entry``, ``problem.module``), the UI's input
checks (``ui.validate``), the verifier and the worker (``worker.roles``, ``ir.worker``) ask the
registry instead of naming conventions.

The registry lives in the worker package because the sandboxed worker asks it too: a format
module imports only the standard library at module level (torch only inside the worker-side
``adapt``), so the parent reads it without importing torch.

Order matters: :func:`entry_point` tries the formats' class entries first, in registry order,
then function entries, so a file binding both ``ModelNew`` and ``kernel_function`` is entered
by its class.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from xeforge_core.worker.formats.base import ProblemFormat
from xeforge_core.worker.formats.kernelagent import KERNELAGENT
from xeforge_core.worker.formats.kernelbench import KERNELBENCH_PROBLEM, KERNELBENCH_SOLUTION
from xeforge_core.worker.formats.wrapper import WRAPPER
from xeforge_core.worker.formats.xeforge import XEFORGE

__all__ = ["FORMATS", "ProblemFormat", "get_format", "format_for_entry", "class_names", "function_names",
           "spec_suffixes", "reference_suffixes", "entry_point_of", "inputs_functions"]

#: Every problem format, in the order the harness tries their entries.
FORMATS: tuple[ProblemFormat, ...] = (KERNELBENCH_SOLUTION, XEFORGE, KERNELBENCH_PROBLEM, KERNELAGENT, WRAPPER)


def get_format(name: str) -> ProblemFormat:
    """The registered format called ``name``. Raises ``KeyError`` naming the known formats."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(f"unknown problem format {name!r}; known: {', '.join(f.name for f in FORMATS)}")


def format_for_entry(kind: str, name: str) -> ProblemFormat | None:
    """The format that enters a module by ``kind`` (``"class"`` or ``"function"``) and
    attribute ``name``; ``None`` when none does (a class the user named: plain instantiation)."""
    return next((f for f in FORMATS if f.entry_kind == kind and name in f.entry_names), None)


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def class_names() -> tuple[str, ...]:
    """The model class names the harness enters by, in order (``ModelNew``, ``Model``, ...)."""
    return _unique(n for f in FORMATS if f.entry_kind == "class" for n in f.entry_names)


def function_names() -> tuple[str, ...]:
    """The module-level functions the harness calls instead of a class (``kernel_function``)."""
    return _unique(n for f in FORMATS if f.entry_kind == "function" for n in f.entry_names)


def spec_suffixes() -> tuple[str, ...]:
    """File suffixes of a sibling spec (``.yaml``, ``.yml``)."""
    return _unique(s for f in FORMATS for s in f.spec_suffixes)


def reference_suffixes() -> tuple[str, ...]:
    """Stem suffixes of a sibling PyTorch reference (``_pytorch``, ``_ref``)."""
    return _unique(s for f in FORMATS for s in f.reference_suffixes)


def inputs_functions() -> tuple[str, str]:
    """The names of the functions that build a spec-less problem's inputs and constructor
    arguments (KernelBench's ``get_inputs`` / ``get_init_inputs``)."""
    fmt = next(f for f in FORMATS if f.inputs_function)
    return fmt.inputs_function, fmt.init_inputs_function


def harness_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module-level statements of a parsed module that only build its inputs: its input
    functions (``inputs_functions``) and the assignments nothing else reads (a solution's copy of
    the problem's ``batch_size = 16`` and ``get_inputs()`` beside its kernels). The verifier never
    runs them (the problem's own input functions make the inputs), so nothing in them is
    evidence about the kernels."""
    names = set(inputs_functions())
    read_outside: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and child.name in names:
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
                read_outside.add(child.id)
            visit(child)

    visit(tree)
    out: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name in names:
            out.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            bound = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if bound and not any(n in read_outside for n in bound):
                out.append(stmt)
    return out


def entry_point_of(classes: set[str], bound: set[str], imported: set[str], preferred: str) -> tuple[str, str]:
    """``(kind, name)``: how the harness enters a module that defines ``classes`` (and aliases of
    them), binds ``bound`` in any way and imports ``imported``: ``preferred`` if it is a class,
    else the first registered class entry it defines, else a registered function entry it binds,
    else an imported class entry (what it is shows only at run time), else ``("class",
    preferred)``: running it then says what is missing.

    A format's entry outranks its reference class: a KernelBench solution keeps the problem's
    ``Model`` beside ``ModelNew``, and ``ModelNew`` is the solution even when ``preferred`` is
    ``Model`` (the problem's class). KernelBook's solutions name theirs after the problem's
    class (``GetMaskNew`` for ``GetMask``), and keep the problem's class beside it too:
    ``preferred + "New"`` comes first."""
    shadowed = {f.reference_class for f in FORMATS
                if f.entry_kind == "class" and f.reference_class and any(n in classes for n in f.entry_names)}
    order = tuple(n for n in dict.fromkeys((preferred + "New", preferred, *class_names())) if n not in shadowed)
    for name in order:
        if name in classes:
            return "class", name
    for name in function_names():
        if name in bound:
            return "function", name
    for name in order:
        if name in imported:
            return "class", name
    return "class", preferred
