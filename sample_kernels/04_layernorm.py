"""LayerNorm in two launches. Slow: a statistics kernel reads each row twice (mean, then variance) and stores mean and rstd, then a second kernel reads the row a third time to normalise; 256-wide blocks in a loop instead of one register-resident row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TOKENS = 4096
HIDDEN = 4096
EPS = 1e-5


def _init_param(*shape: int, seed: int, mean: float, std: float) -> torch.Tensor:
    """A deterministic parameter (independent of the global RNG state)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * std + mean


@triton.jit
def ln_stats_kernel(x_ptr, mean_ptr, rstd_ptr, n_cols, stride_row, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * stride_row
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(base + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    var = tl.sum(acc2, axis=0) / n_cols
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(var + eps))


@triton.jit
def ln_apply_kernel(x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, out_ptr, n_cols, stride_row,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * stride_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_ptr + row * n_cols + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def kernel_function(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm over the last dim of x [TOKENS, HIDDEN]; output has x's dtype."""
    assert x.ndim == 2
    x = x.contiguous()
    rows, cols = x.shape
    BLOCK = 256
    mean = torch.empty(rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    ln_stats_kernel[(rows,)](x, mean, rstd, cols, x.stride(0), eps, BLOCK=BLOCK)
    ln_apply_kernel[(rows,)](x, weight, bias, mean, rstd, out, cols, x.stride(0), BLOCK=BLOCK)
    return out


class Model(nn.Module):
    """LayerNorm(HIDDEN, eps=1e-5) with affine weight and bias: X [TOKENS, HIDDEN] -> same."""

    def __init__(self, hidden: int):
        super().__init__()
        self.eps = EPS
        self.weight = nn.Parameter(_init_param(int(hidden), seed=4, mean=1.0, std=0.1))
        self.bias = nn.Parameter(_init_param(int(hidden), seed=5, mean=0.0, std=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.float16)]


def get_init_inputs():
    return [HIDDEN]
