"""The engine protocol: every proposer of candidate kernels (LLM, rules, manual) speaks it.

The CoVeR loop, the session and the UI only ever see :class:`Candidate` objects; which engine
produced one is recorded in ``Candidate.engine`` (and ``model``) for the history, never needed
to handle it.

``Engine.propose(stage, context, feedback)`` returns a :class:`Candidate` or a not-applicable
candidate (``applicable=False`` plus ``not_applicable_reason``); engines do not raise for
"nothing to do" or "the reply had no code". They raise :class:`EngineError` only for failures
the caller must see (an endpoint that keeps failing after all retries, bad settings).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from xeforge_core.errors import XeForgeError
from xeforge_core.knowledge import load_knowledge
from xeforge_core.target import Target, hardware_of, resolve

if TYPE_CHECKING:
    from xeforge_core.analysis import Analysis
    from xeforge_core.knowledge import HardwareProfile
    from xeforge_core.problem.model import Problem


class EngineError(XeForgeError, RuntimeError):
    """An engine could not produce an answer at all (e.g. the LLM endpoint failed after every
    retry). The message never contains an API key."""


@dataclass
class TokenUsage:
    """Token counts of the LLM calls behind a candidate (0 for engines that use no LLM).

    ``calls`` counts requests sent to the endpoint (cache hits are not calls).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: TokenUsage) -> None:
        """Accumulate ``other`` into this one (in place)."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls


@dataclass
class Candidate:
    """One proposed version of the kernel module.

    ``code`` is the complete module source (the current code, unchanged, when not applicable);
    ``rationale`` says what was changed and why; ``engine`` is ``rules``/``llm``/``manual``;
    ``model`` the LLM model id (or codemod names for rules); ``prompt`` the exact prompt text
    (for llm/manual); ``tokens`` its token usage; ``stage`` the stage id it answers.
    ``applicable`` is ``False`` when the engine has nothing to propose, and then
    ``not_applicable_reason`` says why in one sentence. ``raw_reply`` keeps an LLM's or a
    user's pasted text as received; ``cached`` is ``True`` when an LLM reply came from the cache.
    """

    code: str
    rationale: str = ""
    engine: str = ""
    model: str | None = None
    prompt: str | None = None
    tokens: TokenUsage = field(default_factory=TokenUsage)
    applicable: bool = True
    not_applicable_reason: str = ""
    stage: str = ""
    raw_reply: str | None = None
    cached: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (for session refs and the UI)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        data = dict(data)
        tokens = data.pop("tokens", None) or {}
        known = set(cls.__dataclass_fields__)
        return cls(tokens=TokenUsage(**tokens), **{k: v for k, v in data.items() if k in known})

    @classmethod
    def not_applicable(cls, *, code: str, engine: str, stage: str, reason: str,
                       **extra: Any) -> Candidate:
        """A candidate saying the engine has nothing to propose, and why."""
        return cls(code=code, engine=engine, stage=stage, applicable=False,
                   not_applicable_reason=reason, rationale=reason, **extra)


@dataclass
class ProposalContext:
    """What an engine may use to propose a candidate for one stage.

    * ``stage``: the stage id (``dtype_fix``, ``autotuning``, ...; see ``vocab.stages``).
    * ``original_code`` / ``current_code``: the baseline module and the latest accepted version.
    * ``problem``: the kernel problem (shapes, dtypes, flop), when known.
    * ``analysis``: the ``xeforge_core.analysis.Analysis`` of ``current_code``, when run.
    * ``target``: the :class:`~xeforge_core.target.Target` (hardware profile, family,
      architecture) the candidate is for; a string is resolved by
      :func:`~xeforge_core.target.resolve` (``"cuda"``, ``"arc_b580"``); default: the
      product's target (Arc Pro B70). Never the run device: a cpu run may target Xe2.
    * ``prompt``: the exact prompt text the product shows (rendered by ``stages.render_prompt``);
      engines render it themselves when it is ``None``.
    * ``history``: feedback texts of earlier attempts in this stage, oldest first.
    * ``search_space``: autotune configs to use instead of the knowledge base's (a list of
      dicts ``{"kwargs": {...}, "num_warps": int, "num_stages": int, "options": {...}}``).
    * ``options``: free-form engine options (e.g. ``{"group_size_m": 8}``).
    * ``plan``: the session's stage plan, in order (the prompt says "Stage 2 of 4" from it).
    * ``launched``: names of the Triton kernels the current version launched when it was
      verified, where that verification covered the timed size (``pipeline.controller.
      launched_at_published_size``); ``None`` where nothing says (the baseline, a verification at
      smaller sizes only). A rewrite that tunes a kernel which never ran changes nothing measured.
    """

    stage: str
    original_code: str
    current_code: str
    problem: Problem | None = None
    analysis: Analysis | None = None
    target: Target = field(default_factory=resolve)
    prompt: str | None = None
    history: list[str] = field(default_factory=list)
    search_space: list[dict[str, Any]] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    plan: list[str] = field(default_factory=list)
    launched: list[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.target, Target):
            self.target = resolve(None, self.target)

    @property
    def hardware(self) -> HardwareProfile:
        """The target's knowledge-base hardware profile."""
        return hardware_of(self.target)


@runtime_checkable
class Engine(Protocol):
    """Anything that proposes candidates: ``name`` plus ``propose``.

    ``propose(stage, context, feedback)`` returns a :class:`Candidate` for ``stage`` given
    ``context``; ``feedback`` is the previous attempt's verdict text (``Verdict.feedback()``)
    when the CoVeR loop asks for a refinement, else ``None``.
    """

    name: str

    def propose(self, stage: str, context: ProposalContext, feedback: str | None = None) -> Candidate:
        ...


def render_stage_prompt(stage: str, context: ProposalContext, feedback: str | None = None) -> str:
    """The exact prompt for ``stage``: ``context.prompt`` when given, else
    ``pipeline.prompts.render_prompt`` with the original and current code, the stage's issues
    from ``context.analysis``, the hardware profile, the problem context
    (``stages.problem_context``), the knowledge-base rules for the stage and target, and
    ``feedback``. When ``context.prompt`` is used and does not already hold ``feedback``, the
    feedback is appended as its own section.

    Raises ``EngineError`` when no prompt can be rendered (unknown stage, missing templates)."""
    text = context.prompt
    if text is None:
        text = _render_from_stages(stage, context, feedback)
    if feedback and feedback.strip() and feedback.strip() not in text:
        text = (text.rstrip() + "\n\n## Feedback on your previous attempt (verdict)\n\n"
                + feedback.strip() + "\n\nFix the problem above and return the complete module.\n")
    return text


def _render_from_stages(stage: str, context: ProposalContext, feedback: str | None) -> str:
    from xeforge_core.pipeline import prompts

    issues_for = getattr(context.analysis, "issues_for", None)
    issues = list(issues_for(stage)) if callable(issues_for) else []
    kb = load_knowledge()
    profile = context.target.hardware(kb)
    rules = kb.rules_for(stage=stage, target=context.target.family)
    problem_ctx = prompts.problem_context(context.problem, None, profile) if context.problem is not None else {}
    try:
        return prompts.render_prompt(stage, original_code=context.original_code,
                                     current_code=context.current_code, issues=issues, profile=profile,
                                     problem_context=problem_ctx, rules=rules, feedback=feedback,
                                     position=_position(stage, context.plan))
    except Exception as exc:
        raise EngineError(f"rendering the {stage} prompt failed: {type(exc).__name__}: {exc}") from exc


def _position(stage: str, plan: list[str]) -> tuple[int, int] | None:
    """``(n, total)``: the stage's 1-based place in the session's plan, or ``None`` when the
    stage is not in the plan (the preparatory portability step, a plan not known)."""
    return (plan.index(stage) + 1, len(plan)) if stage in plan else None
