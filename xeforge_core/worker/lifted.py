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


def lifted_names(path: str) -> dict[str, str]:
    """:func:`names_in` the file at ``path``, read through ``linecache`` as tracebacks read it."""
    return names_in("".join(linecache.getlines(path)))


def names_in(source: str) -> dict[str, str]:
    """``{name: literal}`` of the sizes defined under :data:`LIFTED_MARKER` in a module's
    ``source``; empty where it was not lifted."""
    lines = [line.rstrip("\n") for line in source.splitlines()]
    if LIFTED_MARKER not in lines:
        return {}
    found = {}
    for line in lines[lines.index(LIFTED_MARKER) + 1:]:
        m = re.fullmatch(rf"({LIFTED_PREFIX}\d+_*) = (\d+)", line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    return found


def user_text(line: str, names: dict[str, str]) -> str:
    """``line`` of a lifted module with each of its lifted ``names`` (:func:`lifted_names`)
    written back as its literal (``torch.rand([SIZE_4, SIZE_8])`` -> ``torch.rand([4, 8])``); a
    name of the user's own (``SIZE_4`` where the lifted one is ``SIZE_4_``, an attribute
    ``self.SIZE_16``) is left alone."""
    if not names:
        return line
    pattern = r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")(?!\w)"
    return re.sub(pattern, lambda m: names[m.group(1)], line)
