"""Attention forward, step 7 (NVIDIA Hopper): warp specialization. The key loop is marked warp_specialize, and Triton splits each program into a producer warp that issues the K and V copies (TMA) and two consumer warpgroups of 64 query rows each, with registers moved from the producer to the consumers (setmaxnreg): while one consumer runs its softmax on the special-function units, the other keeps the tensor cores busy with its two dots, the overlap Flash Attention 3 builds by hand. The loop must be the only one, so the keys past the end of a ragged sequence get -inf through a per-key bias on every block (compiled in only when S is not a multiple of BLOCK_N), and the descriptors are built on the device, the form whose loads this Triton partitions between consumers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

B = 1
A = 32
S = 2048
D = 128


@triton.jit
def _attend(acc, l_i, m_i, q, k_desc, v_desc, row, start, offs_n, S, qk_scale, MASKED: tl.constexpr):
    """Online-softmax update with the BLOCK_N keys from ``start`` of the head whose first row is
    ``row``. MASKED: the block may run past S; those keys (the next head's rows, or zeros past
    the end of the tensor) get a score of -inf through a per-key bias."""
    k = k_desc.load([row + start, 0])           # [BLOCK_N, BLOCK_D]
    qk = tl.dot(q, k.T)
    if MASKED:
        qk = qk + tl.where(start + offs_n < S, 0.0, float("-inf"))[None, :]
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = v_desc.load([row + start, 0])           # [BLOCK_N, BLOCK_D]
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, D, rows_total, sm_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, MASKED: tl.constexpr,
                    WS: tl.constexpr):
    # program (pid_m, bh): output rows [pid_m*BLOCK_M, +BLOCK_M) of head bh
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    # tensor descriptors over the [B*A*S, D] views, built here (zeros past their edges)
    q_desc = tl.make_tensor_descriptor(q_ptr, [rows_total, D], [D, 1], [BLOCK_M, BLOCK_D])
    k_desc = tl.make_tensor_descriptor(k_ptr, [rows_total, D], [D, 1], [BLOCK_N, BLOCK_D])
    v_desc = tl.make_tensor_descriptor(v_ptr, [rows_total, D], [D, 1], [BLOCK_N, BLOCK_D])
    row = bh * S                                # this head's first row in the [B*A*S, D] view
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q = q_desc.load([row + pid_m * BLOCK_M, 0])  # rows past S are never stored
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in tl.range(0, S, BLOCK_N, warp_specialize=WS):
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_desc, v_desc, row, start, offs_n, S, qk_scale, MASKED)
    acc = acc / l_i[:, None]
    o = o_ptr + bh.to(tl.int64) * S * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(o, acc.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & (offs_d[None, :] < D))


#: Hopper launch config per padded head dim (BLOCK_D), warp-specialized: num_warps counts the
#: consumer warps (4: one warpgroup's worth, which the compiler splits into two consumer groups of 64
#: rows of the 128-row tile) and the compiler adds the producer; num_stages is the depth of the K/V
#: copy ring. Shared memory as the sm_90 compiler reports it: 128-key blocks, 2 stages, 176 KB at
#: BLOCK_D 128 (3 stages would need 256 KB, over the 227 KB a block may use); 3 stages, 128 KB at 64.
#: Above 128 the step keeps one warpgroup and no specialization (64 x 64 tiles, 2 stages).
WS_TILES = {
    64: {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3, "WS": True},
    128: {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 4, "num_stages": 2, "WS": True},
    256: {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2, "WS": False},
}


def launch_config(block_d: int) -> dict:
    """The launch config for padded head dim ``block_d``: the entry of :data:`WS_TILES` for the
    smallest class that holds it."""
    holds = [c for c in WS_TILES if c >= block_d]
    return dict(WS_TILES[min(holds) if holds else max(WS_TILES)])


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"tensor descriptors need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    BLOCK_D = max(16, triton.next_power_of_2(d))
    cfg = launch_config(BLOCK_D)
    # descriptors built on the device live in global scratch memory that Triton asks for at launch
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device=q.device))
    grid = (triton.cdiv(s, cfg["BLOCK_M"]), b * a)
    attn_fwd_kernel[grid](q, k, v, out, s, d, b * a * s, d ** -0.5, BLOCK_D=BLOCK_D,
                          MASKED=s % cfg["BLOCK_N"] != 0, **cfg)
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
