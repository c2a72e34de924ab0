"""The one list of stages and the one list of engines.

A **stage** is data: its id, canonical position, title, goal, what a candidate of the stage must
not change, its prompt template (``xeforge_core/prompts/<id>.md``), and the rules-engine
codemod that serves it (``None``: only an LLM or a person can do it). *Portability* is a stage
like the others, marked ``preparatory``: it runs before the nine optimization stages of
DESIGN.md when the kernel cannot run correctly as written on the run device, and its result is
verified as the baseline later speedups are measured against.

An **engine** is a name, a one-line description, where its class lives, and which stages it can
propose for: ``codemod`` engines (rules) only for stages that name a codemod, ``any`` engines
(llm, manual) for every stage. ``interactive`` engines take text from the user instead of
being run by a button or the CLI.

Everything else checks against these lists: the knowledge base's rules (``stage``, ``codemod``),
the rules engine's codemod table, the CLI's ``--stages``/``--engine`` and the pages. Adding a
stage is one entry in :data:`STAGES` plus its prompt template (plus a codemod in
``engines/rules.py`` when the rules engine should do it); adding an engine is one module plus
one entry in :data:`ENGINES`. This module is data only (standard library), so every layer may
import it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from xeforge_core.engines.base import Engine

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
#: Names of the codemods the stages name (what ``engines/rules.py`` must implement and what a
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
        raise ValueError(f"unknown stage{'s' if len(bad) > 1 else ''}: {', '.join(bad)} "
                         f"(known: {', '.join(ALL_STAGE_IDS)})")
    return stage_ids


# --------------------------------------------------------------------------------------------
# engines


@dataclass(frozen=True)
class EngineSpec:
    """One engine: ``name`` (what the CLI and settings say), a one-line ``description``,
    ``factory`` (``"module:Class"``, built with the engine's settings as keyword arguments),
    ``proposes`` (``codemod``: only stages that name a codemod; ``any``: every stage),
    ``needs_endpoint`` (an LLM endpoint must be configured) and ``interactive`` (the engine
    takes the user's text: a pasted reply or an edit, not a Propose button)."""

    name: str
    description: str
    factory: str
    proposes: Literal["codemod", "any"]
    needs_endpoint: bool = False
    interactive: bool = False

    def can_propose(self, stage: str | Stage) -> bool:
        """Whether this engine can propose a candidate for ``stage``."""
        st = stage if isinstance(stage, Stage) else get_stage(stage)
        return self.proposes == "any" or st.codemod is not None

    def cannot_propose_reason(self, stage: str | Stage) -> str:
        """Why this engine cannot propose for ``stage`` (no codemod serves it), in one sentence
        naming the engines that can."""
        st = stage if isinstance(stage, Stage) else get_stage(stage)
        served = ", ".join(s.id for s in STAGES if s.codemod and not s.preparatory)
        others = " or ".join(e.name for e in ENGINES if e.can_propose(st) and e.name != self.name)
        return (f"the {self.name} engine has no codemod for stage {st.id!r} (it has codemods for: {served}); "
                f"use the {others} engine for it")

    def build(self, **settings: Any) -> Engine:
        """A new engine object built with ``settings``."""
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)(**settings)


#: Every engine, the default first.
ENGINES: tuple[EngineSpec, ...] = (
    EngineSpec("rules", "deterministic codemods from the knowledge base (no key needed)",
               "xeforge_core.engines.rules:RulesEngine", "codemod"),
    EngineSpec("llm", "any OpenAI-compatible endpoint (needs endpoint and model; key if required)",
               "xeforge_core.engines.llm:LLMEngine", "any", needs_endpoint=True),
    EngineSpec("manual", "your own edit, or a reply pasted from any chat LLM (no key needed)",
               "xeforge_core.engines.manual:ManualEngine", "any", interactive=True),
)



def engine_names(*, interactive: bool = True) -> list[str]:
    """The engines' names, in :data:`ENGINES` order (``interactive=False``: only those a command
    line can run, without a person's text)."""
    return [e.name for e in ENGINES if interactive or not e.interactive]


def get_engine_spec(name: str) -> EngineSpec:
    """The engine called ``name`` (case-insensitive). Raises ``ValueError`` naming the known
    engines otherwise."""
    key = name.strip().lower()
    for spec in ENGINES:
        if spec.name == key:
            return spec
    raise ValueError(f"unknown engine {name!r}; known engines: {', '.join(engine_names())}")


def get_engine(name: str, **settings: Any) -> Engine:
    """Build the engine called ``name`` with ``settings`` passed to its constructor. Raises
    ``ValueError`` naming the known engines for an unknown name."""
    return get_engine_spec(name).build(**settings)


def engines_for(stage: str | Stage) -> list[str]:
    """Names of the engines that can propose for ``stage``, in :data:`ENGINES` order."""
    return [e.name for e in ENGINES if e.can_propose(stage)]
