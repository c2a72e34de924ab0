"""The History page's decision log as a table a person reads: UTC times instead of epoch
seconds, versions by their number and short commit, speedups with their unit, and an empty cell
(never "None") where an entry has no such field. Plain data (no Streamlit), so it is tested."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from xeforge_core import units

#: The columns every row has, in order; the other fields of an entry go to ``details``.
COLUMNS = ("when (UTC)", "action", "stage", "candidate", "version", "verdict", "speedup", "details")

_OWN = {"time", "action", "stage", "candidate", "version", "verdict", "speedup"}


def _when(epoch: Any) -> str:
    try:
        return dt.datetime.fromtimestamp(float(epoch), tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def _text(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    if isinstance(value, float):
        return units.number(value)
    return str(value)


def decision_rows(decisions: Iterable[dict[str, Any]], versions: dict[str, str] | None = None
                  ) -> list[dict[str, str]]:
    """One row per decision-log entry (``Session.decisions``), newest first, with the
    :data:`COLUMNS`. ``versions`` maps a commit sha to its label (``#2 3f2a91c``); a sha not in
    it is shortened to 10 characters."""
    versions = versions or {}
    rows = []
    for entry in decisions:
        sha = str(entry.get("version") or "")
        speed = entry.get("speedup")
        details = "; ".join(f"{k}: {_text(v)}" for k, v in entry.items() if k not in _OWN and _text(v))
        rows.append({
            "when (UTC)": _when(entry.get("time")), "action": _text(entry.get("action")),
            "stage": _text(entry.get("stage")), "candidate": _text(entry.get("candidate")),
            "version": versions.get(sha, sha[:10]) if sha else "", "verdict": _text(entry.get("verdict")),
            "speedup": units.speedup(speed) if isinstance(speed, (int, float)) and speed else "",
            "details": details,
        })
    rows.reverse()
    return rows


__all__ = ["COLUMNS", "decision_rows"]
