"""The pipeline benchmark's bookkeeping, on the GPU code path, with verdicts made up in the test.

The benchmark itself needs a GPU; here ``measure`` and ``run_rules_pipeline`` are replaced by
functions returning verdicts with known timings, so the speedups, TFLOP/s, roofline fractions,
geometric means and the CSV/Markdown/HTML outputs are checked exactly.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import sys
from pathlib import Path

import pytest

from xeforge_core.samples import flash_attention_trajectory, load_sample
from xeforge_core.verdict import PerformanceResult, TimingStats, Verdict, VerdictKind

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_pipeline", ROOT / "benchmarks" / "bench_pipeline.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_pipeline"] = mod
    spec.loader.exec_module(mod)
    return mod


class FakeDevice:
    type = "cuda"
    index = 0
    name = "Test GPU"


def _t(us: float) -> TimingStats:
    return TimingStats(median_us=us, mean_us=us, min_us=us, cv=0.01, trials=10)


def _perf(variant: str, base_us: float, cand_us: float, eager_us: float | None, flop: float) -> PerformanceResult:
    return PerformanceResult(variant=variant, baseline=_t(base_us), candidate=_t(cand_us),
                             speedup=base_us / cand_us, reference=_t(eager_us) if eager_us else None,
                             flop=flop, tflops=flop / (cand_us * 1e-6) / 1e12, roofline_fraction=0.5)


def _settings(bench, **kw):
    args = bench.parse_args(["--out", "unused", *kw.pop("argv", [])])
    s = bench.settings_from(args)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def test_bench_problem_rows_from_verdicts(bench, monkeypatch, tmp_path):
    job = bench.Job("sample", "07_gemm_fp32_upcast", load_sample("07_gemm_fp32_upcast"))
    settings = _settings(bench, max_shapes=2)
    variants = bench.bench_variants(job.problem, settings, "cuda")
    assert variants == ["bench-gpu", "bench-gpu-1"]

    def fake_pipeline(job_, device, settings_, workdir, **_):
        rows = [bench.StageRow(job_.name, "dtype_fix", "approved", 8.0, 1.0, "faster"),
                bench.StageRow(job_.name, "autotuning", "approved", 1.25, 1.0, "faster"),
                bench.StageRow(job_.name, "xpu_specific", "kept_current", None, 1.0, "nothing")]
        return bench.PipelineOutcome(job_.problem, "FINAL", rows, ["dtype_fix", "autotuning"], note="session")

    def fake_measure(baseline, source, names, device, settings_, **_):
        assert source == "FINAL" and names == variants
        return Verdict(kind=VerdictKind.OK, performance=[
            _perf(n, 1000.0, 100.0, 80.0, baseline.variant(n).flop) for n in names])

    monkeypatch.setattr(bench, "run_rules_pipeline", fake_pipeline)
    monkeypatch.setattr(bench, "measure", fake_measure)
    rows, stages, errors = bench.bench_problem(job, FakeDevice(), settings, tmp_path, bench.Budget(None), None)
    assert errors == [] and len(stages) == 3 and len(rows) == 2
    r = rows[0]
    assert r.speedup_rules == pytest.approx(10.0)
    assert r.rules_vs_eager == pytest.approx(0.8) and r.baseline_vs_eager == pytest.approx(0.08)
    flop = job.problem.variant("bench-gpu").flop
    assert r.tflops_rules == pytest.approx(flop / 100e-6 / 1e12)
    assert r.tflops_baseline == pytest.approx(flop / 1000e-6 / 1e12)
    assert r.roofline_rules == 0.5 and r.roofline_baseline == pytest.approx(0.05)
    assert r.stages_applied == "dtype_fix,autotuning"

    # a port that does not verify: nothing is timed (the original cannot run here either)
    monkeypatch.setattr(bench, "run_rules_pipeline", lambda j, d, st, w, **_: bench.PipelineOutcome(
        j.problem, j.problem.kernel.source, [bench.StageRow(j.name, "portability", "failed", None, 1.0, "wrong")],
        [], note="session"))
    monkeypatch.setattr(bench, "measure", lambda *a, **k: pytest.fail("nothing may be timed"))
    rows_f, _, _ = bench.bench_problem(job, FakeDevice(), settings, tmp_path, bench.Budget(None), None)
    assert all(r.speedup_rules is None and "the portability step failed (wrong)" in r.note for r in rows_f)

    # a missing rules engine still times the baseline against eager
    monkeypatch.setattr(bench, "measure", lambda b, s, n, d, st, **_: Verdict(
        kind=VerdictKind.OK, performance=[_perf(v, 1000.0, 1000.0, 500.0, 1.0) for v in n]))
    rows2, stages2, _ = bench.bench_problem(job, FakeDevice(), settings, tmp_path, bench.Budget(None), "no libcst")
    assert stages2 == [] and rows2[0].speedup_rules == 1.0 and "no libcst" in rows2[0].note


def test_trajectory_rows_and_reports(bench, monkeypatch, tmp_path):
    steps = flash_attention_trajectory(FakeDevice.type)
    settings = _settings(bench, argv=["--quick", "--all-steps"])
    shapes = bench.trajectory_variants(steps[0].problem, settings, "cuda")
    assert "bench-gpu-4" in shapes and len(shapes) >= 3  # includes the non-power-of-two length
    last = max(s.index for s in steps if not s.causal)
    causal_index = next(s.index for s in steps if s.causal)

    def fake_measure(problem, code, names, device, settings_, **_):
        step = next(s for s in steps if s.code == code)
        if step.causal:
            return Verdict(kind=VerdictKind.OK, performance=[_perf(n, 50.0, 50.0, 40.0, 1e12) for n in names])
        return Verdict(kind=VerdictKind.OK, performance=[
            _perf(n, 1000.0, 1000.0 / (2 ** step.index), 90.0, 1e12) for n in names])

    monkeypatch.setattr(bench, "measure", fake_measure)
    from concurrent.futures import ThreadPoolExecutor

    errors: list[str] = []
    with ThreadPoolExecutor(2) as pool:
        rows = bench.bench_trajectory(FakeDevice(), settings, pool, bench.Budget(None), errors)
    assert errors == []
    assert len(rows) == len(shapes) * len(steps)
    by = {(r.step, r.variant): r for r in rows}
    assert by[(0, shapes[0])].speedup == 1.0 and by[(0, shapes[0])].naive_us == 1000.0
    assert by[(5, shapes[0])].speedup == pytest.approx(32.0)
    causal = by[(causal_index, shapes[0])]
    assert causal.causal and causal.speedup is None
    assert causal.vs_noncausal == pytest.approx((1000 / 2 ** last) / 50)
    # --quick alone times the last non-causal step and the causal one (next to the naive baseline)
    with ThreadPoolExecutor(2) as pool:
        quick = bench.bench_trajectory(FakeDevice(), _settings(bench, argv=["--quick"]), pool, bench.Budget(None), [])
    assert sorted({r.step for r in quick}) == [0, last, causal_index]

    res = bench.Results(started="now", settings={"quick": True}, device={"type": "cuda", "name": "Test GPU"},
                        versions={"torch": "x", "triton": "y"}, trajectory=rows)
    res.shapes = [bench.ShapeRow("sample", "a", "bench-gpu", "", speedup_rules=4.0, rules_vs_eager=1.0),
                  bench.ShapeRow("sample", "a", "bench-gpu-1", "", speedup_rules=16.0, rules_vs_eager=1.0),
                  bench.ShapeRow("case", "b", "bench-gpu", "", speedup_rules=2.0)]
    res.stages = [bench.StageRow("a", "dtype_fix", "approved", 8.0, 1.0, "x | y")]
    nums = bench.summary_numbers(res)
    assert nums["rules_over_baseline"] == pytest.approx(math.sqrt(8.0 * 2.0))  # per problem first
    assert nums["rules_over_baseline_cases"] == pytest.approx(2.0)
    assert nums["trajectory_geomean_by_step"][2] == pytest.approx(4.0)
    # no stage applied anywhere: the same code timed twice, so nothing counts as made faster
    assert nums["problems_faster"] == 0
    res.shapes[0].stages_applied = res.shapes[1].stages_applied = "portability,dtype_fix"
    res.shapes[2].stages_applied = "portability"
    assert bench.summary_numbers(res)["problems_faster"] == 1

    bench.write_csv(tmp_path / "trajectory.csv", res.trajectory)
    bench.write_markdown(tmp_path / "summary.md", res, nums)
    with (tmp_path / "trajectory.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == len(rows)
    md = (tmp_path / "summary.md").read_text()
    assert "Test GPU" in md and "torch x" in md and "32.00x" in md and "x \\| y" in md
    assert md.count("no stage applied: the same code timed twice") == 1  # problem b: ported only
    pytest.importorskip("plotly")
    assert bench.write_html(tmp_path / "report.html", res, nums)
    assert "Test GPU" in (tmp_path / "report.html").read_text()


def _part(bench, started, problems, trajectory=False, name="Test GPU", complete=True):
    res = bench.Results(started=started, settings={"quick": True}, device={"type": "cuda", "name": name},
                        versions={"torch": "x"}, seconds=60.0, complete=complete)
    res.shapes = [bench.ShapeRow("case" if p[0].isdigit() and int(p.split("_")[0]) > 13 else "sample", p,
                                 "bench-gpu", "", speedup_rules=s) for p, s in problems]
    res.stages = [bench.StageRow(p, "dtype_fix", "approved", s, 1.0, "faster") for p, s in problems]
    if trajectory:
        res.trajectory = [bench.TrajectoryRow(step=0, title="naive", stage="baseline", rule_id="",
                                              variant="bench-gpu", dims="", speedup=1.0)]
    return res


def test_split_runs_merge_into_one_report(bench, tmp_path):
    a = _part(bench, "t0", [("07_gemm", 4.0)], trajectory=True)
    b = _part(bench, "t1", [("45_case", 2.0), ("14_case", 1.0)], complete=False)
    for name, res in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        bench.write_outputs(tmp_path / name, res, html=False)
    assert bench.main(["--out", str(tmp_path / "m"), "--merge", str(tmp_path / "a" / "results.json"),
                       "--merge", str(tmp_path / "b" / "results.json")]) == 0
    merged = bench.load_results(tmp_path / "m" / "results.json")
    assert [r.problem for r in merged.shapes] == ["07_gemm", "14_case", "45_case"]  # samples, then by number
    assert len(merged.parts) == 2 and merged.seconds == 120.0 and not merged.complete
    md = (tmp_path / "m" / "summary.md").read_text()
    assert "Merged from 2 runs" in md and "(cut short)" in md and "Incomplete" in md
    assert bench.summary_numbers(merged)["rules_over_baseline"] == pytest.approx(2.0)  # (4*2*1)^(1/3)

    # refused: the same problem twice, another device, a file that is not a result
    with pytest.raises(ValueError, match="07_gemm is in two runs"):
        bench.merge_results([a, _part(bench, "t2", [("07_gemm", 1.0)])])
    with pytest.raises(ValueError, match="different devices"):
        bench.merge_results([a, _part(bench, "t2", [("08_x", 1.0)], name="Other GPU")])
    with pytest.raises(ValueError, match="problem 07_gemm is in two runs \\(a.json and b.json\\)"):
        bench.merge_results([a, _part(bench, "t0", [("07_gemm", 1.0)])], labels=["a.json", "b.json"])
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: not a results.json of bench_pipeline.py \\(no field started"):
        bench.load_results(tmp_path / "bad.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(ValueError, match="empty.json: empty"):
        bench.load_results(tmp_path / "empty.json")
    with pytest.raises(ValueError, match="missing.json: no such file"):
        bench.load_results(tmp_path / "missing.json")
    assert bench.main(["--out", str(tmp_path / "m2"), "--merge", str(tmp_path / "bad.json")]) == 2
    same = str(tmp_path / "a" / "results.json")
    assert bench.main(["--out", str(tmp_path / "m3"), "--merge", same, "--merge", same]) == 2
    assert not (tmp_path / "m2").exists() and not (tmp_path / "m3").exists()
