"""The Ray tasks of a batch: one per problem (its whole pipeline), the device probe, and the
actor the tasks report progress to.

A problem task (:func:`run_problem_task`) gets the problem's files as bytes (no shared
filesystem is assumed; where the original paths exist on the node with the same content they
are used as they are, so messages name the user's files), asks a probe task for the device
(:func:`detect_task`: on a GPU cluster it holds a share of a GPU, so it sees one), then runs
:func:`xeforge_core.batch.optimize_one` exactly as the sequential batch does, except that every
verification worker job goes through :class:`~xeforge_core.raybatch.jobs.RayWorkerRunner`.
The task itself holds one CPU and no GPU: it never blocks a GPU while it waits for its jobs, so a
timing job can always get a whole one. It returns the row as a dict. Pipeline events (stage
started, candidate verified, ...) and the task's start (pid, host, attempt) go to the
:class:`ProgressBoard` actor, which the driver drains.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.batch import BatchItem, BatchRow, optimize_one
from xeforge_core.devices import detect_device
from xeforge_core.raybatch.jobs import JobPlacement, RayJobError, RayWorkerRunner, pin_assigned_gpu

__all__ = ["EngineFactory", "ProblemPayload", "ProgressBoard", "detect_task", "remote", "run_problem_task"]

#: Pipeline events not sent to the driver (one per worker progress line: too chatty to ship).
QUIET_EVENTS = frozenset({"verify_progress"})


class ProgressBoard:
    """Collects what the tasks of one batch report, for the driver to drain.

    ``started(kernel, info)`` records an attempt of ``kernel`` (``info``: pid, host, node) and
    returns its number (1 for the first); ``post(kernel, event)`` a pipeline event;
    ``post_job(event)`` a worker job starting or ending (role, device, pid, times); ``drain()``
    returns and forgets everything posted since the last call. Runs as a Ray actor that needs
    no CPU."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._attempts: dict[str, int] = {}

    def started(self, kernel: str, info: dict[str, Any]) -> int:
        self._attempts[kernel] = self._attempts.get(kernel, 0) + 1
        self._events.append({"event": "started", "kernel": kernel, "attempt": self._attempts[kernel], **info})
        return self._attempts[kernel]

    def post(self, kernel: str, event: dict[str, Any]) -> None:
        self._events.append({**event, "kernel": kernel})

    def post_job(self, event: dict[str, Any]) -> None:
        self._events.append(dict(event))

    def drain(self) -> list[dict[str, Any]]:
        events, self._events = self._events, []
        return events


@dataclass(frozen=True)
class EngineFactory:
    """Builds the engine inside a task, as the CLI does on the driver (``service.make_engine``: the LLM
    key, read from that node's environment or ``.env``, is registered as a secret there too).
    The target reaches the engine through each proposal's context, not the engine."""

    name: str = "rules"

    def __call__(self, target: Any) -> Any:
        from xeforge_core.service import make_engine

        return make_engine(self.name)


@dataclass
class ProblemPayload:
    """One problem as it travels to a task: its name and, per role (``kernel``, ``spec``,
    ``reference``), the absolute path it was read from and its bytes."""

    name: str
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)

    @classmethod
    def read(cls, item: Any) -> ProblemPayload:
        """Read ``item`` (a ``BatchItem``); raises ``OSError`` when a file cannot be read."""
        files = {}
        for role in ("kernel", "spec", "reference"):
            path = getattr(item, role)
            if path is not None:
                p = Path(path).resolve()
                files[role] = (str(p), p.read_bytes())
        return cls(name=item.name, files=files)

    def materialize(self) -> tuple[Any, Path | None]:
        """A ``BatchItem`` on this node: the original paths where they hold the same bytes,
        else copies in a new temporary directory (returned, to be removed; ``None`` when no
        copy was needed)."""

        def same(path: str, data: bytes) -> bool:
            try:
                return Path(path).read_bytes() == data
            except OSError:
                return False

        if all(same(p, d) for p, d in self.files.values()):
            return BatchItem(**{r: Path(p) for r, (p, _) in self.files.items()}), None
        tmp = Path(tempfile.mkdtemp(prefix=f"xeforge-problem-{self.name}-"))
        paths = {}
        for role, (orig, data) in self.files.items():
            dest = tmp / Path(orig).name
            dest.write_bytes(data)
            paths[role] = dest
        return BatchItem(**paths), tmp


def detect_task(override: str | None, device_type: str) -> Any:
    """Body of the probe task: the ``DeviceInfo`` this node gives for ``override`` (on a GPU
    cluster the task holds a share of one GPU, pinned, which the device numbers 0)."""
    if device_type != "cpu":
        pin_assigned_gpu(device_type)

    return detect_device(override)


_REMOTES: dict[str, Any] = {}


def remote(name: str) -> Any:
    """The Ray remote function or actor class ``"problem"``, ``"detect"`` or ``"board"``
    (made once per process)."""
    if name not in _REMOTES:
        import ray

        bodies = {"problem": lambda: ray.remote(run_problem_task), "detect": lambda: ray.remote(detect_task),
                  "board": lambda: ray.remote(num_cpus=0, max_restarts=-1)(ProgressBoard)}
        _REMOTES[name] = bodies[name]()
    return _REMOTES[name]


def run_problem_task(payload: ProblemPayload, placement: JobPlacement, settings: dict[str, Any],
                     board: Any) -> dict[str, Any]:
    """Body of the problem task (see the module docstring). ``settings``: ``device`` (the
    ``--device`` override or ``None``), ``engine_factory``, and the keyword arguments of
    ``optimize_one`` (stages, target, workspace, iterations, ...). Returns ``BatchRow.to_dict()``;
    never raises for a bad problem (the row's ``error`` says what went wrong)."""
    import ray

    from xeforge_core.verify import verify

    host = socket.gethostname()
    attempt = 1
    with contextlib.suppress(Exception):  # progress is advisory: a lost board does not fail the task
        attempt = int(ray.get(board.started.remote(payload.name, {
            "pid": os.getpid(), "host": host, "node": ray.get_runtime_context().get_node_id()}), timeout=60))
    tmp: Path | None = None
    try:
        try:
            item, tmp = payload.materialize()
            dev = ray.get(remote("detect").options(**placement.task_options("probe")).remote(
                settings.get("device"), placement.device_type))
        except Exception as exc:  # noqa: BLE001 - becomes this problem's row
            return BatchRow(kernel=payload.name, host=host, attempts=attempt,
                            error=f"device unavailable on {host}: {_first_line(exc)}").to_dict()
        if placement.uses_gpus and dev.type == "cpu":
            why = "; ".join(dev.warnings) or "the device probe found no usable GPU"
            return BatchRow(kernel=payload.name, host=host, attempts=attempt, device="cpu",
                            error=f"Ray gave this task a GPU on {host}, but torch/Triton cannot use it: "
                                  f"{why}").to_dict()
        if placement.uses_gpus and dev.type != placement.device_type:  # auto found xpu, say
            placement = dataclasses.replace(placement, device_type=dev.type)
        hook = RayWorkerRunner(placement, report=board, kernel=payload.name)

        def forward(event: dict[str, Any]) -> None:
            if event.get("event") not in QUIET_EVENTS:
                with contextlib.suppress(Exception):
                    board.post.remote(payload.name, {k: event.get(k) for k in
                                                     ("event", "stage", "iteration", "message")})

        kwargs = dict(settings.get("pipeline") or {})
        row = optimize_one(item, device=dev, engine_factory=settings.get("engine_factory"),
                           verify_fn=functools.partial(verify, run_worker=hook), on_progress=forward, **kwargs)
        row.record_jobs(hook.jobs)
        row.attempts = attempt
        row.host = host
        if placement.uses_gpus:
            used = sorted({j["device"].split("/", 1)[-1] for j in hook.jobs})
            row.device = ";".join(used) or f"{dev.type} (no job ran)"
        if tmp is not None:
            row.error = row.error.replace(str(tmp), str(Path(payload.files["kernel"][0]).parent))
        return row.to_dict()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, RayJobError):
        return str(exc)
    text = str(getattr(exc, "cause", None) or exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:400] if text else ''}"
