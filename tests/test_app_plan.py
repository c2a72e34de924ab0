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
    # the stepper, per stage: the rules engine can rewrite the memory access, not autotune a kernel
    # without tl.dot (the autotune codemod's own reason); the llm and manual engines can do both
    assert "on this kernel: rules ✓ llm ✓ manual ✓" in text
    assert "on this kernel: rules ✗ llm ✓ manual ✓" in text
    assert "✗ rules engine on this kernel: autotune: kernel add_kernel has no tl.dot" in text
    assert not opt.button(key="opt_propose").disabled  # memory_access: the rules engine has a rewrite

    opt.button(key="opt_skip").click().run()
    assert wb.session.current_stage == "autotuning"
    opt = _optimize(wb)
    assert opt.button(key="opt_propose").disabled
    warning = "\n".join(w.value for w in opt.warning)
    assert "The rules engine cannot do autotuning on this kernel: autotune: kernel add_kernel has no tl.dot" \
        in warning
    assert "Use the Manual tab" in warning
    with pytest.raises(Exception, match="cannot do autotuning on this kernel"):
        wb.start_propose("autotuning", "rules")  # the same answer without the page
    assert wb.jobs.current("propose") is None


def test_a_session_the_engine_can_do_nothing_of_says_so_when_it_starts(env: Path) -> None:
    home, wb = _start("06_sum_reduction")
    assert wb.session.plan == ["autotuning"]
    said = "\n".join(w.value for w in home.warning)
    assert "The rules engine can do none of the 1 planned stage on this kernel" in said
    assert "has no tl.dot" in said and "Use the llm or manual engine for it" in said
    opt = _optimize(wb)
    assert "can do none of the 1 planned stage" in "\n".join(w.value for w in opt.warning)
    assert opt.button(key="opt_propose").disabled
