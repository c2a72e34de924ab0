"""Why a memory-bound candidate stays below the bandwidth: the launch traffic the worker records
(in Triton's interpreter) and the reasons read from it."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from xeforge_core.roofline_gap import roofline_gap
from xeforge_core.verdict import LaunchTraffic, PerformanceResult, TimingStats, Verdict
from xeforge_core.worker.capture import LaunchRecorder
from xeforge_core.worker.timing import launch_traffic


@triton.jit
def _row_max(x_ptr, m_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    tl.store(m_ptr + row, tl.max(x, axis=0))


@triton.jit
def _row_sum_exp(x_ptr, m_ptr, s_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    tl.store(s_ptr + row, tl.sum(tl.exp(x - tl.load(m_ptr + row)), axis=0))


@triton.jit
def _row_normalise(x_ptr, m_ptr, s_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf"))
    y = tl.exp(x - tl.load(m_ptr + row)) / tl.load(s_ptr + row)
    tl.store(y_ptr + row * cols + offs, y, mask=mask)


@triton.jit
def _row_softmax(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=mask)


def three_pass(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    m, s, y = x.new_empty(rows), x.new_empty(rows), torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    _row_max[(rows,)](x, m, cols, BLOCK=block)
    _row_sum_exp[(rows,)](x, m, s, cols, BLOCK=block)
    _row_normalise[(rows,)](x, m, s, y, cols, BLOCK=block)
    return y


def one_pass(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _row_softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


def _recorded(fn, x: torch.Tensor, units: int | None) -> tuple[torch.Tensor, LaunchTraffic | None]:
    rec = LaunchRecorder()
    rec.install()
    try:
        out = fn(x)
    finally:
        rec.uninstall()
    return out, launch_traffic(rec.launches, units)


def _perf(traffic: LaunchTraffic | None, bytes_moved: float, median_us: float = 500.0,
          launch_bound: bool = False) -> PerformanceResult:
    stats = TimingStats(median_us=median_us, mean_us=median_us, min_us=median_us, cv=0.01, trials=10)
    return PerformanceResult(variant="bench", baseline=stats, candidate=stats, speedup=1.0, bytes_moved=bytes_moved,
                             launch_bound=launch_bound, traffic=traffic, bound="memory")


def test_launch_traffic_counts_each_launchs_tensors():
    x = torch.randn(6, 300)
    y3, three = _recorded(three_pass, x, units=132)
    y1, one = _recorded(one_pass, x, units=132)
    torch.testing.assert_close(y3, torch.softmax(x, dim=1))
    torch.testing.assert_close(y1, torch.softmax(x, dim=1))
    xb, rows = x.numel() * 4, 6 * 4
    assert one == LaunchTraffic(launches=1, traffic_bytes=2 * xb, busiest_kernel="_row_softmax", busiest_programs=6,
                                busiest_bytes=2 * xb, compute_units=132)
    # the input is read by all three launches, the statistics by two and three of them
    assert three.launches == 3 and three.traffic_bytes == (xb + rows) + (xb + 2 * rows) + (2 * xb + 2 * rows)
    assert three.busiest_kernel == "_row_normalise" and three.busiest_programs == 6
    assert launch_traffic([], 132) is None


def test_extra_passes_are_named_with_the_time_for_the_bytes_touched():
    x = torch.randn(6, 300)
    _, three = _recorded(three_pass, x, units=4)
    minimum = 2 * x.numel() * 4
    reasons = roofline_gap(_perf(three, minimum), 0.40)
    assert len(reasons) == 1 and reasons[0].startswith("extra passes: its 3 launch(es) are given 2.0x")
    assert "(28.9 kB for 14.4 kB); for those bytes the time is 80% of the device's bandwidth" in reasons[0]
    # at the goal, or with the fraction unknown, there is nothing to explain
    assert roofline_gap(_perf(three, minimum), 0.85) == [] and roofline_gap(_perf(three, minimum), None) == []


def test_too_few_programs_for_the_sms():
    matvec = LaunchTraffic(launches=1, traffic_bytes=4.0e9, busiest_kernel="_matvec_kernel", busiest_programs=128,
                           busiest_bytes=4.0e9, compute_units=132)
    (reason,) = roofline_gap(_perf(matvec, 4.0e9), 0.47, bandwidth="the copy bandwidth")
    assert reason.startswith("too few programs: _matvec_kernel (the launch with the most bytes) runs 128 program(s) "
                             "for 132 SMs/Xe-cores, so 4 idle")
    # enough programs and the minimum bytes: the access pattern is what is left
    wide = LaunchTraffic(launches=1, traffic_bytes=4.0e9, busiest_kernel="k", busiest_programs=4096,
                         busiest_bytes=4.0e9, compute_units=132)
    (reason,) = roofline_gap(_perf(wide, 4.0e9), 0.47)
    assert "run 4096 programs for 132 SMs/Xe-cores: the gap is in the access pattern" in reason


def test_launch_bound_and_unrecorded_launches():
    reasons = roofline_gap(_perf(None, 1e6, median_us=4.0, launch_bound=True), 0.1)
    assert reasons == ["launch-bound: at 4.0 µs a call, the overhead of its launches is a large part of the time "
                       "(fewer launches, or larger inputs, move it)"]
    assert roofline_gap(_perf(None, 1e6), 0.1) == ["the launches were not recorded, so the cause is not known"]


def test_traffic_round_trips_through_the_verdict_json():
    traffic = LaunchTraffic(launches=2, traffic_bytes=3e6, busiest_kernel="k", busiest_programs=8, busiest_bytes=2e6,
                            compute_units=20)
    verdict = Verdict.from_dict({"kind": "ok", "performance": [
        {**_to_json(_perf(traffic, 1e6))}]})
    assert verdict.performance[0].traffic == traffic and verdict.performance[0].bound == "memory"


def _to_json(perf: PerformanceResult) -> dict:
    import dataclasses

    return dataclasses.asdict(perf)
