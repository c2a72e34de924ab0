"""Triton's interpreter multiplies the bit patterns of bfloat16 ``tl.dot`` operands
(triton-lang/triton issue 11584): the worker widens them to float32 first, so a bfloat16 GEMM is
judged on its values on cpu, and float16 / float32 dots are left as they were."""

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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_a_dot_in_the_interpreter_multiplies_values(dtype):
    DeviceOps("cpu").install_interpreter_bf16_dot()
    DeviceOps("cpu").install_interpreter_bf16_dot()  # a second install wraps nothing twice
    torch.manual_seed(0)
    a, b = torch.randn(16, 16).to(dtype), torch.randn(16, 16).to(dtype)
    c = torch.empty(16, 16)
    _dot_kernel[(1,)](a, b, c, N=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)
