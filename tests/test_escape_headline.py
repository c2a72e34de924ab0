"""An ``ok`` verdict whose candidate tried to leave its job (the sandbox recorded a network,
filesystem or process attempt) does not look clean: the workbench's verdict headline is a
warning naming the attempts, its badge counts them, and ``xeforge verify``'s text report says
so in its title and first lines. A clean ``ok`` keeps its plain success headline."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xeforge_core import sandbox
from xeforge_core.verdict import Finding, Step, StepStatus, Verdict, VerdictKind
from xeforge_core.worker_outcome import _escape_finding

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_kernels" / "01_vector_add.py"
NETWORK = {"kind": "network", "target": "127.0.0.1:8765", "file": "candidate/c.py", "line": 46}


def _ok(*, escapes: bool) -> Verdict:
    iso = sandbox.Isolation(sandboxed=True, tool="bwrap")
    findings = [Finding(**_escape_finding(NETWORK, iso))] if escapes else []
    findings.append(Finding(rule="kb:pow2_num_warps", message="num_warps is not a power of two",
                            severity="warning", line=3))
    return Verdict(kind=VerdictKind.OK, reason="", findings=findings,
                   steps=[Step(name="correctness", status=StepStatus.PASSED, summary="3 runs match")])


def _panel(data: dict) -> None:
    from xeforge_core.ui.render import verdict_panel
    from xeforge_core.verdict import Verdict

    verdict_panel(Verdict.from_dict(data))


def test_the_workbench_headline_of_an_ok_with_an_escape_attempt_is_a_warning_naming_it():
    at = AppTest.from_function(_panel, args=(_ok(escapes=True).to_dict(),)).run(timeout=60)
    assert not at.exception
    assert not at.success, [s.value for s in at.success]  # not shown as a clean pass
    headline = at.warning[0].value
    assert headline.startswith("**ok**") and "1 escape attempt" in headline
    assert "tried to reach the network (127.0.0.1:8765)" in headline


def test_a_clean_ok_keeps_its_success_headline():
    at = AppTest.from_function(_panel, args=(_ok(escapes=False).to_dict(),)).run(timeout=60)
    assert not at.exception
    assert [s.value for s in at.success] == ["**ok**"]
    assert not any("escape" in w.value for w in at.warning)


def test_the_badge_counts_escape_attempts():
    from xeforge_core.ui.render import verdict_badge

    assert "1 escape attempt" in verdict_badge(_ok(escapes=True))
    assert "escape" not in verdict_badge(_ok(escapes=False))


@pytest.mark.parametrize("escapes", [True, False])
def test_xeforge_verify_names_escape_attempts_in_its_title(escapes, monkeypatch, capsys):
    import xeforge_core.verify as verify_module
    from xeforge_core.cli import main

    monkeypatch.setattr(verify_module, "verify", lambda *a, **kw: _ok(escapes=escapes))
    status = main(["verify", str(SAMPLE), str(SAMPLE), "--device", "cpu"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 0
    if escapes:
        assert lines[0] == "verdict: OK WITH SECURITY WARNINGS"
        assert lines[1].startswith("  security warning, 1 escape attempt seen by the worker: ")
        assert "tried to reach the network (127.0.0.1:8765)" in lines[1]
    else:
        assert lines[0] == "verdict: OK"
        assert not any("security warning" in line for line in lines)
