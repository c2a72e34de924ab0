"""Time every step of the Flash Attention trajectory against torch's scaled_dot_product_attention
on every benchmark shape, in one run (a script, not a test).

For each shape of the trajectory's spec (``bench-gpu*`` variants: 71 heads, head dim 96, a
ragged S = 1500 among them) and each step (the naive baseline, then every rewrite; the causal
step against causal SDPA):

1. the step's ``kernel_function`` runs once and its output is compared with SDPA's (fp16
   tolerance 2e-2 absolute); a step that fails to compile or is wrong is recorded and skipped;
2. its time is the median of ``--rounds`` interleaved rounds, each a ``triton.testing.do_bench``
   median (L2 flushed before every call, ``--warmup`` / ``--rep`` ms), taken in a rotated order
   with SDPA and the previous step, so drift hits all alike;
3. SDPA is timed twice in every round (A/A): the ratio of the two medians is the method's noise
   floor, reported next to every speedup.

TFLOP/s counts ``4 * B * A * S^2 * D`` (``2 * ...`` for the causal step, the visible half);
"roofline" is that over the profile's dense fp16 peak (knowledge/hardware, 989.5 TFLOP/s on the
H200). For autotuned steps the config the autotuner chose is recorded; with ``--configs`` every
config of the last non-causal step is also timed on its own (what a re-tune would choose from).

Outputs in ``--out`` (created, rewritten after every measurement so a cut-short run keeps what
it measured): ``results.json`` (every row, settings, device, library versions, A/A ratios),
``summary.md`` (the tables) and ``trajectory.csv``; a short table is printed last.

Usage::

    python benchmarks/bench_flash_attention.py --out docs/measured/h200-flash-attention
    python benchmarks/bench_flash_attention.py --out /tmp/fa --shapes bench-gpu --steps 7,8
    python benchmarks/bench_flash_attention.py --out /tmp/fa --device cpu     # interpreter: checks only

About 5 minutes on an H200 (10 steps x 5 shapes, autotuning of steps 7-9 included; ``--configs``
adds about a minute). On cpu nothing is timed (Triton's interpreter, the ``ci`` shape only).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import importlib.util
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
    tflops: float | None = None
    roofline: float | None = None          # tflops / dense fp16 peak
    vs_sdpa: float | None = None           # sdpa_us / us
    vs_previous: float | None = None       # previous step's us / us (same shape)
    max_err: float | None = None
    config: str = ""
    note: str = ""


@dataclass
class Results:
    started: str
    device: dict[str, Any]
    versions: dict[str, Any]
    settings: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    configs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = False


def _load_step(path: Path, index: int) -> Any:
    spec = importlib.util.spec_from_file_location(f"fa_step_{index}", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _tuners(mod: Any) -> list[Any]:
    from triton.runtime.autotuner import Autotuner

    return [v for v in vars(mod).values() if isinstance(v, Autotuner)]


def _describe(cfg: Any) -> str:
    kw = ", ".join(f"{k}={v}" for k, v in getattr(cfg, "kwargs", {}).items())
    return f"{kw}, num_warps={getattr(cfg, 'num_warps', '?')}, num_stages={getattr(cfg, 'num_stages', '?')}"


def _median_time(fn: Any, warmup: int, rep: int) -> float:
    """µs: triton.testing.do_bench's median (L2 flushed before each call)."""
    import triton

    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")) * 1e3


def measure(fns: dict[str, Any], rounds: int, warmup: int, rep: int) -> dict[str, float]:
    """Median over ``rounds`` of each callable's do_bench median, the order rotated per round."""
    names = list(fns)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            samples[n].append(_median_time(fns[n], warmup, rep))
    return {n: statistics.median(v) for n, v in samples.items()}


def _flop(b: int, a: int, s: int, d: int, causal: bool) -> float:
    return (2.0 if causal else 4.0) * b * a * s * s * d


def write_outputs(out: Path, res: Results) -> None:
    """results.json, trajectory.csv and summary.md (rewritten after every measurement)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(asdict(res), indent=1, default=str))
    rows = [asdict(r) for r in res.rows]
    with (out / "trajectory.csv").open("w", newline="") as fh:
        if rows:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    (out / "summary.md").write_text(summary_markdown(res))


def _fmt(v: float | None, digits: int = 2) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"


def summary_markdown(res: Results) -> str:
    """The tables: per step and shape µs, TFLOP/s, fraction of the roofline, x SDPA and x the
    previous step; then the steps not at least as fast as the one before, and the A/A ratios."""
    d = res.device
    shapes = list(dict.fromkeys(r.variant for r in res.rows))
    dims = {r.variant: r.dims for r in res.rows}
    lines = [
        "# Flash Attention trajectory vs scaled_dot_product_attention",
        "",
        f"- Device: **{d.get('name')}** ({d.get('type')}); " + ", ".join(f"{k} {v}" for k, v in res.versions.items()),
        f"- Run: {res.started} UTC, {res.seconds / 60:.1f} min{'' if res.complete else ' (incomplete)'}; timing: "
        f"median of {res.settings.get('rounds')} interleaved rounds of triton.testing.do_bench medians "
        f"({res.settings.get('warmup')} ms warm-up, {res.settings.get('rep')} ms), L2 flushed before each call",
        f"- TFLOP/s: 4·B·A·S²·D (causal: half); roofline: fraction of the dense fp16 peak ({PEAK_FP16_TFLOPS} "
        "TFLOP/s). x SDPA > 1: faster than torch. x prev: over the step before it on the same shape.",
        "",
        "| step | stage | " + " | ".join(f"{s} ({dims[s]})" for s in shapes) + " |",
        "|---|---|" + "---|" * len(shapes),
    ]
    for step in sorted({r.step for r in res.rows}):
        rs = {r.variant: r for r in res.rows if r.step == step}
        first = next(iter(rs.values()))
        cells = []
        for s in shapes:
            r = rs.get(s)
            if r is None:
                cells.append("–")
            elif r.us is None:
                cells.append(r.note[:60] or "–")
            else:
                cells.append(f"{_fmt(r.us, 1)} µs, {_fmt(r.tflops, 0)} TFLOP/s ({_fmt(100 * (r.roofline or 0), 0)}%), "
                             f"{_fmt(r.vs_sdpa)}x SDPA, {_fmt(r.vs_previous)}x prev")
        lines.append(f"| {step}. {first.title}{' (causal)' if first.causal else ''} | {first.stage} | "
                     + " | ".join(cells) + " |")
    slower = [r for r in res.rows if r.vs_previous is not None and r.vs_previous < 1.0 and not r.causal]
    lines += ["", "## Steps slower than the step before them", ""]
    if slower:
        lines += [f"- step {r.step} on {r.variant}: {_fmt(r.vs_previous, 3)}x (A/A noise on that shape "
                  f"{_fmt(r.aa_ratio, 3)})" for r in slower]
    else:
        lines.append("- none")
    last = max((r.step for r in res.rows if not r.causal and r.us is not None), default=None)
    lines += ["", "## Last non-causal step vs SDPA", ""]
    for r in res.rows:
        if r.step == last:
            goal = "meets" if (r.vs_sdpa or 0) >= 0.9 else "misses"
            lines.append(f"- {r.variant} ({r.dims}): {_fmt(r.vs_sdpa, 3)}x SDPA, {goal} the 0.9x goal; "
                         f"{_fmt(r.tflops, 0)} TFLOP/s vs SDPA {_fmt(r.tflops / r.vs_sdpa if r.tflops and r.vs_sdpa else None, 0)}"
                         + (f"; config {r.config}" if r.config else ""))
    if res.configs:
        lines += ["", "## Every config of the last non-causal step", "",
                  "| shape | config | µs | TFLOP/s |", "|---|---|---|---|"]
        for c in res.configs:
            lines.append(f"| {c['variant']} | {c['config']} | {_fmt(c.get('us'), 1)} | {_fmt(c.get('tflops'), 0)} |")
    if res.errors:
        lines += ["", "## Errors", ""] + [f"- {e.splitlines()[0][:300]}" for e in res.errors]
    return "\n".join(lines) + "\n"


def short_table(res: Results) -> str:
    """Steps x shapes, x SDPA (what the run prints last)."""
    shapes = list(dict.fromkeys(r.variant for r in res.rows))
    out = ["step".ljust(44) + "".join(s[-12:].rjust(13) for s in shapes)]
    for step in sorted({r.step for r in res.rows}):
        rs = {r.variant: r for r in res.rows if r.step == step}
        title = f"{step}. {next(iter(rs.values())).title}"[:43]
        out.append(title.ljust(44) + "".join(
            (f"{rs[s].vs_sdpa:.2f}x" if s in rs and rs[s].vs_sdpa else "-").rjust(13) for s in shapes))
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="output directory (created)")
    ap.add_argument("--device", default=None, help="cuda, cuda:1, xpu or cpu (default: the available GPU)")
    ap.add_argument("--shapes", default="", help="comma-separated variant names (default: every bench-gpu*)")
    ap.add_argument("--steps", default="", help="comma-separated step indices (default: all)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (median taken)")
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    ap.add_argument("--rep", type=int, default=60, help="do_bench measuring time, ms")
    ap.add_argument("--configs", action="store_true", help="also time every config of the last non-causal step")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch
    import torch.nn.functional as F
    import triton

    from xeforge_core.samples import flash_attention_trajectory

    dev_name = args.device or ("cuda" if torch.cuda.is_available() else
                               "xpu" if hasattr(torch, "xpu") and torch.xpu.is_available() else "cpu")
    device = torch.device(dev_name)
    timed = device.type != "cpu"
    if not timed:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    steps = flash_attention_trajectory()
    pick = {int(s) for s in args.steps.split(",") if s.strip()} or {s.index for s in steps}
    naive = steps[0].problem
    names = [n for n in naive.spec.variants if n.startswith("bench-gpu")] if timed else ["ci"]
    if args.shapes:
        names = [n for n in args.shapes.split(",") if n in naive.spec.variants]
    name = (torch.cuda.get_device_name(device) if device.type == "cuda" else
            torch.xpu.get_device_name(device) if device.type == "xpu" else platform.processor() or "cpu")
    res = Results(started=_dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                  device={"type": device.type, "name": name},
                  versions={"python": platform.python_version(), "torch": torch.__version__,
                            "triton": triton.__version__},
                  settings={"rounds": args.rounds, "warmup": args.warmup, "rep": args.rep, "shapes": names,
                            "steps": sorted(pick), "atol": ATOL})
    start = time.monotonic()
    print(f"[fa] {name}: {len(pick)} steps x {len(names)} shapes", flush=True)
    modules: dict[int, Any] = {}
    for s in steps:
        if s.index in pick:
            try:
                modules[s.index] = _load_step(s.path, s.index)
            except Exception as exc:
                res.errors.append(f"step {s.index}: cannot import: {exc}")
                continue
            if not timed:  # the interpreter cannot benchmark configs: check the first one
                for tuner in _tuners(modules[s.index]):
                    tuner.configs = tuner.configs[:1]
    prev_us: dict[str, float] = {}
    for vname in names:
        var = naive.variant(vname)
        b, a, s_len, d = (int(var.dims[k]) for k in ("B", "A", "S", "D"))
        dims = f"B={b} A={a} S={s_len} D={d}"
        gen = torch.Generator(device="cpu").manual_seed(0)
        q, k, v = (torch.randn(b, a, s_len, d, generator=gen).to(torch.float16).to(device) for _ in range(3))
        refs = {c: F.scaled_dot_product_attention(q, k, v, is_causal=c) for c in (False, True)}
        sdpa = {c: partial(F.scaled_dot_product_attention, q, k, v, is_causal=c) for c in (False, True)}
        prev_us.clear()
        for step in steps:
            if step.index not in modules:
                continue
            mod = modules[step.index]
            row = Row(step=step.index, title=step.title, stage=step.stage, causal=step.causal, variant=vname, dims=dims)
            try:
                out = mod.kernel_function(q, k, v)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                row.max_err = float((out.float() - refs[step.causal].float()).abs().max())
                if not row.max_err <= ATOL:
                    row.note = f"wrong: max abs error {row.max_err:.3g} > {ATOL}"
                    res.rows.append(row)
                    write_outputs(args.out, res)
                    continue
                if timed:
                    fns = {"step": partial(mod.kernel_function, q, k, v), "sdpa": sdpa[step.causal],
                           "sdpa_again": sdpa[step.causal]}
                    t = measure(fns, args.rounds, args.warmup, args.rep)
                    row.us, row.sdpa_us = t["step"], t["sdpa"]
                    row.aa_ratio = t["sdpa_again"] / t["sdpa"]
                    row.tflops = _flop(b, a, s_len, d, step.causal) / (row.us * 1e-6) / 1e12
                    row.roofline = row.tflops / PEAK_FP16_TFLOPS
                    row.vs_sdpa = row.sdpa_us / row.us
                    if not step.causal and prev_us:
                        row.vs_previous = prev_us["last"] / row.us
                    if not step.causal:
                        prev_us["last"] = row.us
                else:
                    row.note = "correct; not timed (interpreter)"
                tuners = _tuners(mod)
                if tuners and getattr(tuners[0], "best_config", None) is not None:
                    row.config = _describe(tuners[0].best_config)
            except Exception as exc:  # a step that fails here is reported, the rest still run
                row.note = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                res.errors.append(f"step {step.index} on {vname}: {exc}\n{traceback.format_exc(limit=3)}")
            res.rows.append(row)
            res.seconds = time.monotonic() - start
            write_outputs(args.out, res)
            print(f"[fa] {res.seconds / 60:4.1f} min  {vname} step {step.index}: "
                  + (f"{row.us:.1f} µs, {row.tflops:.0f} TFLOP/s, {row.vs_sdpa:.2f}x SDPA" if row.us else row.note),
                  flush=True)
        if args.configs and timed:
            last = max((s.index for s in steps if not s.causal and s.index in modules), default=None)
            tuners = _tuners(modules[last]) if last is not None else []
            if tuners:
                tuner = tuners[0]
                every = list(tuner.configs)
                for cfg in every:
                    tuner.configs = [cfg]
                    tuner.cache = {}
                    entry = {"variant": vname, "config": _describe(cfg)}
                    try:
                        t = _median_time(partial(modules[last].kernel_function, q, k, v), args.warmup, args.rep)
                        entry.update(us=t, tflops=_flop(b, a, s_len, d, False) / (t * 1e-6) / 1e12)
                    except Exception as exc:
                        entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                    res.configs.append(entry)
                    write_outputs(args.out, res)
                tuner.configs = every
                tuner.cache = {}
    res.seconds = time.monotonic() - start
    res.complete = True
    write_outputs(args.out, res)
    print(short_table(res), flush=True)
    print(f"[fa] wrote {args.out}/summary.md, results.json, trajectory.csv in {res.seconds / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
