"""Attention forward, step 6 (Intel Xe): tiles, sub-groups and the register file for the target. On Xe2 / Xe-HPC 128 x 64 tiles over 16 sub-groups (warps) with the large register file (GRF mode 256), so the 128-row fp32 accumulator stays out of spills; grf_mode is a compile option of Intel's backend only, so it is passed only when the tensors live on an xpu device (elsewhere, the cpu interpreter included, the same tiles run without it)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:  # host-built tensor descriptors (Triton >= 3.3): the TMA copy engine on Hopper, 2-D block IO on Xe
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # an older Triton: block pointers, which Intel's backend also lowers to 2-D block reads
    TensorDescriptor = None
DESCRIPTORS = TensorDescriptor is not None

B = 1
A = 32
S = 2048
D = 128


@triton.jit
def _tile(src, row, D, rows_total, ROWS: tl.constexpr, BLOCK_D: tl.constexpr, DESC: tl.constexpr):
    """The [ROWS, BLOCK_D] tile from row ``row`` of a [rows_total, D] view: one descriptor load, or
    (DESC false: ``src`` is the tensor) one block-pointer load; both give zeros past its edges."""
    if DESC:
        tile = src.load([row, 0])
    else:
        block = tl.make_block_ptr(src, (rows_total, D), (D, 1), (row, 0), (ROWS, BLOCK_D), (1, 0))
        tile = tl.load(block, boundary_check=(0, 1), padding_option="zero")
    return tile


@triton.jit
def _attend(acc, l_i, m_i, q, k_src, v_src, row, start, offs_n, S, D, rows_total, qk_scale,
            BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, LAST: tl.constexpr, DESC: tl.constexpr):
    """Online-softmax update with the BLOCK_N keys from ``start`` of the head whose first row is
    ``row``. LAST: the block may run past S; those keys (the next head's rows, or zeros past
    the end of the tensor) get a score of -inf."""
    k = _tile(k_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)   # [BLOCK_N, BLOCK_D]
    qk = tl.dot(q, k.T)
    if LAST:
        qk = tl.where((start + offs_n)[None, :] < S, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = _tile(v_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)   # [BLOCK_N, BLOCK_D]
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return acc, l_i, m_new


@triton.jit
def attn_fwd_kernel(q_src, k_src, v_src, o_ptr, S, D, rows_total, sm_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, DESC: tl.constexpr):
    # q_src, k_src, v_src: tensor descriptors over the [B*A*S, D] views (DESC), else the tensors
    # program (pid_m, bh): output rows [pid_m*BLOCK_M, +BLOCK_M) of head bh
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    row = bh * S                                # this head's first row in the [B*A*S, D] view
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    q = _tile(q_src, row + pid_m * BLOCK_M, D, rows_total, BLOCK_M, BLOCK_D, DESC)  # rows past S: never stored
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    n_full = (S // BLOCK_N) * BLOCK_N
    for start in range(0, n_full, BLOCK_N):
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_src, v_src, row, start, offs_n, S, D, rows_total, qk_scale,
                                BLOCK_N, BLOCK_D, False, DESC)
    for start in range(n_full, S, BLOCK_N):   # the ragged end: a loop of at most one trip
        acc, l_i, m_i = _attend(acc, l_i, m_i, q, k_src, v_src, row, start, offs_n, S, D, rows_total, qk_scale,
                                BLOCK_N, BLOCK_D, True, DESC)
    acc = acc / l_i[:, None]
    o = o_ptr + bh.to(tl.int64) * S * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(o, acc.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & (offs_d[None, :] < D))


def launch_config(device: torch.device) -> dict:
    """Tile sizes and launch options for Xe2 / Xe-HPC: BLOCK_M = 128 query rows over 16 sub-groups
    with the large register file (GRF mode 256: 256 registers a hardware thread, half the threads
    per Xe core), so the 128 x BLOCK_D fp32 accumulator and the 128 x 64 scores stay out of
    spills; BLOCK_N = 64 keys, two pipeline stages. grf_mode is a compile option of Intel's
    backend only: it is added only for tensors on an xpu device.
    """
    cfg = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 16, "num_stages": 2}
    if device.type == "xpu":
        cfg["grf_mode"] = "256"
    return cfg


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"2-D block reads need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    BLOCK_D = max(16, triton.next_power_of_2(d))
    cfg = launch_config(q.device)
    views = [t.view(b * a * s, d) for t in (q, k, v)]
    if DESCRIPTORS:
        views = [TensorDescriptor.from_tensor(t, [cfg[rows], BLOCK_D])
                 for t, rows in zip(views, ("BLOCK_M", "BLOCK_N", "BLOCK_N"))]
    grid = (triton.cdiv(s, cfg["BLOCK_M"]), b * a)
    attn_fwd_kernel[grid](*views, out, s, d, b * a * s, d ** -0.5, BLOCK_D=BLOCK_D, DESC=DESCRIPTORS, **cfg)
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
