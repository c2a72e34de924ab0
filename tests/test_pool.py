"""The warm worker pool (xeforge_core.pool): workers started ahead of need, each used for one
job only. What one candidate leaves behind never reaches the next; a hang or an abort in a
pooled worker is a verdict and the pool goes on; no pool process outlives the CLI or a program
that is stopped (SIGTERM) or killed (SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests import proc_helpers
from xeforge_core import pool, runner
from xeforge_core.verdict import VerdictKind

FIX = Path(__file__).parent / "fixtures" / "process"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One cache (the baseline runs once), one lock dir and one marker for the module, the pool
    on with one worker kept ready, and a fresh pool at the start and the end."""
    mark = f"mark-{uuid.uuid4().hex}"
    mp = pytest.MonkeyPatch()
    mp.setenv("XEFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("XEFORGE_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
    mp.setenv(proc_helpers.MARK_VAR, mark)
    mp.delenv(pool.POOL_ENV, raising=False)
    mp.setenv(pool.SIZE_ENV, "1")
    pool.shutdown()
    yield mark
    pool.shutdown()
    mp.undo()


@pytest.fixture(scope="module")
def problem():
    from xeforge_core.problem import load_problem

    return load_problem(FIX / "add_baseline.py")


def _verify(problem, fixture: str, **opts):
    from xeforge_core.verify import VerifyOptions, verify

    # The cache is the module's own: the baseline's saved outputs are reused, and each source is
    # new to the verdict cache, so every call runs one candidate job.
    options = VerifyOptions(**{"timeout_s": 120.0, "seeds": 1, "distributions": ["normal"], **opts})
    if not fixture:
        source = problem.kernel.source + f"\n# {uuid.uuid4().hex}\n"
    elif "pool_" in fixture:
        source = proc_helpers.planted(fixture)
    else:
        source = (FIX / fixture).read_text()
    return verify(problem, source, device="cpu", options=options)


def _wait_ready(p: pool.WorkerPool, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with p._lock:
            slots = [s for v in p._idle.values() for s in v]
        if slots and all(s.ready for s in slots):
            return
        time.sleep(0.1)
    raise AssertionError(f"no pool worker got ready: {p.stats()} "
                         + " | ".join(s.warm_output()[-500:] for v in p._idle.values() for s in v))


def _pool_processes(p: pool.WorkerPool) -> set[int]:
    with p._lock:
        slots = [s for v in p._idle.values() for s in v]
    return {pid for s in slots for pid in runner.group_members(s.proc.pid)}


def test_one_warm_pool_through_leftovers_a_hang_and_an_abort(env, problem):
    """Candidates in a row through one pool: what the first leaves behind (a thread, a global,
    a monkey-patch, ...) does not reach the next; a hang and an abort are verdicts; the pool
    serves the next one warm; only the worker kept ready is alive in the end."""
    p = pool.default_pool()
    pool.prestart("cpu", count=1)
    _verify(problem, "")  # the baseline's outputs are saved, and a worker is started ahead
    _wait_ready(p)
    warm_before = p.served_warm
    polluter = _verify(problem, "cand_pool_polluter.py")
    assert "POLLUTED" in polluter.stdout, (polluter.kind, polluter.reason)  # it ran, whatever its verdict
    _wait_ready(p)  # the worker started while the polluter ran
    inspector = _verify(problem, "cand_pool_inspector.py")
    assert inspector.kind is VerdictKind.OK, inspector.reason
    assert "POOL-CHECK builtin=False env=False patch=False thread=False tmpfile=False" in inspector.stdout
    assert p.served_warm >= warm_before + 2  # both were served by a worker started ahead

    hang = _verify(problem, "cand_infinite_loop.py", timeout_s=4.0)
    assert hang.kind is VerdictKind.TIMEOUT, hang.reason
    abort = _verify(problem, "cand_abort.py")
    assert abort.kind is VerdictKind.CRASH and "SIGABRT" in abort.reason, abort.reason
    _wait_ready(p)
    served = p.served_warm
    ok = _verify(problem, "")
    assert ok.kind is VerdictKind.OK, ok.reason
    assert p.served_warm == served + 1 and not ok.cached
    # only the one worker kept ready is alive: every used one is gone
    assert set(proc_helpers.marked_processes(env)) == _pool_processes(p)


def test_no_pool_process_outlives_the_cli(env):
    out = subprocess.run([sys.executable, "-m", "xeforge_core.cli", "verify", str(FIX / "add_baseline.py"),
                          str(FIX / "add_baseline.py"), "--device", "cpu", "--seeds", "1", "--no-cache",
                          "--quiet"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "verdict: OK" in out.stdout
    time.sleep(0.5)
    # the module's own pool may hold workers; the CLI's had the same marker
    ours = _pool_processes(pool.default_pool())
    assert set(proc_helpers.marked_processes(env)) <= ours, "a worker outlived the CLI"


_HOLDER = """
import signal, sys, time
from xeforge_core import pool
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))  # as the CLI and Streamlit do
pool.prestart("cpu", count=1)
p = pool.default_pool()
while not all(s.ready for v in p._idle.values() for s in v):
    time.sleep(0.1)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_no_pool_process_outlives_a_program_that_is_stopped_or_killed(env, how):
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, proc_helpers.MARK_VAR: env + "-holder"})
    try:
        assert holder.stdout.readline().strip() == "ready"
        workers = proc_helpers.marked_processes(env + "-holder")
        assert len(workers) >= 2  # the program and its ready worker
        holder.send_signal(how)
        holder.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc_helpers.marked_processes(env + "-holder"):
            time.sleep(0.1)
        assert proc_helpers.marked_processes(env + "-holder") == [], "a pool worker outlived its program"
    finally:
        if holder.poll() is None:
            holder.kill()


def test_pool_settings(monkeypatch):
    monkeypatch.delenv(pool.POOL_ENV, raising=False)
    assert pool.pool_enabled()
    monkeypatch.setenv(pool.POOL_ENV, "0")
    assert not pool.pool_enabled() and pool.prestart("cpu") == 0
