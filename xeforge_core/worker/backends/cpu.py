"""The host: kernels run in Triton's interpreter (``TRITON_INTERPRET=1``); correct, but no time
it measures says anything about a GPU."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from xeforge_core.worker.backends.base import DeviceBackend, unavailable


def _parse_size(text: str) -> int | None:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper()
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        return None


def fingerprint() -> dict[str, Any]:
    """The host CPU's fingerprint: its model name (``/proc/cpuinfo``), L2 size (sysfs) and RAM
    (``/proc/meminfo``), ``None`` where unreadable."""
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


def probe(out: dict[str, Any]) -> None:
    """Available when torch and triton import (``out["versions"]``)."""
    if out["versions"].get("torch") and out["versions"].get("triton"):
        out["available"]["cpu"] = 1
    else:
        unavailable(out, "cpu", "torch or triton does not import")
    out["devices"]["cpu:0"] = fingerprint()


CPU = DeviceBackend(
    name="cpu", title="cpu (Triton interpreter)", triton_backend="interpreter", probe=probe,
    runtime_libraries=("libgomp", "libomp", "libiomp5", "libtorch_cpu", "libopenblas", "libmkl"))
