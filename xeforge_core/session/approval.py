"""The rules for approving a candidate, in one place: a session (``Session.approve``) and the
in-memory controller (``MemoryController``) both ask :func:`check_approval` before they make a
candidate the current version."""

from __future__ import annotations

from xeforge_core.errors import XeForgeError
from xeforge_core.session.records import CandidateRecord
from xeforge_core.vocab.status import CandidateStatus


class SessionError(XeForgeError, RuntimeError):
    """A session operation that cannot be done as asked (unknown version or candidate, a
    stale candidate, a repository that is not a session). ``str(err)`` says why."""


def _short(version: str) -> str:
    return version[:10]


def check_approval(rec: CandidateRecord, current: str, *, unchanged: bool, allow_stale: bool = False) -> bool:
    """Whether approving ``rec`` now is stale (it was verified against another version than
    ``current``, which ``allow_stale`` accepts); raises ``SessionError`` when it cannot be
    approved: it is already approved, rejected (restore it or add it again), stale without
    ``allow_stale`` (a superseded candidate is: another candidate of its stage became the
    current version), or its code is the current version's (``unchanged``)."""
    if rec.status == CandidateStatus.APPROVED:
        raise SessionError(f"candidate {rec.id} is already approved ({rec.approved_as})")
    if rec.status == CandidateStatus.REJECTED:
        raise SessionError(f"candidate {rec.id} was rejected; restore it or add it again")
    stale = rec.parent != current
    if stale and not allow_stale:
        raise SessionError(f"candidate {rec.id} was verified against {_short(rec.parent)}, but the current "
                           f"version is {_short(current)}; verify it again against the current version")
    if unchanged:
        raise SessionError(f"candidate {rec.id} does not change the kernel")
    return stale
