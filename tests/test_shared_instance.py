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
    # the timed-size test's masked kernel, as a baseline checked at two sizes built alike
    problem = load_problem(FIXTURES.parent / "timed" / "scale.py", spec_path=FIXTURES / "two_sizes.yaml")
    verdict = verify(problem, (FIXTURES / "first_size.py").read_text(), device="cpu", options=OPTIONS)
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert "on the instance first called at variant ci" in verdict.reason, verdict.reason
    assert "on a fresh instance it matches" in verdict.reason
    assert "got 0" in verdict.reason  # the end past the first call's size was never written
    # the baseline's own kernel, keeping nothing between calls, is right on the shared instance
    assert verify(problem, problem.kernel.source, device="cpu", options=OPTIONS).kind.value == "ok"


def test_a_truth_that_keeps_state_from_its_first_call_keeps_an_instance_per_variant():
    """ActNorm's data-dependent initialisation (the shift set from the first batch, then kept):
    the truth's output at the second size depends on its call history, so sharing instances
    would judge the candidate on a history the truth did not have. The baseline job finds that
    and the candidate job gives each variant its own instance: the kernel against itself is ok."""
    problem = load_problem(FIXTURES / "actnorm.py")
    verdict = verify(problem, problem.kernel.source, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "ok", verdict.reason


def test_a_redraw_the_problem_refuses_is_skipped_not_blamed():
    """A problem whose forward raises on values its get_inputs() never draws (a scale that must be
    positive) leaves those redraws out, saying why; a right candidate is ok, a wrong one wrong."""
    folder = Path(__file__).parent / "fixtures" / "refused_redraw"
    problem = load_problem(folder / "problem.py")
    candidate = (folder / "candidate.py").read_text()
    verdict = verify(problem, candidate, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "ok", verdict.reason
    assert any("the problem's code raised on normal inputs" in w and "leave its domain" in w
               for w in verdict.warnings), verdict.warnings
    wrong = verify(problem, candidate.replace("x * y, mask=mask", "x + y, mask=mask"), device="cpu", options=OPTIONS)
    assert wrong.kind.value == "wrong_answer", wrong.reason
