"""The progress line of ``xeforge batch``: done / running / failed out of the total, and an ETA.

On a terminal the line is redrawn in place (``\\r``) and other output is printed above it; on
anything else (a CI log, a pipe) a plain line is printed each time a count changes, so logs stay
short. The ETA is the mean wall time per finished kernel in this run, divided over the kernels
seen running at once, times the kernels left: with four kernels in flight and 30 s per kernel, it
says 7.5 s per remaining kernel. Standard library only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["BatchProgress", "format_duration"]


def format_duration(seconds: float | None) -> str:
    """``75`` -> ``"1m15s"``, ``3725`` -> ``"1h02m"``, ``9`` -> ``"9s"``; ``None`` -> ``"–"``."""
    if seconds is None:
        return "–"
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class BatchProgress:
    """Counts of a batch and their one-line rendering.

    ``total``: kernels in this run (those skipped by ``--resume`` are not counted; ``skipped``
    names how many there were, for the line). ``stream``: where the line goes; ``tty``: redraw
    in place (default: ``stream.isatty()``). ``clock``: monotonic seconds (tests pass a fake).
    Thread-safe: workers of the sequential batch call it from their threads.
    """

    def __init__(self, total: int, stream: TextIO, *, skipped: int = 0, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.skipped = skipped
        self.stream = stream
        self.tty = bool(stream.isatty()) if tty is None else tty
        self.clock = clock
        self.started_at = clock()
        self.running: set[str] = set()
        self.done = 0
        self.failed = 0
        self.peak_running = 0
        self._busy_s = 0.0  # summed wall time of finished kernels
        self._lock = threading.Lock()
        self._last = ""
        self._drawn = False

    # counts ---------------------------------------------------------------------------------

    def start(self, kernel: str) -> None:
        """``kernel`` started (again, after a retry: counted once)."""
        with self._lock:
            self.running.add(kernel)
            self.peak_running = max(self.peak_running, len(self.running))
        self.refresh()

    def finish(self, kernel: str, *, failed: bool, seconds: float = 0.0) -> None:
        """``kernel`` finished; ``failed`` when its row has an error; ``seconds`` its wall time."""
        with self._lock:
            self.running.discard(kernel)
            self.failed += 1 if failed else 0
            self.done += 0 if failed else 1
            self._busy_s += max(0.0, seconds)
        self.refresh()

    def eta_s(self) -> float | None:
        """Seconds until every kernel is finished, or ``None`` before the first one finishes."""
        finished = self.done + self.failed
        if not finished:
            return None
        left = max(0, self.total - finished)
        parallel = max(1, self.peak_running)
        per_kernel = self._busy_s / finished if self._busy_s > 0 else (self.clock() - self.started_at) / finished * parallel
        return left * per_kernel / parallel

    def line(self) -> str:
        """``"batch 3/10: 2 done, 2 running, 1 failed; 1m05s elapsed, ETA 2m10s"``."""
        finished = self.done + self.failed
        extra = f" (+{self.skipped} from the summary)" if self.skipped else ""
        return (f"batch {finished}/{self.total}{extra}: {self.done} done, {len(self.running)} running, "
                f"{self.failed} failed; {format_duration(self.clock() - self.started_at)} elapsed, "
                f"ETA {format_duration(self.eta_s()) if finished < self.total else '0s'}")

    # output ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraw the line (terminal) or print it if the counts changed (log)."""
        with self._lock:
            text = self.line()
            if self.tty:
                self.stream.write("\r\033[K" + text)
                self._drawn = True
                self.stream.flush()
                return
            key = text.split(";")[0]
            if key != self._last:
                self._last = key
                self.stream.write(text + "\n")
                self.stream.flush()

    def print(self, text: str) -> None:
        """Print ``text`` as its own line(s) above the progress line."""
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write("\r\033[K")
            self.stream.write(text.rstrip("\n") + "\n")
            self.stream.flush()
        if self.tty:
            self.refresh()

    def close(self) -> None:
        """End the line on a terminal (so the next output starts on a new line)."""
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write("\n")
                self.stream.flush()
                self._drawn = False
