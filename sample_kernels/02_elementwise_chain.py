"""Scale, bias and GELU as three launches. Slow: every step is its own kernel launch with an fp32 intermediate written to and read back from global memory (the fusion stage removes both), and a small fixed block size."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TOKENS = 4096
HIDDEN = 11008
SCALE = 0.5


def _init_param(*shape: int, seed: int, std: float) -> torch.Tensor:
    """A deterministic parameter (independent of the global RNG state)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * std


@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x * scale, mask=mask)


@triton.jit
def bias_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, x + b, mask=mask)


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def kernel_function(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    """gelu(x * scale + bias): x [TOKENS, HIDDEN], bias [HIDDEN]; output has x's dtype."""
    x = x.contiguous()
    n_cols = x.shape[-1]
    n = x.numel()
    BLOCK_SIZE = 256
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    t1 = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    scale_kernel[grid](x, t1, n, scale, BLOCK_SIZE=BLOCK_SIZE)
    t2 = torch.empty_like(t1)
    bias_kernel[grid](t1, bias, t2, n, n_cols, BLOCK_SIZE=BLOCK_SIZE)
    out = torch.empty_like(x)
    gelu_kernel[grid](t2, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out


class Model(nn.Module):
    """y = GELU(x * scale + bias) (erf form): x [TOKENS, HIDDEN] -> [TOKENS, HIDDEN]."""

    def __init__(self, hidden: int, scale: float):
        super().__init__()
        self.scale = float(scale)
        self.bias = nn.Parameter(_init_param(int(hidden), seed=2, std=0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, self.bias, self.scale)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.float16)]


def get_init_inputs():
    return [HIDDEN, SCALE]
