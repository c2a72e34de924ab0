"""Batched GEMM C[b] = A[b] @ B[b]. Slow: the host loops over the batch and launches one small-grid GEMM per batch element (BATCH launches instead of one 3-D launch grid), with small 32x32x32 tiles."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BATCH = 32
M = 2048
K = 128
N = 2048


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # C[M, N] = A[M, K] @ B[K, N] for one batch element
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def kernel_function(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [BATCH, M, K] @ b [BATCH, K, N] -> [BATCH, M, N] in a's dtype."""
    assert a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]
    batch, m, k = a.shape
    n = b.shape[2]
    out = torch.empty((batch, m, n), dtype=a.dtype, device=a.device)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    for i in range(batch):
        ai, bi, ci = a[i], b[i], out[i]
        matmul_kernel[grid](ai, bi, ci, m, n, k,
                            ai.stride(0), ai.stride(1), bi.stride(0), bi.stride(1),
                            ci.stride(0), ci.stride(1),
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)
    return out


class Model(nn.Module):
    """Batched matrix product: A [BATCH, M, K], B [BATCH, K, N] -> [BATCH, M, N]."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return kernel_function(a, b)


def get_inputs():
    return [torch.randn(BATCH, M, K, dtype=torch.float16),
            torch.randn(BATCH, K, N, dtype=torch.float16)]


def get_init_inputs():
    return []
