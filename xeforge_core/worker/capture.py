"""Capture every Triton kernel launch, and the compiled kernels' metadata and IR.

``LaunchRecorder.install`` wraps ``JITFunction.run`` (compiled launches on a GPU) and
``InterpretedFunction.run`` (Triton's interpreter on cpu). Each launch is recorded with its
kernel name, constexpr arguments, its integer arguments (sizes, strides) and integer
constexprs by parameter name, the thread it came from and whether it was issued on a side
stream. With ``LaunchRecorder.dry`` set, launches are recorded but not run (the verifier's size
probe: which grids, sizes and tiles a forward() would launch, at no kernel cost). On a GPU the ``CompiledKernel`` that ``run`` returns gives registers and spills per
thread, shared memory (SLM on Xe) per program, num_warps, num_stages, the GRF mode where the
backend reports one, and the IR text from ``kernel.asm`` (``ttir``, ``ttgir``, ``llir``,
``ptx``, ``spvdis``/``spv`` text; binary forms such as ``cubin`` are skipped).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.errors import XeForgeError
from xeforge_core.verdict import CompiledKernelInfo
from xeforge_core.worker.tiles import python_function

MAX_IR_CHARS = 400_000


@dataclass
class LaunchRecord:
    """One kernel launch as seen by the hook: ``grid`` is the launch grid resolved to three
    program counts (``None`` when it could not be evaluated); ``largest_arg`` the name and
    element count of its largest tensor argument; ``float32_args`` whether any tensor argument
    is float32; ``scalars`` the integer arguments that are not constexprs (sizes, strides) and
    ``constants`` the integer constexprs (tile sizes, given by keyword or position), by parameter
    name; ``choices`` the string and boolean constexprs likewise; ``tensor_bytes`` the bytes of its tensor arguments, each distinct view counted once (what
    the launch can read or write, the measure of its memory traffic)."""

    kernel: str
    constexprs: dict[str, Any] = field(default_factory=dict)
    main_thread: bool = True
    side_stream: bool = False
    grid: tuple[int, int, int] | None = None
    largest_arg: tuple[str, int] | None = None
    float32_args: bool = False
    scalars: dict[str, int] = field(default_factory=dict)
    constants: dict[str, int] = field(default_factory=dict)
    #: the string and boolean constexprs (``INPUT_PRECISION="ieee"``, ``HAS_BIAS=True``), given by
    #: keyword, by position or left at their defaults, by parameter name
    choices: dict[str, str | bool] = field(default_factory=dict)
    tensor_bytes: int = 0
    #: the launched kernel's Python function (its source and globals: a kernel nested in a class,
    #: or sharing its name with another, is read from here rather than looked up by name)
    function: Any = field(default=None, repr=False, compare=False)


#: Offsets computed in int32 wrap past this element count.
INT32_LIMIT = 2**31 - 1


class LaunchRefused(XeForgeError):
    """Raised by the launch hook instead of launching a kernel whose grid exceeds the device's
    limits (``grid_limits``); the message names the kernel, the axis and the limit."""


def bound_arguments(fn_self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The launch's arguments by the kernel's parameter names, defaults applied (launch options
    such as ``num_warps`` left out); ``None`` when they cannot be bound."""
    import inspect

    try:
        sig = inspect.signature(getattr(fn_self, "fn", None))
        known = {k: v for k, v in kwargs.items() if k in sig.parameters}
        bound = sig.bind_partial(*args, **known)
        bound.apply_defaults()
    except (TypeError, ValueError):
        return None
    return dict(bound.arguments)


def _constexpr_names(fn_self: Any) -> set[str]:
    """The kernel's constexpr parameters: ``JITFunction.params`` where compiled, the
    ``tl.constexpr`` annotations in Triton's interpreter."""
    params = getattr(fn_self, "params", None)
    if params:
        return {p.name for p in params if getattr(p, "is_constexpr", False)}
    import inspect

    try:
        sig = inspect.signature(getattr(fn_self, "fn", None))
    except (TypeError, ValueError):
        return set()
    return {n for n, p in sig.parameters.items() if "constexpr" in str(p.annotation)}


def launch_arguments(fn_self: Any, bound: dict[str, Any] | None
                     ) -> tuple[dict[str, int], dict[str, int], dict[str, str | bool]]:
    """``(scalars, constants, choices)`` of a launch, by parameter name (``bound``: its arguments,
    defaults applied): the integer arguments that are not constexprs, the integer constexprs, and
    the string and boolean constexprs, the values that choose a kernel's code path (a ``tl.dot``'s
    precision). Booleans count as choices, not integers."""
    if not bound:
        return {}, {}, {}
    constexprs = _constexpr_names(fn_self)
    scalars: dict[str, int] = {}
    constants: dict[str, int] = {}
    choices: dict[str, str | bool] = {}
    for name, value in bound.items():
        if isinstance(value, (str, bool)):
            if name in constexprs:
                choices[name] = value
        elif isinstance(value, int):
            (constants if name in constexprs else scalars)[name] = int(value)
    return scalars, constants, choices


def resolve_grid(fn_self: Any, args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any,
                 bound: dict[str, Any] | None = None) -> tuple[int, int, int] | None:
    """The launch grid as three program counts: a tuple as given, or a callable evaluated on the
    bound arguments (as Triton's ``JITFunction.run`` does: ``grid(bound_args)``; ``bound``: those
    arguments when already bound). ``None`` when it cannot be evaluated here."""
    try:
        if callable(grid):
            if bound is None:
                bound = bound_arguments(fn_self, args, kwargs)
            if bound is None:
                return None
            grid = grid(dict(bound))
        items = [int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,))]
    except Exception:  # noqa: BLE001 - a grid the hook cannot evaluate is launched unchanged
        return None
    items = (items + [1, 1, 1])[:3]
    return items[0], items[1], items[2]


def _arg_facts(fn_self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[tuple[str, int] | None, bool, int]:
    """(name and element count of the largest tensor argument, whether any is float32, the bytes
    of the tensor arguments with each distinct view, by address and size, counted once)."""
    names = list(getattr(fn_self, "arg_names", []) or [])
    largest: tuple[str, int] | None = None
    f32 = False
    views: set[tuple[int, int]] = set()
    pairs = list(zip(names, args)) if names else [(str(i), a) for i, a in enumerate(args)]
    for name, value in pairs + list(kwargs.items()):
        numel = getattr(value, "numel", None)
        if numel is None or not hasattr(value, "data_ptr"):
            continue
        try:
            n = int(numel())
            views.add((int(value.data_ptr()), n * int(value.element_size())))
        except Exception:  # noqa: BLE001
            continue
        if largest is None or n > largest[1]:
            largest = (str(name), n)
        if str(getattr(value, "dtype", "")) == "torch.float32":
            f32 = True
    return largest, f32, sum(size for _, size in views)


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
    whether the current stream is not the default one (``DeviceOps.on_side_stream``). While
    ``dry`` is set, launches are recorded and not run."""

    def __init__(self, on_side_stream: Any = None, grid_limits: list[int] | None = None) -> None:
        self.on_side_stream = on_side_stream or (lambda: False)
        self.launches: list[LaunchRecord] = []
        self.kernels: dict[tuple, CompiledKernelInfo] = {}
        self.active = True
        self.dry = False
        self.grid_limits = list(grid_limits) if grid_limits else None
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
            # a dtype passed as a constexpr (a first version's INDEX_DTYPE) by its name: "int64"
            constexprs |= {k: str(v) for k, v in kwargs.items() if hasattr(v, "primitive_bitwidth")}
            bound = bound_arguments(fn_self, args, kwargs)
            resolved = resolve_grid(fn_self, args, kwargs, grid, bound)
            largest, f32, nbytes = _arg_facts(fn_self, args, kwargs)
            scalars, constants, choices = launch_arguments(fn_self, bound)
            rec = LaunchRecord(kernel=name, constexprs=constexprs,
                               main_thread=threading.current_thread() is threading.main_thread(),
                               side_stream=bool(recorder.on_side_stream()), grid=resolved,
                               largest_arg=largest, float32_args=f32, scalars=scalars, constants=constants,
                               choices=choices, tensor_bytes=nbytes, function=python_function(fn_self))
            recorder.launches.append(rec)
            if recorder.dry:
                return None
            if resolved is not None and recorder.grid_limits:
                for axis, (count, limit) in enumerate(zip(resolved, recorder.grid_limits)):
                    if count > limit:
                        raise LaunchRefused(
                            f"kernel {name}: launch grid axis {axis} has {count} programs, over the device's "
                            f"limit of {limit} (grid {list(resolved)}, limits {recorder.grid_limits}); "
                            "fold the excess into another axis or loop inside the program")
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
