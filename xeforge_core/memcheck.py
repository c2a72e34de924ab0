"""Out-of-bounds accesses found: the memory checker of a verification (``--memcheck``).

A kernel whose mask admits one element too many can match the truth on every input and still
write past the end of its output: under PyTorch's caching allocator the write lands inside the
same allocation segment and nothing faults (measured on an H200: compute-sanitizer reports 0
errors then; with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` every tensor is its own allocation and it
reports each access). So one more correctness call of the candidate runs under a checker:

* **cuda**: NVIDIA's ``compute-sanitizer --tool memcheck`` (part of the CUDA toolkit; found on
  ``PATH``, in ``$CUDA_HOME/bin``/``$CUDA_PATH/bin``, ``/usr/local/cuda/bin`` or
  ``/opt/cuda/bin``; ``XEFORGE_COMPUTE_SANITIZER`` names another binary), wrapping the worker
  inside its sandbox, with PyTorch's caching allocator off and Triton's line info on (Triton
  compiles with ``-lineinfo`` unless ``TRITON_DISABLE_LINE_INFO`` is set), so each report
  names the kernel and the source line. Its log is parsed by ``parse_sanitizer_log`` (format of
  NVIDIA's Compute Sanitizer documentation, "Understanding Memcheck Errors"; old and new
  spellings both).
* **cpu**: Triton's interpreter runs kernels on host memory, every pointer a real address, so
  the worker checks each masked-in lane of every load, store and atomic against the extents of
  the tensors passed to the launch (``xeforge_core.worker.bounds``): an access outside all of
  them is reported with kernel, line and size, and skipped (the interpreter would otherwise
  read or corrupt the host heap). It runs on every call of a candidate in the interpreter,
  with a race check beside it (a load of what another program of the same launch stored,
  without atomics). What it cannot see: accesses that land inside another argument's storage
  (memcheck cannot either), races other than such reads, shared-memory and barrier faults (the
  interpreter has neither), and anything the GPU compiler alone gets wrong.
* **xpu**: no memory checker is wired in; the verdict says so.

Each invalid access becomes an error finding that fails correctness as ``wrong_answer``
(``memcheck_invalid_write``, ``memcheck_invalid_read``), with kernel, line, access size and how
far outside the nearest allocation it landed. A read counts as much as a write: a Triton kernel
touches no masked-off lane, so a read past an allocation comes from a mask or an offset that
admits one element too many (or a load with no mask); its value may be masked away or unused
where the outputs are right, but the read faults where the allocation ends at a page, and reads
another tensor at other sizes. Only the standard library is used.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.verdict import Finding, Step, StepStatus, Verdict, VerdictKind

#: Environment variable naming the compute-sanitizer binary to use.
SANITIZER_ENV = "XEFORGE_COMPUTE_SANITIZER"

#: Where the CUDA toolkit keeps compute-sanitizer when it is not on ``PATH``.
TOOLKIT_DIRS = ("/usr/local/cuda/bin", "/opt/cuda/bin", "/usr/local/cuda/compute-sanitizer")

#: The log file compute-sanitizer writes in the job directory.
LOG_FILE = "memcheck.log"


@dataclass
class InvalidAccess:
    """One invalid device memory access (or several at the same place, ``count``).

    ``access``: ``read``, ``write`` or ``atomic``; ``space``: ``global``, ``shared``, ``local``;
    ``size``: bytes per access; ``kernel``: the kernel's name; ``file``/``line``: the source
    location from line info; ``problem``: ``out of bounds`` or ``misaligned``; ``distance``
    bytes ``side`` (``after``/``before``) the nearest allocation of ``allocation`` bytes;
    ``argument``: the kernel argument that allocation was passed as (interpreter only);
    ``thread``/``block``: the first offending thread and block (program id in the interpreter).
    """

    access: str
    size: int
    kernel: str = ""
    space: str = "global"
    file: str = ""
    line: int | None = None
    problem: str = "out of bounds"
    address: str = ""
    distance: int | None = None
    side: str = ""
    allocation: int | None = None
    argument: str = ""
    thread: str = ""
    block: str = ""
    count: int = 1

    @property
    def is_write(self) -> bool:
        return self.access in ("write", "atomic")

    def where(self) -> str:
        loc = f"line {self.line}" if self.line else "an unknown line (no line info)"
        return f"kernel {self.kernel or '?'} at {loc}"

    def describe(self) -> str:
        """One sentence: what was accessed, where, how far outside what."""
        what = f"invalid {self.space} {self.access} of {self.size} byte(s)"
        text = f"{self.where()}: {what}"
        if self.distance is not None and self.allocation is not None:
            arg = f" ({self.argument})" if self.argument else ""
            text += (f", {self.distance} byte(s) {self.side} the end of the nearest allocation of {self.allocation} "
                     f"bytes{arg}" if self.side == "after" else
                     f", {self.distance} byte(s) before the start of the nearest allocation of {self.allocation} "
                     f"bytes{arg}")
        elif self.problem != "out of bounds":
            text += f", address {self.problem}"
        if self.count > 1:
            text += f"; {self.count} such accesses"
        if self.block or self.thread:
            text += f" (first: {'program' if not self.thread else 'block'} {self.block}" + \
                (f", thread {self.thread}" if self.thread else "") + ")"
        return text


@dataclass
class MemcheckReport:
    """What one checked call showed: the invalid accesses (grouped by place), the tool, the
    number of errors it counted, API errors it saw (``Program hit ...``) and its own failures."""

    tool: str
    accesses: list[InvalidAccess] = field(default_factory=list)
    error_summary: int | None = None
    api_errors: list[str] = field(default_factory=list)
    tool_errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------ the tool


def find_compute_sanitizer() -> tuple[str | None, str]:
    """``(path, "")`` of compute-sanitizer, or ``(None, why)`` naming every place looked at."""
    given = os.environ.get(SANITIZER_ENV, "").strip()
    if given:
        if os.access(given, os.X_OK):
            return given, ""
        return None, f"{SANITIZER_ENV}={given} is not an executable file"
    found = shutil.which("compute-sanitizer")
    if found:
        return found, ""
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    for d in [*dirs, *TOOLKIT_DIRS]:
        path = os.path.join(d, "compute-sanitizer")
        if os.access(path, os.X_OK):
            return path, ""
    looked = ", ".join(["PATH", *dirs, *TOOLKIT_DIRS])
    return None, (f"compute-sanitizer (part of NVIDIA's CUDA toolkit) was not found (looked in {looked}); "
                  f"install the toolkit or set {SANITIZER_ENV}")


def availability(device_type: str) -> tuple[bool, str]:
    """Whether the memory checker can run for ``device_type`` here, and what it is (or why not)."""
    if device_type == "cpu":
        return True, "the interpreter's bounds check of every load, store and atomic"
    if device_type == "cuda":
        path, why = find_compute_sanitizer()
        return (True, f"compute-sanitizer memcheck ({path})") if path else (False, why)
    return False, (f"no memory checker for {device_type}: compute-sanitizer runs on NVIDIA GPUs only; verify on "
                   "cuda or on the cpu (the interpreter's bounds check)")


def sanitizer_command(tool: str, log_path: Path) -> list[str]:
    """The prefix that runs a worker command under memcheck, with the caching allocator off
    (each tensor its own allocation, so a one-past-the-end access is outside it)."""
    return ["/usr/bin/env", "PYTORCH_NO_CUDA_MEMORY_CACHING=1", "TRITON_DISABLE_LINE_INFO=0",
            tool, "--tool", "memcheck", "--log-file", str(log_path), "--print-limit", "1000",
            "--show-backtrace", "device"]


# ------------------------------------------------------------------------------------ parsing

_PREFIX = re.compile(r"^=+\s?")
_HEAD = re.compile(r"Invalid (__global__|__shared__|__local__|__generic__|__device__) (read|write|atomic) of size "
                   r"(\d+)(?: bytes?)?")
_AT_NEW = re.compile(r"^at (?P<func>[^\s].*?)\+0x[0-9a-fA-F]+(?: in (?P<file>.+?):(?P<line>\d+))?\s*$")
_AT_OLD = re.compile(r"^at 0x[0-9a-fA-F]+ in (?:(?P<file>[^:\s]+):(?P<line>\d+):)?(?P<func>.+)$")
_IN = re.compile(r"^in (?P<file>.+?):(?P<line>\d+)\s*$")
_THREAD = re.compile(r"by thread \(([^)]*)\) in block \(([^)]*)\)")
_ADDR = re.compile(r"(?:Address|Access to) (0x[0-9a-fA-F]+) is (out of bounds|misaligned)")
_NEAR = re.compile(r"and is ([\d,]+) bytes? (after|before) the nearest allocation at (0x[0-9a-fA-F]+) of size "
                   r"([\d,]+) bytes?")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_API = re.compile(r"^Program hit .*")
_TOOL_ERROR = re.compile(r"^Error: (.*)")


def _kernel_name(func: str) -> str:
    """``add_kernel`` from ``add_kernel``, ``add_kernel(float*, int)`` or ``void k<float>(...)``."""
    name = func.strip()
    name = re.sub(r"^void\s+", "", name)
    depth, out = 0, []
    for ch in name:  # cut the argument list (parentheses outside template brackets)
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        out.append(ch)
    return "".join(out).strip()


def parse_sanitizer_log(text: str) -> MemcheckReport:
    """The invalid accesses in compute-sanitizer memcheck output (its ``--log-file`` or its
    stdout), grouped by (access, space, kernel, file, line, size), with the first occurrence's
    thread, block and distance kept; plus its error summary, API errors and its own errors."""
    report = MemcheckReport(tool="compute-sanitizer memcheck")
    current: InvalidAccess | None = None
    blocks: list[InvalidAccess] = []
    for raw in text.splitlines():
        line = _PREFIX.sub("", raw).strip() if raw.startswith("=") else raw.strip()
        if not line:
            continue
        head = _HEAD.search(line)
        if head:
            current = InvalidAccess(access=head.group(2), space=head.group(1).strip("_"), size=int(head.group(3)))
            blocks.append(current)
            continue
        if (m := _SUMMARY.search(line)) is not None:
            report.error_summary = int(m.group(1))
            current = None
            continue
        if _API.match(line):
            report.api_errors.append(line[:300])
            current = None
            continue
        if (m := _TOOL_ERROR.match(line)) is not None:
            report.tool_errors.append(m.group(1)[:300])
            continue
        if current is None:
            continue
        if line.startswith("at ") and not current.kernel:
            m = _AT_OLD.match(line) if line.startswith("at 0x") else _AT_NEW.match(line)
            if m:
                current.kernel = _kernel_name(m.group("func"))
                if m.group("file"):
                    current.file, current.line = m.group("file"), int(m.group("line"))
        elif (m := _IN.match(line)) is not None and current.kernel and current.line is None:
            current.file, current.line = m.group("file"), int(m.group("line"))
        elif (m := _THREAD.search(line)) is not None:
            current.thread, current.block = m.group(1), m.group(2)
        elif (m := _ADDR.search(line)) is not None:
            current.address, current.problem = m.group(1), m.group(2)
        elif (m := _NEAR.search(line)) is not None:
            current.distance = int(m.group(1).replace(",", ""))
            current.side = m.group(2)
            current.allocation = int(m.group(4).replace(",", ""))
    report.accesses = group(blocks)
    return report


def group(accesses: Iterable[InvalidAccess]) -> list[InvalidAccess]:
    """Accesses at the same place (access, space, kernel, file, line, size) as one, counted;
    the first occurrence's details kept. Writes first, then reads, each in order of appearance."""
    seen: dict[tuple[Any, ...], InvalidAccess] = {}
    for a in accesses:
        key = (a.access, a.space, a.kernel, a.file, a.line, a.size)
        if key in seen:
            seen[key].count += a.count
        else:
            seen[key] = InvalidAccess(**asdict(a))
    return sorted(seen.values(), key=lambda a: not a.is_write)


def accesses_from_dicts(items: Iterable[dict[str, Any]]) -> list[InvalidAccess]:
    """``InvalidAccess`` records from the plain dicts the interpreter's bounds check writes."""
    fields = set(InvalidAccess.__dataclass_fields__)
    return group(InvalidAccess(**{k: v for k, v in d.items() if k in fields}) for d in items)


def interpreter_report(items: Iterable[dict[str, Any]]) -> MemcheckReport:
    """The report of the interpreter's bounds check from the accesses it wrote (plain dicts)."""
    return MemcheckReport(tool="interpreter bounds check", accesses=accesses_from_dicts(items))


# ------------------------------------------------------------------------------------ the verdict


#: Folders the worker writes the candidate's module into (``worker/loading.py``: one per role).
CANDIDATE_DIRS = ("candidate", "memcheck")


def _located(a: InvalidAccess, candidate_file: str) -> int | None:
    """The candidate line of an access, when its source file is the candidate's module: the
    worker's copy of it (``candidate/<file>``), or the bare file name, which is what
    compute-sanitizer prints for a Triton kernel (seen on an H200, 2026-12-02: ``in
    residual_relu_oob_write.py:16``; the memcheck call runs the candidate's kernels only)."""
    if a.line is None or not a.file:
        return None
    path = Path(a.file)
    bare = path.parent == Path(".")
    return a.line if path.name == candidate_file and (bare or path.parent.name in CANDIDATE_DIRS) else None


def findings(report: MemcheckReport, candidate_file: str) -> list[Finding]:
    """One error finding per grouped access (reads, writes and atomics)."""
    out = []
    for a in report.accesses:
        line = _located(a, candidate_file)
        where = "" if line or not a.file else f" (in {Path(a.file).name})"
        rule = "memcheck_invalid_write" if a.is_write else "memcheck_invalid_read"
        tail = (" An out-of-bounds write corrupts whatever lies there (another tensor, the allocator's data); "
                "it can pass every output comparison") if a.is_write else (
            " The value read is unused or masked away where the outputs are right, but the read can fault or "
            "read another tensor at other sizes and allocations")
        out.append(Finding(rule, f"{report.tool}: {a.describe()}{where}.{tail}", "error", line))
    return out


#: Characters of compute-sanitizer's log kept in the ``memcheck`` step's evidence (its end).
LOG_KEPT = 20_000


def apply(verdict: Verdict, report: MemcheckReport | None, *, candidate_file: str, seconds: float,
          variant: str, unavailable: str = "", failure: str = "", log: str = "", scope: str = "") -> Verdict:
    """Add the memory checker's step and findings to ``verdict`` (``log``: the tool's own log,
    its end kept as evidence). An invalid access, read or write, fails the verdict as
    ``wrong_answer`` (the outputs matched, the memory did not; a write is named first), and is
    named in a crashed candidate's reason (what corrupted the memory it died of); a checker
    that could not run (``unavailable``) or failed (``failure``) leaves the verdict as it was and
    says so. ``scope``: which calls were checked (default: one call at ``variant``)."""
    scope = scope or f"one call at {variant}"
    if unavailable or failure or report is None:
        why = unavailable or failure or "the checker wrote no report"
        verdict.steps.append(Step(name="memcheck", status=StepStatus.SKIPPED, seconds=seconds,
                                  summary=f"not checked: {why}", evidence={"log": log[-LOG_KEPT:]} if log else {}))
        verdict.findings.append(Finding("memcheck_unavailable", f"memory checker not run: {why}", "warning"))
        return verdict
    found = findings(report, candidate_file)
    writes = [a for a in report.accesses if a.is_write]
    reads = [a for a in report.accesses if not a.is_write]
    notes = [f"tool error: {e}" for e in report.tool_errors[:3]]
    if writes or reads:
        summary = (f"{report.tool}: {sum(a.count for a in writes)} invalid write(s) and "
                   f"{sum(a.count for a in reads)} invalid read(s) on {scope}")
        status = StepStatus.FAILED
    else:
        summary = f"{report.tool}: no invalid access on {scope}"
        status = StepStatus.PASSED
    if notes:
        summary += "; " + "; ".join(notes)
    verdict.steps.append(Step(name="memcheck", status=status, seconds=seconds, summary=summary,
                              evidence={"report": report.to_dict(), **({"log": log[-LOG_KEPT:]} if log else {})}))
    verdict.findings += found
    if (writes or reads) and verdict.kind is VerdictKind.CRASH:  # what corrupted the memory it died of
        first = (writes or reads)[0]
        verdict.reason += (f"; the memory checker found an out-of-bounds {'write' if writes else 'read'}: "
                           f"{first.describe()}")
        verdict.source_line = _located(first, candidate_file) or verdict.source_line
    elif (writes or reads) and verdict.kind in (VerdictKind.OK, VerdictKind.INCONSISTENT, VerdictKind.INCONCLUSIVE):
        first = (writes or reads)[0]
        what = "write" if writes else "read"
        # an inconclusive or inconsistent verdict's reason (a baseline that reads past a tensor
        # too) still holds beside the candidate's own fault: kept after it
        before = "" if verdict.kind is VerdictKind.OK else f"; and, as the verification found: {verdict.reason}"
        verdict.kind = VerdictKind.WRONG_ANSWER
        verdict.reason = f"out-of-bounds {what} found by the memory checker: {first.describe()}{before}"
        verdict.source_line = _located(first, candidate_file) or verdict.source_line
        step = verdict.step("correctness")
        if step is not None:
            step.status = StepStatus.FAILED
            step.summary += f"; but {report.tool} found an out-of-bounds {what} ({first.where()})"
    return verdict
