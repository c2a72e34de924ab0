"""Verify a candidate kernel against its baseline: the verdict orchestrator.

``verify(problem, candidate_source, ...)`` runs up to three isolated worker jobs
(``xeforge_core.runner``), each in a fresh process with a hard timeout:

1. **baseline** (role ``baseline``): the problem's own kernel, with the same checks, on the
   correctness variants; it saves the expected outputs in its job directory. If it fails, the
   verdict is ``environment``: the fault is not the candidate's (an incompatible numpy, a
   driver error, a spec that does not fit the kernel), and the candidate is not judged. When
   it fails with the non-power-of-two copies of the variants that verification adds itself
   (``-odd``), it runs once more without them: the kernel does not support such shapes, the
   candidate is held to the spec's own variants, and the verdict warns so. Baseline outputs
   are cached on disk (``cache_root()/baselines``) keyed by the baseline and reference source,
   spec, variants, seeds, distributions, options, device fingerprint, library versions and
   worker code, so re-verifying another candidate skips this job.
2. **candidate** (role ``candidate``, ``expected_dir`` = the baseline's directory): compile,
   structure and integrity, correctness on every variant, seed and distribution. A candidate of
   a fixed-shape problem that fails only at a size the verifier chose, in a way that can depend
   on the shape, is then checked at the published size, the problem's contract
   (``xeforge_core.contract``; ``_check_published_shape``).
3. **timing** (role ``timing``), only on a GPU and only for a correct candidate: baseline and
   candidate interleaved on the performance variants, under the cross-process device lock
   (``xeforge_core.devlock``). On cpu the performance step is ``not_measured``
   ("not measured: interpreter").

Process-level outcomes observed by the runner (timeout, crash by signal or driver fault, out of
memory) override what a worker reported. The result is one ``Verdict``; with
``VerifyOptions.use_cache`` it is stored in and served from the verdict cache
(``xeforge_core.cache``; ``Verdict.cached`` is then True). Verdicts that may be transient
(``timeout``, ``crash``, ``oom``, ``environment``) are not cached.

No kernel or model code runs in the calling process.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import functools
import math
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core import contract, memcheck, pool, runner
from xeforge_core.cache import VerdictCache, cache_root, library_versions, stable_hash, verdict_key
from xeforge_core.cache import worker_code_version as _worker_code_version
from xeforge_core.coverage import derive_grid_variant, grid_probe_variant
from xeforge_core.devices import DeviceInfo, detect_device
from xeforge_core.devlock import default_lock_dir
from xeforge_core.errors import XeForgeError
from xeforge_core.precision import PrecisionPolicy, parse_allowances
from xeforge_core.problem import ProblemError, odd_size_variant
from xeforge_core.problem.entry import ignored_lookalikes
from xeforge_core.problem.module import entry_point
from xeforge_core.problem.scaling import (
    estimate_input_bytes,
    odd_module_variant,
    smaller_reduced_variant,
    variant_input_elements,
)
from xeforge_core.sizes import (
    INTERPRETER_MAX_PROGRAM_TRIPS,
    INTERPRETER_MAX_TILE_WORK,
    TileChoice,
    checked_sizes,
    choose_sizes,
    launched_work,
    plan_probe,
)
from xeforge_core.verdict import OWN_INPUTS, PARTIAL, Finding, Step, StepStatus, Verdict, VerdictKind
from xeforge_core.worker import formats
from xeforge_core.worker.astutil import parse as parse_python
from xeforge_core.worker.errors import classify as classify_failure
from xeforge_core.worker_outcome import MEMCHECK_ADVICE, innermost_line

#: Verdict kinds stored in the verdict cache (the others may be transient: a loaded machine,
#: a flaky driver, an environment later fixed).
CACHEABLE_KINDS = frozenset({VerdictKind.OK, VerdictKind.COMPILE_ERROR, VerdictKind.RUNTIME_ERROR,
                             VerdictKind.WRONG_ANSWER, VerdictKind.CHEATING})

#: How many saved baseline output directories are kept (least recently used are removed).
BASELINE_CACHE_ENTRIES = 48

#: Bytes the saved baseline outputs may take together; beyond this the least recently used are
#: removed (the newest is always kept). Outputs at a published KernelBench size reach 30 GB.
BASELINE_CACHE_BYTES = 16 << 30

#: Longest the ``sizes`` job may take, seconds (it runs host code only; a candidate whose host
#: code hangs is timed out by the candidate job, not twice at full length).
SIZES_TIMEOUT_S = 120.0

#: Largest published input (elements) checked in the interpreter when the reduced sizes fail.
PUBLISHED_ON_CPU_ELEMENTS = 1 << 22

#: Inputs of at least this many bytes are made on the device (``get_inputs()`` and the model's
#: constructor run under ``torch.device``), so a published KernelBench size never passes
#: through host memory.
LARGE_INPUT_BYTES = 256 << 20

NOT_MEASURED_INTERPRETER = (
    "not measured: interpreter (kernels ran in Triton's CPU interpreter, which checks "
    "correctness only; its run times say nothing about a GPU)"
)


class VerificationCancelled(XeForgeError):
    """Raised by ``verify`` when its ``cancel`` event was set; no verdict was reached."""


def default_memory_bytes() -> int:
    """Default worker memory limit in bytes: 3/4 of host RAM, at least 4 GiB (address space on
    cpu, resident set of the worker's process group on a GPU)."""
    total = 16 * 2**30
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    return max(4 * 2**30, total * 3 // 4)


@dataclass
class VerifyOptions:
    """How to verify.

    Attributes:
        timeout_s: hard wall-clock limit per candidate/timing job, seconds (time queued for
            the device timing lock does not count).
        baseline_timeout_s: limit for the baseline job (``None``: the larger of ``timeout_s``
            and 300 s, so a short limit meant to catch a hanging candidate does not turn a slow
            baseline start into an ``environment`` verdict).
        memory_bytes: worker memory limit in bytes (``None``: ``default_memory_bytes()``).
        cpu_seconds: CPU-time backstop per job in seconds, all threads together (``None``:
            ``timeout_s`` times the number of CPUs, plus 60).
        variants: names of the variants to check for correctness (``<name>-odd`` names the
            odd-size copy of ``<name>``); ``None``: ``problem.correctness_variants()``.
        include_odd_size: also check a non-power-of-two copy of each correctness variant
            (``odd_size_variant``) where the spec allows one.
        seeds: number of seeds (``3`` -> ``[0, 1, 2]``) or an explicit list.
        distributions: input distributions for correctness (names the worker understands:
            ``xeforge_core.worker.inputs``). With a spec, each is the spec's own inputs drawn
            from that law, at every seed (the stress redraws at the first: ``ties``, 16 values so
            that equal ones abound; ``shifted``, normal around 100, where a kernel that is not
            numerically stable overflows or cancels; ``spread``, magnitudes 0.01 to 1000 of both
            signs in every row, where a kernel that takes a row's maximum from part of the row or
            takes exp of a large negative overflows (both excused only where they overflow within
            an allowed float16 downgrade); ``zeros``, normal with whole rows, columns and samples
            of exact zeros and more at random, where a norm without its eps or a sign that
            takes 0 for positive differs). Default ``normal``, ``ties``, ``shifted``, ``spread``
            and ``zeros``. Without one
            (KernelBench, KernelAgent), the problem's own ``get_inputs()`` under each seed comes
            first (``module``), and these are redraws
            of its floating-point inputs at the first seed, kept on a variant only where the truth
            stays finite and input-dependent on them (``input_distributions``).
        performance_variants: variants to time; ``None``: ``problem.benchmark_variants(type)``
            on a GPU. Nothing is timed on cpu.
        measure_performance: time the candidate on a GPU (if correct).
        use_cache: serve/store the verdict from/in the verdict cache, and reuse saved baseline
            outputs.
        allow_dtype_change / allow_shape_change: accept an output dtype / shape different
            from the baseline's.
        rtol / atol: tolerance override (``None``: the float64-calibrated check where the truth
            can be computed in float64, else dtype-aware defaults of the worker or the variant's
            own); explicit tolerances decide, with the float64 measurements still reported.
        allow_precision: precision downgrades the candidate may make beyond the problem's own
            dtype, by name (``xeforge_core.precision.DOWNGRADES``: ``tf32``, ``fp16``,
            ``fp16-accumulation``, ``bf16``, ``bf16-accumulation``, ``approx-math``), on top of
            those the spec's ``allow`` list names. Raises ``PrecisionError`` at ``verify`` for an
            unknown name.
        lints: knowledge-base lint findings (``Finding`` dicts) the worker adds to the
            structure step; ``None`` (the default): every lint of the knowledge base that applies
            to ``target`` runs on the candidate (``kb_findings``), with its rule id, line and fix.
        target: the target the lints apply to (``xpu`` or ``cuda``); ``None``: the run
            device's (``xpu`` on cpu, the product's target).
        grid_coverage: derive a larger variant when a launch-grid axis that grows with the
            input ran with fewer than ``MIN_PROGRAMS`` programs at every checked size, and check
            the candidate there too (when ``tile_sizes`` derived no size).
        tile_sizes: probe the kernels' launches (the ``sizes`` job) and check the candidate at
            a size derived from their tiles, every size odd, every growing grid axis with 3
            programs and every growing loop with 2 trips (``xeforge_core.sizes``), in place of
            the ``-odd`` copies.
        warmup_ms / rep_ms: timing budget per callable, milliseconds.
        exit_grace_s: seconds a worker may take to exit after writing its result.
        lock_dir: directory of the device timing locks (``None``: ``default_lock_dir()``).
        force_timing: run the timing job on cpu too (host-clocked in Triton's interpreter; the
            numbers say nothing about a GPU and exist only to exercise the timing harness).
        dtype: the floating-point dtype to pose the problem at (``float32``, ``float16``,
            ``bfloat16``): every floating-point input and the models' parameters cast to it, as
            KernelBench's evaluation does with its ``precision`` argument and KernelAgent's test
            harness with its ``dtype`` (bfloat16 in its examples); the float64 truth then
            calibrates the tolerance at that dtype. ``None``: the problem's own dtypes. A
            candidate that refuses the problem's dtype, naming one it accepts, is told so in its
            verdict with the option that poses the problem at that dtype (``dtype_refusal``);
            ``kernel``: the problem is posed at the dtype the candidate, or the baseline (a
            published kernel), demands when it refuses the problem's own (``dtype_specialised``).
            Names are read as :func:`normalised_dtype` reads them; it raises ``ValueError`` at
            ``verify`` for another name.
        memcheck: after a candidate matched the truth, run one more correctness call of it under
            the device's memory checker (``xeforge_core.memcheck``: compute-sanitizer's memcheck
            on cuda, the interpreter's bounds check on cpu) and make each invalid access a
            finding; an invalid write fails correctness. Opt-in: it costs one more worker job
            (under compute-sanitizer, several times the call's time).
    """

    timeout_s: float = 300.0
    baseline_timeout_s: float | None = None
    memory_bytes: int | None = None
    cpu_seconds: int | None = None
    variants: list[str] | None = None
    include_odd_size: bool = True
    seeds: int | list[int] = 3
    distributions: list[str] = field(default_factory=lambda: ["normal", "ties", "shifted", "spread", "zeros",
                                                               "rowwise"])
    performance_variants: list[str] | None = None
    measure_performance: bool = True
    use_cache: bool = True
    allow_dtype_change: bool = False
    allow_shape_change: bool = False
    rtol: float | None = None
    atol: float | None = None
    allow_precision: list[str] = field(default_factory=list)
    lints: list[dict[str, Any]] | None = None
    target: str | None = None
    grid_coverage: bool = True
    tile_sizes: bool = True
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    exit_grace_s: float = runner.DEFAULT_EXIT_GRACE_S
    lock_dir: str | None = None
    force_timing: bool = False
    memcheck: bool = False
    dtype: str | None = None

    def seed_list(self) -> list[int]:
        """The seeds as a list (``3`` -> ``[0, 1, 2]``)."""
        if isinstance(self.seeds, int):
            return list(range(max(1, self.seeds)))
        return [int(s) for s in self.seeds] or [0]

    def result_affecting(self) -> dict[str, Any]:
        """The options that can change a verdict (used in cache keys; limits are left out
        because the kinds they produce are never cached)."""
        data = asdict(self)
        for k in ("timeout_s", "baseline_timeout_s", "memory_bytes", "cpu_seconds", "use_cache", "exit_grace_s",
                  "lock_dir"):
            data.pop(k, None)
        data["seeds"] = self.seed_list()
        return data


ProgressFn = Callable[[str], None]

#: ``VerifyOptions.dtype`` names (``contract.DTYPES``).
DTYPES = contract.DTYPES
#: ``VerifyOptions.dtype`` that poses the problem at the dtype a candidate demands when it refuses
#: the problem's own (``xeforge_core.contract.refused_dtype``).
KERNEL_DTYPE = "kernel"


def normalised_dtype(name: str | None) -> str | None:
    """``VerifyOptions.dtype`` as the verifier uses it: a torch dtype name of :data:`DTYPES`,
    :data:`KERNEL_DTYPE` or ``None`` (``None`` only: a blank name is an error). Names are read
    in any case, with or without ``torch.``, and torch's aliases (``float``, ``half``,
    ``double``) and the short ones (``fp32``, ``bf16``...) stand for their dtype. Raises
    ``ValueError`` naming the nearest valid name."""
    if name is None:
        return None
    key = str(name).strip().lower().removeprefix("torch.")
    if key == KERNEL_DTYPE:
        return KERNEL_DTYPE
    if key not in DTYPES:
        close = difflib.get_close_matches(key, [*DTYPES, KERNEL_DTYPE], n=1, cutoff=0.5)
        raise ValueError(f"--dtype {name!r} is not a floating-point dtype the problem can be posed at (known: "
                         f"float32, float16, bfloat16, float64, {KERNEL_DTYPE}; also fp32, bf16, fp16, half, fp64, "
                         "float, double, any case, with or without torch.)"
                         + (f"; did you mean {DTYPES.get(close[0], close[0])!r}?" if close else ""))
    return DTYPES[key]


# --------------------------------------------------------------------------------------------
# helpers


def _say(on_progress: ProgressFn | None, message: str) -> None:
    if on_progress is not None:
        with contextlib.suppress(Exception):
            on_progress(message)


def _forwarder(role: str, on_progress: ProgressFn | None) -> Callable[[dict[str, Any]], None]:
    def forward(event: dict[str, Any]) -> None:
        message = str(event.get("message", "")).strip()
        if event.get("event") == "queued":
            detail = message.removeprefix("queued:").strip()
            message = "queued behind another timing run" + (f" ({detail})" if detail else "")
        if not message:
            return
        if not message.startswith(f"{role}:"):
            message = f"{role}: {message}"
        _say(on_progress, message)

    return forward


def _defines(source: str, name: str) -> bool:
    """Whether ``source`` defines a module-level function ``name`` (statically)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def kb_findings(source: str, target: str, problem: Any = None, *, baseline_source: str | None = None
                ) -> list[dict[str, Any]]:
    """Every knowledge-base lint of ``target`` that fires on ``source``, as ``Finding`` dicts
    (rule ``kb:<id>``, message with the rule's suggested fix, severity, line, and ``kernel``
    where the rule is about one kernel: :func:`note_unlaunched_kernels` reads it). Rules the
    baseline breaks as well are downgraded to warnings: a candidate is not held to more than
    its baseline. So are rules whose fault shows when the kernel runs (``decided_by_running``:
    the correctness check runs every autotune config on NaN-filled fresh memory and decides).
    A module that does not parse gives none (the worker reports the syntax error with its
    line). Nothing in the module's input functions counts (``_harness_lines``): the problem's own
    make the inputs."""
    from xeforge_core.analysis import analyze
    from xeforge_core.knowledge import load_knowledge

    def issues(text: str) -> list[Any]:
        unrun = _harness_lines(text)
        return [i for i in analyze(text, target, problem).issues if i.rule_id != "syntax" and i.line not in unrun]

    shared = {i.rule_id for i in issues(baseline_source)} if baseline_source else set()
    out = []
    for issue in issues(source):
        severity = issue.severity
        message = issue.message + (f". Fix: {issue.fix}" if issue.fix else "")
        if severity == "error" and issue.rule_id in shared:
            severity = "warning"
            message += " (the baseline does the same, so it is not held against the candidate)"
        rule = load_knowledge().rules.get(issue.rule_id)
        if severity == "error" and rule is not None and rule.decided_by_running:
            severity = "warning"
            message += (" (not refused on sight: the correctness check runs every autotune config on "
                        "NaN-filled fresh memory and decides)")
        out.append({"rule": f"kb:{issue.rule_id}", "message": message, "severity": severity,
                    "line": issue.line, **({"kernel": issue.kernel} if issue.kernel else {})})
    return out


def note_unlaunched_kernels(findings: list[Finding], lints: list[dict[str, Any]], launched: set[str]) -> None:
    """Add to each knowledge-base finding of ``findings`` that lies inside a kernel the run never
    launched (``lints``: the :func:`kb_findings` dicts, which name the kernel of each rule and
    line; ``launched``: the kernels the verdict saw) that it was not launched: what the rule asks
    for changes nothing at the sizes checked, and a kernel chosen by size may run only at others
    (a GEMM path beside a mat-vec). Nothing changes where no kernel was seen launched. Called on
    passing verdicts only, after the timing run's kernels are merged: a failing run may have
    stopped before a kernel's launch ended."""
    if not launched:
        return
    kernel_of = {(d["rule"], d.get("line")): d.get("kernel") for d in lints}
    for f in findings:
        kernel = kernel_of.get((f.rule, f.line))
        if kernel and kernel not in launched and "was not launched" not in f.message:
            f.message += (f" (kernel {kernel} was not launched at any size checked: it may run only at others, "
                          "where this applies)")


def _harness_lines(source: str) -> set[int]:
    """The lines of ``source`` that only build its inputs (``formats.harness_statements``: a
    solution's copy of ``get_inputs()`` creating its tensors on ``"cuda"``): code the verifier
    never runs, so no rule is held against it."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return set()
    return {line for stmt in formats.harness_statements(tree)
            for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)}


def input_distributions(problem: Any, requested: list[str]) -> list[str]:
    """The input distributions of a verification, the problem's own inputs first: a spec's
    problem takes ``requested`` as they are (each draws the spec's inputs); a problem without
    one takes its own ``get_inputs()`` (``module``: KernelBench's evaluation draws its inputs so,
    keeping their domain) followed by the other ``requested`` distributions as redraws."""
    if problem.spec is not None and problem.spec.inputs:
        return [d for d in requested if d != OWN_INPUTS] or ["normal"]
    return [OWN_INPUTS] + [d for d in requested if d != OWN_INPUTS]


def _resolve_variants(problem: Any, names: list[str] | None, include_odd: bool) -> list[Any]:
    chosen: list[Any] = []
    if names is None:
        chosen = list(problem.correctness_variants())
    else:
        for name in names:
            if name.endswith("-odd") and problem.spec is not None and name not in problem.spec.variants:
                odd = odd_size_variant(problem, name[: -len("-odd")])
                if odd is None:
                    raise ProblemError(f"variant {name!r}: {name[:-4]!r} has no odd-size copy "
                                       "(no input-only power-of-two dim)", file=problem.spec.path)
                chosen.append(odd)
            else:
                chosen.append(problem.variant(name))
    if problem.spec is None and "module-small" in problem.module_variants and \
            [v.name for v in chosen] == ["module"]:
        # the published sizes on request: the integrity checks (which keep copies of inputs and
        # outputs) run at the reduced size first, so memory stays near the problem's footprint
        chosen.insert(0, problem.module_variants["module-small"])
    if include_odd:
        for v in list(chosen):
            if v.name.endswith("-odd") or (v.name == "module" and names is not None):
                continue  # published sizes asked for by name are checked as given
            odd = odd_size_variant(problem, v) if problem.spec is not None else odd_module_variant(problem, v)
            if odd is not None:
                chosen.append(odd)
    seen: set[str] = set()
    unique = []
    for v in chosen:
        if v.name not in seen:
            seen.add(v.name)
            unique.append(v)
    return unique


def _performance_variants(problem: Any, device: DeviceInfo, opts: VerifyOptions) -> list[Any]:
    if (device.interpreter and not opts.force_timing) or not opts.measure_performance:
        return []
    if opts.performance_variants is not None:
        return [problem.variant(n) for n in opts.performance_variants]
    return list(problem.benchmark_variants(device.type))


def _step_for_progress(message: str) -> str:
    low = message.lower()
    for name in ("compile", "structure", "correctness", "performance", "timing", "baseline"):
        if name in low:
            return "performance" if name == "timing" else name
    return "run"


def _outcome_verdict(outcome: runner.WorkerOutcome, label: str, filename: str) -> Verdict:
    """One job's verdict: the worker's result refined by the process-level outcome."""
    kind, reason = runner.classify(outcome)
    verdict: Verdict | None = None
    if outcome.result is not None:
        try:
            verdict = Verdict.from_dict(outcome.result)
        except Exception as exc:  # noqa: BLE001 - a malformed result is the worker's failure
            verdict = Verdict(kind=VerdictKind.RUNTIME_ERROR,
                              reason=f"the {label} worker wrote a result that cannot be read: {exc}")
    if verdict is None:
        step = _step_for_progress(outcome.last_progress)
        text = outcome.stderr.strip()
        verdict = Verdict(kind=kind, reason=reason, error_text=text[-4000:],
                          steps=[Step(name=step, status=StepStatus.FAILED, seconds=outcome.seconds,
                                      summary=reason)],
                          source_line=innermost_line(outcome.stderr, filename))
    elif kind is not VerdictKind.OK:
        # The worker reported an exception whose text shows an out-of-memory condition or a
        # driver fault: keep its (located) reason under the refined kind.
        label = "out of memory" if kind is VerdictKind.OOM else "driver fault"
        verdict.reason = f"{label}: {verdict.reason}" if verdict.reason else reason
        verdict.kind = kind
    verdict.stdout = outcome.stdout
    verdict.stderr = outcome.stderr
    verdict.warnings = list(verdict.warnings) + list(outcome.warnings)
    verdict.isolation = dict(outcome.isolation or verdict.isolation)
    role = label.split()[0]
    entry = dict(verdict.resources.get(role) or {})
    entry.update({"peak_host_rss_bytes": outcome.peak_rss_bytes or None, "seconds": round(outcome.seconds, 3)})
    verdict.resources = {role: entry}
    return verdict


def _dir_bytes(path: Path) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for f in path.rglob("*"):
            with contextlib.suppress(OSError):
                if f.is_file():
                    total += f.stat().st_size
    return total


def _prune_baselines(root: Path) -> None:
    try:
        entries = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith("tmp-")]
    except OSError:
        return
    entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    total = 0
    for i, entry in enumerate(entries):
        total += _dir_bytes(entry)
        if i >= BASELINE_CACHE_ENTRIES or (i > 0 and total > BASELINE_CACHE_BYTES):
            shutil.rmtree(entry, ignore_errors=True)
    now = time.time()
    with contextlib.suppress(OSError):
        for tmp in root.glob("tmp-*"):
            if now - tmp.stat().st_mtime > 24 * 3600:
                shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# verify


class _Run:
    """State of one verification (jobs, directories, progress)."""

    def __init__(self, problem: Any, candidate_source: str, device: DeviceInfo,
                 opts: VerifyOptions, on_progress: ProgressFn | None,
                 cancel: threading.Event | None,
                 run_worker: Callable[..., runner.WorkerOutcome] | None = None,
                 candidate_name: str | None = None) -> None:
        self.problem = problem
        self.run_worker = run_worker or runner.run_worker
        self.candidate_source = candidate_source
        self.device = device
        self.opts = opts
        self.on_progress = on_progress
        self.cancel = cancel
        self.memory = opts.memory_bytes if opts.memory_bytes is not None else default_memory_bytes()
        self.lock_dir = Path(opts.lock_dir) if opts.lock_dir else default_lock_dir()
        self.cleanup: list[Path] = []
        self.correctness = _resolve_variants(problem, opts.variants, opts.include_odd_size)
        self.performance = _performance_variants(problem, device, opts)
        entry, name = entry_point(candidate_source, problem.kernel.class_name)
        filename = Path(candidate_name).name if candidate_name else "candidate.py"
        self.candidate_module = {"source": candidate_source, "filename": filename, "class_name": name,
                                 "label": "candidate", "entry": entry}
        baseline = problem.kernel.to_data()
        baseline["label"] = "baseline"
        self.baseline_module = baseline
        self.reference_module = problem.reference.to_data() if problem.reference is not None else None
        self.spec_data = problem.spec.to_data() if problem.spec is not None else None
        self.warnings: list[str] = [
            f"the candidate defines class {cls}, which is not an entry point (did you mean {near}?): "
            f"{name}() is what was verified" for cls, near in ignored_lookalikes(candidate_source)]
        #: variants derived during the run (launch-grid coverage), by name
        self.derived: dict[str, Any] = {}
        #: the size derived from the kernels' tiles (``derive_tile_sizes``), and the ``-odd``
        #: copies it replaced
        self.tiles: TileChoice | None = None
        self.odd_copies: list[Any] = []
        #: the size at whole tiles (``TileChoice.whole``) while it is checked
        self.whole: Any = None
        #: the variant launch-grid coverage derived, once checked (``_check_grid_coverage``)
        self.grid_variants: list[Any] = []
        #: the dtype the candidate demands when it refused the problem's (``contract.refused_dtype``)
        self.refused_dtype: str | None = None
        self.inputs_module = problem.inputs.to_data() if problem.inputs is not None else None
        if problem.spec is None and self.inputs_module is None and _defines(candidate_source, formats.inputs_functions()[0]):
            self.inputs_module = {"source": candidate_source, "filename": "candidate_inputs.py",
                                  "class_name": "Model", "label": "inputs"}
            self.warnings.append("neither the problem nor its reference defines get_inputs(): the candidate's own "
                                 "get_inputs() builds the inputs")
        if problem.spec is None and not [d for d in opts.distributions if d != OWN_INPUTS]:
            self.warnings.append("correctness judged on the problem's own get_inputs() only (--own-inputs-only): "
                                 "no redraw stressed the kernel outside the domain those inputs are drawn from")
        spec_allow = tuple(getattr(problem.spec, "allow", ()) or ()) if problem.spec is not None else ()
        self.precision = PrecisionPolicy(parse_allowances(opts.allow_precision, where="--allow"), spec_allow)
        self.target = opts.target or (device.type if device.type in ("xpu", "cuda") else "xpu")
        if opts.lints is not None:
            self.lints = list(opts.lints)
        else:
            base_src = None if problem.eager_baseline else problem.kernel.source
            self.lints = kb_findings(candidate_source, self.target, problem, baseline_source=base_src)

    def grid_limits(self) -> list[int] | None:
        """Programs allowed per launch-grid axis: the run device's profile, else (in the
        interpreter) the target's, so a grid the target would refuse is caught on cpu too."""
        limits = (self.device.profile or {}).get("max_grid")
        if limits or not self.device.interpreter:
            return limits
        from xeforge_core.knowledge import load_knowledge

        for prof in load_knowledge().profiles.values():
            if prof.target == self.target and prof.supported and prof.max_grid is not None:
                return list(prof.max_grid.value)  # type: ignore[arg-type]
        return None

    def variant_data(self, variant: Any) -> dict[str, Any]:
        """``variant.to_data()`` plus ``inputs_on_device`` for problems whose inputs are large
        (``LARGE_INPUT_BYTES``): their inputs and parameters are then made on the device."""
        data = variant.to_data()
        if self.opts.dtype and self.opts.dtype != KERNEL_DTYPE:
            data["dtype"] = self.opts.dtype
            data["bytes"] = None  # counted at the inputs' own dtypes: the worker counts the cast ones
        total = variant.bytes
        if total is None and self.problem.inputs is not None:
            got = estimate_input_bytes(self.problem.inputs.source, variant.overrides or None)
            total = got[1] if got else None
        data["inputs_on_device"] = bool(total and total >= LARGE_INPUT_BYTES)
        tiles = self.tiles.variant if self.tiles is not None else None
        if variant.name in {v.name for v in (tiles, self.whole) if v is not None}:
            data["seeds"] = self.opts.seed_list()[:1]  # one seed: the size, not the values, is what it adds
        if self.whole is not None and variant.name == self.whole.name:
            data["distributions"] = self.distributions[:1]  # and one input set: the tiles' own edges
        return data

    def job_options(self, role: str) -> dict[str, Any]:
        """The job's ``options``; the knowledge-base lints concern the candidate only."""
        o = self.opts
        return {
            "allow_dtype_change": o.allow_dtype_change, "allow_shape_change": o.allow_shape_change,
            "rtol": o.rtol, "atol": o.atol, "precision": self.precision.to_data(), "l2_bytes": self.device.l2_bytes,
            "warmup_ms": o.warmup_ms, "rep_ms": o.rep_ms, "lock_dir": str(self.lock_dir),
            "lock_key": self.device.lock_key(),
            "lints": list(self.lints) if role == "candidate" else [],
            "device_profile": self.device.profile, "device_name": self.device.name,
            "force_timing": o.force_timing,
            "grid_limits": self.grid_limits(),
        }

    @property
    def distributions(self) -> list[str]:
        """The job's input distributions, the problem's own first (``input_distributions``)."""
        return input_distributions(self.problem, self.opts.distributions)

    def job(self, role: str, module: dict[str, Any], *, expected_dir: str | None = None,
            baseline: dict[str, Any] | None = None, variants: list[Any] | None = None,
            seeds: list[int] | None = None, distributions: list[str] | None = None,
            grid_probe: Any = None) -> dict[str, Any]:
        job = {
            "role": role, "device": self.device.type, "module": module, "baseline": baseline,
            "reference": self.reference_module, "spec": self.spec_data, "inputs": self.inputs_module,
            "baseline_is_reference": self.problem.eager_baseline,
            "correctness_variants": [self.variant_data(v) for v in (variants or self.correctness)],
            "performance_variants": [self.variant_data(v) for v in self.performance] if role == "timing" else [],
            "seeds": seeds or self.opts.seed_list(),
            "distributions": distributions or self.distributions,
            "expected_dir": expected_dir, "options": self.job_options(role),
        }
        if role == "timing" and self.problem.eager_baseline:
            job["reference"] = None  # the baseline is the reference: it is timed once, as "eager"
        if grid_probe is not None:
            job["grid_probe"] = self.variant_data(grid_probe)
        return job

    def use_published_sizes(self) -> bool:
        """Replace a reduced ``module-small`` correctness variant with the published sizes
        (``module``), where those can run here: on a GPU, or in the interpreter when the
        published inputs are small enough (``PUBLISHED_ON_CPU_ELEMENTS``). True if replaced."""
        names = [v.name for v in self.correctness]
        if "module-small" not in names or "module" in names:
            return False
        if self.device.interpreter:
            published = variant_input_elements(self.problem, self.problem.variant("module"))
            if published is None or published > PUBLISHED_ON_CPU_ELEMENTS:
                return False
        self.correctness = [self.problem.variant("module") if v.name == "module-small" else v
                            for v in self.correctness]
        return True

    def shrink_for_interpreter(self, base: Any, evidence: dict[str, Any], depth: int) -> bool:
        """In Triton's interpreter, replace the problem's reduced variant ``base`` (and its
        ``-odd`` copy) with a smaller one when a module's launches there exceed the
        interpreter's per-call budget (``sizes.LaunchWork``): the inputs' size, which the
        reduction bounds, does not bound the work (two thin matrices make a large product).
        Returns whether it did (the caller probes again at the new size)."""
        if not self.device.interpreter or depth >= 3 or self.opts.variants is not None:
            return False
        work = launched_work(evidence, base.name)
        over = work.over_interpreter_budget()
        if over <= 1.0:
            return False
        smaller = smaller_reduced_variant(self.problem, base, over)
        if smaller is None:
            return False
        shown = ", ".join(f"{k}={v}" for k, v in (smaller.overrides or smaller.dims).items()
                          if (base.overrides or base.dims).get(k) != v)
        smaller = dataclasses.replace(smaller, derived=(
            f"{smaller.derived}; smaller for Triton's CPU interpreter ({shown}): at {base.name}'s first sizes "
            f"{work.text()}, over its budget of {INTERPRETER_MAX_PROGRAM_TRIPS} program-trips and "
            f"{INTERPRETER_MAX_TILE_WORK:.2g} tile elements x trips"))
        odd_name = f"{base.name}-odd"
        kept = []
        for v in self.correctness:
            if v.name == base.name:
                kept.append(smaller)
            elif v.name == odd_name:
                odd = (odd_size_variant(self.problem, smaller) if self.problem.spec is not None
                       else odd_module_variant(self.problem, smaller))
                if odd is not None:
                    kept.append(odd)
            else:
                kept.append(v)
        self.correctness = kept
        _say(self.on_progress, f"sizes: {base.name} made smaller for the interpreter ({shown}): {work.text()}")
        return True

    def derive_tile_sizes(self, depth: int = 0) -> Verdict | None:
        """Probe the kernels' launches around the first correctness variant (the ``sizes`` job)
        and check at the size derived from their tiles (``xeforge_core.sizes``), in place of the
        ``-odd`` copies this run derived. A probe that fails keeps those copies, and says why.

        Returns the verification's final verdict when the ``sizes`` job ran out of time
        (``_sizes_timeout_verdict``): a hang there would hang the later jobs too, each for its
        own limit; or when the problem's inputs broke their contract there, which no size mends
        (the baseline's ``environment`` verdict, a problem fault). ``None`` otherwise (the
        verification goes on)."""
        base = self.correctness[0]
        probe = plan_probe(self.problem, base, device_type=self.device.type)
        if probe is None:
            return None
        job = self.job("sizes", self.candidate_module, baseline=self.baseline_module, variants=[base])
        job["size_points"] = probe.point_data(self.variant_data)
        job["validity_points"] = probe.validity
        job_dir = runner.new_job_dir("xeforge-sizes-")
        self.cleanup.append(job_dir)
        _say(self.on_progress, f"sizes: probing the kernels' launches at {len(probe.points)} size(s)")
        outcome = self.run("sizes", job, job_dir, timeout_s=min(self.opts.timeout_s, SIZES_TIMEOUT_S))
        result = _outcome_verdict(outcome, "sizes", self.candidate_module["filename"])
        if result.kind is VerdictKind.TIMEOUT:
            return _sizes_timeout_verdict(self, result, outcome)
        if _fault_at_any_size(result):  # the baseline would fail the same way at every size
            return _environment_verdict(result, self.device)
        step = result.step("sizes")
        if result.kind is not VerdictKind.OK or step is None or step.status is not StepStatus.PASSED:
            why = (result.reason or result.kind.value).splitlines()[0][:300] if result.reason else result.kind.value
            self.warnings.append(f"the kernels' tiles could not be probed ({why}): sizes derived from them are "
                                 "not checked")
            return None
        if self.shrink_for_interpreter(base, step.evidence, depth):
            return self.derive_tile_sizes(depth + 1)
        self.tiles = choose_sizes(self.problem, probe, step.evidence, device_type=self.device.type)
        if self.tiles.variant is not None:
            self.odd_copies = self.derived_odd_copies()
            self.correctness = [v for v in self.correctness if v not in self.odd_copies] + [self.tiles.variant]
        if self.tiles.whole is not None:
            self.whole = self.tiles.whole
            self.correctness.append(self.whole)
        return None

    def derived_odd_copies(self) -> list[Any]:
        """The ``-odd`` copies among the correctness variants that this run derived (not those
        the spec names)."""
        spec_names = set(self.problem.spec.variants) if self.problem.spec is not None else set()
        return [v for v in self.correctness if v.name.endswith("-odd") and v.name not in spec_names]

    def drop_derived_variants(self, failure: str = "") -> str:
        """Remove one of the sizes this run derived, after the baseline failed at one: the one its
        ``failure`` names (the size at whole tiles; the size derived from the kernels' tiles,
        putting back the ``-odd`` copies it replaced; the ``-odd`` copies this run derived, not
        those the spec names), else the first of them in that order. A size the baseline runs at
        is kept. Returns what was removed, in words ("" when nothing was)."""
        odd = self.derived_odd_copies()
        tiles = self.tiles.variant if self.tiles is not None else None

        def named(variants: list[Any]) -> bool:
            return any(re.search(rf"(?<![\w-]){re.escape(v.name)}(?![\w-])", failure) for v in variants)

        options = [(kind, variants) for kind, variants in
                   (("whole", [self.whole] if self.whole is not None else []), ("tiles", [tiles] if tiles else []),
                    ("odd", odd if len(odd) < len(self.correctness) else [])) if variants]
        kind = next((kind for kind, variants in options if named(variants)), options[0][0] if options else "")
        if kind == "whole":
            name = self.whole.name
            self.correctness = [v for v in self.correctness if v.name != name]
            self.whole = None
            return f"the size at whole tiles ({name})"
        if kind == "tiles":
            name = tiles.name
            self.correctness = [v for v in self.correctness if v.name != name] + self.odd_copies
            self.tiles = None
            return f"the size derived from the kernels' tiles ({name})"
        if kind == "odd":
            self.correctness = [v for v in self.correctness if v not in odd]
            return "the non-power-of-two copy of its variants"
        return ""

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise VerificationCancelled("verification cancelled")

    def run(self, role: str, job: dict[str, Any], job_dir: Path, *,
            timeout_s: float | None = None, command: list[str] | None = None) -> runner.WorkerOutcome:
        """Run one worker job (``timeout_s`` in place of the options' own); a ``command`` (a worker
        wrapped in a tool: the memory checker) runs through ``runner.run_worker`` here, whatever
        ``run_worker`` the verification was given."""
        self.check_cancel()
        _say(self.on_progress, f"{role}: starting worker")
        timeout = self.opts.timeout_s if timeout_s is None else timeout_s
        if role == "baseline":
            timeout = (self.opts.baseline_timeout_s if self.opts.baseline_timeout_s is not None
                       else max(self.opts.timeout_s, 300.0))
        elif role == "memcheck":
            timeout = max(2 * self.opts.timeout_s, 300.0)  # the checker slows every access
        start_worker = self.run_worker if command is None else functools.partial(runner.run_worker, command=command)
        outcome = start_worker(
            job, timeout_s=timeout, memory_bytes=self.memory,
            cpu_seconds=(self.opts.cpu_seconds if self.opts.cpu_seconds is not None
                         else int(timeout * (os.cpu_count() or 1)) + 60),
            on_progress=_forwarder(role, self.on_progress),
            cancel=self.cancel, job_dir=job_dir, device_index=self.device.index,
            exit_grace_s=self.opts.exit_grace_s,
        )
        if outcome.cancelled:
            raise VerificationCancelled(f"verification cancelled during the {role} job")
        if outcome.timed_out:
            _say(self.on_progress, f"{role}: timed out after {outcome.seconds:.1f} s (limit {timeout:g} s): "
                                   "the worker was killed")
        else:
            _say(self.on_progress, f"{role}: finished in {outcome.seconds:.1f} s")
        return outcome

    def baseline_key(self, **job_kwargs: Any) -> str:
        job = self.job("baseline", self.baseline_module, expected_dir=None, **job_kwargs)
        job["options"] = {k: v for k, v in job["options"].items() if k not in ("lock_dir",)}
        return stable_hash({"what": "baseline", "job": job, "device": self.device.fingerprint_key(),
                            "versions": library_versions(), "worker": _worker_code_version()})[:32]

    def baseline(self, **job_kwargs: Any) -> tuple[Verdict, Path, bool]:
        """Run (or reuse) the baseline job (``job_kwargs``: other variants, seeds or
        distributions than the run's). Returns (verdict, its job dir, reused?); the expected
        outputs are in ``<job dir>/expected``."""
        root = cache_root() / "baselines"
        key = self.baseline_key(**job_kwargs)
        final = root / key
        if self.opts.use_cache and (final / "result.json").exists():
            outcome = runner.WorkerOutcome(result=None, returncode=0)
            loaded, err = runner._load_result(final / "result.json")
            if loaded is not None and loaded.get("kind") == VerdictKind.OK.value and not err:
                with contextlib.suppress(OSError):
                    os.utime(final)
                outcome.result = loaded
                _say(self.on_progress, "baseline: reusing saved outputs (cached)")
                return _outcome_verdict(outcome, "baseline", "baseline.py"), final, True
        if self.opts.use_cache:
            root.mkdir(parents=True, exist_ok=True)
            job_dir = root / f"tmp-{uuid.uuid4().hex}"
        else:
            job_dir = runner.new_job_dir("xeforge-baseline-")
        self.cleanup.append(job_dir)
        job = self.job("baseline", self.baseline_module, expected_dir=str(job_dir / "expected"), **job_kwargs)
        outcome = self.run("baseline", job, job_dir)
        verdict = _outcome_verdict(outcome, "baseline", self.baseline_module["filename"])
        for scratch in ("tmp", "triton-cache"):
            shutil.rmtree(job_dir / scratch, ignore_errors=True)
        if self.opts.use_cache and verdict.kind is VerdictKind.OK:
            try:
                os.rename(job_dir, final)
                self.cleanup.remove(job_dir)
                _prune_baselines(root)
                return verdict, final, False
            except OSError:
                pass  # another run saved the same baseline first: use ours, then remove it
        return verdict, job_dir, False

    def candidate_at(self, **job_kwargs: Any) -> tuple[Verdict, Verdict | None]:
        """The baseline job, then a candidate job, at other variants, seeds or distributions
        than the run's (``job_kwargs`` as for ``job``). Returns (the baseline's verdict, the
        candidate's), the second ``None`` when the baseline fails there."""
        base, base_dir, _ = self.baseline(**job_kwargs)
        if base.kind is not VerdictKind.OK:
            return base, None
        cand_dir = runner.new_job_dir("xeforge-candidate-")
        self.cleanup.append(cand_dir)
        job = self.job("candidate", self.candidate_module, expected_dir=str(base_dir / "expected"),
                       baseline=self.baseline_module, **job_kwargs)
        verdict = _outcome_verdict(self.run("candidate", job, cand_dir), "candidate", self.candidate_module["filename"])
        return base, _every_call_bounds(self, verdict)[0]

    def close(self) -> None:
        for path in self.cleanup:
            runner.cleanup_job_dir(path)


_SIZES_NOTE = re.compile(r"sizes: (?:loading|probing) the (baseline|reference|candidate)(?: at (\S+))?")


def _sizes_timeout_verdict(run: _Run, result: Verdict, outcome: runner.WorkerOutcome) -> Verdict:
    """The verdict that ends a verification whose ``sizes`` job ran out of time (``result``: that
    job's ``timeout`` verdict, ``outcome``: its process outcome). The job's last progress note
    names whose code hung (``worker.sizes``): the candidate's (or nobody's known) is the
    candidate's ``timeout``; the baseline's or the reference's is an ``environment`` verdict (the
    candidate was not judged). Either way no other job runs: each would hang for its own limit."""
    m = _SIZES_NOTE.search(outcome.last_progress or "")
    who, point = (m.group(1), m.group(2)) if m else ("", None)
    where = f"the {who}" + (f" at {point}" if point else " while loading it") if who else "the kernels' code"
    job = ("the sizes job (the kernels' launches probed before any kernel runs, limit "
           f"{outcome.timeout_s:g} s)")
    result.reason = f"{job} hung in {where}: {result.reason}"
    summary = f"hung in {where}; killed after {outcome.seconds:.1f} s"
    result.steps = [Step(name="sizes", status=StepStatus.FAILED, seconds=outcome.seconds, summary=summary),
                    Step(name="correctness", status=StepStatus.SKIPPED,
                         summary="skipped: the sizes job hung, and a verification job would too"),
                    Step(name="performance", status=StepStatus.SKIPPED, summary="skipped: the candidate did not pass")]
    result.warnings = run.warnings + result.warnings
    _say(run.on_progress, f"sizes: {summary}; the verification ends here (timeout)")
    if who in ("baseline", "reference"):
        module = run.baseline_module if who == "baseline" else (run.reference_module or {})
        result.source_line = innermost_line(outcome.stderr, Path(str(module.get("filename") or "")).name or "-")
        return _environment_verdict(result, run.device)
    return result


#: Baseline failures worth one more try without the derived ``-odd`` variants (a timeout is not:
#: it would double the wait, and says nothing about the shape).
_RETRY_WITHOUT_DERIVED = {VerdictKind.COMPILE_ERROR, VerdictKind.RUNTIME_ERROR, VerdictKind.CRASH,
                          VerdictKind.WRONG_ANSWER, VerdictKind.OOM, VerdictKind.CHEATING}


#: Exceptions a problem's own Python raises when the problem file is wrong (an undefined name, a
#: shape that does not fit); imports, the OS, memory and the driver are the environment's.
_PROBLEM_EXCEPTIONS = ("NameError", "UnboundLocalError", "TypeError", "ValueError", "AttributeError", "IndexError",
                       "KeyError", "AssertionError", "ZeroDivisionError", "NotImplementedError", "RuntimeError")
#: what a problem raises about what this machine lacks, even from its own raise statement
_LACKING_EXCEPTIONS = ("ImportError", "ModuleNotFoundError", "OSError", "FileNotFoundError", "PermissionError")
_ENVIRONMENT_WORDS = ("CUDA", "cuda", "cuDNN", "CUBLAS", "cublas", "driver", "out of memory", "device-side", "XPU",
                      "Level Zero", "NCCL", "GPU", "gpu", "install", "requires", "not available",
                      # what this device or this torch lacks (a CPU without float16 linear algebra, an
                      # older API) is the environment's, though the problem's line raised it
                      "not implemented for", "not supported", "Half", "BFloat16", "module 'torch", "module 'triton")
#: a file of a verification job's sources, in the pool's job or a job of its own:
#: ``.../job/src/candidate/k.py``, ``/tmp/xeforge-baseline-x/src/inputs/p.py``
_JOB_SOURCE_RE = re.compile(r"[^\s\"']*/src/(baseline|candidate|reference|inputs|binding)/([^\s\"'/]+)")
_PROBLEM_LABELS = ("baseline", "reference", "inputs", "binding")
#: a frame in torch's own Python package (``.../site-packages/torch/nn/modules/conv.py``)
_TORCH_FRAME_RE = re.compile(r"/torch/[^\s\"']+\.py$")


def problem_fault(base: Verdict) -> str | None:
    """``"NameError: ..."`` when the baseline job failed in the problem's own code, else ``None``.

    The problem's own code: the last frame of the traceback is in the problem's files (copied
    under the job's ``src/``), the exception names nothing this machine lacks (no import, file or
    device, :data:`_LACKING_EXCEPTIONS`, :data:`_ENVIRONMENT_WORDS`), and either that frame's line
    is a ``raise`` statement (the problem raised it itself) or the exception is one of
    :data:`_PROBLEM_EXCEPTIONS` (a ``RuntimeError`` of torch's only where it says the shapes do
    not fit: torch raises the device's faults as ``RuntimeError`` from the problem's line too).
    Frames in torch's own package below the problem's last frame count as the problem's line (a
    module such as ``nn.Conv2d`` called with a 2-D input raises inside torch). A
    raise on a redraw the verifier made never gets here: that redraw is skipped
    (``worker.domain``)."""
    if _fault_at_any_size(base):
        return (base.reason or "").splitlines()[0]  # its inputs broke their contract (worker.inputs)
    if base.kind is not VerdictKind.RUNTIME_ERROR or not base.error_text:
        return None
    frames = list(re.finditer(r'File "([^"]+)", line \d+[^\n]*\n([^\n]*)', base.error_text))
    last = next((ln.strip() for ln in reversed(base.error_text.strip().splitlines())
                 if re.match(r"^[A-Za-z_.]+(Error|Exception)\b", ln.strip())), "")
    kind = last.split(":", 1)[0].rsplit(".", 1)[-1]
    in_torch = False
    # torch's own frames below the problem's last one (nn.Conv2d given a 2-D input raises in
    # torch/nn/modules/conv.py): the problem called torch with what does not fit
    while len(frames) > 1 and _TORCH_FRAME_RE.search(frames[-1].group(1)):
        frames.pop()
        in_torch = True
    where = _JOB_SOURCE_RE.search(frames[-1].group(1)) if frames else None
    if where is None or where.group(1) not in _PROBLEM_LABELS or not last or kind in _LACKING_EXCEPTIONS:
        return None
    if any(w in last for w in _ENVIRONMENT_WORDS):
        return None
    if not in_torch and frames[-1].group(2).strip().startswith("raise "):
        return last
    if kind not in _PROBLEM_EXCEPTIONS:
        return None
    if kind == "RuntimeError" and not re.search(r"shape|size|dimension|\bdim\b", last):
        return None  # torch's runtime errors are the problem's only where they say its shapes do not fit
    return last


def _fault_at_any_size(base: Verdict) -> bool:
    """Whether the baseline job failed because the problem broke the contract of its inputs
    (``get_inputs()`` returning no list, a spec naming an unknown dim: ``problem_contract``),
    which no other size mends. An exception the problem's code raises, even a ``NameError``
    in a branch, may belong to a size this run derived: that size is dropped and the baseline
    run again, then at the published sizes."""
    return base.kind is VerdictKind.RUNTIME_ERROR and any(
        (s.evidence or {}).get("problem_contract") for s in base.steps)


#: said where the baseline could not open a file: the job holds only the Python sources
_SANDBOX_FILES_NOTE = ("; a verification job holds only the problem's and the candidate's Python files (and runs "
                       "sandboxed, reading nothing else of this machine's user files): a data file the problem opens "
                       "is not there; build such data in get_inputs() or the constructor")


def _environment_verdict(base: Verdict, device: DeviceInfo) -> Verdict:
    """The ``environment`` verdict of a verification whose baseline failed (``base``: the baseline
    job's verdict): the candidate was not judged. A baseline that hangs is said to hang (in
    Triton's interpreter: to be too slow for it at these sizes), with its line where the worker
    saw it (a hang is the baseline's own, not the device's); a baseline that raised in the
    problem's own code says so (:func:`problem_fault`, ``problem_fault`` in the step's
    evidence: the CLI exits as for bad input). The baseline step's evidence keeps its verdict
    kind (``baseline_kind``)."""
    what = f"{base.kind.value}: {base.reason}" if base.reason else base.kind.value
    if base.source_line:
        what += f" (at baseline line {base.source_line})"
    fault = problem_fault(base)
    if fault:
        reason = (f"the problem's own code failed ({what}): fix the problem file; the candidate, which was not "
                  "judged, is not at fault")
    elif base.kind is VerdictKind.TIMEOUT and device.interpreter:
        reason = (f"the baseline itself hangs ({what}), or these sizes are too large for Triton's interpreter, which "
                  "runs kernels on the CPU thousands of times slower than a GPU: verify at a smaller variant (the "
                  "default sizes) or on a GPU. The candidate was not judged")
    else:
        failed = "hangs" if base.kind is VerdictKind.TIMEOUT else "failed in this environment"
        reason = f"the baseline itself {failed} ({what}); the fault is not the candidate's, which was not judged"
        if "FileNotFoundError" in (base.error_text or "") + (base.reason or ""):
            reason += _SANDBOX_FILES_NOTE
    steps = [Step(name="baseline", status=StepStatus.FAILED,
                  seconds=sum(s.seconds for s in base.steps), summary=what,
                  evidence={"baseline_kind": base.kind.value, "problem_fault": bool(fault),
                            "baseline_steps": [asdict(s) | {"status": s.status.value} for s in base.steps]})]
    return Verdict(kind=VerdictKind.ENVIRONMENT, reason=reason, steps=steps,
                   findings=base.findings, kernels=[], correctness=base.correctness,
                   warnings=[f"baseline: {w}" for w in base.warnings], error_text=base.error_text,
                   source_line=None, stdout=base.stdout, stderr=base.stderr,
                   device=dict(device.fingerprint))


def verify(problem: Any, candidate_source: str, *, device: DeviceInfo | str | None = None,
           options: VerifyOptions | None = None, on_progress: ProgressFn | None = None,
           cancel: threading.Event | None = None,
           run_worker: Callable[..., runner.WorkerOutcome] | None = None,
           candidate_name: str | None = None, _say_posed: bool = True) -> Verdict:
    """Verify ``candidate_source`` (a kernel module's text) against ``problem``'s baseline.

    Args:
        problem: a ``xeforge_core.problem.Problem`` (its kernel is the baseline).
        candidate_source: the candidate module's Python source.
        device: a ``DeviceInfo``, an override string for ``detect_device`` (``"cpu"``,
            ``"cuda:1"``, ...) or ``None`` (detect; ``$XEFORGE_DEVICE`` honoured).
        options: ``VerifyOptions`` (defaults when ``None``).
        on_progress: called with short human messages (``"baseline: compile"``,
            ``"timing: queued behind another timing run ..."``) as the jobs advance; exceptions
            it raises are ignored.
        cancel: setting this event kills the running job and raises ``VerificationCancelled``.
        run_worker: runs each worker job in place of ``runner.run_worker``, with the same
            arguments and result (the job's ``role`` says which job it is); ``None``:
            ``runner.run_worker`` in this process. ``xeforge_core.raybatch`` passes one that runs
            the job as a Ray task asking for what its role needs (a GPU to itself for timing).
        candidate_name: the candidate's file name, used in what the verdict says (compiler
            errors, tracebacks); ``candidate.py`` when ``None``.

    Returns:
        The ``Verdict``: ``kind`` ok / compile_error / runtime_error / crash / timeout / oom /
        wrong_answer / cheating / environment, with steps (compile, structure, correctness,
        performance), findings, compiled-kernel metadata, correctness runs, performance
        results (µs, speedup, TFLOP/s, GB/s, roofline fraction), warnings, captured output,
        the device fingerprint and the total wall time (s).

    Raises:
        ProblemError: an unknown variant name.
        PrecisionError: an unknown name in ``options.allow_precision``.
        ValueError: an invalid or unavailable ``device`` override.
        VerificationCancelled: ``cancel`` was set.
    """
    opts = options or VerifyOptions()
    opts = dataclasses.replace(opts, dtype=normalised_dtype(opts.dtype))
    start = time.monotonic()
    if not isinstance(device, DeviceInfo):
        _say(on_progress, "device: detecting")
        device = detect_device(device)
    run = _Run(problem, candidate_source, device, opts, on_progress, cancel, run_worker, candidate_name)

    cache: VerdictCache | None = None
    key = ""
    if opts.use_cache:
        key = verdict_key(
            baseline_source=problem.kernel.source, candidate_source=candidate_source,
            reference_source=problem.reference.source if problem.reference is not None else None,
            spec=run.spec_data, correctness_variants=[v.to_data() for v in run.correctness],
            performance_variants=[v.to_data() for v in run.performance],
            options={**opts.result_affecting(), "lints": run.lints, "target": run.target,
                     "candidate_file": run.candidate_module["filename"], "precision": run.precision.to_data()},
            device_key=device.fingerprint_key(),
        )
        try:
            cache = VerdictCache()
        except Exception:  # noqa: BLE001 - no cache (read-only home, ...) is not a failure
            cache = None
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                _say(on_progress, f"cached verdict: {hit.kind.value}")
                cache.close()
                return _with_user_paths(hit, problem, candidate_name)

    try:
        verdict = _verify_uncached(run)
    finally:
        run.close()
    if opts.dtype == KERNEL_DTYPE and run.refused_dtype:
        _say(on_progress, f"dtype: the kernels demand {run.refused_dtype}; checking the problem posed at it")
        again = verify(problem, candidate_source, device=device, options=dataclasses.replace(
            opts, dtype=run.refused_dtype, use_cache=False), on_progress=on_progress, cancel=cancel,
            run_worker=run_worker, candidate_name=candidate_name, _say_posed=False)  # said below, otherwise
        if again.kind in _PASSING:
            again.findings.append(contract.dtype_specialised_finding(run.refused_dtype, verdict))
            # the dtype the problem was posed at: its inputs' and model's, not the outputs' (an argmax's int64)
            again.precision = {**(again.precision or {}), "posed_dtype": run.refused_dtype}
            again.reason = (f"{again.reason} with the problem posed at {run.refused_dtype}, the dtype the kernels "
                            "demand (see the dtype_specialised finding)")
        else:
            again.warnings.append(f"at the problem's own dtype it raised: {(verdict.reason or '')[:300]}")
        verdict = again
    elif opts.dtype not in (None, KERNEL_DTYPE) and _say_posed:
        verdict.findings.append(Finding("dtype_posed", (
            f"the problem was posed at {opts.dtype} (`--dtype {opts.dtype}`): its model and floating-point inputs "
            "cast from their own dtypes, the truth still float64"), "info"))
        if verdict.kind in _PASSING:
            verdict.reason = f"{verdict.reason} with the problem posed at {opts.dtype} (--dtype {opts.dtype})"
    if verdict.kind in _PASSING:  # every run ended, the timing run's launches merged
        note_unlaunched_kernels(verdict.findings, run.lints, {k.name for k in verdict.kernels})
    verdict.seconds = time.monotonic() - start
    verdict.device = dict(device.fingerprint)
    verdict.warnings = list(dict.fromkeys(device.warnings + verdict.warnings))
    if cache is not None:
        if verdict.kind in CACHEABLE_KINDS:
            cache.set(key, verdict)
        cache.close()
    _say(on_progress, "verdict: bad input (the problem's own code failed)" if verdict.problem_at_fault
         else f"verdict: {verdict.kind.value}")
    return _with_user_paths(verdict, problem, candidate_name)


def _with_user_paths(verdict: Verdict, problem: Any, candidate_name: str | None) -> Verdict:
    """``verdict`` with the paths of the sandboxed job's copies in its traceback
    (``/tmp/xeforge-pool-x/job/src/candidate/k.py``) replaced by the files the user named
    (``bad/k.py``), or by the file's name where none was named. Applied after caching, so a
    cached verdict shows the paths of the verification that asked for it."""
    if not verdict.error_text and "/src/" not in (verdict.reason or ""):
        return verdict
    named = {"candidate": candidate_name,
             **{label: getattr(getattr(problem, attr, None), "path", None)
                for label, attr in (("baseline", "kernel"), ("reference", "reference"), ("inputs", "inputs"))}}

    def user_path(match: re.Match[str]) -> str:
        given = named.get(match.group(1))
        return str(given) if given and Path(str(given)).name == match.group(2) else match.group(2)

    verdict.error_text = _JOB_SOURCE_RE.sub(user_path, verdict.error_text)
    verdict.reason = _JOB_SOURCE_RE.sub(user_path, verdict.reason or "")
    return verdict


#: Rough throughput of Triton's CPU interpreter on tl.dot work, FLOP/s: a 256x256x256 fp16 tiled
#: matmul (3.4e7 FLOP) takes 0.2-0.3 s (measured on the development machine, see FACTS.md).
INTERPRETER_FLOP_PER_S = 1.5e8


#: The fastest the interpreter moved elements through an elementwise kernel on the development
#: machine (1024-element blocks, 2^18 to 2^22 elements, measured 2026-12-03; 256-element blocks
#: move a quarter of that): a memory-bound variant's calls take at least its input elements over this.
INTERPRETER_MAX_ELEMENTS_PER_S = 6.5e5


def interpreter_too_slow(variants: list[Any], timeout_s: float, calls: int = 1) -> str:
    """Why ``variants`` cannot finish in Triton's CPU interpreter within ``timeout_s`` seconds, or
    "" when they may: one forward call of a variant's flop (``Variant.flop``, at
    :data:`INTERPRETER_FLOP_PER_S`) exceeds it, or ``calls`` calls (a worker job makes its first
    call, one a seed and one more an input distribution of the first seed) passing its input
    elements (``Variant.shapes``) through a kernel once each at the fastest rate measured
    (:data:`INTERPRETER_MAX_ELEMENTS_PER_S`) do. Variants with neither are assumed to fit (a
    KernelBench problem's variants state no shapes: :func:`inputs_too_large` judges them)."""
    for v in variants:
        flop = getattr(v, "flop", None)
        if flop:
            seconds = float(flop) / INTERPRETER_FLOP_PER_S
            if seconds > timeout_s:
                return (f"variant {v.name} needs {float(flop):.3g} FLOP per call: about {seconds / 60:.0f} min per "
                        f"call in Triton's CPU interpreter (about {INTERPRETER_FLOP_PER_S:.1g} FLOP/s), over the "
                        f"{timeout_s:g} s limit. Verify on a GPU, or give the spec a small `ci` variant for the "
                        "interpreter")
        shapes = getattr(v, "shapes", None) or {}
        elements = sum(math.prod(s) for s in shapes.values())
        seconds = calls * elements / INTERPRETER_MAX_ELEMENTS_PER_S
        if seconds > timeout_s:
            return (f"variant {v.name} has {elements:,} input elements: its {calls} calls in a check take at least "
                    f"{seconds / 60:.0f} min in Triton's CPU interpreter (at most about "
                    f"{INTERPRETER_MAX_ELEMENTS_PER_S:.2g} elements/s through a kernel), over the {timeout_s:g} s limit. "
                    "Verify on a GPU, at the default reduced sizes (leave --variant out), or with a longer --timeout")
    return ""


def inputs_too_large(variants: list[Any], problem: Any, memory_bytes: int | None) -> str:
    """Why the inputs of ``variants`` cannot be held in a verification worker of ``memory_bytes``
    bytes on this machine, or "" when they may. Judged only for variants that state no shapes
    (KernelBench problems): their inputs' bytes are estimated from ``problem``'s ``get_inputs()``
    source (``scaling.estimate_input_bytes``, with the variant's overrides), and a variant is
    refused only where the inputs and the float64 copy the truth makes of them (three times their
    bytes for float32 inputs; half-precision ones take five, so this errs toward running) exceed
    the limit. Their count says nothing certain about
    time (a kernel may read a small part of a large input), so no time is judged here."""
    if problem is None or getattr(problem, "inputs", None) is None or not memory_bytes:
        return ""
    for v in variants:
        if getattr(v, "shapes", None):
            continue
        got = estimate_input_bytes(problem.inputs.source, getattr(v, "overrides", None) or None)
        held = 3 * got[1] if got else 0
        if held > memory_bytes:
            return (f"variant {v.name}'s inputs take about {got[1] / 2**30:.1f} GiB (read from get_inputs()): "
                    f"with the float64 copy the truth makes of them, about {held / 2**30:.0f} GiB, over the "
                    f"verification worker's {memory_bytes / 2**30:.0f} GiB memory limit on this machine. Verify "
                    "on a GPU, or at the default reduced sizes (leave --variant out)")
    return ""


def _start_workers(run: _Run) -> None:
    """Start the warm pool's workers for this verification's jobs at once (sizes, baseline,
    candidate, and timing where it is measured), so that their imports and device start-up
    overlap instead of adding up job after job; nothing when the pool is off, keeps no workers
    (``XEFORGE_POOL_SIZE=0``) or another runner (a Ray task) runs the jobs."""
    if run.run_worker is not runner.run_worker or not pool.pool_enabled():
        return
    timed = run.performance and (not run.device.interpreter or run.opts.force_timing)
    jobs = 2 + int(bool(run.opts.tile_sizes)) + int(bool(timed))
    where = {"lock_dir": str(run.lock_dir)}
    with contextlib.suppress(Exception):  # the jobs start their own workers when this cannot
        warm = pool.default_pool()
        if warm.keeps(run.device.type, run.device.index, **where):
            warm.ahead(run.device.type, run.device.index, jobs=jobs, **where)


def _unparsable(run: _Run) -> Verdict | None:
    """The ``compile_error`` verdict of a candidate that is not valid Python, found before any job
    runs (it fails at every size, so no baseline or size is worth running for it); ``None`` when
    it parses. Worded as the worker words an import's ``SyntaxError`` (``worker.errors``)."""
    # where a job would hold its copy: the verdict's paths become the user's (_with_user_paths)
    path = f"/job/src/candidate/{run.candidate_module['filename']}"
    try:
        ast.parse(run.candidate_source, filename=path)
    except (SyntaxError, ValueError) as exc:
        if not isinstance(exc, SyntaxError):  # ast.parse's ValueError: a null byte
            exc = SyntaxError(str(exc), (path, 1, 0, "", 1, 0))
        exc.filename = path
        exc.lineno = exc.lineno or 1  # a null byte: Python 3.11 gives no line
        failure = classify_failure(exc, path, during="importing")
        steps = [Step(name="compile", status=StepStatus.FAILED, summary=failure.reason)] + [
            Step(name=n, status=StepStatus.SKIPPED, summary="skipped: an earlier step failed")
            for n in ("structure", "correctness", "performance")]
        return Verdict(kind=failure.kind, reason=failure.reason, source_line=failure.line,
                       error_text=failure.error_text, steps=steps)
    return None


def _verify_uncached(run: _Run) -> Verdict:
    device = run.device
    unparsable = _unparsable(run)
    if unparsable is not None:
        return unparsable
    _start_workers(run)
    if device.interpreter:
        refused = interpreter_too_slow(run.correctness, max(run.opts.timeout_s, 300.0),
                                       calls=1 + len(run.opts.seed_list()) + len(run.distributions)) \
            or inputs_too_large(run.correctness, run.problem, run.memory)
        if refused:
            return Verdict(kind=VerdictKind.ENVIRONMENT, reason=refused, steps=[
                Step(name="compile", status=StepStatus.SKIPPED, summary="skipped: " + refused)])
    if run.opts.tile_sizes:
        hung = run.derive_tile_sizes()
        if hung is not None:
            return hung
        run.check_cancel()
    base, base_dir, reused = run.baseline()
    failed_at: list[str] = []
    while base.kind in _RETRY_WITHOUT_DERIVED and not _fault_at_any_size(base) and \
            (dropped := run.drop_derived_variants(base.reason or "")):
        # The derived sizes are ours, not the spec's: a baseline that cannot run them (e.g. a
        # tensor descriptor whose rows must be 16-byte aligned) does not support such shapes,
        # and a candidate is not held to more than its baseline.
        failed_at.append(f"{dropped} ({(base.reason or base.kind.value).splitlines()[0][:300]})")
        _say(run.on_progress, f"baseline: it does not run at a size derived for this check, not the problem's own "
                              f"({dropped}): checking again without it (the failure above is no verdict)")
        base, base_dir, reused = run.baseline()
        if base.kind is VerdictKind.OK:
            left = ", ".join(v.name for v in run.correctness)
            base.warnings.insert(0, f"the baseline fails at {'; at '.join(failed_at)}; correctness is checked at "
                                    f"{left} only")
    if base.kind in _RETRY_WITHOUT_DERIVED and not _fault_at_any_size(base) and run.use_published_sizes():
        # the reduced sizes are ours, not the problem's: a problem whose sizes are tied together in
        # ways the reduction missed is checked at its published sizes instead
        first = (base.reason or base.kind.value).splitlines()[0][:300]
        base, base_dir, reused = run.baseline()
        if base.kind is VerdictKind.OK:
            base.warnings.insert(0, f"the problem does not run at reduced sizes ({first}); correctness is "
                                    "checked at its published sizes")
    if base.kind is not VerdictKind.OK:
        demanded = contract.refused_dtype(base, given=run.opts.dtype if run.opts.dtype != KERNEL_DTYPE else None)
        if run.opts.dtype == KERNEL_DTYPE:  # the baseline itself demands a dtype: pose the problem there
            run.refused_dtype = demanded
        env = _environment_verdict(base, device)
        if demanded and run.opts.dtype != KERNEL_DTYPE:
            env.reason += (f"\n(the baseline demands {demanded}: `--dtype {demanded}` or `--dtype kernel` poses the "
                           "problem at it)")
        return env
    run.check_cancel()

    cand_dir = runner.new_job_dir("xeforge-candidate-")
    run.cleanup.append(cand_dir)
    expected_dir = str(base_dir / "expected")
    probe = (grid_probe_variant(run.problem, run.correctness[0])
             if run.opts.grid_coverage and run.tiles is None else None)
    cand_job = run.job("candidate", run.candidate_module, expected_dir=expected_dir,
                       baseline=run.baseline_module, grid_probe=probe)
    outcome = run.run("candidate", cand_job, cand_dir)
    verdict = _outcome_verdict(outcome, "candidate", run.candidate_module["filename"])
    verdict.warnings = run.warnings + [f"baseline: {w}" for w in base.warnings] + verdict.warnings
    verdict.resources = {**base.resources, **verdict.resources}
    if reused:
        for step in verdict.steps:
            step.evidence.setdefault("baseline", "reused saved baseline outputs")
    seen = {(f.rule, f.line) for f in verdict.findings}
    verdict.findings += [Finding(rule=d["rule"], message=d["message"], severity=d.get("severity", "warning"),
                                 line=d.get("line")) for d in run.lints if (d["rule"], d.get("line")) not in seen]
    if verdict.kind in _PASSING and probe is not None:
        verdict = _check_grid_coverage(run, verdict)
    run.refused_dtype = contract.refused_dtype(
        verdict, given=run.opts.dtype if run.opts.dtype != KERNEL_DTYPE else None)
    if run.refused_dtype:  # a dtype the candidate demands, not a size: no published-size check
        verdict.findings.append(contract.dtype_refusal_finding(run.refused_dtype, verdict))
        if run.opts.dtype != KERNEL_DTYPE:
            verdict.reason = (f"{verdict.reason}\n(it demands {run.refused_dtype}: `--dtype {run.refused_dtype}` "
                              "poses the problem at it; see the dtype_refusal finding)")
    elif verdict.kind not in _PASSING:
        verdict = _check_published_shape(run, verdict)
    _name_sizes(run, verdict)
    _explain_tf32(verdict)
    verdict, checked = _every_call_bounds(run, verdict)
    if run.opts.memcheck and not checked and (verdict.kind in _PASSING or verdict.kind is VerdictKind.CRASH):
        verdict = _check_memory(run, verdict)  # a crash too: the checker names the access that corrupted memory

    verdict.steps = [s for s in verdict.steps if s.name != "performance"]
    if verdict.kind not in _PASSING:
        verdict.steps.append(Step(name="performance", status=StepStatus.SKIPPED,
                                  summary="skipped: the candidate did not pass"))
        return verdict
    if device.interpreter and not run.opts.force_timing:
        verdict.steps.append(Step(name="performance", status=StepStatus.NOT_MEASURED,
                                  summary=NOT_MEASURED_INTERPRETER))
        return verdict
    if not run.performance:
        verdict.steps.append(Step(name="performance", status=StepStatus.SKIPPED,
                                  summary="skipped: not requested"))
        return verdict

    run.check_cancel()
    timing_dir = runner.new_job_dir("xeforge-timing-")
    run.cleanup.append(timing_dir)
    timing_job = run.job("timing", run.candidate_module, baseline=run.baseline_module,
                         expected_dir=expected_dir)
    t_outcome = run.run("timing", timing_job, timing_dir)
    timing = _outcome_verdict(t_outcome, "timing", run.candidate_module["filename"])
    if run.problem.eager_baseline:
        for p in timing.performance:
            p.baseline_label = "eager"
    verdict = _merge_timing(verdict, timing, t_outcome)
    return _check_timed_size(run, verdict) if verdict.kind in _PASSING else verdict


def _check_timed_size(run: _Run, verdict: Verdict) -> Verdict:
    """Where the timing job's output at a performance variant missed the truth's grossly
    (``xeforge_core.worker.timed_check``), verify the candidate at that variant against the float64
    truth, which decides: wrong there, that is the verdict (the speedup of a wrong kernel is not
    shown as one); right there, or where that check cannot finish (its time or memory at a
    published size), a warning says the loose comparison differed. A mismatch the baseline shares
    with the reference is the problem's at that size: a warning."""
    step = verdict.step("performance")
    checks = {name: (v or {}).get("output_check") or {}
              for name, v in ((step.evidence.get("variants") or {}) if step is not None else {}).items()}
    for name, check in checks.items():
        if check.get("skipped"):
            verdict.warnings.append(f"variant {name}: the timed output was not compared ({check['skipped']})")
        if not check.get("mismatch"):
            continue
        if check.get("baseline_too"):
            verdict.warnings.append(
                f"variant {name}: the timed output misses the reference ({check['mismatch']}), and so does the "
                f"baseline's ({check['baseline_too']}): at this size the problem's own kernels disagree")
            continue
        variant = next((v for v in run.performance if v.name == name), None)
        if variant is None:
            continue
        _say(run.on_progress, f"timed size: checking {name} against the truth (the timed output differed)")
        one = {"variants": [variant], "seeds": run.opts.seed_list()[:1], "distributions": list(run.distributions[:1])}
        base, extra = run.candidate_at(**one)
        if extra is None:
            verdict.warnings.append(
                f"variant {name}: the timed output misses the {check['against']}'s ({check['mismatch']}), and the "
                f"truth could not be computed there ({(base.reason or base.kind.value).splitlines()[0][:200]})")
            continue
        if extra.kind is not VerdictKind.WRONG_ANSWER:  # right there, or the check itself failed (its
            # time, memory): the timed calls ran at this size, so only a wrong answer overturns them
            said = "" if extra.kind in _PASSING else f": {(extra.reason or '').splitlines()[0][:200]}"
            verdict.warnings.append(
                f"variant {name}: the timed output missed the {check['against']}'s ({check['mismatch']}), but "
                f"checked against the float64 truth there it is {extra.kind.value}{said}")
            continue
        extra.reason = (f"at the timed size {name}, which the correctness sizes did not cover: {extra.reason} "
                        f"(the timing run's output missed the {check['against']}'s: {check['mismatch']})")
        wrong = _wrong_elsewhere(verdict, extra)
        wrong.steps.append(Step(name="performance", status=StepStatus.FAILED,
                                summary=f"discarded: the candidate is wrong at the timed size {name}"))
        return wrong
    return verdict


def _wrong_elsewhere(verdict: Verdict, extra: Verdict) -> Verdict:
    """``extra`` (a candidate job at a variant the run added: the size derived for launch-grid
    coverage, the timed size) as the verdict where it found the candidate wrong, keeping
    ``verdict``'s warnings, findings, correctness runs, sizes and compile and structure steps."""
    extra.warnings = verdict.warnings + extra.warnings
    extra.findings = verdict.findings + [f for f in extra.findings if f not in verdict.findings]
    extra.correctness = verdict.correctness + extra.correctness
    extra.sizes = verdict.sizes
    extra.steps = [s for s in verdict.steps if s.name in ("compile", "structure")] + \
        [s for s in extra.steps if s.name not in ("compile", "structure", "performance")]
    return extra


#: Verdict kinds whose candidate matched the truth (timing still tells the speedup).
_PASSING = {VerdictKind.OK, VerdictKind.INCONSISTENT}


def _check_grid_coverage(run: _Run, verdict: Verdict) -> Verdict:
    """Derive a larger variant when a growing grid axis ran with too few programs (see
    ``xeforge_core.coverage``), and check the candidate there against the truth: the baseline
    job saves the truth's outputs at that size (one seed, normal inputs), then a candidate job
    compares. The derived variant is named in the verdict either way."""
    step = verdict.step("correctness")
    if step is None:
        return verdict
    probe = step.evidence.get("probe") or {}
    if "error" in probe:
        verdict.warnings.append(f"grid probe at {probe.get('variant')}: the candidate failed there "
                                f"({probe['error']}); launch-grid coverage is not known")
        return verdict
    base_variant = run.correctness[0]
    derived, why = derive_grid_variant(run.problem, base_variant, step.evidence.get("grids") or {},
                                       probe.get("grids") or {}, device_type=run.device.type)
    if derived is None:
        if why:
            verdict.warnings.append(f"launch-grid coverage: {why}")
        return verdict
    run.derived[derived.name] = derived
    _say(run.on_progress, f"grid coverage: checking {derived.name}")
    one = {"variants": [derived], "seeds": [run.opts.seed_list()[0]], "distributions": run.distributions[:1]}
    base, extra = run.candidate_at(**one)
    if extra is None:
        verdict.warnings.append(f"launch-grid coverage: {why}; but the baseline fails at {derived.name} "
                                f"({(base.reason or base.kind.value).splitlines()[0][:200]}), so it was not checked")
        return verdict
    run.grid_variants.append(derived)
    dims = derived.dims or derived.overrides
    shown = ", ".join(f"{k}={v}" for k, v in dims.items())
    note = f"derived variant {derived.name} ({shown}): {why}"
    if extra.kind in _PASSING or extra.kind is VerdictKind.INCONCLUSIVE:
        verdict.correctness += extra.correctness
        step.summary += f"; also at derived variant {derived.name} ({shown}) for launch-grid coverage"
        step.evidence["derived_variant"] = {"name": derived.name, "dims": dims, "why": why}
        return verdict
    extra.reason = f"{extra.reason} [{note}]"
    return _wrong_elsewhere(verdict, extra)


def _check_published_shape(run: _Run, verdict: Verdict) -> Verdict:
    """A candidate that fails only at a size the verifier chose, in a way that can depend on the
    shape, is judged at the problem's published size, its contract (``xeforge_core.contract``):
    right there, ``ok`` with a ``shape_specialised`` finding; wrong there, that verdict. In
    Triton's interpreter the published size is checked when that is quick
    (``PUBLISHED_ON_CPU_SECONDS``) or asked for (``--variant module``); otherwise a failure that
    depends on the shape is ``inconclusive``, saying how long the check would take."""

    problem = run.problem
    structure = verdict.step("structure")
    if problem.spec is not None or problem.inputs is None or (
            structure is not None and structure.status is StepStatus.FAILED):
        return verdict  # a spec's variants are all the contract; a broken rule holds at any size
    if verdict.kind not in contract.REFUSED_SIZE | {VerdictKind.WRONG_ANSWER}:
        return verdict
    where = contract.failed_variant(verdict, run.correctness[0].name, [v.name for v in run.correctness])
    if where == contract.PUBLISHED:
        return verdict
    chosen = next((v for v in run.correctness if v.name == where), None) or run.derived.get(where)
    hardcoded = contract.hardcoded_sizes(run.candidate_source, problem, chosen)
    seeds = run.opts.seed_list()
    calls = 3 + len(seeds)
    asked = contract.PUBLISHED in (run.opts.variants or [])
    if verdict.kind is VerdictKind.WRONG_ANSWER and not hardcoded:
        # a kernel that reads its sizes from its inputs is wrong at any size; where it matches at
        # the published size (a missing mask the published size never exercises), say so
        if not run.device.interpreter or asked:
            _published_matches_too(run, verdict, where, seeds)
        return verdict
    why = contract.shape_dependence(verdict, hardcoded)
    seconds = contract.interpreter_seconds(problem, calls) if run.device.interpreter else None
    if run.device.interpreter and not asked and (seconds is None or seconds > contract.PUBLISHED_ON_CPU_SECONDS):
        if why:
            verdict.reason = contract.not_checked_reason(verdict, chosen or where, why, seconds, calls)
            verdict.kind = VerdictKind.INCONCLUSIVE
        else:
            verdict.warnings.append(f"it fails at {where}, a size the verifier chose; the published size was not "
                                    "checked here (Triton's interpreter; `--variant module` checks it)")
        return verdict
    _say(run.on_progress, f"published size: checking {contract.PUBLISHED} ({where} failed)")
    # the published size is checked on the problem's own inputs and on the redraws that failed:
    # a kernel wrong on shifted inputs at a reduced size is not excused by matching at the
    # published size on get_inputs() alone
    failed = [r.distribution for r in verdict.correctness if not r.passed
              and r.distribution.partition(PARTIAL)[0] in run.distributions]  # a partial redraw (normal@1) too
    dists = list(dict.fromkeys(run.distributions[:1] + failed))
    one = {"variants": [problem.variant(contract.PUBLISHED)], "seeds": seeds, "distributions": dists}
    base, published = run.candidate_at(**one)
    if published is None:
        verdict.warnings.append(f"the published size was not checked: the baseline fails there "
                                f"({(base.reason or base.kind.value).splitlines()[0][:200]})")
        return verdict
    published.warnings = verdict.warnings + [w for w in published.warnings if w not in verdict.warnings]
    published.resources = {**verdict.resources, **published.resources}
    seen = {(f.rule, f.line) for f in published.findings}
    published.findings += [f for f in verdict.findings if (f.rule, f.line) not in seen]
    if published.kind not in _PASSING:
        published.warnings.append(f"at {where} it fails too: {(verdict.reason or verdict.kind.value)[:300]}")
        return published
    published.findings.append(contract.shape_specialised_finding(
        chosen or where, verdict, why or "a size the problem does not pose"))
    published.correctness = verdict.correctness + published.correctness
    step = published.step("correctness")
    if step is not None:
        step.summary += f" at the published size ({contract.PUBLISHED}); fails at {where} (shape_specialised)"
    if published.kind is VerdictKind.OK:
        published.reason = (f"{published.reason} at the published size, the problem's contract; written for that "
                            f"shape, it fails at {where} (see the shape_specialised finding)")
    return published
def _published_matches_too(run: _Run, verdict: Verdict, where: str, seeds: list[int]) -> None:
    """Check a candidate wrong at ``where`` (a size the verifier chose) at the published size
    too, on the problem's own inputs; where it matches there, a warning says that it is right
    only at sizes like the published one (an evaluation at that size alone passes it). The
    verdict stays wrong: it reads its sizes from its inputs, so the sizes it fails at are sizes it
    accepts."""
    there = [r for r in verdict.correctness if r.variant == contract.PUBLISHED]
    if there:  # checked with the others already
        matches = all(r.passed for r in there)
    else:
        _say(run.on_progress, f"published size: checking {contract.PUBLISHED} too ({where} is wrong)")
        one = {"variants": [run.problem.variant(contract.PUBLISHED)], "seeds": seeds[:1],
               "distributions": list(run.distributions[:1])}
        _, published = run.candidate_at(**one)
        matches = published is not None and published.kind in _PASSING
    if matches:
        verdict.warnings.append(
            f"at the published size ({contract.PUBLISHED}) it matches the reference: it is right only at sizes like "
            f"that one, and wrong at {where}, a size its code accepts (a mask or bound the published size never "
            "exercises), so an evaluation at the published size alone (KernelBench's) passes it")


def _name_sizes(run: _Run, verdict: Verdict) -> None:
    """Name the sizes checked, and why, in the verdict (``Verdict.sizes``), with the coverage the
    candidate's launches reached at the size derived from the tiles; a wrong answer there
    names that size in its reason."""
    step = verdict.step("correctness")
    launches = (step.evidence.get("launches") or {}) if step is not None else {}
    verdict.sizes = checked_sizes(run.problem, run.correctness + run.grid_variants, run.tiles, launches)
    derived = [(v, what) for v, what in ((run.tiles.variant if run.tiles is not None else None,
                                          "the size derived from the kernels' tiles"),
                                         (run.whole, "the size at whole tiles of the kernels")) if v is not None]
    for tiles, what in derived:
        if verdict.kind is VerdictKind.WRONG_ANSWER and f"variant {tiles.name} " in verdict.reason:
            entry = next(e for e in verdict.sizes if e.variant == tiles.name)
            shown = ", ".join(f"{k}={v}" for k, v in entry.sizes.items())
            verdict.reason += f" [{tiles.name} is {what}: {shown}]"


def _every_call_bounds(run: _Run, verdict: Verdict) -> tuple[Verdict, bool]:
    """What the candidate job's own bounds check found (Triton's interpreter checks every load,
    store and atomic of every call: ``worker.bounds``, the ``bounds`` step), applied as the memory
    checker's findings: an access outside every tensor of its launch fails a verdict whose outputs
    matched. Returns the verdict (the ``bounds`` step taken out) and whether every call was
    checked, so that ``--memcheck``'s one more call is not needed."""
    from xeforge_core.worker.bounds import BOUNDS_STEP

    step = verdict.step(BOUNDS_STEP)
    if step is None:
        return verdict, False
    verdict.steps.remove(step)
    if step.evidence.get("accesses") is None:
        return verdict, False
    unchecked = step.evidence.get("unchecked") or {}
    if unchecked:
        verdict.findings.append(Finding(
            "bounds_unchecked", f"kernel(s) {', '.join(sorted(unchecked))}: memory accesses not bounds-checked in the "
            "interpreter after the kernel made pointers from integers (a table of addresses, `.to(ptr.dtype)`, "
            "tl.pointer_type), which reach tensors no launch passes; races are still checked", "warning"))
    verdict = _races(verdict, step.evidence.get("races") or [], run.candidate_module["filename"])
    report = memcheck.interpreter_report(step.evidence["accesses"])
    if not report.accesses and not run.opts.memcheck:
        return verdict, True  # nothing found and nothing asked: the steps stay as they were
    name = run.candidate_module["filename"]
    wrong_before = verdict.kind is VerdictKind.WRONG_ANSWER
    verdict = memcheck.apply(verdict, report, candidate_file=name, seconds=0.0, variant="",
                             scope="every call of the candidate")
    if wrong_before and report.accesses:
        # the access is where to look first (a store past the end was skipped, so the outputs may
        # differ for that reason too); the comparison follows
        first = next((a for a in report.accesses if a.is_write), report.accesses[0])
        skipped = " (the check skipped it)" if first.is_write else ""
        verdict.reason = (f"out-of-bounds {'write' if first.is_write else 'read'} found by the memory checker: "
                          f"{first.describe()}{skipped}; and the outputs: {verdict.reason}")
    checked_step = verdict.step("memcheck")
    if unchecked and checked_step is not None:
        checked_step.summary += f"; not checked after making pointers from integers: {', '.join(sorted(unchecked))}"
    verdict.reason = (verdict.reason or "").replace(MEMCHECK_ADVICE, "")
    return verdict, True


def _races(verdict: Verdict, races: list[dict[str, Any]], candidate_file: str) -> Verdict:
    """A race the interpreter's every-call check found (``worker.bounds``, in a launch that hands
    no data over through atomics: a program loaded an element another program of the same launch
    stored, or one two programs stored; stored a value other than the one another program stored
    there; or changed an element another program loaded) is an error finding, and fails a
    verdict whose outputs matched: the interpreter runs programs one after another, in order, so
    the right answer it saw is one order of many a GPU may run them in (a non-atomic ``load,
    add, store`` accumulation across programs is right there every time)."""
    if not races:
        return verdict
    for r in races:
        where = Path(str(r.get("file") or "")).name
        line = r.get("line") if where == candidate_file else None
        at = f" at line {r['line']}" if line else ""
        arg = f" of {r['argument']}" if r.get("argument") else ""
        lanes = f"with no atomic handing them over ({r.get('count', 1)} such lane(s))"
        kind = r.get("kind", "read_after_write")
        if kind == "write_write":
            what = (f"program ({r.get('writer')}) stores into element(s){arg} that program ({r.get('reader')}) of the "
                    f"same launch stored a different value in, {lanes}: on a GPU the programs run concurrently, so "
                    "which value is left depends on their order (make each element the work of one program: tiles "
                    "that overlap, or a grid larger than the data, store the same elements twice)")
        elif kind == "write_after_read":
            what = (f"program ({r.get('writer')}) changes element(s){arg} that program ({r.get('reader')}) of the "
                    f"same launch loaded, {lanes}: on a GPU the programs run concurrently, so the load may see the "
                    "new value (a kernel writing in place over what its neighbours read: write to a separate output)")
        else:
            whose = ("that other programs of the same launch store too (a buffer the programs share)" if r.get("shared")
                     else f"that program ({r.get('writer')}) of the same launch stored")
            what = (f"program ({r.get('reader')}) loads element(s){arg} {whose}, {lanes}: on a GPU the programs run "
                    "concurrently, so what it reads depends on their order (use tl.atomic_add for an accumulation "
                    "across programs, or give each program its own output or workspace)")
        verdict.findings.append(Finding("race_between_programs", f"kernel {r.get('kernel', '?')}{at}: {what}",
                                        "error", line=line))
    first = next(f for f in verdict.findings if f.rule == "race_between_programs")
    if verdict.kind in _PASSING:
        verdict.kind = VerdictKind.WRONG_ANSWER
        verdict.reason = (f"a race between programs: {first.message}; the interpreter runs programs one after "
                          "another, so the outputs it matched are one order of many")
        verdict.source_line = first.line or verdict.source_line
        step = verdict.step("correctness")
        if step is not None:
            step.status = StepStatus.FAILED
            step.summary += "; but programs of one launch read each other's stores (a race)"
    return verdict


def _check_memory(run: _Run, verdict: Verdict) -> Verdict:
    """One more correctness call of the candidate (the first non-power-of-two variant, else the
    first variant; first seed and distribution) under the device's memory checker (``xeforge_core.memcheck``); its findings join the verdict and an
    invalid write fails it; a crashed candidate's reason names the first invalid access. Where no
    checker exists the verdict says so and is left as it was."""

    name = run.candidate_module["filename"]
    # the size derived from the tiles (or the non-power-of-two copy), where there is one: its
    # edges are where a bad mask shows
    checked = next((v for v in run.correctness if v.name.endswith(("-tiles", "-odd"))), run.correctness[0])
    variant = checked.name
    available, what = memcheck.availability(run.device.type)
    if not available:
        return memcheck.apply(verdict, None, candidate_file=name, seconds=0.0, variant=variant, unavailable=what)
    _say(run.on_progress, f"memcheck: one call under {what}")
    job_dir = runner.new_job_dir("xeforge-memcheck-")
    run.cleanup.append(job_dir)
    job = run.job("memcheck", run.candidate_module, variants=[checked], seeds=run.opts.seed_list()[:1],
                  distributions=list(run.distributions[:1]))
    log = job_dir / memcheck.LOG_FILE
    command = None
    if not run.device.interpreter:
        tool, _ = memcheck.find_compute_sanitizer()
        command = memcheck.sanitizer_command(str(tool), log) + [sys.executable, "-m", runner.WORKER_MODULE]
    outcome = run.run("memcheck", job, job_dir, command=command)
    result = _outcome_verdict(outcome, "memcheck", name)
    step = result.step("memcheck")
    text = ""
    if command is not None:
        text = log.read_text(errors="replace") if log.is_file() else ""
        report = memcheck.parse_sanitizer_log(text) if text.strip() else None
    else:
        found = (step.evidence.get("accesses") if step is not None else None)
        report = memcheck.interpreter_report(found) if found is not None else None
    failure = ""
    if report is None or (not report.accesses and result.kind is not VerdictKind.OK):
        failure = (f"the checked call did not complete ({result.kind.value}: "
                   f"{(result.reason or 'no reason given').splitlines()[0][:300]})")
        if command is not None and report is None:
            failure = f"{what} wrote no log; {failure}"
    verdict = memcheck.apply(verdict, report, candidate_file=name, seconds=outcome.seconds, variant=variant,
                             failure=failure, log=text)
    if not failure and report is not None:  # it ran: no advice to run it
        verdict.reason = (verdict.reason or "").replace(MEMCHECK_ADVICE, "")
    return verdict


def _explain_tf32(verdict: Verdict) -> None:
    """Add the measured error to a ``fp32_dot_tf32`` finding: against the float64 truth where it
    was computed, else against the reference."""
    for f in verdict.findings:
        if f.rule != "fp32_dot_tf32":
            continue
        measured = [o for r in verdict.correctness if r.against == "reference" for o in r.outputs
                    if o.error_ratio is not None]
        if measured:
            worst = max(measured, key=lambda o: o.error_ratio or 0.0)
            f.message += (f" (measured here against the float64 truth: relative error {worst.rel_error:.3g}, "
                          f"{worst.error_ratio:.3g}x the reference's own error scale; "
                          + ("within float32's bound: no TF32 on this device)" if not worst.needs
                             else "--allow tf32 accepts it)"))
            continue
        worst = max((o.max_rel_error for r in verdict.correctness if r.against == "reference"
                     for o in r.outputs if o.max_rel_error is not None), default=None)
        worst_abs = max((o.max_abs_error for r in verdict.correctness if r.against == "reference"
                         for o in r.outputs if o.max_abs_error is not None), default=None)
        if worst_abs is not None:
            f.message += (f" (measured against the reference here: max abs error {worst_abs:.3g}, max rel "
                          f"error {worst:.3g})")


def _merge_timing(verdict: Verdict, timing: Verdict, outcome: runner.WorkerOutcome) -> Verdict:
    verdict.performance = list(timing.performance)
    verdict.resources.update(timing.resources)
    perf_steps = [s for s in timing.steps if s.name == "performance"]
    if outcome.queued_s > 0.05:
        verdict.warnings.append(f"timing waited {outcome.queued_s:.1f} s for the device lock "
                                "(another verification was timing on it)")
    verdict.warnings += [f"timing: {w}" for w in timing.warnings]
    if timing.stdout.strip():
        verdict.stdout += "\n--- timing worker stdout ---\n" + timing.stdout
    if timing.stderr.strip():
        verdict.stderr += "\n--- timing worker stderr ---\n" + timing.stderr
    known = {(k.name, str(k.config)) for k in verdict.kernels}
    verdict.kernels += [k for k in timing.kernels if (k.name, str(k.config)) not in known]
    verdict.findings += [f for f in timing.findings
                         if (f.rule, f.line) not in {(g.rule, g.line) for g in verdict.findings}]
    if timing.kind is VerdictKind.OK:
        if perf_steps:
            verdict.steps.append(perf_steps[0])
        else:
            summary = ", ".join(f"{p.variant}: {p.speedup:.2f}x" for p in verdict.performance)
            verdict.steps.append(Step(name="performance", status=StepStatus.PASSED,
                                      seconds=outcome.seconds, summary=summary or "timed"))
        return verdict
    # The candidate passed correctness but failed while being timed (e.g. a crash or a hang
    # at the larger performance shape): that is the verdict.
    verdict.kind = timing.kind
    verdict.reason = f"while timing: {timing.reason}" if timing.reason else "failed while timing"
    verdict.error_text = timing.error_text
    verdict.source_line = timing.source_line or verdict.source_line
    if perf_steps:
        verdict.steps.append(perf_steps[0])
    else:
        verdict.steps.append(Step(name="performance", status=StepStatus.FAILED,
                                  seconds=outcome.seconds, summary=timing.reason))
    return verdict


def start_for_verification(device: str | None = None) -> int:
    """Start the workers one verification on ``device`` (an override as ``detect_device`` takes:
    ``None``, ``"cpu"``, ``"cuda:1"``) will use -- sizes, baseline and candidate, and timing on a GPU --
    so that they import while the caller loads the problem (the CLI calls this first). Does
    nothing with ``XEFORGE_POOL=0`` or for a device that cannot be detected (the verification
    then reports it). Returns how many workers are idle."""

    if not pool.pool_enabled():
        return 0
    try:
        info = detect_device(device)
    except ValueError:
        return 0
    return pool.default_pool().ahead(info.type, info.index, jobs=3 if info.interpreter else 4)
