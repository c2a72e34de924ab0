"""NVIDIA GPUs through ``torch.cuda`` and Triton's nvidia backend: the local stand-in for an Xe
GPU (same kernels, same verifier, a warp of 32)."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from xeforge_core.worker.backends.base import DeviceBackend, unavailable


def _driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    for token in text.split():
        parts = token.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return token
    return None


def probe(out: dict[str, Any]) -> None:
    """Usable when Triton's nvidia backend is installed and ``torch.cuda.is_available()``; one
    fingerprint per device (SMs, L2, memory, capability, driver)."""
    import torch

    if "nvidia" not in out["triton_backends"]:
        unavailable(out, "cuda", "Triton's nvidia backend is not installed")
        return
    if not torch.cuda.is_available():
        unavailable(out, "cuda", "torch.cuda.is_available() is False")
        return
    count = torch.cuda.device_count()
    out["available"]["cuda"] = count
    driver = _driver()
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


def nvidia_smi() -> dict[str, str]:
    """The first GPU's name and driver as ``nvidia-smi`` reports them; ``{}`` without it."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    first = out.strip().splitlines()[:1]
    if not first or "," not in first[0]:
        return {}
    name, driver = (p.strip() for p in first[0].split(",", 1))
    return {"nvidia_smi_name": name, "nvidia_driver": driver}


@functools.cache
def prepare_nodes() -> None:
    """Create NVIDIA's UVM device nodes if the driver is loaded but nothing used CUDA since boot:
    CUDA creates them on first use through the setuid ``nvidia-modprobe``, which cannot work
    inside the sandbox (no new privileges), so they must exist before it starts. Once per
    process."""
    if os.path.exists("/dev/nvidiactl") and not os.path.exists("/dev/nvidia-uvm"):
        tool = shutil.which("nvidia-modprobe")
        if tool:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run([tool, "-u", "-c=0"], capture_output=True, timeout=30)


#: NVIDIA's device nodes (``nvidia0``, ``nvidiactl``, ``nvidia-uvm``; ``nvidia-caps`` for MIG).
#: Library stems: NVIDIA's driver (libcuda), CUDA runtime, cuBLAS, cuDNN, NVRTC, nvJitLink.
CUDA = DeviceBackend(
    name="cuda", title="NVIDIA GPU (torch.cuda)", triton_backend="nvidia", probe=probe,
    torch_module="cuda", visible_devices_var="CUDA_VISIBLE_DEVICES",
    device_nodes=("/dev/nvidia*", "/dev/nvidia-caps"),
    runtime_libraries=("libcuda", "libcudart", "libcublas", "libcublasLt", "libcudnn", "libnvrtc",
                       "libnvJitLink", "libnccl", "libcusparse", "libcufft"),
    prepare_nodes=prepare_nodes, profiler_activity="CUDA",
    ir_backend="cuda", graph_class="CUDAGraph", graph_timing=True, busy_wait=True, doctor_versions=nvidia_smi,
    hardcoded=r"torch\.cuda\b|['\"]cuda(:\d+)?['\"]|\.cuda\(\)|\.is_cuda\b")
