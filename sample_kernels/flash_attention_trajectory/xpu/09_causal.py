"""Causal attention forward, step 9 (Intel Xe): a different problem (query i sees keys 0..i), so it has its own spec and reference. Each query block runs its key loop in two parts: the blocks left of the diagonal band, where every key is visible (no mask), and the band itself, masked; the blocks right of the diagonal are never visited, about half the work of the non-causal kernel."""

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


def _on_xpu() -> bool:
    return hasattr(torch, "xpu") and torch.xpu.is_available()


def _block_shapes(nargs: dict) -> None:
    """Pre-hook: the descriptors' block shapes follow the config being run."""
    if nargs["DESC"]:
        bm, bn, d0, d1 = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_D0"], nargs["BLOCK_D1"]
        for name, rows in (("q", bm), ("k", bn), ("v", bn)):
            nargs[f"{name}0_src"].block_shape = [rows, d0]
            nargs[f"{name}1_src"].block_shape = [rows, d1]


def _config(bm: int, bn: int, warps: int, stages: int, grf: str) -> triton.Config:
    """A config; ``grf`` (the GRF mode) is a compile option of Intel's backend only, so it is
    left out where the kernels do not run on an xpu device (the cpu interpreter checks the same
    tiles without it)."""
    options = {"grf_mode": grf} if _on_xpu() else {}
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, **options}, num_warps=warps, num_stages=stages,
                         pre_hook=_block_shapes)


# Xe2 / Xe-HPC (Intel's flash attention benchmarks tune the same knobs): step 6's config first, then
# narrower key blocks and wider query blocks with the large register file, and one with the small
# register file and more hardware threads for short sequences.
CONFIGS = [
    _config(128, 64, 16, 2, "256"),
    _config(128, 32, 8, 2, "256"),
    _config(256, 32, 32, 2, "256"),
    _config(64, 64, 8, 2, "128"),
]


def _prune(configs: list, named_args: dict, **kwargs) -> list:
    """Before compiling: drop query tiles far taller than the sequence and those whose diagonal
    band would not start on a key block boundary; keep at most four."""
    s = named_args["S"]
    return [c for c in configs if c.kwargs["BLOCK_M"] <= max(64, triton.next_power_of_2(s))
            and c.kwargs["BLOCK_M"] % c.kwargs["BLOCK_N"] == 0][:4] or configs[:1]


@triton.jit
def _tile(src, row, col, D, rows_total, ROWS: tl.constexpr, COLS: tl.constexpr, DESC: tl.constexpr):
    """The [ROWS, COLS] tile at (``row``, ``col``) of a [rows_total, D] view: one descriptor load,
    or (DESC false: ``src`` is the tensor) one block-pointer load; both give zeros past its edges."""
    if DESC:
        tile = src.load([row, col])
    else:
        block = tl.make_block_ptr(src, (rows_total, D), (D, 1), (row, col), (ROWS, COLS), (1, 0))
        tile = tl.load(block, boundary_check=(0, 1), padding_option="zero")
    return tile


@triton.jit
def _attend(acc0, acc1, l_i, m_i, q0, q1, k0_src, k1_src, v0_src, v1_src, row, start, offs_m, offs_n, D, rows_total,
            qk_scale, BLOCK_N: tl.constexpr, BLOCK_D0: tl.constexpr, BLOCK_D1: tl.constexpr, SPLIT: tl.constexpr,
            DIAGONAL: tl.constexpr, DESC: tl.constexpr):
    """Online-softmax update with the BLOCK_N keys from ``start`` of the head whose first row is
    ``row``. SPLIT: the head dim is BLOCK_D0 + BLOCK_D1 columns, read as two tiles. DIAGONAL:
    the block is on the diagonal band, so key j is masked for query i < j (which also masks
    keys past S for every stored row)."""
    qk = tl.dot(q0, _tile(k0_src, row + start, 0, D, rows_total, BLOCK_N, BLOCK_D0, DESC).T)
    if SPLIT:   # the remaining columns: a narrower dot accumulating into the same scores
        qk = tl.dot(q1, _tile(k1_src, row + start, BLOCK_D0, D, rows_total, BLOCK_N, BLOCK_D1, DESC).T, qk)
    if DIAGONAL:
        qk = tl.where(offs_m[:, None] >= (start + offs_n)[None, :], qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    p = p.to(q0.dtype)
    acc0 = tl.dot(p, _tile(v0_src, row + start, 0, D, rows_total, BLOCK_N, BLOCK_D0, DESC), acc0 * alpha[:, None])
    if SPLIT:
        acc1 = tl.dot(p, _tile(v1_src, row + start, BLOCK_D0, D, rows_total, BLOCK_N, BLOCK_D1, DESC),
                      acc1 * alpha[:, None])
    return acc0, acc1, l_i, m_new


@triton.autotune(configs=CONFIGS, key=["S", "BH", "BLOCK_D0", "BLOCK_D1"], prune_configs_by={"early_config_prune": _prune})
@triton.jit
def attn_fwd_kernel(q0_src, q1_src, k0_src, k1_src, v0_src, v1_src, o_ptr, S, D, BH, rows_total, sm_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D0: tl.constexpr, BLOCK_D1: tl.constexpr,
                    SPLIT: tl.constexpr, DESC: tl.constexpr):
    # *_src: tensor descriptors over the [B*A*S, D] views (DESC), else the tensors
    # program (pid_m, bh): output rows [pid_m*BLOCK_M, +BLOCK_M) of head bh
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    row = bh * S                                 # this head's first row in the [B*A*S, D] view
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q0 = _tile(q0_src, row + pid_m * BLOCK_M, 0, D, rows_total, BLOCK_M, BLOCK_D0, DESC)  # rows past S: never stored
    q1 = q0                                        # placeholder when the head dim is not split
    if SPLIT:
        q1 = _tile(q1_src, row + pid_m * BLOCK_M, BLOCK_D0, D, rows_total, BLOCK_M, BLOCK_D1, DESC)
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc0 = tl.zeros([BLOCK_M, BLOCK_D0], tl.float32)
    acc1 = tl.zeros([BLOCK_M, BLOCK_D1], tl.float32)
    diag = pid_m * BLOCK_M   # first key of this query block's diagonal band
    for start in range(0, diag, BLOCK_N):           # left of the band: every key visible
        acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_src, k1_src, v0_src, v1_src, row, start,
                                       offs_m, offs_n, D, rows_total, qk_scale, BLOCK_N, BLOCK_D0, BLOCK_D1, SPLIT,
                                       False, DESC)
    for start in range(diag, tl.minimum(diag + BLOCK_M, S), BLOCK_N):   # the band; right of it: skipped
        acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_src, k1_src, v0_src, v1_src, row, start,
                                       offs_m, offs_n, D, rows_total, qk_scale, BLOCK_N, BLOCK_D0, BLOCK_D1, SPLIT,
                                       True, DESC)
    o = o_ptr + bh.to(tl.int64) * S * D + offs_m[:, None] * D
    rows_ok = offs_m[:, None] < S
    cols0 = tl.arange(0, BLOCK_D0)
    tl.store(o + cols0[None, :], (acc0 / l_i[:, None]).to(o_ptr.dtype.element_ty),
             mask=rows_ok & (cols0[None, :] < D))
    if SPLIT:
        cols1 = BLOCK_D0 + tl.arange(0, BLOCK_D1)
        tl.store(o + cols1[None, :], (acc1 / l_i[:, None]).to(o_ptr.dtype.element_ty),
                 mask=rows_ok & (cols1[None, :] < D))


def head_dim_blocks(d: int) -> tuple[int, int, bool]:
    """(BLOCK_D0, BLOCK_D1, SPLIT) for head dim ``d``: a power of two takes one block; ``d`` =
    a power of two + another one of at least 16 (96 = 64 + 32, 48 = 32 + 16) is split; anything
    else is padded to the next power of two (tl.dot needs at least 16 along each dim)."""
    d0 = 1 << (d.bit_length() - 1)
    d1 = d - d0
    if d1 == 0:
        return max(16, d0), 16, False
    if d1 >= 16 and d1 & (d1 - 1) == 0:
        return d0, d1, True
    return max(16, triton.next_power_of_2(d)), 16, False


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax(q @ k^T / sqrt(D)) @ v (key j visible to query i iff j <= i) for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"2-D block reads need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    d0, d1, split = head_dim_blocks(d)
    views = [t.view(b * a * s, d) for t in (q, k, v) for _ in (d0, d1)]
    if DESCRIPTORS:  # block shapes are placeholders here: the pre-hook sets them for each config
        views = [TensorDescriptor.from_tensor(t, [16, width]) for t, width in zip(views, (d0, d1) * 3)]
    grid = lambda META: (triton.cdiv(s, META["BLOCK_M"]), b * a)  # noqa: E731
    attn_fwd_kernel[grid](*views, out, s, d, b * a, b * a * s, d ** -0.5, BLOCK_D0=d0, BLOCK_D1=d1, SPLIT=split,
                          DESC=DESCRIPTORS)
    return out


class Model(nn.Module):
    """Causal scaled dot-product attention: Q, K, V [B, A, S, D] -> [B, A, S, D]."""

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
