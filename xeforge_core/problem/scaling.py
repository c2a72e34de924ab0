"""Sizes of a problem the verifier chooses itself: reduced copies of KernelBench's published
sizes, and larger copies that give every launch-grid axis several programs.

Two kinds of problem carry their sizes differently:

* with an Xe-Forge spec, a variant's ``dims`` give every shape and init value; a scaled copy
  multiplies the *size dims* (below) and is rebuilt with ``build_variant``;
* without one (KernelBench's convention), ``get_inputs()`` / ``get_init_inputs()`` read
  module-level constants (``batch_size = 4096``); a scaled copy sets those constants before
  they run (``Variant.overrides``, applied by the worker).

A *size* is an integer of at least 2 whose name does not say it is something else: kernel
sizes, strides, paddings, dilations, group counts, axes (``dim = 1`` in a softmax), epsilons,
probabilities and the like keep their value (``NOT_A_SIZE``). Everything is read statically
(``ast``): no module code runs here.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import replace
from typing import Any

from xeforge_core.worker import formats
from xeforge_core.worker.astutil import parse as parse_python
from xeforge_core.worker.lifted import LIFTED_MARKER, LIFTED_PREFIX

from .dtypes import DTYPE_SIZES, normalize_dtype
from .model import Problem, Variant, is_ci_variant

__all__ = ["NOT_A_SIZE", "size_constants", "lift_literal_sizes", "estimate_input_bytes", "reduced_module_variant", "reduced_spec_variant",
           "smaller_reduced_variant", "scaled_variant", "odd_module_variant", "REDUCED_MAX_INPUT_ELEMENTS", "size_values", "variant_with_sizes"]

#: Names (case-insensitive, matched as whole words or ``_``-separated parts) that are not tensor
#: sizes, so scaling never touches them.
#: The functions that build a spec-less problem's inputs and constructor arguments, as the
#: registered formats name them (KernelBench's ``get_inputs`` / ``get_init_inputs``).
_INPUTS, _INIT_INPUTS = formats.inputs_functions()

NOT_A_SIZE = re.compile(
    r"(^|_)(kernel|kernel_size|ksize|k_size|pool|pool_size|stride|strides|padding|pad|dilation|groups?|"
    r"num_groups|dims?|axis|axes|perm|permutation|eps|epsilon|momentum|p|prob|drop|dropout|scale|factor|alpha|beta|"
    r"gamma|negative_slope|slope|min|max|value|constant|bias|bits|seed|iters?|steps?|topk|k_top|"
    r"output_padding|ceil_mode|causal|heads_kv|window)($|_)", re.IGNORECASE)

#: The reduced default size of a KernelBench problem: its largest input holds at most this many
#: elements (1 MiB of float32). Triton's interpreter runs a 512x512x512 GEMM in about 2 s on
#: the development machine, so the default correctness runs finish in seconds.
REDUCED_MAX_INPUT_ELEMENTS = 1 << 18

#: Smallest value a scaled-down size takes (sizes already smaller keep their value).
_MIN_SCALED = 8

_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "full", "randint", "randn_like", "rand_like",
              "normal", "tensor", "arange", "randperm"}


def _is_size_name(name: str) -> bool:
    return not NOT_A_SIZE.search(name)


def _module_ints(tree: ast.Module) -> dict[str, int]:
    """Module-level integer constants: ``NAME = <int>``, also written as arithmetic on numbers
    and earlier constants (``K = 131072 * 4``); ``height, width = 32, 32`` and ``height = width =
    256`` too. Last assignment wins."""
    out: dict[str, int] = {}
    ev = _Evaluator(out)
    for stmt in tree.body:
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:  # height = width = 256 binds both
                value = stmt.value
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                    pairs += list(zip(target.elts, value.elts))
                else:
                    pairs.append((target, value))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            pairs = [(stmt.target, stmt.value)]
        for target, value in pairs:
            if not isinstance(target, ast.Name):
                continue
            number = ev.value(value)
            if number is not None and not isinstance(number, bool):
                out[target.id] = int(number)
            else:
                out.pop(target.id, None)
    return out


def _module_tuples(tree: ast.Module, ints: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """Module-level tuples of integer sizes: ``input_shape = (32768,)``, ``shape = (B, 64)``
    (elements read as ``_module_ints`` reads a value). Last assignment wins."""
    out: dict[str, tuple[int, ...]] = {}
    ev = _Evaluator(ints)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
            items = [ev.value(e) for e in value.elts] if isinstance(value, (ast.Tuple, ast.List)) else None
            if items and all(isinstance(i, int) and not isinstance(i, bool) for i in items):
                out[name] = tuple(int(i) for i in items)  # type: ignore[arg-type]
            else:
                out.pop(name, None)
    return out


def _constants(tree: ast.Module, overrides: dict[str, Any] | None = None
               ) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """The module's integer and integer-tuple constants, with ``overrides`` applied."""
    ints = _module_ints(tree)
    tuples = _module_tuples(tree, ints)
    for k, v in (overrides or {}).items():
        if isinstance(v, (list, tuple)):
            tuples[k] = tuple(int(x) for x in v)
        else:
            ints[k] = int(v)
    return ints, tuples


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}


def _names_read(fn: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _shape_names(fn: ast.FunctionDef) -> set[str]:
    """Names used inside the shape arguments of tensor factories (``torch.randn(B, dim)``)."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in _FACTORIES and not func.endswith("_like"):
                shape_args = list(node.args) + [k.value for k in node.keywords if k.arg == "size"]
                for arg in shape_args:
                    names |= _names_read(arg)
    return names


def size_constants(source: str) -> dict[str, int | tuple[int, ...]]:
    """The module-level integer constants (at least 2) that are sizes, with their published
    values: those used in a tensor shape inside ``get_inputs()`` (``torch.randn(batch_size,
    dim)``: whatever their name), and those ``get_init_inputs()`` passes whose name says they
    are a size (``out_features``, not ``kernel_size`` or ``dim``; see ``NOT_A_SIZE``); also
    tuples and lists of sizes unpacked into a shape (``torch.rand(batch_size, *input_shape)``)
    or passed to the constructor under a size's name (``layer_sizes = [16384, 16384]`` of an
    MLP, reduced with the input so that a reduced input does not meet full-size layers; not
    ``dims = [1, 2]``, the axes a module reduces over). ``{}`` when the source does not parse or
    defines neither function."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return {}
    ints, tuples = _constants(tree)
    funcs = _functions(tree)
    shape_names: set[str] = set()
    if _INPUTS in funcs:
        shape_names = _shape_names(funcs[_INPUTS])
    init_names = _names_read(funcs[_INIT_INPUTS]) if _INIT_INPUTS in funcs else set()
    chosen = shape_names | {n for n in init_names if _is_size_name(n)}
    found: dict[str, int | tuple[int, ...]] = {n: v for n, v in ints.items() if n in chosen and v >= 2}
    found.update({n: v for n, v in tuples.items()
                  if (n in shape_names or (n in init_names and _is_size_name(n))) and any(x >= 2 for x in v)})
    return found


#: Constructor keywords that name a size (``in_features``, ``channels``, ``hidden_size``): only
#: these follow a literal shape size; a number that merely equals one (``sigma_lower_bound=4``)
#: keeps its value.
_SIZE_KEYWORD = re.compile(r"(^|_)(features|channels|planes|hidden|size|dim|dims|length|len|width|height|depth|"
                           r"embed|embedding|heads|units|classes|vocab|tokens|seq|batch|nodes|points|n|num)($|_)",
                           re.IGNORECASE)


def _shape_literals(call: ast.Call) -> list[ast.Constant]:
    """The integer literals (at least 2) in the shape arguments of a tensor factory call:
    ``torch.rand([4, 4, 4, 4])``, ``torch.randn(4, 16)``, ``torch.randint(0, 10, (4, 4))``'s size
    (not its bounds), ``torch.full((4, 4), 2.0)``'s shape (not its value)."""
    func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if func not in _FACTORIES or func.endswith("_like") or func in ("tensor", "arange", "normal"):
        return []
    size = [k.value for k in call.keywords if k.arg == "size"]
    args = list(call.args)
    if func == "randint":
        args = size or args[-1:]
    elif func == "full":
        args = size or args[:1]
    else:
        args = args + size
    out: list[ast.Constant] = []
    for arg in args:
        items = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
        out += [i for i in items if isinstance(i, ast.Constant) and isinstance(i.value, int)
                and not isinstance(i.value, bool) and i.value >= 2]
    return out


def lift_literal_sizes(source: str) -> str | None:
    """``source`` with the sizes ``get_inputs()`` writes as literals made module-level constants,
    so that the verifier can reduce and scale them as it does KernelBench's ``batch_size``; ``None``
    when there is nothing to lift (the module has size constants already, or no literal sizes).

    KernelBook's problems (and the sets built from them) write their shapes inline,
    ``torch.rand([4, 4, 4, 4])``: without constants no size can change, and a kernel whose one
    program covers the whole posed input hides a wrong program id, grid or mask. Each distinct
    value becomes one constant (``SIZE_4 = 4``: equal dims stay equal, as broadcasting and the
    module's own sizes need), also where ``get_init_inputs()`` passes that value under a size's
    name (``{'in_features': 4}``); a literal 1, a bound of ``randint`` and a fill value are not
    sizes. The constants are appended at the end of the module and each literal is replaced in
    place, so every line keeps its number."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    funcs = _functions(tree)
    if _INPUTS not in funcs or size_constants(source):
        return None
    literals = [c for node in ast.walk(funcs[_INPUTS]) if isinstance(node, ast.Call) for c in _shape_literals(node)]
    if not literals:
        return None
    values = {c.value for c in literals}
    if _INIT_INPUTS in funcs:
        for node in ast.walk(funcs[_INIT_INPUTS]):
            if isinstance(node, ast.Dict):
                literals += [v for k, v in zip(node.keys, node.values)
                             if isinstance(k, ast.Constant) and isinstance(k.value, str)
                             and _SIZE_KEYWORD.search(k.value) and _is_size_name(k.value)
                             and isinstance(v, ast.Constant) and v.value in values and not isinstance(v.value, bool)]
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(funcs)
    names = {v: next(f"{LIFTED_PREFIX}{v}{'_' * i}" for i in range(8) if f"{LIFTED_PREFIX}{v}{'_' * i}" not in bound)
             for v in sorted(values)}
    lines = source.splitlines(keepends=True)
    for c in sorted(literals, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        if c.end_lineno != c.lineno or c.end_col_offset is None:
            continue
        line = lines[c.lineno - 1]
        lines[c.lineno - 1] = line[:c.col_offset] + names[c.value] + line[c.end_col_offset:]
    text = "".join(lines)
    if not text.endswith("\n"):
        text += "\n"
    return text + "\n" + LIFTED_MARKER + "\n" + "".join(
        f"{name} = {value}\n" for value, name in names.items())


class _Evaluator:
    """Evaluates simple integer expressions over module constants (``batch_size * 2``)."""

    def __init__(self, env: dict[str, int], tuples: dict[str, tuple[int, ...]] | None = None) -> None:
        self.env = env
        self.tuples = tuples or {}
        #: shapes of the tensors ``get_inputs()`` binds to local names (``x = torch.rand(B, N)``)
        self.locals: dict[str, list[int]] = {}

    def dims(self, nodes: list[ast.expr]) -> list[int] | None:
        """Integer values of shape arguments, ``*name`` of a tuple constant unpacked."""
        out: list[int] = []
        for node in nodes:
            if isinstance(node, ast.Starred) and isinstance(node.value, ast.Name) and node.value.id in self.tuples:
                out.extend(self.tuples[node.value.id])
                continue
            v = self.value(node)
            if v is None:
                return None
            out.append(int(v))
        return out

    def value(self, node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left), self.value(node.right)
            if a is None or b is None:
                return None
            ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.FloorDiv: lambda: a // b if b else None, ast.Pow: lambda: a ** b if b < 64 else None}
            fn = ops.get(type(node.op))
            return fn() if fn else None
        return None

    def shape(self, call: ast.Call) -> list[int] | None:
        args = list(call.args)
        func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if func == "randint":  # randint(low, high, size) or randint(high, size)
            size = next((k.value for k in call.keywords if k.arg == "size"), None)
            if size is None and args:
                size = args[-1]
            args = [size] if size is not None else []
        if func in ("full",) and args:
            args = args[:1]
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
            if not args[0].elts:
                return []  # torch.rand(()): a 0-d tensor (KernelBench's losses draw a scale so)
            args = list(args[0].elts)
        if len(args) == 1 and isinstance(args[0], ast.Name) and args[0].id in self.tuples:
            return list(self.tuples[args[0].id])  # torch.randn(shape)
        if len(args) == 1 and isinstance(args[0], ast.Attribute) and args[0].attr == "shape" \
                and isinstance(args[0].value, ast.Name) and args[0].value.id in self.locals:
            return list(self.locals[args[0].value.id])  # torch.randint(0, 2, x.shape): a mask like x
        dims = self.dims(args)
        return dims or None


def _dtype_bytes(call: ast.Call) -> int:
    for kw in call.keywords:
        if kw.arg == "dtype":
            name = kw.value.attr if isinstance(kw.value, ast.Attribute) else getattr(kw.value, "id", "")
            canonical = normalize_dtype(name)
            if canonical:
                return DTYPE_SIZES[canonical]
    func = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    return 8 if func == "randint" else 4


def estimate_input_bytes(source: str, overrides: dict[str, Any] | None = None) -> tuple[int, int] | None:
    """``(largest input elements, total input bytes)`` of the tensors ``get_inputs()`` creates
    with ``torch.randn(...)``-style factories, with ``overrides`` applied to the module's
    constants; ``None`` when a shape cannot be read statically (the sizes are then left as
    published)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    fn = _functions(tree).get(_INPUTS)
    if fn is None:
        return None
    ev = _Evaluator(*_constants(tree, overrides))
    for stmt in fn.body:  # local tensors first, so a later factory may take their shape
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call):
            name = stmt.value.func.attr if isinstance(stmt.value.func, ast.Attribute) else ""
            local = ev.shape(stmt.value) if name in _FACTORIES and not name.endswith("_like") else None
            if local is not None:
                ev.locals[stmt.targets[0].id] = local
    largest, total, found = 0, 0, False
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in _FACTORIES or name.endswith("_like") or name in ("tensor", "arange", "randperm"):
            continue
        shape = ev.shape(node)
        if shape is None:
            return None
        n = math.prod(shape)
        largest = max(largest, n)
        total += n * _dtype_bytes(node)
        found = True
    return (largest, total) if found else None


def _scale_value(value: int | tuple[int, ...], factor: float) -> Any:
    """``value`` (a size, or a tuple of sizes) scaled by ``factor``; scaled down, no size goes
    below ``_MIN_SCALED`` (sizes already smaller keep their value). Values below 2 are not sizes
    (a tuple's 1s: a parameter shaped ``(out_channels, 1, 1, 1)`` broadcasts over them) and keep
    their value either way."""
    if isinstance(value, (tuple, list)):
        return tuple(_scale_value(int(v), factor) for v in value)
    if value < 2:
        return value
    if factor >= 1:
        return int(value * factor)
    if value <= _MIN_SCALED:
        return value
    return max(_MIN_SCALED, int(value * factor))


def reduced_module_variant(problem: Problem, max_input_elements: int = REDUCED_MAX_INPUT_ELEMENTS) -> Variant | None:
    """``module-small``: the problem's published sizes divided by the smallest power of two
    that brings its largest input to at most ``max_input_elements`` elements, or ``None``
    (the problem has a spec, its inputs module cannot be read statically, or it is already
    that small)."""
    inputs = problem.inputs
    if problem.spec is not None or inputs is None:
        return None
    consts = size_constants(inputs.source)
    published = estimate_input_bytes(inputs.source)
    if not consts or published is None or published[0] <= max_input_elements:
        return None
    factor = 1.0
    overrides: dict[str, Any] = {}
    for _ in range(24):
        factor /= 2
        overrides = {n: _scale_value(v, factor) for n, v in consts.items()}
        got = estimate_input_bytes(inputs.source, overrides)
        if got is None:
            return None
        if got[0] <= max_input_elements:
            break
    shown = ", ".join(f"{n}={consts[n]}->{v}" for n, v in overrides.items() if v != consts[n])
    return Variant(name="module-small", params=[], dims={}, overrides=overrides,
                   derived=f"the published sizes reduced for correctness ({shown}); "
                           "`--variant module` checks the published sizes")


def reduced_spec_variant(problem: Problem, max_input_elements: int = REDUCED_MAX_INPUT_ELEMENTS) -> Variant | None:
    """``<default>-small``: for a spec with no ``ci`` variant, its default (benchmark) variant
    with the size dims divided by the smallest power of two that brings its largest input to at
    most ``max_input_elements`` elements; ``None`` when the spec has a ``ci`` variant, the
    default variant is already that small, or it has no size dims to reduce."""
    from .spec import build_variant

    spec = problem.spec
    if spec is None or not spec.variants or any(is_ci_variant(n) for n in spec.variants):
        return None
    base = problem.variant(problem.default_variant_name())
    largest = variant_input_elements(problem, base)
    names = _spec_size_dims(problem, base)
    if largest is None or largest <= max_input_elements or not names:
        return None
    factor = 1.0
    for _ in range(24):
        factor /= 2
        dims = {**base.dims, **{d: _scale_value(int(base.dims[d]), factor) for d in names}}
        small = build_variant(f"{base.name}-small", params=list(base.params), dims=dims, inputs=spec.inputs,
                              inits=spec.inits, dtype=base.dtype, flop_formula=base.flop_formula,
                              rtol=base.rtol, atol=base.atol)
        if (variant_input_elements(problem, small) or 0) <= max_input_elements:
            break
    shown = ", ".join(f"{d}={base.dims[d]}->{small.dims[d]}" for d in names if small.dims[d] != base.dims[d])
    return replace(small, derived=f"the spec has no ci variant: {base.name} reduced for correctness ({shown})")


def smaller_reduced_variant(problem: Problem, variant: Variant, ratio: float) -> Variant | None:
    """The problem's reduced variant (``module-small`` or ``<default>-small``) rebuilt with its
    input bound divided by ``ratio`` (rounded up to a power of two, at least 2) from the inputs
    of ``variant``: the reduced variant itself, or the published ``module`` of a problem whose
    inputs were small enough to need none. ``None`` for any other variant, or when the smaller
    bound changes no size. Used where the inputs' size does not bound the
    work (a product of two thin matrices has a large output): the caller measures the work at
    ``variant`` and asks for a variant ``ratio`` times smaller."""
    published = variant.name == "module" and problem.spec is None and "module-small" not in problem.module_variants
    if variant.name not in problem.module_variants and not published:
        return None
    now = variant_input_elements(problem, variant)
    if not now:
        return None
    bound = max(1, now >> max(1, math.ceil(math.log2(max(ratio, 2.0)))))
    smaller = reduced_module_variant(problem, bound) or reduced_spec_variant(problem, bound)
    if smaller is None or (smaller.name != variant.name and not published) or \
            (smaller.overrides == variant.overrides and smaller.dims == variant.dims):
        return None
    return smaller


def _spec_size_dims(problem: Problem, variant: Variant) -> list[str]:
    spec = problem.spec
    assert spec is not None
    used: set[str] = set()
    for pname in variant.params:
        inp = spec.inputs.get(pname)
        if inp is not None:
            used |= {d for d in inp.shape if isinstance(d, str)}
    used |= {i.value for i in spec.inits if isinstance(i.value, str)}
    return [d for d, v in variant.dims.items()
            if d in used and isinstance(v, int) and not isinstance(v, bool) and v >= 2 and _is_size_name(d)]


def scaled_variant(problem: Problem, variant: Variant, factor: int, name: str, why: str = "") -> Variant | None:
    """A copy of ``variant`` with every size multiplied by ``factor`` (an integer >= 2):
    the spec's size dims, or the module's size constants through ``overrides``. ``None`` when
    nothing can be scaled."""
    from .spec import build_variant

    if problem.spec is not None:
        dims = dict(variant.dims)
        names = _spec_size_dims(problem, variant)
        if not names:
            return None
        for d in names:
            dims[d] = int(dims[d]) * factor
        spec = problem.spec
        built = build_variant(name, params=list(variant.params), dims=dims, inputs=spec.inputs, inits=spec.inits,
                              dtype=variant.dtype, flop_formula=variant.flop_formula, rtol=variant.rtol,
                              atol=variant.atol)
        return replace(built, derived=why)
    if problem.inputs is None:
        return None
    consts = size_constants(problem.inputs.source)
    if not consts:
        return None
    base = {**consts, **variant.overrides}
    overrides = {n: _scale_value(v, factor) for n, v in base.items()}
    return Variant(name=name, params=[], dims={}, overrides=overrides, rtol=variant.rtol, atol=variant.atol,
                   derived=why)


def size_values(problem: Problem, variant: Variant) -> dict[str, int]:
    """The sizes of ``variant`` one by one: the spec's size dims, or the inputs module's size
    constants with the variant's overrides applied, a tuple constant's elements named
    ``name[i]`` (``{"batch_size": 16, "input_shape[0]": 1024}``). ``{}`` when there are none."""
    if problem.spec is not None:
        return {d: int(variant.dims[d]) for d in _spec_size_dims(problem, variant)}
    if problem.inputs is None:
        return {}
    out: dict[str, int] = {}
    for name, value in {**size_constants(problem.inputs.source), **variant.overrides}.items():
        if isinstance(value, (tuple, list)):
            out.update({f"{name}[{i}]": int(v) for i, v in enumerate(value) if int(v) >= 2})
        elif isinstance(value, int) and value >= 2:
            out[name] = int(value)
    return out


def variant_with_sizes(problem: Problem, variant: Variant, sizes: dict[str, int], name: str,
                       why: str = "") -> Variant:
    """A copy of ``variant`` named ``name`` with the sizes in ``sizes`` (names as
    ``size_values`` gives them) set, ``derived`` = ``why``: a spec variant rebuilt from its dims
    (shapes, bytes, flop and init values recomputed), or the inputs module's constants as
    overrides. Raises ``ProblemError`` when a spec variant cannot be built at those dims."""
    from .spec import build_variant

    if problem.spec is not None:
        spec = problem.spec
        built = build_variant(name, params=list(variant.params), dims={**variant.dims, **sizes}, inputs=spec.inputs,
                              inits=spec.inits, dtype=variant.dtype, flop_formula=variant.flop_formula,
                              rtol=variant.rtol, atol=variant.atol)
        return replace(built, derived=why)
    consts = size_constants(problem.inputs.source) if problem.inputs is not None else {}
    overrides: dict[str, Any] = {**consts, **variant.overrides}
    for key, value in sizes.items():
        m = re.fullmatch(r"(\w+)\[(\d+)\]", key)
        if m and isinstance(overrides.get(m.group(1)), (tuple, list)):
            items = list(overrides[m.group(1)])
            items[int(m.group(2))] = int(value)
            overrides[m.group(1)] = tuple(items)
        else:
            overrides[key] = int(value)
    return Variant(name=name, params=[], dims={}, overrides=overrides, rtol=variant.rtol, atol=variant.atol,
                   derived=why)


def variant_input_elements(problem: Problem, variant: Variant) -> int | None:
    """Elements of the largest input of ``variant`` (from its shapes, or estimated from the
    inputs module), or ``None`` when unknown."""
    if variant.shapes:
        return max((math.prod(s) for s in variant.shapes.values()), default=0)
    if problem.inputs is not None:
        got = estimate_input_bytes(problem.inputs.source, variant.overrides or None)
        return got[0] if got else None
    return None


def describe_overrides(overrides: dict[str, Any]) -> str:
    """``batch_size=16, dim=512`` for messages."""
    return ", ".join(f"{k}={v}" for k, v in overrides.items())


def odd_module_variant(problem: Problem, variant: Variant) -> Variant | None:
    """``<name>-odd``: ``variant`` with every even size that only shapes the inputs (used in
    ``get_inputs()`` shapes, not passed to ``get_init_inputs()``, so the model is unchanged)
    made odd (``v - 1``), so a tail that is not a multiple of any block is checked; ``None``
    when the problem has a spec or no such size."""
    if problem.spec is not None or problem.inputs is None:
        return None
    try:
        tree = parse_python(problem.inputs.source)
    except (SyntaxError, ValueError):
        return None
    funcs = _functions(tree)
    if _INPUTS not in funcs:
        return None
    init_names = _names_read(funcs[_INIT_INPUTS]) if _INIT_INPUTS in funcs else set()
    shape_only = _shape_names(funcs[_INPUTS]) - init_names
    base = {**size_constants(problem.inputs.source), **variant.overrides}
    overrides = dict(variant.overrides)
    moved = False
    def odd(v: int) -> int:
        return v - 1 if v >= 4 and v % 2 == 0 else v

    for name in shape_only:
        value = base.get(name)
        if isinstance(value, int) and odd(value) != value:
            overrides[name] = odd(value)
            moved = True
        elif isinstance(value, (tuple, list)) and any(odd(int(v)) != int(v) for v in value):
            overrides[name] = tuple(odd(int(v)) for v in value)
            moved = True
    if not moved:
        return None
    return Variant(name=f"{variant.name}-odd", params=[], dims={}, overrides=overrides, rtol=variant.rtol,
                   atol=variant.atol, derived="odd sizes: every even input-only size made odd, so partial blocks "
                                             "are checked")
