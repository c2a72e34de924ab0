"""Row softmax in three launches. Slow: the row max, the exponentials with their sum, and the normalisation are separate kernels, so each row is read three times and an fp32 copy of exp(x) goes through global memory; one program per row loops over 128-wide blocks."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS = 4096
COLS = 32000


@triton.jit
def row_max_kernel(x_ptr, max_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_row + offs, mask=offs < n_cols, other=float("-inf"))
        m = tl.maximum(m, x.to(tl.float32))
    tl.store(max_ptr + row, tl.max(m, axis=0))


@triton.jit
def exp_sum_kernel(x_ptr, max_ptr, e_ptr, sum_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_max = tl.load(max_ptr + row)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * stride_row + offs, mask=mask, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - row_max)
        tl.store(e_ptr + row * n_cols + offs, e, mask=mask)
        s += e
    tl.store(sum_ptr + row, tl.sum(s, axis=0))


@triton.jit
def normalize_kernel(e_ptr, sum_ptr, out_ptr, n_cols, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    inv = 1.0 / tl.load(sum_ptr + row)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        e = tl.load(e_ptr + row * n_cols + offs, mask=mask)
        tl.store(out_ptr + row * stride_out + offs, (e * inv).to(out_ptr.dtype.element_ty), mask=mask)


def kernel_function(x: torch.Tensor) -> torch.Tensor:
    """softmax over the last dim of x [ROWS, COLS]; output has x's dtype."""
    assert x.ndim == 2
    x = x.contiguous()
    rows, cols = x.shape
    BLOCK = 128
    row_max = torch.empty(rows, dtype=torch.float32, device=x.device)
    row_sum = torch.empty(rows, dtype=torch.float32, device=x.device)
    e = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
    out = torch.empty_like(x)
    grid = (rows,)
    row_max_kernel[grid](x, row_max, cols, x.stride(0), BLOCK=BLOCK)
    exp_sum_kernel[grid](x, row_max, e, row_sum, cols, x.stride(0), BLOCK=BLOCK)
    normalize_kernel[grid](e, row_sum, out, cols, out.stride(0), BLOCK=BLOCK)
    return out


class Model(nn.Module):
    """Softmax over the last dim: X [ROWS, COLS] -> [ROWS, COLS]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.float16)]


def get_init_inputs():
    return []
