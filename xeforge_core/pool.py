"""The warm worker pool: single-use verification workers started ahead of need.

A verification runs up to three worker jobs (baseline, candidate, timing), and each fresh
worker pays for process start and the torch + triton imports (about 4 s on a 2-core CPU
machine, the bulk of a small verification) and, on a GPU, device initialisation. The pool
starts workers *before* they are needed and hands each one exactly one job:

* a pool worker is spawned like any other (``xeforge_core.runner``): its own session and
  process group, the scrubbed environment, the rlimit launcher and, where available, the
  sandbox (``xeforge_core.sandbox``) with its own read-write job directory (a *slot*) fixed at
  spawn; it runs ``python -m xeforge_core.worker --pool SLOT`` (``worker.__main__.pool_main``):
  imports torch, triton and the roles, initialises the GPU (``torch.empty(1, device=...)``,
  Triton's driver), writes ``pool.ready`` and blocks on its stdin, a pipe from this process;
* ``WorkerPool.run`` writes the job into the slot, sends one line with the job's limits
  (CPU seconds from now, address space, file size: the worker lowers its rlimits before the job
  starts), and supervises it exactly as a fresh worker (``process.supervise``: hard timeout,
  memory guard, cancel, group kill, token sweep); afterwards the slot's outputs are moved into
  the job directory the caller asked for and the process is gone. No candidate ever runs in a
  process another job touched;
* the baseline's saved outputs a candidate job compares against are hard-linked (or copied,
  across file systems) into a directory of the slot that the sandbox shows read-only;
* after each hand-out the pool starts a replacement, so that ``target`` workers per device
  (``XEFORGE_POOL_SIZE``, default 1; ``prestart`` raises it) stay ready;
* a worker that died or never got ready (``WARMUP_LIMIT_S``), or idled longer than
  ``MAX_IDLE_S``, is killed and replaced; a worker that died before taking its job is
  replaced and the job handed to a new one, once;
* workers are started from one long-lived thread of the pool (``_Spawner``), whichever thread
  asks: the sandbox's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) fires when the *thread* that
  forked the worker ends, so a worker started from a verification's short-lived thread (a
  workbench job, a Streamlit script run) was killed as soon as that thread ended, and stayed a
  zombie child until the next job pruned it;
* nothing outlives the caller: ``shutdown`` (registered with ``atexit``; the CLI turns SIGTERM
  and SIGHUP into a normal exit, and so does Streamlit) stops every pool process, and a pool
  worker whose pipe closes (its parent died, even by SIGKILL) exits by itself, idle or busy.

``XEFORGE_POOL=0`` turns the pool off (every job gets a fresh process, as before). Only the
standard library is used.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from xeforge_core import sandbox
from xeforge_core import worker_outcome as outcomes
from xeforge_core import worker_process as process
from xeforge_core.devlock import default_lock_dir
from xeforge_core.worker.__main__ import ACK_FILE, READY_FILE
from xeforge_core.worker.job import JOB_FILE

POOL_ENV = "XEFORGE_POOL"
SIZE_ENV = "XEFORGE_POOL_SIZE"

#: Idle workers kept ready per device when nothing asked for more.
DEFAULT_TARGET = 1

#: Seconds a pool worker may take to become ready before it is killed and replaced.
WARMUP_LIMIT_S = 600.0

#: Seconds an idle worker is kept; older ones are replaced (a driver update, a changed
#: environment or a long-lived app should not keep serving from a stale process).
MAX_IDLE_S = 1800.0

#: Idle workers kept in all; beyond, the oldest of other flavours are stopped (an environment
#: that changed leaves workers nobody will use).
MAX_IDLE_TOTAL = 4

#: Variables of the caller's environment that say nothing about the worker it starts, left out
#: of a flavour's environment hash: pytest names the running test in ``PYTEST_CURRENT_TEST``
#: (https://docs.pytest.org/en/stable/example/simple.html), which changes with every test and
#: would leave every waiting worker stale.
_CALLER_ONLY = frozenset({"PYTEST_CURRENT_TEST"})

#: Entries of a slot's job directory not moved into the caller's job directory.
_SCRATCH = {"tmp", "home", "triton-cache", READY_FILE, ACK_FILE}


def pool_enabled() -> bool:
    """False when ``XEFORGE_POOL`` is ``0``/``off``/``no``/``false``."""
    return os.environ.get(POOL_ENV, "").strip().lower() not in {"0", "off", "no", "false", "disabled"}


@dataclass(frozen=True)
class Flavour:
    """What a pool worker is fixed to at spawn: the device, the timing-lock directory it may
    write, and the sandbox it runs in."""

    device_type: str
    device_index: int | None
    lock_dir: str | None
    sandboxed: bool
    tool: str
    #: hash of the (scrubbed) environment and working directory the worker inherited: a
    #: worker started before the caller's environment changed is not used afterwards
    environment: str = ""


@dataclass(eq=False)
class _Slot:
    proc: subprocess.Popen
    token: str
    root: Path
    job_dir: Path
    input_dir: Path
    flavour: Flavour
    isolation: sandbox.Isolation
    stdin: BinaryIO
    spawned_at: float = field(default_factory=time.monotonic)

    @property
    def ready(self) -> bool:
        return (self.job_dir / READY_FILE).exists()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def warm_output(self) -> str:
        parts = []
        for name in ("warm-stdout.txt", "warm-stderr.txt"):
            text = process._read_truncated(self.root / name, 4000).strip()
            if text:
                parts.append(text)
        return "\n".join(parts)


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link every file of ``src`` into ``dst`` (copy where a link is not possible)."""

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES):
                raise
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link, dirs_exist_ok=True)


def _move_outputs(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        if entry.name in _SCRATCH or entry.name.startswith(JOB_FILE):
            continue
        target = dst / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        shutil.move(str(entry), str(target))


class _Spawner:
    """Runs process starts on one daemon thread that lives as long as the process (see the
    module docstring: a process started with ``PR_SET_PDEATHSIG`` dies with the thread that
    started it). ``call(fn)`` runs ``fn()`` there and returns its result or raises its
    exception; called on that thread, it runs ``fn`` directly."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is self._thread:
            return fn()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # first use, or a forked child
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._serve, args=(self._queue,),
                                                name="xeforge-pool-spawner", daemon=True)
                self._thread.start()
            done: Future[Any] = Future()
            self._queue.put((fn, done))
        return done.result()

    @staticmethod
    def _serve(requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
        while True:
            fn, done = requests.get()
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which re-raises it
                done.set_exception(exc)


class WorkerPool:
    """Warm single-use workers per ``Flavour`` (see module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Flavour, list[_Slot]] = {}
        self._busy: set[_Slot] = set()
        self._targets: dict[Flavour, int] = {}
        self._owner = os.getpid()
        self._atexit = False
        self._closed = False
        self._spawner = _Spawner()
        self.spawned = 0
        self.served_warm = 0
        self.served_cold = 0
        self.discarded = 0

    # -- flavours ----------------------------------------------------------------------------

    @staticmethod
    def flavour(device_type: str, device_index: int | None, lock_dir: str | None) -> Flavour:
        iso = sandbox.isolation()
        if device_type == "cpu":
            device_index = None  # one CPU: the index changes nothing in the worker
        env = sorted((k, v) for k, v in process.scrub_environment().items() if k not in _CALLER_ONLY)
        digest = hashlib.sha256(json.dumps([env, os.getcwd()]).encode("utf-8")).hexdigest()[:16]
        return Flavour(device_type=device_type, device_index=device_index,
                       lock_dir=str(Path(lock_dir).resolve()) if lock_dir else None,
                       sandboxed=iso.sandboxed, tool=iso.tool if iso.sandboxed else "",
                       environment=digest)

    def _target(self, flavour: Flavour) -> int:
        env = os.environ.get(SIZE_ENV, "").strip()
        if env.isdigit():
            return int(env)
        return self._targets.get(flavour, DEFAULT_TARGET)

    # -- spawning ----------------------------------------------------------------------------

    def _spawn(self, flavour: Flavour) -> _Slot:
        iso = sandbox.isolation()
        root = Path(tempfile.mkdtemp(prefix="xeforge-pool-")).resolve()
        job_dir = root / "job"
        input_dir = root / "input"
        job_dir.mkdir()
        input_dir.mkdir()
        token = uuid.uuid4().hex
        policy = sandbox.Policy(job_dir=job_dir, writable=[Path(flavour.lock_dir)] if flavour.lock_dir else [],
                                readable=[input_dir])
        env = process.worker_environment(job_dir, flavour.device_type, device_index=flavour.device_index,
                                        token=token)
        env.update(policy.environment(iso.sandboxed))
        argv = [sys.executable, "-m", process.WORKER_MODULE, "--pool", str(job_dir)]
        argv = process.launcher_argv(sandbox.wrap(argv, policy, iso), memory_bytes=None, cpu_seconds=None,
                                    limit_address_space=False, file_bytes=process.DEFAULT_FILE_BYTES)
        read_end, write_end = os.pipe()
        try:
            with open(root / "warm-stdout.txt", "wb") as out, open(root / "warm-stderr.txt", "wb") as err:
                proc = self._spawner.call(functools.partial(
                    subprocess.Popen, argv, cwd=str(job_dir), env=env, stdin=read_end, stdout=out,
                    stderr=err, start_new_session=True, close_fds=True))
        except BaseException:
            os.close(write_end)
            shutil.rmtree(root, ignore_errors=True)
            raise
        finally:
            os.close(read_end)
        self.spawned += 1
        if not self._atexit:
            atexit.register(self.shutdown)
            self._atexit = True
        return _Slot(proc=proc, token=token, root=root, job_dir=job_dir, input_dir=input_dir,
                     flavour=flavour, isolation=iso, stdin=os.fdopen(write_end, "wb", buffering=0))

    def _discard(self, slot: _Slot, *, reaped: bool = False) -> None:
        """Stop ``slot``'s processes (unless ``reaped``: ``process.supervise`` already killed its
        group and swept its token) and remove its directories."""
        with contextlib.suppress(OSError):
            slot.stdin.close()
        if not reaped or slot.proc.poll() is None:
            process.kill_group(slot.proc.pid, slot.token, term_grace_s=0.5)
        with contextlib.suppress(subprocess.TimeoutExpired):
            slot.proc.wait(timeout=5.0)
        shutil.rmtree(slot.root, ignore_errors=True)

    def _prune(self, flavour: Flavour) -> None:
        """Remove dead, never-ready and stale idle workers (caller holds the lock)."""
        now = time.monotonic()
        keep = []
        for slot in self._idle.get(flavour, []):
            age = now - slot.spawned_at
            if not slot.alive() or (not slot.ready and age > WARMUP_LIMIT_S) or age > MAX_IDLE_S:
                self.discarded += 1
                threading.Thread(target=self._discard, args=(slot,), daemon=True).start()
            else:
                keep.append(slot)
        self._idle[flavour] = keep

    def _fill(self, flavour: Flavour) -> None:
        """Start workers until ``target`` of ``flavour`` are idle (caller holds the lock)."""
        if self._closed or os.getpid() != self._owner:
            return
        idle = self._idle.setdefault(flavour, [])
        while len(idle) < self._target(flavour):
            idle.append(self._spawn(flavour))
        others = sorted((s for f, v in self._idle.items() if f != flavour for s in v),
                        key=lambda s: s.spawned_at)
        excess = sum(len(v) for v in self._idle.values()) - MAX_IDLE_TOTAL
        for slot in others[:max(0, excess)]:
            self._idle[slot.flavour].remove(slot)
            self.discarded += 1
            threading.Thread(target=self._discard, args=(slot,), daemon=True).start()

    def prestart(self, device_type: str = "cpu", device_index: int | None = None, *,
                 lock_dir: str | None = None, count: int | None = None) -> int:
        """Start workers for ``device_type`` (and ``device_index``, and the timing-lock
        directory ``lock_dir``: ``None`` = the verifier's default) now, so that ``count``
        (default: the current target) are ready for the next jobs, and keep that many from
        then on. Returns how many are idle."""
        if lock_dir is None:
            lock_dir = str(default_lock_dir())
        flavour = self.flavour(device_type, device_index, lock_dir)
        with self._lock:
            if count is not None:
                self._targets[flavour] = max(0, int(count))
            self._prune(flavour)
            self._fill(flavour)
            return len(self._idle[flavour])

    def keeps(self, device_type: str = "cpu", device_index: int | None = None, *,
              lock_dir: str | None = None) -> int:
        """How many idle workers the pool keeps for this device (``XEFORGE_POOL_SIZE``, or what
        ``prestart`` set); 0: it keeps none, every job starts its own."""
        flavour = self.flavour(device_type, device_index, str(default_lock_dir()) if lock_dir is None else lock_dir)
        with self._lock:
            return self._target(flavour)

    def ahead(self, device_type: str = "cpu", device_index: int | None = None, *,
              lock_dir: str | None = None, jobs: int = 1) -> int:
        """Make sure ``jobs`` workers are idle (ready or starting) for the next jobs, once, without
        changing how many are kept afterwards (``prestart`` does). For a program that knows it is
        about to run a verification: its workers import while it loads the problem. Returns how
        many are idle."""
        if lock_dir is None:
            lock_dir = str(default_lock_dir())
        flavour = self.flavour(device_type, device_index, lock_dir)
        with self._lock:
            if self._closed or os.getpid() != self._owner:
                return 0
            self._prune(flavour)
            idle = self._idle.setdefault(flavour, [])
            while len(idle) < jobs:
                idle.append(self._spawn(flavour))
            return len(idle)

    def _take(self, flavour: Flavour) -> tuple[_Slot, bool]:
        """An idle worker of ``flavour`` (ready ones first, else the oldest) or a new one, and
        whether it was ready."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is shut down")
            self._prune(flavour)
            idle = self._idle.setdefault(flavour, [])
            ready = [s for s in idle if s.ready]
            slot = ready[0] if ready else (idle[0] if idle else None)
            if slot is not None:
                idle.remove(slot)
            else:
                slot = self._spawn(flavour)
            self._busy.add(slot)
            return slot, bool(ready)

    # -- running a job -----------------------------------------------------------------------

    def run(self, job: dict[str, Any], job_dir: Path, *, limits: process.Limits,
            device_index: int | None = None, on_progress: Any = None,
            cancel: threading.Event | None = None) -> outcomes.WorkerOutcome:
        """Run ``job`` (its ``job_dir`` is ``job_dir``) on a warm worker; same contract and
        outcome as ``runner.run_worker``, with ``pooled`` set and the outputs in ``job_dir``.
        Jobs needing extra writable/readable paths are not the pool's (``run_worker`` starts a
        fresh worker for them)."""
        device_type = str(job.get("device", "cpu")).split(":")[0]
        lock_dir = (job.get("options") or {}).get("lock_dir")
        flavour = self.flavour(device_type, device_index, lock_dir)
        outcome = None
        for attempt in (1, 2):
            slot, warm = self._take(flavour)
            try:
                outcome = self._run_on(slot, job, job_dir, limits, on_progress, cancel)
                taken = (slot.job_dir / ACK_FILE).exists()
                if outcome.result is None and not taken and not outcome.cancelled and attempt == 1:
                    continue  # it died before taking the job: not the job's doing
                if not taken:
                    warm_out = slot.warm_output()
                    if warm_out:
                        outcome.stderr = (outcome.stderr + "\n--- pool worker start-up ---\n" + warm_out).strip()
                outcome = outcomes.annotate(outcome, slot.isolation, role=str(job.get("role", "")))
                outcome.pooled = True
                outcome.warm = warm
                if warm:
                    self.served_warm += 1
                else:
                    self.served_cold += 1
                _move_outputs(slot.job_dir, job_dir)
                outcome.job_dir = str(job_dir)
                outcome.stdout_path = str(job_dir / "stdout.txt")
                outcome.stderr_path = str(job_dir / "stderr.txt")
                return outcome
            finally:
                with self._lock:
                    self._busy.discard(slot)
                self._discard(slot, reaped=True)
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_on(self, slot: _Slot, job: dict[str, Any], job_dir: Path, limits: process.Limits,
                on_progress: Any, cancel: threading.Event | None) -> outcomes.WorkerOutcome:
        job = dict(job)
        job["job_dir"] = str(slot.job_dir)
        expected = job.get("expected_dir")
        if expected:
            exp = Path(expected).resolve()
            if exp == job_dir or job_dir in exp.parents:
                job["expected_dir"] = str(slot.job_dir / exp.relative_to(job_dir))
            elif exp.is_dir():
                _link_tree(exp, slot.input_dir / "expected")
                job["expected_dir"] = str(slot.input_dir / "expected")
        (slot.job_dir / JOB_FILE).write_text(json.dumps(job, indent=1, default=str), encoding="utf-8")
        message = {"limits": {"cpu_seconds": limits.cpu_seconds or 0,
                              "address_space_bytes": (limits.memory_bytes or 0) if limits.limit_address_space else 0,
                              "file_bytes": limits.file_bytes or 0}}
        start = time.monotonic()
        with contextlib.suppress(OSError):  # a dead worker: supervise sees it exit at once
            slot.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
        with self._lock:
            self._fill(slot.flavour)
        return process.supervise(slot.proc, token=slot.token, job_dir=slot.job_dir, limits=limits,
                                isolation=slot.isolation, on_progress=on_progress, cancel=cancel,
                                start=start)

    # -- lifetime ----------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop every pool process (idle and busy) and remove their slots. Called at exit; the
        pool refuses new jobs afterwards. Only the process that created the pool does anything
        (a forked child inherits the object, not the workers)."""
        if os.getpid() != self._owner:
            return
        with self._lock:
            self._closed = True
            slots = [s for idle in self._idle.values() for s in idle] + list(self._busy)
            self._idle.clear()
        for slot in slots:
            self._discard(slot)

    def stats(self) -> dict[str, Any]:
        """Counters: workers ``spawned``, jobs served by a ready (``served_warm``) or a still
        starting (``served_cold``) worker, workers ``discarded``, and ``idle`` per device."""
        with self._lock:
            idle = {f"{f.device_type}:{f.device_index}": len(v) for f, v in self._idle.items()}
        return {"spawned": self.spawned, "served_warm": self.served_warm, "served_cold": self.served_cold,
                "discarded": self.discarded, "idle": idle}


_default: WorkerPool | None = None
_default_lock = threading.Lock()


def default_pool() -> WorkerPool:
    """The process's pool (created on first use)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = WorkerPool()
        return _default


def prestart(device_type: str = "cpu", device_index: int | None = None, *, count: int | None = None,
             lock_dir: str | None = None) -> int:
    """``default_pool().prestart(...)`` when the pool is on; 0 when ``XEFORGE_POOL=0``. For a
    program that will verify soon (the CLI at start, the app at start-up)."""
    if not pool_enabled():
        return 0
    return default_pool().prestart(device_type, device_index, count=count, lock_dir=lock_dir)


def shutdown() -> None:
    """Stop the process's pool workers now (also done at exit)."""
    if _default is not None:
        _default.shutdown()
