"""Variants built alike (the same init values, dtype and seed) are called on one instance of the
candidate, as a model is called at another batch size: state kept from the first call (here the
element count) is stale at the second size, and the verdict says so."""

from __future__ import annotations

from pathlib import Path

from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify

FIXTURES = Path(__file__).parent / "fixtures" / "instance"
OPTIONS = VerifyOptions(seeds=1, use_cache=False, measure_performance=False)


def test_a_size_captured_on_the_first_call_is_wrong_at_the_next_size():
    problem = load_problem(FIXTURES / "grow.py")
    verdict = verify(problem, (FIXTURES / "first_size.py").read_text(), device="cpu", options=OPTIONS)
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert "on the instance first called at variant ci" in verdict.reason, verdict.reason
    assert "on a fresh instance it matches" in verdict.reason
    assert "got 0" in verdict.reason  # the end past the first call's size was never written
    # the baseline's own kernel, keeping nothing between calls, is right on the shared instance
    assert verify(problem, problem.kernel.source, device="cpu", options=OPTIONS).kind.value == "ok"
