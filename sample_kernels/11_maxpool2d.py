"""MaxPool2d 3x3, stride 2, padding 1 (ResNet stem). Slow: one program per output element doing nine scalar gathers with div/mod index math per program; the launch grid is N*C*OH*OW programs."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BATCH = 32
C = 64
H = 112
W = 112
KSIZE = 3
STRIDE = 2
PAD = 1


@triton.jit
def maxpool2d_kernel(x_ptr, out_ptr, H, W, OH, OW,
                     KSIZE: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr):
    # program id = ((n * C + c) * OH + oh) * OW + ow over a contiguous NCHW input
    pid = tl.program_id(0)
    ow = pid % OW
    oh = (pid // OW) % OH
    nc = pid // (OW * OH)
    best = tl.full([], float("-inf"), tl.float32)
    for kh in tl.static_range(KSIZE):
        for kw in tl.static_range(KSIZE):
            ih = oh * STRIDE - PAD + kh
            iw = ow * STRIDE - PAD + kw
            inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(x_ptr + nc * H * W + ih * W + iw, mask=inside, other=float("-inf"))
            best = tl.maximum(best, v.to(tl.float32))
    tl.store(out_ptr + pid, best.to(out_ptr.dtype.element_ty))


def kernel_function(x: torch.Tensor, ksize: int, stride: int, pad: int) -> torch.Tensor:
    """x [N, C, H, W] -> max_pool2d(x, ksize, stride, pad) [N, C, OH, OW] in x's dtype."""
    assert x.ndim == 4
    x = x.contiguous()
    n, c, h, w = x.shape
    oh = (h + 2 * pad - ksize) // stride + 1
    ow = (w + 2 * pad - ksize) // stride + 1
    out = torch.empty((n, c, oh, ow), dtype=x.dtype, device=x.device)
    maxpool2d_kernel[(n * c * oh * ow,)](x, out, h, w, oh, ow,
                                         KSIZE=ksize, STRIDE=stride, PAD=pad, num_warps=1)
    return out


class Model(nn.Module):
    """MaxPool2d(kernel 3, stride 2, padding 1): X [N, C, H, W] -> [N, C, OH, OW]."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, KSIZE, STRIDE, PAD)


def get_inputs():
    return [torch.randn(BATCH, C, H, W, dtype=torch.float16)]


def get_init_inputs():
    return []
