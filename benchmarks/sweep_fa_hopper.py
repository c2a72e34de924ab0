"""Sweep the loop forms of the Hopper Flash Attention step 10 on an NVIDIA GPU: every variant
checked against SDPA in fp32 first, then the correct ones timed against SDPA (a script, not a test).

The variants are configs of ``cuda/10_loop_form.py`` (tile, warps, pipeline depth, loop form: the
plain loop, step 7's software-pipelined loop, Triton's warp specialization, and the plain loop with
the lazy rescale), each forced alone, per head-dim class (:data:`VARIANTS`). Three phases:

1. **check** (parallel worker processes, ``bench_flash_attention.check_task``): every variant at
   every benchmark shape and every ``ci``/``check`` shape of the spec whose head-dim class it
   serves, against SDPA in fp32 (absolute error at most ``ATOL``, non-finite outputs wrong). This
   also compiles every kernel into Triton's cache. A variant wrong at any shape is reported wrong
   with its shapes and errors and is **never timed**; a check with no result after
   ``--check-timeout`` seconds is a hang (its worker is killed, the variant is wrong).
   Persistent variants (:data:`PERSISTENT_VARIANTS`, and the ``-fma`` ones that compute half of
   each block's exponentials on the FMA units) are checked only with ``--persistent``.
   Warp-specialized variants (:data:`WS_VARIANTS`) are checked only with ``--warp-specialized``:
   on the H200 with Triton 3.6 every one of them hung with host-built descriptors
   (``docs/measured/h200-fa-ws-hang``); step 10 now builds their descriptors on the device, the
   form that ran right there at two stages (and left outputs unwritten at three and four).
2. **time** (serial, this process): per benchmark shape, the median of ``--rounds`` interleaved
   rounds of ``triton.testing.do_bench`` medians (L2 flushed before each call), exactly as
   ``bench_flash_attention.py`` times the trajectory: SDPA twice (A/A, the noise), steps 6, 7, 9
   and 10 as written (autotuned), and each correct variant, every one from its own module copy
   whose autotuners hold only that config.
3. **report**: ``sweep.csv`` (one row per variant and shape), ``results.json`` and ``summary.md``
   (per shape the variants ranked, the best correct one against the 0.95x goal, the steps in
   order with their ratio to the step before, the warp-specialization correctness matrix when
   checked) in
   ``--out``, rewritten after every shape, so a run cut short keeps what it measured.

Usage (from the repository root, on the GPU machine)::

    python benchmarks/sweep_fa_hopper.py --out $OUT/sweep
    python benchmarks/sweep_fa_hopper.py --out /tmp/s --shapes bench-gpu --only pipe-64x64-w4-s3,plain-128x64-w8-s3
    python benchmarks/sweep_fa_hopper.py --out /tmp/ws --warp-specialized --only ws-128x128-s2

About 1.5-2.5 minutes of checking and compiling with 16 cores, then about 1 minute of timing; the
run stops timing at ``--deadline-min`` (default 5.5). Without a GPU (``--device cpu``) only the
check phase runs, in Triton's interpreter, at the small shapes.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "benchmarks"):  # the product, and the sibling scripts
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_flash_attention import (  # noqa: E402
    ATOL,
    CHECK_TIMEOUT_S,
    PEAK_FP16_TFLOPS,
    chosen,
    dims_text,
    flop,
    inputs,
    measure,
    noise_of,
    run_checks,
    tuners_of,
)

TRAJECTORY = ROOT / "sample_kernels" / "flash_attention_trajectory"
STEP10 = TRAJECTORY / "cuda" / "10_loop_form.py"
#: The steps as written are checked at the benchmark shapes too; their index in check tasks is 6 + i.
#: The steps timed as written beside the variants (file, label), in trajectory order.
STEPS = [("cuda/06_hopper_tiles.py", "step 6"), ("cuda/07_dot_pipelining.py", "step 7"),
         ("cuda/09_head_dim_split.py", "step 9"), ("cuda/10_loop_form.py", "step 10")]
GOAL = 0.95

PLAIN, PIPELINED, WS, PERSISTENT, PERSISTENT_WS, PERSISTENT_PIPE, HALVES = 0, 1, 2, 3, 4, 5, 6
_FORM = {PLAIN: "plain", PIPELINED: "pipe", WS: "ws", PERSISTENT: "pers", PERSISTENT_WS: "pws", HALVES: "halves",
         PERSISTENT_PIPE: "ppipe"}
_WARP_SPECIALIZED = (WS, PERSISTENT_WS)


def variant_name(args: tuple) -> str:
    """``plain-128x64-w8-s3``, ``ws-128x128-s2``, ``lazy-64x128-w4-s2``, ``pers-64x64-w4-s3-x2`` (two
    persistent programs an SM), ``pws-128x128-s2-fma`` (half the exponentials on the FMA units) for
    ``_config`` args."""
    bm, bn, warps, stages, loop, lazy = args[:6]
    per_sm = args[6] if len(args) > 6 else 1
    fma = len(args) > 7 and args[7]
    form = "lazy" if lazy else _FORM[loop]
    return (f"{form}-{bm}x{bn}" + ("" if loop in _WARP_SPECIALIZED else f"-w{warps}") + f"-s{stages}"
            + (f"-x{per_sm}" if per_sm != 1 else "") + ("-fma" if fma else ""))


def _v(bm: int, bn: int, warps: int, stages: int, loop: int, lazy: bool = False, per_sm: int = 1,
       exp_fma: bool = False) -> tuple:
    extra = (per_sm, True) if exp_fma else ((per_sm,) if per_sm != 1 else ())
    return (bm, bn, warps, stages, loop, lazy) + extra


#: Variants per head-dim class (the padded head dim, split parts added up), as ``_config`` args.
#: Shared memory and registers of each were checked for sm_90 on the CPU
#: (``--compile-only``; docs/measured/cpu-fa-hopper-sweep): none spills, all fit 232448 bytes.
VARIANTS: dict[int, list[tuple]] = {
    128: [
        _v(128, 128, 8, 3, PLAIN), _v(128, 128, 8, 2, PLAIN), _v(128, 64, 8, 3, PLAIN),
        _v(128, 64, 8, 4, PLAIN), _v(64, 64, 4, 3, PLAIN), _v(64, 128, 4, 2, PLAIN),
        _v(64, 64, 4, 3, PIPELINED), _v(128, 128, 8, 3, PIPELINED), _v(64, 128, 4, 2, PIPELINED),
        _v(128, 128, 8, 3, PLAIN, True), _v(128, 64, 8, 3, PLAIN, True), _v(64, 64, 4, 3, PLAIN, True),
        # two programs an SM (their shared memory at most half the SM's): one program's softmax
        # overlaps the other's dots, the overlap warp specialization builds within one program
        _v(64, 64, 4, 2, PLAIN), _v(64, 64, 4, 2, PIPELINED), _v(64, 64, 4, 2, PLAIN, True),
        _v(128, 64, 8, 2, PLAIN), _v(128, 64, 8, 2, PIPELINED), _v(64, 32, 4, 3, PLAIN), _v(64, 32, 4, 2, PLAIN),
        # the query tile as two 64-row halves, both halves' Q K^T issued before either softmax, then
        # each half's softmax and P V in turn: FlashAttention-3's ping-pong of two consumer
        # warpgroups written as one program's order of independent work (no named barriers in
        # Triton 3.6); at 8 warps each dot is split over both warpgroups, at 4 one warpgroup issues
        # both halves' dots. Compiled for sm_90 (docs/measured/cpu-fa-halves-compile) they put 68
        # exponentials of a block under a wgmma in flight, as step 7's pipelined loop does (66) and
        # the plain loop does not (0), at 255 registers; 128 x 128 tiles and 4 warps spill there
        _v(128, 64, 8, 3, HALVES), _v(128, 64, 8, 2, HALVES),
    ],
    64: [
        _v(64, 128, 4, 2, PLAIN), _v(64, 128, 4, 3, PLAIN), _v(128, 64, 8, 3, PLAIN),
        _v(128, 128, 8, 3, PLAIN), _v(64, 64, 4, 3, PLAIN),
        _v(64, 64, 4, 3, PIPELINED), _v(64, 128, 4, 3, PIPELINED),
        _v(64, 128, 4, 2, PLAIN, True), _v(128, 64, 8, 3, PLAIN, True),
        _v(128, 64, 8, 3, HALVES), _v(128, 128, 4, 2, HALVES),   # halves-128x128-w8-s3 spills 12 bytes
    ],
}

#: Warp-specialized variants (``--warp-specialized``): each hung on the H200 with Triton 3.6
#: (no result in 120 s at B=1, A=4, S=1024, where every other variant ran in 1-3 s:
#: docs/measured/h200-fa-ws-hang).
WS_VARIANTS: dict[int, list[tuple]] = {
    128: [_v(128, 128, 4, 2, WS), _v(128, 64, 4, 2, WS), _v(128, 64, 4, 3, WS)],
    64: [_v(128, 128, 4, 2, WS), _v(128, 64, 4, 2, WS), _v(128, 128, 4, 3, WS)],
}


#: Persistent variants (``--persistent``): one program (or two, ``-x2``) an SM walks the query tiles
#: head by head (the loop nest not flattened: Triton 3.6 rejects that with host-built descriptors);
#: the warp-specialized ones (``pws``) specialize the loop over tiles, so the producer loads the next
#: tile while the consumers finish this one (descriptors built on the device).
PERSISTENT_VARIANTS: dict[int, list[tuple]] = {
    128: [_v(128, 128, 8, 2, PERSISTENT), _v(128, 128, 8, 3, PERSISTENT), _v(128, 64, 8, 3, PERSISTENT),
          _v(64, 64, 4, 3, PERSISTENT, per_sm=2), _v(64, 64, 4, 2, PERSISTENT, per_sm=2),
          _v(128, 128, 4, 2, PERSISTENT_WS), _v(128, 64, 4, 2, PERSISTENT_WS),
          # persistent with the key loop software-pipelined in one loop (block j's Q K^T issued before
          # block j-1's softmax): pws's consumers wait on each block's own product
          # (docs/measured/h100-fa-ncu-source), and Triton 3.6 does not compile this loop inside pws's;
          # on an H100 (2026-12-06, docs/measured/h100-fa-ppipe) wrong at two stages where the head dim
          # is split (D 96, D 48; right in the interpreter), before and after its prologue and epilogue
          # became one-trip loops, and at three stages right but the slowest variant (0.60-0.75x SDPA):
          # kept as the measured negative result, in no search space
          _v(128, 64, 8, 2, PERSISTENT_PIPE), _v(128, 64, 8, 3, PERSISTENT_PIPE),  # 128 x 128 spills
          # pws-128x128-s2 was the fastest at head dims 96 and 128 (an H100 and an H200, 2026-12-06);
          # these asked whether exponentials shared with the FMA units add to it: they did not, they
          # are slower everywhere (the warp-specialized ones spill up to 2.7 KB at the 168 registers
          # a thread of 12 warps gets; docs/measured/gpu-fa-persistent)
          _v(128, 128, 4, 2, PERSISTENT_WS, exp_fma=True), _v(128, 128, 4, 2, WS, exp_fma=True),
          _v(128, 64, 8, 3, PLAIN, exp_fma=True)],
    64: [_v(128, 128, 8, 3, PERSISTENT), _v(64, 128, 4, 2, PERSISTENT, per_sm=2), _v(128, 64, 8, 3, PERSISTENT),
         _v(128, 128, 4, 2, PERSISTENT_WS), _v(128, 64, 8, 2, PERSISTENT_PIPE), _v(64, 128, 4, 2, PLAIN, exp_fma=True),
         _v(128, 128, 4, 2, PERSISTENT_WS, exp_fma=True)],
}


def variants_of(head_dim: int, warp_specialized: bool = False, persistent: bool = False) -> list[tuple]:
    """The variants checked for padded head-dim class ``head_dim`` (64 or 128)."""
    return (VARIANTS[head_dim] + (WS_VARIANTS[head_dim] if warp_specialized else [])
            + (PERSISTENT_VARIANTS[head_dim] if persistent else []))


def load_module(path: Path, tag: str) -> Any:
    """A fresh copy of the module at ``path`` under its own name (its own autotuners)."""
    spec = importlib.util.spec_from_file_location(f"fa_sweep_{tag}", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def head_dim_class(d: int) -> int:
    """The padded head dim (split parts added up) step 10 computes ``d`` at: 64 or 128 (the
    variants cover no larger class)."""
    d0 = 1 << (d.bit_length() - 1)
    d1 = d - d0
    if d1 == 0:
        width = max(16, d0)
    elif d1 >= 16 and d1 & (d1 - 1) == 0:
        width = d0 + d1
    else:
        width = 1 << (d - 1).bit_length()
    return 64 if width <= 64 else 128


def forced(mod: Any, args: tuple) -> Any:
    """``mod`` with every autotuner holding only the config ``mod._config(*args)``."""
    for t in tuners_of(mod):
        t.configs = [mod._config(*args)]
        t.cache, t.best_config = {}, None
    return mod


def shapes_of(names: list[str] | None) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """(benchmark shapes, check shapes) of the attention spec, name -> dims."""
    from xeforge_core.samples import check_variants, flash_attention_trajectory

    problem = flash_attention_trajectory("cuda")[0].problem
    bench = {n: dict(problem.variant(n).dims) for n in problem.spec.variants if n.startswith("bench-gpu")}
    if names:
        bench = {n: d for n, d in bench.items() if n in names}
    checks = {n: dict(problem.variant(n).dims) for n in check_variants(problem)}
    return bench, checks


def check_variants_all(bench: dict, checks: dict, device: str, workers: int, only: set[str], log: Any,
                       warp_specialized: bool = False, check_timeout_s: float = CHECK_TIMEOUT_S,
                       persistent: bool = False) -> list[dict]:
    """Every variant at every shape of its class (bench shapes only on a GPU), in worker processes;
    a check past ``check_timeout_s`` seconds is a hang."""
    tasks = []
    for name, dims in {**(bench if device != "cpu" else {}), **checks}.items():
        for args in variants_of(head_dim_class(int(dims["D"])), warp_specialized, persistent):
            if only and variant_name(args) not in only:
                continue
            tasks.append({"path": str(STEP10), "step": 10, "variant": name, "dims": dims, "device": device,
                          "causal": False, "select": ["sweep", list(args)], "kind": variant_name(args)})
    if device != "cpu":  # the steps as written (autotuned): checked, and compiled in parallel before timing
        for name, dims in bench.items():
            for i, (rel, label) in enumerate(STEPS):
                tasks.append({"path": str(TRAJECTORY / rel), "step": 6 + i, "variant": name, "dims": dims,
                              "device": device, "causal": False, "select": ["default"], "kind": label})
    log(f"checking {len(tasks)} (variant, shape) pairs with {workers} workers")
    return run_checks(tasks, workers, log, check_timeout_s)


def time_shape(name: str, dims: dict[str, int], good: list[tuple], wrong: set[str], device: str,
               args: argparse.Namespace, log: Any) -> list[dict]:
    """The rows of one benchmark shape: SDPA twice, the steps as written and each correct variant."""
    import torch.nn.functional as F

    q, k, v = inputs(dims, device, seed=0)
    fns: dict[str, Any] = {"sdpa": partial(F.scaled_dot_product_attention, q, k, v),
                           "sdpa_again": partial(F.scaled_dot_product_attention, q, k, v)}
    configs: dict[str, str] = {}
    for rel, label in STEPS:
        if label in wrong:
            log(f"{label} at {name}: not timed, wrong in the check phase")
            continue
        mod = load_module(TRAJECTORY / rel, f"{label.replace(' ', '')}_{name}".replace("-", "_"))
        try:
            mod.kernel_function(q, k, v)  # autotunes now
            fns[label] = partial(mod.kernel_function, q, k, v)
            configs[label] = chosen(mod)  # a module loaded for this shape: only this call's pick
        except Exception as exc:  # a step failing here is reported, the sweep goes on
            log(f"{label} at {name} failed: {type(exc).__name__}: {str(exc)[:200]}")
    for a in good:
        vname = variant_name(a)
        mod = forced(load_module(STEP10, f"{vname}_{name}".replace("-", "_")), a)
        try:
            mod.kernel_function(q, k, v)
            fns[vname] = partial(mod.kernel_function, q, k, v)
        except Exception as exc:
            log(f"{vname} at {name} failed: {type(exc).__name__}: {str(exc)[:200]}")
    samples = measure(fns, args.rounds, args.warmup, args.rep)
    med = {n: statistics.median(s) for n, s in samples.items()}
    aa, noise = noise_of(samples["sdpa"], samples["sdpa_again"])
    rows = []
    for label, us in med.items():
        if label.startswith("sdpa"):
            continue
        rows.append({"shape": name, "dims": dims_text(dims), "what": label,
                     "kind": "step" if label.startswith("step") else "variant", "config": configs.get(label, label),
                     "us": us, "sdpa_us": med["sdpa"], "vs_sdpa": med["sdpa"] / us,
                     "tflops": flop(dims, False) / (us * 1e-6) / 1e12, "aa": aa, "noise": noise,
                     "rounds": [round(x, 2) for x in samples[label]]})
    return rows


def summary_markdown(res: dict[str, Any]) -> str:
    """Correctness first (every wrong variant with its shapes), then per shape the ranked timings,
    the steps in order, and the best correct variant against the goal."""
    lines = ["# Hopper Flash Attention: step 10's loop forms against SDPA", "",
             f"- Device: **{res['device']}**; " + ", ".join(f"{k} {v}" for k, v in res["versions"].items()),
             f"- Run: {res['started']} UTC, {res.get('seconds', 0) / 60:.1f} min"
             + ("" if res.get("complete") else " (incomplete)"),
             f"- Checks: each variant forced alone against SDPA in fp32 at every benchmark and check shape of its "
             f"head-dim class, wrong when the largest absolute error exceeds {ATOL} or an output is not finite; "
             "a variant wrong anywhere is never timed.",
             f"- Timing: median of {res['settings']['rounds']} interleaved rounds of do_bench medians "
             f"({res['settings']['warmup']} ms warm-up, {res['settings']['rep']} ms, L2 flushed), as "
             "bench_flash_attention.py; noise: the larger of SDPA's A/A deviation and its round-to-round spread.",
             "", "## Correctness", ""]
    wrong = res["wrong"]
    kinds = {c["kind"] for c in res["checks"]}
    lines.append(f"{len(res['checks'])} checks of {len(kinds)} variants and steps; {len(kinds) - len(wrong)} right at "
                 f"every shape they were checked at, {len(wrong)} wrong somewhere.")
    lines.append("")
    for vname, bad in sorted(wrong.items()):
        lines.append(f"- **{vname}** wrong at " + "; ".join(
            f"{c['variant']}: {c.get('error') or 'max err ' + format(c.get('max_err', float('nan')), '.3g')}"
            for c in bad[:8]))
    ws = sorted({c["kind"] for c in res["checks"] if c["kind"].startswith("ws-")})
    if ws:
        lines += ["", "Warp specialization (descriptors built on the device) by config:", ""]
        for vname in ws:
            cs = [c for c in res["checks"] if c["kind"] == vname]
            lines.append(f"- {vname}: right at {sum(bool(c.get('ok')) for c in cs)} of {len(cs)} shapes")
    for shape in dict.fromkeys(r["shape"] for r in res["rows"]):
        rs = [r for r in res["rows"] if r["shape"] == shape]
        lines += ["", f"## {shape} ({rs[0]['dims']}): SDPA {rs[0]['sdpa_us']:.1f} µs, noise "
                      f"{100 * rs[0]['noise']:.1f}%", "", "| rank | variant / step | µs | TFLOP/s | x SDPA |",
                  "|---|---|---|---|---|"]
        for i, r in enumerate(sorted(rs, key=lambda r: r["us"]), 1):
            label = r["what"] + (f" ({r['config']})" if r["kind"] == "step" else "")
            lines.append(f"| {i} | {label} | {r['us']:.1f} | {r['tflops']:.0f} | {r['vs_sdpa']:.3f} |")
        steps = [r for r in rs if r["kind"] == "step"]
        chain = []
        for prev, cur in zip(steps, steps[1:]):
            ratio = prev["us"] / cur["us"]
            slower = cur["us"] > prev["us"] * (1 + cur["noise"])
            chain.append(f"{cur['what']} {ratio:.3f}x {prev['what']}" + (" **slower**" if slower else ""))
        lines += ["", "Steps in order: " + "; ".join(chain)]
        best = min((r for r in rs if r["kind"] == "variant"), key=lambda r: r["us"], default=None)
        if best:
            lines.append(f"Best correct variant: {best['what']}, {best['vs_sdpa']:.3f}x SDPA "
                         f"({'meets' if best['vs_sdpa'] >= GOAL else 'misses'} {GOAL}x)")
    if res["errors"]:
        lines += ["", "## Errors", ""] + [f"- {e}" for e in res["errors"]]
    return "\n".join(lines) + "\n"


def write(out: Path, res: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, default=str))
    if res["rows"]:
        keys = [k for k in res["rows"][0] if k != "rounds"]
        with (out / "sweep.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
            w.writeheader()
            w.writerows(res["rows"])
    (out / "summary.md").write_text(summary_markdown(res))


def compile_check(out: Path, shapes: list[str], timeout_s: float, only: set[str] | None = None) -> int:
    """Every variant compiled alone for sm_90 on this machine (no GPU) at each of ``shapes`` whose
    head-dim class it serves, through the product's IR compiler: registers, spills and shared
    memory against the H200's 232448 bytes a block, or the compiler's diagnostic where it fails
    (one variant's failure leaves the others' rows). Writes ``compile.json`` and ``compile.md`` in
    ``out``; exit status 1 when a variant spills, is over the limit or fails to compile."""
    from check_fa_hopper_compile import SMEM_LIMIT, _config_text, ex2_under_wgmma

    from xeforge_core.ir.compile import compile_ir
    from xeforge_core.samples import flash_attention_trajectory

    problem = next(s for s in flash_attention_trajectory("cuda") if s.path.name == STEP10.name).problem
    rows, bad = [], 0
    for name in shapes:
        cls = head_dim_class(int(problem.variant(name).dims["D"]))
        for args in variants_of(cls, True, True):
            vname = variant_name(args)
            if only and vname not in only:
                continue
            source = STEP10.read_text() + (
                f"\n\nSEARCH_SPACE[{cls}] = [_config{args}]\nattn_fwd_d64 = _tuned(64)\n"
                "attn_fwd_d128 = _tuned(128)\nKERNELS = {64: attn_fwd_d64, 128: attn_fwd_d128, 256: attn_fwd_d256}\n")
            report = compile_ir(source, problem=problem, target="sm90", variant=name, config_index=None,
                                timeout_s=timeout_s, use_cache=True, max_kernels=8)
            kernels = report.kernels if report is not None else []
            if not kernels or report.kind not in ("ok", "compile_error"):
                rows.append({"variant": name, "config": vname,
                             "error": f"{report.kind if report else 'none'}: {report.reason if report else ''}"})
                bad += 1
            for k in kernels:
                r = k.resources or {}
                row = {"variant": name, "config": f"{vname} ({_config_text(k)})", "error": k.error,
                       "registers": r.get("registers"), "spill_bytes": r.get("spill_bytes"),
                       "shared_bytes": r.get("shared_bytes"), "num_warps": (k.metadata or {}).get("num_warps"),
                       "ex2_under_wgmma": ex2_under_wgmma((k.ir or {}).get("ptx", ""))}
                row["fits"] = (not k.error and (row["spill_bytes"] or 0) == 0
                               and (row["shared_bytes"] or 0) <= SMEM_LIMIT)
                bad += not row["fits"]
                rows.append(row)
            print(f"[compile] {name} {vname}: {rows[-1].get('error') or 'compiled'}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compile.json").write_text(json.dumps(rows, indent=1))
    md = ["# Step 10's sweep variants compiled for sm_90 (no GPU)", "",
          f"- {_dt.datetime.now(tz=_dt.timezone.utc):%Y-%m-%d %H:%M} UTC; triton "
          f"{__import__('triton').__version__}; limit {SMEM_LIMIT} bytes of shared memory a block",
          "- Command: `python benchmarks/sweep_fa_hopper.py --compile-only --out OUT`", "",
          "- ex2 under wgmma: the PTX's exponentials that follow a wgmma commit before any wait (the softmax "
          "written to overlap a dot; `check_fa_hopper_compile.ex2_under_wgmma`)", "",
          "| shape | config | registers | spilled bytes | shared bytes | warps | ex2 under wgmma | fits |",
          "|---|---|---|---|---|---|---|---|"]
    md += [f"| {r['variant']} | {r.get('config', '')} | {r.get('registers')} | {r.get('spill_bytes')} | "
           f"{r.get('shared_bytes')} | {r.get('num_warps')} | {r.get('ex2_under_wgmma')} | "
           f"{r.get('fits', r.get('error'))} |" for r in rows]
    (out / "compile.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shapes", default="", help="comma-separated benchmark shapes (default: every bench-gpu*)")
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all of VARIANTS)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--rep", type=int, default=60)
    ap.add_argument("--workers", type=int, default=0, help="check processes (default: cores - 2)")
    ap.add_argument("--deadline-min", type=float, default=5.5)
    ap.add_argument("--warp-specialized", action="store_true",
                    help="also check (and, where right, time) the warp-specialized variants (WS_VARIANTS)")
    ap.add_argument("--persistent", action="store_true",
                    help="also check (and, where right, time) the persistent variants (PERSISTENT_VARIANTS)")
    ap.add_argument("--check-timeout", type=float, default=CHECK_TIMEOUT_S,
                    help="seconds one check may take before it counts as a hang")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile every variant for sm_90 here (no GPU) and report resources")
    args = ap.parse_args(argv)
    if args.compile_only:
        return compile_check(args.out, ["bench-gpu", "bench-gpu-2", "bench-gpu-3", "bench-gpu-4"], 1800.0,
                             {s for s in args.only.split(",") if s.strip()})
    import torch
    import triton

    t0 = time.monotonic()
    log = lambda msg: print(f"[sweep {time.monotonic() - t0:6.1f} s] {msg}", flush=True)  # noqa: E731
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    gpu = args.device.startswith("cuda") and torch.cuda.is_available()
    res: dict[str, Any] = {
        "started": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "device": torch.cuda.get_device_name() if gpu else args.device,
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__},
        "settings": {k: v for k, v in vars(args).items() if k != "out"} | {"atol": ATOL, "peak": PEAK_FP16_TFLOPS},
        "checks": [], "wrong": {}, "rows": [], "errors": [], "complete": False}
    bench, checks = shapes_of([s for s in args.shapes.split(",") if s.strip()] or None)
    only = {s for s in args.only.split(",") if s.strip()}
    workers = args.workers or max(1, (os.cpu_count() or 4) - 2)
    res["checks"] = check_variants_all(bench, checks, args.device if gpu else "cpu", workers, only, log,
                                       args.warp_specialized, args.check_timeout, args.persistent)
    for c in res["checks"]:
        if not c.get("ok"):
            res["wrong"].setdefault(c["kind"], []).append(c)
    log(f"checked: {len(res['wrong'])} variant(s) wrong somewhere: {', '.join(sorted(res['wrong'])) or 'none'}")
    write(args.out, res)
    if gpu:
        for name, dims in bench.items():
            if time.monotonic() - t0 > args.deadline_min * 60:
                res["errors"].append(f"timing of {name} skipped: past the deadline")
                continue
            good = [a for a in variants_of(head_dim_class(int(dims["D"])), args.warp_specialized, args.persistent)
                    if (not only or variant_name(a) in only) and variant_name(a) not in res["wrong"]]
            try:
                res["rows"] += time_shape(name, dims, good, set(res["wrong"]), args.device, args, log)
            except Exception as exc:
                res["errors"].append(f"timing of {name}: {type(exc).__name__}: {str(exc)[:300]}")
            log(f"timed {name}")
            res["seconds"] = time.monotonic() - t0
            write(args.out, res)
    res["seconds"] = time.monotonic() - t0
    res["complete"] = not res["errors"]
    write(args.out, res)
    print(summary_markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
