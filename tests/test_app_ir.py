"""The IR page (Streamlit AppTest) on this CPU machine: a session's versions compiled for an
NVIDIA target in the background, TTGIR shown with the target named, the compiler's resources,
the diff of one IR between two versions, and an Intel target saying plainly that its backend is
not installed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xeforge_core.ir.targets import TARGETS, backend_installed
from xeforge_core.ui.workbench import Workbench

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not backend_installed(TARGETS["sm90"]),
                                reason="the installed Triton has no NVIDIA backend")


@pytest.fixture
def wb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    wb = Workbench(tmp_path / "ws")
    wb.load_sample("01_vector_add")
    session = wb.start_session()
    wider = session.source("head").replace("BLOCK_SIZE = 128", "BLOCK_SIZE = 1024").replace(
        "num_warps=4", "num_warps=8")
    session.approve(session.add_candidate("memory_access", wider, engine="manual", rationale="wider blocks").id)
    return wb


def _settle(at: AppTest, wb: Workbench, timeout_s: float = 180) -> AppTest:
    """Rerun until the page's background IR job has finished and its result is shown."""
    deadline = time.monotonic() + timeout_s
    at.run()
    while time.monotonic() < deadline:
        job = wb.jobs.current("ir")
        if job is None or job.finished:
            at.run()
            job = wb.jobs.current("ir")
            if job is None or job.finished:
                break
        time.sleep(0.5)
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_ttgir_for_an_nvidia_target_and_the_diff_between_versions(wb: Workbench) -> None:
    at = AppTest.from_file(str(ROOT / "pages/3_IR.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at = _settle(at, wb)
    heads = [s.value for s in at.success]
    assert any("IR for NVIDIA Hopper sm_90 (H100, H200); warp size 32, compiled ahead of time" in h for h in heads)
    assert at.radio(key="ir_stage").value == "ttgir"
    code = at.code[0].value
    assert 'ttg.target = "cuda:90"' in code and "#ttg.blocked" in code and "loc(" not in code
    assert '"ttg.num-warps" = 8' in code  # the newest version, first in the list
    rows = at.dataframe[0].value
    assert list(rows["kernel"]) == ["add_kernel"] and rows["num_warps"][0] == "8"

    compare = at.selectbox(key="ir_compare")
    baseline = next(o for o in compare.options if o.startswith("#0 "))
    compare.set_value(baseline)
    at = _settle(at, wb)
    text = "\n".join(m.value for m in at.markdown)
    assert "TTGIR:" in text and "lines removed" in text and "(source locations stripped)" in text
    assert any("ttg.num-warps" in c.value and c.language == "diff" for c in at.code)
    # with a version to compare, the resources of both versions, kernel by kernel
    both = at.dataframe[0].value
    assert list(both["kernel"]) == ["add_kernel"] and both["num_warps"][0] == "4 → 8"


def test_an_intel_target_without_its_backend_says_so(wb: Workbench) -> None:
    if backend_installed(TARGETS["xe2"]):
        pytest.skip("Intel's backend is installed here")
    at = AppTest.from_file(str(ROOT / "pages/3_IR.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    at.selectbox(key="ir_target").set_value("xe2")
    at.run()
    assert not at.exception
    warning = "\n".join(w.value for w in at.warning)
    assert "No IR for Intel Xe2" in warning and "not installed here" in warning
