"""A kernel written for a harness that poses the problem at another dtype (KernelAgent's test
harness casts to bfloat16): at the problem's own dtype it is refused with the reason and the
option that poses the problem at the dtype it names; posed there (``--dtype``), it is judged
against the float64 truth like any candidate, right or wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.contract import refused_dtype
from xeforge_core.problem import load_problem
from xeforge_core.verdict import Verdict, VerdictKind
from xeforge_core.verify import VerifyOptions, normalised_dtype, verify

FIX = Path(__file__).parent / "fixtures" / "dtypes"


def _verify(kernel: str, source: str | None = None, **options) -> Verdict:
    problem = load_problem(FIX / "problem.py")
    opts = VerifyOptions(seeds=1, distributions=["normal"], use_cache=False, timeout_s=240.0, **options)
    return verify(problem, source or (FIX / kernel).read_text(), device="cpu", options=opts)


def test_a_kernel_that_demands_bfloat16_is_told_the_option_that_poses_the_problem_there():
    v = _verify("kernel_bf16.py")
    assert v.kind is VerdictKind.RUNTIME_ERROR, v.reason
    assert "--dtype bfloat16" in v.reason
    assert [f.rule for f in v.findings if f.rule.startswith("dtype_")] == ["dtype_refusal"]


def test_posed_at_the_dtype_it_demands_it_is_ok_and_says_so():
    v = _verify("kernel_bf16.py", dtype="kernel")
    assert v.kind is VerdictKind.OK, v.reason
    assert "posed at bfloat16" in v.reason
    assert any(f.rule == "dtype_specialised" for f in v.findings)
    assert v.precision["posed_dtype"] == "bfloat16"  # what the problem was posed at, whatever its outputs are


def test_a_wrong_kernel_posed_at_its_dtype_is_still_wrong():
    wrong = (FIX / "kernel_bf16.py").read_text().replace("1.0 + tl.abs(x)", "1.0 + tl.abs(x) * 0.9")
    v = _verify("kernel_bf16.py", wrong, dtype="bfloat16")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason


def test_a_named_dtype_is_said_and_another_one_the_kernel_demands_is_named():
    right = _verify("kernel_bf16.py", dtype="bf16")
    assert right.kind is VerdictKind.OK and right.reason.endswith("posed at bfloat16 (--dtype bfloat16)"), right.reason
    assert [f.severity for f in right.findings if f.rule == "dtype_posed"] == ["info"]
    other = _verify("kernel_bf16.py", dtype="float16")
    assert other.kind is VerdictKind.RUNTIME_ERROR and "--dtype bfloat16" in other.reason, other.reason
    assert any(f.rule == "dtype_refusal" for f in other.findings)


def test_dtype_names_and_refusals():
    assert normalised_dtype("bf16") == "bfloat16" and normalised_dtype("torch.float16") == "float16"
    assert normalised_dtype(None) is None and normalised_dtype("Kernel") == "kernel"
    assert normalised_dtype("float") == "float32" and normalised_dtype("torch.double") == "float64"
    with pytest.raises(ValueError, match="did you mean 'bfloat16'"):
        normalised_dtype("bfloat61")
    with pytest.raises(ValueError, match="did you mean 'float32'"):
        normalised_dtype("f32")
    with pytest.raises(ValueError, match="not a floating-point dtype"):
        normalised_dtype(" ")
    raised = Verdict(kind=VerdictKind.RUNTIME_ERROR,
                     reason="AssertionError while making the first call at candidate.py:9 "
                            "(`assert x.dtype == torch.float16`)")
    assert refused_dtype(raised) == "float16"
    both = Verdict(kind=VerdictKind.RUNTIME_ERROR, reason="TypeError: expected float16 or bfloat16 inputs")
    assert refused_dtype(both) == "bfloat16"  # either accepted: the one with float32's range
    assert refused_dtype(both, given="bfloat16") == "float16"  # posed at bfloat16 and still refused
    shape = Verdict(kind=VerdictKind.RUNTIME_ERROR, reason="AssertionError at candidate.py:3 (`assert x.shape[1] == 4096`)")
    assert refused_dtype(shape) is None


def test_a_published_kernel_that_demands_bfloat16_as_the_baseline_poses_the_problem_there():
    """The optimizer's case: the published kernel is the baseline and refuses the problem's
    float32 inputs; with ``--dtype kernel`` its rewrite is judged with the problem at bfloat16."""
    problem = load_problem(FIX / "kernel_bf16.py", reference_path=FIX / "problem.py")
    rewrite = (FIX / "kernel_bf16.py").read_text().replace("BLOCK=256", "BLOCK=512")
    opts = VerifyOptions(seeds=1, distributions=["normal"], use_cache=False, timeout_s=240.0, dtype="kernel")
    v = verify(problem, rewrite, device="cpu", options=opts)
    assert v.kind is VerdictKind.OK, v.reason
    assert any(f.rule == "dtype_specialised" for f in v.findings)


def test_a_published_baseline_that_demands_bfloat16_is_told_the_option():
    problem = load_problem(FIX / "kernel_bf16.py", reference_path=FIX / "problem.py")
    source = (FIX / "kernel_bf16.py").read_text().replace("BLOCK=256", "BLOCK=512")
    v = verify(problem, source, device="cpu", options=VerifyOptions(seeds=1, distributions=["normal"], use_cache=False))
    assert v.kind is VerdictKind.ENVIRONMENT and "--dtype kernel" in v.reason, v.reason
