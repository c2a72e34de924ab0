"""A ModelNew for KernelBench level 1 problem 98 (KL divergence, reduction "batchmean"):
sum over rows and classes of t * (log t - log p), divided by the rows. One program per row
reduces the row in tiles; the row sums are added on the host."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _kl_row_sums(p_ptr, t_ptr, sums_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        keep = offs < cols
        p = tl.load(p_ptr + row * cols + offs, mask=keep, other=1.0)
        t = tl.load(t_ptr + row * cols + offs, mask=keep, other=0.0)
        acc += tl.where(t > 0, t * (tl.log(t) - tl.log(p)), 0.0)
    tl.store(sums_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        p, t = predictions.contiguous(), targets.contiguous()
        rows, cols = p.shape
        sums = torch.empty(rows, dtype=torch.float32, device=p.device)
        _kl_row_sums[(rows,)](p, t, sums, cols, BLOCK=256)
        return sums.sum() / rows
