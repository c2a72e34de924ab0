"""KernelBench levels 1 and 2 through the rules engine from plain PyTorch: how many problems get a
verified first version from TorchInductor, and the final result against eager and torch.compile.

For each problem of KernelBench's public repository (kept outside this repository, e.g.
``../ext/KernelBench``; ``--levels``, ``--only``, ``--limit``), one child process of this script
(``--one``), ``--jobs`` of them at a time, each in its own process group and stopped after
``--problem-timeout`` seconds (a row saying so is written); ``--budget`` bounds the whole run
(problems not started by then are left for ``--resume``), so one time-limited GPU call gets
through many problems, writes its summary in time, and one problem that hangs takes nothing else
down (a child writes its first version's row before timing, so one stopped while torch.compile
autotunes keeps its verdict, and torch.compile gets what is left of the problem's limit):

1. **the rules engine**: ``xeforge batch DIR --engine rules`` on a folder holding only that
   problem: TorchInductor's first version (verified, version 1), then the rules stages
   (``--first-version-only``: the first version alone, generated and verified in the child);
2. **sizes**: the published size (``module``) and a **bench size** derived through the problem's
   size constants where eager would take under ``--min-eager-us`` (100 µs) at the published one
   (``bench_optimize_corpus.bench_size``: the smallest power-of-two factor of every size
   constant at which the bytes moved at the device's measured copy bandwidth take that long);
   the measured eager time is written next to it;
3. **anchors**: the verifier times eager (the problem's ``Model``) and the final version
   interleaved in its workers, after re-checking the final version (verified in full by the
   batch) at the published size; torch.compile (``mode="max-autotune-no-cudagraphs"``) is timed in
   its own process (``compile_anchor.py``), its compile time reported apart and the cache warm
   before timing;
4. **the ceiling**: the final version's device time outside its own Triton kernels (library
   calls, copies), profiled in its own process (``library_share.py``), and eager over it
   (``eager_ceiling``): the most any version that keeps those calls could reach over eager.

Outputs in ``--out``: ``rows/level<N>/<problem>.csv`` (one row per problem and size, written by
the child as soon as it is done, so a stopped run keeps what it measured), ``summary.csv`` (all
rows) and ``summary.md`` (device, date, versions; per level: problems, verified first versions
and their share, geometric means of the final result over eager and over torch.compile at the
published and at the bench size). ``--record FILE`` also writes the Markdown there (e.g. under
``docs/measured/``).

    python benchmarks/bench_inductor_kernelbench.py --kernelbench ../ext/KernelBench --levels 2 --limit 10 \\
        --device cpu --first-version-only --jobs 2 --out /tmp/ikb

On cpu (Triton's interpreter) nothing is timed: the first versions and their verdicts are real,
the times say "not timed".
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import datetime as dt
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bounded_pool import log_tail, run_command_bounded  # noqa: E402

#: The eager reference should take at least this long at the bench size (µs).
MIN_EAGER_US = 100.0

#: The note of the row a child writes once its first version is verified and before timing (a
#: child stopped later keeps that verdict; a run stopped as a whole leaves it for ``--resume``).
UNFINISHED = "not finished: stopped before the timing ended"

COLUMNS = ["level", "problem", "size", "sizes", "first_version", "first_version_verdict", "first_version_reason",
           "not_triton_yet", "stages", "final_verdict", "eager_us", "final_us", "compile_us", "compile_s",
           "final_vs_eager", "final_vs_compile", "not_triton_us", "not_triton_share", "eager_ceiling", "seconds",
           "note"]


def geomean(values: list[float | None]) -> float | None:
    """Geometric mean of the positive values (``None`` when there is none)."""
    good = [v for v in values if v is not None and v > 0 and not math.isnan(v)]
    return math.exp(sum(math.log(v) for v in good) / len(good)) if good else None


def _num(text: Any) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def problems_of(kb: Path, level: int, limit: int | None, only: list[str] | None = None) -> list[Path]:
    """The problems of one level in KernelBench's numeric order, those ``only`` selects (an item
    that is a number selects the problem of that number, ``"16"`` -> ``16_Matmul_with_transposed_A``;
    any other item the problems whose file name contains it, case-insensitively: ``"matmul"``),
    the first ``limit`` of them."""
    src = kb / "KernelBench" / f"level{level}"
    if not src.is_dir():
        raise SystemExit(f"{src}: no such folder (is --kernelbench a KernelBench checkout?)")
    found = sorted(src.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]) if p.name[0].isdigit() else 0, p.name))
    if only:
        numbers = {o for o in only if o.isdigit()}
        words = [o.lower() for o in only if not o.isdigit()]
        found = [p for p in found if p.name.split("_")[0] in numbers or any(w in p.name.lower() for w in words)]
    return found[:limit] if limit else found


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    os.replace(tmp, path)


# -------------------------------------------------------------------------------------- child


def _pipeline(problem_path: Path, device: str, work: Path, timeout_s: float) -> tuple[dict[str, Any], str | None]:
    """``xeforge batch --engine rules`` on a folder holding only the problem: the batch row's
    first-version fields and stages, and the final version's source (``None``: no session)."""
    folder = work / "in"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(problem_path, folder / problem_path.name)
    summary = work / "batch.csv"
    cmd = [sys.executable, "-m", "xeforge_core.cli", "batch", str(folder), "--engine", "rules", "--device", device,
           "--workspace", str(work / "ws"), "--timeout", str(int(timeout_s)), "--out", str(summary), "--quiet"]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    if not summary.exists():
        return {"first_version": "no summary", "note": "xeforge batch wrote no summary"}, None
    with summary.open(newline="", encoding="utf-8") as f:
        rec = next(iter(csv.DictReader(f)), {})
    stage_cols = [c for c in rec if f"{c}_verdict" in rec and c != "first_version"]
    out = {"first_version": rec.get("first_version", ""), "first_version_verdict": rec.get("first_version_verdict", ""),
           "stages": ";".join(f"{s}:{rec[s]}" for s in stage_cols if rec.get(s)),
           "not_triton_yet": rec.get("not_triton", ""), "note": (rec.get("error") or "")[:300]}
    final = None
    if rec.get("session"):
        from xeforge_core.session import Session

        try:
            session = Session.open(rec["session"])
            final = session.source("head")
            tried = session.candidates(stage="first_version")  # a second attempt traced at the published size last
            if tried:
                out["first_version_reason"] = "" if tried[-1].status == "approved" else tried[-1].reason[:300]
        except Exception as exc:  # the row says why the sizes are not timed
            out["note"] += f"; session unreadable: {exc}"
    return out, final


def _say(problem: Any, what: str) -> Callable[[str], None]:
    """A progress printer for the child's log: ``HH:MM:SS <problem>: <what>: <message>`` (the
    parent quotes the last lines of a child it stops, so the slow step is on record)."""
    return lambda m: print(f"{time.strftime('%H:%M:%S')} {problem.name}: {what}: {m}", flush=True)


def _first_version(problem: Any, device: Any, timeout_s: float) -> tuple[dict[str, Any], str | None]:
    """TorchInductor's first version generated and verified here (no stages; correctness only,
    the sizes are timed afterwards)."""
    from xeforge_core.inductor.first_version import inductor_first_version, library_calls_noted
    from xeforge_core.pipeline.first_version import traced_at_published_size
    from xeforge_core.verify import VerifyOptions, verify

    where = device.torch_device if device.type in ("cuda", "xpu") else "cpu"
    _say(problem, "first version")("generating with TorchInductor")
    cand = inductor_first_version(problem, device=where)
    if not cand.applicable:
        return {"first_version": "failed", "first_version_reason": cand.not_applicable_reason[:300]}, None
    options = VerifyOptions(seeds=1, measure_performance=False, timeout_s=timeout_s)
    verdict = verify(problem, cand.code, device=device, options=options, on_progress=_say(problem, "first version"))
    again = None if verdict.passed else traced_at_published_size(problem, verdict, where, cand.code)
    if again is not None:  # as the rules engine's first-version step does
        _say(problem, "first version")("wrong at another size: generating again, traced at the published size")
        cand = again
        verdict = verify(problem, cand.code, device=device, options=options, on_progress=_say(problem, "first version"))
    out = {"first_version": "approved" if verdict.passed else "failed", "first_version_verdict": verdict.kind.value,
           "first_version_reason": "" if verdict.passed else (verdict.reason or "")[:300],
           "not_triton_yet": ";".join(library_calls_noted(cand.notes))}
    return out, cand.code if verdict.passed else None


def _timed_rows(problem_path: Path, problem: Any, final: str, device: Any, args: argparse.Namespace,
                base: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per size: eager and the final version timed by the verifier, torch.compile apart."""
    from bench_optimize_corpus import bench_size, compile_anchor, final_options

    from xeforge_core.codemods.autotune_prune import profile_numbers
    from xeforge_core.verify import verify

    bw = args.copy_gbps or profile_numbers(getattr(device, "profile", None), device.type)["bandwidth_gbps"]
    bench, why = bench_size(problem, bw, args.min_eager_us)
    sizes = ["module"] + ([bench] if bench != "module" else [])
    # the batch verified the first version in full: re-checked at the published size, then timed
    verdict = verify(problem, final, device=device, options=final_options("module", sizes),
                     on_progress=_say(problem, "timing"))
    perf = {p.variant: p for p in verdict.performance}
    rows = []
    for size in sizes:
        row = dict(base, size=size, sizes=why if size == bench else "published", final_verdict=verdict.kind.value)
        p = perf.get(size)
        if p is None:
            row["note"] = "; ".join(x for x in (base.get("note"), f"not timed: {verdict.reason or verdict.kind.value}")
                                    if x)
            rows.append(row)
            continue
        eager = p.reference if p.reference is not None else p.baseline
        row.update(eager_us=round(eager.median_us, 2), final_us=round(p.candidate.median_us, 2))
        row["final_vs_eager"] = round(eager.median_us / p.candidate.median_us, 4)
        ceiling = _ceiling(problem_path, problem, final, size, device.type, eager.median_us, args)
        ceiling = _trusted_ceiling(ceiling, p.candidate.median_us)
        ceiling_note = ceiling.pop("ceiling_note", "")
        row.update(ceiling)
        _say(problem, "torch.compile")(f"compiling and timing at {size}")
        left = args.limit_s - (time.monotonic() - args.started) - 15 if args.limit_s else args.compile_timeout
        if left < 30:
            row["note"] = "; ".join(x for x in (base.get("note"), ceiling_note, "torch.compile not timed: the "
                                                "problem's time limit was reached") if x)
            rows.append(row)
            continue
        comp = compile_anchor(problem_path, dict(problem.variant(size).overrides), device.type,
                              min(args.compile_timeout, left))
        row.update(compile_us=comp.get("median_us"), compile_s=comp.get("compile_s"))
        if comp.get("median_us"):
            row["final_vs_compile"] = round(comp["median_us"] / p.candidate.median_us, 4)
        notes = [base.get("note") or "", ceiling_note, comp.get("note") or ""]
        if size == bench and eager.median_us < args.min_eager_us:
            notes.append(f"eager {eager.median_us:.0f} µs < {args.min_eager_us:g} µs at the derived size")
        row["note"] = "; ".join(n for n in notes if n)
        rows.append(row)
    return rows


def _trusted_ceiling(ceiling: dict[str, Any], final_us: float) -> dict[str, Any]:
    """``ceiling`` as measured, or without ``eager_ceiling`` and with a note where the profile
    found more device time outside the Triton kernels than the verifier timed for the whole
    call (beyond 5%): the two measurements disagree, so no bound follows from them."""
    other = ceiling.get("not_triton_us")
    if not other or other <= 1.05 * final_us:
        return ceiling
    kept = {k: v for k, v in ceiling.items() if k != "eager_ceiling"}
    note = (f"ceiling not trusted: the profile found {other:.0f} µs outside the Triton kernels, more than "
            f"the {final_us:.0f} µs timed for the whole call")
    return {**kept, "ceiling_note": "; ".join(x for x in (ceiling.get("ceiling_note"), note) if x)}


def _ceiling(problem_path: Path, problem: Any, final: str, size: str, device: str, eager_us: float,
             args: argparse.Namespace) -> dict[str, Any]:
    """The final version's device time outside its own Triton kernels a call (library calls,
    copies: ``library_share.py`` in its own process) and ``eager_ceiling``, eager over that time:
    the most any version that keeps those calls could reach over eager (module docstring of
    ``library_share.py``); ``ceiling_note`` instead says why where it could not be measured."""
    version = Path(args.row_file).with_suffix(".final.py")
    version.write_text(final)
    cmd = [sys.executable, str(ROOT / "benchmarks" / "library_share.py"), str(problem_path), str(version),
           "--overrides", json.dumps(dict(problem.variant(size).overrides)), "--device", device]
    left = args.limit_s - (time.monotonic() - args.started) - 60 if args.limit_s else 120
    if left < 20:
        return {"ceiling_note": "ceiling not measured: the problem's time limit was near"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=min(120, left))
    except subprocess.TimeoutExpired:
        return {"ceiling_note": f"ceiling not measured: library_share.py ran past {min(120, left):.0f} s"}
    try:
        got = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):  # a ceiling not measured is noted; the row keeps its times
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ceiling_note": f"ceiling not measured: library_share.py exit {done.returncode}: {tail}"[:240]}
    version.with_suffix(".share.json").write_text(json.dumps(got, indent=1))  # the top library kernels, kept
    other = got.get("not_triton_us")
    if other is None:
        return {"ceiling_note": f"ceiling not measured: {got.get('note', 'no device kernels profiled')}"}
    row = {"not_triton_us": other, "not_triton_share": got.get("not_triton_share")}
    return {**row, "eager_ceiling": round(eager_us / other, 3)} if other else row


def run_one(args: argparse.Namespace) -> int:
    """The child: every measurement of one problem, written to ``--row-file``."""
    from xeforge_core.devices import detect_device
    from xeforge_core.problem import load_problem

    started = args.started = time.monotonic()
    path = Path(args.one)
    base: dict[str, Any] = {"level": args.level, "problem": path.stem}
    rows: list[dict[str, Any]]
    try:
        device = detect_device(None if args.device == "auto" else args.device)
        problem = load_problem(path)
        work = Path(args.row_file).with_suffix(".work")
        if args.first_version_only:
            got, final = _first_version(problem, device, args.verify_timeout)
        else:
            got, final = _pipeline(path, args.device, work, args.verify_timeout)
        base.update(got)
        # on record before timing: a child stopped while torch.compile autotunes keeps its verdict
        _write_rows(Path(args.row_file), [dict(base, size="module", note=UNFINISHED,
                                               seconds=round(time.monotonic() - started, 1))])
        if final is None or device.type == "cpu":
            note = "not timed: interpreter" if device.type == "cpu" else "not timed: no verified version"
            rows = [dict(base, size="module", note="; ".join(x for x in (base.get("note"), note) if x))]
        else:
            rows = _timed_rows(path, problem, final, device, args, base)
    except Exception as exc:  # a row says what went wrong; the run goes on
        rows = [dict(base, size="module", note=f"{type(exc).__name__}: {str(exc)[:300]}")]
    for r in rows:
        r["seconds"] = round(time.monotonic() - started, 1)
    _write_rows(Path(args.row_file), rows)
    return 0


# ------------------------------------------------------------------------------------- parent


def _child(problem: Path, level: int, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    """Run one problem's child in its own process group; a row saying so when it overruns."""
    row_file = out / "rows" / f"level{level}" / f"{problem.stem}.csv"
    if args.resume and row_file.exists() and not {"--budget", UNFINISHED} & set(_notes(row_file)):
        return _read(row_file)
    left = args.deadline - time.monotonic()
    if left < 30:  # --budget spent: not started (a later --resume run picks it up)
        return [{"level": level, "problem": problem.stem, "size": "module", "note": "not run: --budget spent"}]
    limit = min(args.problem_timeout, left)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(problem), "--level", str(level),
           "--row-file", str(row_file), "--device", args.device, "--min-eager-us", str(args.min_eager_us),
           "--compile-timeout", str(args.compile_timeout), "--verify-timeout", str(args.verify_timeout),
           "--limit-s", str(limit)]
    if args.copy_gbps:
        cmd += ["--copy-gbps", str(args.copy_gbps)]
    if args.first_version_only:
        cmd.append("--first-version-only")
    started = time.monotonic()
    log = (out / "logs" / f"level{level}-{problem.stem}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    # stopped with SIGTERM first: the child (and `xeforge batch`) stop their worker pools at exit,
    # whose workers run in process groups of their own; then SIGKILL what is left of the group
    row_file.unlink(missing_ok=True)
    status = run_command_bounded(cmd, log, limit)
    stopped = status is None
    if row_file.exists() and not stopped:
        return _read(row_file)
    why = ((f"stopped after {limit:.0f} s (--problem-timeout)" if limit >= args.problem_timeout
            else f"stopped after {limit:.0f} s at the end of --budget") if stopped
           else f"the child exited with status {status} without a row (see {log})")
    note = f"{why}; last: {log_tail(log)}"
    seconds = round(time.monotonic() - started, 1)
    # a first version verified before the stop keeps its verdict (the child writes it before timing)
    rows = [dict(r, note=note, seconds=seconds) for r in _read(row_file)] if row_file.exists() else \
        [{"level": level, "problem": problem.stem, "size": "module", "note": note, "seconds": seconds}]
    _write_rows(row_file, rows)
    return rows


def _notes(path: Path) -> list[str]:
    """The markers a row file's notes carry that make ``--resume`` run the problem again."""
    text = path.read_text(encoding="utf-8")
    return [m for m in ("--budget", UNFINISHED) if m in text]


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def summarize(rows: list[dict[str, Any]], header: dict[str, Any]) -> str:
    """The Markdown summary (module docstring)."""
    lines = [f"# KernelBench from plain PyTorch with the rules engine ({header['date']}, device {header['device']})",
             "", f"torch {header['torch']}, triton {header['triton']}, {header['mode']}; bench size: eager >= "
             f"{header['min_eager_us']:g} µs (derived through the size constants); torch.compile: "
             "max-autotune-no-cudagraphs, compile time apart, cache warm before timing.", "",
             "| level | problems | verified first version | final/eager (published) | final/eager (bench) "
             "| final/compile (published) | final/compile (bench) | ceiling over eager (published) "
             "| stopped (time limits) |",
             "|---|---|---|---|---|---|---|---|---|"]

    def fmt(v: float | None) -> str:
        return f"{v:.3f}x" if v else "not measured"

    for level in sorted({int(r["level"]) for r in rows}):
        mine = [r for r in rows if int(r["level"]) == level]
        names = sorted({r["problem"] for r in mine})
        first = {r["problem"] for r in mine if r.get("first_version") == "approved"
                 and r.get("first_version_verdict") in ("ok", "")}
        stopped = {r["problem"] for r in mine if "stopped after" in (r.get("note") or "")}
        # not run: never started, or stopped at the end of --budget before its first version had a
        # verdict (a first version verified before the stop counts, as its verdict stands)
        judged = {r["problem"] for r in mine if r.get("first_version")}
        unrun = {r["problem"] for r in mine if (r.get("note") or "").startswith("not run")
                 or "--budget" in (r.get("note") or "")} - judged

        def best(size: str, col: str, rs: list[dict[str, Any]] = mine) -> float | None:
            by = {}
            for r in rs:  # the bench size, or the published one where it already takes long enough
                if r["size"] == size or (size == "bench" and r["size"] == "module" and r["problem"] not in by):
                    by[r["problem"]] = _num(r.get(col))
            return geomean(list(by.values()))
        ran = len(names) - len(unrun)
        share = f"{len(first)}/{ran} ({100 * len(first) / max(1, ran):.0f}%)" + (f", {len(unrun)} not run" if unrun else "")
        lines.append(f"| {level} | {len(names)} | {share} | {fmt(best('module', 'final_vs_eager'))} | "
                     f"{fmt(best('bench', 'final_vs_eager'))} | {fmt(best('module', 'final_vs_compile'))} | "
                     f"{fmt(best('bench', 'final_vs_compile'))} | {fmt(best('module', 'eager_ceiling'))} | "
                     f"{len(stopped)} |")
    lines += ["", "Ceiling over eager: eager's time over the final version's device time outside its own Triton "
              "kernels (library calls, copies; `library_share.py`), the most a version that keeps those calls "
              "could reach, geometric mean over the problems where it was measured."]
    # every problem whose first version was judged and not approved, also where --budget stopped it later
    failed = [r for r in rows if r.get("size") == "module" and r.get("first_version") != "approved"
              and (r.get("first_version") or not ((r.get("note") or "").startswith("not run")
                                                  or "--budget" in (r.get("note") or "")))]
    if failed:
        lines += ["", "## No verified first version", ""]
        lines += [f"- level {r['level']} {r['problem']}: {r.get('first_version') or 'no result'} "
                  f"{r.get('first_version_verdict') or ''} {(r.get('first_version_reason') or r.get('note') or '')[:200]}"
                  for r in failed]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, help="KernelBench checkout (its KernelBench/levelN)")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--limit", type=int, default=None, help="only the first N problems of each level")
    ap.add_argument("--only", default=None,
                    help="comma-separated problem numbers or name parts (e.g. 1,2,3 or matmul,Gemm): only those")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--jobs", type=int, default=1, help="problems run at the same time (default: 1)")
    ap.add_argument("--problem-timeout", type=float, default=1800.0, help="seconds per problem (default: 1800)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for the whole run: problems not started by then are left for --resume and "
                         "running ones are stopped, so the summary is written within it (default: no limit)")
    ap.add_argument("--verify-timeout", type=float, default=300.0, help="seconds per verification worker job")
    ap.add_argument("--compile-timeout", type=float, default=600.0, help="seconds for one torch.compile anchor")
    ap.add_argument("--min-eager-us", type=float, default=MIN_EAGER_US)
    ap.add_argument("--first-version-only", action="store_true",
                    help="TorchInductor's first version alone (generated and verified), no rules stages")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: a new temporary one)")
    ap.add_argument("--resume", action="store_true", help="keep the rows already in --out")
    ap.add_argument("--record", type=Path, default=None, help="also write the summary Markdown here")
    # the child's own arguments
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--level", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--limit-s", type=float, default=0.0, help=argparse.SUPPRESS)  # the child's own limit
    ap.add_argument("--row-file", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--copy-gbps", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        def stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")  # atexit stops the worker pools

        signal.signal(signal.SIGTERM, stop)
        return run_one(args)
    if args.kernelbench is None:
        ap.error("--kernelbench is required")
    import tempfile

    import torch
    import triton

    out = args.out or Path(tempfile.mkdtemp(prefix="xeforge-inductor-kb-"))
    out.mkdir(parents=True, exist_ok=True)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device.split(":")[0] != "cpu" and not args.copy_gbps:
        from bench_optimize_corpus import copy_bandwidth

        args.copy_gbps = copy_bandwidth(device.split(":")[0])
    args.device = device
    args.deadline = time.monotonic() + (args.budget if args.budget else 1e12)
    staged: list[tuple[Path, int]] = []
    only = [o.strip() for o in args.only.split(",") if o.strip()] if args.only else None
    for level in (int(v) for v in args.levels.split(",")):
        folder = out / "problems" / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        for p in problems_of(args.kernelbench, level, args.limit, only):  # module-safe names: "19_ReLU.py" -> "p19_ReLU.py"
            dest = folder / ("p" + p.name if p.name[0].isdigit() else p.name)
            shutil.copy(p, dest)
            staged.append((dest, level))
    if only and not staged:
        raise SystemExit(f"--only {args.only}: no problem of level(s) {args.levels} matches")
    print(f"{len(staged)} problem(s), {args.jobs} at a time, {args.problem_timeout:g} s each at most; rows in "
          f"{out / 'rows'}", flush=True)
    rows: list[dict[str, Any]] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(_child, p, lv, args, out): (p, lv) for p, lv in staged}
        for fut in concurrent.futures.as_completed(futures):
            got = fut.result()
            rows += got
            head = got[0]
            print(f"level {head['level']} {head['problem']}: {head.get('first_version') or '-'} "
                  f"{head.get('first_version_verdict') or ''} {(head.get('note') or '')[:120]}", flush=True)
    rows.sort(key=lambda r: (int(r["level"]), r["problem"], r["size"]))
    _write_rows(out / "summary.csv", rows)
    header = {"date": dt.date.today().isoformat(), "device": f"{device} ({platform.node()})",
              "torch": torch.__version__, "triton": triton.__version__, "min_eager_us": args.min_eager_us,
              "mode": "first version only" if args.first_version_only else "xeforge batch --engine rules"}
    text = summarize(rows, header)
    (out / "summary.md").write_text(text, encoding="utf-8")
    (out / "header.json").write_text(json.dumps(header, indent=1), encoding="utf-8")
    print(text)
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
