"""Launch settings for an Inductor kernel: its block sizes and its launch grid.

Inductor launches a kernel through its heuristics object (``kernel.run(*args)``), which picks a
config (XBLOCK, R0_BLOCK, ...) and computes the grid at run time. A first version launches the
kernel itself, ``kernel[grid](*args, XBLOCK=..., R0_BLOCK=...)``, with block sizes chosen by
these rules (any block size is correct: every Inductor kernel masks its tails; the autotuning
stage searches them later):

* pointwise: 1024 elements per program on one axis; 32 x 32 on two; 16 x 16 x 4 on three;
* reduction (a loop over the reduced axis): up to 1024 reduced elements per step
  (``min(1024, next_power_of_2(r0_numel))``) and as many rows per program as fill a block of
  1024 elements, at most 64 (one row per program for long rows; short rows share a program
  instead of launching one program each); an outer reduction (``ReductionHint.OUTER``, the
  reduced axis is not the contiguous one) 64 rows x 8 reduced elements, so loads coalesce;
* persistent reduction (the whole reduced axis in one block): ``R0_BLOCK =
  next_power_of_2(r0_numel)``, which the kernel requires, and rows per program as above.

The grid has one program per block along each axis, on the program-id dimension the kernel
reads that axis from (``xoffset = tl.program_id(0) * XBLOCK``); a y axis that Inductor split
over program ids 1 and 2 (``tl.program_id(1) + tl.program_id(2) * tl.num_programs(1)``, for
more than 65535 blocks) is split the same way.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from xeforge_core.inductor.kernels import InductorCodeError, Kernel

#: CUDA's limit on grid dimensions y and z (CUDA C Programming Guide, "Compute Capabilities");
#: Inductor splits a larger y axis over two program ids.
MAX_GRID_YZ = 65535

#: A reduction block holds up to this many elements (rows x reduced elements) ...
ROW_BLOCK_ELEMENTS = 1024
#: ... and at most this many rows, so short rows share a program instead of one program each.
MAX_ROWS_PER_PROGRAM = 64

_POINTWISE_BLOCKS = {1: {"x": 1024}, 2: {"x": 32, "y": 32}, 3: {"x": 16, "y": 16, "z": 4}}


@dataclass
class Launch:
    """How to launch one kernel: ``setup`` host lines run before it (block sizes that depend on
    sizes), the ``grid`` expression, the ``blocks`` keyword arguments (``{"XBLOCK": "1024"}``)."""

    grid: str
    blocks: dict[str, str] = field(default_factory=dict)
    setup: list[str] = field(default_factory=list)


def _body_constants(kernel: Kernel) -> dict[str, str]:
    """``XBLOCK: tl.constexpr = 1`` and the like, set inside the kernel body."""
    out: dict[str, str] = {}
    for node in kernel.function.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = ast.unparse(node.value)
    return out


def _program_axes(kernel: Kernel) -> dict[str, tuple[int, bool]]:
    """Axis letter -> (program-id dimension, split over dims 1 and 2), from ``<a>offset = ...``."""
    axes: dict[str, tuple[int, bool]] = {}
    for node in ast.walk(kernel.function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        target = node.targets[0].id
        if len(target) != 7 or not target.endswith("offset") or target[0] not in "xyz":
            continue
        pids = [int(c.args[0].value) for c in ast.walk(node.value)
                if isinstance(c, ast.Call) and ast.unparse(c.func).endswith("program_id")
                and c.args and isinstance(c.args[0], ast.Constant)]
        split = any(isinstance(c, ast.Call) and ast.unparse(c.func).endswith("num_programs")
                    for c in ast.walk(node.value))
        if pids:
            axes[target[0]] = (min(pids), split)
    return axes


def plan_launch(kernel: Kernel, new_name: str, args: list[str]) -> Launch:
    """Block sizes and grid for launching ``kernel`` with the positional host expressions
    ``args`` (the arguments of Inductor's ``kernel.run(...)``, in order).

    Raises ``InductorCodeError`` for a kind this module does not launch (template, foreach,
    split scan, cooperative reductions) or a constexpr parameter it has no rule for."""
    if kernel.kind not in ("pointwise", "reduction", "persistent_reduction"):
        raise InductorCodeError(f"kernel {kernel.name}: Inductor's {kernel.kind} kernels are not converted yet")
    given = dict(zip(kernel.params, args))
    missing = [p for p in kernel.params[len(args):] if p not in kernel.constexpr]
    if missing:
        raise InductorCodeError(f"kernel {kernel.name}: launched without {', '.join(missing)}")
    body = _body_constants(kernel)
    free = [p for p in kernel.params[len(args):]]
    axes = [a for a in "xyz" if f"{a.upper()}BLOCK" in free or f"{a.upper()}BLOCK" in body]
    launch = Launch(grid="")
    blocks: dict[str, str] = {}
    hint = str((kernel.meta or {}).get("reduction_hint") or "")
    r_blocks = [p for p in free if p.startswith("R") and p.endswith("_BLOCK")]
    if len(r_blocks) > 1:
        raise InductorCodeError(f"kernel {kernel.name}: reductions over {len(r_blocks)} axes are not converted yet")
    for p in free:
        if p in ("XBLOCK", "YBLOCK", "ZBLOCK"):
            axis = p[0].lower()
            if kernel.kind == "pointwise":
                blocks[p] = str(_POINTWISE_BLOCKS[max(1, len(axes))].get(axis, 16))
            else:
                blocks[p] = "64" if hint == "OUTER" else "1"
        elif p in r_blocks:
            rnumel = given.get(p.replace("_BLOCK", "_numel").lower()) or body.get(p.replace("_BLOCK", "_numel").lower())
            if rnumel is None:
                raise InductorCodeError(f"kernel {kernel.name}: no reduced size for {p}")
            if kernel.kind == "persistent_reduction":
                launch.setup.append(f"{p} = triton.next_power_of_2({rnumel})")
            elif hint == "OUTER":
                blocks[p] = "8"
                continue
            else:
                launch.setup.append(f"{p} = min(1024, triton.next_power_of_2({rnumel}))")
            blocks[p] = p
        else:
            raise InductorCodeError(f"kernel {kernel.name}: no rule for its constexpr parameter {p}")
    if kernel.kind != "pointwise" and hint != "OUTER" and "XBLOCK" in blocks and r_blocks:
        # short rows: several rows per program, up to ROW_BLOCK_ELEMENTS elements per block
        r_block = blocks.get(r_blocks[0], r_blocks[0])
        launch.setup.append(f"XBLOCK = max(1, min({MAX_ROWS_PER_PROGRAM}, {ROW_BLOCK_ELEMENTS} // {r_block}))")
        blocks["XBLOCK"] = "XBLOCK"
    launch.blocks = blocks
    launch.grid = _grid(kernel, given, {**body, **blocks})
    return launch


def _grid(kernel: Kernel, given: dict[str, str], blocks: dict[str, str]) -> str:
    pid_axes = _program_axes(kernel)
    dims = ["1", "1", "1"]
    used = 1
    for axis, (pid, split) in pid_axes.items():
        numel = given.get(f"{axis}numel") or _literal_numel(kernel, axis)
        block = blocks.get(f"{axis.upper()}BLOCK")
        if numel is None or block is None:
            raise InductorCodeError(f"kernel {kernel.name}: cannot size the grid along {axis}")
        count = f"triton.cdiv({numel}, {block})"
        if split:
            dims[1] = f"min({count}, {MAX_GRID_YZ})"
            dims[2] = f"triton.cdiv({count}, {MAX_GRID_YZ})"
            used = 3
        else:
            dims[pid] = count
            used = max(used, pid + 1)
    return "(" + ", ".join(dims[:used]) + ("," if used == 1 else "") + ")"


def _literal_numel(kernel: Kernel, axis: str) -> str | None:
    for node in kernel.function.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == f"{axis}numel":
            return ast.unparse(node.value)
    return None
