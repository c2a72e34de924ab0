"""PyTorch reference for the causal attention step: scaled dot-product attention with is_causal=True."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.head_dim = int(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
