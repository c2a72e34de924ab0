"""The way out, measured: where to run the model when the device cannot be trusted.

When OpenVINO is installed (an optional extra: ``pip install -e ".[openvino]"``), the user's
PyTorch reference model is converted with OpenVINO's converter (``openvino.convert_model``)
and run on every OpenVINO device present (CPU, and GPU when there is one), its output checked
against PyTorch on the CPU and timed next to it, all in a child process. The options are then
ranked by measured time (only correct ones rank); advice that cannot be measured here (keep
large subgraphs on the CPU, move to a supported GPU) is listed after them, labelled as such.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

from xeforge_core.doctor.coverage import model_job
from xeforge_core.doctor.isolate import run_task
from xeforge_core.problem import Problem, Variant


@dataclass
class Option:
    """One way out: ``median_us`` is the measured forward time (µs) or ``None`` when not
    measured; ``correct`` whether its output matched PyTorch on the CPU (``None``: n/a)."""

    name: str
    median_us: float | None
    correct: bool | None
    detail: str = ""


@dataclass
class WayOut:
    """Ranked options; ``openvino`` is the OpenVINO version used ("" when not installed)."""

    options: list[Option] = field(default_factory=list)
    openvino: str = ""
    error: str = ""


def openvino_available() -> bool:
    """True when the ``openvino`` package can be imported (checked without importing it)."""
    return importlib.util.find_spec("openvino") is not None


def measure_way_out(problem: Problem, variant: Variant | None = None, *, timeout_s: float = 300.0,
                    supported_gpu_hint: str = "") -> WayOut:
    """Convert and run the problem's reference (or module) with OpenVINO on every OpenVINO
    device, next to PyTorch on the CPU; return the ranked options.

    ``supported_gpu_hint`` is the knowledge base's advice on a supported device, listed last.
    """
    way = WayOut()
    if not openvino_available():
        way.error = 'OpenVINO is not installed (pip install -e ".[openvino]" to measure it)'
    else:
        out = run_task({"task": "openvino", "device": "cpu", **model_job(problem, variant)},
                       timeout_s=timeout_s)
        if out.status != "ok":
            way.error = f"{out.status}: {out.error_text}"
        else:
            way.openvino = str(out.result.get("openvino", ""))
            way.options.append(Option("PyTorch on the CPU", out.result.get("torch_cpu_us"), True))
            for dev in out.result.get("devices", []):
                way.options.append(Option(f"OpenVINO on {dev['device']}", dev.get("median_us"),
                                          bool(dev.get("ok")), dev.get("detail", "")))
    measured = sorted((o for o in way.options if o.correct and o.median_us),
                      key=lambda o: o.median_us or 0.0)
    unmeasured = [o for o in way.options if o not in measured]
    unmeasured.append(Option("Keep large subgraphs on the CPU, only proven ops on the device", None, None,
                             "see the op coverage table: ops that passed can stay on the device"))
    unmeasured.append(Option("A supported GPU", None, None, supported_gpu_hint or
                             "a GPU supported by torch.xpu or torch.cuda"))
    way.options = measured + unmeasured
    return way
