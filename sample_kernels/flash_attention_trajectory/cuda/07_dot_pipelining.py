"""Attention forward, step 7 (NVIDIA Hopper): software pipelining of the two dots. Each warpgroup used to run Q K^T, wait for it, run the softmax on its scores while the tensor cores sat idle, then P V. Now the loop issues Q K^T for key block j, then P V for block j-1 (the probabilities the previous trip computed), and only then runs the softmax of block j: wgmma is asynchronous, so P V runs on the tensor cores while the special-function units compute the exponentials, the overlap Flash Attention 3 calls intra-warpgroup pipelining. The first block's softmax and the last block's P V run in loops of at most one trip before and after the key loop; the ragged end stays a masked loop of at most one trip."""

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
def _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, LAST: tl.constexpr):
    """Online-softmax statistics of one block of scores ``qk`` (keys from ``start``): the
    probabilities, the factor that rescales what was summed under the old row maximum, and the new
    row sum and maximum. LAST: keys past S (the next head's rows, or zeros past the tensor) get
    a score of -inf."""
    if LAST:
        qk = tl.where((start + offs_n)[None, :] < S, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, l_i, m_new


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
    p = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)   # the probabilities waiting for their P V
    alpha = tl.full([BLOCK_M], 1.0, tl.float32)
    n_full = (S // BLOCK_N) * BLOCK_N
    for start in range(0, tl.minimum(n_full, BLOCK_N), BLOCK_N):   # the first whole block: scores only
        k = _tile(k_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)
        p, alpha, l_i, m_i = _softmax(tl.dot(q, k.T), l_i, m_i, start, offs_n, S, qk_scale, False)
    for start in range(BLOCK_N, n_full, BLOCK_N):
        k = _tile(k_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)
        qk = tl.dot(q, k.T)                                                        # Q K^T of block j
        v = _tile(v_src, row + start - BLOCK_N, D, rows_total, BLOCK_N, BLOCK_D, DESC)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])   # P V of block j-1, still running during ...
        p, alpha, l_i, m_i = _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, False)   # ... block j's softmax
    for start in range(tl.maximum(n_full - BLOCK_N, 0), n_full, BLOCK_N):   # the last whole block's P V
        v = _tile(v_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    for start in range(n_full, S, BLOCK_N):   # the ragged end: a loop of at most one trip, not pipelined
        k = _tile(k_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)
        p, alpha, l_i, m_i = _softmax(tl.dot(q, k.T), l_i, m_i, start, offs_n, S, qk_scale, True)
        v = _tile(v_src, row + start, D, rows_total, BLOCK_N, BLOCK_D, DESC)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    acc = acc / l_i[:, None]
    o = o_ptr + bh.to(tl.int64) * S * D + offs_m[:, None] * D + offs_d[None, :]
    tl.store(o, acc.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < S) & (offs_d[None, :] < D))


#: Hopper (H100, H200) launch config per padded head dim (BLOCK_D) for the pipelined loop, which holds
#: one more [BLOCK_M, BLOCK_N] fp32 tile a thread than step 6's (the probabilities waiting for their
#: P V). At BLOCK_D 128 step 6's tile still fits: 128 query rows over 8 warps, 128-key blocks three
#: deep, 241 registers a thread and 225 KB of shared memory, one program an SM. At BLOCK_D <= 64 one
#: warpgroup takes 64 query rows with 128-key blocks three deep (about 105 KB): two programs an SM,
#: whose loops also overlap each other. Two stages were this step's first choice (the tile the
#: H200 ranked first for the loop before pipelining), but the pipelined loop needs the third: the
#: H200's sweep of step 9, the same loop, measured 231 us with two stages against 206 us with three
#: at head dim 64 (step 6: 208 us), so the step no longer runs slower than the one before it there.
#: Not yet measured on the GPU as step 7 itself.
#: (Registers and shared memory as the sm_90 compiler reports them, docs/measured/cpu-fa-hopper-compile.)
HOPPER_TILES = {
    64: {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3},
    128: {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3},
    256: {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2},
}


def launch_config(block_d: int) -> dict:
    """The Hopper launch config (BLOCK_M, BLOCK_N, num_warps, num_stages) for padded head dim
    ``block_d`` (a power of two, at least 16): the entry of :data:`HOPPER_TILES` for the
    smallest class that holds it."""
    holds = [c for c in HOPPER_TILES if c >= block_d]
    return dict(HOPPER_TILES[min(holds) if holds else max(HOPPER_TILES)])


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"2-D block reads need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    BLOCK_D = max(16, triton.next_power_of_2(d))
    cfg = launch_config(BLOCK_D)
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
