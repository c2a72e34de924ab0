"""The workbench controller: what one browser session is doing, and every action the pages
offer, as plain Python over the core API (no Streamlit here, no kernel code executed here).

A :class:`Workbench` holds the loaded problem (from a sample, a paste or an upload), the
target, the open :class:`~xeforge_core.session.Session`, the stage plan, the candidate under
review (:class:`~xeforge_core.ui.review.CandidateReview`), the engine settings and the background
jobs (proposals, verifications, device probes). The plan and the target come from the same
functions the CLI uses (:func:`~xeforge_core.pipeline.plan.plan_for`,
:func:`~xeforge_core.target.resolve`); every change of a candidate's state goes through
the session's :class:`~xeforge_core.pipeline.controller.SessionController`, here and in the
CoVeR loop. Long work runs through :class:`~xeforge_core.ui.jobs.BackgroundJob`, each job with a
Session object of its own; results reach the page's state through :meth:`Workbench.poll`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xeforge_core import samples, service
from xeforge_core.analysis import Analysis, analyze
from xeforge_core.diffmerge import describe_merge
from xeforge_core.engines.base import ProposalContext, render_stage_prompt
from xeforge_core.engines.registry import engines_for, get_engine_spec
from xeforge_core.errors import XeForgeError
from xeforge_core.pipeline.controller import Cancelled, SessionController
from xeforge_core.pipeline.feasibility import EngineCheck, check_stages, nothing_to_do
from xeforge_core.pipeline.loop import LoopOptions, StageOutcome, prepare_portability, run_stage
from xeforge_core.pipeline.plan import Plan, plan_for
from xeforge_core.problem import ProblemError, check_candidate_entry
from xeforge_core.session.records import CandidateRecord, Version
from xeforge_core.target import Target, TargetError, resolve, targets
from xeforge_core.ui.jobs import BackgroundJob, JobBoard, JobState
from xeforge_core.ui.review import CandidateReview, ReviewError, ReviewStatus, code_hash
from xeforge_core.ui.validate import InputError, LoadedInput, decode_upload, load_user_problem
from xeforge_core.units import plural
from xeforge_core.verdict import Verdict
from xeforge_core.vocab.stages import STAGE_IDS, get_stage
from xeforge_core.vocab.status import CandidateStatus, OutcomeStatus, StageStatus

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.problem import Problem
    from xeforge_core.session import Session


def stage_ids() -> list[str]:
    """The nine optimization stages' ids, canonical order (``vocab.stages``)."""
    return list(STAGE_IDS)


def sample_titles() -> dict[str, str]:
    """``{name: title}`` of the bundled samples."""
    return {s.name: s.title for s in samples.list_samples()}


#: The name the Flash Attention demo gives its sessions (``<prefix>-13_flash_attention_fwd``), by
#: which it finds its own to resume.
DEMO_SESSION_PREFIX = "flash_attention_demo"


class WorkbenchError(XeForgeError, RuntimeError):
    """An action the workbench cannot do now; the message says why, for the page to show."""


def _llm_defaults() -> dict[str, Any]:
    """Endpoint and model from the llm engine's settings (environment, ``.env``); whether a
    key is configured there (the key itself is not read here)."""
    from pydantic import ValidationError

    from xeforge_core.settings import load_llm_settings

    try:
        cfg = load_llm_settings()
    except ValidationError as exc:  # invalid values in the environment / .env: say which
        fields = ", ".join(".".join(str(p) for p in e["loc"]) + f": {e['msg']}" for e in exc.errors())
        return {"endpoint": os.environ.get("OPENAI_BASE_URL", ""), "model": "", "env_key": False,
                "error": f"LLM settings from the environment or .env are invalid ({fields})"}
    return {"endpoint": cfg.base_url, "model": cfg.model, "env_key": cfg.api_key is not None, "error": ""}


@dataclass
class EngineSettings:
    """Engine choice and LLM endpoint settings. ``api_key`` (a key typed on the Home page) lives
    only in memory: it is never written to the session, the caches or logs (it is registered
    with the session's redactor and left out of :meth:`public` and ``repr``). A key configured
    in the environment or ``.env`` is read by the llm engine itself."""

    engine: str = "rules"
    endpoint: str = field(default_factory=lambda: str(_llm_defaults()["endpoint"]))
    model: str = field(default_factory=lambda: str(_llm_defaults()["model"]))
    api_key: str = field(default="", repr=False)
    max_iterations: int = 3
    temperature: float = 0.2

    @property
    def settings_error(self) -> str:
        """Why the LLM settings from the environment / ``.env`` could not be read ("" if they
        could), naming each invalid field."""
        return str(_llm_defaults().get("error", ""))

    @property
    def key_configured(self) -> bool:
        """A key typed here or configured in the environment / ``.env``."""
        return bool(self.api_key) or bool(_llm_defaults()["env_key"])

    def llm_ready(self) -> tuple[bool, str]:
        """Whether the llm engine can be used, and if not, why."""
        if not self.endpoint.startswith(("http://", "https://")):
            return False, "set an OpenAI-compatible endpoint (an http:// or https:// base URL)"
        if not self.model:
            return False, "set a model name"
        if "api.openai.com" in self.endpoint and not self.key_configured:
            return False, "this endpoint needs an API key"
        return True, "ready"

    def engine_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``get_engine(self.engine, ...)``."""
        if not get_engine_spec(self.engine).needs_endpoint:
            return {}
        kwargs: dict[str, Any] = {"model": self.model, "temperature": self.temperature,
                                  "base_url": self.endpoint}
        if self.api_key:
            kwargs["api_key"] = self.api_key
        return kwargs

    def public(self) -> dict[str, Any]:
        """The settings without the key (for display and logs)."""
        return {"engine": self.engine, "endpoint": self.endpoint, "model": self.model,
                "api_key": "set" if self.key_configured else "not set",
                "max_iterations": self.max_iterations}


@dataclass
class PlanItem:
    """One row of the stage stepper: the stage, its 1-based ``number`` in the plan, its status,
    the status reason, the analysis' issues for it (one line each), the ``engines`` that can
    propose for it in general, ``checks``: per engine, whether it can on the current version and
    why (:mod:`xeforge_core.pipeline.feasibility`), and whether it is the current stage."""

    stage: str
    status: str
    reason: str = ""
    issues: list[str] = field(default_factory=list)
    current: bool = False
    number: int = 0
    engines: list[str] = field(default_factory=list)
    checks: tuple[EngineCheck, ...] = ()

    @property
    def title(self) -> str:
        return get_stage(self.stage).title

    def check(self, engine: str) -> EngineCheck | None:
        """Whether ``engine`` can do this stage on the current version (``None``: not asked)."""
        return next((c for c in self.checks if c.engine == engine), None)


def _issue_lines(analysis: Analysis | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for issue in analysis.issues if analysis is not None else []:
        out.setdefault(issue.stage, []).append(
            f"[{issue.rule_id}] {issue.message}" + (f" (line {issue.line})" if issue.line else ""))
    return out


class Workbench:
    """One browser session's state and actions (see the module docstring)."""

    def __init__(self, workspace: str | Path) -> None:
        self.workspace = Path(workspace)
        self.loaded: LoadedInput | None = None
        self.source_label: str = ""
        self.session: Session | None = None
        self.analysis: Analysis | None = None
        self.analysis_error: str = ""
        self.review: CandidateReview | None = None
        self.jobs = JobBoard()
        self.settings = EngineSettings()
        self.device: DeviceInfo | None = None
        self.device_error: str = ""
        self.target_choice: str | None = None
        self.doctor_report: Any = None
        self.doctor_error: str = ""
        self.last_stage_result: StageOutcome | None = None
        self.demo: dict[str, Any] = {}
        #: precision downgrades verifications here accept (``xeforge_core.precision.DOWNGRADES``),
        #: on top of the spec's ``allow`` list; the CLI's ``--allow``
        self.allow_precision: list[str] = []
        #: the session closed by the last load of another kernel ("" when none was)
        self.detached: str = ""
        self._lock = threading.RLock()
        self._analyses: dict[tuple[str, str], Analysis] = {}
        self._checks: dict[tuple[str, str, str, str], tuple[EngineCheck, ...]] = {}

    def set_allow_precision(self, names: list[str]) -> None:
        """Accept these precision downgrades in the next verifications. Raises
        ``PrecisionError`` (a ``ValueError``) naming an unknown one."""
        from xeforge_core.precision import parse_allowances

        self.allow_precision = list(parse_allowances(list(names), where="allowed precision"))

    def verify_options(self) -> Any:
        """The ``VerifyOptions`` this workbench's verifications use (``None``: the defaults)."""
        if not self.allow_precision:
            return None
        from xeforge_core.verify import VerifyOptions

        return VerifyOptions(allow_precision=list(self.allow_precision))

    @property
    def review_candidate_id(self) -> str | None:
        """The kept candidate holding the code under review (``None``: not kept yet)."""
        return self.review.candidate_id if self.review is not None else None

    # ================================================================= loading problems

    def load_text(self, source: str | None, *, spec_text: str | None = None,
                  reference_source: str | None = None, name: str = "kernel",
                  what: str = "pasted kernel", label: str = "pasted",
                  spec_what: str = "spec") -> LoadedInput:
        """Validate and load a pasted kernel (and optional spec/reference). On bad input raises
        :class:`InputError` and keeps whatever was loaded before."""
        loaded = load_user_problem(source, name=name, spec_text=spec_text,
                                   reference_source=reference_source, what=what, spec_what=spec_what)
        self._set_loaded(loaded, label)
        return loaded

    def load_upload(self, py_name: str, py_data: bytes, *, yaml_name: str | None = None,
                    yaml_data: bytes | None = None, ref_name: str | None = None,
                    ref_data: bytes | None = None) -> LoadedInput:
        """Load uploaded files (the kernel ``.py`` and optionally its ``.yaml`` spec and
        ``_ref.py`` reference). Binary, empty or oversized files raise :class:`InputError`."""
        source = decode_upload(py_data, name=py_name)
        spec_text = decode_upload(yaml_data, name=yaml_name or "spec.yaml") if yaml_data else None
        ref_text = decode_upload(ref_data, name=ref_name or "reference.py") if ref_data else None
        stem = Path(py_name).stem
        return self.load_text(source, spec_text=spec_text, reference_source=ref_text, name=stem,
                              what=f"uploaded file {py_name}", label=f"upload {py_name}",
                              spec_what=f"uploaded spec {yaml_name or 'spec.yaml'}")

    def load_sample(self, name: str) -> LoadedInput:
        """Load one of the bundled samples by name (``xeforge_core.samples``)."""
        problem = samples.load_sample(name)
        spec_text = Path(problem.spec.path).read_text() if problem.spec is not None and problem.spec.path else None
        ref = problem.reference
        loaded = LoadedInput(problem=problem, source=problem.kernel.source, spec_text=spec_text,
                             reference_source=ref.source if ref is not None else None,
                             name=problem.name)
        self._set_loaded(loaded, f"sample {name}")
        return loaded

    def _set_loaded(self, loaded: LoadedInput, label: str) -> None:
        with self._lock:
            self.detached = self._detach_if_other(loaded)
            self.loaded = loaded
            self.source_label = label
            self.analysis = None
            self.analysis_error = ""

    def _detach_if_other(self, loaded: LoadedInput) -> str:
        """Close the open session when ``loaded`` is another kernel (its source or spec differs
        from the session's baseline), so that the pages never show one kernel's problem with
        another's session. The session stays in the workspace (resume it on Home); code under
        review that was not kept yet is kept first, as a pending candidate. Returns the closed
        session's name ("" when nothing was closed)."""
        session = self.session
        if session is None:
            return ""
        try:
            same = session.source("baseline") == loaded.source and session.spec_text("head") == loaded.spec_text
        except Exception:  # an unreadable session is not the loaded kernel's
            same = False
        if same:
            return ""
        review = self.review
        if review is not None and review.candidate_id is None and review.changed and review.status in (
                ReviewStatus.PROPOSED, ReviewStatus.VERIFIED):
            with contextlib.suppress(XeForgeError):
                review.candidate_id = self._keep_candidate(review).id
        self.session = None
        self.review = None
        self.last_stage_result = None
        return session.name

    def edit_spec(self, text: str) -> None:
        """Make ``text`` the spec of the loaded kernel: with a session open, as a new version of
        it (``Session.edit_spec``: the kernel unchanged, the change in the history); a candidate
        under review is rejected first (kept, with the reason), since its verdict was given
        under the old spec. Raises :class:`InputError` naming the file, line and field of a bad
        spec (nothing changes then), :class:`WorkbenchError` when nothing is loaded or the spec
        is unchanged."""
        from xeforge_core.session import SessionError

        if self.loaded is None:
            raise WorkbenchError("load a kernel first (paste, upload or pick a sample)")
        old = self.loaded
        loaded = load_user_problem(old.source, name=old.name, spec_text=text,
                                   reference_source=old.reference_source, spec_what="spec")
        session = self.session
        if session is not None:
            if session.spec_text("head") == text:
                raise WorkbenchError("the spec is unchanged")
            if self.review is not None and self.review.status in (ReviewStatus.PROPOSED, ReviewStatus.VERIFIED):
                self.reject("the spec changed: propose or verify again under the new spec")
            try:
                session.edit_spec(text, message="the spec edited in the workbench")
            except SessionError as exc:
                raise WorkbenchError(str(exc)) from exc
            except ProblemError as exc:  # the current version does not fit the new spec
                raise InputError(exc.message, what="spec", line=exc.line) from exc
        with self._lock:
            self.loaded = loaded
            self.analysis = None
        if session is not None:
            self._reanalyse()

    # ================================================================= device

    def start_device_probe(self, override: str | None = None, *, refresh: bool = False) -> BackgroundJob:
        """Detect the device in the background (the fingerprint is probed in a worker)."""
        def work(progress: Any, cancel: threading.Event) -> Any:
            from xeforge_core.devices import detect_device

            progress("probing the device in a worker")
            return detect_device(override, refresh=refresh)

        return self.jobs.submit("device", BackgroundJob("Device probe", work, kind="device"))

    def start_doctor(self, device: str | None = None, *, with_model: bool = False,
                     experiments: bool = False) -> BackgroundJob:
        """Run the device doctor (``xeforge_core.doctor.run_doctor``) in the background; with
        ``with_model``, also the op coverage of the loaded problem's model."""
        problem = self.loaded.problem if (with_model and self.loaded is not None) else None
        if device is None and self.device is not None:
            device = self.device.torch_device

        def work(progress: Any, cancel: threading.Event) -> Any:
            from xeforge_core.doctor import run_doctor

            return run_doctor(device, problem=problem, experiments=experiments, on_progress=progress)

        return self.jobs.submit("doctor", BackgroundJob("Device doctor", work, kind="doctor"))

    def cached_doctor_report(self) -> dict[str, Any] | None:
        """The latest saved doctor report of the current device (a dict), if any."""
        if self.device is None:
            return None
        from xeforge_core.doctor import load_cached_report

        return load_cached_report(self.device.torch_device)

    def device_type(self) -> str:
        """The device verifications run on (``cpu``, ``cuda``, ``xpu``), or the session's."""
        if self.device is not None:
            return str(self.device.type)
        if self.session is not None:
            return str(self.session.device.get("type") or "cpu")
        return "cpu"

    # ================================================================= target

    @staticmethod
    def targets() -> list[Target]:
        """Every hardware profile the user can target (for the target picker)."""
        return targets()

    def target(self) -> Target:
        """The hardware optimized for: the session's, else the user's choice, else what
        :func:`~xeforge_core.target.resolve` says for the run device (the same answer
        ``xeforge optimize`` gives)."""
        if self.session is not None:
            return self.session.target
        return resolve(self.device, self.target_choice)

    def set_target(self, choice: str | Target) -> Target:
        """Target ``choice`` (a profile id or name, or a family). With a session open, the
        session's target changes and the stages not started yet are planned again for it (the
        finished ones stay). Raises :class:`WorkbenchError` for an unknown target."""
        try:
            target = resolve(self.device, choice)
        except TargetError as exc:
            raise WorkbenchError(str(exc)) from exc
        self.target_choice = target.profile
        if self.session is None:
            return target
        session = self.session
        session.set_target(target)
        stages = session.stages
        finished = [s for s in session.plan if not StageStatus(stages.get(s, {}).get("status") or "pending").open]
        fresh = self.plan_preview(session.source("head"), session.problem("head"))
        session.set_plan(finished + [s for s in fresh.ids if s not in finished])
        return target

    # ================================================================= sessions

    def list_sessions(self) -> list[dict[str, Any]]:
        from xeforge_core.session import Session

        return Session.list_sessions(self.workspace)

    def plan_preview(self, source: str | None = None, problem: Problem | None = None) -> Plan:
        """The plan a session would start with: :func:`~xeforge_core.pipeline.plan.plan_for` of
        the loaded kernel (or ``source``) for :meth:`target` (what the CLI plans too)."""
        if source is None:
            if self.loaded is None:
                raise WorkbenchError("load a kernel first (paste, upload or pick a sample)")
            source, problem = self.loaded.source, self.loaded.problem
        plan = plan_for(source, self.target(), problem)
        self._analyses[(code_hash(source), plan.target.family)] = plan.analysis
        # the engines' answers are memoised per source by feasibility itself: the stepper's
        # first asking for this version costs nothing more
        return plan

    def start_session(self) -> Session:
        """Start a new session for the loaded problem, for :meth:`target`; the plan comes from
        the analysis."""
        if self.loaded is None:
            raise WorkbenchError("load a kernel first (paste, upload or pick a sample)")
        plan = self.plan_preview()
        session = service.start_session(self.loaded.problem, workspace=self.workspace, name=self.loaded.name,
                                        device=self.device, target=plan.target, plan=plan,
                                        spec_text=self.loaded.spec_text,
                                        reference_text=self.loaded.reference_source,
                                        secrets=[self.settings.api_key] if self.settings.api_key else [])
        self._open(session)
        return session

    def resume_session(self, path: str | Path) -> Session:
        """Reopen a session from the workspace (plan, target, candidates and history come back)."""
        session = service.resume_session(path, secrets=[self.settings.api_key] if self.settings.api_key else [])
        self._open(session)
        # the loaded kernel is the baseline, under the spec as it is now (it may have been edited)
        problem = session.problem("head").with_kernel_source(session.source("baseline"), label="baseline")
        spec_text = session.spec_text("head")
        ref_text = session.file_at("baseline", session.reference_file) if session.reference_file else None
        self.loaded = LoadedInput(problem=problem, source=problem.kernel.source, spec_text=spec_text,
                                  reference_source=ref_text, name=session.name)
        self.source_label = f"session {session.name}"
        self._reopen_review(session)
        return session

    def _reopen_review(self, session: Session) -> None:
        """Bring back the candidate a stage in ``review`` was waiting on when the session was
        closed (a reload, another browser tab): the newest pending candidate of that stage made
        against the current version, with its verdict. Nothing where there is none."""
        for stage in session.plan:
            if session.stages.get(stage, {}).get("status") != StageStatus.REVIEW.value:
                continue
            waiting = [c for c in session.candidates(stage=stage, status=CandidateStatus.PENDING.value)
                       if c.parent == session.head]
            if waiting:
                self.candidate_to_review(waiting[-1].id)
                return

    def _open(self, session: Session) -> None:
        with self._lock:
            for purpose in ("propose", "verify", "first_version"):
                self.jobs.clear(purpose)
            self.session = session
            self.review = None
            self.last_stage_result = None
        self._reanalyse()

    def require_session(self) -> Session:
        if self.session is None:
            raise WorkbenchError("start or resume a session on the Home page first")
        return self.session

    def controller(self) -> SessionController:
        """The controller of the open session: every candidate's state changes through it."""
        return service.session_controller(self.require_session(), self.device)

    # ================================================================= analysis and plan

    def analyse(self, source: str | None = None) -> Analysis:
        """Static analysis (facts, issues, stage plan) of ``source`` (default: the current
        version, or the loaded kernel) for the target's family. Analyses are kept per source, so
        a version analysed once (a candidate when it was proposed) is not analysed again when it
        is approved."""
        if source is None:
            if self.session is not None:
                source = self.session.source("head")
            elif self.loaded is not None:
                source = self.loaded.source
            else:
                raise WorkbenchError("nothing to analyse: load a kernel first")
        problem = self.loaded.problem if self.loaded is not None else None
        self.analysis = self._analysis_of(source, self.target().family, problem)
        self.analysis_error = ""
        return self.analysis

    def _analysis_of(self, source: str, family: str, problem: Problem | None) -> Analysis:
        key = (code_hash(source), family)
        found = self._analyses.get(key)
        if found is None:
            found = self._analyses[key] = analyze(source, family, problem)
        return found

    def _warm(self, source: str) -> None:
        """Analyse ``source`` (a candidate) ahead of its approval: the analysis and the
        portability check of the version it may become are then ready when it is approved."""
        from xeforge_core.codemods.portability import portability_needs

        problem = self.loaded.problem if self.loaded is not None else None
        self._analysis_of(source, self.target().family, problem)
        portability_needs(source, self.device_type())

    def _reanalyse(self) -> None:
        try:
            self.analyse(self.session.source("head") if self.session is not None else None)
        except Exception as exc:  # analysis is advisory; the session stays usable
            self.analysis = None
            self.analysis_error = f"{type(exc).__name__}: {exc}"

    def issues_by_stage(self) -> dict[str, list[str]]:
        """The analysis' issues grouped by stage, as one-line texts."""
        return _issue_lines(self.analysis)

    def plan_items(self) -> list[PlanItem]:
        """The stepper rows: the session's plan, numbered, with each stage's status, its issues
        and the engines that can propose for it."""
        session = self.require_session()
        stages = session.stages
        current = session.current_stage
        issues = self.issues_by_stage()
        checks = self.engine_checks(session.plan)
        return [PlanItem(stage=s, status=str(stages.get(s, {}).get("status") or StageStatus.PENDING),
                         reason=str(stages.get(s, {}).get("reason") or ""), issues=issues.get(s, []),
                         current=s == current, number=n, engines=engines_for(s), checks=checks.get(s, ()))
                for n, s in enumerate(session.plan, start=1)]

    def engine_checks(self, stages: list[str] | None = None) -> dict[str, tuple[EngineCheck, ...]]:
        """Per stage (default: the session's plan), whether each engine can do it on the current
        version for the target, and why (``feasibility.check_stages``: the rules engine's codemod
        runs statically; a tuning stage leaves alone the kernels the current version's verdict shows
        were not launched at the timed size, as the stage itself will). Remembered per version,
        target, stage and head commit."""
        session = self.require_session()
        stages = list(session.plan if stages is None else stages)
        source = session.source("head")
        target = self.target()
        problem = self.loaded.problem if self.loaded is not None else None
        spec = self.loaded.spec_text if self.loaded is not None else None
        launched: list[str] | None = None
        read = False
        out: dict[str, tuple[EngineCheck, ...]] = {}
        for stage in stages:
            # the head's commit names its verdict, which says which kernels ran
            key = (code_hash(source + (spec or "")), target.profile, stage, session.head)
            if key not in self._checks:
                if not read:
                    launched, read = self.controller().launched(), True
                self._checks[key] = check_stages([stage], source, target, problem, launched=launched)[stage]
            out[stage] = self._checks[key]
        return out

    def engine_check(self, stage: str, engine: str) -> EngineCheck:
        """Whether ``engine`` can do ``stage`` on the current version, and why."""
        return next(c for c in self.engine_checks([stage])[stage] if c.engine == engine)

    def nothing_to_do(self, engine: str | None = None) -> str:
        """One sentence when ``engine`` (default: the chosen one; the manual engine's Propose runs
        the rules engine) can do none of the stages still open in the plan, else ``""``."""
        session = self.require_session()
        engine = engine or self.settings.engine
        engine = "rules" if engine == "manual" else engine
        stages = session.stages
        open_ = [s for s in session.plan
                 if StageStatus(stages.get(s, {}).get("status") or StageStatus.PENDING).open]
        return nothing_to_do(self.engine_checks(open_), engine) if open_ else ""

    def move_stage(self, stage: str, delta: int) -> list[str]:
        """Move ``stage`` up (``delta`` < 0) or down in the plan."""
        session = self.require_session()
        plan = session.plan
        if stage not in plan:
            raise WorkbenchError(f"{stage} is not in the plan")
        i = plan.index(stage)
        j = max(0, min(len(plan) - 1, i + delta))
        plan.insert(j, plan.pop(i))
        return session.set_plan(plan)

    def add_stage(self, stage: str) -> list[str]:
        """Add ``stage`` to the plan at its canonical position (or re-open a finished one)."""
        session = self.require_session()
        if stage not in STAGE_IDS:
            raise WorkbenchError(f"unknown stage {stage!r}")
        plan = session.plan
        if stage in plan:
            if not StageStatus(session.stages.get(stage, {}).get("status") or StageStatus.PENDING).open:
                session.mark_stage(stage, StageStatus.PENDING, "re-opened by the user")
            return plan
        # after the last planned stage that comes before it in the canonical order
        pos = 0
        for k, s in enumerate(plan):
            if s in STAGE_IDS and STAGE_IDS.index(s) < STAGE_IDS.index(stage):
                pos = k + 1
        plan.insert(pos, stage)
        return session.set_plan(plan)

    def skip_stage(self, stage: str | None = None, reason: str = "skipped by the user") -> None:
        """Skip ``stage`` (default: the current stage); a candidate under review for it is
        rejected (it stays kept)."""
        session = self.require_session()
        stage = stage or session.current_stage
        if stage is None:
            raise WorkbenchError("the plan is complete: there is no stage to skip")
        if self.review is not None and self.review.stage == stage and self.review.status not in (
                ReviewStatus.APPROVED, ReviewStatus.REJECTED):
            self.reject(f"stage {stage} skipped")
        self.controller().skip(stage, reason)

    def keep_current(self, reason: str = "kept the current version") -> None:
        """End the current stage without a change (nothing beat the current version)."""
        session = self.require_session()
        stage = session.current_stage
        if stage is None:
            raise WorkbenchError("the plan is complete")
        if self.review is not None and self.review.stage == stage and self.review.status not in (
                ReviewStatus.APPROVED, ReviewStatus.REJECTED):
            self.reject(reason)
        self.controller().keep_current(stage, reason)

    # ================================================================= proposals

    def context_for(self, stage: str) -> ProposalContext:
        """The :class:`~xeforge_core.engines.ProposalContext` for ``stage`` now."""
        session = self.require_session()
        analysis = self.analysis if self.analysis is not None else self.analyse(session.source("head"))
        return self.controller().context(stage, {"analysis": analysis})

    def prompt_for(self, stage: str, feedback: str | None = None) -> str:
        """The exact prompt for ``stage`` (to copy into any chat LLM)."""
        return render_stage_prompt(stage, self.context_for(stage), feedback)

    def start_propose(self, stage: str | None = None, engine: str | None = None) -> BackgroundJob:
        """Ask the engine for a candidate for ``stage`` (default: the current stage) and run the
        CoVeR loop (propose, verify, refine on failure) in the background. An engine that
        cannot do the stage (the rules engine without a codemod for it) is refused at once."""
        session = self.require_session()
        stage = stage or session.current_stage
        if stage is None:
            raise WorkbenchError("the plan is complete: add a stage to continue")
        engine_name = engine or self.settings.engine
        try:
            spec = get_engine_spec(engine_name)
        except ValueError as exc:
            raise WorkbenchError(str(exc)) from exc
        if spec.interactive:
            raise WorkbenchError(f"the {spec.name} engine takes your edit or a pasted reply: use the Manual tab")
        if not spec.can_propose(stage):
            raise WorkbenchError(spec.cannot_propose_reason(stage))
        check = self.engine_check(stage, spec.name)
        if not check.can:
            raise WorkbenchError(f"the {spec.name} engine cannot do {stage} on this kernel: {check.reason}")
        if spec.needs_endpoint:
            ok, why = self.settings.llm_ready()
            if not ok:
                raise WorkbenchError(f"the {spec.name} engine is not configured: {why}")
        eng = spec.build(**self.settings.engine_kwargs())
        path, device = session.path, self.device
        options = LoopOptions(iterations=max(1, int(self.settings.max_iterations)),
                              verify_options=self.verify_options())
        base_source = session.source("head")

        def work(progress: Any, cancel: threading.Event) -> Any:
            # a Session object of its own: git reads on the page never share its processes
            run = dataclasses.replace(options, on_progress=progress, cancel=cancel)
            outcome = run_stage(service.session_controller(path, device), stage, eng, run)
            if outcome.best_source is not None:
                self._warm(outcome.best_source)
            return outcome

        job = BackgroundJob(f"{stage}: {engine_name} engine + verification", work, kind="propose",
                            meta={"stage": stage, "engine": engine_name,
                                  "base": session.head, "base_source": base_source})
        self.jobs.clear("verify")
        return self.jobs.submit("propose", job)

    def portability_needed(self) -> list[str]:
        """Why the current version cannot run correctly here as written, one phrase each (e.g.
        ``["hard-codes xpu"]`` on a cuda or cpu machine); until the portability step rewrites
        it, every stage would fail."""
        from xeforge_core.codemods.portability import portability_needs

        session = self.require_session()
        return portability_needs(session.source("head"), self.device_type())

    def start_portability(self, *, force: bool = False) -> BackgroundJob:
        """Run the portability stage (the rules engine's codemod, verified, committed as
        ``Stage: portability``) in the background."""
        session = self.require_session()
        path, device, verify_options = session.path, self.device, self.verify_options()

        def work(progress: Any, cancel: threading.Event) -> Any:
            progress("portability: rewriting hard-coded devices")
            return prepare_portability(service.session_controller(path, device),
                                       LoopOptions(on_progress=progress, cancel=cancel, verify_options=verify_options),
                                       force=force)

        job = BackgroundJob("portability step", work, kind="portability", meta={"base": session.head})
        return self.jobs.submit("portability", job)

    def pytorch_start_needed(self) -> bool:
        """Whether the open session's current version is a plain-PyTorch ``Model`` (a KernelBench
        problem with no Triton kernel yet): then "Start from PyTorch" writes version 1."""
        from xeforge_core.inductor.first_version import is_plain_pytorch

        session = self.session
        return session is not None and is_plain_pytorch(session.problem("head"))

    def start_from_pytorch(self, capture_text: str | None = None, *, capture_name: str = "capture") -> BackgroundJob:
        """Write the first Triton version of the plain-PyTorch problem in the background:
        TorchInductor's kernels (generated in a sandboxed worker, or converted from
        ``capture_text``, a capture saved on a GPU machine with ``xeforge inductor capture``),
        verified against the problem and committed as version 1 with its rationale (which
        names the operations left to torch library calls); the stages are then planned for the
        Triton code. Raises :class:`WorkbenchError` when no session is open, its current version
        is not plain PyTorch, or ``capture_text`` is not a saved capture (the field named)."""
        import json

        from xeforge_core.inductor.capture import GenerationError, capture_from_dict
        from xeforge_core.inductor.first_version import first_version_from_capture
        from xeforge_core.inductor.kernels import InductorCodeError
        from xeforge_core.pipeline.first_version import prepare_first_version
        from xeforge_core.service import replan_after_first_version

        session = self.require_session()
        if not self.pytorch_start_needed():
            raise WorkbenchError("the current version already launches Triton kernels: Start from PyTorch is for "
                                 "a plain-PyTorch Model (KernelBench style)")
        candidate = None
        if capture_text is not None:
            try:
                data = json.loads(capture_text)
            except ValueError as exc:
                raise WorkbenchError(f"{capture_name}: not JSON ({exc})") from exc
            try:
                saved = capture_from_dict(data if isinstance(data, dict) else {}, where=capture_name)
                candidate = first_version_from_capture(session.problem("head"), saved)
            except (GenerationError, InductorCodeError) as exc:
                raise WorkbenchError(str(exc)) from exc
        path, device, target = session.path, self.device, self.target()
        verify_options = self.verify_options()

        def work(progress: Any, cancel: threading.Event) -> Any:
            from xeforge_core.session import Session

            controller = SessionController(Session.open(path), device)
            progress("first version: " + ("converting the saved TorchInductor capture" if candidate is not None
                                          else "asking TorchInductor for the Triton kernels (a sandboxed worker)"))
            outcome = prepare_first_version(controller, LoopOptions(on_progress=progress, cancel=cancel,
                                                                    verify_options=verify_options),
                                            candidate=candidate)
            if outcome.status is OutcomeStatus.APPROVED:
                replan_after_first_version(target)(controller)
            return outcome

        job = BackgroundJob("Start from PyTorch: TorchInductor's first version + verification", work,
                            kind="first_version", meta={"base": session.head})
        return self.jobs.submit("first_version", job)

    def submit_manual(self, text: str, *, stage: str | None = None, kind: str = "pasted_reply",
                      model: str | None = None) -> CandidateReview:
        """Turn a pasted chat-LLM reply (or the user's own module) into the candidate under
        review; the reply's explanation becomes its rationale. Raises :class:`WorkbenchError`
        when no module can be extracted from it."""
        from xeforge_core.engines.manual import ManualEngine

        session = self.require_session()
        stage = stage or session.current_stage or "manual"
        context = self.context_for(stage)
        cand = ManualEngine(text, kind=kind, model=model).propose(stage, context)
        if not cand.applicable:
            raise WorkbenchError(f"no candidate: {cand.not_applicable_reason}")
        try:
            check_candidate_entry(cand.code)
        except ProblemError as exc:  # as `xeforge verify` refuses such a file
            raise WorkbenchError(f"no candidate: {exc.message}") from exc
        review = self._new_review(stage, context.current_code, cand.code, engine="manual",
                                  rationale=cand.rationale, prompt=cand.prompt or "", model=model)
        self._warm(cand.code)
        return review

    def _new_review(self, stage: str, base: str, code: str, *, engine: str, rationale: str,
                    prompt: str = "", model: str | None = None,
                    verdict: Verdict | None = None, candidate_id: str | None = None,
                    iterations: list[dict[str, Any]] | None = None) -> CandidateReview:
        if self.review is not None and self.review.candidate_id and self.review.status in (
                ReviewStatus.PROPOSED, ReviewStatus.VERIFIED):
            self._supersede(self.review.candidate_id, "replaced by a newer candidate")
        review = CandidateReview(stage=stage, base_source=base, proposed_source=code, source=code,
                                 engine=engine, rationale=rationale, prompt=prompt, model=model,
                                 candidate_id=candidate_id)
        if iterations:
            review.iterations.extend(iterations)
        if verdict is not None:
            review.start_verify()
            review.finish_verify(verdict, code)
        self.review = review
        return review

    def _supersede(self, candidate_id: str, reason: str) -> None:
        # superseding is bookkeeping; it never blocks the user's next step
        with contextlib.suppress(XeForgeError):
            self.controller().supersede(candidate_id, reason)

    # ================================================================= review actions

    def apply_hunks(self, accepted: list[int]) -> str:
        """Keep only the accepted hunks of the proposal (the result must be verified again)."""
        review = self._require_review()
        merged = review.apply_hunks(accepted)
        self._after_code_change()
        return merged

    def edit(self, source: str) -> None:
        """Replace the code under review with the user's edit (verify it again to approve)."""
        review = self._require_review()
        if not source.strip():
            raise WorkbenchError("the edited code is empty")
        review.set_source(source, "edit")
        self._after_code_change()

    def _after_code_change(self) -> None:
        job = self.jobs.current("verify")
        if job is not None and not job.finished:
            job.cancel()
        if self.review is not None and self.review.status is ReviewStatus.VERIFYING:
            self.review.abort_verify()

    def memcheck_availability(self) -> tuple[bool, str]:
        """Whether the memory checker runs on this run device, and what it is (or why not)."""
        from xeforge_core.memcheck import availability

        return availability(self.device_type())

    def start_verify(self, problem: Problem | None = None, *, memcheck: bool = False) -> BackgroundJob:
        """Verify the code under review against the current version (or against ``problem``,
        whose kernel is then the baseline), in the background. The code is kept as a candidate
        first, and the verdict is attached to it, as the CoVeR loop does. With ``memcheck`` a
        candidate that matched makes one more call under the memory checker
        (``VerifyOptions.memcheck``)."""
        review = self._require_review()
        session = self.require_session()
        if review.status is ReviewStatus.VERIFYING:
            job = self.jobs.current("verify")
            if job is not None and not job.finished:
                return job
        if problem is None and self.demo.get("verify_problem") is not None \
                and self.demo.get("review_source") == review.source:
            problem = self.demo["verify_problem"]
        if review.candidate_id is None and review.changed:
            review.candidate_id = self._keep_candidate(review).id
        review.start_verify()
        cid, source, path, device = review.candidate_id, review.source, session.path, self.device
        options = self.verify_options()

        def work(progress: Any, cancel: threading.Event) -> Any:
            controller = service.session_controller(path, device)
            opts = options
            if memcheck:
                import dataclasses

                from xeforge_core.verify import VerifyOptions

                opts = dataclasses.replace(options or VerifyOptions(), memcheck=True)
            try:
                return controller.verify(cid, source, problem=problem, options=opts, on_progress=progress,
                                         cancel=cancel)
            except Cancelled:
                cancel.set()
                return None

        job = BackgroundJob(f"verify {review.stage} candidate" + (" with memcheck" if memcheck else ""), work,
                            kind="verify",
                            meta={"source": source, "base": session.head, "stage": review.stage,
                                  "candidate": cid})
        return self.jobs.submit("verify", job)

    def cancel(self, purpose: str) -> None:
        """Cancel the running job for ``purpose`` (``propose``, ``verify``, ``doctor``)."""
        job = self.jobs.current(purpose)
        if job is not None:
            job.cancel()
        if purpose == "verify" and self.review is not None:
            self.review.abort_verify()

    def approve(self) -> Version:
        """Commit the verified candidate under review as the new current version (a git
        operation: the candidate and its verdict are kept already, and the analysis of its code
        was made when it was proposed)."""
        session = self.require_session()
        review = self._require_review()
        ok, why = review.can_approve()
        if not ok:
            raise WorkbenchError(f"cannot approve: {why}")
        if review.candidate_id is None:
            review.candidate_id = self._keep_candidate(review).id
        sha = self.controller().approve(review.candidate_id)
        review.approve()
        self.review = None
        self._reanalyse()
        return session.version(sha)

    def reject(self, reason: str = "rejected by the user") -> CandidateRecord | None:
        """Reject the candidate under review; it stays kept with its verdict, and the stage is
        idle again (``pending``), ready for another proposal."""
        review = self._require_review()
        record = None
        if self.session is not None and review.changed:
            if review.candidate_id is None:
                review.candidate_id = self._keep_candidate(review).id
            record = self.controller().reject(review.candidate_id, reason)
        review.reject(reason)
        self.review = None
        return record

    def restore(self, version: str | int) -> Version:
        """Make ``version`` (a branch version or a kept candidate) current again."""
        session = self.require_session()
        if self.review is not None and self.review.status in (ReviewStatus.PROPOSED, ReviewStatus.VERIFIED):
            self.reject("a version was restored")
        result = session.restore(version)
        self._reanalyse()
        return result

    def candidate_to_review(self, candidate_id: str) -> CandidateReview:
        """Bring a kept (e.g. rejected) candidate back for review against the current version:
        it becomes a new candidate that must be verified against today's code."""
        session = self.require_session()
        rec = session.candidate(candidate_id)
        code = session.source(candidate_id)
        current = session.source("head")
        same_parent = rec.parent == session.head  # its verdict compared against today's code
        review = self._new_review(rec.stage, current, code, engine=rec.engine,
                                  rationale=f"{rec.rationale}\n\n(brought back from {candidate_id})",
                                  model=rec.model, verdict=rec.verdict if same_parent else None,
                                  candidate_id=candidate_id if same_parent and rec.status == CandidateStatus.PENDING
                                  else None)
        self._warm(code)
        return review

    def _keep_candidate(self, review: CandidateReview) -> CandidateRecord:
        engine = review.engine if review.origin != "edit" else "manual"
        rationale = review.rationale
        if review.origin == "merge" and review.accepted_hunks is not None:
            # the first line (the commit's subject once approved) names what was kept
            kept = describe_merge(review.base_source, review.proposed_source, review.accepted_hunks)
            rationale = (f"{kept}, from the {review.engine} candidate\n\n"
                         f"Hunks accepted by the user: {review.accepted_hunks}\n\n"
                         f"The {review.engine} candidate's rationale (for all its hunks):\n{review.rationale}")
        if review.origin == "edit":
            rationale = f"user's edit of the {review.engine} candidate for {review.stage}"
        iteration = max((int(a.get("iteration") or 0) for a in review.iterations), default=0) or None
        return self.controller().keep(review.stage, review.source, engine=engine, model=review.model,
                                      iteration=iteration, rationale=rationale,
                                      verdict=review.verdict if review.verdict_current else None)

    def _require_review(self) -> CandidateReview:
        if self.review is None:
            raise WorkbenchError("there is no candidate under review: propose one first")
        return self.review

    # ================================================================= job results

    def poll(self) -> list[tuple[str, str]]:
        """Apply the results of finished background jobs (on the caller's thread). Returns
        messages ``(level, text)`` for the page to show."""
        messages: list[tuple[str, str]] = []
        with self._lock:
            messages += self._poll_device()
            messages += self._poll_portability()
            messages += self._poll_first_version()
            messages += self._poll_propose()
            messages += self._poll_verify()
        return messages

    def _take(self, purpose: str) -> BackgroundJob | None:
        job = self.jobs.current(purpose)
        if job is None or not job.finished or job.meta.get("applied"):
            return None
        job.meta["applied"] = True
        return job

    def _poll_device(self) -> list[tuple[str, str]]:
        out = []
        job = self._take("device")
        if job is not None:
            if job.state is JobState.DONE:
                self.device = job.result
                self.device_error = ""
            elif job.state is JobState.FAILED:
                self.device_error = f"{type(job.error).__name__}: {job.error}"
                out.append(("warning", f"device probe failed: {self.device_error}"))
        job = self._take("doctor")
        if job is not None:
            if job.state is JobState.DONE:
                self.doctor_report = job.result
                self.doctor_error = ""
            elif job.state is JobState.FAILED:
                self.doctor_error = f"{type(job.error).__name__}: {job.error}"
        return out

    def _poll_portability(self) -> list[tuple[str, str]]:
        job = self._take("portability")
        if job is None:
            return []
        if job.state is JobState.FAILED:
            return [("error", f"portability step failed: {type(job.error).__name__}: {job.error}")]
        outcome: StageOutcome | None = job.result
        if outcome is None:
            return [("warning" if job.state is JobState.CANCELLED else "info",
                     "portability: cancelled" if job.state is JobState.CANCELLED
                     else "portability: nothing to port")]
        if outcome.status is OutcomeStatus.APPROVED:
            self._reanalyse()
            return [("success", f"portability: committed the device-agnostic version ({outcome.reason})")]
        level = "error" if outcome.status is OutcomeStatus.FAILED else "info"
        return [(level, f"portability: {outcome.status}: {outcome.reason}")]

    def _poll_first_version(self) -> list[tuple[str, str]]:
        job = self._take("first_version")
        if job is None:
            return []
        if job.state is JobState.FAILED:
            return [("error", f"Start from PyTorch failed: {type(job.error).__name__}: {job.error}")]
        outcome: StageOutcome | None = job.result
        if outcome is None:
            return [("warning", "Start from PyTorch: cancelled")]
        self.last_stage_result = outcome
        if outcome.status is OutcomeStatus.APPROVED:
            self._reanalyse()
            return [("success", f"version 1 committed ({str(outcome.version)[:10]}): {outcome.reason}")]
        level = "warning" if outcome.status is OutcomeStatus.CANCELLED else "error"
        return [(level, f"Start from PyTorch: {outcome.status}: {outcome.reason}")]

    def _poll_propose(self) -> list[tuple[str, str]]:
        job = self._take("propose")
        if job is None:
            return []
        if job.state is JobState.FAILED:
            return [("error", f"{job.label} failed: {type(job.error).__name__}: {job.error}")]
        outcome: StageOutcome | None = job.result
        if job.state is JobState.CANCELLED and outcome is None:
            return [("warning", f"{job.label}: cancelled (candidates verified so far are kept)")]
        self.last_stage_result = outcome
        return self._apply_outcome(job.meta["stage"], job.meta["base_source"], outcome)

    def _apply_outcome(self, stage: str, base_source: str, outcome: StageOutcome) -> list[tuple[str, str]]:
        """Put the CoVeR loop's best candidate under review. The loop has already kept every
        attempt (with its verdict) in the session."""
        status = outcome.status
        after = plural(outcome.iterations, "CoVeR iteration")
        if status is OutcomeStatus.REVIEW and outcome.best and outcome.best_source is not None:
            if self.session is None or self.session.head != self.session.candidate(outcome.best).parent:
                return [("warning", "the current version changed while the engine worked; propose again")]
            best = next((a for a in outcome.attempts if a.candidate_id == outcome.best), None)
            self._new_review(stage, base_source, outcome.best_source,
                             engine=(best.engine if best else "") or "engine",
                             rationale=(best.rationale if best else "") or outcome.reason,
                             prompt=(getattr(best.candidate, "prompt", None) or "") if best else "",
                             model=best.model if best else None, verdict=outcome.verdict,
                             candidate_id=outcome.best,
                             iterations=[a.to_dict(with_source=True) for a in outcome.attempts])
            return [("success", f"{stage}: candidate {outcome.best} ready for review after {after}: "
                                f"{outcome.reason}")]
        if status is OutcomeStatus.APPROVED:
            self._reanalyse()
            return [("success", f"{stage}: approved as {str(outcome.version)[:10]} after {after}")]
        level = {OutcomeStatus.KEPT_CURRENT: "info", OutcomeStatus.FAILED: "error",
                 OutcomeStatus.CANCELLED: "warning"}.get(status, "info")
        self.review = None
        label = {OutcomeStatus.KEPT_CURRENT: "kept the current version"}.get(status, str(status))
        return [(level, f"{stage}: {label} after {after}: {outcome.reason}")]

    def _poll_verify(self) -> list[tuple[str, str]]:
        job = self._take("verify")
        if job is None or self.review is None:
            return []
        review = self.review
        if job.state is JobState.CANCELLED or (job.state is JobState.DONE and job.result is None):
            review.abort_verify()
            return [("warning", "verification cancelled")]
        if job.state is JobState.FAILED:
            review.abort_verify()
            return [("error", f"verification failed to run: {type(job.error).__name__}: {job.error}")]
        verdict: Verdict = job.result
        review.finish_verify(verdict, job.meta["source"])
        level = "success" if verdict.passed else "error"
        return [(level, f"verdict: {verdict.kind.value}" + (f" — {verdict.reason}" if verdict.reason else ""))]

    # ================================================================= Flash Attention demo

    def demo_workbench(self) -> Workbench:
        """The workbench the Flash Attention demo runs in, made on first use: a second
        :class:`Workbench` with its own session, candidate under review and jobs, sharing this
        one's workspace, device, target choice and engine settings. Whatever the demo does stays
        in the session the demo itself created or resumed; the session open here is never
        touched, nor is it replaced."""
        demo = self.__dict__.get("_demo_workbench")
        if demo is None:
            demo = Workbench(self.workspace)
            self._demo_workbench = demo
        demo.device, demo.target_choice, demo.settings = self.device, self.target_choice, self.settings
        return demo

    def demo_sessions(self) -> list[dict[str, Any]]:
        """The demo's sessions in the workspace (those :meth:`start_demo` created), newest first,
        as :meth:`list_sessions` lists them."""
        return [s for s in self.list_sessions() if str(s.get("name") or "").startswith(DEMO_SESSION_PREFIX)]

    def start_demo(self, resume: str | Path | None = None) -> list[Any]:
        """Load the Flash Attention trajectory in a session of the demo's own: ``resume`` (the path
        of one of :meth:`demo_sessions`) reopens it and the demo continues after its last approved
        step; ``None`` starts a new one whose baseline is the trajectory's naive kernel. The
        trajectory is the session target's family's (``flash_attention_trajectory``). Call it on
        :meth:`demo_workbench`. Returns the steps (baseline first).

        Raises :class:`WorkbenchError` when ``resume`` is not a demo session."""
        import re

        from xeforge_core.samples import flash_attention_trajectory

        if resume is not None:
            if not any(str(s["path"]) == str(resume) for s in self.demo_sessions()):
                raise WorkbenchError(f"{resume} is not a Flash Attention demo session: the demo resumes only its own")
            session = self.resume_session(resume)
        else:
            first = flash_attention_trajectory(self.target())[0]
            loaded = LoadedInput(problem=first.problem, source=first.code,
                                 spec_text=Path(first.spec_path).read_text(),
                                 reference_source=Path(first.reference_path).read_text(),
                                 name=f"{DEMO_SESSION_PREFIX}-{first.problem.name}")
            self._set_loaded(loaded, "Flash Attention demo")
            session = self.start_session()
        steps = flash_attention_trajectory(session.target)
        done = [int(m.group(1)) for v in session.history()
                if (m := re.fullmatch(r"flash-attention step (\d+)", str(getattr(v, "model", "") or "")))]
        self.demo = {"steps": steps, "next": min(max(done, default=0) + 1, len(steps) - 1),
                     "verify_problem": None, "review_source": None}
        return steps

    def _demo_session(self) -> Session:
        """The demo's session; refuses any other (the demo never works in another session)."""
        session = self.require_session()
        if not self.demo.get("steps") or not session.name.startswith(DEMO_SESSION_PREFIX):
            raise WorkbenchError("start or resume the Flash Attention demo first: it runs in a session of its own")
        return session

    def demo_step_review(self, index: int) -> CandidateReview:
        """Put trajectory step ``index`` under review as a candidate against the current version of
        the demo's session.

        A step that computes the same function is verified against the current version (so its
        speedup is per step); the causal step computes another function and is verified against
        its own reference, with itself as the baseline (no like-for-like speedup)."""
        steps = self.demo.get("steps")
        if not steps:
            raise WorkbenchError("start the Flash Attention demo first")
        if not 0 < index < len(steps):
            raise WorkbenchError(f"no trajectory step {index}")
        session = self._demo_session()
        step = steps[index]
        current = session.source("head")
        rule = f" (rule `{step.rule_id}`)" if step.rule_id else ""
        review = self._new_review(step.stage, current, step.code, engine="trajectory",
                                  rationale=f"**{step.title}**{rule}\n\n{step.annotation}",
                                  model=f"flash-attention step {index}")
        self.demo["verify_problem"] = step.problem if step.causal else None
        self.demo["review_source"] = step.code
        self.demo["current"] = index
        return review

    def demo_approve(self) -> Version:
        """Approve the step under review and move the demo to the next step."""
        self._demo_session()
        version = self.approve()
        cur = int(self.demo.get("current", 0))
        self.demo["next"] = cur + 1
        self.demo["verify_problem"] = None
        return version

    # ================================================================= exports

    def export_files(self, version: str | int = "head") -> dict[str, bytes]:
        """The final kernel, the patch and the reports as downloadable bytes."""
        import tempfile

        session = self.require_session()
        with tempfile.TemporaryDirectory(prefix="xeforge-export-") as tmp:
            paths = session.export(tmp, version=version)
            return {key: Path(p).read_bytes() for key, p in paths.items()}


__all__ = ["DEMO_SESSION_PREFIX", "EngineSettings", "InputError", "PlanItem", "ReviewError", "Workbench", "WorkbenchError",
           "sample_titles", "stage_ids"]
