"""The timing method on the CPU: the speedup rule, the interval, method selection, and the
sampling procedure against a simulated asynchronous device.

The simulated device (``SimOps``) has the ``DeviceOps`` interface and a virtual clock: the host
advances it by each call's host cost, the device runs queued work in order, each item starting
when the device is free and the item has been queued, and events take the device time at which
they are reached. That is the situation the H200 showed: when the host needs longer to issue a
call than the flush keeps the device busy, a start event recorded after the flush fires on an
idle device, and the gap is timed as kernel time.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from xeforge_core.verdict import (
    ASSUMED_NOISE_BAND,
    PerformanceResult,
    SpeedupKind,
    TimingStats,
    Verdict,
    VerdictKind,
    combine_speedups,
    speedup_call,
)
from xeforge_core.worker import timing
from xeforge_core.worker.timestats import bootstrap_speedup_interval, speedup_interval

# ----------------------------------------------------------------------------- the one rule


def test_interval_above_one_is_faster_below_is_slower_else_no_difference():
    assert speedup_call(1.5, 1.4, 1.6).kind is SpeedupKind.FASTER
    assert speedup_call(0.8, 0.75, 0.85).kind is SpeedupKind.SLOWER
    call = speedup_call(1.01, 0.99, 1.03)
    assert call.kind is SpeedupKind.NO_DIFFERENCE
    assert call.text == "no measurable difference (±3.0%)"
    assert speedup_call(1.5, 1.4, 1.6).text == "1.500x faster (95% CI 1.400x-1.600x)"
    assert speedup_call(0.8, 0.75, 0.85).short == "0.80x slower"


def test_rule_edges():
    # an interval touching 1 does not exclude it
    assert speedup_call(1.02, 1.0, 1.04).kind is SpeedupKind.NO_DIFFERENCE
    assert speedup_call(0.98, 0.96, 1.0).kind is SpeedupKind.NO_DIFFERENCE
    # ends in either order; an interval leaving out the point is widened to hold it
    assert speedup_call(1.5, 1.6, 1.4).low == 1.4
    widened = speedup_call(1.0, 1.01, 1.02)
    assert widened.kind is SpeedupKind.NO_DIFFERENCE and widened.low == 1.0
    # no speedup, or not a positive number: not measured
    for bad in (None, 0.0, -1.0, float("nan")):
        assert speedup_call(bad, 0.9, 1.1).kind is SpeedupKind.NOT_MEASURED
    assert speedup_call(None).text == "not measured"
    # no usable interval: the assumed band, said so
    legacy = speedup_call(1.9)
    assert legacy.kind is SpeedupKind.FASTER and legacy.assumed and "assumed" in legacy.text
    assert speedup_call(1.0 + ASSUMED_NOISE_BAND / 2, float("nan"), 1.2).kind is SpeedupKind.NO_DIFFERENCE
    assert speedup_call(1.01).kind is SpeedupKind.NO_DIFFERENCE
    # an infinite speedup (0 µs candidate) is faster
    assert speedup_call(math.inf, math.inf, math.inf).kind is SpeedupKind.FASTER


def _perf(speedup: float, low: float | None, high: float | None, variant: str = "v") -> PerformanceResult:
    t = TimingStats(median_us=100.0, mean_us=100.0, min_us=99.0, cv=0.01, trials=20, method="graph",
                    calls_per_sample=64, host_us=12.5, late=2, l2="warm")
    c = TimingStats(median_us=100.0 / speedup, mean_us=100.0 / speedup, min_us=99.0 / speedup, cv=0.01, trials=20,
                    method="graph", calls_per_sample=64)
    return PerformanceResult(variant=variant, baseline=t, candidate=c, speedup=speedup, speedup_low=low,
                             speedup_high=high, interval_method="paired bootstrap", method_reason="short kernel",
                             settle_ms=120.0, steady=True)


def test_new_fields_round_trip_through_json():
    v = Verdict(kind=VerdictKind.OK, performance=[_perf(1.2, 1.1, 1.3)])
    back = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
    p = back.performance[0]
    assert (p.speedup_low, p.speedup_high, p.confidence, p.steady, p.settle_ms) == (1.1, 1.3, 0.95, True, 120.0)
    assert (p.baseline.calls_per_sample, p.baseline.host_us, p.baseline.late, p.baseline.l2) == (64, 12.5, 2, "warm")
    assert p.call == v.performance[0].call and p.call.kind is SpeedupKind.FASTER
    # a verdict written before these fields existed still loads, with the defaults
    old = v.to_dict()
    for key in ("speedup_low", "speedup_high", "confidence", "interval_method", "method_reason", "settle_ms",
                "steady"):
        old["performance"][0].pop(key)
    for key in ("calls_per_sample", "host_us", "late", "l2"):
        old["performance"][0]["baseline"].pop(key)
    legacy = Verdict.from_dict(old).performance[0]
    assert legacy.speedup_low is None and legacy.baseline.calls_per_sample == 1 and legacy.call.assumed


def test_verdict_call_combines_the_variants():
    v = Verdict(kind=VerdictKind.OK, performance=[_perf(2.0, 1.9, 2.1, "a"), _perf(2.0, 1.9, 2.1, "b")])
    low, high = v.speedup_interval
    assert v.speedup == pytest.approx(2.0)
    # two independent equal intervals: the geometric mean's is narrower by sqrt(2) on the log scale
    assert math.log(2.0 / low) == pytest.approx(math.log(2.0 / 1.9) / math.sqrt(2))
    assert v.speed_call.kind is SpeedupKind.FASTER
    mixed = Verdict(kind=VerdictKind.OK, performance=[_perf(1.3, 1.25, 1.35), _perf(0.8, 0.78, 0.82)])
    assert mixed.speed_call.kind is SpeedupKind.NO_DIFFERENCE or mixed.speed_call.low <= 1 <= mixed.speed_call.high
    assert Verdict(kind=VerdictKind.OK).speed_call.kind is SpeedupKind.NOT_MEASURED
    half = Verdict(kind=VerdictKind.OK, performance=[_perf(2.0, 1.9, 2.1), _perf(2.0, None, None)])
    assert half.speedup_interval is None and half.speed_call.assumed


def test_combine_speedups_product():
    s, lo, hi = combine_speedups([(2.0, 1.8, 2.2), (3.0, 2.7, 3.3)])
    assert s == pytest.approx(6.0) and lo < 6.0 < hi
    assert combine_speedups([(2.0, 1.8, 2.2)]) == (2.0, 1.8, 2.2)
    assert combine_speedups([(2.0, None, None), (1.0, 0.9, 1.1)])[1:] == (None, None)
    assert combine_speedups([]) is None and combine_speedups([(0.0, 1.0, 1.0)]) is None


# ----------------------------------------------------------------------------- the interval


def test_bootstrap_interval_covers_the_truth_and_is_deterministic():
    rng = random.Random(1)
    base = [100.0 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(200)]
    cand = [50.0 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(200)]
    lo, hi = bootstrap_speedup_interval(base, cand)
    assert lo < 2.0 < hi and hi - lo < 0.05
    assert bootstrap_speedup_interval(base, cand) == (lo, hi)
    # the reported interval is at least ±1 % around the point
    low, high, raw_low, raw_high = speedup_interval(base, base)
    assert (raw_low, raw_high) == (1.0, 1.0) and low == pytest.approx(0.99) and high == pytest.approx(1.01)
    assert speedup_call(1.0, low, high).kind is SpeedupKind.NO_DIFFERENCE
    with pytest.raises(ValueError):
        bootstrap_speedup_interval([], [])


def test_aa_samples_are_mostly_no_measurable_difference():
    """Identical distributions: the 95 % interval (with its floor) should rarely exclude 1."""
    rng = random.Random(7)
    calls = []
    for _ in range(40):
        base = [10.0 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(30)]
        cand = [10.0 * (1 + 0.05 * rng.gauss(0, 1)) for _ in range(30)]
        lo, hi, _, _ = speedup_interval(base, cand)
        calls.append(speedup_call(sorted(base)[15] / sorted(cand)[15], lo, hi).kind)
    assert calls.count(SpeedupKind.NO_DIFFERENCE) >= 36


# ----------------------------------------------------------------------------- method selection


def test_long_kernels_are_timed_per_call_with_a_flushed_l2():
    plan = timing.choose_method({"baseline": 1900.0, "candidate": 250.0}, {"baseline": 30.0, "candidate": 30.0},
                                graphs=True)
    assert plan.method == "events" and plan.flush and plan.calls == {"baseline": 1, "candidate": 1}


def test_short_or_host_bound_kernels_are_batched():
    short = timing.choose_method({"baseline": 8.0, "candidate": 9.0}, {"baseline": 1.0, "candidate": 1.0},
                                 graphs=True)
    assert short.method == "graph" and not short.flush and short.calls["baseline"] == math.ceil(500 / 8)
    assert "under the 20 µs" in short.reason
    # not short, but issuing a call costs 40 % of its device time: also batched, by cost
    host_bound = timing.choose_method({"baseline": 100.0, "candidate": 100.0}, {"baseline": 40.0, "candidate": 5.0},
                                      graphs=False)
    assert host_bound.method == "back_to_back" and "40%" in host_bound.reason and host_bound.calls["baseline"] == 5
    # the threshold is a fraction, not a fixed 20 µs: a 30 µs kernel issued in 5 µs is timed per call
    assert timing.choose_method({"a": 30.0}, {"a": 5.0}, graphs=True).method == "events"
    assert timing.choose_method({"a": 0.01}, {"a": 5.0}, graphs=True).calls["a"] == timing.MAX_CALLS_PER_SAMPLE
    fallback = short.without_graphs("capture failed")
    assert fallback.method == "back_to_back" and "capture failed" in fallback.reason
    with pytest.raises(ValueError):
        timing.choose_method({}, {}, graphs=True)


# ----------------------------------------------------------------------------- a simulated device


class SimClock:
    def __init__(self) -> None:
        self.host = 0.0  # seconds

    def __call__(self) -> float:
        return self.host


class SimEvent:
    def __init__(self) -> None:
        self.t: float | None = None


class SimBuffer:
    def __init__(self, ops: SimOps, nbytes: int) -> None:
        self.ops, self.nbytes = ops, nbytes

    def zero_(self) -> None:
        self.ops.host_work(2e-6)
        self.ops.enqueue(self.ops.flush_s)

    def numel(self) -> int:
        return self.nbytes // 4

    def element_size(self) -> int:
        return 4


class SimOps:
    """An asynchronous device with a queue, on a virtual clock (see the module docstring)."""

    kind = "sim"
    graphs_for_timing = False  # the simulated device has no device graphs
    asynchronous = True
    interpreter = False

    def __init__(self, clock: SimClock, *, flush_s: float = 70e-6, sleep: bool = True) -> None:
        self.clock = clock
        self.flush_s = flush_s
        self.free_at = 0.0  # device time when the queue runs dry
        self.can_sleep = sleep
        self.cycles_per_s = 1.98e9

    def host_work(self, seconds: float) -> None:
        self.clock.host += seconds

    def enqueue(self, seconds: float) -> float:
        start = max(self.free_at, self.clock.host)
        self.free_at = start + seconds
        return self.free_at

    def flush_buffer(self, l2_bytes):
        return SimBuffer(self, 256 << 20)

    def event(self) -> SimEvent:
        return SimEvent()

    def record(self, event: SimEvent) -> None:
        self.host_work(1e-6)
        event.t = self.enqueue(0.0)

    def elapsed_ms(self, a: SimEvent, b: SimEvent) -> float:
        return (b.t - a.t) * 1e3

    def synchronize(self) -> None:
        self.clock.host = max(self.clock.host, self.free_at) + 5e-6

    def sleep_cycles(self, cycles: int) -> bool:
        if not self.can_sleep:
            return False
        self.host_work(3e-6)
        self.enqueue(cycles / self.cycles_per_s)
        return True

    def graph(self):
        return None


def kernel(ops: SimOps, device_s: float, host_s: float, jitter: random.Random | None = None,
           syncs: bool = False):
    """A call that costs ``host_s`` on the host (plus up to 60 µs of random extra when
    ``jitter``: a busy host) and then ``device_s`` on the device."""
    def call() -> None:
        extra = jitter.uniform(0, 60e-6) if jitter else 0.0
        ops.host_work(host_s + extra)
        ops.enqueue(device_s)
        if syncs:
            ops.synchronize()
    return call


@pytest.fixture
def sim(monkeypatch):
    clock = SimClock()
    monkeypatch.setattr(timing, "_perf", clock)
    monkeypatch.setattr(timing, "_monotonic", clock)
    return clock


def old_method_median(ops: SimOps, fn, trials: int = 50) -> float:
    """The earlier per-call procedure: synchronise, flush, record start, call, record end."""
    buf = ops.flush_buffer(None)
    times = []
    for _ in range(trials):
        ops.synchronize()
        buf.zero_()
        start, end = ops.event(), ops.event()
        ops.record(start)
        fn()
        ops.record(end)
        ops.synchronize()
        times.append(ops.elapsed_ms(start, end) * 1e3)
    return sorted(times)[len(times) // 2]


def test_a_slow_host_no_longer_inflates_short_kernels(sim):
    """A 14 µs kernel issued in 60-120 µs of host time: the old procedure timed the gap (its
    median about twice the minimum, as on the H200); the held queue times the kernel."""
    ops = SimOps(sim)
    rng = random.Random(3)
    old = old_method_median(ops, kernel(ops, 14e-6, 60e-6, rng))
    assert old > 20.0  # the gap is in the window
    fns = {"baseline": kernel(ops, 14e-6, 60e-6, rng), "candidate": kernel(ops, 14e-6, 60e-6, rng)}
    m = timing.measure(ops, fns, {"warmup_ms": 1, "rep_ms": 5, "settle_ms": 1, "settle_max_ms": 5})
    assert m.plan.method == "back_to_back"  # short, and the host overhead is far above 25 %
    for name in fns:
        assert statistics_median(m.samples[name]) == pytest.approx(14.0, rel=1e-6)
    speedup, low, high, _, _ = m.speedup()
    assert speedup == pytest.approx(1.0) and speedup_call(speedup, low, high).kind is SpeedupKind.NO_DIFFERENCE


def statistics_median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


def test_long_kernels_per_call_are_exact_even_when_the_host_is_slower_than_the_flush(sim):
    ops = SimOps(sim, flush_s=30e-6)
    rng = random.Random(5)
    fns = {"baseline": kernel(ops, 1900e-6, 10e-6, rng), "candidate": kernel(ops, 250e-6, 10e-6, rng)}
    m = timing.measure(ops, fns, {"warmup_ms": 5, "rep_ms": 20, "settle_ms": 5, "settle_max_ms": 20})
    assert m.plan.method == "events" and m.plan.flush
    assert statistics_median(m.samples["baseline"]) == pytest.approx(1900.0, rel=1e-6)
    assert statistics_median(m.samples["candidate"]) == pytest.approx(250.0, rel=1e-6)
    assert m.trials >= timing.MIN_TRIALS and m.steady is True
    result = timing.performance_result(m, "bench", flop=2 * 4096.0 ** 3)
    assert result.speedup == pytest.approx(7.6) and result.call.kind is SpeedupKind.FASTER
    assert result.candidate.method == "events" and result.candidate.l2 == "flushed"
    assert result.speedup_low <= 7.6 * 0.99 + 1e-9 and result.tflops > 0


def test_late_samples_are_caught_where_the_device_cannot_be_held(sim):
    """No device-side wait and no flush to stand in for one: every sample whose start event
    fired before the host had issued the call is detected and counted."""
    ops = SimOps(sim, sleep=False)
    ops.flush_buffer = lambda l2: None  # nothing to hold the device with
    fns = {"baseline": kernel(ops, 300e-6, 50e-6), "candidate": kernel(ops, 300e-6, 50e-6)}
    m = timing.measure(ops, fns, {"warmup_ms": 1, "rep_ms": 5, "settle_ms": 1, "settle_max_ms": 2})
    assert m.late["baseline"] > 0 and m.late["candidate"] > 0


def test_a_call_that_waits_for_the_device_is_detected(sim):
    ops = SimOps(sim)
    fns = {"baseline": kernel(ops, 300e-6, 20e-6), "candidate": kernel(ops, 300e-6, 20e-6, syncs=True)}
    m = timing.measure(ops, fns, {"warmup_ms": 1, "rep_ms": 5, "settle_ms": 1, "settle_max_ms": 2})
    assert "candidate waits for the device" in m.plan.reason
    assert m.late["candidate"] == 0
    assert statistics_median(m.samples["baseline"]) == pytest.approx(300.0, rel=1e-6)


# ----------------------------------------------------------------------------- the role, end to end


def _timed_in_the_interpreter(tmp_path, source: str) -> Verdict:
    """The timing worker's verdict on ``source`` as both baseline and candidate, as a subprocess in
    Triton's interpreter with ``force_timing`` (host-clocked)."""
    from tests.test_worker_planted import run_worker

    module = {"source": source, "filename": "candidate.py", "class_name": "Model", "label": "candidate"}
    baseline = dict(module, filename="baseline.py", label="baseline")
    job = {"role": "timing", "device": "cpu", "module": module, "baseline": baseline, "reference": None,
           "spec": None, "correctness_variants": [], "performance_variants": [{"name": "module", "params": [],
                                                                                "dims": {}}],
           "seeds": [0], "distributions": ["normal"], "expected_dir": None,
           "options": {"force_timing": True, "warmup_ms": 2, "rep_ms": 5, "lock_dir": str(tmp_path / "locks")}}
    return Verdict.from_dict(run_worker(tmp_path / "timing", job))


def test_timing_role_end_to_end_in_the_interpreter(tmp_path):
    """The timing worker, as a subprocess in Triton's interpreter with ``force_timing``: the
    same procedure, host-clocked; the verdict carries the interval, the method and the call."""
    from pathlib import Path

    add = (Path(__file__).parent / "fixtures" / "process" / "add_baseline.py").read_text()
    v = _timed_in_the_interpreter(tmp_path, add)
    assert v.kind is VerdictKind.OK, (v.reason, v.error_text)
    p = v.performance[0]
    assert p.baseline.trials >= timing.MIN_TRIALS and p.baseline.trials == p.candidate.trials
    assert p.candidate.method == "back_to_back" and p.method_reason and p.candidate.host_us > 0
    assert p.speedup_low <= p.speedup <= p.speedup_high and p.interval_method.startswith("paired bootstrap")
    assert p.steady is None  # no clocks to settle in the interpreter
    # one launch given the two inputs and the output: the bytes the problem must move
    assert p.traffic.launches == 1 and p.traffic.traffic_bytes == p.bytes_moved > 0
    assert p.traffic.busiest_programs >= 1 and p.traffic.compute_units is None  # no SMs in the interpreter
    step = v.step("performance")
    assert step.status.value == "passed" and p.call.text in step.summary and "back-to-back" in step.summary
    assert step.evidence["variants"]["module"]["trials"] == p.candidate.trials


# ----------------------------------------------------------------------------- where the rule is used


def _timed_verdict(speedup: float, low: float | None, high: float | None) -> Verdict:
    from xeforge_core.verdict import Step, StepStatus

    v = Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.PASSED)],
                performance=[_perf(speedup, low, high, "bench-gpu")])
    return v


def test_cover_accepts_only_what_the_rule_calls_faster():
    from xeforge_core.pipeline.loop import classify
    from xeforge_core.vocab.status import AttemptStatus

    FASTER, NOT_FASTER = AttemptStatus.FASTER, AttemptStatus.NOT_FASTER  # noqa: N806

    status, reason, _ = classify(_timed_verdict(1.2, 1.15, 1.25))
    assert status == FASTER and "1.200x faster (95% CI" in reason
    # 1.2x with an interval reaching below 1: no measurable difference, not accepted
    status, reason, _ = classify(_timed_verdict(1.2, 0.97, 1.45))
    assert status == NOT_FASTER and "no measurable difference" in reason
    # measurably faster but under the minimum gain worth a commit
    status, reason, _ = classify(_timed_verdict(1.02, 1.015, 1.025))
    assert status == NOT_FASTER and "minimum gain" in reason
    assert classify(_timed_verdict(1.02, 1.015, 1.025), min_speedup=1.0)[0] == FASTER
    status, reason, _ = classify(_timed_verdict(0.8, 0.78, 0.82))
    assert status == NOT_FASTER and "slower" in reason


def test_cli_workbench_report_and_batch_show_the_call(tmp_path):
    from xeforge_core.batch import BatchRow, write_csv
    from xeforge_core.commands.verify import render_report
    from xeforge_core.ui.render import verdict_badge

    faster, same = _timed_verdict(1.2, 1.15, 1.25), _timed_verdict(1.004, 0.99, 1.018)
    text = render_report(same)
    assert "95% CI" in text and "no difference (±1.8%)" in text and "graph x64" in text
    assert "speedup: no measurable difference (±1.8%)" in text
    assert "speedup: 1.200x faster (95% CI 1.150x-1.250x)" in render_report(faster)
    assert verdict_badge(faster).endswith("· 1.20x faster")
    assert "no measurable difference (±1.8%)" in verdict_badge(same)
    row = BatchRow(kernel="k", stages=["dtype_fix"], status={"dtype_fix": "approved"},
                   speedups={"dtype_fix": 1.2}, final_speedup=1.2, calls={"dtype_fix": faster.speed_call.text},
                   final_call=faster.speed_call.text, speed_measured=True)
    import csv

    with open(write_csv([row], tmp_path / "s.csv")) as fh:
        rec = next(csv.DictReader(fh))
    assert rec["dtype_fix_call"].startswith("1.200x faster") and rec["final_call"].startswith("1.200x faster")


# ----------------------------------------------------------------------------- sample order


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_trial_orders_balance_positions_and_predecessors(n):
    import collections

    names = [f"c{i}" for i in range(n)]
    cycle = timing.trial_orders(names)
    assert len(cycle) == math.factorial(n) and all(sorted(o) == names for o in cycle)
    seq = [x for order in cycle for x in order]  # the samples one after another, cyclically
    follows = collections.Counter((seq[i - 1], seq[i]) for i in range(len(seq)))
    assert len(follows) == n * n and len(set(follows.values())) == 1  # every pair, self included, alike
    positions = collections.Counter((i, x) for order in cycle for i, x in enumerate(order))
    assert len(positions) == n * n and len(set(positions.values())) == 1
    assert timing.order_for(cycle, len(cycle) + 1) == cycle[1 % len(cycle)]


def test_trial_orders_refuse_bad_names():
    for bad in ([], ["a", "a"], [f"c{i}" for i in range(timing.MAX_BALANCED + 1)]):
        with pytest.raises(ValueError):
            timing.trial_orders(bad)


def test_batched_callables_share_their_calls_per_sample():
    # an A/A pair whose single cost estimates differ by noise still takes the same number of calls
    assert timing.common_calls({"baseline": 1.0, "candidate": 1.1}) == {"baseline": 500, "candidate": 500}
    # a much slower callable takes fewer, so its sample stays under SAMPLE_MAX_US
    calls = timing.common_calls({"candidate": 2.0, "reference": 400.0})
    assert calls["candidate"] == 250 and calls["reference"] * 400.0 <= timing.SAMPLE_MAX_US
    plan = timing.choose_method({"baseline": 1.0, "candidate": 1.1}, {"baseline": 30.0, "candidate": 30.0},
                                graphs=True)
    assert plan.calls["baseline"] == plan.calls["candidate"]


def _carry_over(ops: SimOps, device_s: float, *, leaves: bool = False, penalty_s: float = 30e-6):
    """A call of ``device_s`` on the simulated device; a ``leaves`` call leaves state behind
    that makes the next call of another callable ``penalty_s`` slower (an L2 full of its
    buffers, clocks after a long sample)."""
    def call() -> None:
        ops.host_work(10e-6)
        extra = penalty_s if getattr(ops, "dirty", False) and not leaves else 0.0
        ops.dirty = leaves
        ops.enqueue(device_s + extra)
    return call




def test_aa_with_a_reference_that_leaves_state_behind_is_one(sim, monkeypatch):
    """Baseline = candidate, timed next to a reference whose sample slows the one after it:
    with the balanced order both follow the reference equally often, so the A/A ratio is 1 and
    its interval holds 1. The rotation used before (ABC, BCA, CAB) put the baseline after the
    reference in two trials of three: the candidate, the same kernel, came out 1.30x faster."""
    ops = SimOps(sim)
    fns = {"baseline": _carry_over(ops, 100e-6), "candidate": _carry_over(ops, 100e-6),
           "reference": _carry_over(ops, 200e-6, leaves=True)}
    opts = {"warmup_ms": 1, "rep_ms": 100, "settle_ms": 1, "settle_max_ms": 2}
    m = timing.measure(ops, fns, opts)
    assert m.plan.method == "events" and m.trials % 6 == 0 and m.trials >= 60
    speedup, low, high, _, _ = m.speedup()
    assert speedup == pytest.approx(1.0) and low <= 1.0 <= high

    def rotated(names):
        return [names[k:] + names[:k] for k in range(len(names))]

    monkeypatch.setattr(timing, "trial_orders", rotated)
    biased, low, high, _, _ = timing.measure(ops, fns, opts).speedup()
    assert biased == pytest.approx(1.3) and not low <= 1.0 <= high


def test_the_timing_role_runs_torch_at_the_float32_it_verified(tmp_path):
    """PyTorch lets cuDNN run float32 convolutions in TF32 by default; the baseline and candidate
    roles verify at full float32, so the timing role times there too (a module that reads the
    switches at its call fails the timing otherwise)."""
    from pathlib import Path

    add = (Path(__file__).parent / "fixtures" / "process" / "add_baseline.py").read_text()
    checked = add.replace("    def forward(self, x, y):\n",
                          "    def forward(self, x, y):\n"
                          "        assert not torch.backends.cudnn.allow_tf32, 'cuDNN may use TF32'\n"
                          "        assert not torch.backends.cuda.matmul.allow_tf32, 'cuBLAS may use TF32'\n", 1)
    assert checked != add
    v = _timed_in_the_interpreter(tmp_path, checked)
    assert v.kind is VerdictKind.OK, (v.reason, v.error_text)
