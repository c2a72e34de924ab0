"""Optimization sessions kept in git: one repository per session, every decision a commit or a ref.

Layout of a session repository (a normal, non-bare git repository; its working tree always
shows the current version)::

    <kernel>.py                 the kernel under optimization (current version)
    <kernel>.yaml               its spec, when one was given
    <kernel>_ref.py             its PyTorch reference, when one was given
    session.json                problem name, target, device fingerprint, files, first plan
    .xeforge/verdicts/<stage>/<n>.json
                                the verdict of candidate ``<stage>/<n>`` (kept in every later
                                version's tree, so a version carries its own evidence)

History:

* branch ``session`` (``HEAD``): commit 0 is the baseline; every later commit is one decision:
  an approved candidate (``Engine: rules|llm|...``), a user's manual edit (``Engine: manual``,
  never mixed with an engine's change), the preparatory portability change
  (``Stage: portability``) or a restore (``Restores: <sha>``). Commit messages end with
  trailers: ``Stage``, ``Engine``, ``Model``, ``Verdict``, ``Speedup``,
  ``Cumulative-Speedup``, ``Device``, ``Iteration``, ``Candidate``.
* ``refs/candidates/<stage>/<n>``: every candidate ever verified (pending, approved, rejected
  or superseded), as a commit whose parent is the version it was proposed against and whose
  tree holds the candidate and its verdict. Nothing the user saw is lost.
* ``refs/xeforge/state``: a chain of commits holding ``state.json``: the current plan, the
  status of each stage (``done``, ``kept_current``, ``skipped``, ...), candidate statuses and
  the decision log. ``Session.open`` recovers everything from the repository alone.

Atomicity: objects are written first and a ref update (``git update-ref`` with the expected
old value) is the single commit point of every operation, so an interruption at any moment
(a crashed verification worker, a killed UI) leaves either the old or the new state, never a
half-written one. The working tree is re-synchronised from ``HEAD`` after each change.

Secrets: every blob and message written into the repository passes through a redactor that
replaces the values of secret-looking environment variables (``*KEY*``, ``*TOKEN*``,
``*SECRET*``, ``*PASSWORD*``) and any value given to :func:`register_secret` with
``[REDACTED]``, so an API key cannot reach the history even by accident.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import fcntl
import json
import os
import re
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git

from xeforge_core.problem import problem_from_source
from xeforge_core.session.approval import SessionError, check_approval
from xeforge_core.session.git import GitStore, GitStoreError
from xeforge_core.session.records import (
    CANDIDATE_REF_PREFIX,
    CandidateRecord,
    FileDiff,
    SessionDiff,
    Version,
    commit_message,
    device_label,
    format_speedup,
    parse_speedup,
    parse_trailers,
    speed_measured,
)
from xeforge_core.session.redact import redact
from xeforge_core.session.report import json_report, markdown_report
from xeforge_core.target import Target, resolve
from xeforge_core.verdict import Verdict
from xeforge_core.vocab.stages import PORTABILITY
from xeforge_core.vocab.status import CandidateStatus, StageStatus

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.problem import Problem

BRANCH = "session"
BRANCH_REF = f"refs/heads/{BRANCH}"
STATE_REF = "refs/xeforge/state"
META_DIR = ".xeforge"
SESSION_FILE = "session.json"
FORMAT_VERSION = 1

_STAGE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")



# --------------------------------------------------------------------------------------------
# helpers


def _now() -> float:
    return time.time()


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")
    return slug or "kernel"


# --------------------------------------------------------------------------------------------
# the session


class Session:
    """One optimization session: a git repository under ``path`` (see the module docstring).

    Create one with :meth:`create`, reopen it after a restart with :meth:`open`. Methods that
    change history return the new :class:`Version` or :class:`CandidateRecord`; versions are
    named by :meth:`resolve` (``"baseline"``, ``"head"``, an index, a sha or sha prefix, a
    candidate id ``"<stage>/<n>"`` or a ref name). Raises :class:`SessionError` for anything
    that cannot be done as asked.
    """

    def __init__(self, path: Path, repo: git.Repo, *, secrets: Iterable[str] = ()) -> None:
        self.path = Path(path)
        self.repo = repo
        self.store = GitStore(self.path, repo)
        # GitPython keeps persistent ``git cat-file`` processes per Repo, and a Repo sits in
        # reference cycles, so without this they lived until the cyclic collector ran: one set
        # per session opened (every listing of the workspace opens each session)
        weakref.finalize(self, repo.close)
        self._secrets = [s for s in secrets if s]
        self._baseline: str | None = None
        self._info: dict[str, Any] = json.loads(self._read(self.baseline, SESSION_FILE))
        self._state: dict[str, Any] = self._load_state()

    def close(self) -> None:
        """Stop the ``git cat-file`` processes this session's repository keeps for its reads
        (also done when the object is dropped). The session stays usable: a later read starts
        them again."""
        self.repo.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- create / open

    @classmethod
    def create(
        cls,
        problem: Problem,
        *,
        workspace: str | Path | None = None,
        path: str | Path | None = None,
        name: str | None = None,
        target: Target | str | None = None,
        device: DeviceInfo | dict[str, Any] | None = None,
        plan: Iterable[str] | None = None,
        spec_text: str | None = None,
        reference_text: str | None = None,
        secrets: Iterable[str] = (),
    ) -> Session:
        """Start a session for ``problem`` (a :class:`xeforge_core.problem.Problem`).

        The repository goes to ``path`` when given, else ``<workspace>/<name>-<UTC timestamp>``
        (``workspace`` defaults to ``./workspace``). ``device`` is the run device (a
        ``DeviceInfo`` or a fingerprint dict; ``None``: the cpu interpreter); ``target`` the
        user's choice of hardware (a :class:`~xeforge_core.target.Target`, a profile id
        or name, or a family; ``None``: :func:`~xeforge_core.target.resolve` decides
        from the device); ``plan`` the stage ids in order. ``spec_text``/``reference_text`` override reading the
        spec/reference from their paths. Commit 0 (the baseline) holds the kernel, the spec and
        reference when present, and ``session.json``. Raises ``SessionError`` when ``path``
        exists and is not empty.
        """
        name = _slug(name or getattr(problem, "name", None) or "kernel")
        if path is None:
            root = Path(workspace) if workspace is not None else Path.cwd() / "workspace"
            stamp = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
            path = root / f"{name}-{stamp}"
            n = 2
            while path.exists():
                path = root / f"{name}-{stamp}-{n}"
                n += 1
        path = Path(path).resolve()
        if path.exists() and any(path.iterdir()):
            raise SessionError(f"{path} exists and is not empty; pick another session path")
        path.mkdir(parents=True, exist_ok=True)

        kernel = problem.kernel
        kernel_name = kernel.path.name if getattr(kernel, "path", None) else f"{name}.py"
        stem = Path(kernel_name).stem
        files: dict[str, str] = {kernel_name: kernel.source}
        info_files: dict[str, str | None] = {"kernel": kernel_name, "spec": None, "reference": None}
        spec = getattr(problem, "spec", None)
        if spec_text is None and spec is not None and getattr(spec, "path", None):
            with contextlib.suppress(OSError):
                spec_text = Path(spec.path).read_text()
        if spec_text is not None:
            spec_name = Path(spec.path).name if spec is not None and getattr(spec, "path", None) else f"{stem}.yaml"
            if spec_name == kernel_name:
                spec_name = f"{stem}.yaml"
            files[spec_name] = spec_text
            info_files["spec"] = spec_name
        ref = getattr(problem, "reference", None)
        if reference_text is None and ref is not None:
            reference_text = ref.source
        if reference_text is not None:
            ref_name = ref.path.name if ref is not None and getattr(ref, "path", None) else f"{stem}_ref.py"
            if ref_name in files:
                ref_name = f"{stem}_ref.py"
            files[ref_name] = reference_text
            info_files["reference"] = ref_name

        fingerprint = _fingerprint(device)
        info = {
            "format": FORMAT_VERSION,
            "name": name,
            "problem": getattr(problem, "name", name),
            "class_name": getattr(kernel, "class_name", "Model"),
            "files": info_files,
            "target": resolve(device, target).to_dict(),
            "device": fingerprint,
            "device_label": device_label(fingerprint),
            "plan": list(plan or []),
            "created": _iso(_now()),
        }
        files[SESSION_FILE] = json.dumps(info, indent=2, sort_keys=True) + "\n"

        store = GitStore.init(path, BRANCH)
        (path / ".git" / "xeforge").mkdir(exist_ok=True)
        session = cls.__new__(cls)
        session.path = path
        session.repo = store.repo
        session.store = store
        weakref.finalize(session, store.repo.close)  # as in __init__
        session._secrets = [s for s in secrets if s]
        tree = session._build_tree(None, files)
        trailers = {
            "Stage": "baseline",
            "Engine": "baseline",
            "Device": device_label(fingerprint),
            "Target": info["target"]["profile"],
        }
        sha = session._commit_tree(tree, [], commit_message(f"baseline: {info['problem']}", "", trailers))
        session._update_ref(BRANCH_REF, sha, None)
        session._baseline = sha
        session._info = info
        session._base_problem = problem
        session._state = session._initial_state()
        session._log("create", version=sha)
        session._save_state()
        session._sync_worktree()
        return session

    @classmethod
    def open(cls, path: str | Path, *, secrets: Iterable[str] = ()) -> Session:
        """Reopen the session repository at ``path`` (after a restart: plan, stage statuses,
        candidates and decisions come back from the repository). Raises ``SessionError`` if
        ``path`` is not a session."""
        path = Path(path).resolve()
        try:
            repo = git.Repo(path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
            raise SessionError(f"{path} is not a session repository ({exc.__class__.__name__})") from exc
        if GitStore(path, repo).ref(BRANCH_REF) is None:
            raise SessionError(f"{path} is not a session repository (no '{BRANCH}' branch)")
        session = cls(path, repo, secrets=secrets)
        (path / ".git" / "xeforge").mkdir(exist_ok=True)
        return session

    @staticmethod
    def list_sessions(workspace: str | Path) -> list[dict[str, Any]]:
        """The sessions under ``workspace`` (newest first): path, name, problem, created,
        versions count and current stage. Directories that are not sessions are skipped."""
        root = Path(workspace)
        out = []
        if not root.is_dir():
            return out
        for child in sorted(root.iterdir()):
            if not (child / ".git").exists():
                continue
            try:
                s = Session.open(child)
            except (SessionError, ValueError, KeyError, git.GitError):
                continue
            with s:
                out.append({
                    "path": str(child), "name": s.name, "problem": s.info.get("problem"),
                    "created": s.info.get("created"), "versions": len(s.history()),
                    "current_stage": s.current_stage, "target": s.target.label,
                })
        out.sort(key=lambda d: d.get("created") or "", reverse=True)
        return out

    # ---------------------------------------------------------------- properties

    @property
    def info(self) -> dict[str, Any]:
        """The baseline's ``session.json`` (problem, files, target, device, first plan)."""
        return dict(self._info)

    @property
    def name(self) -> str:
        return str(self._info.get("name"))

    @property
    def target(self) -> Target:
        """The hardware the session optimizes for (the user's choice, else the run device's
        profile, else the product's target; see :func:`xeforge_core.target.resolve`).
        :meth:`set_target` changes it; sessions of older versions, which stored a device type
        or a profile id, resolve the same way."""
        self._refresh()
        return resolve(self._info.get("device"), self._state.get("target") or self._info.get("target"))

    @property
    def device(self) -> dict[str, Any]:
        return dict(self._info.get("device") or {})

    @property
    def kernel_file(self) -> str:
        return str(self._info["files"]["kernel"])

    @property
    def spec_file(self) -> str | None:
        return self._info["files"].get("spec")

    @property
    def reference_file(self) -> str | None:
        return self._info["files"].get("reference")

    @property
    def head(self) -> str:
        """The sha of the current version."""
        sha = self.store.ref(BRANCH_REF)
        if sha is None:
            raise SessionError(f"{self.path} has no '{BRANCH}' branch")
        return sha

    @property
    def baseline(self) -> str:
        """The sha of commit 0 (the baseline; it never changes)."""
        if self._baseline is None:
            self._baseline = self._branch_shas()[0]
        return self._baseline

    @property
    def plan(self) -> list[str]:
        """The stage ids in the order they will run (the user may change it: ``set_plan``)."""
        self._refresh()
        return list(self._state["plan"])

    @property
    def stages(self) -> dict[str, dict[str, Any]]:
        """Per stage: ``{"status", "reason", "versions", "candidates", "time"}``."""
        self._refresh()
        return {k: dict(v) for k, v in self._state["stages"].items()}

    @property
    def current_stage(self) -> str | None:
        """The first planned stage not yet finished (``done``, ``kept_current``, ``skipped`` or
        ``failed``), or ``None`` when the plan is complete."""
        self._refresh()
        for stage in self._state["plan"]:
            if StageStatus(self._state["stages"].get(stage, {}).get("status") or StageStatus.PENDING).open:
                return stage
        return None

    @property
    def decisions(self) -> list[dict[str, Any]]:
        """The decision log, oldest first: ``{"action", "time", ...}`` dicts (create, approve,
        reject, manual, restore, stage, plan)."""
        self._refresh()
        return [dict(d) for d in self._state["log"]]

    # ---------------------------------------------------------------- reading versions

    def resolve(self, version: str | int | None = "head") -> str:
        """The full sha of ``version``: ``"head"``/``None``, ``"baseline"``, an ``int`` index on
        the branch (negative counts from the end), a candidate id ``"<stage>/<n>"``, a ref name
        or a sha (prefix). Raises ``SessionError`` if it names nothing."""
        if version is None or version == "head" or version == "HEAD":
            return self.head
        if version == "baseline":
            return self.baseline
        if isinstance(version, int) or (isinstance(version, str) and re.fullmatch(r"-?\d{1,4}", version)):
            shas = self._branch_shas()
            idx = int(version)
            try:
                return shas[idx]
            except IndexError as exc:
                raise SessionError(f"no version {idx}: the session has {len(shas)} versions") from exc
        text = str(version)
        for ref in (CANDIDATE_REF_PREFIX + text, text, f"refs/heads/{text}"):
            sha = self.store.ref(ref) if ref.startswith("refs/") else None
            if sha is not None:
                return sha
        if re.fullmatch(r"[0-9a-f]{40}", text) and self.store.has_commit(text):
            return text
        if re.fullmatch(r"[0-9a-f]{4,39}", text):  # an abbreviated sha
            try:
                return self.repo.git.rev_parse("--verify", "--quiet", text + "^{commit}")
            except git.GitCommandError:
                pass
        raise SessionError(f"unknown version {text!r}")

    def source(self, version: str | int | None = "head") -> str:
        """The kernel source at ``version``."""
        return self._read(self.resolve(version), self.kernel_file)

    def file_at(self, version: str | int | None, path: str) -> str | None:
        """The text of ``path`` at ``version``, or ``None`` when that version has no such file."""
        try:
            return self._read(self.resolve(version), path)
        except KeyError:
            return None

    def files_at(self, version: str | int | None = "head", *, include_meta: bool = False) -> dict[str, str]:
        """All files of ``version`` as ``{path: text}`` (``.xeforge/`` only with
        ``include_meta``)."""
        files = self.store.tree_files(self.resolve(version))
        return {path: data.decode("utf-8", errors="replace") for path, data in files.items()
                if include_meta or not path.startswith(META_DIR + "/")}

    def problem(self, version: str | int | None = "head") -> Problem:
        """The :class:`~xeforge_core.problem.Problem` with the kernel and the spec as of
        ``version`` (the reference of the baseline; the spec changes only by :meth:`edit_spec`).
        The baseline kernel is parsed once per spec (from the problem given to :meth:`create`,
        or from the files on :meth:`open`); a version is that problem with its kernel source, so
        a version that does not parse still gives a problem whose verification reports the
        error. Raises ``ProblemError`` when the baseline itself cannot be read as a problem."""
        sha = self.resolve(version)
        spec_text = self._read(sha, self.spec_file) if self.spec_file else None
        problems: dict[str | None, Problem] = self.__dict__.setdefault("_problems", {})
        base = problems.get(spec_text)
        if base is None:
            base = getattr(self, "_base_problem", None)
            baseline_spec = self._read(self.baseline, self.spec_file) if self.spec_file else None
            if base is None or spec_text != baseline_spec:
                ref_text = self._read(self.baseline, self.reference_file) if self.reference_file else None
                base = problem_from_source(
                    self._read(self.baseline, self.kernel_file),
                    name=_problem_name(self._info.get("problem") or self.name),
                    spec_text=spec_text, reference_source=ref_text,
                )
            problems[spec_text] = base
        if sha == self.baseline:
            return base
        return base.with_kernel_source(self._read(sha, self.kernel_file), label="baseline")

    def spec_text(self, version: str | int | None = "head") -> str | None:
        """The spec's YAML text as of ``version`` (``None`` when the session has no spec)."""
        return self._read(self.resolve(version), self.spec_file) if self.spec_file else None

    def edit_spec(self, text: str, *, message: str = "") -> Version:
        """Make ``text`` the spec from the current version on: a new commit (``Stage: spec``,
        ``Engine: manual``) with the kernel unchanged, so the change is in the history like any
        other decision and the verdicts before it keep the spec they were given. Candidates
        proposed against the old version are verified again against the new one before they can
        be approved. Raises ``ProblemError`` (file, line, field) when the current kernel and
        ``text`` are not a valid problem, and ``SessionError`` when the session has no spec or
        ``text`` changes nothing."""
        if not self.spec_file:
            raise SessionError("this session has no spec to edit (start a new session with one)")

        ref_text = self._read(self.baseline, self.reference_file) if self.reference_file else None
        problem_from_source(self.source("head"), name=_problem_name(self._info.get("problem") or self.name),
                            spec_text=text, reference_source=ref_text)  # raises ProblemError, named
        with self._locked():
            self._refresh()
            head = self.head
            if self._read(head, self.spec_file) == text:
                raise SessionError("the spec is unchanged")
            tree = self._build_tree(self.store.tree_of(head), {self.spec_file: text})
            parent = self.version(head)
            trailers = {"Stage": "spec", "Engine": "manual", "Verdict": "not verified",
                        "Speedup": "not measured", "Cumulative-Speedup": format_speedup(parent.cumulative_speedup),
                        "Device": device_label(self.device)}
            subject = f"spec: {_summary_line(message) or 'the spec edited'} (manual)"
            sha = self._commit_tree(tree, [head], commit_message(subject, message, trailers))
            self._update_ref(BRANCH_REF, sha, head)
            self._log("edit_spec", version=sha)
            self._save_state()
        self._sync_worktree()
        return self.version(sha)

    def history(self) -> list[Version]:
        """The versions on the session branch, baseline first."""
        versions: list[Version] = []
        for index, sha in enumerate(self._branch_shas()):
            commit = self.repo.commit(sha)
            message = self.store.message(sha)
            t = parse_trailers(message)
            engine = t.get("Engine")
            if index == 0:
                kind = "baseline"
            elif t.get("Restores"):
                kind = "restore"
            elif t.get("Stage") == PORTABILITY:
                kind = "portability"
            elif engine == "manual":
                kind = "manual"
            else:
                kind = "engine"
            iteration = t.get("Iteration")
            versions.append(Version(
                sha=sha, index=index, kind=kind, summary=message.splitlines()[0] if message else "",
                message=message, time=float(commit.committed_date), stage=t.get("Stage"),
                engine=engine, model=t.get("Model") if t.get("Model") not in (None, "-") else None,
                verdict=t.get("Verdict"), speedup=parse_speedup(t.get("Speedup")),
                cumulative_speedup=parse_speedup(t.get("Cumulative-Speedup")) if index else 1.0,
                device=t.get("Device"), iteration=int(iteration) if iteration and iteration.isdigit() else None,
                candidate=t.get("Candidate"), restores=t.get("Restores"), trailers=t,
            ))
        return versions

    def version(self, version: str | int | None = "head") -> Version:
        """The :class:`Version` record of a branch commit. Raises ``SessionError`` if
        ``version`` is not on the branch (e.g. a rejected candidate)."""
        sha = self.resolve(version)
        for v in self.history():
            if v.sha == sha:
                return v
        raise SessionError(f"{version!r} is not a version on the session branch")

    def verdict_of(self, version: str | int | None = "head") -> Verdict | None:
        """The verdict that admitted ``version`` (an approved candidate's, a manual edit's when
        verified), or ``None`` (baseline, restore, unverified edit)."""
        v = self.version(version)
        if not v.candidate:
            return None
        return self._verdict_in_tree(v.sha, v.candidate)

    # ---------------------------------------------------------------- candidates

    def add_candidate(
        self,
        stage: str,
        source: str,
        *,
        engine: str,
        model: str | None = None,
        iteration: int | None = None,
        rationale: str = "",
        verdict: Verdict | None = None,
        based_on: str | None = None,
        parent: str | int | None = "head",
    ) -> CandidateRecord:
        """Keep a candidate for ``stage`` under ``refs/candidates/<stage>/<n>`` (status
        ``pending``) as a commit whose parent is ``parent`` (default: the current version) and
        whose tree is the parent's with the kernel replaced by ``source`` (and the verdict file,
        when given). ``based_on`` names the candidate a manual edit started from. Returns the
        record. Raises ``SessionError`` for a bad stage id."""
        if not _STAGE_RE.match(stage):
            raise SessionError(f"bad stage id {stage!r} (letters, digits, '_', '-', '.')")
        with self._locked():
            self._refresh()
            parent_sha = self.resolve(parent)
            number = int(self._state["counters"].get(stage, 0)) + 1
            while self.store.ref(f"{CANDIDATE_REF_PREFIX}{stage}/{number}") is not None:
                number += 1
            cid = f"{stage}/{number}"
            sha = self._candidate_commit(parent_sha, cid, stage, source, engine=engine, model=model,
                                         iteration=iteration, rationale=rationale, verdict=verdict,
                                         based_on=based_on)
            self._update_ref(CANDIDATE_REF_PREFIX + cid, sha, None)
            self._state["counters"][stage] = number
            self._state["candidates"][cid] = {"status": CandidateStatus.PENDING, "reason": "", "time": _now()}
            st = self._stage_entry(stage)
            st["candidates"].append(cid)
            self._log("candidate", candidate=cid, engine=engine, iteration=iteration,
                      verdict=verdict.kind.value if verdict else None)
            self._save_state()
        return self.candidate(cid)

    def record_verdict(self, candidate_id: str, verdict: Verdict) -> CandidateRecord:
        """Attach (or replace) the verdict of a kept candidate: its ref moves to a commit with
        the same parent and code plus the verdict file. Raises ``SessionError`` for an unknown
        or already approved candidate."""
        with self._locked():
            rec = self.candidate(candidate_id)
            if rec.status == CandidateStatus.APPROVED:
                raise SessionError(f"candidate {candidate_id} is already approved; its verdict is fixed")
            source = self._read(rec.sha, self.kernel_file)
            sha = self._candidate_commit(rec.parent, rec.id, rec.stage, source, engine=rec.engine,
                                         model=rec.model, iteration=rec.iteration, rationale=rec.rationale,
                                         verdict=verdict, based_on=rec.based_on)
            self._update_ref(rec.ref, sha, rec.sha)
            self._refresh()
            self._log("verdict", candidate=rec.id, verdict=verdict.kind.value)
            self._save_state()
        return self.candidate(candidate_id)

    def candidate(self, candidate_id: str) -> CandidateRecord:
        """The record of candidate ``"<stage>/<n>"``. Raises ``SessionError`` if unknown."""
        self._refresh()
        sha = self.store.ref(CANDIDATE_REF_PREFIX + candidate_id)
        if sha is None:
            raise SessionError(f"unknown candidate {candidate_id!r}")
        return self._candidate_record(candidate_id, sha)

    def candidates(self, stage: str | None = None, status: str | None = None) -> list[CandidateRecord]:
        """Every kept candidate (optionally of one ``stage`` and/or ``status``), oldest first,
        each with its verdict."""
        self._refresh()
        pattern = CANDIDATE_REF_PREFIX + (f"{stage}/" if stage else "")
        out = []
        for ref, sha in self.store.refs(pattern).items():
            cid = ref[len(CANDIDATE_REF_PREFIX):]
            rec = self._candidate_record(cid, sha)
            if status is None or rec.status == status:
                out.append(rec)
        out.sort(key=lambda r: (r.time, r.stage, r.number))
        return out

    def approve(self, candidate_id: str, *, message: str | None = None, allow_stale: bool = False,
                note: str = "", speed_neutral: bool = False) -> Version:
        """Make candidate ``candidate_id`` the new current version: one commit on the branch
        with the candidate's tree (code and verdict) and the trailers. Raises ``SessionError``
        when the candidate is unknown, rejected or already approved, or was proposed against
        another version than the current one (``allow_stale`` overrides: its verdict then
        compares against an older version, which the commit states). ``note`` goes into the
        trailers (e.g. ``speed not measured``). ``speed_neutral`` (the portability step, whose
        parent cannot run on this device) records no speedup for this link and carries the
        parent's cumulative speedup over. Approving a candidate of a stage (planned, or portability) that is still
        pending or running marks that stage ``done``."""
        with self._locked():
            self._refresh()
            rec = self.candidate(candidate_id)
            head = self.head
            stale = check_approval(rec, head, allow_stale=allow_stale, unchanged=self._read(rec.sha, self.kernel_file) == self._read(head, self.kernel_file))
            verdict = rec.verdict
            speed = verdict.speedup if speed_measured(verdict) and not speed_neutral else None
            parent_version = self.version(head)
            if speed_neutral:
                cumulative = parent_version.cumulative_speedup
            else:
                cumulative = (parent_version.cumulative_speedup * speed
                              if speed is not None and parent_version.cumulative_speedup is not None else None)
            unmeasured = verdict is not None and speed is None and not speed_neutral and verdict.passed
            failing = (f"approved despite verdict {verdict.kind.value}" if verdict is not None and not verdict.passed
                       else "approved without verification" if verdict is None else "")
            notes = [n for n in (note, failing, "speed not measured" if unmeasured else "",
                                 f"verified against {rec.parent[:10]}" if stale else "") if n]
            trailers = {
                "Stage": rec.stage,
                "Engine": rec.engine,
                "Model": rec.model or "-",
                "Verdict": verdict.kind.value if verdict else "unverified",
                "Speedup": format_speedup(speed),
                "Cumulative-Speedup": format_speedup(cumulative),
                "Device": device_label(verdict.device if verdict and verdict.device else self.device),
                "Iteration": rec.iteration,
                "Candidate": rec.id,
                "Based-On": rec.based_on,
                "Note": "; ".join(notes),
            }
            subject = message or f"{rec.stage}: {_summary_line(rec.rationale) or 'candidate ' + rec.id} ({rec.engine})"
            sha = self._commit_tree(self.store.tree_of(rec.sha), [head], commit_message(subject, rec.rationale, trailers))
            self._update_ref(BRANCH_REF, sha, head)
            self._state["candidates"].setdefault(rec.id, {})
            self._state["candidates"][rec.id].update(status=CandidateStatus.APPROVED, reason=note, approved_as=sha,
                                                       time=self._state["candidates"][rec.id].get("time", _now()))
            # every other pending candidate of this stage against the old head is superseded
            for other, meta in self._state["candidates"].items():
                if other != rec.id and meta.get("status") == CandidateStatus.PENDING and other.split("/")[0] == rec.stage:
                    meta["status"] = CandidateStatus.SUPERSEDED
                    meta["reason"] = f"{rec.id} was approved"
            entry = self._stage_entry(rec.stage)
            entry["versions"].append(sha)
            if StageStatus(entry.get("status") or StageStatus.PENDING).open:  # a planned stage, or portability
                entry.update(status=StageStatus.DONE, reason=f"approved {rec.id}", time=_now())
            self._log("approve", candidate=rec.id, version=sha, speedup=speed)
            self._save_state()
        self._sync_worktree()
        return self.version(sha)

    def reject(self, candidate_id: str, reason: str = "") -> CandidateRecord:
        """Mark a candidate rejected (it stays under its ref with its verdict). Raises
        ``SessionError`` for an unknown or approved candidate."""
        with self._locked():
            self._refresh()
            rec = self.candidate(candidate_id)
            if rec.status == CandidateStatus.APPROVED:
                raise SessionError(f"candidate {candidate_id} is approved; restore an earlier version instead")
            self._state["candidates"].setdefault(rec.id, {"time": rec.time})
            self._state["candidates"][rec.id].update(status=CandidateStatus.REJECTED, reason=reason)
            self._log("reject", candidate=rec.id, reason=reason)
            self._save_state()
        return self.candidate(candidate_id)

    def supersede(self, candidate_id: str, reason: str = "") -> CandidateRecord:
        """Mark a pending candidate superseded (another one was preferred)."""
        with self._locked():
            self._refresh()
            rec = self.candidate(candidate_id)
            if rec.status != CandidateStatus.PENDING:
                return rec
            self._state["candidates"].setdefault(rec.id, {"time": rec.time})
            self._state["candidates"][rec.id].update(status=CandidateStatus.SUPERSEDED, reason=reason)
            self._log("supersede", candidate=rec.id, reason=reason)
            self._save_state()
        return self.candidate(candidate_id)

    def commit_manual(self, source: str, *, stage: str = "manual", verdict: Verdict | None = None,
                      message: str = "", based_on: str | None = None) -> Version:
        """Commit the user's own edit of the current kernel as its own commit (``Engine:
        manual``), with its verdict when it was verified. The edit is first kept as a candidate
        (``<stage>/<n>``) and then approved. Raises ``SessionError`` if it changes nothing."""
        if source == self.source("head"):
            raise SessionError("the edit does not change the current kernel")
        rec = self.add_candidate(stage, source, engine="manual", rationale=message or "manual edit",
                                 verdict=verdict, based_on=based_on)
        return self.approve(rec.id, message=f"{stage}: {message or 'manual edit'} (manual)")

    def commit_worktree_edit(self, *, stage: str = "manual", verdict: Verdict | None = None,
                             message: str = "") -> Version:
        """Commit an edit the user made to the kernel file in the session's working tree, as a
        manual commit. Raises ``SessionError`` if the file is unchanged."""
        text = (self.path / self.kernel_file).read_text()
        return self.commit_manual(text, stage=stage, verdict=verdict, message=message)

    def restore(self, version: str | int, *, message: str = "") -> Version:
        """Make ``version`` (a branch version or a kept candidate) the current one again, as a
        NEW commit whose kernel, spec and reference are that version's (history is never
        rewritten; verdict files stay). Raises ``SessionError`` if it equals the current one."""
        with self._locked():
            self._refresh()
            target = self.resolve(version)
            head = self.head
            old_files = self.files_at(target)
            files = {p: t for p, t in old_files.items() if p != SESSION_FILE}
            current = {p: t for p, t in self.files_at(head).items() if p != SESSION_FILE}
            if files == current:
                raise SessionError(f"{version!r} has the same content as the current version")
            removed = [p for p in current if p not in files]
            tree = self._build_tree(self.store.tree_of(head), files, remove=removed)
            cumulative = None
            stage = None
            with contextlib.suppress(SessionError):
                tv = self.version(target)
                cumulative = tv.cumulative_speedup
                stage = tv.stage
            label = str(version)
            trailers = {"Stage": "restore", "Engine": "restore", "Restores": target,
                        "Restored-Stage": stage, "Verdict": "restored",
                        "Speedup": "not measured", "Cumulative-Speedup": format_speedup(cumulative),
                        "Device": device_label(self.device)}
            sha = self._commit_tree(tree, [head], commit_message(f"restore {label} ({target[:10]})", message, trailers))
            self._update_ref(BRANCH_REF, sha, head)
            self._log("restore", version=sha, restores=target)
            self._save_state()
        self._sync_worktree()
        return self.version(sha)

    # ---------------------------------------------------------------- plan and stages

    def set_target(self, choice: Target | str) -> Target:
        """Make ``choice`` (a :class:`Target`, a profile id or name, or a family) the session's
        target. Returns it. Raises ``TargetError`` for a choice that names no profile."""
        target = resolve(self._info.get("device"), choice)
        with self._locked():
            self._refresh()
            self._state["target"] = target.to_dict()
            self._log("target", target=target.profile)
            self._save_state()
        return target

    def set_plan(self, stages: Iterable[str]) -> list[str]:
        """Replace the stage plan (the user added, skipped or reordered stages). Returns it."""
        stages = list(dict.fromkeys(stages))
        for s in stages:
            if not _STAGE_RE.match(s):
                raise SessionError(f"bad stage id {s!r}")
        with self._locked():
            self._refresh()
            self._state["plan"] = stages
            for s in stages:
                self._stage_entry(s)
            self._log("plan", plan=stages)
            self._save_state()
        return stages

    def mark_stage(self, stage: str, status: StageStatus | str, reason: str = "", **extra: Any) -> dict[str, Any]:
        """Set a stage's status (a :class:`~xeforge_core.vocab.status.StageStatus` or its
        value) with a reason; extra JSON-able fields are stored too. Raises ``SessionError`` for
        an unknown status."""
        try:
            status = StageStatus(status)
        except ValueError:
            raise SessionError(f"unknown stage status {status!r} (one of "
                               f"{', '.join(s.value for s in StageStatus)})") from None
        with self._locked():
            self._refresh()
            entry = self._stage_entry(stage)
            entry.update(extra)
            entry["status"] = status
            entry["reason"] = reason
            entry["time"] = _now()
            self._log("stage", stage=stage, status=status, reason=reason)
            self._save_state()
            return dict(entry)

    def skip_stage(self, stage: str, reason: str = "skipped by the user") -> dict[str, Any]:
        """Mark ``stage`` skipped."""
        return self.mark_stage(stage, StageStatus.SKIPPED, reason)

    # ---------------------------------------------------------------- diff / export

    def diff(self, a: str | int | None = "baseline", b: str | int | None = "head", *,
             include_meta: bool = False, context: int = 3) -> SessionDiff:
        """The unified diff between versions ``a`` and ``b`` (any names :meth:`resolve`
        accepts), per file; ``session.json`` and ``.xeforge/`` only with ``include_meta``."""
        sa, sb = self.resolve(a), self.resolve(b)
        fa = self.files_at(sa, include_meta=include_meta)
        fb = self.files_at(sb, include_meta=include_meta)
        if not include_meta:
            fa.pop(SESSION_FILE, None)
            fb.pop(SESSION_FILE, None)
        files = []
        for path in sorted(set(fa) | set(fb)):
            old, new = fa.get(path), fb.get(path)
            if old == new:
                continue
            status = "modified" if old is not None and new is not None else ("added" if old is None else "deleted")
            lines = difflib.unified_diff(
                (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
                fromfile=f"a/{path}" if old is not None else "/dev/null",
                tofile=f"b/{path}" if new is not None else "/dev/null", n=context)
            text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                           for line in lines)
            files.append(FileDiff(path=path, status=status, diff=text, old=old or "", new=new or ""))
        return SessionDiff(old=sa, new=sb, files=files)

    def patch(self, a: str | int | None = "baseline", b: str | int | None = "head") -> str:
        """The patch (unified diff of the kernel, spec and reference) from ``a`` to ``b``."""
        return self.diff(a, b).text

    def export_inside(self) -> dict[str, Path]:
        """:meth:`export` of the head into the session's own ``export/`` folder, which
        ``.git/info/exclude`` keeps out of its history: where ``xeforge optimize`` and
        ``xeforge batch`` leave each session's final kernel."""
        exclude = self.path / ".git" / "info" / "exclude"
        exclude.parent.mkdir(parents=True, exist_ok=True)
        text = exclude.read_text() if exclude.exists() else ""
        if "/export/" not in text.splitlines():
            exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n") + "/export/\n")
        return self.export(self.path / "export")

    def export(self, dest: str | Path, *, version: str | int | None = "head") -> dict[str, Path]:
        """Write the final kernel (``<kernel>.py``), the patch baseline -> ``version``
        (``<stem>.patch``) and the reports (``report.md``, ``report.json``) into ``dest``.
        Returns ``{"kernel", "patch", "report_md", "report_json"}`` paths."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        stem = Path(self.kernel_file).stem
        out = {
            "kernel": dest / self.kernel_file,
            "patch": dest / f"{stem}.patch",
            "report_md": dest / "report.md",
            "report_json": dest / "report.json",
        }
        _atomic_write(out["kernel"], self.source(version))
        _atomic_write(out["patch"], self.patch("baseline", version))
        _atomic_write(out["report_md"], markdown_report(self))
        _atomic_write(out["report_json"], json.dumps(json_report(self), indent=2) + "\n")
        return out

    # ---------------------------------------------------------------- internals: git

    def _build_tree(self, base_tree: str | None, files: dict[str, str], remove: Iterable[str] = ()) -> str:
        return self.store.write_tree(base_tree, {p: redact(t, self._secrets).encode("utf-8") for p, t in files.items()},
                                     remove)

    def _commit_tree(self, tree: str, parents: list[str], message: str) -> str:
        return self.store.write_commit(tree, parents, redact(message, self._secrets))

    def _update_ref(self, ref: str, new: str, old: str | None) -> None:
        # the single commit point of every change; fails if someone else moved the ref
        try:
            self.store.set_ref(ref, new, old)
        except GitStoreError as exc:
            raise SessionError(str(exc)) from exc

    def _read(self, sha: str, path: str) -> str:
        return self.store.read_blob(sha, path).decode("utf-8", errors="replace")

    def _branch_shas(self) -> list[str]:
        return self.store.first_parent_chain(self.head)

    def _sync_worktree(self) -> None:
        """Make the working tree and index show HEAD (best effort: the refs are the truth)."""
        with contextlib.suppress(GitStoreError):
            self.store.checkout_head()

    def _candidate_commit(self, parent: str, cid: str, stage: str, source: str, *, engine: str,
                          model: str | None, iteration: int | None, rationale: str,
                          verdict: Verdict | None, based_on: str | None) -> str:
        files = {self.kernel_file: source}
        if verdict is not None:
            files[self._verdict_path(cid)] = json.dumps(verdict.to_dict(), indent=1, sort_keys=True) + "\n"
        tree = self._build_tree(self.store.tree_of(parent), files)
        speed = verdict.speedup if speed_measured(verdict) else None
        trailers = {
            "Stage": stage, "Engine": engine, "Model": model or "-",
            "Iteration": iteration, "Candidate": cid,
            "Verdict": verdict.kind.value if verdict else "unverified",
            "Speedup": format_speedup(speed) if verdict else None,
            "Device": device_label(verdict.device) if verdict and verdict.device else None,
            "Based-On": based_on,
        }
        it = f", iteration {iteration}" if iteration is not None else ""
        return self._commit_tree(tree, [parent], commit_message(f"candidate {cid} ({engine}{it})", rationale, trailers))

    @staticmethod
    def _verdict_path(cid: str) -> str:
        return f"{META_DIR}/verdicts/{cid}.json"

    def _verdict_in_tree(self, sha: str, cid: str) -> Verdict | None:
        try:
            return Verdict.from_dict(json.loads(self._read(sha, self._verdict_path(cid))))
        except KeyError:
            return None

    def _candidate_record(self, cid: str, sha: str) -> CandidateRecord:
        commit = self.repo.commit(sha)
        message = self.store.message(sha)
        t = parse_trailers(message)
        paragraphs = re.split(r"\n\s*\n", message.strip())
        rationale = "\n\n".join(paragraphs[1:-1]).strip() if len(paragraphs) > 2 else ""
        meta = self._state.get("candidates", {}).get(cid, {})
        stage, _, num = cid.rpartition("/")
        iteration = t.get("Iteration")
        return CandidateRecord(
            id=cid, stage=stage, number=int(num) if num.isdigit() else 0, sha=sha,
            parent=commit.parents[0].hexsha if commit.parents else "",
            engine=t.get("Engine", "unknown"),
            model=t.get("Model") if t.get("Model") not in (None, "-") else None,
            iteration=int(iteration) if iteration and iteration.isdigit() else None,
            rationale=rationale, status=CandidateStatus(meta.get("status", CandidateStatus.PENDING)), reason=meta.get("reason", ""),
            time=float(meta.get("time") or commit.committed_date), verdict=self._verdict_in_tree(sha, cid),
            based_on=t.get("Based-On"), approved_as=meta.get("approved_as"),
        )

    # ---------------------------------------------------------------- internals: state

    def _initial_state(self) -> dict[str, Any]:
        plan = list(self._info.get("plan") or [])
        return {"format": FORMAT_VERSION, "plan": plan,
                "stages": {s: _new_stage_entry() for s in plan}, "candidates": {}, "counters": {},
                "log": []}

    def _stage_entry(self, stage: str) -> dict[str, Any]:
        return self._state["stages"].setdefault(stage, _new_stage_entry())

    def _log(self, action: str, **fields: Any) -> None:
        entry = {"action": action, "time": _now()}
        entry.update({k: v for k, v in fields.items() if v is not None})
        self._state["log"].append(entry)

    def _load_state(self) -> dict[str, Any]:
        sha = self.store.ref(STATE_REF)
        if sha is None:
            return self._rebuild_state()
        try:
            data = json.loads(self._read(sha, "state.json"))
        except (KeyError, ValueError):
            return self._rebuild_state()
        self._state_sha = sha
        return data

    def _refresh(self) -> None:
        """Re-read the state if another process (or Session object) changed it."""
        sha = self.store.ref(STATE_REF)
        if sha is None:
            return
        if sha != getattr(self, "_state_sha", None):
            self._state = json.loads(self._read(sha, "state.json"))
            self._state_sha = sha

    def _rebuild_state(self) -> dict[str, Any]:
        """Recover the state from the branch and refs alone (when ``refs/xeforge/state`` is
        missing): approved candidates from the trailers, every other candidate pending."""
        self._state = self._initial_state()
        self._state_sha = None
        approved = {}
        for v in self.history()[1:]:
            if v.candidate:
                approved[v.candidate] = v.sha
            if v.stage and v.stage in self._state["stages"]:
                self._state["stages"][v.stage]["versions"].append(v.sha)
                self._state["stages"][v.stage]["status"] = StageStatus.DONE
        for ref, sha in sorted(self.store.refs(CANDIDATE_REF_PREFIX).items()):
            cid = ref[len(CANDIDATE_REF_PREFIX):]
            stage, _, num = cid.rpartition("/")
            status = CandidateStatus.APPROVED if cid in approved else CandidateStatus.PENDING
            self._state["candidates"][cid] = {"status": status, "reason": "",
                                              "time": self.store.commit_time(sha),
                                              "approved_as": approved.get(cid)}
            if num.isdigit():
                self._state["counters"][stage] = max(int(num), self._state["counters"].get(stage, 0))
            self._stage_entry(stage)["candidates"].append(cid)
        self._log("recovered")
        return self._state

    def _save_state(self) -> None:
        text = json.dumps(self._state, indent=1, sort_keys=True) + "\n"
        tree = self._build_tree(None, {"state.json": text})
        old = getattr(self, "_state_sha", None)
        parents = [old] if old else []
        sha = self._commit_tree(tree, parents, "session state\n")
        self._update_ref(STATE_REF, sha, old)
        self._state_sha = sha

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        xdir = self.path / ".git" / "xeforge"
        xdir.mkdir(parents=True, exist_ok=True)
        with open(xdir / "lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _new_stage_entry() -> dict[str, Any]:
    return {"status": StageStatus.PENDING, "reason": "", "versions": [], "candidates": [], "time": None}


def _fingerprint(device: DeviceInfo | dict[str, Any] | str | None) -> dict[str, Any]:
    if device is None:
        return {"type": "cpu", "interpreter": True}
    if isinstance(device, dict):
        return dict(device)
    if isinstance(device, str):
        kind, _, idx = device.partition(":")
        out: dict[str, Any] = {"type": kind}
        if idx.isdigit():
            out["index"] = int(idx)
        return out
    fp = dict(getattr(device, "fingerprint", None) or {})
    for key in ("type", "index", "name", "interpreter"):
        value = getattr(device, key, None)
        if value is not None:
            fp.setdefault(key, value)
    return fp


def _summary_line(text: str, limit: int = 90) -> str:
    """The first informative line of a rationale (a heading ending in ':' gives way to the line
    after it; bullets and ``line N:`` prefixes are dropped)."""
    lines = [ln.strip().lstrip("-*• ").strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[0]
    if line.endswith(":") and len(lines) > 1:
        line = lines[1]  # a heading ("codemod dtype_fix:") says less than its first item
    line = re.sub(r"^line \d+:\s*", "", line)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _problem_name(name: Any) -> str:
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name))[:100].strip("_")
    return text or "kernel"


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
