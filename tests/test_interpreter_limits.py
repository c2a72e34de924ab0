"""What Triton's interpreter cannot run is the environment's, not the kernel's. libdevice (CUDA's
math library, which the interpreter does not implement) runs in numpy where numpy computes the
function alike (``tanh``, however the kernel imports it); a kernel calling one it cannot emulate
(a ``fast_*`` approximation) gets an ``environment`` verdict naming the call, wherever the value
goes next (``worker/externs.py``); a kernel whose own fault leaves a value ``None`` stays a
compile error. Where the interpreter only passes arguments differently from the compiler (a float
launch argument, a dtype handed to a device function), it is made to pass them as the compiler
does (``worker/interpreter_args.py``), and a builtin called under a name of the module's own
(``triton_cast = tl.cast``) is bound as ``tl.cast`` is (``worker/interpreter_names.py``), so such
kernels are judged, not called compile errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.errors import _interpreter_extern
from xeforge_core.worker.externs import ExternUnsupported

FIX = Path(__file__).parent / "fixtures" / "interpreter"


def _verify(candidate: str):
    return verify(load_problem(FIX / "tanh.py"), (FIX / candidate).read_text(), device="cpu",
                  options=VerifyOptions(seeds=1, use_cache=False, timeout_s=120.0), candidate_name=candidate)


@pytest.mark.parametrize("candidate", ["tanh_libdevice.py", "tanh_libdevice_alias.py", "tanh_builtin_names.py"])
def test_a_libdevice_function_numpy_computes_alike_is_judged_in_the_interpreter(candidate):
    verdict = _verify(candidate)
    assert verdict.kind is VerdictKind.OK, verdict.reason


def test_a_libdevice_approximation_is_judged_on_a_gpu_only():
    verdict = _verify("tanh_fast.py")
    assert verdict.kind is VerdictKind.ENVIRONMENT, verdict.reason
    assert verdict.reason.startswith("Triton's interpreter cannot run libdevice.fast_tanhf at tanh_fast.py:"), \
        verdict.reason


def test_a_helper_without_its_return_stays_a_compile_error():
    verdict = _verify("tanh_no_return.py")
    assert verdict.kind is VerdictKind.COMPILE_ERROR, verdict.reason


def test_the_extern_is_named_from_the_exception_chain():
    try:
        try:
            raise ExternUnsupported("libdevice.erf")
        except ExternUnsupported as inner:
            raise RuntimeError("the interpreter's wrapper") from inner
    except RuntimeError as outer:
        assert _interpreter_extern(outer) == "libdevice.erf"
    assert _interpreter_extern(TypeError("cannot convert None of type <class 'NoneType'> to tensor")) == ""


def test_float_and_dtype_arguments_arrive_as_the_compiler_passes_them():
    verdict = verify(load_problem(FIX / "rowmax_scaled.py"), (FIX / "rowmax_scaled_new.py").read_text(), device="cpu",
                     options=VerifyOptions(seeds=1, use_cache=False, timeout_s=120.0))
    assert verdict.kind is VerdictKind.OK, verdict.reason


def test_libdevice_overloads_dispatch_as_the_compiler_does():
    """``pow`` of a float32 and an int32 launch argument is libdevice's ``powi``: it runs."""
    verdict = verify(load_problem(FIX / "gelu_tanh.py"), (FIX / "gelu_tanh_libdevice.py").read_text(), device="cpu",
                     options=VerifyOptions(seeds=1, use_cache=False, timeout_s=120.0))
    assert verdict.kind is VerdictKind.OK, verdict.reason


def test_c_round_and_a_fused_multiply_add_round_once_as_c_does():
    import numpy as np

    from xeforge_core.worker.externs import _c_round, _exact_fma

    with np.errstate(all="ignore"):
        got = _c_round(np.array([0.49999999999999994, 2.0**52 + 1, 2.5, -2.5, np.inf]))
    assert got.tolist() == [0.0, 2.0**52 + 1, 3.0, -3.0, np.inf]
    a, b = np.array([1.0000001]), np.array([3.3333333])
    assert _exact_fma(a, b, -(a * b))[0] != 0.0  # the product's rounding error, not 0 as x * y + z gives
