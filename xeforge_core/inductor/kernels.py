"""Read TorchInductor's output code: its Triton kernels and the host function that launches them.

Inductor's output module defines each kernel as ``NAME = async_compile.triton('NAME', '''SOURCE''',
device_str=...)``, where SOURCE is a small module with one ``@triton.jit`` function under an
``@triton_heuristics.<kind>(...)`` decorator, and the host code as ``call(args)`` (a method of
``Runner`` in recent torch, a module-level function before). Everything is read with :mod:`ast`;
nothing is executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.errors import XeForgeError


class InductorCodeError(XeForgeError, ValueError):
    """TorchInductor's output code cannot be converted (an unknown construct); the message names
    it and, where known, the kernel or line."""


#: Inductor's kernel name prefixes (``triton_poi_...``) and the kind each stands for.
KIND_PREFIXES: dict[str, str] = {"poi": "pointwise", "red": "reduction", "per": "persistent_reduction",
                                 "tem": "template", "for": "foreach", "spl": "split_scan"}


@dataclass
class Kernel:
    """One Inductor kernel: ``name`` in the output code, ``kind`` (the heuristics decorator:
    ``pointwise``, ``reduction``, ``persistent_reduction``, ...), the ``function`` (its
    ``ast.FunctionDef``, decorators as written), ``params`` (parameter names in order),
    ``constexpr`` (those annotated ``tl.constexpr``), ``meta`` (the decorator's keyword
    arguments that are literals: ``size_hints``, ``reduction_hint``, ``inductor_meta``...),
    ``local_functions`` (the other functions its source defines beside it: the combine
    functions of a scan, ``_triton_helper_fn_add0``; Inductor defines them with ``@triton.jit``,
    and the conversion writes them so)."""

    name: str
    kind: str
    function: ast.FunctionDef
    params: list[str]
    constexpr: set[str]
    meta: dict[str, Any] = field(default_factory=dict)
    local_functions: list[ast.FunctionDef] = field(default_factory=list)


@dataclass
class OutputCode:
    """The parts of one output module: its ``kernels`` by name (in definition order), the host
    ``call`` function, and the module ``text`` (for comments and line lookups)."""

    kernels: dict[str, Kernel]
    call: ast.FunctionDef
    text: str


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        if isinstance(node, ast.Attribute):  # ReductionHint.INNER -> "INNER"
            return node.attr
        if isinstance(node, ast.Dict):
            return {(_literal(k) if k is not None else None): _literal(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Call):  # DeviceProperties(...), set()
            return None
        return None


def _is_constexpr(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation).endswith("constexpr")


def parse_kernel(name: str, source: str) -> Kernel:
    """Parse one kernel module text (the string Inductor hands ``async_compile.triton``).
    Raises ``InductorCodeError`` when it holds no ``@triton.jit`` function."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InductorCodeError(f"kernel {name}: its source does not parse: {exc}") from None
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if not fns:
        raise InductorCodeError(f"kernel {name}: no function in its source")
    fn = next((f for f in fns if f.name == name), fns[-1])
    kind, meta = "", {}
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and ast.unparse(dec.func).startswith("triton_heuristics."):
            kind = ast.unparse(dec.func).split(".", 1)[1]
            meta = {k.arg: _literal(k.value) for k in dec.keywords if k.arg}
    if not kind:
        kind = KIND_PREFIXES.get(name.split("_")[1] if name.count("_") > 1 else "", "pointwise")
    args = fn.args.args
    local = [f for f in fns if f is not fn]
    return Kernel(name=name, kind=kind, function=fn, params=[a.arg for a in args],
                  constexpr={a.arg for a in args if _is_constexpr(a.annotation)}, meta=meta, local_functions=local)


def _kernel_def(node: ast.stmt) -> tuple[str, str] | None:
    """``NAME = async_compile.triton('NAME', 'SOURCE', ...)`` -> ``(NAME, SOURCE)``."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
        return None
    call = node.value
    if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "async_compile.triton"):
        return None
    texts = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(texts) < 2:
        raise InductorCodeError(f"line {node.lineno}: async_compile.triton without a kernel source")
    return node.targets[0].id, texts[1]


def _find_call(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and sub.name == "call":
                    return sub
    return None


def read_output_code(text: str) -> OutputCode:
    """Split Inductor's output module ``text`` into kernels and the host ``call``.

    Raises ``InductorCodeError`` when the text does not parse, has no ``call`` function, or
    a kernel is not a Triton kernel Inductor's way (e.g. a C++ kernel: ``cpp_fused_...``)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise InductorCodeError(f"the output code does not parse (line {exc.lineno}): {exc.msg}") from None
    kernels: dict[str, Kernel] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func) == "async_compile.cpp_pybinding":
            raise InductorCodeError(f"line {node.lineno}: a C++ kernel; the output code was generated for the "
                                    "CPU's C++ backend, not Triton")
        found = _kernel_def(node)
        if found:
            kernels[found[0]] = parse_kernel(*found)
    call = _find_call(tree)
    if call is None:
        raise InductorCodeError("the output code has no call(args) function (is it TorchInductor's output code?)")
    return OutputCode(kernels=kernels, call=call, text=text)
