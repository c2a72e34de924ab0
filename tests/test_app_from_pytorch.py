""""Start from PyTorch" in the workbench (Streamlit AppTest, cpu interpreter): a pasted
plain-PyTorch problem (KernelBench style), a session started on Home, then on Optimize a saved
TorchInductor capture converted, verified for real in worker processes from a background job and
committed as version 1, with the operation left to torch (the convolution) named. Generation itself (the sandboxed
TorchInductor job) is tested in ``test_inductor_first_version.py``; the saved capture keeps this
test quick."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "inductor"
JOB_TIMEOUT = 300


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XEFORGE_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    return tmp_path


def _texts(at: AppTest) -> str:
    parts = [e.value for kind in ("success", "info", "warning", "error", "markdown", "caption")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def _optimize(wb: object) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "1_Optimize.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _pasted_session(problem: str = "conv_relu_bias") -> object:
    home = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    home.run()
    home.text_area(key="home_paste_src").set_value((FIX / f"{problem}.py").read_text())
    home.text_input(key="home_paste_name").set_value(problem)
    home.button(key="home_load_paste").click().run()
    assert not home.exception, [e.value for e in home.exception]
    assert "Start from PyTorch" in _texts(home)  # a plain-PyTorch problem is told where to start
    home.button(key="home_start").click().run()
    assert not home.exception, [e.value for e in home.exception]
    wb = home.session_state["workbench"]
    assert wb.session is not None and wb.pytorch_start_needed()
    return wb


def test_start_from_pytorch_commits_version_1_from_a_saved_capture(env: Path) -> None:
    wb = _pasted_session()
    session = wb.session
    opt = _optimize(wb)
    assert "plain-PyTorch Model" in _texts(opt)
    # before the first version nothing is planned, and nothing is said to be finished
    assert "planned on the first Triton version" in _texts(opt)
    assert "Every planned stage is finished" not in _texts(opt) and "The plan is empty" not in _texts(opt)
    capture = (FIX / "conv_relu_bias.capture.json").read_bytes()
    opt.file_uploader(key="opt_capture_upload").set_value(("conv_relu_bias.capture.json", capture,
                                                             "application/json"))
    opt.button(key="opt_from_pytorch").click().run()
    assert not opt.exception, [e.value for e in opt.exception]
    job = wb.jobs.current("first_version")
    assert job is not None and job.wait(JOB_TIMEOUT), "the first-version job did not finish"
    opt.run()
    assert not opt.exception, [e.value for e in opt.exception]

    versions = session.history()
    assert len(versions) == 2 and versions[1].stage == "first_version" and versions[1].verdict == "ok"
    head = session.source("head")
    assert "@triton.jit" in head and "class ModelNew(" in head and "_inductor" not in head
    record = next(c for c in session.candidates() if c.stage == "first_version")
    assert record.status == "approved" and "TorchInductor" in record.rationale
    assert "not Triton yet: torch.ops.aten.convolution" in record.rationale
    assert not wb.pytorch_start_needed()
    texts = _texts(opt)
    assert "version 1 committed" in texts
    assert "Not Triton yet (torch library calls): torch.ops.aten.convolution" in texts  # shown on the page
    assert not any(b.key == "opt_from_pytorch" for b in opt.button)  # version 1 exists: no second start


def test_a_file_that_is_not_a_capture_is_refused_by_name(env: Path) -> None:
    wb = _pasted_session()
    opt = _optimize(wb)
    opt.file_uploader(key="opt_capture_upload").set_value(("notes.json", b'{"format": "other"}',
                                                             "application/json"))
    opt.button(key="opt_from_pytorch").click().run()
    errors = "\n".join(e.value for e in opt.error)
    assert "notes.json: not a saved TorchInductor capture" in errors
    assert wb.jobs.current("first_version") is None and len(wb.session.history()) == 1
