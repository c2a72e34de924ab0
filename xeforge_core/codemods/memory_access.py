"""memory_access codemod: coalesced, vectorised access sized for the target.

Three rewrites, each applied to every kernel it recognises (one per kernel):

1. **Rows** (:mod:`xeforge_core.codemods.memory_rows`): one program per row whose block covers
   the row, in one pass with every value loaded once, ``num_warps`` from the row size (the
   target's ``row`` configs).
2. **Flat blocks** (:mod:`xeforge_core.codemods.memory_flat`): an elementwise kernel over
   ``pid * BLOCK + tl.arange(0, BLOCK)`` gets the target's elementwise block size and warps
   (tiny blocks mean a huge grid of programs that each move a few hundred bytes).
3. **One program per output element** (:mod:`xeforge_core.codemods.memory_lift`): the program
   id becomes a block of ``BLOCK_P`` consecutive outputs, so neighbouring lanes read
   neighbouring addresses (a strided reduction becomes a coalesced 2-D tile).

The sizes come from the target's search space (``knowledge/search_spaces``: kinds ``row``,
``elementwise``, ``lifted``, ``lifted_2d``), so an Xe target gets Xe sizes and the H200 gets
Hopper's. Kernels none of them recognise are left unchanged with the reason.

The host code is followed as published solutions write it (:mod:`xeforge_core.codemods.host`):
launches from ``forward``, from helper functions and from ``if``/``with``/``try`` branches of
either, after asserts and ``.contiguous()`` calls; grids inline, named, or ``lambda meta:``
functions of the launch's meta-parameters. Early-return guards (``if pid >= n: return``) stay
in front of the row paths and become part of the mask of a lifted kernel. GEMM kernels
(``tl.dot``) and autotuned kernels are left to the block-pointer and autotuning stages, with
that reason.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.autotune_kinds import classify
from xeforge_core.codemods.common import (
    CodemodResult,
    code_of,
    is_autotune_decorator,
    not_applicable,
    parse_kernels,
    still_parses,
)
from xeforge_core.codemods.host import host_facts, host_functions, launch_counts
from xeforge_core.codemods.kernel_edit import Edits, all_names, insert_before_kernels, module_kernels
from xeforge_core.codemods.registry import CodemodSettings, register
from xeforge_core.codemods.spaces import SpaceError, space_configs

NAME = "memory_access"


def _row_table(target: str, arch: str | None) -> tuple[dict[int, int], str]:
    configs, sid = space_configs(target, arch, "row")
    table: dict[int, int] = {}
    for c in configs:
        block = next(iter(c["kwargs"].values()))
        table[int(block)] = int(c["num_warps"])
    return table, sid


def _apply_rows(module: cst.Module, target: str, arch: str | None, notes: list[str], reasons: list[str],
                touched: set[str]) -> cst.Module:
    from xeforge_core.codemods.memory_rows import HELPER, helper_source, launch_edit, plan_rows

    kernels = module_kernels(module)
    counts = launch_counts(module, kernels)
    kernel_edits: dict[str, cst.FunctionDef] = {}
    stmt_edits: dict[int, Any] = {}
    done: set[str] = set()
    table: dict[int, int] | None = None
    sid = ""
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        host_names = all_names(fn)
        for lc in facts.all_launches():
            if lc.kernel in done or lc.kernel in touched:
                continue
            if counts.get(lc.kernel) != 1:
                reasons.append(f"kernel {lc.kernel} is launched {counts.get(lc.kernel)} times")
                continue
            got = plan_rows(kernels[lc.kernel], lc, facts)
            if isinstance(got, str):
                reasons.append(got)
                continue
            if table is None:
                try:
                    table, sid = _row_table(target, arch)
                except SpaceError as exc:
                    reasons.append(str(exc))
                    return module
            new_fn, length, block, info, merged = got
            stmt, call = launch_edit(lc, new_fn, block, info, host_names)
            kernel_edits[lc.kernel] = new_fn
            stmt_edits[id(lc.stmt)] = cst.FlattenSentinel([
                stmt.with_changes(leading_lines=lc.stmt.leading_lines),
                lc.stmt.with_changes(body=[cst.Expr(call)], leading_lines=[])])
            done.add(lc.kernel)
            touched.add(lc.kernel)
            notes.append(f"kernel {lc.kernel}: one program per row with the block covering the row when it has at most "
                         f"{max(table)} elements (ROW_FITS: straight-line code"
                         + (f", {merged} repeated load(s) merged, so each element is read once" if merged else
                            ", the row read in one pass") + f"); {block} and num_warps from {HELPER}() (search space {sid}, kind row); "
                         f"wider rows keep the streaming loop")
    if not kernel_edits:
        return module

    module = module.visit(Edits(kernel_edits, stmt_edits))
    if table:
        module = insert_before_kernels(module, "".join(code_of(x) for x in helper_source(table, sid)), HELPER)
    return module


def improve_memory_access(source: str, *, target: str = "xpu", arch: str | None = None,
                          **_: Any) -> CodemodResult:
    """Apply the memory-access rewrites (module docstring) for ``target`` (``xpu``/``cuda``;
    ``cpu`` is the interpreter and takes cuda's sizes) and ``arch``.

    Returns a :class:`CodemodResult`: changed with one note per kernel rewritten, or not
    applicable with the reason for each kernel. Never executes the code."""
    target = "cuda" if target == "cpu" else target
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    module, kernels = found
    notes: list[str] = []
    reasons: list[str] = []
    # GEMM kernels load their operands as 2-D tiles already (block pointers and autotuning serve them);
    # an autotuned kernel's configs own its block size
    gemms = {name for name, fn in kernels.items() if classify(fn).kind == "gemm"}
    reasons += [f"kernel {name} is a GEMM (tl.dot): its operands are loaded as 2-D tiles already; the "
                "block_pointers and autotuning stages serve it" for name in gemms]
    tuned = {name for name, fn in kernels.items() if name not in gemms
             and any(is_autotune_decorator(d) for d in fn.decorators)}
    reasons += [f"kernel {name} is autotuned: its configs own the block size (the autotuning stage adds its "
                "kind's configs)" for name in tuned]
    gemms |= tuned
    touched: set[str] = set(gemms)
    from xeforge_core.codemods.memory_flat import apply_flat
    from xeforge_core.codemods.memory_lift import apply_lift

    module = apply_lift(module, target, arch, notes, reasons, touched)
    module = _apply_rows(module, target, arch, notes, reasons, touched)
    module = apply_flat(module, target, arch, notes, reasons, touched)
    code = module.code
    if not notes or code == source:
        return not_applicable(NAME, source, "; ".join(dict.fromkeys(reasons)) or "no kernel to rewrite")
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    changed = touched - gemms
    left = [r for r in dict.fromkeys(reasons) if not any(f"kernel {k} " in r or f"kernel {k}:" in r for k in changed)]
    return CodemodResult(codemod=NAME, source=code, changed=True, notes=notes + [f"not changed: {r}" for r in left])


@register("memory_access", "coalesced, vectorised loads and stores sized for the target")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return improve_memory_access(source, target=settings.target, arch=settings.arch)
