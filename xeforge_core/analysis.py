"""Static analysis of a Triton kernel module: facts from the AST, knowledge-base lints, issues
mapped to stages, and a stage plan.

Nothing is executed: the source is parsed with ``ast`` only. A syntax error gives an
``Analysis`` holding one ``error`` issue that names the line, never an exception.

Public API::

    a = analyze(source, target="xpu", problem=None)
    a.facts          # Facts: kernels, launches (grids), constexprs, loops, tl.dot operands,
                     # loads/stores, float64 use, block pointers/descriptors, autotune,
                     # device strings and sync calls, forward-time weight transposes
    a.issues         # list[Issue] (rule id, stage, severity, message, line, fix)
    a.plan           # stage ids with work, canonical order
    plan_stages(a, add=("autotuning",), skip=("fusion",), order=None)
    lint(source, target) -> list[verdict.Finding]   # rule ids prefixed "kb:"
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from xeforge_core import lints
from xeforge_core.knowledge import KnowledgeBase, installed_triton_pointer_api, load_knowledge
from xeforge_core.lints import clear_walk_cache, walk
from xeforge_core.problem.module import triton_decorator_kind
from xeforge_core.target import Target
from xeforge_core.verdict import Finding
from xeforge_core.vocab.stages import STAGE_IDS
from xeforge_core.worker.astutil import dotted_name
from xeforge_core.worker.astutil import parse as parse_python

if TYPE_CHECKING:
    from xeforge_core.problem import Problem

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


# --------------------------------------------------------------------------------------
# facts
# --------------------------------------------------------------------------------------


@dataclass
class ParamFact:
    """One kernel parameter: ``constexpr`` when annotated ``tl.constexpr``; ``default`` is the
    default's source text (``None`` when there is none)."""

    name: str
    constexpr: bool
    default: str | None
    line: int


@dataclass
class ConfigFact:
    """One ``triton.Config(...)`` call. ``kwargs`` maps each meta-parameter to its possible
    literal values (several when the call sits in a comprehension over literal lists; empty
    list when unknown); ``num_warps``/``num_stages`` likewise."""

    line: int
    kwargs: dict[str, list[Any]]
    num_warps: list[Any]
    num_stages: list[Any]


@dataclass
class AutotuneFact:
    """``@triton.autotune`` on a kernel: its ``key`` names and the configs it was given."""

    line: int
    keys: list[str]
    configs: list[ConfigFact]

    @property
    def config_names(self) -> set[str]:
        """Every meta-parameter name any of the configs sets."""
        return {k for c in self.configs for k in c.kwargs}


@dataclass
class OperandFact:
    """One ``tl.dot`` operand: its source text and the dtype it is cast to right before the
    dot (``float32`` for ``x.to(tl.float32)``, directly or through the variable's last
    assignment), else ``None``."""

    text: str
    cast: str | None


@dataclass
class DotFact:
    """One ``tl.dot`` call: 1-based ``line``, its two operands, whether the accumulator is passed
    as the third argument (``has_acc``), whether it is written ``acc += tl.dot(...)``
    (``augassign``), and whether it sits inside a loop."""
    line: int
    operands: list[OperandFact]
    has_acc: bool
    augassign: bool
    in_loop: bool


@dataclass
class AccessFact:
    """A load or store: ``kind`` is ``pointer``, ``block_ptr`` or ``descriptor``."""

    line: int
    op: str
    kind: str
    masked: bool
    boundary_check: str | None = None


@dataclass
class LoopFact:
    """A loop in a kernel: 1-based ``line``, ``kind`` (``range``, ``tl.range``,
    ``tl.static_range``, ``while``, or the iterator's call name) and the loop variable."""
    line: int
    kind: str  # range | tl.range | tl.static_range | while
    var: str | None


@dataclass
class KernelFact:
    """One ``@triton.jit`` function."""

    name: str
    line: int
    end_line: int
    params: list[ParamFact]
    autotune: AutotuneFact | None = None
    heuristics: bool = False
    program_id_axes: list[int] = field(default_factory=list)
    loops: list[LoopFact] = field(default_factory=list)
    dots: list[DotFact] = field(default_factory=list)
    accesses: list[AccessFact] = field(default_factory=list)
    float64_lines: list[int] = field(default_factory=list)
    block_ptr_lines: list[int] = field(default_factory=list)
    descriptor_lines: list[int] = field(default_factory=list)
    exp_lines: list[int] = field(default_factory=list)
    arange_sizes: list[tuple[Any, int]] = field(default_factory=list)

    @property
    def constexprs(self) -> list[str]:
        """Names of the ``tl.constexpr`` parameters, in signature order."""
        return [p.name for p in self.params if p.constexpr]

    @property
    def is_gemm_like(self) -> bool:
        """True when the kernel calls ``tl.dot``."""
        return bool(self.dots)


@dataclass
class LaunchFact:
    """A launch ``kernel[grid](...)``. ``grid_kind``: ``tuple``, ``lambda``, ``name`` (could
    not resolve), ``call`` or ``other``; ``grid_dims`` the tuple length when known;
    ``grid_uses_meta`` whether a lambda grid reads its META argument. ``constexprs`` maps the
    kernel's constexpr parameters to the resolved literal given at launch (``None`` when the
    value is not a literal)."""

    kernel: str
    line: int
    function: str | None
    grid: str
    grid_kind: str
    grid_dims: int | None
    grid_uses_meta: bool
    kwargs: dict[str, str]
    constexprs: dict[str, Any]
    num_warps: Any = None
    num_stages: Any = None
    grf_mode: Any = None
    args: list[str] = field(default_factory=list)
    known_kernel: bool = True


@dataclass
class DeviceRef:
    """A hard-coded device reference: ``kind`` is ``string`` (a "xpu"/"cuda" literal),
    ``method`` (``.xpu()``/``.cuda()``), ``api`` (``torch.xpu.*``/``torch.cuda.*``) or ``sync``."""

    line: int
    kind: str
    device: str
    text: str


@dataclass
class Facts:
    """Everything ``analyze`` learned from the AST. Lines are 1-based."""

    kernels: list[KernelFact] = field(default_factory=list)
    launches: list[LaunchFact] = field(default_factory=list)
    configs: list[ConfigFact] = field(default_factory=list)
    device_refs: list[DeviceRef] = field(default_factory=list)
    weight_transposes: list[tuple[int, str]] = field(default_factory=list)
    item_calls: list[int] = field(default_factory=list)
    float64_host_lines: list[int] = field(default_factory=list)
    forward_functions: list[str] = field(default_factory=list)
    has_model: bool = False
    unattached_autotune_lines: list[int] = field(default_factory=list)

    def kernel(self, name: str) -> KernelFact | None:
        """The kernel called ``name``, or ``None``."""
        return next((k for k in self.kernels if k.name == name), None)

    @property
    def sync_calls(self) -> list[DeviceRef]:
        """The ``torch.xpu.synchronize()`` / ``torch.cuda.synchronize()`` calls."""
        return [d for d in self.device_refs if d.kind == "sync"]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (dataclasses as dicts)."""
        return asdict(self)



# --------------------------------------------------------------------------------------
# AST helpers
# --------------------------------------------------------------------------------------


def _is_jit(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    return triton_decorator_kind(dotted_name(target)) == "jit"


def _is_autotune(dec: ast.AST) -> bool:
    return isinstance(dec, ast.Call) and triton_decorator_kind(dotted_name(dec.func)) == "autotune"


def _is_tl_dtype(node: ast.AST, names: Iterable[str]) -> bool:
    d = dotted_name(node)
    return any(d in (f"tl.{n}", f"triton.language.{n}", n) for n in names)


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


class _Source:
    """The module text split once into lines, for fast source segments."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)

    def seg(self, node: ast.AST) -> str:
        """The source text of ``node`` (columns are UTF-8 byte offsets, as ``ast`` gives them)."""
        try:
            l0, l1 = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined, operator]
            c0, c1 = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return ast.unparse(node)
        if l1 is None or c1 is None or l1 >= len(self.lines):
            return ast.unparse(node)
        if l0 == l1:
            return self.lines[l0].encode()[c0:c1].decode(errors="replace")
        first = self.lines[l0].encode()[c0:].decode(errors="replace")
        last = self.lines[l1].encode()[:c1].decode(errors="replace")
        return first + "".join(self.lines[l0 + 1:l1]) + last



def _seg(source: str | _Source, node: ast.AST) -> str:
    if isinstance(source, _Source):
        return source.seg(node)
    return _Source(source).seg(node)


class _Env:
    """Assignments per scope: name -> [(line, value node)], tuple unpacking element-wise."""

    def __init__(self, body: Sequence[ast.stmt]) -> None:
        self.assigns: dict[str, list[tuple[int, ast.AST]]] = {}
        for node in body:
            for sub in walk(node):
                if isinstance(sub, ast.Assign):
                    for tgt in sub.targets:
                        self._bind(tgt, sub.value, sub.lineno)
                elif isinstance(sub, ast.AnnAssign) and sub.value is not None:
                    self._bind(sub.target, sub.value, sub.lineno)

    def _bind(self, tgt: ast.AST, value: ast.AST, line: int) -> None:
        if isinstance(tgt, ast.Name):
            self.assigns.setdefault(tgt.id, []).append((line, value))
        elif (isinstance(tgt, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
              and len(value.elts) == len(tgt.elts)):
            for t, v in zip(tgt.elts, value.elts):
                self._bind(t, v, line)

    def last(self, name: str, before: int | None = None) -> ast.AST | None:
        """The value last assigned to ``name`` on a line before ``before`` (any line if ``None``)."""
        vals = [v for (ln, v) in self.assigns.get(name, []) if before is None or ln < before]
        return vals[-1] if vals else None


def _resolve_literal(node: ast.AST, envs: Sequence[_Env], line: int, depth: int = 0) -> Any:
    """A literal value for ``node``, following simple name assignments (function scope, then
    module scope). ``None`` when not a literal."""
    if depth > 5:
        return None
    val = _literal(node)
    if val is not None:
        return val
    if isinstance(node, ast.Name):
        for env in envs:
            got = env.last(node.id, before=line)
            if got is not None:
                return _resolve_literal(got, envs, line, depth + 1)
    return None


def _comprehension_env(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> dict[str, list[Any]]:
    """Loop variables of enclosing comprehensions bound to literal lists."""
    env: dict[str, list[Any]] = {}
    cur = parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            for gen in cur.generators:
                vals = _literal(gen.iter)
                if isinstance(vals, (list, tuple)):
                    if isinstance(gen.target, ast.Name):
                        env[gen.target.id] = list(vals)
                    elif isinstance(gen.target, ast.Tuple):
                        for i, elt in enumerate(gen.target.elts):
                            if isinstance(elt, ast.Name):
                                env[elt.id] = [v[i] for v in vals if isinstance(v, (list, tuple)) and len(v) > i]
        cur = parents.get(cur)
    return env


def _values(node: ast.AST | None, cenv: dict[str, list[Any]]) -> list[Any]:
    if node is None:
        return []
    lit = _literal(node)
    if lit is not None:
        return [lit]
    if isinstance(node, ast.Name) and node.id in cenv:
        return list(cenv[node.id])
    return []


def _config_fact(call: ast.Call, parents: dict[ast.AST, ast.AST]) -> ConfigFact:
    cenv = _comprehension_env(call, parents)
    kwargs: dict[str, list[Any]] = {}
    first = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "kwargs"), None)
    if isinstance(first, ast.Dict):
        for k, v in zip(first.keys, first.values):
            key = _literal(k)
            if isinstance(key, str):
                kwargs[key] = _values(v, cenv)
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    return ConfigFact(line=call.lineno, kwargs=kwargs, num_warps=_values(kw.get("num_warps"), cenv),
                      num_stages=_values(kw.get("num_stages"), cenv))


def _is_config_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and dotted_name(node.func) in ("triton.Config", "Config")


# --------------------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------------------


class _Extractor:
    def __init__(self, source: str, tree: ast.Module) -> None:
        self.source = _Source(source)
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.module_env = _Env(tree.body)
        self.functions: dict[str, ast.FunctionDef] = {}
        self.methods: dict[str, ast.FunctionDef] = {}
        self.facts = Facts()

    # -- top level ----------------------------------------------------------------------
    def run(self) -> Facts:
        """Extract every fact of the module (see ``Facts``)."""
        f = self.facts
        f.configs = [_config_fact(n, self.parents) for n in walk(self.tree) if _is_config_call(n)]
        kernel_nodes: list[ast.FunctionDef] = []
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                if any(_is_jit(d) for d in node.decorator_list):
                    kernel_nodes.append(node)
                else:
                    self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                if node.name in ("Model", "ModelNew"):
                    f.has_model = True
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        self.methods[f"{node.name}.{item.name}"] = item
        for node in walk(self.tree):
            if isinstance(node, ast.Call) and _is_autotune(node):
                parent = self.parents.get(node)
                if not (isinstance(parent, ast.FunctionDef) and node in parent.decorator_list):
                    f.unattached_autotune_lines.append(node.lineno)
        for node in kernel_nodes:
            f.kernels.append(self._kernel(node))
        kernel_names = {k.name for k in f.kernels}
        self._forward_functions()
        for scope_name, fn in list(self.functions.items()) + list(self.methods.items()):
            self._host_function(scope_name, fn, kernel_names)
        self._module_level_device_refs()
        f.launches.sort(key=lambda lf: lf.line)
        f.device_refs.sort(key=lambda d: d.line)
        return f

    def _forward_functions(self) -> None:
        """Functions reachable from any ``forward`` method (by simple name or ``self.x``)."""
        todo = [name for name in self.methods if name.endswith(".forward")]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            fn = self.methods.get(name) or self.functions.get(name)
            if fn is None:
                continue
            cls = name.split(".")[0] if "." in name else None
            for sub in walk(fn):
                if isinstance(sub, ast.Call):
                    if isinstance(sub.func, ast.Name) and sub.func.id in self.functions:
                        todo.append(sub.func.id)
                    elif (isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name)
                          and sub.func.value.id == "self" and cls):
                        todo.append(f"{cls}.{sub.func.attr}")
        self.facts.forward_functions = sorted(seen)

    # -- kernels ------------------------------------------------------------------------
    def _kernel(self, node: ast.FunctionDef) -> KernelFact:
        args = node.args
        params: list[ParamFact] = []
        positional = args.posonlyargs + args.args
        defaults: list[ast.AST | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        for a, d in list(zip(positional, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults)):
            constexpr = a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
            params.append(ParamFact(a.arg, constexpr, _seg(self.source, d) if d is not None else None, a.lineno))
        k = KernelFact(name=node.name, line=node.lineno, end_line=node.end_lineno or node.lineno, params=params)
        for dec in node.decorator_list:
            if _is_autotune(dec):
                k.autotune = self._autotune(dec)
            elif isinstance(dec, ast.Call) and dotted_name(dec.func) in ("triton.heuristics", "heuristics"):
                k.heuristics = True
        env = _Env(node.body)
        loop_nodes: list[ast.AST] = []
        for sub in walk(node):
            if isinstance(sub, ast.For):
                it = sub.iter
                kind = dotted_name(it.func) if isinstance(it, ast.Call) else "other"
                kind = {"tl.range": "tl.range", "tl.static_range": "tl.static_range", "range": "range"}.get(kind, kind)
                var = sub.target.id if isinstance(sub.target, ast.Name) else None
                k.loops.append(LoopFact(sub.lineno, kind, var))
                loop_nodes.append(sub)
            elif isinstance(sub, ast.While):
                k.loops.append(LoopFact(sub.lineno, "while", None))
                loop_nodes.append(sub)
        in_loop_ids = {id(n) for loop in loop_nodes for n in walk(loop) if n is not loop}
        for sub in walk(node):
            if isinstance(sub, ast.Call):
                name = dotted_name(sub.func)
                if name in ("tl.program_id", "triton.language.program_id"):
                    axis = _literal(sub.args[0]) if sub.args else _literal(
                        next((kw.value for kw in sub.keywords if kw.arg == "axis"), None))
                    if isinstance(axis, int) and axis not in k.program_id_axes:
                        k.program_id_axes.append(axis)
                elif name in ("tl.dot", "triton.language.dot"):
                    k.dots.append(self._dot(sub, env, id(sub) in in_loop_ids))
                elif name in ("tl.make_block_ptr", "triton.language.make_block_ptr"):
                    k.block_ptr_lines.append(sub.lineno)
                elif name in ("tl.make_tensor_descriptor", "triton.language.make_tensor_descriptor"):
                    k.descriptor_lines.append(sub.lineno)
                elif name in ("tl.exp", "tl.math.exp", "triton.language.exp"):
                    k.exp_lines.append(sub.lineno)
                elif name in ("tl.arange", "triton.language.arange") and len(sub.args) == 2:
                    lo, hi = _literal(sub.args[0]), _literal(sub.args[1])
                    if isinstance(lo, int) and isinstance(hi, int):
                        k.arange_sizes.append((hi - lo, sub.lineno))
                elif name in ("tl.load", "tl.store", "triton.language.load", "triton.language.store"):
                    k.accesses.append(self._access(sub, name.rsplit(".", 1)[-1], env, k))
                elif isinstance(sub.func, ast.Attribute) and sub.func.attr in ("load", "store") and \
                        dotted_name(sub.func.value) not in ("tl", "triton.language"):
                    k.accesses.append(AccessFact(sub.lineno, sub.func.attr, "descriptor", False))
            if _is_tl_dtype(sub, ("float64", "fp64")) and isinstance(sub, ast.Attribute):
                k.float64_lines.append(sub.lineno)
        # descriptor method calls on non-descriptors (e.g. some_obj.load) are rare in kernels;
        # keep only those whose receiver was assigned from make_tensor_descriptor or is a param.
        desc_names = {n for n, vals in env.assigns.items()
                      if any(isinstance(v, ast.Call) and "make_tensor_descriptor" in dotted_name(v.func) for _, v in vals)}
        param_names = {p.name for p in params}
        k.accesses = [a for a in k.accesses if a.kind != "descriptor" or self._desc_ok(node, a, desc_names | param_names)]
        return k

    def _desc_ok(self, node: ast.FunctionDef, a: AccessFact, names: set[str]) -> bool:
        for sub in walk(node):
            if (isinstance(sub, ast.Call) and sub.lineno == a.line and isinstance(sub.func, ast.Attribute)
                    and sub.func.attr == a.op):
                base = sub.func.value
                return isinstance(base, ast.Name) and base.id in names
        return False

    def _autotune(self, dec: ast.Call) -> AutotuneFact:
        kw = {k.arg: k.value for k in dec.keywords if k.arg}
        keys_node = kw.get("key") or (dec.args[1] if len(dec.args) > 1 else None)
        keys = _literal(keys_node) if keys_node is not None else []
        configs_node = kw.get("configs") or (dec.args[0] if dec.args else None)
        return AutotuneFact(line=dec.lineno, keys=list(keys) if isinstance(keys, (list, tuple)) else [],
                            configs=self._configs_of(configs_node))

    def _configs_of(self, node: ast.AST | None) -> list[ConfigFact]:
        if node is None:
            return []
        scope: ast.AST | None = node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            scope = self.functions.get(node.func.id) or next(
                (n for n in self.tree.body if isinstance(n, ast.FunctionDef) and n.name == node.func.id), None)
        elif isinstance(node, ast.Name):
            scope = self.module_env.last(node.id)
        if scope is None:
            return list(self.facts.configs)
        calls = [n for n in walk(scope) if _is_config_call(n)]
        return [_config_fact(c, self.parents) for c in calls]

    def _dot(self, call: ast.Call, env: _Env, in_loop: bool) -> DotFact:
        ops = []
        for arg in call.args[:2]:
            ops.append(OperandFact(_seg(self.source, arg), self._cast_of(arg, env, call.lineno)))
        has_acc = len(call.args) >= 3 or any(k.arg in ("acc", "c") for k in call.keywords)
        parent = self.parents.get(call)
        aug = isinstance(parent, ast.AugAssign) and isinstance(parent.op, ast.Add)
        return DotFact(call.lineno, ops, has_acc, aug, in_loop)

    def _cast_of(self, node: ast.AST, env: _Env, line: int, depth: int = 0) -> str | None:
        if depth > 3:
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to" and node.args:
            d = dotted_name(node.args[0])
            return d.split(".")[-1] if d else None
        if isinstance(node, ast.Name):
            val = env.last(node.id, before=line + 1)
            if val is not None:
                return self._cast_of(val, env, line, depth + 1)
        return None

    def _access(self, call: ast.Call, op: str, env: _Env, k: KernelFact) -> AccessFact:
        kw = {x.arg: x.value for x in call.keywords if x.arg}
        ptr = call.args[0] if call.args else kw.get("pointer")
        kind = "pointer"
        if isinstance(ptr, ast.Name):
            val = env.last(ptr.id)
            if isinstance(val, ast.Call) and "make_block_ptr" in dotted_name(val.func) or isinstance(val, ast.Call) and dotted_name(val.func) in ("tl.advance", "triton.language.advance"):
                kind = "block_ptr"
        elif isinstance(ptr, ast.Call) and "make_block_ptr" in dotted_name(ptr.func):
            kind = "block_ptr"
        bc = kw.get("boundary_check")
        if bc is not None:
            kind = "block_ptr"
        position = 2 if op.endswith("store") else 1  # tl.load(pointer, mask), tl.store(pointer, value, mask)
        mask = kw.get("mask", call.args[position] if len(call.args) > position else None)
        masked = mask is not None and not (isinstance(mask, ast.Constant) and mask.value is None)
        return AccessFact(call.lineno, op, kind, masked, _seg(self.source, bc) if bc is not None else None)

    # -- host code ----------------------------------------------------------------------
    def _host_function(self, scope_name: str, fn: ast.FunctionDef, kernel_names: set[str]) -> None:
        f = self.facts
        env = _Env(fn.body)
        envs = [env, self.module_env]
        in_forward = scope_name in f.forward_functions
        for sub in walk(fn):
            if isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Subscript):
                    self._launch(sub, scope_name, envs, kernel_names)
                if in_forward:
                    self._forward_call(sub)
            if isinstance(sub, ast.Attribute) and dotted_name(sub) in ("torch.float64", "torch.double"):
                f.float64_host_lines.append(sub.lineno)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "double" \
                    and not sub.args:
                f.float64_host_lines.append(sub.lineno)
            self._device_ref(sub)

    def _module_level_device_refs(self) -> None:
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                continue
            for sub in walk(node):
                self._device_ref(sub)

    def _branch_test(self, node: ast.AST) -> bool:
        """True when ``node`` sits in the test of an ``if``/conditional expression that picks a
        code path by device (portable), rather than in an assert or an ``if`` that raises."""
        child, cur = node, self.parents.get(node)
        while cur is not None and not isinstance(cur, ast.stmt):
            if isinstance(cur, ast.IfExp) and child is cur.test:
                return True
            child, cur = cur, self.parents.get(cur)
        if isinstance(cur, ast.If) and child is cur.test:
            return not (cur.body and isinstance(cur.body[0], ast.Raise))
        return False

    def _harmless_probe(self, node: ast.AST) -> bool:
        """``hasattr(torch, "xpu")`` and ``torch.xpu.is_available()``/``device_count()`` are
        availability probes: portable unless they guard an assert or a raise."""
        probe = node
        if isinstance(node, ast.Constant):
            call = self.parents.get(node)
            if not (isinstance(call, ast.Call) and dotted_name(call.func) == "hasattr"):
                return False
            probe = call
        elif not (isinstance(node, ast.Call)
                  and dotted_name(node.func).split(".")[-1] in ("is_available", "device_count")):
            return False
        child, cur = probe, self.parents.get(probe)
        while cur is not None and not isinstance(cur, ast.stmt):
            child, cur = cur, self.parents.get(cur)
        if isinstance(cur, ast.Assert):
            return False
        return not (isinstance(cur, ast.If) and child is cur.test and cur.body
                    and isinstance(cur.body[0], ast.Raise))

    def _device_ref(self, sub: ast.AST) -> None:
        f = self.facts
        if isinstance(sub, (ast.Constant, ast.Call)) and (self._branch_test(sub) or self._harmless_probe(sub)):
            return
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            val = sub.value.strip().lower()
            dev = val.split(":")[0]
            if dev in ("xpu", "cuda") and (val == dev or val[len(dev) + 1:].isdigit()):
                parent = self.parents.get(sub)
                if isinstance(parent, ast.Expr):  # a bare string statement (docstring)
                    return
                f.device_refs.append(DeviceRef(sub.lineno, "string", dev, repr(sub.value)))
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            name = dotted_name(sub.func)
            if name in ("torch.xpu.synchronize", "torch.cuda.synchronize"):
                f.device_refs.append(DeviceRef(sub.lineno, "sync", name.split(".")[1], name + "()"))
            elif name.startswith(("torch.xpu.", "torch.cuda.")):
                f.device_refs.append(DeviceRef(sub.lineno, "api", name.split(".")[1], name + "()"))
            elif sub.func.attr in ("xpu", "cuda") and not sub.args and dotted_name(sub.func.value) != "torch":
                f.device_refs.append(DeviceRef(sub.lineno, "method", sub.func.attr, f".{sub.func.attr}()"))

    def _forward_call(self, call: ast.Call) -> None:
        f = self.facts
        if isinstance(call.func, ast.Attribute):
            if call.func.attr == "item" and not call.args:
                f.item_calls.append(call.lineno)
            if call.func.attr in ("contiguous", "clone"):
                inner = call.func.value
                is_t = (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                        and inner.func.attr in ("t", "transpose", "permute", "T", "mT"))
                is_t = is_t or (isinstance(inner, ast.Attribute) and inner.attr in ("T", "mT"))
                if is_t:
                    f.weight_transposes.append((call.lineno, _seg(self.source, call)))

    def _launch(self, call: ast.Call, scope: str, envs: list[_Env], kernel_names: set[str]) -> None:
        sub = call.func
        assert isinstance(sub, ast.Subscript)
        kname = dotted_name(sub.value).split(".")[-1]
        if not kname:
            return
        known = kname in kernel_names
        if not known and not (kname.startswith("_") or "kernel" in kname.lower() or "tune" in kname.lower()):
            return
        grid_node = sub.slice
        grid_text = _seg(self.source, grid_node)
        resolved = grid_node
        if isinstance(grid_node, ast.Name):
            got = envs[0].last(grid_node.id, before=call.lineno) or envs[1].last(grid_node.id)
            if got is not None:
                resolved = got
                grid_text = f"{grid_node.id} = {_seg(self.source, got)}"
        if isinstance(resolved, ast.Tuple):
            kind, dims, uses_meta = "tuple", len(resolved.elts), False
        elif isinstance(resolved, ast.Lambda):
            kind = "lambda"
            argnames = {a.arg for a in resolved.args.args}
            uses_meta = any(isinstance(n, ast.Name) and n.id in argnames for n in walk(resolved.body))
            dims = len(resolved.body.elts) if isinstance(resolved.body, ast.Tuple) else None
        elif isinstance(resolved, ast.Name):
            kind, dims, uses_meta = "name", None, False
        elif isinstance(resolved, ast.Call):
            kind, dims, uses_meta = "call", None, False
        else:
            kind, dims, uses_meta = "other", None, False
        kwargs = {k.arg: _seg(self.source, k.value) for k in call.keywords if k.arg}
        kfact = self.facts.kernel(kname)
        constexprs: dict[str, Any] = {}
        if kfact is not None:
            params = [p for p in kfact.params]
            for p, a in zip(params, call.args):
                if p.constexpr:
                    constexprs[p.name] = _resolve_literal(a, envs, call.lineno)
            for k in call.keywords:
                if k.arg and any(p.name == k.arg and p.constexpr for p in params):
                    constexprs[k.arg] = _resolve_literal(k.value, envs, call.lineno)
        kwnodes = {k.arg: k.value for k in call.keywords if k.arg}

        def opt(name: str) -> Any:
            n = kwnodes.get(name)
            return _resolve_literal(n, envs, call.lineno) if n is not None else None

        self.facts.launches.append(LaunchFact(
            kernel=kname, line=call.lineno, function=scope, grid=grid_text, grid_kind=kind, grid_dims=dims,
            grid_uses_meta=uses_meta, kwargs=kwargs, constexprs=constexprs, num_warps=opt("num_warps"),
            num_stages=opt("num_stages"), grf_mode=opt("grf_mode"),
            args=[_seg(self.source, a) for a in call.args], known_kernel=known))


def extract_facts(source: str) -> Facts:
    """Facts of ``source``; raises ``SyntaxError`` when it does not parse."""
    tree = parse_python(source)
    clear_walk_cache()
    try:
        return _Extractor(source, tree).run()
    finally:
        clear_walk_cache()


# --------------------------------------------------------------------------------------
# issues, plan
# --------------------------------------------------------------------------------------


@dataclass
class Issue:
    """One problem found: the knowledge-base rule it breaks (``rule_id``; ``syntax`` for a
    parse error), its stage, severity (``error``/``warning``/``info``), a message, the 1-based
    line, the fix hint, and the codemod that implements the fix (if any)."""

    rule_id: str
    stage: str
    severity: str
    message: str
    line: int | None = None
    fix: str | None = None
    title: str = ""
    kernel: str | None = None
    codemod: str | None = None

    def to_finding(self) -> Finding:
        """This issue as a verifier ``Finding`` (rule id prefixed ``kb:``)."""
        return Finding(rule=f"kb:{self.rule_id}", message=self.message, severity=self.severity, line=self.line)


@dataclass
class Analysis:
    """The result of ``analyze``: ``facts`` (``None`` after a syntax error), ``issues`` (sorted
    by line), ``plan`` (stage ids with work, canonical order), the ``target`` analysed for, and
    ``triton_api`` (what the installed Triton offers, see
    ``knowledge.installed_triton_pointer_api``)."""

    source: str
    target: str
    facts: Facts | None
    issues: list[Issue]
    plan: list[str]
    triton_api: dict[str, Any] = field(default_factory=dict)

    @property
    def syntax_error(self) -> bool:
        """True when the source did not parse (``facts`` is then ``None``)."""
        return any(i.rule_id == "syntax" for i in self.issues)

    def issues_for(self, stage: str) -> list[Issue]:
        """The issues mapped to ``stage``, in line order."""
        return [i for i in self.issues if i.stage == stage]

    def count(self, severity: str) -> int:
        """How many issues have ``severity``."""
        return sum(1 for i in self.issues if i.severity == severity)

    @property
    def portability_issues(self) -> list[Issue]:
        """Issues whose fix is the portability codemod (hard-coded devices, vendor syncs)."""
        return [i for i in self.issues if i.codemod == "portability"]

    def runs_on(self, device_type: str) -> bool:
        """False when the code hard-codes a different vendor's device than ``device_type``
        (``xpu``/``cuda``; for ``cpu`` any hard-coded GPU device counts)."""
        if self.facts is None:
            return False
        return not any(d.device != device_type for d in self.facts.device_refs)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: target, facts, issues, plan and the Triton API probe."""
        return {
            "target": self.target,
            "facts": self.facts.to_dict() if self.facts else None,
            "issues": [asdict(i) for i in self.issues],
            "plan": list(self.plan),
            "triton_api": dict(self.triton_api),
        }


def plan_stages(analysis: Analysis | Sequence[str], add: Iterable[str] = (), skip: Iterable[str] = (),
                order: Sequence[str] | None = None) -> list[str]:
    """The stage plan after the user's edits.

    Starts from ``analysis.plan`` (or a list of stage ids), adds ``add``, removes ``skip``;
    the result is in canonical order unless ``order`` is given, in which case the stages keep
    the order of ``order`` (stages missing from ``order`` follow in canonical order).
    Raises ``ValueError`` naming any unknown stage id.
    """
    base = list(analysis.plan if isinstance(analysis, Analysis) else analysis)
    add, skip = list(add), list(skip)
    for sid in base + add + skip + list(order or []):
        if sid not in STAGE_IDS:
            raise ValueError(f"unknown stage {sid!r}; stages are {', '.join(STAGE_IDS)}")
    chosen = [s for s in STAGE_IDS if (s in base or s in add) and s not in skip]
    if order is None:
        return chosen
    ranked = [s for s in order if s in chosen]
    seen = set(ranked)
    return ranked + [s for s in chosen if s not in seen]


def analyze(source: str, target: str | Target = "xpu", problem: Problem | None = None, *,
            kb: KnowledgeBase | None = None, triton_version: str | None = None) -> Analysis:
    """Analyse a kernel module's source for ``target``: a target family (``xpu`` or ``cuda``) or
    a :class:`~xeforge_core.target.Target` (whose family decides the rules and lints).

    ``problem`` (an ``xeforge_core.problem.Problem``, optional) gives shapes for lints that
    need them. ``triton_version`` selects version-specific rules (default: the installed
    Triton's). Never raises for bad source: a syntax error becomes one ``error`` issue with
    its line.
    """

    kb = kb or load_knowledge()
    if isinstance(target, Target):
        target = target.family
    api = installed_triton_pointer_api()
    version = triton_version or api.get("version") or "3.6.0"
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        msg = f"the module does not parse: {e.msg}"
        if e.text:
            msg += f" ({e.text.strip()[:80]!r})"
        issue = Issue("syntax", "discovery", "error", msg, line=e.lineno, title="Syntax error",
                      fix="Fix the Python syntax at the line shown.")
        return Analysis(source, target, None, [issue], [], api)
    except (ValueError, RecursionError) as e:  # e.g. null bytes, absurd nesting
        issue = Issue("syntax", "discovery", "error", f"the module cannot be parsed: {e}", title="Unparseable")
        return Analysis(source, target, None, [issue], [], api)
    clear_walk_cache()
    try:
        return _analyze_tree(source, tree, target, problem, kb, api, version)
    finally:
        clear_walk_cache()


def _analyze_tree(source: str, tree: ast.Module, target: str, problem: Problem | None, kb: KnowledgeBase,
                  api: dict[str, Any], version: str) -> Analysis:
    facts = _Extractor(source, tree).run()
    # every target's elementwise blocks: a block below all of them is small on any device
    blocks = tuple(int(v) for space in kb.search_spaces.values() for c in space.kinds.get("elementwise", [])
                   for v in c.kwargs.values() if isinstance(v, int))
    ctx = lints.LintContext(source=source, tree=tree, facts=facts, target=target, problem=problem,
                            triton_api={**api, "version": version}, elementwise_blocks=blocks)
    issues: list[Issue] = []
    for rule in kb.rules_for(target=target, triton_version=version):
        if not rule.lint:
            continue
        fn = lints.LINTS[rule.lint]
        for hit in fn(ctx):
            issues.append(Issue(
                rule_id=rule.id, stage=rule.stage, severity=hit.severity or rule.severity,
                message=hit.message, line=hit.line, fix=rule.fix, title=rule.title, kernel=hit.kernel,
                codemod=rule.codemod))
    issues.sort(key=lambda i: (i.line or 0, SEVERITY_ORDER.get(i.severity, 3), i.rule_id))
    plan = [s for s in STAGE_IDS if any(i.stage == s for i in issues)]
    return Analysis(source, target, facts, issues, plan, {**api, "version": version})


def lint(source: str, target: str = "xpu", *, min_severity: str = "info") -> list[Finding]:
    """Knowledge-base lint findings for the verifier's structure step: rule ids are prefixed
    ``kb:`` (``kb:syntax`` for a parse error). ``min_severity`` drops less severe findings
    (``error`` keeps only errors).

    Severity is the rule's (or the lint's override): ``error`` means the code fails on the
    target (bad GRF mode, non-power-of-two warps, a foreign device string, a launch that
    conflicts with autotune), and fails the verifier's structure step; ``warning`` is a fault
    that may show only at some sizes or costs speed (fp32-upcast ``tl.dot`` operands)."""
    limit = SEVERITY_ORDER.get(min_severity, 2)
    a = analyze(source, target)
    return [i.to_finding() for i in a.issues if SEVERITY_ORDER.get(i.severity, 2) <= limit]
