"""The timed size is checked too (``worker/timed_check.py``, ``verify._check_timed_size``): a
kernel right at every correctness size and wrong only at the performance variant, where its
tiles divide the size exactly, is a wrong answer there, never a speedup."""

from __future__ import annotations

from pathlib import Path

import torch

from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.timed_check import GROSS_RELATIVE, gross_mismatch

FIXTURES = Path(__file__).parent / "fixtures" / "timed"
#: timing in Triton's interpreter (host-clocked): the path a GPU takes, at a size it runs quickly;
#: without the sizes derived from the tiles (their size at whole tiles finds the same fault
#: before timing, ``tests/test_verify_tiles.py``), so the timed size is the only one that shows it
OPTIONS = VerifyOptions(seeds=1, use_cache=False, force_timing=True, performance_variants=["bench-gpu"],
                        tile_sizes=False)


def test_a_kernel_wrong_only_at_the_timed_size_is_a_wrong_answer_there():
    problem = load_problem(FIXTURES / "scale.py")
    tail = (FIXTURES / "scale_tail.py").read_text()
    verdict = verify(problem, tail, device="cpu", options=OPTIONS, candidate_name="scale_tail.py")
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert verdict.reason.startswith("at the timed size bench-gpu"), verdict.reason
    assert "got 0" in verdict.reason  # the last whole tile was never written
    performance = verdict.step("performance")
    assert performance is not None and performance.status.value == "failed"
    # the same problem's own kernel passes, with no word about the timed size
    right = verify(problem, (FIXTURES / "scale.py").read_text(), device="cpu", options=OPTIONS)
    assert right.kind.value == "ok", right.reason
    assert not [w for w in right.warnings if "timed output" in w]


def test_a_kernel_writing_its_input_in_place_is_compared_on_fresh_inputs():
    """In place, the timed calls leave the inputs processed: the check runs each side once more
    on fresh inputs of its own, so the tail kernel's fault shows there too."""
    problem = load_problem(FIXTURES / "relu_in_place.py")
    tail = (FIXTURES / "relu_in_place_tail.py").read_text()
    verdict = verify(problem, tail, device="cpu", options=OPTIONS, candidate_name="relu_in_place_tail.py")
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert verdict.reason.startswith("at the timed size bench-gpu"), verdict.reason
    right = verify(problem, problem.kernel.source, device="cpu", options=OPTIONS)
    assert right.kind.value == "ok", right.reason


def test_the_gross_comparison_sees_tiles_and_nans_but_not_rounding():
    want = torch.randn(4096)
    assert gross_mismatch(want * (1 + 1e-3), want) == ""  # rounding, far inside the bound
    unwritten = want.clone()
    unwritten[-256:] = 0
    assert "element(s) further than" in gross_mismatch(unwritten, want)
    nan = want.clone()
    nan[7] = float("nan")
    assert "NaN or infinite" in gross_mismatch(nan, want)
    assert gross_mismatch(nan, nan) == ""  # NaNs in the same places agree
    assert "shape" in gross_mismatch(want[:-1], want)
    assert gross_mismatch([want, want], want) == "2 output tensor(s) against 1"
    index = torch.arange(1000)
    assert gross_mismatch(index.index_fill(0, torch.tensor([3]), 9), index) == ""  # a tie's index, not gross
    assert "20 of 1000 element(s) differ" in gross_mismatch(index.index_fill(0, torch.arange(20), 999), index)
    assert GROSS_RELATIVE < 0.1
