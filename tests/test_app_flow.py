"""The workbench's main flows through the real pages (Streamlit AppTest, cpu interpreter):
load a sample, analyse, propose, verify, reject and find the candidate again, approve, see the
commit in History, restore; and a hunk-level accept whose merged code is verified before it can
be approved. Verifications run for real, in worker processes, from background jobs."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xeforge_core.ui.review import ReviewStatus

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = "07_gemm_fp32_upcast"
UPCAST = "acc += tl.dot(a.to(tl.float32), b.to(tl.float32))"
JOB_TIMEOUT = 300


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XEFORGE_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    return tmp_path


def _page(path: str, wb: object) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _wait(wb: object, purpose: str) -> None:
    job = wb.jobs.current(purpose)
    assert job is not None, f"no {purpose} job was started"
    assert job.wait(JOB_TIMEOUT), f"{purpose} job did not finish in {JOB_TIMEOUT}s"


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("success", "info", "warning", "error", "markdown", "caption")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def _home_with_session(env: Path) -> tuple[AppTest, object]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.selectbox(key="home_sample").select(SAMPLE)
    at.button(key="home_load_sample").click().run()
    assert any(SAMPLE in h.value for h in at.subheader)
    assert "matmul_kernel" in at.dataframe[0].value.to_string()
    at.button(key="home_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    wb = at.session_state["workbench"]
    assert wb.session is not None
    assert "dtype_fix" in wb.session.plan  # the analysis found the fp32-upcast tl.dot operands
    return at, wb


def test_propose_reject_find_again_approve_restore(env: Path) -> None:
    _, wb = _home_with_session(env)
    session = wb.session

    opt = _page("pages/1_Optimize.py", wb)
    assert "Stage: dtype_fix" in [h.value for h in opt.header]
    assert "fp32" in _texts(opt)  # the stage's issue from the analysis is listed
    opt.button(key="opt_propose").click().run()
    _wait(wb, "propose")
    opt.run()
    review = wb.review
    assert review is not None and review.status is ReviewStatus.VERIFIED
    assert review.verdict.passed and UPCAST not in review.source
    first_id = wb.review_candidate_id
    assert first_id == "dtype_fix/1"
    assert "ok" in _texts(opt) and any(c.label == "hunk 0" for c in opt.checkbox)
    assert not opt.button(key="opt_approve").disabled

    opt.text_input(key="opt_reject_reason").set_value("want to compare first")
    opt.button(key="opt_reject").click().run()
    assert wb.review is None
    rejected = session.candidates(status="rejected")
    assert [c.id for c in rejected] == [first_id] and rejected[0].reason == "want to compare first"
    assert first_id in opt.dataframe[-1].value.to_string()

    hist = _page("pages/2_History.py", wb)
    assert first_id in _texts(hist) or first_id in "".join(d.value.to_string() for d in hist.dataframe)
    hist.selectbox(key="hist_again_pick").select(first_id)
    hist.button(key="hist_again").click().run()
    assert wb.review is not None and wb.review.verdict_current  # same code, same parent: verdict holds

    opt = _page("pages/1_Optimize.py", wb)
    assert not opt.button(key="opt_approve").disabled
    opt.button(key="opt_approve").click().run()
    assert not opt.exception, [e.value for e in opt.exception]
    versions = session.history()
    assert len(versions) == 2 and versions[1].stage == "dtype_fix" and versions[1].verdict == "ok"
    assert UPCAST not in session.source("head")
    assert session.stages["dtype_fix"]["status"] == "done"

    hist = _page("pages/2_History.py", wb)
    timeline = hist.dataframe[0].value
    assert list(timeline["stage"])[:2] == ["dtype_fix", "baseline"]
    hist.selectbox(key="hist_restore_pick").select(versions[0].sha)
    hist.button(key="hist_restore").click().run()
    assert not hist.exception, [e.value for e in hist.exception]
    versions = session.history()
    assert len(versions) == 3 and versions[2].kind == "restore"
    assert session.source("head") == session.source("baseline")
    assert "restore" in hist.dataframe[0].value["kind"].tolist()


def test_hunk_level_accept_is_verified_before_approval(env: Path) -> None:
    _, wb = _home_with_session(env)
    session = wb.session
    base = session.source("head")
    good = base.replace(UPCAST, "acc = tl.dot(a, b, acc)")
    broken_mask = "mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))"
    assert broken_mask in good
    two_hunks = good.replace(broken_mask, "mask=(offs_m[:, None] < M) & (offs_n[None, :] < N - 1))")

    opt = _page("pages/1_Optimize.py", wb)
    reply = f"Here is the improved kernel:\n\n```python\n{two_hunks}```\n"
    opt.text_area(key="opt_manual_reply").set_value(reply)
    opt.button(key="opt_manual_submit").click().run()
    review = wb.review
    assert review is not None and review.engine == "manual" and review.source == two_hunks
    hunk_boxes = [c for c in opt.checkbox if c.label.startswith("hunk ")]
    assert [c.label for c in hunk_boxes] == ["hunk 0", "hunk 1"]

    hunk_boxes[1].uncheck()
    opt.button(key="opt_apply_hunks").click().run()
    assert review.source == good and review.accepted_hunks == [0] and review.origin == "merge"
    assert opt.button(key="opt_approve").disabled  # the merged code is not verified yet
    # the diff shown is the merged code's: the unticked hunk is gone from it
    diff_text = html.unescape(re.sub(r"<[^>]+>", "", "\n".join(h.proto.body for h in opt.get("html"))))
    assert "N - 1" not in diff_text and "acc = tl.dot(a, b, acc)" in diff_text
    assert "kept hunk 0 of 2" in "\n".join(i.value for i in opt.info)
    shown_patch = next(c.value for c in opt.code if c.value.startswith(f"--- a/{session.kernel_file}"))
    assert "N - 1" not in shown_patch

    opt.button(key="opt_verify").click().run()
    _wait(wb, "verify")
    opt.run()
    assert review.status is ReviewStatus.VERIFIED and review.verdict.passed, review.verdict
    assert not opt.button(key="opt_approve").disabled
    opt.button(key="opt_approve").click().run()
    head = session.version("head")
    assert head.index == 1 and head.engine == "manual" and head.verdict == "ok"
    assert session.source("head") == good
    assert "Hunks accepted by the user: [0]" in session.candidate(head.candidate).rationale
    # what was shown is exactly what was committed, and the subject names what was kept
    committed = next(f for f in session.diff(0, "head").files if f.path == session.kernel_file)
    assert shown_patch == committed.diff.rstrip("\n")  # a code block shows no trailing newline
    subject = session.repo.commit(head.sha).summary
    assert subject.startswith("dtype_fix: kept hunk 0 of 2 (line 35: acc = tl.dot(a, b, acc)); left out hunk 1")
    assert "N - 1" not in subject.split("left out")[0]

    hist = _page("pages/2_History.py", wb)
    assert "manual" in hist.dataframe[0].value["engine"].tolist()


def test_resume_after_restart_and_downloads(env: Path) -> None:
    _, wb = _home_with_session(env)
    session = wb.session
    rec = session.add_candidate("xpu_specific", session.source("head").replace("num_warps=4", "num_warps=8"),
                                engine="manual", rationale="more warps")
    session.reject(rec.id, "not now")

    # a new browser session (after a restart): resume from the workspace
    home = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    home.run()
    home.selectbox(key="home_resume_pick").select(str(session.path))
    home.button(key="home_resume").click().run()
    assert not home.exception, [e.value for e in home.exception]
    wb2 = home.session_state["workbench"]
    assert wb2 is not wb and wb2.session.path == session.path
    assert wb2.session.plan == session.plan and wb2.loaded.name == session.name
    assert [c.id for c in wb2.session.candidates(status="rejected")] == [rec.id]

    hist = _page("pages/2_History.py", wb2)
    labels = {b.proto.label: b for b in hist.get("download_button")}
    assert {"Final kernel", "Patch (baseline → current)", "Report (Markdown)", "Report (JSON)"} <= set(labels)
    assert rec.id in "".join(d.value.to_string() for d in hist.dataframe)


def test_a_candidate_awaiting_review_comes_back_when_the_session_is_reopened(env: Path) -> None:
    """A proposal verified and left for a decision: reopening the session (a reload, another
    browser tab: a new workbench) shows that candidate under review again, with its verdict, so
    Approve and Reject are there (before, the stage said "review" and only Propose was offered)."""
    from xeforge_core.ui.workbench import Workbench

    _, wb = _home_with_session(env)
    opt = _page("pages/1_Optimize.py", wb)
    opt.button(key="opt_propose").click().run()
    _wait(wb, "propose")
    opt.run()
    assert wb.review is not None and wb.review_candidate_id == "dtype_fix/1"
    assert wb.session.stages["dtype_fix"]["status"] == "review"

    again = Workbench(env / "ws")
    again.resume_session(wb.session.path)
    assert again.review is not None and again.review_candidate_id == "dtype_fix/1"
    assert again.review.verdict is not None and again.review.verdict.passed and again.review.verdict_current
    reopened = _page("pages/1_Optimize.py", again)
    assert not reopened.button(key="opt_approve").disabled
