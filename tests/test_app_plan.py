"""The plan says, before Propose, what the chosen engine can do on this kernel: each stage of the
stepper is marked per engine (the rules engine's codemod is asked statically), Propose is
disabled with the reason where the engine cannot do the current stage, and a session the engine
can do nothing of says so when it starts (Streamlit AppTest; no kernel runs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XEFORGE_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    return tmp_path


def _start(sample: str) -> tuple[AppTest, object]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.selectbox(key="home_sample").select(sample)
    at.button(key="home_load_sample").click().run()
    at.button(key="home_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    wb = at.session_state["workbench"]
    assert wb.session is not None
    return at, wb


def _optimize(wb: object) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "1_Optimize.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for kind in ("warning", "caption", "markdown", "info")
                     for e in getattr(at, kind))


def test_a_stage_the_engine_cannot_do_is_shown_before_propose(env: Path) -> None:
    _, wb = _start("01_vector_add")
    assert wb.session.plan == ["memory_access", "autotuning"]
    opt = _optimize(wb)
    text = _texts(opt)
    # the stepper, per stage: the rules engine can rewrite the memory access and autotune the
    # elementwise kernel (the elementwise search space); the llm and manual engines can do both
    assert "on this kernel: rules ✓ llm ✓ manual ✓" in text
    assert "on this kernel: rules ✗" not in text
    assert not opt.button(key="opt_propose").disabled  # memory_access: the rules engine has a rewrite

    opt.button(key="opt_skip").click().run()
    assert wb.session.current_stage == "autotuning"
    opt = _optimize(wb)
    assert not opt.button(key="opt_propose").disabled
    with pytest.raises(Exception, match="no codemod for stage .algorithmic."):
        wb.start_propose("algorithmic", "rules")  # a stage without a codemod: the same answer without the page
    assert wb.jobs.current("propose") is None


def test_a_reduction_whose_only_stage_is_autotuning_has_work_for_the_rules_engine(env: Path) -> None:
    """A reduction whose only planned stage is autotuning: the rules engine autotunes it over the
    row search space (warp counts; its block is a loop step the launch fixes), so no warning."""
    home, wb = _start("06_sum_reduction")
    assert wb.session.plan == ["autotuning"]
    said = "\n".join(w.value for w in home.warning)
    assert "can do none of the" not in said
    opt = _optimize(wb)
    assert not opt.button(key="opt_propose").disabled
