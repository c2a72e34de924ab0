"""PyTorch reference for 07_gemm_fp32_upcast: F.linear(x, W) without bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_weight(n: int, k: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=g) * k ** -0.5).to(torch.float16)


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(_init_weight(int(out_features), int(in_features), seed=7))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)
