"""Benchmark of the verifier's timing and latency (a script, not a test; meant for one GPU).

What it measures, in this order, checkpointing ``OUT_DIR/results.json`` after every step:

1. **Latency**: ``verify()`` of ``sample_kernels/01_vector_add.py`` against itself, cold
   (empty caches), warm (a new candidate text: the baseline's saved outputs are reused) and
   cached (the same pair again: the verdict cache answers). Wall seconds, the sum of the
   verdict's steps, their ratio. Goal: a small kernel's verification <= 5 s wall and <= 1.5x
   the sum of its steps; a cached verdict about 0.02 s.
2. **A/A, small kernels** (5-50 µs; ``benchmarks/kernels/small_kernels.py``, each family sized
   on the device by doubling until ``do_bench_cudagraph`` reaches a target time): the
   verifier's timing procedure (``xeforge_core.worker.timing.measure``, with the verifier's
   default options) run ``--aa-runs`` times (100) on two copies of the same kernel in one
   process. Goal: speedup in [0.98, 1.02] or "no measurable difference" in >= 95 % of runs.
   The same process then times the kernel with ``triton.testing.do_bench`` and
   ``do_bench_cudagraph`` (agreement goal: within 3 % of the one matching the method the
   verifier chose), and with the earlier per-call procedure (synchronise, flush, record,
   call), whose median/min ratio shows the fault that was fixed.
3. **Repeatability**: ``--repeats`` (10) fresh verifications of the GEMM pair in
   ``benchmarks/kernels/`` (each a new candidate text, so new worker processes and no cached
   verdict). Goal: coefficient of variation of the speedup <= 2 % (kernels >= 50 µs).
4. **A/A, samples**: as 2., on the sample problems at their ``bench-gpu`` shapes, cheapest
   first, as many as the time budget leaves (a sample the budget cannot fit is listed as not
   run; one that fits fewer than ``--aa-runs`` runs says how many it got).

Everything runs within ``--budget-s`` (default 345 s: the whole script, start-up included,
stays under 6 minutes on one H200); sections get shares of what is left and stop early rather
than overrun. Writes ``OUT_DIR/results.json``, ``OUT_DIR/report.md`` (date, device, library
versions, every table), ``OUT_DIR/aa-small.jsonl`` / ``OUT_DIR/aa-samples.jsonl`` (one line per
kernel, as measured) and ``OUT_DIR/log.txt``; prints the goals table last::

    python benchmarks/bench_verifier.py OUT_DIR [--device cuda] [--budget-s 345]
    python benchmarks/bench_verifier.py /tmp/bench-cpu --device cpu --quick   # anywhere, in minutes

On cpu (Triton's interpreter, ``force_timing``) the numbers say nothing about speed; that mode
exists to exercise every path of the script before GPU time is spent on it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = ROOT / "benchmarks" / "kernels"
SAMPLES = ROOT / "sample_kernels"
SMALL = KERNELS / "small_kernels.py"
GEMM_BASELINE = KERNELS / "gemm_fp32_upcast.py"
GEMM_CANDIDATE = KERNELS / "gemm_fp16_dot.py"
LATENCY_SAMPLE = SAMPLES / "01_vector_add.py"

#: Small kernels for the A/A table: (family, target µs on the device).
SMALL_TARGETS = [("softmax_lse", 10.0), ("matvec", 15.0), ("vector_add", 5.0), ("vector_add", 25.0),
                 ("matvec", 45.0)]
#: Samples for the A/A table, roughly cheapest first (H200 times of the pipeline benchmark), except
#: the max-pool sample (7.7 ms), second because the pipeline benchmark saw it at 0.93x A/A.
SAMPLE_ORDER = ["01_vector_add", "11_maxpool2d", "05_rmsnorm", "04_layernorm", "12_conv2d_im2col",
                "02_elementwise_chain", "09_gemm_rowsum", "03_row_softmax", "13_flash_attention_fwd",
                "07_gemm_fp32_upcast", "06_sum_reduction", "08_gemm_bias_act", "10_batched_gemm"]

#: Least A/A runs a sample gets when the samples share what is left of the budget.
MIN_SPREAD_RUNS = 20

AA_BAND = (0.98, 1.02)
AA_GOAL = 0.95
CV_GOAL = 0.02
AGREEMENT_GOAL = 0.03
LATENCY_GOAL_S = 5.0
LATENCY_RATIO_GOAL = 1.5
CACHED_GOAL_S = 0.05  # "as now (0.02 s)"; 0.05 leaves room for a loaded host

_LOG: list[str] = []
_OUT: Path | None = None


def log(message: str) -> None:
    """Print to stderr and keep for ``log.txt``."""
    line = f"[{time.strftime('%H:%M:%S')}] {message}"
    print(line, file=sys.stderr, flush=True)
    _LOG.append(line)
    if _OUT is not None:
        with open(_OUT / "log.txt", "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------------------------------
# statistics of the sections


def aa_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and spread of A/A runs (each with ``speedup`` and ``call``)."""
    speeds = [r["speedup"] for r in runs if r.get("speedup") is not None]
    in_band = sum(1 for s in speeds if AA_BAND[0] <= s <= AA_BAND[1])
    no_diff = sum(1 for r in runs if r.get("call") == "no_difference")
    either = sum(1 for r in runs if r.get("speedup") is not None
                 and (AA_BAND[0] <= r["speedup"] <= AA_BAND[1] or r.get("call") == "no_difference"))
    out: dict[str, Any] = {"runs": len(runs), "in_band": in_band, "no_difference": no_diff, "either": either,
                           "either_fraction": either / len(runs) if runs else None}
    if speeds:
        ordered = sorted(speeds)
        out.update({"speedup_median": statistics.median(speeds), "speedup_min": ordered[0],
                    "speedup_max": ordered[-1],
                    "speedup_sd": statistics.stdev(speeds) if len(speeds) > 1 else 0.0,
                    "raw_excludes_one": sum(1 for r in runs if r.get("raw_low") is not None
                                            and (r["raw_low"] > 1 or r["raw_high"] < 1))})
    return out


def repeat_summary(speeds: list[float]) -> dict[str, Any]:
    """Mean, stdev, coefficient of variation, min and max of the speedups of fresh runs."""
    if not speeds:
        return {"runs": 0}
    mean = statistics.fmean(speeds)
    sd = statistics.stdev(speeds) if len(speeds) > 1 else 0.0
    return {"runs": len(speeds), "mean": mean, "sd": sd, "cv": sd / mean if mean else None,
            "min": min(speeds), "max": max(speeds)}


# --------------------------------------------------------------------------------------------
# the A/A child process: the verifier's timing procedure, many times, in one process


def _load_file(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _bind(model: Any, args: list[Any]) -> Any:
    import torch

    def call() -> Any:
        with torch.no_grad():
            return model(*args)

    return call


def _cudagraph_us(fn: Any, rep_ms: float = 20.0) -> float | None:
    try:
        import triton.testing

        return float(triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")) * 1e3
    except Exception:
        return None


def _small_callables(item: dict[str, Any], ops: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Two independent copies of a small kernel, sized to the target time on a GPU."""
    family, target = item["family"], float(item["target_us"])
    tag = uuid.uuid4().hex[:8]
    mod_a = _load_file(SMALL, f"bench_small_a_{tag}")
    mod_b = _load_file(SMALL, f"bench_small_b_{tag}")
    first, largest = mod_a.SIZES[family]
    size = first
    measured = None
    if ops.interpreter:
        size = first // 16 if family == "vector_add" else max(4, first // 16)
    else:
        while True:
            model, inputs = mod_a.make(family, size, ops.torch_device)
            measured = _cudagraph_us(_bind(model, inputs), 10.0)
            if measured is None or measured >= target or size * 2 > largest:
                break
            size *= 2
    model_a, inputs_a = mod_a.make(family, size, ops.torch_device)
    model_b, _ = mod_b.make(family, size, ops.torch_device)
    inputs_b = [t.clone() for t in inputs_a]  # as the verifier gives the candidate a copy
    meta = {"label": f"{family} ~{target:g} µs", "family": family, "size": size, "target_us": target,
            "sized_us": measured, "bytes": mod_a.bytes_moved(family, size)}
    return _bind(model_a, inputs_a), _bind(model_b, inputs_b), meta


def _sample_callables(item: dict[str, Any], ops: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Baseline and candidate copies of a sample, built as the timing worker builds them."""
    from xeforge_core.problem import load_problem
    from xeforge_core.worker.inputs import (
        build_inputs,
        clone_args,
        construct_model,
        dtype_from_name,
        init_values,
        load_matching_state,
    )
    from xeforge_core.worker.loading import load_module

    problem = load_problem(Path(item["path"]))
    variant = problem.variant(item["variant"]).to_data()
    spec = problem.spec.to_data() if problem.spec is not None else None
    job_dir = Path(tempfile.mkdtemp(prefix="xeforge-bench-aa-"))
    data = problem.kernel.to_data()
    loaded_a = load_module(job_dir, dict(data, label="baseline"), ops.kind)
    loaded_b = load_module(job_dir, dict(data, label="candidate"), ops.kind)
    dtype = dtype_from_name(variant["dtype"]) if variant.get("dtype") else None
    inits = init_values(loaded_a, variant)
    model_a = construct_model(loaded_a, inits, 0, ops.torch_device, dtype)
    model_b = construct_model(loaded_b, inits, 0, ops.torch_device, dtype)
    load_matching_state(model_b, model_a.state_dict())
    args = build_inputs(loaded_a, spec, variant, 0, "normal", ops.torch_device)
    meta = {"label": f"{problem.name} {item['variant']}", "problem": problem.name, "variant": item["variant"],
            "dims": variant.get("dims"), "flop": variant.get("flop")}
    return _bind(model_a, args), _bind(model_b, clone_args(args)), meta


def legacy_per_call(ops: Any, fns: dict[str, Any], trials: int) -> dict[str, Any]:
    """The per-call procedure the verifier used before (synchronise, write the flush buffer,
    record the start event, call, record the end event), interleaved: median, min and their
    ratio per callable, and the A/A speedup it gave."""
    flush = ops.flush_buffer(None)
    times: dict[str, list[float]] = {n: [] for n in fns}
    names = list(fns)
    for t in range(trials):
        for n in names[t % 2:] + names[:t % 2]:
            ops.synchronize()
            if flush is not None:
                flush.zero_()
            start, end = ops.event(), ops.event()
            ops.record(start)
            fns[n]()
            ops.record(end)
            ops.synchronize()
            times[n].append(ops.elapsed_ms(start, end) * 1e3)
    out: dict[str, Any] = {"trials": trials}
    for n, vals in times.items():
        med, low = statistics.median(vals), min(vals)
        out[n] = {"median_us": med, "min_us": low, "median_over_min": med / low if low > 0 else None}
    out["speedup"] = out[names[0]]["median_us"] / out[names[1]]["median_us"]
    return out


def _run_record(m: Any, seconds: float) -> dict[str, Any]:
    from xeforge_core.verdict import speedup_call

    s, lo, hi, raw_lo, raw_hi = m.speedup()
    call = speedup_call(s, lo, hi)
    b, c = m.stats("baseline"), m.stats("candidate")
    return {"speedup": s, "low": lo, "high": hi, "raw_low": raw_lo, "raw_high": raw_hi, "call": call.kind.value,
            "method": m.plan.method, "calls": m.plan.calls.get("baseline"), "trials": m.trials,
            "settle_ms": m.settle_ms, "steady": m.steady, "late": sum(m.late.values()),
            "baseline_us": b.median_us, "candidate_us": c.median_us, "baseline_min_us": b.min_us,
            "baseline_cv": b.cv, "host_us": m.host_us.get("baseline"), "device_us": m.device_us.get("baseline"),
            "seconds": seconds}


def aa_one(item: dict[str, Any], ops: Any, job: dict[str, Any], left: int = 1) -> dict[str, Any]:
    """A/A runs, the earlier method and do_bench agreement for one kernel (``left``: kernels
    still to run, this one included)."""
    from xeforge_core.worker.timing import measure

    started = time.time()
    if item["kind"] == "small":
        fa, fb, meta = _small_callables(item, ops)
    else:
        fa, fb, meta = _sample_callables(item, ops)
    fns = {"baseline": fa, "candidate": fb}
    options = dict(job["options"])
    t0 = time.time()
    first = measure(ops, fns, options)
    runs = [_run_record(first, time.time() - t0)]
    per_run = max(runs[0]["seconds"], 1e-3)
    reserve = 4.0 if not ops.interpreter else 1.0  # do_bench and the earlier method afterwards
    fit = int((float(job["deadline"]) - time.time() - reserve * left) / per_run) + 1
    wanted = int(job["runs"])
    if job.get("spread"):  # share what is left with the kernels still to come, at least MIN_SPREAD_RUNS each
        fit = max(min(MIN_SPREAD_RUNS, fit), fit // max(left, 1))
    target = min(wanted, max(1, fit))
    log(f"A/A {meta['label']}: one run {per_run:.2f} s ({first.plan.method}); {target} of {wanted} runs fit")
    for i in range(1, target):
        t0 = time.time()
        m = measure(ops, fns, options)
        runs.append(_run_record(m, time.time() - t0))
        if (i + 1) % 25 == 0:
            log(f"  {meta['label']}: {i + 1} runs")
    rec: dict[str, Any] = {"kernel": meta["label"], "meta": meta, "wanted_runs": wanted, "runs": runs,
                           "summary": aa_summary(runs), "method_reason": first.plan.reason}
    rec["median_us"] = statistics.median(r["baseline_us"] for r in runs)
    legacy_trials = 10 if ops.interpreter else int(min(200, max(20, 5e5 / (2 * max(rec["median_us"], 1.0)))))
    rec["legacy"] = legacy_per_call(ops, fns, legacy_trials)
    if not ops.interpreter:
        import triton.testing

        try:
            rec["do_bench_us"] = float(triton.testing.do_bench(fa, warmup=25, rep=100, return_mode="median")) * 1e3
        except Exception as exc:
            rec["do_bench_error"] = f"{type(exc).__name__}: {exc}"
        rec["do_bench_cudagraph_us"] = _cudagraph_us(fa, 100.0)
        method = runs[0]["method"]
        ref_key = "do_bench_us" if method == "events" else "do_bench_cudagraph_us"
        ref = rec.get(ref_key)
        if ref:
            rec["agreement"] = {"compared_with": ref_key.removesuffix("_us"), "ratio": rec["median_us"] / ref}
    rec["seconds"] = time.time() - started
    return rec


def aa_child(job_path: Path) -> int:
    """Entry of the A/A child process: runs the job's kernels, one JSON line each."""
    job = json.loads(job_path.read_text())
    global _OUT
    _OUT = Path(job["out_dir"])
    if job["device"] == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from xeforge_core.worker.device_ops import DeviceOps

    kind = job["device"]
    if kind != "cpu" and job.get("index") is not None:
        getattr(torch, kind).set_device(int(job["index"]))
    ops = DeviceOps(kind)
    ops.install_scratch_allocator()
    out = Path(job["output"])
    kernels = list(job["kernels"])
    for i, item in enumerate(kernels):
        if time.time() > float(job["deadline"]) - 3.0:
            rec = {"kernel": item.get("name") or item.get("family"), "skipped": "not run: the time budget was spent"}
        else:
            try:
                rec = aa_one(item, ops, job, left=len(kernels) - i)
            except Exception as exc:  # one kernel's failure is its row, not the benchmark's end
                import traceback

                rec = {"kernel": item.get("name") or item.get("family"), "error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-3000:]}
                log(f"A/A {rec['kernel']}: {rec['error']}")
            ops.empty_cache()
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec, default=str) + "\n")
    return 0


def run_aa(name: str, kernels: list[dict[str, Any]], device: Any, args: argparse.Namespace, out_dir: Path,
           deadline: float, *, spread: bool = False) -> list[dict[str, Any]]:
    """Run the A/A child for ``kernels`` until ``deadline`` (epoch s); its lines as dicts.
    ``spread``: share the time among the kernels (else the first ones get all their runs)."""
    output = out_dir / f"{name}.jsonl"
    output.unlink(missing_ok=True)
    options: dict[str, Any] = {"l2_bytes": device.l2_bytes}
    if args.quick:
        options.update({"warmup_ms": 2, "rep_ms": 10})
    job = {"device": device.type, "index": device.index, "kernels": kernels, "runs": args.aa_runs,
           "deadline": deadline, "options": options, "output": str(output), "out_dir": str(out_dir),
           "quick": args.quick, "spread": spread}
    job_path = out_dir / f".{name}-job.json"
    job_path.write_text(json.dumps(job))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if device.type == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    timeout = max(30.0, deadline - time.time() + 60.0)
    log(f"{name}: {len(kernels)} kernel(s), {timeout:.0f} s at most")
    try:
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--aa-child", str(job_path)], env=env,
                       timeout=timeout, check=False, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        log(f"{name}: the child overran its time and was stopped; keeping what it wrote")
    job_path.unlink(missing_ok=True)
    lines = output.read_text().splitlines() if output.exists() else []
    return [json.loads(x) for x in lines if x.strip()]


# --------------------------------------------------------------------------------------------
# verifications through the product


def _verdict_row(verdict: Any, wall: float) -> dict[str, Any]:
    steps = {s.name: round(s.seconds, 3) for s in verdict.steps}
    steps_sum = sum(s.seconds for s in verdict.steps) if not verdict.cached else 0.0
    row: dict[str, Any] = {"wall_s": wall, "steps": steps, "steps_s": steps_sum, "cached": verdict.cached,
                           "kind": verdict.kind.value, "reason": verdict.reason,
                           "ratio": wall / steps_sum if steps_sum > 0 else None}
    if verdict.performance:
        p = verdict.performance[0]
        row.update({"speedup": p.speedup, "low": p.speedup_low, "high": p.speedup_high,
                    "call": p.call.kind.value, "call_text": p.call.text, "method": p.candidate.method,
                    "calls": p.candidate.calls_per_sample, "trials": p.candidate.trials,
                    "baseline_us": p.baseline.median_us, "candidate_us": p.candidate.median_us,
                    "settle_ms": p.settle_ms, "steady": p.steady, "late": p.baseline.late + p.candidate.late})
        perf = verdict.step("performance")
        if perf is not None:
            row["evidence"] = perf.evidence
    return row


def _options(device: Any, args: argparse.Namespace, variant: str) -> Any:
    from xeforge_core.verify import VerifyOptions

    opts: dict[str, Any] = {"timeout_s": args.timeout, "performance_variants": [variant]}
    if device.interpreter:
        opts.update({"force_timing": True, "seeds": 1, "distributions": ["normal"], "warmup_ms": 2, "rep_ms": 10})
    return VerifyOptions(**opts)


def run_latency(device: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Cold, warm-baseline and cached verification of the vector-add sample against itself."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import verify

    problem = load_problem(LATENCY_SAMPLE)
    source = problem.kernel.source
    variant = "ci" if device.interpreter else "bench-gpu"
    rows = {}
    for label, text in (("cold", source), ("warm", source + "\n# warm-baseline run\n"),
                        ("cached", source + "\n# warm-baseline run\n")):
        start = time.perf_counter()
        verdict = verify(problem, text, device=device, options=_options(device, args, variant))
        rows[label] = _verdict_row(verdict, time.perf_counter() - start)
        log(f"latency {label}: {rows[label]['wall_s']:.2f} s, {verdict.kind.value}"
            + (f", {rows[label].get('call_text')}" if rows[label].get("call_text") else ""))
    return {"problem": problem.name, "variant": variant, "rows": rows}


def run_repeat(device: Any, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    """Fresh verifications of the GEMM pair (new candidate text each: new workers, no cache)."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import verify

    problem = load_problem(GEMM_BASELINE)
    source = GEMM_CANDIDATE.read_text(encoding="utf-8")
    variant = "ci" if device.interpreter else "bench-gpu"
    runs: list[dict[str, Any]] = []
    last = 0.0
    for i in range(args.repeats):
        if runs and time.time() + last > deadline:
            log(f"repeatability: stopping after {len(runs)} runs (time budget)")
            break
        start = time.perf_counter()
        verdict = verify(problem, source + f"\n# fresh verification {i} {uuid.uuid4().hex}\n", device=device,
                         options=_options(device, args, variant))
        last = time.perf_counter() - start
        row = _verdict_row(verdict, last)
        runs.append(row)
        log(f"repeat {i}: {verdict.kind.value} {row.get('speedup') or 0:.3f}x ({row.get('method')}) in {last:.1f} s")
    speeds = [r["speedup"] for r in runs if r.get("speedup")]
    return {"pair": [str(GEMM_BASELINE.relative_to(ROOT)), str(GEMM_CANDIDATE.relative_to(ROOT))],
            "variant": variant, "runs": runs, "summary": repeat_summary(speeds)}


# --------------------------------------------------------------------------------------------
# the report


def nvidia_smi() -> str | None:
    """Clocks, power and temperature as ``nvidia-smi`` reads them (read only), or None."""
    for fields in ("clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active",
                   "clocks.sm,clocks.mem,power.draw,temperature.gpu"):
        try:
            proc = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv"], capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        if proc.returncode == 0:
            return " | ".join(line.strip() for line in proc.stdout.strip().splitlines())
    return None


def _f(x: Any, spec: str = ".3f", suffix: str = "") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec) + suffix


def goals(results: dict[str, Any]) -> list[list[str]]:
    """Rows ``[goal, target, measured, met]`` from the results so far."""
    rows: list[list[str]] = []
    lat = (results.get("latency") or {}).get("rows") or {}
    warm = lat.get("warm") or {}
    if warm:
        rows.append(["small-kernel verification, wall (baseline reused)", f"<= {LATENCY_GOAL_S:g} s",
                     _f(warm.get("wall_s"), ".2f", " s"), "yes" if warm.get("wall_s", 1e9) <= LATENCY_GOAL_S else "no"])
        ratio = warm.get("ratio")
        rows.append(["... wall / sum of its steps", f"<= {LATENCY_RATIO_GOAL:g}", _f(ratio, ".2f"),
                     "yes" if ratio is not None and ratio <= LATENCY_RATIO_GOAL else "no"])
    cold = lat.get("cold") or {}
    if cold:
        rows.append(["cold verification, wall (nothing cached)", f"<= {LATENCY_GOAL_S:g} s",
                     _f(cold.get("wall_s"), ".2f", " s"), "yes" if cold.get("wall_s", 1e9) <= LATENCY_GOAL_S else "no"])
    cached = lat.get("cached") or {}
    if cached:
        rows.append(["cached verdict", "0.02 s", _f(cached.get("wall_s"), ".3f", " s"),
                     "yes" if cached.get("cached") and cached.get("wall_s", 1e9) <= CACHED_GOAL_S else "no"])
    for section in ("aa_small", "aa_samples"):
        for rec in results.get(section) or []:
            if "summary" not in rec:
                continue
            s = rec["summary"]
            runs = s["runs"]
            met = s["either_fraction"] is not None and s["either_fraction"] >= AA_GOAL
            rows.append([f"A/A {rec['kernel']} ({_f(rec.get('median_us'), '.1f')} µs)",
                         f">= {AA_GOAL:.0%} of runs in [0.98, 1.02] or no difference",
                         f"{s['either']}/{runs}" + ("" if runs >= rec.get("wanted_runs", runs) else " (budget)"),
                         "yes" if met else "no"])
            ag = rec.get("agreement")
            if ag:
                rows.append([f"agreement {rec['kernel']} vs {ag['compared_with']}", "within 3%",
                             _f(ag["ratio"], ".3f"), "yes" if abs(ag["ratio"] - 1) <= AGREEMENT_GOAL else "no"])
    rep = (results.get("repeat") or {}).get("summary") or {}
    if rep.get("runs"):
        rows.append([f"repeatability, GEMM pair ({rep['runs']} fresh verifications)", "CV <= 2%",
                     _f(rep.get("cv") * 100 if rep.get("cv") is not None else None, ".2f", "%"),
                     "yes" if rep.get("cv") is not None and rep["cv"] <= CV_GOAL else "no"])
    return rows


def _md_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def render(results: dict[str, Any]) -> str:
    """The Markdown report of ``results``."""
    meta = results["meta"]
    lines = ["# Verifier benchmark", "",
             f"- date: {meta['date']}", f"- device: {meta['device']}", f"- versions: {meta['versions']}",
             f"- command: `{meta['command']}`", f"- budget: {meta['budget_s']:g} s; ran {results.get('seconds', 0):.0f} s",
             f"- code: {meta.get('commit') or '-'}", ""]
    if meta.get("interpreter"):
        lines += ["Ran in Triton's CPU interpreter (`force_timing`): the times exercise the code and say "
                  "nothing about a GPU.", ""]
    lines += ["## Goals", ""] + _md_table(["goal", "target", "measured", "met"], goals(results)) + [""]

    lat = results.get("latency")
    if lat:
        lines += [f"## Latency: `{lat['problem']}` against itself, timed variant {lat['variant']}", ""]
        rows = []
        for label, r in lat["rows"].items():
            steps = ", ".join(f"{k} {v:.2f}" for k, v in r["steps"].items()) if not r["cached"] else "-"
            rows.append([label, _f(r["wall_s"], ".2f"), _f(r["steps_s"], ".2f"), _f(r.get("ratio"), ".2f"), steps,
                         r.get("call_text") or r["kind"]])
        lines += _md_table(["run", "wall s", "sum of steps s", "wall / steps", "steps (s)", "speedup"], rows) + [""]

    for section, title in (("aa_small", "A/A, small kernels"), ("aa_samples", "A/A, samples at bench-gpu shapes")):
        recs = results.get(section)
        if not recs:
            continue
        lines += [f"## {title}", "",
                  "The verifier's timing procedure run many times in one process on two copies of the same kernel "
                  "(baseline = candidate). 'earlier method' is the per-call procedure this benchmark replaced "
                  "(synchronise, flush, start event, call), 200 interleaved trials in the same process.", ""]
        rows = []
        for rec in recs:
            if "summary" not in rec:
                rows.append([rec.get("kernel"), "-", "-", "-", "-", "-", "-", "-", "-", "-",
                             rec.get("skipped") or rec.get("error")])
                continue
            s, runs = rec["summary"], rec["runs"]
            leg = rec.get("legacy") or {}
            lb = leg.get("baseline") or {}
            rows.append([rec["kernel"], _f(rec.get("median_us"), ".2f"),
                         f"{runs[0]['method']} x{runs[0]['calls']}", f"{s['runs']}/{rec['wanted_runs']}",
                         s["in_band"], s["no_difference"], f"{s['either']} ({_f(s['either_fraction'] * 100, '.0f')}%)",
                         f"{_f(s.get('speedup_median'), '.4f')} [{_f(s.get('speedup_min'), '.3f')}, "
                         f"{_f(s.get('speedup_max'), '.3f')}]",
                         f"{statistics.median(r['trials'] for r in runs):.0f} / "
                         f"{statistics.median(r['settle_ms'] for r in runs):.0f} ms / {sum(r['late'] for r in runs)}",
                         f"{_f(lb.get('median_over_min'), '.2f')} / {_f(leg.get('speedup'), '.3f')}x", ""])
        lines += _md_table(["kernel", "µs", "method", "runs", "in [0.98,1.02]", "no difference", "either",
                            "speedup median [min, max]", "trials / settle / late", "earlier method: median/min, A/A",
                            "note"], rows) + [""]
        for rec in recs:
            if rec.get("method_reason"):
                lines.append(f"- {rec['kernel']}: {rec['method_reason']}")
        lines.append("")

    rep = results.get("repeat")
    if rep and rep["runs"]:
        s = rep["summary"]
        lines += [f"## Repeatability: {s['runs']} fresh verifications of `{rep['pair'][0]}` (baseline) vs "
                  f"`{rep['pair'][1]}`, variant {rep['variant']}", ""]
        lines += _md_table(["mean speedup", "stdev", "CV", "min", "max"],
                           [[_f(s.get("mean"), ".3f", "x"), _f(s.get("sd"), ".4f"),
                             _f(s["cv"] * 100 if s.get("cv") is not None else None, ".2f", "%"),
                             _f(s.get("min"), ".3f", "x"), _f(s.get("max"), ".3f", "x")]]) + [""]
        rows = [[i, _f(r.get("speedup"), ".3f", "x"), r.get("call_text") or r["kind"], _f(r.get("baseline_us"), ".1f"),
                 _f(r.get("candidate_us"), ".1f"), f"{r.get('method')} x{r.get('calls')}", r.get("trials"),
                 _f(r.get("settle_ms"), ".0f"), r.get("steady"), r.get("late"), _f(r["wall_s"], ".1f")]
                for i, r in enumerate(rep["runs"])]
        lines += _md_table(["#", "speedup", "call", "baseline µs", "candidate µs", "method", "trials", "settle ms",
                            "steady", "late", "wall s"], rows) + [""]

    agree = [rec for sec in ("aa_small", "aa_samples") for rec in results.get(sec) or [] if "summary" in rec]
    if agree and not meta.get("interpreter"):
        lines += ["## Agreement with triton.testing.do_bench / do_bench_cudagraph (same callables, same process)",
                  ""]
        rows = [[rec["kernel"], rec["runs"][0]["method"], _f(rec.get("median_us"), ".2f"),
                 _f(rec.get("do_bench_us"), ".2f"), _f(rec.get("do_bench_cudagraph_us"), ".2f"),
                 (f"{rec['agreement']['ratio']:.3f} (vs {rec['agreement']['compared_with']})"
                  if rec.get("agreement") else "-")] for rec in agree]
        lines += _md_table(["kernel", "method", "verifier median µs", "do_bench µs", "do_bench_cudagraph µs",
                            "verifier / reference"], rows) + [""]

    smi = results.get("nvidia_smi") or {}
    if smi:
        lines += ["## Device state (nvidia-smi, read only)", ""] + [f"- {k}: {v}" for k, v in smi.items()] + [""]
    return "\n".join(lines).rstrip() + "\n"


def _short_table(results: dict[str, Any]) -> str:
    rows = goals(results)
    headers = ["goal", "target", "measured", "met"]
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(4)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(line.rstrip() for line in out)


# --------------------------------------------------------------------------------------------
# main


def _versions(device: Any) -> str:
    fp = device.fingerprint or {}
    versions = fp.get("versions") or {}
    text = ", ".join(f"{k} {v}" for k, v in versions.items() if v)
    if not text:
        from xeforge_core.cache import library_versions

        text = ", ".join(f"{k} {v}" for k, v in library_versions().items() if v)
    driver = fp.get("driver_version")
    return text + (f"; driver {driver}" if driver else "") + f"; host Python {platform.python_version()}"


def _commit() -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        return proc.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--aa-child"]:
        return aa_child(Path(argv[1]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", help="directory for results.json, report.md, the A/A lines and the log")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N, xpu, xpu:N (default: detect)")
    parser.add_argument("--budget-s", type=float, default=345.0, help="wall-clock budget of the whole run, s")
    parser.add_argument("--aa-runs", type=int, default=None, help="timing runs per A/A kernel (default 100)")
    parser.add_argument("--repeats", type=int, default=None, help="fresh verifications of the GEMM pair (10)")
    parser.add_argument("--sections", default="latency,aa-small,repeat,aa-samples",
                        help="comma-separated subset of latency,aa-small,repeat,aa-samples")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker job")
    parser.add_argument("--quick", action="store_true",
                        help="few runs at tiny sizes (with --device cpu: exercise the script anywhere)")
    args = parser.parse_args(argv)
    args.aa_runs = args.aa_runs or (3 if args.quick else 100)
    args.repeats = args.repeats or (2 if args.quick else 10)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}

    global _OUT
    started = time.time()
    deadline = started + args.budget_s
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "log.txt").write_text("", encoding="utf-8")
    _OUT = out_dir
    # everything cached goes to a fresh directory, so "cold" really is cold
    os.environ["XEFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="xeforge-bench-cache-")

    from xeforge_core.devices import detect_device

    device = detect_device(args.device)
    log(f"device: {device.label}")
    results: dict[str, Any] = {"meta": {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "device": device.label,
        "versions": _versions(device), "command": "python benchmarks/bench_verifier.py " + " ".join(argv),
        "budget_s": args.budget_s, "commit": _commit(), "interpreter": device.interpreter,
        "aa_runs": args.aa_runs, "repeats": args.repeats}, "nvidia_smi": {}}

    def save() -> None:
        results["seconds"] = time.time() - started
        _atomic_write(out_dir / "results.json", json.dumps(results, indent=1, default=str))
        _atomic_write(out_dir / "report.md", render(results))

    def smi(label: str) -> None:
        if not device.interpreter:
            state = nvidia_smi()
            if state:
                results["nvidia_smi"][label] = state

    smi("start (idle)")
    save()
    if "latency" in sections:
        results["latency"] = run_latency(device, args)
        smi("after latency")
        save()
    left = deadline - time.time() - 15.0
    if "aa-small" in sections:
        targets = SMALL_TARGETS[:2] if args.quick else SMALL_TARGETS
        kernels = [{"kind": "small", "family": f, "target_us": t, "name": f"{f} ~{t:g} µs"} for f, t in targets]
        share = min(0.5 * left, 150.0) if {"repeat", "aa-samples"} & sections else left
        results["aa_small"] = run_aa("aa-small", kernels, device, args, out_dir, time.time() + share)
        smi("after A/A small")
        save()
    left = deadline - time.time() - 15.0
    if "repeat" in sections:
        share = min(0.7 * left, 150.0) if "aa-samples" in sections else left
        results["repeat"] = run_repeat(device, args, time.time() + share)
        smi("after repeatability")
        save()
    if "aa-samples" in sections:
        names = SAMPLE_ORDER[:1] if args.quick else SAMPLE_ORDER
        variant = "ci" if device.interpreter else "bench-gpu"
        kernels = [{"kind": "sample", "name": n, "path": str(SAMPLES / f"{n}.py"), "variant": variant}
                   for n in names if (SAMPLES / f"{n}.py").exists()]
        results["aa_samples"] = run_aa("aa-samples", kernels, device, args, out_dir, deadline - 15.0, spread=True)
        smi("end")
    save()
    print(render(results))
    print(_short_table(results))
    print(f"\nwritten: {out_dir / 'results.json'}, {out_dir / 'report.md'} ({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
