"""The other pages' main flows (Streamlit AppTest): Knowledge (lint with rule links, rules,
hardware side by side), IR (a version's IR and the diff of one IR between versions), Benchmarks
(charts and CSV from measured verdicts, and the cpu case with nothing measured), Device (the
fingerprint from the probe worker and a doctor report), and the Flash Attention demo (load the
trajectory, verify a step live, approve it)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from xeforge_core import units
from xeforge_core.ui.recorded import load_results
from xeforge_core.ui.workbench import Workbench, WorkbenchError
from xeforge_core.verdict import (
    CompiledKernelInfo,
    Finding,
    PerformanceResult,
    Step,
    StepStatus,
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
    # lint of the loaded kernel: the finding names its line and its rule, whose why is beside it
    assert "**line 35**" in text
    assert "`dot_fp32_accumulate_low_precision_operands`" in text
    assert any("acc += tl.dot(a.to(tl.float32)" in c.value for c in at.code)
    assert "**Why.**" in text
    assert not at.subheader  # one section at a time: the rules are not rendered with the lint
    # the rules, each under its anchor
    at.radio(key="kb_section").set_value("Rules").run()
    assert any(h.proto.anchor == "rule-dot-fp32-accumulate-low-precision-operands" for h in at.subheader)
    # hardware profiles side by side
    at.radio(key="kb_section").set_value("Hardware profiles").run()
    table = at.dataframe[-1].value
    assert {"Intel Arc B580", "NVIDIA H200"} <= set(table.columns)
    assert "peak_tflops" in table["property"].tolist()
    # a pasted kernel with no problems lints clean
    at.radio(key="kb_section").set_value("Lint my kernel").run()
    at.radio(key="kb_lint_which").set_value("paste a kernel here").run()
    at.text_area(key="kb_lint_paste").set_value("x = 1\n").run()
    assert any("No rule violations" in s.value for s in at.success)


def test_ir_recorded_by_gpu_verifications(wb: Workbench) -> None:
    """IR a GPU verification kept in the verdicts is shown as stored, beside the compile tab."""
    _session_with_measured_versions(wb)
    at = _page("pages/3_IR.py", wb)
    assert [t.label for t in at.tabs][:2] == ["Compiled here for a GPU target", "Recorded by GPU verifications"]
    at.selectbox(key="ir_rec_kind").set_value("ttir").run()
    codes = [c.value for c in at.code]
    assert any("scf.for" in c for c in codes)  # the newest candidate's TTIR
    at.selectbox(key="ir_rec_kind").set_value("ptx").run()
    assert any(".version 8.7" in c.value for c in at.code)
    wb.jobs.clear("ir")  # the compile tab started a background compile; not needed here


def test_ir_page_without_a_kernel_explains(wb: Workbench) -> None:
    at = _page("pages/3_IR.py", wb)
    assert any("Load a kernel on **Home**" in i.value for i in at.info)


def test_benchmarks_charts_and_csv(wb: Workbench) -> None:
    _session_with_measured_versions(wb)
    from xeforge_core.devices import DeviceInfo, profile_for

    # the roofline comes from the device's knowledge-base profile
    wb.device = DeviceInfo(type="cuda", name="NVIDIA H200", profile=profile_for("NVIDIA H200", "cuda"))
    at = AppTest.from_file(str(ROOT / "pages/5_Benchmarks.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # measured live: this session's tab comes first, the recorded results second
    assert [t.label for t in at.tabs][:2] == ["This session (07_gemm_fp32_upcast)", "Recorded on a GPU machine"]
    charts = at.get("plotly_chart")
    assert [c.key for c in charts] == ["bench_waterfall", "bench_roofline", "bench_times", "bench_recorded_chart",
                                       "bench_recorded_roofline"]
    waterfall = charts[0].proto.spec
    assert "8.70x" in waterfall  # 2000/250 then 250/230: cumulative 8.70x
    roof = json.loads(charts[1].proto.spec)["layout"]
    assert roof["xaxis"]["type"] == roof["yaxis"]["type"] == "log"
    assert json.loads(charts[3].proto.spec)["layout"]["yaxis"]["type"] == "log"  # the 58.67x bar squashes nothing
    csv = at.get("download_button")[0]
    assert csv.proto.label == "Download CSV"
    table = at.dataframe[0].value
    assert table["median"].tolist() == ["not measured", "250.0 µs", "230.0 µs"]
    assert table["TFLOP/s"].tolist()[1:] == ["550.0 TFLOP/s", "598.0 TFLOP/s"]
    assert table["work"].tolist()[1] == "137.4 GFLOP" and table["input bytes"].tolist()[1] == "96.0 MiB"


def test_benchmarks_on_cpu_show_the_recorded_h200_results_first(wb: Workbench) -> None:
    wb.load_sample("01_vector_add")
    wb.start_session()
    at = _page("pages/5_Benchmarks.py", wb)
    assert [t.label for t in at.tabs][:2] == ["Recorded on a GPU machine", "This session (01_vector_add)"]
    banner = "\n".join(i.value for i in at.info)
    assert "RECORDED, not live." in banner and "Recorded on NVIDIA H200 (cuda:0), 2026-12-02 04:42" in banner
    assert "python 3.12.3, torch 2.11.0, triton 3.6.0, numpy 2.5.2" in banner
    assert "not measured on this machine" in banner
    assert "No version of this session has measured timings" in banner
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["rules engine over the baselines (geometric mean, 15 problems)"] == "3.09x"
    table = at.dataframe[0].value
    gemm = table[table["problem"] == "07_gemm_fp32_upcast"].iloc[0]
    assert gemm["speedup"] == "4.69x" and gemm["baseline"].endswith(" ms") and gemm["TFLOP/s"].endswith("TFLOP/s")
    # the recorded speedups and roofline; live, only the roofline of the target with the benchmark
    # variant where its spec puts it, marked not measured
    assert [c.key for c in at.get("plotly_chart")] == ["bench_recorded_chart", "bench_recorded_roofline",
                                                        "bench_roofline"]
    live = json.loads(at.get("plotly_chart")[2].proto.spec)
    assert any("not measured" in (a.get("text") or "") for a in live["layout"]["annotations"])


def test_benchmarks_open_a_results_file_and_refuse_a_bad_one(wb: Workbench) -> None:
    csv = (ROOT / "docs" / "measured" / "h200-optimize-cases.csv").read_bytes()
    at = _page("pages/5_Benchmarks.py", wb)
    at.selectbox(key="bench_recorded_pick").set_value("Open a results file…").run()
    at.file_uploader(key="bench_recorded_upload").set_value(("summary.csv", csv, "text/csv")).run()
    assert not at.exception
    banner = "\n".join(i.value for i in at.info)
    # an uploaded CSV has no note beside it: what the CSV does not record is said, not guessed
    assert "RECORDED, not live.** Recorded on cuda:0 (xeforge batch summary, summary.csv)" in banner
    assert "Not recorded in the file: date, library versions." in banner
    at.file_uploader(key="bench_recorded_upload").set_value(("notes.json", b'{"a": 1}', "application/json")).run()
    assert "none of a pipeline or Flash Attention benchmark results.json and a session report.json (its keys: a)" in \
        "\n".join(e.value for e in at.error)


def test_device_fingerprint_and_doctor_report(wb: Workbench) -> None:
    from xeforge_core.doctor.battery import CheckResult
    from xeforge_core.doctor.report import DoctorReport
    from xeforge_core.doctor.verdict import Observation, decide

    at = _page("pages/6_Device.py", wb)
    job = wb.jobs.current("device")
    assert job is not None and job.wait(120)
    at.run()
    assert wb.device is not None and wb.device.type == "cpu"
    assert any("kernels run in Triton's interpreter: correctness can be trusted, timing is not measured" in m
               for m in _markdown(at).splitlines())
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
    demo = wb.demo_workbench()
    assert demo.session is not None and demo.demo["steps"][0].stage == "baseline"
    assert demo.session.name == "flash_attention_demo-13_flash_attention_fwd" and wb.session is None
    # the product's target on a cpu-only machine is Xe: its trajectory
    assert demo.demo["steps"][6].target == "xpu" and demo.demo["steps"][6].rule_id == "grf_mode_placement"
    at.button(key="fa_review").click().run()
    assert demo.review is not None and demo.review.engine == "trajectory" and wb.review is None
    at.button(key="fa_verify").click().run()
    job = demo.jobs.current("verify")
    assert job is not None and job.wait(600)
    at.run()
    assert demo.review.verdict is not None and demo.review.verdict.passed, demo.review.verdict
    at.button(key="fa_approve").click().run()
    assert not at.exception, [e.value for e in at.exception]
    head = demo.session.version("head")
    assert head.index == 1 and head.stage == "fusion" and head.engine == "trajectory"
    table = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert table.loc[table["step"] == 1, "status"].item() == "approved"
    # beside each step, its speedup as recorded on the H200 (geometric mean over the shapes), for
    # the steps the recorded trajectory had under the same title
    recorded = dict(zip(table["title"], table["recorded speedup (GPU)"]))
    # the page offers the Flash Attention benchmark's record first
    shipped = load_results(Path(__file__).resolve().parents[1] / "docs/measured/h200-flash-attention/results.json")
    for title in ("Online softmax (no scores in global memory)", "fp16 operands, fp32 accumulation"):
        speedups = [r["speedup"] for r in shipped.trajectory if r.get("title") == title and r.get("speedup")]
        assert speedups, title
        assert recorded[title] == units.speedup(math.prod(speedups) ** (1 / len(speedups)))
    assert demo.demo["next"] == 2
    # the stepper moved on: step 2 is up as the next candidate, against the approved step 1
    assert at.selectbox(key="fa_pick").value == 2
    assert demo.review.proposed_source == demo.demo["steps"][2].code
    assert demo.review.base_source == demo.demo["steps"][1].code


def _history_of(session) -> tuple:
    """What a session's history holds: its versions, its candidates, the refs under them."""
    from xeforge_core.session import Session

    fresh = Session.open(session.path)
    return ([(v.index, v.sha, v.stage) for v in fresh.history()], fresh.head,
            [(c.id, c.stage, c.status) for c in fresh.candidates()])


def test_flash_attention_demo_leaves_the_open_session_untouched(wb: Workbench) -> None:
    """With a GEMM session open, the demo's "Bring this step up" works in the demo's own session:
    the GEMM session's versions, head and candidates stay as they were (the fault the issue saw:
    attention step 2 became the GEMM session's candidate); the page keeps its tab and step across
    the reruns of the clicks, and a later visit resumes the demo's session instead of another."""
    wb.load_sample("07_gemm_fp32_upcast")
    gemm = wb.start_session()
    before = _history_of(gemm)
    at = _page("pages/7_Flash_Attention.py", wb)
    at.tabs[0]  # the tabs are there before the demo starts
    at.session_state["fa_tab"] = "Live demo on this machine"
    at.run()
    at.button(key="fa_start").click().run()
    demo = wb.demo_workbench()
    assert wb.session.path == gemm.path and demo.session.path != gemm.path
    at.selectbox(key="fa_pick").set_value(2).run()
    at.button(key="fa_review").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert demo.review is not None and demo.review.proposed_source == demo.demo["steps"][2].code
    assert demo.review.base_source == demo.demo["steps"][0].code      # against the demo's head
    assert wb.review is None and wb.session.path == gemm.path
    assert _history_of(gemm) == before
    assert at.selectbox(key="fa_pick").value == 2 and at.session_state["fa_tab"] == "Live demo on this machine"
    assert "the session open elsewhere (07_gemm_fp32_upcast) is not touched" in "\n".join(c.value for c in at.caption)
    # a new browser session (a fresh workbench on the same workspace) resumes the demo's own session
    fresh = Workbench(wb.workspace)
    fresh.load_sample("07_gemm_fp32_upcast")
    fresh.start_session()
    at2 = _page("pages/7_Flash_Attention.py", fresh)
    at2.button(key="fa_resume").click().run()
    assert fresh.demo_workbench().session.path == demo.session.path
    assert _history_of(gemm) == before
    with pytest.raises(WorkbenchError, match="not a Flash Attention demo session"):
        fresh.demo_workbench().start_demo(resume=gemm.path)


def test_flash_attention_recorded_trajectory_comes_first_on_the_interpreter(wb: Workbench) -> None:
    import json

    from xeforge_core.devices import DeviceInfo

    wb.device = DeviceInfo(type="cpu", name="host", interpreter=True)
    at = _page("pages/7_Flash_Attention.py", wb)
    assert [t.label for t in at.tabs][:2] == ["Live demo on this machine", "Recorded on a GPU machine"]
    assert at.session_state["fa_tab"] == "Recorded on a GPU machine"  # shown first on the interpreter
    banner = "\n".join(i.value for i in at.info)
    assert "Recorded on NVIDIA H200 (cuda:0), 2026-12-03 22:04" in banner and "Flash Attention benchmark" in banner
    rows = next(d.value for d in at.dataframe if "speedup over naive" in d.value.columns)
    fp16 = rows[(rows["step"] == "2") & rows["shape"].str.startswith("bench-gpu: B=1 A=32 S=2048 D=128")]
    assert fp16["speedup over naive"].item() == "4.72x" and fp16["TFLOP/s"].item().endswith("TFLOP/s")
    assert fp16["vs sdpa"].item() == "0.59x" and fp16["verdict"].item() == "verified ok"
    # every step the GPU verified has its numbers on every shape
    pipelined = rows[rows["step"] == "7"]
    assert len(pipelined) == 5 and units.MISSING not in set(pipelined["time"])
    assert set(pipelined["verdict"]) == {"verified ok"}
    assert "step 10: 7.52x" in "\n".join(m.value for m in at.markdown)
    assert not any("Slower than the step before" in w.value for w in at.warning)  # none in this record
    assert rows[rows["step"] == "11"]["speedup over naive"].iloc[0] == "not comparable (causal)"
    # the chart's axis titles and step labels get the room they need (nothing cut)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["xaxis"]["automargin"] is True and spec["layout"]["yaxis"]["automargin"] is True
    assert spec["layout"]["yaxis"]["title"]["text"] == "speedup over the naive kernel (x)"
    assert max(len(str(x)) for trace in spec["data"] for x in trace["x"]) <= 26


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


def test_optimize_verifies_with_the_memory_checker(wb: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's "Verify with memcheck" button asks for the memory checker, and the verdict
    shows what it found (its step on the Correctness tab, its findings on the Structure tab)."""
    import xeforge_core.verify as verify_mod

    asked = []

    def fake_verify(problem: object, source: str, *, options=None, **kwargs: object) -> Verdict:  # noqa: ANN001
        asked.append(options)
        return Verdict(kind=VerdictKind.WRONG_ANSWER, reason="out-of-bounds write found by the memory checker",
                       steps=[Step("correctness", StepStatus.FAILED, summary="matches the reference"),
                              Step("memcheck", StepStatus.FAILED, summary="interpreter bounds check: 1 invalid write")],
                       findings=[Finding("memcheck_invalid_write", "kernel k at line 9: invalid global write", "error", 9)])

    monkeypatch.setattr(verify_mod, "verify", fake_verify)
    wb.load_sample("07_gemm_fp32_upcast")
    session = wb.start_session()
    wb.submit_manual(session.source("head").replace("num_warps=4", "num_warps=8"))
    at = _page("pages/1_Optimize.py", wb)
    button = at.button(key="opt_verify_memcheck")
    assert not button.disabled and "interpreter's bounds check" in button.help
    button.click().run()
    assert wb.jobs.current("verify").wait(10)
    at.run()
    assert len(asked) == 1 and asked[0] is not None and asked[0].memcheck
    assert any("memcheck: interpreter bounds check: 1 invalid write" in e.value for e in at.error)
    assert wb.review.verdict.kind is VerdictKind.WRONG_ANSWER


def test_optimize_offers_the_baselines_precision_and_verifies_with_it(wb: Workbench,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's "Allowed precision" choice offers ``baseline`` beside the named downgrades;
    choosing it reaches the next verification's options, as ``--allow baseline`` does."""
    import xeforge_core.verify as verify_mod

    asked = []

    def fake_verify(problem: object, source: str, *, options=None, **kwargs: object) -> Verdict:  # noqa: ANN001
        asked.append(options)
        return Verdict(kind=VerdictKind.OK, reason="ok", steps=[Step("correctness", StepStatus.PASSED)])

    monkeypatch.setattr(verify_mod, "verify", fake_verify)
    wb.load_sample("07_gemm_fp32_upcast")
    session = wb.start_session()
    wb.submit_manual(session.source("head").replace("num_warps=4", "num_warps=8"))
    at = _page("pages/1_Optimize.py", wb)
    choice = at.multiselect(key="opt_allow_precision")
    assert any(o.startswith("baseline: ") for o in choice.options) and any(o.startswith("tf32: ") for o in choice.options)
    choice.set_value(["baseline"]).run()
    assert wb.allow_precision == ["baseline"]
    at.button(key="opt_verify_memcheck").click().run()
    assert wb.jobs.current("verify").wait(10)
    assert asked and asked[-1].allow_precision == ["baseline"]
