"""Per-device timing lock shared across processes: a readers-writer lock.

Two verifications (two sessions, two browser tabs, a batch run) must never time kernels on the
same GPU at the same time, or each would measure the other's load; nor may one verification's
correctness runs (or a torch.compile autotuning its configs) use the GPU while another times on
it. Timing takes the lock **exclusively**; every other use of the GPU by a verification takes it
**shared** (``shared=True``): correctness runs share the device with each other, never with a
timing run.

The lock is an ``fcntl.flock`` on ``<lock_dir>/<device_key>.lock`` (exclusive or shared),
entered through a turnstile, an exclusive ``flock`` on ``<device_key>.gate``: a timing run holds
the gate while it waits for the shared holders to drain and while it times, so a stream of
correctness runs cannot starve it; a shared holder passes the gate and releases it at once. The
kernel releases a ``flock`` when the holder's file descriptor closes, including when the holder
is killed, so a crashed worker never leaves a stale lock behind. A process that holds a device
exclusively and asks for it shared (a timing run's own warm-up call) is let through. While
waiting for the exclusive lock, the caller is told that the run is queued (``on_queued``) and a
``queued`` progress event is appended to the job's ``progress.jsonl`` (format in
``xeforge_core.worker.job``), so the UI and the CLI can say so.

Standard library only: the verification worker imports this module.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from xeforge_core.errors import XeForgeError

__all__ = ["SHARED_WAIT_S", "DeviceLock", "LockTimeout", "default_lock_dir", "device_lock", "lock_path", "sharing"]

#: Seconds a shared holder waits for a timing run (and the shared holders that came before it)
#: before it runs without the lock: a long timing run, or a long shared hold ahead of it (a call
#: under compute-sanitizer), then costs the others at most this, never a stall.
SHARED_WAIT_S = 120.0


class LockTimeout(XeForgeError, TimeoutError):
    """Raised when the lock could not be taken within ``timeout_s`` seconds."""


def default_lock_dir() -> Path:
    """Directory of the per-device timing locks, shared by every process on this machine:
    ``$XEFORGE_LOCK_DIR`` or ``<system temp>/xeforge-devlocks``."""
    env = os.environ.get("XEFORGE_LOCK_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "xeforge-devlocks"


#: Lock files this process holds exclusively (a shared request for one of them is let through).
_HELD_EXCLUSIVE: set[Path] = set()


def lock_path(lock_dir: str | os.PathLike[str], device_key: str) -> Path:
    """Path of the lock file for ``device_key`` (e.g. ``"cuda0"``, ``"xpu:1"``) in ``lock_dir``.

    Characters other than letters, digits, ``.``, ``_`` and ``-`` in the key become ``_``.
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", device_key) or "device"
    return Path(lock_dir) / f"{safe}.lock"


def _append_event(progress_path: str | os.PathLike[str] | None, event: str, message: str) -> None:
    if not progress_path:
        return
    line = json.dumps({"t": time.time(), "event": event, "message": message})
    try:
        with open(progress_path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


class DeviceLock:
    """Cross-process lock on one device, used as a context manager: exclusive (timing), or
    shared with ``shared=True`` (any other GPU work of a verification; module docstring).

    ``lock_dir``: directory of the lock files (created if missing). ``device_key``: the device
    (e.g. ``"cuda0"``). ``on_queued(message)`` is called once if the lock is held by another
    process and this one must wait; ``progress_path`` (a ``progress.jsonl``) receives a
    ``queued`` event then and a ``lock_acquired`` event once the lock is taken.
    ``timeout_s``: give up after that many seconds of waiting (``LockTimeout``); ``None`` waits
    for as long as it takes (the parent's hard timeout bounds the worker anyway).
    ``poll_s``: how often a waiting process retries, in seconds. ``shared``: take the lock
    shared (no holder record is written; the ``queued`` and ``lock_acquired`` events only when
    a timing run made it wait, so that wait is not counted against the job's time limit).

    After entering, ``waited_s`` is how long (seconds) the lock was waited for.
    """

    def __init__(self, lock_dir: str | os.PathLike[str], device_key: str, *,
                 on_queued: Callable[[str], None] | None = None,
                 progress_path: str | os.PathLike[str] | None = None,
                 timeout_s: float | None = None, poll_s: float = 0.05, shared: bool = False) -> None:
        self.path = lock_path(lock_dir, device_key)
        self.gate = self.path.with_suffix(".gate")
        self.shared = shared
        self.device_key = device_key
        self.on_queued = on_queued
        self.progress_path = progress_path
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.waited_s = 0.0
        self._fd: int | None = None
        self._gate_fd: int | None = None
        self._passed = False  # a shared request inside this process's own exclusive hold

    def _holder(self) -> str:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""
        try:
            info = json.loads(text)
            return f" (held by pid {info.get('pid')})"
        except (ValueError, AttributeError):
            return ""

    def _take(self, fd: int, mode: int, start: float, queued: list[bool]) -> None:
        """``flock(fd, mode)``, polling; the first wait is announced, ``LockTimeout`` past
        ``timeout_s``."""
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
            if not queued[0]:
                queued[0] = True
                doing = "timing" if self.shared else "timing or running kernels"
                message = (f"queued: another verification is {doing} on {self.device_key}"
                           f"{self._holder()}; waiting for it to finish")
                _append_event(self.progress_path, "queued", message)
                if self.on_queued is not None:
                    self.on_queued(message)
            waited = time.monotonic() - start
            if self.timeout_s is not None and waited >= self.timeout_s:
                raise LockTimeout(f"device {self.device_key} stayed locked for {waited:.1f} s"
                                  f"{self._holder()}")
            time.sleep(self.poll_s)

    def acquire(self) -> DeviceLock:
        """Take the lock, waiting if needed. Raises ``LockTimeout`` past ``timeout_s``."""
        if self.shared and self.path in _HELD_EXCLUSIVE:
            self._passed = True
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        gate = os.open(self.gate, os.O_RDWR | os.O_CREAT, 0o666)
        fd = -1
        start = time.monotonic()
        queued = [False]
        try:
            self._take(gate, fcntl.LOCK_EX, start, queued)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            self._take(fd, fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX, start, queued)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            os.close(gate)
            raise
        self.waited_s = time.monotonic() - start
        self._fd = fd
        if self.shared:  # through the turnstile: the next holder may queue at it
            fcntl.flock(gate, fcntl.LOCK_UN)
            os.close(gate)
            if queued[0]:
                _append_event(self.progress_path, "lock_acquired",
                              f"device {self.device_key} shared again after waiting {self.waited_s:.1f} s")
            return self
        self._gate_fd = gate
        _HELD_EXCLUSIVE.add(self.path)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": time.time()}).encode(), 0)
        except OSError:
            pass
        _append_event(self.progress_path, "lock_acquired",
                      f"timing lock on {self.device_key} acquired"
                      + (f" after waiting {self.waited_s:.1f} s" if queued[0] else ""))
        return self

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._passed:
            self._passed = False
            return
        if self._fd is None:
            return
        if not self.shared:
            _HELD_EXCLUSIVE.discard(self.path)
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None
            if self._gate_fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._gate_fd, fcntl.LOCK_UN)
                os.close(self._gate_fd)
                self._gate_fd = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None or self._passed

    def __enter__(self) -> DeviceLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def device_lock(lock_dir: str | os.PathLike[str], device_key: str, *,
                on_queued: Callable[[str], None] | None = None,
                progress_path: str | os.PathLike[str] | None = None,
                timeout_s: float | None = None, shared: bool = False) -> DeviceLock:
    """``with device_lock(dir, "cuda0", on_queued=print): ...`` holds the device's timing lock
    for the body (shared with ``shared=True``). See ``DeviceLock`` for the arguments."""
    return DeviceLock(lock_dir, device_key, on_queued=on_queued, progress_path=progress_path,
                      timeout_s=timeout_s, shared=shared)


@contextlib.contextmanager
def sharing(lock_dir: str | os.PathLike[str], device_key: str, *, timeout_s: float = SHARED_WAIT_S,
            progress_path: str | os.PathLike[str] | None = None,
            on_give_up: Callable[[str], None] | None = None) -> Iterator[bool]:
    """``with sharing(dir, "cuda0"):`` holds the device's lock shared for the body, waiting at most
    ``timeout_s`` seconds; past that the body runs without it, ``on_give_up(message)`` and a
    ``lock_acquired`` event (which ends the ``queued`` wait in the job's accounting) say so. The
    value is whether the lock is held."""
    lock = DeviceLock(lock_dir, device_key, shared=True, progress_path=progress_path, timeout_s=timeout_s)
    try:
        lock.acquire()
    except LockTimeout as exc:
        message = f"ran without the device lock after waiting {timeout_s:g} s ({exc}): a timing run may have overlapped"
        _append_event(progress_path, "lock_acquired", message)
        if on_give_up is not None:
            on_give_up(message)
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
