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

Races between the programs of one launch: the interpreter runs them one after another, in
order, so a kernel whose programs add into one output with a plain load and store is right there
every time and racy on a GPU. The check notes which program stored each address; a load of an
address another program of the same launch stored is a race, unless the launch used atomics (a
counter or a lock by which programs hand each other data: a last-program reduction). It sees
only reads after writes in the interpreter's order (a write after another program's read, and
two programs storing different values without reading, are not followed).

It cannot see an access that lands inside another argument's storage, or faults of the GPU
compiler. Worker-side: torch, numpy, triton and the standard library only.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

#: Distinct places recorded at most (further ones are counted, not kept).
MAX_PLACES = 200

#: Stored addresses a launch's race tracking follows at most (further stores are not followed).
MAX_TRACKED_STORES = 1 << 23

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
        # races between the programs of one launch (see ``races``)
        self._owner: dict[int, tuple[int, ...]] = {}   # address -> the program that stored it last
        self._stored: set[int] = set()                 # storages (indices into _starts) stored to
        self._atomics = False                          # the launch used atomics: it synchronises
        self._pending: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._race_places: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.race_lanes = 0
        import triton

        self._triton_dir = os.path.dirname(triton.__file__)

    @property
    def accesses(self) -> list[dict[str, Any]]:
        return list(self.places.values())

    @property
    def races(self) -> list[dict[str, Any]]:
        """One dict per place where a program loaded what another program of the same launch
        stored, in a launch without atomics: ``kernel``, ``file``, ``line``, ``count`` (lanes, over
        every launch), ``reader`` and ``writer`` (the first pair's program ids), ``argument``."""
        return list(self._race_places.values())

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

        def load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any, **kw: Any) -> Any:
            narrowed = check._mask(ptrs, mask, "read")
            check._race_read(ptrs, narrowed)
            return masked_load(self, ptrs, narrowed, other, *rest, **kw)

        def store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            narrowed = check._mask(ptrs, mask, "write")
            check._race_write(ptrs, narrowed)
            return masked_store(self, ptrs, value, narrowed, *rest, **kw)

        def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            check._atomics = True
            return atomic_rmw(self, op, ptr, val, check._mask(ptr, mask, "atomic"), *rest, **kw)

        def cas(self: Any, ptr: Any, cmp: Any, val: Any, *rest: Any, **kw: Any) -> Any:
            check._atomics = True
            check._mask(ptr, None, "atomic")  # no mask to narrow: recorded, run as written
            return atomic_cas(self, ptr, cmp, val, *rest, **kw)

        for owner, name, new in ((executor_cls, "_init_args_hst", init_args_hst),
                                 (builder_cls, "create_masked_load", load), (builder_cls, "create_masked_store", store),
                                 (builder_cls, "create_atomic_rmw", rmw), (builder_cls, "create_atomic_cas", cas)):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, new)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._end_launch()
        for owner, name, old in reversed(self._saved):
            setattr(owner, name, old)
        self._saved.clear()

    # -- one launch
    def _launch(self, kernel: str, named: list[tuple[str, Any]]) -> None:
        """Record the storages of the tensor arguments of a launch (sorted by address)."""
        self._end_launch()
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

    # -- races between the programs of one launch
    def _end_launch(self) -> None:
        """Keep the launch's cross-program reads as races unless it used atomics (a counter or a
        lock by which programs hand each other data, as a last-program reduction does)."""
        if not self._atomics:
            for key, race in self._pending.items():
                self.race_lanes += race["count"]
                if key in self._race_places:
                    self._race_places[key]["count"] += race["count"]
                elif len(self._race_places) < MAX_PLACES:
                    self._race_places[key] = race
        self._pending.clear()
        self._owner.clear()
        self._stored.clear()
        self._atomics = False

    def _live(self, ptrs: Any, mask: Any) -> tuple[np.ndarray, np.ndarray]:
        """The addresses of the lanes ``mask`` lets through, and their storage indices."""
        addr = np.asarray(ptrs.data).astype(np.uint64)
        if mask is not None:
            addr = addr[np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)]
        flat = addr.reshape(-1)
        idx = np.searchsorted(self._starts, flat, side="right").astype(np.int64) - 1 if self._starts.size else \
            np.full(flat.shape, -1, dtype=np.int64)
        return flat, idx

    def _program(self) -> tuple[int, ...]:
        from triton.runtime.interpreter import interpreter_builder

        return tuple(int(g) for g in getattr(interpreter_builder, "grid_idx", ()) or ())

    def _race_write(self, ptrs: Any, mask: Any) -> None:
        """Note which program stored each address (the interpreter runs programs one after another)."""
        if len(self._owner) > MAX_TRACKED_STORES:
            return
        flat, idx = self._live(ptrs, mask)
        if not flat.size:
            return
        pid = self._program()
        self._stored.update(int(i) for i in np.unique(idx))
        self._owner.update(dict.fromkeys(flat.tolist(), pid))

    def _race_read(self, ptrs: Any, mask: Any) -> None:
        """A load of an address another program of the same launch stored: on a GPU the two
        programs run concurrently, so what is read depends on their order."""
        if not self._stored:
            return
        flat, idx = self._live(ptrs, mask)
        if not flat.size or not any(int(i) in self._stored for i in np.unique(idx)):
            return  # a tensor no program of this launch stored to (an input)
        pid = self._program()
        owners = [self._owner.get(a) for a in flat.tolist()]
        crossed = [(a, o) for a, o in zip(flat.tolist(), owners) if o is not None and o != pid]
        if not crossed:
            return
        file, line = self._source_line()
        key = (self._kernel, file, line)
        if key in self._pending:
            self._pending[key]["count"] += len(crossed)
            return
        a, writer = crossed[0]
        near = self._nearest(a)
        self._pending[key] = {"kernel": self._kernel, "file": file, "line": line, "count": len(crossed),
                              "reader": ",".join(map(str, pid)), "writer": ",".join(map(str, writer)),
                              "argument": self._names[near[1]] if near is not None else ""}

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
