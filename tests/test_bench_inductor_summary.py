"""The KernelBench-from-PyTorch benchmark's summary counts each problem once: a first version
verified before the run's --budget stopped its timing is verified, not "not run"."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_inductor_kernelbench as ikb  # noqa: E402

HEADER = {"date": "2026-12-06", "device": "cuda", "torch": "2", "triton": "3", "mode": "first version only",
          "min_eager_us": 100.0}


def _row(problem: str, first: str = "", verdict: str = "", note: str = "") -> dict:
    return {"level": "2", "problem": problem, "size": "module", "first_version": first,
            "first_version_verdict": verdict, "note": note}


def test_a_first_version_verified_before_the_budget_ran_out_counts_once():
    rows = [_row("p1", "approved", "ok"),
            _row("p2", "approved", "ok", "stopped after 112 s at the end of --budget; last: timing"),
            _row("p3", "rejected", "wrong_answer", "stopped after 200 s at the end of --budget; last: timing"),
            _row("p4", note="stopped after 32 s at the end of --budget; last: generating"),
            _row("p5", note="not run: --budget spent")]
    text = ikb.summarize(rows, HEADER)
    line = next(x for x in text.splitlines() if x.startswith("| 2 |"))
    assert "| 2 | 5 | 2/3 (67%), 2 not run |" in line, line
    # the problem whose first version was judged wrong is named, though --budget stopped it later
    failures = text.split("## No verified first version", 1)[1]
    assert "p3: rejected wrong_answer" in failures and "p4" not in failures and "p5" not in failures
