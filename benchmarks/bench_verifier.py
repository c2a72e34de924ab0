"""Benchmark of the verifier itself (a script, not a test; meant for a GPU).

Measures, on the GEMM pair in ``benchmarks/kernels/`` (a tiled fp16 GEMM whose ``tl.dot``
operands are upcast to fp32, against the same kernel keeping fp16 operands):

1. **overhead per candidate** beyond the kernels' own run time: the wall time of ``verify()``
   minus the time the timed kernel calls themselves account for (trials x mean time), for a
   cold run (nothing cached), a warm-baseline run (a new candidate; the baseline's saved outputs
   are reused) and a cached run (the same pair again: the verdict comes from the cache);
2. **timing repeatability**: the coefficient of variation (stdev / mean) of the speedup over N
   verifications of the same pair (default 10; each one a fresh worker, verdict cache missed on
   purpose by a comment appended to the candidate);
3. **agreement with ``triton.testing.do_bench``** on the same kernels and shapes, in the same
   run: the verifier's median times divided by do_bench's.

Prints a Markdown table naming the device and the library versions, and writes it to the path
given on the command line::

    python benchmarks/bench_verifier.py docs/verifier-benchmark.md [--device cuda] [--repeats 10]

On cpu (``--device cpu``) only the overhead rows are produced (nothing is timed in Triton's
interpreter) and the ``ci`` variant is used; that mode exists to exercise the script anywhere.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xeforge_core.devices import DeviceInfo, detect_device  # noqa: E402
from xeforge_core.problem import load_problem  # noqa: E402
from xeforge_core.verdict import Verdict, VerdictKind  # noqa: E402
from xeforge_core.verify import VerifyOptions, verify  # noqa: E402

KERNELS = ROOT / "benchmarks" / "kernels"
BASELINE = KERNELS / "gemm_fp32_upcast.py"
CANDIDATE = KERNELS / "gemm_fp16_dot.py"


def _kernel_seconds(verdict: Verdict) -> float:
    """Seconds the timed kernel calls account for: trials x mean, baseline and candidate (and
    the eager reference when timed), over every performance variant."""
    total = 0.0
    for p in verdict.performance:
        for stats in (p.baseline, p.candidate, p.reference):
            if stats is not None:
                total += stats.mean_us * stats.trials * 1e-6
    return total


def _timed_verify(problem: Any, source: str, device: DeviceInfo, options: VerifyOptions) -> tuple[Verdict, float]:
    start = time.perf_counter()
    verdict = verify(problem, source, device=device, options=options)
    return verdict, time.perf_counter() - start


def _load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _do_bench(device: DeviceInfo, dims: dict[str, int]) -> dict[str, float]:
    """Median ms of both kernels with ``triton.testing.do_bench`` in this process."""
    import torch
    import triton

    dev = device.torch_device
    torch.manual_seed(0)
    a = torch.randn(dims["M"], dims["K"], dtype=torch.float16, device=dev)
    b = torch.randn(dims["K"], dims["N"], dtype=torch.float16, device=dev)
    out = {}
    for label, path in (("baseline", BASELINE), ("candidate", CANDIDATE)):
        model = _load_module(path, f"bench_{label}").Model()
        out[label] = float(triton.testing.do_bench(lambda m=model: m(a, b), warmup=25, rep=100,
                                                   return_mode="median"))
    return out


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="write the Markdown table here")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N, xpu, xpu:N (default: detect)")
    parser.add_argument("--repeats", type=int, default=10, help="verifications for repeatability")
    parser.add_argument("--variant", default=None,
                        help="performance variant (default: bench-gpu on a GPU, none on cpu)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per worker job")
    args = parser.parse_args(argv)

    # Everything cached goes to a fresh directory, so "cold" really is cold.
    os.environ["XEFORGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="xeforge-bench-cache-")
    device = detect_device(args.device)
    problem = load_problem(BASELINE)
    source = CANDIDATE.read_text(encoding="utf-8")
    perf_variant = args.variant or (None if device.interpreter else "bench-gpu")
    base_opts: dict[str, Any] = {"timeout_s": args.timeout}
    if perf_variant:
        base_opts["performance_variants"] = [perf_variant]

    rows: list[list[str]] = []
    print(f"device: {device.label}", file=sys.stderr)

    cold, cold_s = _timed_verify(problem, source, device, VerifyOptions(**base_opts))
    if cold.kind is not VerdictKind.OK:
        print(f"the GEMM pair did not verify: {cold.kind.value}: {cold.reason}\n{cold.error_text}",
              file=sys.stderr)
        return 1
    warm, warm_s = _timed_verify(problem, source + "\n# warm-baseline run\n", device,
                                 VerifyOptions(**base_opts))
    cached, cached_s = _timed_verify(problem, source, device, VerifyOptions(**base_opts))
    if not cached.cached:
        print("warning: the repeat of the same pair was not served from the verdict cache "
              "(did the worker code change during the run?)", file=sys.stderr)
    for label, verdict, wall in (("cold (nothing cached)", cold, cold_s),
                                 ("warm baseline (new candidate)", warm, warm_s),
                                 ("cached verdict (same pair)", cached, cached_s)):
        kernel_s = 0.0 if verdict.cached else _kernel_seconds(verdict)
        steps = ", ".join(f"{s.name} {s.seconds:.1f}" for s in verdict.steps) if not verdict.cached else "-"
        rows.append([label, f"{wall:.2f}", f"{kernel_s:.2f}", f"{wall - kernel_s:.2f}", steps])

    lines = [
        "# Verifier benchmark",
        "",
        f"- date: {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- device: {device.label}; driver {device.fingerprint.get('driver_version') or '-'}; "
        f"Triton backend {device.fingerprint.get('triton_backend')}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in (device.fingerprint.get("versions") or {}).items() if v)
        + f"; host Python {platform.python_version()}",
        f"- pair: `{BASELINE.relative_to(ROOT)}` (baseline) vs `{CANDIDATE.relative_to(ROOT)}` (candidate); "
        f"correctness on ci + ci-odd; timed variant: {perf_variant or 'none (interpreter)'}",
        "",
        "## Overhead per candidate",
        "",
        "| run | wall s | timed kernel calls s | overhead s | steps (s) |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]

    if perf_variant and not device.interpreter:
        speedups: list[float] = []
        last = cold
        for i in range(args.repeats):
            v, _ = _timed_verify(problem, source + f"\n# repeat {i}\n", device, VerifyOptions(**base_opts))
            if v.kind is not VerdictKind.OK or not v.performance:
                print(f"repeat {i}: {v.kind.value}: {v.reason}", file=sys.stderr)
                continue
            speedups.append(v.performance[0].speedup)
            last = v
            print(f"repeat {i}: speedup {speedups[-1]:.3f}x", file=sys.stderr)
        mean = statistics.fmean(speedups) if speedups else float("nan")
        sd = statistics.stdev(speedups) if len(speedups) > 1 else float("nan")
        lines += [
            "",
            f"## Timing repeatability ({len(speedups)} verifications of the same pair)",
            "",
            "| mean speedup | stdev | CV | min | max | per run |",
            "|---|---|---|---|---|---|",
            f"| {_fmt(mean, '.3f')}x | {_fmt(sd, '.3f')} | {_fmt(sd / mean * 100 if speedups else None, '.2f')}% "
            f"| {_fmt(min(speedups) if speedups else None, '.3f')}x | {_fmt(max(speedups) if speedups else None, '.3f')}x "
            f"| {', '.join(f'{s:.3f}' for s in speedups)} |",
        ]
        p = last.performance[0]
        dims = {k: int(v) for k, v in problem.variant(perf_variant).dims.items()}
        bench = _do_bench(device, dims)
        flop = p.flop or 2.0 * dims["M"] * dims["N"] * dims["K"]
        lines += [
            "",
            "## Agreement with triton.testing.do_bench (same kernels, same run)",
            "",
            "| kernel | verifier median µs | do_bench median µs | verifier / do_bench | verifier TFLOP/s | do_bench TFLOP/s |",
            "|---|---|---|---|---|---|",
        ]
        for label, stats in (("baseline", p.baseline), ("candidate", p.candidate)):
            db_us = bench[label] * 1000.0
            lines.append(f"| {label} | {stats.median_us:.1f} | {db_us:.1f} | {stats.median_us / db_us:.3f} "
                         f"| {flop / stats.median_us / 1e6:.1f} | {flop / db_us / 1e6:.1f} |")
        db_speedup = bench["baseline"] / bench["candidate"]
        lines.append(f"| speedup | {p.speedup:.3f}x | {db_speedup:.3f}x | {p.speedup / db_speedup:.3f} | | |")
        if p.roofline_fraction is not None:
            lines.append(f"\nCandidate at {p.roofline_fraction * 100:.0f}% of the device roofline "
                         f"({p.tflops:.1f} TFLOP/s).")
    else:
        lines += ["", "Timing repeatability and do_bench agreement: not measured: interpreter "
                      "(Triton's CPU interpreter times nothing meaningful)."]

    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
