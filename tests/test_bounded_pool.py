"""``benchmarks/bounded_pool.py``: a task that hangs costs its limit, not the run (the checks of
``bench_flash_attention.py`` and ``sweep_fa_hopper.py`` stalled for good on a GPU kernel that
never finished)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bounded_pool import log_tail, run_bounded, run_command_bounded  # noqa: E402


def _work(task: str) -> str:
    """A task for the pool: ``hang`` sleeps past any limit, ``crash`` ends its process, anything
    else comes back with the worker's pid."""
    if task == "hang":
        time.sleep(600)
    if task == "crash":
        os._exit(3)
    return f"{task}:{os.getpid()}"


def _run(tasks: list[str], workers: int) -> dict[int, str]:
    # the limit also covers starting a worker in place of a stopped one (a new process imports
    # this module): seconds under a loaded machine, so the limit leaves room for that
    rows = run_bounded(_work, tasks, workers=workers, task_timeout_s=20.0,
                       on_timeout=lambda t, s: f"{t}:timeout", on_crash=lambda t, c: f"{t}:crash {c}")
    return dict(rows)


def test_a_hang_and_a_crash_become_rows_and_the_rest_still_runs():
    start = time.monotonic()
    got = _run(["a", "hang", "b", "crash", "c", "d"], workers=2)
    assert time.monotonic() - start < 120  # the hang cost its limit, not 600 s
    assert got[1] == "hang:timeout" and got[3] == "crash:crash 3"
    assert sorted(got) == list(range(6))
    done = [got[i] for i in (0, 2, 4, 5)]
    assert [d.split(":")[0] for d in done] == ["a", "b", "c", "d"]


def test_workers_stay_warm_between_tasks():
    got = _run([str(i) for i in range(6)], workers=2)
    pids = {v.split(":")[1] for v in got.values()}
    assert len(pids) <= 2  # the same two processes served all six tasks


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="workers"):
        list(run_bounded(_work, ["a"], workers=0, task_timeout_s=1, on_timeout=print, on_crash=print))
    assert list(run_bounded(_work, [], workers=2, task_timeout_s=1, on_timeout=print, on_crash=print)) == []


def test_a_stopped_command_leaves_no_scratch_behind(tmp_path):
    """A benchmark child stopped at its limit cannot clean up: its TMPDIR and XEFORGE_CACHE_DIR
    are a folder of its own that the parent removes, and the row can quote the log's last lines."""
    code = ("import os, pathlib, time; d = pathlib.Path(os.environ['TMPDIR']); print(d, flush=True); "
            "(d / 'big.bin').write_bytes(b'0' * 1000); "
            "assert os.environ['XEFORGE_CACHE_DIR'].startswith(str(d)); print('12:00:00 step: written', flush=True); "
            "time.sleep(60)")
    log = tmp_path / "child.log"
    assert run_command_bounded([sys.executable, "-c", code], log, 5.0) is None
    scratch = Path(log.read_text().splitlines()[0])
    assert scratch.name.startswith("bounded-child-") and not scratch.exists()
    # the progress line, not the traceback SIGTERM printed after it
    assert log_tail(log) == "12:00:00 step: written" and log_tail(tmp_path / "absent.log") == "(no log)"
