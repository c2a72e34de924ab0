"""Entry point of the verification worker: ``python -m xeforge_core.worker JOB_DIR``, or
``python -m xeforge_core.worker --pool SLOT_DIR`` for a warm-pool worker (``pool_main``).

Reads ``JOB_DIR/job.json``, runs the job's role (``baseline``, ``candidate``, ``timing``, ``sizes``,
``memcheck`` or ``probe``), appends progress events to ``JOB_DIR/progress.jsonl`` and writes
``JOB_DIR/result.json`` atomically (``Verdict.to_dict()`` plus ``"role"``). Formats: ``job.py``.

Before the job runs, the escape recorder (``escapes``) is installed when the runner asked for
it, so that what the code under test tries outside its job ends up in the verdict.

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

from xeforge_core.worker import backends
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
        from xeforge_core.worker.externs import stub_libdevice
        from xeforge_core.worker.interpreter_args import match_compiled_arguments
        from xeforge_core.worker.interpreter_floats import round_like_the_gpu
        from xeforge_core.worker.interpreter_names import patch_builtin_aliases

        stub_libdevice()  # its calls return nothing in the interpreter: name them instead
        match_compiled_arguments()  # float and dtype arguments as the compiler passes them
        patch_builtin_aliases()  # triton_cast = tl.cast called as the compiler calls it
        round_like_the_gpu()  # float8 conversions rounded to nearest even, with the carry
    if role == "probe":
        from xeforge_core.worker import probe

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

        _run_bounds_checked(ctx, run_candidate)
    elif role == "timing":
        from xeforge_core.worker.timing import run_timing

        run_timing(ctx)
    elif role == "sizes":
        from xeforge_core.worker.sizes import run_sizes

        run_sizes(ctx)
    elif role == "memcheck":
        from xeforge_core.worker.memcheck import run_memcheck

        run_memcheck(ctx)
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


def _run_bounds_checked(ctx: Any, run: Any) -> None:
    """Run the candidate role, in Triton's interpreter with every load, store and atomic of every
    call bounds- and race-checked (``worker.bounds``): a store outside every tensor its launch
    passes is skipped, so it cannot corrupt the host heap (a SIGABRT the verdict could only call a
    crash), a read there is made as without the check (the outputs are the kernel's own), and both
    are recorded in the ``bounds`` step the parent turns into findings, with the races
    between programs and the kernels left unchecked (they made pointers from integers). A kernel
    whose outputs are right can still write past its output (a mask ``<=`` where ``<`` is meant
    lands in the allocator's padding), so this is what judges such a write on the CPU."""
    from xeforge_core.verdict import Step, StepStatus
    from xeforge_core.worker.bounds import BOUNDS_STEP, BoundsCheck

    if not ctx.ops.interpreter:
        run(ctx)
        return
    with BoundsCheck(skip_reads=False) as check:  # outputs as without the check; writes stay inside
        run(ctx)
    ctx.verdict.steps.append(Step(name=BOUNDS_STEP, status=StepStatus.PASSED if not check.lanes else StepStatus.FAILED,
                                  summary=f"every call bounds-checked in the interpreter: {check.lanes} lane(s) "
                                          "outside the launches' tensors",
                                  evidence={"checker": "interpreter", "accesses": check.accesses, "lanes": check.lanes,
                                            "races": check.races, "race_lanes": check.race_lanes,
                                            "unchecked": dict(check.unchecked)}))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``main(["JOB_DIR"])`` or ``main(["--pool", "SLOT_DIR"])``; returns
    the exit status (0, or 2 for bad usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--pool":
        return pool_main(Path(argv[1]))
    if len(argv) != 1:
        print("usage: python -m xeforge_core.worker JOB_DIR | --pool SLOT_DIR", file=sys.stderr)
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
    from xeforge_core.worker.escapes import install_from_environment

    install_from_environment(job_dir)
    _say_where_the_module_exits(job_dir)
    try:
        run_job(job_dir)
    except Exception as exc:  # the harness itself failed (e.g. the device is not available)
        import traceback

        _write_result(job_dir, {"role": job.get("role"), "kind": "runtime_error",
                                "reason": f"the verification worker could not run the job: "
                                          f"{type(exc).__name__}: {exc}",
                                "error_text": traceback.format_exc()[-6000:], "steps": []})
    return 0


# --------------------------------------------------------------------------------------------
# warm pool (xeforge_core.pool)

#: Files of a pool slot: written by the worker when its imports are done / when it took its job.
READY_FILE = "pool.ready"
ACK_FILE = "pool.ack"


def warm_up(device: str) -> list[str]:
    """Import what every role needs, launch one trivial Triton kernel (``warmup``) and, on a
    GPU, initialise the device (its context, Triton's driver and compiler); returns what went
    wrong (the job will meet it again and report it). ``XEFORGE_POOL_INIT_DEVICE=0`` stops after
    the imports. Runs before any job: nothing here touches code under test."""
    problems: list[str] = []
    try:
        import numpy  # noqa: F401
        import torch
        import triton  # noqa: F401

        import xeforge_core.worker.context  # noqa: F401
        import xeforge_core.worker.roles  # noqa: F401
        import xeforge_core.worker.timing  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return [f"import: {type(exc).__name__}: {exc}"]
    if device in backends.gpu_names() and os.environ.get("XEFORGE_POOL_INIT_DEVICE", "1") == "0":
        return problems
    try:
        if device != "cpu":
            torch.empty(1, device=device)
        from xeforge_core.worker import warmup

        warmup.run(device)  # a first Triton launch (and, on a GPU, compile and driver load)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"device init: {type(exc).__name__}: {exc}")
    return problems


def _say_where_the_module_exits(job_dir: Path) -> None:
    """Make ``os._exit`` called from the module under test (a file under ``JOB_DIR/src/``) print
    the stack and the call's place before exiting: it ends the worker without a result and
    without a traceback, and the verdict then names the line (``worker_outcome.innermost_line``);
    the worker's own ``os._exit`` (the pool's, after the result) prints nothing."""
    import traceback

    real_exit = os._exit
    src = str(job_dir / "src") + os.sep

    def _exit(status: int) -> None:
        frame = sys._getframe(1)
        stack = traceback.extract_stack(frame)
        mine = [f for f in stack if f.filename.startswith(src)]
        if mine:
            sys.stderr.write("Traceback of os._exit (most recent call last):\n" + "".join(traceback.format_list(stack))
                             + f"the module under test called os._exit({status}) at "
                               f"{os.path.basename(mine[-1].filename)}:{mine[-1].lineno}\n")
            sys.stderr.flush()
        real_exit(status)

    os._exit = _exit


def _lower_limits(limits: dict[str, Any]) -> None:
    """Apply a job's rlimits to this (already running) process: CPU seconds from now, address
    space, file size; limits are only ever lowered, the hard limit with them (so code under
    test cannot raise them again without privileges)."""
    import resource

    def lower(res: int, soft: int, hard: int) -> None:
        _, cur = resource.getrlimit(res)
        if cur != resource.RLIM_INFINITY:
            hard = min(hard, cur)
            soft = min(soft, hard)
        resource.setrlimit(res, (soft, hard))

    cpu = int(limits.get("cpu_seconds") or 0)
    if cpu > 0:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = int(usage.ru_utime + usage.ru_stime) + 1
        lower(resource.RLIMIT_CPU, used + cpu, used + cpu + 5)
    mem = int(limits.get("address_space_bytes") or 0)
    if mem > 0:
        lower(resource.RLIMIT_AS, mem, mem)
    fsize = int(limits.get("file_bytes") or 0)
    if fsize > 0:
        lower(resource.RLIMIT_FSIZE, fsize, fsize)


def _exit_with_parent(stream: Any) -> None:
    """Block on the pool's pipe; when it closes (the parent died or gave up the job), end this
    process at once, whatever the job is doing."""
    import threading

    end = os._exit

    def watch() -> None:
        try:
            while stream.read(4096):
                pass
        except (OSError, ValueError):
            pass
        end(75)

    threading.Thread(target=watch, name="xeforge-pool-parent-watch", daemon=True).start()


def pool_main(slot: Path) -> int:
    """A warm-pool worker: warm up (``warm_up``), write ``SLOT/pool.ready``, wait on stdin for
    one line (JSON ``{"limits": {...}}``) saying that ``SLOT/job.json`` is there, then run that
    one job exactly as ``main`` does and exit. End of input before the line (the pool was shut
    down, or its process died) ends the worker without a job.

    stdout/stderr of the job go to ``SLOT/stdout.txt`` / ``stderr.txt``; what the warm-up
    printed stays in the files the pool opened for it."""
    slot = Path(slot).resolve()
    device = os.environ.get("XEFORGE_DEVICE_TYPE", "cpu")
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    for problem in warm_up(device):
        print(f"warm-up: {problem}", file=sys.stderr, flush=True)
    tmp = slot / (READY_FILE + ".tmp")
    tmp.write_text(str(time.time()), encoding="utf-8")
    os.replace(tmp, slot / READY_FILE)
    stdin = sys.stdin.buffer
    line = stdin.readline()
    if not line.strip():
        return 0
    (slot / ACK_FILE).write_text(str(time.time()), encoding="utf-8")
    _exit_with_parent(stdin)
    import json

    try:
        message = json.loads(line)
    except ValueError:
        message = {}
    _lower_limits(dict(message.get("limits") or {}))
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        sys.stdout.flush() if fd == 1 else sys.stderr.flush()
        out = os.open(slot / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    status = main([str(slot)])
    # The result is written (atomically); skip the interpreter's shutdown (about 1.7 s with
    # torch and triton loaded on the 2-core CPU machine) and any exit handler the code under
    # test registered.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
