"""A correctness variant far too large for Triton's CPU interpreter is refused up front with the
reason, instead of hanging a worker until its timeout (real Xe-Forge specs use bench-size `ci`)."""

from __future__ import annotations

import time
from pathlib import Path

from xeforge_core.problem import Variant, load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, inputs_too_large, interpreter_too_slow, verify


def test_budget_judged_from_flop():
    small = Variant(name="ci", params=["X"], dims={}, flop=2 * 64 * 64 * 64)
    huge = Variant(name="ci", params=["X"], dims={}, flop=2 * 16384 * 4096 * 4096)
    unknown = Variant(name="ci", params=["X"], dims={})
    assert interpreter_too_slow([small, unknown], 300) == ""
    reason = interpreter_too_slow([small, huge], 300)
    assert "variant ci needs 5.5e+11 FLOP" in reason and "GPU" in reason


def test_budget_judged_from_input_elements_over_the_calls_of_a_check():
    """A memory-bound variant does few FLOP a byte: its input elements bound the interpreter's
    time (sample 05's bench-gpu, 8192 x 4096, ran past the 300 s limit before it was refused)."""
    rows = Variant(name="bench-gpu", params=["X"], dims={}, flop=4 * 8192 * 4096, shapes={"X": (8192, 4096)})
    assert interpreter_too_slow([rows], 300, calls=1) == ""
    reason = interpreter_too_slow([rows], 300, calls=6)
    assert "variant bench-gpu has 33,554,432 input elements: its 6 calls" in reason and "--variant" in reason


def test_inputs_too_large_judges_memory_not_time_and_only_variants_without_shapes():
    """A KernelBench-style variant (no shapes) is judged by its get_inputs() bytes against the
    worker's memory; time is not judged from them, and a variant with shapes is left to
    interpreter_too_slow."""
    problem = load_problem(Path(__file__).parent / "fixtures" / "caches" / "scale_problem.py")
    module = Variant(name="module", params=[], dims={})
    assert interpreter_too_slow([module], 300, calls=6) == ""
    assert inputs_too_large([module], problem, 2**30) == ""
    assert inputs_too_large([module], problem, None) == ""
    big = Variant(name="module", params=[], dims={}, overrides={"N": 2**31})
    reason = inputs_too_large([big], problem, 4 * 2**30)
    assert reason.startswith("variant module's inputs take about 8.0 GiB") and "4 GiB memory limit" in reason, reason
    shaped = Variant(name="ci", params=["X"], dims={}, shapes={"X": (2**31,)})
    assert inputs_too_large([shaped], problem, 1) == ""


def test_an_explicit_bench_variant_of_a_memory_bound_sample_is_refused_at_once():
    problem = load_problem(Path(__file__).parents[1] / "sample_kernels" / "05_rmsnorm.py")
    start = time.monotonic()
    verdict = verify(problem, problem.kernel.source, device="cpu",
                     options=VerifyOptions(use_cache=False, variants=["bench-gpu"]))
    assert time.monotonic() - start < 60
    assert verdict.kind is VerdictKind.ENVIRONMENT and "input elements" in verdict.reason, verdict.reason


def test_real_case_with_a_bench_size_ci_is_refused_quickly(xeforge_cases: Path):
    problem = load_problem(xeforge_cases / "39_Gemm_Scale_BatchNorm.py")
    start = time.monotonic()
    verdict = verify(problem, problem.kernel.source, device="cpu",
                     options=VerifyOptions(use_cache=False))
    assert time.monotonic() - start < 60
    assert verdict.kind is VerdictKind.ENVIRONMENT
    assert "interpreter" in verdict.reason and "ci" in verdict.reason
