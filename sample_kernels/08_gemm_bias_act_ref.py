"""PyTorch reference for 08_gemm_bias_act: SiLU(F.linear(x, W, b))."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def _init_param(*shape: int, seed: int, std: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * std).to(torch.float16)


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(_init_param(int(out_features), int(in_features), seed=8,
                                               std=int(in_features) ** -0.5))
        self.bias = nn.Parameter(_init_param(int(out_features), seed=9, std=0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(F.linear(x, self.weight, self.bias))
