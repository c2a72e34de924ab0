"""The verifier benchmark's own logic on the CPU: the A/A runs of one small kernel through the
timing procedure (Triton's interpreter, host-clocked), the earlier per-call method, the section
statistics, and the goals table and report it writes. Its numbers mean nothing here; the point
is that the script works before GPU time is spent on it (the full CPU run is
``python benchmarks/bench_verifier.py OUT --device cpu --quick``)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_verifier_under_test", ROOT / "benchmarks" / "bench_verifier.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_aa_runs_of_a_small_kernel_in_the_interpreter(bench, tmp_path):
    from xeforge_core.worker.device_ops import DeviceOps

    bench._OUT = tmp_path
    job = {"runs": 2, "deadline": time.time() + 120, "options": {"warmup_ms": 1, "rep_ms": 2}, "quick": True}
    rec = bench.aa_one({"kind": "small", "family": "vector_add", "target_us": 5.0}, DeviceOps("cpu"), job)
    assert rec["summary"]["runs"] == 2 and len(rec["runs"]) == 2
    run = rec["runs"][0]
    assert run["method"] == "back_to_back" and run["trials"] >= 20 and run["low"] <= run["speedup"] <= run["high"]
    assert rec["legacy"]["baseline"]["median_over_min"] >= 1.0 and rec["legacy"]["speedup"] > 0
    assert rec["meta"]["family"] == "vector_add" and "do_bench_us" not in rec  # no do_bench in the interpreter


def test_section_statistics_goals_and_report(bench):
    runs = [{"speedup": s, "call": c, "raw_low": 0.99, "raw_high": 1.01, "method": "graph", "calls": 64,
             "trials": 50, "settle_ms": 60.0, "late": 0, "baseline_us": 10.0}
            for s, c in [(1.0, "no_difference")] * 95 + [(1.03, "faster")] * 5]
    s = bench.aa_summary(runs)
    assert (s["runs"], s["in_band"], s["no_difference"], s["either"]) == (100, 95, 95, 95)
    assert s["either_fraction"] == pytest.approx(0.95) and s["speedup_max"] == 1.03
    rep = bench.repeat_summary([7.0, 7.1, 6.9])
    assert rep["cv"] == pytest.approx(0.1 / 7.0) and rep["runs"] == 3
    results = {
        "meta": {"date": "2026-12-01 00:00 UTC", "device": "cuda:0 (NVIDIA H200)", "versions": "torch 2.11.0",
                 "command": "python benchmarks/bench_verifier.py out", "budget_s": 345.0, "interpreter": False},
        "latency": {"problem": "01_vector_add", "variant": "bench-gpu", "rows": {
            "cold": {"wall_s": 4.0, "steps": {"compile": 1.0}, "steps_s": 3.0, "ratio": 4 / 3, "cached": False,
                     "kind": "ok"},
            "warm": {"wall_s": 3.0, "steps": {"compile": 1.0}, "steps_s": 2.5, "ratio": 1.2, "cached": False,
                     "kind": "ok"},
            "cached": {"wall_s": 0.02, "steps": {}, "steps_s": 0.0, "ratio": None, "cached": True, "kind": "ok"}}},
        "aa_small": [{"kernel": "vector_add ~5 µs", "wanted_runs": 100, "runs": runs, "summary": s,
                      "median_us": 10.0, "legacy": {"baseline": {"median_over_min": 2.0}, "speedup": 1.1},
                      "do_bench_cudagraph_us": 10.1, "agreement": {"compared_with": "do_bench_cudagraph",
                                                                   "ratio": 10.0 / 10.1},
                      "method_reason": "short"},
                     {"kernel": "matvec ~45 µs", "skipped": "not run: the time budget was spent"}],
        "repeat": {"pair": ["a.py", "b.py"], "variant": "bench-gpu", "summary": rep, "runs": [
            {"speedup": 7.0, "kind": "ok", "wall_s": 3.0, "method": "events", "calls": 1}]},
        "nvidia_smi": {"start (idle)": "345 MHz"},
    }
    met = {row[0]: row[3] for row in bench.goals(results)}
    assert met["small-kernel verification, wall (baseline reused)"] == "yes"
    assert met["cached verdict"] == "yes"
    assert met["A/A vector_add ~5 µs (10.0 µs)"] == "yes"
    assert met["agreement vector_add ~5 µs vs do_bench_cudagraph"] == "yes"
    assert met["repeatability, GEMM pair (3 fresh verifications)"] == "yes"
    text = bench.render(results)
    for piece in ("# Verifier benchmark", "## Goals", "## Latency", "## A/A, small kernels", "not run: the time budget",
                  "## Repeatability", "## Agreement with triton.testing.do_bench", "345 MHz", "2026-12-01"):
        assert piece in text, piece
    assert "A/A vector_add" in bench._short_table(results)
