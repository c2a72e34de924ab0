"""The rules engine over problem/solution pairs written elsewhere, against eager PyTorch,
torch.compile and the published solution (a script, not a test).

For every pair ``DIR/pairs/<id>/{problem.py,solution.py}`` (the layout of bench_corpus.py; keep
the pairs in the git-ignored ``corpus/``), and with ``--samples`` the project's own samples:

1. **why codemods do not apply**: every rules stage is asked statically on the published
   solution (``pipeline.feasibility``); each reason a codemod gives for not applying is counted,
   kernel names replaced by ``<kernel>``, so the most common gap shows first;
2. **the rules engine**: the CoVeR loop in auto mode with the rules engine (the library path of
   ``xeforge optimize solution.py --reference problem.py --engine rules --auto``:
   ``bench_pipeline.run_rules_pipeline``), a candidate kept only where it verifies and is faster;
   the result, verified in full by the stage that kept it, is re-checked at the published size
   and timed at the sizes below (``final_options``). Candidates are held to the published
   kernel's own precision (``--allow baseline``, and ``tf32`` where its dot products multiply
   float32 in TF32: :func:`published_precision`), as a user who adopted that kernel would hold
   them: every candidate of a published tanh-formula GELU inherits its formula, and held to
   float32 each was refused for approximate math;
3. **sizes**: the published size (``module``) and a **bench size** derived through the problem's
   size constants (``problem.scaling.scaled_variant``): the smallest power-of-two factor at which
   the inputs and one output of the same size, moved once at the device's bandwidth, or, for a
   problem whose ``forward`` does matrix products, their FLOP at the device's peak for the
   inputs' dtype (``gemm_flop.py``), take at least ``--min-eager-us`` (100 µs); factor 1 (the
   published size) when it already does; scaling stops before a tensor the forward touches
   (run on the meta device) would pass 2^31 - 1 elements, the int32 offsets most published
   kernels compute (one crashed with an illegal address at a size scaled past it, a limit of the
   kernel at a size the problem never poses). A sample (its spec names its sizes) is timed at its
   spec's benchmark variant (``bench-gpu``). The
   measured eager time is recorded next to it, so a bench size whose eager time stays below the
   threshold (a compute-light problem mis-estimated) is visible;
4. **anchors in one run**: eager PyTorch, torch.compile (``max-autotune-no-cudagraphs``,
   compiled at each size in the background while the rules pipeline runs, so the anchors'
   compile finds TorchInductor's caches filled; that cold compile's time is reported apart;
   cache warm before timing), the published solution, the rules result and a
   second instance of the published model (the A/A check) are timed together, on the same
   inputs, by one call of the verifier's timing function with the verifier's options
   (``benchmarks/anchor_timing.py``, in its own process): the same warm-up, method, L2
   policy, interleaved trials and statistics for all; medians and each ratio's 95 % interval.
   The verifier's own baseline-vs-candidate ratio is kept next to it (``verifier_ratio``). A
   size whose rules or published median is under ``anchor_timing.LAUNCH_BOUND_US`` is marked
   launch-bound (the ratio is about launch overhead) and left out of the geometric means;
5. **HBM bandwidth**: for memory-bound shapes, the rules result's achieved GB/s (the verifier's
   bytes moved over its median) against the device's measured device-to-device copy bandwidth;
   under ``HBM_GOAL`` the note says why, from the rules result's launches
   (``xeforge_core.roofline_gap``: extra passes, too few programs for the SMs, launch overhead,
   or the access pattern).

Outputs in ``--out``: ``results.json`` (rewritten after each pair), ``pairs.csv``, ``reasons.csv``
and ``summary.md`` (device, date, versions, the table, geometric means over the pairs: rules over
published, over eager and over torch.compile; the fraction improved; the reasons with counts).

``--pair-timeout S`` runs each pair in a process of its own (its own process group), stopped
after ``S`` seconds or at ``--deadline-min``, whichever comes first; a stopped pair is a row that
says so with the last lines of ``logs/<pair>.log`` (which step it was in), so one slow pair costs
one limit, not the call. A pair is started only before ``--deadline-min``. ``--jobs N`` runs N
such children at once: their compiles and correctness runs overlap, while every timing run (the
verifier's and the anchors') holds the device's timing lock exclusively and every other kernel
run of a verification holds it shared (``xeforge_core.devlock``), so no timing shares the GPU;
on a GPU a child starts only while the memory its problem needs fits beside the others
(``memory_gate``: eight children of 6-8 GiB problems at once exhausted the H200's memory).

Usage::

    python benchmarks/bench_optimize_corpus.py corpus --out docs/measured/h200-optimize-corpus --samples
    python benchmarks/bench_optimize_corpus.py /work/corpus --device cpu --limit 2 --out /tmp/oc
    python benchmarks/bench_optimize_corpus.py /work/corpus --device cpu --reasons-only --out /tmp/oc

``--reasons-only`` does step 1 alone (static: nothing is run or timed, seconds a pair), and also
counts the pairs each stage's codemod would rewrite, so a change to the codemods shows in
``reasons.csv`` and ``summary.md`` before any GPU time is spent.

On cpu (Triton's interpreter) nothing is timed: the codemod reasons, the pipeline verdicts and
the derived sizes are real; the times say "not timed", and the result is not re-checked at the
published size (gigabytes in the interpreter: a GELU of 12.9 GB ran past 600 s). A cpu run over
the pairs is the dry run before device time: a stage that ``failed`` or whose every candidate was
refused shows a codemod's fault on kernels written elsewhere (``logs/<pair>.log`` says which).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import csv
import datetime as dt
import difflib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_pipeline import RULES_STAGES, Job, Settings, geomean, run_rules_pipeline  # noqa: E402
from bounded_pool import log_tail, run_command_bounded  # noqa: E402
from memory_gate import MemoryGate, device_capacity, device_free_bytes, pair_footprint  # noqa: E402
from state_bytes import meta_sizes  # noqa: E402

from xeforge_core.devices import detect_device  # noqa: E402
from xeforge_core.pipeline.outcomes import DEFAULT_MIN_SPEEDUP  # noqa: E402
from xeforge_core.precision import BASELINE  # noqa: E402
from xeforge_core.problem import load_problem  # noqa: E402
from xeforge_core.problem.scaling import estimate_input_bytes, scaled_variant  # noqa: E402
from xeforge_core.roofline_gap import GOAL as ROOFLINE_GOAL  # noqa: E402
from xeforge_core.roofline_gap import roofline_gap  # noqa: E402

#: The eager reference should take at least this long at the bench size (µs): below it launch
#: overhead, not the kernel, decides the comparison.
MIN_EAGER_US = 100.0
#: The most elements a tensor of a derived bench size may have: int32 element offsets address no
#: more, and most published kernels compute offsets in int32 (one crashed at a size scaled past it).
INT32_LIMIT = 2**31 - 1
#: Memory-bound results should reach this fraction of the measured copy bandwidth (issue 24).
HBM_GOAL = ROOFLINE_GOAL


@dataclass
class Row:
    """One pair at one size; times in µs, ratios > 1 mean the rules result is faster."""

    pair: str
    size: str
    sizes: str = ""
    published_us: float | None = None
    rules_us: float | None = None
    eager_us: float | None = None
    compile_us: float | None = None
    compile_s: float | None = None
    rules_vs_published: float | None = None
    interval: str = ""
    #: published over a second instance of it, timed in the same run: the method's A/A at this
    #: size (ideally 1.00, its interval holding 1)
    aa_ratio: float | None = None
    aa_interval: str = ""
    rules_vs_eager: float | None = None
    eager_interval: str = ""
    rules_vs_compile: float | None = None
    compile_interval: str = ""
    #: the verifier's own ratio (published baseline over rules candidate, its worker's run)
    verifier_ratio: float | None = None
    #: the anchors' timing method (``events``, ``graph``, ``back_to_back``) and whether the
    #: rules or published median is under ``anchor_timing.LAUNCH_BOUND_US``
    method: str = ""
    launch_bound: bool = False
    bound: str = ""
    achieved_gbps: float | None = None
    hbm_fraction: float | None = None
    stages_applied: str = ""
    note: str = ""


#: Where a codemod's joined reasons split into single reasons: before each reason about a kernel
#: or a named part of the codemod ("launch batching: ..."), not inside one reason's own "; ".
_REASON_SPLIT = re.compile(r"; (?=kernel \w|[a-z][a-z -]+: |the module |no )")


def split_reasons(text: str) -> list[str]:
    """A codemod's reason text (its reasons joined with ``"; "``) as single reasons, the
    codemod's name in front of each dropped."""
    return [re.sub(r"^[a-z_]+: (?=kernel |the |no )", "", part) for part in _REASON_SPLIT.split(text)]


def normalise_reason(text: str) -> str:
    """A codemod's reason with kernel, parameter and variable names and numbers replaced, so the
    same gap counts once over the corpus."""
    text = re.sub(r"\bkernel (?!is\b|has\b|for\b|to\b)[A-Za-z_]\w*", "kernel <kernel>", text)
    text = re.sub(r"`[^`]*`", "`<expr>`", text)
    text = re.sub(r"\b\d+\b", "<n>", text)
    return text.strip()[:200]


def codemod_reasons(problem: Any, target: Any, applies: list[str] | None = None,
                    source: str | None = None) -> list[tuple[str, str]]:
    """``(stage, reason)`` for every rules stage whose codemod does not apply to the published
    solution (``source``, default the problem's kernel), one entry per reason
    (:func:`split_reasons`); the stages whose codemod would rewrite it are appended to
    ``applies`` when given."""
    from xeforge_core.pipeline.feasibility import check_stages

    out = []
    checks = check_stages(RULES_STAGES, source if source is not None else problem.kernel.source, target, problem,
                          engines=["rules"])
    for stage, row in checks.items():
        for check in row:
            if check.can:
                if applies is not None:
                    applies.append(stage)
                continue
            out.extend((stage, normalise_reason(part)) for part in split_reasons(check.reason))
    return out


def _load_pair(problem_path: Path, solution_path: Path) -> tuple[Any, str]:
    """``(problem, published solution's source)``; a solution that does not load as a problem
    of its own (a kernel module without ``Model``) is read as a candidate of the problem."""
    from xeforge_core.problem import ProblemError, read_candidate

    if problem_path == solution_path:
        problem = load_problem(solution_path)
        return problem, problem.kernel.source
    try:
        problem = load_problem(solution_path, reference_path=problem_path)
        return problem, problem.kernel.source
    except ProblemError:
        return load_problem(problem_path), read_candidate(solution_path)


def reasons_only(pairs: list[tuple[str, Path, Path]], device: Any, out: Path) -> str:
    """Step 1 of the module docstring alone over ``pairs``: ``reasons.csv``, ``applies.csv`` and
    ``summary.md`` in ``out``; returns the summary."""
    from xeforge_core.commands.optimize import target_for

    target = target_for(device, None)
    reasons: collections.Counter = collections.Counter()
    applies: collections.Counter = collections.Counter()
    failed: list[str] = []
    for name, problem_path, solution_path in pairs:
        try:
            problem, source = _load_pair(problem_path, solution_path)
            stages: list[str] = []
            reasons.update(set(codemod_reasons(problem, target, stages, source)))
            applies.update(set(stages))
            print(f"{name}: applies {','.join(stages) or '-'}", flush=True)
        except Exception as exc:  # one bad pair is a line, not the end of the run
            failed.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    with open(out / "reasons.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["count", "stage", "reason"])
        w.writerows([n, s, r] for (s, r), n in reasons.most_common())
    with open(out / "applies.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["stage", "pairs"])
        w.writerows(applies.most_common())
    lines = [f"# Why a codemod did not apply, static ({len(pairs)} pairs, {dt.date.today().isoformat()})", "",
             "| stage | pairs it would rewrite |", "|---|---|"]
    lines += [f"| {s} | {applies.get(s, 0)} |" for s in RULES_STAGES]
    lines += ["", "| count | stage | reason |", "|---|---|---|"]
    lines += [f"| {n} | {s} | {r.replace('|', '/')} |" for (s, r), n in reasons.most_common()]
    if failed:
        lines += ["", "## Pairs that did not load", ""] + [f"- {x}" for x in failed]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    return text


def peak_tflops(device: Any, dtype: str) -> float:
    """The device's peak TFLOP/s for ``dtype`` (``fp32``/``fp16``/``bf16``) from its hardware
    profile (the knowledge base's cuda profile where the device has none, as on cpu)."""
    from xeforge_core.codemods.autotune_prune import profile_numbers
    from xeforge_core.codemods.spaces import profile_value, resolve_profile

    profile = getattr(device, "profile", None) or resolve_profile(None, "cuda", None)
    peaks = profile_value(profile, "peak_tflops") or {}
    v = peaks.get(dtype) if isinstance(peaks, dict) else None
    v = getattr(v, "value", v)
    if isinstance(v, dict):
        v = v.get("value")
    return float(v) if v else profile_numbers(profile, "cuda")["peak_tflops"]


def bench_size(problem: Any, bandwidth_gbps: float, min_us: float, device: Any = None) -> tuple[str, str]:
    """Add the bench variant to ``problem`` (module docstring, item 3); ``(variant name, how it
    was derived)``. The eager time at a size is estimated as the larger of the bytes moved at
    ``bandwidth_gbps`` and, for a problem whose ``forward`` does matrix products
    (:func:`gemm_flop.estimate_gemm_flop`), their FLOP at the device's peak for the inputs'
    dtype: a GEMM's FLOP grow with the cube of the scale, its bytes with the square, so the
    FLOP decide its bench size."""
    from gemm_flop import estimate_gemm_flop

    if getattr(problem, "spec", None) is not None:  # an Xe-Forge sample: its spec names the benchmark size
        name = problem.default_variant_name()
        return name, f"the spec's benchmark variant {name}"
    if problem.inputs is None:
        return "module", "published size (no size constants to scale)"
    source = problem.inputs.source
    got = estimate_input_bytes(source)
    if not got:
        return "module", "published size (input bytes unknown)"
    model = _model_source(problem)
    gemm = estimate_gemm_flop(model, inputs_source=source)
    peak = peak_tflops(device, gemm[1]) * 1e12 if gemm else 0.0

    def seconds(moved: float, flop: float) -> float:
        return max(moved / (bandwidth_gbps * 1e9), flop / peak if peak else 0.0)

    def why_of(moved: float, flop: float) -> str:
        if flop and flop / peak >= moved / (bandwidth_gbps * 1e9):
            return f"{flop / 1e9:.3g} GFLOP at {peak / 1e12:g} TFLOP/s ({gemm[1]})"  # type: ignore[index]
        return f"{moved / 1e6:.1f} MB at {bandwidth_gbps:g} GB/s"

    base = problem.variant("module")
    flop = gemm[0] if gemm else 0.0
    moved = got[1] * 2  # the inputs read once and an output of their size written
    if seconds(moved, flop) >= min_us * 1e-6:
        return "module", f"published size ({why_of(moved, flop)} >= {min_us:g} µs)"
    # the weights are read once a forward too (a batch-1 MLP moves its weights, not its input):
    # their bytes at each candidate scale, from the model built on the meta device (one child,
    # only where the inputs alone are too small to decide)
    factors = [2**i for i in range(21)]
    scaled_vars = {f: scaled_variant(problem, base, f, "bench") for f in factors[1:]}
    # and the largest tensor each scale makes (the forward on the meta device, the same child)
    sized = meta_sizes(model, [dict(base.overrides or {})] + [dict(v.overrides or {}) if v is not None else {}
                                                              for v in scaled_vars.values()])
    state_at = {f: b for f, (b, _) in zip(factors, sized)}
    largest = {f: n for f, (_, n) in zip(factors, sized)}
    moved += state_at[1] or 0
    if seconds(moved, flop) >= min_us * 1e-6:
        return "module", f"published size ({why_of(moved, flop)} >= {min_us:g} µs)"
    factor, var, s_moved, s_flop = 1, None, moved, flop
    while seconds(s_moved, s_flop) < min_us * 1e-6 and factor < 2**20:  # every size constant grows
        if (largest[factor * 2] or 0) > INT32_LIMIT >= (largest[1] or 0):
            stop = (f"x{factor * 2} would make a tensor of {largest[factor * 2]} elements, past the 2^31 - 1 "
                    "that int32 offsets address (the published kernels' own limit, not a size the problem poses)")
            if var is None:
                return "module", f"published size ({why_of(moved, flop)}; {stop})"
            why = f"size constants x{factor}: {why_of(moved, flop)} -> {why_of(s_moved, s_flop)} ({stop})"
            problem.module_variants["bench"] = replace(var, derived=why)
            return "bench", why
        factor *= 2
        var = scaled_vars[factor]
        est = estimate_input_bytes(source, var.overrides) if var is not None else None
        if not est:
            return "module", "published size (the scaled sizes cannot be estimated)"
        s_moved = est[1] * 2 + (state_at[factor] or 0)
        scaled = estimate_gemm_flop(model, var.overrides, source) if gemm and var is not None else None
        s_flop = scaled[0] if scaled else 0.0
    if var is None:
        return "module", "published size (nothing to scale)"
    why = f"size constants x{factor}: {why_of(moved, flop)} -> {why_of(s_moved, s_flop)} (>= {min_us:g} µs)"
    var = replace(var, derived=why)
    problem.module_variants["bench"] = var
    return "bench", why


def problem_flop(problem: Any, variant: Any) -> float | None:
    """FLOP of one call of ``problem``'s reference at ``variant`` (its size overrides) where
    the verifier has none (a KernelBench problem has no spec to declare them): the matrix
    products of its ``forward`` read statically (:func:`gemm_flop.estimate_gemm_flop`), ``None``
    where none can be read. Without it a 137 GFLOP GEMM was reported memory-bound at 3% of
    the copy bandwidth."""
    from gemm_flop import estimate_gemm_flop

    if problem.inputs is None:
        return None
    got = estimate_gemm_flop(_model_source(problem), dict(getattr(variant, "overrides", None) or {}),
                             problem.inputs.source)
    return float(got[0]) if got else None


def _model_source(problem: Any) -> str:
    """The source whose ``Model.forward`` the FLOP and state are read from: the reference's, else
    the module ``get_inputs()`` comes from."""
    return problem.reference.source if getattr(problem, "reference", None) is not None else problem.inputs.source


def input_bytes(problem_path: Path, solution_path: Path, bandwidth_gbps: float | None, min_us: float,
                device: Any) -> list[int | None]:
    """Bytes ``get_inputs()`` allocates at each size a pair is checked and timed at (the
    published size and its bench size, read statically); ``[]`` where the problem cannot be
    loaded (its child then reports why)."""
    from xeforge_core.codemods.autotune_prune import profile_numbers

    try:
        problem = load_problem(solution_path, reference_path=problem_path) if problem_path != solution_path \
            else load_problem(solution_path)
    except Exception:  # noqa: BLE001 - the child loads it again and says what is wrong
        return []
    if problem.inputs is None:
        return []
    bw = bandwidth_gbps or profile_numbers(getattr(device, "profile", None), "cuda")["bandwidth_gbps"]
    bench, _ = bench_size(problem, bw, min_us, device)
    out: list[int | None] = []
    for size in dict.fromkeys(["module", bench]):
        got = estimate_input_bytes(problem.inputs.source, dict(problem.variant(size).overrides))
        out.append(got[1] if got else None)
    return out


def anchor_job(problem: Any, rules_source: str, overrides: dict[str, Any], device: Any,
               opts: Any) -> dict[str, Any] | None:
    """The job of ``anchor_timing.run_job`` for one size: the problem's inputs and reference,
    the published kernel, the rules result, the verifier's timing options (``opts``, a
    ``VerifyOptions``) and timing lock; ``None`` when the problem has no module with
    ``get_inputs`` to draw the inputs from."""
    from anchor_timing import COMPILE_MODE

    from xeforge_core.devlock import default_lock_dir
    from xeforge_core.problem.entry import entry_point

    inputs = problem.inputs.source if getattr(problem, "inputs", None) is not None else None
    if inputs is None or "def get_inputs" not in inputs:
        return None
    ref = problem.reference
    kernel = problem.kernel
    return {"device": f"{device.type}:{getattr(device, 'index', 0) or 0}", "inputs": inputs,
            "overrides": overrides, "compile_mode": COMPILE_MODE if ref is not None else None,
            "modules": {"eager": {"source": ref.source, "class_name": ref.class_name} if ref is not None else None,
                        "published": {"source": kernel.source, "class_name": kernel.class_name,
                                      "entry": kernel.entry},
                        "rules": dict(zip(("entry", "class_name"), entry_point(rules_source, kernel.class_name)),
                                      source=rules_source)},
            "options": {"warmup_ms": opts.warmup_ms, "rep_ms": opts.rep_ms,
                        "l2_bytes": getattr(device, "l2_bytes", None)},
            "lock_dir": str(opts.lock_dir or default_lock_dir()), "lock_key": device.lock_key()}


def time_anchors(job: dict[str, Any], workdir: Path, timeout: float) -> dict[str, Any]:
    """``anchor_timing.py`` on ``job`` in its own process: its JSON, or ``{"note": why not}``."""
    path = workdir / "anchor_job.json"
    path.write_text(json.dumps(job))
    try:
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "anchor_timing.py"), str(path)],
                              capture_output=True, text=True, timeout=timeout)
        lines = done.stdout.strip().splitlines()
        if done.returncode or not lines:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"note": f"anchors not timed: exit {done.returncode}: {tail[:200]}"}
        return json.loads(lines[-1])
    except Exception as exc:  # a failed compile or build is a result, not the end of the run
        return {"note": f"anchors not timed: {type(exc).__name__}: {str(exc)[:150]}"}


def _interval(r: dict[str, Any] | None) -> str:
    if not r or r.get("low") is None:
        return ""
    return f"[{r['low']:.3g}, {r['high']:.3g}]"


def apply_anchors(row: Row, got: dict[str, Any]) -> None:
    """Fill ``row``'s times and ratios from ``anchor_timing``'s result ``got`` (module
    docstring, item 4); the rules result's median is the anchors' one. A ratio already set
    (1.00 by identity where no stage was kept) stays."""
    from anchor_timing import LAUNCH_BOUND_US

    if got.get("note"):
        row.note = ((row.note + "; ") if row.note else "") + got["note"]
        return
    a, r = got.get("anchors", {}), got.get("ratios", {})

    def med(name: str) -> float | None:
        return a[name]["median_us"] if name in a else None

    row.published_us, row.rules_us, row.eager_us, row.compile_us = (med("published"), med("rules"), med("eager"),
                                                                    med("compiled"))
    row.compile_s = got.get("compile_s")
    row.method = str(got.get("method", ""))
    if "rules_vs_published" in r:
        row.interval = f"{_interval(r['rules_vs_published'])} ({row.method})"
        if row.rules_vs_published is None:
            row.rules_vs_published = r["rules_vs_published"]["point"]
        else:
            row.interval = f"measured {r['rules_vs_published']['point']:.3f}x " + row.interval
    row.rules_vs_eager = r.get("rules_vs_eager", {}).get("point")
    row.eager_interval = _interval(r.get("rules_vs_eager"))
    row.rules_vs_compile = r.get("rules_vs_compile", {}).get("point")
    row.compile_interval = _interval(r.get("rules_vs_compile"))
    row.aa_ratio = r.get("aa", {}).get("point")
    row.aa_interval = _interval(r.get("aa"))
    row.launch_bound = any(a[n]["median_us"] < LAUNCH_BOUND_US for n in ("published", "rules") if n in a)
    notes = []
    if row.launch_bound:
        notes.append(f"launch-bound (median < {LAUNCH_BOUND_US:g} µs): the ratio is about launch overhead, "
                     "not the kernel")
    aa = r.get("aa")
    if aa and aa.get("low") is not None and not aa["low"] <= 1.0 <= aa["high"]:
        notes.append(f"A/A {aa['point']:.3f}x {row.aa_interval} excludes 1: the ratios at this size are not "
                     "trustworthy to that margin")
    tuned = got.get("autotune") or {}
    if tuned.get("published") and tuned.get("rules") and tuned["published"] != tuned["rules"]:
        notes.append(f"autotune chose differently: published {tuned['published']}, rules {tuned['rules']}")
    if notes:
        row.note = ((row.note + "; ") if row.note else "") + "; ".join(notes)


def compile_anchor(problem_path: Path, overrides: dict[str, Any], device: str, timeout: float,
                   compile_only: bool = False) -> dict[str, Any]:
    """torch.compile's time for the problem (``compile_anchor.py`` in its own process, timed
    alone with per-call events: not the verifier's method; ``bench_inductor_kernelbench.py``
    uses it, this script times torch.compile among its anchors, :func:`time_anchors`). With
    ``compile_only`` the compile alone, which fills TorchInductor's caches (:func:`prewarm`)."""
    if device == "cpu":
        return {"note": "torch.compile not timed on cpu"}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "compile_anchor.py"), str(problem_path),
           "--overrides", json.dumps(overrides), "--device", device] + (["--compile-only"] if compile_only else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except Exception as exc:  # a failed compile is a result, not the end of the run
        return {"note": f"torch.compile failed: {type(exc).__name__}: {str(exc)[:150]}"}


def prewarm(problem: Any, problem_path: Path, sizes: list[str], device: Any, timeout: float
            ) -> tuple[threading.Thread | None, dict[str, dict[str, Any]]]:
    """torch.compile of the problem at each of ``sizes``, in a background thread while the
    rules pipeline runs (on a GPU; nothing on the CPU): the anchors' own compile later finds
    TorchInductor's caches filled, and the cold compile time measured here is the one reported.
    Returns the thread (join it before the anchors) and the results by size, filled as they end."""
    results: dict[str, dict[str, Any]] = {}
    if device.type == "cpu" or problem.inputs is None:
        return None, results

    def work() -> None:
        for size in sizes:
            overrides = dict(problem.variant(size).overrides)
            results[size] = compile_anchor(problem_path, overrides, device.type, timeout, compile_only=True)

    thread = threading.Thread(target=work, name="compile-prewarm", daemon=True)
    thread.start()
    return thread, results


def copy_bandwidth(device: str) -> float | None:
    if device == "cpu":
        return None
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compile_anchor.py"), "--copy-bandwidth",
                           "--device", device], capture_output=True, text=True, timeout=300)
    try:
        return float(json.loads(done.stdout.strip().splitlines()[-1])["copy_gbps"])
    except Exception:
        return None


def _settings(device: str, quick: bool) -> Settings:
    return Settings(quick=quick, device=device, jobs=1, iterations=1, seeds=1, distributions=["normal"],
                    warmup_ms=25.0 if quick else 100.0, rep_ms=100.0 if quick else 400.0, timeout_s=600.0,
                    max_shapes=2, budget_s=None, use_session=False, use_cache=False, keep_sessions=None,
                    log_progress=True)


def _harness_dtype(solution_path: Path) -> str | None:
    """``kernel`` for a KernelAgent pair (its test harness casts the problem to the dtype its
    kernels demand, bfloat16 in its examples: the verifier's ``--dtype kernel``), else ``None``."""
    meta = solution_path.parent / "meta.json"
    try:
        return "kernel" if json.loads(meta.read_text()).get("format") == "kernelagent" else None
    except (OSError, ValueError):
        return None


def published_precision(solution_path: Path) -> tuple[list[str], str]:
    """``(["tf32"], why)`` where the published solution's ``tl.dot`` calls multiply float32 in
    TF32 on NVIDIA GPUs (``precision_hints.tf32_dots``: Triton's default), else ``([], "")``.
    The rules engine is measured against the published kernel at the precision its author
    chose, as a user who adopted that kernel would pass ``--allow tf32``; without it the
    float32 contract refuses the published kernel itself as the baseline (five pairs on the
    H200, 2026-12-04), and nothing is left to optimise."""
    from xeforge_core.worker.precision_hints import tf32_dots

    try:
        found = tf32_dots(solution_path.read_text(encoding="utf-8"))
    except OSError:
        return [], ""
    if not found:
        return [], ""
    return ["tf32"], f"TF32 allowed: the published kernel's tl.dot multiplies float32 in TF32 ({found[0]})"


def final_options(published: str, sizes: list[str], settings: Settings | None = None) -> Any:
    """The verifier's options for timing a result already verified in full (the rules result,
    each version of which the stage that kept it verified at every correctness size, the
    tile-derived sizes and the grid probe; a first version ``xeforge batch`` verified) at
    ``sizes``: it is re-checked at the published size only, before it is timed, and no further
    sizes are derived, so the wall time goes to the measurements (on the H200 the full
    re-verification took 1-3 minutes a pair, and ran a KernelBench problem past its limit).
    ``settings``: the timing budget, dtype and precision allowances (``None``: the verifier's
    defaults)."""
    from xeforge_core.verify import VerifyOptions

    tuned = {} if settings is None else {
        "warmup_ms": settings.warmup_ms, "rep_ms": settings.rep_ms, "dtype": settings.dtype,
        "allow_precision": list(settings.allow_precision)}
    return VerifyOptions(seeds=1, distributions=["normal"], performance_variants=sizes, use_cache=False,
                         variants=[published], include_odd_size=False, tile_sizes=False, grid_coverage=False,
                         timeout_s=600.0, **tuned)


def run_pair(name: str, problem_path: Path, solution_path: Path, device: Any, args: argparse.Namespace,
             copy_gbps: float | None, workdir: Path) -> tuple[list[Row], list[tuple[str, str]]]:
    """Every measurement of one pair (module docstring)."""
    from xeforge_core.codemods.autotune_prune import profile_numbers
    from xeforge_core.commands.optimize import target_for
    from xeforge_core.verify import verify

    problem = load_problem(solution_path, reference_path=problem_path) if problem_path != solution_path \
        else load_problem(solution_path)
    reasons = codemod_reasons(problem, target_for(device, None))
    bw = copy_gbps or profile_numbers(getattr(device, "profile", None), "cuda")["bandwidth_gbps"]
    bench, why = bench_size(problem, bw, args.min_eager_us, device)
    published = problem.default_variant_name()  # "module" without a spec
    sizes = [published] + ([bench] if bench != published else [])
    print(f"{name}: sizes {sizes} ({why}); the rules pipeline", flush=True)
    allow, allow_why = published_precision(solution_path) if solution_path != problem_path else ([], "")
    allow = [*allow, BASELINE]  # the published kernel's measured precision (module docstring, item 2)
    settings = replace(_settings(device.type, args.quick), dtype=_harness_dtype(solution_path), allow_precision=allow)
    warming, warmed = prewarm(problem, problem_path, sizes, device, args.compile_timeout)
    # every stage is timed at both sizes, so none is kept that is slower at either
    outcome = run_rules_pipeline(Job("case", name, problem), device, settings, workdir, performance_variants=sizes)
    applied = ",".join(outcome.applied)
    stage_notes = "; ".join([allow_why] * bool(allow_why) + [f"{s.stage}: {s.status}" for s in outcome.stages
                                                             if s.status != "not_applicable"])
    if device.type == "cpu":  # nothing is timed in the interpreter: the stages' verdicts are the record
        print(f"{name}: stages applied: {applied or 'none'}; not re-checked at {sizes} (interpreter)", flush=True)
        refused = [f"{s.stage}: {s.status} ({s.reason[:240]})" for s in outcome.stages
                   if s.status == "failed" or "no correct candidate" in s.reason]
        note = "; ".join(x for x in (stage_notes[:300], *refused, "not timed: interpreter (the result is not "
                                     "re-checked at the published size there)") if x)
        return [Row(name, size, sizes=why if size == bench else "published", stages_applied=applied, note=note)
                for size in sizes], reasons
    opts = final_options(published, sizes, settings)
    print(f"{name}: stages applied: {applied or 'none'}; verifying the result at {sizes}", flush=True)
    verdict = verify(outcome.baseline, outcome.final_source, device=device, options=opts,
                     on_progress=lambda m: print(f"{time.strftime('%H:%M:%S')} {name}: final: {m}", flush=True))
    unchanged = outcome.final_source.strip() == outcome.baseline.kernel.source.strip()
    held = (verdict.precision or {}).get("from_baseline")
    if held:  # what --allow baseline resolved to: the published kernel's own measured precision
        stage_notes = f"held to the published kernel's precision: {', '.join(held)} (--allow baseline); {stage_notes}"
    perf = {p.variant: p for p in verdict.performance}
    rows = []
    for size in sizes:
        var = problem.variant(size)
        row = Row(name, size, sizes=why if size == bench else "published", stages_applied=applied,
                  note=stage_notes[:300])
        p = perf.get(size)
        if p is None:
            row.note = ((row.note + "; ") if row.note else "") + (
                "not timed: interpreter" if device.type == "cpu" else f"not timed: {verdict.reason or verdict.kind.value}")
            rows.append(row)
            continue
        row.verifier_ratio = p.speedup
        if unchanged:
            row.rules_vs_published = 1.0
            row.note = ((row.note + "; ") if row.note else "") + (
                f"no stage kept: the rules result is the published kernel (1.00x by identity; the verifier timed "
                f"it against itself at {p.speedup:.3f}x [{p.speedup_low or 0:.2f}, {p.speedup_high or 0:.2f}])")
        job = anchor_job(problem, outcome.final_source, dict(var.overrides), device, opts)
        posed = (verdict.precision or {}).get("posed_dtype")  # an argmax posed at bfloat16 outputs int64
        if job is not None and posed:
            job["dtype"] = posed
            row.note = ((row.note + "; ") if row.note else "") + f"problem posed at {posed} (dtype_specialised)"
        if job is None:
            row.published_us, row.rules_us = p.baseline.median_us, p.candidate.median_us
            row.eager_us = p.reference.median_us if p.reference else None
            row.rules_vs_published = row.rules_vs_published or p.speedup
            row.rules_vs_eager = row.eager_us / row.rules_us if row.eager_us and row.rules_us else None
            row.note = ((row.note + "; ") if row.note else "") + "anchors not timed (no get_inputs): the verifier's times"
        else:
            if warming is not None:
                warming.join(timeout=args.compile_timeout)
            print(f"{name}: timing the anchors at {size}", flush=True)
            apply_anchors(row, time_anchors(job, workdir, args.compile_timeout))
            cold = warmed.get(size, {}).get("compile_s")
            if cold is not None and not posed:  # the compile the anchors found cached, measured cold
                row.compile_s = cold
        flop = p.flop if p.flop is not None else problem_flop(problem, var)
        if flop and p.bytes_moved:
            nums = profile_numbers(getattr(device, "profile", None), device.type)
            ridge = nums["peak_tflops"] * 1e12 / (nums["bandwidth_gbps"] * 1e9)
            row.bound = "memory" if flop / p.bytes_moved < ridge else "compute"
        elif p.bytes_moved:
            row.bound = "memory"
        if row.bound == "memory" and p.bytes_moved and row.rules_us:
            row.achieved_gbps = p.bytes_moved / (row.rules_us * 1e-6) / 1e9
            if copy_gbps:
                row.hbm_fraction = row.achieved_gbps / copy_gbps
                if row.hbm_fraction < HBM_GOAL and size == bench:
                    why = roofline_gap(p, row.hbm_fraction, goal=HBM_GOAL, bandwidth="the copy bandwidth")
                    row.note += f"; below {HBM_GOAL:.0%} of copy bandwidth: " + "; ".join(why)
        if device.type == "cuda" and row.eager_us is not None and size == bench and row.eager_us < args.min_eager_us:
            row.note += f"; eager {row.eager_us:.0f} µs < {args.min_eager_us:g} µs at the derived size"
        rows.append(row)
    return rows, reasons


#: A row's note that a resumed run does not keep but measures again: the machine failed the pair,
#: not its kernels (the device or the disk was full, other children holding it, while the baseline
#: or the timing ran), or a run before :func:`published_precision` refused the pair for TF32.
MEASURE_AGAIN = re.compile(r"failed in this environment \((?:environment|oom):|No space left on device"
                           r"|while timing: out of memory|to accept this precision, pass --allow tf32")


def resumed(path: Path, header: dict[str, Any], pair_timeout: float | None = None,
            ) -> tuple[list[Row], collections.Counter, list[str], dict[str, Any]]:
    """The rows, reasons and errors of an earlier run's ``results.json`` (``--resume``), without
    the rows of pairs it did not run (past its deadline), stopped at a limit the deadline cut
    below ``pair_timeout``, or whose note matches :data:`MEASURE_AGAIN`, and ``header`` with the
    earlier runs' device, date and versions kept under ``runs``. Raises ``SystemExit`` when the
    earlier run was on another device (its times cannot sit in one table with these)."""
    data = json.loads(path.read_text())
    old = data.get("header") or {}
    if old.get("device") and old["device"] != header["device"]:
        raise SystemExit(f"{path} was measured on {old['device']}, this run is on {header['device']}: "
                         "give another --out")
    def cut(note: str) -> bool:
        limit = re.search(r"^stopped after \d+ s \(pair limit (\d+) s\)", note)
        return bool(limit and pair_timeout and float(limit.group(1)) < pair_timeout - 1)

    again = {r["pair"] for r in data.get("rows", []) if MEASURE_AGAIN.search(r.get("note", ""))}
    rows = [Row(**r) for r in data.get("rows", []) if not r.get("note", "").startswith("not run")
            and not cut(r.get("note", "")) and r["pair"] not in again]
    reasons = collections.Counter({(r["stage"], r["reason"]): r["count"] for r in data.get("reasons", [])})
    runs = [*old.get("runs", []), {k: old.get(k) for k in ("date", "versions", "copy_gbps")}]
    return rows, reasons, list(data.get("errors", [])), {**header, "runs": runs}


def _pairs(root: Path, only: list[str], limit: int | None, samples: bool) -> list[tuple[str, Path, Path]]:
    out: list[tuple[str, Path, Path]] = []
    pairs = root / "pairs"
    if pairs.is_dir():
        for d in sorted(pairs.iterdir()):
            if (d / "problem.py").is_file() and (d / "solution.py").is_file() and (not only or d.name in only):
                out.append((d.name, d / "problem.py", d / "solution.py"))
    if limit:
        out = out[:limit]
    if samples:  # first: quick, and a deadline that cuts the run cuts pairs, not the samples' row
        own = [(f"sample:{k.stem}", k, k) for k in sorted((ROOT / "sample_kernels").glob("[0-9][0-9]_*.py"))
               if not k.stem.endswith("_ref") and (not only or k.stem in only)]
        out = own + out
    known = {n.removeprefix("sample:") for n, _, _ in out} | ({d.name for d in pairs.iterdir()} if pairs.is_dir() else set())
    for name in only:
        if name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=1)
            raise SystemExit(f"--only {name}: no such pair under {pairs}" + (f"; nearest: {near[0]}" if near else ""))
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


_NUMBER = r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?"


def _bounds(text: str) -> tuple[float, float] | None:
    """The last ``[low, high]`` in ``text`` (an interval as the rows write it, alone or after
    ``measured 1.089x`` and before its method), or ``None`` where there is none."""
    found = re.findall(rf"\[({_NUMBER}), ({_NUMBER})\]", text)
    return (float(found[-1][0]), float(found[-1][1])) if found else None


def _holds_one(interval: str) -> bool:
    """Whether ``"[low, high]"`` holds 1. Raises ``ValueError`` where ``interval`` is none."""
    bounds = _bounds(interval)
    if bounds is None:
        raise ValueError(f"not an interval: {interval!r}")
    return bounds[0] <= 1.0 <= bounds[1]


#: A ratio without an interval counts as faster from the least gain the pipeline keeps on
#: (``pipeline.outcomes.DEFAULT_MIN_SPEEDUP``).
FASTER_WITHOUT_INTERVAL = DEFAULT_MIN_SPEEDUP


def is_improved(row: Row) -> bool:
    """Whether a rules stage was kept and the rules result is faster than the published kernel:
    the 95 % interval of ``rules_vs_published`` lies above 1 (``[1.01, 1.04]``; a kept candidate
    at 1.006x ``[0.996, 1.02]`` is not faster), or, where no interval was measured, the ratio
    reaches :data:`FASTER_WITHOUT_INTERVAL`."""
    if not row.stages_applied or not row.rules_vs_published or row.rules_vs_published <= 1.0:
        return False
    bounds = _bounds(row.interval)
    if bounds is not None:
        return bounds[0] > 1.0
    return row.rules_vs_published >= FASTER_WITHOUT_INTERVAL


def summarize(rows: list[Row], reasons: collections.Counter, header: dict[str, Any]) -> str:
    """The markdown report (module docstring)."""
    def best(pair_rows: list[Row]) -> Row | None:
        timed = [r for r in pair_rows if r.rules_us is not None]
        return next((r for r in timed if r.size == "bench"), timed[0] if timed else None)

    by_pair: dict[str, list[Row]] = collections.defaultdict(list)
    for r in rows:
        by_pair[r.pair].append(r)
    timed = [b for b in (best(v) for k, v in by_pair.items() if not k.startswith("sample:")) if b is not None]
    chosen = [r for r in timed if not r.launch_bound]  # launch-bound ratios are about launching
    samples = [b for b in (best(v) for k, v in by_pair.items() if k.startswith("sample:")) if b is not None
               and not b.launch_bound]
    improved = [r for r in chosen if is_improved(r)]
    aa = [r for r in rows if r.aa_ratio is not None]
    aa_out = [r for r in aa if r.aa_interval and not _holds_one(r.aa_interval)]
    lines = [f"# The rules engine over published pairs ({header['device']}, {header['date']})", "",
             f"versions: {header['versions']}; copy bandwidth: {_fmt(header.get('copy_gbps'))} GB/s; "
             f"bench size: eager >= {header['min_eager_us']:g} µs (derived through the size constants)", "",
             f"- pairs timed: {len(timed)}, of which launch-bound at the size reported (left out below): "
             f"{len(timed) - len(chosen)}; improved (a rules stage kept, its interval over the published above 1): "
             f"{len(improved)}"
             + (f" ({len(improved) / len(chosen):.0%} of the rest)" if chosen else ""),
             f"- A/A (published over a second instance, same run): {len(aa)} sizes" + (
                 f", median {statistics.median([r.aa_ratio for r in aa]):.3f}, range {min(r.aa_ratio for r in aa):.3f}-"
                 f"{max(r.aa_ratio for r in aa):.3f}; interval excludes 1 at {len(aa_out)}: "
                 + (", ".join(f"{r.pair}/{r.size}" for r in aa_out) or "none") if aa else ""),
             f"- geometric mean at the bench size (launch-bound left out), rules over published: {_fmt(geomean([r.rules_vs_published for r in chosen]))}; "
             f"over the improved only: {_fmt(geomean([r.rules_vs_published for r in improved]))}",
             f"- rules over eager: {_fmt(geomean([r.rules_vs_eager for r in chosen]))}; rules over torch.compile: "
             f"{_fmt(geomean([r.rules_vs_compile for r in chosen]))}",
             f"- samples, rules over eager: {_fmt(geomean([r.rules_vs_eager for r in samples]))}", "",
             "| pair | size | published µs | rules µs | eager µs | compile µs (compile s) | rules/published [95 %] "
             "| rules/eager [95 %] | rules/compile [95 %] | A/A [95 %] | verifier | method | bound | GB/s (of copy) "
             "| stages kept | sizes | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hbm = f"{_fmt(r.achieved_gbps)} ({r.hbm_fraction:.0%})" if r.hbm_fraction is not None else _fmt(r.achieved_gbps)
        lines.append(f"| {r.pair} | {r.size} | {_fmt(r.published_us)} | {_fmt(r.rules_us)} | {_fmt(r.eager_us)} | "
                     f"{_fmt(r.compile_us)} ({_fmt(r.compile_s)}) | {_fmt(r.rules_vs_published)} {r.interval} | "
                     f"{_fmt(r.rules_vs_eager)} {r.eager_interval} | {_fmt(r.rules_vs_compile)} {r.compile_interval} | "
                     f"{_fmt(r.aa_ratio)} {r.aa_interval} | {_fmt(r.verifier_ratio)} | "
                     f"{r.method}{' (launch-bound)' if r.launch_bound else ''} | {r.bound} | {hbm} | "
                     f"{r.stages_applied} | {r.sizes} | {r.note.replace('|', '/')} |")
    lines += ["", "## Why a codemod did not apply (counts over the pairs)", "", "| count | stage | reason |",
              "|---|---|---|"]
    for (stage, reason), n in reasons.most_common():
        lines.append(f"| {n} | {stage} | {reason.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def one_pair(args: argparse.Namespace, device: Any) -> int:
    """The child of :func:`pair_in_child`: ``run_pair`` for ``--one`` (a pair or ``sample:`` name)
    with the parent's copy bandwidth, its rows and reasons written to ``--one-out`` as JSON."""
    name = args.one
    found = [p for p in _pairs(args.dir, [name.removeprefix("sample:")], None, name.startswith("sample:"))
             if p[0] == name]
    copy_gbps = float(os.environ["XEFORGE_COPY_GBPS"]) if os.environ.get("XEFORGE_COPY_GBPS") else None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            got, why = run_pair(name, found[0][1], found[0][2], device, args, copy_gbps, Path(tmp))
        except Exception as exc:  # the parent writes it as the pair's row
            got, why = [Row(name, "-", note=f"failed: {type(exc).__name__}: {str(exc)[:200]}")], []
    args.one_out.write_text(json.dumps({"rows": [asdict(r) for r in got], "reasons": [list(w) for w in why]}))
    return 0


def pair_in_child(name: str, args: argparse.Namespace, limit: float,
                  copy_gbps: float | None) -> tuple[list[Row], list[tuple[str, str]]]:
    """One pair in a process of its own (its own process group, so its verifier workers go with
    it), stopped after ``limit`` seconds: its rows and reasons, or a row saying where it was
    stopped (the last lines of ``OUT/logs/<pair>.log``)."""
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    safe = name.replace(":", "_")
    log, result = logs / f"{safe}.log", logs / f"{safe}.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), str(args.dir), "--out", str(args.out), "--one", name,
           "--one-out", str(result), "--min-eager-us", str(args.min_eager_us),
           "--compile-timeout", str(args.compile_timeout)] + (["--device", args.device] if args.device else []) \
        + (["--quick"] if args.quick else [])
    env = dict(os.environ, PYTHONUNBUFFERED="1", **({"XEFORGE_COPY_GBPS": str(copy_gbps)} if copy_gbps else {}))
    started = time.monotonic()
    status = run_command_bounded(cmd, log, limit, env)
    stopped = status is None
    if not stopped and result.exists():
        data = json.loads(result.read_text())
        return [Row(**r) for r in data["rows"]], [tuple(w) for w in data["reasons"]]  # type: ignore[misc]
    tail = log_tail(log)
    why = (f"stopped after {time.monotonic() - started:.0f} s (pair limit {limit:.0f} s)" if stopped
           else f"failed: the child exited with status {status}")
    return [Row(name, "-", note=f"{why}; last: {tail}")], []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None, help="cuda, xpu or cpu (default: the one found)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many pairs")
    ap.add_argument("--only", action="append", default=[],
                    help="pair names (comma-separated or repeated; sample names without 'sample:')")
    ap.add_argument("--samples", action="store_true", help="also the project's samples")
    ap.add_argument("--min-eager-us", type=float, default=MIN_EAGER_US)
    ap.add_argument("--compile-timeout", type=float, default=900.0)
    ap.add_argument("--quick", action="store_true", help="shorter timing and at most 4 autotune configs")
    ap.add_argument("--pair-timeout", type=float, default=None,
                    help="seconds one pair may take (its own process group, stopped after; a row says "
                         "so with the last lines of its log); default: no limit and no child process")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child: one pair, rows to --one-out
    ap.add_argument("--one-out", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=1,
                    help="pairs at once, each in its own child (needs --pair-timeout): their compiles and "
                         "correctness runs overlap, while the device's timing lock keeps every timing run "
                         "alone on the GPU (xeforge_core.devlock)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows of OUT/results.json and run only the pairs it lacks (or did not run "
                         "before its deadline), so calls of limited length add up to one table")
    ap.add_argument("--redo", nargs="+", default=[], metavar="PAIR",
                    help="with --resume: measure these pairs again (their earlier rows are dropped), e.g. after "
                         "a fix to how their kernels are entered")
    ap.add_argument("--deadline-min", type=float, default=None,
                    help="start no pair past this many minutes (the summary is still written; pairs left "
                         "are listed as not run)")
    ap.add_argument("--reasons-only", action="store_true",
                    help="only the static codemod reasons and applicable counts (nothing run or timed)")
    args = ap.parse_args(argv)
    args.only = [n for given in args.only for n in given.split(",") if n]
    if args.jobs > 1 and not args.pair_timeout:
        ap.error("--jobs above 1 runs each pair in a child: give --pair-timeout too")
    device = detect_device(args.device) if args.device else detect_device()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.reasons_only:
        print(reasons_only(_pairs(args.dir, args.only, args.limit, args.samples), device, args.out))
        return 0
    import torch

    if args.one is not None:  # the child of pair_in_child
        return one_pair(args, device)
    copy_gbps = copy_bandwidth(device.type)
    header = {"device": getattr(device, "name", device.type), "date": dt.date.today().isoformat(),
              "versions": f"python {platform.python_version()}, torch {torch.__version__}",
              "copy_gbps": copy_gbps, "min_eager_us": args.min_eager_us}
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    reasons: collections.Counter = collections.Counter()
    errors: list[str] = []
    pairs = _pairs(args.dir, args.only, args.limit, args.samples)
    order = {name: i for i, (name, _, _) in enumerate(pairs)}
    if args.resume and (args.out / "results.json").exists():
        rows, reasons, errors, header = resumed(args.out / "results.json", header, args.pair_timeout)
        unknown = sorted(set(args.redo) - {r.pair for r in rows} - {n for n, _, _ in pairs})
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(order), n=1)
            raise SystemExit(f"--redo {unknown[0]}: no such pair" + (f"; nearest: {near[0]}" if near else ""))
        rows = [r for r in rows if r.pair not in args.redo]
        done = {r.pair for r in rows}
        print(f"resuming: {len(done)} pairs already measured", flush=True)
        pairs = [p for p in pairs if p[0] not in done]
    t0 = time.monotonic()

    def past_deadline() -> bool:
        return args.deadline_min is not None and time.monotonic() - t0 > args.deadline_min * 60

    # the verifier's jobs (and their saved runs) live under the temporary folder
    capacity = device_capacity(device.type, work_dir=tempfile.gettempdir()) if args.jobs > 1 else None
    gate = MemoryGate(capacity, free_bytes=device_free_bytes) if capacity else None

    def measure(name: str, problem_path: Path, solution_path: Path, tmp: Path) -> tuple[list[Row], list, float]:
        if gate is None:
            return measure_now(name, problem_path, solution_path, tmp)
        need = pair_footprint(input_bytes(problem_path, solution_path, copy_gbps, args.min_eager_us, device))
        with gate.admit(need, give_up=past_deadline):
            return measure_now(name, problem_path, solution_path, tmp)

    def measure_now(name: str, problem_path: Path, solution_path: Path, tmp: Path) -> tuple[list[Row], list, float]:
        started = time.monotonic()
        if past_deadline():
            return [Row(name, "-", note=f"not run: past the {args.deadline_min:g}-minute deadline")], [], 0.0
        if args.pair_timeout:
            left = (args.deadline_min * 60 - (started - t0)) if args.deadline_min is not None else args.pair_timeout
            got, why = pair_in_child(name, args, min(args.pair_timeout, max(left, 30.0)), copy_gbps)
        else:
            try:
                got, why = run_pair(name, problem_path, solution_path, device, args, copy_gbps, tmp)
            except Exception as exc:  # one bad pair is a row, not the end of the run
                got, why = [Row(name, "-", note=f"failed: {type(exc).__name__}: {str(exc)[:200]}")], []
        return got, why, time.monotonic() - started

    def record(name: str, got: list[Row], why: list, seconds: float) -> None:
        errors.extend(f"{name}: {r.note}" for r in got if r.note.startswith("failed:"))
        rows.extend(replace(r, note=r.note.strip("; ")) for r in got)
        reasons.update(set(why))
        print(f"{name}: {seconds:.0f} s; {[(r.size, _fmt(r.rules_vs_published)) for r in got]}", flush=True)
        write_results()

    def write_results() -> None:
        (args.out / "results.json").write_text(json.dumps(
            {"header": header, "rows": [asdict(r) for r in rows], "errors": errors,
             "reasons": [{"stage": s, "reason": r, "count": n} for (s, r), n in reasons.most_common()]}, indent=1))

    with tempfile.TemporaryDirectory() as tmp:
        if args.jobs > 1:  # children at once: the device lock keeps each timing alone on the GPU
            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                futures = {pool.submit(measure, *pair, Path(tmp)): pair[0] for pair in pairs}
                for fut in concurrent.futures.as_completed(futures):
                    record(futures[fut], *fut.result())
        else:
            for pair in pairs:
                record(pair[0], *measure(*pair, Path(tmp)))
    rows.sort(key=lambda r: order.get(r.pair, len(order)))  # the corpus's order, whatever finished first
    write_results()
    with open(args.out / "pairs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(asdict(Row("", "")).keys()))
        w.writeheader()
        w.writerows(asdict(r) for r in rows)
    with open(args.out / "reasons.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["count", "stage", "reason"])
        w.writerows([n, s, r] for (s, r), n in reasons.most_common())
    text = summarize(rows, reasons, header)
    (args.out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
