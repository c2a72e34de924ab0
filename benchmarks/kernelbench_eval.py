"""Run KernelBench's own ``eval_kernel_against_ref`` over a corpus of problem/solution pairs.

A script, not a test, and not part of the product: it gives ``benchmarks/bench_corpus.py
--kb-results`` the verdicts of the evaluation most published KernelBench results were made with,
so that every pair where its pass/fail differs from ours can be listed and argued.

KernelBench itself is not vendored. Point ``--kernelbench-src`` at the ``src`` folder of a checkout
of https://github.com/ScalingIntelligence/KernelBench (the one that holds ``kernelbench/eval.py``).
Its ``kernelbench/utils.py`` imports LLM clients at module level (``openai``, ``litellm``) that the
evaluation never calls; where one is not installed, an empty stand-in module is registered under
its name so that the unmodified source imports. Nothing of KernelBench's evaluation is replaced.
A solution whose Triton module is named ``Model`` with no ``ModelNew`` (KernelBenchFiltered's) gets
``ModelNew = Model`` appended before it is handed over (``entry_alias`` in its row), as our
verifier enters it.

Each pair runs in its own subprocess (a crash or hang is that pair's row, with its exit code and
the end of its log) with KernelBench's settings for Triton solutions: ``backend="triton"``, float32,
``num_correct_trials`` trials (default 5, KernelBench's default in its scripts), performance not
measured. KernelAgent pairs (``kernel_function`` instead of ``ModelNew``) are listed as skipped.

Usage::

    python benchmarks/kernelbench_eval.py CORPUS --kernelbench-src KB/src --out kb_results.json
        [--only ID ...] [--jobs 4] [--timeout 180] [--trials 5]

Writes ``--out`` (a JSON object keyed by pair id, ``_harness`` holding the settings and versions)
after every pair. Needs a CUDA GPU: KernelBench's evaluation refuses to run without one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # xeforge_core, from a checkout too

SETTINGS = {"num_correct_trials": 5, "measure_performance": False, "backend": "triton", "precision": "fp32",
            "seed_num": 42}


def _stand_ins() -> list[str]:
    """Register empty modules for LLM clients KernelBench's utils imports but the evaluation never uses."""
    made = []
    for name, attrs in (("litellm", ("completion",)), ("openai", ("OpenAI",))):
        try:
            __import__(name)
        except ImportError:
            mod = types.ModuleType(name)
            for attr in attrs:
                setattr(mod, attr, None)
            sys.modules[name] = mod
            made.append(name)
    return made


def entry_alias(src: str) -> str | None:
    """The line that names a solution's module ``ModelNew`` when it calls its Triton module
    ``Model`` (KernelBenchFiltered's solutions do) and defines no ``ModelNew``; None otherwise or
    when the source does not parse. KernelBench's evaluation loads ``ModelNew`` by name and fails
    such a solution as a harness error, which says nothing about its kernels."""
    import ast

    from xeforge_core.problem.entry import module_bindings

    try:
        bindings = module_bindings(ast.parse(src))
    except SyntaxError:
        return None
    return "ModelNew = Model" if bindings.bound("Model") and not bindings.bound("ModelNew") else None


def evaluate_one(problem: Path, solution: Path, kb_src: Path, trials: int) -> dict[str, Any]:
    """Run ``eval_kernel_against_ref`` on one pair in this process; the row as a dict."""
    sys.path.insert(0, str(kb_src))
    stand_ins = _stand_ins()
    import importlib

    import torch

    kb_eval = importlib.import_module("kernelbench.eval")  # from --kernelbench-src, known only now

    row: dict[str, Any] = {"stand_ins": stand_ins}
    src = solution.read_text()
    alias = entry_alias(src)
    if alias:  # appended, so every line keeps its number
        src, row["entry_alias"] = src.rstrip("\n") + f"\n{alias}\n", alias
    try:
        checker = importlib.import_module("kernelbench.kernel_static_checker")
        valid, errors, warnings = checker.validate_kernel_static(src, backend="triton", precision="fp32")
        row["static_check"] = {"valid": valid, "errors": errors, "warnings": warnings}
    except Exception as exc:  # noqa: BLE001 - older checkouts have no static checker, or another signature
        row["static_check"] = {"unavailable": f"{type(exc).__name__}: {exc}"[:200]}
    row["tolerance"] = kb_eval.get_tolerance_for_precision("fp32")
    from compile_anchor import timing_lock

    with tempfile.TemporaryDirectory(prefix="kb-build-") as build, timing_lock("cuda:0", shared=True):
        result = kb_eval.eval_kernel_against_ref(
            problem.read_text(), src, seed_num=SETTINGS["seed_num"], num_correct_trials=trials,
            measure_performance=False, build_dir=build, device=0, backend="triton",
            precision=kb_eval.get_torch_dtype_from_string("fp32"))
    if result is None:
        row.update(compiled=None, correctness=None, error="eval_kernel_against_ref returned None (a lock or "
                   "compile-cache failure in KernelBench's harness)")
        return row
    data = result.model_dump() if hasattr(result, "model_dump") else dict(result)
    row.update(compiled=data.get("compiled"), correctness=data.get("correctness"), metadata=data.get("metadata"),
               error=None)
    row["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return row


def _child(args: argparse.Namespace) -> int:
    row = evaluate_one(Path(args.problem), Path(args.solution), Path(args.kernelbench_src), args.trials)
    print("KB_RESULT " + json.dumps(row, default=str), flush=True)
    return 0


def _run_pair(pair: Path, kb_src: Path, trials: int, timeout: float) -> dict[str, Any]:
    meta = json.loads((pair / "meta.json").read_text()) if (pair / "meta.json").is_file() else {}
    fmt = meta.get("format", "kernelbench")
    if fmt != "kernelbench":
        return {"skipped": f"format {fmt}: KernelBench's eval_kernel_against_ref loads a ModelNew class, "
                           "this pair defines kernel_function", "compiled": None, "correctness": None, "error": None}
    pair, kb_src = pair.resolve(), kb_src.resolve()  # the child runs in the temporary directory
    cmd = [sys.executable, __file__, "--child", "--problem", str(pair / "problem.py"),
           "--solution", str(pair / "solution.py"), "--kernelbench-src", str(kb_src), "--trials", str(trials)]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tempfile.gettempdir(),
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-600:] if isinstance(exc.stdout, bytes) else (exc.stdout or "")[-600:]
        return {"compiled": None, "correctness": False, "error": f"timeout after {timeout:.0f} s",
                "elapsed_s": round(time.monotonic() - start, 2), "exitcode": None, "log_tail": str(tail)}
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("KB_RESULT ")]
    row: dict[str, Any] = json.loads(found[-1][len("KB_RESULT "):]) if found else {
        "compiled": None, "correctness": None,  # no verdict: the harness itself did not finish
        "error": f"the evaluation process ended with exit code {proc.returncode} and no result"}
    row["elapsed_s"] = round(time.monotonic() - start, 2)
    row["exitcode"] = proc.returncode
    row["log_tail"] = (proc.stdout + proc.stderr)[-800:] if not found or proc.returncode else ""
    row["kb_pass"] = bool(row.get("compiled")) and bool(row.get("correctness"))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path, nargs="?")
    ap.add_argument("--kernelbench-src", type=Path, required=True, help="KernelBench checkout's src folder")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--jobs", type=int, default=1, help="pairs evaluated at once (correctness only)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per pair")
    ap.add_argument("--trials", type=int, default=SETTINGS["num_correct_trials"])
    ap.add_argument("--resume", action="store_true", help="keep the pairs --out already holds")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--problem", help=argparse.SUPPRESS)
    ap.add_argument("--solution", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args)
    if args.corpus is None or args.out is None:
        ap.error("CORPUS and --out are required")
    kb_src = args.kernelbench_src.resolve()
    if not (kb_src / "kernelbench" / "eval.py").is_file():
        ap.error(f"--kernelbench-src {kb_src}: no kernelbench/eval.py there (give the checkout's src folder)")
    pairs = sorted(p.resolve() for p in (args.corpus / "pairs").iterdir() if (p / "problem.py").is_file())
    if args.only:
        pairs = [p for p in pairs if any(o in p.name for o in args.only)]
    import torch
    import triton

    results: dict[str, Any] = {"_harness": {
        "kernelbench_source": str(kb_src), "settings": {**SETTINGS, "num_correct_trials": args.trials,
                                                        "jobs": args.jobs},
        "torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0],
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}}

    if args.resume and args.out.is_file():
        kept = json.loads(args.out.read_text())
        results.update({k: v for k, v in kept.items() if k != "_harness"})
        pairs = [p for p in pairs if p.name not in results]
    lock = threading.Lock()

    def one(pair: Path) -> None:
        row = _run_pair(pair, kb_src, args.trials, args.timeout)
        with lock:
            results[pair.name] = row
            args.out.write_text(json.dumps(results, indent=1, default=str))
        print(f"[kernelbench] {pair.name}: " + ("skipped" if "skipped" in row else
              f"compiled={row.get('compiled')} correctness={row.get('correctness')} {row.get('error') or ''}"),
              flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, pairs))
    args.out.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
