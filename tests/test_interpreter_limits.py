"""What Triton's interpreter cannot run is the environment's, not the kernel's: a kernel calling
libdevice (CUDA's math library, which the interpreter does not implement) gets an
``environment`` verdict naming the call, never a compile error."""

from __future__ import annotations

from pathlib import Path

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.errors import _interpreter_extern

FIX = Path(__file__).parent / "fixtures" / "interpreter"


def test_a_libdevice_kernel_is_judged_on_a_gpu_only():
    problem = load_problem(FIX / "tanh.py")
    verdict = verify(problem, (FIX / "tanh_libdevice.py").read_text(), device="cpu",
                     options=VerifyOptions(seeds=1, use_cache=False, timeout_s=120.0),
                     candidate_name="tanh_libdevice.py")
    assert verdict.kind is VerdictKind.ENVIRONMENT, verdict.reason
    assert verdict.reason.startswith("Triton's interpreter cannot run libdevice.tanh"), verdict.reason


def test_only_the_missing_extern_symptoms_in_a_file_calling_libdevice_count():
    path = str(FIX / "tanh_libdevice.py")
    assert _interpreter_extern(path, "TypeError: cannot convert None of type <class 'NoneType'> to tensor") == \
        "libdevice.tanh"
    assert _interpreter_extern(path, "ValueError: arange's range must be a power of 2") == ""  # a real fault
    assert _interpreter_extern(str(FIX / "tanh.py"), "cannot convert None of type <class 'NoneType'>") == ""
