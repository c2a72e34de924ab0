"""Results measured elsewhere (xeforge_core.ui.recorded): the shipped H200 results read with
their device, date and versions; a session report exported from another machine; a file that is
none of the formats refused with its name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xeforge_core import units
from xeforge_core.ui.recorded import (
    RecordedError,
    load_results,
    problem_table,
    shipped_results,
    trajectory_table,
)


def test_shipped_pipeline_results_carry_their_provenance() -> None:
    shipped = shipped_results()
    r = load_results(next(p for label, p in shipped.items() if "pipeline" in label))
    prov = r.provenance
    assert prov.device == "NVIDIA H200 (cuda:0)" and prov.date == "2026-12-02 04:42"
    assert prov.versions == {"python": "3.12.3", "torch": "2.11.0", "triton": "3.6.0", "numpy": "2.5.2"}
    assert "not measured on this machine" in prov.banner() and not prov.missing
    assert r.summary["rules engine over the baselines (geometric mean, 15 problems)"] == "3.09x"
    assert r.summary["against PyTorch eager (samples)"] == "1.10x"
    assert len(r.problems) == 23
    row = next(x for x in problem_table(r) if x["problem"] == "11_maxpool2d")
    assert row["speedup"] == "58.67x" and row["kind"] == "sample"
    steps = trajectory_table(r)
    assert any(t["step"] == "8" and t["verdict"] == "wrong_answer" for t in steps)
    assert any(t["speedup over naive"] == "not comparable (causal)" for t in steps)


def test_a_session_report_from_another_machine(tmp_path: Path) -> None:
    report = {"format": 1, "problem": "gemm", "session": "gemm-1", "created": "2026-11-30T09:00:00Z",
              "device": {"label": "cuda:0 (NVIDIA H200)", "fingerprint": {"versions": {"torch": "2.11.0",
                                                                                   "triton": "3.6.0"}}},
              "speed_measured": True, "cumulative_speedup": 6.52,
              "versions": [{"index": 0, "kind": "baseline", "stage": None, "verdict": None},
                           {"index": 1, "kind": "approve", "stage": "dtype_fix", "verdict": "ok", "speedup": 6.52,
                            "time_us": 304.2, "parent_time_us": 1982.6, "tflops": 451.8}]}
    r = load_results(json.dumps(report).encode(), name="report.json")
    assert r.provenance.kind == "session report" and r.provenance.device == "cuda:0 (NVIDIA H200)"
    assert r.provenance.missing == [] and r.summary["cumulative speedup over the baseline"] == "6.52x"
    row = problem_table(r)[1]
    assert row["speedup"] == "6.52x" and row["optimized"] == "304.2 µs" and row["baseline"] == "1.98 ms"


@pytest.mark.parametrize("data, message", [
    (b"\xff\xfe\x00", "not UTF-8"),
    (b'{"x": 1', "not valid JSON"),
    (b"a,b\n1,2\n", "not a results file"),
])
def test_bad_results_files_name_the_file(data: bytes, message: str) -> None:
    with pytest.raises(RecordedError, match=message) as info:
        load_results(data, name="upload.json")
    assert "upload.json" in str(info.value)


def test_shipped_flash_attention_benchmark_shows_what_the_gpu_verified() -> None:
    """The H200 run of 2026-12-03 22:04: every step verified ok at every variant, then timed;
    the last non-causal step's range against SDPA, and no step slower than the one before
    beyond the shape's noise, as the page shows them."""
    path = next(p for label, p in shipped_results().items() if "against SDPA" in label)
    r = load_results(path)
    prov = r.provenance
    assert prov.kind == "Flash Attention benchmark" and prov.device == "NVIDIA H200 (cuda:0)"
    assert prov.date == "2026-12-03 22:04" and prov.versions["triton"] == "3.6.0" and not prov.missing
    assert any("verified by the product's verifier at every variant of its spec" in n for n in prov.notes)
    assert sorted(r.trajectory_by_step) == list(range(1, 11))  # the naive baseline and the causal step are no ratio
    assert round(r.trajectory_by_step[10], 2) == 7.52 and round(r.trajectory_by_step[1], 2) == 1.48
    rows = trajectory_table(r)
    verdicts = {t["step"]: t["verdict"] for t in rows}
    assert verdicts["0"] == "baseline, verified ok"
    assert all(verdicts[str(i)] == "verified ok" for i in range(1, 12))
    assert r.summary["steps verified ok at every variant"] == "12 of 12"
    assert "steps not verified on this device (never timed)" not in r.summary
    assert r.summary["step 10 vs SDPA (range over 5 shapes)"] == "0.84x-0.98x"
    assert not [t for t in r.trajectory if t["slower"]]
    assert all(t["speedup over naive"] == "not comparable (causal)" for t in rows if t["step"] == "11")


def test_a_verified_flash_attention_run_shows_each_steps_verdict_and_slower_steps() -> None:
    """The benchmark's results.json with the verifier's verdicts: a step verified ok says so, a
    wrong one shows its verdict and reason (never "matches"), a step slower than the one before
    beyond the shape's noise is marked."""
    import json

    row = {"title": "t", "stage": "s", "causal": False, "variant": "bench-gpu", "dims": "B=1 A=32 S=2048 D=128",
           "sdpa_us": 118.0, "max_err": 1e-4}
    obj = {"started": "2026-12-03 09:00", "device": {"type": "cuda", "name": "NVIDIA H200", "index": 0},
           "versions": {"triton": "3.6.0"}, "target": "cuda",
           "settings": {"steps": [0, 1, 2], "rounds": 5, "warmup": 25, "rep": 60, "atol": 0.02,
                        "variants": ["ci", "ci[1]", "bench-gpu"]},
           "verification": [{"step": 0, "kind": "ok"}, {"step": 1, "kind": "ok"},
                            {"step": 2, "kind": "wrong_answer", "reason": "wrong answer on variant ci"}],
           "rows": [{**row, "step": 0, "us": 960.0}, {**row, "step": 1, "us": 150.0, "vs_previous": 6.4},
                    {**row, "step": 2, "us": None, "note": "not timed: not verified ok at every variant"},
                    {**row, "step": 3, "us": 160.0, "vs_previous": 0.94, "slower": True, "noise": 0.01}]}
    r = load_results(json.dumps(obj), name="results.json")
    table = {t["step"]: t for t in trajectory_table(r)}
    assert table["0"]["verdict"] == "baseline, verified ok" and table["1"]["verdict"] == "verified ok"
    assert table["2"]["verdict"] == "wrong_answer: wrong answer on variant ci" and table["2"]["time"] == units.MISSING
    assert table["3"]["vs previous step"] == "0.94x (slower beyond noise)"
    assert r.summary["steps verified ok at every variant"] == "2 of 3"
    assert any("verified by the product's verifier at every variant of its spec (ci, ci[1], bench-gpu)" in n
               for n in r.provenance.notes)
