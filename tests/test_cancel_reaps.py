"""Cancel in the workbench (a ``BackgroundJob`` whose verification's worker is sleeping in the
candidate) kills the job's whole process group and reaps it: no process of the job is left, not
even a zombie. The warm worker the pool started meanwhile, from the job's short-lived thread,
survives that thread (the sandbox's ``--die-with-parent`` fires when the forking *thread* ends:
the pool starts its workers from one long-lived thread) and is alive and ready for the next job,
not a dead ``bwrap`` waiting to be reaped; ``pool.shutdown`` then leaves no child at all."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.proc_helpers import child_states
from xeforge_core import pool, sandbox
from xeforge_core.problem import load_problem
from xeforge_core.ui.jobs import BackgroundJob
from xeforge_core.verify import VerificationCancelled, VerifyOptions, verify

SAMPLE = Path(__file__).resolve().parents[1] / "sample_kernels" / "01_vector_add.py"
SLEEPING = SAMPLE.read_text().replace(
    "def forward(self", "def forward(self, *args, **kwargs):\n        import time\n        time.sleep(600)\n\n"
    "    def _unused(self", 1)


@pytest.fixture
def warm_pool(tmp_path, monkeypatch):
    if not sandbox.isolation().sandboxed:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the sandbox tests, but: {sandbox.isolation().summary}")
        pytest.skip(sandbox.isolation().summary)
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XEFORGE_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv(pool.POOL_ENV, raising=False)
    monkeypatch.setenv(pool.SIZE_ENV, "1")  # the app's default: one worker kept ready
    pool.shutdown()
    yield pool.default_pool()
    pool.shutdown()


def _settle(slots, limit_s: float = 180.0) -> None:
    """Wait until every idle pool worker is ready (warm) or has died."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not all(s.ready or not s.alive() for s in slots):
        time.sleep(0.1)


def test_cancel_reaps_the_job_and_leaves_only_a_live_warm_worker(warm_pool):
    before = set(child_states())

    def work(progress, cancel):
        return verify(load_problem(SAMPLE), SLEEPING, device="cpu", on_progress=progress, cancel=cancel,
                      options=VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], use_cache=False))

    job = BackgroundJob("verify", work).start()
    deadline = time.monotonic() + 180
    while "sizes: probing the candidate" not in job.last_message and time.monotonic() < deadline:
        assert not job.finished, job.error_trace
        time.sleep(0.1)
    assert "sizes: probing the candidate" in job.last_message, job.events
    idle = [s for slots in warm_pool._idle.values() for s in slots]
    job_workers = set(child_states()) - before - {s.proc.pid for s in idle}
    assert job_workers, "the sleeping job's worker is not a child of this process"

    job.cancel()
    assert job.wait(60)
    assert isinstance(job.error, VerificationCancelled)
    assert not job_workers & set(child_states()), "the cancelled job's worker is still there (or not reaped)"

    _settle(idle)
    left = {pid: state for pid, state in child_states().items() if pid not in before}
    assert "Z" not in left.values(), f"zombie children: {left}"
    assert set(left) == {s.proc.pid for s in idle if s.alive()} and all(s.alive() for s in idle), left

    pool.shutdown()
    assert not set(child_states()) - before


def test_a_worker_started_from_a_thread_that_ends_lives_on(warm_pool):
    """The pool's warm-up from a thread that ends (a Streamlit script run, a job): the thread
    waits until its worker is ready (the sandbox has armed its parent-death signal by then),
    then ends; the worker must outlive it."""
    before = set(child_states())

    def warm_up() -> None:
        pool.prestart("cpu", count=1)
        _settle([s for slots in warm_pool._idle.values() for s in slots])

    t = threading.Thread(target=warm_up)
    t.start()
    t.join()
    (slot,) = [s for slots in warm_pool._idle.values() for s in slots]
    assert slot.ready, f"the warm worker never got ready: {slot.warm_output()}"
    with pytest.raises(subprocess.TimeoutExpired):
        status = slot.proc.wait(timeout=5)
        pytest.fail(f"the warm worker died (status {status}) with the thread that started it")
    pool.shutdown()
    assert not set(child_states()) - before
