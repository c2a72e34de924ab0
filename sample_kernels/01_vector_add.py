"""Vector add. Slow: a 128-element block per program (a huge launch grid of tiny programs), fixed num_warps, no autotune."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TOKENS = 4096
HIDDEN = 4096


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # One program adds BLOCK_SIZE consecutive elements.
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def kernel_function(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """out = x + y, elementwise; x and y share shape, dtype and device."""
    assert x.shape == y.shape and x.dtype == y.dtype
    x = x.contiguous()
    y = y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK_SIZE = 128
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out


class Model(nn.Module):
    """Residual add of two activations X, Y: [TOKENS, HIDDEN] -> [TOKENS, HIDDEN]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, y)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.float16),
            torch.randn(TOKENS, HIDDEN, dtype=torch.float16)]


def get_init_inputs():
    return []
