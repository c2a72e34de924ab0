"""The ``timing`` role: baseline vs candidate (and the PyTorch reference, eager) on a GPU.

Method (:func:`measure`, the same code for every device), per performance variant:

1. Build the baseline and candidate models (the candidate takes the baseline's weights when
   keys and shapes match) and one input set (seed 0, normal); each callable gets its own copy.
   PyTorch's float32 products and convolutions run at full float32
   (``truth64.full_float32``), the precision the baseline and candidate roles verified them at:
   PyTorch's default lets cuDNN run float32 convolutions in TF32, which timed eager and a
   version's library convolutions at a precision never verified (KernelBench level 2 p2 on an
   H100, 2026-12-07: its transposed convolution took 5 ms a call in TF32 here and 13.7 ms in
   float32 in a profile of the same version beside it).
2. **Warm up** each callable for ``options.warmup_ms`` (at least 3 calls): compiles, autotunes.
3. **Measure the costs** of each callable: the host time to issue one call (``host_us``:
   Python, the module's forward, Triton's launch path) and the device time of one call with
   the L2 warm (``device_us``, from a back-to-back batch between two events).
4. **Choose the method** from those costs (:func:`choose_method`): one call per sample with the
   L2 flushed before it (``events``, as ``triton.testing.do_bench``), or, when the shortest
   callable runs under ``EVENTS_MIN_US`` or a callable's host overhead is at least
   ``HOST_VISIBLE_FRACTION`` of its device time, many calls per sample with the L2 warm: a
   device graph of the calls replayed between two events (``graph``, as
   ``triton.testing.do_bench_cudagraph``), or, where graphs are unavailable or the capture
   fails or its replay does not reproduce the eager output, back-to-back calls (``back_to_back``).
   What was chosen and why is recorded (``TimingStats.method``, ``calls_per_sample``, ``l2``;
   ``PerformanceResult.method_reason``).
5. **Every sample**: synchronise; record event ``e0``; queue a device-side wait (``hold``:
   ``torch.cuda._sleep``, or more flush writes where there is none) long enough for the host
   to finish queueing the call; write the flush buffer (``max(2 x L2, 256 MiB)``, when
   flushing), so the call still starts right after the flush as in ``do_bench``; record
   ``start``; issue the call(s); record ``end``. The device therefore starts the timed work
   only after all of it is queued, and the window ``start..end`` holds device time only.
   Whether that held is checked on every sample: if the host took longer to queue everything
   (``host_us``, by its clock) than the device took from ``e0`` to ``start``, the start event
   may have fired while the host was still launching: the sample is *late*, is taken again
   (up to ``MAX_RETRIES`` times) and the hold grows (to at most ``HOLD_MAX_US``). Late samples
   are counted (``TimingStats.late``). A call that itself waits for the device (a
   synchronisation or a copy to the host inside its forward) cannot be queued ahead; it is
   detected while planning, timed without a hold, and said so in the method's reason.
6. **Settle** (steady clocks): before the first trial, run interleaved samples untimed in
   blocks of ``SETTLE_BLOCK_MS`` for at least ``settle_ms`` (default ``SETTLE_MS``) and until
   two successive blocks' medians agree (within ``SETTLE_TOLERANCE`` or three standard errors),
   at most ``settle_max_ms`` (``SETTLE_MAX_MS``). An idle H200 sits at 345 MHz and boosts to
   1980 MHz only under load (KINDS.md, 2026-10-28); a fresh worker starts idle.
7. **Trials**, under the per-device timing lock (``xeforge_core.devlock``; taken by the
   caller): trial ``t`` takes one sample of every callable, in the ``t``-th order of a cycle
   balanced for position and carry-over (:func:`trial_orders`: every callable in every
   position, and directly after every callable, equally often), so drift and whatever one
   sample leaves behind for the next hit all of them alike. Their number is set by the time
   budget: the samples of all callables together take about ``options.rep_ms`` (from the
   costs measured while settling), between ``MIN_TRIALS`` and ``MAX_TRIALS`` trials, rounded
   up to whole cycles. When calls are batched, every callable takes the same number of calls
   per sample (:func:`common_calls`), so a fixed cost per sample weighs alike on each.
8. **The timed output checked**: after the trials the candidate's output at the variant is
   compared with the reference's (or the baseline's) at the same inputs, grossly
   (:mod:`xeforge_core.worker.timed_check`); a mismatch makes the host verify the candidate at
   that variant against the float64 truth, so a kernel wrong only at the timed size is a wrong
   answer, not a speedup.
9. **Statistics** (µs per call): median, mean, min and coefficient of variation; speedup =
   baseline median / candidate median, with a 95 % interval from a paired bootstrap of the
   trials (``timestats``); ``verdict.speedup_call`` turns it into faster / slower / no
   measurable difference. TFLOP/s = flop / median; GB/s = bytes / median (bytes: the least
   traffic one call must cause); roofline fraction from ``options.device_profile``; a result
   above the attainable roofline (by more than ``ROOFLINE_SLACK``) is flagged ``suspect``.

Why the earlier per-call method gave a median twice the minimum for 10-30 µs kernels on the
H200, and a 5.2x-7.0x spread for the GEMM pair over fresh verifications: it synchronised before
every sample, wrote the flush buffer, then recorded the start event and made the call. The
synchronisation empties the device's queue, so the only thing keeping the device busy while
the host makes the call is the flush (256 MiB written at ~4 TB/s, about 60-80 µs). Issuing the
call from Python costs the two ``Event`` objects, ``record``, ``no_grad``, the module's forward,
``torch.empty``, Triton's launch path and the harness's launch hook: tens of µs, more on a
busy host. Whenever that took longer than the flush, the start event fired on an idle device
and the gap until the kernel arrived was timed as kernel time: the minimum was the kernel, the
median kernel plus gap (and a 14 µs kernel whose estimate included the gap exceeded the fixed
20 µs graph threshold, so it was timed per call). The gap depends on how busy the host is, so it
moved between verifications, and it hurts the short candidate (~250 µs) more than the long
baseline (~1.9 ms) of the GEMM pair: the speedup's spread. The held queue of step 5 removes
the cause and proves, per sample, that it did; the settle of step 6 and trials sized by time
remove the other run-to-run differences (clocks after idle, 45 trials).

On cpu (Triton's interpreter) nothing is timed: the performance step is ``not_measured`` (the
option ``force_timing`` times there anyway, host-clocked, through the same code; a call then
runs inside its launch, so there is no queue to hold and no sample is late; such numbers say
nothing about a GPU).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from xeforge_core.devlock import DeviceLock, LockTimeout
from xeforge_core.roofline_gap import roofline_gap
from xeforge_core.verdict import (
    SPEEDUP_CONFIDENCE,
    Finding,
    LaunchTraffic,
    PerformanceResult,
    Step,
    StepStatus,
    TimingStats,
    VerdictKind,
)
from xeforge_core.vocab.roofline import attainable_tflops, bound, ridge_point
from xeforge_core.worker.autotune import chosen_configs
from xeforge_core.worker.capture import LaunchRecord
from xeforge_core.worker.context import WorkerContext
from xeforge_core.worker.errors import Failure, WorkerError
from xeforge_core.worker.integrity import HarnessGuard
from xeforge_core.worker.roles import Combo, Harness, _load
from xeforge_core.worker.timed_check import check_timed_outputs, flat_tensors
from xeforge_core.worker.timestats import INTERVAL_METHOD, median_se, speedup_interval, stats_of
from xeforge_core.worker.truth64 import full_float32

__all__ = ["TimingPlan", "Measurement", "choose_method", "common_calls", "measure", "order_for", "run_timing",
           "roofline", "stats_of", "trial_orders"]

_monotonic = time.monotonic  # bound at import, before any module under test runs

#: Inputs of at least this many bytes in all are shared by the timed callables instead of copied.
SHARED_INPUT_BYTES = 256 << 20
_perf = time.perf_counter

#: Shortest device time (µs) timed one call per sample: an event pair resolves about 0.5 µs
#: (CUDA Runtime API, cudaEventElapsedTime), and after an L2 flush the first accesses also pay
#: for writing back the flush's dirty lines (60 MB of L2 at ~4 TB/s is ~15 µs on the H200).
EVENTS_MIN_US = 20.0
#: Host overhead per call, as a fraction of the call's device time, from which calls are timed
#: many per sample (a graph or a batch): at 25 % the launches are a visible part of what a
#: Python caller waits for, and one call per sample mostly waits for the host.
HOST_VISIBLE_FRACTION = 0.25
#: Device time (µs) aimed at per sample when calls are batched; at most this many calls.
BATCH_TARGET_US = 500.0
MAX_CALLS_PER_SAMPLE = 512
#: A batched sample of one callable takes at most about this long (µs) when it shares the
#: shortest callable's number of calls (``common_calls``).
SAMPLE_MAX_US = 8 * BATCH_TARGET_US
#: At most this many callables are timed together (a balanced order cycle has ``n!`` trials).
MAX_BALANCED = 5
MIN_TRIALS = 20
MAX_TRIALS = 500
#: Settling before the trials (ms): at least, at most, block length; blocks agree when their
#: medians differ by at most this fraction (or three standard errors).
SETTLE_MS = 50.0
SETTLE_MAX_MS = 1000.0
SETTLE_BLOCK_MS = 25.0
SETTLE_TOLERANCE = 0.01
#: Hold sizing: the device must wait at least HOLD_MARGIN x the host's queueing time plus
#: HOLD_SLACK_US; a late sample is taken again at most MAX_RETRIES times.
HOLD_MARGIN = 1.25
HOLD_SLACK_US = 10.0
MAX_RETRIES = 3
HOLD_MAX_US = 100_000.0
#: Cycles of the device wait used to calibrate it against the events (about 100 µs at 2 GHz).
SLEEP_PROBE_CYCLES = 200_000
ROOFLINE_SLACK = 1.05

# kept for callers of the earlier module
LAUNCH_BOUND_US = EVENTS_MIN_US

_DTYPE_KEYS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
               "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}


def roofline(flop: float | None, nbytes: float | None, seconds: float, dtype_key: str | None,
             profile: dict[str, Any] | None) -> tuple[float | None, float | None, float | None, str]:
    """(TFLOP/s, GB/s, fraction of the attainable roofline, suspect text) for one call of
    ``seconds``. Attainable = min(peak TFLOP/s of ``dtype_key``, intensity x bandwidth)."""
    tflops = flop / seconds / 1e12 if flop and seconds > 0 else None
    gbps = nbytes / seconds / 1e9 if nbytes and seconds > 0 else None
    if not profile:
        return tflops, gbps, None, ""
    peak = _peak(profile, dtype_key)
    bw = profile.get("bandwidth_gbps") or profile.get("memory_bandwidth_gbps")
    fraction = None
    suspect = ""
    if tflops is not None and (peak or (bw and nbytes)):
        limit = attainable_tflops(flop / nbytes if nbytes else None, peak, bw)
        fraction = tflops / limit if limit > 0 else None
        if fraction is not None and fraction > ROOFLINE_SLACK:
            suspect = (f"{tflops:.1f} TFLOP/s is above the attainable {limit:.1f} TFLOP/s of the device roofline: "
                       "the kernel may skip work, or the flop formula overstates it")
    elif gbps is not None and bw:
        fraction = gbps / float(bw)
        if fraction > ROOFLINE_SLACK:
            suspect = (f"{gbps:.0f} GB/s is above the device bandwidth {float(bw):.0f} GB/s: the kernel may skip "
                       "work, or the bytes estimate overstates it")
    return tflops, gbps, fraction, suspect


# --------------------------------------------------------------------------------------------
# choosing the method


@dataclass
class TimingPlan:
    """How the callables are timed: ``method`` (``events``, ``graph``, ``back_to_back``),
    ``calls`` per sample for each callable, whether the L2 is flushed before each sample, and
    the ``reason`` in words."""

    method: str
    calls: dict[str, int]
    flush: bool
    reason: str

    def without_graphs(self, why: str) -> TimingPlan:
        """The same plan with back-to-back calls instead of a graph, saying why."""
        reason = self.reason.replace("a device graph of the calls replayed", "back-to-back calls")
        return TimingPlan("back_to_back", dict(self.calls), self.flush, f"{reason}; no graph: {why}")


def choose_method(device_us: Mapping[str, float], host_us: Mapping[str, float], *,
                  graphs: bool) -> TimingPlan:
    """The timing method for callables with the measured costs ``device_us`` (µs per call on
    the device, L2 warm) and ``host_us`` (µs to issue one call), by name.

    One call per sample, L2 flushed (``events``), when every callable runs at least
    ``EVENTS_MIN_US`` and issues in less than ``HOST_VISIBLE_FRACTION`` of its device time;
    otherwise many calls per sample with the L2 warm, the same number for every callable
    (:func:`common_calls`: ``BATCH_TARGET_US`` of the shortest one's device time, 1 to
    ``MAX_CALLS_PER_SAMPLE``, fewer where a sample would pass ``SAMPLE_MAX_US``): replayed from a device graph
    when ``graphs`` (the backend has them), else back to back. Raises ``ValueError`` when
    ``device_us`` is empty."""
    names = list(device_us)
    if not names:
        raise ValueError("no callables to time")
    shortest = min(names, key=lambda n: device_us[n])
    fraction = {n: float(host_us.get(n, 0.0)) / max(float(device_us[n]), 1e-3) for n in names}
    worst = max(names, key=lambda n: fraction[n])
    short = device_us[shortest] < EVENTS_MIN_US
    visible = fraction[worst] >= HOST_VISIBLE_FRACTION
    if not short and not visible:
        return TimingPlan("events", {n: 1 for n in names}, True,
                          f"one call per sample, L2 flushed before each (as triton.testing.do_bench): the "
                          f"shortest callable ({shortest}) runs {device_us[shortest]:.1f} µs (>= {EVENTS_MIN_US:g}) "
                          f"and host overhead is at most {fraction[worst]:.0%} of device time ({worst}; "
                          f"< {HOST_VISIBLE_FRACTION:.0%})")
    calls = common_calls({n: device_us[n] for n in names})
    why = []
    if short:
        why.append(f"{shortest} runs {device_us[shortest]:.1f} µs, under the {EVENTS_MIN_US:g} µs one event pair "
                   "after an L2 flush resolves")
    if visible:
        why.append(f"issuing one call of {worst} takes {host_us.get(worst, 0.0):.1f} µs on the host, "
                   f"{fraction[worst]:.0%} of its {device_us[worst]:.1f} µs on the device (>= {HOST_VISIBLE_FRACTION:.0%})")
    how = ("a device graph of the calls replayed between two events (as triton.testing.do_bench_cudagraph)"
           if graphs else "back-to-back calls between two events")
    per = ", ".join(f"{n} {c}" for n, c in calls.items())
    return TimingPlan("graph" if graphs else "back_to_back", calls, False,
                      f"{how}, L2 warm, calls per sample: {per}: " + "; ".join(why))


# --------------------------------------------------------------------------------------------
# taking samples


@dataclass
class Sample:
    """One timed sample: µs per call, whether it was late, host µs spent queueing it, and the
    device µs it occupied (lead-in + window)."""

    us: float
    late: bool
    host_us: float
    cost_us: float


class _Timer:
    """Takes samples on one device (see the module docstring, step 5)."""

    def __init__(self, ops: Any, l2_bytes: int | None) -> None:
        self.ops = ops
        self.flush_buf = ops.flush_buffer(l2_bytes)
        self.e0, self.start, self.end = ops.event(), ops.event(), ops.event()
        self.hold_us: dict[str, float] = {}
        self.waits: set[str] = set()
        self.cycles_per_us: float | None = None
        self.flush_us = 0.0

    @property
    def flush_bytes(self) -> int:
        return int(self.flush_buf.numel() * self.flush_buf.element_size()) if self.flush_buf is not None else 0

    def flush(self) -> None:
        """Evict the L2 cache by writing the flush buffer (no-op on cpu)."""
        if self.flush_buf is not None:
            self.flush_buf.zero_()

    def calibrate(self) -> None:
        """Measure one flush (µs) and the device wait's cycles per µs (asynchronous devices)."""
        ops = self.ops
        if not ops.asynchronous:
            return
        ops.synchronize()
        ops.record(self.e0)
        self.flush()
        ops.record(self.start)
        if ops.sleep_cycles(SLEEP_PROBE_CYCLES):
            ops.record(self.end)
            ops.synchronize()
            slept = ops.elapsed_ms(self.start, self.end) * 1e3
            self.cycles_per_us = SLEEP_PROBE_CYCLES / slept if slept > 0 else None
        ops.synchronize()
        self.flush_us = max(0.0, ops.elapsed_ms(self.e0, self.start) * 1e3)

    def hold(self, us: float) -> None:
        """Queue about ``us`` µs of device-side waiting: the sleep kernel where there is one,
        else more writes of the flush buffer; nothing on a synchronous device."""
        if us <= 0 or not self.ops.asynchronous:
            return
        if self.cycles_per_us and self.ops.sleep_cycles(int(us * self.cycles_per_us)):
            return
        if self.flush_buf is not None and self.flush_us > 0:
            for _ in range(min(256, math.ceil(us / self.flush_us))):
                self.flush()

    def sample(self, name: str, fn: Callable[[], Any], repeats: int, per: int, flush: bool) -> Sample:
        """Time ``repeats`` calls of ``fn`` (a graph replay counts ``per`` calls) as one sample:
        ``e0``, hold, flush, ``start``, the calls, ``end`` (module docstring, step 5)."""
        ops = self.ops
        ops.synchronize()
        t0 = _perf()
        ops.record(self.e0)
        if name not in self.waits:
            self.hold(self.hold_us.get(name, 0.0))
        if flush:
            self.flush()
        ops.record(self.start)
        for _ in range(repeats):
            fn()
        ops.record(self.end)
        host_us = (_perf() - t0) * 1e6
        ops.synchronize()
        window_us = ops.elapsed_ms(self.start, self.end) * 1e3
        late = False
        lead_us = 0.0
        if ops.asynchronous:
            lead_us = ops.elapsed_ms(self.e0, self.start) * 1e3
            if name not in self.waits:
                late = host_us >= lead_us
                need = host_us * HOLD_MARGIN + HOLD_SLACK_US
                if lead_us < need:  # grow the hold (never shrunk within one measurement)
                    self.hold_us[name] = min(HOLD_MAX_US, self.hold_us.get(name, 0.0) + 1.5 * (need - lead_us) + 5.0)
        return Sample(window_us / max(per, 1), late, host_us, lead_us + window_us)

    def clean_sample(self, name: str, fn: Callable[[], Any], repeats: int, per: int, flush: bool
                     ) -> tuple[Sample, int]:
        """A sample that is not late, taken again up to ``MAX_RETRIES`` times (the last one is
        kept if all were late); returns it and the number of late samples taken before it."""
        s = self.sample(name, fn, repeats, per, flush)
        late = 0
        while s.late and late < MAX_RETRIES:
            late += 1
            s = self.sample(name, fn, repeats, per, flush)
        return s, late

    def waits_for_device(self, fn: Callable[[], Any]) -> bool:
        """Whether issuing ``fn`` waits for the device (a synchronisation, ``.item()``, a copy
        to the host inside the call): issued behind a device wait of about 2 ms, such a call
        returns only once most of that wait has passed. Such a call cannot be queued ahead of
        its timing window, so its samples include its host time (and are never late)."""
        ops = self.ops
        if not ops.asynchronous:
            return False
        ops.synchronize()
        ops.record(self.e0)
        self.hold(2000.0)
        ops.record(self.start)
        t0 = _perf()
        fn()
        host_us = (_perf() - t0) * 1e6
        ops.synchronize()
        held_us = ops.elapsed_ms(self.e0, self.start) * 1e3
        return held_us >= 200.0 and host_us >= 0.8 * held_us

    def warmup(self, fn: Callable[[], Any], budget_ms: float) -> None:
        """Call ``fn`` for ``budget_ms`` milliseconds (3 to 1000 calls)."""
        deadline = _monotonic() + budget_ms / 1e3
        calls = 0
        while calls < 3 or _monotonic() < deadline:
            fn()
            calls += 1
            if calls >= 1000:
                break
        self.ops.synchronize()

    def host_cost(self, fn: Callable[[], Any], calls: int = 5) -> float:
        """Median host µs to issue one call of ``fn`` (the whole call on a synchronous device)."""
        self.ops.synchronize()
        times = []
        for _ in range(calls):
            t0 = _perf()
            fn()
            times.append((_perf() - t0) * 1e6)
        self.ops.synchronize()
        return statistics.median(times)

    def graphed(self, fn: Callable[[], Any], calls: int) -> tuple[Callable[[], Any] | None, str]:
        """``(replay, "")``: a callable replaying ``calls`` calls of ``fn`` captured in a device
        graph, checked to reproduce the eager call's output; or ``(None, why not)``."""
        ops = self.ops
        graph = ops.graph() if ops.graphs_for_timing else None
        if graph is None:
            return None, f"{ops.kind} has no device graphs here"
        try:
            expected = flat_tensors(fn())
            ops.synchronize()
            expected = [t.clone() for t in expected]
            stream = ops.stream()
            stream.wait_stream(ops.current_stream())
            with ops.use_stream(stream):
                fn()
            ops.current_stream().wait_stream(stream)
            out: Any = None
            with ops.graph_capture(graph):
                for _ in range(calls):
                    out = fn()
            graph.replay()
            ops.synchronize()
        except Exception as exc:  # not capturable (a host sync, a CPU op, ...): batch instead
            with contextlib.suppress(Exception):
                ops.synchronize()
            first = str(exc).splitlines()[0][:160] if str(exc) else ""
            return None, f"graph capture failed ({type(exc).__name__}: {first})"
        if not _same(flat_tensors(out), expected):
            return None, "replaying the captured graph did not reproduce the eager call's output"
        return graph.replay, ""


def _same(got: list[torch.Tensor], expected: list[torch.Tensor]) -> bool:
    """Whether a replay's outputs match the eager ones (loosely: atomics may reorder sums)."""
    if len(got) != len(expected):
        return False
    for a, b in zip(got, expected):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.numel() == 0:
            continue
        if a.dtype.is_floating_point or a.dtype.is_complex:
            x, y = a.double(), b.double()
            scale = float(y[torch.isfinite(y)].abs().max()) if bool(torch.isfinite(y).any()) else 1.0
            if not torch.allclose(x, y, rtol=1e-2, atol=1e-3 * max(scale, 1e-30), equal_nan=True):
                return False
        elif not torch.equal(a, b):
            return False
    return True


# --------------------------------------------------------------------------------------------
# the procedure


@dataclass
class Measurement:
    """What :func:`measure` found: per callable the samples (µs per call, trial order), the
    measured costs, the late samples; the plan, the settling and the number of trials."""

    samples: dict[str, list[float]]
    plan: TimingPlan
    host_us: dict[str, float]
    device_us: dict[str, float]
    late: dict[str, int] = field(default_factory=dict)
    settle_ms: float = 0.0
    steady: bool | None = None
    trials: int = 0
    #: the candidate's output at this size against the truth's (``worker.timed_check``)
    output_check: dict[str, Any] = field(default_factory=dict)
    flush_bytes: int = 0
    flush_us: float = 0.0

    def stats(self, name: str) -> TimingStats:
        """Timing statistics of callable ``name``, labelled with how it was sampled."""
        s = stats_of(self.samples[name], self.plan.method)
        s.calls_per_sample = int(self.plan.calls.get(name, 1))
        s.host_us = self.host_us.get(name)
        s.late = int(self.late.get(name, 0))
        s.l2 = "flushed" if self.plan.flush else "warm"
        return s

    def speedup(self, base: str = "baseline", cand: str = "candidate",
                confidence: float = SPEEDUP_CONFIDENCE) -> tuple[float, float, float, float, float]:
        """``(speedup, low, high, raw_low, raw_high)`` of ``base`` over ``cand``: the ratio of
        medians, its interval (``timestats.speedup_interval``) and the bootstrap's own bounds."""
        b, c = self.samples[base], self.samples[cand]
        point = statistics.median(b) / statistics.median(c) if statistics.median(c) > 0 else math.inf
        if not math.isfinite(point):
            return point, point, point, point, point
        low, high, raw_low, raw_high = speedup_interval(b, c, confidence=confidence)
        return point, low, high, raw_low, raw_high


def trial_orders(names: list[str]) -> list[list[str]]:
    """One cycle of sample orders for ``names``, one order per trial, balanced for position and
    for carry-over: over the cycle's samples taken one after another (a trial's first sample
    follows the previous trial's last, the last trial's last is followed by the first's first)
    every callable is in every position equally often, and every callable directly follows
    every callable (itself included) equally often.

    Why: a sample can leave state behind for the next one (the L2 holding its buffers when it
    is not flushed, the clocks after a long or a short sample, the allocator). The rotation
    used before (``ABC``, ``BCA``, ``CAB``) kept positions balanced but not predecessors: with
    three callables the candidate followed the baseline in two trials of three and the baseline
    followed the reference in two of three, so whatever the reference left behind fell on the
    baseline. With two callables the rotation (``AB``, ``BA``) already balances both.

    The cycle is every permutation of ``names`` (each ordered pair of distinct callables is then
    adjacent inside a trial equally often), chained so that each trial starts with the callable
    the previous one ended with (the joins are then self-follows, equally many per callable): an
    Eulerian circuit of the graph whose edges are the permutations, from their first callable to
    their last. Its length is ``len(names)!`` for two or more; ``[names]`` for one. Raises
    ``ValueError`` for no names, duplicates or more than ``MAX_BALANCED`` (``n!`` trials)."""
    if not names:
        raise ValueError("no callables to order")
    if len(set(names)) != len(names):
        raise ValueError(f"callable names repeat: {names}")
    if len(names) > MAX_BALANCED:
        raise ValueError(f"{len(names)} callables: a balanced cycle needs {len(names)}! trials; at most "
                         f"{MAX_BALANCED} callables are timed together")
    if len(names) == 1:
        return [list(names)]
    # edges: first -> last, each permutation once; Hierholzer's algorithm, deterministic order
    out: dict[str, list[tuple[str, ...]]] = {n: [] for n in names}
    for perm in itertools.permutations(names):
        out[perm[0]].append(perm)
    for n in names:
        out[n].reverse()  # popped from the end: lexicographic order first
    stack: list[tuple[str, tuple[str, ...] | None]] = [(names[0], None)]
    circuit: list[tuple[str, ...]] = []
    while stack:
        node, via = stack[-1]
        if out[node]:
            perm = out[node].pop()
            stack.append((perm[-1], perm))
        else:
            stack.pop()
            if via is not None:
                circuit.append(via)
    circuit.reverse()
    return [list(p) for p in circuit]


def order_for(cycle: list[list[str]], t: int) -> list[str]:
    """The order of trial ``t`` (0-based) in ``cycle`` (:func:`trial_orders`)."""
    return cycle[t % len(cycle)]


def common_calls(device_us: Mapping[str, float]) -> dict[str, int]:
    """Calls per sample when calls are batched: the same number for every callable, enough for
    ``BATCH_TARGET_US`` of the shortest one's device time (1 to ``MAX_CALLS_PER_SAMPLE``), so a
    fixed cost per sample (the graph launch, the first call after another callable's sample)
    is divided by the same number on every side and cancels in the ratio instead of biasing
    it; a callable whose sample would then exceed ``SAMPLE_MAX_US`` takes fewer calls."""
    shortest = min(float(v) for v in device_us.values())
    n = int(min(MAX_CALLS_PER_SAMPLE, max(1, math.ceil(BATCH_TARGET_US / max(shortest, 0.05)))))
    return {k: int(max(1, min(n, SAMPLE_MAX_US // max(float(v), 0.05)))) for k, v in device_us.items()}


def measure(ops: Any, callables: Mapping[str, Callable[[], Any]], options: Mapping[str, Any] | None = None,
            *, on_note: Callable[[str], None] | None = None) -> Measurement:
    """Time ``callables`` (name -> zero-argument call) on the device of ``ops`` (a
    ``DeviceOps``), interleaved, by the method of the module docstring; hold the device lock
    around it. Options (all optional): ``warmup_ms`` (25, per callable), ``rep_ms`` (100: time
    of the timed samples, all callables together), ``l2_bytes`` (the device's L2 size in bytes), ``settle_ms`` /
    ``settle_max_ms`` (``SETTLE_MS`` / ``SETTLE_MAX_MS`` on a GPU; ``warmup_ms`` on cpu).
    Exceptions from the callables propagate. Raises ``ValueError`` with no callables."""
    if not callables:
        raise ValueError("no callables to time")
    opts = dict(options or {})
    names = list(callables)
    cycle = trial_orders(names)
    timer = _Timer(ops, opts.get("l2_bytes"))
    warmup_ms = float(opts.get("warmup_ms") or 25.0)
    for fn in callables.values():
        timer.warmup(fn, warmup_ms)
    timer.calibrate()

    # costs: host µs per call; device µs per call, L2 warm (a batch between two events)
    host = {n: timer.host_cost(callables[n]) for n in names}
    device: dict[str, float] = {}
    for n in names:
        if timer.waits_for_device(callables[n]):
            timer.waits.add(n)
        timer.hold_us[n] = HOLD_MARGIN * host[n] + 2 * HOLD_SLACK_US
        cold = statistics.median(timer.clean_sample(n, callables[n], 1, 1, True)[0].us for _ in range(3))
        k = int(min(64, max(1, math.ceil(BATCH_TARGET_US / max(cold, 0.5)))))
        timer.hold_us[n] = max(timer.hold_us[n], HOLD_MARGIN * host[n] * k + 2 * HOLD_SLACK_US)
        device[n] = timer.clean_sample(n, callables[n], k, k, False)[0].us
    plan = choose_method(device, host, graphs=ops.graphs_for_timing)
    if timer.waits:
        plan.reason += (f"; {', '.join(sorted(timer.waits))} waits for the device inside its call (a synchronisation "
                        "or a copy to the host), so its samples include host time")

    timed: dict[str, tuple[Callable[[], Any], int, int]] = {}
    if plan.method == "graph":
        replays: dict[str, Callable[[], Any]] = {}
        for n in names:
            replay, why = timer.graphed(callables[n], plan.calls[n])
            if replay is None:
                plan = plan.without_graphs(f"{n}: {why}")
                break
            replays[n] = replay
        if plan.method == "graph":
            timed = {n: (replays[n], 1, plan.calls[n]) for n in names}
            for n in names:  # queueing a replay costs little; the samples adapt the hold
                timer.hold_us[n] = HOLD_MARGIN * timer.host_cost(replays[n], 2) + 2 * HOLD_SLACK_US
    if plan.method == "back_to_back":
        timed = {n: (callables[n], plan.calls[n], plan.calls[n]) for n in names}
        for n in names:
            timer.hold_us[n] = max(timer.hold_us[n], HOLD_MARGIN * host[n] * plan.calls[n] + 2 * HOLD_SLACK_US)
    if plan.method == "events":
        timed = {n: (callables[n], 1, 1) for n in names}

    def one(n: str) -> Sample:
        fn, repeats, per = timed[n]
        return timer.sample(n, fn, repeats, per, plan.flush)

    # settle: untimed interleaved blocks until two successive blocks agree
    default_settle = (SETTLE_MS, SETTLE_MAX_MS) if ops.asynchronous else (warmup_ms, warmup_ms)
    settle_min = float(opts.get("settle_ms") if opts.get("settle_ms") is not None else default_settle[0])
    settle_max = max(settle_min, float(opts.get("settle_max_ms") if opts.get("settle_max_ms") is not None
                                       else default_settle[1]))
    cost: dict[str, list[float]] = {n: [] for n in names}
    previous: dict[str, list[float]] | None = None
    steady = False
    started = _monotonic()
    rounds = blocks = 0
    while True:
        block: dict[str, list[float]] = {n: [] for n in names}
        block_start = _monotonic()
        while len(block[names[0]]) < 3 or (_monotonic() - block_start) * 1e3 < SETTLE_BLOCK_MS:
            for n in order_for(cycle, rounds):
                s = one(n)
                block[n].append(s.us)
                cost[n].append(s.cost_us if ops.asynchronous else s.host_us)
            rounds += 1
        if previous is not None:
            steady = all(abs(statistics.median(block[n]) - statistics.median(previous[n]))
                         <= max(SETTLE_TOLERANCE * statistics.median(previous[n]),
                                3.0 * math.hypot(median_se(block[n]), median_se(previous[n])))
                         for n in names)
        previous = block
        elapsed_ms = (_monotonic() - started) * 1e3
        blocks += 1
        if (steady and elapsed_ms >= settle_min) or (elapsed_ms >= settle_max and (blocks >= 2 or not ops.asynchronous)):
            break
    settle_ms = (_monotonic() - started) * 1e3
    steady_state: bool | None = steady if ops.asynchronous else None  # no clocks to settle on cpu

    rep_us = float(opts.get("rep_ms") or 100.0) * 1e3
    per_trial = sum(statistics.median(cost[n][-len(previous[n]):]) for n in names)  # type: ignore[index]
    trials = int(min(MAX_TRIALS, max(MIN_TRIALS, rep_us / max(per_trial, 1e-3))))
    trials = math.ceil(trials / len(cycle)) * len(cycle)  # whole cycles: every order equally often
    samples: dict[str, list[float]] = {n: [] for n in names}
    late = {n: 0 for n in names}
    for t in range(trials):
        for n in order_for(cycle, t):
            fn, repeats, per = timed[n]
            s, again = timer.clean_sample(n, fn, repeats, per, plan.flush)
            late[n] += again
            samples[n].append(s.us)
    if on_note is not None:
        on_note(f"{plan.method}: {trials} trials after {settle_ms:.0f} ms of settling"
                + ("" if steady else " (not steady)"))
    return Measurement(samples=samples, plan=plan, host_us=host, device_us=device, late=late,
                       settle_ms=settle_ms, steady=steady_state, trials=trials, flush_bytes=timer.flush_bytes,
                       flush_us=timer.flush_us)


# --------------------------------------------------------------------------------------------
# the role


def _dtype_key(ctx: WorkerContext, variant: dict[str, Any]) -> str | None:
    name = variant.get("dtype")
    if not name:
        spec = ctx.job.get("spec") or {}
        inputs = list((spec.get("inputs") or {}).values())
        name = inputs[0].get("dtype") if inputs else None
    if not name:
        return None
    return _DTYPE_KEYS.get(str(name).replace("torch.", ""))


def run_timing(ctx: WorkerContext) -> None:
    """The timing role (see the module docstring)."""
    if ctx.ops.interpreter and not ctx.options.get("force_timing"):
        def not_measured(step: Step) -> None:
            step.status = StepStatus.NOT_MEASURED
            step.summary = "not measured: interpreter (cpu runs kernels in Triton's interpreter)"

        ctx.run_step("performance", not_measured)
        return

    holder: dict[str, Any] = {}
    guard = HarnessGuard()  # before the modules' code runs
    full_float32()  # as verified (module docstring, step 1); a module that turns TF32 on at import still can

    def compile_step(step: Step) -> None:
        holder["base"] = Harness(ctx, _load(ctx, ctx.job.get("baseline"), "baseline"))
        holder["cand"] = Harness(ctx, _load(ctx, ctx.job.get("module"), "candidate"))
        if ctx.job.get("reference"):
            try:
                holder["ref"] = Harness(ctx, _load(ctx, ctx.job.get("reference"), "reference"),
                                        init_fallback=holder["base"].loaded)
            except WorkerError as err:
                ctx.verdict.warnings.append(f"the reference did not load, so no eager time: {err.failure.reason}")
        step.summary = "baseline and candidate imported"

    ctx.run_step("compile", compile_step)
    if ctx.failed:
        ctx.skip_missing(("compile", "performance"))
        return

    def performance(step: Step) -> None:
        patched = ctx.timer_guard.check() + guard.check()
        if patched:
            ctx.verdict.findings += patched
            ctx.fail(step, Failure(VerdictKind.CHEATING, f"integrity rule {patched[0].rule} broken: "
                                   f"{patched[0].message}"))
            return
        variants = list(ctx.job.get("performance_variants") or []) or list(
            ctx.job.get("correctness_variants") or [])[:1] or [{"name": "module", "params": [], "dims": {}}]
        results: list[PerformanceResult] = []
        evidence: dict[str, Any] = {"lock": ctx.options.get("lock_key") or ctx.ops.key, "variants": {}}
        for variant in variants:
            result, measurement = _time_variant(ctx, holder, variant)
            results.append(result)
            evidence["l2_flush_bytes"] = measurement.flush_bytes
            evidence["variants"][result.variant] = {
                "method": measurement.plan.method, "trials": measurement.trials,
                "settle_ms": round(measurement.settle_ms, 1), "steady": measurement.steady,
                "host_us": {k: round(v, 2) for k, v in measurement.host_us.items()},
                "device_us": {k: round(v, 3) for k, v in measurement.device_us.items()},
                "late": dict(measurement.late), "flush_us": round(measurement.flush_us, 1),
                "output_check": measurement.output_check}
            patched = ctx.timer_guard.check() + guard.check()  # patched while being timed
            if patched:
                ctx.verdict.findings += patched
                ctx.fail(step, Failure(VerdictKind.CHEATING, f"integrity rule {patched[0].rule} broken while "
                                       f"timing: {patched[0].message}; the times are discarded"))
                return
        ctx.verdict.performance = results
        parts = [f"{p.variant}: {p.call.text} ({p.baseline.median_us:.1f} -> {p.candidate.median_us:.1f} µs, "
                 f"{_method_label(p.candidate)})" for p in results]
        step.summary = "; ".join(parts)
        step.evidence = evidence
        # the config each autotuned kernel chose on this device (recorded, not re-derived)
        chosen = {"baseline": chosen_configs(ctx.registry, holder["base"].loaded.module),
                  "candidate": chosen_configs(ctx.registry, holder["cand"].loaded.module)}
        if chosen["baseline"] or chosen["candidate"]:
            step.evidence["autotune_chosen"] = chosen
        for p in results:
            if p.suspect:
                ctx.verdict.warnings.append(f"variant {p.variant}: {p.suspect}")
            late = {name: s.late for name, s in (("baseline", p.baseline), ("candidate", p.candidate)) if s.late}
            if late and sum(late.values()) > 0.1 * p.candidate.trials:
                ctx.verdict.warnings.append(
                    f"variant {p.variant}: {sum(late.values())} samples were taken again because the host was still "
                    f"issuing the call when timing started ({late}); the host may be loaded")
            if p.steady is False:
                ctx.verdict.warnings.append(f"variant {p.variant}: the device's times were still moving after "
                                            f"{p.settle_ms:.0f} ms of warm-up (clocks or temperature not steady)")
            gaps = [] if ctx.ops.interpreter else roofline_gap(
                p, p.roofline_fraction if p.bound == "memory" else None, bandwidth="the device profile's bandwidth")
            if gaps:
                ctx.verdict.findings.append(Finding(
                    "below_roofline", f"variant {p.variant}: memory-bound at {p.roofline_fraction:.0%} of the device "
                    f"profile's bandwidth: " + "; ".join(gaps), severity="info"))
        threads = ctx.threads.started
        if threads:
            ctx.verdict.findings.append(Finding("background_thread", f"threads started while timing: {threads}"))

    ctx.run_step("performance", performance)
    ctx.kernels_to_verdict()


def _method_label(stats: TimingStats) -> str:
    if stats.method == "events":
        return "events, L2 flushed"
    if stats.method == "graph":
        return f"graph of {stats.calls_per_sample} calls"
    return f"{stats.calls_per_sample} back-to-back calls"


def _minimum_bytes(args: list[Any], model: torch.nn.Module, output: Any) -> float:
    """Bytes one forward call must move at least: the input tensors, the module's parameters and
    buffers (read), and the output tensors (written), each storage counted once a side. An
    output in the storage of an input (a kernel that writes in place) counts on both sides: it
    is read and written, as an out-of-place call's input and output are. (An output that is only
    a view of an input, written by nothing, counts so too: a forward the verifier times launches
    kernels that write what it returns.)"""
    total = 0

    def side(tensors: list[Any]) -> None:
        nonlocal total
        seen: set[tuple[int, int]] = set()

        def add(t: Any) -> None:
            nonlocal total
            if isinstance(t, torch.Tensor):
                key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
                if key not in seen:
                    seen.add(key)
                    total += t.numel() * t.element_size()
            elif isinstance(t, (list, tuple)):
                for item in t:
                    add(item)

        add(tensors)

    side(list(args) + list(model.parameters()) + list(model.buffers()))
    side([output])
    return float(total)


def performance_result(measurement: Measurement, variant: str, *, flop: float | None = None,
                       nbytes: float | None = None, dtype_key: str | None = None,
                       profile: dict[str, Any] | None = None) -> PerformanceResult:
    """The ``PerformanceResult`` of one variant from its measurement (callables ``baseline``,
    ``candidate`` and optionally ``reference``); ``flop`` / ``nbytes`` per call for TFLOP/s,
    GB/s and the roofline (``profile``: ``peak_tflops`` by dtype, ``bandwidth_gbps``)."""
    stats = {name: measurement.stats(name) for name in measurement.samples}
    speedup, low, high, _, _ = measurement.speedup()
    tflops, gbps, fraction, suspect = roofline(flop, nbytes, stats["candidate"].median_us * 1e-6, dtype_key, profile)
    return PerformanceResult(
        variant=variant, baseline=stats["baseline"], candidate=stats["candidate"], speedup=speedup,
        reference=stats.get("reference"), flop=flop, bytes_moved=nbytes, tflops=tflops, gbps=gbps,
        roofline_fraction=fraction, launch_bound=measurement.plan.method != "events", suspect=suspect,
        speedup_low=low if math.isfinite(low) else None, speedup_high=high if math.isfinite(high) else None,
        confidence=SPEEDUP_CONFIDENCE, interval_method=INTERVAL_METHOD, method_reason=measurement.plan.reason,
        settle_ms=round(measurement.settle_ms, 1), steady=measurement.steady,
        bound=_bound(flop, nbytes, dtype_key, profile))


def _peak(profile: dict[str, Any], dtype_key: str | None) -> float | None:
    """The profile's peak TFLOP/s for ``dtype_key`` (float32 falls back to TF32's where the
    profile gives no plain float32 peak)."""
    peaks = profile.get("peak_tflops") or {}
    peak = peaks.get(dtype_key) if dtype_key else None
    if peak is None and dtype_key == "fp32":
        peak = peaks.get("tf32")
    return peak


def _bound(flop: float | None, nbytes: float | None, dtype_key: str | None, profile: dict[str, Any] | None) -> str:
    """``memory`` or ``compute`` by the roofline of ``profile`` at ``flop / nbytes`` (``memory``
    for a byte count without a FLOP count, as :func:`roofline` reads it), else ``""``."""
    if not profile or not nbytes:
        return ""
    if not flop:
        return "memory"
    peak = _peak(profile, dtype_key)
    side = bound(flop / nbytes, ridge_point(peak, profile.get("bandwidth_gbps") or profile.get("memory_bandwidth_gbps")))
    return "" if side == "unknown" else side


def _time_variant(ctx: WorkerContext, holder: dict[str, Any], variant: dict[str, Any]
                  ) -> tuple[PerformanceResult, Measurement]:
    combo = Combo(variant, 0, "normal")
    base: Harness = holder["base"]
    cand: Harness = holder["cand"]
    bmodel = base.model_for(combo, fresh=True)
    state = base.states[(combo.vname, combo.seed)]
    cmodel = cand.model_for(combo, baseline_state=state, fresh=True)
    args = base.inputs_for(combo)
    callables: dict[str, Any] = {}

    def bind(harness: Harness, model: torch.nn.Module, own_args: list[Any]) -> Any:
        def call() -> Any:
            with torch.no_grad():
                return model(*own_args)

        # first call through the harness, so failures are classified with the module's lines
        harness.run(model, own_args, during=f"timing variant {combo.vname}")
        return call

    # Each callable gets its own copy of the inputs, except for large problems: there they share
    # one (the candidate was checked not to modify its inputs), so device memory stays near the
    # problem's own footprint (SHARED_INPUT_BYTES).
    total = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))

    def copy_of(values: list[Any]) -> list[Any]:
        if total >= SHARED_INPUT_BYTES:
            return values
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in values]

    # the timed-size check's inputs, before any call can modify them in place: a copy kept where
    # the problem is small (a device-to-device clone per check), else drawn again
    pristine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args] if total < SHARED_INPUT_BYTES else None
    callables["baseline"] = bind(base, bmodel, args)
    callables["candidate"] = bind(cand, cmodel, copy_of(args))
    if "ref" in holder:
        try:
            rmodel = holder["ref"].model_for(combo, baseline_state=state, fresh=True)
            callables["reference"] = bind(holder["ref"], rmodel, copy_of(args))
        except WorkerError as err:
            ctx.verdict.warnings.append(f"the reference failed, so no eager time: {err.failure.reason}")

    lock_dir = ctx.options.get("lock_dir") or str(ctx.job_dir / "locks")
    lock = DeviceLock(lock_dir, str(ctx.options.get("lock_key") or ctx.ops.key),
                      on_queued=lambda msg: None, progress_path=ctx.progress.path)
    try:
        lock.acquire()
    except LockTimeout as exc:
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR, f"could not take the timing lock: {exc}")) from exc
    ctx.recorder.active = False  # the launch hook's bookkeeping is not the kernel's cost
    try:
        measurement = measure(ctx.ops, callables, ctx.options,
                              on_note=lambda text: ctx.progress.emit("note", f"timing {combo.vname}: {text}"))
    finally:
        ctx.recorder.active = True
        lock.release()
    flop = variant.get("flop")
    mark = ctx.recorder.mark()
    output = callables["candidate"]()
    traffic = launch_traffic(ctx.recorder.since(mark), ctx.ops.program_units())
    models = {"baseline": bmodel, "candidate": cmodel, **({"reference": rmodel} if "reference" in callables else {})}

    def fresh_call(name: str) -> Any:
        fresh = ([a.clone() if isinstance(a, torch.Tensor) else a for a in pristine] if pristine is not None
                 else base.inputs_for(combo))
        with torch.no_grad():
            return models[name](*fresh)

    measurement.output_check = check_timed_outputs(fresh_call, list(models))
    nbytes = max(float(variant.get("bytes") or 0), _minimum_bytes(args, bmodel, output)) or None
    result = performance_result(measurement, combo.vname, flop=float(flop) if flop else None,
                                nbytes=float(nbytes) if nbytes else None, dtype_key=_dtype_key(ctx, variant),
                                profile=ctx.options.get("device_profile"))
    result.traffic = traffic
    return result, measurement


def launch_traffic(launches: list[LaunchRecord], units: int | None) -> LaunchTraffic | None:
    """The :class:`LaunchTraffic` of one call's ``launches`` (the hook's records; ``None`` when
    the call launched nothing), with ``units`` the device's SM or Xe-core count."""
    if not launches:
        return None
    busiest = max(launches, key=lambda rec: rec.tensor_bytes)
    programs = math.prod(busiest.grid) if busiest.grid is not None else None
    return LaunchTraffic(launches=len(launches), traffic_bytes=float(sum(rec.tensor_bytes for rec in launches)),
                         busiest_kernel=busiest.kernel, busiest_programs=programs,
                         busiest_bytes=float(busiest.tensor_bytes), compute_units=units)
