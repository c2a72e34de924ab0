"""PyTorch reference for 02_elementwise_chain: GELU(x * scale + bias)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_param(*shape: int, seed: int, std: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * std


class Model(nn.Module):
    def __init__(self, hidden: int, scale: float):
        super().__init__()
        self.scale = float(scale)
        self.bias = nn.Parameter(_init_param(int(hidden), seed=2, std=0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x * self.scale + self.bias)
