"""CUDA's and ROCm's libdevice in Triton's interpreter: what it can run, in numpy, and what not.

Triton's interpreter (3.6) implements ``tl`` and ``tl.math`` in numpy but not the extern math
libraries: a ``libdevice.tanh(x)`` there fails wherever the value is next used, with an error
that names neither libdevice nor the call. ``stub_libdevice`` replaces every public function of
``triton.language.extra.libdevice`` (and of its ``cuda`` and ``hip`` back ends) before a module
under test is imported (``from ... libdevice import tanh`` included):

* the functions with an IEEE or C99 definition numpy (or ``math``) computes alike
  (``NUMPY``: ``tanh``, ``rsqrt``, ``erf``, ``pow``, ``normcdf``, ``fma``...) run in numpy,
  computed in float64 and rounded to the argument's dtype, which libdevice's (within 1-2 ulp,
  CUDA Math API, "Mathematical Functions Appendix") match within the verifier's tolerance;
* the others (the ``fast_*`` approximations, whose error is the point; conversions with a
  rounding mode; integer bit tricks; special functions numpy lacks) raise ``ExternUnsupported``
  naming the call, so the verdict says what cannot run here (``errors.classify``:
  ``environment``), never a compile error.

As in the compiled library, the arguments must be float32 or float64 (Python numbers take the
tensor's dtype); another dtype is refused with a ``TypeError``. Worker-side, interpreter only.
"""

from __future__ import annotations

import importlib
from typing import Any

from xeforge_core.errors import XeForgeError

#: The libdevice modules a kernel may import (the dispatcher and its back ends).
MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
           "triton.language.extra.hip.libdevice")


class ExternUnsupported(XeForgeError):
    """A kernel called an extern function (``libdevice.tanh``) that Triton's interpreter does not
    implement. ``call`` is its name as the kernel wrote it."""

    def __init__(self, call: str) -> None:
        super().__init__(f"{call} is not implemented by Triton's interpreter")
        self.call = call


def _vectorized(fn: Any) -> Any:
    import numpy as np

    return np.vectorize(fn, otypes=[np.float64])


def _numpy_table() -> dict[str, Any]:
    """libdevice's name -> a numpy function of float64 arrays (see the module docstring)."""
    import math

    import numpy as np

    erf, erfc = _vectorized(math.erf), _vectorized(math.erfc)
    table: dict[str, Any] = {
        name: getattr(np, name) for name in (
            "tanh", "sinh", "cosh", "tan", "sin", "cos", "exp", "exp2", "expm1", "log", "log2", "log10",
            "log1p", "sqrt", "cbrt", "floor", "ceil", "trunc", "rint", "abs", "fmod", "hypot",
            "copysign", "nextafter")}
    table.update({
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
        "atanh": np.arctanh, "atan2": np.arctan2, "nearbyint": np.rint, "sqrt_rn": np.sqrt, "pow": np.power,
        "exp10": lambda x: np.power(10.0, x), "rsqrt": lambda x: 1.0 / np.sqrt(x), "rsqrt_rn": lambda x: 1.0 / np.sqrt(x),
        "round": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),  # C round: half away from zero
        "erf": erf, "erfc": erfc, "normcdf": lambda x: 0.5 * erfc(-x / math.sqrt(2.0)),
        "fdim": lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan, np.maximum(x - y, 0.0)),
        "fma": lambda x, y, z: x * y + z, "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply,
        "div_rn": np.divide})
    return table


def _numpy_extern(name: str, fn: Any) -> Any:
    """``libdevice.<name>`` on interpreter tensors and Python numbers, computed by ``fn``."""

    def extern(*args: Any, **kwargs: Any) -> Any:
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        kwargs.pop("_semantic", None)
        if kwargs:
            raise TypeError(f"libdevice.{name} takes its arguments positionally")
        args = tuple(a.value if isinstance(a, tl.constexpr) else a for a in args)
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        dtype = tensors[0].dtype if tensors else tl.float32  # numbers alone: fp32, as the compiler takes them
        if dtype not in (tl.float32, tl.float64) or any(t.dtype != dtype for t in tensors):
            raise TypeError(f"libdevice.{name} has no version for {', '.join(str(t.dtype) for t in tensors)} "
                            "arguments (float32 or float64, all alike)")
        shapes = [tuple(t.type.shape) for t in tensors if t.type.is_block()]
        shape = np.broadcast_shapes(*shapes) if shapes else None
        # a block's data has its shape; a scalar tensor's holds one element; a Python number is one
        values = [np.asarray(a.handle.data if isinstance(a, tl.tensor) else a, dtype=np.float64)
                  for a in args]
        values = [v if isinstance(a, tl.tensor) and a.type.is_block() else v.reshape(())
                  for v, a in zip(values, args)]
        with np.errstate(all="ignore"):  # inf and NaN are values here, as on the GPU
            out = np.asarray(fn(*values), dtype=np.float64)
        out = (np.broadcast_to(out, shape) if shape is not None else out).astype(
            np.float32 if dtype == tl.float32 else np.float64)
        if shape is None:
            return tl.tensor(TensorHandle(out.reshape(1), dtype), dtype)
        return tl.tensor(TensorHandle(np.ascontiguousarray(out), dtype), tl.block_type(dtype, list(shape)))

    extern.__name__ = name
    return extern


def _stub(name: str) -> Any:
    def stub(*args: Any, **kwargs: Any) -> Any:
        raise ExternUnsupported(f"libdevice.{name}")

    stub.__name__ = name
    return stub


def stub_libdevice() -> list[str]:
    """Replace the public functions of the libdevice modules (``MODULES``): those in the numpy
    table with it, the others with stubs raising ``ExternUnsupported``. Returns the modules
    patched (a back end that cannot be imported is left out). Call only in the interpreter: on a
    GPU these functions compile."""
    table = _numpy_table()
    patched = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, value in list(vars(module).items()):
            if not attr.startswith("_") and callable(value) and getattr(value, "__module__", None) == module.__name__:
                setattr(module, attr, _numpy_extern(attr, table[attr]) if attr in table else _stub(attr))
        patched.append(name)
    return patched
