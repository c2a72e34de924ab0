"""Flash Attention trajectory step 8 as it was when the H200 found it wrong (2026-12-02): at the
``ci`` shape (B=1, A=2, S=40, D=48 = 32 + 16), 1236 of 3840 outputs off by up to 0.678, while the
interpreter, the benchmark shapes and the causal step (same split) passed. Kept unchanged, except
for this docstring, so that ``benchmarks/diagnose_fa_step8.py`` can show the fault and its fix
side by side on a GPU (per autotune config: the largest error and which output columns are wrong)
and, on any machine, the compiled difference: the ragged-end block runs outside the key loop, so
the compiler moves both accumulators (32 and 16 columns wide) into the scores' wider MMA layout and
back around it; the fixed step runs that block as a second loop of at most one trip, where the
accumulators keep their own layouts, as they do in the causal step."""


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
    bm, bn, d0, d1 = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_D0"], nargs["BLOCK_D1"]
    for name, rows in (("q", bm), ("k", bn), ("v", bn)):
        nargs[f"{name}0_desc"].block_shape = [rows, d0]
        nargs[f"{name}1_desc"].block_shape = [rows, d1]


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
    get = lambda name: kwargs.get(name, named_args.get(name))  # noqa: E731
    block_d = get("BLOCK_D0") + (get("BLOCK_D1") if get("SPLIT") else 0)
    s = named_args["S"]

    def fits(c: triton.Config) -> bool:
        bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
        smem = 2 * (bm * block_d + 2 * bn * block_d * c.num_stages)
        return (_on_xpu() or smem <= SMEM_BYTES) and bm <= max(64, triton.next_power_of_2(s))

    return [c for c in configs if fits(c)][:4] or configs[:1]


@triton.jit
def _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row, start, offs_n, S, qk_scale,
            BLOCK_D0: tl.constexpr, SPLIT: tl.constexpr, LAST: tl.constexpr):
    """Online-softmax update with the BLOCK_N keys from ``start`` of the head whose first row is
    ``row``. SPLIT: the head dim is BLOCK_D0 + BLOCK_D1 columns, read as two tiles. LAST: the
    block may run past S; those keys get a score of -inf."""
    qk = tl.dot(q0, k0_desc.load([row + start, 0]).T)
    if SPLIT:   # the remaining columns: a narrower dot accumulating into the same scores
        qk = tl.dot(q1, k1_desc.load([row + start, BLOCK_D0]).T, qk)
    if LAST:
        qk = tl.where((start + offs_n)[None, :] < S, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    p = p.to(q0.dtype)
    acc0 = tl.dot(p, v0_desc.load([row + start, 0]), acc0 * alpha[:, None])
    if SPLIT:
        acc1 = tl.dot(p, v1_desc.load([row + start, BLOCK_D0]), acc1 * alpha[:, None])
    return acc0, acc1, l_i, m_new


@triton.autotune(configs=CONFIGS, key=["S", "BLOCK_D0", "BLOCK_D1"], prune_configs_by={"early_config_prune": _prune})
@triton.jit
def attn_fwd_kernel(q0_desc, q1_desc, k0_desc, k1_desc, v0_desc, v1_desc, o_ptr, S, D, sm_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D0: tl.constexpr, BLOCK_D1: tl.constexpr,
                    SPLIT: tl.constexpr):
    # program (pid_m, bh): output rows [pid_m*BLOCK_M, +BLOCK_M) of head bh
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    row = bh * S                                 # this head's first row in the [B*A*S, D] view
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q0 = q0_desc.load([row + pid_m * BLOCK_M, 0])  # rows past S are never stored
    q1 = q0                                        # placeholder when the head dim is not split
    if SPLIT:
        q1 = q1_desc.load([row + pid_m * BLOCK_M, BLOCK_D0])
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc0 = tl.zeros([BLOCK_M, BLOCK_D0], tl.float32)
    acc1 = tl.zeros([BLOCK_M, BLOCK_D1], tl.float32)
    n_full = (S // BLOCK_N) * BLOCK_N
    for start in range(0, n_full, BLOCK_N):
        acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row, start,
                                       offs_n, S, qk_scale, BLOCK_D0, SPLIT, False)
    if n_full < S:
        acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row, n_full,
                                       offs_n, S, qk_scale, BLOCK_D0, SPLIT, True)
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
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"tensor descriptors need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    d0, d1, split = head_dim_blocks(d)
    # block shapes are placeholders here: the pre-hook sets them for each config
    descs = [TensorDescriptor.from_tensor(t.view(b * a * s, d), [16, width]) for t in (q, k, v) for width in (d0, d1)]
    bh = b * a
    grid = lambda META: (triton.cdiv(s, META["BLOCK_M"]), bh)  # noqa: E731
    attn_fwd_kernel[grid](*descs, out, s, d, d ** -0.5, BLOCK_D0=d0, BLOCK_D1=d1, SPLIT=split)
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
