"""Where each kernel of an Nsight Compute report waits, instruction by instruction.

Reads the CSV of ``ncu --import REPORT --page source --print-source sass --csv`` (one section a
profiled kernel: a ``"Kernel Name",NAME`` line, a header, one row an instruction) and prints, per
kernel, the share of warp-stall samples by reason, then for the reasons asked the instructions
with the most samples, each with the instructions before it (the barrier or scoreboard a wait
belongs to is the ``SYNCS``/``HGMMA``/``LDG`` just above it).

    python benchmarks/ncu_source_stalls.py source.csv --kernels 1 2 --reasons long_sb barrier --context 4

A script for reading a profile, not a test.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"


def sections(path: Path) -> list[tuple[str, list[str], list[list[str]]]]:
    """``(kernel name, header, rows)`` per profiled kernel, in the report's order."""
    rows = list(csv.reader(path.open(newline="")))
    out: list[tuple[str, list[str], list[list[str]]]] = []
    for row in rows:
        if row and row[0] == "Kernel Name":
            out.append((row[1] if len(row) > 1 else "?", [], []))
        elif row and out and not out[-1][1]:
            out[-1][1].extend(row)
        elif row and out:
            out[-1][2].append(row)
    return out


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def report(path: Path, kernels: list[int] | None, reasons: list[str], top: int, context: int) -> str:
    lines = []
    for k, (name, header, rows) in enumerate(sections(path)):
        col = {h: i for i, h in enumerate(header)}
        if SAMPLES not in col:
            lines.append(f"[{k}] {name}: no warp-stall samples in this export")
            continue
        total = sum(_num(r[col[SAMPLES]]) for r in rows) or 1.0
        stalls = {h[6:]: sum(_num(r[col[h]]) for r in rows) / total
                  for h in header if h.startswith("stall_") and "Not Issued" not in h}
        share = ", ".join(f"{s} {v:.1%}" for s, v in sorted(stalls.items(), key=lambda x: -x[1])[:8])
        lines.append(f"[{k}] {name[:100]}: {len(rows)} instructions, {total:.0f} samples; {share}")
        if kernels is not None and k not in kernels:
            continue
        for reason in reasons:
            c = col.get(f"stall_{reason}")
            if c is None:
                continue
            lines.append(f"  most {reason} samples:")
            ranked = sorted(range(len(rows)), key=lambda i: -_num(rows[i][c]))[:top]
            for i in ranked:
                for j in range(max(0, i - context), i + 1):
                    r = rows[j]
                    mark = ">" if j == i else " "
                    lines.append(f"   {mark} {r[col['Address']][-6:]} {_num(r[c]) / total:6.2%} "
                                 f"{r[col['Source']].strip()[:110]}")
                lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path)
    ap.add_argument("--kernels", type=int, nargs="*", default=None, help="kernel indices to detail (default: all)")
    ap.add_argument("--reasons", nargs="*", default=["long_sb", "barrier", "wait"])
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--context", type=int, default=3, help="instructions shown before each")
    args = ap.parse_args(argv)
    print(report(args.csv, args.kernels, args.reasons, args.top, args.context))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
