"""Worker role ``probe``: which devices this Python environment can use, and their fingerprints.

Runs inside an isolated worker process (never in the caller: initialising a GPU runtime can
hang on an unsupported device, and the caller may be the Streamlit server). Imports only the
standard library, torch and triton (and numpy for its version).

Entry points: ``run(job) -> dict`` (dispatched by ``python -m xeforge_core.worker JOB_DIR`` for
``role == "probe"``) and ``python -m xeforge_core.worker.probe JOB_DIR``, which writes the same
dict to ``JOB_DIR/result.json`` on its own.

``job["options"]["probe_types"]`` lists the device types to probe (default
``["xpu", "cuda", "cpu"]``); ``["cpu"]`` never touches a GPU runtime. The result::

    {"role": "probe", "kind": "ok",
     "available": {"xpu": 0, "cuda": 1, "cpu": 1},     # usable device count per type
     "reasons": {"xpu": "torch.xpu.is_available() is False"},  # why a type is unusable
     "devices": {"cuda:0": FINGERPRINT, "cpu:0": FINGERPRINT},
     "versions": {"python": ..., "torch": ..., "triton": ..., "numpy": ...},
     "triton_backends": ["nvidia", "amd"]}

FINGERPRINT: ``type``, ``index``, ``name``, ``driver_version``, ``triton_backend``
(``intel``/``nvidia``/``interpreter``), ``compute_units`` (EUs or Xe-cores as torch reports
them on xpu, SMs on cuda, logical CPUs on cpu), ``l2_bytes`` (``None`` where the runtime does
not report it), ``memory_bytes`` (device memory; host RAM for cpu), plus ``extra`` with
backend-specific properties (capability, sub-group sizes, ...).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from xeforge_core.worker.job import read_job, write_result

DEFAULT_TYPES = ("xpu", "cuda", "cpu")


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in ("torch", "triton", "numpy"):
        try:
            module = __import__(name)
            out[name] = str(getattr(module, "__version__", "unknown"))
        except Exception as exc:  # noqa: BLE001 - report, do not fail the probe
            out[name] = None
            out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        import torch

        out["torch_cuda"] = getattr(torch.version, "cuda", None)
        out["torch_xpu"] = getattr(torch.version, "xpu", None)
    except Exception:  # noqa: BLE001
        pass
    return out


def _triton_backends() -> list[str]:
    try:
        from triton.backends import backends

        return sorted(backends)
    except Exception:  # noqa: BLE001
        return []


def _cpu_fingerprint() -> dict[str, Any]:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    l2 = None
    cache_root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(cache_root.glob("index*")):
            if (index / "level").read_text().strip() == "2":
                l2 = _parse_size((index / "size").read_text().strip())
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    return {
        "type": "cpu", "index": 0, "name": name, "driver_version": None,
        "triton_backend": "interpreter", "compute_units": os.cpu_count(), "l2_bytes": l2,
        "memory_bytes": mem, "extra": {"machine": platform.machine()},
    }


def _parse_size(text: str) -> int | None:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper()
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        return None


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    for token in text.split():
        parts = token.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return token
    return None


def _unavailable(out: dict[str, Any], dtype: str, reason: str) -> None:
    """Record in ``out`` that no device of type ``dtype`` can be used, and why."""
    out["available"][dtype] = 0
    out["reasons"][dtype] = reason


def _probe_cuda(out: dict[str, Any]) -> None:
    import torch

    if "nvidia" not in out["triton_backends"]:
        _unavailable(out, "cuda", "Triton's nvidia backend is not installed")
        return
    if not torch.cuda.is_available():
        _unavailable(out, "cuda", "torch.cuda.is_available() is False")
        return
    count = torch.cuda.device_count()
    out["available"]["cuda"] = count
    driver = _nvidia_driver()
    api = None
    try:
        v = int(torch._C._cuda_getDriverVersion())
        api = f"{v // 1000}.{(v % 1000) // 10}"
    except Exception:  # noqa: BLE001
        pass
    for i in range(count):
        p = torch.cuda.get_device_properties(i)
        out["devices"][f"cuda:{i}"] = {
            "type": "cuda", "index": i, "name": p.name,
            "driver_version": driver or (f"CUDA driver API {api}" if api else None),
            "triton_backend": "nvidia",
            "compute_units": int(p.multi_processor_count),
            "l2_bytes": int(getattr(p, "L2_cache_size", 0) or 0) or None,
            "memory_bytes": int(p.total_memory),
            "extra": {"capability": f"{p.major}.{p.minor}", "cuda_driver_api": api,
                      "torch_cuda": getattr(torch.version, "cuda", None)},
        }


def _probe_xpu(out: dict[str, Any]) -> None:
    import torch

    if not hasattr(torch, "xpu"):
        _unavailable(out, "xpu", "this torch build has no torch.xpu")
        return
    if not torch.xpu.is_available():
        _unavailable(out, "xpu", "torch.xpu.is_available() is False")
        return
    if "intel" not in out["triton_backends"]:
        _unavailable(out, "xpu", ("torch.xpu works but Intel's Triton backend is not installed "
                                  "(install the torch xpu build with pytorch-triton-xpu)"))
        return
    count = torch.xpu.device_count()
    out["available"]["xpu"] = count
    for i in range(count):
        p = torch.xpu.get_device_properties(i)
        extra: dict[str, Any] = {}
        for attr in ("platform_name", "version", "gpu_eu_count", "gpu_subslice_count",
                     "max_work_group_size", "max_num_sub_groups", "sub_group_sizes",
                     "has_fp16", "has_fp64", "has_atomic64", "device_id", "architecture"):
            if hasattr(p, attr):
                value = getattr(p, attr)
                extra[attr] = value if isinstance(value, (int, float, str, bool, list)) else str(value)
        out["devices"][f"xpu:{i}"] = {
            "type": "xpu", "index": i, "name": str(p.name),
            "driver_version": str(getattr(p, "driver_version", "")) or None,
            "triton_backend": "intel",
            "compute_units": int(getattr(p, "max_compute_units", 0) or 0) or None,
            "l2_bytes": None,
            "memory_bytes": int(getattr(p, "total_memory", 0) or 0) or None,
            "extra": extra,
        }


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Probe the device types named in ``job["options"]["probe_types"]`` and return the result
    dict described in the module docstring. Failures of one type are recorded in ``reasons``
    (with that type's count 0) and do not stop the others; the cpu interpreter is always
    listed as available when torch and triton import."""
    options = job.get("options") or {}
    types = list(options.get("probe_types") or DEFAULT_TYPES)
    start = time.perf_counter()
    out: dict[str, Any] = {"role": "probe", "kind": "ok", "reason": "", "available": {},
                           "reasons": {}, "devices": {}, "versions": _versions(),
                           "triton_backends": _triton_backends()}
    for dtype in types:
        try:
            if dtype == "cpu":
                ok = out["versions"].get("torch") and out["versions"].get("triton")
                if ok:
                    out["available"]["cpu"] = 1
                else:
                    _unavailable(out, "cpu", "torch or triton does not import")
                out["devices"]["cpu:0"] = _cpu_fingerprint()
            elif dtype == "cuda":
                _probe_cuda(out)
            elif dtype == "xpu":
                _probe_xpu(out)
        except Exception as exc:  # noqa: BLE001 - one broken runtime must not hide the others
            _unavailable(out, dtype, f"probe failed: {type(exc).__name__}: {exc}"[:500])
    out["seconds"] = time.perf_counter() - start
    return out


def main(argv: list[str]) -> int:
    """``python -m xeforge_core.worker.probe JOB_DIR``: run the probe, write ``result.json``."""
    job_dir = Path(argv[0])
    write_result(job_dir, run(read_job(job_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
