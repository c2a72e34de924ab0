"""The ``ties`` redraw (``worker/inputs.py``): 16 values, so equal values abound. A row argmax
that keeps the last of equal maxima (torch keeps the first) matches on continuous inputs, where
no two values tie, and is a wrong answer on ties, with the reason saying what ties show; the
kernel that keeps the first is ok. Where torch leaves the order among equal values undefined
(``torch.topk``), ties judge nothing, and the redraw is left out saying so."""

from __future__ import annotations

from pathlib import Path

import torch

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.domain import redraw_seeds
from xeforge_core.worker.inputs import TIE_LEVELS, fill_, make_tensor
from xeforge_core.worker.tie_order import undefined_on_ties, watch

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
    assert "ties inputs" in wrong.reason and "keeps the first of equal maxima" in wrong.reason, wrong.reason
    assert all(r.passed for r in wrong.correctness if r.distribution != "ties")  # no ties elsewhere
    right = verify(problem, (FIX / "argmax_new.py").read_text(), device="cpu", options=OPTIONS)
    assert right.kind is VerdictKind.OK, right.reason
    assert {r.distribution for r in right.correctness} == {"module", "normal", "ties"}
    assert "--own-inputs-only" not in wrong.reason  # a contract torch documents, not a domain to opt out of


def test_calls_whose_order_among_equal_values_torch_leaves_open_are_seen():
    assert undefined_on_ties("topk", (torch.ones(3), 2), {})
    assert undefined_on_ties("sort", (torch.ones(3),), {}) and not undefined_on_ties("sort", (torch.ones(3),),
                                                                                     {"stable": True})
    assert undefined_on_ties("max", (torch.ones(3), 0), {}) and not undefined_on_ties("max", (torch.ones(3),), {})
    assert not undefined_on_ties("argmax", (torch.ones(3),), {"dim": 0})  # documented: the first
    x = torch.ones(4, 4)
    with watch() as seen:
        x.topk(2, dim=1)
        torch.nn.functional.max_pool1d(x[None], 2, return_indices=True)
        torch.sort(x, stable=True)
        x.argmax(dim=1)
    assert seen == ["topk", "max_pool1d_with_indices"], seen


def test_a_correct_topk_is_not_judged_on_ties():
    problem = load_problem(FIX / "topk.py")
    verdict = verify(problem, (FIX / "topk_new.py").read_text(), device="cpu", options=OPTIONS)
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert "ties" not in {r.distribution for r in verdict.correctness}
    assert any("calls torch.topk, which leaves the order among equal values undefined" in w
               for w in verdict.warnings), verdict.warnings
