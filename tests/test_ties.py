"""The ``ties`` redraw (``worker/inputs.py``): 16 values, so equal values abound. A row argmax
that keeps the last of equal maxima (torch keeps the first) matches on continuous inputs, where
no two values tie, and is a wrong answer on ties, with the reason saying what ties show; the
kernel that keeps the first is ok."""

from __future__ import annotations

from pathlib import Path

import torch

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.domain import redraw_seeds
from xeforge_core.worker.inputs import TIE_LEVELS, fill_, make_tensor

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
