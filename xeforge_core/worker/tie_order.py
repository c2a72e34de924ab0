"""Which torch calls leave the order among equal values undefined, seen while a truth runs.

The ``ties`` redraw (``worker.inputs``) judges what a kernel keeps among equal values, which is
a contract only where torch documents it: ``argmax``/``argmin`` and ``max``/``min`` over a
dimension keep the first of equal maxima (minima) ("the indices of the first maximal value are
returned", torch's documentation of ``torch.max`` and ``torch.argmax``), ``sort``/``argsort``
with ``stable=True`` keep the input order. Elsewhere torch leaves the *indices* open, so a
correct kernel may keep another equal value's index and still be right: ``topk`` ("the indices
of tied elements are not guaranteed to be stable"), ``sort`` and ``argsort`` without
``stable=True``, ``median``/``nanmedian`` over a dimension ("``indices`` does not necessarily
contain the first occurrence"), ``mode``, ``kthvalue`` ("may nondeterministically return
``indices`` for any of them"), ``cummax``, ``cummin`` and the max poolings that return indices.
Their *values* are defined on ties (the k largest, the sorted values, the median; ``mode``'s is
"a value which appears most often", and the ties redraw's values are equally frequent only by
chance), so a truth that keeps only the values is still judged on ties; ``topk(sorted=False)``
leaves even the values' order open.

``watch()`` follows the open results while the truth runs on ties inputs (a ``TorchFunctionMode``,
which sees functions, tensor methods, aten overloads and the ``torch.nn.functional`` calls alike):
a tensor computed from one is open too, and so is a tensor written through a view with one; one
read into Python (``.item()``, ``.tolist()``, its sizes), differentiated through (``backward``,
``torch.autograd.grad``: the gradient lands where the indices say, in code the watch does not
see) or reaching the truth's outputs or the tensors it modifies (``TieWatch.settle``) makes the
redraw undecidable. The baseline job then leaves the redraw out and says which call made it so.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from xeforge_core.worker.inputs import flatten_outputs

#: Calls whose ``indices`` (the second result, a ``torch.return_types`` field) are undefined on
#: ties, whatever their arguments; their values are defined.
OPEN_INDICES = frozenset({
    "topk", "median", "nanmedian", "mode", "kthvalue", "cummax", "cummin",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
    "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
})
#: Calls whose indices are undefined on ties unless asked to be stable (``argsort``'s whole
#: result is indices).
UNSTABLE = frozenset({"sort", "argsort"})
#: Calls that read what no value decides (the dtype, the device, the rank): an open tensor passed
#: to them stays harmless. Its sizes are not among them: a mask drawn from open indices
#: (``idx[idx < 5]``) has a size that depends on them.
METADATA = frozenset({"dim", "ndimension", "element_size", "get_device", "is_floating_point", "is_complex"})
#: Properties (``Tensor.<name>``, seen as ``__get__``) that no value decides.
METADATA_PROPERTIES = frozenset({
    "dtype", "device", "ndim", "layout", "requires_grad", "is_cuda", "is_cpu", "is_xpu", "is_sparse",
    "is_quantized", "is_meta", "is_leaf"})
#: Calls that differentiate: a gradient through ``topk``'s values lands where its indices say, in
#: code the watch does not see.
DIFFERENTIATE = frozenset({"backward", "grad"})


def open_results(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> list[torch.Tensor]:
    """The tensors of ``result`` (what the torch function or tensor method ``name`` returned for
    ``args``, the tensor first, and ``kwargs``) whose values torch leaves undefined when the input
    holds equal values: the indices of the calls in ``OPEN_INDICES`` and of an unstable ``sort``,
    the whole result of an unstable ``argsort`` and of ``topk(sorted=False)``; ``[]`` elsewhere."""
    if name in UNSTABLE and kwargs.get("stable", False):
        return []
    if name not in OPEN_INDICES and name not in UNSTABLE:
        return []
    whole = name == "argsort" or (name == "topk" and not kwargs.get("sorted", args[4] if len(args) > 4 else True))
    if whole:
        return _tensors(result)
    if isinstance(result, tuple) and hasattr(result, "indices"):  # a torch.return_types named tuple
        return [result.indices]
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], torch.Tensor):
        return [result[1]]  # the *_with_indices poolings: (output, indices)
    return []


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, however nested in tuples, lists and dicts."""
    return [t for t in flatten_outputs(value) if isinstance(t, torch.Tensor)]


class TieWatch(TorchFunctionMode):
    """The tensors whose values depend on the order among equal values, and the calls that made
    them so (``seen``: names, first seen first) once one is read into Python or ``settle`` finds
    one among the truth's results."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self._open: dict[int, tuple[weakref.ref[torch.Tensor], str]] = {}

    def origin(self, tensor: torch.Tensor) -> str | None:
        """The call that left ``tensor`` undefined on ties, or ``None`` where it is defined."""
        entry = self._open.get(id(tensor))
        return entry[1] if entry is not None and entry[0]() is tensor else None

    def _mark(self, tensors: Iterable[torch.Tensor], origin: str) -> None:
        for t in tensors:
            while t is not None:  # a view written in place changes the tensor it views
                self._open[id(t)] = (weakref.ref(t), origin)
                t = t._base

    def _note(self, origin: str) -> None:
        if origin not in self.seen:
            self.seen.append(origin)

    def settle(self, *results: Any) -> tuple[str, ...]:
        """Add the call behind any open tensor among ``results`` (the truth's outputs, the inputs
        and buffers it modified) to ``seen`` and return ``seen``."""
        for value in results:
            for t in _tensors(value):
                origin = self.origin(t)
                if origin is not None:
                    self._note(origin)
        return tuple(self.seen)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "").split(".")[0]  # an aten overload: "topk.default"
        origins = [o for t in _tensors((args, kwargs)) if (o := self.origin(t)) is not None] if self._open else []
        if name in DIFFERENTIATE and self._open:
            origins = origins or [next(iter(self._open.values()))[1]]
        result = func(*args, **kwargs)
        if name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", "") in METADATA_PROPERTIES:
            return result
        if origins:
            # what it returns (in-place methods and operators return the tensor they wrote), wrote
            # through ``out=`` or assigned into
            touched = _tensors(result) + _tensors(kwargs.get("out"))
            if name == "__setitem__":
                touched += _tensors(args[:1])
            if touched:
                self._mark(touched, origins[0])
            elif name not in METADATA:  # read into Python: followed no further
                self._note(origins[0])
        self._mark(open_results(name, tuple(args), kwargs, result), name)
        return result


@contextlib.contextmanager
def watch(active: bool = True) -> Iterator[TieWatch | None]:
    """Follow, while the block runs, the tensors that torch leaves undefined among equal values
    (a ``TieWatch``; call its ``settle`` with the block's results); with ``active`` false, yield
    ``None`` and follow nothing (a plain block)."""
    if not active:
        yield None
        return
    mode = TieWatch()
    with mode:
        yield mode
