"""Intel GPUs (Xe) through ``torch.xpu`` and Intel's Triton backend (``pytorch-triton-xpu``):
the product's target. Selected first when present (a usable device *and* the backend)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xeforge_core.worker.backends.base import DeviceBackend, unavailable

_PROPERTIES = ("platform_name", "version", "gpu_eu_count", "gpu_subslice_count", "max_work_group_size",
               "max_num_sub_groups", "sub_group_sizes", "has_fp16", "has_fp64", "has_atomic64", "device_id",
               "architecture")


def probe(out: dict[str, Any]) -> None:
    """Usable when this torch has ``torch.xpu``, it reports a device, and Intel's Triton backend
    is installed; one fingerprint per device (compute units, memory, sub-group sizes, ...)."""
    import torch

    if not hasattr(torch, "xpu"):
        unavailable(out, "xpu", "this torch build has no torch.xpu")
        return
    if not torch.xpu.is_available():
        unavailable(out, "xpu", "torch.xpu.is_available() is False")
        return
    if "intel" not in out["triton_backends"]:
        unavailable(out, "xpu", ("torch.xpu works but Intel's Triton backend is not installed "
                                 "(install the torch xpu build with pytorch-triton-xpu)"))
        return
    count = torch.xpu.device_count()
    out["available"]["xpu"] = count
    for i in range(count):
        p = torch.xpu.get_device_properties(i)
        extra: dict[str, Any] = {}
        for attr in _PROPERTIES:
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


def kernel_driver() -> dict[str, str]:
    """The Linux kernel driver bound to Intel GPUs (``i915`` or ``xe``), from sysfs."""
    found = {}
    for card in sorted(Path("/sys/class/drm").glob("card[0-9]*")):
        driver = card / "device" / "driver"
        vendor = card / "device" / "vendor"
        try:
            if vendor.read_text().strip() == "0x8086" and driver.exists():
                found[card.name] = os.path.basename(os.path.realpath(driver))
        except OSError:
            continue
    return {"intel_kernel_driver": ", ".join(f"{k}: {v}" for k, v in found.items())} if found else {}


def problems(library_stems: list[str]) -> list[str]:
    """A process that uses an xpu must have loaded the Level Zero loader."""
    if "libze_loader" not in library_stems:
        return ["no Level Zero loader (libze_loader) is loaded in the xpu process"]
    return []


#: Device nodes: DRM render nodes under ``/dev/dri``, accelerators under ``/dev/accel``.
#: Library stems: the Level Zero loader (libze_loader), the compute runtime's Level Zero driver
#: (libze_intel_gpu) and OpenCL ICD (libigdrcl), the graphics compiler (libigc), Unified Runtime
#: (libur_loader and its adapters), SYCL (libsycl), oneAPI runtime libraries (SVML, MKL, TBB,
#: oneDNN).
XPU = DeviceBackend(
    name="xpu", title="Intel GPU (torch.xpu)", triton_backend="intel", probe=probe,
    torch_module="xpu", visible_devices_var="ZE_AFFINITY_MASK",
    device_env=("ONEAPI_DEVICE_SELECTOR", "ZE_FLAT_DEVICE_HIERARCHY"), device_nodes=("/dev/dri", "/dev/accel"),
    runtime_libraries=("libze_loader", "libze_intel_gpu", "libze_tracing_layer", "libigdrcl", "libigc",
                       "libur_loader", "libur_adapter_level_zero", "libur_adapter_level_zero_v2",
                       "libur_adapter_opencl", "libsycl", "libOpenCL", "libsvml", "libmkl", "libtbb",
                       "libdnnl", "libintlc", "libumf", "libpti"),
    profiler_activity="XPU", ir_backend="xpu", graph_class="XPUGraph", doctor_versions=kernel_driver, doctor_problems=problems,
    hardcoded=r"torch\.xpu\b|['\"]xpu(:\d+)?['\"]|\.xpu\(\)|\.is_xpu\b")
