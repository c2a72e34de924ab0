"""Mutation benchmark of the verifier: how many single-fault copies of correct kernels it refuses.

For every correct kernel (problem/solution pairs in the layout of ``benchmarks/bench_corpus.py``,
and with ``--samples`` the kernels of ``sample_kernels/``), ``xeforge_core.mutation.generate``
writes one single-fault copy per fault class that applies (mask off by one, mask dropped, launch
grid rounded down, program id ignored or swapped, strides swapped, loop one trip short,
accumulator or scan in float16, wrong constant, epilogue applied twice, wrong reduction axis,
add without an atomic, masked load without ``other`` before a reduction). Each copy is verified

* by our verifier (``xeforge_core.verify.verify``, the library call, correctness only: timing is
  no part of the score; ``--memcheck`` adds the memory checker), and
* with ``--kernelbench-src``, by KernelBench's ``eval_kernel_against_ref``
  (``benchmarks/kernelbench_eval.py``, KernelBench problem + ``ModelNew`` pairs only).

With ``--accept-offered``, an unmodified kernel our verifier refuses as a precision change it names
(a TF32 dot product in a float32 problem: ``--allow tf32``) is verified again with exactly the
allowances its verdict offers, as a user who accepts that precision would; where it then passes,
it and its mutants are verified with those allowances (the per-kernel table names them), so the
score also says whether a fault hides inside the wider bound an allowance gives.

Counting rule: a tool's refusal of a mutant counts only where that tool passes the unmodified
kernel; mutants of a kernel a tool does not pass are left out of that tool's score (and not
run). The score is refused / counted, per fault class and per kernel. Every survivor (a mutant
our verifier passes) gets the evidence the run has: whether its outputs were identical to the
unmodified kernel's on every checked input (same errors against the truth), what the memory
checker saw, its verdict at the published size (``--published``), and an argument: from
``--explain FILE`` (JSON ``{"<kernel>/<mutant>": {"status": "equivalent"|"gap", "argument":
"..."}}``), or one the script can make itself (an idempotent epilogue, a race the CPU interpreter
cannot show), else "unexplained".

Usage::

    python benchmarks/bench_mutants.py CORPUS --out OUT [--samples] [--device cuda|cpu]
        [--jobs 8] [--only ID ...] [--limit N] [--classes C ...] [--per-class 1]
        [--kernelbench-src KB/src] [--kb-jobs 4] [--memcheck] [--published]
        [--explain FILE] [--timeout 300] [--seeds 3] [--resume] [--redo KEY ...] [--port] [--accept-offered]

Writes ``OUT/mutants/<kernel>/<mutant>/`` (each mutant as a pair: ``problem.py``, ``solution.py``,
``meta.json``), ``OUT/kb_originals.json`` (KernelBench's verdicts on the unmodified pairs, which
``bench_corpus.py --kb-results`` reads), ``OUT/mutants.json`` (after every verification, so ``--resume`` continues an
interrupted run; a recorded run's ``mutants.json`` copied there resumes it, and ``--redo`` names the
verdicts to take again: mutant keys ``<kernel>/<class>`` or a kernel id, every key that starts
with one), ``OUT/mutants.csv`` and ``OUT/mutants.md``, and prints the tables last.
Verifications run ``--jobs`` at a time (each in its own worker processes); the verdict cache
and the saved baseline outputs live in ``OUT/cache`` unless ``XEFORGE_CACHE_DIR`` is set.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xeforge_core.mutation import MUTATION_CLASSES, generate  # noqa: E402
from xeforge_core.mutation.report import kb_kind, survivor_analysis, write_reports  # noqa: E402

#: Our verdict kinds that refuse a candidate; ``ok``/``inconsistent`` pass it; the others
#: (``environment``, ``inconclusive``, a harness failure) are no verdict on the candidate.
REFUSING = {"wrong_answer", "compile_error", "runtime_error", "crash", "timeout", "oom", "cheating"}
PASSING = {"ok", "inconsistent"}


# ------------------------------------------------------------------------------------ kernels


def port(chosen: list[dict[str, Any]], out: Path, device_type: str) -> None:
    """Solutions that hard-code another device (``"cuda"``, ``x.is_cuda``) made device-agnostic
    by the portability codemod (as the workbench's portability step does), written to
    ``OUT/ported/<id>/solution.py``; the kernel then mutates and verifies that copy."""
    from xeforge_core.codemods.portability import hard_coded_devices, port_source

    for k in chosen:
        source = Path(k["solution"]).read_text()
        if k["format"] == "xeforge" or not hard_coded_devices(source, device_type):
            continue
        ported = port_source(source)
        if ported.changed:
            d = out / "ported" / k["id"]
            d.mkdir(parents=True, exist_ok=True)
            (d / "solution.py").write_text(ported.source)
            k["solution"], k["meta"] = d / "solution.py", {**k["meta"], "ported": True}


def kernels(corpus: Path | None, samples: bool, only: list[str] | None, limit: int | None) -> list[dict[str, Any]]:
    """The correct kernels to mutate: ``{"id", "problem", "solution", "format"}`` each. For a
    sample the problem is the sample itself (its baseline and reference) and the solution is a
    copy of its kernel module."""
    out: list[dict[str, Any]] = []
    if corpus is not None:
        for pair in sorted((corpus / "pairs").iterdir()):
            if not (pair / "problem.py").is_file() or not (pair / "solution.py").is_file():
                continue
            meta = json.loads((pair / "meta.json").read_text()) if (pair / "meta.json").is_file() else {}
            out.append({"id": pair.name, "problem": pair / "problem.py", "solution": pair / "solution.py",
                        "format": meta.get("format", "kernelbench"), "meta": meta})
    if samples:
        for path in sorted((ROOT / "sample_kernels").glob("[0-9][0-9]_*.py")):
            if path.stem.endswith(("_ref", "_pytorch")):
                continue
            out.append({"id": f"sample_{path.stem}", "problem": path, "solution": path, "format": "xeforge",
                        "meta": {"source": "sample_kernels"}})
    if only:
        out = [k for k in out if any(o in k["id"] for o in only)]
    return out[:limit] if limit else out


def load(kernel: dict[str, Any], candidate: Path | None = None) -> tuple[Any, str]:
    """The problem of ``kernel`` and the candidate source (its solution, or ``candidate``)."""
    from xeforge_core.problem import load_problem, read_candidate

    problem = load_problem(kernel["problem"])
    return problem, read_candidate(candidate or kernel["solution"])


# ------------------------------------------------------------------------------------ verifying


#: How a ``precision_downgrade`` error names the option that accepts it
#: (``xeforge_core/worker/precision_report.py``).
_OFFERED = re.compile(r"--allow ([\w-]+) accepts it")


def offered_allowances(findings: list[Any]) -> list[str]:
    """The precision allowances a refusing verdict's ``precision_downgrade`` errors offer
    (``["tf32"]``), in the order found; ``findings``: ``Finding`` objects or their dicts."""
    names: list[str] = []
    for f in findings:
        rule, severity, message = ((f.get("rule"), f.get("severity"), f.get("message")) if isinstance(f, dict)
                                   else (f.rule, f.severity, f.message))
        if rule == "precision_downgrade" and severity == "error":
            names += [n for n in _OFFERED.findall(message or "") if n not in names]
    return names


def our_verdict(kernel: dict[str, Any], candidate: Path | None, device: Any, opts: Any) -> dict[str, Any]:
    """Our verifier on one kernel or mutant: kind, reason, findings, the allowances a precision
    refusal offers, and the per-run errors against the truth (to tell identical outputs from
    different ones); a problem that does not load is ``refused_input``, a verification that
    raises is ``harness_error`` (a row, not a stop)."""
    try:
        return _our_verdict(kernel, candidate, device, opts)
    except Exception as exc:  # noqa: BLE001 - one failing verification is a row, not a stop
        return {"kind": "harness_error", "reason": f"{type(exc).__name__}: {exc}"[:300]}


def _our_verdict(kernel: dict[str, Any], candidate: Path | None, device: Any, opts: Any) -> dict[str, Any]:
    from xeforge_core.problem import ProblemError
    from xeforge_core.verify import verify

    start = time.monotonic()
    try:
        problem, source = load(kernel, candidate)
    except ProblemError as exc:
        return {"kind": "refused_input", "reason": str(exc)[:300], "seconds": 0.0}
    v = verify(problem, source, device=device, options=opts, candidate_name="solution.py")
    runs = [[r.variant, r.seed, r.distribution, r.config or "",
             [[o.max_abs_error, o.max_rel_error, o.mismatches] for o in r.outputs]] for r in v.correctness]
    compile_step = v.step("compile")
    launched = (compile_step.evidence.get("kernels") or []) if compile_step is not None else []
    return {"kind": v.kind.value, "reason": (v.reason or "").splitlines()[0][:300] if v.reason else "",
            "launched": launched,
            "seconds": round(time.monotonic() - start, 2),
            "steps_s": {s.name: round(s.seconds, 2) for s in v.steps if s.seconds},
            "variants": sorted({r.variant for r in v.correctness}),
            "offered": offered_allowances(v.findings) if v.kind.value == "wrong_answer" else [],
            "findings": [{"rule": f.rule, "severity": f.severity, "line": f.line, "message": f.message[:300]}
                         for f in v.findings if f.severity in ("error", "warning") or f.rule.startswith("memcheck")],
            "runs": runs}


def kb_verdict(pair_dir: Path, kb_src: Path, trials: int, timeout: float) -> dict[str, Any]:
    """KernelBench's ``eval_kernel_against_ref`` on one pair directory (its own subprocess, by
    ``benchmarks/kernelbench_eval.py``, a script beside this one)."""
    row = _kernelbench_eval()._run_pair(pair_dir, kb_src, trials, timeout)
    if "skipped" in row:
        return {"kind": "skipped", "reason": row["skipped"]}
    if row.get("compiled") is None and row.get("correctness") is None:
        last = next((ln for ln in reversed(str(row.get("log_tail") or "").splitlines()) if ln.strip()), "")
        return {"kind": "no_verdict", "reason": (str(row.get("error") or "") + (f": {last}" if last else ""))[:300]}
    passed = bool(row.get("compiled")) and bool(row.get("correctness"))
    meta = row.get("metadata") or {}
    return {"kind": "pass" if passed else "fail", "compiled": row.get("compiled"),
            "correctness": row.get("correctness"), "seconds": row.get("elapsed_s"), "error": row.get("error"),
            "metadata": {k: str(v)[:300] for k, v in meta.items()} if isinstance(meta, dict) else str(meta)[:300],
            "reason": str(row.get("error") or (meta if not passed else ""))[:300]}


_KB_EVAL_LOCK = threading.Lock()


def _kernelbench_eval() -> Any:
    """``benchmarks/kernelbench_eval.py`` loaded as a module (it is a script, not a package), once:
    the KernelBench verdicts run in threads, and a thread must never see the module before it has
    finished executing."""
    import importlib.util

    with _KB_EVAL_LOCK:
        if "kernelbench_eval" not in sys.modules:
            spec = importlib.util.spec_from_file_location("kernelbench_eval", ROOT / "benchmarks" / "kernelbench_eval.py")
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            spec.loader.exec_module(module)  # type: ignore[union-attr]
            sys.modules["kernelbench_eval"] = module
        return sys.modules["kernelbench_eval"]


def ours_passes(row: dict[str, Any] | None) -> bool:
    return bool(row) and row.get("kind") in PASSING  # type: ignore[union-attr]


def kb_passes(row: dict[str, Any] | None) -> bool:
    return bool(row) and row.get("kind") == "pass"  # type: ignore[union-attr]


def settled(row: dict[str, Any] | None) -> bool:
    """Whether ``--resume`` keeps our verdict ``row``: every verdict but ``environment`` (the
    machine failed the job, e.g. other verifications filled the device's memory), which says
    nothing about the candidate and is verified again."""
    return bool(row) and row.get("kind") != "environment"  # type: ignore[union-attr]


def kb_settled(row: dict[str, Any] | None) -> bool:
    """Whether ``--resume`` keeps KernelBench's verdict ``row``: all but a failure for the machine
    (``kb_kind``: out of memory beside other runs), which is evaluated again."""
    return bool(row) and kb_kind(row) == row.get("kind")  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------ the run


class Run:
    """Results of one benchmark run, saved after every verification (thread-safe)."""

    def __init__(self, out: Path, header: dict[str, Any], resume: bool) -> None:
        self.path = out / "mutants.json"
        self.lock = threading.Lock()
        data = json.loads(self.path.read_text()) if resume and self.path.is_file() else {}
        self.originals: dict[str, dict[str, Any]] = data.get("originals", {})
        self.mutants: dict[str, dict[str, Any]] = data.get("mutants", {})
        self.header = header

    def save(self) -> None:
        with self.lock:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"header": self.header, "originals": self.originals,
                                       "mutants": self.mutants}, indent=1, default=str))
            os.replace(tmp, self.path)

    def forget(self, prefixes: list[str]) -> None:
        """Drop our verdicts (and what follows from them) on every kernel and mutant whose key
        starts with one of ``prefixes``, so that ``--resume`` verifies them again."""
        for table in (self.originals, self.mutants):
            for key, row in table.items():
                if any(key.startswith(p) for p in prefixes):
                    for f in ("ours", "ours_strict", "ours_allowed", "published", "analysis"):
                        row.pop(f, None)

    def update(self, table: str, key: str, field: str, value: Any) -> None:
        with self.lock:
            getattr(self, table).setdefault(key, {})[field] = value
        self.save()


def write_mutants(kernel: dict[str, Any], out: Path, classes: list[str] | None, per_class: int,
                  launched: list[str]) -> list[dict[str, Any]]:
    """Generate the mutants of ``kernel`` (faults only in code that runs: the kernels the
    unmodified module ``launched``, their helpers, live branches) and write each as a pair
    directory; their records."""
    source = Path(kernel["solution"]).read_text()
    records = []
    for m in generate(source, classes=classes, per_class=per_class, launched=set(launched) or None):
        d = out / "mutants" / kernel["id"] / m.id
        d.mkdir(parents=True, exist_ok=True)
        if kernel["format"] == "xeforge":
            # the sample's spec and reference stay beside the original; the mutant is the candidate
            (d / "solution.py").write_text(m.source)
        else:
            shutil.copyfile(kernel["problem"], d / "problem.py")
            (d / "solution.py").write_text(m.source)
        (d / "meta.json").write_text(json.dumps({**kernel["meta"], "format": kernel["format"], "mutant": m.record()},
                                                indent=1))
        records.append({**m.record(), "kernel_id": kernel["id"], "dir": str(d)})
    return records


def _both(args: argparse.Namespace, ours_tasks: list[Callable[[], None]],
          kb_tasks: list[Callable[[], None]]) -> None:
    """Run our verifier's tasks (``--jobs`` at a time) and KernelBench's (``--kb-jobs``) side by
    side, returning when both are done: correctness only, so neither disturbs the other's timing."""
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as mine, \
            ThreadPoolExecutor(max_workers=max(1, args.kb_jobs)) as theirs:
        futures = [mine.submit(t) for t in ours_tasks] + [theirs.submit(t) for t in kb_tasks]
        for f in futures:
            f.result()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path, nargs="?", help="a corpus directory (pairs/<id>/...)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--samples", action="store_true", help="also mutate the kernels of sample_kernels/")
    ap.add_argument("--device", default=None)
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)),
                    help="verifications at once (default: half the CPUs, at most 8)")
    ap.add_argument("--only", nargs="*", default=None, help="kernel ids (substrings) to include")
    ap.add_argument("--limit", type=int, default=None, help="at most N kernels")
    ap.add_argument("--classes", nargs="*", default=None, choices=list(MUTATION_CLASSES))
    ap.add_argument("--per-class", type=int, default=1, help="sites per fault class and kernel (default 1)")
    ap.add_argument("--kernelbench-src", type=Path, default=None, help="KernelBench checkout's src folder")
    ap.add_argument("--kb-jobs", type=int, default=4)
    ap.add_argument("--kb-trials", type=int, default=5)
    ap.add_argument("--memcheck", action="store_true", help="verify with the memory checker too")
    ap.add_argument("--published", action="store_true",
                    help="re-verify each survivor at the problem's published sizes (--variant module)")
    ap.add_argument("--explain", type=Path, default=None, help="JSON file of survivor arguments")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--redo", nargs="*", default=[], metavar="KEY",
                    help="with --resume: verify again the kernels and mutants whose key starts with KEY")
    ap.add_argument("--port", action="store_true",
                    help="port solutions that hard-code another device first (the workbench's portability step)")
    ap.add_argument("--accept-offered", action="store_true",
                    help="verify a kernel refused as a named precision change again with the allowances it offers")
    args = ap.parse_args(argv)
    if args.corpus is None and not args.samples:
        ap.error("give a CORPUS directory, --samples, or both")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XEFORGE_CACHE_DIR", str((args.out / "cache").resolve()))

    from xeforge_core.devices import detect_device
    from xeforge_core.verify import VerifyOptions

    device = detect_device(args.device)
    opts = VerifyOptions(timeout_s=args.timeout, seeds=args.seeds, measure_performance=False, memcheck=args.memcheck)
    versions = ", ".join(f"{k} {v}" for k, v in (device.fingerprint.get("versions") or {}).items()
                         if k in ("torch", "triton", "numpy"))
    header = {"date": dt.date.today().isoformat(), "device": f"{device.type}:{device.index} ({device.name})",
              "versions": versions, "host": platform.node(), "memcheck": args.memcheck, "seeds": args.seeds,
              "per_class": args.per_class, "kernelbench": str(args.kernelbench_src) if args.kernelbench_src else None,
              "timeout": args.timeout}
    run = Run(args.out, header, args.resume)
    run.forget(args.redo)
    chosen = kernels(args.corpus, args.samples, args.only, args.limit)
    if args.port:
        port(chosen, args.out, device.type)
    kb_src = args.kernelbench_src.resolve() if args.kernelbench_src else None
    started = time.monotonic()

    def kernel_opts(kernel_id: str) -> Any:
        allowed = (run.originals.get(kernel_id, {}).get("ours") or {}).get("allowed")
        return dataclasses.replace(opts, allow_precision=list(allowed)) if allowed else opts

    def ours(key: str, table: str, kernel: dict[str, Any], candidate: Path | None) -> None:
        if settled(getattr(run, table).get(key, {}).get("ours")):
            return
        print(f"[ours] {key}: started", flush=True)
        row = our_verdict(kernel, candidate, device, kernel_opts(kernel["id"]))
        run.update(table, key, "ours", row)
        print(f"[ours] {key}: {row['kind']} in {row.get('seconds', 0):.0f} s {row.get('steps_s', {})}", flush=True)

    def kb(key: str, table: str, pair_dir: Path) -> None:
        if kb_src is None or kb_settled(getattr(run, table).get(key, {}).get("kb")):
            return
        print(f"[kernelbench] {key}: started", flush=True)
        got = kb_verdict(pair_dir, kb_src, args.kb_trials, args.timeout)
        run.update(table, key, "kb", got)
        print(f"[kernelbench] {key}: done ({'correct' if got.get('correctness') else got.get('error') or 'refused'})"[:200],
              flush=True)

    # 1. the unmodified kernels (both tools at once: neither times anything)
    _both(args, [lambda k=k: ours(k["id"], "originals", k, None) for k in chosen],
          [lambda k=k: kb(k["id"], "originals", Path(k["problem"]).parent)
           for k in chosen if k["format"] == "kernelbench"])
    for k in chosen:
        run.update("originals", k["id"], "format", k["format"])

    # 1b. with --accept-offered, a named precision change verified again with what it offers
    def with_offered(k: dict[str, Any]) -> None:
        strict = run.originals[k["id"]]["ours"]
        print(f"[ours --allow {','.join(strict['offered'])}] {k['id']}", flush=True)
        row = our_verdict(k, None, device, dataclasses.replace(opts, allow_precision=list(strict["offered"])))
        run.update("originals", k["id"], "ours_strict", strict)  # marks it done for --resume
        if ours_passes(row):  # the kernel and its mutants are then verified with the allowance
            run.update("originals", k["id"], "ours", {**row, "allowed": list(strict["offered"])})
        else:
            run.update("originals", k["id"], "ours_allowed", {**row, "allowed": list(strict["offered"])})

    if args.accept_offered:
        _both(args, [lambda k=k: with_offered(k) for k in chosen
                     if (run.originals[k["id"]].get("ours") or {}).get("offered")
                     and "ours_strict" not in run.originals[k["id"]]], [])

    # 2. the mutants of every kernel a tool passes
    tasks_ours, tasks_kb = [], []
    for k in chosen:
        orig = run.originals.get(k["id"], {})
        if not (ours_passes(orig.get("ours")) or kb_passes(orig.get("kb"))):
            continue
        launched = (orig.get("ours") or {}).get("launched") or []
        for rec in write_mutants(k, args.out, args.classes, args.per_class, launched):
            key = f"{k['id']}/{rec['id']}"
            with run.lock:
                stored = run.mutants.get(key)
                if stored and (stored.get("before"), stored.get("after")) != (rec["before"], rec["after"]):
                    run.mutants[key] = {}  # the generator changed since: its verdicts were on another mutant
                run.mutants.setdefault(key, {}).update({f: rec[f] for f in (
                    "kernel_id", "mutation_class", "line", "before", "after", "kernel", "description", "dir")})
            if ours_passes(orig.get("ours")):
                tasks_ours.append((key, k, Path(rec["dir"]) / "solution.py"))
            if kb_passes(orig.get("kb")):
                tasks_kb.append((key, Path(rec["dir"])))
    run.save()
    _both(args, [lambda t=t: ours(t[0], "mutants", t[1], t[2]) for t in tasks_ours],
          [lambda t=t: kb(t[0], "mutants", t[1]) for t in tasks_kb])

    # 3. survivors at the published sizes
    if args.published:
        def pub(kernel_id: str) -> Any:
            return dataclasses.replace(kernel_opts(kernel_id), variants=["module"], include_odd_size=False,
                                       grid_coverage=False, seeds=1, distributions=["normal"])

        by_id = {k["id"]: k for k in chosen}
        todo = [(key, row) for key, row in run.mutants.items()  # samples have spec variants, no published size
                if ours_passes(row.get("ours")) and "published" not in row and row["kernel_id"] in by_id
                and by_id[row["kernel_id"]]["format"] != "xeforge"]

        def published(item: tuple[str, dict[str, Any]]) -> None:
            key, row = item
            print(f"[published] {key}", flush=True)
            run.update("mutants", key, "published", our_verdict(by_id[row["kernel_id"]], Path(row["dir"]) / "solution.py",
                                                                device, pub(row["kernel_id"])))

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(published, todo))

    # 4. survivors explained, report
    explain = json.loads(args.explain.read_text()) if args.explain and args.explain.is_file() else {}
    for key, row in run.mutants.items():
        if ours_passes(row.get("ours")):
            orig = run.originals.get(row["kernel_id"], {}).get("ours") or {}
            row["analysis"] = survivor_analysis(key, row, orig, explain.get(key), device.type)
    run.header["seconds"] = round(time.monotonic() - started, 1)
    run.save()
    kb_rows = {k: o["kb"] for k, o in run.originals.items() if o.get("kb")}
    if kb_rows:  # the unmodified pairs, in kernelbench_eval.py's form: bench_corpus.py --kb-results reads it
        (args.out / "kb_originals.json").write_text(json.dumps(kb_rows, indent=1, default=str))
    print(write_reports(args.out, run.header, run.originals, run.mutants, REFUSING, PASSING))
    return 0


if __name__ == "__main__":
    sys.exit(main())
