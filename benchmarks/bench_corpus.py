"""Verify a directory of problem/solution pairs written outside the project, and compare the
verdicts with KernelBench's own evaluation of the same pairs.

Layout of the corpus directory (the pairs are not part of the repository: ``benchmarks/build_corpus.py``
writes them into ``corpus/``, which git ignores, from the addresses and commits in
``benchmarks/corpus_manifest.json``)::

    DIR/pairs/<id>/problem.py     a KernelBench / KernelAgent problem (PyTorch Model + get_inputs)
    DIR/pairs/<id>/solution.py    a published solution (ModelNew, or kernel_function)
    DIR/pairs/<id>/meta.json      {"format", "level", "problem_name", "problem_source",
                                   "solution_source", "expected", "notes"}

For every pair: ``xeforge verify problem.py solution.py`` (the library call, one verdict each,
the verdict cache off), at the default sizes (reduced where the published ones are large) and,
for KernelAgent pairs, at the dtype a kernel demands when it refuses the problem's (``--dtype
kernel``: KernelAgent's test harness casts the problem to its kernels' dtype, bfloat16 in its
examples; the verdict says so with a ``dtype_specialised`` finding), and,
for the ids given with ``--published``, at the published sizes (``--variant module``), with the
peak host RSS and device memory of every worker job. A pair whose files cannot be used is a
*refusal*, and its row says what is missing. With ``--kb-results`` (the output of KernelBench's
``eval_kernel_against_ref`` run over the same pairs), every pair where KernelBench's pass/fail
differs from ours is listed with both reasons.

Usage::

    python benchmarks/bench_corpus.py DIR --out OUT [--device cuda] [--published ID ...] [--published-dir D]
        [--kb-results OUT/kb_results.json] [--only ID ...] [--resume] [--timeout 300]
    # N processes over disjoint slices, then one report of them all:
    python benchmarks/bench_corpus.py DIR --out OUT/k --shard k/N ...   (k = 1..N, side by side)
    python benchmarks/bench_corpus.py DIR --out OUT --merge OUT/1 ... OUT/N --report --kb-results ...

Writes ``OUT/corpus.json`` (after every pair, so an interrupted run keeps what it did),
``OUT/corpus.csv`` and ``OUT/corpus.md`` (the table, the device, date and versions, the
refusal rate and the KernelBench comparison), and prints the table last.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xeforge_core.commands.verify import EXIT_BAD_INPUT, EXIT_CODES  # noqa: E402
from xeforge_core.devices import detect_device  # noqa: E402
from xeforge_core.problem import ProblemError, load_problem, read_candidate  # noqa: E402
from xeforge_core.verify import VerifyOptions, verify  # noqa: E402

GIB = 2**30


def _pairs(root: Path, only: list[str] | None) -> list[Path]:
    pairs = sorted(p for p in (root / "pairs").iterdir() if (p / "problem.py").is_file())
    return [p for p in pairs if not only or p.name in only]


def _shard(text: str, ap: argparse.ArgumentParser) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N) from ``--shard``; a malformed value is an argparse error."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        ap.error(f"--shard {text!r}: expected K/N, for example 2/6")
    if not 1 <= k <= n:
        ap.error(f"--shard {text!r}: K must be between 1 and N")
    return k, n


def _meta(pair: Path) -> dict[str, Any]:
    try:
        return json.loads((pair / "meta.json").read_text())
    except (OSError, ValueError):
        return {}


def _peaks(resources: dict[str, dict[str, Any]]) -> tuple[float | None, float | None]:
    rss = [r.get("peak_host_rss_bytes") for r in resources.values() if r.get("peak_host_rss_bytes")]
    dev = [r.get("peak_device_bytes") for r in resources.values() if r.get("peak_device_bytes")]
    return (max(rss) / GIB if rss else None), (max(dev) / GIB if dev else None)


def run_pair(pair: Path, device: Any, opts: VerifyOptions, *, published: bool, port: bool = False) -> dict[str, Any]:
    """One row: the verdict of ``solution.py`` against ``problem.py``. With ``port``, a solution
    that hard-codes another device (``"cuda"``, ``x.is_cuda``) is first made device-agnostic by the
    portability codemod, as the workbench's portability step does (``ported`` says so)."""
    meta = _meta(pair)
    row: dict[str, Any] = {"id": pair.name, "format": meta.get("format", "kernelbench"), "level": meta.get("level"),
                           "expected": meta.get("expected", "unknown"), "sizes": "published" if published else "default",
                           "ported": False}
    start = time.monotonic()
    try:
        problem = load_problem(pair / "problem.py")
        candidate = read_candidate(pair / "solution.py", posed=problem.kernel.class_name)
    except ProblemError as exc:
        row.update(kind="refused", exit=EXIT_BAD_INPUT, reason=str(exc), seconds=round(time.monotonic() - start, 2))
        return row
    if port:
        from xeforge_core.codemods.portability import hard_coded_devices, port_source

        if hard_coded_devices(candidate, device.type):
            ported = port_source(candidate)
            if ported.changed:
                candidate, row["ported"] = ported.source, True
    if published:
        opts = VerifyOptions(**{**opts.__dict__, "variants": ["module"], "include_odd_size": False,
                                "seeds": 1, "distributions": ["normal"], "grid_coverage": False})
    if row["format"] == "kernelagent":  # its test harness casts the problem to the kernel's dtype
        opts = VerifyOptions(**{**opts.__dict__, "dtype": "kernel"})
    v = verify(problem, candidate, device=device, options=opts)
    perf = v.performance[0] if v.performance else None
    rss, dev = _peaks(v.resources)
    row.update(
        kind=v.kind.value, exit=EXIT_CODES.get(v.kind, 1), reason=v.reason.splitlines()[0][:300] if v.reason else "",
        seconds=round(time.monotonic() - start, 2),
        speedup_vs_eager=round(perf.eager_speedup, 3) if perf and perf.eager_speedup else None,
        candidate_us=round(perf.candidate.median_us, 2) if perf else None,
        eager_us=round((perf.baseline if perf.baseline_label == "eager" else perf.reference).median_us, 2)
        if perf and (perf.baseline_label == "eager" or perf.reference) else None,
        variants=sorted({r.variant for r in v.correctness}),
        peak_host_rss_gib=round(rss, 3) if rss else None, peak_device_gib=round(dev, 3) if dev else None,
        findings=sorted({f.rule for f in v.findings if f.severity in ("error", "warning")}),
        # which inputs the truth was checked on: redraws left out of its domain, a non-finite truth
        inputs_notes=[w.removeprefix("baseline: ") for w in v.warnings
                      if "inputs were not used" in w or "not finite on the problem's own" in w],
        precision_check=v.precision.get("check"), error_ratio=v.precision.get("error_ratio"),
        kernelbench_tolerance=(v.precision.get("kernelbench") or {}).get("passed"),
    )
    return row


def compare_with_kernelbench(rows: list[dict[str, Any]], kb: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs where KernelBench's correctness differs from ours (default sizes only)."""
    out = []
    for row in rows:
        if row["sizes"] != "default" or row["id"] not in kb:
            continue
        theirs = kb[row["id"]]
        if theirs.get("compiled") is None and theirs.get("correctness") is None:
            continue  # KernelBench's eval did not run this pair (KernelAgent's format needs ModelNew)
        kb_pass = bool(theirs.get("compiled")) and bool(theirs.get("correctness"))
        ours = row["kind"] == "ok"
        if kb_pass != ours:
            out.append({"id": row["id"], "ours": row["kind"], "ours_reason": row.get("reason", ""),
                        "kernelbench": "pass" if kb_pass else "fail",
                        "kernelbench_reason": str(theirs.get("error") or theirs.get("metadata") or "")[:300]})
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list):
        return ", ".join(map(str, v)) or "-"
    return str(v)


def write_report(out: Path, rows: list[dict[str, Any]], diffs: list[dict[str, Any]], header: dict[str, Any]) -> str:
    cols = ["id", "format", "sizes", "ported", "kind", "exit", "seconds", "speedup_vs_eager", "candidate_us", "eager_us",
            "peak_host_rss_gib", "peak_device_gib", "reason"]
    with open(out / "corpus.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols + ["variants", "findings", "expected", "level", "inputs_notes"],
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    default = [r for r in rows if r["sizes"] == "default"]
    refused = [r for r in default if r["kind"] == "refused"]
    kinds: dict[str, int] = {}
    for r in default:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    lines = [f"# Corpus verification ({header['date']})", "",
             f"Device: {header['device']}; {header['versions']}; host {header['host']}.", "",
             f"{len(default)} pairs at default sizes: {len(default) - len(refused)} got a verdict that is not a "
             f"refusal ({(len(default) - len(refused)) / max(1, len(default)):.0%}); verdicts: "
             + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ".", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c)).replace("|", "/") for c in cols) + " |")
    labelled = [r for r in default if r.get("expected") in ("correct", "wrong")]
    if labelled:
        # the verdict the pair's own repository recorded (its evaluation, on its GPU, with its tolerances)
        differ = [r for r in labelled if (r["kind"] == "ok") != (r["expected"] == "correct")]
        lines += ["", f"## Against the verdicts the source repositories recorded ({len(labelled)} labelled pairs, "
                      f"{len(labelled) - len(differ)} agree)", ""]
        lines += [f"- {r['id']}: source says {r['expected']}; ours {r['kind']}"
                  + (" (ported)" if r.get("ported") else "") + f": {r.get('reason', '')}" for r in differ]
    if diffs is not None:
        lines += ["", f"## Where KernelBench's evaluation differs ({len(diffs)} pair(s))", ""]
        lines += [f"- {d['id']}: ours {d['ours']} ({d['ours_reason']}); KernelBench {d['kernelbench']}"
                  + (f" ({d['kernelbench_reason']})" if d["kernelbench_reason"] else "") for d in diffs]
    text = "\n".join(lines) + "\n"
    (out / "corpus.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default=None)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--published", nargs="*", default=[], help="ids to verify at the published sizes too")
    ap.add_argument("--published-dir", type=Path, default=None,
                    help="a directory of pairs (same layout) to verify at their published sizes")
    ap.add_argument("--kb-results", type=Path, default=None)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="verify only every N-th pair from the K-th (1-based): N processes with K = 1..N "
                         "share a GPU over disjoint slices of the corpus (merge their corpus.json rows)")
    ap.add_argument("--merge", nargs="*", type=Path, default=[], metavar="DIR",
                    help="keep the rows of these runs' --out folders too, as --resume keeps OUT's (shards)")
    ap.add_argument("--no-timing", action="store_true",
                    help="correctness only: no timing job (the speedup columns stay empty)")
    ap.add_argument("--report", action="store_true", help="verify nothing: write the report of the rows kept")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per variant (default 3)")
    ap.add_argument("--no-odd-size", action="store_true", help="no odd-size copies of the variants")
    ap.add_argument("--port", action="store_true",
                    help="port solutions that hard-code another device first (the workbench's portability step)")
    ap.add_argument("--allow", action="append", default=[], metavar="DOWNGRADE",
                    help="precision downgrades to accept, as xeforge verify --allow (repeatable)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    device = detect_device(args.device)
    opts = VerifyOptions(timeout_s=args.timeout, use_cache=False, seeds=args.seeds,
                         measure_performance=not args.no_timing,
                         include_odd_size=not args.no_odd_size, allow_precision=list(args.allow))
    results_path = args.out / "corpus.json"
    rows: list[dict[str, Any]] = []
    kept_headers: list[dict[str, Any]] = []
    for path in ([results_path] if args.resume else []) + [d / "corpus.json" for d in args.merge]:
        if path.is_file():
            kept = json.loads(path.read_text())
            rows += kept.get("rows", [])
            kept_headers.append(kept.get("header") or {})
    rows = list({(r["id"], r["sizes"]): r for r in rows}.values())  # a pair verified twice: the later row
    done = {(r["id"], r["sizes"]) for r in rows}
    versions = ", ".join(f"{k} {v}" for k, v in (device.fingerprint.get("versions") or {}).items()
                         if k in ("torch", "triton", "numpy"))
    header = {"date": dt.date.today().isoformat(), "device": f"{device.type}:{device.index} ({device.name})",
              "versions": versions, "host": platform.node()}
    if args.report and kept_headers:  # the report of rows verified elsewhere names where they ran
        header = kept_headers[0]
    jobs = [(p, False) for p in _pairs(args.corpus, args.only)]
    if args.shard:
        k, n = _shard(args.shard, ap)
        jobs = jobs[k - 1::n]
    jobs += [(args.corpus / "pairs" / i, True) for i in args.published]
    if args.published_dir is not None:
        jobs += [(p, True) for p in sorted(args.published_dir.iterdir()) if (p / "problem.py").is_file()]
    for pair, published in [] if args.report else jobs:
        sizes = "published" if published else "default"
        if (pair.name, sizes) in done:
            continue
        print(f"[corpus] {pair.name} ({sizes})", flush=True)
        try:
            row = run_pair(pair, device, opts, published=published, port=args.port)
        except Exception as exc:  # noqa: BLE001 - the harness failing on one pair is a row, not a stop
            row = {"id": pair.name, "sizes": sizes, "kind": "harness_error", "exit": None,
                   "reason": f"{type(exc).__name__}: {exc}"[:300]}
        rows.append(row)
        results_path.write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    kb = json.loads(args.kb_results.read_text()) if args.kb_results and args.kb_results.is_file() else None
    diffs = compare_with_kernelbench(rows, kb) if kb is not None else None
    results_path.write_text(json.dumps({"header": header, "rows": rows, "kernelbench_differs": diffs}, indent=1))
    text = write_report(args.out, rows, diffs, header)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
