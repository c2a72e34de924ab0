"""The stage plan of a kernel for a target, and who can do each stage.

:func:`plan_for` is the one planner: the UI's workbench and the CLI (``xeforge optimize``,
``xeforge batch``) call it with the same kernel and the same :class:`~xeforge_core.pipeline.
target.Target` and get the same plan. The plan holds the stages the static analysis found work
for, in canonical order (or the stages the user gave), each with its issues and the engines that
can propose for it (``pipeline.registry``: the rules engine only where a codemod serves the
stage; the llm and manual engines always).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xeforge_core.analysis import Analysis, Issue, analyze, plan_stages
from xeforge_core.pipeline.registry import engines_for, get_stage, require_stages
from xeforge_core.pipeline.target import Target

if TYPE_CHECKING:
    from xeforge_core.problem import Problem


@dataclass(frozen=True)
class PlannedStage:
    """One stage of a plan: its id, 1-based ``number`` in the plan, the analysis' ``issues`` for
    it and the ``engines`` that can propose for it."""

    stage: str
    number: int
    issues: tuple[Issue, ...]
    engines: tuple[str, ...]

    @property
    def title(self) -> str:
        return get_stage(self.stage).title

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "number": self.number, "title": self.title,
                "issues": [f"[{i.rule_id}] {i.message}" + (f" (line {i.line})" if i.line else "")
                           for i in self.issues],
                "engines": list(self.engines)}


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``xeforge optimize --plan-only --json`` prints it)."""
        return {"target": self.target.to_dict(), "origin": self.origin, "stages": [s.to_dict() for s in self.stages],
                "issues": len(self.analysis.issues)}


def planned(stages: Sequence[str], analysis: Analysis) -> list[PlannedStage]:
    """``stages`` as :class:`PlannedStage` rows (numbered in order, with their issues and the
    engines that can do them)."""
    return [PlannedStage(stage=s, number=n, issues=tuple(analysis.issues_for(s)), engines=tuple(engines_for(s)))
            for n, s in enumerate(stages, start=1)]


def plan_for(source: str, target: Target, problem: Problem | None = None, *,
             stages: Iterable[str] | None = None) -> Plan:
    """The plan for the kernel module ``source`` (the current version) and ``target``.

    ``stages`` (the user's list, in the order to run) replaces the analysis' choice; otherwise
    the plan is every optimization stage the analysis of ``source`` for ``target``'s family has
    an issue for, in canonical order. Raises ``ValueError`` naming an unknown stage id.
    """
    analysis = analyze(source, target.family, problem)
    if stages is not None:
        chosen = require_stages(list(stages))
        return Plan(target=target, stages=planned(chosen, analysis), analysis=analysis, origin="given")
    return Plan(target=target, stages=planned(plan_stages(analysis), analysis), analysis=analysis)
