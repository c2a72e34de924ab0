"""``compile_ir``: a module's Triton kernels compiled ahead of time for a chosen target, with
their IR (TTIR, TTGIR, LLVM IR, PTX / AMDGCN / SPIR-V) and the resources the compiler
reports (registers, spills, shared memory), without the target's device.

The compile runs in a worker process (``python -m xeforge_core.ir.worker``, started by
``xeforge_core.runner.run_worker`` with a wall-clock timeout and a memory limit): importing the
module and calling its ``forward()`` to record the launches is running untrusted code, which
never happens in the calling (UI or CLI) process. Results are cached on disk
(``cache_root()/ir``) by the source, the spec and variant, the target, the config choice, the
torch/triton versions and the IR worker's own code, so the IR page shows a version it has
compiled before at once.

A module that hard-codes a device this machine does not have (``"xpu"`` in Xe-Forge's kernels)
cannot run its ``forward()`` here: when it fails before launching any kernel, its
device-agnostic port (the portability codemod, which never touches ``@triton.jit`` bodies) is
compiled instead, and the report says so.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core import runner, units
from xeforge_core.cache import cache_root, library_versions, stable_hash, worker_code_version
from xeforge_core.errors import XeForgeError, nearest_name_hint
from xeforge_core.ir.stats import COMPILE_STDERR
from xeforge_core.ir.targets import STAGE_NAMES, CompileTarget, get_target, resolve_stage, why_unavailable

#: Wall-clock limit of one IR job (seconds): importing torch and triton, building the inputs and
#: compiling every launched kernel (a GEMM takes 2-8 s per config on a loaded 2-core machine).
DEFAULT_TIMEOUT_S = 300.0

#: Resident-memory limit of the IR worker's process group (bytes).
DEFAULT_MEMORY_BYTES = 8 * 2**30

#: A benchmark variant whose inputs exceed this many bytes is not built on the host for the
#: launch record; the correctness variant is used instead (and the report says so).
MAX_INPUT_BYTES = 1 * 2**30

PACKAGE_DIR = Path(__file__).resolve().parents[1]

ProgressFn = Callable[[str], None]


class IRError(XeForgeError, ValueError):
    """Bad input for an IR compile (an unknown variant, a module that does not parse)."""


@dataclass
class IRKernel:
    """One compiled kernel (one distinct specialization of one ``@triton.jit`` function).

    ``signature`` maps parameters to Triton types (``*fp16``, ``i32``, ``constexpr``);
    ``constexprs`` their compile-time values; ``specialization`` what Triton assumed about the
    others (``divisible by 16``); ``ir`` stage -> text; ``resources`` has ``registers`` (per
    thread), ``spill_bytes``, ``shared_bytes`` (per program), ``num_warps``, ``num_stages`` and
    the backend's raw ``detail`` (``None`` where the compiler reported nothing); ``autotune``
    the config compiled (``index`` of ``count``) for an ``@triton.autotune`` kernel."""

    name: str
    launch: int = 0
    signature: dict[str, str] = field(default_factory=dict)
    constexprs: dict[str, Any] = field(default_factory=dict)
    specialization: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    autotune: dict[str, Any] | None = None
    dropped_options: list[str] = field(default_factory=list)
    ir: dict[str, str] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    compile_seconds: float = 0.0
    error: str = ""
    line: int | None = None
    error_text: str = ""

    @property
    def label(self) -> str:
        """``matmul_kernel``, or ``matmul_kernel · config 2/12`` for an autotuned one, or with
        ``· launch 3`` when the same kernel was specialized twice."""
        text = self.name
        if self.autotune:
            text += f" · config {int(self.autotune.get('index', 0)) + 1}/{self.autotune.get('count')}"
        return text

    def stage(self, name: str) -> str | None:
        """The IR text of ``name`` (``ttir``, ``ttgir``, ``llir``, ``ptx``, ``amdgcn``, ``spirv``)."""
        key = resolve_stage(name, list(self.ir))
        return self.ir.get(key) if key else None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IRKernel:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class IRReport:
    """What one IR compile established. ``kind`` is ``ok``, ``unavailable`` (the target's
    backend is not installed here: ``reason`` says what to install), ``compile_error`` (a kernel
    does not compile for the target; the others are still listed), ``runtime_error`` (the module
    or its ``forward()`` failed before launching), ``timeout`` or ``crash`` (the worker)."""

    target: CompileTarget
    kind: str
    reason: str = ""
    line: int | None = None
    error_text: str = ""
    triton_version: str = ""
    variant: str | None = None
    variant_dims: dict[str, Any] = field(default_factory=dict)
    launches: int = 0
    kernels: list[IRKernel] = field(default_factory=list)
    not_launched: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    compiled_at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        """At least one kernel compiled (``compile_error`` with others compiled still shows IR)."""
        return any(not k.error for k in self.kernels)

    @property
    def headline(self) -> str:
        """One line saying what the IR is for, e.g. ``"IR for NVIDIA Hopper sm_90 (H100, H200);
        warp size 32, compiled ahead of time by Triton 3.6.0 (no GPU needed)"``."""
        if self.kind == "unavailable":
            return f"No IR for {self.target.label}: {self.reason}"
        return (f"IR for {self.target.description}, compiled ahead of time by Triton {self.triton_version or '?'} "
                f"on this machine (no {self.target.label.split()[0]} GPU needed)")

    def kernel(self, label: str) -> IRKernel | None:
        """The kernel whose :attr:`IRKernel.label` (or name) is ``label``."""
        return next((k for k in self.kernels if label in (k.label, k.name)), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["target"] = self.target.id
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IRReport:
        data = dict(data)
        target = get_target(data.pop("target"))
        kernels = [IRKernel.from_dict(k) for k in data.pop("kernels", [])]
        known = {f for f in cls.__dataclass_fields__}
        return cls(target=target, kernels=kernels, **{k: v for k, v in data.items() if k in known})


@functools.lru_cache(maxsize=1)
def ir_code_version() -> str:
    """A hash (16 hex digits) of the IR worker's code and of the verification worker's modules
    it reuses (``cache.worker_code_version``), so a change to either invalidates cached IR
    (read once per process)."""

    files = sorted((PACKAGE_DIR / "ir").glob("*.py"))
    return stable_hash(worker_code_version(), [(p.name, p.read_text(encoding="utf-8")) for p in files])[:16]


def _cache_dir() -> Path:
    path = cache_root() / "ir"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _class_name(source: str, preferred: str) -> str:
    try:
        names = {n.name for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
    except (SyntaxError, ValueError):
        return preferred
    return next((n for n in (preferred, "ModelNew", "Model") if n in names), preferred)


def choose_variant(problem: Any, name: str | None = None) -> tuple[Any, str]:
    """The variant whose inputs the launches are recorded with, and a note on the choice.

    ``name`` picks one (:class:`IRError` when unknown); by default the benchmark variant (the
    shape a GPU times, so the IR is what runs there), unless its inputs exceed
    ``MAX_INPUT_BYTES``, then the correctness variant. ``None`` without a spec (the module's
    own ``get_inputs()``)."""
    if problem is None or problem.spec is None:
        small = (getattr(problem, "module_variants", None) or {}).get("module-small")
        if name == "module-small" and small is not None:
            return small, "variant module-small (chosen): the problem's sizes reduced"
        if name not in (None, "", "module"):
            raise IRError(f"no spec, so there is no variant {name!r}: the module's own get_inputs() is used",
                          field="variant")
        whose = "the problem file's" if getattr(problem, "inputs", None) is not None else "the module's own"
        return None, f"inputs from {whose} get_inputs() at its published sizes (no spec)"
    if name:
        if name not in problem.spec.variants:
            known = ", ".join(problem.spec.variants) or "none"
            raise IRError(f"unknown variant {name!r} (known: {known})" + nearest_name_hint(name, list(problem.spec.variants)),
                          field="variant")
        return problem.spec.variants[name], f"variant {name} (chosen)"
    bench = problem.benchmark_variants("cuda")[0]
    if bench.bytes is not None and bench.bytes > MAX_INPUT_BYTES:
        ci = problem.correctness_variants()[0]
        return ci, (f"variant {ci.name}: the benchmark variant {bench.name}'s inputs are "
                    f"{units.size(bench.bytes)}, over {units.size(MAX_INPUT_BYTES)} to build on the host")
    return bench, f"variant {bench.name} (the shape a GPU times)"


def _portable_source(source: str, local_device: str) -> tuple[str, str]:
    """``source``, or its device-agnostic port when it hard-codes a device this machine lacks;
    with a note saying which."""
    from xeforge_core.codemods.portability import hard_coded_devices, port_source

    foreign = hard_coded_devices(source, local_device)
    if not foreign:
        return source, ""
    port = port_source(source)
    if not port.changed:
        return source, ""
    return port.source, (f"the module hard-codes {', '.join(foreign)}, so its forward() cannot run on this "
                         f"{local_device} machine to record the launches: the IR is of its device-agnostic "
                         "port (the portability codemod; @triton.jit bodies are not changed by it)")


def compile_ir(source: str, *, problem: Any = None, target: str | CompileTarget | None = None,
               variant: str | None = None, config_index: int | None = 0, local_device: str = "cpu",
               timeout_s: float = DEFAULT_TIMEOUT_S, memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
               use_cache: bool = True, max_kernels: int = 16, on_progress: ProgressFn | None = None,
               cancel: threading.Event | None = None, cached_only: bool = False,
               filename: str | None = None) -> IRReport | None:
    """Compile the Triton kernels of ``source`` (a KernelBench-style module) for ``target``.

    ``problem`` gives the spec whose variant the launches are recorded with (see
    :func:`choose_variant`) and the class name; ``None`` uses the module's ``get_inputs()``.
    ``target``: a :class:`CompileTarget` or a name (``sm90``, ``gfx942``, ``xe2``...; default
    :func:`~xeforge_core.ir.targets.default_target`). ``config_index``: which config of an
    ``@triton.autotune`` kernel to compile (0-based; ``None`` for all, up to ``max_kernels``).
    ``local_device``: this machine's device type (for the portability check). ``timeout_s``
    (seconds) and ``memory_bytes`` bound the worker.

    ``filename``: the name of the file ``source`` came from, which errors name (default: the
    problem's kernel file, or ``kernel.py``): give it for a source that is not the problem's own
    (``xeforge ir K --problem P``, the other side of ``--diff``).

    With ``cached_only``, nothing is compiled: the cached report, or ``None`` when there is none
    (the IR page asks this on every rerun, then compiles in the background).

    Never raises for what the module does (a hang, a crash, a kernel that does not compile are
    reports); raises :class:`IRError` or ``TargetError`` for bad arguments.
    """

    tgt = target if isinstance(target, CompileTarget) else get_target(target)
    missing = why_unavailable(tgt)
    if missing:
        return IRReport(target=tgt, kind="unavailable", reason=missing)
    chosen, variant_note = choose_variant(problem, variant)
    base = (problem.kernel.to_data() if problem is not None else
            {"filename": "kernel.py", "class_name": "Model", "label": "kernel"})
    job = {"role": "ir", "device": "aot",
           "inputs": problem.inputs.to_data() if getattr(problem, "inputs", None) is not None else None,
           "reference": problem.reference.to_data() if getattr(problem, "reference", None) is not None else None,
           "spec": problem.spec.to_data() if problem is not None and problem.spec is not None else None,
           "variant": chosen.to_data() if chosen is not None else None,
           "target": tgt.to_data(), "config_index": config_index, "max_kernels": max_kernels}

    def job_for(text: str) -> dict[str, Any]:
        name = base.get("class_name") or "Model"
        if base.get("entry", "class") == "class":
            name = _class_name(text, name)
        return {**job, "module": {**base, "source": text, "label": "ir", "class_name": name,
                                  **({"filename": filename} if filename else {})}}

    run = {"timeout_s": timeout_s, "memory_bytes": memory_bytes, "use_cache": use_cache,
           "on_progress": on_progress, "cancel": cancel, "cached_only": cached_only}
    report = _compile_cached(job_for(source), tgt, **run)
    if report is None:
        return None
    if report.kind == "runtime_error" and not report.kernels:
        ported, port_note = _portable_source(source, local_device)
        if port_note:
            retry = _compile_cached(job_for(ported), tgt, **run)
            if retry is None:
                return None
            if retry.kernels:
                first = report.reason
                report = retry
                report.notes.insert(0, f"{port_note}. As written, forward() failed here: {first}")
    report.variant_dims = dict(chosen.dims) if chosen is not None else {}
    if variant_note and variant_note not in report.notes:
        report.notes.insert(0, variant_note)
    return report


def _compile_cached(job: dict[str, Any], tgt: CompileTarget, *, timeout_s: float, memory_bytes: int | None,
                    use_cache: bool, on_progress: ProgressFn | None,
                    cancel: threading.Event | None, cached_only: bool = False) -> IRReport | None:
    """Run one IR job, or return its cached report (a timeout, crash or cancel is never cached);
    ``None`` with ``cached_only`` when nothing is cached."""

    module = job["module"]
    key = stable_hash({"what": "ir", "job": {k: v for k, v in job.items() if k != "module"},
                       "source": hashlib.sha256(module["source"].encode()).hexdigest(),
                       "class": module["class_name"], "filename": module.get("filename"),
                       "versions": library_versions(), "code": ir_code_version()})
    path = _cache_dir() / f"{key[:40]}.json"
    if use_cache and path.is_file():
        try:
            report = IRReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
            report.cached = True
            return report
        except (OSError, ValueError, TypeError, KeyError):
            pass
    if cached_only:
        return None
    say = on_progress or (lambda _m: None)
    say(f"compiling for {tgt.label} in a worker process")
    outcome = runner.run_worker(job, timeout_s=timeout_s, memory_bytes=memory_bytes,
                                module="xeforge_core.ir.worker", cancel=cancel,
                                on_progress=lambda e: say(str(e.get("message", ""))))
    try:
        report = _report_from(outcome, tgt)
    finally:
        runner.cleanup_job_dir(outcome.job_dir)
    if use_cache and report.kind not in ("timeout", "crash", "cancelled", "oom"):
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(report.to_dict()), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass
    return report


def _report_from(outcome: Any, tgt: CompileTarget) -> IRReport:
    """An :class:`IRReport` from the worker's outcome; process-level ends are decided here."""
    res = outcome.result
    if outcome.cancelled:
        return IRReport(target=tgt, kind="cancelled", reason="cancelled", seconds=outcome.seconds)
    # a worker stopped or dead inside a compile left what the compiler wrote meanwhile in the job folder
    native = Path(outcome.job_dir) / COMPILE_STDERR if outcome.job_dir else None
    during = native.read_text(encoding="utf-8", errors="replace") if native and native.is_file() else ""
    if outcome.timed_out:
        return IRReport(target=tgt, kind="timeout", seconds=outcome.seconds,
                        reason=f"the IR worker did not finish within {outcome.timeout_s:.0f} s "
                               f"(last: {outcome.last_progress or 'nothing reported'})",
                        error_text=(outcome.stderr + during)[-4000:])
    if outcome.oom_killed:
        return IRReport(target=tgt, kind="oom", seconds=outcome.seconds,
                        reason="the IR worker went over its memory limit"
                               + (" while compiling a kernel" if during else ""),
                        error_text=during[-4000:])
    if res is None:
        why = f"signal {outcome.signal_name}" if outcome.signal_name else f"exit status {outcome.returncode}"
        return IRReport(target=tgt, kind="crash", seconds=outcome.seconds,
                        reason=f"the IR worker ended with {why} and wrote no result"
                               + (" while compiling a kernel" if during else ""),
                        error_text=((outcome.stderr or outcome.stdout) + during)[-4000:])
    return IRReport(
        target=tgt, kind=str(res.get("kind") or "runtime_error"), reason=str(res.get("reason") or ""),
        line=res.get("line"), error_text=str(res.get("error_text") or ""),
        triton_version=str(res.get("triton_version") or ""), variant=res.get("variant"),
        launches=int(res.get("launches") or 0), kernels=[IRKernel.from_dict(k) for k in res.get("kernels", [])],
        not_launched=list(res.get("not_launched") or []), notes=list(res.get("notes") or []),
        seconds=outcome.seconds)


def stage_label(stage: str) -> str:
    """``"TTGIR"`` for ``"ttgir"``, etc."""
    return STAGE_NAMES.get(stage, stage)
