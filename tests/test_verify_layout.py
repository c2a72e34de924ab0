"""A redraw keeps the memory layout the problem poses its inputs in: a kernel written for a
column-major input the problem hands over at every seed is right, at every distribution."""

from __future__ import annotations

from pathlib import Path

import torch

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.inputs import with_layout

FIX = Path(__file__).parent / "fixtures" / "layout"


def test_a_redraw_takes_the_strides_and_broadcasts_of_the_problems_input() -> None:
    values = torch.randn(4, 3)
    transposed = with_layout(values, torch.randn(3, 4).t())
    assert transposed.stride() == (1, 4) and torch.equal(transposed, values)
    broadcast = with_layout(values, torch.randn(1, 3).expand(4, 3))
    assert broadcast.stride() == (0, 1) and torch.equal(broadcast, values[:1].expand(4, 3))
    gapped = with_layout(values, torch.randn(4, 6)[:, ::2])
    assert gapped.stride() == (6, 2) and torch.equal(gapped, values)


def test_a_kernel_written_for_the_posed_layout_is_right() -> None:
    options = VerifyOptions(seeds=1, use_cache=False, measure_performance=False)
    verdict = verify(load_problem(FIX / "colsum_t.py"), (FIX / "colsum_t_colmajor.py").read_text(), device="cpu",
                     options=options)
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert {r.distribution for r in verdict.correctness} >= {"normal", "ties"}, verdict.correctness
