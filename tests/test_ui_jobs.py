"""Background jobs with progress and cancel (xeforge_core.ui.jobs)."""

from __future__ import annotations

import threading
import time

from xeforge_core.ui.jobs import BackgroundJob, JobBoard, JobState, describe_progress


def test_job_runs_reports_progress_and_result() -> None:
    def work(progress, cancel):
        progress("compile")
        progress({"event": "step", "message": "correctness", "fraction": 0.5})
        progress(3, 4, "seed 3")
        return 42

    job = BackgroundJob("demo", work).start()
    assert job.wait(5)
    assert job.state is JobState.DONE and job.result == 42
    assert [e.message for e in job.events] == ["compile", "correctness", "seed 3"]
    assert job.fraction == 1.0


def test_job_failure_is_captured_not_raised() -> None:
    def work(progress, cancel):
        raise RuntimeError("boom")

    job = BackgroundJob("bad", work).start()
    assert job.wait(5)
    assert job.state is JobState.FAILED
    assert "boom" in str(job.error) and "RuntimeError" in job.error_trace


def test_cancel_marks_job_and_signals_work() -> None:
    seen = threading.Event()

    def work(progress, cancel):
        while not cancel.wait(0.01):
            pass
        seen.set()
        return "late"

    job = BackgroundJob("long", work).start()
    time.sleep(0.05)
    assert job.state is JobState.RUNNING
    job.cancel()
    assert job.state is JobState.CANCELLED
    assert job.wait(5) and seen.is_set()
    assert job.state is JobState.CANCELLED  # a late result does not undo the cancel


def test_board_replaces_running_job_per_purpose() -> None:
    board = JobBoard()
    gate = threading.Event()
    first = board.submit("verify", BackgroundJob("1", lambda p, c: c.wait(5)))
    second = board.submit("verify", BackgroundJob("2", lambda p, c: gate.wait(5) and "ok"))
    assert first.state is JobState.CANCELLED
    assert board.current("verify") is second
    gate.set()
    assert second.wait(5) and second.result == "ok"
    board.clear("verify")
    assert board.current("verify") is None


def test_describe_progress_forms() -> None:
    assert describe_progress("x") == ("x", None)
    assert describe_progress({"event": "queued", "message": "waiting for cuda:0"}) == (
        "queued: waiting for cuda:0", None)
    assert describe_progress(1, 2) == ("1/2", 0.5)
    assert describe_progress("half", 0.5) == ("half", 0.5)
    assert describe_progress(message="m", fraction=7) == ("m", 1.0)
