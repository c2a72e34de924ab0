"""The isolated runner: fresh process group, timeouts, signals, memory limits, scrubbed
environment, captured output, progress, cancellation, and no process left behind."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests import proc_helpers
from xeforge_core import runner, sandbox
from xeforge_core.runner import classify, run_worker
from xeforge_core.verdict import VerdictKind
from xeforge_core.worker_outcome import find_heap_corruption

FAKE = Path(__file__).parent / "fixtures" / "process" / "fake_worker.py"
MARK = f"mark-{uuid.uuid4().hex}"
#: The tests run as the machine runs workers: in the sandbox where it can be set up (CI installs
#: bubblewrap), else with process isolation only (tests/test_sandbox.py covers both).
SANDBOXED = sandbox.isolation().sandboxed


@pytest.fixture(autouse=True)
def _marked(monkeypatch):
    """A marker every worker inherits, to find leftovers whatever PID namespace they ran in."""
    monkeypatch.setenv("XEFORGE_TEST_MARK", MARK)


def marked_processes() -> list[int]:
    """Live processes (other than this one) whose environment carries the test marker."""
    return proc_helpers.marked_processes(MARK)


def _run(behavior: str, tmp_path: Path, **kw):
    job = {"role": "probe", "device": kw.pop("device", "cpu"), "behavior": behavior}
    job.update(kw.pop("job", {}))
    kw.setdefault("timeout_s", 20.0)
    return run_worker(job, command=[sys.executable, str(FAKE)], job_dir=tmp_path / "job", **kw)


_alive = proc_helpers.alive


def _assert_nothing_left(outcome, tmp_path: Path) -> None:
    assert outcome.pid is not None
    assert runner.group_members(outcome.pid) == []
    assert not _alive(outcome.pid)
    assert marked_processes() == []
    child = tmp_path / "job" / "child.pid"
    if child.exists() and not SANDBOXED:  # in the sandbox that PID is of its own namespace
        assert not _alive(int(child.read_text()))


def test_ok_result_and_captured_stdout(tmp_path):
    out = _run("ok", tmp_path)
    assert out.result is not None and out.result["kind"] == "ok"
    assert out.returncode == 0 and not out.timed_out
    assert "hello from the worker" in out.stdout
    assert classify(out) == (VerdictKind.OK, "")
    _assert_nothing_left(out, tmp_path)


def test_environment_is_scrubbed_and_private(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-123")
    monkeypatch.setenv("DB_PASSWORD", "hunter2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    monkeypatch.setenv("XEFORGE_HARMLESS", "kept")
    out = _run("env", tmp_path)
    env = out.result["env"]
    for name in ("OPENAI_API_KEY", "MY_SERVICE_TOKEN", "DB_PASSWORD", "AWS_ACCESS_KEY_ID", "HF_TOKEN"):
        assert name not in env
    assert "sk-secret-openai" not in str(env)
    assert env["XEFORGE_HARMLESS"] == "kept"
    job_dir = str((tmp_path / "job").resolve())
    assert env["TMPDIR"].startswith(job_dir)
    assert env["TRITON_CACHE_DIR"].startswith(job_dir)
    assert env["TRITON_INTERPRET"] == "1"
    assert env["PYTHONFAULTHANDLER"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(runner.PACKAGE_ROOT)
    assert out.result["cwd"] == job_dir


def test_secret_patterns():
    for name in ("OPENAI_API_KEY", "anthropic_api_key", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "HUGGING_FACE_HUB_TOKEN", "SOME_SECRET", "PGPASSWORD", "XEFORGE_LLM_API_KEY"):
        assert runner.is_secret_name(name), name
    for name in ("PATH", "HOME", "LD_LIBRARY_PATH", "ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES",
                 "TRITON_INTERPRET", "PYTHONPATH", "KEYBOARD_LAYOUT"):
        assert not runner.is_secret_name(name), name


def test_gpu_environment_selects_one_device(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    env = runner.worker_environment(tmp_path, "cuda", device_index=1)
    assert "TRITON_INTERPRET" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "5"
    env = runner.worker_environment(tmp_path, "xpu", device_index=2)
    assert env["ZE_AFFINITY_MASK"] == "2"


def test_hang_is_a_timeout_and_group_is_killed(tmp_path):
    t0 = time.monotonic()
    out = _run("hang_with_child", tmp_path, timeout_s=1.5)
    assert time.monotonic() - t0 < 10
    assert out.timed_out and out.result is None
    kind, reason = classify(out)
    assert kind is VerdictKind.TIMEOUT
    assert "1.5 s" in reason and "start hang_with_child" in reason
    assert "most recent call first" in out.stderr  # where it hung, from the faulthandler dump
    assert "fake_worker.py" in out.stderr
    _assert_nothing_left(out, tmp_path)


def test_abort_is_a_crash_naming_the_signal(tmp_path):
    out = _run("abort", tmp_path)
    assert out.signal_name == "SIGABRT"
    kind, reason = classify(out)
    assert kind is VerdictKind.CRASH and "SIGABRT" in reason
    _assert_nothing_left(out, tmp_path)


def test_heap_corruption_is_a_crash_that_points_at_an_out_of_bounds_write(tmp_path):
    out = _run("heap_corruption", tmp_path)
    assert out.signal_name == "SIGABRT", out.stderr
    kind, reason = classify(out)
    assert kind is VerdictKind.CRASH
    message = find_heap_corruption(out.stderr)  # glibc's own words, e.g. "free(): invalid pointer"
    assert message and f"heap corrupted ({message})" in reason and "write past the end of a tensor" in reason
    assert "memcheck" in reason
    _assert_nothing_left(out, tmp_path)


def test_address_space_limit_is_oom(tmp_path):
    out = _run("alloc", tmp_path, memory_bytes=512 << 20, job={"alloc_bytes": 4 << 30})
    assert out.result is None
    kind, reason = classify(out)
    assert kind is VerdictKind.OOM, (kind, reason, out.stderr)
    assert "MemoryError" in reason
    _assert_nothing_left(out, tmp_path)


def test_rss_guard_on_gpu_kills_group(tmp_path):
    # device "cuda" only changes how memory is limited (RSS polling, no RLIMIT_AS);
    # the fake worker never touches a GPU.
    out = _run("touch", tmp_path, device="cuda", memory_bytes=200 << 20,
               job={"alloc_bytes": 1 << 30})
    assert out.oom_killed
    kind, reason = classify(out)
    assert kind is VerdictKind.OOM and "limit" in reason
    assert out.peak_rss_bytes > 200 << 20
    _assert_nothing_left(out, tmp_path)


def test_result_then_hang_is_a_warning_not_a_timeout(tmp_path):
    out = _run("result_then_hang", tmp_path, exit_grace_s=0.5, timeout_s=20)
    assert out.result is not None and not out.timed_out and out.killed_after_result
    assert classify(out) == (VerdictKind.OK, "")
    assert any("did not exit" in w for w in out.warnings)
    _assert_nothing_left(out, tmp_path)


def test_child_process_is_killed_and_noted(tmp_path):
    out = _run("child", tmp_path)
    assert out.result is not None
    # In the sandbox the kernel ends the child with the worker's PID namespace, often before the
    # runner looks, so there may be nothing left to note.
    assert SANDBOXED or any("other process" in w for w in out.warnings)
    _assert_nothing_left(out, tmp_path)


def test_child_that_left_the_group_is_found_by_token(tmp_path):
    out = _run("escaped_child", tmp_path)
    assert marked_processes() == []
    if not SANDBOXED:
        pid = int((tmp_path / "job" / "child.pid").read_text())
        assert not _alive(pid)
        assert any("other process" in w for w in out.warnings)


def test_driver_fault_text_is_a_crash(tmp_path):
    out = _run("driver_fault", tmp_path)
    kind, reason = classify(out)
    assert kind is VerdictKind.CRASH and "UR_RESULT_ERROR_DEVICE_LOST" in reason


def test_plain_failure_is_runtime_error(tmp_path):
    out = _run("exit3", tmp_path)
    kind, reason = classify(out)
    assert kind is VerdictKind.RUNTIME_ERROR
    assert "status 3" in reason and "something odd happened" in reason


def test_oom_text_in_result_becomes_oom(tmp_path):
    out = _run("oom_text", tmp_path)
    kind, reason = classify(out)
    assert kind is VerdictKind.OOM and "can't allocate memory" in reason


def test_output_is_truncated_head_and_tail(tmp_path):
    out = _run("noisy", tmp_path)
    assert len(out.stdout) < runner.OUTPUT_LIMIT_BYTES + 200
    assert out.stdout.startswith("AAAA") and out.stdout.endswith("END")
    assert "cut" in out.stdout
    assert Path(out.stdout_path).stat().st_size > 100_000


def test_progress_is_forwarded(tmp_path):
    events = []
    out = _run("progress", tmp_path, on_progress=events.append)
    messages = [e["message"] for e in events]
    assert messages[:4] == ["start progress", "step 0", "step 1", "step 2"]
    assert out.last_progress == "step 2"


def test_cancel_kills_the_group(tmp_path):
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    out = _run("hang_with_child", tmp_path, cancel=cancel, timeout_s=30)
    assert out.cancelled and not out.timed_out
    _assert_nothing_left(out, tmp_path)


def test_cpu_time_limit(tmp_path):
    out = _run("spin", tmp_path, cpu_seconds=1, timeout_s=20)
    kind, reason = classify(out)
    assert out.signal_name in ("SIGXCPU", "SIGKILL")
    assert kind in (VerdictKind.TIMEOUT, VerdictKind.OOM)
    if out.signal_name == "SIGXCPU":
        assert "CPU-time" in reason


@pytest.mark.parametrize("text,expected", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "fault"),
    ("RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "oom"),
    ("ValueError: bad shape", None),
])
def test_text_patterns(text, expected):
    oom = runner.find_oom(text)
    fault = runner.find_driver_fault(text)
    if expected == "oom":
        assert oom
    elif expected == "fault":
        assert fault and not oom
    else:
        assert not oom and not fault


def test_two_timing_jobs_on_one_device_serialise(tmp_path):
    """Two timing jobs on the same device key (the real devlock): one waits, says it is
    queued, and its wait does not count against its timeout."""
    lock_dir = tmp_path / "locks"
    outcomes = {}
    events: dict[str, list] = {"a": [], "b": []}

    def go(name: str) -> None:
        outcomes[name] = run_worker(
            {"role": "timing", "device": "cpu", "behavior": "lock",
             "options": {"lock_dir": str(lock_dir), "lock_key": "cuda0", "hold_s": 3.0}},
            command=[sys.executable, str(FAKE)], job_dir=tmp_path / name, timeout_s=5.5,
            on_progress=events[name].append)

    threads = [threading.Thread(target=go, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a, b = outcomes["a"].result, outcomes["b"].result
    assert a is not None and b is not None, (outcomes["a"], outcomes["b"])
    assert a["end"] <= b["start"] or b["end"] <= a["start"]  # never timing at the same time
    queued = [n for n in ("a", "b") if any(e.get("event") == "queued" for e in events[n])]
    assert len(queued) == 1
    assert "queued" in [e["message"] for e in events[queued[0]] if e["event"] == "queued"][0]
    assert outcomes[queued[0]].queued_s > 2.0  # waited ~3 s, yet finished inside its 5.5 s limit


def test_rlimits_and_own_session(tmp_path):
    out = _run("limits", tmp_path, memory_bytes=3 << 30, cpu_seconds=40, file_bytes=1 << 30)
    r = out.result
    assert r["core"] == [0, 0]
    assert r["cpu"][0] == 40
    assert r["address_space"][0] == 3 << 30
    assert r["fsize"][0] == 1 << 30
    if not SANDBOXED:
        assert r["session"] == r["pid"] == out.pid  # the launcher exec'd in place: own session
    gpu = _run("limits", tmp_path / "gpu", device="cuda", memory_bytes=3 << 30)
    import resource

    assert gpu.result["address_space"][0] == resource.getrlimit(resource.RLIMIT_AS)[0]


def test_endless_output_is_stopped_by_the_file_size_limit(tmp_path):
    out = _run("flood", tmp_path, file_bytes=2 << 20)
    kind, reason = classify(out)
    assert kind is VerdictKind.RUNTIME_ERROR and "larger than" in reason, (reason, out.stderr[-300:])
    assert Path(out.stdout_path).stat().st_size <= 2 << 20
    _assert_nothing_left(out, tmp_path)
