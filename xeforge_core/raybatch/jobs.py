"""One verification worker job as a Ray task that asks Ray for what its role needs.

:class:`RayWorkerRunner` is a ``run_worker`` for :func:`xeforge_core.verify.verify`: each job
the verifier would start here (baseline, candidate, timing) becomes a Ray task instead, and the
task runs it exactly as the verifier would, with ``runner.run_worker`` (a fresh isolated worker
process with its timeout, memory, CPU-time and file-size limits), on the node and device Ray
chose:

* **resources** (:class:`JobPlacement`): on cpu every job asks for one CPU. On a GPU cluster a
  baseline or candidate job (compile, integrity checks, correctness) asks for one CPU and a share
  of a GPU (``correctness_gpus``, 0.25 by default: four may share one GPU), and a timing job for
  one CPU and a whole GPU (``num_gpus=1``). Ray never gives a whole GPU to one task while
  another holds any of it, so two timing runs never share a GPU anywhere in the cluster, and a
  timing run never shares its GPU with a correctness run either.
* **pinning**: the task makes only the GPU Ray assigned visible (``CUDA_VISIBLE_DEVICES`` or
  ``ZE_AFFINITY_MASK`` set from ``ray.get_gpu_ids()``), the worker addresses it as device 0, and
  the job's timing lock is named after that physical device (``<host>-cuda3``), so the
  per-device lock of ``xeforge_core.devlock`` also keeps out verifications started outside Ray
  (the UI, another CLI) on that machine.
* **files**: on a single node a job runs on that node (node affinity) in the job directory the
  verifier chose, and nothing is copied. On a cluster of several nodes nothing is assumed about
  shared filesystems: a job may run on any node, a baseline job's saved outputs and every job's
  ``result.json``, ``progress.jsonl``, ``stdout.txt`` and ``stderr.txt`` come back into the
  verifier's job directory (paths inside them rewritten to it), and a candidate job's expected
  outputs travel with the job. Only regular files travel.
* **no orphans**: the worker is started through a small guard that asks Linux to SIGKILL it if
  the Ray worker process that started it dies (``PR_SET_PDEATHSIG``): a task whose Ray worker is
  killed (a node's OOM killer, a forced cancel, ``ray stop``) leaves no verification worker
  running. A cancelled task (Ctrl-C) stops its worker through ``runner.run_worker``'s own
  cleanup (the whole process group).
* **faults**: Ray retries a job whose Ray worker or node died (``max_retries``); a job that still
  cannot run raises :class:`RayJobError`, which the optimization loop turns into that
  candidate's verdict (the batch goes on).

Each job run is recorded in :attr:`RayWorkerRunner.jobs` (role, ``"<host>/<type>:<physical
index>"``, start and end in seconds since the epoch), which is how a batch row shows which GPU
timed it and that no two timing runs overlapped on one GPU.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core import runner, sandbox
from xeforge_core.devices import DeviceInfo
from xeforge_core.errors import XeForgeError
from xeforge_core.worker import backends
from xeforge_core.worker.job import PROGRESS_FILE, RESULT_FILE

__all__ = ["JobPlacement", "RayJobError", "RayWorkerRunner", "pin_assigned_gpu"]

#: Files of a job directory that come back to the caller (besides a baseline's outputs).
RETURNED_FILES = (RESULT_FILE, PROGRESS_FILE, "stdout.txt", "stderr.txt")

#: Largest total size of the files one job sends back, bytes (a candidate that fills its job
#: directory does not fill the object store; the worker's own file-size limit applies too).
RETURN_LIMIT_BYTES = 1 << 30

#: Started by the runner's rlimit launcher in place of ``python -m xeforge_core.worker``: asks
#: the kernel to SIGKILL this process when its parent (the Ray worker, pid in argv[1]) dies, gives
#: up if that parent is already gone, then becomes the worker (argv[2] the module, argv[3] the
#: job directory). Linux only; elsewhere it just becomes the worker.
_PARENT_GUARD = """
import os, signal, sys
parent, module, job_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
except (OSError, AttributeError):
    pass
if parent and os.getppid() != parent:
    os._exit(70)
os.execv(sys.executable, [sys.executable, "-m", module, job_dir])
"""


class RayJobError(XeForgeError, RuntimeError):
    """A verification job could not be run on Ray: its worker or node died more often than
    ``max_retries`` allows, Ray gave a GPU job no GPU, or the task was lost."""


@dataclass(frozen=True)
class JobPlacement:
    """What the jobs of a batch ask Ray for.

    ``device_type``: ``"cpu"`` (Triton's interpreter; jobs ask for one CPU), ``"cuda"`` or
    ``"xpu"`` (jobs ask for a GPU or a share of one). ``correctness_gpus``: the share of a GPU a
    baseline or candidate job takes (0 < x <= 1). ``max_retries``: how often Ray restarts a job
    whose Ray worker or node died. ``env``: environment variables set in the tasks (Ray's
    ``runtime_env``; e.g. ``XEFORGE_CACHE_DIR``). ``ship_files``: jobs may run on any node and
    their files travel with them (a cluster of several nodes); ``False``: jobs run on the node
    of the verification that starts them (Ray's node affinity), in its job directories, and
    nothing is copied (one node).
    """

    device_type: str = "cpu"
    correctness_gpus: float = 0.25
    max_retries: int = 2
    env: dict[str, str] = field(default_factory=dict)
    ship_files: bool = True

    def __post_init__(self) -> None:
        if self.device_type not in backends.names():
            raise ValueError(f"device type {self.device_type!r}: use {', '.join(backends.names())}")
        if not 0 < self.correctness_gpus <= 1:
            raise ValueError(f"correctness_gpus {self.correctness_gpus}: a share of one GPU, 0 < x <= 1")
        if self.max_retries < 0:
            raise ValueError("max_retries must be 0 or more")

    @property
    def uses_gpus(self) -> bool:
        return self.device_type in backends.gpu_names()

    def resources(self, role: str) -> dict[str, float]:
        """Ray resources for a task of ``role``: ``{"num_cpus": 1}`` on cpu and for a
        ``problem`` task (which never holds a GPU while it waits for its jobs); on a GPU a whole
        one for ``timing`` and ``correctness_gpus`` of one for anything else (baseline,
        candidate, the device ``probe``)."""
        if not self.uses_gpus or role == "problem":
            return {"num_cpus": 1}
        return {"num_cpus": 1, "num_gpus": 1 if role == "timing" else self.correctness_gpus}

    def task_options(self, role: str) -> dict[str, Any]:
        """Keyword arguments for ``.options(...)`` of a Ray task running a ``role`` job."""
        opts: dict[str, Any] = {**self.resources(role), "max_retries": self.max_retries,
                                "retry_exceptions": False}
        if self.env:
            opts["runtime_env"] = {"env_vars": dict(self.env)}
        return opts


def pin_assigned_gpu(device_type: str) -> str:
    """In a Ray task: make only the GPU(s) Ray assigned visible to this process and the
    workers it starts (the backend's ``visible_devices_var``: ``CUDA_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``; from
    ``ray.get_gpu_ids()``) and return the first one's id as the machine numbers it. Raises
    :class:`RayJobError` when Ray assigned none."""
    import ray

    ids = [str(i) for i in ray.get_gpu_ids()]
    if not ids:
        raise RayJobError(f"Ray assigned this task no GPU, but the batch runs on {device_type}")
    var = backends.get_backend(device_type).visible_devices_var
    if var is None:
        raise RayJobError(f"the {device_type} backend names no variable that restricts its devices")
    os.environ[var] = ",".join(ids)
    return ids[0]


# --------------------------------------------------------------------------------------------
# moving job directories between nodes


def pack_files(root: Path, names: tuple[str, ...] | list[str]) -> bytes:
    """A tar archive of the regular files ``names`` (files, or directories taken whole) under
    ``root``; missing names and anything that is not a regular file (links, devices) are left
    out. Raises :class:`RayJobError` past ``RETURN_LIMIT_BYTES``."""
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in names:
            top = root / name
            paths = [top] if top.is_file() else sorted(p for p in top.rglob("*")) if top.is_dir() else []
            for path in paths:
                if path.is_symlink() or not path.is_file():
                    continue
                total += path.stat().st_size
                if total > RETURN_LIMIT_BYTES:
                    raise RayJobError(f"the job's files exceed {RETURN_LIMIT_BYTES >> 20} MiB; not sent back")
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buf.getvalue()


def unpack_files(blob: bytes, dest: Path) -> None:
    """Extract an archive of :func:`pack_files` into ``dest`` (regular files only, no path
    leaving ``dest``)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and not Path(m.name).is_absolute()
                   and ".." not in Path(m.name).parts]
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, members=members, filter="data")
        else:  # Python without extraction filters: the members were checked above
            tar.extractall(dest, members=members)  # noqa: S202


def _relocate_text(path: Path, old: str, new: str) -> None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = path.read_text(encoding="utf-8")
        if old in text:
            path.write_text(text.replace(old, new), encoding="utf-8")


# --------------------------------------------------------------------------------------------
# the task


def run_job_task(job: dict[str, Any], limits: dict[str, Any], expected: tuple[str, Any] | None,
                 origin_dir: str, device_type: str, report: Any = None, kernel: str = "") -> dict[str, Any]:
    """Body of the Ray task that runs one worker job (see the module docstring).

    ``expected``: ``None`` when the task runs on the caller's node (the job runs in
    ``origin_dir`` as the verifier wrote it, and nothing travels); otherwise ``("output",
    relative path)`` for a baseline job (its outputs come back), ``("input", archive)`` for a
    job that reads saved outputs, or ``("none", None)``. ``origin_dir``: the caller's job
    directory (paths in returned files are rewritten to it). ``report``: a ``ProgressBoard``
    actor handle told when the job (of problem ``kernel``) starts and ends, or ``None``.
    Returns ``{"outcome": WorkerOutcome, "files": archive or None, "device", "host", "start",
    "end", "pid"}``.
    """
    physical = pin_assigned_gpu(device_type) if device_type != "cpu" else "0"
    host = socket.gethostname()
    where = f"{host}/{device_type}:{physical}"
    role = str(job.get("role", ""))
    shipped = expected is not None
    job_dir = runner.new_job_dir(f"xeforge-ray-{role}-") if shipped else Path(origin_dir)
    try:
        job = dict(job)
        options = dict(job.get("options") or {})
        if device_type != "cpu":
            options["lock_key"] = DeviceInfo(type=device_type, index=0).lock_key()
        job["options"] = options
        returned = list(RETURNED_FILES)
        if shipped and expected[0] == "output":
            job["expected_dir"] = str(job_dir / expected[1])
            returned.append(expected[1])
        elif shipped and expected[0] == "input":
            unpack_files(expected[1], job_dir / "expected-in")
            job["expected_dir"] = str(job_dir / "expected-in")
        start = time.time()
        if report is not None:
            report.post_job.remote({"event": "job_started", "kernel": kernel, "role": role, "device": where,
                                    "pid": os.getpid(), "start": start})
        # In the sandbox the worker has its own PID namespace (its parent is the namespace's
        # init, not this task) and bubblewrap's --die-with-parent already ends it with the task:
        # the guard then only sets its own parent-death signal.
        parent = 0 if sandbox.isolation().sandboxed else os.getpid()
        command = [sys.executable, "-c", _PARENT_GUARD, str(parent), "xeforge_core.worker"]
        outcome = runner.run_worker(job, job_dir=job_dir, device_index=0, command=command, **limits)
        end = time.time()
        if report is not None:
            report.post_job.remote({"event": "job_finished", "kernel": kernel, "role": role, "device": where,
                                    "pid": os.getpid(), "start": start, "end": end})
        reply = {"outcome": outcome, "files": None, "device": where, "host": host, "start": start, "end": end,
                 "pid": os.getpid()}
        if shipped:
            for name in RETURNED_FILES:
                _relocate_text(job_dir / name, str(job_dir), origin_dir)
            outcome.stdout = outcome.stdout.replace(str(job_dir), origin_dir)
            outcome.stderr = outcome.stderr.replace(str(job_dir), origin_dir)
            if outcome.result is not None:
                outcome.result = json.loads(json.dumps(outcome.result).replace(json.dumps(str(job_dir))[1:-1],
                                                                               json.dumps(origin_dir)[1:-1]))
            reply["files"] = pack_files(job_dir, returned)
        return reply
    finally:
        if shipped:
            runner.cleanup_job_dir(job_dir)


_REMOTE: dict[str, Any] = {}


def remote_job_function() -> Any:
    """``run_job_task`` as a Ray remote function (made once per process)."""
    if "job" not in _REMOTE:
        import ray

        _REMOTE["job"] = ray.remote(run_job_task)
    return _REMOTE["job"]


# --------------------------------------------------------------------------------------------
# the caller's side


def _within(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


class RayWorkerRunner:
    """``verify(..., run_worker=RayWorkerRunner(placement))``: each worker job runs as a Ray
    task (see the module docstring). ``report``: a ``ProgressBoard`` actor handle the jobs of
    problem ``kernel`` report to, or ``None``.
    ``jobs``: one record per finished job (``role``, ``device``, ``host``, ``start``, ``end``).
    Accepts the keyword arguments of ``runner.run_worker``; ``on_progress`` receives the
    worker's progress events after the job (they come back with its files), and setting
    ``cancel`` cancels the Ray task and returns a ``cancelled`` outcome."""

    def __init__(self, placement: JobPlacement, *, report: Any = None, kernel: str = "",
                 poll_s: float = 0.25) -> None:
        self.placement = placement
        self.report = report
        self.kernel = kernel
        self.poll_s = poll_s
        self.jobs: list[dict[str, Any]] = []

    def __call__(self, job: dict[str, Any], *, on_progress: Any = None, cancel: Any = None,
                 job_dir: str | Path | None = None, device_index: int | None = None,
                 **limits: Any) -> runner.WorkerOutcome:
        import ray
        from ray.exceptions import RayError, TaskCancelledError

        role = str(job.get("role", ""))
        origin = Path(job_dir) if job_dir else runner.new_job_dir(f"xeforge-{role}-")
        origin.mkdir(parents=True, exist_ok=True)
        options = self.placement.task_options(role)
        expected: tuple[str, Any] | None = None
        if self.placement.ship_files:
            expected = ("none", None)
            exp = Path(job["expected_dir"]) if job.get("expected_dir") else None
            if exp is not None and _within(exp, origin):
                expected = ("output", exp.resolve().relative_to(origin.resolve()).as_posix())
            elif exp is not None and exp.is_dir():
                expected = ("input", pack_files(exp, [p.name for p in sorted(exp.iterdir())]))
        else:  # on this node, where the verifier's files are
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
                node_id=ray.get_runtime_context().get_node_id(), soft=False)
        ref = remote_job_function().options(**options).remote(
            job, limits, expected, str(origin), self.placement.device_type, self.report, self.kernel)
        try:
            while cancel is not None:
                done, _ = ray.wait([ref], timeout=self.poll_s)
                if done:
                    break
                if cancel.is_set():
                    ray.cancel(ref, recursive=True)
                    return runner.WorkerOutcome(result=None, returncode=None, cancelled=True, job_dir=str(origin))
            reply = ray.get(ref)
        except TaskCancelledError:
            raise
        except RayError as exc:
            raise RayJobError(f"the {role} job could not run on Ray after {self.placement.max_retries} "
                              f"retries: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}") from exc
        except BaseException:
            with contextlib.suppress(Exception):
                ray.cancel(ref, recursive=True)
            raise
        if reply["files"] is not None:
            unpack_files(reply["files"], origin)
        outcome: runner.WorkerOutcome = reply["outcome"]
        outcome.job_dir = str(origin)
        outcome.stdout_path = str(origin / "stdout.txt")
        outcome.stderr_path = str(origin / "stderr.txt")
        self.jobs.append({"role": role, "device": reply["device"], "host": reply["host"],
                          "start": round(reply["start"], 3), "end": round(reply["end"], 3)})
        if on_progress is not None:
            _replay_progress(origin / PROGRESS_FILE, on_progress)
        return outcome


def _replay_progress(path: Path, on_progress: Any) -> None:
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, TypeError):
                event = json.loads(line)
                if isinstance(event, dict):
                    with contextlib.suppress(Exception):
                        on_progress(event)
