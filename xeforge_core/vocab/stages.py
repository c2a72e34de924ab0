"""The one list of stages.

A **stage** is data: its id, canonical position, title, goal, what a candidate of the stage must
not change, its prompt template (``xeforge_core/prompts/<id>.md``), and the rules-engine
codemod that serves it (``None``: only an LLM or a person can do it). *Portability* is a stage
like the others, marked ``preparatory``: it runs before the nine optimization stages of
DESIGN.md when the kernel cannot run correctly as written on the run device, and its result is
verified as the baseline later speedups are measured against.

Everything else checks against this list: the knowledge base's rules (``stage``, ``codemod``),
the rules engine's codemod table, the CLI's ``--stages`` and the pages. Adding a stage is one
entry in :data:`STAGES` plus its prompt template (plus a codemod when the rules engine should
do it). This module is data only (standard library), so every layer may import it; the
engines that propose for the stages are listed in ``xeforge_core/engines/registry.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xeforge_core.errors import nearest_name_hint

PORTABILITY = "portability"


@dataclass(frozen=True)
class Stage:
    """One stage.

    ``number`` is the canonical position (0 for the preparatory portability stage, 1-9 for the
    optimization stages); ``goal`` what the stage tries to achieve; ``must_not_change`` what a
    candidate of this stage must leave as it was (on top of the prompts' common constraints);
    ``codemod`` the name of the rules-engine codemod that serves it (``None``: none does);
    ``preparatory`` marks a stage that runs before the plan, when the analysis says it must.
    """

    id: str
    number: int
    title: str
    goal: str
    must_not_change: tuple[str, ...]
    codemod: str | None = None
    preparatory: bool = False

    @property
    def template_name(self) -> str:
        """File name of the stage's prompt template under ``xeforge_core/prompts/``."""
        return f"{self.id}.md"


#: Every stage in canonical order; the preparatory portability stage first.
STAGES: tuple[Stage, ...] = (
    Stage(PORTABILITY, 0, "Portability",
          "Make the module run correctly on any device as written: no hard-coded device strings "
          "(\"xpu\", \"cuda\"), no vendor-specific synchronize or availability checks, Intel-only "
          "compile options (grf_mode) passed only on xpu, and launch grids of autotuned kernels that "
          "follow the chosen config.",
          ("the kernels (@triton.jit bodies)", "the math, the data types and the tiling"),
          "portability", preparatory=True),
    Stage("algorithmic", 1, "Algorithmic rewrites",
          "Reduce the work mathematically: common subexpressions, associativity, GEMM simplification "
          "(e.g. a GEMM followed by a sum becomes a GEMV), folding eval-mode normalisation and scales into "
          "an affine epilogue, tree reductions, exp2-based math. Use the PyTorch reference as the "
          "definition of the result.",
          ("the set of Triton kernels' memory layout conventions unless the rewrite needs it",
           "numerical behaviour beyond the spec's tolerances (watch cancellation when reordering sums)")),
    Stage("discovery", 2, "Discovery",
          "Look for work that need not be done at all: redundant launches, recomputation across calls "
          "that is legal to hoist to __init__ (weights only, never inputs), copies, casts and "
          "synchronisations that serve nothing.",
          ("results that depend on the inputs of the current call",)),
    Stage("dtype_fix", 3, "Data types",
          "Remove float64, keep fp16/bf16 operands going into tl.dot with an fp32 accumulator "
          "(acc = tl.dot(a, b, acc)), drop casts that serve nothing.",
          ("the output dtype", "the algorithm, tiling and launch structure"), "dtype_fix"),
    Stage("fusion", 4, "Fusion",
          "Fuse launches, elementwise chains and reduction epilogues, but only where a stored "
          "intermediate tensor disappears.",
          ("the GEMM's 2-D tile grid (do not loop over all N tiles in one program)",
           "the precision of intermediates that were fp32"), "fusion"),
    Stage("memory_access", 5, "Memory access",
          "Coalesced loads and stores, no transposes inside the K loop, no weight repacking or "
          "transposes in forward(), int64 offsets where they can pass 2^31, lower register pressure.",
          ("the math performed", "the launch grid's coverage of the output"), "memory_access"),
    Stage("block_pointers", 6, "Block pointers / tensor descriptors",
          "Load tl.dot operands (and store tiles) through tensor descriptors, or block pointers where "
          "the installed Triton has no descriptors, so the loads become 2D block reads.",
          ("the tiling and the math", "boundary handling (every edge must still be guarded or padded)"),
          "block_pointers"),
    Stage("persistent_kernel", 7, "Persistent kernel",
          "For large tile counts only: a persistent or stream-K grid of about one program per Xe core "
          "(or SM), looping over tiles; the core count is queried from the device.",
          ("kernels whose grid is small (under ~512 tiles): leave them as they are",), "persistent_kernel"),
    Stage("xpu_specific", 8, "Xe-specific tuning",
          "Tune for the Xe target: power-of-two tiles and warps, sub-group size, GRF mode in the xpu "
          "autotune configs, GROUP_SIZE_M tile swizzling on a 1-D grid; and make device handling "
          "portable (no hard-coded device strings or vendor-specific synchronize calls).",
          ("the math and the data types",), "xpu_specific"),
    Stage("autotuning", 9, "Autotuning",
          "Wrap the kernels in @triton.autotune with the target's hardware-aware search space, keyed on "
          "the problem dimensions, with a launch grid computed from META.",
          ("the kernel bodies, except removing defaults of tuned parameters",), "autotune"),
)

_BY_ID = {s.id: s for s in STAGES}

#: Ids of the nine optimization stages, canonical order (DESIGN.md "The nine stages").
STAGE_IDS: tuple[str, ...] = tuple(s.id for s in STAGES if not s.preparatory)
#: Ids of every stage, the preparatory ones first.
ALL_STAGE_IDS: tuple[str, ...] = tuple(s.id for s in STAGES)
#: Names of the codemods the stages name (each registered in ``codemods/registry.py``; what a
#: knowledge-base rule's ``codemod`` may say).
CODEMODS: tuple[str, ...] = tuple(s.codemod for s in STAGES if s.codemod)


def get_stage(stage_id: str) -> Stage:
    """The stage with this id. Raises ``KeyError`` naming the known ids otherwise."""
    try:
        return _BY_ID[stage_id]
    except KeyError:
        raise KeyError(f"unknown stage {stage_id!r}; stages are {', '.join(ALL_STAGE_IDS)}") from None


def require_stages(stage_ids: list[str]) -> list[str]:
    """``stage_ids`` when each names a stage; else ``ValueError`` naming the unknown ones and
    the known ones."""
    bad = [s for s in stage_ids if s not in _BY_ID]
    if bad:
        hints = "".join(nearest_name_hint(b, ALL_STAGE_IDS) for b in bad)
        raise ValueError(f"unknown stage{'s' if len(bad) > 1 else ''}: {', '.join(bad)} "
                         f"(known: {', '.join(ALL_STAGE_IDS)}){hints}")
    return stage_ids
