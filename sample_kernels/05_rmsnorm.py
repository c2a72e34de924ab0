"""RMSNorm. Slow: the sum of squares and the normalisation run in float64 (the dtype_fix stage keeps fp32 accumulation), and each row is streamed twice through 128-wide blocks."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TOKENS = 4096
HIDDEN = 4096
EPS = 1e-6


def _init_param(*shape: int, seed: int, mean: float, std: float) -> torch.Tensor:
    """A deterministic parameter (independent of the global RNG state)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * std + mean


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride_row, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride_row
    acc = tl.zeros([BLOCK], tl.float64)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < n_cols, other=0.0).to(tl.float64)
        acc += x * x
    ms = tl.sum(acc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(ms + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(base + offs, mask=mask, other=0.0).to(tl.float64)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float64)
        y = x * rstd * w
        tl.store(out_ptr + row * n_cols + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def kernel_function(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim of x [TOKENS, HIDDEN]; output has x's dtype."""
    assert x.ndim == 2
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    rmsnorm_kernel[(rows,)](x, weight, out, cols, x.stride(0), eps, BLOCK=128)
    return out


class Model(nn.Module):
    """RMSNorm(HIDDEN, eps=1e-6) with a weight: X [TOKENS, HIDDEN] -> same."""

    def __init__(self, hidden: int):
        super().__init__()
        self.eps = EPS
        self.weight = nn.Parameter(_init_param(int(hidden), seed=6, mean=1.0, std=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, self.weight, self.eps)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.float16)]


def get_init_inputs():
    return [HIDDEN]
