"""Escape attempts become one finding each, however often the candidate's forward repeats them."""

from __future__ import annotations

from xeforge_core import sandbox
from xeforge_core.worker_outcome import _escape_finding, _merged


def test_an_attempt_repeated_on_every_call_is_one_finding_with_its_count() -> None:
    iso = sandbox.Isolation(sandboxed=True, tool="bwrap")
    network = {"kind": "network", "target": "127.0.0.1:8765", "file": "candidate/c.py", "line": 46}
    process = {"kind": "process", "target": "touch /tmp/x", "file": "candidate/c.py", "line": 44}
    found = _merged([_escape_finding(a, iso) for a in [network, process] * 12 + [{**network, "line": 50}]])
    assert [(f["rule"], f["line"]) for f in found] == [("sandbox_network", 46), ("sandbox_process", 44),
                                                      ("sandbox_network", 50)]
    assert found[0]["message"].endswith("(12 times)") and "blocked: the sandbox has no network" in found[0]["message"]
    assert "times)" not in found[2]["message"]
