"""Classify what went wrong inside the worker into a verdict kind, with the source line.

Rules (the first match wins):

* ``SyntaxError`` while importing the module -> ``compile_error`` at the error's line.
* Triton ``CompilationError`` (anywhere in the exception chain) -> ``compile_error``; its line,
  which Triton counts from the ``def`` line of the ``@triton.jit`` function, is mapped to the
  file line. ``OutOfResources`` (shared memory, threads) is a compile error too: the kernel as
  written does not fit the device.
* Triton's interpreter (``TRITON_INTERPRET=1``) runs kernel bodies as Python and wraps what they
  raise in ``InterpreterError``; those are what the compiler rejects on a GPU (bad shapes,
  non-power-of-two ``tl.arange``, type errors), so they are ``compile_error`` too, at the last
  frame in the module's file.
* ``torch.OutOfMemoryError``, ``MemoryError`` or "out of memory" in the text -> ``oom``; but
  ``environment`` where PyTorch's message shows the device full of other processes' memory
  (:func:`device_full_by_others`): the candidate did not cause it, and its verdict must not say so.
* Driver fault text -> ``crash``: Level Zero ``UR_RESULT_ERROR_*`` / ``ZE_RESULT_ERROR_*``,
  CUDA "illegal memory access", "CUDA error", "device-side assert", "misaligned address".
* A keyword both tuned by ``@triton.autotune`` and passed at the launch -> ``runtime_error``
  named as Triton names it ("Conflicting meta-parameters"; ``Autotuner._bench`` raises it on a
  GPU, while a single config, as the worker runs each, fails earlier with Python's "got multiple
  values for keyword argument").
* Anything else -> ``runtime_error`` at the last frame in the module's file.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig
import traceback
from dataclasses import dataclass
from types import TracebackType

from xeforge_core.errors import XeForgeError
from xeforge_core.verdict import VerdictKind
from xeforge_core.worker import backends
from xeforge_core.worker.lifted import lifted_names, user_text

DRIVER_FAULT_PATTERNS = (
    r"UR_RESULT_ERROR_\w+",
    r"ZE_RESULT_ERROR_\w+",
    r"illegal memory access",
    r"CUDA error",
    r"device-side assert",
    r"misaligned address",
    r"unspecified launch failure",
    r"PI_ERROR_\w+",
    r"DEVICE_LOST",
)
_DRIVER_RE = re.compile("|".join(DRIVER_FAULT_PATTERNS))
#: Out-of-memory messages: the GPU allocators', Intel's Level Zero, and PyTorch's CPU allocator under
#: the worker's address-space limit ("DefaultCPUAllocator: can't allocate memory ... Error code 12").
_OOM_RE = re.compile(r"out of memory|OutOfMemory|UR_RESULT_ERROR_OUT_OF_(DEVICE|HOST)_MEMORY|"
                     r"can't allocate memory|Cannot allocate memory", re.I)

#: PyTorch's caching allocator on a failed allocation (c10/cuda/CUDACachingAllocator.cpp):
#: "Tried to allocate 256.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 159.38 MiB
#: is free. Including non-PyTorch memory, this process has 1.20 GiB memory in use."
_ALLOCATOR_OOM_RE = re.compile(
    r"Tried to allocate ([\d.]+) ([KMGT]?i?B)\. \w+ \d+ has a total capacity of ([\d.]+) ([KMGT]?i?B) of which "
    r"([\d.]+) ([KMGT]?i?B) is free\..*?this process has ([\d.]+) ([KMGT]?i?B) memory in use", re.S)
_UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}

#: Where this process's memory and its request together stay under this share of the device's
#: capacity, an allocation that failed was refused because other processes held the rest.
OTHERS_FULL_SHARE = 0.5


def device_full_by_others(text: str) -> str | None:
    """The explanation when PyTorch's out-of-memory message in ``text`` shows that this process
    held and asked for less than :data:`OTHERS_FULL_SHARE` of the device while it was full (other
    processes, e.g. verifications sharing the GPU, held the rest), else ``None``."""
    m = _ALLOCATOR_OOM_RE.search(text)
    if m is None:
        return None
    asked, total, free, mine = (float(m.group(i)) * _UNITS.get(m.group(i + 1), 1) for i in (1, 3, 5, 7))
    if free >= asked or mine + asked >= OTHERS_FULL_SHARE * total:
        return None  # not full (a per-process cap refused it), or this process's own share
    gib = 2 ** 30
    return (f"the device ran out of memory while other processes held {(total - free - mine) / gib:.1f} GiB of its "
            f"{total / gib:.1f} GiB: this verification had {mine / gib:.2f} GiB in use and asked for "
            f"{asked / gib:.2f} GiB more, so the candidate is not the cause; verify it again with the device less "
            "shared")

MAX_ERROR_TEXT = 6000


@dataclass
class Failure:
    """A classified failure: ``kind``, one-sentence ``reason``, 1-based ``line`` in the module
    file when known, and ``error_text`` (traceback tail with the offending source line).
    ``problem``: the problem broke the contract of its inputs (``get_inputs()`` returning no
    list, a spec naming an unknown dim): bad input, not the environment, in a baseline job."""

    kind: VerdictKind
    reason: str
    line: int | None = None
    error_text: str = ""
    problem: bool = False


class WorkerError(XeForgeError):
    """Raised inside the worker to stop a step with an already classified ``Failure``."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` followed by its ``__cause__`` / ``__context__`` chain (no repeats)."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def _frames(tb: TracebackType | None) -> list[tuple[str, int]]:
    out = []
    while tb is not None:
        out.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return out


def last_line_in(exc: BaseException, path: str) -> int | None:
    """The last line of ``path`` on the traceback of any exception in ``exc``'s chain (the
    deepest one first, so a wrapped interpreter error points into the kernel body)."""
    for e in reversed(exception_chain(exc)):
        lines = [ln for fn, ln in _frames(e.__traceback__) if fn == path]
        if lines:
            return lines[-1]
    return None


def _source_line(path: str, line: int | None) -> str:
    """Line ``line`` of ``path`` as the user wrote it (a lifted size read back as its literal)."""
    if not line:
        return ""
    return user_text(linecache.getline(path, line).rstrip(), lifted_names(path))


def _user_frames(frames: list[traceback.FrameSummary]) -> list[str]:
    """``traceback.format_list(frames)``, with the lines quoted from a lifted module written as
    the user wrote them."""
    names: dict[str, dict[str, str]] = {}
    out = []
    for fr, text in zip(frames, traceback.format_list(frames)):
        lifted = names.setdefault(fr.filename, lifted_names(fr.filename))
        if lifted:
            head, _, code = text.partition("\n")
            text = head + "\n" + user_text(code, lifted)
        out.append(text)
    return out


#: Where the worker's own code and Python's standard library live: frames there say nothing about
#: the module under test (an import's ``ast.parse`` above a ``SyntaxError``, the harness's calls).
_HARNESS_DIRS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
                 sysconfig.get_paths()["stdlib"] + os.sep)


def _harness_frame(filename: str) -> bool:
    """A frame of the worker or of the standard library (packages installed under the standard
    library's folder, torch's and Triton's frames among them, are not)."""
    return filename.startswith(_HARNESS_DIRS) and not any(
        part in filename for part in ("site-packages", "dist-packages"))


def _format_one(exc: BaseException, src_dir: str) -> str:
    """One exception's traceback, starting at the first frame in a module under test (the
    worker's and torch's own frames above it say nothing about the module); where no frame is in
    one (a ``SyntaxError`` raised by the import, a fault inside Triton's launcher), the frames
    of the worker and the standard library are left out and the rest kept."""
    frames = traceback.extract_tb(exc.__traceback__)
    start = next((i for i, fr in enumerate(frames) if fr.filename.startswith(src_dir)), None)
    shown = frames[start:] if start is not None else [
        fr for fr in frames if not _harness_frame(fr.filename)]
    lines = ["Traceback (most recent call last):\n"] if shown else []
    lines += _user_frames(list(shown))
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def format_error(exc: BaseException, path: str, line: int | None) -> str:
    """Traceback text (tail, at most ``MAX_ERROR_TEXT`` characters) plus the offending line."""
    src_dir = path.rsplit("/", 2)[0] + "/" if path.count("/") >= 2 else path
    parts = [_format_one(e, src_dir) for e in reversed(exception_chain(exc))]
    text = "\nThe above exception was the direct cause of the following exception:\n\n".join(parts)
    if len(text) > MAX_ERROR_TEXT:
        text = "...\n" + text[-MAX_ERROR_TEXT:]
    src = _source_line(path, line)
    if src:
        name = path.rsplit("/", 1)[-1]
        text += f"\n{name}:{line}: {src.strip()}"
    return text


def _compilation_error(exc: BaseException) -> BaseException | None:
    try:
        from triton.compiler.errors import CompilationError
    except Exception:  # pragma: no cover - triton missing
        return None
    for e in exception_chain(exc):
        if isinstance(e, CompilationError):
            return e
    return None


def _interpreter_extern(exc: BaseException) -> str:
    """``libdevice.tanh`` where ``exc`` comes from a call of an extern function the interpreter
    does not implement (``worker.externs``), else ``""``."""
    return next((str(e.call) for e in exception_chain(exc) if type(e).__name__ == "ExternUnsupported"), "")


def _is_interpreter_error(exc: BaseException) -> bool:
    return any(type(e).__name__ == "InterpreterError" for e in exception_chain(exc))


def _out_of_resources(exc: BaseException) -> BaseException | None:
    for e in exception_chain(exc):
        if type(e).__name__ in ("OutOfResources", "PTXASError"):
            return e
    return None


def map_compilation_line(err: BaseException, path: str, jit_functions: list) -> int | None:
    """File line of a Triton ``CompilationError``: Triton counts ``err.node.lineno`` from the
    ``def`` line of the JIT function whose source is ``err.src``."""
    node = getattr(err, "node", None)
    lineno = getattr(node, "lineno", None)
    src = getattr(err, "src", None)
    if lineno is None:
        return None
    try:
        from triton.runtime.jit import get_jit_fn_file_line
    except Exception:  # pragma: no cover
        return None
    for fn in jit_functions:
        if getattr(fn, "src", None) == src:
            try:
                file_name, begin = get_jit_fn_file_line(fn)
            except Exception:
                continue
            if file_name == path:
                return begin + lineno - 1
    return None


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    if len(first) > 300:
        first = first[:300] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def classify(exc: BaseException, path: str, *, jit_functions: list | None = None,
             during: str = "running") -> Failure:
    """Classify ``exc`` (raised while ``during``, e.g. "importing", "running forward") for the
    module file at ``path``. Returns a ``Failure`` (see the module docstring for the rules)."""
    name = path.rsplit("/", 1)[-1]
    if isinstance(exc, SyntaxError) and (exc.filename in (path, None) or during == "importing"):
        line = exc.lineno if exc.filename == path else last_line_in(exc, path)
        src = (exc.text or "").strip()
        reason = f"{type(exc).__name__} at {name}:{line}: {exc.msg}" + (f" in `{src}`" if src else "")
        return Failure(VerdictKind.COMPILE_ERROR, reason, line, format_error(exc, path, line))

    texts = " | ".join(str(e) for e in exception_chain(exc))
    line = last_line_in(exc, path)

    if any(type(e).__name__ == "OutOfMemoryError" or isinstance(e, MemoryError)
           for e in exception_chain(exc)) or _OOM_RE.search(texts):
        where = f" at {name}:{line}" if line else ""
        others = device_full_by_others(texts)
        if others:
            return Failure(VerdictKind.ENVIRONMENT, f"{others} (while {during}{where})", line,
                           format_error(exc, path, line))
        return Failure(VerdictKind.OOM, f"out of memory while {during}{where}: {_one_line(exc)}", line,
                       format_error(exc, path, line))

    cerr = _compilation_error(exc)
    if cerr is not None:
        mapped = map_compilation_line(cerr, path, jit_functions or []) or line
        src = _source_line(path, mapped).strip()
        detail = getattr(cerr, "error_message", None) or _one_line(cerr)
        reason = (f"Triton compilation failed at {name}:{mapped}" + (f" (`{src}`)" if src else "")
                  + f": {str(detail).strip().splitlines()[-1] if detail else ''}")
        return Failure(VerdictKind.COMPILE_ERROR, reason, mapped, format_error(exc, path, mapped))

    oor = _out_of_resources(exc)
    if oor is not None:
        return Failure(VerdictKind.COMPILE_ERROR, f"the kernel does not fit the device: {_one_line(oor)}",
                       line, format_error(exc, path, line))

    if _DRIVER_RE.search(texts):
        match = _DRIVER_RE.search(texts)
        return Failure(VerdictKind.CRASH, f"driver fault while {during} ({match.group(0)}): {_one_line(exc)}",
                       line, format_error(exc, path, line))

    extern = _interpreter_extern(exc)
    if extern:
        where = f" at {name}:{line}" if line else ""
        return Failure(VerdictKind.ENVIRONMENT,
                       f"Triton's interpreter cannot run {extern}{where} (an extern function of the GPU's math "
                       "library, which the interpreter does not implement): this kernel can be judged on a GPU only, "
                       "or written with tl.math functions the interpreter runs", line, format_error(exc, path, line))
    if _is_interpreter_error(exc):
        inner = exception_chain(exc)[-1]
        src = _source_line(path, line).strip()
        reason = (f"the Triton kernel does not compile: {_one_line(inner)}"
                  + (f" at {name}:{line} (`{src}`)" if line else ""))
        return Failure(VerdictKind.COMPILE_ERROR, reason, line, format_error(exc, path, line))

    src = _source_line(path, line).strip()
    where = f" at {name}:{line}" + (f" (`{src}`)" if src else "") if line else ""
    tuned = _autotune_conflict(exc)
    if tuned:
        reason = (f"Conflicting meta-parameters: {tuned} is tuned by @triton.autotune and also passed at the "
                  f"launch{where}; Triton refuses this (\"don't re-define auto-tuned symbols\"): drop it from the "
                  "launch or from the configs")
        return Failure(VerdictKind.RUNTIME_ERROR, reason, line, format_error(exc, path, line))
    kind = VerdictKind.COMPILE_ERROR if during == "importing" else VerdictKind.RUNTIME_ERROR
    reason = f"{_one_line(exc)} while {during}{where}"
    return Failure(kind, reason, line, format_error(exc, path, line))


_DUPLICATE_KW = re.compile(r"got multiple values for keyword argument '(\w+)'")
#: The autotuner's own words for the same conflict, raised while it benchmarks its configs.
_CONFLICTING = re.compile(r"^Conflicting meta-parameters: ([\w, ]+)\. Make sure that you don't re-define")


def _autotune_conflict(exc: BaseException) -> str | None:
    """The keyword a launch passed that its autotuner's config also sets, when ``exc`` is the
    ``TypeError`` (one config) or the ``ValueError`` (while it benchmarks several) that raises
    inside ``triton/runtime/autotuner.py``; else ``None``."""
    match = (_DUPLICATE_KW.search(str(exc)) if isinstance(exc, TypeError)
             else _CONFLICTING.search(str(exc)) if isinstance(exc, ValueError) else None)
    if match is None:
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    return match.group(1) if any(f.filename.replace("\\", "/").endswith("triton/runtime/autotuner.py")
                                 for f in frames) else None


def hardcoded_device_note(source: str, error_text: str, device: str) -> str | None:
    """If the module hard-codes another backend's device (xpu, cuda: ``DeviceBackend.hardcoded``)
    and so cannot run on ``device``, a sentence saying so; else ``None``."""
    for backend in backends.BACKENDS:
        dev = backend.name
        if dev == device or not backend.hardcoded:
            continue
        in_source = re.search(backend.hardcoded, source)
        in_error = re.search(dev, error_text, re.I)
        if in_source and in_error:
            return (f"hard-codes the {dev} device; it cannot run on {device} as written "
                    "(the portability codemod rewrites it)")
    return None
