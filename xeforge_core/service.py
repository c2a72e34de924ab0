"""The application service: start or resume a session, make an engine, run the pipeline.

Every front end (``xeforge optimize``, ``xeforge batch`` and its Ray tasks, the workbench, the
pipeline benchmark) optimizes a kernel the same way: detect the run device, resolve the target,
load the problem, plan its stages, create (or reopen) the session, build the engine, and run the
CoVeR loop over a controller of the session. The steps live here once; a front end adds only its
own input and output (arguments and printing, a CSV row, widgets).

Errors: the ones of the steps themselves (``ProblemError``, ``SessionError``, ``TargetError``,
``ValueError`` for an unknown engine or stage), all named where they arise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xeforge_core.engines.registry import get_engine
from xeforge_core.pipeline.controller import SessionController
from xeforge_core.pipeline.loop import LoopOptions, StageOutcome, run_pipeline
from xeforge_core.pipeline.plan import Plan, plan_for
from xeforge_core.session import Session, register_secret

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.engines.base import Engine
    from xeforge_core.problem import Problem
    from xeforge_core.target import Target


def make_engine(name: str, **settings: Any) -> Engine:
    """The engine called ``name`` (``rules``, ``llm``, ``manual``, ...) built with ``settings``;
    for ``llm`` the key from the LLM settings is registered as a secret first, so that it can
    never be written into a session. Raises ``ValueError`` for an unknown engine or bad
    settings."""
    if name == "llm":
        from xeforge_core.settings import load_llm_settings

        llm = load_llm_settings()
        if llm.has_key():
            register_secret(llm.key_value())
    return get_engine(name, **settings)


def plan_problem(problem: Problem, target: Target, stages: list[str] | None = None) -> Plan:
    """The stage plan of ``problem``'s kernel for ``target``: ``stages`` when given (checked
    against the registry), else the analysis' (``pipeline.plan.plan_for``)."""
    return plan_for(problem.kernel.source, target, problem, stages=stages or None)


def replan_after_first_version(target: Target, stages: list[str] | None = None) -> Callable[[Any], None]:
    """``LoopOptions.on_first_version``: once a plain-PyTorch problem has its first Triton
    version (TorchInductor's, ``pipeline.first_version``), plan the stages for that code
    (``stages`` when given) and store the plan in the session."""

    def callback(controller: Any) -> None:
        controller.session.set_plan(plan_problem(controller.current(), target, stages).ids)

    return callback


def start_session(problem: Problem, *, workspace: str | Path, device: DeviceInfo, target: Target,
                  plan: Plan | list[str] | None = None, stages: list[str] | None = None) -> Session:
    """A new session of ``problem`` under ``workspace`` on the run ``device`` for ``target``,
    with ``plan`` (a :class:`Plan` or its stage ids; default: :func:`plan_problem` of
    ``stages``)."""
    if plan is None:
        plan = plan_problem(problem, target, stages)
    ids = plan.ids if isinstance(plan, Plan) else list(plan)
    return Session.create(problem, workspace=workspace, device=device, plan=ids, target=target)


def resume_session(path: str | Path, *, target: Target | None = None,
                   stages: list[str] | None = None) -> Session:
    """The session at ``path``, with its target and plan changed to ``target``/``stages`` when
    given. Raises ``SessionError`` when ``path`` holds no session."""
    session = Session.open(path)
    if target is not None:
        session.set_target(target)
    if stages:
        session.set_plan(stages)
    return session


def run_session(session: Session, device: DeviceInfo, engine: Engine,
                options: LoopOptions | None = None) -> list[StageOutcome]:
    """Run the CoVeR loop over ``session``'s plan on ``device`` with ``engine``
    (``pipeline.loop.run_pipeline`` over a :class:`SessionController`); one outcome per stage."""
    return run_pipeline(SessionController(session, device), engine, options or LoopOptions())
