"""Background jobs for the workbench: long work (a verification, a proposal, a CoVeR stage,
a doctor run) runs on a thread so that the page stays responsive, reports progress, and can
be cancelled.

The work itself never executes kernel code in this process: the callables given to
:class:`BackgroundJob` call into ``xeforge_core`` (``verify``, ``run_stage``, the doctor),
which run kernels in isolated worker subprocesses. Cancellation sets a
:class:`threading.Event` that those APIs receive as ``cancel``; the job is marked cancelled as
soon as the user asks, and the worker's own timeout still bounds how long it can run.
"""

from __future__ import annotations

import enum
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class JobState(str, enum.Enum):
    """Life cycle of a background job."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class ProgressEvent:
    """One progress message: seconds since the job started, the text, and an optional
    completed fraction in [0, 1]."""

    elapsed: float
    message: str
    fraction: float | None = None


def describe_progress(*args: Any, **kwargs: Any) -> tuple[str, float | None]:
    """Turn whatever a core API passes to ``on_progress`` into ``(message, fraction)``.

    Accepts a plain string, a dict (``message``/``event``/``fraction`` keys, as in the
    worker's ``progress.jsonl``), an object with a ``message`` attribute, or
    ``(message, fraction)`` / ``(done, total)`` positional forms.
    """
    fraction = kwargs.get("fraction")
    message = kwargs.get("message", "")
    if args:
        first = args[0]
        if isinstance(first, dict):
            message = str(first.get("message") or first.get("event") or first)
            fraction = first.get("fraction", fraction)
            if first.get("event") in ("queued",) and first.get("message"):
                message = f"queued: {first['message']}"
        elif hasattr(first, "message") and not isinstance(first, str):
            message = str(first.message)
            fraction = getattr(first, "fraction", fraction)
        elif len(args) >= 2 and isinstance(first, (int, float)) and isinstance(args[1], (int, float)):
            total = args[1] or 1
            fraction = float(first) / float(total)
            message = str(args[2]) if len(args) > 2 else f"{first}/{args[1]}"
        else:
            message = str(first)
            if len(args) >= 2 and isinstance(args[1], (int, float)):
                fraction = float(args[1])
    if fraction is not None:
        try:
            fraction = min(1.0, max(0.0, float(fraction)))
        except (TypeError, ValueError):
            fraction = None
    return str(message), fraction


WorkFn = Callable[[Callable[..., None], threading.Event], Any]


class BackgroundJob:
    """Run ``work(on_progress, cancel)`` on a daemon thread.

    ``work`` receives a progress callback (any of the forms :func:`describe_progress`
    understands) and the cancel event; its return value becomes :attr:`result`, an exception
    becomes :attr:`error` (with the traceback in :attr:`error_trace`).
    """

    def __init__(self, label: str, work: WorkFn, *, kind: str = "job",
                 meta: dict[str, Any] | None = None) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.label = label
        self.kind = kind
        self.meta: dict[str, Any] = dict(meta or {})
        self._work = work
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._state = JobState.PENDING
        self._events: list[ProgressEvent] = []
        self._fraction: float | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.error_trace: str = ""
        self.started_at: float | None = None
        self.finished_at: float | None = None

    # -- control -------------------------------------------------------------------------
    def start(self) -> BackgroundJob:
        """Start the thread (once). Returns ``self``."""
        with self._lock:
            if self._thread is not None:
                return self
            self._state = JobState.RUNNING
            self.started_at = time.monotonic()
            self._thread = threading.Thread(target=self._run, name=f"xeforge-{self.kind}-{self.id}",
                                            daemon=True)
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the work to stop; the job reads as cancelled from now on."""
        self._cancel.set()
        with self._lock:
            if not self._state.finished:
                self._state = JobState.CANCELLED
                self.finished_at = time.monotonic()
                self._events.append(ProgressEvent(self.elapsed, "cancel requested"))

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the thread ends (or ``timeout`` seconds). True if it has ended."""
        if self._thread is None:
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- state ---------------------------------------------------------------------------
    @property
    def state(self) -> JobState:
        with self._lock:
            return self._state

    @property
    def finished(self) -> bool:
        return self.state.finished

    @property
    def cancel_event(self) -> threading.Event:
        return self._cancel

    @property
    def events(self) -> list[ProgressEvent]:
        with self._lock:
            return list(self._events)

    @property
    def fraction(self) -> float | None:
        with self._lock:
            return self._fraction

    @property
    def last_message(self) -> str:
        with self._lock:
            return self._events[-1].message if self._events else ""

    @property
    def elapsed(self) -> float:
        if self.started_at is None:
            return 0.0
        end = self.finished_at if self.finished_at is not None else time.monotonic()
        return end - self.started_at

    def progress(self, *args: Any, **kwargs: Any) -> None:
        """The callback handed to the work; safe to call from any thread."""
        message, fraction = describe_progress(*args, **kwargs)
        with self._lock:
            if fraction is not None:
                self._fraction = fraction
            if message:
                self._events.append(ProgressEvent(self.elapsed, message, fraction))
                del self._events[:-200]

    # -- thread body ---------------------------------------------------------------------
    def _run(self) -> None:
        try:
            result = self._work(self.progress, self._cancel)
        except BaseException as exc:  # noqa: BLE001 - a failed job must never take the UI down
            with self._lock:
                self.error = exc
                self.error_trace = traceback.format_exc()
                if self._state is not JobState.CANCELLED:
                    self._state = JobState.FAILED
                    self.finished_at = time.monotonic()
            return
        with self._lock:
            self.result = result
            if self._state is not JobState.CANCELLED:
                self._state = JobState.DONE
                self._fraction = 1.0
                self.finished_at = time.monotonic()


class JobBoard:
    """The jobs of one browser session, by id, plus a named "current" job per purpose
    (for example ``verify`` or ``propose``), so a page can find its job again after a rerun."""

    def __init__(self) -> None:
        self._jobs: dict[str, BackgroundJob] = {}
        self._current: dict[str, str] = {}
        self._lock = threading.Lock()

    def submit(self, purpose: str, job: BackgroundJob) -> BackgroundJob:
        """Start ``job`` as the current job for ``purpose``. A still-running job for the same
        purpose is cancelled first (one verification at a time per purpose)."""
        previous = self.current(purpose)
        if previous is not None and not previous.finished:
            previous.cancel()
        with self._lock:
            self._jobs[job.id] = job
            self._current[purpose] = job.id
        return job.start()

    def current(self, purpose: str) -> BackgroundJob | None:
        with self._lock:
            jid = self._current.get(purpose)
            return self._jobs.get(jid) if jid else None

    def clear(self, purpose: str) -> None:
        """Forget the current job for ``purpose`` (cancelling it if it still runs)."""
        job = self.current(purpose)
        if job is not None and not job.finished:
            job.cancel()
        with self._lock:
            self._current.pop(purpose, None)

    def running(self) -> list[BackgroundJob]:
        with self._lock:
            return [j for j in self._jobs.values() if not j.finished]

    def get(self, job_id: str) -> BackgroundJob | None:
        with self._lock:
            return self._jobs.get(job_id)
