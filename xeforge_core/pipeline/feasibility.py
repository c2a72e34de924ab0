"""Which engine can do which planned stage on *this* kernel, asked before anything runs.

The registry says which stages an engine can serve at all (the rules engine only where a codemod
exists); a plan needs more: whether the engine has something to offer for the kernel as it is now.
The rules engine is asked directly: its codemod for the stage runs on the source (libcst, static:
no kernel code is executed, about 0.05-0.5 s a stage on the CPU machine), and the answer is
whether it would rewrite anything, with the codemod's own reason when it would not ("kernel k is
already autotuned", "no codemod for stage 'algorithmic'"), so the answer grows with the codemods
(autotuning covers every kernel kind its search spaces have). The llm and manual engines can propose for
every stage (whether the llm endpoint is configured is the caller's to say).

The CLI's ``xeforge optimize --plan-only`` and the Optimize page show these answers before
Propose; the workbench disables Propose where the chosen engine cannot do the current stage, and a
session whose planned stages the engine can do none of says so up front.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xeforge_core.cache import stable_hash
from xeforge_core.engines.registry import ENGINES, EngineSpec, get_engine_spec

if TYPE_CHECKING:
    from xeforge_core.problem import Problem
    from xeforge_core.target import Target


@dataclass(frozen=True)
class EngineCheck:
    """Whether ``engine`` can propose a candidate for ``stage`` on one version of a kernel:
    ``can`` and the one-line ``reason`` (what it would change, or why it cannot)."""

    stage: str
    engine: str
    can: bool
    reason: str

    @property
    def mark(self) -> str:
        """``rules ✓`` / ``rules ✗`` for tables."""
        return f"{self.engine} {'✓' if self.can else '✗'}"

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "can": self.can, "reason": self.reason}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("-• ").strip()
        if line:
            return line
    return ""


def check_engine(spec: EngineSpec | str, stage: str, source: str, target: Target,
                 problem: Problem | None = None, launched: Sequence[str] | None = None) -> EngineCheck:
    """Ask the engine ``spec`` whether it can propose for ``stage`` on ``source`` (the current
    version of the kernel module) for ``target``. ``launched``: the kernels the current version's
    verdict saw launched at the timed size, where known (``ProposalContext.launched``: a tuning
    rewrite leaves the others alone, and the answer says so as the stage would).

    A codemod engine (rules) runs its codemod for the stage statically and answers with the
    codemod's reason; engines that propose for any stage (llm, manual) can. Never raises: a
    codemod that fails on the module is an answer ("cannot: the codemod failed: ...")."""
    spec = get_engine_spec(spec) if isinstance(spec, str) else spec
    if not spec.can_propose(stage):
        return EngineCheck(stage, spec.name, False, spec.cannot_propose_reason(stage))
    if spec.proposes != "codemod":
        how = "proposes for every stage" + (" (needs an endpoint)" if spec.needs_endpoint else "")
        return EngineCheck(stage, spec.name, True, how)
    ran = sorted(launched) if launched is not None else None
    key = stable_hash(spec.name, stage, source, repr(target), repr(problem), repr(ran))
    known = _ANSWERS.get(key)
    if known is not None:
        _ANSWERS.move_to_end(key)
        return known
    answer = _ask_codemod(spec, stage, source, target, problem, ran)
    _ANSWERS[key] = answer
    while len(_ANSWERS) > _ANSWERS_KEPT:
        _ANSWERS.popitem(last=False)
    return answer


# A codemod's answer depends only on the source, the stage, the target and the problem, and the
# workbench and the CLI ask it again for every plan shown (each a libcst pass, 0.05-0.5 s): the
# answers of this process are kept, the least recently asked dropped first.
_ANSWERS: OrderedDict[str, EngineCheck] = OrderedDict()
_ANSWERS_KEPT = 1024


def _ask_codemod(spec: EngineSpec, stage: str, source: str, target: Target, problem: Problem | None,
                 launched: list[str] | None) -> EngineCheck:
    from xeforge_core.engines.base import ProposalContext

    context = ProposalContext(stage=stage, original_code=source, current_code=source, problem=problem,
                              target=target, launched=launched)
    try:
        candidate = spec.build().propose(stage, context)
    except Exception as exc:  # an engine bug is an answer here, never a broken plan
        return EngineCheck(stage, spec.name, False, f"the {spec.name} engine failed: {type(exc).__name__}: {exc}")
    if candidate.applicable:
        what = _first_line(candidate.notes[0]) if candidate.notes else _first_line(candidate.rationale.split(":", 1)[-1])
        return EngineCheck(stage, spec.name, True, f"would rewrite: {what}" if what else "would rewrite the module")
    return EngineCheck(stage, spec.name, False, candidate.not_applicable_reason or "nothing to change")


def check_stages(stages: Iterable[str], source: str, target: Target, problem: Problem | None = None, *,
                 engines: Sequence[str] | None = None, launched: Sequence[str] | None = None
                 ) -> dict[str, tuple[EngineCheck, ...]]:
    """``{stage: (EngineCheck per engine, in registry order)}`` for ``stages`` on ``source``;
    ``engines`` limits the engines asked (default: all); ``launched`` as :func:`check_engine`."""
    names = list(engines) if engines is not None else [e.name for e in ENGINES]
    specs = [get_engine_spec(n) for n in names]
    return {stage: tuple(check_engine(spec, stage, source, target, problem, launched) for spec in specs)
            for stage in stages}


def nothing_to_do(checks: dict[str, tuple[EngineCheck, ...]], engine: str) -> str:
    """When ``engine`` can do none of the stages of ``checks``: one sentence saying so, with each
    stage's reason and what to use instead; ``""`` when it can do at least one (or there are
    no stages)."""
    mine = [c for row in checks.values() for c in row if c.engine == engine]
    if not mine or any(c.can for c in mine):
        return ""
    others = sorted({c.engine for row in checks.values() for c in row if c.can and c.engine != engine})
    why = "; ".join(f"{c.stage}: {c.reason}" for c in mine)
    n = len(mine)
    them = "them" if n != 1 else "it"
    instead = f" Use the {' or '.join(others)} engine for {them}, or skip {them}." if others else ""
    return (f"The {engine} engine can do none of the {n} planned stage{'s' if n != 1 else ''} on this kernel "
            f"({why}).{instead}")


__all__ = ["EngineCheck", "check_engine", "check_stages", "nothing_to_do"]
