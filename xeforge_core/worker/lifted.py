"""The names the loader gives a problem's literal sizes, and the user's text behind them.

``problem.scaling.lift_literal_sizes`` rewrites ``torch.rand([4, 8])`` as
``torch.rand([SIZE_4, SIZE_8])`` with ``SIZE_4 = 4`` appended under :data:`LIFTED_MARKER`, so the
verifier can reduce and scale the sizes; every line keeps its number. That rewritten text is the
file the worker imports, so a traceback quotes it; :func:`user_text` turns a quoted line of such a
file back into what the user wrote. It lives in the worker layer, below ``problem``, because the
worker's error text needs it.
"""

from __future__ import annotations

import linecache
import re

#: The prefix of a lifted size's name (``SIZE_4`` for a literal 4; ``SIZE_4_`` where the module
#: already binds ``SIZE_4``).
LIFTED_PREFIX = "SIZE_"

#: The comment above the appended constants; a file holding it was lifted.
LIFTED_MARKER = "# get_inputs()'s literal sizes, named so the verifier can reduce and scale them"

_NAME_RE = re.compile(rf"\b{LIFTED_PREFIX}(\d+)_*\b")


def is_lifted(path: str) -> bool:
    """Whether the file at ``path`` (read through ``linecache``, as tracebacks read it) is a
    module whose literal sizes were lifted."""
    return any(line.rstrip("\n") == LIFTED_MARKER for line in linecache.getlines(path))


def user_text(line: str) -> str:
    """``line`` of a lifted module with each lifted name written back as its literal
    (``torch.rand([SIZE_4, SIZE_8])`` -> ``torch.rand([4, 8])``)."""
    return _NAME_RE.sub(r"\1", line)
