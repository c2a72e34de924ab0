"""The interpreter's bounds check: every memory access of a kernel run in Triton's CPU
interpreter, checked against the tensors passed to its launch.

In the interpreter (``TRITON_INTERPRET=1``, triton 3.6's ``triton/runtime/interpreter.py``) a
launch passes each tensor argument as the host address of its storage, pointer arithmetic is
numpy arithmetic on those addresses, and ``tl.load``/``tl.store``/atomics (block pointers and
tensor descriptors included: they end in the same builder calls) read and write host memory at
every lane their mask lets through. So a lane is in bounds exactly when ``[address, address +
size)`` lies inside the storage of one tensor argument of the launch (a view's whole storage: the
allocation, as compute-sanitizer's memcheck judges it). ``BoundsCheck`` patches those builder
calls for the duration of a ``with`` block: a lane outside every argument's storage is recorded
(kernel, source line, access, size, distance to the nearest storage, program id) and masked off,
so the interpreter neither reads nor corrupts the host heap. Accesses at the same place are
counted together.

It cannot see an access that lands inside another argument's storage, races (the interpreter
runs a launch's programs one after another), or faults of the GPU compiler. Worker-side: torch,
numpy, triton and the standard library only.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

#: Distinct places recorded at most (further ones are counted, not kept).
MAX_PLACES = 200

#: The step of a candidate's verdict that carries what the default bounds check found
#: (:func:`unchecked_because`): its evidence has ``checker``, ``accesses`` and ``lanes``.
BOUNDS_STEP = "bounds"


def unchecked_because(source: str) -> str:
    """Why a candidate's every call in the interpreter cannot be bounds-checked (``""``: it can).

    The check's premise is that every pointer a kernel dereferences derives from a tensor its
    launch passes. A kernel that makes pointers from integers (``tl.pointer_type``: a table of
    addresses, as grouped GEMMs and mixture-of-experts kernels keep) reaches tensors no launch
    passes, which the check would call out of bounds and mask off: a correct kernel made wrong.
    Such a source is run unchecked (``--memcheck`` still checks one call, and says what it found)."""
    if "pointer_type" in source:
        return "a kernel makes pointers from integers (tl.pointer_type), which no launch's tensors account for"
    return ""


class BoundsCheck:
    """Context manager: while active, every interpreter load, store and atomic is bounds-checked.

    ``accesses`` lists one dict per place (keys of ``xeforge_core.memcheck.InvalidAccess``);
    ``lanes`` is the number of out-of-bounds lanes seen in all.
    """

    def __init__(self) -> None:
        self.places: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.lanes = 0
        self._saved: list[tuple[Any, str, Any]] = []
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._names: list[str] = []
        self._kernel = ""
        import triton

        self._triton_dir = os.path.dirname(triton.__file__)

    @property
    def accesses(self) -> list[dict[str, Any]]:
        return list(self.places.values())

    # -- patching
    def __enter__(self) -> BoundsCheck:
        from triton.runtime import interpreter as itp

        check = self
        builder_cls, executor_cls = itp.InterpreterBuilder, itp.GridExecutor
        init_args = executor_cls._init_args_hst
        masked_load, masked_store = builder_cls.create_masked_load, builder_cls.create_masked_store
        atomic_rmw, atomic_cas = builder_cls.create_atomic_rmw, builder_cls.create_atomic_cas

        def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
            args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
            named = list(zip(self.arg_names, args_hst)) + list(kwargs_hst.items())
            check._launch(getattr(self.fn, "__name__", "?"), named)
            return args_hst, kwargs_hst

        def load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any) -> Any:
            return masked_load(self, ptrs, check._mask(ptrs, mask, "read"), other, *rest)

        def store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
            return masked_store(self, ptrs, value, check._mask(ptrs, mask, "write"), *rest)

        def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
            return atomic_rmw(self, op, ptr, val, check._mask(ptr, mask, "atomic"), *rest)

        def cas(self: Any, ptr: Any, cmp: Any, val: Any, *rest: Any) -> Any:
            check._mask(ptr, None, "atomic")  # no mask to narrow: recorded, run as written
            return atomic_cas(self, ptr, cmp, val, *rest)

        for owner, name, new in ((executor_cls, "_init_args_hst", init_args_hst),
                                 (builder_cls, "create_masked_load", load), (builder_cls, "create_masked_store", store),
                                 (builder_cls, "create_atomic_rmw", rmw), (builder_cls, "create_atomic_cas", cas)):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, new)
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, old in reversed(self._saved):
            setattr(owner, name, old)
        self._saved.clear()

    # -- one launch
    def _launch(self, kernel: str, named: list[tuple[str, Any]]) -> None:
        """Record the storages of the tensor arguments of a launch (sorted by address)."""
        found: dict[int, tuple[int, str]] = {}

        def add(name: str, value: Any) -> None:
            if isinstance(value, tuple):
                for i, v in enumerate(value):
                    add(f"{name}[{i}]", v)
                return
            base = getattr(value, "base", None)
            if not hasattr(value, "untyped_storage") and base is not None and hasattr(base, "untyped_storage"):
                value = base  # a tensor descriptor: its base tensor
            if hasattr(value, "untyped_storage"):
                storage = value.untyped_storage()
                start = int(storage.data_ptr())
                if start and start not in found:
                    found[start] = (int(storage.nbytes()), name)

        for name, value in named:
            add(name, value)
        order = sorted(found)
        self._starts = np.array(order, dtype=np.uint64)
        self._ends = np.array([s + found[s][0] for s in order], dtype=np.uint64)
        self._names = [found[s][1] for s in order]
        self._kernel = kernel

    def _mask(self, ptrs: Any, mask: Any, access: str) -> Any:
        """``mask`` (a TensorHandle, or ``None``: every lane) with the out-of-bounds lanes of
        ``ptrs`` cleared; each such lane is recorded."""
        addr = np.asarray(ptrs.data).astype(np.uint64)
        lanes = np.ones(addr.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask.data, dtype=bool),
                                                                                    addr.shape)
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        flat, live = addr.reshape(-1), lanes.reshape(-1)
        if self._starts.size:
            idx = np.searchsorted(self._starts, flat, side="right").astype(np.int64) - 1
            ends = self._ends[np.clip(idx, 0, None)]
            inside = (idx >= 0) & (flat + np.uint64(size) <= ends)
        else:
            inside = np.zeros(flat.shape, dtype=bool)
        bad = live & ~inside
        if not bad.any():
            return mask
        self._record(access, size, flat[np.argmax(bad)], int(bad.sum()))
        if mask is None:
            return mask
        from triton.runtime.interpreter import TensorHandle

        return TensorHandle((live & inside).reshape(addr.shape), mask.dtype)

    def _record(self, access: str, size: int, address: np.uint64, count: int) -> None:
        self.lanes += count
        file, line = self._source_line()
        key = (access, self._kernel, file, line, size)
        if key in self.places:
            self.places[key]["count"] += count
            return
        if len(self.places) >= MAX_PLACES:
            return
        a = int(address)
        place = {"access": access, "space": "global", "size": size, "kernel": self._kernel, "file": file,
                 "line": line, "problem": "out of bounds", "address": hex(a), "count": count}
        near = self._nearest(a)
        if near is not None:
            dist, j, side = near
            place.update(distance=dist, side=side, allocation=int(self._ends[j] - self._starts[j]),
                         argument=self._names[j])
        from triton.runtime.interpreter import interpreter_builder

        grid = getattr(interpreter_builder, "grid_idx", None)
        if grid is not None:
            place["block"] = ",".join(str(int(g)) for g in grid)
        self.places[key] = place

    def _nearest(self, a: int) -> tuple[int, int, str] | None:
        """``(bytes, storage index, "after"|"before")`` of the storage nearest to address ``a``,
        counted as compute-sanitizer does (the first byte past the end is "1 byte after")."""
        if not self._starts.size:
            return None
        i = int(np.searchsorted(self._starts, np.uint64(a), side="right")) - 1
        options = []
        if i >= 0:
            options.append((max(1, a - int(self._ends[i]) + 1), i, "after"))
        if i + 1 < self._starts.size:
            options.append((int(self._starts[i + 1]) - a, i + 1, "before"))
        return min(options)

    def _source_line(self) -> tuple[str, int | None]:
        """File and line of the innermost frame outside triton and this module: the kernel's
        statement (the interpreter runs a rewritten kernel compiled with its own file and lines)."""
        frame = sys._getframe(2)
        here = os.path.abspath(__file__)
        while frame is not None:
            path = frame.f_code.co_filename
            if not path.startswith(self._triton_dir) and os.path.abspath(path) != here \
                    and "numpy" not in path and not path.startswith("<"):
                return path, frame.f_lineno
            frame = frame.f_back
        return "", None
