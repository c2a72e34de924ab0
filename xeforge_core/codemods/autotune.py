"""autotune codemod: wrap kernels in ``@triton.autotune`` over the target's search space for
their kind and let the launch grid follow the chosen config.

Non-GEMM kernels (elementwise, row/column reductions, normalisations, scans, pooling) take the
``elementwise`` or ``row`` space their body calls for (:mod:`xeforge_core.codemods.autotune_kinds`):
a block is tuned only where masks and the grid (or a loop step) keep any power of two correct,
derived blocks and run-time warp counts stay with the launch, and otherwise the warp counts are
tuned. The rest of this docstring is the GEMM path:

For each ``@triton.jit`` kernel that calls ``tl.dot``, is not autotuned yet, is launched once,
and whose ``BLOCK_*`` constexpr parameters all receive integer literals at that launch
(directly, or through a variable assigned a literal in the launching function or at module
level):

* the kernel gets ``@triton.autotune(configs=[...], key=[size args])``; the first config is the
  kernel's current tiles (with the launch's ``num_warps``/``num_stages``/options), followed by
  the target's search space (knowledge base ``search_space_for(target, arch).configs("gemm")``,
  or the list given by the caller), restricted to the kernel's own meta-parameters and
  de-duplicated; ``grf_mode``/``warp_size`` options are kept only for xpu targets;
* ``key`` lists the kernel's size arguments (upper-case or ``n_*``/``*_size`` parameters that are
  not constexpr, pointers or strides);
* the launch stops passing the tuned meta-parameters and ``num_warps``/``num_stages`` (autotune
  would reject them as conflicting); positional arguments after them become keywords;
* the launch grid becomes ``lambda META: (...)`` with each tile size read from ``META``;
* constexpr defaults of the tuned parameters are removed (a default on an autotuned key is a
  "conflicting meta-parameters" error, knowledge rule on autotune keys);
* literal tile variables that are no longer used are removed;
* pointers the kernel adds into with ``tl.atomic_*`` are listed in ``reset_to_zero`` where the
  host passes a buffer of zeros it allocated for this launch (:func:`zero_reset_params`), and in
  ``restore_value`` otherwise, as are those it both loads and stores through (an in-place
  softmax, a scan that rewrites its input): the autotuner runs each config on the same buffers
  while benchmarking, so without them the second config would start from the first one's output.

Kernels it cannot handle are listed with the reason (tile size decided at run time, grid
literal matching two tile sizes, several launches, already autotuned).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from xeforge_core.codemods.autotune_kinds import (
    BLOCK_NAME,
    KernelShape,
    classify,
    kind_configs,
    prune_for_registers,
    stage_free_key,
    tile_2d_roles,
    warp_neighbours,
)
from xeforge_core.codemods.common import (
    CodemodResult,
    NameReads,
    bind_launch_args,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    is_constexpr_param,
    is_jit_decorator,
    is_kernel,
    not_applicable,
    parse_kernels,
    star_filled,
    still_parses,
    tight_equal,
)
from xeforge_core.inductor.index_width import PARAM as INDEX_DTYPE

NAME = "autotune"
_BLOCK = re.compile(r"^BLOCK(_[A-Z0-9_]+)?$")
_LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "grf_mode", "warp_size"}
_XPU_ONLY_OPTIONS = {"grf_mode", "warp_size"}


def _size_param(name: str) -> bool:
    low = name.lower()
    if "ptr" in low or low.startswith("stride") or low.endswith("_stride"):
        return False
    return bool(re.match(r"^[A-Z][A-Z0-9_]*$", name)) or low.startswith(("n_", "num_")) or \
        low.endswith("_size") or low in {"n", "m", "k"}


def _calls_dot(fn: cst.FunctionDef) -> bool:
    """Whether kernel ``fn`` calls ``tl.dot`` (its kind is gemm)."""
    return classify(fn).kind == "gemm"


@dataclass
class _Launch:
    kernel: str
    call: cst.Call
    host: cst.FunctionDef | None


@dataclass
class _Scope:
    """Assignments in one function body (or the module): name -> literal int values and the
    statements assigning them; plus how often each name is read."""

    literals: dict[str, list[int | None]] = field(default_factory=dict)
    reads: dict[str, int] = field(default_factory=dict)
    assigns: dict[str, list[cst.SimpleStatementLine]] = field(default_factory=dict)
    values: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    functions: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)


class _Collect(NameReads):
    def __init__(self, kernels: set[str]) -> None:
        super().__init__()
        self.kernels = kernels
        self.launches: list[_Launch] = []
        self.scopes: dict[int, _Scope] = {0: _Scope()}
        self.kernel_scopes: set[int] = set()
        self._fn: list[cst.FunctionDef] = []
        self._line: list[cst.SimpleStatementLine] = []

    def _scope(self) -> _Scope:
        return self.scopes.setdefault(id(self._fn[-1]) if self._fn else 0, _Scope())

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scope().functions.setdefault(node.name.value, []).append(node)
        self._fn.append(node)
        self.scopes.setdefault(id(node), _Scope())
        if is_kernel(node):
            self.kernel_scopes.add(id(node))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._fn.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line.append(node)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._line.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self._scope()
        line = self._line[-1] if self._line else None
        for t in node.targets:
            target = t.target
            if isinstance(target, cst.Name):
                scope.literals.setdefault(target.value, []).append(int_value(node.value))
                scope.values.setdefault(target.value, []).append(node.value)
                if line is not None:
                    scope.assigns.setdefault(target.value, []).append(line)
            elif isinstance(target, (cst.Tuple, cst.List)):
                vals = node.value.elements if isinstance(node.value, (cst.Tuple, cst.List)) else None
                for i, el in enumerate(target.elements):
                    if isinstance(el.value, cst.Name):
                        v = int_value(vals[i].value) if vals and len(vals) == len(target.elements) else None
                        scope.literals.setdefault(el.value.value, []).append(v)
                        if line is not None:
                            scope.assigns.setdefault(el.value.value, []).append(line)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self._scope().literals.setdefault(node.target.value, []).append(None)

    def read(self, name: str) -> None:
        scope = self._scope()
        scope.reads[name] = scope.reads.get(name, 0) + 1

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and func.value.value in self.kernels:
            self.launches.append(_Launch(func.value.value, node, self._fn[-1] if self._fn else None))


def _load_space(target: str, arch: str | None) -> tuple[list[dict[str, Any]] | None, str]:
    try:
        from xeforge_core.knowledge import load_knowledge

        kb = load_knowledge()
    except Exception as exc:  # the knowledge base is data; report what is wrong with it
        return None, f"the knowledge base could not be loaded ({type(exc).__name__}: {exc})"
    space = kb.search_space_for(target, arch)
    if space is None:
        return None, f"the knowledge base has no autotune search space for target {target!r}"
    configs = [{"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages,
                "options": dict(c.options)} for c in space.configs("gemm")]
    return configs, f"knowledge-base search space {space.id}"


def _literal(v: Any) -> str:
    return json.dumps(v) if isinstance(v, str) else repr(v)


def _config_text(kwargs: dict[str, Any], num_warps: Any, num_stages: Any) -> str:
    items = ", ".join(f'"{k}": {_literal(v)}' for k, v in kwargs.items())
    extra = ""
    if num_warps is not None:
        extra += f", num_warps={num_warps}"
    if num_stages is not None:
        extra += f", num_stages={num_stages}"
    return f"triton.Config({{{items}}}{extra})"


@dataclass
class _Plan:
    kernel: str
    decorator: cst.Decorator
    tuned: list[str]
    call_new: cst.Call
    grid_assign: tuple[cst.SimpleStatementLine, Any] | None
    host: cst.FunctionDef | None
    block_vars: list[str]
    n_configs: int
    key: list[str]
    new_params: list[cst.Param] = field(default_factory=list)
    pruner: list[cst.BaseStatement] = field(default_factory=list)
    kind: str = "gemm"
    kept: list[str] = field(default_factory=list)
    space: str = ""
    pipeline_loops: bool = False


def _meta(key: str) -> cst.BaseExpression:
    return cst.parse_expression(f'META["{key}"]')


class _GridRewrite(cst.CSTTransformer):
    def __init__(self, var_to_key: dict[str, str], lit_to_key: dict[int, str | None]) -> None:
        super().__init__()
        self.var_to_key = var_to_key
        self.lit_to_key = lit_to_key
        self.used = 0
        self.ambiguous: list[int] = []

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        if updated.value in self.var_to_key:
            self.used += 1
            return _meta(self.var_to_key[updated.value])
        return updated

    def leave_Integer(self, original: cst.Integer, updated: cst.Integer) -> cst.BaseExpression:
        v = int(updated.evaluated_value)
        if v in self.lit_to_key:
            key = self.lit_to_key[v]
            if key is None:
                self.ambiguous.append(v)
                return updated
            self.used += 1
            return _meta(key)
        return updated


def gemm_dims(fn: cst.FunctionDef) -> dict[str, str] | None:
    """The kernel's size parameters for M, N and K: the bounds its ``BLOCK_M``/``BLOCK_N``
    offsets are masked against and its ``BLOCK_K`` loop runs to; ``None`` if not all found."""
    text = code_of(fn.body)
    params = {p.name.value for p in fn.params.params}
    out: dict[str, str] = {}
    for dim, block in (("M", "BLOCK_M"), ("N", "BLOCK_N")):
        for offs in re.findall(rf"(\w+)\s*=\s*\w+\s*\*\s*{block}\s*\+\s*tl\.arange\(\s*0\s*,\s*{block}\s*\)", text):
            hit = re.search(rf"\b{offs}\b(?:\[[^\]]*\])?\s*<\s*(\w+)", text)
            if hit and hit.group(1) in params:
                out[dim] = hit.group(1)
                break
            mask = re.search(rf"(\w+)\s*=\s*{offs}\s*<\s*(\w+)", text)
            if mask and mask.group(2) in params:
                out[dim] = mask.group(2)
                break
    hit = re.search(r"range\(\s*0\s*,\s*(\w+)\s*,\s*BLOCK_K\s*\)", text)
    if hit and hit.group(1) in params:
        out["K"] = hit.group(1)
    for dim in ("M", "N", "K"):
        if dim not in out and dim in params:
            out[dim] = dim
    return out if len(out) == 3 else None


def _literal_block(name: str, b: str, params: list[cst.Param], bound: dict[str, cst.Arg], host_scope: _Scope,
                   module_scope: _Scope, unknown: set[str] | frozenset[str] = frozenset()
                   ) -> tuple[int | None, str | None, str]:
    """The integer a launch gives block parameter ``b``: ``(value, variable holding it, reason
    when it is not a literal)``; ``unknown`` names the parameters a ``*args`` may fill."""
    arg = bound.get(b)
    if arg is None and b in unknown:
        return None, None, (f"kernel {name}: {b} may be passed through the launch's *args; its value is decided at "
                            "run time, so a fixed search space could contradict it")
    if arg is None:
        default = next(p.default for p in params if p.name.value == b)
        v = int_value(default)
        return v, None, "" if v is not None else f"kernel {name}: {b} is not passed at the launch and has no literal default"
    v = int_value(arg.value)
    var = None
    if v is None and isinstance(arg.value, cst.Name):
        lits = host_scope.literals.get(arg.value.value) or module_scope.literals.get(arg.value.value)
        if lits and len(lits) == 1 and lits[0] is not None:
            v, var = lits[0], arg.value.value
    if v is None:
        return None, None, (f"kernel {name}: {b} is passed as `{code_of(arg.value)}`, not an integer literal; its "
                            "value is decided at run time, so a fixed search space could contradict it")
    return v, var, ""


def _grid_function(name: str, host_scope: _Scope, module_scope: _Scope) -> cst.Lambda | None:
    """A launch grid written as ``def grid(meta): return (...)`` in the launching function (or
    the module), as the equivalent ``lambda meta: (...)``: one definition of the name, no
    assignment to it, one parameter and a body that is one ``return``. ``None`` otherwise."""
    for scope in (host_scope, module_scope):
        defs = scope.functions.get(name) or []
        if not defs:
            continue
        fn = defs[0]
        if len(defs) != 1 or scope.values.get(name) or len(fn.params.params) != 1:
            return None
        body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
        stmt = body[0] if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) else None
        ret = stmt.body[0] if stmt is not None and len(stmt.body) == 1 else None
        if not isinstance(ret, cst.Return) or ret.value is None:
            return None
        return cst.Lambda(params=cst.Parameters(params=[cst.Param(fn.params.params[0].name)]), body=ret.value)
    return None


def _grid_of(call: cst.Call, host_scope: _Scope, module_scope: _Scope | None = None
             ) -> tuple[cst.BaseExpression | None, cst.SimpleStatementLine | None]:
    """The launch grid expression (through one assignment of a named grid, or a grid function
    defined once, as a lambda) and that assignment."""
    grid = call.func.slice[0].slice.value if isinstance(call.func, cst.Subscript) else None
    if isinstance(grid, cst.Name):
        vals = host_scope.values.get(grid.value) or []
        lines = host_scope.assigns.get(grid.value) or []
        if len(vals) == 1 and len(lines) == 1:
            return vals[0], lines[0]
        as_lambda = _grid_function(grid.value, host_scope, module_scope or _Scope())
        if as_lambda is not None:
            return as_lambda, None
    return grid, None


def _names_in(node: cst.CSTNode | None) -> list[str]:
    out: list[str] = []

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            out.append(n.value)

        def visit_SimpleString(self, n: cst.SimpleString) -> None:
            out.append(str(n.evaluated_value))

    if node is not None:
        node.visit(_V())
    return out


def _kind_blocks(fn: cst.FunctionDef, shape: KernelShape, launch: _Launch, collect: _Collect,
                 bound: dict[str, cst.Arg], unknown: set[str] | frozenset[str] = frozenset()
                 ) -> tuple[list[str], dict[str, int], dict[str, str], list[str], bool]:
    """For a non-GEMM kernel: ``(tuned blocks, their launch values, variable -> block, why the
    others stay as the launch passes them, whether the grid must be rewritten)`` (rules in
    :mod:`xeforge_core.codemods.autotune_kinds`)."""
    name = fn.name.value
    candidates, why = shape.tunable_candidates()
    kept: list[str] = [f"kernel {name}: block sizes not tuned: {why}"] if why and shape.blocks else []
    host_scope = collect.scopes.get(id(launch.host), _Scope()) if launch.host else _Scope()
    grid, _ = _grid_of(launch.call, host_scope, collect.scopes[0])
    in_grid = _names_in(grid)
    values: dict[str, int] = {}
    var_for: dict[str, str] = {}
    for b in candidates:
        v, var, reason = _literal_block(name, b, list(fn.params.params), bound, host_scope, collect.scopes[0], unknown)
        if v is None:
            kept.append(reason.replace("a fixed search space could contradict it", "it stays as the launch derives it"))
            continue
        literal_in_grid = str(v) in {code_of(n) for n in _walk_ints(grid)}
        grid_role = (var is not None and var in in_grid) or b in in_grid or (var is None and literal_in_grid)
        if b not in shape.steps and not grid_role:
            kept.append(f"kernel {name}: {b} is neither a loop step nor counted by the launch grid; it may have "
                        "to cover a whole row, so it stays as the launch passes it")
            continue
        if var is not None:
            reads = sum(s.reads.get(var, 0) for k, s in collect.scopes.items() if k not in collect.kernel_scopes)
            if reads > 1 + in_grid.count(var):
                kept.append(f"kernel {name}: the host also reads `{var}` outside the launch and its grid (e.g. to "
                            "size a buffer), so the block stays as the launch passes it")
                continue
            var_for[var] = b
        values[b] = v
    tuned = list(values)
    if len(tuned) > 1 and not tile_2d_roles(tuned, shape.steps):
        kept.append(f"kernel {name}: {len(tuned)} tunable blocks ({', '.join(tuned)}) that are not one grid block "
                    f"and one loop step; the {shape.space_kind} space tunes one, so only the warp counts are tuned")
        tuned, values, var_for = [], {}, {}
    rewrite_grid = any(b not in shape.steps for b in tuned)
    return tuned, values, var_for, kept, rewrite_grid


def _body_constexpr_blocks(fn: cst.FunctionDef) -> dict[str, int]:
    """Block sizes the kernel's body fixes as constexpr literals (``R0_BLOCK: tl.constexpr =
    256``, as TorchInductor writes a persistent reduction's whole row): part of every tile a
    config makes, though no config tunes them."""
    found: dict[str, int] = {}
    for stmt in fn.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if (isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)
                    and dotted_name(small.annotation.annotation).endswith("constexpr")
                    and isinstance(small.value, cst.Integer) and BLOCK_NAME.match(small.target.value)):
                found[small.target.value] = int(small.value.evaluated_value)
    return found


def _bound_params(fn: cst.FunctionDef) -> list[str]:
    """Parameters (not constexpr, pointers or strides) the kernel compares against or loops to:
    the sizes an autotune key must follow when their names do not say so (``L``, ``rows``)."""
    params = [p.name.value for p in fn.params.params if not is_constexpr_param(p)]
    used: set[str] = set(_range_names(fn))

    class _V(cst.CSTVisitor):
        def visit_Comparison(self, node: cst.Comparison) -> None:
            used.update(_names_in(node))

    fn.body.visit(_V())
    return [p for p in params if p in used and "ptr" not in p.lower() and "stride" not in p.lower()]


def _range_names(fn: cst.FunctionDef) -> list[str]:
    """Names read in the arguments of the kernel's ``range`` / ``tl.range`` /
    ``tl.static_range`` calls (loop bounds and steps)."""
    out: list[str] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if dotted_name(node.func) in {"range", "tl.range", "tl.static_range"}:
                out.extend(_names_in(node))

    fn.body.visit(_V())
    return out


def _walk_ints(node: cst.CSTNode | None) -> list[cst.Integer]:
    out: list[cst.Integer] = []

    class _V(cst.CSTVisitor):
        def visit_Integer(self, n: cst.Integer) -> None:
            out.append(n)

    if node is not None:
        node.visit(_V())
    return out


_SPACE_NOTE = {"scan": "row", "row": "row", "elementwise": "elementwise"}


def _kind_space(shape: KernelShape, target: str, arch: str | None,
                cache: dict[str, list[dict[str, Any]] | str]) -> list[dict[str, Any]] | str:
    """The target's search space for a non-GEMM kernel's kind (``shape.space_kind``), or the
    reason the knowledge base has none. Named for the kernel and pruned in :func:`_plan_kernel`."""
    from xeforge_core.codemods.spaces import SpaceError, space_configs

    if shape.space_kind not in cache:
        try:
            cache[shape.space_kind] = space_configs(target, arch, shape.space_kind)[0]
        except SpaceError as exc:
            cache[shape.space_kind] = str(exc)
    return cache[shape.space_kind]


def _loop_count_blocks(fn: cst.FunctionDef, blocks: list[str]) -> set[str]:
    """Blocks of a GEMM kernel that size a loop's trip count (``range(0, tl.cdiv(K, BLOCK_K))``)
    and multiply no program id: the K tile, which the launch grid never counts."""
    from xeforge_core.codemods.common import program_id_tiles

    in_range = set(_range_names(fn)) & set(blocks)
    by_pid = {b for tiles in program_id_tiles(fn, set(blocks)).values() for b in tiles}
    return in_range - by_pid


def _tile_2d_space(target: str, options: dict[str, Any]) -> list[dict[str, Any]] | str:
    """The target's ``tile_2d`` configs (a grid block by a loop step), or why there are none."""
    from xeforge_core.codemods.spaces import SpaceError, space_configs

    try:
        return space_configs(target, options.get("_arch"), "tile_2d")[0]
    except SpaceError as exc:
        return str(exc)


#: The meta-parameter the autotuning codemod adds for the pipeline depth of streaming loops.
LOOP_STAGES = "LOOP_STAGES"
_RANGES = {"range", "tl.range", "triton.language.range"}


def streaming_loops(fn: cst.FunctionDef) -> list[cst.For]:
    """The innermost ``for ... in range(...)``/``tl.range(...)`` loops of kernel ``fn`` that load
    and feed no ``tl.dot``, and whose range names no ``num_stages`` yet: the loops a row, scan or
    mat-vec kernel streams its operand through. Triton pipelines their loads only when the
    ``tl.range`` itself asks (its ``num_stages``: the kernel's own "only pipelines loads that feed
    into dot operations", Triton's ``tl.range`` documentation). A loop that stores through a
    pointer it also loads through is left alone: a load issued stages ahead could read memory
    before an earlier trip's store to it."""
    from xeforge_core.codemods.kernel_edit import TL_LOAD, TL_STORE, calls_named, walk

    out = []
    for node in walk(fn.body):
        if not (isinstance(node, cst.For) and isinstance(node.iter, cst.Call)
                and dotted_name(node.iter.func) in _RANGES):
            continue
        if any(a.keyword is not None and a.keyword.value == "num_stages" for a in node.iter.args):
            continue
        inner = walk(node.body)
        if any(isinstance(n, cst.For) for n in inner) or not calls_named(node.body, TL_LOAD):
            continue
        if any(isinstance(n, cst.Call) and dotted_name(n.func).split(".")[-1] == "dot" for n in inner):
            continue
        if _pointer_params(fn, TL_LOAD, node.body) & _pointer_params(fn, TL_STORE, node.body):
            continue
        out.append(node)
    return out


def _insert_param(params: list[cst.Param], text: str) -> list[cst.Param]:
    """``params`` with the parameter ``text`` before the first one that has a default (at the end
    when none has), separated as the parameters around it are (one a line stays one a line)."""
    new = cst.parse_module(f"def _f({text}): pass").body[0].params.params[0]  # type: ignore[attr-defined]
    at = next((i for i, p in enumerate(params) if p.default is not None), len(params))
    if not params:
        return [new]
    before = at - 1 if at < len(params) else len(params) - 2  # a separator between two parameters
    sep = params[before].comma if before >= 0 and isinstance(params[before].comma, cst.Comma) else None
    sep = sep or cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace):  # the line break, not its comment
        sep = sep.with_changes(whitespace_after=sep.whitespace_after.with_changes(first_line=cst.TrailingWhitespace()))
    out = list(params)
    if at == len(params):  # the new last one keeps the old last one's ending (a trailing comma or none)
        last = params[-1]
        out[-1] = last.with_changes(comma=sep, whitespace_after_param=cst.SimpleWhitespace(""))
        new = new.with_changes(comma=last.comma, whitespace_after_param=last.whitespace_after_param)
    else:
        new = new.with_changes(comma=sep)
    out.insert(at, new)
    return out


class _PipelineLoops(cst.CSTTransformer):
    """Give each of :func:`streaming_loops`' loops ``tl.range(..., num_stages=LOOP_STAGES)``."""

    def __init__(self, loops: list[cst.For], tl_name: str) -> None:
        super().__init__()
        self.ids = {id(loop) for loop in loops}
        self.tl_name = tl_name

    def leave_For(self, original: cst.For, updated: cst.For) -> cst.For:
        if id(original) not in self.ids:
            return updated
        call = updated.iter
        assert isinstance(call, cst.Call)
        args = [*call.args[:-1], call.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))]
        args.append(cst.Arg(keyword=cst.Name("num_stages"), value=cst.Name(LOOP_STAGES), equal=tight_equal()))
        return updated.with_changes(iter=call.with_changes(func=cst.parse_expression(f"{self.tl_name}.range"),
                                                           args=args))


def _plan_kernel(fn: cst.FunctionDef, launch: _Launch, collect: _Collect, space: list[dict[str, Any]],
                 target: str, options: dict[str, Any], shape: KernelShape | None = None) -> _Plan | str:
    """A rewrite plan for one kernel, or the reason it cannot be autotuned. ``shape`` (from
    :func:`~xeforge_core.codemods.autotune_kinds.classify`) other than gemm: ``space`` is the
    kind's configs already named for this kernel (:func:`kind_configs`) and only the blocks
    :func:`_kind_blocks` allows are tuned."""
    name = fn.name.value
    params = list(fn.params.params)
    pnames = [p.name.value for p in params]
    gemm = shape is None or shape.kind == "gemm"
    blocks = [p.name.value for p in params if is_constexpr_param(p) and _BLOCK.match(p.name.value)]
    if gemm and not blocks:
        return f"kernel {name} has no BLOCK_* constexpr parameters to tune"
    call = launch.call
    host_scope = collect.scopes.get(id(launch.host), _Scope()) if launch.host else _Scope()
    module_scope = collect.scopes[0]

    bound, launch_opts, unmatched = bind_launch_args(pnames, call)
    # a launch with *args (strides as `*x.stride()`) is followed where the meta-parameters are named
    unknown = star_filled(pnames, call)
    if any(a.star == "**" for a in unmatched):
        return f"kernel {name} is launched with **kwargs; its meta-parameters cannot be told apart"
    if unmatched and not unknown:
        return f"kernel {name} is launched with more positional arguments than it has parameters"

    values: dict[str, int] = {}
    var_for: dict[str, str] = {}
    kept_notes: list[str] = []
    rewrite_grid = True
    roles: dict[str, str] = {}
    fixed: dict[str, int] = {}
    if not gemm:
        assert shape is not None
        blocks, values, var_for, kept_notes, rewrite_grid = _kind_blocks(fn, shape, launch, collect, bound, unknown)
        roles = tile_2d_roles(blocks, shape.steps)
        if roles:
            space = _tile_2d_space(target, options)
            if isinstance(space, str):
                return f"kernel {name}: {space}"
        fixed.update(_body_constexpr_blocks(fn))  # Inductor's `R0_BLOCK: tl.constexpr = 256`
        for b in shape.blocks:  # the blocks not tuned, where the launch passes a literal: part of every tile
            if b not in values:
                v, _, _ = _literal_block(name, b, params, bound, host_scope, module_scope, unknown)
                if v is not None:
                    fixed[b] = v
        space, gone = prune_for_registers(kind_configs(space, blocks, roles, math.prod(fixed.values()) if fixed else 1),
                                          shape, int(options.get("_lanes") or 32), options.get("_max_warps"), fixed)
        kept_notes.extend(f"kernel {name}: config dropped: {g}" for g in gone)
    streamed = streaming_loops(fn) if not gemm and any(c.get("loop_stages") for c in space) else []
    if streamed and LOOP_STAGES in pnames:
        streamed = []
    if streamed and unknown and any(p.default is not None for p in params):
        # the new parameter goes before the first with a default, which the positional arguments
        # after a *args may reach: they would fill it instead
        streamed = []
        kept_notes.append(f"kernel {name}: its streaming loops keep their plain range: a new loop-depth parameter "
                          "would shift the parameters the launch's *args and the arguments after it fill")
    if streamed:
        kept_notes.append(f"kernel {name}: its {len(streamed)} streaming loop(s) (loads, no tl.dot) take "
                          f"tl.range(num_stages={LOOP_STAGES}), tuned from 1 (as written) up: the kernel's "
                          "num_stages pipelines only loads that feed tl.dot (Triton's tl.range documentation)")
    for b in blocks if gemm else []:
        v, var, reason = _literal_block(name, b, params, bound, host_scope, module_scope, unknown)
        if v is None:
            return reason
        if var is not None:
            var_for[var] = b
        values[b] = v

    # the search space, restricted to the kernel's meta-parameters
    xpu = target == "xpu"
    num_warps = int_value(launch_opts["num_warps"].value) if "num_warps" in launch_opts else None
    num_stages = int_value(launch_opts["num_stages"].value) if "num_stages" in launch_opts else None
    own_config = True
    if ("num_warps" in launch_opts and num_warps is None) or ("num_stages" in launch_opts and num_stages is None):
        if gemm:
            return f"kernel {name}: num_warps/num_stages at the launch are not literals"
        # warp counts never change what a kernel computes: the space's counts replace the launch's
        own_config = False
        kept_notes.append(f"kernel {name}: the launch computes num_warps/num_stages at run time; the configs "
                          "replace that choice (the autotuner measures each)")
    # other constexpr meta-parameters the search space tunes (e.g. GROUP_SIZE_M), when the launch
    # passes them as literals (or not at all): they join the tuned set with their current value
    constexprs = {p.name.value: p for p in params if is_constexpr_param(p)}
    extras: dict[str, int] = {}
    for cfg in space:
        for k in cfg.get("kwargs", {}):
            if k in blocks or k in extras or k not in constexprs or k in unknown:
                continue
            arg = bound.get(k)
            v = int_value(arg.value) if arg is not None else int_value(constexprs[k].default)
            if v is not None:
                extras[k] = v
    base_kwargs: dict[str, Any] = {**values, **extras}
    for k, a in launch_opts.items():
        if k in _XPU_ONLY_OPTIONS:
            s = a.value
            if isinstance(s, cst.SimpleString) and xpu:
                base_kwargs[k] = s.evaluated_value
            elif not xpu:
                continue
            else:
                return f"kernel {name}: launch option {k} is not a literal"
    if streamed:
        base_kwargs[LOOP_STAGES] = 1  # the kernel as written: a plain range pipelines no load without a dot
    texts: list[str] = [_config_text(base_kwargs, num_warps, num_stages)] if own_config else []
    # a kernel without tl.dot pipelines no load by its num_stages: a config equal to one before it
    # in all but num_stages repeats it (``tried``: :func:`stage_free_key` of each)
    tried: set[tuple[Any, ...]] = set()
    first: list[int] = []
    later: list[int] = []
    if own_config and not gemm:
        assert shape is not None
        lanes = int(options.get("_lanes") or 32)
        own_tile = {b: values[b] for b in blocks if b in values}
        first, later = warp_neighbours(own_tile, num_warps or 4, lanes)
        around, gone = prune_for_registers([{"kwargs": own_tile, "num_warps": w} for w in first + later], shape, lanes,
                                           options.get("_max_warps"), fixed)
        kept_notes.extend(f"kernel {name}: its own tile left out at other warps: {g}" for g in gone)
        fits = {c["num_warps"] for c in around}
        first, later = [w for w in first if w in fits], [w for w in later if w in fits]
        texts.extend(_config_text(base_kwargs, w, num_stages) for w in first)
        tried = {stage_free_key(base_kwargs, w) for w in [num_warps, *first]}
    seen = set(texts)
    for cfg in space:
        kw = {k: v for k, v in cfg.get("kwargs", {}).items() if k in blocks or k in extras}
        # keep the kernel's own values for meta-parameters the space does not cover
        merged = {b: kw.get(b, values[b]) for b in blocks}
        merged.update({k: kw.get(k, v) for k, v in extras.items()})
        for k, v in kw.items():
            merged.setdefault(k, v)
        if streamed:
            merged[LOOP_STAGES] = int(cfg.get("loop_stages") or 1)
        if xpu:
            for k, v in (cfg.get("options") or {}).items():
                merged[k] = v
        text = _config_text(merged, cfg.get("num_warps"), cfg.get("num_stages"))
        if not gemm:
            bare = stage_free_key(merged, cfg.get("num_warps"))
            if bare in tried:
                continue
            tried.add(bare)
        if text not in seen:
            seen.add(text)
            texts.append(text)
    for w in later:
        text = _config_text(base_kwargs, w, num_stages)
        if stage_free_key(base_kwargs, w) not in tried and text not in seen:
            seen.add(text)
            texts.append(text)
    limit = options.get("max_configs")
    if isinstance(limit, int) and limit > 0:
        # the own tile's first variants are a fix, not a search: they do not count against the cap
        fixes = int(own_config) + len(first)
        texts = texts[:fixes] + texts[fixes:][:max(0, limit - int(own_config))]
    tuned_names = set(blocks) | set(extras)
    for cfg_text in texts:
        tuned_names.update(re.findall(r'"(\w+)":', cfg_text))
    key = [p.name.value for p in params if not is_constexpr_param(p) and _size_param(p.name.value)]
    if not key:
        key = _bound_params(fn)
    if not key:
        # sizes passed as tl.constexpr (`N: tl.constexpr`): each value compiles its own kernel, and
        # the autotune cache must follow them too, or a config tuned at one size serves every size
        key = [n for n in constexprs if n not in tuned_names and n not in values]
        if key:
            kept_notes.append(f"kernel {name}: its sizes are tl.constexpr ({', '.join(key)}): the autotune "
                              "key follows them")
    if not key:
        return f"kernel {name} has no size arguments to key the autotune cache on"
    if INDEX_DTYPE in constexprs and INDEX_DTYPE not in key:
        # a first version's offsets are int32 or int64 as each launch's sizes allow
        # (xeforge_core.inductor.index_width): each width compiles its own kernel, so a config
        # tuned at one width must not serve the other
        key.append(INDEX_DTYPE)
    # parameters with defaults that are tuned: remove the default (must not break ordering)
    new_params = []
    seen_default = False
    for p in params:
        if p.name.value in tuned_names and p.default is not None:
            if seen_default:
                return (f"kernel {name}: removing the default of {p.name.value} would leave a parameter "
                        "without default after one with a default")
            p = p.with_changes(default=None, equal=cst.MaybeSentinel.DEFAULT)
        if p.default is not None:
            seen_default = True
        new_params.append(p)
    if streamed:  # a tuned meta-parameter has no default: before the first parameter that has one
        new_params = _insert_param(new_params, f"{LOOP_STAGES}: tl.constexpr")

    # the launch grid
    grid = call.func.slice[0].slice.value if isinstance(call.func, cst.Subscript) else None
    grid_assign = None
    expr_of_grid, _ = _grid_of(call, host_scope, module_scope)
    if shape is not None and isinstance(expr_of_grid, cst.Lambda):
        loops = _loop_count_blocks(fn, blocks) if gemm else set()
        missing = [b for b in blocks if b not in shape.steps and b not in loops and b not in _names_in(expr_of_grid)]
        if missing:
            return (f"kernel {name}: the launch grid is a function of the meta-parameters but does not read "
                    f"{', '.join(missing)}")
        rewrite_grid = False
    if not rewrite_grid:
        # the grid does not count the tuned blocks (loop steps, warps only) or already reads them from META
        grid = None
    lit_to_key: dict[int, str | None] = {}
    for b in blocks:
        v = values[b]
        lit_to_key[v] = None if v in lit_to_key else b
    var_to_key = dict(var_for)
    rewriter = _GridRewrite(var_to_key, lit_to_key)
    if isinstance(grid, cst.Name):
        vals = host_scope.values.get(grid.value) or []
        lines = host_scope.assigns.get(grid.value) or []
        if len(vals) != 1 or len(lines) != 1 or host_scope.reads.get(grid.value, 0) != 1:
            return (f"kernel {name}: the launch grid `{grid.value}` is assigned or used more than once; "
                    "it cannot be rewritten safely")
        expr = vals[0]
        if isinstance(expr, cst.Lambda):
            return f"kernel {name}: the launch grid is already a function of the meta-parameters"
        new_expr = expr.visit(rewriter)
        grid_assign = (lines[0], cst.RemoveFromParent())
        new_slice = call.func.with_changes(slice=[cst.SubscriptElement(cst.Index(_lambda(new_expr)))])
    elif grid is not None:
        if isinstance(grid, cst.Lambda):
            return f"kernel {name}: the launch grid is already a function of the meta-parameters"
        new_expr = grid.visit(rewriter)
        new_slice = call.func.with_changes(slice=[cst.SubscriptElement(cst.Index(_lambda(new_expr)))])
    elif not rewrite_grid:
        new_slice = call.func
    else:
        return f"kernel {name}: the launch grid could not be found"
    if rewriter.ambiguous:
        return (f"kernel {name}: the grid uses the literal {rewriter.ambiguous[0]}, which is the value of "
                "more than one BLOCK_* parameter; name the tile sizes in the grid first")
    if rewrite_grid and rewriter.used == 0:
        return (f"kernel {name}: the launch grid does not depend on the tile sizes, so changing them "
                "would change how much of the output is covered")

    # the new launch: drop tuned meta-parameters and options, keywords after a removed positional
    new_args: list[cst.Arg] = []
    pos = 0
    removed_positional = False
    for arg in call.args:
        if arg.star:  # the parameters it fills are not tuned (checked above)
            if removed_positional:
                return f"kernel {name}: a tuned meta-parameter is passed by position before *args"
            new_args.append(arg)
            pos = len(pnames)  # positional arguments after it stay as they are
            continue
        if arg.keyword is None and pos >= len(pnames):
            new_args.append(arg)
            continue
        if arg.keyword is None:
            pname = pnames[pos]
            pos += 1
            if pname in tuned_names:
                removed_positional = True
                continue
            if removed_positional:
                arg = arg.with_changes(keyword=cst.Name(pname), equal=tight_equal())
            new_args.append(arg)
        else:
            k = arg.keyword.value
            if k in tuned_names or k in {"num_warps", "num_stages"} or k in _XPU_ONLY_OPTIONS:
                continue
            new_args.append(arg)
    if new_args:
        last = new_args[-1]
        new_args[-1] = last.with_changes(comma=call.args[-1].comma if call.args else cst.MaybeSentinel.DEFAULT)
    new_call = call.with_changes(func=new_slice, args=new_args)

    configs = ",\n        ".join(texts)
    key_text = ", ".join(f'"{k}"' for k in key)
    pruner: list[cst.BaseStatement] = []
    prune_text = ""
    dims = gemm_dims(fn) if {"BLOCK_M", "BLOCK_N"} <= set(blocks) and len(texts) > 2 else None
    nums = options.get("_profile_numbers")
    if dims is not None and nums is not None and options.get("_module_imports_torch"):
        from xeforge_core.codemods.autotune_prune import KEEP, pruner_source

        pname = f"_prune_{name.lstrip('_')}_configs"
        pruner = list(cst.parse_module(pruner_source(pname, dims, nums, options.get("_profile_id", target),
                                                     keep=int(options.get("keep_configs") or KEEP))).body)
        prune_text = f'\n    prune_configs_by={{"early_config_prune": {pname}}},'
    zeroed = zero_reset_params(fn, bound, launch, host_scope)
    zeroed_text = ", ".join(json.dumps(n) for n in zeroed)
    reset_text = f"\n    reset_to_zero=[{zeroed_text}]," if zeroed else ""
    restored = [n for n in in_place_params(fn) if n not in zeroed]
    if restored:
        kept_notes.append(f"kernel {name} loads and stores through {', '.join(restored)}: restore_value keeps "
                          "each benchmarked config from starting on the previous one's output")
    aliased = {n: why for n, why in host_aliased_outputs(fn, bound, launch.host, host_scope, unknown).items()
               if n not in zeroed + restored}
    if aliased:
        restored += list(aliased)
        kept_notes.append(f"kernel {name} stores through " + "; ".join(f"{n} ({why})" for n, why in aliased.items())
                          + ": restore_value keeps each benchmarked config from starting on the previous one's output")
    if restored:
        reset_text += f"\n    restore_value=[{', '.join(json.dumps(n) for n in restored)}],"
    deco_src = (f"@triton.autotune(\n    configs=[\n        {configs},\n    ],\n    key=[{key_text}],{prune_text}"
                f"{reset_text}\n)\n"
                "def _f():\n    pass\n")
    decorator = cst.parse_module(deco_src).body[0].decorators[0]
    return _Plan(kernel=name, decorator=decorator, tuned=sorted(tuned_names), call_new=new_call,
                 grid_assign=grid_assign, host=launch.host, block_vars=list(var_for), n_configs=len(texts),
                 key=key, new_params=new_params, pruner=pruner, kind=shape.kind if shape else "gemm",
                 kept=kept_notes, space="tile_2d" if roles else _SPACE_NOTE.get(shape.kind, "") if shape else "",
                 pipeline_loops=bool(streamed))


def _pointer_params(fn: cst.FunctionDef, op: set[str], within: cst.CSTNode | None = None) -> set[str]:
    """Parameters ``fn`` passes to ``op`` (``tl.load`` / ``tl.store``) as the base of a pointer
    (the bare parameter terms of the pointer sums, names defined as sums followed), in the whole
    body or only ``within`` one of its statements."""
    from xeforge_core.codemods.kernel_edit import body_of, call_arg, calls_named, once_defs
    from xeforge_core.codemods.memory_lift import _expanded_terms

    params = {p.name.value for p in fn.params.params if not is_constexpr_param(p)}
    defs = once_defs(body_of(fn), fn.body)
    out: set[str] = set()
    for c in calls_named(within if within is not None else fn.body, op):
        ptr = call_arg(c, 0, "pointer")
        if isinstance(ptr, cst.Name) and ptr.value in defs:
            ptr = defs[ptr.value]
        out |= {t.value for t in _expanded_terms(ptr, defs) if isinstance(t, cst.Name) and t.value in params}
    return out


def in_place_params(fn: cst.FunctionDef) -> list[str]:
    """Pointer parameters the kernel adds into atomically, or both loads and stores through
    (the bare parameter terms of the pointer sums, names defined as sums followed)."""
    from xeforge_core.codemods.kernel_edit import TL_LOAD, TL_STORE

    both = _pointer_params(fn, TL_LOAD) & _pointer_params(fn, TL_STORE)
    return sorted(set(_atomic_params(fn)) | both)


#: Calls that return a new tensor no caller can hold: an output made by one of them cannot be an
#: input of the same launch (PyTorch's tensor creation and ``Tensor.new_*``/``clone``).
_FRESH_ALLOCATIONS = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "rand", "rand_like", "randn", "randn_like", "new_empty", "new_zeros", "new_ones", "new_full", "clone"})


def _fresh_buffer(expr: cst.BaseExpression, host: cst.FunctionDef | None, scope: _Scope) -> bool:
    """Whether ``expr`` (a launch argument) is a tensor the host function allocates itself: an
    allocation call, or a local name every assignment of which is one (never a parameter)."""
    if isinstance(expr, cst.Call):
        return dotted_name(expr.func).split(".")[-1] in _FRESH_ALLOCATIONS
    if not isinstance(expr, cst.Name) or host is None:
        return False
    if expr.value in {p.name.value for p in (*host.params.params, *host.params.kwonly_params)}:
        return False
    values = scope.values.get(expr.value, [])
    return (bool(values) and len(values) == len(scope.literals.get(expr.value, []))
            and all(isinstance(v, cst.Call) and _fresh_buffer(v, host, scope) for v in values))


#: Calls that return a new tensor of zeros.
_ZERO_ALLOCATIONS = frozenset({"zeros", "zeros_like", "new_zeros"})


def _zero_buffer(expr: cst.BaseExpression, host: cst.FunctionDef | None, scope: _Scope) -> bool:
    """Whether ``expr`` (a launch argument) is a tensor of zeros the host function allocates
    itself (as :func:`_fresh_buffer`, the allocation a ``zeros`` call)."""
    if isinstance(expr, cst.Call):
        return dotted_name(expr.func).split(".")[-1] in _ZERO_ALLOCATIONS
    return _fresh_buffer(expr, host, scope) and all(
        _zero_buffer(v, host, scope) for v in scope.values.get(getattr(expr, "value", ""), []))


def zero_reset_params(fn: cst.FunctionDef, bound: dict[str, cst.Arg], launch: _Launch, scope: _Scope) -> list[str]:
    """The pointers ``fn`` adds into atomically that ``reset_to_zero`` may zero before each
    benchmarked config: their launch argument is a buffer of zeros the host allocates, and no
    launch before this one in the host passes it (it holds zeros when this launch starts).
    Triton's autotuner also zeroes them before the tuned config's own run on the call that
    tunes, so an atomic target that starts from anything else (a bias, ``-inf`` for a max, a
    sum an earlier launch added) needs ``restore_value`` instead, which puts the buffer back
    after every benchmarked config (``triton.runtime.autotuner.Autotuner``, Triton 3.6)."""
    if launch.host is None:
        return []
    before = _launches_before(launch.host, launch.call)
    out = []
    for p in _atomic_params(fn):
        arg = bound.get(p)
        if arg is None or not _zero_buffer(arg.value, launch.host, scope):
            continue
        name = code_of(arg.value)
        if any(code_of(a.value) == name for c in before for a in c.args):
            continue
        out.append(p)
    return out


def _launches_before(host: cst.FunctionDef, call: cst.Call) -> list[cst.Call]:
    """The kernel launches (``k[grid](...)``) of ``host`` that come before ``call`` in its source."""
    found: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        done = False

        def visit_Call(self, node: cst.Call) -> None:
            if node is call:
                self.done = True
            elif not self.done and isinstance(node.func, cst.Subscript):
                found.append(node)

    host.body.visit(_V())
    return found


def host_aliased_outputs(fn: cst.FunctionDef, bound: dict[str, cst.Arg], host: cst.FunctionDef | None,
                         scope: _Scope, unknown: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """Pointer parameters ``fn`` stores through whose launch argument (``bound``, from
    :func:`~xeforge_core.codemods.common.bind_launch_args`) may be one of its inputs, each with
    why: the same name the launch also passes for a parameter the kernel loads through, not a
    buffer the host function allocates (``y = x`` for an in-place call, a caller's ``out=``), or
    passed through ``*args`` (in ``unknown``: its argument is not known). The autotuner runs
    every config on the same arguments, so these need ``restore_value`` (Triton's ``Autotuner``
    docs) just as a kernel that rewrites its own input does."""
    from xeforge_core.codemods.kernel_edit import TL_LOAD, TL_STORE

    loaded = _pointer_params(fn, TL_LOAD)
    loaded_args = {code_of(bound[p].value): p for p in loaded if p in bound}
    out: dict[str, str] = {}
    for p in sorted(_pointer_params(fn, TL_STORE) - loaded):
        arg = bound.get(p)
        if arg is None:
            if p in unknown:
                out[p] = "passed through *args, so which buffer it is is not known"
        elif code_of(arg.value) in loaded_args:
            out[p] = (f"the launch passes {code_of(arg.value)} for it and for {loaded_args[code_of(arg.value)]}, "
                      "which the kernel loads through")
        elif not _fresh_buffer(arg.value, host, scope):
            out[p] = (f"the launch passes {code_of(arg.value)}, a buffer the wrapper did not allocate (it may be an "
                      "input, as in an in-place call)")
    return out


def _atomic_params(fn: cst.FunctionDef) -> list[str]:
    """Pointer parameters the kernel adds into with ``tl.atomic_*``: the autotuner runs every
    config on the same arguments while it benchmarks, so these must be zeroed before each run
    (``reset_to_zero``; Triton's ``Autotuner`` docs), or the sums pile up."""
    from xeforge_core.codemods.kernel_edit import base_and_offset, call_arg, once_defs, resolve, walk

    params = {p.name.value for p in fn.params.params}
    body = list(fn.body.body) if isinstance(fn.body, cst.IndentedBlock) else []
    defs = once_defs(body, fn.body)
    out: list[str] = []
    for n in walk(fn.body):
        if isinstance(n, cst.Call) and dotted_name(n.func).split(".")[-1].startswith("atomic_"):
            ptr = resolve(call_arg(n, 0, "pointer"), defs)
            split = base_and_offset(ptr, params) if ptr is not None else None
            if split is not None and split[0] not in out:
                out.append(split[0])
    return out


def _lambda(body: cst.BaseExpression) -> cst.Lambda:
    return cst.Lambda(params=cst.Parameters(params=[cst.Param(cst.Name("META"))]), body=body)


class _Apply(cst.CSTTransformer):
    def __init__(self, plans: list[_Plan], by_call: dict[int, _Plan], tl_name: str = "tl") -> None:
        super().__init__()
        self.tl_name = tl_name
        self.by_kernel = {p.kernel: p for p in plans}
        self.by_call = by_call
        self.by_line = {id(p.grid_assign[0]): p.grid_assign[1] for p in plans if p.grid_assign}

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
        plan = self.by_kernel.get(original.name.value)
        if plan is None or not is_kernel(original):
            return updated
        decorators = list(updated.decorators)
        idx = next(i for i, d in enumerate(decorators) if is_jit_decorator(d))
        decorators.insert(idx, plan.decorator)
        params = updated.params.with_changes(params=plan.new_params)
        new = updated.with_changes(decorators=decorators, params=params)
        if plan.pipeline_loops:  # found again on the updated node (nothing else here edits a kernel body)
            new = new.visit(_PipelineLoops(streaming_loops(new), self.tl_name))
        if plan.pruner:
            first = plan.pruner[0].with_changes(leading_lines=new.leading_lines)  # type: ignore[attr-defined]
            return cst.FlattenSentinel([first, *plan.pruner[1:], new.with_changes(
                leading_lines=[cst.EmptyLine(), cst.EmptyLine()])])
        return new

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        plan = self.by_call.get(id(original))
        return plan.call_new if plan is not None else updated

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                  updated: cst.SimpleStatementLine):
        return self.by_line.get(id(original), updated)


def _drop_unused_literals(module: cst.Module, hosts: set[str], names: set[str]) -> tuple[cst.Module, list[str]]:
    """Remove ``NAME = <int>`` / ``A, B = 1, 2`` lines in ``hosts`` whose names are no longer read."""
    removed: list[str] = []

    class _Drop(cst.CSTTransformer):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0
            self.reads: dict[str, int] = {}

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            if node.name.value in hosts:
                r = NameReads()
                node.body.visit(r)
                self.reads = r.reads
                self.depth += 1
            return True

        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
            if original.name.value in hosts:
                self.depth -= 1
            return updated

        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
            if not self.depth or len(updated.body) != 1 or not isinstance(updated.body[0], cst.Assign):
                return updated
            assign = updated.body[0]
            if len(assign.targets) != 1:
                return updated
            target = assign.targets[0].target
            if isinstance(target, cst.Name):
                tnames, vals = [target.value], [assign.value]
            elif isinstance(target, cst.Tuple) and isinstance(assign.value, cst.Tuple):
                tnames = [e.value.value for e in target.elements if isinstance(e.value, cst.Name)]
                vals = [e.value for e in assign.value.elements]
                if len(tnames) != len(target.elements) or len(vals) != len(tnames):
                    return updated
            else:
                return updated
            if not all(n in names for n in tnames) or any(int_value(v) is None for v in vals):
                return updated
            if any(self.reads.get(n, 0) for n in tnames):
                return updated
            removed.extend(tnames)
            return cst.RemoveFromParent()

    return module.visit(_Drop()), removed


def _device_functions(kernels: dict[str, cst.FunctionDef]) -> set[str]:
    """Names of the ``@triton.jit`` functions in ``kernels`` that another of them calls by name
    (device functions such as TorchInductor's helpers): they have no launch or config of their own."""
    from xeforge_core.codemods.kernel_edit import walk

    called: set[str] = set()
    for name, fn in kernels.items():
        called |= {n.func.value for n in walk(fn.body)
                   if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value != name}
    return called & set(kernels)


def never_launched(name: str, options: dict[str, Any] | None) -> str | None:
    """The reason a tuning rewrite leaves kernel ``name`` alone when ``options["launched_kernels"]``
    (the kernels the current version's verification launched, where it covered the timed size) is given
    and does not name it: its configs would run nothing measured (a first version's GEMM kernel
    beside the mat-vec kernel that runs at the problem's sizes). ``None`` when it ran or where
    nothing says."""
    ran = (options or {}).get("launched_kernels")
    if not ran or name in ran:
        return None
    return (f"kernel {name} never launched when the current version was verified (it launched "
            f"{', '.join(sorted(ran))}): its configs would run nothing")


def add_autotune(source: str, *, target: str = "xpu", arch: str | None = None,
                 search_space: list[dict[str, Any]] | None = None,
                 options: dict[str, Any] | None = None, profile: Any = None) -> CodemodResult:
    """Apply the autotune rewrite (module docstring) to ``source``.

    ``target`` is ``xpu`` or ``cuda``; ``arch`` picks the knowledge base's search space
    (``xe2``, ``xe-hpc``); ``search_space`` (dicts with ``kwargs``, ``num_warps``,
    ``num_stages``, ``options``) replaces it. The space is pruned for the target's ``profile``
    (default: the knowledge base's profile for the target) by
    :mod:`xeforge_core.codemods.autotune_prune`: statically (shared memory, accumulator
    registers, at ``options["operand_bytes"]`` an operand element, default 4; ``options["max_configs"]``,
    default 6, caps the config count) and, for GEMM
    kernels of a module that imports torch, per call before compiling (the kernel's own config
    and ``options["keep_configs"]`` - 1, default 2, predicted fastest are benchmarked).
    Returns a :class:`CodemodResult`, not applicable with the reason(s) when no kernel qualifies.
    """
    options = dict(options or {})
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    parsed, kernels = found
    if search_space is None:
        space, origin = _load_space(target, arch)
        if space is None:
            return not_applicable(NAME, source, origin)
    else:
        space, origin = list(search_space), "the given search space"
    from xeforge_core.codemods.autotune_prune import STATIC_ELEMENT_BYTES, profile_numbers, prune_static
    from xeforge_core.codemods.spaces import profile_value, resolve_profile

    prof = resolve_profile(profile, target, arch)
    limit = options.get("max_configs")
    limit = limit if isinstance(limit, int) and limit > 0 else 6
    space, dropped = prune_static([{"kwargs": {}, "num_warps": 4, "num_stages": 2}, *space], prof, target,
                                  max_configs=limit, elem=int(options.get("operand_bytes") or STATIC_ELEMENT_BYTES))
    space = space[1:]
    options.setdefault("_profile_numbers", profile_numbers(prof, target))
    options.setdefault("_profile_id", str(getattr(prof, "id", None) or (prof or {}).get("id", target)
                                          if isinstance(prof, dict) else getattr(prof, "id", target)))
    options.setdefault("_module_imports_torch", "import torch" in source)
    options.setdefault("_arch", arch)
    options.setdefault("_lanes", int(options["_profile_numbers"]["lanes"]))
    max_warps = profile_value(prof, "max_warps_per_workgroup")
    options.setdefault("_max_warps", int(max_warps) if max_warps else None)
    kind_spaces: dict[str, list[dict[str, Any]] | str] = {}
    collect = _Collect(set(kernels))
    parsed.visit(collect)
    reasons: list[str] = []
    plans: list[_Plan] = []
    by_call: dict[int, _Plan] = {}
    helpers = _device_functions(kernels)
    for name, fn in kernels.items():
        if any(is_autotune_decorator(d) for d in fn.decorators):
            reasons.append(f"kernel {name} is already autotuned")
            continue
        if name in helpers and not any(lc.kernel == name for lc in collect.launches):
            continue  # a @triton.jit function another kernel calls: it runs inside that kernel's config
        idle = never_launched(name, options)
        if idle:
            reasons.append(idle)
            continue
        shape = classify(fn)
        kind_space = space
        if shape.kind != "gemm":
            kind_space = _kind_space(shape, target, arch, kind_spaces)
            if isinstance(kind_space, str):
                reasons.append(f"kernel {name} ({shape.kind}): {kind_space}")
                continue
        launches = [lc for lc in collect.launches if lc.kernel == name]
        if not launches:
            reasons.append(f"kernel {name} is not launched in this module (or only through a wrapper)")
            continue
        if len(launches) > 1:
            reasons.append(f"kernel {name} is launched from {len(launches)} places; autotuning one launch "
                           "would leave the others inconsistent")
            continue
        plan = _plan_kernel(fn, launches[0], collect, kind_space, target, options, shape)
        if isinstance(plan, str):
            reasons.append(plan)
            continue
        plans.append(plan)
        by_call[id(launches[0].call)] = plan
    if not plans:
        return not_applicable(NAME, source, "; ".join(reasons) or "no kernel to autotune")
    alias = re.search(r"^\s*import\s+triton\.language\s+as\s+(\w+)", source, re.MULTILINE)
    new = parsed.visit(_Apply(plans, by_call, alias.group(1) if alias else "triton.language"))
    hosts = {p.host.name.value for p in plans if p.host is not None}
    names = {v for p in plans for v in p.block_vars}
    new, removed = _drop_unused_literals(new, hosts, names)
    code = new.code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    notes = []
    for p in plans:
        if p.kind == "gemm":
            notes.append(f"kernel {p.kernel}: @triton.autotune over {p.n_configs} configs ({origin}; the first "
                         f"is the current tiles), key={p.key}; the launch grid is a lambda reading the tile sizes from META")
        else:
            blocks = [t for t in p.tuned if t != LOOP_STAGES]
            parts = ([f"block {', '.join(blocks)}"] if blocks else []) + (["loop depth"] if p.pipeline_loops else [])
            what = f"{', '.join(parts)} and warps" if parts else "num_warps/num_stages only"
            notes.append(f"kernel {p.kernel} ({p.kind}): @triton.autotune over {p.n_configs} configs of the "
                         f"{p.space} space ({what}; the first is the launch's own, and its tile is tried at the other "
                         f"warp counts it fills), key={p.key}")
        notes.extend(p.kept)
        if p.pruner:
            notes.append(f"kernel {p.kernel}: a roofline model prunes the configs per call before any is compiled "
                         f"(prune_configs_by early_config_prune; profile {options['_profile_id']}): the current "
                         "tiles and the predicted fastest others are benchmarked")
    if dropped and any(p.kind == "gemm" for p in plans):
        notes.append("search space pruned for the profile: " + "; ".join(dropped))
    if removed:
        notes.append(f"removed tile variables no longer used: {', '.join(sorted(set(removed)))}")
    if target != "xpu":
        notes.append(f"target {target}: grf_mode/warp_size options are Intel-backend compile options and "
                     "were left out of the configs")
    notes.extend(f"not autotuned: {r}" for r in reasons)
    return CodemodResult(codemod=NAME, source=code, changed=code != source, notes=notes)
