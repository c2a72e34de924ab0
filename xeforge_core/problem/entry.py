"""How the harness enters a module, read statically: the model class to instantiate, or
KernelAgent's ``kernel_function``; and whether a model class computes with Triton at all.
Standard library only (and the shared AST helpers), so the problem model can use it without
importing the module reader.

An entry point is a module attribute, however it is bound: ``class ModelNew``, ``ModelNew =
FusedLinear`` (an alias of a class defined in the file), ``from .impl import ModelNew``,
``def kernel_function(...)``, ``kernel_function = triton_kernel_wrapper`` or ``from .ops import
kernel_function``. The harness reads the attribute with ``getattr`` at run time, so each of these
works there; this module only has to name it.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field

from xeforge_core.worker import formats
from xeforge_core.worker.astutil import dotted_name, name_closure
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
KERNEL_FUNCTION = formats.get_format("kernelagent").entry_names[0]


@dataclass
class Bindings:
    """The names a module binds at module level, by how they are bound.

    ``classes``: ``class X`` and names assigned a class of the file (``Model = GetMask``, also
    through a chain of such assignments); ``functions``: ``def f``; ``assigned``: every other
    ``NAME = <expression>``; ``imported``: ``import x`` / ``from m import x as y`` (the bound
    name). ``aliases`` maps an assigned or aliased name to the name it was assigned from
    (``{"kernel_function": "triton_kernel_wrapper"}``) with its line in ``lines``."""

    classes: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    assigned: set[str] = field(default_factory=set)
    imported: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)

    def bound(self, name: str) -> bool:
        """Whether ``name`` is a module attribute after import (bound in any way)."""
        return name in self.classes or name in self.functions or name in self.assigned or name in self.imported

    def bound_names(self) -> set[str]:
        """Every name the module binds at module level."""
        return self.classes | self.functions | self.assigned | self.imported

    def class_like(self, name: str) -> bool:
        """Whether ``name`` can be the model class: a class of the file, an alias of one, or an
        imported name (what it is shows only when the module runs)."""
        return name in self.classes or name in self.imported


def module_bindings(tree: ast.Module) -> Bindings:
    """The module-level :class:`Bindings` of ``tree`` (``if``/``try``/``with`` blocks at module
    level included)."""
    b = Bindings()
    body = top_level_statements(tree.body)
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            b.classes.add(stmt.name)
            b.lines.setdefault(stmt.name, stmt.lineno)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            b.functions.add(stmt.name)
            b.lines.setdefault(stmt.name, stmt.lineno)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                bound = alias.asname or alias.name.split(".")[0]
                b.imported.add(bound)
                b.lines.setdefault(bound, stmt.lineno)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    b.assigned.add(target.id)
                    b.lines.setdefault(target.id, stmt.lineno)
                    source = dotted_name(stmt.value)
                    if source:
                        b.aliases[target.id] = source
    changed = True
    while changed:  # Model = GetMask, ModelNew = Model: aliases of classes are classes
        changed = False
        for name, source in b.aliases.items():
            if source in b.classes and name not in b.classes:
                b.classes.add(name)
                changed = True
    b.assigned -= b.classes
    return b


#: Base classes that make a class an ``nn.Module`` (as the source spells them).
NN_MODULE_BASES = {"nn.Module", "torch.nn.Module", "Module"}


def problem_class(source: str, default: str = "Model") -> str:
    """The class a plain-PyTorch problem file poses: ``default`` (``Model``) when the file binds
    it in any way; else, in a file that defines the inputs function (``get_inputs``), its one
    outermost ``nn.Module`` subclass: KernelBook's problems (GPUMODE/KernelBook, the
    PyTorch-to-Triton sets built from it) keep the original module's name, ``class
    GetMask(nn.Module)`` or ``class SELoss(nn.MSELoss)``, beside helper modules it uses.
    Outermost: no other class of the file names it (as a base, an attribute or a call). ``default`` otherwise (several candidates, or
    none: loading then says what is missing, listing them)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return default
    b = module_bindings(tree)  # type: ignore[arg-type]
    if b.bound(default) or formats.inputs_functions()[0] not in b.bound_names():
        return default
    body = top_level_statements(tree.body)
    nodes = {stmt.name: stmt for stmt in body if isinstance(stmt, ast.ClassDef)}
    from_nn = {alias.asname or alias.name for stmt in body if isinstance(stmt, ast.ImportFrom)
               and (stmt.module or "").startswith("torch.nn") for alias in stmt.names}

    def module_base(base: ast.expr, modules: set[str]) -> bool:
        name = dotted_name(base) or ""
        return name in NN_MODULE_BASES or name in modules or name in from_nn or name.startswith(("nn.", "torch.nn."))

    modules: set[str] = set()
    changed = True
    while changed:  # a subclass of a module class (nn.Module, nn.MSELoss, one of the file's) is one too
        changed = False
        for name, node in nodes.items():
            if name not in modules and any(module_base(base, modules) for base in node.bases):
                modules.add(name)
                changed = True
    named = {n.id for name, node in nodes.items() for n in ast.walk(node) if isinstance(n, ast.Name) and n.id != name}
    outer = [name for name in modules if name not in named]
    return outer[0] if len(outer) == 1 else default


def entry_point(source: str, preferred: str = "Model") -> tuple[str, str]:
    """How the harness runs a candidate module, as the registered problem formats say
    (``worker.formats.entry_point_of``): ``("class", NAME)`` to instantiate a model class
    (``preferred`` if the module binds it as a class, else ``ModelNew``, else ``Model``), or
    ``("function", "kernel_function")`` for a KernelAgent-style module that binds that name
    instead (defined, assigned or imported). A module that does not parse, or binds neither,
    gives ``("class", preferred)``: running it then says what is missing.

    A ``Model`` class that reaches no ``@triton.jit`` kernel (``kernels_reached``) yields to a
    function entry that reaches one: KernelAgent's kernel modules often carry a copy of the
    problem's plain-PyTorch ``Model`` for their self-test beside ``kernel_function``, and the
    kernel is the function. A ``ModelNew`` is what KernelBench's harness runs: it stays the
    entry whatever else the module binds."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return "class", preferred
    b = module_bindings(tree)  # type: ignore[arg-type]
    kind, name = formats.entry_point_of(b.classes, b.bound_names(), b.imported, preferred)
    if kind == "class" and name == formats.get_format("kernelagent").reference_class \
            and kernels_reached(source, name) == []:
        bound = b.bound_names()
        for fn in formats.function_names():
            if fn in bound and kernels_reached(source, fn):
                return "function", fn
    return kind, name


def ignored_lookalikes(source: str) -> list[tuple[str, str]]:
    """``(class, entry name it resembles)`` for each class of a module entered by a function
    (``kernel_function``) whose name is close to a class entry (``ModelNwe`` beside ``ModelNew``,
    difflib ratio 0.75 or more): the harness calls the function and never the class, so a
    misspelt ``ModelNew`` would be verified silently as the function. ``[]`` for a module
    entered by a class, or one that does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return []
    if entry_point(source)[0] != "function":
        return []
    b = module_bindings(tree)  # type: ignore[arg-type]
    classes = formats.class_names()
    out = []
    for name in sorted(b.classes, key=lambda n: b.lines.get(n, 0)):
        near = difflib.get_close_matches(name, classes, n=1, cutoff=0.75)
        if near and name not in classes:
            out.append((name, near[0]))
    return out


def _jit_functions(tree: ast.AST) -> dict[str, ast.AST]:
    """Functions decorated ``@triton.jit`` / ``@jit`` (called or not), anywhere in ``tree``."""
    out: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "jit":
                    out.setdefault(node.name, node)
    return out


def mentions_triton_jit(source: str) -> bool:
    """Whether the module defines a function decorated ``@triton.jit`` / ``@jit`` (called or
    not), read statically; ``False`` when it does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return False
    return bool(_jit_functions(tree))


def _names_in(node: ast.AST) -> set[str]:
    """Every name ``node`` reads (``Name`` loads, and the root of attribute chains)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_main_guard(stmt: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (a script's own test code, not the module's)."""
    test = stmt.test if isinstance(stmt, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


#: Decorator names (last dotted part, or part of it) that register a function to be reached by
#: name rather than by reference: ``@torch.library.custom_op``, ``@triton_op``, ``@register_...``.
_REGISTERING = ("custom_op", "library", "register", "impl", "triton_op")


def kernels_reached(source: str, class_name: str = "Model") -> list[str] | None:
    """The ``@triton.jit`` kernels of the module that ``class_name`` can reach, read
    statically, in file order; ``None`` when the module does not parse or does not bind
    ``class_name``.

    Reachable is the closure over names: everything ``class_name``'s body (its methods, and its
    bases of the same file) names, and everything those module-level functions, classes and
    assignments name in turn; also whatever module-level code runs at import (a registration
    call such as ``lib.impl("op", fn)``; not a ``__main__`` block) and any function registered
    by a decorator (``@torch.library.custom_op``: reached through ``torch.ops`` by name). A
    model that reaches no kernel computes with PyTorch: it is a reference, whatever else the
    file defines (an unused ``@triton.jit`` function does not make it a Triton baseline)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    body = top_level_statements([s for s in tree.body if not _is_main_guard(s)])  # type: ignore[attr-defined]
    defs: dict[str, list[ast.AST]] = {}
    roots: set[str] = set()
    for stmt in body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(stmt.name, []).append(stmt)
            decorators = [dotted_name(d.func if isinstance(d, ast.Call) else d) for d in stmt.decorator_list]
            if any(part in name for name in decorators for part in _REGISTERING):
                roots.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        defs.setdefault(n.id, []).append(stmt.value)
        elif isinstance(stmt, ast.Expr):
            roots |= _names_in(stmt)
    if class_name not in defs:
        return None
    seen = name_closure([class_name, *sorted(roots)],
                        lambda name: {n for node in defs.get(name, []) for n in _names_in(node) if n in defs})
    reached = [node for name in seen for node in defs.get(name, [])]
    nested = {n.name for node in reached for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    kernels = _jit_functions(tree)
    lines = {name: getattr(node, "lineno", 0) for name, node in kernels.items()}
    return sorted((k for k in kernels if k in seen or k in nested), key=lambda k: lines[k])
