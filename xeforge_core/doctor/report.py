"""``run_doctor``: the whole doctor run, and its report (dict, text, cached copy).

Order: stack integrity -> preflight battery -> op coverage for the model (when one is given)
-> experiments on the failing checks (when asked) -> speed against the CPU (model given) ->
verdict -> way out (when the verdict is not trusted). Every device-touching step runs in its
own supervised process (``doctor.isolate``), so the doctor survives a device that hangs or
faults, and says so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core.devices import detect_device
from xeforge_core.doctor.battery import DEFAULT_CHECKS, Check, CheckResult, run_battery
from xeforge_core.doctor.coverage import CoverageResult, model_job, run_coverage
from xeforge_core.doctor.experiments import ExperimentResult, run_experiments
from xeforge_core.doctor.isolate import run_task
from xeforge_core.doctor.stack import StackReport, inspect_stack
from xeforge_core.doctor.verdict import DeviceVerdict, Observation, SpeedEvidence, decide
from xeforge_core.doctor.wayout import WayOut, measure_way_out
from xeforge_core.problem import Problem
from xeforge_core.sandbox import isolation


@dataclass
class DoctorReport:
    """Everything the doctor established about one device (and optionally one model)."""

    device: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    stack: StackReport | None = None
    battery: list[CheckResult] = field(default_factory=list)
    coverage: CoverageResult | None = None
    experiments: list[ExperimentResult] = field(default_factory=list)
    speed: SpeedEvidence | None = None
    verdict: DeviceVerdict | None = None
    way_out: WayOut | None = None
    model: str = ""
    seconds: float = 0.0
    created: float = field(default_factory=time.time)
    #: How verification workers are isolated on this machine (``sandbox.Isolation.to_dict()``).
    isolation: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the report."""
        return json.loads(json.dumps(dataclasses.asdict(self), default=str))

    def render_text(self) -> str:
        """The report as plain text for a terminal."""
        lines = [f"xeforge doctor: {self.device}" + (f" (model {self.model})" if self.model else "")]
        if self.isolation:
            lines.append("\nIsolation of verification workers")
            lines.append(f"  {self.isolation.get('summary', '')}")
            if self.isolation.get("sandboxed"):
                how = f"  bwrap: {self.isolation.get('tool')} (found by {self.isolation.get('found_by')})"
                how += "; user namespace" if self.isolation.get("user_namespace") else "; no user namespace"
                lines.append(how)
            if self.isolation.get("required"):
                lines.append("  XEFORGE_REQUIRE_SANDBOX=1: workers are refused where there is no sandbox")
        if self.stack is not None:
            lines.append("\nStack")
            for k, v in sorted(self.stack.versions.items()):
                if k not in ("torch_lib_dir", "triton_file"):
                    lines.append(f"  {k}: {v}")
            for lib in self.stack.runtime_libraries:
                lines.append(f"  loaded {lib.stem} {lib.version or '?'}  {lib.path}")
            for p in self.stack.problems:
                lines.append(f"  PROBLEM: {p}")
            if self.stack.error:
                lines.append(f"  could not inspect the stack: {self.stack.error}")
        lines.append("\nPreflight battery")
        for r in self.battery:
            lines.append(f"  {r.status:12s} {r.name} [{r.op_class}] {r.seconds:.1f} s"
                         + (f" - {r.detail}" if r.detail else ""))
            if r.stack:
                lines.append("      last Python stack:\n" + "\n".join("        " + s for s in r.stack.splitlines()[:12]))
        if self.coverage is not None:
            lines.append(f"\nOp coverage ({self.coverage.source}, variant {self.coverage.variant})")
            if self.coverage.error:
                lines.append(f"  tracing failed: {self.coverage.error}")
            for op in self.coverage.ops:
                lines.append(f"  {op.status:12s} {op.op} {op.shapes} {op.dtypes}"
                             + (f" - {op.detail}" if op.detail else ""))
        if self.experiments:
            lines.append("\nExperiments (failing checks re-run)")
            for exp in self.experiments:
                statuses = ", ".join(f"{r.name}: {r.status}" for r in exp.results)
                lines.append(f"  {exp.setting.name} {exp.setting.env or ''}: {statuses}"
                             + (f" (trace: {exp.trace_path})" if exp.trace_path else ""))
        if self.verdict is not None:
            lines.append(f"\nVerdict: {self.verdict.headline}")
            for c in self.verdict.criteria:
                lines.append(f"  [{c.mark}] {c.name}: {c.evidence}")
            lines.append(f"  -> {self.verdict.advice}")
        if self.way_out is not None:
            lines.append("\nWay out (measured where a time is shown)")
            if self.way_out.error:
                lines.append(f"  {self.way_out.error}")
            for i, o in enumerate(self.way_out.options, 1):
                t = f"{o.median_us:.1f} µs" if o.median_us else "not measured"
                ok = "" if o.correct is None else (" correct" if o.correct else " WRONG")
                lines.append(f"  {i}. {o.name}: {t}{ok}" + (f" ({o.detail})" if o.detail else ""))
        return "\n".join(lines)


def _observations(report: DoctorReport) -> list[Observation]:
    obs = [Observation(r.name, r.op_class, r.status, r.detail) for r in report.battery]
    if report.coverage is not None:
        obs += [Observation(o.op, o.op_class, o.status, o.detail) for o in report.coverage.ops]
    return obs


def _speed(problem: Problem, device: str, coverage: CoverageResult,
           timeout_s: float) -> tuple[SpeedEvidence | None, str]:
    """Model time on the CPU vs on the device with failing ops moved to the CPU (measured).
    Returns the evidence, or None and why it could not be measured.

    When every op passed, the whole model is timed on both at the device's benchmark variant
    (a realistic shape: at a tiny correctness shape launch overhead alone makes any GPU lose).
    When ops failed, the estimate is built from the per-op times of the coverage run (its
    correctness shape) plus copies at the measured host-device bandwidth, and says so.
    """
    failing = [o for o in coverage.ops if o.status != "ok"]
    variant = problem.correctness_variants()[0] if failing else problem.benchmark_variants(device.split(":")[0])[0]
    job = model_job(problem, variant)
    cpu = run_task({"task": "time_model", "device": "cpu", **job}, timeout_s=timeout_s)
    if cpu.status != "ok":
        return None, f"not measured: the model on the CPU at variant {variant.name}: {cpu.status} {cpu.error_text}"
    fallback = 0.0
    how = f"model timed whole on the device and on the CPU at variant {variant.name}"
    if failing:
        bw = run_task({"task": "bandwidth", "device": device}, timeout_s=timeout_s)
        gbps = float(bw.result.get("gbps") or 0) if bw.status == "ok" else 0.0
        copy_us = sum(o.transfer_bytes for o in failing) / (gbps * 1e3) if gbps else float("inf")
        fallback = sum(o.cpu_us or 0.0 for o in failing) + copy_us
        ok_ops = [o for o in coverage.ops if o.status == "ok"]
        device_us = sum(o.device_us or 0.0 for o in ok_ops)
        how = (f"{len(ok_ops)} ops timed alone on the device, {len(failing)} failing ops on the CPU, "
               f"copies at {gbps:.1f} GB/s, all at variant {variant.name}")
    else:
        dev = run_task({"task": "time_model", "device": device, **job}, timeout_s=timeout_s)
        if dev.status != "ok":
            return None, (f"not measured: the model on {device} at variant {variant.name}: "
                          f"{dev.status} {dev.error_text}")
        device_us = float(dev.result["median_us"])
    return SpeedEvidence(cpu_us=float(cpu.result["median_us"]), device_us=device_us,
                         fallback_us=fallback, how=how), ""


def run_doctor(device: str | None = None, *, problem: Problem | None = None, experiments: bool = False,
               checks: list[Check] | None = None, timeout_s: float = 60.0, way_out: bool = True,
               trace_dir: str | Path | None = None,
               on_progress: Callable[[str], None] | None = None) -> DoctorReport:
    """Run the doctor on ``device`` (default: the detected device; ``"cpu"``, ``"cuda:0"``,
    ``"xpu"``...). With ``problem``, also trace its model's ops, replay them on the device and
    compare its speed with the CPU's. ``experiments`` re-runs failing checks under runtime
    settings. ``checks`` replaces the default battery (tests plant faults this way).

    Raises ``ValueError`` for an unknown or unavailable device (from ``detect_device``).
    """

    start = time.monotonic()
    info = detect_device(device)
    dev = info.torch_device

    report = DoctorReport(device=dev, fingerprint=dict(info.fingerprint),
                          model=problem.name if problem else "", isolation=isolation().to_dict())

    def say(msg: str) -> None:
        if on_progress:
            on_progress(msg)

    say("stack: initialising the device in a child process")
    report.stack = inspect_stack(dev, timeout_s=max(timeout_s, 90.0))
    report.battery = run_battery(dev, checks or list(DEFAULT_CHECKS), timeout_s=timeout_s, on_progress=say)
    if problem is not None:
        report.coverage = run_coverage(problem, dev, timeout_s=timeout_s, on_progress=say)
        if info.type == "cpu":
            speed_note = "not applicable: the device is the CPU"
        elif report.coverage.error or any(o.status == "hang" for o in report.coverage.ops):
            speed_note = "not measured: the model could not be traced or an op hung"
        else:
            say("speed: model on the CPU vs on the device")
            report.speed, speed_note = _speed(problem, dev, report.coverage, max(timeout_s, 180.0))
    else:
        speed_note = "not measured (no model given)"
    if experiments:
        failing = [c for c in (checks or list(DEFAULT_CHECKS))
                   if any(r.name == c.name and r.failed for r in report.battery)]
        libs = [lib.stem for lib in (report.stack.runtime_libraries if report.stack else [])]
        report.experiments = run_experiments(dev, failing, runtime_libraries=libs, trace_dir=trace_dir,
                                             timeout_s=timeout_s, on_progress=say)
    report.verdict = decide(_observations(report), report.speed, speed_note=speed_note,
                            stack_problems=report.stack.problems if report.stack else (),
                            interpreter=bool(info.interpreter))
    if way_out and problem is not None and report.verdict.status != "trusted":
        say("way out: OpenVINO and the CPU")
        hint = ", ".join((info.profile or {}).get("use_instead") or [])
        report.way_out = measure_way_out(problem, supported_gpu_hint=hint)
    report.seconds = time.monotonic() - start
    save_report(report)
    return report


def _cache_dir() -> Path:
    root = os.environ.get("XEFORGE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "xeforge")
    return Path(root) / "doctor"


def save_report(report: DoctorReport) -> Path:
    """Keep the latest report of a device on disk (for the UI's device status)."""
    path = _cache_dir() / f"{report.device.replace(':', '_')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_cached_report(device: str) -> dict[str, Any] | None:
    """The latest saved report (a dict, see ``DoctorReport.to_dict``) of ``device``, or None."""
    path = _cache_dir() / f"{device.replace(':', '_')}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
