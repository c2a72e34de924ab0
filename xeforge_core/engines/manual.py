"""The manual engine: the user's own edit of the module, or a reply pasted from any chat LLM.

The product shows the exact prompt for the stage (the same text the llm engine would send,
from ``render_stage_prompt``); the user pastes it into any chat model and pastes the answer
back, or edits the code by hand. Either way the text goes through the same extraction as the
llm engine (:func:`xeforge_core.engines.extract.extract_code`), so a pasted reply with prose
around a fenced block works, and a plain module (a hand edit) works as is.
"""

from __future__ import annotations

from xeforge_core.engines.base import Candidate, ProposalContext, render_stage_prompt
from xeforge_core.engines.extract import extract_code, reply_prose


class ManualEngine:
    """Candidates from text the user supplies.

    ``text`` is the user's edited module or a pasted chat reply (set it at construction or
    later with :meth:`submit`); ``kind`` is ``edit`` or ``pasted_reply``; ``model`` may name the
    chat model the reply came from. The candidate's rationale is ``rationale`` when given, else
    the reply's own explanation (its bullets or prose outside the code), else a line saying
    where the code came from.
    """

    name = "manual"

    def __init__(self, text: str | None = None, *, kind: str = "edit", model: str | None = None,
                 rationale: str = "") -> None:
        self.text = text
        self.kind = kind
        self.model = model
        self.user_rationale = rationale

    def submit(self, text: str, *, kind: str = "edit", model: str | None = None, rationale: str = "") -> None:
        """Set the text the next :meth:`propose` turns into a candidate."""
        self.text, self.kind, self.model, self.user_rationale = text, kind, model, rationale

    def prompt_for(self, stage: str, context: ProposalContext, feedback: str | None = None) -> str:
        """The exact prompt to copy into a chat LLM for ``stage`` (with the last verdict's
        feedback when refining)."""
        return render_stage_prompt(stage, context, feedback)

    def propose(self, stage: str, context: ProposalContext, feedback: str | None = None) -> Candidate:
        """A candidate from the submitted text; not applicable (with the reason) when no text
        was submitted, no module can be extracted from it, or it equals the current code."""
        prompt = context.prompt
        if self.kind == "pasted_reply" and prompt is None:
            try:
                prompt = self.prompt_for(stage, context, feedback)
            except Exception:  # the prompt is informative here; a missing template must not block
                prompt = None
        if self.text is None or not self.text.strip():
            return Candidate.not_applicable(code=context.current_code, engine=self.name, stage=stage,
                                            reason="no edited code or pasted reply was submitted",
                                            prompt=prompt, model=self.model)
        got = extract_code(self.text)
        if got.code is None:
            return Candidate.not_applicable(code=context.current_code, engine=self.name, stage=stage,
                                            reason=got.reason, prompt=prompt, model=self.model,
                                            raw_reply=self.text)
        if got.code.strip() == context.current_code.strip():
            return Candidate.not_applicable(code=context.current_code, engine=self.name, stage=stage,
                                            reason="the submitted code is identical to the current version",
                                            prompt=prompt, model=self.model, raw_reply=self.text)
        what = "reply pasted from a chat LLM" if self.kind == "pasted_reply" else "user's own edit"
        rationale = self.user_rationale or reply_prose(self.text, got) or f"{what} for stage {stage}"
        return Candidate(code=got.code, rationale=rationale, engine=self.name, model=self.model,
                         prompt=prompt, stage=stage, raw_reply=self.text, notes=list(got.notes))
