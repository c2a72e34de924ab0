"""What the truth changes besides what it returns: inputs it modifies in place and module buffers
it updates during ``forward`` (a training-mode ``BatchNorm``'s ``running_mean``/``running_var``,
a step counter, an accumulator passed in). Those changes are part of the problem's result: a
candidate that returns the right tensor but leaves ``acc`` unchanged where the reference does
``acc.add_(x)``, or never updates the running statistics, differs from it on the next call.

The baseline job finds the truth's effects on its first call (:func:`observe`) and saves, per
run, the affected tensors after the call (:func:`effect_tensors`); the candidate job takes the
same tensors after its own call and compares them as outputs. Buffers are matched by their
``state_dict`` name, else by a unique buffer whose name ends the same way (``bn.running_mean``
and ``batch_norm.running_mean``, or the name under an adapter's prefix) with the same shape
(:func:`find_buffer`); a candidate holding none is reported, not judged.

Where the truth updates a buffer, both jobs build a fresh model for every run, so each compared
buffer is one call away from the same initial state whatever the number of calls before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from xeforge_core.worker.expected import tensor_fingerprint


@dataclass(frozen=True)
class Effects:
    """The truth's effects beyond its outputs.

    ``inputs``: positions of the ``forward()`` arguments it modifies in place; ``buffers``:
    ``state_dict`` names of the module buffers whose values change during one call."""

    inputs: tuple[int, ...] = ()
    buffers: tuple[str, ...] = ()
    #: labels of the compared tensors, in order (inputs, then buffers)
    labels: tuple[str, ...] = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.inputs or self.buffers)

    def to_json(self) -> dict[str, Any]:
        """The form kept in the baseline's ``meta.json``."""
        return {"inputs": list(self.inputs), "buffers": list(self.buffers)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Effects:
        """Inverse of :meth:`to_json` (an empty :class:`Effects` for ``None``)."""
        data = data or {}
        return make(tuple(int(i) for i in data.get("inputs") or ()), tuple(str(b) for b in data.get("buffers") or ()))


def make(inputs: tuple[int, ...], buffers: tuple[str, ...]) -> Effects:
    """An :class:`Effects` with its labels filled in."""
    labels = tuple(f"input {i} after the call" for i in inputs) + tuple(f"buffer {b} after the call" for b in buffers)
    return Effects(inputs, buffers, labels)


def digests(args: list[Any]) -> list[str | None]:
    """Per ``forward()`` argument, a fingerprint of its values (``None`` for a non-tensor)."""
    return [tensor_fingerprint(a) if isinstance(a, torch.Tensor) else None for a in args]


def buffer_digests(model: torch.nn.Module) -> dict[str, str]:
    """``{state_dict name: digest}`` of the model's buffers that hold a value."""
    return {name: tensor_fingerprint(b) for name, b in model.named_buffers() if isinstance(b, torch.Tensor)}


def observe(before: list[str | None], args: list[Any], buffers_before: dict[str, str],
            model: torch.nn.Module) -> Effects:
    """The effects of one call, from the digests taken before it (:func:`digests`,
    :func:`buffer_digests`) and the arguments and model after it."""
    inputs = tuple(i for i, (d, a) in enumerate(zip(before, args))
                   if d is not None and isinstance(a, torch.Tensor) and tensor_fingerprint(a) != d)
    after = buffer_digests(model)
    buffers = tuple(name for name, d in buffers_before.items() if name in after and after[name] != d)
    return make(inputs, buffers)


def find_buffer(model: torch.nn.Module, name: str, like: tuple[int, ...] | None = None) -> torch.Tensor | None:
    """The buffer of ``model`` that stands for the truth's buffer ``name``: the same
    ``state_dict`` name, else the only buffer whose name ends in ``.<name>`` (an adapter's
    prefix), else the only one with the same last component (``running_mean``) and, when given,
    shape ``like``; ``None`` when there is none or several."""
    buffers = dict(model.named_buffers())
    if name in buffers:
        return buffers[name]
    suffixed = [b for n, b in buffers.items() if n.endswith("." + name)]
    if len(suffixed) == 1:
        return suffixed[0]
    last = name.rsplit(".", 1)[-1]
    same = [b for n, b in buffers.items() if n.rsplit(".", 1)[-1] == last
            and (like is None or tuple(b.shape) == tuple(like))]
    return same[0] if len(same) == 1 else None


def effect_tensors(effects: Effects, model: torch.nn.Module, args: list[Any],
                   shapes: list[tuple[int, ...] | None] | None = None) -> list[torch.Tensor | None]:
    """The tensors :data:`effects` names, after a call of ``model`` on ``args``: the modified
    inputs, then copies of the buffers (``None`` where ``model`` holds no matching buffer;
    ``shapes``: the truth's shapes of the buffers, to match by)."""
    shapes = shapes or [None] * len(effects.buffers)
    out: list[torch.Tensor | None] = [args[i] if i < len(args) else None for i in effects.inputs]
    for name, like in zip(effects.buffers, shapes):
        b = find_buffer(model, name, like)
        out.append(b.detach().clone() if b is not None else None)  # a later call updates it in place
    return out
