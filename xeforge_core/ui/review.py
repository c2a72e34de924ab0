"""The state of one candidate under review on the Optimize page.

A candidate moves through::

    proposed ──verify──▶ verifying ──▶ verified ──approve──▶ approved
        ▲                                  │  └──reject───▶ rejected
        └──── edit / hunk merge ◀──────────┘

Any change to the code (an edit, a hunk-level merge) drops the verdict: the new code must be
verified again before it can be approved. Only a verdict for exactly the code under review,
and one that passed, allows approval. These rules live here, not in the page, so they are
tested without a browser.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.diffmerge import diff_hunks, merge_hunks
from xeforge_core.errors import XeForgeError
from xeforge_core.verdict import Verdict


class ReviewStatus(str, enum.Enum):
    """Where the candidate under review stands."""

    PROPOSED = "proposed"
    VERIFYING = "verifying"
    VERIFIED = "verified"
    APPROVED = "approved"
    REJECTED = "rejected"


def code_hash(source: str) -> str:
    """A short stable hash of a source text."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


class ReviewError(XeForgeError, RuntimeError):
    """An action that the candidate's state does not allow (the message says why)."""


@dataclass
class CandidateReview:
    """One candidate for one stage: its code (possibly merged or edited from the engine's
    proposal), where it came from, and the verdict on exactly this code (if any).

    ``engine`` is the engine that proposed it (``rules``, ``llm``, ``manual``); ``origin`` is
    the engine while the code is its proposal, ``merge``/``edit`` once the user changed it;
    ``proposed_source`` keeps the engine's original proposal so hunks can be re-chosen;
    ``candidate_id`` is the kept candidate holding exactly the code under review (``None`` until
    it is kept, and again after an edit or a merge); ``iterations`` holds the CoVeR loop's
    attempts that led to it (``Attempt.to_dict(with_source=True)``), ``verifications`` every
    verdict given while it was under review.
    """

    stage: str
    base_source: str
    proposed_source: str
    source: str
    engine: str
    origin: str = ""
    rationale: str = ""
    prompt: str = ""
    model: str | None = None
    status: ReviewStatus = ReviewStatus.PROPOSED
    verdict: Verdict | None = None
    verdict_for: str | None = None
    iterations: list[dict[str, Any]] = field(default_factory=list)
    verifications: list[dict[str, Any]] = field(default_factory=list)
    accepted_hunks: list[int] | None = None
    note: str = ""
    candidate_id: str | None = None

    def __post_init__(self) -> None:
        if not self.origin:
            self.origin = self.engine if self.source == self.proposed_source else "edit"

    # -- queries ---------------------------------------------------------------------------
    @property
    def changed(self) -> bool:
        """Whether the code under review differs from the current version."""
        return self.source != self.base_source

    @property
    def iteration_count(self) -> int:
        """How many CoVeR iterations led to this candidate (0 for a manual one)."""
        return len({int(a.get("iteration") or 0) for a in self.iterations})

    @property
    def verdict_current(self) -> bool:
        """Whether the verdict (if any) was given for exactly the code under review."""
        return self.verdict is not None and self.verdict_for == code_hash(self.source)

    def can_approve(self) -> tuple[bool, str]:
        """``(allowed, reason)`` for approving the code under review now."""
        if self.status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED):
            return False, f"this candidate is already {self.status.value}"
        if self.status is ReviewStatus.VERIFYING:
            return False, "a verification is running"
        if not self.changed:
            return False, "the candidate is identical to the current version (nothing to approve)"
        if self.verdict is None:
            return False, "not verified yet: verify it first"
        if not self.verdict_current:
            return False, "the code changed since it was verified: verify it again first"
        assert self.verdict is not None
        if not self.verdict.passed:
            return False, f"the verdict is {self.verdict.kind.value}: only a passing candidate can be approved"
        return True, "verified and passing"

    # -- transitions -----------------------------------------------------------------------
    def set_source(self, source: str, origin: str) -> None:
        """Replace the code under review (an edit or a merge). The verdict is kept only if
        the code is unchanged."""
        self._require_open()
        if source == self.source:
            return
        self.source = source
        self.origin = self.engine if source == self.proposed_source else origin
        self.status = ReviewStatus.PROPOSED
        self.candidate_id = None  # the kept candidate holds the code as it was

    def apply_hunks(self, accepted: list[int]) -> str:
        """Make the code under review the current version plus the accepted hunks of the
        engine's proposal. Returns the merged code."""

        self._require_open()
        n = len(diff_hunks(self.base_source, self.proposed_source))
        accepted = sorted(set(accepted))
        merged = merge_hunks(self.base_source, self.proposed_source, accepted)
        self.accepted_hunks = None if accepted == list(range(n)) else accepted
        self.set_source(merged, "merge")
        return merged

    def start_verify(self) -> None:
        self._require_open()
        self.status = ReviewStatus.VERIFYING

    def finish_verify(self, verdict: Verdict, source: str) -> None:
        """Record the verdict for ``source`` (the code that was verified). If the code changed
        while verification ran, the verdict is kept as history but does not count."""
        self.verifications.append({"verdict": verdict.to_dict(), "source_hash": code_hash(source),
                                   "origin": self.origin})
        if self.status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED):
            return
        if source == self.source:
            self.verdict = verdict
            self.verdict_for = code_hash(source)
            self.status = ReviewStatus.VERIFIED
        else:
            self.status = ReviewStatus.PROPOSED

    def abort_verify(self) -> None:
        """A cancelled or failed verification: back to proposed (or verified, if a verdict
        for this exact code exists)."""
        if self.status is ReviewStatus.VERIFYING:
            self.status = ReviewStatus.VERIFIED if self.verdict_current else ReviewStatus.PROPOSED

    def approve(self) -> None:
        ok, why = self.can_approve()
        if not ok:
            raise ReviewError(why)
        self.status = ReviewStatus.APPROVED

    def reject(self, note: str = "") -> None:
        self._require_open()
        self.status = ReviewStatus.REJECTED
        self.note = note

    def _require_open(self) -> None:
        if self.status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED):
            raise ReviewError(f"this candidate is already {self.status.value}")
