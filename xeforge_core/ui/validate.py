"""Checks of what a user pastes or uploads, before anything else sees it.

Each check raises :class:`InputError` with one clear sentence (and the line, when there is
one) that the page shows as is. Nothing here executes the code: Python is parsed with
:mod:`ast`, YAML with ``yaml.safe_load``, and the problem is built by
:func:`xeforge_core.problem.problem_from_source`, which is static too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from xeforge_core import units
from xeforge_core.errors import XeForgeError
from xeforge_core.worker import formats
from xeforge_core.worker.astutil import parse as parse_python

#: The largest kernel source or spec accepted (bytes of UTF-8). Real kernels are a few KB.
MAX_SOURCE_BYTES = 512 * 1024
MAX_SPEC_BYTES = 256 * 1024


class InputError(XeForgeError, ValueError):
    """Input the workbench cannot use. ``what`` names the input (``pasted kernel``,
    ``upload foo.py``, ...), ``line`` is 1-based when known."""

    def __init__(self, message: str, *, what: str = "input", line: int | None = None) -> None:
        where = f"{what}, line {line}" if line else what
        super().__init__(f"{where}: {message}")
        self.message = message
        self.what = what
        self.line = line


def check_size(text_or_data: str | bytes | None, *, limit: int, what: str, noun: str = "text") -> int:
    """Refuse input over ``limit`` bytes (UTF-8 for text) before anything else looks at it.

    Returns the size in bytes. Raises :class:`InputError` naming the size and the limit, e.g.
    "pasted kernel: the text is 565.4 KiB (579,000 bytes); the limit is 512.0 KiB (524,288
    bytes)". This is the first check of every paste, edit and upload, so an oversized input
    costs no parsing and leaves whatever was loaded before untouched."""
    if text_or_data is None:
        return 0
    data = text_or_data if isinstance(text_or_data, bytes) else None
    n = len(data) if data is not None else len(text_or_data.encode("utf-8", "replace"))  # type: ignore[union-attr]
    if n > limit:
        raise InputError(f"the {noun} is {units.size_exact(n)}; the limit is {units.size_exact(limit)}",
                         what=what)
    return n


def size_note(text: str | None, *, limit: int) -> str:
    """A one-line size indicator for a paste box: ``"12.3 KiB of 512.0 KiB"``, or the refusal
    sentence when the text is over the limit (shown before the user clicks Load)."""
    n = len((text or "").encode("utf-8", "replace"))
    if n > limit:
        return (f"{units.size_exact(n)}: over the limit of {units.size_exact(limit)}; "
                "it will not be loaded")
    return f"{units.size(n)} of {units.size(limit)}"


def decode_upload(data: bytes, *, name: str, limit: int = MAX_SOURCE_BYTES) -> str:
    """The text of an uploaded file, or :class:`InputError` for an empty, too large or
    binary (non-UTF-8, NUL bytes) file."""
    what = f"uploaded file {name}"
    if not data:
        raise InputError("the file is empty", what=what)
    check_size(data, limit=limit, what=what, noun="file")
    if b"\x00" in data:
        raise InputError("this is a binary file, not Python or YAML text", what=what)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        at = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)  # utf-8-sig counts past the BOM
        line = data[:at].count(b"\n") + 1
        raise InputError(f"not UTF-8 text: byte 0x{data[at]:02x} at offset {at}, line {line} "
                         "(a file saved in another encoding, such as Latin-1: save it as UTF-8)", what=what) from None
    return text


def check_kernel_source(text: str | None, *, what: str = "pasted kernel") -> str:
    """Check a kernel module's text: not empty, not too large, no NUL bytes, valid Python,
    and it defines ``Model`` (or ``ModelNew``). Returns the text unchanged."""
    check_size(text, limit=MAX_SOURCE_BYTES, what=what, noun="kernel")
    if text is None or not text.strip():
        raise InputError("nothing to load: the kernel is empty", what=what)
    if "\x00" in text:
        raise InputError("the text contains NUL bytes: this is binary data, not Python", what=what)
    try:
        tree = parse_python(text)
    except SyntaxError as exc:
        detail = exc.msg or "invalid syntax"
        raise InputError(f"this is not valid Python: {detail}", what=what, line=exc.lineno) from None
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    if not classes.intersection(formats.class_names()):
        raise InputError(
            "no `Model` class: a kernel module defines `class Model(nn.Module)` whose forward "
            "launches the Triton kernels, plus `get_inputs()` and `get_init_inputs()` "
            "(or `ModelNew` with its reference `Model` in a paired file)", what=what)
    return text


def check_spec_text(text: str | None, *, what: str = "spec") -> str | None:
    """Check a YAML spec's text (``None``/blank means no spec): size and that it parses to a
    mapping. Field-level errors (an unknown dim, a bad dtype) come from the problem loader."""
    check_size(text, limit=MAX_SPEC_BYTES, what=what, noun="spec")
    if text is None or not text.strip():
        return None
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", what=what,
                         line=(mark.line + 1) if mark is not None else None) from None
    if not isinstance(data, dict):
        raise InputError("a spec is a YAML mapping with `inputs`, `inits` and variants "
                         "(`ci`, `bench-gpu`, ...)", what=what)
    return text


@dataclass
class LoadedInput:
    """A problem built from user input, with the texts it came from."""

    problem: Any
    source: str
    spec_text: str | None
    reference_source: str | None
    name: str


def load_user_problem(source: str | None, *, name: str = "kernel", spec_text: str | None = None,
                      reference_source: str | None = None, what: str = "pasted kernel",
                      spec_what: str = "spec") -> LoadedInput:
    """Validate the texts and build the :class:`~xeforge_core.problem.Problem` statically.

    Raises :class:`InputError` for anything the user must fix, including the loader's
    ``ProblemError`` (an unknown dim in the spec, a bad dtype, ...), whose message names the
    field or line; ``spec_what`` names the spec in those messages (e.g. the uploaded file).
    """
    from xeforge_core.problem import ProblemError, problem_from_source

    source = check_kernel_source(source, what=what)
    spec_text = check_spec_text(spec_text)
    if reference_source is not None and reference_source.strip():
        check_kernel_source(reference_source, what="reference")
    else:
        reference_source = None
    safe_name = "".join(c if c.isalnum() or c in "_-" else "_" for c in (name or "kernel"))[:80]
    try:
        problem = problem_from_source(source, name=safe_name or "kernel", spec_text=spec_text,
                                      reference_source=reference_source)
    except ProblemError as exc:
        what_err = spec_what if exc.field else what
        message = getattr(exc, "message", None) or str(exc)
        if exc.field:
            message = f"field `{exc.field}`: {message}"
        raise InputError(message, what=what_err, line=exc.line) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise InputError(f"could not read the problem: {exc}", what=what) from None
    return LoadedInput(problem=problem, source=source, spec_text=spec_text,
                       reference_source=reference_source, name=safe_name or "kernel")
