"""The candidate review state machine (xeforge_core.ui.review)."""

from __future__ import annotations

import pytest

from xeforge_core.ui.review import CandidateReview, ReviewError, ReviewStatus, code_hash
from xeforge_core.verdict import Verdict, VerdictKind

BASE = "a = 1\nb = 2\nc = 3\n"
PROPOSED = "a = 10\nb = 2\nc = 30\n"


def _review() -> CandidateReview:
    return CandidateReview(stage="dtype_fix", base_source=BASE, proposed_source=PROPOSED,
                           source=PROPOSED, engine="rules")


def test_approve_needs_a_passing_verdict_for_exactly_this_code() -> None:
    r = _review()
    assert r.origin == "rules"
    # never verified: said so, not "the code changed since it was verified"
    assert r.can_approve() == (False, "not verified yet: verify it first")
    r.start_verify()
    assert r.status is ReviewStatus.VERIFYING and not r.can_approve()[0]
    r.finish_verify(Verdict(kind=VerdictKind.WRONG_ANSWER), PROPOSED)
    ok, why = r.can_approve()
    assert not ok and "wrong_answer" in why
    r.start_verify()
    r.finish_verify(Verdict(kind=VerdictKind.OK), PROPOSED)
    assert r.can_approve() == (True, "verified and passing")
    r.approve()
    assert r.status is ReviewStatus.APPROVED
    with pytest.raises(ReviewError):
        r.reject()
    assert len(r.verifications) == 2 and r.iterations == [] and r.iteration_count == 0


def test_hunk_merge_drops_the_verdict_until_verified_again() -> None:
    r = _review()
    r.start_verify()
    r.finish_verify(Verdict(kind=VerdictKind.OK), PROPOSED)
    merged = r.apply_hunks([0])
    assert merged == "a = 10\nb = 2\nc = 3\n"
    assert r.origin == "merge" and r.accepted_hunks == [0]
    assert r.status is ReviewStatus.PROPOSED and not r.verdict_current
    assert r.can_approve() == (False, "the code changed since it was verified: verify it again first")
    r.start_verify()
    r.finish_verify(Verdict(kind=VerdictKind.OK), merged)
    assert r.can_approve()[0]
    r.apply_hunks([0, 1])
    assert r.source == PROPOSED and r.origin == "rules" and r.accepted_hunks is None


def test_verdict_for_stale_code_does_not_count() -> None:
    r = _review()
    r.start_verify()
    r.set_source("a = 5\nb = 2\nc = 3\n", "edit")
    r.finish_verify(Verdict(kind=VerdictKind.OK), PROPOSED)
    assert r.verdict is None and r.status is ReviewStatus.PROPOSED
    assert r.verifications[0]["source_hash"] == code_hash(PROPOSED)


def test_nothing_to_approve_when_identical_and_reject() -> None:
    r = CandidateReview(stage="fusion", base_source=BASE, proposed_source=BASE, source=BASE,
                        engine="manual")
    r.start_verify()
    r.finish_verify(Verdict(kind=VerdictKind.OK), BASE)
    assert "identical" in r.can_approve()[1]
    r.abort_verify()
    r.reject("not useful")
    assert r.status is ReviewStatus.REJECTED and r.note == "not useful"
    with pytest.raises(ReviewError):
        r.set_source("x = 1\n", "edit")
