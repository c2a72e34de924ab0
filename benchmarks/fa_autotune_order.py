"""Why step 10's autotuner picks a slower config than the best one it holds: order and warm-up.

Triton's autotuner times its configs one after another (``triton.testing.do_bench``: 25 ms of
warm-up, 100 ms of repetitions each, the config compiled in between). If the GPU's clocks still
rise through that sequence, or fall while a config compiles, the configs timed late (or right after
a long compile) look faster or slower than they are. This script separates that from the configs'
own speeds, per benchmark shape of the attention spec:

- ``truth``: every config of step 10's search space forced alone, timed interleaved over
  ``--rounds`` rounds (the order rotated each round; medians of do_bench medians);
- ``as-written``, ``reversed``: a fresh copy of step 10 autotuned with its search space in its
  order and reversed, compiled beforehand, so no compile falls between two configs' timings;
- ``long-warmup``: as written, after ``--spin-ms`` of the first config running back to back.

Each trial reports the autotuner's own median per config and its pick; a pick that moves with the
order, or an autotuner median far from the truth, is the timing method's fault, not the configs'.

Usage (from the repository root, on the GPU machine)::

    python3 benchmarks/fa_autotune_order.py --out OUT [--shapes bench-gpu,bench-gpu-4]

Writes ``OUT/results.json`` and ``OUT/summary.md``. About 20 s per shape after compiling.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_flash_attention import inputs, measure  # noqa: E402
from sweep_fa_hopper import STEP10, forced, head_dim_class, load_module, shapes_of, variant_name  # noqa: E402


def _args_of(mod: Any, config: Any) -> tuple:
    return mod.config_args(config)


def _tuner_for(mod: Any, d: int) -> Any:
    return mod.KERNELS[head_dim_class(d)]


def autotune_trial(dims: dict[str, int], order: str, spin_ms: float, tag: str) -> dict[str, Any]:
    """One fresh autotuning of step 10 at ``dims`` with its search space ``order``ed ("as-written"
    or "reversed"), after ``spin_ms`` of back-to-back runs of the first config (0: none). Returns
    the autotuner's median per config (µs) and its pick."""
    import torch

    q, k, v = inputs(dims, "cuda", seed=0)
    mod = load_module(STEP10, tag)
    tuner = _tuner_for(mod, int(dims["D"]))
    if order == "reversed":
        tuner.configs = list(reversed(tuner.configs))
    # compile every config first (a forced copy per config), so the trial times runs only
    for cfg in tuner.configs:
        name = variant_name(_args_of(mod, cfg)).replace("-", "_")
        forced(load_module(STEP10, f"{tag}_c_{name}"), _args_of(mod, cfg)).kernel_function(q, k, v)
    torch.cuda.synchronize()
    if spin_ms > 0:
        first = forced(load_module(STEP10, f"{tag}_spin"), _args_of(mod, tuner.configs[0]))
        end = time.perf_counter() + spin_ms / 1e3
        while time.perf_counter() < end:
            for _ in range(10):
                first.kernel_function(q, k, v)
            torch.cuda.synchronize()
    mod.kernel_function(q, k, v)
    timings = {variant_name(_args_of(mod, c)): round(float(t[0]) * 1e3, 2)
               for c, t in getattr(tuner, "configs_timings", {}).items()}
    return {"order": order, "spin_ms": spin_ms, "pick": variant_name(_args_of(mod, tuner.best_config)),
            "timings_us": timings}


def truth(dims: dict[str, int], rounds: int, tag: str) -> dict[str, float]:
    """Every config of the shape's search space forced alone, interleaved: median µs per config."""
    q, k, v = inputs(dims, "cuda", seed=0)
    base = load_module(STEP10, f"{tag}_base")
    fns = {}
    for cfg in _tuner_for(base, int(dims["D"])).configs:
        args = _args_of(base, cfg)
        mod = forced(load_module(STEP10, f"{tag}_t_{variant_name(args).replace('-', '_')}"), args)
        mod.kernel_function(q, k, v)
        fns[variant_name(args)] = (lambda m: lambda: m.kernel_function(q, k, v))(mod)
    samples = measure(fns, rounds, 25, 100)
    return {n: round(statistics.median(s), 2) for n, s in samples.items()}


def summary(res: dict[str, Any]) -> str:
    lines = [f"# Step 10's autotuner: order and warm-up ({res['device']}, {res['date']})", ""]
    for shape, r in res["shapes"].items():
        lines += [f"## {shape} ({r['dims']})", "", "| config | truth µs | " +
                  " | ".join(f"{t['order']}{' +spin' if t['spin_ms'] else ''} µs" for t in r["trials"]) + " |",
                  "|---|---|" + "---|" * len(r["trials"])]
        for name, us in sorted(r["truth_us"].items(), key=lambda kv: kv[1]):
            lines.append(f"| {name} | {us} | " + " | ".join(str(t["timings_us"].get(name, "-")) for t in r["trials"]) + " |")
        lines += ["", "- picks: " + "; ".join(f"{t['order']}{' +spin' if t['spin_ms'] else ''}: {t['pick']}"
                                           for t in r["trials"]),
                  f"- fastest by the interleaved truth: {min(r['truth_us'], key=r['truth_us'].get)}", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", default="bench-gpu,bench-gpu-4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--spin-ms", type=float, default=2000.0)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("this script times configs on a GPU: no cuda device here")
    bench, _ = shapes_of([s for s in args.shapes.split(",") if s])
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "shapes": {},
                           "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    for name, dims in bench.items():
        tag = name.replace("-", "_")
        trials = [autotune_trial(dims, "as-written", 0, f"{tag}_a"), autotune_trial(dims, "reversed", 0, f"{tag}_r"),
                  autotune_trial(dims, "as-written", args.spin_ms, f"{tag}_s"),
                  autotune_trial(dims, "as-written", 0, f"{tag}_a2")]
        res["shapes"][name] = {"dims": ", ".join(f"{k}={v}" for k, v in dims.items()), "trials": trials,
                               "truth_us": truth(dims, args.rounds, tag)}
        print(json.dumps(res["shapes"][name]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(res, indent=1))
    (args.out / "summary.md").write_text(summary(res))
    print(summary(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
