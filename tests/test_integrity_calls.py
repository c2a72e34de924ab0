"""The caching checks' calls (``worker.roles._structure_runtime``) against state kept between
calls, in Triton's interpreter: a second call whose inputs differ from the first only inside,
and a third call before the first output is looked at again."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.integrity import SPLICED_ENDS, splice_ends

FIXTURES = Path(__file__).parent / "fixtures" / "caches"


@pytest.mark.parametrize("name, rule", [("ends_cache", "cached_output"), ("alternating", "reused_output_buffer")])
def test_state_kept_between_calls_is_caught(name, rule):
    """A cache keyed on the shape and the end elements, and two output buffers returned in turn,
    were both called ok with two calls of unrelated inputs."""
    verdict = verify(load_problem(FIXTURES / "scale_problem.py"), (FIXTURES / f"{name}.py").read_text(),
                     device="cpu", options=VerifyOptions(seeds=1, measure_performance=False, use_cache=False))
    assert verdict.kind.value == "cheating" and rule in verdict.reason, verdict.reason


def test_an_output_that_is_a_view_of_an_input_is_not_a_reused_buffer():
    """The third call refills the first call's input tensors: an output that is a view of one of
    them changes with it, as the reference's own does."""
    verdict = verify(load_problem(FIXTURES / "view_problem.py"), (FIXTURES / "view_candidate.py").read_text(),
                     device="cpu", options=VerifyOptions(seeds=1, measure_performance=False, use_cache=False))
    assert verdict.kind.value == "ok", verdict.reason


def test_splice_ends_keeps_the_inside_and_skips_what_it_cannot_match():
    first, second = torch.arange(80.0), torch.zeros(80)
    odd = torch.zeros(4, 5).t()  # not contiguous: left alone
    assert splice_ends([second, odd, 3], [first, torch.ones(5, 4), 3]) == 1
    k = min(SPLICED_ENDS, 80 // 8)
    assert torch.equal(second[:k], first[:k]) and torch.equal(second[-k:], first[-k:])
    assert not second[k:-k].any() and not odd.any()


def test_inputs_whose_shapes_follow_the_draw_are_not_mixed_across_draws():
    """Packed variable-length segments (lightllm's token softmax, FlashAttention's varlen form):
    the packed logits' length is drawn, the offsets' shape is not. The third call refilled the
    first call's tensors only where the shapes matched, so the offsets of one draw met the logits
    of another and a correct kernel read and wrote past its segments (a heap corruption, or
    ``cached_output``). Where the draws' shapes differ the third call is not made."""
    verdict = verify(load_problem(FIXTURES / "packed_problem.py"), (FIXTURES / "packed_candidate.py").read_text(),
                     device="cpu", options=VerifyOptions(seeds=1, measure_performance=False, use_cache=False))
    assert verdict.kind.value == "ok", verdict.reason


def test_splice_ends_keeps_the_structure_of_integer_tensors():
    """Integer inputs are often structure (offsets that must rise, indices that must be
    distinct): such a tensor is spliced only where the result keeps it. Offsets spliced from
    another draw that rise past the first's middle are left whole; unstructured integers (a cache
    keyed on an integer input's end elements) are spliced."""
    offsets, first = torch.arange(0, 800, 10), torch.arange(0, 1600, 20)
    values = torch.zeros(80)
    assert splice_ends([offsets, values], [first, torch.ones(80)]) == 1
    assert torch.equal(offsets, torch.arange(0, 800, 10)) and values[0] == 1
    perm, other = torch.randperm(80, generator=torch.Generator().manual_seed(0)), torch.arange(80)
    before = perm.clone()
    assert splice_ends([perm], [other]) == 0 and torch.equal(perm, before)  # a permutation stays one
    ids = torch.randint(0, 9, (80,), generator=torch.Generator().manual_seed(1))
    other_ids = torch.randint(0, 9, (80,), generator=torch.Generator().manual_seed(2))
    assert splice_ends([ids], [other_ids]) == 1 and torch.equal(ids[:10], other_ids[:10])
    # offsets that end at a packed length the data beside them has: where the data's length
    # differs between the draws, the offsets keep their own draw (spliced, they rose and ended
    # past the data, and a correct segment sum read beyond it)
    offs_b, offs_a = torch.tensor([0, 5, 9, 20, 26, 30, 41, 47, 52]), torch.tensor([0, 3, 8, 15, 22, 31, 40, 44, 60])
    data_b, data_a = torch.randn(52), torch.randn(60)
    assert splice_ends([data_b, offs_b], [data_a, offs_a]) == 0 and offs_b[-1] == 52
