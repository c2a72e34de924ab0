"""The ``timing`` role: baseline vs candidate (and the PyTorch reference, eager) on a GPU.

Method, per performance variant:

1. Build the baseline and candidate models (the candidate takes the baseline's weights when
   keys and shapes match) and one input set (seed 0, normal); each callable gets its own copy.
2. Warm up each callable for ``options.warmup_ms`` (at least 3 calls): compiles, autotunes.
3. Estimate one call's time with device events over a few calls. When the slower of baseline
   and candidate takes under ``LAUNCH_BOUND_US`` (20 µs), per-call synchronisation would
   dominate: calls are then timed as a captured device graph (CUDA graphs) replayed between two
   events, or, where graphs are unavailable or fail, as a batch of back-to-back launches
   between two events; the time per call is the batch time divided by its size, and the result
   is labelled ``launch_bound``.
4. Under the per-device timing lock (``xeforge_core.devlock``; options ``lock_dir`` /
   ``lock_key``), run the trials interleaved: trial ``t`` times every callable once, in an order
   rotated by ``t``, so drift (clocks, temperature, other load) hits all of them alike. Before
   every timed call the device is synchronised, then a buffer of ``max(2 x L2, 256 MiB)``
   (``options.l2_bytes``) is written to evict the L2 cache; the call is bracketed by device
   events (the flush covers the host's launch of the call, as in ``triton.testing.do_bench``).
   The number of trials is sized so the timed calls take about ``options.rep_ms`` in all
   (between ``MIN_TRIALS`` and ``MAX_TRIALS``).
5. Statistics (µs): median, mean, min and coefficient of variation; speedup = baseline median /
   candidate median; TFLOP/s = flop / median; GB/s = bytes / median, where bytes is the least
   traffic one call must cause: its input tensors, the module's parameters and buffers and its
   outputs, each counted once (never less than the spec's input bytes); roofline fraction =
   achieved TFLOP/s / min(peak TFLOP/s of the dtype, arithmetic intensity x bandwidth) from
   ``options.device_profile`` (``peak_tflops`` by dtype in TFLOP/s, ``bandwidth_gbps`` in GB/s).
   A result above the attainable roofline (by more than ``ROOFLINE_SLACK``) is flagged
   ``suspect``: the kernel skipped work, or the flop/bytes formula overstates it.

On cpu (Triton's interpreter) nothing is timed: the performance step is ``not_measured`` (the
option ``force_timing`` times there anyway, host-clocked, to exercise this harness; such numbers
say nothing about a GPU).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

from xeforge_core.devlock import DeviceLock, LockTimeout
from xeforge_core.verdict import Finding, PerformanceResult, Step, StepStatus, TimingStats, VerdictKind
from xeforge_core.worker.autotune import chosen_configs
from xeforge_core.worker.context import WorkerContext
from xeforge_core.worker.errors import Failure, WorkerError
from xeforge_core.worker.integrity import HarnessGuard
from xeforge_core.worker.roles import Combo, Harness, _load

_monotonic = time.monotonic  # bound at import, before any module under test runs

LAUNCH_BOUND_US = 20.0
MIN_TRIALS = 10
MAX_TRIALS = 500
BATCH_TARGET_US = 500.0
ROOFLINE_SLACK = 1.05

_DTYPE_KEYS = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
               "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}


def stats_of(samples_us: list[float], method: str) -> TimingStats:
    """Median, mean, min (µs) and coefficient of variation of ``samples_us``."""
    mean = statistics.fmean(samples_us)
    cv = statistics.pstdev(samples_us) / mean if mean > 0 and len(samples_us) > 1 else 0.0
    return TimingStats(median_us=statistics.median(samples_us), mean_us=mean, min_us=min(samples_us), cv=cv,
                       trials=len(samples_us), method=method)


def roofline(flop: float | None, nbytes: float | None, seconds: float, dtype_key: str | None,
             profile: dict[str, Any] | None) -> tuple[float | None, float | None, float | None, str]:
    """(TFLOP/s, GB/s, fraction of the attainable roofline, suspect text) for one call of
    ``seconds``. Attainable = min(peak TFLOP/s of ``dtype_key``, intensity x bandwidth)."""
    tflops = flop / seconds / 1e12 if flop and seconds > 0 else None
    gbps = nbytes / seconds / 1e9 if nbytes and seconds > 0 else None
    if not profile:
        return tflops, gbps, None, ""
    peaks = profile.get("peak_tflops") or {}
    peak = peaks.get(dtype_key) if dtype_key else None
    if peak is None and dtype_key == "fp32":
        peak = peaks.get("tf32")
    bw = profile.get("bandwidth_gbps") or profile.get("memory_bandwidth_gbps")
    fraction = None
    suspect = ""
    if tflops is not None and (peak or (bw and nbytes)):
        attainable = []
        if peak:
            attainable.append(float(peak))
        if bw and nbytes:
            attainable.append(flop / nbytes * float(bw) / 1e3)  # flop/byte x GB/s = GFLOP/s -> TFLOP/s
        limit = min(attainable)
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


class _Timer:
    """Times callables on the device (see the module docstring)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.ops = ctx.ops
        self.flush_buf = self.ops.flush_buffer(ctx.options.get("l2_bytes"))

    def flush(self) -> None:
        """Evict the L2 cache by writing the flush buffer (no-op on cpu)."""
        if self.flush_buf is not None:
            self.flush_buf.zero_()

    def time_once(self, fn: Any, inner: int = 1) -> float:
        """Microseconds per call of ``inner`` back-to-back calls between two events.

        Order: synchronise (nothing of the previous trial is still running), flush the L2, then
        record the start event and launch. The flush keeps the device busy while the host
        launches the timed call, so the start event fires when the flush ends and the host's
        launch latency stays outside the window, as in ``triton.testing.do_bench``. (With a
        synchronise between flush and start, the H200 run of the GEMM pair measured 306 µs
        against do_bench's 234 µs for the same candidate; host launch time inside the window is
        the likely cause. Not re-measured since this change.)
        """
        self.ops.synchronize()
        self.flush()
        start, end = self.ops.event(), self.ops.event()
        self.ops.record(start)
        for _ in range(inner):
            fn()
        self.ops.record(end)
        self.ops.synchronize()
        return self.ops.elapsed_ms(start, end) * 1e3 / inner

    def warmup(self, fn: Any, budget_ms: float) -> None:
        """Call ``fn`` for ``budget_ms`` milliseconds (3 to 1000 calls)."""
        deadline = _monotonic() + budget_ms / 1e3
        calls = 0
        while calls < 3 or _monotonic() < deadline:
            fn()
            calls += 1
            if calls >= 1000:
                break
        self.ops.synchronize()

    def graphed(self, fn: Any, inner: int) -> Any | None:
        """A callable replaying ``inner`` calls of ``fn`` captured in a device graph, or None."""
        graph = self.ops.graph() if self.ops.kind == "cuda" else None
        if graph is None:
            return None
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                fn()
            torch.cuda.current_stream().wait_stream(stream)
            with self.ops.graph_capture(graph):
                for _ in range(inner):
                    fn()
            self.ops.synchronize()
            return graph.replay
        except Exception:
            return None


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
        timer = _Timer(ctx)
        results: list[PerformanceResult] = []
        for variant in variants:
            results.append(_time_variant(ctx, timer, holder, variant))
            patched = ctx.timer_guard.check() + guard.check()  # patched while being timed
            if patched:
                ctx.verdict.findings += patched
                ctx.fail(step, Failure(VerdictKind.CHEATING, f"integrity rule {patched[0].rule} broken while "
                                       f"timing: {patched[0].message}; the times are discarded"))
                return
        ctx.verdict.performance = results
        parts = [f"{p.variant}: {p.speedup:.2f}x ({p.baseline.median_us:.1f} -> {p.candidate.median_us:.1f} µs"
                 + (", launch-bound" if p.launch_bound else "") + ")" for p in results]
        step.summary = "; ".join(parts)
        step.evidence = {"l2_flush_bytes": int(timer.flush_buf.numel() * 4) if timer.flush_buf is not None else 0,
                         "lock": ctx.options.get("lock_key") or ctx.ops.key}
        # the config each autotuned kernel chose on this device (recorded, not re-derived)
        chosen = {"baseline": chosen_configs(ctx.registry, holder["base"].loaded.module),
                  "candidate": chosen_configs(ctx.registry, holder["cand"].loaded.module)}
        if chosen["baseline"] or chosen["candidate"]:
            step.evidence["autotune_chosen"] = chosen
        for p in results:
            if p.suspect:
                ctx.verdict.warnings.append(f"variant {p.variant}: {p.suspect}")
        threads = ctx.threads.started
        if threads:
            ctx.verdict.findings.append(Finding("background_thread", f"threads started while timing: {threads}"))

    ctx.run_step("performance", performance)
    ctx.kernels_to_verdict()


def _minimum_bytes(args: list[Any], model: torch.nn.Module, output: Any) -> float:
    """Bytes one forward call must move at least: input tensors, the module's parameters and
    buffers, and the output tensors, each storage counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0

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

    for t in list(args) + list(model.parameters()) + list(model.buffers()):
        add(t)
    add(output)
    return float(total)


def _timed_section(ctx: WorkerContext, timer: _Timer, callables: dict[str, Any]
                   ) -> tuple[dict[str, list[float]], str, int, bool]:
    """Warm-up, estimate, then interleaved trials (held under the device lock by the caller).
    Returns (µs per call samples by name, method, calls per sample, launch-bound?)."""
    budget = float(ctx.options.get("warmup_ms") or 25)
    for fn in callables.values():
        timer.warmup(fn, budget)
    estimate = {name: statistics.median(timer.time_once(fn) for _ in range(5)) for name, fn in callables.items()}
    launch_bound = max(estimate["baseline"], estimate["candidate"]) < LAUNCH_BOUND_US
    method = "events"
    timed: dict[str, Any] = dict(callables)
    inner = 1
    if launch_bound:
        inner = min(200, max(1, int(BATCH_TARGET_US / max(min(estimate.values()), 0.5))))
        graphs = {name: timer.graphed(fn, inner) for name, fn in callables.items()}
        if all(g is not None for g in graphs.values()):
            timed = dict(graphs)
            method = "graph"
        else:
            method = "back_to_back"
    rep_us = float(ctx.options.get("rep_ms") or 100) * 1e3
    per_trial = sum(estimate.values()) * (1 if method == "events" else inner)
    trials = int(min(MAX_TRIALS, max(MIN_TRIALS, rep_us / max(per_trial, 1e-3))))
    samples: dict[str, list[float]] = {name: [] for name in timed}
    names = list(timed)
    for t in range(trials):
        order = names[t % len(names):] + names[:t % len(names)]
        for name in order:
            fn = timed[name]
            if method == "graph":
                samples[name].append(timer.time_once(fn, 1) / inner)
            else:
                samples[name].append(timer.time_once(fn, inner if method == "back_to_back" else 1))
    return samples, method, inner, launch_bound


def _time_variant(ctx: WorkerContext, timer: _Timer, holder: dict[str, Any], variant: dict[str, Any]
                  ) -> PerformanceResult:
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

    clone = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    callables["baseline"] = bind(base, bmodel, args)
    callables["candidate"] = bind(cand, cmodel, clone)
    if "ref" in holder:
        try:
            rmodel = holder["ref"].model_for(combo, baseline_state=state, fresh=True)
            callables["reference"] = bind(holder["ref"], rmodel, [a.clone() if isinstance(a, torch.Tensor) else a
                                                                   for a in args])
        except WorkerError as err:
            ctx.verdict.warnings.append(f"the reference failed, so no eager time: {err.failure.reason}")

    lock_dir = ctx.options.get("lock_dir") or str(ctx.job_dir / "locks")
    lock = DeviceLock(lock_dir, str(ctx.options.get("lock_key") or ctx.ops.key),
                      on_queued=lambda msg: None, progress_path=ctx.progress.path)
    try:
        lock.acquire()
    except LockTimeout as exc:
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR, f"could not take the timing lock: {exc}")) from exc
    try:
        samples, method, inner, launch_bound = _timed_section(ctx, timer, callables)
    finally:
        lock.release()
    stats = {name: stats_of(vals, method) for name, vals in samples.items()}
    speedup = stats["baseline"].median_us / stats["candidate"].median_us if stats["candidate"].median_us > 0 \
        else math.inf
    flop = variant.get("flop")
    nbytes = max(float(variant.get("bytes") or 0), _minimum_bytes(args, bmodel, callables["candidate"]())) or None
    tflops, gbps, fraction, suspect = roofline(float(flop) if flop else None, float(nbytes) if nbytes else None,
                                               stats["candidate"].median_us * 1e-6, _dtype_key(ctx, variant),
                                               ctx.options.get("device_profile"))
    return PerformanceResult(variant=combo.vname, baseline=stats["baseline"], candidate=stats["candidate"],
                             speedup=speedup, reference=stats.get("reference"), flop=float(flop) if flop else None,
                             bytes_moved=float(nbytes) if nbytes else None, tflops=tflops, gbps=gbps,
                             roofline_fraction=fraction, launch_bound=launch_bound, suspect=suspect)
