"""Attention forward, step 1: fp16 operands into tl.dot with an fp32 accumulator, in the naive three-kernel form (Q K^T and P V on the matrix engines in fp16; the scores still go through global memory in fp32)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

B = 1
A = 32
S = 2048
D = 128


@triton.jit
def scores_kernel(q_ptr, k_ptr, s_ptr, S, D, sm_scale,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # s[bh, i, j] = sm_scale * sum_d q[bh, i, d] * k[bh, j, d]
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    bh = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    base = bh * S * D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :],
                mask=(offs_m[:, None] < S) & (offs_d[None, :] < D), other=0.0)
    kt = tl.load(k_ptr + base + offs_n[None, :] * D + offs_d[:, None],
                 mask=(offs_n[None, :] < S) & (offs_d[:, None] < D), other=0.0)
    s = tl.dot(q, kt) * sm_scale  # fp16 x fp16 -> fp32
    tl.store(s_ptr + bh * S * S + offs_m[:, None] * S + offs_n[None, :], s,
             mask=(offs_m[:, None] < S) & (offs_n[None, :] < S))


@triton.jit
def softmax_rows_kernel(s_ptr, S, BLOCK: tl.constexpr):
    # in-place softmax of one row of the score matrix (three passes over the row)
    row = tl.program_id(0)
    base = s_ptr + row.to(tl.int64) * S
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, S, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(base + offs, mask=offs < S, other=float("-inf")))
    row_max = tl.max(m, axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, S, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < S, other=float("-inf"))
        acc += tl.exp(x - row_max)
    inv = 1.0 / tl.sum(acc, axis=0)
    for start in range(0, S, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < S, other=float("-inf"))
        tl.store(base + offs, tl.exp(x - row_max) * inv, mask=offs < S)


@triton.jit
def pv_kernel(p_ptr, v_ptr, o_ptr, S, D,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # o[bh, i, :] = sum_j p[bh, i, j] * v[bh, j, :]
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    for start in range(0, S, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        p = tl.load(p_ptr + bh * S * S + offs_m[:, None] * S + offs_n[None, :],
                    mask=(offs_m[:, None] < S) & (offs_n[None, :] < S), other=0.0)
        v = tl.load(v_ptr + bh * S * D + offs_n[:, None] * D + offs_d[None, :],
                    mask=(offs_n[:, None] < S) & (offs_d[None, :] < D), other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)  # probabilities cast to fp16, fp32 accumulator
    tl.store(o_ptr + bh * S * D + offs_m[:, None] * D + offs_d[None, :],
             acc.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & (offs_d[None, :] < D))


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    sm_scale = d ** -0.5
    BLOCK_M, BLOCK_N = 32, 32
    BLOCK_D = max(16, triton.next_power_of_2(d))
    scores = torch.empty((b * a, s, s), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(s, BLOCK_M), triton.cdiv(s, BLOCK_N), b * a)
    scores_kernel[grid](q, k, scores, s, d, sm_scale, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    softmax_rows_kernel[(b * a * s,)](scores, s, BLOCK=256)
    out = torch.empty_like(q)
    pv_kernel[(triton.cdiv(s, BLOCK_M), b * a)](scores, v, out, s, d,
                                                BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    return out


class Model(nn.Module):
    """Non-causal scaled dot-product attention: Q, K, V [B, A, S, D] -> [B, A, S, D]."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.head_dim = int(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        assert q.shape[-1] == self.head_dim
        return kernel_function(q, k, v)


def get_inputs():
    return [torch.randn(B, A, S, D, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return [D]
