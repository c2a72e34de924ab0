"""Cost and reach of the correctness size derived from the kernels' tiles: the default
verification (a ``sizes`` job probes the launches, the candidate is checked at ``<base>-tiles``
in place of the ``-odd`` copies) against the same verification without it (``tile_sizes`` off:
the ``-odd`` copies and the grid probe, as before), interleaved, on the same pairs.

    python benchmarks/bench_sizes.py --out DIR [--device cpu|cuda] [--repeats 3] [--pairs NAME ...]

Each repeat verifies every pair both ways with a fresh candidate text (no cached verdict, no
saved baseline outputs: ``use_cache`` off), in alternating order. Per verification it records
the wall time, the CPU time of this process and of the worker processes it reaped (user + system:
unlike the wall time, it does not grow when other work shares the machine; to count it, every
job runs in a fresh process outside the OS sandbox unless ``XEFORGE_POOL`` / ``XEFORGE_SANDBOX``
say otherwise), the seconds each
worker job ran (``Verdict.resources``), the verdict kind and the variants checked; at the end the
median wall and CPU time of each pair both ways and their ratios (goal: at most 1.5x). Pairs (``--pairs``; default all): the sample GEMM against itself, a
KernelBench-style elementwise problem and its solution (``tests/fixtures/formats/kernelbench``),
and the tile fixtures with a fault each (``tests/fixtures/tiles``), whose verdicts show what the
derived size reaches. Writes ``DIR/sizes.json`` after every verification and ``DIR/report.md``
(date, device, library versions, the table) at the end. On cpu the kernels run in Triton's
interpreter; the ratio there is the interpreter's, the GPU's is the one the goal is about.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (problem, candidate), paths from the repository root
PAIRS = {
    "07_gemm_fp32_upcast": ("sample_kernels/07_gemm_fp32_upcast.py", "sample_kernels/07_gemm_fp32_upcast.py"),
    "kb_residual_relu": ("tests/fixtures/formats/kernelbench/residual_relu.py",
                         "tests/fixtures/formats/kernelbench/residual_relu_new.py"),
    "tiles_linear_k_tail": ("tests/fixtures/tiles/linear.py", "tests/fixtures/tiles/linear_k_tail.py"),
    "tiles_scale_floor_grid": ("tests/fixtures/tiles/scale.py", "tests/fixtures/tiles/scale_floor_grid.py"),
    "tiles_rmsnorm_tile_mean": ("tests/fixtures/tiles/rmsnorm.py", "tests/fixtures/tiles/rmsnorm_tile_mean.py"),
}


def _device_text(device: str) -> str:
    from xeforge_core.cache import library_versions
    from xeforge_core.devices import detect_device

    info = detect_device(device)
    versions = ", ".join(f"{k} {v}" for k, v in library_versions().items() if v)
    return f"{info.type}:{info.index} ({info.name}); {versions}; Python {platform.python_version()}"


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of the children it has reaped."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _one(name: str, tiles: bool, device: str, stamp: str) -> dict[str, Any]:
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    problem_path, candidate_path = PAIRS[name]
    problem = load_problem(ROOT / problem_path)
    source = (ROOT / candidate_path).read_text() + f"\n# bench {stamp}\n"
    start = time.monotonic()
    cpu0 = _cpu_seconds()
    verdict = verify(problem, source, device=device, candidate_name=Path(candidate_path).name,
                     options=VerifyOptions(use_cache=False, tile_sizes=tiles, measure_performance=False))
    wall = time.monotonic() - start
    return {"pair": name, "tile_sizes": tiles, "wall_s": round(wall, 2), "cpu_s": round(_cpu_seconds() - cpu0, 2),
            "kind": verdict.kind.value,
            "jobs_s": {role: r.get("seconds") for role, r in verdict.resources.items()},
            "variants": list(dict.fromkeys(c.variant for c in verdict.correctness)),
            "sizes": [{"variant": s.variant, "sizes": s.sizes, "gaps": s.gaps} for s in verdict.sizes],
            "reason": verdict.reason[:300]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for sizes.json and report.md (created)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, xpu (default cpu)")
    parser.add_argument("--repeats", type=int, default=3, help="verifications of each pair each way (default 3)")
    parser.add_argument("--pairs", nargs="+", choices=sorted(PAIRS), default=list(PAIRS))
    args = parser.parse_args(argv)
    import os

    # each job its own process, this one's child: its CPU time is counted here (bubblewrap's
    # sandboxed processes are not reaped by this process, so the sandbox is off unless asked for)
    os.environ.setdefault("XEFORGE_POOL", "0")
    os.environ.setdefault("XEFORGE_SANDBOX", "0")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    device_text = _device_text(args.device)
    for rep in range(args.repeats):
        for name in args.pairs:
            order = (False, True) if rep % 2 == 0 else (True, False)
            for tiles in order:
                row = _one(name, tiles, args.device, f"{rep}-{tiles}-{time.time()}")
                row["repeat"] = rep
                rows.append(row)
                print(f"{name:26s} tiles={'on ' if tiles else 'off'} {row['kind']:13s} {row['wall_s']:7.1f} s "
                      f"{row['cpu_s']:7.1f} CPU s  "
                      f"{', '.join(row['variants'])}", flush=True)
                (out / "sizes.json").write_text(json.dumps({"device": device_text, "rows": rows}, indent=1))
    lines = [f"# Cost of the size derived from the kernels' tiles ({_dt.date.today().isoformat()})", "",
             f"device: {device_text}", f"repeats: {args.repeats}, interleaved; no cache", "",
             "| pair | verdict (tiles on) | verdict (off) | wall s, on | wall s, off | ratio | CPU s, on | CPU s, off "
             "| ratio | derived size |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in args.pairs:
        on = [r for r in rows if r["pair"] == name and r["tile_sizes"]]
        off = [r for r in rows if r["pair"] == name and not r["tile_sizes"]]
        m_on = statistics.median(r["wall_s"] for r in on)
        m_off = statistics.median(r["wall_s"] for r in off)
        c_on = statistics.median(r["cpu_s"] for r in on)
        c_off = statistics.median(r["cpu_s"] for r in off)
        derived = next((s for r in on for s in r["sizes"] if s["variant"].endswith("-tiles")), None)
        shown = ", ".join(f"{k}={v}" for k, v in derived["sizes"].items()) if derived else "-"
        lines.append(f"| {name} | {on[-1]['kind']} | {off[-1]['kind']} | {m_on:.1f} | {m_off:.1f} | "
                     f"{m_on / m_off:.2f}x | {c_on:.1f} | {c_off:.1f} | {c_on / c_off:.2f}x | {shown} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
