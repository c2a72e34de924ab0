"""Worker processes with a limit per task: a task that hangs (a kernel that never finishes on the
GPU) costs its limit, not the run.

``concurrent.futures.ProcessPoolExecutor`` cannot stop one task: a worker stuck in a kernel that
never completes keeps its slot, and the pool's shutdown waits for it forever. Here each worker is
a spawned process fed one task at a time through a pipe; a task that gives no result within
``task_timeout_s`` seconds has its worker killed (the driver ends the worker's GPU context and
the kernel with it), becomes the row ``on_timeout(task, seconds)``, and a fresh worker takes the
next task. Workers otherwise live for the whole run, so the modules and compiled kernels they
load stay warm between tasks. A worker that dies by itself (a crash) is replaced the same way and
its task becomes ``on_crash(task, exitcode)``.

    rows = run_bounded(check_task, tasks, workers=12, task_timeout_s=120,
                       on_timeout=lambda t, s: {**t, "ok": False, "error": f"no result in {s:.0f} s"},
                       on_crash=lambda t, c: {**t, "ok": False, "error": f"worker died ({c})"})

``fn`` must be importable by name (a module-level function), as for any spawned process.

``run_command_bounded`` is the same limit for one command in a process group of its own (a
benchmark's child per problem or pair): stopped with SIGTERM at the limit, so its own worker pools
stop their workers at exit, then SIGKILL for what is left of the group 30 s later.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

__all__ = ["log_tail", "run_bounded", "run_command_bounded"]


def log_tail(log: Path, lines: int = 3, chars: int = 300) -> str:
    """The last ``lines`` progress lines of ``log`` (those that start with an ``HH:MM:SS`` time;
    every line where none does) joined by " / " (at most ``chars`` characters): what a row says of
    a child stopped at its limit, so that the step it was in is on record, not the traceback its
    stop printed."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    progress = [line for line in text if re.match(r"\d\d:\d\d:\d\d ", line)] or text
    return " / ".join(line.strip() for line in progress[-lines:])[:chars]


def run_command_bounded(cmd: list[str], log: Path, limit_s: float, env: Mapping[str, str] | None = None) -> int | None:
    """Run ``cmd`` in a new session (its own process group), stdout and stderr to ``log``, for at
    most ``limit_s`` seconds: its exit status, or ``None`` when it was stopped at the limit
    (SIGTERM to the group, SIGKILL 30 s later if anything is left).

    The command gets a scratch folder of its own as ``TMPDIR`` and ``XEFORGE_CACHE_DIR``, removed
    when it ends however it ends: a child stopped at its limit cannot clean up after itself, and
    at a published size its verifier's job folders and saved baseline outputs reach tens of GB
    (on the H200 machine's 64 GB disk, one stopped pair left the next pairs no room, 2026-12-04)."""
    scratch = Path(tempfile.mkdtemp(prefix="bounded-child-"))
    child_env = dict(env if env is not None else os.environ, TMPDIR=str(scratch),
                     XEFORGE_CACHE_DIR=str(scratch / "cache"))
    try:
        with log.open("w", encoding="utf-8") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=child_env)
            try:
                return proc.wait(timeout=limit_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _serve(fn: Callable[[Any], Any], conn: Connection) -> None:
    """A worker: call ``fn`` on each task received until ``None`` arrives; send each result."""
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(fn(task))


class _Worker:
    def __init__(self, ctx: Any, fn: Callable[[Any], Any]) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(fn, child), daemon=True)
        self.proc.start()
        child.close()
        self.index: int | None = None
        self.started = 0.0

    def give(self, index: int, task: Any) -> None:
        self.index, self.started = index, time.monotonic()
        self.conn.send(task)

    def exit_code(self) -> int | None:
        """The exit status of a worker that died by itself. Its pipe reads end-of-file as the
        process exits, before the parent has reaped it, so ``exitcode`` alone can still be
        ``None`` there: wait (at most 5 s) for the process to be reaped first."""
        self.proc.join(5)
        return self.proc.exitcode

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def run_bounded(fn: Callable[[Any], Any], tasks: list[Any], *, workers: int, task_timeout_s: float,
                on_timeout: Callable[[Any, float], Any], on_crash: Callable[[Any, int | None], Any],
                ) -> Iterator[tuple[int, Any]]:
    """Run ``fn(task)`` for every task in ``workers`` spawned processes; yield ``(index, result)``
    in completion order (``index`` into ``tasks``). A task with no result after
    ``task_timeout_s`` seconds yields ``on_timeout(task, seconds)``; one whose worker died yields
    ``on_crash(task, exitcode)``. Raises ``ValueError`` for ``workers < 1`` or a limit that is
    not positive; an exception inside ``fn`` is ``fn``'s to turn into a result (it kills the
    worker otherwise, and the task is reported as a crash)."""
    if workers < 1 or task_timeout_s <= 0:
        raise ValueError(f"workers must be at least 1 and task_timeout_s positive (got {workers}, {task_timeout_s})")
    ctx = multiprocessing.get_context("spawn")
    pending = list(enumerate(tasks))[::-1]
    pool = [_Worker(ctx, fn) for _ in range(min(workers, len(tasks)))]
    try:
        for w in pool:
            if pending:
                w.give(*pending.pop())
        while any(w.index is not None for w in pool):
            busy = [w for w in pool if w.index is not None]
            next_deadline = min(w.started for w in busy) + task_timeout_s
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy],
                         timeout=max(0.0, next_deadline - time.monotonic()))
            for i, w in enumerate(pool):
                if w.index is None:
                    continue
                index, task = w.index, tasks[w.index]
                result: Any = None
                replace = False
                if w.conn in ready or w.conn.poll():
                    try:
                        result = w.conn.recv()
                    except (EOFError, OSError):
                        result, replace = on_crash(task, w.exit_code()), True
                elif w.proc.sentinel in ready:
                    result, replace = on_crash(task, w.exit_code()), True
                elif time.monotonic() - w.started >= task_timeout_s:
                    result, replace = on_timeout(task, time.monotonic() - w.started), True
                else:
                    continue
                w.index = None
                if replace:
                    w.kill()
                    w = pool[i] = _Worker(ctx, fn)
                yield index, result
                if pending:
                    w.give(*pending.pop())
    finally:
        for w in pool:
            if w.index is None and w.proc.is_alive():
                with contextlib.suppress(OSError):
                    w.conn.send(None)
                w.proc.join(5)
            w.kill()
