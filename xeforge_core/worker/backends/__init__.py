"""Device backends: one module per backend (``xpu``, ``cuda``, ``cpu``), one registry
(:data:`BACKENDS`, in the order detection prefers them).

Each backend holds every device-specific fact: its probe, the variable that restricts which
devices a process sees, its runtime module in torch (synchronisation, timing events, graphs),
the sandbox's device nodes, the doctor's checks and its IR target backend. ``devices``,
``worker.probe``, ``worker.device_ops``, ``worker.timing``, ``worker.errors``, ``sandbox``,
``raybatch.jobs``, ``doctor.stack`` and ``ir.targets`` ask it. It lives in the worker package
because the sandboxed worker asks it too; no backend module imports torch at module level.

AMD's ``hip`` is a compile target of the IR view only (``ir/targets.py``), not a run device.
"""

from __future__ import annotations

from xeforge_core.worker.backends.base import DeviceBackend
from xeforge_core.worker.backends.cpu import CPU
from xeforge_core.worker.backends.cuda import CUDA
from xeforge_core.worker.backends.xpu import XPU

__all__ = ["BACKENDS", "DeviceBackend", "get_backend", "names", "gpu_names", "device_node_globs", "device_env",
           "triton_backend_for", "IR_ONLY_BACKENDS"]

#: Every device backend, in the order detection prefers them (a GPU first, the interpreter last).
BACKENDS: tuple[DeviceBackend, ...] = (XPU, CUDA, CPU)


def names() -> tuple[str, ...]:
    """The device types, in preference order (``xpu``, ``cuda``, ``cpu``)."""
    return tuple(b.name for b in BACKENDS)


def gpu_names() -> tuple[str, ...]:
    """The device types that are GPUs (not the interpreter)."""
    return tuple(b.name for b in BACKENDS if not b.interpreter)


def get_backend(name: str) -> DeviceBackend:
    """The backend of device type ``name`` (``"cuda:1"`` counts as ``cuda``). Raises
    ``ValueError`` naming the known types."""
    kind = str(name).split(":")[0]
    for backend in BACKENDS:
        if backend.name == kind:
            return backend
    raise ValueError(f"unknown device {name!r}; expected {', '.join(names())}")


#: Compile targets of the IR view without a run backend: Triton backend name by IR backend
#: (AMD's ``hip`` compiles here without a GPU, as ``triton.backends.amd``).
IR_ONLY_BACKENDS: dict[str, str] = {"hip": "amd"}


def triton_backend_for(ir_backend: str) -> str:
    """The ``triton.backends`` package that compiles for an IR target backend (``cuda`` ->
    ``nvidia``, ``xpu`` -> ``intel``, ``hip`` -> ``amd``); ``ir_backend`` itself when none is
    known."""
    for backend in BACKENDS:
        if backend.ir_backend == ir_backend:
            return backend.triton_backend
    return IR_ONLY_BACKENDS.get(ir_backend, ir_backend)


def device_env() -> tuple[str, ...]:
    """Every variable that changes which devices a process sees (``CUDA_VISIBLE_DEVICES``,
    ``ZE_AFFINITY_MASK``, ``ONEAPI_DEVICE_SELECTOR``, ...), each backend's."""
    return tuple(dict.fromkeys(v for b in BACKENDS for v in (b.visible_devices_var, *b.device_env) if v))


def device_node_globs() -> tuple[str, ...]:
    """Every backend's ``/dev`` paths (globs) the sandbox binds when present."""
    return tuple(dict.fromkeys(g for b in BACKENDS for g in b.device_nodes))
