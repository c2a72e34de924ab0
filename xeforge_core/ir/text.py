"""IR text for reading and diffing: source locations stripped.

Every IR stage carries the kernel's source locations (MLIR ``loc(...)`` attributes and ``#loc``
aliases in TTIR/TTGIR, ``!dbg`` metadata in LLVM IR, ``.loc`` directives and DWARF sections in
PTX). Two versions of a kernel differ in those on almost every line as soon as one line of
Python moves, which hides the change that matters; :func:`strip_locations` removes them (the
IR page and ``xeforge ir --diff`` do by default, and say so).

Only the standard library is used.
"""

from __future__ import annotations

import re

_MLIR_LOC_LINE = re.compile(r"^#loc\d*\s*=")
_LLVM_DBG = re.compile(r",?\s*!dbg !\d+")
_LLVM_META_LINE = re.compile(r"^!\d+\s*=\s*(distinct\s+)?!(DI|\{)")
_LLVM_DBG_RECORD = re.compile(r"^\s*#dbg_")


def _strip_mlir_locs(line: str) -> str:
    """``line`` without its `` loc(...)`` attributes (balanced parentheses, quoted strings
    skipped)."""
    out = []
    i = 0
    n = len(line)
    while i < n:
        if line.startswith("loc(", i) and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] in "_#")):
            depth = 0
            j = i + 3
            in_str = False
            while j < n:
                c = line[j]
                if in_str:
                    if c == "\\":
                        j += 1
                    elif c == '"':
                        in_str = False
                elif c == '"':
                    in_str = True
                elif c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            while out and out[-1] == " ":
                out.pop()
            i = j + 1
            continue
        out.append(line[i])
        i += 1
    return "".join(out).rstrip()


def strip_locations(text: str, stage: str) -> str:
    """``text`` of IR ``stage`` (``ttir``, ``ttgir``, ``llir``, ``ptx``, ``amdgcn``, ``spvdis``)
    without source-location noise (see the module docstring); other stages unchanged."""
    lines = text.splitlines()
    if stage in ("ttir", "ttgir"):
        kept = [_strip_mlir_locs(ln) for ln in lines if not _MLIR_LOC_LINE.match(ln)]
    elif stage == "llir":
        kept = [_LLVM_DBG.sub("", ln) for ln in lines
                if not _LLVM_META_LINE.match(ln) and not _LLVM_DBG_RECORD.match(ln)]
    elif stage in ("ptx", "amdgcn"):
        kept = []
        for ln in lines:
            s = ln.strip()
            if s.startswith((".section\t.debug", ".section .debug")):
                break  # DWARF sections run to the end of the file
            if s.startswith((".loc\t", ".loc ", ".file\t", ".file ")):
                continue
            kept.append(ln)
    else:
        kept = lines
    return "\n".join(kept) + ("\n" if text.endswith("\n") else "")
