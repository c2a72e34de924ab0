"""Arguments in Triton's interpreter as compiled Triton passes them.

Triton's interpreter (3.6) hands a kernel three kinds of argument differently from the compiler,
so kernels that compile and run on a GPU fail in it with errors that blame the kernel
(``compile_error``), though nothing is wrong with them:

* a Python ``float`` argument of a launch stays a Python float, where the compiler specialises
  it to an ``fp32`` scalar (``triton.runtime.jit.mangle_type``: ``"fp32"``), so
  ``eps.to(tl.float32)`` raises ``'float' object has no attribute 'to'`` (Liger-Kernel's norms;
  triton-lang/triton#5965 reports this class of gap). Integers are already converted there.
* a ``tl.dtype`` passed from one ``@triton.jit`` function to another stays a bare dtype, where the
  compiler wraps every non-tensor argument of a device function call in ``tl.constexpr``
  (``CodeGenerator.call_JitFunction``), so ``dtype.value`` raises (FlagGems' ``get_dtype_min``);
* a ``bool`` launch argument is typed ``int1`` and stored as int32, which the interpreter then
  refuses ("numpy data itemsize (32 bits) exceeds ... int1").

``match_compiled_arguments`` makes them follow the compiler: the float becomes an ``fp32``
scalar tensor, the bool an ``int1`` one, the dtype a ``tl.constexpr`` whose attributes are
still the dtype's. Worker-side, interpreter only; idempotent.
"""

from __future__ import annotations

from typing import Any

#: Set on the patched functions, so that patching twice wraps once.
_MARK = "_xeforge_compiled_arguments"


def match_compiled_arguments() -> bool:
    """Patch Triton's interpreter so that launch arguments and device-function arguments arrive
    as the compiler passes them (see the module docstring). Returns whether it patched (``False``
    where it had already, or the interpreter's internals are not the ones this was written for:
    then kernels meet the interpreter as it is)."""
    try:
        import numpy as np
        import triton
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    convert = getattr(interpreter, "_implicit_cvt", None)
    function = getattr(interpreter, "InterpretedFunction", None)
    if convert is None or function is None or getattr(convert, _MARK, False):
        return False
    call = function.__call__

    class DtypeArgument(tl.constexpr):
        """A dtype as a device function receives it: a constexpr (``.value``) whose attributes
        are the dtype's (``.is_floating()``), as the compiler unwraps a constexpr's attributes
        (``CodeGenerator.visit_Attribute``)."""

        def __getattr__(self, name: str) -> Any:
            if name == "value":  # not set yet (a copy being made): no recursion through it
                raise AttributeError(name)
            return getattr(self.value, name)

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, (bool, float)):  # bool before int: mangle_type gives "i1", stored as numpy bool
            ty = tl.str_to_ty(triton.runtime.jit.mangle_type(arg), None)
            data = np.array([arg], dtype=np.bool_ if isinstance(arg, bool) else np.float32)
            return tl.tensor(interpreter.TensorHandle(data, ty), ty)
        return convert(arg)

    def device_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        args = tuple(DtypeArgument(a) if isinstance(a, tl.dtype) else a for a in args)
        kwargs = {k: DtypeArgument(v) if isinstance(v, tl.dtype) else v for k, v in kwargs.items()}
        return call(self, *args, **kwargs)

    setattr(implicit_cvt, _MARK, True)
    setattr(device_call, _MARK, True)
    interpreter._implicit_cvt = implicit_cvt
    interpreter.InterpretedFunction.__call__ = device_call
    return True
