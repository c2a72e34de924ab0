"""Verify and time every step of the Flash Attention trajectory against torch's
scaled_dot_product_attention, on every benchmark shape, in one run (a script, not a test).

The trajectory is the run device's target family's (``flash_attention_trajectory``: the Hopper
steps on an NVIDIA GPU, the Xe steps on xpu and in the cpu interpreter). Four phases:

1. **verify** (parallel, one thread a step, each verification in its own worker processes):
   every step through the product's verifier (``xeforge_core.verify``) at every variant of its
   spec, the ``ci`` and ``check`` shapes and the ``bench-gpu*`` shapes (one seed, normal inputs, no timing),
   each ``@triton.autotune`` config on its own as the verifier always checks them. A step whose
   verdict is not ``ok`` is not timed: its numbers are never shown.
2. **check** (parallel worker processes, timing-free): every step at every benchmark shape, each
   config forced alone (and, with ``--sweep``, every config of the sweep grid), against SDPA in
   fp32 (absolute error at most ``ATOL``); this also compiles every kernel into Triton's cache, so
   the timing phase that follows compiles nothing.
3. **time** (serial, this process): per shape, the median of ``--rounds`` interleaved rounds of
   ``triton.testing.do_bench`` medians (L2 flushed before each call) of every verified step and of
   SDPA twice (A/A), in a rotated order so drift hits all alike. Per shape the noise is the larger
   of the A/A deviation ``|1 - sdpa_again / sdpa|`` and the spread of SDPA's per-round medians
   (max / min - 1); a step is *slower than the one before* when its time exceeds the previous
   step's by more than that noise.
4. **sweep** (``--sweep``, serial, while the deadline allows): for the last non-causal step and
   the causal one, the configs still in question (query tiles of 64 rows over one warpgroup and
   128 over two, key tiles of 64 and 128, two or three pipeline stages; only those whose shared
   memory fits this device, whose registers fit and that check right) timed alone per shape,
   beside the autotuner's pick and SDPA: which configs to keep in the search spaces.

TFLOP/s counts ``4 * B * A * S^2 * D`` (``2 * ...`` for the causal step, the visible half);
"roofline" is that over the profile's dense fp16 peak (989.5 TFLOP/s on the H200).

Outputs in ``--out`` (created, rewritten after every phase and shape, so a cut-short run keeps what
it measured): ``results.json`` (device, date, library versions, settings, per step its verdict at
every variant, per shape and step the times, A/A ratio, noise, TFLOP/s, ratio to SDPA and to the
step before, the config chosen; the sweep; the checks), ``summary.md`` (the tables),
``trajectory.csv`` and, with ``--sweep``, ``sweep.csv``; a short table is printed last. The app's
Flash Attention page reads ``results.json``.

Usage::

    python benchmarks/bench_flash_attention.py --out docs/measured/h200-flash-attention --sweep
    python benchmarks/bench_flash_attention.py --out /tmp/fa --shapes bench-gpu --steps 8,9
    python benchmarks/bench_flash_attention.py --out /tmp/fa --device cpu --steps 0,5,9 --variants ci

On an H200: about 2 minutes of verification and compiling (16 cores), under a minute of timing,
under a minute of sweep; ``--deadline-min`` (default 8.5) stops the sweep, then the timing, when
the run nears it. On cpu nothing is timed (Triton's interpreter; the ``ci`` shapes only).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import datetime as _dt
import importlib.util
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ATOL = 2e-2
PEAK_FP16_TFLOPS = 989.5  # knowledge/hardware/nvidia_h200.yaml (dense fp16, datasheet)
SMEM_BYTES = 232448       # shared memory a block may use on the H200 (the same profile)


@dataclass
class Row:
    """One step on one shape; times in µs, ratios > 1 mean faster than what they compare to."""

    step: int
    title: str
    stage: str
    causal: bool
    variant: str
    dims: str
    us: float | None = None
    sdpa_us: float | None = None
    aa_ratio: float | None = None          # SDPA timed twice: second median / first
    noise: float | None = None             # relative: max(|1 - aa_ratio|, SDPA's round-to-round spread)
    tflops: float | None = None
    roofline: float | None = None          # tflops / dense fp16 peak
    vs_sdpa: float | None = None           # sdpa_us / us
    vs_previous: float | None = None       # previous step's us / us (same shape)
    slower: bool | None = None             # slower than the step before by more than the noise
    max_err: float | None = None           # largest absolute error against SDPA (fp32), every config
    config: str = ""
    verdict: str = ""                      # the verifier's kind for the step (every variant)
    note: str = ""
    sdpa_backends: dict[str, float] = field(default_factory=dict)  # µs of SDPA held to each backend


@dataclass
class Results:
    started: str
    device: dict[str, Any]
    versions: dict[str, Any]
    target: str
    settings: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    verification: list[dict[str, Any]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    sweep: list[dict[str, Any]] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = False


# ------------------------------------------------------------------------------------- helpers

_MODULES: dict[str, Any] = {}


def load_step(path: str | Path, index: int) -> Any:
    """The step module at ``path`` (imported once per process)."""
    key = str(path)
    if key not in _MODULES:
        spec = importlib.util.spec_from_file_location(f"fa_step_{index}_{Path(path).parent.name}", path)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        _MODULES[key] = mod
    return _MODULES[key]


def tuners_of(mod: Any) -> list[Any]:
    """The module's autotuned kernels (one per head-dim class in the Hopper steps)."""
    from triton.runtime.autotuner import Autotuner

    return [v for v in vars(mod).values() if isinstance(v, Autotuner)]


def describe(cfg: Any) -> str:
    """``BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3``."""
    if cfg is None:
        return ""
    kw = ", ".join(f"{k}={v}" for k, v in getattr(cfg, "kwargs", {}).items())
    return f"{kw}, num_warps={getattr(cfg, 'num_warps', '?')}, num_stages={getattr(cfg, 'num_stages', '?')}"


def _select(mod: Any, select: tuple) -> list[tuple[Any, list[Any]]]:
    """Apply ``select`` to the module's autotuners; returns what to restore. ``("default",)``:
    as written (autotuning); ``("index", j)``: config j of every autotuner (the one the shape's
    head-dim class uses runs it); ``("sweep", args)``: the config ``mod._config(*args)``."""
    saved = [(t, list(t.configs)) for t in tuners_of(mod)]
    for t, configs in saved:
        if select[0] == "index":
            t.configs = [configs[min(int(select[1]), len(configs) - 1)]]
        elif select[0] == "sweep":
            t.configs = [mod._config(*select[1])]
        t.cache = {}
        t.best_config = None
    return saved


def _restore(saved: list[tuple[Any, list[Any]]]) -> None:
    for t, configs in saved:
        t.configs, t.cache = configs, {}


def config_key(cfg: Any) -> tuple:
    """``(BLOCK_M, BLOCK_N, num_warps, num_stages, *rest)`` of a config of a step with a
    per-head-dim ``SEARCH_SPACE``: the arguments of its ``_config``, where ``rest`` are the config's
    other meta-parameters in their order (step 10's loop form and lazy rescale)."""
    rest = tuple(v for k, v in cfg.kwargs.items() if k not in ("BLOCK_M", "BLOCK_N"))
    return (cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages, *rest)


def own_space(mod: Any, block_d: int) -> list[tuple]:
    """The :func:`config_key` of every config of ``mod``'s search space for padded head dim ``block_d``."""
    return [config_key(c) for c in mod.SEARCH_SPACE[min(k for k in mod.SEARCH_SPACE if k >= block_d)]]


def _forget_choices(mod: Any) -> None:
    """Clear each autotuner's last pick, so :func:`chosen` after a call names only what that call
    ran (a Hopper step has one autotuner per head-dim class; the others keep their last pick)."""
    for t in tuners_of(mod):
        t.best_config = None


def chosen(mod: Any) -> str:
    """The config the module's autotuners picked since :func:`_forget_choices`."""
    return "; ".join(describe(t.best_config) for t in tuners_of(mod) if getattr(t, "best_config", None) is not None)


def inputs(dims: dict[str, int], device: str, seed: int = 0) -> tuple[Any, Any, Any]:
    """Q, K, V [B, A, S, D] fp16 on ``device`` from a seeded normal draw (never zeros)."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, a, s, d = (int(dims[k]) for k in ("B", "A", "S", "D"))
    return tuple(torch.randn(b, a, s, d, generator=gen).to(torch.float16).to(device) for _ in range(3))  # type: ignore[return-value]


def flop(dims: dict[str, int], causal: bool) -> float:
    b, a, s, d = (int(dims[k]) for k in ("B", "A", "S", "D"))
    return (2.0 if causal else 4.0) * b * a * s * s * d


def dims_text(dims: dict[str, int]) -> str:
    return " ".join(f"{k}={dims[k]}" for k in ("B", "A", "S", "D"))


# ------------------------------------------------------------------------- phase 1: verify

def verify_steps(steps: list[Any], variants: dict[int, list[str]], device: str, workers: int,
                 timeout_s: float, log: Any) -> dict[int, dict[str, Any]]:
    """Every step through the product's verifier at its ``variants`` (correctness only), in
    parallel threads (each verification runs its own worker processes). Returns per step index
    ``{"kind", "reason", "variants", "runs", "failed", "summary", "seconds"}``."""
    from xeforge_core.devices import detect_device
    from xeforge_core.verify import VerifyOptions, verify

    naive = steps[0].problem
    info = detect_device(device)  # probed once, shared by every verification

    def one(step: Any) -> dict[str, Any]:
        opts = VerifyOptions(variants=variants[step.index], seeds=1, distributions=["normal"],
                             measure_performance=False, include_odd_size=False, grid_coverage=False,
                             use_cache=False, timeout_s=timeout_s)
        start = time.monotonic()
        try:
            # against the naive kernel as the baseline (cheap); the truth is the step's reference
            problem = step.problem if step.causal else naive
            v = verify(problem, step.code, device=info, options=opts, candidate_name=step.path.name)
        except Exception as exc:  # the verifier itself failing is reported, not raised
            return {"kind": "error", "reason": f"{type(exc).__name__}: {exc}", "variants": variants[step.index],
                    "seconds": time.monotonic() - start}
        corr = v.step("correctness")
        return {"kind": v.kind.value, "reason": v.reason, "variants": sorted({r.variant for r in v.correctness}),
                "runs": len(v.correctness), "failed": sum(not r.passed for r in v.correctness),
                "summary": corr.summary if corr is not None else "", "seconds": time.monotonic() - start}

    out: dict[int, dict[str, Any]] = {}
    with cf.ThreadPoolExecutor(max(1, workers)) as pool:
        futures = {pool.submit(one, s): s for s in steps}
        for fut in cf.as_completed(futures):
            step = futures[fut]
            out[step.index] = fut.result()
            r = out[step.index]
            log(f"verify step {step.index}: {r['kind']} ({r.get('runs', 0)} runs at {len(r['variants'])} variants, "
                f"{r['seconds']:.0f} s){'' if r['kind'] == 'ok' else ': ' + str(r['reason'])[:200]}")
    return out


# -------------------------------------------------------------------------- phase 2: check

def _task_keys(task: dict[str, Any]) -> dict[str, Any]:
    """What identifies a check in its row: step, variant, selection, kind."""
    return {k: task[k] for k in ("step", "variant", "select", "kind")}


def check_task(task: dict[str, Any]) -> dict[str, Any]:
    """In a worker process: one step at one shape with one selection (see :func:`_select`),
    against SDPA in fp32. Returns the task's keys plus ``config`` (what ran), ``max_err``, ``ok``,
    ``seconds`` (compile and run) or ``error``."""
    import torch
    import torch.nn.functional as F

    out = _task_keys(task)
    start = time.monotonic()
    try:
        mod = load_step(task["path"], task["step"])
        q, k, v = inputs(task["dims"], task["device"], seed=1)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=task["causal"])
        saved = _select(mod, tuple(task["select"]))  # clears every autotuner's pick too
        try:
            res = mod.kernel_function(q, k, v)
            if task["device"].startswith("cuda"):
                torch.cuda.synchronize()
            out["config"] = chosen(mod)
        finally:
            _restore(saved)
        err = (res.float() - ref).abs()
        out["max_err"] = float(err.max()) if bool(torch.isfinite(res.float()).all()) else float("inf")
        out["ok"] = out["max_err"] <= ATOL
    except Exception as exc:  # a config that fails to compile or run is a finding
        out["ok"] = False
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:240] if str(exc) else ''}"
    out["seconds"] = time.monotonic() - start
    return out


#: Seconds one check (compile and one call) may take before it counts as a hang: the slowest
#: right config compiled and ran in under 10 s on the H200 with 14 checks at once; the
#: warp-specialized step 10 configs never finished (docs/measured/h200-fa-ws-hang).
CHECK_TIMEOUT_S = 180.0


def _check_row(task: dict[str, Any], error: str, seconds: float) -> dict[str, Any]:
    return {**_task_keys(task), "ok": False, "error": error, "seconds": seconds}


def run_checks(tasks: list[dict[str, Any]], workers: int, log: Any,
               task_timeout_s: float = CHECK_TIMEOUT_S) -> list[dict[str, Any]]:
    """:func:`check_task` over ``tasks`` in ``workers`` spawned processes (each keeps its modules
    and compiled kernels; Triton's on-disk cache is shared with this process), in task order. A
    check with no result after ``task_timeout_s`` seconds is a hang: its worker is killed (the
    kernel with it) and the check is wrong with ``hang`` set; a worker that dies is a crash."""
    from bounded_pool import run_bounded

    if not tasks:
        return []
    done: list[tuple[int, dict[str, Any]]] = []

    def hung(task: dict[str, Any], seconds: float) -> dict[str, Any]:
        return {**_check_row(task, f"hang: no result in {seconds:.0f} s (the kernel never finished)", seconds),
                "hang": True}

    def crashed(task: dict[str, Any], code: int | None) -> dict[str, Any]:
        return _check_row(task, f"crash: the check's worker died (exit code {code})", 0.0)

    for index, res in run_bounded(check_task, tasks, workers=max(1, workers), task_timeout_s=task_timeout_s,
                                  on_timeout=hung, on_crash=crashed):
        done.append((index, res))
        if not res.get("ok"):
            log(f"check step {res['step']} at {res['variant']} {res['select']}: "
                + (res.get("error") or f"max abs error {res.get('max_err'):.3g} > {ATOL}"))
        if len(done) % 50 == 0:
            log(f"checked {len(done)}/{len(tasks)}")
    return [res for _, res in sorted(done, key=lambda d: d[0])]


# --------------------------------------------------------------------------- phase 3: time

def _median_time(fn: Any, warmup: int, rep: int) -> float:
    """µs: triton.testing.do_bench's median (L2 flushed before each call)."""
    import triton

    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")) * 1e3


def measure(fns: dict[str, Any], rounds: int, warmup: int, rep: int) -> dict[str, list[float]]:
    """Per callable, its do_bench median in each of ``rounds`` rounds, the order rotated per round."""
    names = list(fns)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            samples[n].append(_median_time(fns[n], warmup, rep))
    return samples


def noise_of(sdpa: list[float], sdpa_again: list[float]) -> tuple[float, float]:
    """(A/A ratio of the medians, relative noise): the noise is the larger of the A/A deviation and
    the round-to-round spread of either SDPA series (max / min - 1)."""
    a, b = statistics.median(sdpa), statistics.median(sdpa_again)
    ratio = b / a
    spread = max(max(s) / min(s) - 1.0 for s in (sdpa, sdpa_again))
    return ratio, max(abs(1.0 - ratio), spread)


#: SDPA's backends timed beside its default pick (torch.nn.attention.SDPBackend names): which
#: one the default is shows in which it matches; a backend that refuses the shape is left out.
SDPA_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")


def _sdpa_on(backend: str, q: Any, k: Any, v: Any, causal: bool) -> Any:
    """A callable: SDPA held to ``backend``, or None where that backend refuses these inputs."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = getattr(SDPBackend, backend, None)
    if chosen is None:
        return None

    def run() -> Any:
        with sdpa_kernel([chosen]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    try:
        run()
    except RuntimeError:
        return None
    return run


def time_shape(steps: list[Any], modules: dict[int, Any], verified: set[int], name: str, dims: dict[str, int],
               device: str, args: argparse.Namespace, check_errs: dict[tuple[int, str], float]) -> list[Row]:
    """The rows of one benchmark shape: every verified step and SDPA (twice), interleaved."""
    import torch.nn.functional as F

    q, k, v = inputs(dims, device, seed=0)
    rows: list[Row] = []
    fns: dict[str, Any] = {}
    for c in (False, True):
        fns[f"sdpa{int(c)}"] = partial(F.scaled_dot_product_attention, q, k, v, is_causal=c)
        fns[f"sdpa{int(c)}_again"] = partial(F.scaled_dot_product_attention, q, k, v, is_causal=c)
        for backend in SDPA_BACKENDS:
            fn = _sdpa_on(backend, q, k, v, c)
            if fn is not None:
                fns[f"sdpa{int(c)}:{backend}"] = fn
    for step in steps:
        row = Row(step=step.index, title=step.title, stage=step.stage, causal=step.causal, variant=name,
                  dims=dims_text(dims), max_err=check_errs.get((step.index, name)))
        rows.append(row)
        if step.index not in verified:
            row.note = "not timed: not verified ok at every variant"
            continue
        mod = modules[step.index]
        try:
            _forget_choices(mod)
            mod.kernel_function(q, k, v)  # autotunes now (compiled kernels come from the check phase)
            row.config = chosen(mod)
            fns[f"step{step.index}"] = partial(mod.kernel_function, q, k, v)
        except Exception as exc:
            row.note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    samples = measure(fns, args.rounds, args.warmup, args.rep)
    med = {n: statistics.median(v) for n, v in samples.items()}
    prev: Row | None = None
    for row in rows:
        c = int(row.causal)
        row.sdpa_us = med[f"sdpa{c}"]
        row.aa_ratio, row.noise = noise_of(samples[f"sdpa{c}"], samples[f"sdpa{c}_again"])
        row.sdpa_backends = {b: med[f"sdpa{c}:{b}"] for b in SDPA_BACKENDS if f"sdpa{c}:{b}" in med}
        us = med.get(f"step{row.step}")
        if us is not None:
            row.us = us
            row.tflops = flop(dims, row.causal) / (us * 1e-6) / 1e12
            row.roofline = row.tflops / PEAK_FP16_TFLOPS
            row.vs_sdpa = row.sdpa_us / us
            if not row.causal and prev is not None and prev.us:
                row.vs_previous = prev.us / us
                row.slower = us > prev.us * (1.0 + row.noise)
        if not row.causal and row.us is not None:
            prev = row
    return rows


# -------------------------------------------------------------------------- phase 4: sweep

#: Registers a thread may hold in the pipelined loop's fp32 tiles (accumulator, scores and the
#: probabilities waiting for their P V) before the sm_90 compiler spills: 192 of them compile to
#: 241 registers at BLOCK_M = BLOCK_N = BLOCK_D = 128 over 8 warps (docs/measured/cpu-fa-hopper-compile).
TILE_REGISTERS = 192


def sweep_grid(mod: Any, block_d: int, causal: bool, smem_limit: int) -> list[tuple]:
    """``_config`` arguments ``(BLOCK_M, BLOCK_N, num_warps, num_stages)`` of the configs still in
    question for a step with a per-head-dim ``SEARCH_SPACE`` at padded head dim ``block_d``: 64
    query rows over one warpgroup or 128 over two, 64- or 128-key blocks, two or three stages
    (the H200's first sweep, 2026-12-02, ranked no 32-key block, no four-stage pipeline and no
    64-row tile over two warpgroups first on any shape); kept only where the step's shared-memory
    estimate fits ``smem_limit`` and its fp32 tiles fit :data:`TILE_REGISTERS`; causal steps need
    BLOCK_M a multiple of BLOCK_N. The step's own search space comes first."""
    own = own_space(mod, block_d)
    grid: list[tuple] = []
    for bm, bn, stages in itertools.product((64, 128), (64, 128), (2, 3)):
        warps = 4 if bm == 64 else 8
        if causal and bm % bn:
            continue
        if (bm * block_d + 2 * bm * bn) / (32 * warps) > TILE_REGISTERS:
            continue
        cfg = mod._config(bm, bn, warps, stages)
        if mod.smem_bytes(cfg, block_d) > smem_limit:
            continue
        grid.append(config_key(cfg))  # the step's defaults for any further meta-parameter spelled out
    return own + [g for g in grid if g not in own]


def smem_limit(device: str) -> int:
    """Shared memory a block may use on ``device`` (the H200's where it cannot be asked)."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        return int(getattr(props, "shared_memory_per_block_optin", SMEM_BYTES))
    return SMEM_BYTES


def block_d_class(mod: Any, d: int) -> int:
    """The padded head dim (split parts added up) a Hopper step computes ``d`` at."""
    import triton

    if hasattr(mod, "head_dim_blocks"):
        d0, d1, split = mod.head_dim_blocks(d)
        return triton.next_power_of_2(d0 + (d1 if split else 0))
    return max(16, triton.next_power_of_2(d))


# -------------------------------------------------------------------------------- outputs

def write_outputs(out: Path, res: Results) -> None:
    """results.json, trajectory.csv, sweep.csv and summary.md (rewritten after every phase)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(asdict(res), indent=1, default=str))
    rows = [asdict(r) for r in res.rows]
    with (out / "trajectory.csv").open("w", newline="") as fh:
        if rows:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if res.sweep:
        keys = list(dict.fromkeys(k for s in res.sweep for k in s))
        with (out / "sweep.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            w.writerows(res.sweep)
    (out / "summary.md").write_text(summary_markdown(res))


def _fmt(v: float | None, digits: int = 2) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"


def summary_markdown(res: Results) -> str:
    """The verification verdicts; per step and shape µs, TFLOP/s, x SDPA and x the step before;
    the steps slower than the one before beyond the shape's noise; the last non-causal step
    against SDPA; the sweep's best configs."""
    d = res.device
    shapes = list(dict.fromkeys(r.variant for r in res.rows))
    dims = {r.variant: r.dims for r in res.rows}
    s = res.settings
    lines = [
        "# Flash Attention trajectory vs scaled_dot_product_attention",
        "",
        f"- Device: **{d.get('name')}** ({d.get('type')}); target family {res.target}; "
        + ", ".join(f"{k} {v}" for k, v in res.versions.items()),
        f"- Run: {res.started} UTC, {res.seconds / 60:.1f} min{'' if res.complete else ' (incomplete)'} ("
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in res.phases.items()) + ")",
        f"- Verified: every step through the product's verifier at every variant of its spec "
        f"({', '.join(s.get('variants') or [])}); only steps verified ok are timed.",
        f"- Timing: median of {s.get('rounds')} interleaved rounds of triton.testing.do_bench medians "
        f"({s.get('warmup')} ms warm-up, {s.get('rep')} ms), L2 flushed before each call; noise per shape: the "
        "larger of SDPA's A/A deviation and its round-to-round spread.",
        f"- TFLOP/s: 4·B·A·S²·D (causal: half); roofline: fraction of the dense fp16 peak ({PEAK_FP16_TFLOPS} "
        "TFLOP/s). x SDPA > 1: faster than torch. x prev: over the step before it on the same shape.",
        "",
        "## Verification (the product's verifier, on this device)",
        "",
        "| step | title | verdict | variants | runs | seconds |",
        "|---|---|---|---|---|---|",
    ]
    titles = {m["index"]: m["title"] for m in res.steps}
    for v in sorted(res.verification, key=lambda v: v["step"]):
        verdict = v["kind"] + ("" if v["kind"] == "ok" else f": {str(v.get('reason'))[:160]}")
        lines.append(f"| {v['step']} | {titles.get(v['step'], '')} | {verdict} | {len(v.get('variants') or [])} | "
                     f"{v.get('runs', '–')} | {_fmt(v.get('seconds'), 0)} |")
    bad_checks = [c for c in res.checks if not c.get("ok")]
    checked = ", ".join(dict.fromkeys(c["variant"] for c in res.checks)) or "no shape"
    lines += ["", f"Checks against SDPA in fp32 at {checked} (every config alone): {len(res.checks)} run, "
              f"{len(bad_checks)} off" + (": " + "; ".join(
                  f"step {c['step']} {c['variant']} {c.get('config') or c['select']}: "
                  f"{c.get('error') or _fmt(c.get('max_err'), 3)}" for c in bad_checks[:12]) if bad_checks else ".")]
    if res.rows:
        lines += ["", "## Every step on every shape", "",
                  "| step | stage | " + " | ".join(f"{x} ({dims[x]})" for x in shapes) + " |",
                  "|---|---|" + "---|" * len(shapes)]
        for step in sorted({r.step for r in res.rows}):
            rs = {r.variant: r for r in res.rows if r.step == step}
            first = next(iter(rs.values()))
            cells = []
            for x in shapes:
                r = rs.get(x)
                if r is None:
                    cells.append("–")
                elif r.us is None:
                    cells.append(r.note[:60] or "–")
                else:
                    cells.append(f"{_fmt(r.us, 1)} µs, {_fmt(r.tflops, 0)} TFLOP/s, {_fmt(r.vs_sdpa)}x SDPA, "
                                 f"{_fmt(r.vs_previous)}x prev" + (" **slower**" if r.slower else ""))
            lines.append(f"| {step}. {first.title}{' (causal)' if first.causal else ''} | {first.stage} | "
                         + " | ".join(cells) + " |")
        slower = [r for r in res.rows if r.slower]
        lines += ["", "## Steps slower than the step before them beyond the noise", ""]
        lines += [f"- step {r.step} on {r.variant}: {_fmt(r.vs_previous, 3)}x (noise on that shape "
                  f"{_fmt(100 * (r.noise or 0), 1)}%, A/A {_fmt(r.aa_ratio, 3)})" for r in slower] or ["- none"]
        last = max((r.step for r in res.rows if not r.causal and r.us is not None), default=None)
        lines += ["", "## Last non-causal step vs SDPA (goal: at least 0.95x on every shape)", ""]
        for r in res.rows:
            if r.step == last:
                goal = "meets" if (r.vs_sdpa or 0) >= 0.95 else "misses"
                lines.append(f"- {r.variant} ({r.dims}): {_fmt(r.vs_sdpa, 3)}x SDPA, {goal} 0.95x; "
                             f"{_fmt(r.tflops, 0)} TFLOP/s vs SDPA "
                             f"{_fmt(r.tflops / r.vs_sdpa if r.tflops and r.vs_sdpa else None, 0)}"
                             + (f"; config {r.config}" if r.config else ""))
        lines += sdpa_backend_lines(res.rows, last)
    if res.sweep:
        lines += ["", "## Sweep: the fastest configs per step and shape", "",
                  "| step | shape | rank | config | µs | x autotuned | x SDPA |", "|---|---|---|---|---|---|---|"]
        for (step, variant), group in itertools.groupby(
                sorted(res.sweep, key=lambda e: (e["step"], e["variant"], e.get("us") or 1e30)),
                key=lambda e: (e["step"], e["variant"])):
            for rank, e in enumerate([e for e in group if e.get("us")][:5], 1):
                lines.append(f"| {step} | {variant} | {rank} | {e['config']} | {_fmt(e['us'], 1)} | "
                             f"{_fmt(e.get('vs_autotuned'))} | {_fmt(e.get('vs_sdpa'))} |")
    if res.errors:
        lines += ["", "## Errors", ""] + [f"- {e.splitlines()[0][:300]}" for e in res.errors]
    return "\n".join(lines) + "\n"


def sdpa_backend_lines(rows: list[Row], last: int | None) -> list[str]:
    """Per shape, SDPA's default and each backend it can be held to, µs, and the last non-causal
    step against each: which kernel "SDPA" is on this device and how the step compares to the
    others a user could pick."""
    picked = [r for r in rows if r.step == last and r.sdpa_backends and r.us]
    if not picked:
        return []
    names = [b for b in SDPA_BACKENDS if any(b in r.sdpa_backends for r in picked)]
    lines = ["", "## SDPA's backends (non-causal): µs, and the last non-causal step's speedup over each", "",
             "| shape | default | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for r in picked:
        cells = [f"{_fmt(r.sdpa_us, 1)} µs ({_fmt(r.sdpa_us / r.us, 2)}x)"]
        cells += [f"{_fmt(r.sdpa_backends[b], 1)} µs ({_fmt(r.sdpa_backends[b] / r.us, 2)}x)"
                  if b in r.sdpa_backends else "refused" for b in names]
        lines.append(f"| {r.variant} | " + " | ".join(cells) + " |")
    return lines


def short_table(res: Results) -> str:
    """Steps x shapes, x SDPA (what the run prints last), with the verdicts."""
    shapes = list(dict.fromkeys(r.variant for r in res.rows))
    verdicts = {v["step"]: v["kind"] for v in res.verification}
    out = ["step".ljust(48) + "verdict".rjust(14) + "".join(x[-12:].rjust(13) for x in shapes)]
    for m in res.steps:
        rs = {r.variant: r for r in res.rows if r.step == m["index"]}
        cells = "".join(((f"{rs[x].vs_sdpa:.2f}x" + ("!" if rs[x].slower else "")) if x in rs and rs[x].vs_sdpa
                         else "-").rjust(13) for x in shapes)
        out.append(f"{m['index']}. {m['title']}"[:47].ljust(48) + verdicts.get(m["index"], "-").rjust(14) + cells)
    return "\n".join(out)


# ----------------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="output directory (created)")
    ap.add_argument("--device", default=None, help="cuda, cuda:1, xpu or cpu (default: the available GPU)")
    ap.add_argument("--target", default=None, help="trajectory family (xpu, cuda; default: the device's)")
    ap.add_argument("--shapes", default="", help="comma-separated benchmark variants to time (default: every bench-gpu*)")
    ap.add_argument("--variants", default="", help="comma-separated variants to verify at (default: the ci and check "
                                                   "shapes, and on a GPU every bench-gpu* too)")
    ap.add_argument("--steps", default="", help="comma-separated step indices (default: all)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (median taken)")
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    ap.add_argument("--rep", type=int, default=60, help="do_bench measuring time, ms")
    ap.add_argument("--sweep", action="store_true", help="also time a grid of configs of the last steps per shape")
    ap.add_argument("--workers", type=int, default=0, help="parallel verifications and check processes "
                                                           "(default: from the CPU count)")
    ap.add_argument("--timeout", type=float, default=240.0,
                    help="verifier job limit, seconds (a config that hangs costs this much before it is a timeout)")
    ap.add_argument("--check-timeout", type=float, default=CHECK_TIMEOUT_S,
                    help="seconds one check against SDPA may take before it counts as a hang")
    ap.add_argument("--deadline-min", type=float, default=8.5, help="stop the sweep, then the timing, past this")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import triton

    from xeforge_core.samples import check_variants, flash_attention_trajectory

    dev_name = args.device or ("cuda" if torch.cuda.is_available() else
                               "xpu" if hasattr(torch, "xpu") and torch.xpu.is_available() else "cpu")
    device = torch.device(dev_name)
    timed = device.type != "cpu"
    if not timed:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    start = time.monotonic()
    deadline = start + 60 * args.deadline_min
    steps = flash_attention_trajectory(args.target or device.type)
    pick = {int(s) for s in args.steps.split(",") if s.strip()}
    steps = [s for s in steps if not pick or s.index in pick or s.index == 0]
    target = steps[-1].target or "shared"
    naive = steps[0].problem
    bench_names = [n for n in naive.spec.variants if n.startswith("bench-gpu")]
    shapes = [n for n in (args.shapes.split(",") if args.shapes else bench_names) if n in bench_names] if timed else []
    wanted = [v for v in args.variants.split(",") if v.strip()]
    variants = {}
    for s in steps:
        names = list(s.problem.spec.variants)
        default = check_variants(s.problem) + ([n for n in names if n.startswith("bench-gpu")] if timed else [])
        variants[s.index] = [n for n in names if n in wanted] if wanted else default
    cpus = os.cpu_count() or 2
    workers = args.workers or max(1, min(len(steps), cpus - 2))
    name = (torch.cuda.get_device_name(device) if device.type == "cuda" else
            torch.xpu.get_device_name(device) if device.type == "xpu" else platform.processor() or "cpu")
    res = Results(started=_dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                  device={"type": device.type, "name": name, "index": device.index or 0},
                  versions={"python": platform.python_version(), "torch": torch.__version__,
                            "triton": triton.__version__},
                  target=target,
                  settings={"rounds": args.rounds, "warmup": args.warmup, "rep": args.rep, "shapes": shapes,
                            "steps": [s.index for s in steps], "atol": ATOL, "sweep": args.sweep,
                            "variants": sorted({v for vs in variants.values() for v in vs}), "workers": workers},
                  steps=[{"index": s.index, "title": s.title, "stage": s.stage, "rule_id": s.rule_id,
                          "causal": s.causal, "file": str(s.path.relative_to(ROOT))} for s in steps])

    def log(msg: str) -> None:
        print(f"[fa] {(time.monotonic() - start) / 60:4.1f} min  {msg}", flush=True)

    def phase(label: str, t0: float) -> None:
        res.phases[label] = time.monotonic() - t0
        res.seconds = time.monotonic() - start
        write_outputs(args.out, res)

    log(f"{name}: {len(steps)} steps of the {target} trajectory, verified at {len(res.settings['variants'])} "
        f"variants, timed at {len(shapes)} shapes; {workers} workers")

    # the check tasks (every step at every timed shape, each config alone) and the sweep grid
    modules = {s.index: load_step(s.path, s.index) for s in steps}
    check_shapes = shapes or ["ci"]
    tasks: list[dict[str, Any]] = []
    sweep_plan: dict[tuple[int, str], list[tuple]] = {}
    limit = smem_limit(dev_name)
    last = max((s.index for s in steps if not s.causal), default=0)
    sweep_steps = [s for s in steps if (s.index == last or s.causal) and hasattr(modules[s.index], "SEARCH_SPACE")]
    for s in steps:
        n_cfg = max([len(t.configs) for t in tuners_of(modules[s.index])] or [1])
        for vname in check_shapes:
            dims = dict(s.problem.variant(vname).dims)
            base = {"step": s.index, "path": str(s.path), "variant": vname, "dims": dims, "causal": s.causal,
                    "device": dev_name}
            for j in range(n_cfg):
                tasks.append({**base, "select": ("index", j) if n_cfg > 1 else ("default",), "kind": "config"})
            if args.sweep and s in sweep_steps:
                mod = modules[s.index]
                grid = sweep_grid(mod, block_d_class(mod, int(dims["D"])), s.causal, limit)
                sweep_plan[(s.index, vname)] = grid
                tasks += [{**base, "select": ("sweep", g), "kind": "sweep"} for g in grid]

    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(1) as side:
        checks = side.submit(run_checks, tasks, max(1, cpus - workers) if timed else 1, log, args.check_timeout)
        verdicts = verify_steps(steps, variants, dev_name, workers, args.timeout, log)
        res.verification = [{"step": i, **v} for i, v in sorted(verdicts.items())]
        phase("verification", t0)
        try:
            res.checks = checks.result()
        except Exception as exc:
            res.errors.append(f"checks: {exc}\n{traceback.format_exc(limit=3)}")
    phase("verification and checks", t0)
    verified = {i for i, v in verdicts.items() if v["kind"] == "ok"}
    errs: dict[tuple[int, str], float] = {}
    for c in res.checks:
        if c["kind"] == "config":
            key = (c["step"], c["variant"])
            errs[key] = max(errs.get(key, 0.0), c.get("max_err", float("inf")) if "error" not in c else float("inf"))

    t0 = time.monotonic()
    for vname in shapes:
        if time.monotonic() > deadline:
            res.errors.append(f"timing of {vname} skipped: past the {args.deadline_min} min deadline")
            continue
        dims = dict(naive.variant(vname).dims)
        try:
            res.rows += time_shape(steps, modules, verified, vname, dims, dev_name, args, errs)
        except Exception as exc:
            res.errors.append(f"timing {vname}: {exc}\n{traceback.format_exc(limit=3)}")
        phase("time", t0)
        log(f"timed {vname}: " + ", ".join(f"{r.step}:{r.vs_sdpa:.2f}x" for r in res.rows
                                          if r.variant == vname and r.vs_sdpa))
    if not timed:
        for s in steps:
            v = verdicts.get(s.index, {})
            res.rows.append(Row(step=s.index, title=s.title, stage=s.stage, causal=s.causal, variant="ci",
                                dims=dims_text(dict(s.problem.variant("ci").dims)), verdict=v.get("kind", ""),
                                max_err=errs.get((s.index, "ci")), note="verified; not timed (interpreter)"))
    for r in res.rows:
        r.verdict = verdicts.get(r.step, {}).get("kind", "")

    if args.sweep and timed:
        t0 = time.monotonic()
        ok = {(c["step"], c["variant"], tuple(c["select"][1])) for c in res.checks
              if c["kind"] == "sweep" and c.get("ok")}
        import torch.nn.functional as F

        for (index, vname), grid in sweep_plan.items():
            if time.monotonic() > deadline:
                res.errors.append(f"sweep of step {index} at {vname} skipped: past the deadline")
                continue
            step = next(s for s in steps if s.index == index)
            mod = modules[index]
            dims = dict(step.problem.variant(vname).dims)
            q, k, v = inputs(dims, dev_name, seed=0)
            auto = next((r for r in res.rows if r.step == index and r.variant == vname), None)
            sdpa_us = _median_time(partial(F.scaled_dot_product_attention, q, k, v, is_causal=step.causal),
                                   args.warmup, args.rep)
            own = set(own_space(mod, block_d_class(mod, int(dims["D"]))))
            for g in grid:
                entry = {"step": index, "variant": vname, "dims": dims_text(dims), "config": describe(mod._config(*g)),
                         "in_search_space": tuple(g) in own}
                if (index, vname, tuple(g)) not in ok:
                    entry["note"] = "wrong or failed in the check phase: not timed"
                    res.sweep.append(entry)
                    continue
                saved = _select(mod, ("sweep", g))
                try:
                    us = _median_time(partial(mod.kernel_function, q, k, v), args.warmup, args.rep)
                    entry.update(us=us, tflops=flop(dims, step.causal) / (us * 1e-6) / 1e12, vs_sdpa=sdpa_us / us,
                                 vs_autotuned=(auto.us / us) if auto is not None and auto.us else None)
                except Exception as exc:
                    entry["note"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                finally:
                    _restore(saved)
                res.sweep.append(entry)
            phase("sweep", t0)
            best = min((e for e in res.sweep if e["step"] == index and e["variant"] == vname and e.get("us")),
                       key=lambda e: e["us"], default=None)
            if best is not None:
                log(f"sweep step {index} at {vname}: best {best['config']} {best['us']:.1f} µs, "
                    f"{best['vs_sdpa']:.2f}x SDPA")

    res.seconds = time.monotonic() - start
    res.complete = not res.errors
    write_outputs(args.out, res)
    print(short_table(res), flush=True)
    log(f"wrote {args.out}/summary.md, results.json, trajectory.csv" + (", sweep.csv" if res.sweep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
