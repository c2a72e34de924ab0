"""Extract the kernel module from an LLM's reply (or a reply pasted from any chat LLM).

Replies come in every shape: one fenced ```python block, several blocks (the original and the
rewrite, or a kernel and a usage example), a bare module with no fence, a truncated reply whose
last fence never closes, a unified diff, prose with no code at all, or reasoning wrapped in
``<think>`` tags. :func:`extract_code` picks the complete module, or says why there is none.

Choice, in order: fenced Python (or unlabelled) blocks that parse and form a complete module
(imports plus a ``@triton.jit`` kernel or a ``Model`` class), largest first (the last one wins
a tie); then the whole reply when it is itself a module; then a module found inside unfenced
prose. A reply that is only a diff is rejected (a complete module is required to verify it); a
code fragment (a lone kernel with no imports/launcher) is rejected with that reason; code that
does not parse is still returned (the verifier reports the syntax error with its line) with a
note, so the CoVeR loop can feed it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xeforge_core.worker.astutil import parse as parse_python

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*$", re.M)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_PY_LANGS = {"", "python", "py", "python3", "py3", "triton", "ipython"}
_DIFF_LANGS = {"diff", "patch", "udiff"}
_MODULE_START = re.compile(r"^(import |from |@|def |class |#|\"\"\"|''')")


@dataclass
class Extraction:
    """Result of :func:`extract_code`.

    ``code`` is the module source (``None`` when none was found) and ``reason`` then says why;
    ``source`` tells where it came from (``fenced``, ``whole_reply``, ``unfenced``);
    ``notes`` carries warnings (e.g. the code does not parse, several modules were offered).
    """

    code: str | None
    reason: str = ""
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code is not None


@dataclass
class _Block:
    lang: str
    body: str
    closed: bool
    index: int


def _blocks(text: str) -> list[_Block]:
    """Fenced blocks in order; a final unclosed fence yields a block marked ``closed=False``."""
    out: list[_Block] = []
    pos = 0
    idx = 0
    while True:
        m = _FENCE.search(text, pos)
        if not m:
            break
        fence = m.group("fence")
        start = m.end() + 1
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$", re.M)
        c = close.search(text, start)
        if c is None:
            out.append(_Block(m.group("lang").lower(), text[start:], False, idx))
            break
        out.append(_Block(m.group("lang").lower(), text[start:c.start()], True, idx))
        pos = c.end()
        idx += 1
    return out


#: A line only Python starts so (a definition, a decorator, an import statement), not prose that
#: begins with the same word ("from the profile", "classic tiling", "import the kernel").
_PYTHON_LINE = re.compile(r"^(?:def \w+\s*\(|class \w+\s*[:(]|@[\w.]+|import [\w.]+\s*(?:$|,| as )"
                          r"|from [\w.]+ import )", re.M)


def _parses(code: str) -> str | None:
    try:
        parse_python(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return None


def _looks_like_diff(code: str) -> bool:
    lines = code.splitlines()
    heads = sum(1 for ln in lines if ln.startswith(("--- ", "+++ ", "@@ ")))
    marks = sum(1 for ln in lines if ln[:1] in {"+", "-"} and not ln.startswith(("+++", "---")))
    return heads >= 2 or (heads >= 1 and marks >= 2)


def _is_complete(code: str) -> bool:
    has_import = re.search(r"^\s*(import|from)\s+\w", code, re.M) is not None
    has_kernel = re.search(r"@(triton\.)?jit\b", code) is not None
    has_model = re.search(r"^class\s+\w+", code, re.M) is not None or re.search(r"^def\s+\w+", code, re.M) is not None
    return has_import and (has_kernel or has_model)


def _dedent_block(body: str) -> str:
    import textwrap

    return textwrap.dedent(body).strip("\n") + "\n"


def _unfenced_module(text: str) -> str | None:
    """The longest run of lines starting at a module-looking line that parses."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if not _MODULE_START.match(ln):
            continue
        for j in range(len(lines), i, -1):
            chunk = "\n".join(lines[i:j]).strip("\n") + "\n"
            if _parses(chunk) is None and _is_complete(chunk):
                return chunk
        break
    return None


def _unfenced_broken_module(text: str) -> tuple[str, str] | None:
    """``(code, parse error)`` for a complete-looking module (imports plus a kernel or a class)
    that starts at the first module-looking line and does not parse at an indented line, that is
    inside its own code: the user's own edit with a typo, returned whole so that the verifier
    names the line. (An error at an unindented line is more likely prose after the module, which
    :func:`_unfenced_module` cuts off.)"""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _MODULE_START.match(ln)), None)
    if start is None:
        return None
    code = "\n".join(lines[start:]).strip("\n") + "\n"
    try:
        parse_python(code)
        return None
    except SyntaxError as exc:
        bad = code.splitlines()[exc.lineno - 1] if exc.lineno and exc.lineno <= len(code.splitlines()) else ""
        if not _is_complete(code) or not bad[:1].isspace():
            return None
        return code, f"line {exc.lineno}: {exc.msg}"


def extract_code(reply: str | None) -> Extraction:
    """Find the complete kernel module in ``reply``.

    Returns an :class:`Extraction`; never raises. ``code is None`` with a ``reason`` when the
    reply is empty, has no code, is only a diff, or holds only a fragment.
    """
    if reply is None or not reply.strip():
        return Extraction(None, "the reply is empty")
    text = _THINK.sub("", reply.replace("\r\n", "\n"))
    blocks = _blocks(text)
    notes: list[str] = []

    python = [b for b in blocks if b.lang in _PY_LANGS and not _looks_like_diff(b.body)]
    diffs = [b for b in blocks if b.lang in _DIFF_LANGS or _looks_like_diff(b.body)]

    parsed_complete: list[tuple[int, int, str, _Block]] = []
    fragments: list[str] = []
    broken: list[tuple[str, str, _Block]] = []
    for b in python:
        code = _dedent_block(b.body)
        err = _parses(code)
        if err is None and _is_complete(code):
            parsed_complete.append((len(code), b.index, code, b))
        elif err is None:
            fragments.append(code)
        else:
            broken.append((code, err, b))

    if parsed_complete:
        parsed_complete.sort(key=lambda t: (t[0], t[1]))
        size, _, code, block = parsed_complete[-1]
        if len(parsed_complete) > 1:
            notes.append(f"the reply has {len(parsed_complete)} complete modules; took the largest")
        if not block.closed:
            notes.append("the reply's last code fence is not closed (reply cut off?); its code still parses")
        return Extraction(code, source="fenced", notes=notes)

    if broken:
        complete_broken = [t for t in broken if _is_complete(t[0])] or broken
        code, err, block = max(complete_broken, key=lambda t: (len(t[0]), t[2].index))
        notes.append(f"the code does not parse ({err})"
                     + ("; the reply looks cut off (unclosed code fence)" if not block.closed else ""))
        return Extraction(code, source="fenced", notes=notes)

    if not blocks:
        whole = text.strip("\n") + "\n"
        if _parses(whole) is None and _is_complete(whole):
            return Extraction(whole, source="whole_reply")
        if _looks_like_diff(whole):
            return Extraction(None, "the reply is a diff, not a complete module; ask for the whole "
                                    "file (a diff cannot be verified on its own)")
        broken_module = _unfenced_broken_module(text)
        found = None if broken_module is not None else _unfenced_module(text)
        if found:
            return Extraction(found, source="unfenced",
                              notes=["no code fence: took the module found in the reply's text"])
        if broken_module is not None:
            code, err = broken_module
            source = "whole_reply" if code.strip() == text.strip() else "unfenced"
            return Extraction(code, source=source, notes=[f"the code does not parse ({err})"])
        err = _parses(whole)
        if err and _PYTHON_LINE.search(whole):  # Python, broken and partial
            return Extraction(None, f"the reply's code does not parse ({err}), and it is not a complete module "
                                    "(imports with a kernel or a Model/launcher): give the whole file")
        return Extraction(None, "the reply contains no code (no fenced block and no Python module "
                                "in its text)")

    if diffs and not fragments:
        return Extraction(None, "the reply is a diff, not a complete module; ask for the whole file "
                                "(a diff cannot be verified on its own)")
    if fragments:
        return Extraction(None, "the reply's code is a fragment (no imports with a kernel or a "
                                "Model/launcher): the complete module is required")
    langs = sorted({b.lang for b in blocks if b.lang})
    return Extraction(None, "the reply's code blocks are not Python"
                            + (f" ({', '.join(langs)})" if langs else ""))


_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,}).*$", re.M)


def reply_prose(reply: str | None, extraction: Extraction | None = None, limit: int = 1500) -> str:
    """The reply's explanation: its text outside code fences and ``<think>`` blocks (the
    rationale bullets or paragraphs, as written), at most ``limit`` characters. ``""`` when the
    reply is only code: a bare module (``extraction.source == "whole_reply"``), or a module found
    in unfenced text once that module is taken out."""
    if not reply or (extraction is not None and extraction.source == "whole_reply"):
        return ""
    text = _THINK.sub("", reply.replace("\r\n", "\n"))
    if extraction is not None and extraction.source == "unfenced" and extraction.code:
        text = text.replace(extraction.code.strip("\n"), "")
    parts = _FENCE_LINE.split(text)
    prose = "\n".join(p.strip() for i, p in enumerate(parts) if i % 2 == 0 and p.strip()).strip()
    return prose[:limit] + ("…" if len(prose) > limit else "")
