"""AST lints referenced by knowledge-base rules (``lint:`` in knowledge/rules/*.yaml).

Each lint is a function ``(ctx: LintContext) -> list[Hit]`` registered in ``LINTS`` under its
own name. A lint only *finds*; the rule it belongs to (id, stage, severity, fix) lives in the
YAML, and ``xeforge_core.analysis.analyze`` runs the lints of the rules that apply to the
target and the Triton version. The facts they read come from ``analysis.extract_facts``.

Every lint has a planted-violation test and a fixed-code test (tests/test_lints.py).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xeforge_core.compile_options import CONFIG_LAUNCH_OPTIONS, GRF_MODE_LEGACY, GRF_MODE_VALUES

if TYPE_CHECKING:
    from xeforge_core.problem import Problem


@dataclass
class Hit:
    """One lint finding: 1-based ``line``, a message naming what was seen, an optional
    severity overriding the rule's, and the kernel it concerns."""

    line: int | None
    message: str
    severity: str | None = None
    kernel: str | None = None


@dataclass
class LintContext:
    """What a lint may read: the source, its AST, the extracted ``facts``
    (``analysis.Facts``), the ``target`` (``xpu``/``cuda``), the optional problem and the
    Triton API/version dict (``knowledge.installed_triton_pointer_api`` shape)."""

    source: str
    tree: ast.Module
    facts: Any
    target: str = "xpu"
    problem: Problem | None = None
    triton_api: dict[str, Any] = field(default_factory=dict)
    #: the block sizes of the ``elementwise`` search spaces of every target
    #: (``knowledge/search_spaces``)
    elementwise_blocks: tuple[int, ...] = ()


_WALK: dict[int, tuple[ast.AST, list[ast.AST]]] = {}


def walk(node: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(node))``, memoised until ``clear_walk_cache()`` (analysis walks the same
    kernels many times; ``analyze`` clears the cache before and after each run)."""
    hit = _WALK.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    nodes = list(ast.walk(node))
    _WALK[id(node)] = (node, nodes)
    return nodes


def clear_walk_cache() -> None:
    """Forget the memoised walks (``analyze`` calls this before and after each run)."""
    _WALK.clear()


LintFn = Callable[[LintContext], list[Hit]]
LINTS: dict[str, LintFn] = {}


def _register(fn: LintFn) -> LintFn:
    LINTS[fn.__name__] = fn
    return fn


def _pow2(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and (v & (v - 1)) == 0


#: TorchInductor's tile names: ``XBLOCK``, ``YBLOCK``, ``ZBLOCK``, ``RBLOCK``, ``R0_BLOCK``, ``R1_BLOCK``
_INDUCTOR_TILE = re.compile(r"^([XYZ]|R\d*_?)BLOCK$")


def _is_tile_name(name: str) -> bool:
    """``BLOCK_M``, ``TILE_N``, ``BM``; TorchInductor's ``XBLOCK``, ``R0_BLOCK`` (not any name
    ending in BLOCK: ``ROWS_PER_BLOCK`` counts rows, and need not be a power of two)."""
    n = name.upper()
    return (n.startswith("BLOCK") or n.startswith("TILE") or bool(_INDUCTOR_TILE.match(n))
            or n in ("BM", "BN", "BK", "HEAD_DIM_PADDED"))


# --------------------------------------------------------------------------------------
# xpu_specific
# --------------------------------------------------------------------------------------


@_register
def lint_pow2_num_warps(ctx: LintContext) -> list[Hit]:
    """num_warps given at a launch or in a triton.Config that is not a power of two."""
    hits = []
    for cfg in ctx.facts.configs:
        for v in cfg.num_warps:
            if not _pow2(v):
                hits.append(Hit(cfg.line, f"triton.Config has num_warps={v!r}, not a power of two"))
    for ln in ctx.facts.launches:
        if ln.num_warps is not None and not _pow2(ln.num_warps):
            hits.append(Hit(ln.line, f"{ln.kernel} launched with num_warps={ln.num_warps!r}, not a power of two",
                            kernel=ln.kernel))
    return hits


@_register
def lint_pow2_tile_sizes(ctx: LintContext) -> list[Hit]:
    """BLOCK_* values (configs, launches) and literal tl.arange extents that are not powers
    of two."""
    hits = []
    for cfg in ctx.facts.configs:
        for name, vals in cfg.kwargs.items():
            if _is_tile_name(name):
                for v in vals:
                    if isinstance(v, int) and not _pow2(v):
                        hits.append(Hit(cfg.line, f"triton.Config sets {name}={v}, not a power of two"))
    for ln in ctx.facts.launches:
        for name, v in ln.constexprs.items():
            if _is_tile_name(name) and isinstance(v, int) and not _pow2(v):
                hits.append(Hit(ln.line, f"{ln.kernel} launched with {name}={v}, not a power of two", kernel=ln.kernel))
    for k in ctx.facts.kernels:
        for size, line in k.arange_sizes:
            if not _pow2(size):
                hits.append(Hit(line, f"tl.arange of length {size} in {k.name}: the length must be a power of two",
                                kernel=k.name))
    return hits


def _grf_problems(value: Any, warps: list[Any]) -> list[str]:
    out = []
    s = str(value)
    if s in GRF_MODE_LEGACY:
        out.append(f"grf_mode={value!r} is an old spelling the current Intel backend rejects; use "
                   f"{'256' if s == 'large' else '128'!r}")
    elif s not in GRF_MODE_VALUES:
        out.append(f"grf_mode={value!r} is not one of {', '.join(GRF_MODE_VALUES)}")
    if s in ("256", "512", "large"):
        big = [w for w in warps if isinstance(w, int) and w > 32]
        if big:
            out.append(f"grf_mode={value!r} cannot be combined with num_warps={big[0]} (> 32)")
    return out


@_register
def lint_grf_mode_values(ctx: LintContext) -> list[Hit]:
    """grf_mode values the Intel backend rejects, and 256-GRF with more than 32 warps."""
    hits = []
    for cfg in ctx.facts.configs:
        for v in cfg.kwargs.get("grf_mode", []):
            hits += [Hit(cfg.line, m, severity=_legacy_sev(v, m)) for m in _grf_problems(v, cfg.num_warps)]
    for ln in ctx.facts.launches:
        if ln.grf_mode is not None:
            hits += [Hit(ln.line, m, severity=_legacy_sev(ln.grf_mode, m), kernel=ln.kernel)
                     for m in _grf_problems(ln.grf_mode, [ln.num_warps])]
    return hits


def _legacy_sev(value: Any, message: str) -> str | None:
    """Old spellings (small/large) still work on older Intel backends: a warning, not an error."""
    return "warning" if str(value) in GRF_MODE_LEGACY and "old spelling" in message else None


@_register
def lint_grf_mode_portability(ctx: LintContext) -> list[Hit]:
    """grf_mode passed at a launch (breaks every non-Intel backend), or, for a cuda target,
    grf_mode inside triton.Config kwargs (cuda's launcher raises on the unknown keyword)."""
    hits = []
    for ln in ctx.facts.launches:
        if "grf_mode" in ln.kwargs:
            sev = "error" if ctx.target != "xpu" else None
            hits.append(Hit(ln.line, f"{ln.kernel} is launched with grf_mode={ln.kwargs['grf_mode']}: only Intel's "
                                     "backend knows this option; other backends raise on the unknown keyword",
                            severity=sev, kernel=ln.kernel))
    if ctx.target != "xpu":
        for cfg in ctx.facts.configs:
            if "grf_mode" in cfg.kwargs:
                hits.append(Hit(cfg.line, "triton.Config carries grf_mode, which the cuda backend rejects as an "
                                          "unrecognised keyword; keep it in an xpu-only config list",
                                severity="error"))
    return hits


@_register
def lint_swizzle_1d_grid(ctx: LintContext) -> list[Hit]:
    """A GEMM-like kernel (tl.dot in a loop) on a 2-D program grid with no GROUP_SIZE_M-style
    swizzle."""
    hits = []
    fns = {n.name: n for n in walk(ctx.tree) if isinstance(n, ast.FunctionDef)}
    for k in ctx.facts.kernels:
        if not any(d.in_loop for d in k.dots):
            continue
        if 1 not in k.program_id_axes or 2 in k.program_id_axes:
            continue
        if any("GROUP" in p.name.upper() for p in k.params):
            continue
        fn = fns.get(k.name)
        if fn is None or not (_tiles_axis(fn, 0) and _tiles_axis(fn, 1)):
            continue  # axis 1 indexes batch/heads (e.g. attention), not output tiles
        hits.append(Hit(k.line, f"{k.name} maps output tiles to a 2-D grid (program_id 0 and 1) without "
                                "grouped ordering; a 1-D grid with GROUP_SIZE_M improves L2 reuse", kernel=k.name))
    return hits


def _tiles_axis(fn: ast.FunctionDef, axis: int) -> bool:
    """Whether program id ``axis`` offsets a tile (appears with tl.arange in an assignment)."""
    names: set[str] = set()
    assigns = [n for n in walk(fn) if isinstance(n, ast.Assign)]
    for a in assigns:
        if isinstance(a.value, ast.Call) and ast.unparse(a.value.func).endswith("program_id"):
            arg = a.value.args[0] if a.value.args else None
            if isinstance(arg, ast.Constant) and arg.value == axis:
                names |= {n.id for tgt in a.targets for n in walk(tgt) if isinstance(n, ast.Name)}
    for a in assigns:
        text = ast.unparse(a.value)
        if "arange" not in text:
            continue
        used = {n.id for n in walk(a.value) if isinstance(n, ast.Name)}
        if used & names or f"program_id({axis})" in text:
            return True
    return False


@_register
def lint_hardcoded_device(ctx: LintContext) -> list[Hit]:
    """String literals "xpu"/"cuda", .xpu()/.cuda() calls and torch.xpu.*/torch.cuda.* APIs
    (synchronize has its own lint). One hit per line; an error when the device named is not
    the target."""
    by_line: dict[int, list[Any]] = {}
    for d in ctx.facts.device_refs:
        if d.kind != "sync":
            by_line.setdefault(d.line, []).append(d)
    hits = []
    for line, refs in sorted(by_line.items()):
        devs = sorted({r.device for r in refs})
        texts = ", ".join(dict.fromkeys(r.text for r in refs))
        other = [d for d in devs if d != ctx.target]
        sev = "error" if other else None
        where = f"hard-codes {'/'.join(devs)} ({texts})"
        msg = (f"{where}: this stops the module running on {ctx.target}" if other
               else f"{where}: the module will not run on any other device")
        hits.append(Hit(line, msg, severity=sev))
    return hits


@_register
def lint_device_sync(ctx: LintContext) -> list[Hit]:
    """torch.xpu.synchronize() / torch.cuda.synchronize() calls."""
    hits = []
    for d in ctx.facts.sync_calls:
        sev = "error" if d.device != ctx.target else None
        hits.append(Hit(d.line, f"{d.text} is vendor-specific (fails off {d.device}) and stalls every call; "
                                "use torch.accelerator.synchronize() or drop it", severity=sev))
    return hits


# --------------------------------------------------------------------------------------
# dtype_fix
# --------------------------------------------------------------------------------------


@_register
def lint_dot_operand_upcast(ctx: LintContext) -> list[Hit]:
    """tl.dot operands cast to float32 (directly, or through the variable's assignment)."""
    hits = []
    for k in ctx.facts.kernels:
        for d in k.dots:
            up = [o.text for o in d.operands if o.cast in ("float32", "fp32")]
            if up:
                both = "both operands" if len(up) == len(d.operands) else "an operand"
                hits.append(Hit(d.line, f"tl.dot in {k.name} gets {both} upcast to fp32 ({', '.join(up)}), which "
                                        "bypasses the matrix engines; keep fp16/bf16 operands with an fp32 accumulator",
                                kernel=k.name))
    return hits


@_register
def lint_dot_accumulator_arg(ctx: LintContext) -> list[Hit]:
    """``acc += tl.dot(a, b)`` instead of ``acc = tl.dot(a, b, acc)``."""
    hits = []
    for k in ctx.facts.kernels:
        for d in k.dots:
            if d.augassign and not d.has_acc:
                hits.append(Hit(d.line, f"{k.name}: `+= tl.dot(...)` adds a separate product tile; pass the "
                                        "accumulator as tl.dot's third argument", kernel=k.name))
    return hits


@_register
def lint_float64(ctx: LintContext) -> list[Hit]:
    """tl.float64 in a kernel, torch.float64/.double() in host code."""
    hits = []
    for k in ctx.facts.kernels:
        for line in k.float64_lines:
            hits.append(Hit(line, f"{k.name} computes in float64", kernel=k.name))
    for line in ctx.facts.float64_host_lines:
        hits.append(Hit(line, "host code creates float64 tensors that the kernels will read"))
    return hits


# --------------------------------------------------------------------------------------
# memory_access
# --------------------------------------------------------------------------------------


def _pid_vars(fn: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """(names derived from tl.program_id without tl.arange, names cast to int64)."""
    pid: set[str] = set()
    wide: set[str] = set()
    changed = True
    assigns = [n for n in walk(fn) if isinstance(n, ast.Assign)]
    while changed:
        changed = False
        for a in assigns:
            text = ast.unparse(a.value)
            names = {n.id for n in walk(a.value) if isinstance(n, ast.Name)}
            from_pid = "program_id" in text or bool(names & pid)
            if not from_pid or "arange" in text:
                continue
            for tgt in a.targets:
                for n in walk(tgt):
                    if isinstance(n, ast.Name) and n.id not in pid:
                        pid.add(n.id)
                        changed = True
                        if "int64" in text:
                            wide.add(n.id)
    return pid, wide


@_register
def lint_int64_offsets(ctx: LintContext) -> list[Hit]:
    """A program-id-derived scalar multiplied by a stride without an int64 cast."""
    hits = []
    largest = _largest_extent(ctx.problem)
    if largest is not None and largest < 2**31:
        return []  # every offset of every spec variant fits in int32
    kernels = {k.name for k in ctx.facts.kernels}
    for fn in walk(ctx.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in kernels):
            continue
        pid, wide = _pid_vars(fn)
        seen_lines: set[int] = set()
        for node in walk(fn):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
                continue
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if (isinstance(a, ast.Name) and a.id in pid and a.id not in wide
                        and any(isinstance(n, ast.Name) and "stride" in n.id.lower() for n in walk(b))
                        and node.lineno not in seen_lines):
                    seen_lines.add(node.lineno)
                    hits.append(Hit(node.lineno, f"{fn.name}: `{ast.unparse(node)}` multiplies an int32 program "
                                                 "id by a stride; it wraps once the offset passes 2^31",
                                    kernel=fn.name))
    return hits


def _largest_extent(problem: Problem | None) -> int | None:
    """An upper estimate of the largest element offset a problem's variants can reach: the
    largest input numel, or the product of the two largest integer dims (a GEMM output), over
    every spec variant. ``None`` when the problem gives no shapes."""
    spec = getattr(problem, "spec", None)
    variants = getattr(spec, "variants", None) or {}
    best: int | None = None
    for v in variants.values():
        sizes = []
        for shape in (getattr(v, "shapes", None) or {}).values():
            n = 1
            for d in shape:
                n *= int(d)
            sizes.append(n)
        dims = sorted((d for d in (getattr(v, "dims", None) or {}).values()
                       if isinstance(d, int) and not isinstance(d, bool)), reverse=True)
        if len(dims) >= 2:
            sizes.append(dims[0] * dims[1])
        if sizes:
            best = max(best or 0, max(sizes))
    return best


@_register
def lint_forward_weight_transpose(ctx: LintContext) -> list[Hit]:
    """``.t()/.T/.transpose()/.permute()`` followed by ``.contiguous()``/``.clone()`` in code
    reachable from ``forward``."""
    return [Hit(line, f"`{text}` copies a transposed tensor on every forward call")
            for line, text in ctx.facts.weight_transposes]


@_register
def lint_inner_loop_transpose(ctx: LintContext) -> list[Hit]:
    """tl.trans(x) / x.T used as a tl.dot operand inside a loop (descriptor loads excluded)."""
    hits = []
    for k in ctx.facts.kernels:
        for d in k.dots:
            if not d.in_loop:
                continue
            for o in d.operands:
                t = o.text.replace(" ", "")
                if (t.endswith(".T") and ".load(" not in t) or t.startswith(("tl.trans(", "tl.permute(")):
                    hits.append(Hit(d.line, f"{k.name}: `{o.text}` transposes a tile inside the loop", kernel=k.name))
    return hits


@_register
def lint_item_in_forward(ctx: LintContext) -> list[Hit]:
    """``.item()`` in code reachable from ``forward``."""
    return [Hit(line, ".item() waits for the device and copies to the host on every call")
            for line in ctx.facts.item_calls]


# --------------------------------------------------------------------------------------
# autotuning
# --------------------------------------------------------------------------------------


@_register
def lint_autotune_meta_conflict(ctx: LintContext) -> list[Hit]:
    """Autotuned names that also have a default in the signature, or are passed at launch."""
    hits = []
    for k in ctx.facts.kernels:
        if not k.autotune:
            continue
        tuned = k.autotune.config_names
        for p in k.params:
            if p.name in tuned and p.default is not None:
                hits.append(Hit(p.line, f"{k.name}: {p.name} is tuned by @triton.autotune and also defaults to "
                                        f"{p.default}; the default is never used (the config's value wins)",
                                severity="warning", kernel=k.name))
        for ln in ctx.facts.launches:
            if ln.kernel == k.name:
                both = sorted(set(ln.kwargs) & tuned)
                if both:
                    hits.append(Hit(ln.line, f"{k.name} is launched with {', '.join(both)}, which the autotune "
                                             "configs also set: the launch fails ('Conflicting meta-parameters')",
                                    kernel=k.name))
    return hits


@_register
def lint_autotune_launch_option_in_meta(ctx: LintContext) -> list[Hit]:
    """``triton.Config({..., "num_warps": 8})``: a launch option in the meta-parameter dict, which
    ``Config.all_kwargs()`` overwrites with the config's own (default 4 warps, 3 stages). Quiet
    where the module reads a config's ``kwargs`` itself (a launch given ``**cfg.kwargs`` uses them)."""
    nodes = walk(ctx.tree)
    if any(isinstance(n, ast.Attribute) and n.attr in ("kwargs", "all_kwargs") for n in nodes):
        return []
    params = {a.arg for k in ctx.facts.kernels for fn in nodes if isinstance(fn, ast.FunctionDef) and fn.name == k.name
              for a in fn.args.args}
    hits = []
    for n in nodes:
        func = n.func if isinstance(n, ast.Call) else None
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name != "Config" or not n.args or not isinstance(n.args[0], ast.Dict):  # type: ignore[union-attr]
            continue
        keys = [k.value for k in n.args[0].keys if isinstance(k, ast.Constant) and k.value in CONFIG_LAUNCH_OPTIONS]  # type: ignore[union-attr]
        keys = [k for k in keys if k not in params]
        none = {kw.arg for kw in n.keywords if isinstance(kw.value, ast.Constant) and kw.value.value is None}  # type: ignore[union-attr]
        keys = [k for k in keys if k not in none]  # `num_warps=None`: the dict's value is used
        if keys:
            given = {kw.arg for kw in n.keywords} | set(CONFIG_LAUNCH_OPTIONS[:len(n.args) - 1])  # type: ignore[union-attr]
            what = ", ".join(keys)
            hits.append(Hit(n.lineno, f"triton.Config sets {what} in its meta-parameter dict, where Triton drops it "
                                      f"(the config's own {what} wins: "
                                      + ("the keyword beside it" if set(keys) <= given else "4 warps and 3 stages by default")
                                      + f"); pass {what}= as a triton.Config keyword", severity="warning"))
    return hits


@_register
def lint_autotune_grid_meta(ctx: LintContext) -> list[Hit]:
    """An autotuned kernel launched with a grid that does not depend on the chosen config."""
    hits = []
    for k in ctx.facts.kernels:
        if not k.autotune:
            continue
        tiles = {n for n in k.autotune.config_names if _is_tile_name(n)}
        if not tiles:
            continue
        for ln in ctx.facts.launches:
            # a fixed grid is wrong only when it counts tiles (cdiv, //): one program per row,
            # looping over the columns inside, is right for every config
            counts_tiles = any(op in (ln.grid or "") for op in ("cdiv", "//", "/"))
            if ln.kernel == k.name and ln.grid_kind == "tuple" and counts_tiles:
                hits.append(Hit(ln.line, f"{k.name} is autotuned over {', '.join(sorted(tiles))} but launched with the "
                                         f"fixed grid `{ln.grid}`", kernel=k.name))
            elif ln.kernel == k.name and ln.grid_kind == "lambda" and not ln.grid_uses_meta and counts_tiles:
                hits.append(Hit(ln.line, f"{k.name}'s grid lambda ignores its META argument but counts tiles "
                                         f"(`{ln.grid}`)", kernel=k.name))
    return hits


@_register
def lint_no_autotune(ctx: LintContext) -> list[Hit]:
    """A kernel with BLOCK_* constexprs, not autotuned, launched with literal tile sizes or with
    sizes its host code computes (TorchInductor's ``R0_BLOCK = min(1024, next_power_of_2(n))``):
    either way one choice for every shape and device, and Triton's default warps and stages."""
    hits = []
    for k in ctx.facts.kernels:
        if k.autotune or not any(_is_tile_name(p) for p in k.constexprs):
            continue
        for ln in ctx.facts.launches:
            if ln.kernel != k.name:
                continue
            fixed = {n: v for n, v in ln.constexprs.items() if _is_tile_name(n) and isinstance(v, int)}
            picked = [n for n, v in ln.constexprs.items() if _is_tile_name(n) and v is None]
            if fixed:
                desc = ", ".join(f"{n}={v}" for n, v in fixed.items())
                hits.append(Hit(ln.line, f"{k.name} runs with fixed tile sizes ({desc}); autotune them for the "
                                         "target", kernel=k.name))
                break
            if picked:
                hits.append(Hit(ln.line, f"{k.name} runs with tile sizes its host code picks ({', '.join(picked)}) "
                                         "and warps and stages it never tunes: one rule for every shape and device; "
                                         "autotune the launch for the target (a tile the kernel needs whole, such as "
                                         "a row, stays as the host picks it and the warps and stages are tuned)",
                                kernel=k.name))
                break
    return hits


def _int_literal(text: str | None) -> int | None:
    """The integer a default's source text spells (``"4"``), else ``None``."""
    try:
        value = ast.literal_eval(text) if text else None
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tile_ranges(tree: ast.Module, kernel: str) -> tuple[set[str], bool]:
    """The names used as the extent of ``tl.arange(0, NAME)`` in the kernel function ``kernel``,
    and whether it indexes with ``None`` (``x[:, None]``): its ranges form a 2-D (or wider) tile."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    names: set[str] = set()
    tiled = False
    for node in walk(fn) if fn is not None else []:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "arange" \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Name):
            names.add(node.args[1].id)
        elif isinstance(node, ast.Subscript):
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            tiled = tiled or any(isinstance(p, ast.Constant) and p.value is None for p in parts)
    return names, tiled


@_register
def lint_small_elementwise_block(ctx: LintContext) -> list[Hit]:
    """A flat elementwise kernel (1-D grid, no loop, no ``tl.dot``, not autotuned) launched with
    a tile smaller than every elementwise block of every target's search space (1024 elements
    today: a program that moves a few hundred elements is small on any device). Each
    ``tl.arange`` extent the kernel names takes its literal at the launch, else its default; a
    kernel that broadcasts its ranges into a 2-D tile (``[:, None]``) moves their product, and
    is judged only where every extent is known (a one-row reduction's ``XBLOCK=1`` beside a
    2048-wide ``R0_BLOCK``, TorchInductor's, is not a small program); a 1-D kernel moves its
    largest known range."""
    if not ctx.elementwise_blocks:
        return []
    smallest = min(ctx.elementwise_blocks)
    hits = []
    for k in ctx.facts.kernels:
        if k.autotune or k.dots or k.loops or set(k.program_id_axes) - {0}:
            continue
        names, tiled = _tile_ranges(ctx.tree, k.name)
        extents = sorted(names)
        defaults = {p.name: _int_literal(p.default) for p in k.params if p.default is not None}
        for ln in ctx.facts.launches:
            if ln.kernel != k.name or ln.grid_dims not in (None, 1) or not extents:
                continue
            values = {n: ln.constexprs.get(n, defaults.get(n)) for n in extents}
            known = {n: v for n, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}
            if not known or (tiled and len(known) < len(values)):
                continue
            tile = math.prod(known.values()) if tiled else max(known.values())
            if tile < smallest:
                shown = known if tiled else {n: v for n, v in known.items() if v == tile}
                named = " x ".join(f"{n}={v}" for n, v in shown.items())
                hits.append(Hit(ln.line, f"{k.name} moves {named} elements a program: a launch grid of one "
                                         f"tiny program per {tile} elements, where the targets' elementwise search "
                                         f"spaces hold blocks of {smallest} to {max(ctx.elementwise_blocks)}",
                                kernel=k.name))
    return hits


# --------------------------------------------------------------------------------------
# block_pointers
# --------------------------------------------------------------------------------------


@_register
def lint_block_io_for_dot(ctx: LintContext) -> list[Hit]:
    """A tl.dot kernel that loads its operands with plain pointer arithmetic only."""
    hits = []
    for k in ctx.facts.kernels:
        if not k.dots or k.block_ptr_lines or k.descriptor_lines:
            continue
        if any(a.kind != "pointer" for a in k.accesses):
            continue
        api = ctx.triton_api.get("preferred") or "tensor_descriptor"
        hits.append(Hit(k.line, f"{k.name} feeds tl.dot from plain pointer loads; use "
                                f"{'tensor descriptors' if api == 'tensor_descriptor' else 'block pointers'} "
                                "so the loads become 2D block reads", kernel=k.name))
    return hits


@_register
def lint_block_ptr_api(ctx: LintContext) -> list[Hit]:
    """tl.make_block_ptr in a kernel (the rule applies only to Triton versions that removed it)."""
    return [Hit(line, f"{k.name} uses tl.make_block_ptr, which Triton {ctx.triton_api.get('version') or '>=3.9'} "
                      "no longer has", kernel=k.name)
            for k in ctx.facts.kernels for line in k.block_ptr_lines]


@_register
def lint_boundary_check_indices(ctx: LintContext) -> list[Hit]:
    """``boundary_check=`` given booleans instead of dimension indices."""
    hits = []
    for node in walk(ctx.tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if (kw.arg == "boundary_check" and isinstance(kw.value, (ast.Tuple, ast.List))
                        and any(isinstance(e, ast.Constant) and isinstance(e.value, bool) for e in kw.value.elts)):
                    hits.append(Hit(node.lineno, f"boundary_check={ast.unparse(kw.value)} uses booleans; it takes "
                                                 "dimension indices such as (0, 1)"))
    return hits


@_register
def lint_mixed_ptr_apis(ctx: LintContext) -> list[Hit]:
    """Block pointers and tensor descriptors in the same kernel."""
    return [Hit(min(k.block_ptr_lines + k.descriptor_lines), f"{k.name} mixes tl.make_block_ptr and "
                                                              "tl.make_tensor_descriptor", kernel=k.name)
            for k in ctx.facts.kernels if k.block_ptr_lines and k.descriptor_lines]


# --------------------------------------------------------------------------------------
# algorithmic, fusion
# --------------------------------------------------------------------------------------


@_register
def lint_exp_not_exp2(ctx: LintContext) -> list[Hit]:
    """tl.exp in a kernel (one hit per kernel, at its first use)."""
    return [Hit(k.exp_lines[0], f"{k.name} uses tl.exp ({len(k.exp_lines)}x); exp2 with a folded log2(e) "
                                "scale saves a multiply per element", kernel=k.name)
            for k in ctx.facts.kernels if k.exp_lines]


@_register
def lint_fusion_candidate(ctx: LintContext) -> list[Hit]:
    """Two launches in one function where a tensor allocated there is written by one kernel and
    read by a later one (a stored intermediate that fusion could remove)."""
    hits = []
    by_fn: dict[str, list[Any]] = {}
    for ln in ctx.facts.launches:
        by_fn.setdefault(ln.function or "", []).append(ln)
    allocs = _allocations(ctx.tree)
    atomics = _atomic_targets(ctx)
    branches = _branches(ctx.tree)
    for fn, launches in by_fn.items():
        names = allocs.get(fn.split(".")[-1], set())
        for i, first in enumerate(launches):
            # a buffer the first kernel only adds into atomically holds a reduction across its
            # programs (a GEMM's row sums): no single program has the result to fuse onward
            summed = {arg for param, arg in _bound_args(ctx, first).items() if param in atomics.get(first.kernel, {})}
            for later in launches[i + 1:]:
                if _exclusive(branches.get(first.line, {}), branches.get(later.line, {})):
                    continue  # alternatives (`if row_mode: ... else: ...`): one of them runs a call
                shared = sorted((names & set(first.args) & set(later.args)) - summed)
                if shared:
                    hits.append(Hit(later.line, f"{first.kernel} writes {', '.join(shared)} and {later.kernel} reads it "
                                                "back: fusing them removes the round trip through memory",
                                    kernel=later.kernel))
                    break
    return hits


def _branches(tree: ast.Module) -> dict[int, dict[int, str]]:
    """Per source line, the ``if`` statements outside any loop it sits under and in which branch
    (``"body"`` or ``"orelse"``), by the statement's ``id``."""
    out: dict[int, dict[int, str]] = {}
    looped = {id(n) for loop in walk(tree) if isinstance(loop, (ast.For, ast.While, ast.AsyncFor))
              for n in walk(loop) if n is not loop}
    for node in walk(tree):
        if isinstance(node, ast.If) and id(node) not in looped:  # in a loop, each trip may take another
            for branch in ("body", "orelse"):
                for stmt in getattr(node, branch):
                    for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                        out.setdefault(line, {})[id(node)] = branch
    return out


def _exclusive(a: dict[int, str], b: dict[int, str]) -> bool:
    """Whether two lines under the ``if`` statements ``a`` and ``b`` (``_branches``) lie in
    different branches of one of them, so that no call runs both."""
    return any(branch != b[node] for node, branch in a.items() if node in b)


_ALLOCATORS = ("torch.empty", "torch.zeros", "torch.empty_like", "torch.zeros_like", "torch.full")


def _allocations(tree: ast.Module, allocators: tuple[str, ...] = _ALLOCATORS) -> dict[str, set[str]]:
    """Per function name: the local names assigned from one of ``allocators``."""
    out: dict[str, set[str]] = {}
    for fn in walk(tree):
        if isinstance(fn, ast.FunctionDef):
            names = set()
            for a in walk(fn):
                if (isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                        and ast.unparse(a.value.func) in allocators):
                    names |= {t.id for t in a.targets if isinstance(t, ast.Name)}
            out[fn.name] = names
    return out


# --------------------------------------------------------------------------------------
# persistent / stream-K, descriptors
# --------------------------------------------------------------------------------------


def _root_param(node: ast.AST, params: list[str], env: dict[str, ast.AST], depth: int = 0) -> str | None:
    """The kernel pointer parameter an address expression is built from (``y_ptr + offs`` ->
    ``y_ptr``), following simple local assignments."""
    if depth > 6:
        return None
    if isinstance(node, ast.Name):
        if node.id in params:
            return node.id
        if node.id in env:
            return _root_param(env[node.id], params, env, depth + 1)
        return None
    if isinstance(node, ast.BinOp):
        return _root_param(node.left, params, env, depth + 1) or _root_param(node.right, params, env, depth + 1)
    if isinstance(node, ast.Subscript):
        return _root_param(node.value, params, env, depth + 1)
    return None


def _atomic_targets(ctx: LintContext) -> dict[str, dict[str, int]]:
    """Kernel -> {pointer parameter it adds into with ``tl.atomic_add``: the first such line}."""
    fns = {n.name: n for n in walk(ctx.tree) if isinstance(n, ast.FunctionDef)}
    out: dict[str, dict[str, int]] = {}
    for k in ctx.facts.kernels:
        fn = fns.get(k.name)
        if fn is None:
            continue
        params = [p.name for p in k.params]
        env = {}
        for a in walk(fn):
            if isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name):
                env[a.targets[0].id] = a.value
        for c in walk(fn):
            if isinstance(c, ast.Call) and ast.unparse(c.func) in ("tl.atomic_add", "triton.language.atomic_add"):
                root = _root_param(c.args[0], params, env) if c.args else None
                if root:
                    out.setdefault(k.name, {}).setdefault(root, c.lineno)
    return out


def _bound_args(ctx: LintContext, launch: Any) -> dict[str, str]:
    """Kernel parameter -> the host expression a launch passes it (positional and keyword)."""
    kernel = next((k for k in ctx.facts.kernels if k.name == launch.kernel), None)
    bound = dict(zip([p.name for p in kernel.params], launch.args)) if kernel is not None else {}
    bound.update(launch.kwargs)
    return bound


@_register
def lint_atomic_output_zeroed(ctx: LintContext) -> list[Hit]:
    """A kernel that accumulates with tl.atomic_add into a buffer the launching function
    allocated with torch.empty / empty_like (uninitialised memory)."""
    hits = []
    empties = _allocations(ctx.tree, ("torch.empty", "torch.empty_like", "torch.empty_strided"))
    for k in ctx.facts.kernels:
        targets = _atomic_targets(ctx).get(k.name)
        if not targets:
            continue
        for ln in ctx.facts.launches:
            if ln.kernel != k.name:
                continue
            allocated = empties.get((ln.function or "").split(".")[-1], set())
            bound = _bound_args(ctx, ln)
            for param, line in targets.items():
                arg = bound.get(param)
                if arg in allocated:
                    hits.append(Hit(ln.line, f"{k.name} accumulates into {param} with tl.atomic_add (line {line}), but "
                                             f"{arg} comes from torch.empty: start from torch.zeros",
                                    kernel=k.name))
    return hits


@_register
def lint_descriptor_boundary_check(ctx: LintContext) -> list[Hit]:
    """``boundary_check=`` given to a tensor-descriptor load or store (descriptors take none)."""
    hits = []
    kernels = {k.name: k for k in ctx.facts.kernels}
    for fn in walk(ctx.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in kernels):
            continue
        descs = set()
        for a in walk(fn):
            if (isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                    and ast.unparse(a.value.func).endswith("make_tensor_descriptor")):
                descs |= {t.id for t in a.targets if isinstance(t, ast.Name)}
        for c in walk(fn):
            if (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("load", "store")
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in descs
                    and any(kw.arg == "boundary_check" for kw in c.keywords)):
                hits.append(Hit(c.lineno, f"{fn.name}: {c.func.value.id}.{c.func.attr}(..., boundary_check=...) - "
                                          "tensor descriptors take no boundary_check (out-of-bounds reads are padded)",
                                kernel=fn.name))
    return hits


#: Calls whose result mixes the lanes of a tile (a masked-off lane can reach a kept one):
#: reductions, scans, sorts, gathers and products, as ``tl.<name>`` or a tensor method.
_LANE_MIXING = frozenset({
    "sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "cumsum", "cumprod",
    "associative_scan", "sort", "flip", "gather", "histogram", "dot", "dot_scaled", "softmax",
})
#: Calls that write memory: the value lanes their mask lets through must be defined.
_WRITES = {"store": 1, "atomic_add": 1, "atomic_max": 1, "atomic_min": 1, "atomic_and": 1, "atomic_or": 1,
           "atomic_xor": 1, "atomic_xchg": 1}


class _MaskedLanes:
    """Where the masked-off lanes of ``tl.load(ptr, mask=m)`` without ``other`` (undefined values)
    can reach a result in one kernel ``fn``: a lane-mixing call (``_LANE_MIXING``: a sum, max,
    dot, scan, ...), a write whose mask does not imply the load's (``_WRITES``), or a pointer
    another load or store follows. Statements are walked in order (a loop body twice, for the
    values it carries round), tracking which variables hold such lanes and under which load
    masks; ``tl.where(cond, x, ...)`` with a condition that implies the mask clears ``x``'s.
    Masks are compared as sets of ``&``-conjuncts (names of simple assignments expanded)."""

    def __init__(self, fn: ast.FunctionDef) -> None:
        self.fn = fn
        self.defs: dict[str, ast.expr] = {}
        counts: dict[str, int] = {}
        for node in walk(fn):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        counts[t.id] = counts.get(t.id, 0) + 1
                        if isinstance(node, ast.Assign) and node.value is not None:
                            self.defs[t.id] = node.value
        self.defs = {k: v for k, v in self.defs.items() if counts.get(k) == 1}
        #: each masked load without ``other`` by line, and the first place its undefined lanes
        #: reach a result
        self.loads: dict[int, str] = {}
        self.reached: dict[int, str] = {}

    # -- masks
    def conjuncts(self, expr: ast.expr | None, depth: int = 0) -> frozenset[str]:
        if expr is None:
            return frozenset()
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitAnd):
            return self.conjuncts(expr.left, depth) | self.conjuncts(expr.right, depth)
        if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
            return frozenset().union(*(self.conjuncts(v, depth) for v in expr.values))
        if isinstance(expr, ast.Name) and expr.id in self.defs and depth < 8:
            return self.conjuncts(self.defs[expr.id], depth + 1)
        return frozenset({ast.unparse(expr)})

    def uncovered(self, taint: dict[int, frozenset[str]], mask: ast.expr | None) -> dict[int, frozenset[str]]:
        """The loads of ``taint`` whose mask the write/select mask ``mask`` does not imply."""
        kept = self.conjuncts(mask)
        return {line: m for line, m in taint.items() if not (m and m <= kept)}

    # -- expressions: {load line: the load mask's conjuncts} of the undefined lanes they hold
    @staticmethod
    def _arg(call: ast.Call, name: str, position: int) -> ast.expr | None:
        """The argument ``name`` (by keyword or at ``position``); ``None`` where it is absent or the
        literal ``None`` (TorchInductor writes ``tl.load(ptr, None)`` for an unmasked load)."""
        got = next((kw.value for kw in call.keywords if kw.arg == name),
                   call.args[position] if len(call.args) > position else None)
        return None if isinstance(got, ast.Constant) and got.value is None else got

    def reach(self, taint: dict[int, frozenset[str]], where: str) -> None:
        for line in taint:
            self.reached.setdefault(line, where)

    def taint(self, expr: ast.AST | None, env: dict[str, dict[int, frozenset[str]]]) -> dict[int, frozenset[str]]:
        if expr is None:
            return {}
        if isinstance(expr, ast.Name):
            return dict(env.get(expr.id, {}))
        if isinstance(expr, ast.Call):
            return self._call(expr, env)
        out: dict[int, frozenset[str]] = {}
        for child in ast.iter_child_nodes(expr):
            out.update(self.taint(child, env))
        return out

    def _call(self, call: ast.Call, env: dict[str, dict[int, frozenset[str]]]) -> dict[int, frozenset[str]]:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        receiver = self.taint(func.value, env) if isinstance(func, ast.Attribute) else {}
        args = {}
        for a in [*call.args, *(kw.value for kw in call.keywords)]:
            args.update(self.taint(a, env))
        if name == "load":
            ptr = self.taint(self._arg(call, "pointer", 0), env)
            mask = self._arg(call, "mask", 1)
            follow = self.uncovered(ptr, mask)
            self.reach(follow, f"the pointer of the load at line {call.lineno}")
            if mask is not None and self._arg(call, "other", 2) is None:
                self.loads[call.lineno] = ast.unparse(call)[:80]
                return {call.lineno: self.conjuncts(mask)}
            return {}
        if name == "where" and call.args:
            cond = call.args[0]
            chosen = self.taint(call.args[1], env) if len(call.args) > 1 else {}
            other = self.taint(call.args[2], env) if len(call.args) > 2 else {}
            return {**self.uncovered(chosen, cond), **other, **self.taint(cond, env)}
        if name in _WRITES:
            ptr = self.taint(self._arg(call, "pointer", 0), env)
            value = self.taint(self._arg(call, "value" if name == "store" else "val", _WRITES[name]), env)
            mask = self._arg(call, "mask", 2)
            what = f"the {name} at line {call.lineno}" + (" (no mask)" if mask is None else ", whose mask does not imply the load's")
            self.reach(self.uncovered({**ptr, **value}, mask), what)
            return {}
        if name in _LANE_MIXING and (args or receiver):
            self.reach({**args, **receiver}, f"tl.{name} at line {call.lineno}")
            return {}
        return {**receiver, **args}

    # -- statements
    def block(self, body: list[ast.stmt], env: dict[str, dict[int, frozenset[str]]]) -> dict[str, dict[int, frozenset[str]]]:
        for stmt in body:
            env = self.statement(stmt, env)
        return env

    @staticmethod
    def _merge(*envs: dict[str, dict[int, frozenset[str]]]) -> dict[str, dict[int, frozenset[str]]]:
        out: dict[str, dict[int, frozenset[str]]] = {}
        for e in envs:
            for k, v in e.items():
                out[k] = {**out.get(k, {}), **v}
        return out

    def statement(self, stmt: ast.stmt, env: dict[str, dict[int, frozenset[str]]]) -> dict[str, dict[int, frozenset[str]]]:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            value = self.taint(stmt.value, env)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            env = dict(env)
            for t in targets:
                for n in walk(t):
                    if isinstance(n, ast.Name):
                        env[n.id] = value  # a tuple unpacked: each part may hold them
            return env
        if isinstance(stmt, ast.AugAssign):
            value = self.taint(stmt.value, env)
            if isinstance(stmt.target, ast.Name):
                return {**env, stmt.target.id: {**env.get(stmt.target.id, {}), **value}}
            return env
        if isinstance(stmt, (ast.For, ast.While)):
            if isinstance(stmt, ast.While):
                self.taint(stmt.test, env)
            else:
                self.taint(stmt.iter, env)
            once = self.block(stmt.body, env)
            twice = self.block(stmt.body, self._merge(env, once))  # what one trip carries into the next
            return self.block(stmt.orelse, self._merge(env, once, twice))
        if isinstance(stmt, ast.If):
            self.taint(stmt.test, env)
            return self._merge(self.block(stmt.body, env), self.block(stmt.orelse, env))
        if isinstance(stmt, ast.With):
            return self.block(stmt.body, env)
        if isinstance(stmt, ast.Return):
            self.reach(self.taint(stmt.value, env), f"the value returned at line {stmt.lineno}")
            return env
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.taint(child, env)
        return env

    def run(self) -> list[tuple[int, str, str]]:
        """(load line, load text, where its undefined lanes first reach a result), by line."""
        self.block(self.fn.body, {})
        return sorted((line, self.loads[line], where) for line, where in self.reached.items() if line in self.loads)


@_register
def lint_masked_load_without_other(ctx: LintContext) -> list[Hit]:
    """``tl.load(ptr, mask=...)`` (or a positional mask) with no ``other`` value, in a kernel,
    whose masked-off lanes (undefined) can reach a result (``_MaskedLanes``): a reduction, dot,
    scan or sort over the tile, a store or atomic whose mask does not imply the load's, or a
    pointer. A load only ever stored back under its own mask (an elementwise kernel) is fine:
    its undefined lanes are never written."""
    kernels = {k.name for k in ctx.facts.kernels}
    hits: list[Hit] = []
    for fn in walk(ctx.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in kernels):
            continue
        for line, text, where in _MaskedLanes(fn).run():
            hits.append(Hit(line, f"{fn.name}: `{text}` masks lanes without `other`, and its masked-off lanes "
                                  f"(undefined values) reach {where}", kernel=fn.name))
    return hits


def _loads_and_stores(fn: ast.FunctionDef) -> tuple[dict[str, ast.AST], list[ast.Call], list[ast.Call]]:
    """A kernel's simple local assignments (name -> its last value) and its ``tl.load`` and
    ``tl.store`` calls."""
    env: dict[str, ast.AST] = {}
    loads: list[ast.Call] = []
    stores: list[ast.Call] = []
    for node in walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            env[node.targets[0].id] = node.value
        elif isinstance(node, ast.Call) and _call_arg(node, 0, "pointer") is not None:
            name = ast.unparse(node.func)
            if name in ("tl.load", "triton.language.load"):
                loads.append(node)
            elif name in ("tl.store", "triton.language.store"):
                stores.append(node)
    return env, loads, stores


def _call_arg(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    """The argument at ``position`` or named ``keyword``, else ``None``."""
    if len(call.args) > position and not any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _reaches(node: ast.AST, env: dict[str, ast.AST], targets: set[int], seen: set[str] | None = None) -> bool:
    """Whether ``node``, following simple local assignments (each name once), contains one of
    the nodes whose ``id()`` is in ``targets``."""
    seen = set() if seen is None else seen
    for sub in ast.walk(node):
        if id(sub) in targets:
            return True
        if isinstance(sub, ast.Name) and sub.id in env and sub.id not in seen:
            seen.add(sub.id)
            if _reaches(env[sub.id], env, targets, seen):
                return True
    return False


@_register
def lint_indirect_read_modify_write(ctx: LintContext) -> list[Hit]:
    """A kernel that loads from an address built from a vector of values it loaded (indices read
    from memory, one per lane), and stores back to that same address a value computed from what
    it loaded there (``cur = tl.load(out + idx); tl.store(out + idx, cur + v)``) instead of
    ``tl.atomic_add``: lanes or programs that meet the same index lose each other's updates.
    Triton's interpreter runs programs one after another, so a collision between programs never
    shows there. A base loaded once per program (a segment's start, a pointer from an array)
    updated at a block of offsets is each program's own block, not flagged."""
    kernels = {k.name for k in ctx.facts.kernels}
    hits: list[Hit] = []
    for fn in walk(ctx.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in kernels):
            continue
        env, loads, stores = _loads_and_stores(fn)
        aranges = {id(n) for n in ast.walk(fn) if isinstance(n, ast.Call)
                   and ast.unparse(n.func) in ("tl.arange", "triton.language.arange")}
        # loads of one value per lane: their address moves with tl.arange
        lane_loads = {id(c) for c in loads if _reaches(_call_arg(c, 0, "pointer"), env, aranges)}  # type: ignore[arg-type]
        for store in stores:
            address = _call_arg(store, 0, "pointer")
            value = _call_arg(store, 1, "value")
            if address is None or value is None or not _reaches(address, env, lane_loads):
                continue  # an address no per-lane loaded value moves (a block of offsets, a loaded base)
            text = ast.unparse(address)
            same = {id(c) for c in loads if ast.unparse(_call_arg(c, 0, "pointer")) == text}  # type: ignore[arg-type]
            if same and _reaches(value, env, same):
                hits.append(Hit(store.lineno, f"{fn.name}: `{text}` is read, updated and stored back at an address "
                                              "built from indices loaded per lane, without an atomic: programs (or "
                                              "lanes) meeting the same index lose updates", kernel=fn.name))
    return hits


@_register
def lint_capped_grid_without_loop(ctx: LintContext) -> list[Hit]:
    """A launch whose grid caps a count of tiles with ``min(...)`` (``min(triton.cdiv(n, BLOCK),
    512)``) for a kernel with no loop: each program handles one tile, so where the cap binds the
    tiles past it are never run and that part of the output is never written. A persistent kernel
    loops over the tiles its capped grid leaves (``for tile in range(pid, n_tiles,
    tl.num_programs(0))``). The reduced sizes the interpreter checks usually stay under the cap."""
    import re

    hits: list[Hit] = []
    loopless = {k.name for k in ctx.facts.kernels if not k.loops}
    for ln in ctx.facts.launches:
        grid = ln.grid or ""
        if ln.kernel in loopless and re.search(r"(?<![\w.])min\(", grid) and any(op in grid for op in ("cdiv", "//")):
            hits.append(Hit(ln.line, f"{ln.kernel} has no loop, but its grid `{grid}` caps the number of tiles with "
                                     "min(): where the cap binds, the tiles past it are never computed", kernel=ln.kernel))
    return hits
