"""A stand-in Triton driver for generating TorchInductor's Triton code on a machine without a GPU.

TorchInductor writes Triton kernels for the ``cpu`` device when
``torch._inductor.config.cpu_backend = "triton"``, but it asks the active Triton driver for the
target it generates for (``get_current_target``) and for a few runtime services (current device
and stream, the torch device interface, a benchmarker). The CPU has no Triton driver, so
:func:`install` registers :class:`CodegenOnlyDriver`, which answers those questions for a
chosen GPU target (default: ``GPUTarget("cuda", 90, 32)``, an sm_90 part, 32-wide warps).
Code generation then completes; *compiling* the kernels still fails (``make_backend(cpu)``),
which is why the generation job captures the output code before Inductor loads it
(:mod:`xeforge_core.inductor.generate`).

Used only inside the generation worker process, never in the caller. On a machine with a GPU
the real driver stays active and nothing here is installed.
"""

from __future__ import annotations

from typing import Any

#: The target the stand-in driver reports: (backend, architecture, warp size). sm_90 is what
#: the H200 the project benchmarks on reports; the nvidia backend ships with every Triton wheel.
DEFAULT_TARGET: tuple[str, int, int] = ("cuda", 90, 32)


class CodegenOnlyDriver:
    """A Triton driver that can answer code-generation questions and nothing else.

    ``target``: ``(backend, arch, warp_size)`` reported by :meth:`get_current_target`. Methods
    that would need a device (launching, benchmarking) raise ``RuntimeError`` saying so.
    """

    def __init__(self, target: tuple[str, int, int] = DEFAULT_TARGET) -> None:
        self.target_spec = target

    def is_active(self) -> bool:
        return True

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        backend, arch, warp = self.target_spec
        return GPUTarget(backend, arch, warp)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        return None

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cpu

    def get_device_capability(self, device: int | None = None) -> tuple[int, int]:
        arch = self.target_spec[1]
        return (arch // 10, arch % 10)

    def get_benchmarker(self) -> Any:
        def refuse(*_: Any, **__: Any) -> Any:
            raise RuntimeError("no GPU here: the stand-in Triton driver generates code only and cannot time kernels")

        return refuse

    def get_empty_cache_for_benchmark(self) -> Any:
        raise RuntimeError("no GPU here: the stand-in Triton driver generates code only")

    def clear_cache(self, cache: Any) -> None:
        return None


def install(target: tuple[str, int, int] = DEFAULT_TARGET) -> CodegenOnlyDriver:
    """Make a :class:`CodegenOnlyDriver` Triton's active driver (this process only) and return it."""
    from triton.runtime import driver

    stand_in = CodegenOnlyDriver(target)
    driver.set_active(stand_in)
    return stand_in
