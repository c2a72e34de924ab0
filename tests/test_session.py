"""Sessions in git: commit 0, approve/reject/restore/resume round trips, manual edits as their own
commits, candidates under refs with their verdicts, diffs, exports, secrets, atomic updates.

These tests exercise the git side alone, with verdicts built as data (no kernels run here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from xeforge_core.problem import load_problem
from xeforge_core.session import (
    BRANCH_REF,
    STATE_REF,
    Session,
    SessionError,
    parse_trailers,
    register_secret,
)
from xeforge_core.verdict import PerformanceResult, Step, StepStatus, TimingStats, Verdict, VerdictKind

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_kernels" / "01_vector_add.py"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def ok_verdict(speedup: float | None = None) -> Verdict:
    """A passing verdict; timed on a 'gpu' when ``speedup`` is given, else cpu (not measured)."""
    if speedup is None:
        return Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.NOT_MEASURED)],
                       device={"type": "cpu", "interpreter": True})
    t_base = TimingStats(median_us=100.0, mean_us=100.0, min_us=99.0, cv=0.01, trials=50)
    t_cand = TimingStats(median_us=100.0 / speedup, mean_us=100.0 / speedup, min_us=99.0 / speedup, cv=0.01,
                         trials=50)
    return Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.PASSED)],
                   performance=[PerformanceResult(variant="bench-gpu", baseline=t_base, candidate=t_cand,
                                                  speedup=speedup, tflops=12.5)],
                   device={"type": "cuda", "index": 0, "name": "NVIDIA H200"})


def edited(source: str, tag: str) -> str:
    return source + f"\n# {tag}\n"


@pytest.fixture
def problem():
    return load_problem(SAMPLE)


@pytest.fixture
def session(tmp_path, problem) -> Session:
    return Session.create(problem, workspace=tmp_path / "ws", plan=["dtype_fix", "autotuning"],
                          device={"type": "cpu", "interpreter": True})


def test_baseline_commit_holds_kernel_spec_reference_and_session_json(session, problem):
    history = session.history()
    assert len(history) == 1 and history[0].kind == "baseline"
    files = session.files_at("baseline")
    assert files["01_vector_add.py"] == problem.kernel.source
    assert "01_vector_add.yaml" in files and "01_vector_add_ref.py" in files
    info = json.loads(files["session.json"])
    assert info["plan"] == ["dtype_fix", "autotuning"]
    assert info["device"]["type"] == "cpu" and info["problem"] == "01_vector_add"
    assert session.path.parent.name == "ws" and session.path.name.startswith("01_vector_add-")
    # the working tree shows the current version
    assert (session.path / "01_vector_add.py").read_text() == problem.kernel.source
    assert git(session.path, "status", "--porcelain") == ""


def test_approve_reject_restore_resume_round_trip(session):
    base = session.source()
    c1 = session.add_candidate("dtype_fix", edited(base, "one"), engine="rules", model="dtype_fix",
                               iteration=1, rationale="keep fp16 operands", verdict=ok_verdict(2.0))
    c2 = session.add_candidate("dtype_fix", edited(base, "two"), engine="rules", iteration=1,
                               rationale="other try", verdict=Verdict(kind=VerdictKind.WRONG_ANSWER, reason="off"))
    session.reject(c2.id, "wrong answer")
    v1 = session.approve(c1.id)
    assert v1.index == 1 and v1.stage == "dtype_fix" and v1.engine == "rules" and v1.speedup == pytest.approx(2.0)
    assert v1.trailers["Verdict"] == "ok" and v1.trailers["Iteration"] == "1"
    assert v1.trailers["Device"] == "cuda:0 NVIDIA H200"
    c3 = session.add_candidate("autotuning", edited(session.source(), "three"), engine="rules", iteration=1,
                               verdict=ok_verdict(1.5))
    v2 = session.approve(c3.id)
    assert v2.cumulative_speedup == pytest.approx(3.0)
    v3 = session.restore("baseline")
    assert v3.kind == "restore" and session.source() == base
    assert v3.cumulative_speedup == pytest.approx(1.0)

    before = {
        "history": [(v.sha, v.kind, v.stage, v.speedup) for v in session.history()],
        "candidates": {c.id: (c.status, c.verdict.kind if c.verdict else None, c.sha) for c in session.candidates()},
        "plan": session.plan, "stages": session.stages, "decisions": session.decisions,
    }
    reopened = Session.open(session.path)
    after = {
        "history": [(v.sha, v.kind, v.stage, v.speedup) for v in reopened.history()],
        "candidates": {c.id: (c.status, c.verdict.kind if c.verdict else None, c.sha) for c in reopened.candidates()},
        "plan": reopened.plan, "stages": reopened.stages, "decisions": reopened.decisions,
    }
    assert after == before
    assert after["candidates"]["dtype_fix/2"][0] == "rejected"
    assert after["candidates"]["dtype_fix/1"][0] == "approved"
    # every version is still readable, including the restored-over ones
    assert reopened.source(1) == edited(base, "one")
    assert reopened.source(2) == edited(edited(base, "one"), "three")
    assert reopened.source("dtype_fix/2") == edited(base, "two")
    # restore a rejected candidate: a new commit, history not rewritten
    v4 = reopened.restore("dtype_fix/2")
    assert reopened.source() == edited(base, "two") and len(reopened.history()) == 5 and v4.index == 4


def test_stage_status_and_current_stage_survive_resume(session):
    base = session.source()
    c = session.add_candidate("dtype_fix", edited(base, "x"), engine="rules", verdict=ok_verdict())
    session.approve(c.id)
    assert session.stages["dtype_fix"]["status"] == "done"
    assert session.current_stage == "autotuning"
    session.set_plan(["dtype_fix", "xpu_specific", "autotuning"])
    session.mark_stage("xpu_specific", "kept_current", "kept current: nothing to tune")
    reopened = Session.open(session.path)
    assert reopened.plan == ["dtype_fix", "xpu_specific", "autotuning"]
    assert reopened.stages["xpu_specific"]["reason"] == "kept current: nothing to tune"
    assert reopened.current_stage == "autotuning"
    reopened.skip_stage("autotuning")
    assert Session.open(session.path).current_stage is None


def test_cpu_approval_says_speed_not_measured(session):
    c = session.add_candidate("dtype_fix", edited(session.source(), "cpu"), engine="rules", verdict=ok_verdict())
    v = session.approve(c.id)
    assert v.trailers["Speedup"] == "not measured"
    assert "speed not measured" in v.trailers["Note"]
    assert v.speedup is None and v.cumulative_speedup is None


def test_manual_edit_is_its_own_commit(session):
    base = session.source()
    engine_code = edited(base, "engine change")
    c = session.add_candidate("dtype_fix", engine_code, engine="llm", model="m1", iteration=1,
                              verdict=ok_verdict(1.2))
    v_engine = session.approve(c.id)
    manual_code = engine_code.replace("# engine change", "# engine change, tidied by hand")
    v_manual = session.commit_manual(manual_code, stage="dtype_fix", verdict=ok_verdict(1.0),
                                     message="tidy the comment")
    assert v_manual.engine == "manual" and v_engine.engine == "llm"
    assert v_manual.kind == "manual" and v_engine.kind == "engine"
    commit = session.repo.commit(v_manual.sha)
    assert [p.hexsha for p in commit.parents] == [v_engine.sha]
    # the manual commit carries only the manual change
    d = session.diff(v_engine.sha, v_manual.sha)
    assert [f.path for f in d.files] == ["01_vector_add.py"]
    assert "tidied by hand" in d.text and "engine change\n" in d.files[0].old
    # and the engine's commit only the engine's
    assert "tidied" not in session.diff("baseline", v_engine.sha).text
    with pytest.raises(SessionError):
        session.commit_manual(manual_code)  # no change
    # an edit made in the session's working tree is committed the same way
    (session.path / "01_vector_add.py").write_text(edited(manual_code, "worktree"))
    v_wt = session.commit_worktree_edit(message="edit in the working tree")
    assert v_wt.engine == "manual" and session.source().endswith("# worktree\n")


def test_rejected_candidates_reachable_under_refs_with_verdicts(session):
    base = session.source()
    bad = Verdict(kind=VerdictKind.COMPILE_ERROR, reason="NameError: tl.dott", source_line=12)
    c = session.add_candidate("dtype_fix", edited(base, "broken"), engine="llm", iteration=2,
                              rationale="try dott", verdict=bad)
    session.reject(c.id, "does not compile")
    refs = git(session.path, "for-each-ref", "--format=%(refname)", "refs/candidates/").split()
    assert refs == ["refs/candidates/dtype_fix/1"]
    # the ref's tree holds the candidate and its verdict; its parent is the version it was tried on
    assert git(session.path, "show", "refs/candidates/dtype_fix/1:01_vector_add.py") == edited(base, "broken")
    stored = json.loads(git(session.path, "show", "refs/candidates/dtype_fix/1:.xeforge/verdicts/dtype_fix/1.json"))
    assert stored["kind"] == "compile_error" and stored["source_line"] == 12
    assert git(session.path, "rev-parse", "refs/candidates/dtype_fix/1^").strip() == session.head
    listed = session.candidates(status="rejected")
    assert [r.id for r in listed] == ["dtype_fix/1"]
    assert listed[0].verdict.reason == "NameError: tl.dott" and listed[0].reason == "does not compile"
    assert listed[0].rationale == "try dott" and listed[0].iteration == 2
    with pytest.raises(SessionError):
        session.approve(c.id)
    # the branch never saw it
    assert len(session.history()) == 1


def test_record_verdict_after_keeping_the_candidate(session):
    c = session.add_candidate("dtype_fix", edited(session.source(), "v"), engine="rules")
    assert c.verdict is None and c.status == "pending"
    c2 = session.record_verdict(c.id, ok_verdict(1.4))
    assert c2.verdict.speedup == pytest.approx(1.4) and c2.parent == c.parent and c2.sha != c.sha


def test_superseded_and_stale_candidates(session):
    base = session.source()
    a = session.add_candidate("dtype_fix", edited(base, "a"), engine="rules", verdict=ok_verdict(1.1))
    b = session.add_candidate("dtype_fix", edited(base, "b"), engine="rules", verdict=ok_verdict(1.3))
    session.approve(b.id)
    assert session.candidate(a.id).status == "superseded"
    # a candidate verified against an older version cannot be approved by accident
    old = session.add_candidate("autotuning", edited(base, "old"), engine="rules", parent="baseline",
                                verdict=ok_verdict(1.2))
    with pytest.raises(SessionError, match="verified against"):
        session.approve(old.id)
    v = session.approve(old.id, allow_stale=True)
    assert "verified against" in v.trailers["Note"]


def test_diff_between_any_two_versions(session):
    base = session.source()
    c = session.add_candidate("dtype_fix", base.replace("import torch", "import torch  # fp16"),
                              engine="rules", verdict=ok_verdict())
    session.approve(c.id)
    d = session.diff("baseline", "head")
    assert len(d.files) == 1 and d.files[0].status == "modified"
    assert "-import torch\n" in d.text and "+import torch  # fp16\n" in d.text
    assert d.text.startswith("--- a/01_vector_add.py\n+++ b/01_vector_add.py\n")
    assert session.diff(0, 1).text == d.text
    assert session.diff("head", "head").empty
    # meta files (verdicts) only on request
    meta = session.diff("baseline", "head", include_meta=True)
    assert any(f.path == ".xeforge/verdicts/dtype_fix/1.json" and f.status == "added" for f in meta.files)
    with pytest.raises(SessionError):
        session.diff("baseline", "no-such-version")


def test_export_kernel_patch_and_reports(session, tmp_path):
    base = session.source()
    c = session.add_candidate("dtype_fix", edited(base, "final"), engine="rules", verdict=ok_verdict(2.0))
    session.approve(c.id)
    out = session.export(tmp_path / "export")
    assert out["kernel"].read_text() == edited(base, "final")
    # the patch applies to the baseline and gives the final kernel
    work = tmp_path / "apply"
    work.mkdir()
    (work / "01_vector_add.py").write_text(base)
    subprocess.run(["git", "apply", str(out["patch"])], cwd=work, check=True)
    assert (work / "01_vector_add.py").read_text() == edited(base, "final")
    report = json.loads(out["report_json"].read_text())
    assert report["problem"] == "01_vector_add"
    assert "dtype_fix" in out["report_md"].read_text()


def test_secrets_never_reach_the_repository(tmp_path, problem, monkeypatch):
    key = "sk-test-7f3a9c1e5b2d4068a1b2c3d4"
    typed = "typed-into-the-ui-0042"
    monkeypatch.setenv("XEFORGE_LLM_API_KEY", key)  # the settings read it from here
    register_secret(typed)
    s = Session.create(problem, workspace=tmp_path, plan=["dtype_fix"])
    leaky = edited(problem.kernel.source, f"api key {key} / {typed}")
    v = Verdict(kind=VerdictKind.RUNTIME_ERROR, reason=f"401 for key {key}", stderr=f"Authorization: Bearer {key}")
    c = s.add_candidate("dtype_fix", leaky, engine="llm", model="m", rationale=f"used {key}", verdict=v)
    s.reject(c.id, f"bad key {typed}")
    c2 = s.add_candidate("dtype_fix", edited(problem.kernel.source, "fine"), engine="llm", verdict=ok_verdict())
    s.approve(c2.id, note=f"key was {key}")
    s.export(tmp_path / "export")
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=s.path,
                             capture_output=True, check=True).stdout
    assert key.encode() not in objects and typed.encode() not in objects
    assert b"[REDACTED]" in objects
    for path in list(s.path.rglob("*")) + list((tmp_path / "export").rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data and typed.encode() not in data, path


def test_interrupted_write_leaves_the_last_committed_state(session, monkeypatch):
    base = session.source()
    c = session.add_candidate("dtype_fix", edited(base, "ok"), engine="rules", verdict=ok_verdict(1.5))
    v = session.approve(c.id)
    head, state = session.head, git(session.path, "rev-parse", STATE_REF)
    c2 = session.add_candidate("autotuning", edited(session.source(), "next"), engine="rules",
                               verdict=ok_verdict(1.2))
    real_update = Session._update_ref

    def die_before_commit_point(self, ref, new, old):
        if ref == BRANCH_REF:
            raise KeyboardInterrupt("killed between writing objects and moving the branch")
        return real_update(self, ref, new, old)

    monkeypatch.setattr(Session, "_update_ref", die_before_commit_point)
    with pytest.raises(KeyboardInterrupt):
        session.approve(c2.id)
    monkeypatch.setattr(Session, "_update_ref", real_update)
    reopened = Session.open(session.path)
    assert reopened.head == head == v.sha
    assert git(session.path, "rev-parse", STATE_REF) != state  # the candidate was recorded before
    assert reopened.candidate(c2.id).status == "pending"
    v2 = reopened.approve(c2.id)  # the session continues
    assert v2.index == 2 and v2.cumulative_speedup == pytest.approx(1.8)


def test_state_recovered_from_branch_and_refs_alone(session):
    base = session.source()
    c = session.add_candidate("dtype_fix", edited(base, "a"), engine="rules", verdict=ok_verdict())
    session.approve(c.id)
    session.add_candidate("autotuning", edited(session.source(), "b"), engine="rules", verdict=ok_verdict())
    git(session.path, "update-ref", "-d", STATE_REF)
    reopened = Session.open(session.path)
    assert reopened.plan == ["dtype_fix", "autotuning"]
    assert reopened.candidate("dtype_fix/1").status == "approved"
    assert reopened.candidate("autotuning/1").status == "pending"
    assert reopened.current_stage == "autotuning"
    nxt = reopened.add_candidate("autotuning", edited(session.source(), "c"), engine="rules")
    assert nxt.id == "autotuning/2"


def test_two_handles_on_one_session_see_each_other(session):
    other = Session.open(session.path)
    c = session.add_candidate("dtype_fix", edited(session.source(), "a"), engine="rules", verdict=ok_verdict())
    assert other.candidate(c.id).status == "pending"
    other.approve(c.id)
    assert session.candidate(c.id).status == "approved" and session.current_stage == "autotuning"


def test_open_rejects_non_sessions_and_lists_sessions(tmp_path, session):
    with pytest.raises(SessionError):
        Session.open(tmp_path / "nothing-here")
    plain = tmp_path / "plain"
    plain.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=plain, check=True)
    with pytest.raises(SessionError):
        Session.open(plain)
    listed = Session.list_sessions(session.path.parent)
    assert [d["path"] for d in listed] == [str(session.path)]
    with pytest.raises(SessionError):
        Session.create(session.problem(), path=session.path)


def test_trailer_parsing():
    msg = "subject\n\nbody line\n\nStage: dtype_fix\nEngine: rules\nSpeedup: 1.500x\n"
    assert parse_trailers(msg) == {"Stage": "dtype_fix", "Engine": "rules", "Speedup": "1.500x"}
    assert parse_trailers("subject only\n") == {}


def test_a_person_may_overrule_a_verdict_and_the_commit_says_so(session):
    c = session.add_candidate("dtype_fix", edited(session.source(), "known tolerance issue"), engine="llm",
                              verdict=Verdict(kind=VerdictKind.WRONG_ANSWER, reason="max abs error 2e-3"))
    v = session.approve(c.id)
    assert v.verdict == "wrong_answer" and "approved despite verdict wrong_answer" in v.trailers["Note"]
    u = session.add_candidate("autotuning", edited(session.source(), "unverified"), engine="manual")
    assert "approved without verification" in session.approve(u.id).trailers["Note"]
