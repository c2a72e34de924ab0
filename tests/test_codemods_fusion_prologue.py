"""The prologue fusion (``xeforge_core.codemods.fusion_prologue``): an unfold (im2col) kernel
moves into the GEMM's operand load, on a public-style strided 1-D convolution, verified in
Triton's interpreter; what it does not follow it leaves alone and says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.codemods.fusion import fuse
from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify

FIXTURES = Path(__file__).parent / "fixtures" / "prologue"
SOLUTION = (FIXTURES / "conv1d_solution.py").read_text()


def test_an_unfold_kernel_moves_into_the_gemm_load_and_stays_right():
    result = fuse(SOLUTION)
    assert result.changed, result.reason
    assert "unfold_matmul_kernel[grid]" in result.source and "unfold_kernel[" not in result.source
    assert "cols" not in result.source.split("def forward", 1)[1], "the intermediate and its strides are gone"
    assert any("round trip through global memory is gone" in n for n in result.notes)
    verdict = verify(load_problem(FIXTURES / "conv1d_problem.py"), result.source, device="cpu",
                     options=VerifyOptions(seeds=1, measure_performance=False, use_cache=False))
    assert verdict.kind.value == "ok", verdict.reason


@pytest.mark.parametrize("change, why", [
    (("tl.store(cols_ptr + rows[:, None] * stride_cm + taps[None, :] * stride_ck, vals, mask=ok)",
      "tl.store(cols_ptr + rows[:, None] * stride_cm + taps[None, :] * stride_ck, vals + tl.program_id(1), mask=ok)"),
     "depends on its program ids"),
    (("        b = tl.load(b_ptr", "        a = a + tl.load(a_ptr + offs_m[:, None] * stride_am, mask=offs_m[:, None] < M)\n"
                                   "        b = tl.load(b_ptr"),
     "exactly one load"),
    (("        return y.reshape", "        self.last = cols\n        return y.reshape"), "also used outside"),
    (("tl.store(cols_ptr + rows[:, None] * stride_cm + taps[None, :] * stride_ck, vals, mask=ok)",
      "tl.store(cols_ptr + rows[:, None] * stride_cm + taps[None, :] * stride_ck, vals, mask=ok)\n"
      "    tl.store(x_ptr + rows, vals.to(tl.float32).sum(axis=1), mask=rows < M)"), "and nothing else"),
    (("    b = rows // L_OUT\n    t = rows % L_OUT\n", "    b, t = rows // L_OUT, rows % L_OUT\n"),
     "not a single assignment"),
])
def test_what_it_does_not_follow_it_leaves_alone_and_says_why(change, why):
    source = SOLUTION.replace(*change)
    assert source != SOLUTION
    result = fuse(source)
    assert not result.changed and why in result.reason, result.reason
