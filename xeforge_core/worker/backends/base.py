"""What a device backend declares (standard library only: the parent reads it without torch).

Modelled on how Triton keeps its runtime drivers (``triton/backends/<name>/driver.py``: one
module per backend behind one interface, chosen by what is active) and Liger-Kernel's
per-vendor ``infer_device``: every device-specific fact the product needs lives in the backend's
module, and the code that needs one asks :func:`xeforge_core.worker.backends.get_backend`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def _nothing() -> dict[str, str]:
    return {}


def _nothing_to_prepare() -> None:
    return None


def _no_problems(library_stems: list[str]) -> list[str]:
    return []


@dataclass(frozen=True)
class DeviceBackend:
    """One device type the verifier can run on.

    Attributes:
        name: the device type and torch's device prefix (``cuda``, ``xpu``, ``cpu``).
        title: words for messages.
        triton_backend: Triton's backend that compiles for it (``nvidia``, ``intel``; the
            interpreter on the host).
        torch_module: the attribute of ``torch`` holding its runtime (``cuda``, ``xpu``):
            synchronisation, timing events, streams, allocator, device properties; ``None``
            for the host, where kernels run in Triton's interpreter and no time is meaningful.
        visible_devices_var: the variable that restricts which devices a process sees
            (``CUDA_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``); ``None`` where there is none.
        device_env: other variables that change which devices a process sees or how they
            are numbered (``ONEAPI_DEVICE_SELECTOR``).
        device_nodes: ``/dev`` paths (globs) the sandbox binds so a worker can reach the device.
        prepare_nodes: called before the sandbox lists the device nodes (NVIDIA's UVM nodes
            must exist before a sandboxed process first uses CUDA).
        profiler_activity: the ``torch.profiler.ProfilerActivity`` member that records its
            kernels (``CUDA``, ``XPU``), or ``None``.
        runtime_libraries: shared-library stems the doctor names in its stack report.
        ir_backend: the backend name of an IR compile target (``ir/targets.py``), or ``None``.
        graph_class: the ``torch_module`` attribute of a device graph timing may replay
            (``CUDAGraph``), or ``None`` where timing uses none.
        graph_timing: whether timing replays calls from such a graph (checked on cuda only).
        busy_wait: whether ``torch_module._sleep`` queues a device-side busy wait.
        probe: ``probe(out)`` (worker side, imports torch itself): fill ``out["available"]
            [name]`` with the usable device count, ``out["devices"]["<name>:<i>"]`` with each
            fingerprint, or ``out["reasons"][name]`` with why none is usable; ``out
            ["triton_backends"]`` lists Triton's installed backends.
        doctor_versions: the doctor's extra version facts (driver tools), parent side.
        doctor_problems: given the runtime library stems loaded in the device's process, the
            problems the doctor reports.
        hardcoded: a regular expression matching source that hard-codes this device (for the
            note on a module that cannot run elsewhere), or ``""``.
    """

    name: str
    title: str
    triton_backend: str
    probe: Callable[[dict[str, Any]], None]
    torch_module: str | None = None
    visible_devices_var: str | None = None
    device_env: tuple[str, ...] = ()
    device_nodes: tuple[str, ...] = ()
    prepare_nodes: Callable[[], None] = field(default=_nothing_to_prepare)
    profiler_activity: str | None = None
    runtime_libraries: tuple[str, ...] = ()
    ir_backend: str | None = None
    graph_class: str | None = None
    graph_timing: bool = False
    busy_wait: bool = False
    doctor_versions: Callable[[], dict[str, str]] = field(default=_nothing)
    doctor_problems: Callable[[list[str]], list[str]] = field(default=_no_problems)
    hardcoded: str = ""

    @property
    def interpreter(self) -> bool:
        """True on the host: kernels run in Triton's interpreter."""
        return self.torch_module is None

    def runtime(self) -> Any:
        """``torch.<torch_module>`` (imports torch), or ``None`` on the host. Raises
        ``RuntimeError`` when this torch build has no such module."""
        if self.torch_module is None:
            return None
        import torch

        if not hasattr(torch, self.torch_module):
            raise RuntimeError(f"this torch build has no torch.{self.torch_module}")
        return getattr(torch, self.torch_module)


def unavailable(out: dict[str, Any], name: str, reason: str) -> None:
    """Record in a probe's ``out`` that no device of type ``name`` can be used, and why."""
    out["available"][name] = 0
    out["reasons"][name] = reason
