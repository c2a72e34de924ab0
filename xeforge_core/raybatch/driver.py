"""The driver of ``xeforge batch DIR --ray [ADDRESS]``: connect to Ray, submit one task per
problem, stream the rows back as they finish, and stop cleanly.

* **where**: no address starts a local Ray instance on this machine (all its CPUs and GPUs, or
  ``num_cpus``/``num_gpus``), which is stopped at the end; an address (``auto``, ``HOST:PORT``
  of a head node, ``ray://HOST:10001``) joins a running cluster, which is left running.
* **what runs where**: on a cluster with GPUs (and ``device`` not ``cpu``) the verification
  jobs ask for GPUs (see :mod:`xeforge_core.raybatch.jobs`); otherwise everything runs in
  Triton's interpreter on CPUs. At most ``max_in_flight`` problem tasks are submitted at once
  (default: the cluster's CPUs; on GPUs, enough to keep every GPU's correctness shares busy
  twice over, within the CPUs), so a large directory does not flood the scheduler.
* **streaming**: each finished row goes to ``on_row`` at once (the CLI rewrites the summary
  there), in the order problems finish.
* **faults**: Ray retries a problem task whose worker or node died (``max_retries``), from the
  start of its pipeline in a new session; rows already finished are not touched. A task that
  still fails becomes a row whose ``error`` says why; the batch goes on.
* **stopping**: Ctrl-C (``KeyboardInterrupt``) or ``cancel`` cancels every task in flight
  (recursively, so their verification jobs stop and kill their worker processes), waits up to
  ``cancel_grace_s`` for them, force-kills what is left (the workers' parent-death guard takes
  their worker processes with them), and stops the local instance. ``KeyboardInterrupt`` is
  then re-raised; a ``cancel`` returns the rows finished so far.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xeforge_core.batch import BatchItem, BatchRow, find_kernels
from xeforge_core.devices import parse_override
from xeforge_core.errors import XeForgeError
from xeforge_core.raybatch.jobs import JobPlacement
from xeforge_core.raybatch.tasks import EngineFactory, ProblemPayload, remote
from xeforge_core.runner import is_secret_name

__all__ = ["RayBatchOptions", "RayNotInstalled", "RaySetupError", "device_kind", "forwarded_environment",
           "require_ray", "run_ray_batch"]

#: The message when Ray is missing (the extra that installs it).
INSTALL_HINT = ('Ray is not installed: install the "ray" extra, pip install -e ".[ray]" in a checkout '
                '(or pip install "xeforge-studio[ray]")')


class RayNotInstalled(XeForgeError, RuntimeError):
    """``--ray`` was asked for but the ``ray`` package cannot be imported."""


class RaySetupError(XeForgeError, ValueError):
    """The Ray cluster cannot run this batch as asked (no GPU for ``--device cuda``, a device
    index with ``--ray``, an address that does not answer)."""


@dataclass
class RayBatchOptions:
    """How a batch uses Ray.

    ``address``: ``None`` starts a local instance; ``"auto"``, ``"HOST:PORT"`` or
    ``"ray://HOST:PORT"`` joins a cluster. ``num_cpus`` / ``num_gpus``: resources of a local
    instance (``None``: what Ray detects). ``max_retries``: restarts of a task whose worker or node
    died. ``correctness_gpus``: share of a GPU a baseline/candidate job asks for.
    ``max_in_flight``: problem tasks submitted at once (``None``: see the module docstring).
    ``cancel_grace_s``: seconds cancelled tasks get to stop before they are killed. ``poll_s``:
    how often the driver looks for finished tasks and progress, seconds.
    """

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: int | None = None
    max_retries: int = 2
    correctness_gpus: float = 0.25
    max_in_flight: int | None = None
    cancel_grace_s: float = 10.0
    poll_s: float = 0.2


def require_ray() -> Any:
    """The ``ray`` module; raises :class:`RayNotInstalled` (saying which extra to install)."""
    try:
        import ray
    except ImportError as exc:
        raise RayNotInstalled(INSTALL_HINT) from exc
    return ray


def forwarded_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables a batch sets in its Ray tasks: every ``XEFORGE_*`` one of the driver
    except those named like secrets (``runner.is_secret_name``: an LLM key is read on each node,
    never shipped), plus ``TRITON_INTERPRET``. Tasks of a local instance that the batch started
    inherit them anyway; on a cluster (or an instance started before the variables were set)
    they make ``XEFORGE_CACHE_DIR`` and friends mean the same everywhere."""

    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items()
            if (k.startswith("XEFORGE_") or k == "TRITON_INTERPRET") and not is_secret_name(k)}


def device_kind(device: str | None) -> str | None:
    """The device type a ``--device`` override asks of a Ray batch (``None``: auto). Raises
    :class:`RaySetupError` for an unknown device or one with an index (Ray assigns GPUs)."""

    try:
        parsed = parse_override(device)
    except ValueError as exc:
        raise RaySetupError(str(exc), field="--device") from exc
    if parsed is not None and parsed[1] is not None and parsed[0] != "cpu":
        raise RaySetupError(f"device {device!r}: with --ray, Ray assigns the GPU; give {parsed[0]} without "
                            "an index", field="--device")
    return parsed[0] if parsed is not None else None


def _device_type_for(device: str | None, gpus: float) -> str:
    kind = device_kind(device)
    if kind == "cpu":
        return "cpu"
    if gpus <= 0:
        if kind is not None:
            raise RaySetupError(f"device {device!r}: the Ray cluster has no GPU resource (start its nodes "
                                "with GPUs visible, or ray start --num-gpus N)", field="--device")
        return "cpu"
    # auto on a GPU cluster: the probe task says whether it is cuda or xpu; jobs ask for GPUs
    return kind or "cuda"


def _check_answers(address: str, timeout_s: float = 5.0) -> None:
    """For a ``HOST:PORT`` or ``ray://HOST:PORT`` address: raise :class:`RaySetupError` at once
    when nothing listens there (Ray itself would retry for minutes before giving up)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RaySetupError(f"nothing answers at {address} ({exc}); start the head node with "
                            "ray start --head, or give --ray auto on a node of the cluster", field="--ray") from exc


def _connect(ray: Any, options: RayBatchOptions, info: Callable[[str], None]) -> bool:
    """Connect (or start a local instance); True when this call started Ray and must stop it."""
    if ray.is_initialized():
        info("Ray: using the Ray instance this process is already connected to")
        return False
    if options.address:
        _check_answers(options.address)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "logging_level": logging.WARNING}
    started = time.monotonic()
    try:
        if options.address:
            ray.init(address=options.address, **kwargs)
        else:
            # "local": a new instance even where another runs on this machine (ray start)
            ray.init(address="local", num_cpus=options.num_cpus, num_gpus=options.num_gpus, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a bad address or a cluster that does not answer
        where = f"the Ray cluster at {options.address}" if options.address else "a local Ray instance"
        raise RaySetupError(f"cannot connect to {where}: {type(exc).__name__}: {str(exc).strip()[:400]}",
                            field="--ray") from exc
    res = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    what = f"joined the cluster at {options.address}" if options.address else "started a local instance"
    info(f"Ray: {what} in {time.monotonic() - started:.1f} s: {len(nodes)} node(s), "
         f"{res.get('CPU', 0):g} CPU(s), {res.get('GPU', 0):g} GPU(s)")
    return not options.address


def _default_in_flight(resources: dict[str, float], placement: JobPlacement) -> int:
    cpus = max(1, int(resources.get("CPU", 1)))
    if not placement.uses_gpus:
        return cpus
    slots = int(resources.get("GPU", 0)) * math.ceil(1 / placement.correctness_gpus)
    return max(1, min(cpus, 2 * slots))


def run_ray_batch(
    items: Iterable[BatchItem] | str | Path,
    *,
    options: RayBatchOptions | None = None,
    device: str | None = None,
    engine_name: str = "rules",
    engine_factory: Callable[[str], Any] | None = None,
    on_row: Callable[[BatchRow], None] | None = None,
    on_start: Callable[[str, dict[str, Any]], None] | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    on_info: Callable[[str], None] | None = None,
    cancel: Any = None,
    **pipeline: Any,
) -> list[BatchRow]:
    """Run the pipeline of every kernel of ``items`` (or of the directory ``items``) as Ray
    tasks and return the rows in kernel-name order.

    ``device``: the ``--device`` override (``None``/``auto``, ``cpu``, ``cuda``, ``xpu``; no
    index: Ray assigns GPUs). ``engine_factory`` must be picklable (default:
    :class:`~xeforge_core.raybatch.tasks.EngineFactory` of ``engine_name``). ``pipeline``: the
    keyword arguments of :func:`xeforge_core.batch.optimize_one` (``stages``, ``target``,
    ``workspace`` — made absolute —, ``iterations``, ``best_of``, ``min_speedup``,
    ``verify_options``, ``portability``). Callbacks run in this thread: ``on_start(kernel,
    info)`` when a task starts (``info``: ``attempt``, ``pid``, ``host``, ``node``),
    ``on_event(kernel, event)`` for its pipeline events and worker jobs (``job_started`` /
    ``job_finished`` with ``role``, ``device``, ``pid``), ``on_row(row)`` when it finishes,
    ``on_info(message)`` for what the driver does (connection, cancelling).

    Raises :class:`RayNotInstalled`, :class:`RaySetupError`, and ``KeyboardInterrupt`` after
    stopping everything (see the module docstring).
    """
    ray = require_ray()
    opts = options or RayBatchOptions()
    device_kind(device)  # a bad --device is bad input before any cluster is touched
    todo = find_kernels(items) if isinstance(items, (str, Path)) else list(items)
    info = on_info or (lambda message: None)
    for key in ("verify_fn", "on_progress", "cancel", "device", "engine_name", "engine_factory"):
        pipeline.pop(key, None)
    if "workspace" in pipeline:
        pipeline["workspace"] = str(Path(pipeline["workspace"]).resolve())
    started_here = _connect(ray, opts, info)
    rows: list[BatchRow] = []
    inflight: dict[Any, BatchItem] = {}
    board = None
    try:
        resources = ray.cluster_resources()
        # a local instance started here has this environment already; Ray's prestarted workers
        # then serve the tasks (a runtime_env would need workers of its own)
        placement = JobPlacement(device_type=_device_type_for(device, resources.get("GPU", 0)),
                                 correctness_gpus=opts.correctness_gpus, max_retries=opts.max_retries,
                                 env={} if started_here else forwarded_environment(),
                                 ship_files=len([n for n in ray.nodes() if n.get("Alive")]) > 1)
        limit = opts.max_in_flight or _default_in_flight(resources, placement)
        info(f"Ray: {len(todo)} problem task(s), at most {limit} at once; verification on "
             + ("CPUs (Triton's interpreter)" if not placement.uses_gpus else
                f"GPUs ({placement.device_type}: timing on a whole GPU, correctness on "
                f"{placement.correctness_gpus:g} of one)"))
        # on the driver's node: it lives as long as the driver, not as long as some worker node
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        board = remote("board").options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            node_id=ray.get_runtime_context().get_node_id(), soft=True)).remote()
        settings = {"device": device, "engine_factory": engine_factory or EngineFactory(engine_name),
                    "pipeline": pipeline}
        pending = deque(todo)
        problem = remote("problem")
        while pending or inflight:
            while pending and len(inflight) < limit:
                item = pending.popleft()
                try:
                    payload = ProblemPayload.read(item)
                except OSError as exc:
                    _finish(rows, BatchRow(kernel=item.name, error=f"cannot read the problem: {exc}"), on_row)
                    continue
                ref = problem.options(**placement.task_options("problem")).remote(payload, placement, settings,
                                                                                  board)
                inflight[ref] = item
            done, _ = ray.wait(list(inflight), num_returns=len(inflight), timeout=opts.poll_s) if inflight \
                else ([], [])
            _drain(ray, board, on_start, on_event)
            for ref in done:
                item = inflight.pop(ref)
                _finish(rows, _row_of(ray, ref, item, opts), on_row)
            if cancel is not None and cancel.is_set():
                info("Ray: cancelled; stopping the tasks in flight")
                _stop(ray, list(inflight), opts, info)
                inflight.clear()
                break
        _drain(ray, board, on_start, on_event)
    except KeyboardInterrupt:
        info("Ray: interrupted; cancelling the tasks in flight")
        _stop(ray, list(inflight), opts, info)
        raise
    finally:
        if board is not None:
            with contextlib.suppress(Exception):  # already gone with the instance
                ray.kill(board)
        if started_here:
            ray.shutdown()
    return sorted(rows, key=lambda r: r.kernel)


def _finish(rows: list[BatchRow], row: BatchRow, on_row: Callable[[BatchRow], None] | None) -> None:
    rows.append(row)
    if on_row is not None:
        on_row(row)


def _row_of(ray: Any, ref: Any, item: BatchItem, opts: RayBatchOptions) -> BatchRow:
    from ray.exceptions import RayError, RayTaskError

    try:
        return BatchRow.from_dict(ray.get(ref))
    except RayTaskError as exc:  # our code raised in the task (optimize_one itself never does)
        cause = getattr(exc, "cause", None) or exc
        return BatchRow(kernel=item.name, error=f"the Ray task failed: {type(cause).__name__}: "
                                                f"{str(cause).strip().splitlines()[-1][:400] if str(cause).strip() else ''}")
    except RayError as exc:  # its worker or node died more often than max_retries allows
        text = str(exc).strip().splitlines()
        return BatchRow(kernel=item.name, attempts=opts.max_retries + 1,
                        error=f"the Ray task was lost after {opts.max_retries + 1} attempt(s): {type(exc).__name__}"
                              + (f": {text[0][:400]}" if text else ""))


def _drain(ray: Any, board: Any, on_start: Any, on_event: Any) -> None:
    if board is None:
        return
    try:
        events = ray.get(board.drain.remote(), timeout=30)
    except Exception:  # noqa: BLE001 - progress is advisory
        return
    for ev in events:
        kernel = str(ev.get("kernel", ""))
        if ev.get("event") == "started":
            if on_start is not None:
                on_start(kernel, {k: ev.get(k) for k in ("attempt", "pid", "host", "node")})
        elif on_event is not None:
            on_event(kernel, ev)


def _stop(ray: Any, refs: list[Any], opts: RayBatchOptions, info: Callable[[str], None]) -> None:
    """Cancel ``refs`` (recursively), give them ``cancel_grace_s`` to stop, then kill the rest."""
    if not refs:
        return
    for ref in refs:
        with contextlib.suppress(Exception):  # finished meanwhile
            ray.cancel(ref, force=False, recursive=True)
    deadline = time.monotonic() + opts.cancel_grace_s
    left = list(refs)
    while left and time.monotonic() < deadline:
        _, left = ray.wait(left, num_returns=len(left), timeout=min(0.5, max(0.0, deadline - time.monotonic())))
    if left:
        info(f"Ray: {len(left)} task(s) did not stop within {opts.cancel_grace_s:g} s; killing their workers")
        for ref in left:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True, recursive=True)
