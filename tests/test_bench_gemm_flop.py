"""The corpus benchmark sizes GEMM problems by their FLOP (read statically from the problem),
not by the bytes their inputs take."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gemm_flop_under_test", ROOT / "benchmarks" / "gemm_flop.py")
gemm_flop = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(gemm_flop)  # type: ignore[union-attr]

LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.fc(x)
        return torch.relu(x)

batch = 64
in_features = 256
out_features = 128

def get_inputs():
    return [torch.randn(batch, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''

MATMUL = '''
import torch

class Model(torch.nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B) + A @ B

M, K, N = 32, 16, 8

def get_inputs():
    A = torch.randn(M, K, dtype=torch.float16)
    return [A, torch.randn(K, N, dtype=torch.float16)]
'''


def test_a_linear_layer_counts_two_flop_per_multiply_add() -> None:
    assert gemm_flop.estimate_gemm_flop(LINEAR) == (2.0 * 64 * 256 * 128, "fp32")
    # a scaled variant's overrides, and the timed inputs of another module, take precedence
    assert gemm_flop.estimate_gemm_flop(LINEAR, {"batch": 128})[0] == 2.0 * 128 * 256 * 128
    other = LINEAR.replace("batch = 64", "batch = 8").replace("class Model", "class ModelNew")
    assert gemm_flop.estimate_gemm_flop(LINEAR, inputs_source=other)[0] == 2.0 * 8 * 256 * 128


def test_matmul_and_the_operator_each_count_and_the_dtype_is_read() -> None:
    assert gemm_flop.estimate_gemm_flop(MATMUL) == (2 * (2.0 * 32 * 16 * 8), "fp16")
    assert gemm_flop.estimate_gemm_flop(MATMUL.replace("torch.matmul(A, B) + A @ B", "torch.relu(A)")) is None
