"""Experiments: re-run the failing checks under changed runtime settings, side by side.

These are the settings a user would otherwise try by hand. Only settings that exist for the
detected stack are tried; each names its source:

Intel (torch.xpu, SYCL on Unified Runtime):

* ``ONEAPI_DEVICE_SELECTOR=opencl:gpu``: the OpenCL backend instead of Level Zero (only when an
  OpenCL UR adapter is installed). Source: intel/llvm ``sycl/doc/EnvironmentVariables.md``.
* ``UR_L0_USE_IMMEDIATE_COMMANDLISTS=0`` / ``=1`` (and the older
  ``SYCL_PI_LEVEL_ZERO_USE_IMMEDIATE_COMMANDLISTS``): immediate command lists off / on.
  Source: Unified Runtime "Level Zero UR Reference Document"; Intel's "Level Zero Immediate
  Command Lists" article (default per platform, L0 v2 adapter immediate-only).
* ``UR_L0_SERIALIZE=2``: blocking (synchronous) Level Zero calls. Source: Unified Runtime
  Level Zero reference document.
* ``SYCL_UR_TRACE=2``: Unified Runtime call tracing for the failing check; the trace (the
  child's output) is saved for a bug report. Source: intel/llvm EnvironmentVariables.md.

NVIDIA (torch.cuda):

* ``CUDA_LAUNCH_BLOCKING=1``: synchronous kernel launches, so an error surfaces at the call
  that caused it. Source: PyTorch "CUDA semantics" notes / CUDA programming guide.
* a ``torch.profiler`` trace of the failing check (CUPTI), saved as a Chrome trace.

cpu: only the profiler trace applies.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xeforge_core.doctor.battery import Check, CheckResult, run_check


@dataclass(frozen=True)
class Setting:
    """One runtime setting to try: environment variables, what it changes, its source, and
    whether its output is a trace to keep."""

    name: str
    env: dict[str, str]
    what: str
    source: str
    trace: bool = False


@dataclass
class ExperimentResult:
    """The failing checks re-run under one setting; ``trace_path`` holds a saved trace."""

    setting: Setting
    results: list[CheckResult] = field(default_factory=list)
    trace_path: str = ""

    @property
    def fixed(self) -> list[str]:
        """Names of checks that pass under this setting."""
        return [r.name for r in self.results if r.status == "ok"]


_SYCL_ENV_DOC = "intel/llvm sycl/doc/EnvironmentVariables.md"
_UR_L0_DOC = "Unified Runtime: Level Zero UR Reference Document"


def available_settings(device_type: str, runtime_libraries: Sequence[str] = ()) -> list[Setting]:
    """The settings that exist for ``device_type`` (``xpu``/``cuda``/``cpu``).

    ``runtime_libraries`` are library stems found by the stack report (e.g.
    ``libur_adapter_opencl``): the OpenCL backend is only tried when its adapter is there.
    """
    settings: list[Setting] = []
    if device_type == "xpu":
        if any("opencl" in lib.lower() for lib in runtime_libraries):
            settings.append(Setting("OpenCL backend", {"ONEAPI_DEVICE_SELECTOR": "opencl:gpu"},
                                    "run on the OpenCL backend instead of Level Zero", _SYCL_ENV_DOC))
        settings += [
            Setting("immediate command lists off", {"UR_L0_USE_IMMEDIATE_COMMANDLISTS": "0",
                                                     "SYCL_PI_LEVEL_ZERO_USE_IMMEDIATE_COMMANDLISTS": "0"},
                    "batch submissions in regular command lists", _UR_L0_DOC),
            Setting("immediate command lists on", {"UR_L0_USE_IMMEDIATE_COMMANDLISTS": "1",
                                                    "SYCL_PI_LEVEL_ZERO_USE_IMMEDIATE_COMMANDLISTS": "1"},
                    "submit every command immediately", _UR_L0_DOC),
            Setting("synchronous launches", {"UR_L0_SERIALIZE": "2"},
                    "block on every Level Zero call", _UR_L0_DOC),
            Setting("runtime trace", {"SYCL_UR_TRACE": "2"},
                    "trace every Unified Runtime call of the failing check", _SYCL_ENV_DOC, trace=True),
        ]
    elif device_type == "cuda":
        settings += [
            Setting("synchronous launches", {"CUDA_LAUNCH_BLOCKING": "1"},
                    "launch kernels synchronously so errors surface at their call",
                    "PyTorch docs, CUDA semantics: asynchronous execution"),
            Setting("runtime trace", {}, "torch.profiler (CUPTI) trace of the failing check",
                    "PyTorch docs, torch.profiler", trace=True),
        ]
    else:
        settings.append(Setting("runtime trace", {}, "torch.profiler trace of the failing check",
                                "PyTorch docs, torch.profiler", trace=True))
    return settings


def run_experiments(device: str, failing: Sequence[Check], *, runtime_libraries: Sequence[str] = (),
                    trace_dir: str | Path | None = None, timeout_s: float = 60.0,
                    on_progress: Callable[[str], None] | None = None) -> list[ExperimentResult]:
    """Re-run each check in ``failing`` under every available setting (see module docstring).

    Traces are written to ``trace_dir`` (a new temp dir by default): a Chrome trace from the
    profiler, or the runtime's own trace output (the child's stderr) for ``SYCL_UR_TRACE``.
    """
    if not failing:
        return []
    out_dir = Path(trace_dir or tempfile.mkdtemp(prefix="xeforge-doctor-traces-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    experiments = []
    for setting in available_settings(device.split(":")[0], runtime_libraries):
        exp = ExperimentResult(setting)
        for check in failing:
            if on_progress:
                on_progress(f"experiment {setting.name}: {check.name}")
            env = dict(setting.env)
            slug = "".join(c if c.isalnum() else "_" for c in f"{setting.name}_{check.name}")
            if setting.trace and not env:
                trace_file = out_dir / f"{slug}.json"
                env["XEFORGE_DOCTOR_PROFILE"] = str(trace_file)
            result = run_check(check, device, timeout_s=timeout_s, env=env)
            if setting.trace:
                if env.get("XEFORGE_DOCTOR_PROFILE") and Path(env["XEFORGE_DOCTOR_PROFILE"]).exists():
                    exp.trace_path = env["XEFORGE_DOCTOR_PROFILE"]
                elif result.output or result.detail or result.stack:
                    path = out_dir / f"{slug}.log"
                    path.write_text("\n".join([result.detail, result.stack, result.output]), encoding="utf-8")
                    exp.trace_path = str(path)
            exp.results.append(result)
        experiments.append(exp)
    if not any(e.trace_path for e in experiments) and not any(out_dir.iterdir()):
        shutil.rmtree(out_dir, ignore_errors=True)
    return experiments
