"""Where a Flash Attention step's time goes: kernel time on the GPU, host time per call, and the
timing methods that count one, the other or both (a script, not a test; issue 25's question).

On an H100 on 2026-12-06 step 10 as written (autotuned) picked the persistent warp-specialized
config at S 2048, D 128, yet ``do_bench`` timed the step at 154.7 µs where that config forced
alone ran 133.4 µs in the same rounds (``docs/measured/gpu-fa-persistent/``). This script separates
the candidates, per benchmark shape, for SDPA (twice, A/A), step 10 as written, the config its
autotuner picked forced alone (a module copy whose autotuners hold only that config) and a few
named variants forced alone:

- ``bench_us``: ``triton.testing.do_bench`` median with the L2 flushed before each call, exactly
  as ``bench_flash_attention.py`` times the trajectory (medians of interleaved rounds);
- ``graph_us``: ``triton.testing.do_bench_cudagraph`` median (the calls replayed from a CUDA
  graph: no host time between launches);
- ``kernel_us``: the GPU time of the call's kernels from ``torch.profiler`` (CUPTI), per call,
  after an L2 flush as in ``bench_us`` (the flush's fill kernel left out);
- ``host_us``: host time per call, measured while the GPU is held busy by ``torch.cuda._sleep`` so
  that no call waits for the GPU (launch queue not full at these counts).

If ``bench_us`` exceeds ``kernel_us`` by about ``host_us`` less the flush's GPU time, the gap is host
time the flush no longer hides. If ``kernel_us`` itself differs between the autotuned step and its
config forced alone, the two launches differ on the GPU (grid, scratch, descriptors).

Usage (repository root, GPU machine)::

    python benchmarks/fa_launch_gap.py --out OUT [--shapes bench-gpu,bench-gpu-1] [--rounds 5]
        [--extra "step 10 before=OLD.py"] [--host-profile]

Writes ``OUT/results.json`` and ``OUT/summary.md`` after every shape.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_flash_attention import chosen, dims_text, inputs, measure, noise_of, tuners_of  # noqa: E402
from sweep_fa_hopper import PERSISTENT_WS, PLAIN, STEP10, WS, _v, forced, load_module, shapes_of, variant_name  # noqa: E402

#: Variants forced alone beside the step (sweep_fa_hopper's argument tuples): the persistent
#: warp-specialized loop, the warp-specialized one and the plain 128 x 64 loop step 10 picked before.
NAMED = [_v(128, 128, 4, 2, PERSISTENT_WS), _v(128, 128, 4, 2, WS), _v(128, 64, 8, 3, PLAIN)]


def graph_time(fn: Any) -> float | None:
    """µs: do_bench_cudagraph's median, or None where the call cannot be captured."""
    import torch
    import triton

    try:
        with torch.cuda.stream(torch.cuda.Stream()):
            return float(triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")) * 1e3
    except Exception as exc:  # noqa: BLE001 - a call that cannot be captured is reported, not fatal
        print(f"  cudagraph: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
        return None


def kernel_time(fn: Any, calls: int = 30) -> tuple[float, list[str]]:
    """(µs of GPU kernel time per call, the kernels' names) from torch.profiler, each call after an
    L2 flush as do_bench flushes (the flush's fill kernel is not counted)."""
    import torch
    import triton
    from torch.profiler import ProfilerActivity, profile

    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            cache.zero_()
            fn()
        torch.cuda.synchronize()
    total, names = 0.0, set()
    for evt in prof.events():
        if evt.device_type != torch.autograd.DeviceType.CUDA or "FillFunctor" in evt.name:
            continue
        total += evt.device_time
        names.add(evt.name[:80])
    return total / calls, sorted(names)


def _calls_on_busy_gpu(fn: Any, calls: int, sleep_cycles: int, around: Any = None) -> float:
    """Seconds of host time for ``calls`` calls of ``fn`` (after one warm call), the GPU held busy
    by ``torch.cuda._sleep(sleep_cycles)`` so that no call waits for it; ``around``: a context
    manager entered around the calls only (a profiler)."""
    import torch

    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(sleep_cycles)
    with around if around is not None else contextlib.nullcontext():
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed


def host_time(fn: Any, calls: int = 50) -> float:
    """µs of host time per call, with the GPU held busy so that no call waits for it."""
    # about 0.1 s at the SM clock: longer than the calls' host time
    return _calls_on_busy_gpu(fn, calls, int(200e6)) / calls * 1e6


def host_profile(fn: Any, calls: int = 200, top: int = 30) -> str:
    """cProfile of ``calls`` calls with the GPU held busy (no call waits for it): the ``top``
    functions by own time, as pstats prints them."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    _calls_on_busy_gpu(fn, calls, int(400e6), around=prof)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def one_shape(name: str, dims: dict[str, int], rounds: int, extra: dict[str, Path],
              profile_dir: Path | None = None) -> dict[str, Any]:
    """Every measure of every callable at one shape; ``extra``: label -> a module file timed as
    written (autotuned) beside step 10; with ``profile_dir``, a host profile of step 10 and of
    each extra module written there."""
    import torch.nn.functional as F

    q, k, v = inputs(dims, "cuda", seed=0)
    fns: dict[str, Any] = {"sdpa": partial(F.scaled_dot_product_attention, q, k, v),
                           "sdpa_again": partial(F.scaled_dot_product_attention, q, k, v)}
    auto = load_module(STEP10, f"gap_auto_{name}".replace("-", "_"))
    auto.kernel_function(q, k, v)  # autotunes now
    fns["step 10"] = partial(auto.kernel_function, q, k, v)
    for label, path in extra.items():
        mod = load_module(path, f"gap_{label}_{name}".replace("-", "_"))
        mod.kernel_function(q, k, v)
        fns[label] = partial(mod.kernel_function, q, k, v)
    picked = [t.best_config for t in tuners_of(auto) if getattr(t, "best_config", None) is not None]
    picked_args = _v(*auto.config_args(picked[0])) if picked else None
    named = list(NAMED) + ([picked_args] if picked_args and picked_args not in NAMED else [])
    for args in named:
        label = variant_name(args) + (" (picked)" if args == picked_args else "")
        mod = forced(load_module(STEP10, f"gap_{variant_name(args)}_{name}".replace("-", "_")), args)
        mod.kernel_function(q, k, v)
        fns[label] = partial(mod.kernel_function, q, k, v)
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        for label in ["step 10", *extra]:
            (profile_dir / f"{name}-{label.replace(' ', '')}.txt").write_text(host_profile(fns[label]))
    samples = measure(fns, rounds, 25, 100)
    aa, noise = noise_of(samples["sdpa"], samples["sdpa_again"])
    rows = []
    for label, fn in fns.items():
        ktime, kernels = kernel_time(fn)
        rows.append({"what": label, "bench_us": statistics.median(samples[label]),
                     "rounds": [round(x, 2) for x in samples[label]], "graph_us": graph_time(fn),
                     "kernel_us": ktime, "host_us": host_time(fn), "kernels": kernels})
        print(f"  {name} {label}: {rows[-1]['bench_us']:.1f} / graph {rows[-1]['graph_us']} / "
              f"kernel {ktime:.1f} / host {rows[-1]['host_us']:.1f} µs", flush=True)
    return {"shape": name, "dims": dims_text(dims), "step10_config": chosen(auto), "aa": aa, "noise": noise,
            "rows": rows}


def summary(res: dict[str, Any]) -> str:
    """The markdown report: per shape a row per callable with each measure and its ratio to SDPA."""
    lines = [f"# Flash Attention: kernel time, host time and timing method ({res['device']}, {res['date']})", "",
             f"Commit `{res['commit']}`; torch {res['torch']}, Triton {res['triton']}; {res['rounds']} "
             "interleaved rounds of do_bench medians (L2 flushed) for `bench`; `graph`: do_bench_cudagraph; "
             "`kernel`: GPU kernel time per call from torch.profiler after an L2 flush; `host`: host time "
             "per call with the GPU busy.", ""]
    for shape in res["shapes"]:
        lines += [f"## {shape['shape']} ({shape['dims']})", "",
                  f"step 10 picked: {shape['step10_config']}; SDPA A/A {shape['aa']:.3f}, noise "
                  f"{100 * shape['noise']:.1f}%", "",
                  "| what | bench µs | graph µs | kernel µs | host µs | bench x SDPA | kernel x SDPA |",
                  "|---|---|---|---|---|---|---|"]
        base = {r["what"]: r for r in shape["rows"]}["sdpa"]
        for r in shape["rows"]:
            graph = f"{r['graph_us']:.1f}" if r["graph_us"] else "-"
            lines.append(f"| {r['what']} | {r['bench_us']:.1f} | {graph} | {r['kernel_us']:.1f} | "
                         f"{r['host_us']:.1f} | {base['bench_us'] / r['bench_us']:.3f} | "
                         f"{base['kernel_us'] / r['kernel_us']:.3f} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import subprocess

    import torch
    import triton

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--shapes", default="bench-gpu,bench-gpu-1,bench-gpu-4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--extra", nargs="*", default=[], metavar="LABEL=PATH",
                    help="module files timed as written beside step 10 (another form of the step)")
    ap.add_argument("--host-profile", action="store_true",
                    help="write a cProfile of step 10's and each extra module's host path to OUT/host-profile/")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("fa_launch_gap.py times kernels on an NVIDIA GPU: torch sees none")
    bench, _ = shapes_of(args.shapes.split(","))
    # "-dirty" when the files that ran differ from the commit named
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "date": _dt.datetime.now(_dt.timezone.utc)
                           .strftime("%Y-%m-%d %H:%M UTC"), "commit": commit, "torch": torch.__version__,
                           "triton": triton.__version__, "rounds": args.rounds, "shapes": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, dims in bench.items():
        print(f"{name}: {dims_text(dims)}", flush=True)
        extra = dict(e.split("=", 1) for e in args.extra)
        res["shapes"].append(one_shape(name, dims, args.rounds, {k: Path(p) for k, p in extra.items()},
                                       args.out / "host-profile" if args.host_profile else None))
        (args.out / "results.json").write_text(json.dumps(res, indent=1))
        (args.out / "summary.md").write_text(summary(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
