"""A baseline whose kernel reads past the end of one of its tensors computes part of its output
from memory nothing wrote; the verifier says so and blames the baseline (inconclusive), instead
of calling a candidate that computes the same thing a wrong answer.

The fixture is a per-column scale whose length the spec's ``inits`` give independently of the
number of columns the kernel reads (the class of a spec whose inits do not fit the constructor).
"""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from xeforge_core.cli import main
from xeforge_core.worker.truth_memory import unwritten_truth

KERNEL = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    @triton.jit
    def _col_scale(x_ptr, s_ptr, y_ptr, M, N, BLOCK_N: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
        s = tl.load(s_ptr + cols, mask=mask, other=0.0)  # s holds {n_scale} elements, not N
        tl.store(y_ptr + row * N + cols, x * s, mask=mask)


    class Model(nn.Module):
        def __init__(self, n_scale):
            super().__init__()
            self.scale = nn.Parameter(torch.randn(int(n_scale)))

        def forward(self, x):
            M, N = x.shape
            y = torch.empty_like(x)
            _col_scale[(M,)](x, self.scale, y, M, N, BLOCK_N=triton.next_power_of_2(N))
            return y
''')

SPEC = textwrap.dedent('''
    inputs:
      X:
        shape: [ROWS, COLS]
        dtype: float32
    inits:
      - dim: SCALE_LEN
    ci:
      - params: [X]
        dims:
          ROWS: 3
          COLS: 24
          SCALE_LEN: {scale_len}
''')


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))


def _verify(capsys, tmp_path, scale_len: int) -> tuple[int, dict]:
    base = tmp_path / f"col_scale_{scale_len}.py"
    base.write_text(KERNEL, encoding="utf-8")
    base.with_suffix(".yaml").write_text(SPEC.format(scale_len=scale_len), encoding="utf-8")
    code = main(["verify", str(base), str(base), "--device", "cpu", "--json", "--seeds", "1", "--no-odd-size"])
    return code, json.loads(capsys.readouterr().out)


def test_a_baseline_reading_past_a_tensor_is_blamed_not_the_candidate(capsys, tmp_path):
    """Verified against itself, the faulty kernel is the candidate too: every call of a candidate
    is bounds-checked in the interpreter, so its own read past ``s`` makes it a wrong answer, and
    the reason still says the baseline's output is not determined by its inputs."""
    code, v = _verify(capsys, tmp_path, scale_len=5)
    assert (code, v["kind"]) == (1, "wrong_answer"), v["reason"]
    assert v["reason"].startswith("out-of-bounds read found by the memory checker: kernel _col_scale")
    assert "the baseline's output is not determined by its inputs and weights" in v["reason"]
    assert "the baseline's own kernel _col_scale reads out of bounds" in v["reason"]
    assert "argument s_ptr" in v["reason"]
    assert "not the candidate's" in v["reason"]
    baseline_steps = [w for w in v["warnings"] if w.startswith("baseline:") and "reads out of bounds" in w]
    assert baseline_steps, v["warnings"]


def test_the_same_kernel_with_a_tensor_of_the_right_size_verifies(capsys, tmp_path):
    code, v = _verify(capsys, tmp_path, scale_len=24)
    assert (code, v["kind"]) == (0, "ok"), v["reason"]


class _GpuOps:
    interpreter = False

    def __init__(self) -> None:
        self.poisoned = 0

    def poison_allocator(self, nbytes: int) -> None:
        self.poisoned += 1


def test_on_a_gpu_poison_surfacing_in_a_fresh_call_names_the_elements():
    first = [torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])]
    again = [torch.tensor([[1.0, float("nan"), float("nan")], [4.0, float("nan"), 6.0]])]
    ops = _GpuOps()
    note = unwritten_truth(ops, lambda: again, first, "baseline", "ci-tiles")
    assert ops.poisoned == 1
    assert note is not None and "on variant ci-tiles 3 element(s) of the baseline's own output" in note
    assert unwritten_truth(_GpuOps(), lambda: [first[0].clone()], first, "baseline", "ci") is None
    # NaN already in the truth is the truth's property (judged elsewhere), not memory nothing wrote
    assert unwritten_truth(_GpuOps(), lambda: [again[0].clone()], again, "baseline", "ci") is None
    # stale finite values in the fresh blocks instead of the poison: the two calls still differ
    stale = [first[0] + torch.tensor([[0.0, 0.0, 40.0], [0.0, 0.0, 0.0]])]
    note = unwritten_truth(_GpuOps(), lambda: stale, first, "baseline", "ci")
    assert note is not None and "gives another answer" in note and "1 of 6 element(s)" in note
    # rounding-level differences (atomics) are within the tolerance
    assert unwritten_truth(_GpuOps(), lambda: [first[0] * (1 + 1e-6)], first, "baseline", "ci") is None
