"""Memoised session reads (xeforge_core.ui.memo): a value is reused while the repository is
unchanged and recomputed as soon as a commit, a candidate or the plan changes it, also when
another Session object (a background job's) made the change."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.session import Session
from xeforge_core.ui.memo import RepoMemo, repo_stamp, workspace_stamp
from xeforge_core.ui.workbench import Workbench


def test_stamp_changes_with_every_write_and_the_memo_follows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    wb = Workbench(tmp_path / "ws")
    wb.load_sample("01_vector_add")
    session = wb.start_session()
    memo = RepoMemo()
    calls = []

    def history() -> list:
        calls.append(1)
        return session.history()

    assert len(memo.get(session.path, "history", history)) == 1
    assert len(memo.get(session.path, "history", history)) == 1 and len(calls) == 1  # reused
    stamp = repo_stamp(session.path)
    other = Session.open(session.path)  # as a background job does
    rec = other.add_candidate("memory_access", other.source("head") + "\n# edit\n", engine="manual", rationale="x")
    assert repo_stamp(session.path) != stamp  # a candidate alone changes the stamp
    other.approve(rec.id)
    assert len(memo.get(session.path, "history", history)) == 2 and len(calls) == 2
    ws = workspace_stamp(tmp_path / "ws")
    wb.load_sample("03_row_softmax")
    wb.start_session()
    assert workspace_stamp(tmp_path / "ws") != ws and len(workspace_stamp(tmp_path / "ws")) == 2
