"""Entry point of the verification worker: ``python -m xeforge_core.worker JOB_DIR``.

Reads ``JOB_DIR/job.json``, runs the job's role (``baseline``, ``candidate``, ``timing`` or
``probe``), appends progress events to ``JOB_DIR/progress.jsonl`` and writes
``JOB_DIR/result.json`` atomically (``Verdict.to_dict()`` plus ``"role"``). Formats: ``job.py``.

Exit status: 0 when a result was written (whatever the verdict), 2 for a bad command line or an
unreadable job. Process-level outcomes (signals, the hard timeout, OOM kills) are left to the
parent, which never trusts the worker to report its own death.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from xeforge_core.worker.job import JOB_FILE, read_job, write_result


def _write_result(job_dir: Path, data: dict[str, Any]) -> None:
    """The worker's result file, indented so that it reads by hand."""
    write_result(job_dir, data, indent=1)


def run_job(job_dir: Path) -> dict[str, Any]:
    """Run the job in ``job_dir`` and return the result dict (also written to result.json)."""
    job = read_job(job_dir)
    role = job.get("role", "candidate")
    device = job.get("device") or "cpu"
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    if role == "probe":
        import importlib

        try:
            probe = importlib.import_module("xeforge_core.worker.probe")
        except ModuleNotFoundError:
            result = {"role": role, "kind": "runtime_error", "reason": "this worker has no probe module"}
        else:
            try:
                result = dict(probe.run(job))
            except Exception as exc:  # a probe that fails still answers, with what went wrong
                import traceback

                result = {"kind": "runtime_error", "reason": f"device probe failed: {type(exc).__name__}: {exc}",
                          "error_text": traceback.format_exc()[-6000:]}
            result.setdefault("role", role)
        _write_result(job_dir, result)
        return result

    started = time.perf_counter()
    from xeforge_core.worker.context import WorkerContext

    os.chdir(job_dir)
    ctx = WorkerContext(job, job_dir)
    ctx.progress.emit("note", f"worker started: role {role} on {ctx.ops.kind}")
    if role == "baseline":
        from xeforge_core.worker.roles import run_baseline

        run_baseline(ctx)
    elif role == "candidate":
        from xeforge_core.worker.roles import run_candidate

        run_candidate(ctx)
    elif role == "timing":
        from xeforge_core.worker.timing import run_timing

        run_timing(ctx)
    else:
        from xeforge_core.verdict import VerdictKind

        ctx.verdict.kind = VerdictKind.RUNTIME_ERROR
        ctx.verdict.reason = f"unknown worker role {role!r}"
    ctx.verdict.seconds = time.perf_counter() - started
    ctx.verdict.resources = {role: {"peak_device_bytes": ctx.ops.peak_memory_bytes()}}
    result = ctx.verdict.to_dict()
    result["role"] = role
    _write_result(job_dir, result)
    ctx.progress.emit("note", f"worker finished: {ctx.verdict.kind.value}")
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``main(["JOB_DIR"])``; returns the exit status (0, or 2 for bad usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python -m xeforge_core.worker JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(argv[0]).resolve()
    try:
        job = read_job(job_dir)
    except (OSError, ValueError) as exc:
        print(f"cannot read {job_dir / JOB_FILE}: {exc}", file=sys.stderr)
        return 2
    if (job.get("device") or "cpu") == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
    # cuBLAS needs a fixed workspace for the deterministic mode that poisons fresh memory
    # (otherwise every torch GEMM warns); set before torch initialises CUDA.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        run_job(job_dir)
    except Exception as exc:  # the harness itself failed (e.g. the device is not available)
        import traceback

        _write_result(job_dir, {"role": job.get("role"), "kind": "runtime_error",
                                "reason": f"the verification worker could not run the job: "
                                          f"{type(exc).__name__}: {exc}",
                                "error_text": traceback.format_exc()[-6000:], "steps": []})
    return 0


if __name__ == "__main__":
    sys.exit(main())
