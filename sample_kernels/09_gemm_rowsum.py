"""Linear layer followed by a sum over its output features. Slow: the full [M, N] GEMM result is stored in fp32 and read back by a row-sum kernel, although sum_n (x @ W^T + b)[n] = x @ (sum_n W[n, :]) + sum(b) needs only a matrix-vector product (algorithmic)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

M = 4096
K = 4096
N = 4096


def _init_param(*shape: int, seed: int, std: float) -> torch.Tensor:
    """A deterministic fp16 parameter (independent of the global RNG state)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * std).to(torch.float16)


@triton.jit
def linear_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # C[M, N] (fp32) = A[M, K] @ B[K, N] + bias[N]
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
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
    acc += bias[None, :]
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def row_sum_kernel(c_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(c_ptr + row * stride_row + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def kernel_function(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """(x [M, K] @ weight[N, K]^T + bias[N]).sum(dim=1, keepdim=True) -> [M, 1] in x's dtype."""
    assert x.ndim == 2 and weight.ndim == 2 and x.shape[1] == weight.shape[1]
    m, k = x.shape
    n = weight.shape[0]
    tmp = torch.empty((m, n), dtype=torch.float32, device=x.device)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    linear_kernel[grid](x, weight, bias, tmp, m, n, k,
                        x.stride(0), x.stride(1), weight.stride(1), weight.stride(0),
                        tmp.stride(0), tmp.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)
    out = torch.empty((m, 1), dtype=x.dtype, device=x.device)
    row_sum_kernel[(m,)](tmp, out, n, tmp.stride(0), BLOCK=256)
    return out


class Model(nn.Module):
    """(X @ W^T + b).sum(dim=1, keepdim=True): X [M, K] -> [M, 1]; W fp16 [N, K], b fp16 [N]."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(_init_param(int(out_features), int(in_features), seed=10,
                                               std=int(in_features) ** -0.5))
        self.bias = nn.Parameter(_init_param(int(out_features), seed=11, std=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, self.weight, self.bias)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16)]


def get_init_inputs():
    return [K, N]
