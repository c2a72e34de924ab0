"""Resource use as the compilers report it: registers, spills, stack and shared memory per
kernel, read from what each backend prints or embeds. Nothing here is estimated: a field the
compiler did not report stays ``None``.

* NVIDIA: ``ptxas -v`` (which Triton runs to build the cubin; its log is printed when
  ``TRITON_DUMP_PTXAS_LOG=1``) reports per entry function ``Used N registers``, ``N bytes
  stack frame, N bytes spill stores, N bytes spill loads`` and ``N bytes smem`` (static shared
  memory; Triton allocates shared memory dynamically, so the launch's amount is
  ``metadata.shared``). Source: NVIDIA, "CUDA Compiler Driver NVCC", ``--resource-usage``.
* AMD: the AMDGCN assembly ends with comments ``; NumVgprs: N``, ``; NumSgprs`` /
  ``; TotalNumSgprs: N``, ``; ScratchSize: N`` (bytes of private memory per lane, where spills
  go), ``; LDSByteSize: N bytes/workgroup``, ``; Occupancy: N`` (waves per SIMD), and its
  metadata ``.vgpr_spill_count`` / ``.sgpr_spill_count``. Source: LLVM AMDGPU backend
  (``AMDGPUAsmPrinter``).
* Intel: the compiled kernel's metadata carries ``n_regs`` / ``n_spills`` and ``spill_size``
  where the backend reports them (intel-xpu-backend-for-triton ``compiler.py``), read as
  metadata by the worker.

Only the standard library is used: the IR worker imports this module.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_PTX_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTX_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTX_USED = re.compile(r"Used (\d+) registers")
_PTX_SMEM = re.compile(r"(\d+) bytes smem")
_PTX_BARRIERS = re.compile(r"used (\d+) barriers")


def parse_ptxas_log(log: str, kernel: str | None = None) -> dict[str, int | None]:
    """Registers per thread, spill stores and loads (bytes), stack frame (bytes), static shared
    memory (bytes) and barriers of ``kernel`` (the first entry function when ``None``) from a
    ``ptxas -v`` log. Missing fields are ``None``."""
    out: dict[str, int | None] = {"registers": None, "spill_store_bytes": None, "spill_load_bytes": None,
                                  "stack_bytes": None, "static_smem_bytes": None, "barriers": None}
    blocks = re.split(r"(?=ptxas info\s*: Compiling entry function)", log)
    chosen = None
    for block in blocks:
        m = _PTX_FUNC.search(block)
        if m and (kernel is None or m.group(1) == kernel):
            chosen = block
            break
    if chosen is None:
        return out
    if (m := _PTX_FRAME.search(chosen)) is not None:
        out["stack_bytes"], out["spill_store_bytes"], out["spill_load_bytes"] = (int(g) for g in m.groups())
    if (m := _PTX_USED.search(chosen)) is not None:
        out["registers"] = int(m.group(1))
    if (m := _PTX_SMEM.search(chosen)) is not None:
        out["static_smem_bytes"] = int(m.group(1))
    if (m := _PTX_BARRIERS.search(chosen)) is not None:
        out["barriers"] = int(m.group(1))
    return out


def _comment_int(text: str, name: str) -> int | None:
    m = re.search(rf"^\s*;\s*{name}:\s*(\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def _meta_int(text: str, name: str) -> int | None:
    m = re.search(rf"^\s*\.{name}:\s*(\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def parse_amdgcn(asm: str) -> dict[str, int | None]:
    """VGPRs, SGPRs, spill counts, scratch (bytes per lane), LDS (bytes per workgroup) and
    occupancy (waves per SIMD) from AMDGCN assembly text. Missing fields are ``None``."""
    return {
        "vgprs": _comment_int(asm, "NumVgprs"),
        "sgprs": _comment_int(asm, "TotalNumSgprs") or _comment_int(asm, "NumSgprs"),
        "vgpr_spills": _meta_int(asm, "vgpr_spill_count"),
        "sgpr_spills": _meta_int(asm, "sgpr_spill_count"),
        "scratch_bytes": _comment_int(asm, "ScratchSize"),
        "lds_bytes": _comment_int(asm, "LDSByteSize"),
        "occupancy": _comment_int(asm, "Occupancy"),
    }


def resource_summary(backend: str, metadata: dict[str, Any], asm: dict[str, str], compiler_log: str,
                     kernel: str) -> dict[str, Any]:
    """The uniform resource fields the UI and CLI show, from one compiled kernel:
    ``registers`` (per thread; VGPRs on AMD), ``spill_bytes`` (spill stores on NVIDIA, scratch
    per lane on AMD, the backend's spill size on Intel), ``shared_bytes`` (per program, as
    launched: Triton's ``metadata.shared``; LDS/SLM elsewhere), ``num_warps``, ``num_stages``,
    plus the backend's raw fields under ``detail``. ``None`` where the compiler said nothing."""
    out: dict[str, Any] = {
        "registers": None, "spill_bytes": None, "shared_bytes": metadata.get("shared"),
        "num_warps": metadata.get("num_warps"), "num_stages": metadata.get("num_stages"),
        "num_ctas": metadata.get("num_ctas"), "detail": {},
    }
    if backend == "cuda":
        stats = parse_ptxas_log(compiler_log, kernel)
        out["registers"] = stats["registers"]
        out["spill_bytes"] = stats["spill_store_bytes"]
        out["detail"] = {k: v for k, v in stats.items() if v is not None}
        out["detail"]["source"] = "ptxas -v" if stats["registers"] is not None else "ptxas log not available"
    elif backend == "hip":
        stats = parse_amdgcn(asm.get("amdgcn", ""))
        out["registers"] = stats["vgprs"]
        out["spill_bytes"] = stats["scratch_bytes"]
        if out["shared_bytes"] is None:
            out["shared_bytes"] = stats["lds_bytes"]
        out["detail"] = {k: v for k, v in stats.items() if v is not None}
        out["detail"]["source"] = "AMDGCN assembly"
    else:
        for src, dst in (("n_regs", "registers"), ("n_spills", "spill_bytes"), ("spill_size", "spill_bytes")):
            value = metadata.get(src)
            if isinstance(value, int) and out.get(dst) is None:
                out[dst] = value
        out["detail"] = {k: metadata[k] for k in ("n_regs", "n_spills", "spill_size", "grf_mode",
                                                  "threads_per_warp", "build_flags") if k in metadata}
        out["detail"]["source"] = "compiled kernel metadata"
    return out


#: Where the IR worker sends a compile's native stderr while it runs, in the job folder: the parent
#: reads it when the worker dies mid-compile (an LLVM assertion's abort), since then nothing
#: copies it back to the worker's stderr.
COMPILE_STDERR = "compile-stderr.txt"
#: An MLIR diagnostic: ``FILE:LINE:COL: error: ...``, ``<unknown>:0: note: ...`` or a bare
#: ``error: ...``; group ``file`` and ``line`` where it has a location.
_DIAGNOSTIC = re.compile(r"^(?:(?P<file>.*?):(?P<line>\d+)(?::\d+)?: )?(?P<kind>error|note|warning): ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: The folder a job's copy of the user's file lies in (``.../xeforge-job-XXXX/src/ir/``).
_JOB_PATH = re.compile(r"\S*xeforge-job-[^/\s]+/(?:src/)?(?:ir/)?")


def compiler_diagnostics(stderr: str, filename: str | None = None,
                         limit: int = 4000) -> tuple[str, str, int | None]:
    """The compiler's own diagnostics in a worker's stderr.

    Returns (text, headline, line): ``text`` is MLIR's ``error:``, ``note:`` and ``warning:``
    lines (colour codes removed, the job folder's path cut to the file's own name, the IR dump
    MLIR writes between them left out), at most ``limit`` characters, ``""`` when it wrote none;
    ``headline`` is the first ``error:`` line (else the first line); ``line`` is that first
    error's line where its location is in ``filename`` (the user's file, compared by name), else
    None: an op inlined from Triton's own library is located there. Triton's exception for a
    failed pass says only "PassManager::run failed": the why is here."""
    kept: list[str] = []
    headline, line = "", None
    own = Path(filename).name if filename else None
    for raw in stderr.splitlines():
        text = _ANSI.sub("", raw).strip()
        m = _DIAGNOSTIC.match(text)
        if not m:
            continue
        shown = _JOB_PATH.sub("", text)
        kept.append(shown)
        if m.group("kind") == "error" and not headline:
            headline = shown
            where = m.group("file")
            if own and where and Path(where.strip('"')).name == own and int(m.group("line")) > 0:
                line = int(m.group("line"))
    kept = list(dict.fromkeys(kept))
    return "\n".join(kept)[:limit], headline or (kept[0] if kept else ""), line
