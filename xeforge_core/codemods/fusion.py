"""fusion codemod: fewer launches, and intermediates that never reach global memory.

Six rewrites, tried in this order on every host function, each as often as it applies:

0. **Materialised attention** (:mod:`xeforge_core.codemods.fusion_attention`): a score kernel
   (``Q K^T``), a row softmax and a ``P V`` kernel that pass the ``Sq x Sk`` scores through
   global memory become one online-softmax kernel that keeps them on the chip.
1. **Same-grid chains** (:mod:`xeforge_core.codemods.fusion_chain`): consecutive launches with
   the same grid (a multi-pass softmax or normalisation over rows, an elementwise chain over
   flat blocks) become one kernel; the tensors they exchange become locals or are recomputed.
2. **Epilogues** (:mod:`xeforge_core.codemods.fusion_epilogue`): an elementwise kernel that
   reads what the kernel before it stored (bias, activation, scale, residual add after a GEMM)
   runs in that kernel's epilogue, on its output tile, before the store.
3. **Prologues** (:mod:`xeforge_core.codemods.fusion_prologue`): a straight-line gather kernel
   (an im2col) whose 2-D tile store the next kernel reads element for element in one load (a
   GEMM's operand) runs inside that load, on the tile it reads: an implicit GEMM.
4. **Row-sum epilogues** (:mod:`xeforge_core.codemods.fusion_reduce`): a kernel that sums the
   rows of what a tile kernel stored (a GEMM's row sums) gets them from the tiles' partial sums,
   added atomically in the producer's epilogue; the full-size intermediate is never stored.
5. **Launch batching** (:mod:`xeforge_core.codemods.fusion_batch`): a host loop launching the
   same kernel once per batch element becomes one launch with a batch axis in the grid.

Each leaves what it does not recognise untouched and says why. The fused module is proven by
the verifier like any candidate before the rules engine proposes it as the stage's result
(knowledge rules ``fuse_when_intermediate_disappears``, ``gemm_needs_2d_tiles``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst

from xeforge_core.codemods.common import (
    CodemodResult,
    code_of,
    is_kernel,
    not_applicable,
    parse_kernels,
    still_parses,
)
from xeforge_core.codemods.fusion_attention import attention_step
from xeforge_core.codemods.fusion_batch import batch_step
from xeforge_core.codemods.fusion_chain import ChainPlan, FusionError, launch_args, plan_chain
from xeforge_core.codemods.fusion_epilogue import epilogue_step
from xeforge_core.codemods.fusion_prologue import prologue_step
from xeforge_core.codemods.fusion_reduce import reduction_step
from xeforge_core.codemods.host import (
    TORCH_TO_TL,
    HostFacts,
    Launch,
    dead_allocations,
    drop_unused_literals,
    fix_commas,
    host_facts,
    host_functions,
    launch_counts,
    movable,
    option_args,
)
from xeforge_core.codemods.kernel_edit import (
    TL_LOAD,
    TL_STORE,
    assigned_names,
    base_and_offset,
    call_arg,
    calls_named,
    read_names,
)
from xeforge_core.codemods.registry import CodemodSettings, register

NAME = "fusion"
MAX_ROUNDS = 8


def _stored_loaded(fn: cst.FunctionDef) -> tuple[set[str], set[str]]:
    """Pointer parameters a kernel stores through and loads through."""
    params = {p.name.value for p in fn.params.params}
    stored: set[str] = set()
    loaded: set[str] = set()
    for names, out in ((TL_STORE, stored), (TL_LOAD, loaded)):
        for call in calls_named(fn.body, names):
            ptr = call_arg(call, 0, "pointer")
            if ptr is None:
                continue
            split = base_and_offset(ptr, params)
            if split is not None:
                out.add(split[0])
            else:
                out |= read_names(ptr) & params
    return stored, loaded


def chains(facts: HostFacts) -> list[list[Launch]]:
    """Runs of two or more launches with the same grid and only assignments between them."""
    out: list[list[Launch]] = []
    run: list[Launch] = []
    for lc in facts.launches:
        if run:
            prev = run[-1]
            between = facts.body[prev.index + 1:lc.index]
            same = code_of(prev.grid).replace(" ", "") == code_of(lc.grid).replace(" ", "")
            rebinds = set()
            for s in between:
                rebinds |= set(assigned_names(s))
            used = set()
            for r in run:
                used |= read_names(r.call)
            if same and movable(between) and not (rebinds & used):
                run.append(lc)
                continue
            if len(run) > 1:
                out.append(run)
            run = []
        run = [lc]
    if len(run) > 1:
        out.append(run)
    return out


def temporaries(facts: HostFacts, chain: list[Launch], kernels: dict[str, cst.FunctionDef]
                ) -> tuple[dict[str, str], str | None]:
    """The host tensors only these launches use (``name -> tl dtype``), or the reason the
    chain cannot be fused (a tensor written by one launch and read by another that is also
    used elsewhere, or one whose dtype is not known)."""
    launch_idx = {lc.index for lc in chain}
    roots: dict[str, set[str]] = {}
    for lc in chain:
        for p, a in lc.bound.items():
            if isinstance(a.value, cst.Name):
                roots.setdefault(facts.root(a.value.value), set()).add(f"{lc.kernel}.{p}")
    temps: dict[str, str] = {}
    written: dict[str, list[int]] = {}
    read: dict[str, list[int]] = {}
    for i, lc in enumerate(chain):
        stored, loaded = _stored_loaded(kernels[lc.kernel])
        for p, a in lc.bound.items():
            if not isinstance(a.value, cst.Name):
                continue
            root = facts.root(a.value.value)
            if p in stored:
                written.setdefault(root, []).append(i)
            if p in loaded:
                read.setdefault(root, []).append(i)
    for root in roots:
        alloc = facts.allocs.get(root)
        if alloc is None or alloc.alias_of is not None:
            continue
        aliases = {n for n in facts.allocs if facts.root(n) == root}
        skip = set(launch_idx) | {facts.body.index(facts.allocs[n].stmt) for n in aliases}
        if any(facts.reads_outside(n, skip, data_only=True) for n in aliases):
            continue
        if root not in written:
            continue
        dtype = facts.dtype_of(root)
        tl_dtype = TORCH_TO_TL.get(dtype or "") or (dtype if dtype and dtype.endswith(".dtype") else None)
        if tl_dtype is None:
            return {}, (f"intermediate {root} has no dtype the fusion can tell from its allocation "
                        f"(`{code_of(alloc.call)}`)")
        temps[root] = tl_dtype
    for root, readers in read.items():
        if root in temps or root not in written:
            continue
        if any(r > min(written[root]) for r in readers):
            return {}, (f"{root} is written by one launch and read by a later one, and it is also used after "
                        "these launches; it has to stay in global memory")
    return temps, None


def _replace(module: cst.Module, plan_kernel: cst.FunctionDef, first_kernel: str, drop_kernels: set[str],
             stmt_edits: dict[int, Any]) -> cst.Module:
    class _T(cst.CSTTransformer):
        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef):
            if is_kernel(original) and original.name.value == first_kernel:
                return plan_kernel
            if is_kernel(original) and original.name.value in drop_kernels:
                return cst.RemoveFromParent()
            return updated

        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
            return stmt_edits.get(id(original), updated)

    return module.visit(_T())


def _apply_chain(module: cst.Module, kernels: dict[str, cst.FunctionDef], facts: HostFacts,
                 plan: ChainPlan) -> cst.Module:
    last = plan.launches[-1]
    first = plan.launches[0]
    new_call = first.call.with_changes(
        func=first.call.func.with_changes(value=cst.Name(plan.kernel.name.value)),  # type: ignore[attr-defined]
        args=launch_args(plan.params) + option_args(first))
    edits: dict[int, Any] = {id(lc.stmt): cst.RemoveFromParent() for lc in plan.launches[:-1]}
    edits[id(last.stmt)] = last.stmt.with_changes(body=[cst.Expr(new_call)])
    edits.update(dead_allocations(facts, plan.temps, {id(lc.stmt) for lc in plan.launches}))
    counts = launch_counts(module, kernels)
    drop = {lc.kernel for lc in plan.launches[1:]}
    drop = {k for k in drop if counts.get(k, 0) <= sum(1 for lc in plan.launches if lc.kernel == k)}
    first_kernel = first.kernel
    if counts.get(first_kernel, 0) > sum(1 for lc in plan.launches if lc.kernel == first_kernel):
        # the first kernel is launched elsewhere too: keep it and add the fused one before it
        return _insert_kernel(module, plan.kernel, first_kernel, drop, edits)
    return _replace(module, plan.kernel, first_kernel, drop, edits)


def _insert_kernel(module: cst.Module, kernel: cst.FunctionDef, before: str, drop: set[str],
                   edits: dict[int, Any]) -> cst.Module:
    body: list[Any] = []
    for s in module.body:
        if isinstance(s, cst.FunctionDef) and is_kernel(s) and s.name.value == before:
            body.append(kernel)
        body.append(s)
    module = module.with_changes(body=body)
    return _replace(module, kernel, kernel.name.value, drop, edits)


Step = Callable[[cst.Module, dict[str, cst.FunctionDef]], tuple[cst.Module, list[str]] | str]


def _chain_step(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> tuple[cst.Module, list[str]] | str:
    reasons: list[str] = []
    taken = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        for chain in chains(facts):
            names = ", ".join(lc.kernel for lc in chain)
            temps, why = temporaries(facts, chain, kernels)
            if why:
                reasons.append(f"launches of {names}: {why}")
                continue
            try:
                plan = plan_chain(facts, chain, kernels, temps, taken)
            except FusionError as exc:
                reasons.append(f"launches of {names}: {exc}")
                continue
            return fix_commas(_apply_chain(module, kernels, facts, plan)), plan.notes
    return "; ".join(reasons) or "no two consecutive launches share a launch grid"


def _steps() -> list[tuple[str, Step]]:
    return [("materialised attention", attention_step), ("same-grid chains", _chain_step), ("epilogues", epilogue_step),
            ("prologues", prologue_step), ("row-sum epilogues", reduction_step), ("launch batching", batch_step)]


def _shape_absent(reason: str) -> bool:
    """Whether a rewrite's reason says its shape is not in the module (``"no two consecutive
    launches ..."``), not that it found the shape and could not apply."""
    return reason.startswith("no ")


def _by_relevance(reasons: dict[str, str]) -> list[tuple[str, str]]:
    """The rewrites' reasons in the order a reader needs them: a rewrite that found its shape and
    could not apply first, then the shapes not found, the general ones (same-grid chains) before
    the one of a single pattern (materialised attention), so a shortened reason is not about
    attention on a kernel that has none."""
    order = {label: i for i, (label, _) in enumerate(_steps())}
    order["materialised attention"] = len(order)
    return sorted(reasons.items(), key=lambda kv: (_shape_absent(kv[1]), order.get(kv[0], 0)))


def fuse(source: str, **_: Any) -> CodemodResult:
    """Apply the fusion rewrites (module docstring) to ``source`` until none applies.

    Returns a :class:`CodemodResult`: changed with one note per rewrite, or not applicable with
    the reason each rewrite gave. Never executes the code; raises nothing on bad input.
    """
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    module, _ = found
    notes: list[str] = []
    last_reasons: dict[str, str] = {}
    for _round in range(MAX_ROUNDS):
        kernels = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef) and is_kernel(s)}
        progressed = False
        for label, step in _steps():
            try:
                got = step(module, kernels)
            except FusionError as exc:
                got = str(exc)
            if isinstance(got, str):
                last_reasons[label] = got
                continue
            module, step_notes = got
            notes.extend(step_notes)
            progressed = True
            break
        if not progressed:
            break
    module = drop_unused_literals(module)
    code = module.code
    if not notes or code == source:
        return not_applicable(NAME, source, "; ".join(f"{k}: {v}" for k, v in _by_relevance(last_reasons))
                              or "nothing to fuse")
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    notes.extend(f"not fused ({k}): {v}" for k, v in last_reasons.items() if v and not _shape_absent(v))
    return CodemodResult(codemod=NAME, source=code, changed=True, notes=notes)




@register("fusion", "fuse launches whose intermediate tensor then disappears")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return fuse(source, target=settings.target, arch=settings.arch, profile=settings.profile,
                search_space=settings.search_space, options=settings.options, problem=settings.problem)
