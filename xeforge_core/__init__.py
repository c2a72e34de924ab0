"""Xe-Forge Studio core: load kernel problems, verify candidates in isolated workers, and run
human-in-the-loop optimization sessions for Triton kernels on Intel Xe GPUs.

The public API (``docs/architecture.md``) is importable from here, e.g.
``from xeforge_core import load_problem, Session, SessionController, run_pipeline``. Names are
imported when first used (PEP 562), so this top level stays import-light: the verification
worker (``xeforge_core.worker``) is imported in a subprocess that may only have torch, triton,
numpy and the standard library installed.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: Public name -> the module that defines it, in the order of the flow: problem, device and
#: target, session, plan and stage loop, verifier, verdict.
_EXPORTS: dict[str, str] = {
    # errors
    "XeForgeError": "xeforge_core.errors",
    # problems
    "load_problem": "xeforge_core.problem",
    "problem_from_source": "xeforge_core.problem",
    "read_module": "xeforge_core.problem",
    "Problem": "xeforge_core.problem",
    "ProblemError": "xeforge_core.problem",
    "list_samples": "xeforge_core.samples",
    "load_sample": "xeforge_core.samples",
    "flash_attention_trajectory": "xeforge_core.samples",
    # devices and targets
    "detect_device": "xeforge_core.devices",
    "DeviceInfo": "xeforge_core.devices",
    "run_doctor": "xeforge_core.doctor",
    "Target": "xeforge_core.target",
    "resolve_target": "xeforge_core.target:resolve",
    "targets": "xeforge_core.target",
    # knowledge and analysis
    "load_knowledge": "xeforge_core.knowledge",
    "analyze": "xeforge_core.analysis",
    # sessions
    "Session": "xeforge_core.session",
    "SessionError": "xeforge_core.session",
    # the pipeline: stages, engines, plan, controller, loop
    "STAGES": "xeforge_core.vocab.stages",
    "ENGINES": "xeforge_core.engines.registry",
    "get_stage": "xeforge_core.vocab.stages",
    "get_engine": "xeforge_core.engines.registry",
    "render_prompt": "xeforge_core.pipeline.prompts",
    "Engine": "xeforge_core.engines",
    "Candidate": "xeforge_core.engines",
    "ProposalContext": "xeforge_core.engines",
    "plan_for": "xeforge_core.pipeline.plan",
    "Plan": "xeforge_core.pipeline.plan",
    "SessionController": "xeforge_core.pipeline.controller",
    "MemoryController": "xeforge_core.pipeline.controller",
    "LoopOptions": "xeforge_core.pipeline.loop",
    "StageOutcome": "xeforge_core.pipeline.loop",
    "run_stage": "xeforge_core.pipeline.loop",
    "run_pipeline": "xeforge_core.pipeline.loop",
    "prepare_portability": "xeforge_core.pipeline.loop",
    "StageStatus": "xeforge_core.vocab.status",
    "OutcomeStatus": "xeforge_core.vocab.status",
    "CandidateStatus": "xeforge_core.vocab.status",
    # the verifier (``xeforge_core.verify.verify``: the name is the module's) and its verdict
    "VerifyOptions": "xeforge_core.verify",
    "Verdict": "xeforge_core.verdict",
    "VerdictKind": "xeforge_core.verdict",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'xeforge_core' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
