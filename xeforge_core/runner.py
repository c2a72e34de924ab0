"""Run one job in an isolated worker process: the one entry point every caller uses.

:func:`run_worker` takes the job and one :class:`WorkerOptions` (the limits, where the worker
may write and read, which module or command it runs, whether the warm pool may serve it) and
returns a :class:`~xeforge_core.worker_outcome.WorkerOutcome`. Verification jobs go to the warm
pool (``xeforge_core.pool``); every other job, and every job the pool may not serve, to a fresh
process started here. The parts live below this module, one job each:

* ``xeforge_core.worker_process``: the environment without secrets, the process group and its
  kill, the rlimits launcher, the supervision (timeout, memory, progress, cancel);
* ``xeforge_core.worker_outcome``: how a process ended (:class:`WorkerOutcome`), what that
  means (``classify``), and the isolation and escape attempts it reports (``annotate``).

Their public names are importable from here too, as the callers have always done.
Only the standard library is used here (no torch import in the caller).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xeforge_core import pool, sandbox
from xeforge_core.worker.escapes import ESCAPES_FILE
from xeforge_core.worker.job import JOB_FILE, PROGRESS_FILE, RESULT_FILE
from xeforge_core.worker_outcome import (
    DRIVER_FAULT_PATTERNS,
    OOM_PATTERNS,
    WorkerOutcome,
    annotate,
    classify,
    find_driver_fault,
    find_oom,
)
from xeforge_core.worker_process import (
    DEFAULT_EXIT_GRACE_S,
    DEFAULT_FILE_BYTES,
    OUTPUT_LIMIT_BYTES,
    PACKAGE_ROOT,
    SECRET_ENV_PATTERNS,
    TERM_GRACE_S,
    WORKER_MODULE,
    Limits,
    _load_result,
    _read_truncated,
    group_members,
    is_secret_name,
    kill_group,
    launcher_argv,
    scrub_environment,
    supervise,
    worker_environment,
)

__all__ = [
    "DEFAULT_EXIT_GRACE_S", "DEFAULT_FILE_BYTES", "DRIVER_FAULT_PATTERNS", "OOM_PATTERNS",
    "OUTPUT_LIMIT_BYTES", "PACKAGE_ROOT", "SECRET_ENV_PATTERNS", "TERM_GRACE_S", "WORKER_MODULE",
    "Limits", "WorkerOptions", "WorkerOutcome", "_load_result", "_read_truncated", "annotate",
    "classify", "cleanup_job_dir", "find_driver_fault", "find_oom", "group_members",
    "is_secret_name", "job_policy", "kill_group", "launcher_argv", "new_job_dir", "run_worker",
    "scrub_environment", "supervise", "worker_environment",
]


@dataclass
class WorkerOptions(Limits):
    """How one job runs (see :func:`run_worker`): the :class:`Limits` (``timeout_s`` wall-clock
    seconds, ``memory_bytes``/``file_bytes`` bytes, ``cpu_seconds`` CPU seconds, ``None`` =
    unlimited; ``exit_grace_s``/``queue_limit_s``/``poll_interval_s`` seconds,
    ``dump_stack_on_timeout``), plus ``device_index`` (the visible GPU), ``module`` or
    ``command`` (what runs; the job directory is appended), ``writable``/``readable`` (extra
    sandbox paths) and ``use_pool`` (``False``: never the warm pool; ``None``: when the pool is
    enabled). ``limit_address_space`` is decided by the job's device (:meth:`limits`)."""

    device_index: int | None = None
    module: str = WORKER_MODULE
    command: list[str] | None = None
    writable: Iterable[str | Path] = ()
    readable: Iterable[str | Path] = ()
    use_pool: bool | None = None

    def limits(self, device_type: str) -> Limits:
        """The supervision limits of a job on ``device_type`` (``RLIMIT_AS`` only on cpu)."""
        kept = {f.name: getattr(self, f.name) for f in dataclasses.fields(Limits)}
        return Limits(**{**kept, "limit_address_space": device_type == "cpu"})

    def pooled(self) -> bool:
        """Whether the warm pool may serve the job: a verification job (the worker module, no
        command) needing no extra sandbox paths, unless ``use_pool`` is ``False``."""
        return (self.command is None and self.module == WORKER_MODULE and self.use_pool is not False
                and not list(self.writable) and not list(self.readable))


def run_worker(job: dict[str, Any], options: WorkerOptions | None = None, *,
               on_progress: Callable[[dict[str, Any]], None] | None = None,
               cancel: threading.Event | None = None, job_dir: str | Path | None = None,
               **fields: Any) -> WorkerOutcome:
    """Run ``job`` (see ``xeforge_core.worker.job``) in a fresh worker process and wait for it.

    The job is written to ``JOB_DIR/job.json`` (``job["job_dir"]`` is set to that directory;
    a new temp dir is made when neither ``job_dir`` nor ``job["job_dir"]`` names one) and the
    worker is started as ``python -m <module> JOB_DIR`` (or ``command + [JOB_DIR]``), in its own
    session, with cwd ``JOB_DIR`` and the environment of ``worker_environment`` for
    ``job["device"]``, inside the sandbox of ``xeforge_core.sandbox`` where this machine allows
    one (``WorkerOutcome.isolation`` says which). In the sandbox the worker may write only
    ``JOB_DIR``, the job's device timing-lock directory (``job["options"]["lock_dir"]``) and
    ``writable``, and sees read-only the baseline's saved outputs (``job["expected_dir"]``),
    ``readable`` and the files named in ``command``.

    Verification jobs (the default ``module``, no ``command``) are served by the warm worker
    pool (``xeforge_core.pool``) unless ``use_pool`` is False or ``XEFORGE_POOL=0``: a process
    started ahead of need, used for this one job only, with the same limits and sandbox; the
    outputs end up in ``JOB_DIR`` as without the pool.

    ``options`` (a :class:`WorkerOptions`, or its fields as keywords, which replace those of
    ``options``) say what and how: limits: ``timeout_s`` wall-clock seconds (hard; the whole process group is killed);
    ``memory_bytes`` address space (``RLIMIT_AS``) on cpu, resident set of the process group on
    cuda/xpu (polled from ``/proc``; over the limit the group is killed and ``oom_killed`` set);
    ``cpu_seconds`` of CPU time (``RLIMIT_CPU``, all threads together; ``None`` = unlimited);
    ``file_bytes`` the largest file it may write (``RLIMIT_FSIZE``; ``None`` = unlimited).
    ``exit_grace_s``: seconds a worker may take to exit after writing its result. Time the
    worker spends queued for the device timing lock (between its ``queued`` and
    ``lock_acquired`` progress events) does not count against ``timeout_s``, up to
    ``queue_limit_s`` seconds of waiting. With ``dump_stack_on_timeout``, a worker that hangs
    is first sent SIGABRT so that its faulthandler prints where every thread was (kept in
    ``stderr``), then its group is killed; the outcome is still ``timed_out``.

    ``on_progress`` is called (in this thread) with each event dict the worker appends to
    ``progress.jsonl``; exceptions it raises are ignored. Setting ``cancel`` kills the group and
    returns with ``cancelled=True``.

    Never raises for anything the worker does; a keyword that is no field of
    :class:`WorkerOptions` raises ``TypeError`` naming it. Raises ``SandboxRequired`` when
    ``XEFORGE_REQUIRE_SANDBOX=1`` and the sandbox cannot be set up (nothing is started), and
    ``OSError`` only if the worker cannot be started at all (e.g. the job directory is not
    writable).
    """
    opts = dataclasses.replace(options, **fields) if options is not None else WorkerOptions(**fields)
    opts = dataclasses.replace(opts, writable=tuple(opts.writable), readable=tuple(opts.readable))
    iso = sandbox.require_sandbox()
    device_type = str(job.get("device", "cpu")).split(":")[0]
    jdir = Path(job_dir or job.get("job_dir") or new_job_dir()).resolve()
    jdir.mkdir(parents=True, exist_ok=True)
    job = dict(job)
    job["job_dir"] = str(jdir)
    for stale in (jdir / RESULT_FILE, jdir / PROGRESS_FILE, jdir / ESCAPES_FILE):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    limits = opts.limits(device_type)
    if opts.pooled() and pool.pool_enabled():
        return pool.default_pool().run(job, jdir, limits=limits, device_index=opts.device_index,
                                       on_progress=on_progress, cancel=cancel)
    (jdir / JOB_FILE).write_text(json.dumps(job, indent=1, default=str), encoding="utf-8")

    token = uuid.uuid4().hex
    command, writable = opts.command, list(opts.writable)
    policy = job_policy(job, jdir, writable=writable,
                        readable=[*opts.readable, *sandbox.readable_files(command or [])])
    env = worker_environment(jdir, device_type, device_index=opts.device_index, token=token)
    env.update(policy.environment(iso.sandboxed))
    argv = (list(command) if command is not None else [sys.executable, "-m", opts.module]) + [str(jdir)]
    argv = launcher_argv(sandbox.wrap(argv, policy, iso), memory_bytes=opts.memory_bytes,
                         cpu_seconds=opts.cpu_seconds, limit_address_space=limits.limit_address_space,
                         file_bytes=opts.file_bytes)
    stdout_path = jdir / "stdout.txt"
    stderr_path = jdir / "stderr.txt"
    start = time.monotonic()
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            argv, cwd=str(jdir), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True, close_fds=True,
        )
    outcome = supervise(proc, token=token, job_dir=jdir, limits=limits, isolation=iso,
                        on_progress=on_progress, cancel=cancel, start=start)
    return annotate(outcome, iso, role=str(job.get("role", "")),
                    verdict_result=command is None and opts.module == WORKER_MODULE)


def new_job_dir(prefix: str = "xeforge-job-") -> Path:
    """A fresh private directory for one job (under the system temp dir)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def job_policy(job: dict[str, Any], job_dir: Path, *, writable: Iterable[str | Path] = (),
               readable: Iterable[str | Path] = ()) -> sandbox.Policy:
    """The sandbox policy of ``job``: ``job_dir`` read-write, plus the device timing-lock
    directory (``job["options"]["lock_dir"]``) and ``writable``; the baseline's saved outputs
    (``job["expected_dir"]``, when outside ``job_dir``) and ``readable`` read-only."""
    lock_dir = (job.get("options") or {}).get("lock_dir")
    expected = job.get("expected_dir")
    return sandbox.Policy(job_dir=job_dir,
                          writable=[Path(p) for p in ([lock_dir] if lock_dir else []) + list(writable)],
                          readable=[Path(p) for p in ([expected] if expected else []) + list(readable)])


def cleanup_job_dir(job_dir: str | Path) -> None:
    """Remove a job directory (ignoring errors)."""
    shutil.rmtree(job_dir, ignore_errors=True)
