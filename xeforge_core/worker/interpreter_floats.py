"""Narrowing float conversions in Triton's interpreter as a GPU rounds them.

Triton 3.6's interpreter converts between float types bit by bit (``_convert_float`` in
``triton/runtime/interpreter.py``). Narrowing to float8 it rounds a half up on the cut-off bit
alone and ORs the carry into the significand instead of adding it, so a value whose significand
rounds up past all ones loses its carry: float32 125.9 becomes float8e4nv 64, not 128; 31.6
becomes 16. A correct quantiser is then a wrong answer on the CPU (seen on torchao's float8
tensorwise scaling). A GPU rounds to nearest even with the carry, and saturates to the largest
finite value (NVIDIA's ``cvt.rn.satfinite`` for float8, which Triton emits on sm_89 and later).

``round_like_the_gpu`` replaces the interpreter's ``create_fp_to_fp`` for round-to-nearest-even
conversions into a float8 type torch has (``float8e4nv`` -> ``float8_e4m3fn``, ``float8e5`` ->
``float8_e5m2``, ``float8e4b8`` -> ``float8_e4m3fnuz``, ``float8e5b16`` -> ``float8_e5m2fnuz``):
the value is clamped to the type's finite range (NaN kept) and converted by torch, which rounds
to nearest even. Other conversions (and round-toward-zero, which torch does not offer) stay the
interpreter's. Worker-side, interpreter only; idempotent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Set on the patched function, so that patching twice wraps once.
_MARK = "_xeforge_rounds_like_the_gpu"

#: Triton's float8 type names and the torch dtypes of the same format.
FLOAT8 = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2, "fp8e4b8": torch.float8_e4m3fnuz,
          "fp8e5b16": torch.float8_e5m2fnuz}


def to_float8(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """``values`` (a float numpy array) rounded to nearest even into ``dtype`` (a torch float8
    type), saturated to its largest finite magnitude as ``cvt.rn.satfinite`` does (NaN stays
    NaN); returned as the uint8 bit patterns the interpreter stores float8 in."""
    big = float(torch.finfo(dtype).max)
    wide = torch.from_numpy(np.ascontiguousarray(values))
    return wide.clamp(-big, big).to(dtype).view(torch.uint8).numpy()


def round_like_the_gpu() -> bool:
    """Patch the interpreter's float-to-float conversion (see the module docstring); returns
    whether it is patched now."""
    try:
        from triton._C.libtriton import ir
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover - no interpreter in this triton
        return False
    builder = itp.InterpreterBuilder
    original = builder.create_fp_to_fp
    if getattr(original, _MARK, False):
        return True

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        target = FLOAT8.get(getattr(dst_type.scalar, "name", ""))
        source = src.dtype.scalar
        if target is None or rounding_mode != ir.ROUNDING_MODE.RTNE or not source.is_floating() \
                or source.primitive_bitwidth <= 8:
            return original(self, src, dst_type, rounding_mode)
        data = np.asarray(src.data)
        if source.name == "bf16":  # stored as uint16: its bits are a float32's upper half
            data = (data.astype(np.uint32) << 16).view(np.float32)
        return itp.TensorHandle(to_float8(data, target).reshape(np.shape(src.data)), dst_type.scalar)

    setattr(create_fp_to_fp, _MARK, True)
    builder.create_fp_to_fp = create_fp_to_fp
    return True
