"""GitPython keeps persistent ``git cat-file`` processes per repository object; a session that is
dropped (the workbench resuming another, a listing of the workspace) closes them, so opening
sessions in turn does not pile them up until the cyclic garbage collector happens to run."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from tests.proc_helpers import children, cmdline
from xeforge_core.session import Session
from xeforge_core.ui.workbench import Workbench

SAMPLE = "01_vector_add"
ROUNDS = 6


def _cat_files(root: Path) -> int:
    """Live ``git cat-file`` children of this process working in a repository under ``root``
    (the test process may hold others, from earlier tests it ran)."""
    def under_root(pid: int) -> bool:
        try:
            return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(root)
        except OSError:
            return False
    return sum(1 for pid in children() if b"cat-file" in cmdline(pid) and under_root(pid))


@pytest.fixture
def two_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Workbench, list[Path]]:
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    wb = Workbench(tmp_path / "ws")
    paths = []
    for _ in range(2):
        wb.load_sample(SAMPLE)
        paths.append(wb.start_session().path)
    return wb, paths


@pytest.fixture
def ws_root(tmp_path: Path) -> Path:
    return (tmp_path / "ws").resolve()


def test_resuming_sessions_in_turn_keeps_git_processes_bounded(two_sessions, ws_root):
    wb, paths = two_sessions
    gc.disable()  # what is measured is the drop, not whenever the cyclic collector runs
    try:
        counts = []
        for i in range(ROUNDS):
            wb.resume_session(paths[i % 2])
            wb.list_sessions()
            counts.append(_cat_files(ws_root))
    finally:
        gc.enable()
    # the open session's (and the last dropped one's, until its finalizer ran) at most
    assert max(counts) <= 4 and counts[-1] <= counts[1], counts


def test_a_closed_session_stops_its_git_processes_and_still_reads(two_sessions, ws_root):
    _, paths = two_sessions
    gc.disable()
    try:
        before = _cat_files(ws_root)
        with Session.open(paths[0]) as s:
            s.history()
            assert s.source("head")
            assert _cat_files(ws_root) > before
        assert _cat_files(ws_root) == before
        assert s.source("baseline")  # a read after close starts them again
        del s
        assert _cat_files(ws_root) == before
    finally:
        gc.enable()
