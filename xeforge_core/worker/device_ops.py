"""One small interface over the device backends the worker uses (``worker.backends``: cpu,
Triton's interpreter; cuda, ``torch.cuda``; xpu, ``torch.xpu`` with Intel's Triton backend).

Everything device-specific the worker needs goes through ``DeviceOps``: synchronisation,
timing events, stream identity, caching-allocator poisoning, cache flushing and graphs, each
from the backend's runtime module (``DeviceBackend.runtime()``).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from xeforge_core.worker.backends import get_backend


class _HostEvent:
    """Event with the ``torch.cuda.Event`` interface, timed by the host clock (cpu)."""

    def __init__(self) -> None:
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: _HostEvent) -> float:
        """Milliseconds from this event to ``end``."""
        assert self.t is not None and end.t is not None
        return (end.t - self.t) * 1e3


class DeviceOps:
    """Device operations for a registered backend ``kind`` (``"cpu" | "cuda" | "xpu"``).

    ``torch_device`` is the ``torch.device`` tensors are placed on. ``interpreter`` is true on
    the host (kernels run in Triton's interpreter, so times are not meaningful). Raises
    ``ValueError`` for an unknown ``kind`` and ``RuntimeError`` when this torch build lacks the
    backend's runtime module.
    """

    def __init__(self, kind: str) -> None:
        self.backend = get_backend(kind)
        self.kind = self.backend.name
        self.interpreter = self.backend.interpreter
        self._mod: Any = self.backend.runtime()
        self.torch_device = torch.device("cpu" if self.interpreter else f"{self.kind}:{self._current_index()}")
        # Bound now, before any module under test runs, so that a module patching them later
        # cannot change what the worker measures with (the integrity checks also report it).
        self._sync = self._mod.synchronize if self._mod is not None else None
        self._event_cls = self._mod.Event if self._mod is not None else _HostEvent
        self._elapsed = getattr(self._event_cls, "elapsed_time", None)
        self._record = getattr(self._event_cls, "record", None)
        self._sleep = getattr(self._mod, "_sleep", None) if self.backend.busy_wait else None
        self._default_stream: Any = None
        if self._mod is not None:
            try:
                self._default_stream = self._mod.default_stream()
            except Exception:  # a backend without default_stream(): the current one at start
                try:
                    self._default_stream = self._mod.current_stream()
                except Exception:
                    self._default_stream = None

    def _current_index(self) -> int:
        return int(self._mod.current_device()) if self._mod is not None else 0

    @property
    def key(self) -> str:
        """Lock/cache key of the device, e.g. ``cuda0``."""
        return self.kind if self.interpreter else f"{self.kind}{self._current_index()}"

    def available(self) -> bool:
        """Whether the device can be used (always true on cpu)."""
        return self.interpreter or bool(self._mod.is_available())

    def synchronize(self) -> None:
        """Wait for all work queued on the device (no-op on cpu)."""
        if self._sync is not None:
            self._sync()

    def peak_memory_bytes(self) -> int | None:
        """The most device memory torch's allocator held at once in this process, bytes
        (``torch.cuda.max_memory_allocated`` / ``torch.xpu.max_memory_allocated``); ``None``
        on cpu or where the backend does not report it."""
        fn = getattr(self._mod, "max_memory_allocated", None) if self._mod is not None else None
        if fn is None:
            return None
        try:
            return int(fn())
        except Exception:  # noqa: BLE001 - a backend without the counter reports none
            return None

    def event(self) -> Any:
        """A timing event (``torch.cuda.Event`` / ``torch.xpu.Event`` with timing enabled; a
        host-clock event on cpu). Use ``record`` and ``elapsed_ms`` of this class on it."""
        if self._mod is None:
            return _HostEvent()
        return self._event_cls(enable_timing=True)

    def record(self, event: Any) -> None:
        """Record ``event`` on the current stream (with the method bound at start-up)."""
        self._record(event)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events (with the method bound at start-up)."""
        return float(self._elapsed(start, end))

    def on_side_stream(self) -> bool:
        """True when the current stream is not the device's default stream."""
        if self._mod is None or self._default_stream is None:
            return False
        try:
            return self._mod.current_stream() != self._default_stream
        except Exception:
            return False

    def name(self) -> str:
        """Human name of the device."""
        if self._mod is None:
            return "cpu (Triton interpreter)"
        try:
            return str(self._mod.get_device_name(self._current_index()))
        except Exception:
            return self.kind

    def empty_cache(self) -> None:
        """Return cached, unused device memory to the driver."""
        if self._mod is not None and hasattr(self._mod, "empty_cache"):
            self._mod.empty_cache()

    def install_scratch_allocator(self) -> None:
        """Give Triton a global-scratch allocator on a GPU, as an application must: a kernel
        that builds tensor descriptors on the device (``tl.make_tensor_descriptor``; NVIDIA TMA)
        asks for scratch memory at launch and fails with "Kernel requires a runtime memory
        allocation, but no allocator was set" without one (``triton.set_allocator``, Triton >=
        3.3). A module under test that sets its own allocator replaces this one."""
        if self._mod is None:
            return
        import triton

        set_allocator = getattr(triton, "set_allocator", None)
        if set_allocator is None:
            return
        device = self.torch_device

        def scratch(size: int, alignment: int, stream: Any) -> torch.Tensor:
            return torch.empty(size, dtype=torch.int8, device=device)

        set_allocator(scratch)

    def install_interpreter_loops(self) -> None:
        """In Triton's interpreter (cpu), make the variable of a ``tl.range`` loop a scalar
        tensor, as compiled Triton has it (an ``scf.for`` induction variable), instead of the
        Python ``int`` the interpreter yields: kernels that call ``c.to(tl.int64)`` on it
        compile on a GPU but failed here with "'int' object has no attribute 'to'". Only
        ``tl.range`` changes (``tl.static_range`` stays Python ints, as it is unrolled when
        compiled). The interpreter patches ``triton.language`` at each kernel call; this wraps
        that patching (``triton.runtime.interpreter._patch_lang_core``, Triton 3.x)."""
        if self._mod is not None:
            return
        import numpy as np
        import triton.language as tl
        import triton.runtime.interpreter as interp

        original = getattr(interp, "_patch_lang_core", None)
        if original is None or getattr(original, "_xeforge_loops", False):
            return

        def scalar(value: Any) -> int:
            if isinstance(value, tl.tensor):
                return int(np.asarray(value.handle.data).reshape(-1)[0])
            return int(value.value if isinstance(value, tl.constexpr) else value)

        def tensor_range(arg1: Any, arg2: Any = None, step: Any = None, **_: Any) -> Any:
            start, end = (0, arg1) if arg2 is None else (arg1, arg2)
            for i in range(scalar(start), scalar(end), scalar(1 if step is None else step)):
                yield tl.tensor(interp.TensorHandle(np.array([i], dtype=np.int32), tl.int32), tl.int32)

        def patch(lang: Any, scope: Any) -> None:
            original(lang, scope)
            scope.set_attr(lang, "range", tensor_range)

        patch._xeforge_loops = True  # type: ignore[attr-defined]
        interp._patch_lang_core = patch

    def install_interpreter_bf16(self) -> None:
        """In Triton's interpreter (cpu), compute bfloat16 arithmetic on its values.

        The interpreter holds bfloat16 as its ``uint16`` bit patterns and applies numpy to them:
        ``a + b``, ``a * b``, comparisons, reductions, scans and a bfloat16 ``tl.dot`` worked on
        the bit patterns (results near 1e10 to 1e38: every bfloat16 GEMM and every kernel doing
        bfloat16 arithmetic was a wrong answer on cpu). Each bfloat16 operand is widened exactly
        to float32 (its 16 bits shifted into the top half of a float32) and a bfloat16 result is
        rounded back to nearest-even, as a GPU rounds its float32 result. Casts to and from
        bfloat16 go through float32 (the interpreter converted only bfloat16 <-> float32), and a
        Python number meeting a bfloat16 tensor becomes a bfloat16 constant (the interpreter had
        no ``get_bf16``: ``x * 0.5`` did not run). Source: triton-lang/triton issue 11584 (Triton
        3.6's ``InterpreterBuilder``; not fixed upstream: "we just don't support it yet")."""
        if self._mod is not None:
            return
        import numpy as np
        import triton.language as tl
        import triton.runtime.interpreter as interp

        builder = getattr(interp, "InterpreterBuilder", None)
        if builder is None or getattr(builder, "_xeforge_bf16", False):
            return

        def is_bf16(handle: Any) -> bool:
            return getattr(getattr(handle, "dtype", None), "scalar", None) == tl.bfloat16

        def values(handle: Any) -> Any:
            if not is_bf16(handle):
                return handle.data
            return (np.asarray(handle.data).astype(np.uint32) << np.uint32(16)).view(np.float32)

        def bits(result: Any) -> Any:
            wide = np.asarray(result, dtype=np.float32).view(np.uint32)
            rounded = (wide + np.uint32(0x7FFF) + ((wide >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
            nan = np.isnan(np.asarray(result, dtype=np.float32))
            return np.where(nan, (wide >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)

        def widened(handle: Any) -> Any:
            return interp.TensorHandle(values(handle), tl.float32) if is_bf16(handle) else handle

        def back(out: Any, dtype: Any) -> Any:
            data = np.asarray(out.data)
            if dtype == tl.bfloat16 and data.dtype.kind == "f":
                return interp.TensorHandle(bits(data), tl.bfloat16)
            return out

        original_binary, original_unary = builder.binary_op, builder.unary_op
        original_fma, original_dot = builder.create_fma, builder.create_dot
        original_cast = builder.cast_impl

        def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
            # only bfloat16 <-> float32 converts; to or from an int, float16 or float64 the
            # interpreter reinterpreted the 16 bits as a number
            dst = dst_type.scalar
            if is_bf16(src) and dst != tl.float32 and dst != tl.bfloat16:
                return original_cast(self, widened(src), dst_type)
            if dst == tl.bfloat16 and not is_bf16(src) and src.dtype.scalar != tl.float32:
                wide = np.asarray(src.data).astype(np.float32)
                return interp.TensorHandle(bits(wide), tl.bfloat16)
            return original_cast(self, src, dst_type)

        def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
            if not (is_bf16(lhs) or is_bf16(rhs)):
                return original_binary(self, lhs, rhs, op)
            return back(original_binary(self, widened(lhs), widened(rhs), op), lhs.dtype.scalar)

        def unary_op(self: Any, arg: Any, op: Any) -> Any:
            if not is_bf16(arg):
                return original_unary(self, arg, op)
            return back(original_unary(self, widened(arg), op), tl.bfloat16)

        def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
            if not (is_bf16(x) or is_bf16(y) or is_bf16(z)):
                return original_fma(self, x, y, z)
            return back(original_fma(self, widened(x), widened(y), widened(z)), z.dtype.scalar)

        def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any, **kwargs: Any) -> Any:
            return original_dot(self, widened(a), widened(b), d, *args, **kwargs)

        builder.binary_op, builder.unary_op = binary_op, unary_op
        builder.create_fma, builder.create_dot = create_fma, create_dot
        builder.cast_impl = cast_impl
        if not hasattr(builder, "get_bf16"):  # a Python float meeting a bfloat16 tensor (``x * 0.5``)
            builder.get_bf16 = lambda self, value: interp.TensorHandle(
                bits(np.array([value], dtype=np.float32)), tl.bfloat16)
        builder._xeforge_bf16 = True
        self._bf16_reductions(interp, values, bits)

    @staticmethod
    def _bf16_reductions(interp: Any, values: Any, bits: Any) -> None:
        """The interpreter's fast paths for ``tl.sum``, ``tl.max``/``tl.min`` (and their
        ``arg`` forms), ``tl.cumsum`` and ``tl.cumprod`` apply numpy to the data directly: for
        bfloat16, on its float32 values, the values rounded back to bfloat16."""
        import numpy as np
        import triton.language as tl

        def wide(ops: Any, t: Any) -> Any:
            return ops.to_tensor(np.asarray(values(t.handle)), tl.float32)

        def narrow(ops: Any, t: Any) -> Any:
            if not isinstance(t, tl.core.tensor) or t.dtype != tl.float32:
                return t
            data = np.asarray(t.handle.data)
            out = ops.to_tensor(bits(data), tl.bfloat16)
            return out if data.shape else ops.to_tensor(bits(data).reshape(()).item(), tl.bfloat16)

        def on_values(original: Any) -> Any:
            def run(ops: Any, t: Any, *args: Any, **kwargs: Any) -> Any:
                if t.dtype != tl.bfloat16:
                    return original(ops, t, *args, **kwargs)
                got = original(ops, wide(ops, t), *args, **kwargs)
                if isinstance(got, list):
                    return [narrow(ops, x) for x in got]
                if isinstance(got, tuple):
                    return tuple(narrow(ops, x) for x in got)
                return narrow(ops, got)
            return run

        interp.ReduceOps.sum = on_values(interp.ReduceOps.sum)
        interp.ReduceOps.min_max = on_values(interp.ReduceOps.min_max)
        interp.ScanOps.cumsum = on_values(interp.ScanOps.cumsum)
        interp.ScanOps.cumprod = on_values(interp.ScanOps.cumprod)

    def poison_allocator(self, nbytes: int = 256 << 20) -> None:
        """Fill ``nbytes`` of the caching allocator's free memory with NaN bit patterns, so that
        later ``torch.empty`` blocks carved from it start as NaN (GPU only; on cpu fresh memory is
        poisoned through ``torch.utils.deterministic.fill_uninitialized_memory``)."""
        if self._mod is None:
            return
        try:
            free, _total = self._mod.mem_get_info()
            nbytes = int(min(nbytes, free // 4))
        except Exception:
            pass
        if nbytes <= 0:
            return
        blocks = []
        for size in (nbytes // 2, nbytes // 4, nbytes // 8, 1 << 20, 64 << 10, 4 << 10, 512):
            if size <= 0:
                continue
            try:
                t = torch.empty(size // 4, dtype=torch.int32, device=self.torch_device)
                t.fill_(-1)  # 0xFFFFFFFF: a NaN in fp32, two NaNs in fp16/bf16
                blocks.append(t)
            except Exception:
                break
        self.synchronize()
        del blocks

    def flush_buffer(self, l2_bytes: int | None) -> torch.Tensor | None:
        """A buffer of at least twice ``l2_bytes`` (default 256 MiB) to write before every timed
        call so the L2 cache holds none of the kernel's data; ``None`` on cpu."""
        if self._mod is None:
            return None
        nbytes = max(2 * int(l2_bytes or 0), 256 << 20)
        return torch.empty(nbytes // 4, dtype=torch.int32, device=self.torch_device)

    @property
    def asynchronous(self) -> bool:
        """True where work is queued to a device and runs after the host call returns (cuda,
        xpu); false on cpu, where the interpreter runs a kernel inside the launching call."""
        return self._mod is not None

    def sleep_cycles(self, cycles: int) -> bool:
        """Queue a device-side busy wait of ``cycles`` clock cycles on the current stream
        (``torch.cuda._sleep``: one thread spinning on the SM clock). It holds back the work
        queued after it without touching memory, so that the host can finish queueing a timed
        call before the device starts it. Returns False where the backend has no such wait
        (cpu, xpu), so the caller can hold the device some other way."""
        if not self.backend.busy_wait or cycles <= 0:
            return False
        if self._sleep is None:
            return False
        try:
            self._sleep(int(cycles))
        except Exception:
            return False
        return True

    def graph(self) -> Any | None:
        """A device graph object (``torch.cuda.CUDAGraph`` / ``torch.xpu.XPUGraph``: the
        backend's ``graph_class``) or ``None`` where the backend has none."""
        cls = getattr(self._mod, self.backend.graph_class, None) if self.backend.graph_class else None
        return cls() if cls is not None else None

    def graph_capture(self, graph: Any) -> Any:
        """Context manager capturing into ``graph`` (``torch.cuda.graph`` / ``torch.xpu.graph``)."""
        return self._mod.graph(graph)

    def stream(self) -> Any:
        """A new side stream of the device (``torch.cuda.Stream``)."""
        return self._mod.Stream()

    def current_stream(self) -> Any:
        """The device's current stream."""
        return self._mod.current_stream()

    def use_stream(self, stream: Any) -> Any:
        """Context manager making ``stream`` current (``torch.cuda.stream``)."""
        return self._mod.stream(stream)

    @property
    def graphs_for_timing(self) -> bool:
        """Whether timing may replay calls from a device graph on this backend (cuda)."""
        return self.backend.graph_timing and self.backend.graph_class is not None

    def program_units(self) -> int | None:
        """How many units the device schedules programs on: SMs (``multi_processor_count``) on
        NVIDIA, Xe-cores (``gpu_subslice_count``; ``max_compute_units`` counts EUs, eight an
        Xe-core) on Intel; ``None`` in the interpreter or where torch does not say."""
        if self._mod is None or self.interpreter:
            return None
        try:
            props = self._mod.get_device_properties(self._current_index())
        except Exception:  # noqa: BLE001
            return None
        for attr in ("multi_processor_count", "gpu_subslice_count"):
            value = getattr(props, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def fingerprint(self) -> dict[str, Any]:
        """Device facts recorded in the verdict (name, versions)."""
        import triton

        info: dict[str, Any] = {"type": self.kind, "name": self.name(), "torch": torch.__version__,
                                "triton": triton.__version__, "interpreter": self.interpreter}
        try:
            import numpy

            info["numpy"] = numpy.__version__
        except Exception:  # pragma: no cover
            pass
        if self._mod is not None:
            try:
                props = self._mod.get_device_properties(self._current_index())
                for attr in ("total_memory", "L2_cache_size", "multi_processor_count",
                             "driver_version", "max_compute_units", "gpu_subslice_count"):
                    if hasattr(props, attr):
                        info[attr] = getattr(props, attr)
            except Exception:
                pass
        return info
