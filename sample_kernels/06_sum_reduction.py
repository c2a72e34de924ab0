"""Sum over the middle dim. Slow: one program per output element walks the reduced dim with a stride of HIDDEN elements (uncoalesced loads), so the launch grid is BATCH*HIDDEN tiny programs."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BATCH = 16
SEQ = 2048
HIDDEN = 4096


@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, n_red, n_inner, stride_b, stride_r, BLOCK: tl.constexpr):
    # program (b * n_inner + j) computes out[b, j] = sum_r x[b, r, j]
    pid = tl.program_id(0)
    b = pid // n_inner
    j = pid % n_inner
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_red, BLOCK):
        r = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + b * stride_b + r * stride_r + j, mask=r < n_red, other=0.0)
        acc += x.to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def kernel_function(x: torch.Tensor) -> torch.Tensor:
    """x [BATCH, SEQ, HIDDEN] -> x.sum(dim=1) [BATCH, HIDDEN], in x's dtype."""
    assert x.ndim == 3
    x = x.contiguous()
    b, r, n = x.shape
    out = torch.empty((b, n), dtype=x.dtype, device=x.device)
    sum_dim1_kernel[(b * n,)](x, out, r, n, x.stride(0), x.stride(1), BLOCK=64)
    return out


class Model(nn.Module):
    """Sum over the sequence dim: X [BATCH, SEQ, HIDDEN] -> [BATCH, HIDDEN]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return []
