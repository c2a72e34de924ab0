"""Float8 conversions in Triton's interpreter round as a GPU does (``worker.interpreter_floats``):
triton 3.6's interpreter dropped the carry of a significand rounding up past all ones (float32
125.9 became float8e4nv 64), which made torchao's correct float8 quantiser a wrong answer."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from xeforge_core.worker.interpreter_floats import round_like_the_gpu, to_float8


@triton.jit
def _to_float8(x_ptr, e4_ptr, e5_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(e4_ptr + offs, x.to(tl.float8e4nv), mask=mask)
    tl.store(e5_ptr + offs, x.to(tl.bfloat16).to(tl.float8e5), mask=mask)


def test_float8_conversions_round_to_nearest_even_with_the_carry_and_saturate():
    assert round_like_the_gpu() and round_like_the_gpu()  # idempotent
    x = torch.tensor([125.9, 127.9, 31.6, 7.97, 0.99, 3.9, 250.0, 447.0, 1000.0, -1e9, float("nan"), 0.0013])
    e4 = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    e5 = torch.empty(x.shape, dtype=torch.float8_e5m2)
    _to_float8[(1,)](x, e4, e5, x.numel(), BLOCK=16)
    want4 = x.clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    assert torch.equal(e4.view(torch.uint8), want4.view(torch.uint8)), (e4.float(), want4.float())
    assert e4.float()[:4].tolist() == [128.0, 128.0, 32.0, 8.0] and e4.float()[8:10].tolist() == [448.0, -448.0]
    want5 = x.to(torch.bfloat16).float().clamp(-57344.0, 57344.0).to(torch.float8_e5m2)
    torch.testing.assert_close(e5.float(), want5.float(), rtol=0, atol=0, equal_nan=True)  # a NaN's sign aside
    assert to_float8(x[:1].numpy(), torch.float8_e4m3fn).dtype.name == "uint8"
