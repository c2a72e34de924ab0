"""Why a memory-bound kernel stays below the device's bandwidth, from what its launches show.

A memory-bound call can only be as fast as the bytes it must move at the bandwidth the device
reaches (a device-to-device copy: about 4.3 TB/s on an H200, ``benchmarks/bench_optimize_corpus.py``
measures it). When a candidate stays well below that, three causes can be read off its launches
(:class:`~xeforge_core.verdict.LaunchTraffic`, recorded by the verification worker) without a
profiler, each a class of fix:

* **extra passes**: the launches are given more bytes than the problem must move (a softmax in
  three launches reads its input three times): fuse them, or read each tensor once;
* **too few programs**: the launch that moves the most bytes runs fewer programs than the device
  has SMs (Xe-cores), so whole SMs idle and too few loads are in flight to cover the memory
  latency (Little's law): split the work over more programs (split the reduction, smaller tiles);
* **launch overhead**: the call is timed as launch-bound (a few microseconds a launch).

When none applies, the gap is in the access pattern (strided or uncoalesced loads, too little
work per load): a profiler's memory analysis (``ncu --section MemoryWorkloadAnalysis``) tells
which. Imports only the standard library and :mod:`xeforge_core.verdict`, so the worker can use
it.
"""

from __future__ import annotations

from xeforge_core.verdict import PerformanceResult

#: The bandwidth fraction a memory-bound kernel should reach (issue 24: 80% of the measured copy
#: bandwidth; the verdict applies it to the device profile's bandwidth).
GOAL = 0.80

#: Launches given this much more than the minimum bytes count as extra passes (a quarter more:
#: below it, small side tensors such as a bias or per-row statistics explain the difference).
EXTRA_PASSES = 1.25


def roofline_gap(perf: PerformanceResult, fraction: float | None, *, goal: float = GOAL,
                 bandwidth: str = "the device's bandwidth") -> list[str]:
    """The reasons ``perf``'s candidate reaches only ``fraction`` (0-1) of ``bandwidth`` on a
    memory-bound variant, as sentences; empty when ``fraction`` is unknown or at least ``goal``.

    Reads ``perf.bytes_moved`` (the minimum bytes of one call), ``perf.traffic`` (the launches
    of one call; without it only the launch-overhead cause can be named) and
    ``perf.launch_bound``. Raises nothing."""
    if fraction is None or fraction >= goal:
        return []
    reasons: list[str] = []
    traffic = perf.traffic
    if perf.launch_bound:
        what = f"{traffic.launches} launch(es)" if traffic else "its launches"
        reasons.append(f"launch-bound: at {perf.candidate.median_us:.1f} µs a call, the overhead of {what} "
                       "is a large part of the time (fewer launches, or larger inputs, move it)")
    if traffic is None:
        return reasons or ["the launches were not recorded, so the cause is not known"]
    minimum = perf.bytes_moved or 0.0
    ratio = traffic.traffic_bytes / minimum if minimum > 0 else None
    if ratio is not None and ratio >= EXTRA_PASSES:
        at = min(1.0, fraction * ratio)
        reasons.append(
            f"extra passes: its {traffic.launches} launch(es) are given {ratio:.1f}x the bytes the problem must "
            f"move ({_gb(traffic.traffic_bytes)} for {_gb(minimum)}); for those bytes the time is {at:.0%} of "
            f"{bandwidth}: fusing the launches, or reading each tensor once, is the way up")
    units = traffic.compute_units
    programs = traffic.busiest_programs
    if units and programs is not None and programs < units:
        reasons.append(
            f"too few programs: {traffic.busiest_kernel} (the launch with the most bytes) runs {programs} "
            f"program(s) for {units} SMs/Xe-cores, so {units - programs} idle and too few loads are in flight "
            "to cover the memory latency: split its work (the reduction, or smaller tiles) over more programs")
    if not reasons:
        reasons.append(
            "its launches are given about the bytes the problem must move"
            + (f" and run {programs} programs for {units} SMs/Xe-cores" if units and programs else "")
            + ": the gap is in the access pattern (strided or uncoalesced loads, little work a load); "
            "`ncu --section MemoryWorkloadAnalysis` shows which")
    return reasons


def _gb(nbytes: float) -> str:
    if nbytes >= 1e8:
        return f"{nbytes / 1e9:.2f} GB"
    return f"{nbytes / 1e6:.1f} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:.1f} kB"
