"""The ``ties`` redraw (``worker/inputs.py``): 16 values, so equal values abound. A row argmax
that keeps the last of equal maxima (torch keeps the first) matches on continuous inputs, where
no two values tie, and is a wrong answer on ties, with the reason saying what ties show; the
kernel that keeps the first is ok; a max over a dimension, whose index torch documents as the
first too, is judged alike. Where the truth's results depend on what torch leaves undefined among
equal values (``torch.topk``'s indices), ties judge nothing, and the redraw is left out saying so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.domain import redraw_seeds
from xeforge_core.worker.inputs import TIE_LEVELS, fill_, make_tensor
from xeforge_core.worker.tie_order import watch

FIX = Path(__file__).parent / "fixtures" / "ties"
OPTIONS = VerifyOptions(seeds=1, use_cache=False, timeout_s=120.0)


def test_ties_take_few_values_none_zero_the_same_on_the_host_and_in_place():
    g = torch.Generator().manual_seed(0)
    x = make_tensor([4096], torch.float32, "ties", g)
    values = torch.unique(x)
    assert len(values) == TIE_LEVELS and bool((values != 0).all()) and float(x.abs().max()) < 1
    assert torch.equal(values * TIE_LEVELS / 2 - 0.5, torch.round(values * TIE_LEVELS / 2 - 0.5))
    y = fill_(torch.empty(4096, dtype=torch.float16), "ties", torch.Generator().manual_seed(0))
    assert len(torch.unique(y)) == TIE_LEVELS  # exact in half precision too
    # a stress redraw: one seed, as the shifted one
    assert redraw_seeds(["ci", "ties"], [0, 1]) == {"ci": [0, 1], "ties": [0]}


def test_an_argmax_keeping_the_last_of_equal_maxima_is_wrong_on_ties():
    problem = load_problem(FIX / "argmax.py")
    wrong = verify(problem, (FIX / "argmax_last.py").read_text(), device="cpu", options=OPTIONS,
                   candidate_name="argmax_last.py")
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "ties inputs" in wrong.reason and "the first of equal maxima for argmax" in wrong.reason, wrong.reason
    # no ties elsewhere but in the zeros redraw's rows of zeros
    assert all(r.passed for r in wrong.correctness if r.distribution not in ("ties", "zeros"))
    right = verify(problem, (FIX / "argmax_new.py").read_text(), device="cpu", options=OPTIONS)
    assert right.kind is VerdictKind.OK, right.reason
    assert {r.distribution for r in right.correctness} == {"module", "normal", "ties", "shifted", "spread", "zeros",
                                                          "rowwise"}
    assert "--own-inputs-only" not in wrong.reason  # a contract torch documents, not a domain to opt out of


def _settled(truth) -> tuple[str, ...]:
    with watch() as seen:
        out = truth()
    return seen.settle(out)


X = torch.tensor([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])


def _into_buffer(index) -> torch.Tensor:
    out = torch.zeros(2, 3)
    out.scatter_(1, index, 1.0)
    return out


def _through_a_view(index) -> torch.Tensor:
    out = torch.zeros(2, 3)
    for r in range(2):
        out[r].scatter_(0, index[r], 1.0)
    return out


def _gradient_of_topk() -> torch.Tensor:
    x = X.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(x.topk(1, dim=1).values.sum(), x)
    return grad


@pytest.mark.parametrize("truth, undefined", [
    # documented on ties: max/min over a dimension and argmax keep the first, a stable sort the order
    (lambda: torch.max(X, 1), ()),
    (lambda: X.argmax(dim=1), ()),
    (lambda: X.sort(stable=True)[1], ()),
    # the values of calls whose indices are open are defined
    (lambda: X.topk(2, dim=1).values, ()),
    (lambda: torch.sort(X)[0] * 2, ()),
    (lambda: torch.msort(X), ()),
    (lambda: F.max_pool1d(X[None], 2, return_indices=True)[0], ()),
    # open indices reaching the results, through any computation
    (lambda: X.topk(2, dim=1).indices, ("topk",)),
    (lambda: X.topk(2, dim=1, sorted=False).values, ("topk",)),  # unsorted: the values' order too
    (lambda: torch.sort(X)[1].float() + 1, ("sort",)),
    (lambda: X.gather(1, X.argsort(dim=1)), ("argsort",)),
    (lambda: F.max_pool1d(X[None], 2, return_indices=True), ("max_pool1d_with_indices",)),
    (lambda: torch.median(X, 1).indices.sum().item(), ("median",)),  # read into Python
    (lambda: _into_buffer(X.topk(1, dim=1).indices), ("topk",)),  # written in place
    (lambda: _through_a_view(X.topk(1, dim=1).indices), ("topk",)),  # into a view of the result
    (lambda: torch.zeros(2, 3).view(-1).copy_(X.sort()[1].float().view(-1)), ("sort",)),
    (_gradient_of_topk, ("topk",)),  # the gradient lands where the indices say
    (lambda: torch.ops.aten.topk.default(X, 1)[1], ("topk",)),
    (lambda: X.sort()[1][X.sort()[1] > 0].shape[0], ("sort",)),  # a size the open indices decide
    (lambda: X.sort()[1].dtype, ()),
    (lambda: torch.argsort(X).shape, ("argsort",)),  # sizes are not told from those values decide
])
def test_a_truth_is_undecidable_on_ties_only_where_what_torch_leaves_open_reaches_its_results(truth, undefined):
    assert _settled(truth) == undefined


def test_a_max_over_a_dimension_keeping_the_last_of_equal_maxima_is_wrong_on_ties():
    problem = load_problem(FIX / "rowmax.py")
    wrong = verify(problem, (FIX / "rowmax_last.py").read_text(), device="cpu", options=OPTIONS)
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "ties inputs" in wrong.reason, wrong.reason


def test_a_correct_topk_is_not_judged_on_ties():
    problem = load_problem(FIX / "topk.py")
    verdict = verify(problem, (FIX / "topk_new.py").read_text(), device="cpu", options=OPTIONS)
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert "ties" not in {r.distribution for r in verdict.correctness}
    assert any("depend on what torch.topk keeps among equal values, which torch leaves undefined" in w
               for w in verdict.warnings), verdict.warnings
