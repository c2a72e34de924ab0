"""The rules engine: deterministic codemods from the knowledge base, no LLM, works offline.

Codemods, by the name the stages of :mod:`xeforge_core.vocab.stages` give them (the
registry says which stage each serves):

* ``dtype_fix``         -> :func:`xeforge_core.codemods.dtype_fix.fix_dtypes`
* ``fusion``            -> :func:`xeforge_core.codemods.fusion.fuse` (same-grid launch chains,
  elementwise epilogues into their producer, batched host loops into one launch)
* ``memory_access``     -> :func:`xeforge_core.codemods.memory_access.improve_memory_access` (rows
  whose block covers the row in one pass, target-sized elementwise blocks, one-output-per-program
  kernels lifted to coalesced blocks)
* ``block_pointers``    -> :func:`xeforge_core.codemods.descriptors.use_descriptors` (tl.dot operands
  through tensor descriptors)
* ``persistent_kernel`` -> :func:`xeforge_core.codemods.persistent.make_persistent`
* ``xpu_specific``      -> :func:`xeforge_core.codemods.xpu_specific.apply_xpu_knobs`
* ``autotune``          -> :func:`xeforge_core.codemods.autotune.add_autotune` (search space pruned for
  the profile and per call), else (kernels already autotuned)
  :func:`xeforge_core.codemods.autotune_grid.grid_follows_autotune` (stage ``autotuning``)
* ``portability``       -> :func:`xeforge_core.codemods.portability.port_source` (the preparatory
  stage, also available as :func:`port_to_device_agnostic`)

Every codemod takes ``source`` and the settings ``target``, ``arch``, ``profile``,
``search_space``, ``options`` and ``problem`` (the context's problem, for codemods that decide
by the problem's roofline) and ignores those it does not use.

Any other stage gets a not-applicable candidate saying the rules engine has no codemod for it.
Being deterministic, the engine has nothing new to offer when the CoVeR loop feeds back a failed
verdict for its own candidate; it says so instead of proposing the same code again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xeforge_core.codemods.common import CodemodResult
from xeforge_core.engines.base import Candidate, ProposalContext
from xeforge_core.engines.registry import get_engine_spec
from xeforge_core.vocab.stages import STAGES

ENGINE_NAME = "rules"


def _dtype_fix(source: str, **_: Any) -> CodemodResult:
    from xeforge_core.codemods.dtype_fix import fix_dtypes

    return fix_dtypes(source)


def _portability(source: str, **_: Any) -> CodemodResult:
    from xeforge_core.codemods.portability import port_source

    return port_source(source)


def _autotune(source: str, **kw: Any) -> CodemodResult:
    from xeforge_core.codemods.autotune import add_autotune
    from xeforge_core.codemods.autotune_grid import grid_follows_autotune

    result = add_autotune(source, target=kw.get("target", "xpu"), arch=kw.get("arch"),
                          search_space=kw.get("search_space"), options=kw.get("options") or {},
                          profile=kw.get("profile"))
    if result.changed:
        return result
    # an already-autotuned kernel may still launch with a grid that ignores the chosen config
    grid = grid_follows_autotune(source)
    return grid if grid.changed else result


def _fusion(source: str, **kw: Any) -> CodemodResult:
    from xeforge_core.codemods.fusion import fuse

    return fuse(source, **kw)


def _memory_access(source: str, **kw: Any) -> CodemodResult:
    from xeforge_core.codemods.memory_access import improve_memory_access

    return improve_memory_access(source, target=kw.get("target", "xpu"), arch=kw.get("arch"))


def _persistent(source: str, **kw: Any) -> CodemodResult:
    from xeforge_core.codemods.persistent import make_persistent

    return make_persistent(source, target=kw.get("target", "xpu"), arch=kw.get("arch"), problem=kw.get("problem"),
                           profile=kw.get("profile"))


def _block_pointers(source: str, **kw: Any) -> CodemodResult:
    from xeforge_core.codemods.descriptors import use_descriptors

    return use_descriptors(source, target=kw.get("target", "xpu"))


def _xpu_specific(source: str, **kw: Any) -> CodemodResult:
    from xeforge_core.codemods.xpu_specific import apply_xpu_knobs

    return apply_xpu_knobs(source, target=kw.get("target", "xpu"), arch=kw.get("arch"),
                           profile=kw.get("profile"), options=kw.get("options") or {})


#: Codemod name (as the stages of ``vocab.stages`` name them) -> codemod
#: (``source, **settings -> CodemodResult``; settings: ``target`` family, ``arch``, ``profile``,
#: ``search_space``, ``options``, ``problem``).
CODEMODS: dict[str, Callable[..., CodemodResult]] = {
    "dtype_fix": _dtype_fix,
    "xpu_specific": _xpu_specific,
    "autotune": _autotune,
    "portability": _portability,
    "fusion": _fusion,
    "memory_access": _memory_access,
    "persistent_kernel": _persistent,
    "block_pointers": _block_pointers,
}

#: Stage id -> the codemod that serves it (derived from the registry).
STAGE_CODEMODS: dict[str, Callable[..., CodemodResult]] = {
    s.id: CODEMODS[s.codemod] for s in STAGES if s.codemod in CODEMODS}


def _as_candidate(result: CodemodResult, stage: str, current: str) -> Candidate:
    if not result.changed:
        return Candidate.not_applicable(code=current, engine=ENGINE_NAME, stage=stage,
                                        reason=f"{result.codemod}: {result.reason}",
                                        model=f"codemod:{result.codemod}", notes=list(result.notes))
    return Candidate(code=result.source, rationale=f"codemod {result.codemod}:\n{result.rationale()}",
                     engine=ENGINE_NAME, model=f"codemod:{result.codemod}", stage=stage,
                     notes=list(result.notes))


def port_to_device_agnostic(source: str) -> Candidate:
    """The portability codemod as a candidate (stage ``portability``): hard-coded ``"xpu"`` /
    ``"cuda"`` devices, device-specific synchronize calls and availability checks replaced by
    device-agnostic code. Not applicable (with the reason) when there is nothing to port."""
    return _as_candidate(_portability(source), "portability", source)


class RulesEngine:
    """Deterministic codemods per stage, for the context's target (its family, architecture and
    hardware profile pick the search space and the Xe knobs).

    ``search_space`` (list of config dicts) overrides the knowledge base's; ``options`` go to
    the codemods (e.g. ``{"group_size_m": 8, "num_warps": 8, "grf_mode": "256"}``).
    """

    name = ENGINE_NAME

    def __init__(self, search_space: list[dict[str, Any]] | None = None,
                 options: dict[str, Any] | None = None) -> None:
        self.search_space = search_space
        self.options = dict(options or {})

    @staticmethod
    def stages() -> list[str]:
        """Ids of the stages this engine has a codemod for."""
        return list(STAGE_CODEMODS)

    def propose(self, stage: str, context: ProposalContext, feedback: str | None = None) -> Candidate:
        """Run the stage's codemod on ``context.current_code``.

        Not applicable (with the reason) for stages without a codemod, when the codemod does not
        apply, or when ``feedback`` reports that this engine's own candidate failed."""
        current = context.current_code
        codemod = STAGE_CODEMODS.get(stage)
        if codemod is None:
            return Candidate.not_applicable(code=current, engine=self.name, stage=stage,
                                            reason=get_engine_spec(self.name).cannot_propose_reason(stage))
        if feedback:
            first = feedback.strip().splitlines()[0] if feedback.strip() else ""
            return Candidate.not_applicable(
                code=current, engine=self.name, stage=stage,
                reason="the rules engine is deterministic and its candidate for this stage did not pass "
                       f"({first}); it has no other rewrite to offer: try the llm or manual engine")
        target = context.target
        settings = {
            "target": target.family,
            "arch": target.arch,
            "profile": context.hardware,
            "search_space": self.search_space or context.search_space,
            "options": {**self.options, **context.options},
            "problem": context.problem,
        }
        try:
            result = codemod(current, **settings)
        except Exception as exc:  # a codemod bug must not take the session down
            return Candidate.not_applicable(
                code=current, engine=self.name, stage=stage,
                reason=f"the {stage} codemod failed on this module: {type(exc).__name__}: {exc}")
        return _as_candidate(result, stage, current)
