"""Session reports: per-stage verdicts and speedups, cumulative speedup, TFLOP/s and device, in
JSON and Markdown, from a session history built with timed (GPU-style) verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.problem import load_problem
from xeforge_core.session import Session
from xeforge_core.session.report import json_report, markdown_report, markdown_table, stage_rows, text_table
from xeforge_core.verdict import PerformanceResult, Step, StepStatus, TimingStats, Verdict, VerdictKind

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py"
H200 = {"type": "cuda", "index": 0, "name": "NVIDIA H200"}


def timed(speedup: float, base_us: float, flop: float = 2 * 4096 ** 3) -> Verdict:
    cand_us = base_us / speedup
    base = TimingStats(median_us=base_us, mean_us=base_us, min_us=base_us, cv=0.01, trials=30)
    cand = TimingStats(median_us=cand_us, mean_us=cand_us, min_us=cand_us, cv=0.01, trials=30)
    return Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.PASSED)], device=dict(H200),
                   performance=[PerformanceResult(variant="bench-gpu", baseline=base, candidate=cand, speedup=speedup,
                                                  flop=flop, tflops=flop / (cand_us * 1e-6) / 1e12, gbps=900.0,
                                                  roofline_fraction=0.5)])


@pytest.fixture
def session(tmp_path) -> Session:
    s = Session.create(load_problem(GEMM), workspace=tmp_path, device=dict(H200), target="cuda",
                       plan=["dtype_fix", "xpu_specific", "autotuning"])
    src = s.source()
    c = s.add_candidate("dtype_fix", src + "\n# fp16 operands\n", engine="rules", model="codemod:dtype_fix",
                        iteration=1, rationale="keep fp16 operands", verdict=timed(8.0, 2000.0))
    s.approve(c.id)
    bad = s.add_candidate("xpu_specific", s.source() + "\n# swizzle\n", engine="rules", iteration=1,
                          verdict=timed(0.9, 250.0))
    s.mark_stage("xpu_specific", "kept_current", "kept current: no candidate beat the current version")
    assert bad.status == "pending"
    c3 = s.add_candidate("autotuning", s.source() + "\n# autotune\n", engine="rules", iteration=1,
                         verdict=timed(1.25, 250.0))
    s.approve(c3.id)
    return s


def test_json_report_per_stage_and_cumulative(session):
    r = json_report(session)
    assert r["problem"] == "07_gemm_fp32_upcast" and r["device"]["label"] == "cuda:0 NVIDIA H200"
    assert r["target"]["profile"] == "nvidia_h200" and r["target"]["family"] == "cuda" and r["speed_measured"] is True
    assert r["cumulative_speedup"] == pytest.approx(10.0)
    stages = {s["stage"]: s for s in r["stages"]}
    assert list(stages) == ["dtype_fix", "xpu_specific", "autotuning"]
    assert stages["dtype_fix"]["speedup"] == pytest.approx(8.0) and stages["dtype_fix"]["status"] == "done"
    assert stages["xpu_specific"]["status"] == "kept_current" and stages["xpu_specific"]["speedup"] is None
    assert stages["xpu_specific"]["attempts"][0]["speedup"] == pytest.approx(0.9)
    assert stages["autotuning"]["speedup"] == pytest.approx(1.25)
    # TFLOP/s of each version from its verdict (2*4096^3 flop in 250 µs = 549.8 TFLOP/s)
    assert stages["dtype_fix"]["tflops"] == pytest.approx(2 * 4096 ** 3 / 250e-6 / 1e12)
    versions = r["versions"]
    assert [v["kind"] for v in versions] == ["baseline", "engine", "engine"]
    assert versions[1]["parent_tflops"] == pytest.approx(2 * 4096 ** 3 / 2000e-6 / 1e12)
    assert versions[2]["cumulative_speedup"] == pytest.approx(10.0)
    assert r["candidates"] == {"approved": 2, "pending": 1}


def test_markdown_report_names_device_stages_and_speedups(session):
    md = markdown_report(session)
    assert md.startswith("# Optimization report: 07_gemm_fp32_upcast\n")
    assert "Device: cuda:0 NVIDIA H200" in md and "Cumulative speedup: **10.000x**" in md
    assert "| dtype_fix | done | 1 | ok | 8.000x | 549.76 |" in md
    assert "| xpu_specific | kept_current |" in md
    assert "## CoVeR attempts" in md and "0.900x" in md
    assert "not measured" not in md.split("## Versions")[0]


def test_restore_and_portability_in_reports(session):
    session.restore(1)
    r = json_report(session)
    assert r["versions"][-1]["kind"] == "restore" and r["cumulative_speedup"] == pytest.approx(8.0)
    headers, rows = stage_rows(r)
    assert headers[0] == "stage" and [row[0] for row in rows] == ["dtype_fix", "xpu_specific", "autotuning"]


def test_tables():
    assert markdown_table(["a", "b"], [[1, "x|y"]]) == "| a | b |\n|---|---|\n| 1 | x\\|y |"
    assert text_table(["k", "v"], [["long-name", 1]]).splitlines() == ["k          v", "---------  -", "long-name  1"]
