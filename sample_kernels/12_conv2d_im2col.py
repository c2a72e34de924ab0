"""Conv2d 3x3 (stride 1, padding 1) as im2col + GEMM. Slow: the im2col matrix [N*H*W, C*9] is written to global memory by one launch and read back by the GEMM (nine times the input's bytes); an implicit GEMM gathers it inside the tile loop instead."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BATCH = 32
C = 64
H = 56
W = 56
OC = 64


def _init_weight(oc: int, c: int, seed: int) -> torch.Tensor:
    """A deterministic fp16 filter bank [oc, c, 3, 3] (independent of the global RNG state)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(oc, c, 3, 3, generator=g) * (9 * c) ** -0.5).to(torch.float16)


@triton.jit
def im2col_kernel(x_ptr, cols_ptr, C, H, W, n_rows, n_cols,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # cols[r, q]: r = (n*H + h)*W + w an output pixel, q = (c*3 + kh)*3 + kw a filter tap
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    q = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    w = r % W
    h = (r // W) % H
    n = r // (W * H)
    kw = q % 3
    kh = (q // 3) % 3
    c = q // 9
    ih = h[:, None] + kh[None, :] - 1
    iw = w[:, None] + kw[None, :] - 1
    valid = (r[:, None] < n_rows) & (q[None, :] < n_cols)
    inside = valid & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    src = x_ptr + ((n[:, None] * C + c[None, :]) * H + ih) * W + iw
    v = tl.load(src, mask=inside, other=0.0)
    tl.store(cols_ptr + r[:, None] * n_cols + q[None, :], v, mask=valid)


@triton.jit
def conv_gemm_kernel(a_ptr, w_ptr, out_ptr, P, OC, CK, HW,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # out[n, oc, p] = sum_q cols[n*HW + p, q] * w[oc, q]; rows of cols are output pixels
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, CK, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * CK + offs_k[None, :],
                    mask=(offs_m[:, None] < P) & (offs_k[None, :] < CK), other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * CK + offs_k[:, None],
                    mask=(offs_k[:, None] < CK) & (offs_n[None, :] < OC), other=0.0)
        acc += tl.dot(a, b)
    img = offs_m // HW
    pix = offs_m % HW
    dst = out_ptr + (img[:, None] * OC + offs_n[None, :]) * HW + pix[:, None]
    tl.store(dst, acc.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < P) & (offs_n[None, :] < OC))


def kernel_function(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """conv2d(x [N, C, H, W], weight [OC, C, 3, 3], stride 1, padding 1) -> [N, OC, H, W]."""
    assert x.ndim == 4 and weight.ndim == 4 and weight.shape[1] == x.shape[1]
    x = x.contiguous()
    weight = weight.contiguous()
    n, c, h, w = x.shape
    oc = weight.shape[0]
    rows, ck = n * h * w, c * 9
    cols = torch.empty((rows, ck), dtype=x.dtype, device=x.device)
    im2col_grid = (triton.cdiv(rows, 32), triton.cdiv(ck, 32))
    im2col_kernel[im2col_grid](x, cols, c, h, w, rows, ck, BLOCK_R=32, BLOCK_C=32)
    out = torch.empty((n, oc, h, w), dtype=x.dtype, device=x.device)
    BLOCK_M, BLOCK_N, BLOCK_K = 64, 32, 32
    grid = (triton.cdiv(rows, BLOCK_M), triton.cdiv(oc, BLOCK_N))
    conv_gemm_kernel[grid](cols, weight, out, rows, oc, ck, h * w,
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)
    return out


class Model(nn.Module):
    """Conv2d(C -> OC, 3x3, stride 1, padding 1, no bias): X [N, C, H, W] -> [N, OC, H, W]."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.weight = nn.Parameter(_init_weight(int(out_channels), int(in_channels), seed=12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return kernel_function(x, self.weight)


def get_inputs():
    return [torch.randn(BATCH, C, H, W, dtype=torch.float16)]


def get_init_inputs():
    return [C, OC]
