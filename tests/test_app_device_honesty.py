"""One honest word about the device: on Triton's interpreter the doctor says correctness can be
trusted and timing is not measured, and the Home page and the Device page say the same (also
for a report saved before the verdict carried its timing scope)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xeforge_core.devices import DeviceInfo
from xeforge_core.doctor.verdict import TRUSTED, Observation, decide
from xeforge_core.ui.devicetext import doctor_advice, doctor_headline
from xeforge_core.ui.workbench import Workbench

ROOT = Path(__file__).resolve().parents[1]
ALL_OK = [Observation(f"check {i}", cls, "ok") for i, cls in enumerate(("matmul", "reduction", "indexing+cast"))]


def test_interpreter_verdict_trusts_correctness_and_says_timing_is_not_measured() -> None:
    v = decide(ALL_OK, interpreter=True)
    assert v.status == TRUSTED
    assert v.headline.startswith("TRUSTED for correctness; timing not measured")
    assert "correctness can be trusted" in v.advice and "Timing is not measured" in v.advice
    assert "verification and timing" not in v.advice
    gpu = decide(ALL_OK)
    assert gpu.headline == "TRUSTED" and "verification and timing" in gpu.advice


def test_a_report_saved_before_the_timing_field_is_read_honestly() -> None:
    old = {"status": "trusted", "advice": "Every check passed: the device can be trusted for verification and timing."}
    assert "timing not measured" in doctor_headline(old, interpreter=True)
    assert "Timing is not measured" in doctor_advice(old, interpreter=True)
    assert doctor_headline(old, interpreter=False) == "TRUSTED"


@pytest.fixture
def cpu_wb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(cache))
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    report = {"device": "cpu", "verdict": {"status": "trusted", "advice": decide(ALL_OK, interpreter=True).advice,
                                           "timing": decide(ALL_OK, interpreter=True).timing, "criteria": []},
              "battery": []}
    (cache / "doctor").mkdir(parents=True)
    (cache / "doctor" / "cpu.json").write_text(json.dumps(report))
    wb = Workbench(tmp_path / "ws")
    wb.device = DeviceInfo(type="cpu", name="host cpu", interpreter=True)
    return wb


@pytest.mark.parametrize("page", ["app.py", "pages/6_Device.py"])
def test_home_and_device_pages_say_what_the_doctor_says(cpu_wb: Workbench, page: str) -> None:
    at = AppTest.from_file(str(ROOT / page), default_timeout=60)
    at.session_state["workbench"] = cpu_wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    text = "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption]
                     + [s.value for s in at.success])
    assert "correctness can be trusted, timing is not measured" in text
    assert "TRUSTED for correctness; timing not measured" in text
    assert "verification and timing" not in text
