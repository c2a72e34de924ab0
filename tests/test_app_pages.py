"""The other pages' main flows (Streamlit AppTest): Knowledge (lint with rule links, rules,
hardware side by side), IR (a version's IR and the diff of one IR between versions), Benchmarks
(charts and CSV from measured verdicts, and the cpu case with nothing measured), Device (the
fingerprint from the probe worker and a doctor report), and the Flash Attention demo (load the
trajectory, verify a step live, approve it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xeforge_core.ui.workbench import Workbench
from xeforge_core.verdict import (
    CompiledKernelInfo,
    PerformanceResult,
    TimingStats,
    Verdict,
    VerdictKind,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def wb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    return Workbench(tmp_path / "ws")


def _page(path: str, wb: Workbench) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def _session_with_measured_versions(wb: Workbench) -> None:
    """A session of the GEMM sample with two approved versions whose verdicts carry the IR and
    timings that a GPU verification records (the pages render verdict data as stored)."""
    wb.load_sample("07_gemm_fp32_upcast")
    session = wb.start_session()
    base = session.source("head")
    v1 = base.replace("acc += tl.dot(a.to(tl.float32), b.to(tl.float32))", "acc = tl.dot(a, b, acc)")
    v2 = v1.replace("num_warps=4", "num_warps=8")

    def verdict(ttir: str, base_us: float, cand_us: float, tflops: float) -> Verdict:
        perf = PerformanceResult(
            variant="bench-gpu", baseline=TimingStats(base_us, base_us, base_us * 0.95, 0.02, 100),
            candidate=TimingStats(cand_us, cand_us * 1.01, cand_us * 0.97, 0.03, 100),
            speedup=base_us / cand_us, flop=2 * 4096 ** 3, bytes_moved=3 * 2 * 4096 ** 2,
            tflops=tflops, gbps=100.0, roofline_fraction=tflops / 989.0)
        kernel = CompiledKernelInfo(name="matmul_kernel", num_warps=4, num_stages=3, registers=128,
                                    spills=0, ir={"ttir": ttir, "ptx": "// ptx\n.version 8.7\n"})
        return Verdict(kind=VerdictKind.OK, reason="correct and faster", performance=[perf], kernels=[kernel],
                       device={"type": "cuda", "name": "NVIDIA H200"})

    for stage, code, v in (("dtype_fix", v1, verdict("tt.dot %a, %b : f32\n", 2000.0, 250.0, 550.0)),
                           ("xpu_specific", v2, verdict("tt.dot %a, %b : f16\nscf.for\n", 250.0, 230.0, 598.0))):
        rec = session.add_candidate(stage, code, engine="rules", verdict=v, rationale=f"{stage} change")
        session.approve(rec.id)


def test_knowledge_lint_rules_and_hardware(wb: Workbench) -> None:
    wb.load_sample("07_gemm_fp32_upcast")
    at = _page("pages/4_Knowledge.py", wb)
    text = _markdown(at)
    # lint of the loaded kernel: the finding names its line and links to the rule's anchor
    assert "**line 35**" in text
    assert "(#rule-dot-fp32-accumulate-low-precision-operands)" in text
    assert any("acc += tl.dot(a.to(tl.float32)" in c.value for c in at.code)
    # the rule itself is on the page under that anchor, with its why and before/after
    assert any(h.proto.anchor == "rule-dot-fp32-accumulate-low-precision-operands" for h in at.subheader)
    assert "**Why.**" in text
    # hardware profiles side by side
    table = at.dataframe[-1].value
    assert {"Intel Arc B580", "NVIDIA H200"} <= set(table.columns)
    assert "peak_tflops" in table["property"].tolist()
    # a pasted kernel with no problems lints clean
    at.radio(key="kb_lint_which").set_value("paste a kernel here").run()
    at.text_area(key="kb_lint_paste").set_value("x = 1\n").run()
    assert any("No rule violations" in s.value for s in at.success)


def test_ir_view_and_ir_diff(wb: Workbench) -> None:
    _session_with_measured_versions(wb)
    at = _page("pages/3_IR.py", wb)
    codes = [c.value for c in at.code]
    assert any("scf.for" in c for c in codes)  # newest version's TTIR shown first
    assert any(c.startswith("---") and "-tt.dot %a, %b : f32" in c and "+tt.dot %a, %b : f16" in c
               for c in codes)
    at.selectbox(key="ir_kind").set_value("ptx").run()
    assert any(".version 8.7" in c.value for c in at.code)


def test_ir_view_without_ir_explains(wb: Workbench) -> None:
    wb.load_sample("01_vector_add")
    wb.start_session()
    at = _page("pages/3_IR.py", wb)
    assert any("No compiled IR" in i.value for i in at.info)


def test_benchmarks_charts_and_csv(wb: Workbench) -> None:
    _session_with_measured_versions(wb)
    from xeforge_core.devices import DeviceInfo, profile_for

    # the roofline comes from the device's knowledge-base profile
    wb.device = DeviceInfo(type="cuda", name="NVIDIA H200", profile=profile_for("NVIDIA H200", "cuda"))
    at = AppTest.from_file(str(ROOT / "pages/5_Benchmarks.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    assert len(charts) == 3  # waterfall, roofline, time distribution
    waterfall = charts[0].proto.spec
    assert "8.70x" in waterfall  # 2000/250 then 250/230: cumulative 8.70x
    csv = at.get("download_button")[0]
    assert csv.proto.label == "Download CSV"
    table = at.dataframe[0].value
    assert table["median_us"].dropna().tolist() == [250.0, 230.0]


def test_benchmarks_on_cpu_say_not_measured(wb: Workbench) -> None:
    wb.load_sample("01_vector_add")
    wb.start_session()
    at = _page("pages/5_Benchmarks.py", wb)
    assert any("No version has measured timings" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_device_fingerprint_and_doctor_report(wb: Workbench) -> None:
    from xeforge_core.doctor.battery import CheckResult
    from xeforge_core.doctor.report import DoctorReport
    from xeforge_core.doctor.verdict import Observation, decide

    at = _page("pages/6_Device.py", wb)
    job = wb.jobs.current("device")
    assert job is not None and job.wait(120)
    at.run()
    assert wb.device is not None and wb.device.type == "cpu"
    assert any("Triton interpreter" in m for m in _markdown(at).splitlines())
    # a report with one failing op class reads "degraded", with the criteria shown
    battery = [CheckResult("matmul", "matmul", "ok", 1.0),
               CheckResult("sum along each dim", "reduction", "driver_error", 0.5,
                           detail="UR_RESULT_ERROR_INVALID_ARGUMENT")]
    wb.doctor_report = DoctorReport(
        device="cpu", battery=battery,
        verdict=decide([Observation(r.name, r.op_class, r.status, r.detail) for r in battery]))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    status = wb.doctor_report.verdict.status
    assert status in ("degraded", "unusable")
    shown = list(at.error) + list(at.warning)
    assert any(s.value.startswith(f"**{status.upper()}**") for s in shown), [s.value for s in shown]
    tables = [d.value.to_string() for d in at.dataframe]
    assert any("no failure below the Python layer" in t for t in tables)  # the criteria
    assert any("UR_RESULT_ERROR_INVALID_ARGUMENT" in t and "reduction" in t for t in tables)  # the battery


def test_flash_attention_demo_step_verified_live(wb: Workbench) -> None:
    at = _page("pages/7_Flash_Attention.py", wb)
    at.button(key="fa_start").click().run()
    assert wb.session is not None and wb.demo["steps"][0].stage == "baseline"
    assert "13_flash_attention_fwd" in wb.session.name
    at.button(key="fa_review").click().run()
    assert wb.review is not None and wb.review.engine == "trajectory"
    at.button(key="fa_verify").click().run()
    job = wb.jobs.current("verify")
    assert job is not None and job.wait(300)
    at.run()
    assert wb.review.verdict is not None and wb.review.verdict.passed, wb.review.verdict
    at.button(key="fa_approve").click().run()
    assert not at.exception, [e.value for e in at.exception]
    head = wb.session.version("head")
    assert head.index == 1 and head.stage == "fusion" and head.engine == "trajectory"
    table = at.dataframe[0].value
    assert table.loc[table["step"] == 1, "status"].item() == "approved"
    assert wb.demo["next"] == 2
    # the stepper moved on: step 2 is up as the next candidate, against the approved step 1
    assert at.selectbox(key="fa_pick").value == 2
    assert wb.review.proposed_source == wb.demo["steps"][2].code
    assert wb.review.base_source == wb.demo["steps"][1].code


def test_optimize_shows_progress_and_cancels_a_verification(wb: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import xeforge_core.verify as verify_mod

    started = threading.Event()

    def slow_verify(problem: object, source: str, *, on_progress, cancel, **kwargs: object) -> None:  # noqa: ANN001
        on_progress({"event": "step", "message": "candidate: correctness on ci", "fraction": 0.4})
        started.set()
        cancel.wait(30)

    monkeypatch.setattr(verify_mod, "verify", slow_verify)
    wb.load_sample("07_gemm_fp32_upcast")
    session = wb.start_session()
    wb.submit_manual(session.source("head").replace("num_warps=4", "num_warps=8"))
    at = _page("pages/1_Optimize.py", wb)
    at.button(key="opt_verify").click().run()
    assert started.wait(10)
    at.run()
    progress = at.get("progress")
    assert progress and "candidate: correctness on ci" in progress[0].proto.text
    assert at.button(key="opt_approve").disabled  # nothing to approve while it runs
    cancel = [b for b in at.button if b.label == "Cancel"]
    assert cancel, "no Cancel button while the verification runs"
    cancel[0].click().run()
    assert any("verification cancelled" in w.value for w in at.warning)
    job = wb.jobs.current("verify")
    assert job.wait(10)  # the work saw the cancel event and returned
    at.run()
    assert not at.get("progress")
    assert wb.review.status.value == "proposed" and len(session.history()) == 1


def test_optimize_portability_step_for_a_kernel_that_hard_codes_xpu(wb: Workbench) -> None:
    samples = ROOT / "sample_kernels"
    source = (samples / "01_vector_add.py").read_text().replace(
        "out = torch.empty_like(x)", 'out = torch.empty(x.shape, dtype=x.dtype, device="xpu")\n    torch.xpu.synchronize()')
    wb.load_text(source, spec_text=(samples / "01_vector_add.yaml").read_text(), name="vadd_xpu")
    session = wb.start_session()
    at = _page("pages/1_Optimize.py", wb)
    probe = wb.jobs.current("device")  # the page probes the device in the background
    assert probe is not None and probe.wait(120)
    at.run()
    assert wb.device is not None and wb.device.type == "cpu"
    assert any("hard-codes xpu" in w.value for w in at.warning)
    at.button(key="opt_portability").click().run()
    job = wb.jobs.current("portability")
    assert job is not None and job.wait(300)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    head = session.version("head")
    said = [m.value for kind in ("success", "info", "warning", "error") for m in getattr(at, kind)]
    assert head.stage == "portability" and head.verdict == "ok", said
    assert '"xpu"' not in session.source("head") and "torch.xpu" not in session.source("head")
    assert not any("hard-codes" in w.value for w in at.warning)
