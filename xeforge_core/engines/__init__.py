"""Engines that propose candidate kernels, behind one protocol (see ``base``).

``rules`` (deterministic codemods), ``llm`` (any OpenAI-compatible endpoint) and ``manual``
(the user's own edit or a pasted chat reply). The loop, the session and the UI use only
:class:`Engine`, :class:`Candidate`, :class:`ProposalContext` and :func:`get_engine`; which
engines exist, and which stages each can propose for, is said once, in
:data:`xeforge_core.engines.registry.ENGINES`.
"""

from xeforge_core.engines.base import (
    Candidate,
    Engine,
    EngineError,
    ProposalContext,
    TokenUsage,
    render_stage_prompt,
)
from xeforge_core.engines.extract import Extraction, extract_code
from xeforge_core.engines.registry import engine_names, get_engine
from xeforge_core.engines.rules import port_to_device_agnostic

__all__ = [
    "Candidate",
    "Engine",
    "EngineError",
    "Extraction",
    "ProposalContext",
    "TokenUsage",
    "extract_code",
    "engine_names",
    "get_engine",
    "port_to_device_agnostic",
    "render_stage_prompt",
]
