"""A second fill of fresh memory: outputs that are right only because the poison was right.

The candidate job poisons fresh memory (``WorkerContext.enable_poison``): ``torch.empty`` and its
kin return NaN for floating dtypes, the integer maximum for integers and ``True`` for bool, so an
element a kernel never writes, or computes from memory nothing wrote, shows up where the truth
has a value. That poison is blind in two places:

* where the truth's value *is* the poison: a saturating int8 quantiser writes 127 wherever a
  row's largest value lands, so a kernel that skips those stores leaves 127 there and matches;
  a mask kernel that skips its ``True`` elements matches the same way;
* where the poison is what the kernel needed from memory it never initialised: the integer
  maximum is the identity of a minimum (``tl.atomic_min`` into a ``torch.empty`` buffer),
  ``True`` of an and, and a float comparison with NaN is false, so
  ``tl.where(old > new, old, new)`` keeps ``new`` over a NaN ``old``; on a GPU ``tl.maximum``
  and ``tl.minimum`` ignore a NaN operand too (their default ``propagate_nan=NONE`` lowers to
  PTX ``max.f32``, which returns the other operand).

A second call on the same inputs with every fresh allocation filled with other values exposes
both: integers at their minimum, booleans ``False``, floats alternately at the dtype's largest
and most negative finite value (one element each way, so a maximum and a minimum each meet
their non-identity). A correct kernel's outputs do not depend on the fill; an output that
changes with it read memory nothing wrote.

The call is made where it can matter: where an integer or boolean output's truth holds the
poison, or, in Triton's interpreter, where a kernel loaded from (or ran an atomic on) an
allocation made during the call (the every-call bounds check sees each load's addresses,
``worker.bounds``); on a GPU, where the call allocated anything uninitialised (one more call
costs little there). Worker-side: torch and the standard library only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: The allocations that hand out memory without writing it (torch's own "uninitialized" list).
UNINITIALISED_FACTORIES = frozenset({torch.empty, torch.empty_like, torch.empty_strided,
                                     torch.Tensor.new_empty, torch.Tensor.new_empty_strided})

#: How the second fill is described in a verdict.
SECOND_FILL = ("fresh memory filled again with other values (integers at their minimum, booleans False, floats "
               "alternately at the dtype's largest and most negative finite value)")

#: How the first fill (the poison) is described.
FIRST_FILL = "NaN, the integer maximum, True"


@dataclass
class Allocation:
    """One uninitialised allocation made during a call: its storage's byte range and dtype."""

    start: int
    end: int
    dtype: torch.dtype


class FreshMemory(TorchFunctionMode):
    """Torch function mode: records every uninitialised allocation (``UNINITIALISED_FACTORIES``)
    made while it is active in ``allocations``, and with ``refill`` writes the second fill into
    each (:func:`second_fill`). Empty tensors (the interpreter's own ``new_empty(0)``) are
    ignored."""

    def __init__(self, *, refill: bool = False) -> None:
        super().__init__()
        self.refill = refill
        self.allocations: list[Allocation] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in UNINITIALISED_FACTORIES and isinstance(out, torch.Tensor) and out.numel():
            storage = out.untyped_storage()
            start = int(storage.data_ptr())
            self.allocations.append(Allocation(start, start + int(storage.nbytes()), out.dtype))
            if self.refill:
                second_fill(out)
        return out


def second_fill(t: torch.Tensor) -> None:
    """Fill the whole storage of ``t`` with the second fill: integers at ``iinfo.min``, booleans
    ``False``, floating and complex elements alternately at ``+finfo.max`` and ``-finfo.max``. A
    dtype torch cannot fill is left as allocated (poisoned)."""
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    try:
        flat.set_(t.untyped_storage(), 0, (t.untyped_storage().nbytes() // t.element_size(),))
        if t.dtype == torch.bool:
            flat.fill_(False)
        elif t.dtype.is_floating_point or t.dtype.is_complex:
            big = torch.finfo(t.dtype).max
            flat[0::2] = big
            flat[1::2] = -big
        else:
            flat.fill_(torch.iinfo(t.dtype).min)
    except (RuntimeError, TypeError):
        pass


def _poison_of(dtype: torch.dtype) -> Any:
    """The value the first fill leaves in fresh memory of an integer or boolean ``dtype``."""
    return True if dtype == torch.bool else torch.iinfo(dtype).max


def truth_holds_poison(truth: list[Any]) -> str | None:
    """Which integer or boolean output of the truth holds the first fill's value (the integer
    maximum, ``True``), described for a verdict, or ``None``. ``truth``: tensors, or saved
    tensors read in chunks (``worker.expected.StoredTensor``)."""
    for i, t in enumerate(truth):
        dtype = getattr(t, "dtype", None)
        if not isinstance(dtype, torch.dtype) or dtype.is_floating_point or dtype.is_complex:
            continue
        poison = _poison_of(dtype)
        parts = [t] if isinstance(t, torch.Tensor) else t.chunks(1 << 24)
        if any(bool((part == poison).any()) for part in parts):
            return f"output {i}'s expected values include {poison}, the value fresh {dtype} memory is poisoned with"
    return None


def reads_fresh(allocations: list[Allocation], read_spans: set[tuple[int, int]]) -> bool:
    """Whether any byte range of ``read_spans`` (storages kernels loaded from or ran atomics on)
    overlaps an allocation of ``allocations``."""
    return any(a.start < end and start < a.end for a in allocations for start, end in read_spans)


@dataclass
class FirstCall:
    """What the first correctness call showed about fresh memory: its uninitialised allocations
    and, in the interpreter, the storages its kernels read (``None`` where not followed)."""

    allocations: list[Allocation] = field(default_factory=list)
    read_spans: set[tuple[int, int]] | None = None

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Record the allocations (and, under the interpreter's bounds check, the reads) of the
        call made inside."""
        from xeforge_core.worker.bounds import active

        check = active()
        reads: set[tuple[int, int]] = set()
        if check is not None:
            check.read_spans = reads  # followed for this call only: loads elsewhere pay nothing
        mode = FreshMemory()
        try:
            with mode:
                yield
        finally:
            if check is not None:
                check.read_spans = None
        self.allocations = mode.allocations
        self.read_spans = reads if check is not None else None

    def why_refill(self, truth: list[Any]) -> str | None:
        """Why a second call with the second fill is owed (``None``: it cannot change a verdict).
        ``truth``: the first call's expected outputs."""
        held = truth_holds_poison(truth)
        if held:
            return held
        if not self.allocations:
            return None
        if self.read_spans is None:
            return "the call allocated memory it did not initialise"
        if reads_fresh(self.allocations, self.read_spans):
            return "a kernel read memory allocated uninitialised during the call"
        return None
