"""Benchmark tables from session verdicts (xeforge_core.ui.benchdata)."""

from __future__ import annotations

from dataclasses import dataclass, field

from xeforge_core.ui.benchdata import roofline_points, session_rows, waterfall_steps
from xeforge_core.verdict import PerformanceResult, TimingStats, Verdict, VerdictKind


@dataclass
class _V:
    sha: str
    index: int
    kind: str
    stage: str | None
    engine: str | None
    verdict: str | None
    speedup: float | None
    cumulative_speedup: float | None

    @property
    def short(self) -> str:
        return self.sha[:4]


@dataclass
class _Session:
    versions: list[_V]
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def history(self) -> list[_V]:
        return self.versions

    def verdict_of(self, sha: str) -> Verdict | None:
        return self.verdicts.get(sha)


def _timing(us: float) -> TimingStats:
    return TimingStats(median_us=us, mean_us=us, min_us=us * 0.9, cv=0.02, trials=50)


def test_rows_waterfall_and_roofline() -> None:
    perf = PerformanceResult(variant="bench-gpu", baseline=_timing(100.0), candidate=_timing(25.0),
                             speedup=4.0, flop=2e9, bytes_moved=1e7, tflops=80.0, gbps=400.0,
                             roofline_fraction=0.5)
    session = _Session(
        versions=[_V("aaaa1111", 0, "baseline", "baseline", "baseline", None, None, 1.0),
                  _V("bbbb2222", 1, "engine", "dtype_fix", "rules", "ok", 4.0, 4.0),
                  _V("cccc3333", 2, "engine", "autotuning", "rules", "ok", None, None)],
        verdicts={"bbbb2222": Verdict(kind=VerdictKind.OK, performance=[perf]),
                  "cccc3333": Verdict(kind=VerdictKind.OK)})
    rows = session_rows(session)
    assert [r.index for r in rows] == [0, 1, 2]
    assert rows[1].median_us == 25.0 and rows[1].intensity == 200.0 and rows[1].variant == "bench-gpu"
    assert rows[2].median_us is None and rows[2].speedup is None
    assert waterfall_steps(session) == [("baseline", 1.0), ("#1 dtype_fix", 4.0)]
    points, dtype = roofline_points(rows, chosen=1)
    assert [(p.label, p.intensity, p.tflops, p.chosen) for p in points] == [("#1 dtype_fix [bench-gpu]", 200.0, 80.0,
                                                                             True)]
    assert dtype == "float32"  # no problem given: the fp32 roof


def test_an_untimed_history_shows_no_cumulative_speedup() -> None:
    """In the interpreter nothing is timed: the baseline's cumulative 1.0 is not shown as a
    measured 1.000x beside versions that read "not measured"."""
    from xeforge_core import units
    from xeforge_core.ui.benchdata import display_rows

    session = _Session(versions=[_V("aaaa1111", 0, "baseline", "baseline", "baseline", None, None, 1.0),
                                 _V("bbbb2222", 1, "engine", "autotuning", "rules", "ok", None, None)])
    rows = session_rows(session)
    assert [r.cumulative for r in rows] == [None, None]
    assert {d["cumulative"] for d in display_rows(rows)} == {units.MISSING}


def test_the_roofline_is_the_targets_on_log_axes_with_its_ridge_and_the_versions() -> None:
    from xeforge_core.knowledge import load_knowledge
    from xeforge_core.ui.charts import RooflinePoint, roofline_figure

    h200 = load_knowledge().profiles["nvidia_h200"]
    points = [RooflinePoint("#0 baseline", 0.17, 0.21, group="baseline"),
              RooflinePoint("#1 memory_access", 0.17, 0.68, link="#0 baseline"),
              RooflinePoint("bench-gpu", 300.0, None)]
    fig = roofline_figure(h200, "float16", points)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    roof, ridge = fig.data[0], fig.data[1]
    assert max(roof.y) == h200.peak("fp16") == 989.5  # the compute roof: the fp16 peak of the profile
    assert abs(roof.y[0] - h200.bandwidth_gbps * roof.x[0] / 1e3) < 1e-9  # the memory roof: bandwidth x intensity
    assert (ridge.x[0], ridge.y[0]) == (h200.ridge_point("fp16"), 989.5)
    placed = {t.name: t for t in fig.data[2:]}
    assert list(placed["version"].x) == [0.17] and list(placed["baseline"].y) == [0.21]
    assert len(fig.layout.annotations) >= 2  # the arrow from the baseline, and the not-measured line's label
    assert any("bench-gpu: not measured" in (a.text or "") for a in fig.layout.annotations)


def test_speedups_are_bars_from_1x_on_a_log_axis() -> None:
    from xeforge_core.ui.charts import speedup_bars

    fig = speedup_bars(["a", "b", "c"], [58.67, 1.1, 0.8])
    assert fig.layout.yaxis.type == "log"
    bar = fig.data[0]
    assert bar.base == 1.0
    tops = [bar.base + y for y in bar.y]
    assert [round(t, 2) for t in tops] == [58.67, 1.1, 0.8]  # each bar ends at its speedup, 0.8x points down
    assert list(bar.text) == ["58.67x", "1.10x", "0.80x"]


def test_the_decision_log_reads_as_times_and_values_never_none() -> None:
    from xeforge_core.ui.history import COLUMNS, decision_rows

    log = [{"action": "create", "time": 1796227200.0, "version": "a" * 40},
           {"action": "stage", "time": 1796227260.5, "stage": "dtype_fix", "status": "running", "reason": ""},
           {"action": "approve", "time": 1796227300.0, "candidate": "dtype_fix/1", "version": "b" * 40,
            "speedup": 4.689},
           {"action": "plan", "time": 1796227400.0, "plan": ["dtype_fix", "autotuning"]}]
    rows = decision_rows(log, {"a" * 40: "#0 aaaaaaa"})
    assert [r["action"] for r in rows] == ["plan", "approve", "stage", "create"]  # newest first
    assert all(tuple(r) == COLUMNS for r in rows)
    assert rows[3]["when (UTC)"] == "2026-12-02 16:00:00" and rows[3]["version"] == "#0 aaaaaaa"
    assert rows[1]["speedup"] == "4.69x" and rows[1]["version"] == "b" * 10
    assert rows[2]["details"] == "status: running" and rows[0]["details"] == "plan: dtype_fix, autotuning"
    assert not any(v in ("None", "nan") for r in rows for v in r.values())
