"""State shared by the worker's roles: the job, the device, the hooks, the verdict being built,
progress events and step bookkeeping."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from xeforge_core.devlock import sharing
from xeforge_core.verdict import Finding, Step, StepStatus, Verdict, VerdictKind
from xeforge_core.worker.autotune import AutotuneRegistry, install_shim
from xeforge_core.worker.capture import LaunchRecorder
from xeforge_core.worker.device_ops import DeviceOps
from xeforge_core.worker.errors import Failure, WorkerError
from xeforge_core.worker.integrity import OpTracer, ThreadWatch, TimerGuard
from xeforge_core.worker.job import PROGRESS_FILE
from xeforge_core.worker.loading import load_module

STEP_ORDER = ("compile", "structure", "correctness", "performance")


class Progress:
    """Appends progress events (``{"t", "event", "message"}``) to ``progress.jsonl``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def emit(self, event: str, message: str) -> None:
        """Append one event (``step``, ``queued``, ``lock_acquired``, ``note``)."""
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"t": time.time(), "event": event, "message": message}) + "\n")
        except OSError:
            pass


class WorkerContext:
    """Everything a role needs. ``job`` is the parsed ``job.json`` (see ``job.py``)."""

    def __init__(self, job: dict[str, Any], job_dir: Path) -> None:
        self.job = job
        self.job_dir = job_dir
        self.role = job.get("role", "candidate")
        self.options: dict[str, Any] = dict(job.get("options") or {})
        self.progress = Progress(job_dir / PROGRESS_FILE)
        self.ops = DeviceOps(job.get("device") or "cpu")
        self.ops.install_scratch_allocator()
        self.ops.install_interpreter_loops()
        self.ops.install_interpreter_bf16()
        self.timer_guard = TimerGuard()
        self.threads = ThreadWatch()
        self.registry = AutotuneRegistry(interpreter=self.ops.interpreter)
        install_shim(self.registry)
        self.recorder = LaunchRecorder(on_side_stream=self.ops.on_side_stream,
                                       grid_limits=self.options.get("grid_limits"))
        self.recorder.install()
        self.verdict = Verdict(kind=VerdictKind.OK)
        self.verdict.device = self.ops.fingerprint()
        self.failed = False
        self.poisoned = False
        self._inputs: Any = None
        self._inputs_loaded = False

    # -- the problem's inputs module ----------------------------------------------------------
    def inputs_module(self) -> Any:
        """The module whose ``get_inputs()`` / ``get_init_inputs()`` build the inputs (the job's
        ``inputs``: KernelBench's problem file), imported once, before any candidate code;
        ``None`` when the job has none (a spec, or the module under test provides them).
        Raises ``WorkerError`` when it does not import."""
        if not self._inputs_loaded:
            self._inputs_loaded = True
            source = self.job.get("inputs")
            if source:
                self._inputs = load_module(self.job_dir, dict(source, label="inputs"), self.ops.kind)
        return self._inputs

    # -- fresh-memory poisoning -------------------------------------------------------------
    def enable_poison(self) -> None:
        """Make ``torch.empty`` return NaN-filled (floats) / max-filled (ints) memory, so that
        output elements a kernel never writes show up."""
        # torch.use_deterministic_algorithms(True, warn_only=True) without its import of the
        # inductor config (seconds of start-up); fill_uninitialized_memory then NaN-fills empty().
        import warnings

        torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        # warn_only: ops without a deterministic version still run; their notices are noise here
        warnings.filterwarnings("ignore", message=".*does not have a deterministic implementation.*")
        warnings.filterwarnings("ignore", message=".*Deterministic behavior was enabled.*")
        self.poisoned = True
        self.ops.poison_allocator(64 << 20)

    # -- calling the model ------------------------------------------------------------------
    def device_shared(self) -> contextlib.AbstractContextManager[Any]:
        """The device's timing lock taken shared (``xeforge_core.devlock.sharing``) for a call on
        a GPU, so no other verification times while this one runs kernels there (waiting at most
        ``SHARED_WAIT_S``, then a note says the call ran without it); nothing in Triton's
        interpreter (host-clocked, not timed against other jobs)."""
        if self.ops.interpreter:
            return contextlib.nullcontext()
        return sharing(self.options.get("lock_dir") or str(self.job_dir / "locks"),
                       str(self.options.get("lock_key") or self.ops.key), progress_path=self.progress.path,
                       on_give_up=lambda message: self.progress.emit("note", message))

    def call(self, model: torch.nn.Module, args: list[Any], *, trace: OpTracer | None = None) -> Any:
        """``model(*args)`` without autograd, threads watched, ops traced when ``trace`` given,
        the device shared with other verifications' correctness runs only (:meth:`device_shared`)."""
        self.threads.active = True
        try:
            with self.device_shared(), torch.no_grad():
                if trace is not None:
                    with trace:
                        out = model(*args)
                else:
                    out = model(*args)
            self.ops.synchronize()
        finally:
            self.threads.active = False
        return out

    # -- steps --------------------------------------------------------------------------------
    def run_step(self, name: str, fn: Callable[[Step], None]) -> Step:
        """Run one step: ``fn(step)`` fills its status/summary/evidence; a ``WorkerError`` fails
        it (the first failing step decides the verdict kind). Once a step failed, later steps
        are recorded as skipped."""
        step = Step(name=name, status=StepStatus.PASSED)
        if self.failed:
            step.status = StepStatus.SKIPPED
            step.summary = "skipped: an earlier step failed"
            self.verdict.steps.append(step)
            return step
        self.progress.emit("step", f"{name}: started")
        start = time.perf_counter()
        try:
            fn(step)
        except WorkerError as err:
            self.fail(step, err.failure)
        except Exception as exc:  # a bug of the harness itself, not of the module under test
            import traceback

            self.fail(step, Failure(VerdictKind.RUNTIME_ERROR,
                                    f"the verification worker failed in step {name}: {type(exc).__name__}: {exc}",
                                    None, traceback.format_exc()[-6000:]))
        step.seconds = time.perf_counter() - start
        self.verdict.steps.append(step)
        self.progress.emit("step", f"{name}: {step.status.value}" + (f" - {step.summary}" if step.summary else ""))
        return step

    def fail(self, step: Step, failure: Failure, findings: list[Finding] | None = None) -> None:
        """Mark ``step`` failed and set the verdict's kind, reason and line."""
        step.status = StepStatus.FAILED
        step.summary = failure.reason
        self.failed = True
        self.verdict.kind = failure.kind
        self.verdict.reason = failure.reason
        if failure.line is not None:
            self.verdict.source_line = failure.line
        if failure.error_text:
            self.verdict.error_text = failure.error_text
        for f in findings or []:
            self.verdict.findings.append(f)
        if failure.problem:
            step.evidence = {**(step.evidence or {}), "problem_contract": True}

    def skip_missing(self, names: tuple[str, ...] = STEP_ORDER) -> None:
        """Record steps in ``names`` that never ran (after a failure) as skipped."""
        have = {s.name for s in self.verdict.steps}
        for name in names:
            if name not in have:
                self.verdict.steps.append(Step(name=name, status=StepStatus.SKIPPED,
                                               summary="skipped: an earlier step failed"))

    def kernels_to_verdict(self) -> None:
        """Copy the compiled kernels seen so far into the verdict."""
        self.verdict.kernels = list(self.recorder.kernels.values())
