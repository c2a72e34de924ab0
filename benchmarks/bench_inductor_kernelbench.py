"""KernelBench levels 1 and 2 through ``xeforge batch --engine rules``: how many plain-PyTorch
problems get a verified first version from TorchInductor, and the final speedups.

For each level directory of KernelBench's public repository (kept outside this repository,
e.g. ``../ext/KernelBench/KernelBench/level2``), copy the first ``--limit`` problems into a
work folder, run ``xeforge batch DIR --engine rules --out summary.csv`` there, and report from
the batch summary: the share of problems whose ``first_version`` stage passed, and the
geometric mean of the final speedup over eager (the batch's speedups are over the eager
``Model``; on cpu nothing is timed and the geometric means say so). The output goes to stdout
and, with ``--record``, to a Markdown file under ``docs/measured/`` with the device and date.

    python benchmarks/bench_inductor_kernelbench.py --kernelbench ../ext/KernelBench --levels 2 --limit 3 --device cpu
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _rows(summary: Path) -> list[dict[str, str]]:
    with summary.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _geomean(values: list[float]) -> float | None:
    good = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in good) / len(good)) if good else None


def run_level(kb: Path, level: int, limit: int | None, device: str, work: Path, timeout: int) -> dict:
    src = kb / "KernelBench" / f"level{level}"
    problems = sorted(src.glob("*.py"), key=lambda p: int(p.name.split("_")[0]) if p.name[0].isdigit() else 0)
    problems = problems[:limit] if limit else problems
    folder = work / f"level{level}"
    folder.mkdir(parents=True, exist_ok=True)
    for p in problems:  # names must be module-safe: "19_ReLU.py" -> "p19_ReLU.py"
        shutil.copy(p, folder / ("p" + p.name if p.name[0].isdigit() else p.name))
    summary = work / f"level{level}.csv"
    cmd = [sys.executable, "-m", "xeforge_core.cli", "batch", str(folder), "--engine", "rules", "--device", device,
           "--workspace", str(work / f"ws{level}"), "--out", str(summary)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, timeout=timeout, check=False)
    rows = _rows(summary) if summary.exists() else []
    first = [r for r in rows if r.get("first_version") == "approved" and r.get("first_version_verdict") == "ok"]
    speedups = []
    for r in rows:
        with contextlib.suppress(ValueError):
            speedups.append(float(r.get("final_speedup") or "nan"))
    return {"level": level, "problems": len(problems), "rows": len(rows), "first_version": len(first),
            "geomean_vs_eager": _geomean([s for s in speedups if not math.isnan(s)])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, required=True, help="KernelBench checkout (its KernelBench/levelN)")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems of each level")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--timeout", type=int, default=6 * 3600, help="seconds per level")
    ap.add_argument("--record", type=Path, default=None, help="also write the table to this Markdown file")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="xeforge-inductor-kb-"))
    results = [run_level(args.kernelbench, int(lv), args.limit, args.device, work, args.timeout)
               for lv in args.levels.split(",")]
    lines = [f"# KernelBench through `xeforge batch --engine rules` ({datetime.date.today()}, device {args.device})",
             "", "| level | problems | summarised | verified first version | geomean vs eager |", "|---|---|---|---|---|"]
    for r in results:
        share = f"{r['first_version']}/{r['problems']} ({100 * r['first_version'] / max(1, r['problems']):.0f}%)"
        gm = f"{r['geomean_vs_eager']:.3f}x" if r["geomean_vs_eager"] else "not measured"
        lines.append(f"| {r['level']} | {r['problems']} | {r['rows']} | {share} | {gm} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
