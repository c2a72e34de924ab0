"""Small Triton kernels (5-50 µs on a datacenter GPU) for the verifier benchmark's A/A runs.

Three families, each with a size knob that the benchmark doubles until the kernel reaches a
target time on the device (so the same code gives 5, 10, ... 50 µs kernels on any GPU):

* ``vector_add``   out = x + y, fp32, ``n`` elements (memory-bound; 12 bytes per element).
* ``softmax_lse``  per row of an fp32 [rows, 1024] matrix: its softmax and its logsumexp, one
  program per row (two outputs, a reduction; the kind of kernel the issue saw at 8-10 µs).
* ``matvec``       y = A @ x, A fp16 [m, 4096], x fp16 [4096], y fp32 [m], BLOCK_M rows per
  program (the issue's 14 µs mat-vec was of this kind).

``make(family, size, device)`` returns ``(model, inputs)``; ``Model`` instances are plain
``torch.nn.Module`` objects whose forward launches one Triton kernel. Load this file twice
(as two modules) to get two independent copies of each kernel, as the verifier has for a
baseline and a candidate that are the same file. Runs in Triton's CPU interpreter too.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import triton
import triton.language as tl

SOFTMAX_COLS = 1024
MATVEC_K = 4096

#: first size of each family and the largest the benchmark may try
SIZES = {"vector_add": (1 << 14, 1 << 27), "softmax_lse": (1 << 6, 1 << 20), "matvec": (1 << 7, 1 << 21)}


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _softmax_lse_kernel(x_ptr, out_ptr, lse_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=0)
    tl.store(out_ptr + row * cols + offs, e / s, mask=mask)
    tl.store(lse_ptr + row, m + tl.log(s))


@triton.jit
def _matvec_kernel(a_ptr, x_ptr, y_ptr, m, k, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * k + cols[None, :], mask=(rows[:, None] < m) & (cols[None, :] < k),
                    other=0.0)
        x = tl.load(x_ptr + cols, mask=cols < k, other=0.0)
        acc += tl.sum(a.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
    tl.store(y_ptr + rows, acc, mask=rows < m)


class VectorAdd(nn.Module):
    """out = x + y; x, y fp32 [n] -> fp32 [n]."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024, num_warps=4)
        return out


class SoftmaxLogsumexp(nn.Module):
    """(softmax(x, dim=1), logsumexp(x, dim=1)); x fp32 [rows, 1024]."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows, cols = x.shape
        out = torch.empty_like(x)
        lse = torch.empty(rows, device=x.device, dtype=torch.float32)
        _softmax_lse_kernel[(rows,)](x, out, lse, cols, BLOCK=triton.next_power_of_2(cols), num_warps=4)
        return out, lse


class MatVec(nn.Module):
    """y = a @ x; a fp16 [m, k], x fp16 [k] -> y fp32 [m]."""

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        y = torch.empty(m, device=a.device, dtype=torch.float32)
        _matvec_kernel[(triton.cdiv(m, 16),)](a, x, y, m, k, BLOCK_M=16, BLOCK_K=256, num_warps=4)
        return y


def make(family: str, size: int, device: torch.device | str) -> tuple[nn.Module, list[torch.Tensor]]:
    """A model of ``family`` at ``size`` (elements, rows or matrix rows) and its inputs, drawn
    from a seeded generator on the host and moved to ``device``. Raises ``KeyError`` for an
    unknown family."""
    g = torch.Generator().manual_seed(0)
    if family == "vector_add":
        return VectorAdd(), [torch.randn(size, generator=g).to(device), torch.randn(size, generator=g).to(device)]
    if family == "softmax_lse":
        return SoftmaxLogsumexp(), [torch.randn(size, SOFTMAX_COLS, generator=g).to(device)]
    if family == "matvec":
        return MatVec(), [torch.randn(size, MATVEC_K, generator=g).half().to(device),
                          torch.randn(MATVEC_K, generator=g).half().to(device)]
    raise KeyError(f"unknown small-kernel family {family!r} (known: {', '.join(SIZES)})")


def bytes_moved(family: str, size: int) -> int:
    """The fewest bytes one call must move (inputs read once, outputs written once)."""
    if family == "vector_add":
        return 12 * size
    if family == "softmax_lse":
        return 8 * size * SOFTMAX_COLS + 4 * size
    if family == "matvec":
        return 2 * size * MATVEC_K + 2 * MATVEC_K + 4 * size
    raise KeyError(family)
