"""Sessions: one git repository per optimization session, every decision a commit or a ref.

* ``session``: :class:`Session`, the domain (create/open, versions, candidates, approve/reject,
  restore, plan and stage states, diff, export);
* ``records``: the records it hands out (:class:`Version`, :class:`CandidateRecord`, diffs)
  and the commit-message format they are read from;
* ``approval``: the rules for approving a candidate, and ``SessionError``;
* ``redact``: secrets never reach a repository;
* ``report``: Markdown/JSON reports of a session.
"""

from typing import TYPE_CHECKING, Any

from xeforge_core.session.approval import SessionError
from xeforge_core.session.records import (
    CANDIDATE_REF_PREFIX,
    CandidateRecord,
    FileDiff,
    SessionDiff,
    Version,
    device_label,
    format_speedup,
    parse_trailers,
    speed_measured,
)
from xeforge_core.session.redact import REDACTED, redact, register_secret

if TYPE_CHECKING:
    from xeforge_core.session.session import BRANCH, BRANCH_REF, STATE_REF, Session

#: Names of ``session.session``, imported when first asked for: it needs GitPython, which the
#: in-memory controller (machines without it) never does.
_GIT_BACKED = ("BRANCH", "BRANCH_REF", "STATE_REF", "Session")


def __getattr__(name: str) -> Any:
    if name in _GIT_BACKED:
        from xeforge_core.session import session

        return getattr(session, name)
    raise AttributeError(f"module 'xeforge_core.session' has no attribute {name!r}")

__all__ = [
    "BRANCH",
    "BRANCH_REF",
    "CANDIDATE_REF_PREFIX",
    "REDACTED",
    "STATE_REF",
    "CandidateRecord",
    "FileDiff",
    "Session",
    "SessionDiff",
    "SessionError",
    "Version",
    "device_label",
    "format_speedup",
    "parse_trailers",
    "redact",
    "register_secret",
    "speed_measured",
]
