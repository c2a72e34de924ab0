"""The truth's effects beyond its outputs (``xeforge_core.worker.effects``): inputs it modifies
in place and buffers it updates are compared after the call, in Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify

FIXTURES = Path(__file__).parent / "fixtures" / "effects"
OPTIONS = VerifyOptions(seeds=1, measure_performance=False, use_cache=False)

WRITE_BACK = ("tl.store(out_ptr + offs, tl.maximum(s, 0.0), mask=mask)",
              "tl.store(out_ptr + offs, tl.maximum(s, 0.0), mask=mask)\n    tl.store(acc_ptr + offs, s, mask=mask)")
UPDATE_STATS = ("        return out\n",
                "        m = self.bn.momentum\n"
                "        with torch.no_grad():\n"
                "            self.bn.running_mean.mul_(1 - m).add_(m * mean)\n"
                "            self.bn.running_var.mul_(1 - m).add_(m * var * rows / (rows - 1))\n"
                "            self.bn.num_batches_tracked.add_(1)\n"
                "        return out\n")


@pytest.mark.parametrize("name, what, fix", [
    ("accumulate", "input 1 after the call", WRITE_BACK),
    ("batchnorm", "buffer bn.running_mean after the call", UPDATE_STATS),
])
def test_an_effect_the_candidate_leaves_out_is_a_wrong_answer(name, what, fix):
    """The reference adds into an accumulator passed in (``acc.add_(x)``) or updates a
    training-mode BatchNorm's running statistics; a candidate returning the right tensor without
    that effect is wrong, the reason naming the input or buffer; with it, it is ok."""
    problem = load_problem(FIXTURES / f"{name}_problem.py")
    source = (FIXTURES / f"{name}_candidate.py").read_text()
    verdict = verify(problem, source, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert what in verdict.reason and "changes it during forward()" in verdict.reason, verdict.reason
    fixed = source.replace(*fix)
    assert fixed != source
    verdict = verify(problem, fixed, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "ok", verdict.reason


@pytest.mark.parametrize("problem, candidate", [
    ("workspace_problem.py", "workspace_candidate.py"),
    ("accumulate_first_problem.py", "accumulate_first_function.py"),
    ("swish_in_place_problem.py", "swish_in_place_function.py"),
])
def test_a_workspace_buffer_and_an_effect_through_a_kernel_function_are_not_held_against_a_right_kernel(
        problem, candidate):
    """A buffer the reference overwrites on every call (its value after the call does not depend
    on its value before) is a workspace, not state; a KernelAgent ``kernel_function`` that writes
    the accumulator passed first and returns its result has the reference's effect, and so has
    one that writes its input in place and returns it where the reference does the same."""
    verdict = verify(load_problem(FIXTURES / problem), (FIXTURES / candidate).read_text(), device="cpu",
                     options=OPTIONS)
    assert verdict.kind.value == "ok", verdict.reason


def test_a_kernel_that_works_in_place_where_the_reference_does_not_is_wrong_and_says_its_values_match():
    """An in-place kernel (written for a caller that allows it, as a RoPE applied to its query
    tensor is) checked against an out-of-place reference: the caller's tensor changes, so it is a
    wrong answer for this problem, and the reason says that its outputs match, after comparing
    them; where the values are wrong too, that is the reason and the side effect is named after it."""
    problem = load_problem(FIXTURES / "swish_problem.py")
    source = (FIXTURES / "swish_in_place_candidate.py").read_text()
    verdict = verify(problem, source, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert "input 0 in place" in verdict.reason and "the reference leaves that input unchanged" in verdict.reason, verdict.reason
    assert "its outputs match the reference on" in verdict.reason, verdict.reason
    assert [s.status.value for s in verdict.steps][1:3] == ["failed", "passed"], verdict.steps
    wrong = source.replace("1.0 + tl.math.exp2", "2.0 + tl.math.exp2")
    assert wrong != source
    verdict = verify(problem, wrong, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert verdict.reason.startswith("wrong answer on variant"), verdict.reason
    assert "besides, it modified its input 0 in place" in verdict.reason, verdict.reason


def test_an_input_the_reference_leaves_unchanged_is_judged_apart_from_one_it_changes(tmp_path):
    """The reference scales its input y in place; a candidate that also writes x, which the
    reference leaves unchanged, is wrong: a side effect is excused per input, not because the
    reference has some side effect."""
    problem = tmp_path / "scale_y_problem.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x, y):\n"
        "        y.mul_(0.5)\n        return x * 2.0 + 1.0 + y\n\n\nN = 4096\n\n\n"
        "def get_inputs():\n    return [torch.randn(N), torch.randn(N)]\n\n\ndef get_init_inputs():\n    return []\n")
    candidate = (
        "import torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    m = offs < n\n    y = tl.load(y_ptr + offs, mask=m) * 0.5\n    tl.store(y_ptr + offs, y, mask=m)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0 + 1.0 + y, mask=m)\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x, y):\n"
        "        k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n        return x.clone()\n")
    verdict = verify(load_problem(problem), candidate, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert "input 0 in place" in verdict.reason and "its outputs match" in verdict.reason, verdict.reason
    fixed = candidate.replace("    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0 + 1.0 + y, mask=m)\n",
                              "    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0 + 1.0 + y, mask=m)\n"
                              ).replace("x_ptr, y_ptr, n,", "x_ptr, y_ptr, o_ptr, n,").replace(
        "](x, y, x.numel(), BLOCK=1024)\n        return x.clone()", "](x, y, o, x.numel(), BLOCK=1024)\n        return o"
    ).replace("    def forward(self, x, y):\n", "    def forward(self, x, y):\n        o = x.new_empty(x.shape)\n")
    verdict = verify(load_problem(problem), fixed, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "ok", verdict.reason


def test_a_batchnorm_candidate_need_not_count_batches_its_momentum_never_reads():
    """``num_batches_tracked`` is read only where ``momentum`` is None (PyTorch's _BatchNorm)."""
    source = (FIXTURES / "batchnorm_candidate.py").read_text().replace(
        *UPDATE_STATS[:1], UPDATE_STATS[1].replace("            self.bn.num_batches_tracked.add_(1)\n", ""))
    verdict = verify(load_problem(FIXTURES / "batchnorm_problem.py"), source, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "ok", verdict.reason


def test_buffers_are_matched_by_their_last_name_and_shape():
    """A candidate holding the BatchNorm under another attribute name is still compared."""
    import torch

    from xeforge_core.worker.effects import buffer_digests, find_buffer, make, observe
    from xeforge_core.worker.effects import digests as arg_digests

    class Truth(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(3)

    class Candidate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.BatchNorm1d(3)
            self.other = torch.nn.BatchNorm1d(5)

    truth, x = Truth(), torch.randn(4, 3)
    before = arg_digests([x])
    buffers = buffer_digests(truth)
    truth.bn(x)
    found = observe(before, [x], buffers, truth)
    assert found == make((), ("bn.running_mean", "bn.running_var"))  # the batch count: momentum is set
    cand = Candidate()
    assert find_buffer(cand, "bn.running_mean", (3,)) is cand.norm.running_mean
    assert find_buffer(cand, "bn.running_mean", None) is None  # two running_mean: ambiguous without a shape


def test_a_triton_baseline_without_the_references_effect_makes_the_problem_inconsistent():
    """The reference modifies its first input in place; a Triton baseline that does not is not the
    same problem: a candidate with the effect matches the reference and the verdict says the
    baseline disagrees, rather than calling the candidate a cheat for modifying its input."""
    problem = load_problem(FIXTURES / "accumulate_first_baseline.py",
                           reference_path=FIXTURES / "accumulate_first_problem.py")
    source = (FIXTURES / "accumulate_first_function.py").read_text()
    verdict = verify(problem, source, device="cpu", options=OPTIONS)
    assert verdict.kind.value == "inconsistent", verdict.reason
    assert any("modifies input(s) [0] in place, the baseline none" in w for w in verdict.warnings), verdict.warnings
