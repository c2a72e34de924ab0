"""Sizes that are equal in the published problem are checked apart: a kernel that reads one
for the other (a square product's K loop run to N, a Linear layer's out features read from its
in features) is right wherever they are equal and wrong elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify

FIX = Path(__file__).parent / "fixtures" / "equal_sizes"
OPTIONS = VerifyOptions(seeds=1, distributions=["normal"], use_cache=False, measure_performance=False)


@pytest.mark.parametrize("problem, candidate, apart", [
    ("square_mm.py", "square_mm_loop_to_n.py", "N < K"),
    ("linear.py", "linear_out_from_in.py", "in_features != out_features"),
])
def test_a_kernel_that_reads_one_equal_size_for_another_is_wrong(problem: str, candidate: str, apart: str) -> None:
    verdict = verify(load_problem(FIX / problem), (FIX / candidate).read_text(), device="cpu", options=OPTIONS)
    assert verdict.kind is VerdictKind.WRONG_ANSWER, (apart, verdict.reason)
    assert "shape_specialised" not in {f.rule for f in verdict.findings}
