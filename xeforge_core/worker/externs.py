"""CUDA's and ROCm's libdevice in Triton's interpreter: what it can run, in numpy, and what not.

Triton's interpreter (3.6) implements ``tl`` and ``tl.math`` in numpy but not the extern math
libraries: a ``libdevice.tanh(x)`` there fails wherever the value is next used, with an error
that names neither libdevice nor the call. ``stub_libdevice`` replaces every public function of
``triton.language.extra.libdevice`` (and of its ``cuda`` and ``hip`` back ends) before a module
under test is imported (``from ... libdevice import tanh`` included):

* the functions with an IEEE or C99 definition numpy (or ``math``) computes alike
  (``_numpy_table``: ``tanh``, ``rsqrt``, ``erf``, ``pow``, ``normcdf``, ``fma``...) run in numpy,
  computed in float64 and rounded to the result's dtype, which libdevice's (within 1-2 ulp,
  CUDA Math API, "Mathematical Functions Appendix") match within the verifier's tolerance;
* the others (the ``fast_*`` approximations, whose error is the point; conversions with a
  rounding mode; integer bit tricks; special functions numpy lacks) raise ``ExternUnsupported``
  naming the call, so the verdict says what cannot run here (``errors.classify``:
  ``environment``), never a compile error.

The arguments go through the back end's own function first, so the compiler's type table
decides what is accepted (``pow`` of a float32 and an int32 is ``__nv_powif``; ``pow`` of a
float64 and a float32 is refused, as it is when compiling) and Python numbers become what
``to_tensor`` makes of them. Worker-side, interpreter only.
"""

from __future__ import annotations

import contextvars
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


def _c_round(x: Any) -> Any:
    """C's ``round``: half away from zero, exact in any float dtype (``x - trunc(x)`` is exact)."""
    import numpy as np

    whole = np.trunc(x)
    return whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0.0)


def _exact_fma(x: Any, y: Any, z: Any) -> Any:
    """``x * y + z`` rounded once (C's ``fma``): exact rational arithmetic per element, so a float64
    fused multiply-add matches libdevice's; non-finite operands as IEEE arithmetic gives them."""
    import math
    from fractions import Fraction

    def one(a: float, b: float, c: float) -> float:
        if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
            return a * b + c
        return float(Fraction(a) * Fraction(b) + Fraction(c))

    return _vectorized(one)(x, y, z)


def _numpy_table() -> dict[str, Any]:
    """libdevice's name -> a numpy function of float64 arrays (integer arrays where libdevice's
    result is an integer: ``abs`` of an int32) (see the module docstring)."""
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
        "round": _c_round, "erf": erf, "erfc": erfc, "normcdf": lambda x: 0.5 * erfc(-x / math.sqrt(2.0)),
        "fdim": lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan, np.maximum(x - y, 0.0)),
        "fma": _exact_fma, "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply, "div_rn": np.divide})
    return table


#: The libdevice function being called (its name), for the interpreter builder's extern path.
_CALLING: contextvars.ContextVar[str] = contextvars.ContextVar("libdevice_call", default="")


def _numpy_extern(name: str, typed: Any) -> Any:
    """``libdevice.<name>`` in the interpreter: ``typed`` (the CUDA or HIP back end's function of the
    same name) checks and converts the arguments with the compiler's own type table (Python numbers
    as ``to_tensor`` makes them, no overload it lacks) and broadcasts them; the interpreter
    builder's extern call (``_create_extern_elementwise``) then computes in numpy."""

    def extern(*args: Any, **kwargs: Any) -> Any:
        from triton.runtime.interpreter import interpreter_semantic

        kwargs.pop("_semantic", None)
        token = _CALLING.set(name)
        try:
            return typed(*args, _semantic=interpreter_semantic, **kwargs)
        finally:
            _CALLING.reset(token)

    extern.__name__ = name
    return extern


def _create_extern_elementwise(table: dict[str, Any]) -> Any:
    def create(self: Any, lib_name: str, lib_path: str, symbol: str, args: list[Any], ret_type: Any,
               is_pure: bool) -> Any:
        import numpy as np
        from triton.runtime.interpreter import TensorHandle, _get_np_dtype

        name = _CALLING.get()
        if name not in table:
            raise ExternUnsupported(f"libdevice.{name or symbol}")
        scalar = ret_type.scalar if hasattr(ret_type, "scalar") else ret_type
        out_dtype = _get_np_dtype(scalar)
        floating = np.issubdtype(out_dtype, np.floating)
        values = [a.data.astype(np.float64) if floating else a.data for a in args]
        with np.errstate(all="ignore"):  # inf and NaN are values here, as on the GPU
            out = np.asarray(table[name](*values))
        return TensorHandle(np.ascontiguousarray(out.astype(out_dtype)), scalar)

    return create


def _stub(name: str) -> Any:
    def stub(*args: Any, **kwargs: Any) -> Any:
        raise ExternUnsupported(f"libdevice.{name}")

    stub.__name__ = name
    return stub


def stub_libdevice() -> list[str]:
    """Replace the public functions of the libdevice modules (``MODULES``): those in the numpy
    table with a call through the back end's own function (the CUDA one for the dispatcher),
    computed in numpy by the interpreter builder; the others with stubs raising
    ``ExternUnsupported``. Returns the modules patched (a back end that cannot be imported is left
    out). Call only in the interpreter: on a GPU these functions compile."""
    from triton.runtime import interpreter

    table = _numpy_table()
    interpreter.InterpreterBuilder.create_extern_elementwise = _create_extern_elementwise(table)
    backends = {}
    for name in MODULES[1:]:
        try:
            backends[name] = importlib.import_module(name)
        except ImportError:  # a Triton build without this back end (Intel's ships its own)
            continue
    patched = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        typed_from = backends.get(name) or backends.get(MODULES[1])
        for attr, value in list(vars(module).items()):
            if not attr.startswith("_") and callable(value) and getattr(value, "__module__", None) == module.__name__:
                typed = getattr(typed_from, attr, None) if typed_from is not None else None
                setattr(module, attr, _numpy_extern(attr, typed) if attr in table and typed is not None
                        else _stub(attr))
        patched.append(name)
    return patched
