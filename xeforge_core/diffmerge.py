"""Hunk-level diff and merge of two versions of a kernel (current vs candidate).

A *hunk* is one contiguous region where the candidate differs from the current code
(one non-equal opcode of :class:`difflib.SequenceMatcher`). The user accepts or rejects each
hunk; :func:`merge_hunks` builds the merged source from the accepted ones. Accepting every hunk
gives the candidate, accepting none gives the current code.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Hunk:
    """One changed region. Line ranges are 0-based half-open slices of the split sources.

    ``tag`` is ``replace``, ``delete`` or ``insert``; ``removed`` and ``added`` are the lines
    (without line endings); ``before``/``after`` hold up to ``context`` unchanged lines of
    the current code around the change, for display.
    """

    index: int
    tag: str
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    removed: tuple[str, ...]
    added: tuple[str, ...]
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    @property
    def header(self) -> str:
        """A unified-diff style header, e.g. ``@@ -12,3 +12,4 @@`` (1-based line numbers)."""
        return (f"@@ -{self.a_start + 1},{self.a_end - self.a_start} "
                f"+{self.b_start + 1},{self.b_end - self.b_start} @@")

    def as_patch_text(self) -> str:
        """The hunk as unified-diff text (context, ``-`` and ``+`` lines)."""
        lines = [self.header]
        lines += [" " + s for s in self.before]
        lines += ["-" + s for s in self.removed]
        lines += ["+" + s for s in self.added]
        lines += [" " + s for s in self.after]
        return "\n".join(lines)


@dataclass(frozen=True)
class SideBySideRow:
    """One display row of a side-by-side diff. Line numbers are 1-based, ``None`` when the
    side has no line in this row. ``kind`` is ``equal``, ``replace``, ``delete`` or
    ``insert``; ``hunk`` the index of the hunk the row belongs to (``None`` when equal)."""

    left_no: int | None
    left: str
    right_no: int | None
    right: str
    kind: str
    hunk: int | None


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def diff_hunks(current: str, candidate: str, *, context: int = 3) -> list[Hunk]:
    """The hunks that turn ``current`` into ``candidate``, in source order."""
    a, b = _lines(current), _lines(candidate)
    hunks: list[Hunk] = []
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            continue
        hunks.append(Hunk(
            index=len(hunks), tag=tag, a_start=i1, a_end=i2, b_start=j1, b_end=j2,
            removed=tuple(a[i1:i2]), added=tuple(b[j1:j2]),
            before=tuple(a[max(0, i1 - context):i1]), after=tuple(a[i2:i2 + context]),
        ))
    return hunks


def merge_hunks(current: str, candidate: str, accepted: Iterable[int]) -> str:
    """``current`` with the accepted hunks (by index, as numbered by :func:`diff_hunks`)
    applied from ``candidate``. Unknown indices raise ``IndexError``.

    The result ends with a newline when the side that supplies the last line does.
    """
    a, b = _lines(current), _lines(candidate)
    ops = _opcodes(a, b)
    n_hunks = sum(1 for op in ops if op[0] != "equal")
    chosen = set(accepted)
    bad = [i for i in chosen if not 0 <= i < n_hunks]
    if bad:
        raise IndexError(f"no hunk {sorted(bad)[0]} (the diff has {n_hunks} hunks)")
    out: list[str] = []
    k = 0
    last_from_candidate = False
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            out.extend(a[i1:i2])
            if i2 > i1:
                last_from_candidate = False
            continue
        if k in chosen:
            out.extend(b[j1:j2])
            if j2 > j1:
                last_from_candidate = True
        else:
            out.extend(a[i1:i2])
            if i2 > i1:
                last_from_candidate = False
        k += 1
    if not out:
        return ""
    trailing = candidate.endswith("\n") if last_from_candidate else current.endswith("\n")
    return "\n".join(out) + ("\n" if trailing else "")


def side_by_side(current: str, candidate: str) -> list[SideBySideRow]:
    """Rows pairing the current (left) and candidate (right) lines for display."""
    a, b = _lines(current), _lines(candidate)
    rows: list[SideBySideRow] = []
    k = 0
    for tag, i1, i2, j1, j2 in _opcodes(a, b):
        if tag == "equal":
            for off in range(i2 - i1):
                rows.append(SideBySideRow(i1 + off + 1, a[i1 + off], j1 + off + 1, b[j1 + off],
                                          "equal", None))
            continue
        for off in range(max(i2 - i1, j2 - j1)):
            li, rj = i1 + off, j1 + off
            rows.append(SideBySideRow(
                li + 1 if li < i2 else None, a[li] if li < i2 else "",
                rj + 1 if rj < j2 else None, b[rj] if rj < j2 else "",
                tag, k,
            ))
        k += 1
    return rows


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


def inline_changes(old: str, new: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The character ranges (0-based, half-open) that differ between two versions of one line,
    for within-line highlighting: ``(ranges in old, ranges in new)``. Compared token by token
    (words, runs of spaces, single punctuation: ``a.to(tl.float32)`` vs ``a`` marks
    ``.to(tl.float32)``), so a change reads as whole identifiers. Two lines with nothing in
    common return empty ranges: the whole line is the change, and marking all of it adds
    nothing."""
    if difflib.SequenceMatcher(None, old.strip(), new.strip(), autojunk=False).ratio() < 0.4:
        return [], []
    a = _TOKEN.findall(old)
    b = _TOKEN.findall(new)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    pos_a = [0]
    for t in a:
        pos_a.append(pos_a[-1] + len(t))
    pos_b = [0]
    for t in b:
        pos_b.append(pos_b[-1] + len(t))
    old_ranges: list[tuple[int, int]] = []
    new_ranges: list[tuple[int, int]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            old_ranges.append((pos_a[i1], pos_a[i2]))
        if j2 > j1:
            new_ranges.append((pos_b[j1], pos_b[j2]))
    return old_ranges, new_ranges


def describe_hunk(hunk: Hunk, *, width: int = 60) -> str:
    """One phrase naming what a hunk changes, for messages and commit subjects: its first added
    line (``line 35: acc = tl.dot(a, b, acc)``), or for a deletion its first removed line
    (``line 12: removed x = y.float()``); 1-based line numbers of the candidate (of the current
    code for a deletion), the text cut at ``width`` characters."""
    def first(lines: tuple[str, ...]) -> str:
        text = next((ln.strip() for ln in lines if ln.strip()), "")
        return text if len(text) <= width else text[: width - 1] + "…"

    if hunk.added:
        return f"line {hunk.b_start + 1}: {first(hunk.added)}"
    return f"line {hunk.a_start + 1}: removed {first(hunk.removed)}"


def describe_merge(current: str, candidate: str, accepted: Iterable[int]) -> str:
    """What a hunk-level merge kept and left out, in words: ``kept hunk 0 of 2 (line 35: acc =
    tl.dot(a, b, acc)); left out hunk 1 (line 48: mask=...)``."""
    hunks = diff_hunks(current, candidate)
    chosen = set(accepted)
    kept = [h for h in hunks if h.index in chosen]
    left = [h for h in hunks if h.index not in chosen]

    def which(items: list[Hunk]) -> str:
        noun = "hunk" if len(items) == 1 else "hunks"
        return f"{noun} {', '.join(str(h.index) for h in items)}"

    def what(items: list[Hunk]) -> str:
        return "; ".join(describe_hunk(h) for h in items)

    text = (f"kept {which(kept)} of {len(hunks)} ({what(kept)})" if kept
            else f"kept none of {len(hunks)} hunk{'s' if len(hunks) != 1 else ''}")
    return text + (f"; left out {which(left)} ({what(left)})" if left else "")


def unified_patch(current: str, candidate: str, *, from_name: str = "current.py",
                  to_name: str = "candidate.py", context: int = 3) -> str:
    """A unified diff of the two sources (empty when they are equal)."""
    return "".join(difflib.unified_diff(
        current.splitlines(keepends=True), candidate.splitlines(keepends=True),
        fromfile=from_name, tofile=to_name, n=context,
    ))


def diff_stats(current: str, candidate: str) -> tuple[int, int, int]:
    """``(hunks, lines removed, lines added)`` of the diff."""
    hunks = diff_hunks(current, candidate, context=0)
    return len(hunks), sum(len(h.removed) for h in hunks), sum(len(h.added) for h in hunks)
