"""Triton's interpreter applies numpy to the uint16 bit patterns of bfloat16 values
(triton-lang/triton issue 11584): ``a + b``, ``a * b``, comparisons, sums and ``tl.dot`` of
bfloat16 tensors came out near 1e10 to 1e38. The worker computes them on the values, rounding a
bfloat16 result to nearest-even as a GPU does, and leaves float16 / float32 as they were."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from xeforge_core.worker.device_ops import DeviceOps


@triton.jit
def _dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    a = tl.load(a_ptr + o[:, None] * N + o[None, :])
    b = tl.load(b_ptr + o[:, None] * N + o[None, :])
    acc = tl.zeros((N, N), dtype=tl.float32)
    acc = tl.dot(a, b, acc)
    tl.store(c_ptr + o[:, None] * N + o[None, :], acc)


@triton.jit
def _arith_kernel(a_ptr, b_ptr, add_ptr, mul_ptr, max_ptr, lt_ptr, sum_ptr, fma_ptr, red_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    a = tl.load(a_ptr + o)
    b = tl.load(b_ptr + o)
    tl.store(add_ptr + o, a + b)
    tl.store(mul_ptr + o, a * b)
    tl.store(max_ptr + o, tl.maximum(a, b))
    tl.store(lt_ptr + o, (a < b).to(tl.int32))
    tl.store(sum_ptr + o, tl.sum(a, axis=0) + tl.zeros_like(a))
    tl.store(fma_ptr + o, tl.fma(a, b, a))
    tl.store(red_ptr + o, tl.max(a, axis=0) + tl.zeros_like(a))
    tl.store(red_ptr + N + o, (tl.argmax(a, axis=0) + tl.zeros_like(o)).to(a.dtype))
    tl.store(red_ptr + 2 * N + o, tl.cumsum(a, axis=0))
    tl.store(red_ptr + 3 * N + o, (o - 7).to(a.dtype))
    tl.store(lt_ptr + N + o, a.to(tl.int32))


def _install() -> None:
    DeviceOps("cpu").install_interpreter_bf16()
    DeviceOps("cpu").install_interpreter_bf16()  # a second install wraps nothing twice


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_dot_in_the_interpreter_multiplies_values(dtype):
    _install()
    torch.manual_seed(0)
    a, b = torch.randn(16, 16).to(dtype), torch.randn(16, 16).to(dtype)
    c = torch.empty(16, 16)
    _dot_kernel[(1,)](a, b, c, N=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_elementwise_arithmetic_in_the_interpreter_is_on_values(dtype):
    """Each result as PyTorch computes it in the same dtype (float32 math rounded once), except
    the sum and the scan, whose order and rounding steps may differ, and float16's fused
    multiply-add, which the interpreter rounds twice."""
    _install()
    torch.manual_seed(0)
    a, b = torch.randn(64).to(dtype), torch.randn(64).to(dtype)
    add, mul, high, fma, total = (torch.empty(64, dtype=dtype) for _ in range(5))
    lt = torch.empty(128, dtype=torch.int32)
    red = torch.empty(4, 64, dtype=dtype)
    _arith_kernel[(1,)](a, b, add, mul, high, lt, total, fma, red, N=64)
    assert torch.equal(add, a + b) and torch.equal(mul, a * b)
    assert torch.equal(high, torch.maximum(a, b))
    torch.testing.assert_close(fma, (a.float() * b.float() + a.float()).to(dtype), rtol=1e-2, atol=1e-3)
    assert torch.equal(lt[:64], (a < b).to(torch.int32)) and torch.equal(lt[64:], a.to(torch.int32))
    torch.testing.assert_close(total, a.float().sum().to(dtype).expand(64), rtol=1e-2, atol=1e-2)
    assert torch.equal(red[0], a.max().expand(64)) and torch.equal(red[1], a.argmax().to(dtype).expand(64))
    torch.testing.assert_close(red[2], a.float().cumsum(0).to(dtype), rtol=2e-2, atol=2e-2)
    assert torch.equal(red[3], (torch.arange(64) - 7).to(dtype))


@triton.jit
def _constants_kernel(a_ptr, o_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    a = tl.load(a_ptr + o, mask=o < N - 4, other=1.5)
    tl.store(o_ptr + o, a * 0.5)
    tl.store(o_ptr + N + o, tl.full((N,), 2.5, tl.bfloat16))
    tl.store(o_ptr + 2 * N + o, a + 1)
    tl.store(o_ptr + 3 * N + o, (a.to(tl.float16) * 2).to(tl.bfloat16))


def test_bfloat16_constants_and_casts_in_the_interpreter():
    """``x * 0.5`` needs a bfloat16 constant (the interpreter had none: the kernel did not run),
    and casts through float16 or an int keep the value."""
    _install()
    torch.manual_seed(0)
    a = torch.randn(16).bfloat16()
    out = torch.empty(4, 16, dtype=torch.bfloat16)
    _constants_kernel[(1,)](a, out, N=16)
    loaded = torch.cat([a[:12], torch.full((4,), 1.5, dtype=torch.bfloat16)])
    assert torch.equal(out[0], loaded * 0.5) and torch.equal(out[1], torch.full((16,), 2.5, dtype=torch.bfloat16))
    assert torch.equal(out[2], loaded + 1) and torch.equal(out[3], loaded * 2)
