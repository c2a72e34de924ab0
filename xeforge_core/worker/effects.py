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

from collections.abc import Callable
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


def changed_inputs(before: list[str | None], args: list[Any]) -> tuple[int, ...]:
    """Positions of the arguments whose fingerprint differs from ``before`` (:func:`digests`)."""
    return tuple(i for i, (d, a) in enumerate(zip(before, args))
                 if d is not None and isinstance(a, torch.Tensor) and tensor_fingerprint(a) != d)


def observe(before: list[str | None], args: list[Any], buffers_before: dict[str, str],
            model: torch.nn.Module, rerun: Callable[[Callable[[torch.nn.Module], None]], torch.nn.Module] | None = None
            ) -> Effects:
    """The effects of one call, from the digests taken before it (:func:`digests`,
    :func:`buffer_digests`) and the arguments and model after it.

    A changed buffer counts only where it is state (:func:`carried`, with ``rerun``: a fresh
    model called on fresh inputs after a function changed its buffers, returned after the call)
    and where something reads it: ``num_batches_tracked`` of a module whose ``momentum`` is set
    is read by nothing (PyTorch's ``_BatchNorm.forward`` uses it only when ``momentum`` is
    ``None``: torch/nn/modules/batchnorm.py)."""
    inputs = changed_inputs(before, args)
    after = buffer_digests(model)
    changed = [name for name, d in buffers_before.items() if name in after and after[name] != d
               and not _unread_counter(model, name)]
    if changed and rerun is not None:
        changed = carried(changed, after, rerun)
    return make(inputs, tuple(changed))


def _unread_counter(model: torch.nn.Module, name: str) -> bool:
    """Whether buffer ``name`` is a BatchNorm ``num_batches_tracked`` that nothing reads."""
    owner, _, last = name.rpartition(".")
    if last != "num_batches_tracked":
        return False
    try:
        module = model.get_submodule(owner) if owner else model
    except AttributeError:
        return False
    return getattr(module, "momentum", None) is not None


def carried(names: list[str], after: dict[str, str],
            rerun: Callable[[Callable[[torch.nn.Module], None]], torch.nn.Module]) -> list[str]:
    """Of the buffers ``names`` a call changed (``after``: their digests after it), those whose
    value after the call depends on the state before it: the call is made again on a fresh
    model whose changed buffers were moved first (floating point: plus one; integer: plus one;
    bool: negated), and a buffer whose value after it is the same is a workspace the call
    overwrites, not state a candidate has to keep."""

    def move(model: torch.nn.Module) -> None:
        own = dict(model.named_buffers())
        with torch.no_grad():
            for n in names:
                b = own.get(n)
                if b is None:
                    continue
                if b.dtype == torch.bool:
                    b.logical_not_()
                else:
                    b.add_(1)

    try:
        moved = buffer_digests(rerun(move))
    except Exception:  # noqa: BLE001 - it cannot run from other values (an index buffer): all are state
        return list(names)
    return [n for n in names if moved.get(n) != after.get(n)]


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
