"""Helpers of the process tests: which processes are alive, carry a marker, are our children.

A test sets a unique marker variable (``XEFORGE_TEST_MARK``) that every worker inherits, so
leftovers are found through ``/proc`` whatever PID namespace (sandbox) they ran in.
"""

from __future__ import annotations

import os
from pathlib import Path

MARK_VAR = "XEFORGE_TEST_MARK"
FIXTURES = Path(__file__).parent / "fixtures" / "process"


def planted(name: str) -> str:
    """The source of a planted candidate: the prologue ``fixtures/process/<name>`` followed by
    the correct kernel of ``add_baseline.py`` (so its line numbers are the prologue's)."""
    return (FIXTURES / name).read_text() + "\n\n" + (FIXTURES / "add_baseline.py").read_text()


def alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def marked_processes(mark: str) -> list[int]:
    """Live processes (other than this one) whose environment has ``XEFORGE_TEST_MARK=mark``."""
    found = []
    needle = f"{MARK_VAR}={mark}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
        except OSError:
            continue
        if alive(int(name)):
            found.append(int(name))
    return found


def child_states(of: int | None = None) -> dict[int, str]:
    """Direct children of ``of`` (default: this process), zombies included: ``{pid: state}``
    (the state letter of ``/proc/<pid>/stat``: ``R``, ``S``, ``Z``...)."""
    me = os.getpid() if of is None else of
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            kids[int(name)] = fields[0]
    return kids


def children(of: int | None = None) -> list[int]:
    """Live direct children of ``of`` (default: this process)."""
    return [pid for pid, state in child_states(of).items() if state != "Z"]


def cmdline(pid: int) -> list[bytes]:
    """The argument vector of ``pid`` (``[]`` when it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []
