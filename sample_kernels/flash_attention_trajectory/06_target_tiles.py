"""Attention forward, step 6: tile sizes, warps and pipeline depth for the target. On Hopper 128 query rows over 8 warps (two warpgroups, each issuing wgmma on 64 rows) with 128-key blocks, a 3-deep pipeline of K/V copies for head dims up to 64 and 2-deep above (shared memory); on Xe2 / Xe-HPC 128 x 64 tiles over 16 sub-groups with the large register file (grf_mode, an Intel-only compile option passed only there)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

B = 1
A = 32
S = 2048
D = 128


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


def launch_config(device: torch.device, block_d: int) -> dict:
    """Tile sizes and launch options for ``device`` and a padded head dim ``block_d``.

    cuda (Hopper; the cpu interpreter takes the same): BLOCK_M = 128 query rows over 8 warps,
    so each of the two warpgroups runs wgmma on 64 rows and the 128 x BLOCK_D fp32 accumulator
    is 64 registers a thread; BLOCK_N = 128 keys; 3 pipeline stages of K and V copies for
    block_d <= 64, 2 above (Q plus two stages of 128 x 128 fp16 K and V tiles is 160 KB of the
    227 KB of shared memory a block may use). xpu (Xe2 / Xe-HPC): 128 x 64 over 16 sub-groups
    with the large register file, so the accumulator stays out of spills; grf_mode is a compile
    option of Intel's backend only, so it is never passed elsewhere.
    """
    if device.type == "xpu":
        return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 16, "num_stages": 2, "grf_mode": "256"}
    return {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3 if block_d <= 64 else 2}


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"tensor descriptors need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    BLOCK_D = max(16, triton.next_power_of_2(d))
    cfg = launch_config(q.device, BLOCK_D)
    q_desc, k_desc, v_desc = (TensorDescriptor.from_tensor(t.view(b * a * s, d), [cfg[rows], BLOCK_D])
                              for t, rows in ((q, "BLOCK_M"), (k, "BLOCK_N"), (v, "BLOCK_N")))
    grid = (triton.cdiv(s, cfg["BLOCK_M"]), b * a)
    attn_fwd_kernel[grid](q_desc, k_desc, v_desc, out, s, d, d ** -0.5, BLOCK_D=BLOCK_D, **cfg)
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
