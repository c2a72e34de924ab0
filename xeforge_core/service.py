"""The application service: start or resume a session, make an engine, run the pipeline.

Every front end (``xeforge optimize``, ``xeforge batch`` and its Ray tasks, the workbench, the
pipeline benchmark) optimizes a kernel the same way: detect the run device, resolve the target,
load the problem, plan its stages, create (or reopen) the session, build the engine, and run the
CoVeR loop over a controller of the session. The steps live here once; a front end adds only its
own input and output (arguments and printing, a CSV row, widgets).

GitPython is imported only when a session is started or opened (``session.Session``): the
in-memory controller works without it, as on a GPU machine that lacks the package.

Errors: the ones of the steps themselves (``ProblemError``, ``SessionError``, ``TargetError``,
``ValueError`` for an unknown engine or stage), all named where they arise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xeforge_core import session as sessions
from xeforge_core.engines.registry import get_engine
from xeforge_core.pipeline.controller import MemoryController, SessionController
from xeforge_core.pipeline.loop import LoopOptions, StageOutcome, run_pipeline
from xeforge_core.pipeline.plan import Plan, plan_for
from xeforge_core.session import register_secret
from xeforge_core.target import resolve

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.engines.base import Engine
    from xeforge_core.problem import Problem
    from xeforge_core.session import Session
    from xeforge_core.target import Target


def make_engine(name: str, **settings: Any) -> Engine:
    """The engine called ``name`` (``rules``, ``llm``, ``manual``, ...) built with ``settings``;
    for ``llm`` the key from the LLM settings is registered as a secret first, so that it can
    never be written into a session. Raises ``ValueError`` for an unknown engine or bad
    settings, and for ``llm`` without an API key where the endpoint is OpenAI's (which answers
    nothing without one: said before a session starts, not after every stage's retries)."""
    if name == "llm":
        from xeforge_core.settings import DEFAULT_BASE_URL, load_llm_settings

        llm = load_llm_settings()
        if llm.has_key():
            register_secret(llm.key_value())
        elif llm.base_url == DEFAULT_BASE_URL:
            raise ValueError(
                f"the llm engine has no API key for {DEFAULT_BASE_URL}: set OPENAI_API_KEY (or XEFORGE_LLM_API_KEY), "
                "or XEFORGE_LLM_BASE_URL for a local endpoint that needs none; without a key, use --engine rules")
    return get_engine(name, **settings)


def plan_problem(problem: Problem, target: Target, stages: list[str] | None = None,
                 launched: list[str] | None = None) -> Plan:
    """The stage plan of ``problem``'s kernel for ``target``: ``stages`` when given (checked
    against the registry), else the analysis' (``pipeline.plan.plan_for``; ``launched`` as
    there)."""
    return plan_for(problem.kernel.source, target, problem, stages=stages or None, launched=launched)


def replan_after_first_version(target: Target, stages: list[str] | None = None) -> Callable[[Any], None]:
    """``LoopOptions.on_first_version``: once a plain-PyTorch problem has its first Triton
    version (TorchInductor's, ``pipeline.first_version``), plan the stages for that code
    (``stages`` when given) and store the plan in the session."""

    def callback(controller: Any) -> None:
        controller.session.set_plan(plan_problem(controller.current(), target, stages, controller.launched()).ids)

    return callback


def start_session(problem: Problem, *, device: DeviceInfo | None, target: Target | None = None,
                  workspace: str | Path | None = None, path: str | Path | None = None, name: str | None = None,
                  plan: Plan | list[str] | None = None, stages: list[str] | None = None,
                  spec_text: str | None = None, reference_text: str | None = None,
                  secrets: Iterable[str] = ()) -> Session:
    """A new session of ``problem`` on the run ``device`` for ``target``, in a new repository at
    ``path`` or under ``workspace`` (named ``name``), with ``plan`` (a :class:`Plan` or its stage
    ids; default: :func:`plan_problem` of ``stages``). ``spec_text``/``reference_text`` are the
    files as the user gave them; ``secrets`` (an API key) are registered so that no repository
    ever holds them. ``target`` ``None`` is resolved from ``device`` (``target.resolve``).
    Raises ``SessionError`` for a path that exists and is not empty."""
    _register(secrets)
    if plan is None:
        plan = plan_problem(problem, target if target is not None else resolve(device, None), stages)
    ids = plan.ids if isinstance(plan, Plan) else list(plan)
    return sessions.Session.create(problem, workspace=workspace, path=path, name=name, device=device, plan=ids,
                          target=target, spec_text=spec_text, reference_text=reference_text,
                          secrets=[s for s in secrets if s])


def resume_session(path: str | Path, *, target: Target | None = None, stages: list[str] | None = None,
                   secrets: Iterable[str] = ()) -> Session:
    """The session at ``path``, with its target and plan changed to ``target``/``stages`` when
    given; ``secrets`` registered as in :func:`start_session`. Raises ``SessionError`` when
    ``path`` holds no session."""
    _register(secrets)
    session = sessions.Session.open(path)
    if target is not None:
        session.set_target(target)
    if stages:
        session.set_plan(stages)
    return session


def session_controller(session: Session | str | Path, device: DeviceInfo | str | None) -> SessionController:
    """The controller of ``session`` on ``device`` (every candidate's state changes through
    it); a path opens a :class:`Session` object of its own, as a background job needs (its git
    reads then share no process with the page's)."""
    opened = sessions.Session.open(session) if isinstance(session, (str, Path)) else session
    return SessionController(opened, device)


def memory_controller(problem: Problem, device: DeviceInfo | str | None, plan: list[str] | None = None,
                      target: Target | str | None = None) -> MemoryController:
    """A controller with a session's rules and no repository (history kept in memory), for
    machines without GitPython: ``problem``'s kernel is the current version."""
    return MemoryController(problem, device=device, target=target, plan=plan)


def _register(secrets: Iterable[str]) -> None:
    for secret in secrets:
        if secret:
            register_secret(secret)


def run_session(session: Session, device: DeviceInfo, engine: Engine,
                options: LoopOptions | None = None) -> list[StageOutcome]:
    """Run the CoVeR loop over ``session``'s plan on ``device`` with ``engine``
    (``pipeline.loop.run_pipeline`` over a :class:`SessionController`); one outcome per stage."""
    return run_pipeline(SessionController(session, device), engine, options or LoopOptions())
