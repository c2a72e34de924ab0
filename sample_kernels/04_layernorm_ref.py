"""PyTorch reference for 04_layernorm: F.layer_norm over the last dim with affine weight and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-5


def _init_param(*shape: int, seed: int, mean: float, std: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * std + mean


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.eps = EPS
        self.weight = nn.Parameter(_init_param(int(hidden), seed=4, mean=1.0, std=0.1))
        self.bias = nn.Parameter(_init_param(int(hidden), seed=5, mean=0.0, std=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
