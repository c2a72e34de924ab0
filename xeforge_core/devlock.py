"""Per-device timing lock shared across processes.

Two verifications (two sessions, two browser tabs, a batch run) must never time kernels on the
same GPU at the same time, or each would measure the other's load. The lock is an exclusive
``fcntl.flock`` on ``<lock_dir>/<device_key>.lock``; the kernel releases it when the holder's
file descriptor closes, including when the holder is killed, so a crashed worker never leaves a
stale lock behind. While waiting, the caller is told that the run is queued (``on_queued``) and a
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
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from xeforge_core.errors import XeForgeError

__all__ = ["DeviceLock", "LockTimeout", "default_lock_dir", "device_lock", "lock_path"]


class LockTimeout(XeForgeError, TimeoutError):
    """Raised when the lock could not be taken within ``timeout_s`` seconds."""


def default_lock_dir() -> Path:
    """Directory of the per-device timing locks, shared by every process on this machine:
    ``$XEFORGE_LOCK_DIR`` or ``<system temp>/xeforge-devlocks``."""
    env = os.environ.get("XEFORGE_LOCK_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "xeforge-devlocks"


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
    """Exclusive, cross-process lock on one device, used as a context manager.

    ``lock_dir``: directory of the lock files (created if missing). ``device_key``: the device
    (e.g. ``"cuda0"``). ``on_queued(message)`` is called once if the lock is held by another
    process and this one must wait; ``progress_path`` (a ``progress.jsonl``) receives a
    ``queued`` event then and a ``lock_acquired`` event once the lock is taken.
    ``timeout_s``: give up after that many seconds of waiting (``LockTimeout``); ``None`` waits
    for as long as it takes (the parent's hard timeout bounds the worker anyway).
    ``poll_s``: how often a waiting process retries, in seconds.

    After entering, ``waited_s`` is how long (seconds) the lock was waited for.
    """

    def __init__(self, lock_dir: str | os.PathLike[str], device_key: str, *,
                 on_queued: Callable[[str], None] | None = None,
                 progress_path: str | os.PathLike[str] | None = None,
                 timeout_s: float | None = None, poll_s: float = 0.05) -> None:
        self.path = lock_path(lock_dir, device_key)
        self.device_key = device_key
        self.on_queued = on_queued
        self.progress_path = progress_path
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.waited_s = 0.0
        self._fd: int | None = None

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

    def acquire(self) -> DeviceLock:
        """Take the lock, waiting if needed. Raises ``LockTimeout`` past ``timeout_s``."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        start = time.monotonic()
        queued = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                if not queued:
                    queued = True
                    message = (f"queued: another verification is timing on {self.device_key}"
                               f"{self._holder()}; waiting for it to finish")
                    _append_event(self.progress_path, "queued", message)
                    if self.on_queued is not None:
                        self.on_queued(message)
                waited = time.monotonic() - start
                if self.timeout_s is not None and waited >= self.timeout_s:
                    raise LockTimeout(f"device {self.device_key} stayed locked for {waited:.1f} s"
                                      f"{self._holder()}")
                time.sleep(self.poll_s)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.waited_s = time.monotonic() - start
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": time.time()}).encode(), 0)
        except OSError:
            pass
        _append_event(self.progress_path, "lock_acquired",
                      f"timing lock on {self.device_key} acquired"
                      + (f" after waiting {self.waited_s:.1f} s" if queued else ""))
        return self

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def __enter__(self) -> DeviceLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def device_lock(lock_dir: str | os.PathLike[str], device_key: str, *,
                on_queued: Callable[[str], None] | None = None,
                progress_path: str | os.PathLike[str] | None = None,
                timeout_s: float | None = None) -> DeviceLock:
    """``with device_lock(dir, "cuda0", on_queued=print): ...`` holds the device's timing lock
    for the body. See ``DeviceLock`` for the arguments."""
    return DeviceLock(lock_dir, device_key, on_queued=on_queued, progress_path=progress_path,
                      timeout_s=timeout_s)
