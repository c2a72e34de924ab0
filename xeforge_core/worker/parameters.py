"""Trained-looking values for the parameters a constructor fills with one value.

``nn.LayerNorm``, ``nn.BatchNorm*``, ``nn.GroupNorm`` and many problems' own modules start their
affine parameters at ones and their biases at zeros (``nn.Parameter(torch.zeros(n))``). Verified
with those values, a kernel that ignores the bias, adds it twice, or skips the scale computes the
same outputs as the reference: the fault hides behind the initialisation, although the first
optimiser step or ``load_state_dict`` of trained weights exposes it. So every model the workers
build (baseline, candidate, reference, the float64 truth) has each such parameter redrawn right
after its constructor, as loading trained weights would change it.

Which parameters: trainable (``requires_grad``) floating-point ``nn.Parameter`` tensors whose
elements are all one value ``c``, a learned scalar among them (``nn.Parameter(torch.tensor(1.0))``:
a kernel that multiplies by it twice, or not at all, is right only while it is 1). Buffers
(BatchNorm's running statistics) and frozen parameters (a fixed mask) keep theirs: they are
constants of the module, not weights.

What values: for ``c != 0``, ``c * u`` with ``u`` uniform in [0.5, 1.5] (same sign, within a
factor of two: a norm's scale stays positive); for ``c == 0``, uniform in [-0.1, 0.1] (the range
of ``nn.Linear``'s default bias, ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``, for fan-in 100; PyTorch's
``torch.nn.Linear`` documentation). The draw is keyed by (seed, shape, ``c``, how many parameters
of that shape and value came before in registration order), not by name, so a ``ModelNew`` that
keeps ``self.gamma = nn.Parameter(torch.ones(n))`` where ``Model`` holds an ``nn.LayerNorm(n)``
gets the same values, and the baseline's saved ``state_dict`` copies into it without an
``init_differs`` finding.
"""

from __future__ import annotations

import zlib

import torch

#: Half-width of the uniform range a zero-filled parameter is redrawn from.
ZERO_FILL_HALF_WIDTH = 0.1
#: The factor range a parameter filled with c != 0 is redrawn from: c * U(low, high).
NONZERO_FILL_FACTORS = (0.5, 1.5)


def _fill_value(p: torch.Tensor) -> float | None:
    """The one value every element of ``p`` holds, or None (several values, non-finite, empty)."""
    if p.numel() == 0 or not p.dtype.is_floating_point:
        return None
    with torch.no_grad():
        first = p.reshape(-1)[0]
        if not torch.isfinite(first) or not bool((p == first).all()):
            return None
        return float(first)


def redraw_constant_parameters_(model: torch.nn.Module, seed: int) -> dict[str, float]:
    """Redraw, in place, every trainable parameter of ``model`` whose elements all hold one value
    (module docstring: which, and from what range). Returns ``{parameter name: the value it was
    filled with}`` in registration order, empty when none was. Deterministic in ``seed`` and the
    parameters' shapes and values; the values are drawn in float32 on the host and copied to each
    parameter's device and dtype. Raises nothing for a module without parameters."""
    redrawn: dict[str, float] = {}
    seen: dict[tuple[tuple[int, ...], float], int] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad or isinstance(p, torch.nn.parameter.UninitializedParameter):
            continue
        c = _fill_value(p)
        if c is None:
            continue
        shape = tuple(p.shape)
        ordinal = seen.get((shape, c), 0)
        seen[(shape, c)] = ordinal + 1
        gen = torch.Generator().manual_seed(zlib.crc32(repr((seed, shape, c, ordinal)).encode()))
        u = torch.rand(shape, generator=gen, dtype=torch.float32)
        if c == 0.0:
            values = (u * 2.0 - 1.0) * ZERO_FILL_HALF_WIDTH
        else:
            low, high = NONZERO_FILL_FACTORS
            values = c * (low + (high - low) * u)
        with torch.no_grad():
            p.copy_(values.to(device=p.device, dtype=p.dtype))
        redrawn[name] = c
    return redrawn


def redrawn_note(redrawn: dict[str, float], limit: int = 4) -> str:
    """``"bias (filled with 0), norm.weight (filled with 1)"``: the parameters
    :func:`redraw_constant_parameters_` redrew, with the value their constructor filled them
    with; empty when none."""
    shown = [f"{name} (filled with {c:g})" for name, c in list(redrawn.items())[:limit]]
    more = len(redrawn) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
