"""Static (AST-only) reading of KernelBench-style kernel modules. Nothing is executed.

A KernelBench-style module defines ``class Model(nn.Module)`` (or ``ModelNew`` in KernelBench's
solution convention), whose ``forward`` launches ``@triton.jit`` kernels, plus module-level
``get_inputs()`` and ``get_init_inputs()``. :func:`read_module` returns :class:`ModuleFacts`:
the classes with their ``__init__``/``forward`` signatures, the helper functions, the Triton
kernels and their launch sites, and the dtype constraints the module places on its inputs.

Dtype constraints are found by following the forward() parameters through the module
(assignments, calls to module-level functions and methods, ``autograd.Function.apply`` and
kernel launches ``kernel[grid](...)``); the analysis is flow-insensitive and over-approximates
(anything computed from an input counts as input-derived). Three kinds are recorded:

* ``requires``: ``assert x.dtype == torch.float16``, ``assert x.dtype in (...)``, or
  ``if x.dtype != torch.float16: raise ...``;
* ``coerces``: ``x = x.half()``, ``x.to(torch.float16)``, ``x.to(dtype=...)``,
  ``x.half() if x.dtype != torch.float16 else x`` (the module converts the input itself);
* ``hardcodes``: a Triton kernel reached with input-derived arguments that binds a name to a
  16-bit-or-narrower ``tl`` dtype and casts data with ``.to(NAME)`` (e.g. Flash Attention's
  ``dtype = tl.float16``), so it cannot take wider inputs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xeforge_core.worker import formats
from xeforge_core.worker.astutil import dotted_name
from xeforge_core.worker.astutil import parse as parse_python

from .dtypes import DTYPE_SIZES, normalize_dtype
from .entry import KERNEL_FUNCTION, NN_MODULE_BASES, entry_point, problem_class, top_level_statements
from .model import ProblemError
from .spec import check_text

__all__ = ["read_module", "entry_point", "defines_triton_kernel", "triton_decorator_kind", "KERNEL_FUNCTION",
           "ModuleFacts", "Signature", "ClassInfo", "KernelInfo", "KernelLaunch",
           "DtypeConstraint"]

_CONVERSION_METHODS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16"}
_MAX_ANALYSES = 400


@dataclass(frozen=True)
class Signature:
    """A function's parameters as seen by a positional caller (``self``/``cls``/``ctx``
    excluded). ``params`` are the positional parameters in order, the last ``defaults`` of
    which have defaults; ``varargs`` is the ``*args`` name when present."""

    name: str
    line: int
    params: tuple[str, ...]
    defaults: int = 0
    varargs: str | None = None
    varkw: str | None = None
    kwonly_required: tuple[str, ...] = ()
    implicit: bool = False  # True: not written in the module (nn.Module's own __init__)

    @property
    def required(self) -> int:
        """How many positional arguments a caller must pass."""
        return len(self.params) - self.defaults

    @property
    def max_positional(self) -> int | None:
        """Most positional arguments accepted (``None``: unbounded, ``*args``)."""
        return None if self.varargs else len(self.params)

    def accepts(self, count: int) -> bool:
        """Whether ``count`` positional arguments fit this signature."""
        if count < self.required or self.kwonly_required:
            return False
        return self.max_positional is None or count <= self.max_positional

    def describe(self) -> str:
        """``__init__(in_features, out_features, eps=...)``-style text for messages."""
        parts = [p if i < self.required else f"{p}=..." for i, p in enumerate(self.params)]
        if self.varargs:
            parts.append(f"*{self.varargs}")
        if self.varkw:
            parts.append(f"**{self.varkw}")
        return f"{self.name}({', '.join(parts)})"

    def takes(self) -> str:
        """How many positional arguments it takes, in words (``2``, ``2 to 5``, ``2 or more``)."""
        if self.max_positional is None:
            return f"{self.required} or more"
        if self.required == self.max_positional:
            return str(self.required)
        return f"{self.required} to {self.max_positional}"


@dataclass(frozen=True)
class ClassInfo:
    """A module-level class. ``init``/``forward`` are resolved through base classes defined in
    the same module; ``init`` is ``None`` when it comes from a base class defined elsewhere
    (other than ``nn.Module``, whose ``__init__`` takes no arguments)."""

    name: str
    line: int
    bases: tuple[str, ...]
    init: Signature | None
    forward: Signature | None
    init_owner: str | None = None  # class whose __init__ is used, when inherited
    alias_of: str | None = None  # ``Model = Other``


@dataclass(frozen=True)
class KernelInfo:
    """A ``@triton.jit`` function. ``line`` is its ``def`` line, ``decorator_line`` the first
    decorator's; ``autotuned``/``heuristics`` say whether ``@triton.autotune`` /
    ``@triton.heuristics`` wrap it."""

    name: str
    line: int
    decorator_line: int
    params: tuple[str, ...]
    autotuned: bool = False
    heuristics: bool = False


@dataclass(frozen=True)
class KernelLaunch:
    """A launch ``kernel[grid](...)`` of a module kernel, at ``line`` inside ``function``."""

    kernel: str
    line: int
    function: str


@dataclass(frozen=True)
class DtypeConstraint:
    """A dtype rule the module applies (see the module docstring for the kinds).

    ``dtypes`` are canonical torch names (allowed for ``requires``, the target for
    ``coerces``/``hardcodes``); ``inputs`` are the forward() parameters the subject derives
    from (empty when not input-derived); ``text`` is the source line."""

    kind: str
    dtypes: tuple[str, ...]
    line: int
    function: str
    subject: str
    inputs: tuple[str, ...]
    text: str


@dataclass
class ModuleFacts:
    """What :func:`read_module` established about one module (``name``: its file name, for
    messages).

    ``model_class`` is the class the harness instantiates (``ModelNew`` when the module
    defines it, else ``Model``; ``None`` when it defines neither and ``require_model`` was
    false). ``functions`` maps module-level function names to their line."""

    path: Path | None
    name: str
    classes: dict[str, ClassInfo]
    model_class: str | None
    functions: dict[str, int]
    kernels: list[KernelInfo]
    launches: list[KernelLaunch]
    dtype_constraints: list[DtypeConstraint] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The file name for messages (``name``: the path's name, or the label given)."""
        return self.name

    def where(self, line: int | None) -> str:
        """``file.py:LINE`` for messages."""
        return f"{self.label}:{line}" if line else self.label

    @property
    def model(self) -> ClassInfo | None:
        """The :class:`ClassInfo` of ``model_class``."""
        return self.classes.get(self.model_class) if self.model_class else None

    @property
    def has_get_inputs(self) -> bool:
        """Whether the module defines ``get_inputs()`` (a function or an alias)."""
        return formats.inputs_functions()[0] in self.functions

    @property
    def has_get_init_inputs(self) -> bool:
        """Whether the module defines ``get_init_inputs()``."""
        return formats.inputs_functions()[1] in self.functions

    @property
    def kernel_names(self) -> list[str]:
        """Names of the ``@triton.jit`` functions, in file order."""
        return [k.name for k in self.kernels]


def triton_decorator_kind(name: str) -> str | None:
    """The one answer to "which functions are Triton kernels": ``"jit"``, ``"autotune"`` or
    ``"heuristics"`` when ``name``, a decorator's dotted name without its call (``triton.jit``,
    ``jit`` imported from triton, ``triton.autotune``), is that Triton decorator, else ``None``.
    A function is a Triton kernel when one of its decorators is of kind ``jit``. Works for any
    syntax tree: ``ast`` callers pass ``dotted_name(node)``, libcst callers their own dotted name.
    """
    last = name.rsplit(".", 1)[-1]
    if last in {"jit", "autotune", "heuristics"} and (name == last or name.split(".")[0] == "triton"):
        return last
    return None


def _decorator_kind(dec: ast.AST) -> str | None:
    """``jit``/``autotune``/``heuristics`` for Triton decorators (bare or called), else None."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    return triton_decorator_kind(dotted_name(target))


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef, skip_first: bool) -> Signature:
    args = fn.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    defaults = len(args.defaults)
    if skip_first and positional:
        if defaults > len(positional) - 1:
            defaults = len(positional) - 1
        positional = positional[1:]
    kwonly_required = tuple(a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None)
    return Signature(name=fn.name, line=fn.lineno, params=tuple(positional), defaults=defaults,
                     varargs=args.vararg.arg if args.vararg else None,
                     varkw=args.kwarg.arg if args.kwarg else None, kwonly_required=kwonly_required)


class _Reader:
    def __init__(self, tree: ast.Module, source: str, path: Path | None) -> None:
        self.tree = tree
        self.lines = source.splitlines()
        self.path = path
        self.class_nodes: dict[str, ast.ClassDef] = {}
        self.aliases: dict[str, tuple[str, int]] = {}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.function_lines: dict[str, int] = {}
        self.module_consts: dict[str, ast.expr] = {}
        for stmt in top_level_statements(tree.body):
            if isinstance(stmt, ast.ClassDef):
                self.class_nodes.setdefault(stmt.name, stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[stmt.name] = stmt
                self.function_lines.setdefault(stmt.name, stmt.lineno)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        self.module_consts[target.id] = stmt.value
                        if isinstance(stmt.value, ast.Name):
                            self.aliases[target.id] = (stmt.value.id, stmt.lineno)
                        if target.id in formats.inputs_functions():
                            self.function_lines.setdefault(target.id, stmt.lineno)
        self.kernels: dict[str, KernelInfo] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
                kinds = [_decorator_kind(d) for d in node.decorator_list]
                if "jit" in kinds:
                    self.kernels.setdefault(node.name, KernelInfo(
                        name=node.name, line=node.lineno, decorator_line=node.decorator_list[0].lineno,
                        params=tuple(a.arg for a in node.args.posonlyargs + node.args.args),
                        autotuned="autotune" in kinds, heuristics="heuristics" in kinds))

    # -- classes -------------------------------------------------------------------------
    def _method(self, cls: str, name: str, seen: set[str]) -> tuple[ast.FunctionDef | None, str | None, bool]:
        """Find ``name`` in ``cls`` or its module-local bases. Returns (node, owner, known):
        known is False when an unresolvable external base might define it."""
        if cls in seen or cls not in self.class_nodes:
            return None, None, cls in seen
        seen.add(cls)
        node = self.class_nodes[cls]
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                return stmt, cls, True
        known = True
        for base in node.bases:
            bname = dotted_name(base)
            if bname in self.class_nodes:
                found, owner, k = self._method(bname, name, seen)
                if found is not None:
                    return found, owner, True
                known = known and k
            elif bname not in NN_MODULE_BASES and bname != "object":
                known = False
        return None, None, known

    def class_info(self, name: str) -> ClassInfo | None:
        if name not in self.class_nodes:
            if name in self.aliases and self.aliases[name][0] in self.class_nodes:
                target = self.class_info(self.aliases[name][0])
                assert target is not None
                return ClassInfo(name=name, line=self.aliases[name][1], bases=target.bases, init=target.init,
                                 forward=target.forward, init_owner=target.init_owner or target.name,
                                 alias_of=target.name)
            return None
        node = self.class_nodes[name]
        init_node, owner, known = self._method(name, "__init__", set())
        if init_node is not None:
            init: Signature | None = _signature(init_node, skip_first=True)
        elif known:
            init = Signature(name="__init__", line=node.lineno, params=(), implicit=True)
        else:
            init = None
        fwd_node, _, _ = self._method(name, "forward", set())
        forward = _signature(fwd_node, skip_first=True) if fwd_node is not None else None
        return ClassInfo(name=name, line=node.lineno, bases=tuple(dotted_name(b) or ast.unparse(b) for b in node.bases),
                         init=init, forward=forward, init_owner=owner if owner != name else None)

    # -- launches --------------------------------------------------------------------------
    def launches(self) -> list[KernelLaunch]:
        out: list[KernelLaunch] = []

        def visit(node: ast.AST, function: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(child, child.name)
                    continue
                if isinstance(child, ast.Call) and isinstance(child.func, ast.Subscript):
                    name = dotted_name(child.func.value)
                    last = name.rsplit(".", 1)[-1]
                    if last in self.kernels:
                        out.append(KernelLaunch(kernel=last, line=child.lineno, function=function))
                visit(child, function)

        visit(self.tree, "<module>")
        return out

    # -- dtype constraints -------------------------------------------------------------------
    def _resolve_dtype(self, node: ast.AST | None, local: dict[str, ast.expr], depth: int = 0) -> str | None:
        if node is None or depth > 4:
            return None
        if isinstance(node, ast.Attribute):
            base = dotted_name(node.value)
            if base in {"torch", "tl", "triton.language", "language"}:
                return normalize_dtype(node.attr)
            return None
        if isinstance(node, ast.Name):
            value = local.get(node.id, self.module_consts.get(node.id))
            return self._resolve_dtype(value, local, depth + 1) if value is not None else None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return normalize_dtype(node.value)
        return None

    def _dtype_set(self, node: ast.AST, local: dict[str, ast.expr]) -> tuple[str, ...] | None:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = [self._resolve_dtype(e, local) for e in node.elts]
            return tuple(n for n in names if n) if all(names) else None
        single = self._resolve_dtype(node, local)
        return (single,) if single else None

    def _conversion(self, node: ast.AST, local: dict[str, ast.expr]) -> tuple[ast.AST, str] | None:
        """(receiver, target dtype) when ``node`` is ``x.half()``, ``x.to(dtype)``... ."""
        if isinstance(node, ast.IfExp):
            return self._conversion(node.body, local) or self._conversion(node.orelse, local)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return None
        method = node.func.attr
        if method in _CONVERSION_METHODS and not node.args:
            return node.func.value, _CONVERSION_METHODS[method]
        if method in {"to", "type"}:
            candidates = list(node.args) + [k.value for k in node.keywords if k.arg == "dtype"]
            for cand in candidates:
                dt = self._resolve_dtype(cand, local)
                if dt:
                    return node.func.value, dt
        return None

    @staticmethod
    def _dtype_compare(node: ast.AST) -> tuple[ast.AST, ast.cmpop, ast.AST] | None:
        """(subject, op, other) for ``subject.dtype OP other`` (either side)."""
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            return None
        left, right, op = node.left, node.comparators[0], node.ops[0]
        if isinstance(left, ast.Attribute) and left.attr == "dtype":
            return left.value, op, right
        if isinstance(right, ast.Attribute) and right.attr == "dtype" and isinstance(op, (ast.Eq, ast.NotEq)):
            return right.value, op, left
        return None

    def analyze_dtypes(self, model_class: str | None) -> list[DtypeConstraint]:
        """Follow the model's forward() parameters through the module; see module docstring."""
        constraints: dict[tuple[str, int, str, str], DtypeConstraint] = {}
        if not model_class:
            return []
        entry_cls = self.aliases.get(model_class, (model_class, 0))[0]
        fwd, owner, _ = self._method(entry_cls, "forward", set())
        if fwd is None:
            return []
        fwd_params = [a.arg for a in fwd.args.posonlyargs + fwd.args.args][1:]
        done: set[tuple[str, frozenset[tuple[str, frozenset[str]]]]] = set()
        budget = [_MAX_ANALYSES]

        def text_of(line: int) -> str:
            return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

        def add(kind: str, dtypes: tuple[str, ...], line: int, function: str, subject: ast.AST,
                origins: frozenset[str]) -> None:
            subj = ast.unparse(subject) if isinstance(subject, ast.AST) else str(subject)
            key = (kind, line, subj, ",".join(dtypes))
            old = constraints.get(key)
            merged = tuple(sorted(set(origins) | set(old.inputs if old else ())))
            constraints[key] = DtypeConstraint(kind=kind, dtypes=dtypes, line=line, function=function,
                                               subject=subj, inputs=merged, text=text_of(line))

        def run(fn: ast.FunctionDef | ast.AsyncFunctionDef, qual: str, seed: dict[str, frozenset[str]],
                cls: str | None) -> None:
            key = (qual, frozenset(seed.items()))
            if key in done or budget[0] <= 0:
                return
            done.add(key)
            budget[0] -= 1
            taint: dict[str, frozenset[str]] = dict(seed)
            local: dict[str, ast.expr] = {}
            nodes = list(ast.walk(fn))

            def origins(expr: ast.AST | None) -> frozenset[str]:
                if expr is None:
                    return frozenset()
                out: set[str] = set()
                for n in ast.walk(expr):
                    if isinstance(n, ast.Name) and n.id in taint:
                        out |= taint[n.id]
                return frozenset(out)

            def bind(target: ast.AST, value: frozenset[str]) -> bool:
                changed = False
                for n in ast.walk(target):
                    if isinstance(n, ast.Name) and value - taint.get(n.id, frozenset()):
                        taint[n.id] = taint.get(n.id, frozenset()) | value
                        changed = True
                return changed

            for n in nodes:
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    local[n.targets[0].id] = n.value
            changed = True
            while changed:
                changed = False
                for n in nodes:
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            changed |= bind(t, origins(n.value))
                    elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                        changed |= bind(n.target, origins(n.value))
                    elif isinstance(n, (ast.For, ast.comprehension)):
                        changed |= bind(n.target, origins(n.iter))
                    elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                        changed |= bind(n.optional_vars, origins(n.context_expr))
                    elif isinstance(n, ast.NamedExpr):
                        changed |= bind(n.target, origins(n.value))

            is_kernel = fn.name in self.kernels
            for n in nodes:
                # requires: assert subject.dtype == D / in (...)
                if isinstance(n, ast.Assert):
                    for cmp_node in self._and_terms(n.test):
                        found = self._dtype_compare(cmp_node)
                        if not found:
                            continue
                        subject, op, other = found
                        dts = self._dtype_set(other, local)
                        if dts and isinstance(op, (ast.Eq, ast.In, ast.Is)) and origins(subject):
                            add("requires", dts, n.lineno, qual, subject, origins(subject))
                # requires / coerces: if subject.dtype != D: raise | convert
                elif isinstance(n, ast.If) and any(isinstance(s, ast.Raise) for s in n.body):
                    for term in self._and_terms(n.test):
                        found = self._dtype_compare(term)
                        if found and isinstance(found[1], (ast.NotEq, ast.NotIn, ast.IsNot)) and origins(found[0]):
                            dts = self._dtype_set(found[2], local)
                            if dts:
                                add("requires", dts, n.lineno, qual, found[0], origins(found[0]))
                # coerces: x = x.half(), x.to(torch.float16), ... (also inside an IfExp)
                elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    # (inside a kernel, .to() sets a compute dtype of loaded values: not counted)
                    conv = None if is_kernel else self._conversion(n.value, local)
                    if conv and origins(conv[0]):
                        add("coerces", (conv[1],), n.lineno, qual, conv[0], origins(conv[0]))
                    # hardcodes: NAME = tl.float16 in a kernel, used as .to(NAME)
                    if is_kernel and isinstance(n, ast.Assign) and len(n.targets) == 1 \
                            and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Attribute) \
                            and dotted_name(n.value.value) in {"tl", "triton.language"}:
                        dt = normalize_dtype(n.value.attr)
                        name = n.targets[0].id
                        if dt and DTYPE_SIZES[dt] <= 2 and not dt.startswith(("int", "uint")) and any(
                                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "to"
                                and any(isinstance(a, ast.Name) and a.id == name for a in c.args)
                                for c in nodes):
                            kernel_inputs = frozenset().union(*taint.values()) if taint else frozenset()
                            add("hardcodes", (dt,), n.lineno, qual, n.targets[0], kernel_inputs)
                # calls: follow input-derived arguments
                if isinstance(n, ast.Call):
                    self._follow_call(n, origins, run, cls)

        run(fwd, f"{owner or entry_cls}.forward", {p: frozenset([p]) for p in fwd_params}, owner or entry_cls)
        return sorted(constraints.values(), key=lambda c: (c.line, c.kind))

    @staticmethod
    def _and_terms(node: ast.AST) -> list[ast.AST]:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            out: list[ast.AST] = []
            for v in node.values:
                out += _Reader._and_terms(v)
            return out
        return [node]

    def _follow_call(self, call: ast.Call, origins: Callable[[ast.AST | None], frozenset[str]],
                     run: Callable[..., None], cls: str | None) -> None:
        """Analyze the callee of ``call`` (a module function, a kernel launch, a ``self.``
        method or ``Function.apply``) with the parameters that receive input-derived values."""
        func = call.func
        target: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        skip_first = False
        qual = ""
        next_cls: str | None = None
        if isinstance(func, ast.Subscript):  # kernel[grid](...)
            name = dotted_name(func.value).rsplit(".", 1)[-1]
            if name in self.kernels and name in self.functions:
                target, qual = self.functions[name], name
        elif isinstance(func, ast.Name) and func.id in self.functions:
            target, qual = self.functions[func.id], func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self" and cls:
                found, owner, _ = self._method(cls, func.attr, set())
                if found is not None:
                    target, qual, skip_first, next_cls = found, f"{owner}.{func.attr}", True, cls
            elif func.attr == "apply" and func.value.id in self.class_nodes:
                found, owner, _ = self._method(func.value.id, "forward", set())
                if found is not None:  # autograd.Function.forward(ctx, ...)
                    target, qual, skip_first, next_cls = found, f"{owner}.forward", True, func.value.id
        if target is None:
            return
        params = [a.arg for a in target.args.posonlyargs + target.args.args]
        if skip_first:
            params = params[1:]
        seed: dict[str, frozenset[str]] = {}
        for i, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if i < len(params) and origins(arg):
                seed[params[i]] = origins(arg)
        for kw in call.keywords:
            if kw.arg and kw.arg in params and origins(kw.value):
                seed[kw.arg] = origins(kw.value)
        if seed:
            run(target, qual, seed, next_cls)


def read_module(source: str | bytes, path: str | Path | None = None, *, class_name: str | None = None,
                require_model: bool = True, label: str | None = None) -> ModuleFacts:
    """Read a KernelBench-style module statically (``ast`` only; nothing is executed).

    Args:
        source: the module's text (``bytes`` must be UTF-8; at most 1 MB).
        path: where it came from, used in messages.
        class_name: the class the harness will instantiate; by default ``ModelNew`` when the
            module defines it (KernelBench's solution convention), else ``Model``.
        require_model: raise when that class is missing (the default).
        label: the name used in messages when there is no ``path`` (e.g. ``kernel.py`` for
            pasted code).

    Returns:
        :class:`ModuleFacts`.

    Raises:
        ProblemError: empty, non-UTF-8 or oversized source; a syntax error (with its line);
            the model class missing (the message lists the classes the file does define, and
            says when it has ``ModelNew`` instead of ``Model`` or the reverse).
    """
    p = Path(path) if path is not None else None
    where: str | Path | None = p if p is not None else label
    text = check_text(source, where, "module")
    label = p.name if p else (label or "<source>")
    try:
        tree = parse_python(text, filename=label)
    except SyntaxError as exc:
        line_text = (exc.text or "").strip()
        detail = f": {line_text}" if line_text else ""
        raise ProblemError(f"syntax error: {exc.msg}{detail}", file=where, line=exc.lineno) from None
    except (RecursionError, MemoryError):
        raise ProblemError("module is too deeply nested to parse", file=where) from None
    reader = _Reader(tree, text, p)
    defined = set(reader.class_nodes) | {a for a, (t, _) in reader.aliases.items() if t in reader.class_nodes}
    if class_name is None:
        class_name = next((n for n in formats.class_names() if n in defined), None) or problem_class(text)
    if class_name not in defined:
        if require_model:
            raise ProblemError(_missing_class_message(class_name, reader), file=where)
        chosen: str | None = None
    else:
        chosen = class_name
    classes = {}
    for name in defined:
        info = reader.class_info(name)
        if info is not None:
            classes[name] = info
    try:
        constraints = reader.analyze_dtypes(chosen)
    except RecursionError:  # pathological nesting: the facts are still useful without dtypes
        constraints = []
    return ModuleFacts(path=p, name=label, classes=dict(sorted(classes.items(), key=lambda kv: kv[1].line)),
                       model_class=chosen, functions=dict(reader.function_lines),
                       kernels=sorted(reader.kernels.values(), key=lambda k: k.line),
                       launches=reader.launches(), dtype_constraints=constraints)


def _missing_class_message(class_name: str, reader: _Reader) -> str:
    others = sorted(reader.class_nodes.values(), key=lambda n: n.lineno)
    listing = ", ".join(f"{n.name} (line {n.lineno})" for n in others) or "none"
    message = f"no class {class_name} (classes defined: {listing})"
    if class_name == "Model" and "ModelNew" in reader.class_nodes:
        message += ("; it defines ModelNew, KernelBench's solution class, so it is a candidate/solution "
                    "file: its reference Model belongs in a paired reference file")
    elif class_name == "ModelNew" and "Model" in reader.class_nodes:
        message += "; it defines Model: load it as a KernelBench-style module instead"
    modules = [n.name for n in others if any(dotted_name(b) in NN_MODULE_BASES for b in n.bases)]
    if modules and class_name not in modules:
        message += f"; nn.Module subclasses here: {', '.join(modules)} (rename the harness class to {class_name})"
    return message


def defines_triton_kernel(source: str) -> bool:
    """Whether the module defines a ``@triton.jit`` function (statically; ``False`` when it does
    not parse)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               and any(_decorator_kind(d) == "jit" for d in node.decorator_list) for node in ast.walk(tree))
