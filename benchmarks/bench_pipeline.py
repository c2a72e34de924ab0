"""Benchmark of the whole pipeline on a GPU (a script, not a test).

For every sample in ``sample_kernels/`` and every kernel in a directory of Xe-Forge cases given
on the command line, it measures:

* the **baseline** (the kernel as given; for a kernel that hard-codes another device, the
  verified device-agnostic port of it, since the original cannot run here),
* the **rules-engine result**: the CoVeR loop in auto mode with the rules engine over the stages
  of ``RULES_STAGES`` (dtype_fix, fusion, memory_access, block_pointers, persistent_kernel,
  autotuning, xpu_specific; portability first where needed), through a git-backed session when GitPython
  is installed and through in-memory stage states otherwise; each stage's speedup is the one its
  verdict measured over the version it started from, and a stage is kept only when it verifies
  and is faster,
* **PyTorch eager** (the spec's reference module, timed by the verifier beside the kernels),

on the problem's ``bench-gpu*`` shapes, with TFLOP/s, the fraction of the device roofline
(from the knowledge-base hardware profile), whether the shape is memory- or compute-bound at
its measured bytes, the configs the autotuned kernels chose, and the geometric means. It also
replays the **Flash Attention teaching trajectory** on every benchmark shape (71 heads, head dim
96, S = 1500 among them): in ``--quick`` the last non-causal step and the causal step (against
the naive baseline and SDPA, the eager reference); otherwise, or with ``--all-steps``, every
step. ``benchmarks/bench_flash_attention.py`` times every step against SDPA directly.

All measurements go through ``xeforge_core.verify`` (isolated workers, baseline and candidate
interleaved, warm-up, L2 flush, device timing lock), so the numbers are the product's own.

Outputs, in ``--out`` (created, rewritten after every finished problem, so a run cut short
still leaves every finished problem on disk): ``summary.md`` (device, library versions,
tables, geometric means, the goals), ``problems.csv``, ``stages.csv``, ``trajectory.csv``,
``results.json`` and, when plotly is installed, ``report.html``.

Usage::

    python benchmarks/bench_pipeline.py --cases ../shared/cases/xeforge --out docs/measured/h200-pipeline --quick
    python benchmarks/bench_pipeline.py --cases DIR --out OUT --only flash --only gemm
    python benchmarks/bench_pipeline.py --device cpu --only vector_add --skip-trajectory --out /tmp/b

``--quick`` (one shape a problem, one seed, one CoVeR iteration, short timing, at most four
autotune configs a kernel) stops starting new problems after 5 minutes and stops every
verification still running at 6.5 minutes (``--budget-min`` / ``--deadline-min``), keeping what
finished; problems run ``--jobs`` at a time (default: CPUs - 4, at most 10), samples first. What
a run did not reach, a second run (``--skip-samples --skip-trajectory``, or ``--only``) measures,
and ``--merge`` joins the two. On cpu nothing is timed (Triton's interpreter); that mode
exists to exercise the script anywhere.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import multiprocessing
import os
import platform
import re
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from xeforge_core.problem import Problem, load_problem  # noqa: E402
from xeforge_core.samples import flash_attention_trajectory, list_samples, load_sample  # noqa: E402

#: The stages the rules engine serves, in pipeline order (portability runs before them).
RULES_STAGES = ("dtype_fix", "fusion", "memory_access", "block_pointers", "persistent_kernel", "autotuning",
                "xpu_specific")

#: A memory-bound problem (by the roofline of its bench shape) should reach this fraction of the
#: bandwidth roofline (issue 15's goal).
MEMORY_BOUND_GOAL = 0.70

#: Trajectory shapes timed in --quick mode (names of variants of the attention spec).
QUICK_TRAJECTORY_SHAPES = ("bench-gpu", "bench-gpu-1", "bench-gpu-2", "bench-gpu-3", "bench-gpu-4")


# ---------------------------------------------------------------------------------------------
# settings and result rows


@dataclass
class Settings:
    """How much to run. Times in milliseconds / seconds as named."""

    quick: bool
    device: str | None
    jobs: int
    iterations: int
    seeds: int
    distributions: list[str]
    warmup_ms: float
    rep_ms: float
    timeout_s: float
    max_shapes: int
    budget_s: float | None
    use_session: bool
    use_cache: bool
    keep_sessions: Path | None
    trajectory_all: bool = True
    deadline_s: float | None = None
    #: print every stage's progress (what it is verifying, a wait for the device lock) with the time
    log_progress: bool = False
    #: the verifier's ``--dtype`` (``kernel``: the dtype the published kernels demand)
    dtype: str | None = None
    #: the verifier's ``--allow`` (precision downgrades accepted, e.g. ``["tf32"]``)
    allow_precision: list[str] = field(default_factory=list)


def _progress_log(name: str) -> Callable[[dict[str, Any]], None]:
    """A pipeline ``on_progress`` that prints ``HH:MM:SS name: stage: message`` lines."""
    def show(event: dict[str, Any]) -> None:
        print(f"{time.strftime('%H:%M:%S')} {name}: {event.get('stage')}: {event.get('message')}", flush=True)
    return show


@dataclass
class ShapeRow:
    """One problem on one shape: times in µs; speedups as ratios (>1 is faster)."""

    kind: str                       # "sample" or "case"
    problem: str
    variant: str
    dims: str
    baseline_us: float | None = None
    rules_us: float | None = None
    eager_us: float | None = None
    speedup_rules: float | None = None        # baseline / rules
    rules_vs_eager: float | None = None       # eager / rules
    baseline_vs_eager: float | None = None    # eager / baseline
    tflops_baseline: float | None = None
    tflops_rules: float | None = None
    roofline_baseline: float | None = None
    roofline_rules: float | None = None
    stages_applied: str = ""
    note: str = ""
    bound: str = ""                 # "memory" / "compute" by the roofline at the measured bytes
    intensity: float | None = None  # FLOP per byte at the measured bytes (where it sits on the roofline)
    autotune_chosen: str = ""       # the configs the rules result's autotuners chose here


@dataclass
class StageRow:
    """One rules-engine stage on one problem: ``speedup`` over the version it started from."""

    problem: str
    stage: str
    status: str
    speedup: float | None
    seconds: float
    reason: str


@dataclass
class TrajectoryRow:
    """One trajectory step on one shape: ``speedup`` over the naive baseline (non-causal steps)."""

    step: int
    title: str
    stage: str
    rule_id: str
    variant: str
    dims: str
    naive_us: float | None = None
    step_us: float | None = None
    speedup: float | None = None
    tflops: float | None = None
    roofline: float | None = None
    eager_us: float | None = None
    vs_eager: float | None = None
    vs_noncausal: float | None = None      # causal step: autotuned non-causal time / causal time
    verdict: str = ""
    causal: bool = False
    note: str = ""


@dataclass
class Results:
    started: str
    settings: dict[str, Any]
    device: dict[str, Any]
    versions: dict[str, Any]
    shapes: list[ShapeRow] = field(default_factory=list)
    stages: list[StageRow] = field(default_factory=list)
    trajectory: list[TrajectoryRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = False          # False while the run is going (a checkpoint) or if it was cut short
    parts: list[dict[str, Any]] = field(default_factory=list)  # runs merged into this one (--merge)


# ---------------------------------------------------------------------------------------------
# helpers


def geomean(values: list[float | None]) -> float | None:
    """Geometric mean of the positive values (``None`` if there are none)."""
    vals = [float(v) for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _clip(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters, with an ellipsis when cut."""
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


def _dims(problem: Problem, variant: str) -> str:
    try:
        dims = problem.variant(variant).dims
    except Exception:  # a variant the spec does not have
        return ""
    return " ".join(f"{k}={v}" for k, v in dims.items())


def _order_key(name: str) -> tuple[int, int, str]:
    m = re.fullmatch(r"bench-gpu(?:-(\d+))?", name)
    if m:
        return (0, int(m.group(1)) if m.group(1) else -1, name)
    return (1, 0, name)


def bench_variants(problem: Problem, settings: Settings, device_type: str) -> list[str]:
    """The variants to time: ``bench-gpu`` then ``bench-gpu-N`` in order (``bench-xpu`` first on
    xpu when present), at most ``settings.max_shapes``; ``ci`` on cpu (nothing is timed there)."""
    if problem.spec is None:
        return ["module"]
    names = list(problem.spec.variants)
    if device_type == "cpu":
        return ["ci"] if "ci" in names else [problem.default_variant_name()]
    chosen = sorted((n for n in names if n.startswith("bench-gpu") and n != "bench-gpu-old"), key=_order_key)
    if device_type == "xpu" and "bench-xpu" in names:
        chosen.insert(0, "bench-xpu")
    if not chosen:
        chosen = [problem.default_variant_name()]
    return chosen[: max(1, settings.max_shapes)]


def verify_options(settings: Settings, performance_variants: list[str] | None) -> Any:
    from xeforge_core.verify import VerifyOptions

    return VerifyOptions(seeds=settings.seeds, distributions=list(settings.distributions),
                         performance_variants=performance_variants, use_cache=settings.use_cache,
                         timeout_s=settings.timeout_s, warmup_ms=settings.warmup_ms, rep_ms=settings.rep_ms,
                         dtype=settings.dtype, allow_precision=list(settings.allow_precision))


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


class Budget:
    """A wall-clock budget shared by all tasks: tasks not started in time are skipped, and at
    the hard ``deadline`` (seconds) the ``cancel`` event stops the verifications still running
    (their workers are stopped; what finished is kept)."""

    def __init__(self, seconds: float | None, deadline: float | None = None) -> None:
        self.start = time.monotonic()
        self.seconds = seconds
        self.cancel = threading.Event()
        self._timer: threading.Timer | None = None
        if deadline is not None:
            self._timer = threading.Timer(deadline, self.cancel.set)
            self._timer.daemon = True
            self._timer.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def exhausted(self) -> bool:
        return (self.seconds is not None and self.elapsed() > self.seconds) or self.cancel.is_set()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


# ---------------------------------------------------------------------------------------------
# problems


@dataclass
class Job:
    kind: str          # "sample" or "case"
    name: str
    problem: Problem


def collect_jobs(cases_dir: Path | None, only: list[str], skip_samples: bool, errors: list[str]) -> list[Job]:
    """Samples, then every ``*.py`` kernel of ``cases_dir`` that has a sibling spec, filtered by
    ``only`` (substrings, case-insensitive; any may match)."""

    def wanted(name: str) -> bool:
        return not only or any(o.lower() in name.lower() for o in only)

    jobs: list[Job] = []
    if not skip_samples:
        for info in list_samples():
            if wanted(info.name):
                jobs.append(Job("sample", info.name, load_sample(info.name)))
    if cases_dir is not None:
        for path in sorted(cases_dir.glob("*.py"), key=lambda p: (_num_prefix(p.stem), p.stem)):
            if path.stem.endswith(("_ref", "_pytorch")) or not path.with_suffix(".yaml").is_file():
                continue
            if not wanted(path.stem):
                continue
            try:
                jobs.append(Job("case", path.stem, load_problem(path)))
            except Exception as exc:  # a case that cannot be loaded is reported, not fatal
                errors.append(f"case {path.name}: cannot load: {exc}")
    return jobs


def _num_prefix(stem: str) -> int:
    m = re.match(r"(\d+)_", stem)
    return int(m.group(1)) if m else 10**6


# ---------------------------------------------------------------------------------------------
# the rules pipeline on one problem


@dataclass
class PipelineOutcome:
    baseline: Problem               # what speedups are measured against (ported if needed)
    final_source: str
    stages: list[StageRow]
    applied: list[str]
    note: str = ""


def run_rules_pipeline(job: Job, device: Any, settings: Settings, workdir: Path,
                       cancel: threading.Event | None = None,
                       performance_variants: list[str] | None = None) -> PipelineOutcome:
    """Portability (when needed), then the stages of ``RULES_STAGES`` with the rules engine in
    auto mode. ``cancel`` (set at the run's hard deadline) stops the stage being verified; the
    stages approved by then are kept. ``performance_variants``: the variants each stage's
    candidate is timed at (default: the problem's default variant); a candidate measurably
    slower at any of them is not kept. Never raises for a bad candidate; raises only if the
    engine is missing."""
    from xeforge_core import service
    from xeforge_core.codemods.portability import portability_needs
    from xeforge_core.pipeline.loop import LoopOptions, run_stage

    # --quick: at most 4 autotune configs a kernel (every one is verified; a roofline model keeps
    # 3 of them to benchmark per shape), so tuning and its verification stay short
    engine = service.make_engine("rules", options={"max_configs": 4} if settings.quick else {})
    opts = verify_options(settings, performance_variants)  # default: timed on the default variant
    problem = job.problem
    rows: list[StageRow] = []
    applied: list[str] = []

    if settings.use_session and _has_module("git"):
        session = service.start_session(problem, path=workdir / job.name, device=device, plan=list(RULES_STAGES))
        try:
            outcomes = service.run_session(session, device, engine,
                                           LoopOptions(auto=True, iterations=settings.iterations,
                                                       on_progress=_progress_log(job.name) if settings.log_progress
                                                       else None,
                                                       verify_options=opts, cancel=cancel))
        except Exception as exc:  # cancelled at the deadline: keep what the session approved
            if cancel is None or not cancel.is_set():
                raise
            outcomes = []
            rows.append(StageRow(job.name, "-", "cancelled", None, 0.0, f"time budget spent ({type(exc).__name__})"))
        baseline = problem
        for out in outcomes:
            rows.append(StageRow(job.name, out.stage, out.status, out.speedup, round(out.seconds, 1),
                                 _clip(out.reason, 300)))
            if out.status == "approved":
                applied.append(out.stage)
                if out.stage == "portability" and out.version:
                    baseline = problem.with_kernel_source(session.source(out.version), label="baseline")
        return PipelineOutcome(baseline, session.source("head"), rows, applied, note="session")

    # without GitPython: the same loop over in-memory stage states
    from xeforge_core.verify import verify

    current = problem
    foreign = portability_needs(problem.kernel.source, device.type)
    if foreign:
        from xeforge_core.engines import port_to_device_agnostic

        started = time.monotonic()
        cand = port_to_device_agnostic(problem.kernel.source)
        ported = problem.with_kernel_source(cand.code, label="baseline")
        verdict = verify(ported, cand.code, device=device, options=verify_options(settings, []), cancel=cancel)
        status = "approved" if verdict.passed else "failed"
        rows.append(StageRow(job.name, "portability", status, None, round(time.monotonic() - started, 1),
                             _clip(verdict.reason or verdict.kind.value, 300)))
        if not verdict.passed:
            return PipelineOutcome(problem, problem.kernel.source, rows, applied,
                                   note="the device-agnostic port does not verify")
        current = ported
        applied.append("portability")
    baseline = current
    state = service.memory_controller(current, device, plan=list(RULES_STAGES))
    for stage in RULES_STAGES:
        if cancel is not None and cancel.is_set():
            rows.append(StageRow(job.name, stage, "skipped", None, 0.0, "time budget spent"))
            continue
        try:
            out = run_stage(state, stage, engine, LoopOptions(auto=True, iterations=settings.iterations,
                                                              on_progress=_progress_log(job.name)
                                                              if settings.log_progress else None,
                                                              verify_options=opts, cancel=cancel))
        except Exception as exc:
            if cancel is None or not cancel.is_set():
                raise
            rows.append(StageRow(job.name, stage, "cancelled", None, 0.0, f"time budget spent ({type(exc).__name__})"))
            continue
        rows.append(StageRow(job.name, stage, out.status, out.speedup, round(out.seconds, 1), _clip(out.reason, 300)))
        if out.status == "approved":
            applied.append(stage)
    return PipelineOutcome(baseline, state.current().kernel.source, rows, applied, note="in memory")


def measure(baseline: Problem, source: str, variants: list[str], device: Any, settings: Settings,
            cancel: threading.Event | None = None) -> Any:
    """``verify`` of ``source`` against ``baseline`` timed on ``variants`` (the verdict)."""
    from xeforge_core.verify import verify

    return verify(baseline, source, device=device, options=verify_options(settings, variants), cancel=cancel)


def problem_task(job: Job, device: Any, settings: Settings, workdir: Path, budget_end: float | None,
                 deadline_end: float | None, rules_error: str | None
                 ) -> tuple[list[ShapeRow], list[StageRow], list[str]]:
    """:func:`bench_problem` in a worker process, its budget and deadline given as wall-clock
    ends (``time.time()`` values) shared by every process of the run."""
    now = time.time()
    budget = Budget(max(0.0, budget_end - now) if budget_end else None,
                    max(0.0, deadline_end - now) if deadline_end else None)
    try:
        return bench_problem(job, device, settings, workdir, budget, rules_error)
    finally:
        budget.stop()


def bench_problem(job: Job, device: Any, settings: Settings, workdir: Path, budget: Budget,
                  rules_error: str | None) -> tuple[list[ShapeRow], list[StageRow], list[str]]:
    """Baseline, rules result and eager for one problem on its bench shapes."""
    errors: list[str] = []
    variants = bench_variants(job.problem, settings, device.type)
    if budget.exhausted():
        return ([ShapeRow(job.kind, job.name, v, _dims(job.problem, v), note="skipped: time budget spent")
                 for v in variants], [], [])
    note = ""
    stages: list[StageRow] = []
    if rules_error is None:
        try:
            outcome = run_rules_pipeline(job, device, settings, workdir, cancel=budget.cancel)
        except Exception as exc:
            errors.append(f"{job.name}: rules pipeline failed: {exc}\n{traceback.format_exc(limit=3)}")
            outcome = PipelineOutcome(job.problem, job.problem.kernel.source, [], [],
                                      note=f"rules pipeline failed: {exc}")
        stages = outcome.stages
        baseline, final = outcome.baseline, outcome.final_source
        applied = outcome.applied
        if outcome.note not in ("session", "stage states"):
            note = outcome.note
        elif "portability" in applied:
            note = "baseline: the verified device-agnostic port"
    else:
        baseline, final, applied = job.problem, job.problem.kernel.source, []
        note = f"rules engine unavailable: {rules_error}"
    failed_port = next((s for s in stages if s.stage == "portability" and s.status == "failed"), None)
    if failed_port is not None:  # the original cannot run here and its port is wrong: nothing to time
        why = _clip(f"not timed: the portability step failed ({failed_port.reason})", 300)
        return [ShapeRow(job.kind, job.name, v, _dims(job.problem, v), note=why) for v in variants], stages, errors
    if job.problem.warnings:
        note = (note + "; " if note else "") + "spec warning: " + _clip(job.problem.warnings[0], 200)
    if budget.cancel.is_set():
        return ([ShapeRow(job.kind, job.name, v, _dims(job.problem, v), stages_applied=",".join(applied),
                          note="not timed: time budget spent") for v in variants], stages, errors)
    try:
        verdict = measure(baseline, final, variants, device, settings, cancel=budget.cancel)
    except Exception as exc:
        if not budget.cancel.is_set():
            raise
        return ([ShapeRow(job.kind, job.name, v, _dims(job.problem, v), stages_applied=",".join(applied),
                          note=f"not timed: time budget spent ({type(exc).__name__})") for v in variants],
                stages, errors)
    rows: list[ShapeRow] = []
    perf = {p.variant: p for p in verdict.performance}
    for v in variants:
        row = ShapeRow(job.kind, job.name, v, _dims(baseline, v), stages_applied=",".join(applied), note=note)
        p = perf.get(v)
        if p is None:
            why = verdict.reason or verdict.kind.value
            if not verdict.passed:
                row.note = (row.note + "; " if row.note else "") + _clip(f"final version not verified: {why}", 300)
            elif device.type == "cpu":
                row.note = (row.note + "; " if row.note else "") + "not timed: interpreter"
            rows.append(row)
            continue
        row.baseline_us = p.baseline.median_us
        row.rules_us = p.candidate.median_us
        row.eager_us = p.reference.median_us if p.reference else None
        row.speedup_rules = p.speedup
        row.rules_vs_eager = _ratio(row.eager_us, row.rules_us)
        row.baseline_vs_eager = _ratio(row.eager_us, row.baseline_us)
        row.tflops_rules = p.tflops
        if p.flop and row.baseline_us:
            row.tflops_baseline = p.flop / (row.baseline_us * 1e-6) / 1e12
        row.roofline_rules = p.roofline_fraction
        if p.roofline_fraction is not None and row.rules_us and row.baseline_us:
            row.roofline_baseline = p.roofline_fraction * row.rules_us / row.baseline_us
        if p.suspect:
            row.note = (row.note + "; " if row.note else "") + _clip(p.suspect, 200)
        row.bound = roofline_bound(p, baseline, v, getattr(device, "profile", None))
        row.intensity = p.flop / p.bytes_moved if p.flop and p.bytes_moved else None
        perf_step = verdict.step("performance") if hasattr(verdict, "step") else None
        chosen = ((perf_step.evidence or {}).get("autotune_chosen") or {}) if perf_step is not None else {}
        row.autotune_chosen = "; ".join(chosen.get("candidate") or [])
        rows.append(row)
    return rows, stages, errors


def roofline_bound(p: Any, problem: Problem, variant: str, profile: dict[str, Any] | None) -> str:
    """``memory`` when the measured bytes put the problem below the device's ridge point for
    its dtype (peak TFLOP/s over bandwidth), ``compute`` above it, ``""`` when unknown."""
    if not profile or not p.flop or not p.bytes_moved:
        return ""
    try:
        dtype = problem.variant(variant).dtype or "float32"
    except Exception:  # a variant the spec does not have
        dtype = "float32"
    key = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}.get(str(dtype).replace("torch.", ""), "fp32")
    peaks = profile.get("peak_tflops") or {}
    peak = peaks.get(key) or peaks.get("fp32")
    bw = profile.get("memory_bandwidth_gbps") or profile.get("bandwidth_gbps")
    if not peak or not bw:
        return ""
    return "memory" if p.flop / p.bytes_moved < float(peak) * 1e3 / float(bw) else "compute"


# ---------------------------------------------------------------------------------------------
# the Flash Attention trajectory


def trajectory_variants(problem: Problem, settings: Settings, device_type: str) -> list[str]:
    if device_type == "cpu":
        return ["ci"]
    names = set(problem.spec.variants) if problem.spec else set()
    if settings.quick:
        return [n for n in QUICK_TRAJECTORY_SHAPES if n in names]
    return sorted((n for n in names if n.startswith("bench-gpu")), key=_order_key)[: max(1, settings.max_shapes)]


def bench_trajectory(device: Any, settings: Settings, pool: ThreadPoolExecutor, budget: Budget,
                     errors: list[str]) -> list[TrajectoryRow]:
    """Every step of the device's trajectory (its target family's steps) verified against the naive
    baseline and timed on the trajectory shapes."""
    steps = flash_attention_trajectory(device.type)
    naive = steps[0]
    shapes = trajectory_variants(naive.problem, settings, device.type)

    def run(step: Any) -> Any:
        if budget.exhausted():
            return None
        if step.causal:
            return measure(step.problem, step.code, shapes, device, settings, cancel=budget.cancel)
        return measure(naive.problem, step.code, shapes, device, settings, cancel=budget.cancel)

    noncausal_all = [s for s in steps[1:] if not s.causal]
    chosen = steps[1:] if settings.trajectory_all else (
        noncausal_all[-1:] + [s for s in steps[1:] if s.causal])  # quick: the last non-causal step and causal
    steps = [steps[0], *chosen]
    futures = {pool.submit(run, s): s for s in chosen}
    verdicts: dict[int, Any] = {}
    for fut in as_completed(futures):
        step = futures[fut]
        try:
            verdicts[step.index] = fut.result()
        except Exception as exc:
            errors.append(f"trajectory step {step.index}: {exc}\n{traceback.format_exc(limit=3)}")
            verdicts[step.index] = None

    def perf_of(index: int) -> dict[str, Any]:
        v = verdicts.get(index)
        return {p.variant: p for p in (v.performance if v is not None else [])}

    noncausal = [s for s in steps[1:] if not s.causal]
    last_noncausal = noncausal[-1].index if noncausal else None
    rows: list[TrajectoryRow] = []
    for shape in shapes:
        naive_us = None
        naive_eager = None
        for s in noncausal:
            p = perf_of(s.index).get(shape)
            if p is not None:
                naive_us = naive_us or p.baseline.median_us
                naive_eager = naive_eager or (p.reference.median_us if p.reference else None)
        flop0 = naive.problem.variant(shape).flop if naive.problem.spec else None
        rows.append(TrajectoryRow(
            step=0, title=naive.title, stage=naive.stage, rule_id="", variant=shape,
            dims=_dims(naive.problem, shape), naive_us=naive_us, step_us=naive_us,
            speedup=1.0 if naive_us else None,
            tflops=(flop0 / (naive_us * 1e-6) / 1e12) if flop0 and naive_us else None,
            eager_us=naive_eager, vs_eager=_ratio(naive_eager, naive_us), verdict="baseline"))
        for s in steps[1:]:
            v = verdicts.get(s.index)
            row = TrajectoryRow(step=s.index, title=s.title, stage=s.stage, rule_id=s.rule_id or "",
                                variant=shape, dims=_dims(s.problem, shape), causal=s.causal,
                                verdict=(v.kind.value if v is not None else "not run"))
            if v is None:
                row.note = "skipped: time budget spent" if budget.exhausted() else "no verdict"
                rows.append(row)
                continue
            p = perf_of(s.index).get(shape)
            if p is None:
                row.note = ("not timed: interpreter" if device.type == "cpu" and v.passed
                            else _clip(v.reason or v.kind.value, 300))
                rows.append(row)
                continue
            row.step_us = p.candidate.median_us
            row.tflops = p.tflops
            row.roofline = p.roofline_fraction
            row.eager_us = p.reference.median_us if p.reference else None
            row.vs_eager = _ratio(row.eager_us, row.step_us)
            if s.causal:
                row.note = "causal: timed against its own reference; not comparable with the naive baseline"
                ref = perf_of(last_noncausal).get(shape) if last_noncausal is not None else None
                if ref is not None:
                    row.vs_noncausal = _ratio(ref.candidate.median_us, row.step_us)
            else:
                row.naive_us = p.baseline.median_us
                row.speedup = p.speedup
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# outputs


def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}" if abs(v) >= 0.01 else f"{v:.2e}"
    return str(v)


def _cell(text: str | None) -> str:
    """Text safe inside a Markdown table cell."""
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def write_csv(path: Path, rows: list[Any]) -> None:
    if not rows:
        path.write_text("")
        return
    data = [asdict(r) for r in rows]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(data[0]))
        w.writeheader()
        w.writerows(data)


def _changed(res: Results, problem: str) -> bool:
    """Whether an optimization stage (not only the portability port) changed ``problem``."""
    return any(set(filter(None, r.stages_applied.split(","))) - {"portability"}
               for r in res.shapes if r.problem == problem)


def summary_numbers(res: Results) -> dict[str, Any]:
    """Geometric means: per problem over its shapes first, then over problems."""
    def per_problem(attr: str, kind: str | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        names = sorted({r.problem for r in res.shapes if kind is None or r.kind == kind})
        for name in names:
            g = geomean([getattr(r, attr) for r in res.shapes if r.problem == name])
            if g is not None:
                out[name] = g
        return out

    rules = per_problem("speedup_rules")
    out: dict[str, Any] = {
        "rules_over_baseline": geomean(list(rules.values())),
        "rules_over_baseline_samples": geomean(list(per_problem("speedup_rules", "sample").values())),
        "rules_over_baseline_cases": geomean(list(per_problem("speedup_rules", "case").values())),
        "rules_vs_eager": geomean(list(per_problem("rules_vs_eager").values())),
        "baseline_vs_eager": geomean(list(per_problem("baseline_vs_eager").values())),
        "problems_timed": len(rules),
        # a problem with no stage applied runs the baseline's own code: its ratio is timing noise
        "problems_faster": sum(1 for name, v in rules.items() if v > 1.03 and _changed(res, name)),
        "problems_faster_than_eager": sum(1 for v in per_problem("rules_vs_eager").values() if v > 1.0),
        "problems_with_eager": len(per_problem("rules_vs_eager")),
    }
    mem = [r for r in res.shapes if r.kind == "sample" and r.bound == "memory" and r.roofline_rules is not None
           and r.variant == "bench-gpu"]
    out["memory_bound_samples"] = len(mem)
    out["memory_bound_at_goal"] = sum(1 for r in mem if r.roofline_rules >= MEMORY_BOUND_GOAL)
    out["memory_bound_below_goal"] = [f"{r.problem} {100 * r.roofline_rules:.0f}%" for r in mem
                                      if r.roofline_rules < MEMORY_BOUND_GOAL]
    out["slower_than_baseline"] = sorted({r.problem for r in res.shapes if r.speedup_rules is not None
                                          and r.speedup_rules < 0.97 and _changed(res, r.problem)})
    traj: dict[int, float | None] = {}
    for step in sorted({r.step for r in res.trajectory}):
        traj[step] = geomean([r.speedup for r in res.trajectory if r.step == step])
    out["trajectory_geomean_by_step"] = traj
    return out


def write_markdown(path: Path, res: Results, nums: dict[str, Any]) -> None:
    d = res.device
    lines = [
        "# Pipeline benchmark",
        "",
        f"- Device: **{d.get('name') or d.get('type')}** ({d.get('type')}), "
        f"{'interpreter: nothing is timed' if d.get('type') == 'cpu' else 'timed by the verifier'}",
        "- Libraries: " + ", ".join(f"{k} {v}" for k, v in res.versions.items() if v),
        f"- Run: {res.started} UTC, {res.seconds / 60:.1f} min{' summed over the runs' if res.parts else ''}, mode "
        f"{'quick' if res.settings.get('quick') else 'full'} (seeds {res.settings.get('seeds')}, "
        f"CoVeR iterations {res.settings.get('iterations')}, timing {res.settings.get('warmup_ms')} ms warm-up / "
        f"{res.settings.get('rep_ms')} ms per callable)",
        *([f"- Merged from {len(res.parts)} runs on this device over disjoint problems (speedups are "
           "measured side by side inside one run; only the geometric means span runs): "
           + "; ".join(f"{p['started']} UTC, {p['seconds'] / 60:.1f} min, "
                       f"{len(p['problems'])} problems{' and the trajectory' if p['trajectory'] else ''}"
                       f"{'' if p['complete'] else ' (cut short)'}" for p in res.parts)] if res.parts else []),
        *(["- **Incomplete**: this run was cut short or is still going; only the problems "
           "listed below finished."] if not res.complete else []),
        "- Baseline: the kernel as given (for a kernel that hard-codes another device: its verified "
        "device-agnostic port). Rules: the rules engine's CoVeR loop in auto mode over "
        + ", ".join(RULES_STAGES) + ". Eager: the PyTorch reference. Speedups are ratios of median times "
        "(> 1 is faster); geometric means are taken per problem over its shapes, then over problems.",
        "",
        "## Summary",
        "",
        "| measure | value |",
        "|---|---|",
        f"| geometric-mean speedup, rules engine over baseline (all) | {_fmt(nums['rules_over_baseline'])}x |",
        f"| ... samples | {_fmt(nums['rules_over_baseline_samples'])}x |",
        f"| ... Xe-Forge cases | {_fmt(nums['rules_over_baseline_cases'])}x |",
        f"| geometric-mean speedup, rules result over PyTorch eager | {_fmt(nums['rules_vs_eager'])}x |",
        f"| geometric-mean speedup, baseline over PyTorch eager | {_fmt(nums['baseline_vs_eager'])}x |",
        f"| problems timed / made faster than baseline (> 1.03x, by an applied stage) / faster than eager | "
        f"{nums['problems_timed']} / "
        f"{nums['problems_faster']} / {nums['problems_faster_than_eager']} |",
        f"| memory-bound samples at >= {int(100 * MEMORY_BOUND_GOAL)}% of the bandwidth roofline (bench-gpu shape) | "
        f"{nums.get('memory_bound_at_goal', 0)} / {nums.get('memory_bound_samples', 0)}"
        + (f" (below: {', '.join(nums['memory_bound_below_goal'])})" if nums.get("memory_bound_below_goal") else "")
        + " |",
        f"| problems slower than their baseline (< 0.97x after an applied stage) | "
        f"{', '.join(nums.get('slower_than_baseline') or []) or 'none'} |",
        "",
        f"Eager times exist for {nums['problems_with_eager']} of {nums['problems_timed']} timed problems "
        "(those whose spec comes with a PyTorch reference).",
        "",
    ]
    if res.trajectory:
        lines += ["## Flash Attention trajectory", "",
                  "Speedup of each step over the naive baseline (scores in global memory) on each shape; "
                  "the causal step computes another function and is compared with its own reference "
                  "and with the autotuned non-causal step.", ""]
        shapes = list(dict.fromkeys(r.variant for r in res.trajectory))
        lines.append("| step | stage | rule | " + " | ".join(
            f"{s} ({next((r.dims for r in res.trajectory if r.variant == s), '')})" for s in shapes)
            + " | geomean |")
        lines.append("|---|---|---|" + "---|" * len(shapes) + "---|")
        steps = sorted({(r.step, r.title, r.stage, r.rule_id) for r in res.trajectory})
        for step, title, stage, rule in steps:
            cells = []
            for s in shapes:
                r = next((x for x in res.trajectory if x.step == step and x.variant == s), None)
                if r is None:
                    cells.append("–")
                elif r.speedup is not None:
                    cells.append(f"{_fmt(r.speedup)}x ({_fmt(r.tflops, 1)} TFLOP/s)")
                elif r.step_us is not None:
                    cells.append(f"{_fmt(r.step_us, 0)} µs, {_fmt(r.vs_noncausal)}x vs non-causal, "
                                 f"{_fmt(r.vs_eager)}x vs eager")
                else:
                    cells.append(_cell(r.note or r.verdict) or "–")
            g = nums["trajectory_geomean_by_step"].get(step)
            lines.append(f"| {step}. {title} | {stage} | {rule or '–'} | " + " | ".join(cells)
                         + f" | {_fmt(g)}{'x' if g else ''} |")
        last = max((x.step for x in res.trajectory if not x.causal), default=None)
        eager = [r for r in res.trajectory if r.step == last and r.vs_eager is not None]
        if eager:
            lines += ["", "Last non-causal step vs PyTorch eager (scaled_dot_product_attention): "
                      + ", ".join(f"{r.variant} {_fmt(r.vs_eager)}x" for r in eager), ""]
        lines.append("")
    lines += ["## Problems", "",
              "| kind | problem | shape | baseline µs | rules µs | eager µs | rules / baseline | "
              "rules vs eager | TFLOP/s base → rules | roofline base → rules | bound | stages applied | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res.shapes:
        note = r.note
        if r.speedup_rules is not None and not _changed(res, r.problem):
            note = "no stage applied: the same code timed twice, so the ratio is timing noise" + (
                "; " + note if note else "")
        lines.append(
            f"| {r.kind} | {r.problem} | {r.variant} ({r.dims}) | {_fmt(r.baseline_us, 1)} | {_fmt(r.rules_us, 1)} | "
            f"{_fmt(r.eager_us, 1)} | {_fmt(r.speedup_rules)}x | {_fmt(r.rules_vs_eager)}x | "
            f"{_fmt(r.tflops_baseline, 1)} → {_fmt(r.tflops_rules, 1)} | {_pct(r.roofline_baseline)} → "
            f"{_pct(r.roofline_rules)} | {r.bound or '–'} | {r.stages_applied or '–'} | "
            f"{_cell(note + ('; autotuned: ' + r.autotune_chosen if r.autotune_chosen else ''))} |")
    lines += ["", "## Stages (rules engine, auto mode)", "",
              "Speedup of each approved stage over the version it started from, on the default "
              "variant, as its verdict measured it.", "",
              "| problem | stage | outcome | speedup | seconds | reason |", "|---|---|---|---|---|---|"]
    for s in res.stages:
        reason = _cell(s.reason)
        lines.append(f"| {s.problem} | {s.stage} | {s.status} | {_fmt(s.speedup)} | {_fmt(s.seconds, 1)} | "
                     f"{reason[:160]} |")
    if res.errors:
        lines += ["", "## Errors", ""] + [f"- {e.splitlines()[0][:300]}" for e in res.errors]
    path.write_text("\n".join(lines) + "\n")


def write_html(path: Path, res: Results, nums: dict[str, Any]) -> bool:
    """The plotly report (plotly is a declared dependency); returns True once written, False
    where plotly is not installed (a GPU machine with only torch and triton: the tables and the
    JSON are the record, the report can be drawn from them elsewhere)."""
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError:
        return False

    figs = []
    names = list(dict.fromkeys(r.problem for r in res.shapes))
    by = {n: [r for r in res.shapes if r.problem == n] for n in names}
    fig = go.Figure()
    fig.add_bar(name="rules / baseline", x=names, y=[geomean([r.speedup_rules for r in by[n]]) for n in names])
    fig.add_bar(name="rules vs eager", x=names, y=[geomean([r.rules_vs_eager for r in by[n]]) for n in names])
    fig.add_bar(name="baseline vs eager", x=names, y=[geomean([r.baseline_vs_eager for r in by[n]]) for n in names])
    fig.update_layout(title="Speedup per problem (geometric mean over shapes)", barmode="group",
                      yaxis_type="log", yaxis_title="speedup (x)")
    figs.append(fig)
    if res.stages:
        stages = ["portability", *RULES_STAGES]
        fig = go.Figure()
        for st in stages:
            fig.add_bar(name=st, x=names, y=[next((s.speedup for s in res.stages if s.problem == n and s.stage == st
                                                   and s.status == "approved"), None) for n in names])
        fig.update_layout(title="Speedup per approved stage (over the version it started from)",
                          barmode="group", yaxis_type="log", yaxis_title="speedup (x)")
        figs.append(fig)
    if res.trajectory:
        fig = go.Figure()
        for shape in dict.fromkeys(r.variant for r in res.trajectory):
            rows = [r for r in res.trajectory if r.variant == shape and r.speedup is not None]
            fig.add_scatter(name=f"{shape} ({rows[0].dims if rows else ''})", mode="lines+markers",
                            x=[f"{r.step}. {r.stage}" for r in rows], y=[r.speedup for r in rows])
        fig.update_layout(title="Flash Attention trajectory: speedup over the naive baseline",
                          yaxis_type="log", yaxis_title="speedup (x)")
        figs.append(fig)
    pts = [r for r in res.shapes if r.tflops_rules is not None]
    if pts:
        fig = go.Figure()
        fig.add_scatter(name="baseline", mode="markers", x=[f"{r.problem} {r.variant}" for r in pts],
                        y=[r.roofline_baseline for r in pts])
        fig.add_scatter(name="rules", mode="markers", x=[f"{r.problem} {r.variant}" for r in pts],
                        y=[r.roofline_rules for r in pts])
        fig.update_layout(title="Fraction of the device roofline", yaxis_tickformat=".0%")
        figs.append(fig)
    d = res.device
    head = (f"<h1>Pipeline benchmark</h1><p>Device: <b>{d.get('name') or d.get('type')}</b>; "
            + ", ".join(f"{k} {v}" for k, v in res.versions.items() if v)
            + f"; {res.started} UTC; geometric-mean speedup of the rules engine over the baselines: "
            f"<b>{_fmt(nums['rules_over_baseline'])}x</b>.</p>")
    body = "".join(pio.to_html(f, full_html=False, include_plotlyjs="cdn" if i == 0 else False)
                   for i, f in enumerate(figs))
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>Pipeline benchmark</title>"
                    f"</head><body>{head}{body}</body></html>")
    return True


def write_outputs(out: Path, res: Results, order: list[str] | None = None,
                  html: bool = True) -> tuple[dict[str, Any], bool]:
    """Sort the rows (problems in ``order``, shapes bench-gpu first, stages in pipeline order) and
    write every output file into ``out``; returns the summary numbers and whether HTML was written."""
    rank = {name: i for i, name in enumerate(order or [])}
    res.shapes.sort(key=lambda r: (rank.get(r.problem, 10**6), _order_key(r.variant)))
    stage_order = ["portability", *RULES_STAGES]
    res.stages.sort(key=lambda s: (rank.get(s.problem, 10**6),
                                   stage_order.index(s.stage) if s.stage in stage_order else 99))
    res.trajectory.sort(key=lambda r: (r.step, _order_key(r.variant)))
    nums = summary_numbers(res)
    write_csv(out / "problems.csv", res.shapes)
    write_csv(out / "stages.csv", res.stages)
    write_csv(out / "trajectory.csv", res.trajectory)
    (out / "results.json").write_text(json.dumps({**asdict(res), "summary": nums}, indent=1, default=str))
    write_markdown(out / "summary.md", res, nums)
    return nums, (write_html(out / "report.html", res, nums) if html else False)


def _problem_order(res: Results) -> list[str]:
    """Samples first, then cases by their number prefix."""
    names = {r.problem: r.kind for r in res.shapes}
    return sorted(names, key=lambda n: (names[n] != "sample", _num_prefix(n), n))


def load_results(path: Path) -> Results:
    """A ``results.json`` written by this script back into :class:`Results`.

    Raises:
        ValueError: the file is not JSON or lacks a field, named with the file.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "empty" if not text.strip() else f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        raise ValueError(f"{path}: {what}; expected the results.json a run of bench_pipeline.py wrote") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON {type(data).__name__}, not the object bench_pipeline.py writes")
    missing = [k for k in ("started", "settings", "device", "versions", "shapes", "stages", "trajectory",
                           "errors", "seconds") if k not in data]
    if missing:
        raise ValueError(f"{path}: not a results.json of bench_pipeline.py (no field {', '.join(missing)})")
    try:
        return Results(
            started=data["started"], settings=data["settings"], device=data["device"],
            versions=data["versions"], shapes=[ShapeRow(**r) for r in data["shapes"]],
            stages=[StageRow(**r) for r in data["stages"]],
            trajectory=[TrajectoryRow(**r) for r in data["trajectory"]], errors=list(data["errors"]),
            seconds=float(data["seconds"]), complete=bool(data.get("complete", True)),
            parts=list(data.get("parts", [])))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: a row does not fit bench_pipeline.py's results ({type(exc).__name__}: {exc})") from exc


def merge_results(parts: list[Results], labels: list[str] | None = None) -> Results:
    """One report from runs over disjoint sets of problems on the same kind of device (a run too
    long for one sitting, split with ``--only``/``--skip-*``). Speedups stay ratios measured side
    by side inside one run; only the geometric means span runs.

    ``labels`` name the parts in errors (their file names; default: their start times).

    Raises:
        ValueError: no parts; parts from different device names or library versions; a problem,
            a stage or a trajectory step present in two parts.
    """
    if not parts:
        raise ValueError("nothing to merge")
    labels = labels or [p.started for p in parts]
    first = parts[0]
    for p, label in zip(parts[1:], labels[1:]):
        if p.device.get("name") != first.device.get("name"):
            raise ValueError(f"cannot merge runs on different devices: {first.device.get('name')!r} "
                             f"({labels[0]}) and {p.device.get('name')!r} ({label})")
        if p.versions != first.versions:
            raise ValueError(f"cannot merge runs with different libraries: {first.versions} ({labels[0]}) "
                             f"and {p.versions} ({label})")
    seen: dict[str, str] = {}
    for p, label in zip(parts, labels):
        for name in sorted({r.problem for r in p.shapes}):
            if name in seen:
                raise ValueError(f"problem {name} is in two runs ({seen[name]} and {label})")
            seen[name] = label
    if sum(1 for p in parts if p.trajectory) > 1:
        raise ValueError("the Flash Attention trajectory is in more than one run")
    merged = Results(started=first.started, settings=first.settings, device=first.device,
                     versions=first.versions, seconds=sum(p.seconds for p in parts),
                     complete=all(p.complete for p in parts))
    for p in parts:
        merged.shapes += p.shapes
        merged.stages += p.stages
        merged.trajectory += p.trajectory
        merged.errors += p.errors
        merged.parts += p.parts or [{"started": p.started, "seconds": round(p.seconds, 1),
                                     "complete": p.complete, "settings": p.settings,
                                     "problems": sorted({r.problem for r in p.shapes}),
                                     "trajectory": bool(p.trajectory)}]
    return merged


# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=Path, default=None, help="directory of Xe-Forge cases (kernel .py + .yaml)")
    ap.add_argument("--out", type=Path, required=True, help="output directory (created)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and trials; at most 6.5 minutes")
    ap.add_argument("--only", action="append", default=[], help="only problems whose name contains this "
                    "(repeatable); the trajectory runs only if it also matches 'flash' or 'trajectory'")
    ap.add_argument("--device", default=None, help="cuda, xpu, cuda:1, cpu (default: detected)")
    ap.add_argument("--jobs", type=int, default=None, help="problems verified in parallel (timing is serialised "
                    "by the device lock)")
    ap.add_argument("--max-shapes", type=int, default=None, help="bench shapes per problem (default 1 quick, 4 full)")
    ap.add_argument("--budget-min", type=float, default=None, help="stop starting new problems after this "
                    "many minutes (default 5 in --quick)")
    ap.add_argument("--deadline-min", type=float, default=None, help="stop every verification still running after "
                    "this many minutes, keeping what finished (default 6.5 in --quick)")
    ap.add_argument("--all-steps", action="store_true", help="time every trajectory step, also in --quick (by "
                    "default --quick times the last non-causal step and the causal one; "
                    "benchmarks/bench_flash_attention.py times every step against SDPA)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per verification job")
    ap.add_argument("--skip-samples", action="store_true")
    ap.add_argument("--skip-trajectory", action="store_true")
    ap.add_argument("--no-session", action="store_true", help="run stages without a git session")
    ap.add_argument("--use-cache", action="store_true", help="reuse cached verdicts (default: fresh numbers)")
    ap.add_argument("--keep-sessions", type=Path, default=None, help="keep the session repositories here")
    ap.add_argument("--merge", type=Path, action="append", default=[], metavar="RESULTS_JSON",
                    help="run nothing: merge the results.json of runs over disjoint problems into --out "
                    "(repeatable)")
    return ap.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    quick = bool(args.quick)
    budget = args.budget_min if args.budget_min is not None else (5.0 if quick else None)
    deadline = args.deadline_min if args.deadline_min is not None else (6.5 if quick else None)
    jobs = args.jobs or max(2, min(10, (os.cpu_count() or 4) - 4))
    return Settings(
        quick=quick, device=args.device, jobs=max(1, jobs), iterations=1 if quick else 2,
        seeds=1 if quick else 2, distributions=["normal"] if quick else ["normal", "uniform"],
        warmup_ms=10.0 if quick else 25.0, rep_ms=40.0 if quick else 100.0,
        timeout_s=args.timeout or (180.0 if quick else 300.0),
        max_shapes=args.max_shapes or (1 if quick else 4),
        budget_s=budget * 60 if budget else None, use_session=not args.no_session,
        trajectory_all=not quick or args.all_steps, deadline_s=deadline * 60 if deadline else None,
        use_cache=bool(args.use_cache), keep_sessions=args.keep_sessions)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out
    if args.merge:
        try:
            resolved = [p.resolve() for p in args.merge]
            twice = next((p for i, p in enumerate(args.merge) if resolved[i] in resolved[:i]), None)
            if twice is not None:
                raise ValueError(f"{twice} is given twice")
            merged = merge_results([load_results(p) for p in args.merge], labels=[str(p) for p in args.merge])
        except ValueError as exc:
            print(f"bench_pipeline: {exc}", file=sys.stderr)
            return 2
        out.mkdir(parents=True, exist_ok=True)
        nums, _ = write_outputs(out, merged, _problem_order(merged))
        print(f"[bench] merged {len(args.merge)} run{'s' if len(args.merge) != 1 else ''} into {out}: "
              "geometric-mean speedup rules/baseline "
              f"{_fmt(nums['rules_over_baseline'])}x", flush=True)
        return 0
    settings = settings_from(args)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(settings.budget_s, settings.deadline_s)
    started = _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")

    from xeforge_core.cache import library_versions
    from xeforge_core.devices import detect_device

    device = detect_device(settings.device)
    versions = {"python": platform.python_version(), **library_versions()}
    device_info = {"type": device.type, "index": device.index, "name": device.name,
                   "profile": (device.profile or {}).get("id") if isinstance(device.profile, dict) else None,
                   "warnings": list(device.warnings)}
    res = Results(started=started, settings={k: (str(v) if isinstance(v, Path) else v)
                                             for k, v in asdict(settings).items()},
                  device=device_info, versions=versions)
    print(f"[bench] device {device.label}; {', '.join(f'{k} {v}' for k, v in versions.items() if v)}", flush=True)

    rules_error = None
    try:
        import xeforge_core.codemods.common  # noqa: F401  (libcst)
        from xeforge_core.engines import get_engine
        from xeforge_core.knowledge import load_knowledge  # pydantic

        get_engine("rules")
        load_knowledge()
    except Exception as exc:  # e.g. libcst or pydantic missing on the GPU machine
        rules_error = f"{type(exc).__name__}: {exc}"
        print(f"[bench] rules engine unavailable ({rules_error}); timing baselines and eager only", flush=True)

    jobs = collect_jobs(args.cases.resolve() if args.cases else None, args.only, args.skip_samples, res.errors)
    run_traj = not args.skip_trajectory and (not args.only or any(
        o.lower() in ("flash", "trajectory", "attention", "flash_attention") for o in args.only))
    print(f"[bench] {len(jobs)} problems; trajectory: {'yes' if run_traj else 'no'}; "
          f"mode {'quick' if settings.quick else 'full'}", flush=True)

    lock = threading.Lock()
    tmp = tempfile.TemporaryDirectory(prefix="xeforge-bench-")
    workdir = settings.keep_sessions or Path(tmp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    # problems run in worker processes (codemods and analysis are pure Python: threads would share
    # one interpreter, and CPython 3.11 can fail on ast use from several threads at once)
    budget_end = time.time() + settings.budget_s if settings.budget_s else None
    deadline_end = time.time() + settings.deadline_s if settings.deadline_s else None
    with ProcessPoolExecutor(max_workers=settings.jobs, mp_context=multiprocessing.get_context("spawn")) as pool, \
            ThreadPoolExecutor(max_workers=1) as main_pool:
        traj_pool = ThreadPoolExecutor(max_workers=max(1, min(3, settings.jobs)))
        traj_future = (main_pool.submit(bench_trajectory, device, settings, traj_pool, budget, res.errors)
                       if run_traj else None)
        futures = {pool.submit(problem_task, job, device, settings, workdir, budget_end, deadline_end,
                               rules_error): job for job in jobs}
        for fut in as_completed(futures):
            job = futures[fut]
            try:
                rows, stages, errs = fut.result()
            except Exception as exc:
                rows, stages = [ShapeRow(job.kind, job.name, "-", "", note=_clip(f"failed: {exc}", 300))], []
                errs = [f"{job.name}: {exc}\n{traceback.format_exc(limit=4)}"]
            with lock:
                res.shapes.extend(rows)
                res.stages.extend(stages)
                res.errors.extend(errs)
            g = geomean([r.speedup_rules for r in rows])
            print(f"[bench] {budget.elapsed() / 60:5.1f} min  {job.name}: rules/baseline "
                  f"{_fmt(g)}x; stages {','.join(s.stage + '=' + s.status for s in stages) or '-'}", flush=True)
            with lock:  # a checkpoint: a run cut short still leaves every finished problem on disk
                res.seconds = budget.elapsed()
                write_outputs(out, res, [j.name for j in jobs], html=False)
        if traj_future is not None:
            try:
                res.trajectory = traj_future.result()
            except Exception as exc:
                res.errors.append(f"trajectory: {exc}\n{traceback.format_exc(limit=4)}")
        traj_pool.shutdown(wait=True)
    res.seconds = budget.elapsed()
    res.complete = not budget.cancel.is_set()
    budget.stop()
    nums, html = write_outputs(out, res, [j.name for j in jobs])
    print(f"[bench] done in {res.seconds / 60:.1f} min: geometric-mean speedup rules/baseline "
          f"{_fmt(nums['rules_over_baseline'])}x; wrote {out}/summary.md, problems.csv, stages.csv, "
          f"trajectory.csv, results.json{', report.html' if html else ' (plotly not installed: no HTML)'}",
          flush=True)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
