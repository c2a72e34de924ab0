"""Attention forward, step 7: autotune. @triton.autotune picks the tile, warps and pipeline depth (and on xpu the GRF mode) per sequence length and head dim from a short per-target list, pruned before anything is compiled to the configs whose tiles fit shared memory (the hand-picked config of step 6 always among them); the descriptors take the chosen block shapes from a pre-hook and the grid reads the chosen BLOCK_M."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

B = 1
A = 32
S = 2048
D = 128

def _on_xpu() -> bool:
    return hasattr(torch, "xpu") and torch.xpu.is_available()


def _block_shapes(nargs: dict) -> None:
    """Pre-hook: the descriptors' block shapes follow the config being run."""
    nargs["q_desc"].block_shape = [nargs["BLOCK_M"], nargs["BLOCK_D"]]
    nargs["k_desc"].block_shape = [nargs["BLOCK_N"], nargs["BLOCK_D"]]
    nargs["v_desc"].block_shape = [nargs["BLOCK_N"], nargs["BLOCK_D"]]


def _config(bm: int, bn: int, warps: int, stages: int, **options) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, **options}, num_warps=warps, num_stages=stages,
                         pre_hook=_block_shapes)


# Xe2 / Xe-HPC: grf_mode is a compile option of Intel's backend, so it lives only in this list.
XPU_CONFIGS = [
    _config(128, 64, 16, 2, grf_mode="256"),
    _config(128, 32, 8, 2, grf_mode="256"),
    _config(256, 32, 32, 2, grf_mode="256"),
    _config(64, 64, 8, 2, grf_mode="128"),
]
# Hopper (and the cpu interpreter, where each config is checked in turn): 8 warps only with
# 128 x 128 tiles (smaller tiles over two warpgroups leave wgmma short of rows).
CUDA_CONFIGS = [
    _config(128, 128, 8, 2),
    _config(128, 128, 8, 3),
    _config(128, 64, 4, 3),
    _config(128, 64, 4, 4),
    _config(64, 64, 4, 3),
]
CONFIGS = XPU_CONFIGS if _on_xpu() else CUDA_CONFIGS
SMEM_BYTES = 232448   # shared memory a block may use on Hopper (knowledge/hardware/nvidia_h200.yaml)


def _prune(configs: list, named_args: dict, **kwargs) -> list:
    """Before compiling: drop configs whose Q tile and pipelined K/V tiles (fp16) do not fit
    shared memory, and query tiles far taller than the sequence; keep at most four."""
    block_d = kwargs.get("BLOCK_D", named_args.get("BLOCK_D"))
    s = named_args["S"]

    def fits(c: triton.Config) -> bool:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        smem = 2 * (bm * block_d + 2 * bn * block_d * c.num_stages)
        return (_on_xpu() or smem <= SMEM_BYTES) and bm <= max(64, triton.next_power_of_2(s))

    return [c for c in configs if fits(c)][:4] or configs[:1]


@triton.jit
def _attend(acc, l_i, m_i, q, k_desc, v_desc, row, start, offs_n, S, qk_scale, LAST: tl.constexpr):
    """Online-softmax update with the BLOCK_N keys from ``start`` of the head whose first row is
    ``row``. LAST: the block may run past S; those keys (the next head's rows, or zeros past
    the end of the tensor) get a score of -inf."""
    k = k_desc.load([row + start, 0])           # [BLOCK_N, BLOCK_D]
    qk = tl.dot(q, k.T)
    if LAST:
        qk = tl.where((start + offs_n)[None, :] < S, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = v_desc.load([row + start, 0])           # [BLOCK_N, BLOCK_D]
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.autotune(configs=CONFIGS, key=["S", "BLOCK_D"], prune_configs_by={"early_config_prune": _prune})
@triton.jit
def attn_fwd_kernel(q_desc, k_desc, v_desc, o_ptr, S, D, sm_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # program (pid_m, bh): output rows [pid_m*BLOCK_M, +BLOCK_M) of head bh
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    row = bh * S                                # this head's first row in the [B*A*S, D] view
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q = q_desc.load([row + pid_m * BLOCK_M, 0])  # rows past S are never stored
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    n_full = (S // BLOCK_N) * BLOCK_N
    for start in range(0, n_full, BLOCK_N):
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row, start, offs_n, S, qk_scale, False)
    for start in range(n_full, S, BLOCK_N):   # the ragged end: a loop of at most one trip
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row, start, offs_n, S, qk_scale, True)
    acc = acc / l_i[:, None]
    o = o_ptr + bh.to(tl.int64) * S * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(o, acc.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & (offs_d[None, :] < D))


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"tensor descriptors need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    BLOCK_D = max(16, triton.next_power_of_2(d))
    # block shapes are placeholders here: the pre-hook sets them for each config
    q_desc, k_desc, v_desc = (TensorDescriptor.from_tensor(t.view(b * a * s, d), [16, BLOCK_D]) for t in (q, k, v))
    bh = b * a
    grid = lambda META: (triton.cdiv(s, META["BLOCK_M"]), bh)  # noqa: E731
    attn_fwd_kernel[grid](q_desc, k_desc, v_desc, out, s, d, d ** -0.5, BLOCK_D=BLOCK_D)
    return out


class Model(nn.Module):
    """Non-causal scaled dot-product attention: Q, K, V [B, A, S, D] -> [B, A, S, D]."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.head_dim = int(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        assert q.shape[-1] == self.head_dim
        return kernel_function(q, k, v)


def get_inputs():
    return [torch.randn(B, A, S, D, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return [D]
