"""The one list of engines.

An **engine** is a name, a one-line description, where its class lives, and which stages it can
propose for: ``codemod`` engines (rules) only for stages that name a codemod, ``any`` engines
(llm, manual) for every stage. ``interactive`` engines take text from the user instead of
being run by a button or the CLI.

The CLI's ``--engine``, the plan's "engines that can do this stage", the pages and the loop
take the engines from :data:`ENGINES`; adding an engine is one module plus one entry here.
The stages themselves are vocabulary (``xeforge_core/vocab/stages.py``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from xeforge_core.vocab.stages import STAGES, Stage, get_stage

if TYPE_CHECKING:
    from xeforge_core.engines.base import Engine


@dataclass(frozen=True)
class EngineSpec:
    """One engine: ``name`` (what the CLI and settings say), a one-line ``description``,
    ``factory`` (``"module:Class"``, built with the engine's settings as keyword arguments),
    ``proposes`` (``codemod``: only stages that name a codemod; ``any``: every stage),
    ``needs_endpoint`` (an LLM endpoint must be configured), ``interactive`` (the engine
    takes the user's text: a pasted reply or an edit, not a Propose button) and ``deterministic``
    (the same code gives the same candidate: asking again after a rejection gives nothing new)."""

    name: str
    description: str
    factory: str
    proposes: Literal["codemod", "any"]
    needs_endpoint: bool = False
    interactive: bool = False
    deterministic: bool = False

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
               "xeforge_core.engines.rules:RulesEngine", "codemod", deterministic=True),
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
