"""What kind of kernel the autotuning codemod is looking at, and which of its block sizes it may tune.

A kernel's kind comes from its body (libcst, static):

* ``gemm``: it calls ``tl.dot`` (GEMMs, GEMM epilogues, convolutions written as implicit GEMM);
* ``scan``: it calls ``tl.cumsum`` / ``tl.cumprod`` / ``tl.associative_scan``;
* ``row``: it reduces a block over an axis (``tl.sum``, ``tl.max``, ``tl.min``, ``tl.argmax``,
  ``tl.argmin``, ``tl.reduce``, ``tl.xor_sum``): row and column reductions, normalisations,
  softmax, losses, pooling windows reduced with ``tl.max``/``tl.sum``;
* ``elementwise``: none of these: one output per lane (activations, scalings, pooling or
  convolution written as a gather loop per output).

Each kind draws its configs from the target's search space of the same name (``gemm``,
``row``, ``elementwise``; a scan uses ``row``: a scan block is a row held in registers).

A block-size parameter (``BLOCK``, ``BLOCK_SIZE``, ``XBLOCK``, ``TILE_N``, ...) of a non-GEMM
kernel is tuned only where any power of two keeps the kernel correct:

* every ``tl.load``/``tl.store`` of the kernel is masked (a mask or ``boundary_check``): an
  unmasked kernel is correct only for the block its author sized the input for;
* and the block is either a loop step (``for off in range(0, n, BLOCK)``: any step covers the
  row) or a tile the launch grid counts (``triton.cdiv(n, BLOCK)``, checked by the planner
  against the grid), never a block that must cover a whole row in one pass (a scan or a
  one-pass row reduction over ``tl.arange(0, BLOCK)`` needs ``BLOCK >= width``; those stay as
  the launch passes them, derived blocks such as ``triton.next_power_of_2(n_cols)`` included).

Where no block may be tuned, the configs tune ``num_warps`` (and ``num_stages``) only, from the
warp counts of the kind's space: the launch still passes its block sizes, derived or literal.

Around the launch's own config, :func:`warp_neighbours` adds the same tile at the other warp
counts that give each thread an element (1 to 16; one count either side where the tile is not
known): right after it where the launch gives the tile more threads than elements (a 64-wide block
at 4 warps gives every element to two threads, half the warps doing nothing; a pooling kernel
whose grid axis tiles a 62-wide output row), a config no space of fixed tiles offers; after the
space's configs otherwise.

Static pruning (:func:`prune_for_registers`) drops configs whose block gives each thread more
values than the register budget holds: ``BLOCK / (num_warps * lanes)`` values a live tile,
times the tiles the kernel keeps live (its loads plus one result), above ``MAX_TILE_REGS`` 32-bit
registers a thread (half of the 255 NVIDIA allows a thread; project heuristic: spills past it),
and warp counts above the profile's ``max_warps_per_workgroup``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from xeforge_core.codemods.common import dotted_name, is_constexpr_param

#: Block-size parameter names of non-GEMM kernels (Triton tutorials, Inductor and published
#: solutions spell them these ways).
BLOCK_NAME = re.compile(r"^(?:[XYZR]?BLOCK(?:_[A-Z0-9_]+)?|[A-Z0-9_]*_BLOCK|TILE(?:_[A-Z0-9_]+)?|[A-Z0-9_]*_BLOCK_SIZE)$")
#: 32-bit registers a thread may spend on live block tiles before a config is pruned (see module docstring).
MAX_TILE_REGS = 128

#: Elements a Triton tensor (a block tile) may hold: ``TRITON_MAX_TENSOR_NUMEL`` of
#: ``triton/language/core.py`` (triton 3.6); a larger tile fails at compile time ("numel ...
#: exceeds triton maximum tensor numel").
MAX_TENSOR_NUMEL = 1 << 20

_DOT = {"dot", "dot_scaled"}
_SCAN = {"cumsum", "cumprod", "associative_scan"}
_REDUCE = {"sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum"}
_RANGES = {"range", "tl.range", "tl.static_range", "triton.language.range", "triton.language.static_range"}
_SPACE_OF = {"gemm": "gemm", "scan": "row", "row": "row", "elementwise": "elementwise"}


@dataclass(frozen=True)
class KernelShape:
    """What the autotuning codemod needs to know about one kernel body.

    ``kind``: gemm / scan / row / elementwise (module docstring); ``space_kind``: the search
    space it draws from; ``blocks``: its block-size constexpr parameters in order; ``steps``:
    those used as a loop step; ``masked``: every load and store is masked; ``tiles_live``: loads
    plus one (live tiles, for the register estimate)."""

    kind: str
    space_kind: str
    blocks: tuple[str, ...]
    steps: frozenset[str] = field(default_factory=frozenset)
    masked: bool = True
    tiles_live: int = 2

    def tunable_candidates(self) -> tuple[list[str], str]:
        """Blocks that may be tuned if the launch passes them as literals (steps, and blocks the
        planner then finds in the grid), with the reason when none may."""
        if self.kind == "gemm":
            return list(self.blocks), ""
        if not self.blocks:
            return [], "it has no block-size constexpr parameter"
        if not self.masked:
            return [], ("not every tl.load/tl.store is masked, so a block other than the author's could "
                        "read or write past the end")
        return list(self.blocks), ""


def _tail(call: cst.Call) -> str:
    name = dotted_name(call.func)
    return name.rsplit(".", 1)[-1] if name.startswith(("tl.", "triton.language.")) else ""


def _masked(call: cst.Call, store: bool) -> bool:
    """A load/store that cannot go out of bounds through its block: a ``mask`` (keyword, or
    positional: ``tl.load(pointer, mask, other, ...)``'s second argument, as TorchInductor writes
    its loads, ``tl.store(pointer, value, mask, ...)``'s third), or ``boundary_check``. Signatures:
    triton.language.load / triton.language.store (Triton 3.x)."""
    kws = {a.keyword.value for a in call.args if a.keyword is not None}
    if kws & {"mask", "boundary_check"}:
        return True
    positional = [a for a in call.args if a.keyword is None]
    mask_at = 2 if store else 1
    return len(positional) > mask_at and not _is_none(positional[mask_at].value)


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _block_indexed(fn: cst.FunctionDef, blocks: tuple[str, ...]) -> set[str]:
    """Names of ``fn`` whose value depends on a block: assigned (or looped) from an expression
    that reads ``tl.arange`` or a block parameter, to a fixed point."""
    from xeforge_core.codemods.kernel_edit import read_names, walk

    tainted = set(blocks)
    pairs: list[tuple[list[str], cst.CSTNode]] = []
    for node in walk(fn.body):
        if isinstance(node, cst.Assign):
            pairs.append(([n.value for t in node.targets for n in walk(t.target) if isinstance(n, cst.Name)],
                          node.value))
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and node.value is not None:
            pairs.append(([n.value for n in walk(node.target) if isinstance(n, cst.Name)], node.value))
        elif isinstance(node, cst.For):
            pairs.append(([n.value for n in walk(node.target) if isinstance(n, cst.Name)], node.iter))
    changed = True
    while changed:
        changed = False
        for targets, value in pairs:
            if "arange" in cst.Module([]).code_for_node(value) or read_names(value) & tainted:
                new = set(targets) - tainted
                if new:
                    tainted |= new
                    changed = True
    return tainted


def classify(fn: cst.FunctionDef) -> KernelShape:
    """The :class:`KernelShape` of kernel ``fn`` (module docstring). Only loads and stores whose
    pointer depends on a block (``tl.arange`` or a block parameter, through assignments) must
    be masked; a scalar store of a row's result needs none."""
    from xeforge_core.codemods.kernel_edit import read_names

    names: set[str] = set()
    steps: set[str] = set()
    masked = True
    loads = 0
    params = tuple(p.name.value for p in fn.params.params if is_constexpr_param(p) and BLOCK_NAME.match(p.name.value))
    indexed = _block_indexed(fn, params)

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal masked, loads
            tail = _tail(node)
            names.add(tail)
            if tail in {"load", "store"} and node.args:
                loads += tail == "load"
                ptr = node.args[0].value
                by_block = "arange" in cst.Module([]).code_for_node(ptr) or bool(read_names(ptr) & indexed)
                masked = masked and (_masked(node, store=tail == "store") or not by_block)
            if dotted_name(node.func) in _RANGES and len(node.args) >= 3:
                step = node.args[2].value
                if isinstance(step, cst.Name):
                    steps.add(step.value)

    fn.visit(_V())
    if names & _DOT:
        kind = "gemm"
    elif names & _SCAN:
        kind = "scan"
    elif names & _REDUCE:
        kind = "row"
    else:
        kind = "elementwise"
    if kind == "gemm":
        blocks = tuple(p.name.value for p in fn.params.params
                       if is_constexpr_param(p) and re.match(r"^BLOCK(_[A-Z0-9_]+)?$", p.name.value))
    else:
        blocks = tuple(p.name.value for p in fn.params.params
                       if is_constexpr_param(p) and BLOCK_NAME.match(p.name.value))
    return KernelShape(kind=kind, space_kind=_SPACE_OF[kind], blocks=blocks,
                       steps=frozenset(steps & set(blocks)), masked=masked, tiles_live=loads + 1)


def tile_2d_roles(tuned: list[str], steps: frozenset[str]) -> dict[str, str]:
    """``{space key: block}`` when a non-GEMM kernel's two tuned blocks are one block counted by
    the launch grid and one loop step (a mat-vec's rows a program by the K chunk of a trip):
    they take the ``tile_2d`` space's ``GRID_BLOCK`` and ``STEP_BLOCK``. Empty otherwise."""
    if len(tuned) != 2:
        return {}
    step = [b for b in tuned if b in steps]
    grid = [b for b in tuned if b not in steps]
    if len(step) != 1 or len(grid) != 1:
        return {}
    return {"GRID_BLOCK": grid[0], "STEP_BLOCK": step[0]}


def kind_configs(space: list[dict[str, Any]], tuned: list[str], roles: dict[str, str] | None = None,
                 fixed_elements: int = 1) -> list[dict[str, Any]]:
    """The kind's space configs (``{"kwargs": {"BLOCK": v}, ...}``) for a kernel: its one tuned
    block takes the space's block values; two blocks with ``roles`` (:func:`tile_2d_roles`, the
    ``tile_2d`` space) take the values of their role's key; with no tuned block, one config per
    distinct warp count (meta-parameters left to the launch). ``fixed_elements``: the product
    of the blocks the kernel fixes beside its one tuned block (an Inductor persistent reduction's
    ``R0_BLOCK``, its whole row): a space's block value counts a tile's elements, so the tuned
    block takes ``value // fixed_elements`` (at least 1) and the tile keeps the space's size."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for cfg in space:
        raw = cfg.get("kwargs") or {}
        values = list(raw.values())
        if roles:
            kwargs = {block: raw[key] for key, block in roles.items() if key in raw}
        else:
            kwargs = ({tuned[0]: max(1, int(values[0]) // max(1, fixed_elements))} if len(tuned) == 1 and values
                      else {})
        key = (tuple(kwargs.items()), cfg.get("num_warps"), cfg.get("num_stages"), cfg.get("loop_stages"))
        if key in seen:
            continue
        seen.add(key)
        out.append({"kwargs": kwargs, "num_warps": cfg.get("num_warps"), "num_stages": cfg.get("num_stages"),
                    "options": dict(cfg.get("options") or {}),
                    **({"loop_stages": cfg["loop_stages"]} if cfg.get("loop_stages") else {})})
    return out


def stage_free_key(kwargs: dict[str, Any], num_warps: int | None) -> tuple[Any, ...]:
    """What tells two configs of a non-GEMM kernel apart: their meta-parameters (in any order)
    and warps (default 4), not ``num_stages``, which pipelines only loads that feed ``tl.dot``
    (Triton's ``tl.range`` documentation): configs equal in these are one config there."""
    return tuple(sorted(kwargs.items())), num_warps or 4


#: Warp counts a non-GEMM kernel's own tile is tried at (:func:`warp_neighbours`).
WARP_LADDER = (1, 2, 4, 8, 16)


def warp_neighbours(tile: dict[str, int], own_warps: int, lanes: int) -> tuple[list[int], list[int]]:
    """The warp counts besides ``own_warps`` at which a non-GEMM kernel's own ``tile`` (its
    tuned blocks and their values, empty when the launch keeps them) is tried, as ``(first,
    later)``: where the tile has fewer elements than the own warps have threads (``lanes`` a
    warp), ``first`` are the counts that give each thread at least one element, a fix to try
    before any other tile; ``later`` are the other counts of :data:`WARP_LADDER` that do, tried
    after the search space's tiles (a cap on the configs keeps the space's first). With an
    unknown tile, one count either side of the launch's own, later. Registers and the
    work-group's warp limit are checked afterwards (:func:`prune_for_registers`)."""
    sizes = [v for v in tile.values() if isinstance(v, int) and v > 0]
    if not sizes:
        return [], [w for w in (own_warps // 2, own_warps * 2) if w in WARP_LADDER]
    elements = math.prod(sizes)
    fill = [w for w in WARP_LADDER if w != own_warps and w * lanes <= elements]
    if own_warps * lanes > elements:
        return fill, []
    return [], fill


def prune_for_registers(configs: list[dict[str, Any]], shape: KernelShape, lanes: int, max_warps: int | None,
                        fixed: dict[str, int] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Configs of a non-GEMM kernel that fit a thread's registers and the work-group's warp
    limit (module docstring), and one sentence per dropped config. ``fixed``: the kernel's block
    sizes the configs do not tune, as the launch passes them (an Inductor persistent reduction's
    ``R0_BLOCK``, the whole row): the tile is the product of both, and one over
    :data:`MAX_TENSOR_NUMEL` elements does not compile."""
    kept: list[dict[str, Any]] = []
    dropped: list[str] = []
    untuned = math.prod(fixed.values()) if fixed else 1
    for cfg in configs:
        warps = int(cfg.get("num_warps") or 4)
        sizes = [v for v in (cfg.get("kwargs") or {}).values() if isinstance(v, int)]
        # a 2-D tile holds the product of its blocks
        block = math.prod(sizes) * untuned if sizes else (untuned if fixed else None)
        label = f"{cfg.get('kwargs') or {}}/w{warps}"
        if max_warps is not None and warps > max_warps:
            dropped.append(f"{label}: {warps} warps > {max_warps} a work-group may have")
            continue
        if isinstance(block, int) and block > MAX_TENSOR_NUMEL:
            with_fixed = f" with {', '.join(f'{k}={v}' for k, v in fixed.items())}" if fixed else ""
            dropped.append(f"{label}: a tile of {block} elements{with_fixed} > the {MAX_TENSOR_NUMEL} a Triton "
                           "tensor may hold (it would not compile)")
            continue
        if isinstance(block, int):
            regs = block / (warps * lanes) * shape.tiles_live
            if regs > MAX_TILE_REGS:
                dropped.append(f"{label}: {regs:.0f} registers a thread for {shape.tiles_live} live tiles "
                               f"> {MAX_TILE_REGS} (it would spill)")
                continue
        kept.append(cfg)
    return kept, dropped


__all__ = ["BLOCK_NAME", "MAX_TENSOR_NUMEL", "MAX_TILE_REGS", "WARP_LADDER", "KernelShape", "classify", "kind_configs",
           "prune_for_registers", "stage_free_key", "tile_2d_roles", "warp_neighbours"]
