"""The second fill of fresh memory (``xeforge_core.worker.fresh_fill``): kernels whose outputs are
right only because the poison of fresh memory was the value they needed are wrong answers, and
their correct twins stay ``ok``.

* ``quant_kernel.py`` with ``SKIP_MAX``: a per-row int8 quantiser that leaves its 127s unwritten;
  127 is int8's poison.
* ``rowmin_kernel.py`` with ``INIT_EMPTY``: ``tl.atomic_min`` into a ``torch.empty`` output; the
  int32 poison is the minimum's identity.
* ``rowmax_kernel.py`` with ``INIT_EMPTY``: a running maximum started from a ``torch.empty``
  output with ``tl.where(m > c, m, c)``, which passes over a NaN start."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.fresh_fill import Allocation, FirstCall, FreshMemory, reads_fresh, truth_holds_poison

FIX = Path(__file__).parent / "fixtures" / "fresh_fill"
OPTIONS = VerifyOptions(seeds=1, use_cache=False, timeout_s=240.0)
CASES = [("quant", "quant_kernel", "SKIP_MAX"), ("rowmin", "rowmin_kernel", "INIT_EMPTY"),
         ("rowmax", "rowmax_kernel", "INIT_EMPTY")]


@pytest.mark.parametrize(("problem", "kernel", "flag"), CASES)
def test_a_kernel_right_only_under_the_poison_is_a_wrong_answer(problem, kernel, flag):
    source = (FIX / f"{kernel}.py").read_text()
    right = verify(load_problem(FIX / f"{problem}.py"), source, device="cpu", options=OPTIONS)
    assert right.kind is VerdictKind.OK, right.reason
    wrong = verify(load_problem(FIX / f"{problem}.py"), source.replace(f"{flag} = False", f"{flag} = True"),
                   device="cpu", options=OPTIONS)
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "fresh memory filled again with other values" in wrong.reason and "never written" in wrong.reason


def test_the_second_call_is_made_only_where_it_can_matter():
    """The quantiser's truth holds 127, so its correct kernel is called again (and passes); the
    row maximum stores into ``torch.empty`` without reading it, so no second call is made."""
    quant = verify(load_problem(FIX / "quant.py"), (FIX / "quant_kernel.py").read_text(), device="cpu",
                   options=OPTIONS)
    step = next(s for s in quant.steps if s.name == "correctness")
    assert "expected values include 127" in step.evidence["second_fill"]
    rowmax = verify(load_problem(FIX / "rowmax.py"), (FIX / "rowmax_kernel.py").read_text(), device="cpu",
                    options=OPTIONS)
    step = next(s for s in rowmax.steps if s.name == "correctness")
    assert rowmax.kind is VerdictKind.OK and "second_fill" not in step.evidence


def test_the_second_fill_values_and_what_triggers_it():
    with FreshMemory(refill=True) as mode:
        ints = torch.empty(5, dtype=torch.int8)
        flags = torch.empty_like(torch.ones(3, dtype=torch.bool))
        floats = torch.zeros(1).new_empty((2, 3), dtype=torch.float16)
        strided = torch.empty_strided((2, 2), (1, 2))
        torch.zeros(4)  # initialised: not recorded
    assert ints.tolist() == [-128] * 5 and flags.tolist() == [False] * 3
    assert floats.flatten().tolist() == [65504.0, -65504.0] * 3
    assert sorted(strided.flatten().tolist()) == [-torch.finfo(torch.float32).max] * 2 + [torch.finfo(torch.float32).max] * 2
    assert [a.dtype for a in mode.allocations] == [torch.int8, torch.bool, torch.float16, torch.float32]
    assert truth_holds_poison([torch.tensor([1.0]), torch.tensor([3, 127], dtype=torch.int8)]).startswith("output 1")
    assert truth_holds_poison([torch.tensor([True, False])]) is not None
    assert truth_holds_poison([torch.tensor([3, 126], dtype=torch.int8), torch.tensor([float("nan")])]) is None
    assert reads_fresh([Allocation(100, 200, torch.int8)], {(150, 160)})
    assert not reads_fresh([Allocation(100, 200, torch.int8)], {(200, 260), (0, 100)})
    # on a GPU (no interpreter bounds check follows the reads) any uninitialised allocation owes it
    gpu = FirstCall(allocations=[Allocation(0, 8, torch.float32)], read_spans=None)
    assert gpu.why_refill([torch.zeros(2)]) == "the call allocated memory it did not initialise"
    assert FirstCall(allocations=[Allocation(0, 8, torch.float32)], read_spans=set()).why_refill([torch.zeros(2)]) is None
