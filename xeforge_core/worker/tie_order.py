"""Which torch calls leave the order among equal values undefined, seen while a truth runs.

The ``ties`` redraw (``worker.inputs``) judges what a kernel keeps among equal values, which is
a contract only where torch documents it: ``argmax``/``argmin`` keep the first of equal maxima
(minima), ``sort``/``argsort`` with ``stable=True`` keep the input order. Elsewhere torch leaves
it open, so a correct kernel may keep another equal value's index and still be right:
``topk``, ``sort``/``argsort``/``msort`` without ``stable=True``, ``median``, ``nanmedian``,
``mode``, ``kthvalue``, ``cummax``, ``cummin``, ``max``/``min`` over a dimension (their
``indices``: "not necessarily the first occurrence", torch's documentation of ``torch.max``),
and the max poolings that return indices. ``watch()`` records such calls while the truth runs on
ties inputs (a ``TorchFunctionMode``, which sees functions, tensor methods and the
``torch.nn.functional`` calls alike); the baseline job then leaves the redraw out there and says
which call made it undecidable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from torch.overrides import TorchFunctionMode

#: Calls whose result depends on the order among equal values, whatever their arguments.
UNDEFINED = frozenset({
    "topk", "median", "nanmedian", "mode", "kthvalue", "cummax", "cummin",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
    "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices",
})
#: Calls undefined on ties unless asked to be stable.
UNSTABLE = frozenset({"sort", "argsort", "msort"})
#: Calls whose indices are undefined on ties only when they reduce over a dimension.
OVER_A_DIMENSION = frozenset({"max", "min"})


def undefined_on_ties(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call of the torch function or tensor method ``name`` with ``args`` (the tensor
    first, for a method as for a function) and ``kwargs`` leaves the order among equal values
    undefined (see the module docstring)."""
    if name in UNDEFINED:
        return True
    if name in UNSTABLE:
        return not kwargs.get("stable", False)
    if name in OVER_A_DIMENSION:
        return "dim" in kwargs or (len(args) >= 2 and isinstance(args[1], int) and not isinstance(args[1], bool))
    return False


class _Watch(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if undefined_on_ties(name, tuple(args), kwargs) and name not in self.seen:
            self.seen.append(name)
        return func(*args, **kwargs)


@contextlib.contextmanager
def watch(active: bool = True) -> Iterator[list[str]]:
    """Record, while the block runs, the torch calls that leave the order among equal values
    undefined (names, first seen first); with ``active`` false, record nothing (a plain block)."""
    if not active:
        yield []
        return
    mode = _Watch()
    with mode:
        yield mode.seen
