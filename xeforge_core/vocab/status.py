"""The states of a stage, a stage's outcome, a kept candidate and one CoVeR attempt.

Each is a ``str`` enum, so it is stored in JSON (``state.json``, reports, CSV) as its value and
compares equal to it (``StageStatus.DONE == "done"``); ``str()`` gives the value too.
"""

from __future__ import annotations

import enum


class _Status(str, enum.Enum):
    def __str__(self) -> str:
        return self.value


class StageStatus(_Status):
    """Where a stage of the plan stands.

    ``pending``: not started, re-opened, or idle again (a cancelled run, a rejected candidate);
    ``running``: a proposal or verification is working on it now; ``review``: a verified
    candidate awaits a person's decision; ``done``: a candidate was approved; ``kept_current``:
    nothing beat the current version; ``skipped``: the user skipped it; ``failed``: the current
    version cannot be verified on this device.
    """

    PENDING = "pending"
    RUNNING = "running"
    REVIEW = "review"
    DONE = "done"
    KEPT_CURRENT = "kept_current"
    SKIPPED = "skipped"
    FAILED = "failed"

    @property
    def open(self) -> bool:
        """Whether the stage still has work (it is the current stage when first open)."""
        return self in (StageStatus.PENDING, StageStatus.RUNNING, StageStatus.REVIEW)


class OutcomeStatus(_Status):
    """What one run of the CoVeR loop on a stage came to.

    ``approved``: a candidate became the current version; ``review``: an acceptable candidate
    awaits a person's decision; ``kept_current``: nothing beat the current version (or the
    engine cannot do this stage); ``failed``: the current version cannot be verified here;
    ``cancelled``: the user stopped it.
    """

    APPROVED = "approved"
    REVIEW = "review"
    KEPT_CURRENT = "kept_current"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def stage_status(self) -> StageStatus:
        """The stage's status after this outcome."""
        return {OutcomeStatus.APPROVED: StageStatus.DONE, OutcomeStatus.REVIEW: StageStatus.REVIEW,
                OutcomeStatus.KEPT_CURRENT: StageStatus.KEPT_CURRENT, OutcomeStatus.FAILED: StageStatus.FAILED,
                OutcomeStatus.CANCELLED: StageStatus.PENDING}[self]


class CandidateStatus(_Status):
    """A kept candidate: ``pending`` (no decision yet), ``approved`` (it became a version),
    ``rejected`` (by a person, or it did not verify), ``superseded`` (another was preferred)."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"


class AttemptStatus(_Status):
    """One candidate of one CoVeR iteration, classified for acceptance.

    ``faster``: correct and measurably faster; ``correct``: correct, speed not measured (cpu);
    ``not_faster``: correct but slower, equal or inconclusive; ``failed``: any verdict other than
    ``ok``; ``not_applicable``: the engine had nothing to propose; ``duplicate``: the same code
    as an earlier attempt of the stage; ``engine_error``: the engine raised; ``rejected``: a
    person rejected it.
    """

    FASTER = "faster"
    CORRECT = "correct"
    NOT_FASTER = "not_faster"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"
    DUPLICATE = "duplicate"
    ENGINE_ERROR = "engine_error"
    REJECTED = "rejected"

    @property
    def acceptable(self) -> bool:
        """Whether a candidate with this status may be approved."""
        return self in (AttemptStatus.FASTER, AttemptStatus.CORRECT)
