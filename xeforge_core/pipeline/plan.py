"""The stage plan of a kernel for a target, and who can do each stage.

:func:`plan_for` is the one planner: the UI's workbench and the CLI (``xeforge optimize``,
``xeforge batch``) call it with the same kernel and the same :class:`~xeforge_core.pipeline.
target.Target` and get the same plan. The plan holds the stages the static analysis found work
for, in canonical order (or the stages the user gave), each with its issues, the engines that
can propose for it in general (``vocab.stages``: the rules engine only where a codemod serves
the stage; the llm and manual engines always) and, per engine, whether it can on this kernel
(``pipeline.feasibility``: the rules engine's codemod is asked, statically).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xeforge_core.analysis import Analysis, Issue, analyze, plan_stages
from xeforge_core.engines.registry import engines_for
from xeforge_core.pipeline.feasibility import EngineCheck, check_stages, nothing_to_do
from xeforge_core.target import Target
from xeforge_core.vocab.stages import get_stage, require_stages

if TYPE_CHECKING:
    from xeforge_core.problem import Problem


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a plan: its id, 1-based ``number`` in the plan, the analysis' ``issues`` for
    it, the ``engines`` that can propose for it in general, and ``checks``: per engine, whether it
    can on this kernel and why (empty when not asked)."""

    stage: str
    number: int
    issues: tuple[Issue, ...]
    engines: tuple[str, ...]
    checks: tuple[EngineCheck, ...] = ()

    @property
    def title(self) -> str:
        return get_stage(self.stage).title

    def check(self, engine: str) -> EngineCheck | None:
        """The answer of ``engine`` for this stage on this kernel (``None``: not asked)."""
        return next((c for c in self.checks if c.engine == engine), None)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "number": self.number, "title": self.title,
                "issues": [f"[{i.rule_id}] {i.message}" + (f" (line {i.line})" if i.line else "")
                           for i in self.issues],
                "engines": list(self.engines),
                "on_this_kernel": [c.to_dict() for c in self.checks]}


@dataclass
class Plan:
    """The stages to run, in order, for ``target``; ``origin`` says where the list came from
    (``analysis`` or ``given``); ``analysis`` is the analysis it was made from."""

    target: Target
    stages: list[PlannedStage]
    analysis: Analysis
    origin: str = "analysis"
    warnings: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        """The stage ids, in order."""
        return [s.stage for s in self.stages]

    def nothing_to_do(self, engine: str) -> str:
        """One sentence when ``engine`` can do none of the planned stages on this kernel (each
        stage's reason included), ``""`` otherwise (or when the engines were not asked)."""
        return nothing_to_do({s.stage: s.checks for s in self.stages if s.checks}, engine)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``xeforge optimize --plan-only --json`` prints it)."""
        return {"target": self.target.to_dict(), "origin": self.origin, "stages": [s.to_dict() for s in self.stages],
                "issues": len(self.analysis.issues)}


def planned(stages: Sequence[str], analysis: Analysis,
            checks: dict[str, tuple[EngineCheck, ...]] | None = None) -> list[PlannedStage]:
    """``stages`` as :class:`PlannedStage` rows (numbered in order, with their issues, the
    engines that can do them, and ``checks`` per stage when given)."""
    return [PlannedStage(stage=s, number=n, issues=tuple(analysis.issues_for(s)), engines=tuple(engines_for(s)),
                         checks=(checks or {}).get(s, ()))
            for n, s in enumerate(stages, start=1)]


def plan_for(source: str, target: Target, problem: Problem | None = None, *,
             stages: Iterable[str] | None = None, check_engines: bool = True,
             launched: Sequence[str] | None = None) -> Plan:
    """The plan for the kernel module ``source`` (the current version) and ``target``.

    ``stages`` (the user's list, in the order to run) replaces the analysis' choice; otherwise
    the plan is every optimization stage the analysis of ``source`` for ``target``'s family has
    an issue for, in canonical order. With ``check_engines`` every engine is asked, per planned
    stage, whether it can do it on ``source`` (:func:`~xeforge_core.pipeline.feasibility.
    check_stages`; the rules engine's codemods run statically, well under a second a plan;
    ``launched``: the kernels the current version's verdict saw launched at the timed size, where
    known, which a tuning stage keeps to).
    Raises ``ValueError`` naming an unknown stage id.
    """
    analysis = analyze(source, target.family, problem)
    origin = "analysis"
    if stages is not None:
        chosen, origin = require_stages(list(stages)), "given"
    else:
        chosen = plan_stages(analysis)
    checks = check_stages(chosen, source, target, problem, launched=launched) if check_engines else None
    return Plan(target=target, stages=planned(chosen, analysis, checks), analysis=analysis, origin=origin)
