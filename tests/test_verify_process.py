"""verify() against planted candidates that attack the process: a hang, os.abort(), a huge
allocation, a worker that cannot exit, a secret in the environment, a leftover child process.
The caller survives each one and nothing of the job is left running afterwards."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests import proc_helpers
from xeforge_core.pool import pool_enabled
from xeforge_core.problem import load_problem, problem_from_source
from xeforge_core.verdict import StepStatus, VerdictKind
from xeforge_core.verify import VerifyOptions, verify

FIX = Path(__file__).parent / "fixtures" / "process"
MARK = f"mark-{uuid.uuid4().hex}"


@pytest.fixture(scope="module", autouse=True)
def _isolated(tmp_path_factory):
    """One cache dir for the module (the baseline's outputs are computed once and reused) and a
    marker in the environment that every worker inherits, to find leftovers."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XEFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("XEFORGE_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
    mp.setenv("XEFORGE_TEST_MARK", MARK)
    # Jobs still go through the warm pool's single-use workers, but none is kept waiting, so
    # that "nothing of the job is left" can be checked after each verification (the pool's
    # own tests are in tests/test_pool.py).
    mp.setenv("XEFORGE_POOL_SIZE", "0")
    yield
    mp.undo()


@pytest.fixture(scope="module")
def problem():
    return load_problem(FIX / "add_baseline.py")


def _marked_processes() -> list[int]:
    return proc_helpers.marked_processes(MARK)


def _children() -> list[int]:
    return proc_helpers.children()


def _check(problem, fixture: str, **opts):
    options = VerifyOptions(**{"timeout_s": 120.0, "seeds": 1, "distributions": ["normal"], **opts})
    before = set(_children())  # e.g. git helper processes an earlier test's session keeps open
    verdict = verify(problem, (FIX / fixture).read_text(), device="cpu", options=options)
    assert _marked_processes() == [], "a process of the job survived"
    assert set(_children()) <= before, "the caller was left with child processes"
    return verdict


def test_hang_is_a_timeout(problem):
    v = _check(problem, "cand_infinite_loop.py", timeout_s=15.0, use_cache=False)
    assert v.kind is VerdictKind.TIMEOUT, v.reason
    assert "15 s" in v.reason
    loop_line = (FIX / "cand_infinite_loop.py").read_text().splitlines().index("            pass") + 1
    assert v.source_line in (loop_line, loop_line - 1), (v.source_line, v.error_text[-800:])


def test_abort_is_a_crash_naming_sigabrt(problem):
    v = _check(problem, "cand_abort.py")
    assert v.kind is VerdictKind.CRASH, v.reason
    assert "SIGABRT" in v.reason
    assert v.stderr  # the worker's stderr (faulthandler's stack) is kept


def test_huge_allocation_is_oom(problem):
    v = _check(problem, "cand_huge_alloc.py", memory_bytes=8 * 2**30)
    assert v.kind is VerdictKind.OOM, (v.kind, v.reason, v.error_text[-500:])


def test_result_then_hang_is_a_valid_verdict_with_a_warning(problem):
    v = _check(problem, "cand_result_then_hang.py", exit_grace_s=1.0, use_cache=False)
    assert v.kind is VerdictKind.OK, v.reason
    if pool_enabled():
        # A pool worker ends with os._exit once its result is written: the candidate's exit
        # handler never runs, so nothing hangs (the fresh-process path is in test_runner.py).
        assert not any("did not exit" in w for w in v.warnings), v.warnings
    else:
        assert any("did not exit" in w for w in v.warnings), v.warnings


def test_secret_is_not_visible_to_the_candidate(problem, monkeypatch):
    monkeypatch.setenv("XEFORGE_TEST_SECRET_TOKEN", "tok-do-not-leak-4711")
    v = _check(problem, "cand_print_secret.py", use_cache=False)
    everything = str(v.to_dict())
    assert "tok-do-not-leak-4711" not in everything
    assert "SECRET=<absent>" in v.stdout + v.stderr + everything


def test_child_process_is_killed(problem, tmp_path, monkeypatch):
    pidfile = tmp_path / "child.pids"
    monkeypatch.setenv("XEFORGE_TEST_PIDFILE", str(pidfile))
    v = _check(problem, "cand_child_process.py", use_cache=False)
    assert v.kind is VerdictKind.OK, v.reason
    if v.isolation.get("sandboxed"):
        # The child died with the sandbox's PID namespace (``_check`` found nothing left); the
        # start is a finding, and the PID file went to the sandbox's private /tmp.
        assert "sandbox_process" in {f.rule for f in v.findings}, v.findings
        assert not pidfile.exists()
        return
    assert any("other process" in w for w in v.warnings), v.warnings
    pids = [int(p) for p in pidfile.read_text().split()]
    assert pids
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_ok_then_cached_then_bypassed(problem):
    source = (FIX / "add_baseline.py").read_text().replace("BLOCK=128", "BLOCK=64").replace(
        "cdiv(x.numel(), 128)", "cdiv(x.numel(), 64)")
    opts = VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"])
    first = verify(problem, source, device="cpu", options=opts)
    assert first.kind is VerdictKind.OK, first.reason
    assert not first.cached
    perf = first.step("performance")
    assert perf is not None and perf.status is StepStatus.NOT_MEASURED
    assert "interpreter" in perf.summary
    assert first.device["type"] == "cpu"
    second = verify(problem, source, device="cpu", options=opts)
    assert second.cached and second.kind is VerdictKind.OK
    assert second.to_dict()["steps"] == first.to_dict()["steps"]
    opts.use_cache = False
    third = verify(problem, source, device="cpu", options=opts)
    assert not third.cached and third.kind is VerdictKind.OK


def test_failing_baseline_never_blames_the_candidate():
    """A baseline that raises is not judged against the candidate: an environment verdict. One
    raising in its own code (its own raise statement) says the problem file is what to fix (the
    CLI exits 2); one failing on what the device lacks says the environment failed (exit 9)."""
    opts = VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"])
    source = (FIX / "add_baseline.py").read_text()
    broken = source.replace("        return add(x, y)", "        raise RuntimeError('baseline cannot run here')")
    v = verify(problem_from_source(broken, name="broken_add"), source, device="cpu", options=opts)
    assert v.kind is VerdictKind.ENVIRONMENT and v.problem_at_fault
    assert "fix the problem file" in v.reason and "is not at fault" in v.reason
    assert "baseline cannot run here" in v.reason + v.error_text + str(v.to_dict())
    lacking = source.replace("        return add(x, y)", "        return add(x.to('cuda'), y)")
    v = verify(problem_from_source(lacking, name="cuda_add"), source, device="cpu", options=opts)
    assert v.kind is VerdictKind.ENVIRONMENT and not v.problem_at_fault, v.reason
    assert "baseline" in v.reason and "not the candidate's" in v.reason


def test_timing_waits_in_the_queue_for_the_device_lock(problem, tmp_path):
    """The real device lock is held by this process; a verification that reaches its timing job
    says it is queued, waits, and completes once the lock is released."""
    import threading

    from xeforge_core.devices import detect_device
    from xeforge_core.devlock import DeviceLock

    device = detect_device("cpu")
    lock_dir = tmp_path / "locks"
    messages: list[str] = []
    queued = threading.Event()

    def on_progress(message: str) -> None:
        messages.append(message)
        if "queued behind another timing run" in message:
            queued.set()

    source = (FIX / "add_baseline.py").read_text() + "\n# timed under the lock\n"
    opts = VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], force_timing=True,
                         lock_dir=str(lock_dir), warmup_ms=5, rep_ms=20, use_cache=True)
    result = {}
    with DeviceLock(lock_dir, device.lock_key()):
        worker = threading.Thread(target=lambda: result.setdefault(
            "v", verify(problem, source, device=device, options=opts, on_progress=on_progress)))
        worker.start()
        assert queued.wait(timeout=180), messages
        assert worker.is_alive()  # still waiting for the lock this process holds
    worker.join(timeout=180)
    v = result["v"]
    assert v.kind is VerdictKind.OK, v.reason
    assert v.performance, v.steps
    assert any("waited" in w and "device lock" in w for w in v.warnings), v.warnings
    assert _marked_processes() == []


@pytest.mark.parametrize("first_message, tile_sizes", [
    ("sizes: probing the candidate", True),  # the launches probed before any kernel is checked
    ("candidate: compile", False),  # no sizes job: the candidate's own job
])
def test_cancel_stops_the_running_job(problem, first_message, tile_sizes):
    """Cancel while the hanging candidate runs, in whichever job first runs it."""
    import threading

    from xeforge_core.verify import VerificationCancelled

    cancel = threading.Event()
    seen: list[str] = []

    def on_progress(message: str) -> None:
        seen.append(message)
        if message.startswith(first_message):
            cancel.set()

    before = set(_children())
    with pytest.raises(VerificationCancelled):
        verify(problem, (FIX / "cand_infinite_loop.py").read_text(), device="cpu", cancel=cancel,
               on_progress=on_progress,
               options=VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], use_cache=True,
                                     tile_sizes=tile_sizes))
    assert cancel.is_set(), seen
    assert _marked_processes() == []
    assert set(_children()) <= before


def test_lints_reach_the_candidate_only(problem):
    lint = {"rule": "pow2_block", "message": "BLOCK=96 is not a power of two", "severity": "error", "line": 23}
    v = verify(problem, (FIX / "add_baseline.py").read_text() + "\n# linted\n", device="cpu",
               options=VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], lints=[lint]))
    assert v.kind is VerdictKind.COMPILE_ERROR, v.reason  # not environment: the baseline never saw it
    assert any(f.rule == "kb:pow2_block" and f.line == 23 for f in v.findings)


def test_baseline_that_cannot_run_the_derived_odd_shape_is_held_to_the_spec_only():
    problems = Path(__file__).parent / "fixtures" / "problems"
    source = (problems / "good_add.py").read_text().replace(
        '    assert x.dtype == torch.float32, "x must be float32"\n',
        '    assert x.dtype == torch.float32, "x must be float32"\n'
        '    assert x.shape[0] % 4 == 0, "rows must come in fours"\n')
    problem = problem_from_source(source, name="add_fours", spec_text=(problems / "good_add.yaml").read_text())
    # the -odd copy (no size derived from the tiles): the baseline fails there and is dropped
    v = verify(problem, source, device="cpu",
               options=VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], tile_sizes=False))
    assert v.kind is VerdictKind.OK, v.reason
    (note,) = [w for w in v.warnings if "non-power-of-two" in w]
    assert "rows must come in fours" in note and "at ci only" in note
    # the size derived from the tiles: the probe finds BATCH must stay as it is, and says why
    v = verify(problem, source, device="cpu",
               options=VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"]))
    assert v.kind is VerdictKind.OK, v.reason
    tiles = next(s for s in v.sizes if s.variant == "ci-tiles")
    assert tiles.sizes == {"BATCH": 4, "HIDDEN": 67}, tiles
    assert "BATCH stays 4" in tiles.why and "rows must come in fours" in tiles.why, tiles.why
    # a candidate still has to pass the spec's variants
    wrong = source.replace("tl.load(x_ptr + offs, mask=mask) + ", "tl.load(x_ptr + offs, mask=mask) - ")
    assert verify(problem, wrong, device="cpu", options=VerifyOptions(
        timeout_s=120.0, seeds=1, distributions=["normal"])).kind is VerdictKind.WRONG_ANSWER


def test_sigterm_to_the_cli_stops_its_worker(tmp_path):
    """``kill`` of ``xeforge verify`` (SIGTERM) cleans up as Ctrl-C does: no worker outlives it."""
    import signal
    import subprocess
    import sys
    import time

    cli = subprocess.Popen([sys.executable, "-m", "xeforge_core.cli", "verify", str(FIX / "add_baseline.py"),
                            str(FIX / "cand_infinite_loop.py"), "--device", "cpu", "--timeout", "120", "--no-cache"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_marked_processes()) < 2:  # the CLI and a worker
        time.sleep(0.2)
    assert len(_marked_processes()) >= 2, "no worker started"
    cli.send_signal(signal.SIGTERM)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode != 0 and "interrupted" in err.lower(), err[-2000:]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _marked_processes():
        time.sleep(0.2)
    assert _marked_processes() == [], "a worker outlived the CLI"


def test_a_signal_to_another_process_is_a_finding_naming_the_line(problem):
    """A candidate that signals its parent (a fresh user's ``os.kill(os.getppid(), SIGKILL)``, here
    signal 0) is still judged on its outputs, and the attempt is a warning at its line, as a
    connection or a write outside the job is."""
    v = _check(problem, "cand_signal_parent.py", use_cache=False)
    assert v.kind is VerdictKind.OK, v.reason
    signals = [f for f in v.findings if f.rule == "sandbox_signal"]
    assert signals and signals[0].line == 29, v.findings
    assert "sent a signal 0 to process" in signals[0].message, signals[0].message
    assert ("confined" if v.isolation.get("sandboxed") else "NOT confined") in signals[0].message


def test_os_exit_in_the_candidate_is_named_at_its_line(problem):
    """``os._exit(0)`` in forward ends the worker with no result and no traceback; the verdict
    names the candidate's line that called it (it said only "exited with status 0")."""
    v = _check(problem, "cand_exit.py", use_cache=False)
    assert v.kind is VerdictKind.RUNTIME_ERROR, v.reason
    assert "the module under test called os._exit(0) at candidate.py:28" in v.reason, v.reason
    assert v.source_line == 28, v.source_line
