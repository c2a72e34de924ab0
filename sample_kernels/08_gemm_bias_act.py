"""Linear layer with bias and SiLU in two launches. Slow: the GEMM stores an fp32 [M, N] intermediate that a second kernel reads back to add the bias and apply SiLU; fusing the epilogue into the GEMM removes that round trip (fusion)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

M = 4096
K = 4096
N = 14336


def _init_param(*shape: int, seed: int, std: float) -> torch.Tensor:
    """A deterministic fp16 parameter (independent of the global RNG state)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * std).to(torch.float16)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # C[M, N] (fp32) = A[M, K] @ B[K, N]
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
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def bias_silu_kernel(c_ptr, bias_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    c = tl.load(c_ptr + offs, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)
    y = c + b
    y = y * tl.sigmoid(y)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def kernel_function(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """silu(x [M, K] @ weight[N, K]^T + bias[N]) -> [M, N] in x's dtype."""
    assert x.ndim == 2 and weight.ndim == 2 and x.shape[1] == weight.shape[1]
    m, k = x.shape
    n = weight.shape[0]
    tmp = torch.empty((m, n), dtype=torch.float32, device=x.device)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
    grid = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    matmul_kernel[grid](x, weight, tmp, m, n, k,
                        x.stride(0), x.stride(1), weight.stride(1), weight.stride(0),
                        tmp.stride(0), tmp.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    BLOCK = 1024
    bias_silu_kernel[(triton.cdiv(m * n, BLOCK),)](tmp, bias, out, m * n, n, BLOCK=BLOCK)
    return out


class Model(nn.Module):
    """SiLU(X @ W^T + b): X [M, K] -> [M, N]; W fp16 [N, K], b fp16 [N]."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(_init_param(int(out_features), int(in_features), seed=8,
                                               std=int(in_features) ** -0.5))
        self.bias = nn.Parameter(_init_param(int(out_features), seed=9, std=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, self.weight, self.bias)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.float16)]


def get_init_inputs():
    return [K, N]
