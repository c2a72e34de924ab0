"""A ModelNew for KernelBench level 1 problem 95 (cross-entropy of logits against class
indices, mean over the batch): per row, logsumexp(x) - x[target] in two tiled passes (the
row's maximum, then the sum of exponentials), averaged on the host."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ce_rows(x_ptr, target_ptr, loss_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * cols
    top = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        top = tl.maximum(top, tl.load(base + offs, mask=offs < cols, other=float("-inf")))
    m = tl.max(top, axis=0)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        total += tl.exp(tl.load(base + offs, mask=offs < cols, other=float("-inf")) - m)
    label = tl.load(target_ptr + row)
    tl.store(loss_ptr + row, m + tl.log(tl.sum(total, axis=0)) - tl.load(base + label))


class ModelNew(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = predictions.contiguous()
        rows, cols = x.shape
        losses = torch.empty(rows, dtype=torch.float32, device=x.device)
        _ce_rows[(rows,)](x, targets.contiguous(), losses, cols, BLOCK=256)
        return losses.mean()
