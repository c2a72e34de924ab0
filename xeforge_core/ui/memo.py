"""Memoised reads of a session repository, so a page switch does not repeat the same ``git``
calls (every ``Session`` query runs one or more ``git`` processes).

A session keeps all its state in git refs (``refs/heads/...``, ``refs/xeforge/state``,
``refs/candidates/...``), written with ``git update-ref``. The *stamp* of a repository is the
(path, mtime in ns, size) of every ref file and of ``packed-refs``: any commit, candidate,
verdict, plan or decision changes it, from this process or another (a background job's own
``Session``). A memoised value is reused only while the stamp is unchanged, so it is never
stale; computing the stamp costs a few ``stat`` calls and no process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def repo_stamp(path: str | Path) -> tuple:
    """The stamp of the git repository at ``path`` (see the module docstring); ``()`` when it
    has no ``.git`` directory."""
    git = Path(path) / ".git"
    items: list[tuple[str, int, int]] = []
    for extra in ("packed-refs", "HEAD"):
        try:
            st = os.stat(git / extra)
        except OSError:
            continue
        items.append((extra, st.st_mtime_ns, st.st_size))
    refs = git / "refs"
    for root, _dirs, files in os.walk(refs):
        for name in files:
            full = os.path.join(root, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            items.append((full[len(str(git)):], st.st_mtime_ns, st.st_size))
    items.sort()
    return tuple(items)


def workspace_stamp(workspace: str | Path) -> tuple:
    """The stamp of every session repository directly under ``workspace`` (new and removed
    sessions change it too)."""
    root = Path(workspace)
    if not root.is_dir():
        return ()
    return tuple((child.name, repo_stamp(child)) for child in sorted(root.iterdir()) if (child / ".git").is_dir())


class RepoMemo:
    """Values computed from one repository, dropped as soon as its stamp changes."""

    def __init__(self) -> None:
        self._stamps: dict[str, tuple] = {}
        self._values: dict[tuple[str, str], Any] = {}

    def get(self, path: str | Path, name: str, compute: Callable[[], T], *, stamp: tuple | None = None) -> T:
        """``compute()``, or its value from an earlier call with the same ``name`` while the
        repository at ``path`` is unchanged. ``stamp`` overrides :func:`repo_stamp` (for a
        workspace, :func:`workspace_stamp`)."""
        key = str(path)
        now = repo_stamp(path) if stamp is None else stamp
        if self._stamps.get(key) != now:
            self._stamps[key] = now
            for k in [k for k in self._values if k[0] == key]:
                del self._values[k]
        slot = (key, name)
        if slot not in self._values:
            self._values[slot] = compute()
        return self._values[slot]
