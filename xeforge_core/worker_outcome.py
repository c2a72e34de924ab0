"""How a worker process ended, as the parent observed it, and what that means for a verdict.

:class:`WorkerOutcome` is what the supervision of one worker (``xeforge_core.worker_process``)
records; :func:`classify` decides the process-level outcome (timeout, crash by signal or driver
fault, out of memory) from it, never trusting the worker to report its own death;
:func:`annotate` adds how the worker was isolated and the escape attempts it recorded.

Only the standard library is used here (no torch import in the caller).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core import sandbox
from xeforge_core.verdict import VerdictKind
from xeforge_core.worker.escapes import read_attempts

# Text in a worker's error output that means a driver/runtime fault rather than a Python bug.
# Level Zero / Unified Runtime codes (Intel), CUDA runtime and driver errors (NVIDIA), SYCL.
DRIVER_FAULT_PATTERNS: tuple[str, ...] = (
    r"UR_RESULT_ERROR_[A-Z_]+",
    r"ZE_RESULT_ERROR_[A-Z_]+",
    r"PI_ERROR_[A-Z_]+",
    r"Native API failed[^\n]*",
    r"CUDA error: [^\n]+",
    r"CUDA_ERROR_[A-Z_]+",
    r"an illegal memory access was encountered",
    r"misaligned address",
    r"unspecified launch failure",
    r"device-side assert triggered",
    r"illegal instruction was encountered",
    r"GPU Hang",
    r"DEVICE_LOST",
)


# Text that means the worker ran out of host or device memory.
OOM_PATTERNS: tuple[str, ...] = (
    r"\bMemoryError\b",
    r"OutOfMemoryError",
    r"\b(?:CUDA|XPU|HIP) out of memory",
    r"\bout of memory\b",
    r"not enough memory",
    r"can't allocate memory",
    r"Cannot allocate memory",
    r"std::bad_alloc",
    r"UR_RESULT_ERROR_OUT_OF_(?:DEVICE|HOST)_MEMORY",
    r"ZE_RESULT_ERROR_OUT_OF_(?:DEVICE|HOST)_MEMORY",
    r"CUDA_ERROR_OUT_OF_MEMORY",
)


@dataclass
class WorkerOutcome:
    """How one worker process ended, as the parent observed it.

    ``result`` is the parsed ``result.json`` (a ``Verdict.to_dict()`` plus ``"role"``) or
    ``None`` when the worker wrote none. ``returncode`` is the process exit status (negative
    for a signal, as ``subprocess`` reports it; ``None`` if it could not be reaped);
    ``signal_name`` the name of that signal (``"SIGABRT"``), ``None`` otherwise. ``timed_out``:
    killed at the wall-clock limit with no result. ``cancelled``: killed because ``cancel`` was
    set. ``oom_killed``: killed by the parent's resident-memory guard. ``killed_after_result``:
    the result was written but the process did not exit within the grace period.
    ``stdout``/``stderr`` are the captured streams truncated to ``OUTPUT_LIMIT_BYTES`` (head and
    tail); ``stdout_path``/``stderr_path`` the full files. ``seconds`` is the wall time of the
    process (s). ``warnings`` are human sentences (e.g. "left a child process"); ``last_progress``
    is the last progress event's message; ``peak_rss_bytes`` the largest group RSS seen (GPU
    jobs only); ``pid`` the worker's PID, which is also its session and process-group id;
    ``queued_s`` the seconds it waited for the device timing lock (not counted in the timeout).
    ``isolation`` is ``sandbox.Isolation.to_dict()`` of how it ran; ``escapes`` the attempts
    to leave the job it recorded (``xeforge_core.worker.escapes``); ``pooled`` says it was a
    warm-pool process, ``warm`` that it had finished its imports when the job was handed to it.
    """

    result: dict[str, Any] | None
    returncode: int | None
    signal_name: str | None = None
    timed_out: bool = False
    cancelled: bool = False
    oom_killed: bool = False
    killed_after_result: bool = False
    stdout: str = ""
    stderr: str = ""
    stdout_path: str = ""
    stderr_path: str = ""
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    job_dir: str = ""
    timeout_s: float = 0.0
    memory_bytes: int | None = None
    last_progress: str = ""
    peak_rss_bytes: int = 0
    result_error: str = ""
    pid: int | None = None
    queued_s: float = 0.0
    file_bytes: int | None = None
    # -- sandbox and warm pool (xeforge_core.sandbox, xeforge_core.pool) --
    isolation: dict[str, Any] = field(default_factory=dict)
    escapes: list[dict[str, Any]] = field(default_factory=list)
    pooled: bool = False
    warm: bool = False


def _escape_finding(attempt: dict[str, Any], iso: sandbox.Isolation) -> dict[str, Any]:
    """One recorded escape attempt (``xeforge_core.worker.escapes``) as a ``Finding`` dict."""
    kind = attempt.get("kind")
    target = str(attempt.get("target", ""))[:300]
    where = str(attempt.get("file", "")).split("/", 1)[0] or "the module under test"
    line = attempt.get("line") if isinstance(attempt.get("line"), int) else None
    at = f"{where} line {line}" if line else where
    if kind == "network":
        what = f"{at} tried to reach the network ({target})"
        how = "blocked: the sandbox has no network" if iso.sandboxed else "NOT blocked"
    elif kind == "write":
        what = f"{at} tried to write {target}, outside its job directory"
        how = "blocked: read-only outside the job directory" if iso.sandboxed else "NOT blocked"
    elif kind == "read":
        what = f"{at} tried to read {target}, a private location"
        how = "blocked: not visible in the sandbox" if iso.sandboxed else "NOT blocked"
    elif kind == "signal":
        what = f"{at} sent a {target}"
        how = ("confined: the sandbox gives the worker its own process namespace, where no process of the "
               "machine is visible" if iso.sandboxed else "NOT confined: it can reach this user's other processes")
    else:
        what = f"{at} started a process ({target})"
        how = ("it ran inside the sandbox; what it did is not recorded" if iso.sandboxed
               else "it ran without a sandbox; what it did is not recorded")
    if not iso.sandboxed:
        how += " (not sandboxed: process isolation only)"
    return {"rule": f"sandbox_{kind}", "message": f"{what}: {how}", "severity": "warning",
            "line": line if where == "candidate" or where == "baseline" else None}


def _merged(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per (rule, line, message), in first-seen order, saying how many times the
    attempt was made (a ``forward`` called once per correctness run repeats the same attempt on
    every call)."""
    counts: dict[tuple[Any, Any, str], int] = {}
    first: dict[tuple[Any, Any, str], dict[str, Any]] = {}
    for f in findings:
        key = (f["rule"], f.get("line"), f["message"])
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, f)
    return [{**f, "message": f["message"] + (f" ({counts[k]} times)" if counts[k] > 1 else "")}
            for k, f in first.items()]


def annotate(outcome: WorkerOutcome, iso: sandbox.Isolation, *, role: str = "",
             verdict_result: bool = True) -> WorkerOutcome:
    """Add to ``outcome`` how the worker was isolated (``isolation``, and a warning when not
    sandboxed, except for the baseline job whose verdict is not the one shown) and the escape
    attempts it recorded, as findings of its result (or as warnings when it wrote none).
    ``verdict_result``: the result is a verdict (the verification worker's), which also gets
    the ``isolation`` field; other workers' results (the doctor's, the probe's) are left alone."""
    outcome.isolation = iso.to_dict()
    outcome.escapes = read_attempts(Path(outcome.job_dir))
    if not iso.sandboxed and role != "baseline":
        outcome.warnings.append(iso.summary)
    if outcome.escapes:
        findings = _merged([_escape_finding(a, iso) for a in outcome.escapes])
        if outcome.result is not None and verdict_result:
            existing = outcome.result.get("findings")
            outcome.result["findings"] = (list(existing) if isinstance(existing, list) else []) + findings
        else:
            outcome.warnings += [f["message"] for f in findings]
    if outcome.result is not None and verdict_result:
        outcome.result["isolation"] = outcome.isolation
    return outcome


def innermost_line(text: str, filename: str) -> int | None:
    """The innermost line of ``filename`` in a traceback (Python's, most recent call last) or
    a faulthandler dump (most recent call first) found in ``text`` (a worker's stderr);
    ``None`` where no frame of ``filename`` is there."""
    pattern = rf'{re.escape(filename)}", line (\d+)'
    marker = text.rfind("most recent call first")
    if marker >= 0:
        m = re.search(pattern, text[marker:])
        if m:
            return int(m.group(1))
    matches = re.findall(pattern, text)
    return int(matches[-1]) if matches else None


def find_driver_fault(text: str) -> str | None:
    """The first driver/runtime fault message in ``text`` (e.g. ``UR_RESULT_ERROR_DEVICE_LOST``,
    ``CUDA error: an illegal memory access was encountered``), or ``None``."""
    for pattern in DRIVER_FAULT_PATTERNS:
        m = re.search(pattern, text)
        if m:
            return m.group(0).strip()
    return None


#: The C library's messages when it finds its heap corrupted (glibc ``malloc/malloc.c``
#: ``malloc_printerr`` calls, which then abort): in Triton's interpreter, where a kernel's
#: loads and stores are plain host-memory accesses, the usual cause is a write past a tensor.
HEAP_CORRUPTION_PATTERNS: tuple[str, ...] = (
    r"(?:munmap|mremap)_chunk\(\): invalid pointer",
    r"free\(\): [^\n]*(?:invalid|corrupted)[^\n]*",
    r"double free or corruption[^\n]*",
    r"corrupted (?:size vs\. prev_size|double-linked list|top size|unsorted chunks)[^\n]*",
    r"malloc(?:_consolidate)?\(\): [^\n]*(?:invalid|corrupted|unaligned)[^\n]*",
)


def find_heap_corruption(text: str) -> str | None:
    """The first message of the C library about a corrupted heap in ``text`` (e.g.
    ``mremap_chunk(): invalid pointer``), or ``None``."""
    for pattern in HEAP_CORRUPTION_PATTERNS:
        m = re.search(pattern, text)
        if m:
            return m.group(0).strip()
    return None


def find_oom(text: str) -> str | None:
    """The first out-of-memory message in ``text`` (``MemoryError``, ``CUDA out of memory``,
    ``DefaultCPUAllocator: can't allocate memory``, ...), or ``None``."""
    for pattern in OOM_PATTERNS:
        m = re.search(pattern, text)
        if m:
            line_start = text.rfind("\n", 0, m.start()) + 1
            line_end = text.find("\n", m.end())
            return text[line_start: line_end if line_end >= 0 else len(text)].strip()[:300]
    return None


def _gib(n: int | None) -> str:
    return "unlimited" if not n else f"{n / 2**30:.3g} GiB"


#: How a crash that corrupted the heap points at the memory checker (left out where it ran).
MEMCHECK_ADVICE = ("; verifying with memcheck (`xeforge verify --memcheck`, \"Verify with memcheck\" in the app) "
                   "checks every access and names the first one out of bounds")


def classify(outcome: WorkerOutcome) -> tuple[VerdictKind, str]:
    """The process-level verdict of ``outcome``: ``(kind, reason)``.

    ``(VerdictKind.OK, "")`` means nothing went wrong at the process level and the worker's own
    result should be used as is. Otherwise, in this order:

    * cancelled -> ``TIMEOUT`` with reason "cancelled" (callers normally check ``cancelled``
      first and report a cancellation rather than a verdict);
    * a result exists -> the worker's result stands (``OK``), except that a ``runtime_error``
      whose error text is an out-of-memory message becomes ``OOM`` and one whose text is a
      driver fault becomes ``CRASH``; a death after the result is only a warning;
    * no result and killed at the wall-clock limit -> ``TIMEOUT``;
    * killed by the parent's memory guard -> ``OOM``;
    * died by a signal -> ``CRASH`` naming the signal (``SIGXCPU``: CPU-time limit -> ``TIMEOUT``;
      an unexplained ``SIGKILL`` is most likely the kernel's OOM killer -> ``OOM``), with any
      driver fault text from stderr appended;
    * non-zero exit with an out-of-memory message in stderr -> ``OOM``; with driver fault text
      -> ``CRASH``; a write past the file-size limit (Python ignores SIGXFSZ and raises
      ``EFBIG``) -> ``RUNTIME_ERROR`` saying so; otherwise ``RUNTIME_ERROR`` ("exited with
      status N without a result").
    """
    if outcome.cancelled:
        return VerdictKind.TIMEOUT, "cancelled before the worker finished"
    stderr = outcome.stderr or ""
    if outcome.result is not None:
        kind = str(outcome.result.get("kind", "ok"))
        if kind == VerdictKind.RUNTIME_ERROR.value:
            text = str(outcome.result.get("error_text", "")) + "\n" + str(outcome.result.get("reason", ""))
            oom = find_oom(text)
            if oom:
                return VerdictKind.OOM, f"out of memory: {oom}"
            fault = find_driver_fault(text)
            if fault:
                return VerdictKind.CRASH, f"driver fault: {fault}"
        return VerdictKind.OK, ""
    where = f" (last step: {outcome.last_progress})" if outcome.last_progress else ""
    if outcome.timed_out:
        return (VerdictKind.TIMEOUT,
                f"no result within {outcome.timeout_s:g} s: the worker was still running (a hang, or work "
                f"too slow for the limit) and was killed{where}")
    if outcome.oom_killed:
        return (VerdictKind.OOM,
                f"the worker's memory exceeded the {_gib(outcome.memory_bytes)} limit and was "
                f"killed{where}")
    fault = find_driver_fault(stderr)
    if outcome.signal_name:
        sig = outcome.signal_name
        if sig == "SIGXCPU":
            return VerdictKind.TIMEOUT, f"the worker hit its CPU-time limit (SIGXCPU){where}"
        if sig == "SIGXFSZ":
            return (VerdictKind.CRASH, "the worker was stopped by SIGXFSZ: it wrote a file larger "
                    f"than the {_gib(outcome.file_bytes)} limit (e.g. endless output){where}")
        if sig == "SIGKILL":
            oom = find_oom(stderr)
            return (VerdictKind.OOM,
                    "the worker was killed by SIGKILL, most likely by the kernel's out-of-memory "
                    f"killer{where}" + (f": {oom}" if oom else ""))
        number = -(outcome.returncode or 0)
        reason = f"the worker died by {sig} (signal {number}){where}"
        if fault:
            reason += f"; driver fault: {fault}"
        heap = find_heap_corruption(stderr)
        if heap:
            reason += (f"; the C library found its heap corrupted ({heap}): a write past the end of a "
                       "tensor is the usual cause (a store mask or grid that lets lanes past the output)"
                       + MEMCHECK_ADVICE)
        return VerdictKind.CRASH, reason
    oom = find_oom(stderr)
    if oom:
        return VerdictKind.OOM, f"out of memory{where}: {oom}"
    if fault:
        return VerdictKind.CRASH, f"driver fault{where}: {fault}"
    status = outcome.returncode
    if "File too large" in stderr or "[Errno 27]" in stderr:
        return (VerdictKind.RUNTIME_ERROR,
                f"the worker tried to write a file larger than the {_gib(outcome.file_bytes)} "
                f"limit (e.g. endless output) and stopped{where}: {_last_line(stderr)}")
    detail = outcome.result_error or _last_line(stderr)
    return (VerdictKind.RUNTIME_ERROR,
            f"the worker exited with status {status} without a result{where}"
            + (f": {detail}" if detail else ""))


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
