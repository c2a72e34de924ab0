"""The one base of every error Xe-Forge Studio raises on purpose.

``XeForgeError`` carries where bad input is (``file``, 1-based ``line``, ``field``: a YAML field
path such as ``ci[0].dims.BATCH``, or a form field) so that the CLI and the UI show one
specific sentence naming it. Every error class of the package derives from it, alone or
together with the built-in class whose meaning it shares (``ValueError`` for bad input,
``RuntimeError`` for an action that cannot be done now). Only the standard library is used:
the verification worker imports this module too.
"""

from __future__ import annotations

import difflib
from pathlib import Path


class XeForgeError(Exception):
    """Base class of the package's errors; ``str(err)`` is ``"<file>:<line> [<field>]: <message>"``
    with the parts that are known."""

    def __init__(self, message: str = "", *, file: str | Path | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        if self.field:
            where = f"{where} [{self.field}]" if where else f"[{self.field}]"
        return f"{where}: {self.message}" if where else self.message

    def __reduce__(self):  # picklable across processes with its location
        return (_rebuild, (type(self), self.message, self.file, self.line, self.field))


class TargetError(XeForgeError, ValueError):
    """A target that names no hardware profile (the optimizer's target) or no compile target (the
    IR's), or whose compiler backend is not installed here; the message lists the known ones."""


def _rebuild(cls: type[XeForgeError], message: str, file: str | None, line: int | None,
             field: str | None) -> XeForgeError:
    err = cls.__new__(cls)
    XeForgeError.__init__(err, message, file=file, line=line, field=field)
    return err


def nearest_name_hint(name: str, choices: list[str] | tuple[str, ...], cutoff: float = 0.6) -> str:
    """``"; did you mean 'cuda'?"`` for the choice nearest ``name`` (``difflib.get_close_matches``,
    case-insensitive), or "" when none is near."""
    lowered = {c.lower(): c for c in choices}
    near = difflib.get_close_matches(str(name).strip().lower(), list(lowered), n=1, cutoff=cutoff)
    return f"; did you mean {lowered[near[0]]!r}?" if near else ""


def missing_path_hint(path: str | Path) -> str:
    """What to say about ``path``, which does not exist: the nearest existing name in its
    directory, as a path to type (``"; did you mean sample_kernels/01_vector_add.py?"``), or,
    when the directory itself is missing, that directory with the nearest name next to it.
    "" when nothing is near (``difflib.get_close_matches``, cutoff 0.6, on the stems of names
    with the same extension and on whole names otherwise; files and folders alike, hidden ones
    only for a hidden name)."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        if parent == path:  # a missing root: nothing above it to look in
            return ""
        inner = missing_path_hint(parent)
        return f"; the folder {parent} does not exist{inner}"
    try:
        names = [p.name for p in parent.iterdir() if not p.name.startswith(".") or path.name.startswith(".")]
    except OSError:
        return ""
    # names of the same extension are compared by their stems: a shared ".py" is no likeness
    # (nothere.py is not near nomodel.py)
    same = {Path(n).stem: n for n in names if path.suffix and Path(n).suffix == path.suffix}
    near_stem = difflib.get_close_matches(path.stem, list(same), n=1, cutoff=0.6) if path.suffix else []
    near = ([same[near_stem[0]]] if near_stem else
            difflib.get_close_matches(path.name, [n for n in names if n not in same.values()], n=1, cutoff=0.6))
    return f"; did you mean {path.with_name(near[0])}?" if near else ""
