"""The autotuning stage's codemod: one entry point over the autotune rewrites.

0. :func:`~xeforge_core.codemods.autotune_options.move_launch_options`: configs that set
   ``num_warps``/``num_stages`` in their meta-parameter dict (where Triton drops them) get them as
   ``triton.Config`` keywords first; the rewrites below then start from that source;
1. :func:`~xeforge_core.codemods.autotune.add_autotune`: kernels not yet autotuned get
   ``@triton.autotune`` over their kind's search space;
2. otherwise :func:`~xeforge_core.codemods.autotune_grid.grid_follows_autotune`: an autotuned
   kernel whose fixed launch grid ignores the chosen config is made correct first;
3. otherwise :func:`~xeforge_core.codemods.autotune_extend.extend_autotune`: autotuned kernels
   get their kind's configs after their own.

When none of 1-3 applies, the reasons of the first and the last are given together (with
rewrite 0's notes where it changed the source).
"""

from __future__ import annotations

from xeforge_core.codemods.autotune import add_autotune
from xeforge_core.codemods.autotune_extend import extend_autotune
from xeforge_core.codemods.autotune_grid import grid_follows_autotune
from xeforge_core.codemods.autotune_options import move_launch_options
from xeforge_core.codemods.autotune_prune import operand_bytes
from xeforge_core.codemods.common import CodemodResult, not_applicable
from xeforge_core.codemods.registry import CodemodSettings, register


@register("autotune", "@triton.autotune over the kind's search space, pruned for the device")
def autotune_stage(source: str, settings: CodemodSettings) -> CodemodResult:
    """The rewrites of the module docstring, in order: rewrite 0 where it applies, then the first
    of 1-3 that changes the source. GEMM configs are pruned at the problem's operand width
    (``autotune_prune.operand_bytes``)."""
    moved = move_launch_options(source)
    if not moved.changed:
        return _tune(source, settings)
    tuned = _tune(moved.source, settings)
    if not tuned.changed:
        return CodemodResult(codemod="autotune", source=moved.source, changed=True,
                             notes=moved.notes + [f"not changed further: {tuned.reason}"])
    return CodemodResult(codemod=tuned.codemod, source=tuned.source, changed=True, notes=moved.notes + tuned.notes)


def _tune(source: str, settings: CodemodSettings) -> CodemodResult:
    options = {"operand_bytes": operand_bytes(settings.problem), **(settings.options or {})}
    added = add_autotune(source, target=settings.target, arch=settings.arch, search_space=settings.search_space,
                         options=options, profile=settings.profile)
    if added.changed:
        return added
    grid = grid_follows_autotune(source)
    if grid.changed:
        return grid
    extended = extend_autotune(source, target=settings.target, arch=settings.arch, profile=settings.profile,
                               options=options)
    if extended.changed:
        return extended
    reasons = [r for r in added.reason.split("; ") if not r.endswith("is already autotuned")]
    if not extended.reason.startswith(("no kernel is autotuned", "the module has no")):
        reasons.append(extended.reason)
    return not_applicable("autotune", source, "; ".join(dict.fromkeys(reasons)) or added.reason)


__all__ = ["autotune_stage"]
