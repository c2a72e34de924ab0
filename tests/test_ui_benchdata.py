"""Benchmark tables from session verdicts (xeforge_core.ui.benchdata)."""

from __future__ import annotations

from dataclasses import dataclass, field

from xeforge_core.ui.benchdata import attainable_tflops, roofline, session_rows, waterfall_steps
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
    assert roofline({"peak_tflops": {"fp16": 989.0}, "bandwidth_gbps": 4800}) == (989.0, 4800.0)
    assert roofline(None) is None
    assert attainable_tflops(10.0, 989.0, 4800.0) == 48.0
    assert attainable_tflops(1e6, 989.0, 4800.0) == 989.0
