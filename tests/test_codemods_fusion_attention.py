"""Materialised attention (scores, a row softmax and P V through global memory) fused into one
online-softmax kernel: on a public-style float32 module whose score kernel loops over the head
dim and whose softmax writes a second buffer, the fused module is right in Triton's
interpreter; the sample's float16 version too; what the rewrite does not follow it leaves
alone and says why."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from xeforge_core.codemods.fusion import fuse
from xeforge_core.samples import SAMPLES_DIR
from xeforge_core.worker.loading import load_module

#: The shape of LLM-written first versions of KernelBench's attention problems: a QK^T kernel
#: over a loop of head-dim chunks with the scale passed in, a softmax into a new buffer, P V.
PUBLIC_STYLE = '''
import math
import torch
import triton
import triton.language as tl


@triton.jit
def qk_kernel(q_ptr, k_ptr, s_ptr, seq, dim, scale, stride_qh, stride_qs, stride_kh, stride_ks,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    h = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, dim, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(q_ptr + h * stride_qh + rm[:, None] * stride_qs + rk[None, :],
                    mask=(rm[:, None] < seq) & (rk[None, :] < dim), other=0.0)
        b = tl.load(k_ptr + h * stride_kh + rn[None, :] * stride_ks + rk[:, None],
                    mask=(rn[None, :] < seq) & (rk[:, None] < dim), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    out = acc * scale
    tl.store(s_ptr + h * seq * seq + rm[:, None] * seq + rn[None, :], out,
             mask=(rm[:, None] < seq) & (rn[None, :] < seq))


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@triton.jit
def pv_kernel(p_ptr, v_ptr, o_ptr, seq, dim, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, BD)
    acc = tl.zeros((BM, BD), dtype=tl.float32)
    for n0 in range(0, seq, BN):
        rn = n0 + tl.arange(0, BN)
        p = tl.load(p_ptr + h * seq * seq + rm[:, None] * seq + rn[None, :],
                    mask=(rm[:, None] < seq) & (rn[None, :] < seq), other=0.0)
        v = tl.load(v_ptr + h * seq * dim + rn[:, None] * dim + rd[None, :],
                    mask=(rn[:, None] < seq) & (rd[None, :] < dim), other=0.0)
        acc += tl.dot(p, v, input_precision="ieee")
    tl.store(o_ptr + h * seq * dim + rm[:, None] * dim + rd[None, :], acc,
             mask=(rm[:, None] < seq) & (rd[None, :] < dim))


def kernel_function(q, k, v):
    b, h, s, d = q.shape
    q = q.reshape(b * h, s, d).contiguous()
    k = k.reshape(b * h, s, d).contiguous()
    v = v.reshape(b * h, s, d).contiguous()
    scores = torch.empty((b * h, s, s), device=q.device, dtype=torch.float32)
    probs = torch.empty_like(scores)
    qk_kernel[(triton.cdiv(s, 16), triton.cdiv(s, 16), b * h)](
        q, k, scores, s, d, 1.0 / math.sqrt(d), q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        BM=16, BN=16, BK=16)
    softmax_kernel[(b * h * s,)](scores, probs, s, BLOCK=triton.next_power_of_2(s))
    out = torch.empty_like(q)
    pv_kernel[(triton.cdiv(s, 16), b * h)](probs, v, out, s, d, BM=16, BN=16, BD=triton.next_power_of_2(d))
    return out.reshape(b, h, s, d)
'''


def _kernels(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in n.decorator_list)]


def _load(source: str, tmp_path: Path, name: str):
    return load_module(tmp_path, {"source": source, "label": name, "filename": f"{name}.py"}).module


def _truth(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q, k, v = (t.double() for t in (q, k, v))
    return torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1) @ v


def test_public_style_float32_attention_is_fused_and_stays_right(tmp_path: Path) -> None:
    res = fuse(PUBLIC_STYLE)
    assert res.changed, res.reason
    assert _kernels(res.source) == ["attention_online_softmax_kernel"]
    assert "scores = torch.empty" not in res.source and "probs = " not in res.source  # the S x S buffers are gone
    assert "online_softmax_attention(q, k, v, out, (1.0 / math.sqrt(d)))" in res.source
    assert any("online softmax" in n for n in res.notes)
    mod = _load(res.source, tmp_path, "fused_public_attention")
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 37, 20, generator=gen) for _ in range(3))
    got = mod.kernel_function(q, k, v)
    # float32 stays IEEE float32 (no TF32): float32 rounding only
    assert torch.allclose(got.double(), _truth(q, k, v), atol=1e-5, rtol=1e-4)


def test_the_samples_float16_attention_is_fused_and_stays_right(tmp_path: Path) -> None:
    res = fuse((Path(SAMPLES_DIR) / "13_flash_attention_fwd.py").read_text())
    assert res.changed and _kernels(res.source) == ["attention_online_softmax_kernel"]
    assert "grid = " not in res.source.split("def kernel_function")[1].split("class Model")[0]  # dead host code gone
    mod = _load(res.source, tmp_path, "fused_sample_attention")
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 45, 24, generator=gen).half() for _ in range(3))
    got = mod.kernel_function(q, k, v)
    assert got.dtype == torch.float16
    assert torch.allclose(got.double(), _truth(q, k, v), atol=2e-3, rtol=2e-2)


@pytest.mark.parametrize("change, why", [
    ("    out = acc * scale\n", "    out = tl.where(rn[None, :] > rm[:, None], float('-inf'), acc * scale)\n"),
    ("    e = tl.exp(x)\n", "    e = tl.exp(x) + tl.log(tl.sum(tl.exp(x), axis=0)) * 0\n"),
    ("    return out.reshape(b, h, s, d)\n", "    return out.reshape(b, h, s, d) + probs.sum() * 0\n"),
    ("def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):\n",
     "def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, temperature=1.0):\n"),
], ids=["causal-mask", "log-softmax", "scores-read-after", "temperature"])
def test_what_it_does_not_follow_it_leaves_alone_and_says_why(change: str, why: str) -> None:
    src = PUBLIC_STYLE.replace(change, why)
    if "temperature" in why:  # the new parameter scales the scores before the softmax
        src = src.replace("    x = x - tl.max(x, axis=0)\n", "    x = x * temperature\n    x = x - tl.max(x, axis=0)\n")
    res = fuse(src)
    assert "online_softmax_attention" not in res.source
    reason = res.reason if not res.changed else " ".join(res.notes)
    assert "qk_kernel -> softmax_kernel -> pv_kernel" in reason
    assert any(w in reason for w in ("not its tl.dot times a scale", "not a plain softmax", "read outside"))
    if "temperature" in why:
        assert "applies temperature to the scores" in reason
