"""Capture every Triton kernel launch, and the compiled kernels' metadata and IR.

``LaunchRecorder.install`` wraps ``JITFunction.run`` (compiled launches on a GPU) and
``InterpretedFunction.run`` (Triton's interpreter on cpu). Each launch is recorded with its
kernel name, constexpr arguments, the thread it came from and whether it was issued on a side
stream. On a GPU the ``CompiledKernel`` that ``run`` returns gives registers and spills per
thread, shared memory (SLM on Xe) per program, num_warps, num_stages, the GRF mode where the
backend reports one, and the IR text from ``kernel.asm`` (``ttir``, ``ttgir``, ``llir``,
``ptx``, ``spvdis``/``spv`` text; binary forms such as ``cubin`` are skipped).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.verdict import CompiledKernelInfo

MAX_IR_CHARS = 400_000


@dataclass
class LaunchRecord:
    """One kernel launch as seen by the hook."""

    kernel: str
    constexprs: dict[str, Any] = field(default_factory=dict)
    main_thread: bool = True
    side_stream: bool = False


def _plain(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str)) and not hasattr(value, "data_ptr")


def kernel_info_from_compiled(name: str, kernel: Any, constexprs: dict[str, Any]) -> CompiledKernelInfo:
    """Build ``CompiledKernelInfo`` from a Triton ``CompiledKernel`` (GPU)."""
    md = getattr(kernel, "metadata", None)

    def meta(attr: str) -> Any:
        return getattr(md, attr, None) if md is not None else None

    try:
        init = getattr(kernel, "_init_handles", None)
        if init is not None:
            init()
    except Exception:
        pass
    grf = meta("grf_mode")
    if grf is None and isinstance(getattr(md, "build_flags", None), str) and "large" in md.build_flags:
        grf = "large"
    ir: dict[str, str] = {}
    asm = getattr(kernel, "asm", None) or {}
    try:
        items = list(asm.items())
    except Exception:
        items = []
    for key, text in items:
        if isinstance(text, str):
            ir[str(key)] = text[:MAX_IR_CHARS]
    config = dict(constexprs)
    for attr in ("threads_per_warp", "num_ctas", "maxnreg"):  # sub-group size on Intel's backend
        val = meta(attr)
        if isinstance(val, (int, str)) and attr not in config:
            config[attr] = val
    regs = getattr(kernel, "n_regs", None)
    spills = getattr(kernel, "n_spills", None)
    return CompiledKernelInfo(
        name=name,
        num_warps=meta("num_warps"),
        num_stages=meta("num_stages"),
        registers=int(regs) if isinstance(regs, int) else None,
        spills=int(spills) if isinstance(spills, int) else None,
        shared_bytes=meta("shared"),
        local_bytes=meta("local_mem_size") or meta("scratch_size") or meta("spill_size"),
        grf_mode=str(grf) if grf is not None else None,
        config=config,
        ir=ir,
    )


class LaunchRecorder:
    """Records kernel launches while installed. ``on_side_stream`` is a callable telling
    whether the current stream is not the default one (``DeviceOps.on_side_stream``)."""

    def __init__(self, on_side_stream: Any = None) -> None:
        self.on_side_stream = on_side_stream or (lambda: False)
        self.launches: list[LaunchRecord] = []
        self.kernels: dict[tuple, CompiledKernelInfo] = {}
        self.active = True
        self._patched: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        """Patch the launch paths (idempotent)."""
        if self._patched:
            return
        from triton.runtime.jit import JITFunction

        targets = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        except Exception:  # pragma: no cover
            pass
        for cls in targets:
            original = cls.run
            cls.run = self._wrap(original)
            self._patched.append((cls, "run", original))

    def uninstall(self) -> None:
        """Put the original launch paths back."""
        for cls, attr, original in self._patched:
            setattr(cls, attr, original)
        self._patched = []

    def _wrap(self, original: Any) -> Any:
        recorder = self

        def run(fn_self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
            if warmup or not recorder.active:
                return original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            name = getattr(getattr(fn_self, "fn", None), "__name__", None) or type(fn_self).__name__
            constexprs = {k: v for k, v in kwargs.items() if _plain(v)}
            rec = LaunchRecord(kernel=name, constexprs=constexprs,
                               main_thread=threading.current_thread() is threading.main_thread(),
                               side_stream=bool(recorder.on_side_stream()))
            recorder.launches.append(rec)
            result = original(fn_self, *args, grid=grid, warmup=warmup, **kwargs)
            key = (name, tuple(sorted((k, repr(v)) for k, v in constexprs.items())))
            if key not in recorder.kernels:
                if result is not None and hasattr(result, "asm"):
                    info = kernel_info_from_compiled(name, result, constexprs)
                else:
                    info = CompiledKernelInfo(name=name, num_warps=kwargs.get("num_warps"),
                                              num_stages=kwargs.get("num_stages"),
                                              grf_mode=kwargs.get("grf_mode"), config=constexprs)
                recorder.kernels[key] = info
            return result

        run.__wrapped__ = original  # type: ignore[attr-defined]
        return run

    def mark(self) -> int:
        """Current number of launches (use with ``since``)."""
        return len(self.launches)

    def since(self, mark: int) -> list[LaunchRecord]:
        """Launches recorded after ``mark`` (from ``mark()``)."""
        return self.launches[mark:]
