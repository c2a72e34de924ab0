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

The launch's storages are merged where they overlap (a tensor whose storage lies inside
another's, as ``torch.from_numpy`` of a view gives): in bounds is inside one merged span. A kernel
that makes pointers from integers (``tl.pointer_type``, ``x.to(ptr.dtype)``: a table of addresses)
reaches tensors no launch passes: from that cast on, the launch is not bounds-checked
(``unchecked``), as the interpreter's cast to a pointer shows while it runs.

Races between the programs of one launch: the interpreter runs them one after another, in
order, so a kernel whose programs add into one output with a plain load and store is right there
every time and racy on a GPU. The check notes, per element of each span, which program stored it
last and whether two programs stored it; a load of an element another program stored, or one
two programs stored (a workspace every program shares), is a race, unless the kernel hands data
over through atomics (:func:`synchronises`: a compare-and-swap, an exchange, or an atomic whose
returned value it uses, as a last-program reduction's counter) and an atomic ran in the launch.
A store is a race too where it changes an element another program of the launch stored (two
programs storing different values: which is left depends on their order on a GPU) or loaded
(a write after another program's read: on a GPU the load may see the new value), compared with
the memory there as the store runs, so programs storing the same value are not held against the
kernel. Loads are followed in spans the launch has stored into before them (a span a program
reads before any program stored there is not).

It cannot see an access that lands inside another argument's storage, or faults of the GPU
compiler. Worker-side: torch, numpy, triton and the standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Distinct places recorded at most (further ones are counted, not kept).
MAX_PLACES = 200

#: Elements a launch's race tracking follows at most (two int32 and two bool each; storages past
#: it are not followed).
MAX_TRACKED_STORES = 1 << 24

#: The step of a candidate's verdict that carries what the every-call check found: its evidence
#: has ``checker``, ``accesses``, ``lanes``, ``races``, ``race_lanes`` and ``unchecked``.
BOUNDS_STEP = "bounds"


def synchronises(fn: Any) -> bool:
    """Whether the kernel ``fn`` (its Python function) hands data between its programs through
    atomics: a compare-and-swap or an exchange (a lock, a flag), or an atomic whose returned old
    value it uses (a counter that picks the last program to arrive, which then reads the others'
    stores). An atomic whose result is dropped (``tl.atomic_add(out, part)``) only accumulates:
    it orders nothing, so a plain load and store beside it still race. Read from the source;
    False where it cannot be read."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(fn, "fn", fn))))
    except (OSError, TypeError, SyntaxError):
        return False
    dropped = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("atomic_cas", "atomic_xchg") or (name.startswith("atomic_") and id(node) not in dropped):
                return True
    return False


#: The checks active in this process, innermost last (:func:`unjudged` reaches the innermost).
_ACTIVE: list[BoundsCheck] = []


@dataclass
class _Owners:
    """The race check's record of one merged span in one launch, per element (of ``size``
    bytes): the program (1-based; 0: none) that stored it last and whether two programs stored
    it; the program that loaded it first and whether another program loaded it too."""

    owner: np.ndarray
    shared: np.ndarray
    size: int
    reader: np.ndarray
    readers: np.ndarray


def _is_pointer(dtype: Any) -> bool:
    """Whether a Triton (scalar) type is a pointer type."""
    return bool(getattr(getattr(dtype, "scalar", dtype), "is_ptr", lambda: False)())


def active() -> BoundsCheck | None:
    """The innermost check active in this process, or ``None``."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def unjudged() -> Iterator[None]:
    """Calls inside are still kept inside their tensors (an out-of-bounds lane is masked off) but
    neither recorded nor race-checked: a call at a size the baseline never ran at (the grid
    probe), where an access past a tensor may be the problem's own (a spec whose inits do not
    grow with the size) and nothing else is judged either."""
    check = active()
    if check is None:
        yield
        return
    check._end_launch()
    check._judging = False
    try:
        yield
    finally:
        check._end_launch()
        check._judging = True


class BoundsCheck:
    """Context manager: while active, every interpreter load, store and atomic is bounds-checked.
    ``skip_reads=False`` records an out-of-bounds read but still makes it (the kernel computes what
    it would have without the check; a write is always skipped, so the heap stays whole).

    ``accesses`` lists one dict per place (keys of ``xeforge_core.memcheck.InvalidAccess``);
    ``lanes`` is the number of out-of-bounds lanes seen in all.
    """

    def __init__(self, *, skip_reads: bool = True) -> None:
        self.skip_reads = skip_reads  # False: an out-of-bounds read is recorded and still made
        self.places: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.lanes = 0
        self._saved: list[tuple[Any, str, Any]] = []
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self._names: list[str] = []
        self._kernel = ""
        # the launch's storages merged where they overlap (a view's storage inside another's):
        # an address is in bounds where it lies inside one of these
        self._spans = np.zeros((0, 2), dtype=np.uint64)
        self._made_pointers = False                     # the launch made pointers from integers
        self.unchecked: dict[str, int] = {}             # kernel -> launches not bounds-checked
        # races between the programs of one launch (see ``races``): per merged span, the program
        # (1-based; 0: none) that stored each element last, and whether two programs stored it
        self._owners: dict[int, _Owners] = {}
        self._program_ids: dict[tuple[int, ...], int] = {}
        self._tracked = 0
        self._atomics = False                           # an atomic ran in the launch
        self._synchronises = False                      # the kernel hands data over through atomics
        self._pending: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._race_places: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.race_lanes = 0
        self._sync_cache: dict[Any, bool] = {}
        self._judging = True                            # False inside :func:`unjudged`
        #: the merged storage spans (byte ranges) loads and atomics reached while followed: a set
        #: that ``worker.fresh_fill`` puts here around the one call it follows, ``None`` otherwise
        self.read_spans: set[tuple[int, int]] | None = None
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
        int_to_ptr, bitcast = builder_cls.create_int_to_ptr, builder_cls.create_bitcast

        def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
            args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
            named = list(zip(self.arg_names, args_hst)) + list(kwargs_hst.items())
            check._launch(getattr(self.fn, "__name__", "?"), named, self.fn)
            return args_hst, kwargs_hst

        def to_pointer(self: Any, src: Any, dst_type: Any) -> Any:
            check._made_pointers = True  # `x.to(ptr.dtype)`, `tl.cast(x, tl.pointer_type(...))`
            return int_to_ptr(self, src, dst_type)

        def reinterpret(self: Any, src: Any, dst_type: Any) -> Any:
            # an integer reinterpreted as a pointer reaches memory no launch passes; a pointer
            # reinterpreted as another pointer type (a bool store through an int8 pointer, a float
            # atomic_max through an int32 one, as Triton lowers them) keeps its address
            if _is_pointer(getattr(dst_type, "scalar", dst_type)) and not _is_pointer(getattr(src, "dtype", None)):
                check._made_pointers = True
            return bitcast(self, src, dst_type)

        def load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any, **kw: Any) -> Any:
            narrowed, lanes = check._lanes(ptrs, mask, "read")
            check._race_read(*lanes[:3])
            return masked_load(self, ptrs, narrowed, other, *rest, **kw)

        def store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            narrowed, lanes = check._lanes(ptrs, mask, "write")
            flat, spans, size, picked = lanes
            try:
                stored = np.broadcast_to(np.asarray(value.data), np.shape(ptrs.data)).reshape(-1)[picked]
            except (ValueError, IndexError):  # a value laid out otherwise: stores not compared
                stored = None
            check._race_write(flat, spans, size, stored)
            return masked_store(self, ptrs, value, narrowed, *rest, **kw)

        def rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            check._atomics = True
            return atomic_rmw(self, op, ptr, val, check._mask(ptr, mask, "atomic"), *rest, **kw)

        def cas(self: Any, ptr: Any, cmp: Any, val: Any, *rest: Any, **kw: Any) -> Any:
            check._atomics = True
            check._mask(ptr, None, "atomic")  # no mask to narrow: recorded, run as written
            return atomic_cas(self, ptr, cmp, val, *rest, **kw)

        _ACTIVE.append(self)
        for owner, name, new in ((executor_cls, "_init_args_hst", init_args_hst),
                                 (builder_cls, "create_masked_load", load), (builder_cls, "create_masked_store", store),
                                 (builder_cls, "create_atomic_rmw", rmw), (builder_cls, "create_atomic_cas", cas),
                                 (builder_cls, "create_int_to_ptr", to_pointer), (builder_cls, "create_bitcast", reinterpret)):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, new)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._end_launch()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        for owner, name, old in reversed(self._saved):
            setattr(owner, name, old)
        self._saved.clear()

    # -- one launch
    def _launch(self, kernel: str, named: list[tuple[str, Any]], fn: Any = None) -> None:
        """Record the storages of the tensor arguments of a launch (sorted by address), merged
        where they overlap, and whether the kernel ``fn`` hands data between programs through
        atomics (:func:`synchronises`)."""
        self._end_launch()
        if fn is not None and fn not in self._sync_cache:
            self._sync_cache[fn] = synchronises(fn)
        self._synchronises = self._sync_cache.get(fn, False) if fn is not None else False
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
        spans: list[list[int]] = []
        for start in order:
            end = start + found[start][0]
            if spans and start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        self._spans = np.array(spans, dtype=np.uint64).reshape(-1, 2)

    def _mask(self, ptrs: Any, mask: Any, access: str) -> Any:
        """``mask`` (a TensorHandle, or ``None``: every lane) with the out-of-bounds lanes of
        ``ptrs`` cleared; each such lane is recorded."""
        return self._lanes(ptrs, mask, access)[0]

    def _lanes(self, ptrs: Any, mask: Any, access: str) -> tuple[Any, tuple[np.ndarray, np.ndarray, int, np.ndarray]]:
        """The mask to access with (:meth:`_mask`'s), and the lanes it lets through as the race
        check reads them: their addresses, the merged span each lies in (-1: none), the access
        size in bytes and which of the access's flattened lanes they are. The addresses are
        converted and placed in spans once per access."""
        addr = np.asarray(ptrs.data).astype(np.uint64)
        lanes = np.ones(addr.shape, dtype=bool) if mask is None else np.broadcast_to(np.asarray(mask.data, dtype=bool),
                                                                                    addr.shape)
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        flat, live = addr.reshape(-1), lanes.reshape(-1)
        spans = self._span_of(flat, size)
        inside = spans >= 0
        if access != "write" and self.read_spans is not None:
            self._note_reads(spans[live & inside])
        bad = live & ~inside
        # pointers from integers reach tensors no launch passes: not judged, not narrowed
        if self._made_pointers or not bad.any():
            return mask, (flat[live], spans[live], size, live)
        self._record(access, size, flat[np.argmax(bad)], int(bad.sum()))
        if mask is None or (access == "read" and not self.skip_reads):
            return mask, (flat[live], spans[live], size, live)
        from triton.runtime.interpreter import TensorHandle

        kept = live & inside
        return TensorHandle(kept.reshape(addr.shape), mask.dtype), (flat[kept], spans[kept], size, kept)

    def _note_reads(self, spans: np.ndarray) -> None:
        """Add the merged spans (indices ``spans``) a load or an atomic reached to ``read_spans``."""
        if not spans.size or self.read_spans is None:
            return
        lo, hi = int(spans.min()), int(spans.max())
        for j in ([lo] if lo == hi else np.unique(spans).tolist()):
            self.read_spans.add((int(self._spans[j, 0]), int(self._spans[j, 1])))

    def _span_of(self, flat: np.ndarray, size: int) -> np.ndarray:
        """For each address of ``flat`` (accesses of ``size`` bytes), the merged span it lies in
        whole, or -1."""
        if not self._spans.size:
            return np.full(flat.shape, -1, dtype=np.int64)
        idx = np.searchsorted(self._spans[:, 0], flat, side="right").astype(np.int64) - 1
        ends = self._spans[np.clip(idx, 0, None), 1]
        return np.where((idx >= 0) & (flat + np.uint64(size) <= ends), idx, -1)

    # -- races between the programs of one launch
    def _end_launch(self) -> None:
        """Keep the launch's cross-program reads as races unless the kernel hands data between
        programs through atomics (a last-program reduction, a lock) and an atomic ran; note a
        launch that made pointers from integers as not bounds-checked."""
        if self._made_pointers and self._judging:
            self.unchecked[self._kernel] = self.unchecked.get(self._kernel, 0) + 1
        if not (self._atomics and self._synchronises):
            # a kernel whose loads race says so; its stores' races are the same fault seen later
            loads = {key[1] for key in self._pending if key[0] == "read_after_write"}
            for key, race in self._pending.items():
                if key[0] != "read_after_write" and key[1] in loads:
                    continue
                self.race_lanes += race["count"]
                if key in self._race_places:
                    self._race_places[key]["count"] += race["count"]
                elif len(self._race_places) < MAX_PLACES:
                    self._race_places[key] = race
        self._pending.clear()
        self._owners.clear()
        self._program_ids.clear()
        self._tracked = 0
        self._atomics = self._made_pointers = False

    def _program(self) -> int:
        """The running program, numbered from 1 in the order the interpreter runs them."""
        from triton.runtime.interpreter import interpreter_builder

        grid = tuple(int(g) for g in getattr(interpreter_builder, "grid_idx", ()) or ())
        return self._program_ids.setdefault(grid, len(self._program_ids) + 1)

    def _elements(self, flat: np.ndarray, spans: np.ndarray, size: int,
                  create: bool) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``(span, element indices, lane positions)`` of the addresses ``flat`` (in the merged
        ``spans``), per span, with the span's owner arrays made on first use where ``create``
        (elements of the first access size seen there)."""
        out = []
        for j in np.unique(spans[spans >= 0]).tolist():
            if j not in self._owners:
                start, end = int(self._spans[j, 0]), int(self._spans[j, 1])
                n = (end - start) // size + 1
                if not create or self._tracked + n > MAX_TRACKED_STORES:
                    continue
                self._tracked += n
                self._owners[j] = _Owners(np.zeros(n, dtype=np.int32), np.zeros(n, dtype=bool), size,
                                          np.zeros(n, dtype=np.int32), np.zeros(n, dtype=bool))
            lanes = np.nonzero(spans == j)[0]
            elem = self._owners[j].size
            out.append((j, ((flat[lanes] - self._spans[j, 0]) // np.uint64(elem)).astype(np.int64), lanes))
        return out

    def _race_write(self, flat: np.ndarray, spans: np.ndarray, size: int, values: np.ndarray | None) -> None:
        """Note which program stored each element (the stored lanes' addresses ``flat``, their
        ``spans`` and the ``values`` stored there) and which elements two programs stored (the
        interpreter runs programs one after another). A store that changes an element another
        program stored (two programs storing different values: the last one wins on a GPU, in
        any order) or loaded before (it could have read the new value on a GPU) is a race;
        ``values`` ``None``: what is stored is not compared, and no such race is counted."""
        if not self._judging or not flat.size:
            return
        me = self._program()
        for j, elems, lanes in self._elements(flat, spans, size, create=True):
            track = self._owners[j]
            prev, reader = track.owner[elems], track.reader[elems]
            other_writer = (prev != 0) & (prev != me)
            other_reader = (reader != 0) & ((reader != me) | track.readers[elems])
            suspect = np.nonzero(other_writer | other_reader)[0]
            if suspect.size and values is not None:
                changed = self._changes(j, flat[lanes[suspect]], values[lanes[suspect]], size)
                for kind, hit in (("write_write", other_writer[suspect] & changed),
                                  ("write_after_read", other_reader[suspect] & ~other_writer[suspect] & changed)):
                    if hit.any():
                        k = int(suspect[np.argmax(hit)])
                        other = int(prev[k]) if kind == "write_write" else int(reader[k])
                        self._pend(kind, int(hit.sum()), int(flat[lanes[k]]), reader=other, writer=me)
            track.shared[elems] |= other_writer
            track.owner[elems] = me

    def _changes(self, j: int, addresses: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
        """Whether storing ``values`` at ``addresses`` (in merged span ``j``) changes what is there
        now (floats compared as numbers, NaN equal to NaN; other types bit for bit). Where the
        values' width is not the access size, nothing is counted as changed."""
        values = np.ascontiguousarray(values)
        if values.dtype.itemsize != size:
            return np.zeros(addresses.shape, dtype=bool)
        start, end = int(self._spans[j, 0]), int(self._spans[j, 1])
        memory = np.ctypeslib.as_array((ctypes.c_uint8 * (end - start)).from_address(start))
        offsets = (addresses - np.uint64(start)).astype(np.int64)
        now = np.ascontiguousarray(memory[offsets[:, None] + np.arange(size)]).view(values.dtype).reshape(-1)
        if values.dtype.kind == "f":
            return ~((now == values) | (np.isnan(now) & np.isnan(values)))
        return now != values

    def _race_read(self, flat: np.ndarray, spans: np.ndarray, size: int) -> None:
        """A load (the read lanes' addresses ``flat``, their ``spans``) of an element another
        program of the same launch stored, or one two programs stored (a workspace every program
        shares): on a GPU the programs run concurrently, so what is read depends on their order.
        Which program loaded each element is noted for :meth:`_race_write`."""
        if not self._owners or not flat.size:
            return
        me = self._program()
        crossed, first, writer = 0, None, 0
        for j, elems, lanes in self._elements(flat, spans, size, create=False):
            track = self._owners[j]
            o = track.owner[elems]
            hit = (o != 0) & ((o != me) | track.shared[elems])
            if hit.any():
                crossed += int(hit.sum())
                if first is None:
                    k = int(np.argmax(hit))
                    first, writer = int(flat[lanes[k]]), int(o[k])
            r = track.reader[elems]
            track.readers[elems] |= (r != 0) & (r != me)
            track.reader[elems] = np.where(r == 0, me, r)
        if crossed:
            self._pend("read_after_write", crossed, first, reader=me, writer=writer)

    def _pend(self, kind: str, count: int, address: int | None, *, reader: int, writer: int) -> None:
        """Count ``count`` racing lanes of ``kind`` (``read_after_write``, ``write_after_read``,
        ``write_write``) at the kernel's current source line; kept at the launch's end unless the
        kernel hands data over through atomics (:meth:`_end_launch`)."""
        file, line = self._source_line()
        key = (kind, self._kernel, file, line)
        if key in self._pending:
            self._pending[key]["count"] += count
            return
        names = {v: k for k, v in self._program_ids.items()}
        near = self._nearest(address) if address is not None else None
        self._pending[key] = {"kind": kind, "kernel": self._kernel, "file": file, "line": line, "count": count,
                              "reader": ",".join(map(str, names.get(reader, ()))),
                              "writer": ",".join(map(str, names.get(writer, ()))),
                              "shared": kind == "read_after_write" and writer == reader,
                              "argument": self._names[near[1]] if near is not None else ""}

    def _record(self, access: str, size: int, address: np.uint64, count: int) -> None:
        if not self._judging:
            return
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
