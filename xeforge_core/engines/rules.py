"""The rules engine: deterministic codemods from the knowledge base, no LLM, works offline.

Each stage that names a codemod (:mod:`xeforge_core.vocab.stages`, ``Stage.codemod``) is served
by the codemod registered under that name in :mod:`xeforge_core.codemods.registry`, where each
codemod registers itself with one signature, ``run(source, CodemodSettings) -> CodemodResult``
(``python -c "from xeforge_core.codemods.registry import codemods; print(sorted(codemods()))"``
lists them). The settings come from the proposal context: the target's family, architecture
and hardware profile, the engine's search space and options, and the problem.

Any other stage gets a not-applicable candidate saying the rules engine has no codemod for it.
Being deterministic, the engine has nothing new to offer when the CoVeR loop feeds back a failed
verdict for its own candidate; it says so instead of proposing the same code again.
"""

from __future__ import annotations

from typing import Any

from xeforge_core.codemods.common import CodemodResult
from xeforge_core.codemods.registry import CodemodFn, CodemodSettings, get_codemod
from xeforge_core.engines.base import Candidate, ProposalContext
from xeforge_core.engines.registry import get_engine_spec
from xeforge_core.vocab.stages import ALL_STAGE_IDS, STAGES, get_stage

ENGINE_NAME = "rules"


def stage_codemod(stage: str) -> CodemodFn | None:
    """The registered codemod that serves stage ``stage`` (``None`` when the stage names none)."""
    codemod = get_stage(stage).codemod if stage in ALL_STAGE_IDS else None
    return get_codemod(codemod).run if codemod else None


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
    return _as_candidate(get_codemod("portability").run(source, CodemodSettings()), "portability", source)


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
        return [s.id for s in STAGES if s.codemod]

    def propose(self, stage: str, context: ProposalContext, feedback: str | None = None) -> Candidate:
        """Run the stage's codemod on ``context.current_code``.

        Not applicable (with the reason) for stages without a codemod, when the codemod does not
        apply, or when ``feedback`` reports on this engine's own candidate (failed, or correct and not faster)."""
        current = context.current_code
        codemod = stage_codemod(stage)
        if codemod is None:
            return Candidate.not_applicable(code=current, engine=self.name, stage=stage,
                                            reason=get_engine_spec(self.name).cannot_propose_reason(stage))
        if feedback:
            first = feedback.strip().splitlines()[0] if feedback.strip() else ""
            return Candidate.not_applicable(
                code=current, engine=self.name, stage=stage,
                reason="the rules engine is deterministic and its candidate for this stage was not kept "
                       f"({first}); it has no other rewrite to offer: try the llm or manual engine")
        target = context.target
        settings = CodemodSettings(target=target.family, arch=target.arch, profile=context.hardware,
                                   search_space=self.search_space or context.search_space,
                                   options={**self.options, **context.options, **_launched(context)},
                                   problem=context.problem)
        try:
            result = codemod(current, settings)
        except Exception as exc:  # a codemod bug must not take the session down
            return Candidate.not_applicable(
                code=current, engine=self.name, stage=stage,
                reason=f"the {stage} codemod failed on this module: {type(exc).__name__}: {exc}")
        return _as_candidate(result, stage, current)


def _launched(context: ProposalContext) -> dict[str, Any]:
    """The codemods' ``launched_kernels`` option: the kernels the current version's verdict saw
    launched, where it is known (a tuning rewrite leaves the others alone)."""
    return {"launched_kernels": list(context.launched)} if context.launched else {}
