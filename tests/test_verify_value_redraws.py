"""Values the problem's own inputs never take: a wide spread within a row (``spread``), exact
zeros along every axis (``zeros``), and one input redrawn alone where redrawing them all leaves
the reference's domain (partial redraws); and a relation the problem poses at every seed (sorted
edges) kept by every redraw. Each fixture kernel is wrong only there, or right."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind, inputs_label
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.domain import TruthDomain, inputs_phrase
from xeforge_core.worker.errors import WorkerError
from xeforge_core.worker.inputs import (
    SPREAD_DECADES,
    ZERO_STRIDE,
    _generator,
    base_distribution,
    fill_,
    impose_structure_,
    input_structure,
    make_tensor,
    sorted_inputs,
    split_redraw,
)

FIX = Path(__file__).parent / "fixtures" / "value_redraws"
OPTIONS = VerifyOptions(seeds=1, use_cache=False, measure_performance=False)


def _verify(problem: str, candidate: str):
    return verify(load_problem(FIX / problem), (FIX / candidate).read_text(), device="cpu", options=OPTIONS,
                  candidate_name=candidate)


def test_spread_spans_its_decades_with_both_signs_in_every_row() -> None:
    x = make_tensor([8, 300], torch.float32, "spread", _generator(0, "spread", 0))
    lo, hi = SPREAD_DECADES
    mag = x.abs()
    assert float(mag.min()) >= 10 ** lo * 0.999 and float(mag.max()) <= 10 ** hi * 1.001
    assert bool((x.amax(dim=1) > 100).all()) and bool((x.amin(dim=1) < -100).all())  # far from zero both ways
    y = fill_(torch.empty(8, 300), "spread", _generator(0, "spread", 0))
    assert float(y.abs().max()) <= 10 ** hi * 1.001 and bool((y < 0).any()) and bool((y > 0).any())


def test_zeros_has_whole_rows_columns_and_samples_of_zeros() -> None:
    x = make_tensor([6, 5, 9], torch.float32, "zeros", _generator(0, "zeros", 0))
    for d in range(x.dim()):
        assert bool((x.index_select(d, torch.arange(1, x.shape[d], ZERO_STRIDE)) == 0).all())
    big = make_tensor([16, 12, 20], torch.float32, "zeros", _generator(0, "zeros", 0))
    off = [torch.arange(n) % ZERO_STRIDE != 1 for n in big.shape]
    rest = big[off[0]][:, off[1]][:, :, off[2]]
    assert 0 < int((rest == 0).sum()) < rest.numel() // 4  # some at random elsewhere, most not
    y = fill_(torch.empty(6, 5, 9), "zeros", _generator(0, "zeros", 0))
    assert bool((y[1] == 0).all()) and bool((y[:, :, 5] == 0).all())


def test_a_partial_redraw_names_one_input_position() -> None:
    assert split_redraw("normal@1") == ("normal", 1) and split_redraw("ties") == ("ties", None)
    assert base_distribution("spread@0") == "spread"
    with pytest.raises(WorkerError):
        split_redraw("normal@x")
    assert inputs_label("normal@1") == "normal at get_inputs()[1]"
    assert inputs_phrase("normal@1") == "get_inputs() inputs with get_inputs()[1] redrawn normal"


def test_partial_redraws_follow_only_a_whole_redraw_that_left_the_domain() -> None:
    domain = TruthDomain("module")
    domain.record("v", "module", 0, "own", ("t",), None)
    domain.record("v", "normal", 0, "n", ("u",), "output 0: 3 NaN of 10 element(s)")
    domain.record("v", "ties", 0, "t", ("w",), None)
    assert domain.partial_redraws({"v": [0, 1]}, 0) == [("v", "normal@0"), ("v", "normal@1")]
    assert domain.partial_redraws({"v": [0]}, 0) == []  # one input: the whole redraw is that input's
    domain.record("v", "normal@0", 0, "n0", ("x",), None)
    assert domain.partial_redraws({"v": [0, 1]}, 0) == [("v", "normal@1")]  # each once
    assert TruthDomain("normal").partial_redraws({"v": [0, 1]}, 0) == []  # a spec's inputs have no domain


@pytest.mark.parametrize("problem,wrong,right,where", [
    ("row_softmax.py", "row_softmax_first_block_max.py", "row_softmax_online.py", "spread inputs"),
    ("log_times_relu.py", "log_times_relu_dropped.py", "log_times_relu_kept.py", "with get_inputs()[1] redrawn"),
])
def test_a_kernel_wrong_only_on_values_the_problem_never_draws_is_wrong(problem: str, wrong: str, right: str,
                                                                        where: str) -> None:
    bad = _verify(problem, wrong)
    assert bad.kind is VerdictKind.WRONG_ANSWER and where in bad.reason, bad.reason
    assert all(r.passed for r in bad.correctness if r.distribution == "module")  # right on its own inputs
    good = _verify(problem, right)
    assert good.kind is VerdictKind.OK, good.reason


@pytest.mark.parametrize("problem,wrong,where", [
    ("log_sigmoid.py", "log_sigmoid_naive.py", "spread inputs"),
    ("sign_plus.py", "sign_plus_zero_positive.py", "zeros inputs"),
    ("rms_norm.py", "rms_norm_no_eps.py", "zeros inputs"),
])
def test_large_negatives_and_exact_zeros_are_drawn(problem: str, wrong: str, where: str) -> None:
    bad = _verify(problem, wrong)
    assert bad.kind is VerdictKind.WRONG_ANSWER and where in bad.reason, bad.reason


def test_a_redraw_keeps_the_rows_the_problem_sorts() -> None:
    edges = torch.sort(torch.randn(24)).values
    redraw = impose_structure_(torch.randn(24), input_structure(edges))
    assert bool((redraw[1:] >= redraw[:-1]).all())
    falling = impose_structure_(torch.randn(3, 10), input_structure(torch.arange(30.0).view(3, 10).flip(-1)))
    assert bool((falling[:, 1:] <= falling[:, :-1]).all())
    assert input_structure(torch.arange(4.0))[2] == 0  # one draw of 4: chance sorts it one time in 24
    assert input_structure(torch.ones(12))[2] == 0  # equal values: no order to keep
    causal = torch.tril(torch.ones(16, 16))  # a 0/1 mask is monotone, not sorted: its zeros stay in place
    mask, _, order = input_structure(causal)
    assert order == 0 and torch.equal(impose_structure_(torch.randn(16, 16), (mask, False, order)) == 0, causal == 0)
    # a few edges: sorted in further draws too, until chance would rarely sort them all
    edges = [torch.sort(torch.randn(3)).values]
    assert sorted_inputs(edges, lambda s: [torch.sort(torch.randn(3)).values], 0) == {0: 1}
    assert sorted_inputs(edges, lambda s: [torch.randn(3) * 0 + torch.tensor([2.0, 1.0, 3.0])], 0) == {}
    verdict = _verify("bucketize.py", "bucketize_count.py")  # counts edges below: right for sorted edges
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert {r.distribution for r in verdict.correctness} >= {"normal", "spread", "zeros"}


def test_partial_redraws_run_on_a_variant_before_the_next_variant_refuses_its_size() -> None:
    """The relu dropped on weights is seen at the published shape before the derived sizes,
    which the kernel's fixed view refuses, end the run."""
    bad = _verify("log_times_relu.py", "log_times_relu_dropped_fixed_shape.py")
    assert bad.kind is VerdictKind.WRONG_ANSWER and "redrawn normal" in bad.reason, bad.reason


def test_a_nan_on_spread_is_excused_only_for_an_allowed_float16_accumulator() -> None:
    """Inf - Inf is what a float16 accumulator meets summing spread's large terms of both signs;
    a NaN with float16 operands alone is an unstable formula (a softmax's Inf / Inf)."""
    from xeforge_core.worker.roles import _range_excuse

    nan = [torch.tensor([1.0, float("nan")])]
    inf = [torch.tensor([1.0, float("inf")])]
    assert _range_excuse("spread", nan, ["fp16"], ["fp16"]) == ""
    assert _range_excuse("spread", nan, ["fp16-accumulation"], ["fp16-accumulation"])
    assert _range_excuse("spread", inf, ["fp16"], ["fp16"]) and _range_excuse("shifted", inf, ["fp16"], ["fp16"])
    assert _range_excuse("shifted", nan, ["fp16-accumulation"], ["fp16-accumulation"]) == ""
    assert _range_excuse("zeros", inf, ["fp16"], ["fp16"]) == ""  # not far from zero


def test_rowwise_gives_each_row_its_own_scale_and_sign() -> None:
    gen = _generator(0, "rowwise", 0)
    x = make_tensor([600, 50], torch.float32, "rowwise", gen)
    scales = x.abs().amax(dim=1)
    assert scales.min() < 1e-3 and scales.max() > 3.0  # rows about 1e-4 and about 10 wide
    negative, positive = (x < 0).all(dim=1), (x > 0).all(dim=1)
    assert 150 < int(negative.sum()) < 250 and 150 < int(positive.sum()) < 250
    big = fill_(torch.empty(600, 50), "rowwise", _generator(0, "rowwise", 0))
    assert (big < 0).all(dim=1).any() and (big.abs().amax(dim=1) < 1e-3).any()


@pytest.mark.parametrize(("problem", "wrong", "right"), [
    ("rms_norm.py", "rms_norm_eps_outside.py", None),  # rms_norm_no_eps and the correct kernel: above
    ("row_max.py", "row_max_pad_zero.py", "row_max_pad_inf.py"),
])
def test_a_kernel_wrong_only_on_a_whole_row_of_one_scale_or_sign_is_a_wrong_answer(problem, wrong, right) -> None:
    """``sqrt(ms) + eps`` in place of ``sqrt(ms + eps)``, and masked lanes padded with 0 before a
    maximum, are right on every row of values about 1 of both signs (``mixed`` and ``spread``
    vary magnitudes within a row); ``rowwise`` rows of small values and of negatives show them."""
    verdict = _verify(problem, wrong)
    assert verdict.kind is VerdictKind.WRONG_ANSWER and "rowwise inputs" in verdict.reason, verdict.reason
    if right:
        assert _verify(problem, right).kind is VerdictKind.OK
