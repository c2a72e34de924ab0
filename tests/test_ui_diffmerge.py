"""Hunk-level diff and merge (xeforge_core.diffmerge)."""

from __future__ import annotations

import pytest

from xeforge_core.diffmerge import diff_hunks, diff_stats, merge_hunks, side_by_side, unified_patch

CURRENT = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    a = tl.load(x_ptr).to(tl.float32)
    b = a * 2
    tl.store(x_ptr, b)

def launch(x):
    k[(1,)](x, BLOCK=64, num_warps=3)
"""

CANDIDATE = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    a = tl.load(x_ptr)
    b = a * 2
    tl.store(x_ptr, b)

def launch(x):
    k[(1,)](x, BLOCK=64, num_warps=4)
    return x
"""


def test_hunks_found_in_order() -> None:
    hunks = diff_hunks(CURRENT, CANDIDATE)
    assert [h.index for h in hunks] == [0, 1]
    assert hunks[0].removed == ("    a = tl.load(x_ptr).to(tl.float32)",)
    assert hunks[0].added == ("    a = tl.load(x_ptr)",)
    assert hunks[1].added[-1] == "    return x"
    assert hunks[0].header == "@@ -6,1 +6,1 @@"
    assert "-    a = tl.load" in hunks[0].as_patch_text()


def test_merge_all_none_and_single_hunk() -> None:
    assert merge_hunks(CURRENT, CANDIDATE, [0, 1]) == CANDIDATE
    assert merge_hunks(CURRENT, CANDIDATE, []) == CURRENT
    only_first = merge_hunks(CURRENT, CANDIDATE, [0])
    assert "tl.load(x_ptr)\n" in only_first and ".to(tl.float32)" not in only_first
    assert "num_warps=3" in only_first and "return x" not in only_first
    only_second = merge_hunks(CURRENT, CANDIDATE, [1])
    assert ".to(tl.float32)" in only_second and "num_warps=4" in only_second
    assert only_second.endswith("    return x\n")


def test_merge_rejects_unknown_hunk() -> None:
    with pytest.raises(IndexError, match="no hunk 5"):
        merge_hunks(CURRENT, CANDIDATE, [5])


def test_pure_insert_and_delete_hunks() -> None:
    a = "a\nb\nc\n"
    b = "a\nx\nb\n"
    hunks = diff_hunks(a, b)
    assert [h.tag for h in hunks] == ["insert", "delete"]
    assert merge_hunks(a, b, [0]) == "a\nx\nb\nc\n"
    assert merge_hunks(a, b, [1]) == "a\nb\n"


def test_trailing_newline_follows_supplier() -> None:
    assert merge_hunks("a\nb", "a\nc\n", [0]) == "a\nc\n"
    assert merge_hunks("a\nb", "a\nc\n", []) == "a\nb"


def test_side_by_side_rows_and_patch() -> None:
    rows = side_by_side(CURRENT, CANDIDATE)
    changed = [r for r in rows if r.kind != "equal"]
    assert {r.hunk for r in changed} == {0, 1}
    insert_row = [r for r in changed if r.left_no is None]
    assert insert_row and insert_row[0].right == "    return x"
    assert len([r for r in rows if r.left_no]) == len(CURRENT.splitlines())
    patch = unified_patch(CURRENT, CANDIDATE)
    assert patch.startswith("--- current.py\n+++ candidate.py\n")
    assert unified_patch(CURRENT, CURRENT) == ""
    assert diff_stats(CURRENT, CANDIDATE) == (2, 2, 3)


def test_within_line_changes_are_whole_tokens() -> None:
    from xeforge_core.diffmerge import inline_changes

    old = "        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))"
    new = "        acc = tl.dot(a, b, acc)"
    ro, rn = inline_changes(old, new)
    assert [old[a:b] for a, b in ro] == ["+", ".to(tl.float32)", ".to(tl.float32", ")"]
    assert "".join(new[a:b] for a, b in rn).strip(", ") == "acc"
    assert inline_changes("x = 1", "completely different stuff here") == ([], [])


def test_side_by_side_marks_the_changed_part_of_a_line() -> None:
    from xeforge_core.ui.render import side_by_side_html

    html = side_by_side_html(CURRENT, CANDIDATE)
    # the removed ".to(tl.float32)" is marked on the left, inside a changed line
    assert "background:#ffc1bd" in html and ">float32</span>" in html
    assert html.count("background:#ffebe9") >= 1 and "background:#e6ffec" in html


def test_a_merge_is_described_by_what_it_kept_and_left_out():
    from xeforge_core.diffmerge import describe_merge

    current = "x = 1\ny = 2\nz = 3\ndel_me = 0\nw = 4\n"
    candidate = "x = 10\ny = 2\nz = 3\nw = 40\n"
    assert describe_merge(current, candidate, [0]) == (
        "kept hunk 0 of 2 (line 1: x = 10); left out hunk 1 (line 4: w = 40)")
    assert describe_merge(current, candidate, [0, 1]) == "kept hunks 0, 1 of 2 (line 1: x = 10; line 4: w = 40)"
    assert describe_merge(current, "x = 1\ny = 2\nz = 3\nw = 4\n", []) == (
        "kept none of 1 hunk; left out hunk 0 (line 4: removed del_me = 0)")
