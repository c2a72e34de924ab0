"""Attention forward, step 10 (NVIDIA Hopper): the loop form is part of the config. Different ways to run the key loop serve different head dims best, so the search space now chooses among them per head-dim class as it chooses tiles: the plain loop (Q K^T, softmax, P V in order; two or more programs an SM overlap one another's softmax with their dots), the plain loop with a lazy rescale, and step 7's software-pipelined loop (P V of block j-1 in flight during block j's softmax). The plain loop may skip the accumulator's rescale while no row maximum has grown by more than 2^8 (LAZY): the probabilities stay below 256, exact in fp16 and fp32, and the final division by the row sum cancels the stale maximum. A third form, Triton's warp specialization (one tl.range marked warp_specialize: a producer warp issues the K and V copies and the consumer warpgroups split the 128 query rows, with descriptors built on the device), is offered at head dim 128 in the one config the H200 ran right at every shape: 128 x 128 at two stages, the fastest there at S 2048 and 4096 (docs/measured/h200-fa-sweep-step10/warp-specialized). With Triton 3.6 every warp-specialized config hung with host-built descriptors (docs/measured/h200-fa-ws-hang), and with device-built ones three and four stages wrote infinities or left outputs unwritten; benchmarks/sweep_fa_hopper.py --warp-specialized checks every shape before a config enters a search space. Three persistent forms (one or two programs an SM walk the query tiles head by head: the key loop plain, the loop over tiles warp-specialized, or the key loop software-pipelined in one loop) are measured by benchmarks/sweep_fa_hopper.py --persistent and enter the search space only where that sweep finds them right and faster. So is HALVES, the query tile as two halves whose dots are issued alternately (both halves' Q K^T, then one half's softmax and P V beside the other's dot): FlashAttention-3's ping-pong of two consumer warpgroups, written as the order of one program's independent work, since Triton 3.6 has no named barriers to schedule warpgroups against each other."""

from functools import partial

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

B = 1
A = 32
S = 2048
D = 128

#: Shared memory a block may use on the H200 (cudaDevAttrMaxSharedMemoryPerBlockOptin; the
#: CUDA programming guide, compute capability 9.0): the limit where no GPU is there to ask.
SMEM_BYTES = 232448
#: What warp specialization adds to a program's shared memory (the partitions' barriers and
#: exchange buffers, 16.5 KB in the sm_90 compiler's report), rounded up.
WS_SMEM_BYTES = 17 * 1024
#: Loop forms (the LOOP meta-parameter): one program a query tile (plain, pipelined, warp-specialized,
#: or HALVES: the tile's rows as two halves whose dots are issued alternately), or persistent programs
#: that walk the tiles (with the plain key loop, warp-specialized over tiles, or with the key loop
#: software-pipelined in one loop: PERSISTENT_PIPE).
PLAIN, PIPELINED, WARP_SPECIALIZED, PERSISTENT, PERSISTENT_WS, PERSISTENT_PIPE, HALVES = 0, 1, 2, 3, 4, 5, 6
#: The loop forms whose programs walk the query tiles (PER_SM programs an SM).
PERSISTENT_FORMS = (PERSISTENT, PERSISTENT_WS, PERSISTENT_PIPE)
#: log2 of how far a row maximum may grow before the lazy plain loop rescales (2^8 = 256).
LAZY_GROWTH = 8.0


def _smem_limit() -> int:
    """Shared memory a block may use on the GPU Triton launches on, as its driver reports it
    (:data:`SMEM_BYTES` in the cpu interpreter, which has no driver)."""
    try:
        driver = triton.runtime.driver.active
        return int(driver.utils.get_device_properties(driver.get_current_device())["max_shared_mem"])
    except Exception:  # noqa: BLE001 - no GPU driver: the H200's limit
        return SMEM_BYTES


def _block_shapes(nargs: dict) -> None:
    """Pre-hook: the host-built descriptors' block shapes follow the config being run."""
    bm, bn, d0, d1 = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_D0"], nargs["BLOCK_D1"]
    for name, rows in (("q", bm), ("k", bn), ("v", bn)):
        nargs[f"{name}0_desc"].block_shape = [rows, d0]
        nargs[f"{name}1_desc"].block_shape = [rows, d1]


def _config(bm: int, bn: int, warps: int, stages: int, loop: int = PIPELINED, lazy: bool = False,
            per_sm: int = 1, exp_fma: bool = False) -> triton.Config:
    """A config: tile, warps, pipeline depth, loop form (:data:`PLAIN`, :data:`PIPELINED`,
    :data:`WARP_SPECIALIZED`, :data:`PERSISTENT`, :data:`PERSISTENT_WS`, :data:`PERSISTENT_PIPE`, :data:`HALVES`), for the plain loop whether the rescale is lazy, for the
    persistent forms how many programs share an SM, and whether half of each block's
    exponentials run on the FMA units (EXP_FMA, :func:`_exp2_fma`)."""
    if lazy and loop != PLAIN:
        raise ValueError(f"LAZY rescaling is a form of the plain loop, not of loop form {loop}")
    if per_sm != 1 and loop not in PERSISTENT_FORMS:
        raise ValueError(f"programs an SM (per_sm={per_sm}) are chosen for the persistent forms, not loop form {loop}")
    if exp_fma and lazy:
        raise ValueError("EXP_FMA splits the exponentials of the eager rescale, not of the LAZY one")
    if loop == HALVES and (bm < 32 or exp_fma):
        raise ValueError("HALVES splits a query tile of at least 32 rows into two, with the eager rescale")
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "LOOP": loop, "LAZY": lazy, "PER_SM": per_sm,
                          "EXP_FMA": exp_fma}, num_warps=warps, num_stages=stages, pre_hook=_block_shapes)


def config_args(config: triton.Config) -> tuple:
    """The :func:`_config` arguments that rebuild ``config``."""
    kw = config.kwargs
    return (kw["BLOCK_M"], kw["BLOCK_N"], config.num_warps, config.num_stages, kw["LOOP"], kw["LAZY"],
            kw.get("PER_SM", 1), kw.get("EXP_FMA", False))


#: Search space per padded head dim (BLOCK_D, split parts added up), from the H200's sweep of
#: step 10's 19 plain, lazy and pipelined variants (docs/measured/h200-fa-sweep-step10, every one
#: right at every shape), the fastest per benchmark shape: at 128 (head dims 96 and 128) the plain
#: 128 x 64 loop over two warpgroups (96: 1.00x SDPA), the plain and the lazy 64 x 64 (2048 x 128
#: and 1500 x 128), the pipelined 128 x 128 (4096 x 128) and the pipelined 64 x 64, second or third
#: everywhere; at 64 the plain loop on 64 rows and 128 keys at two and three stages, the lazy one
#: and the plain 128 x 64. At 128 also the warp-specialized 128 x 128 loop at two stages, its
#: descriptors built on the device (docs/measured/h200-fa-sweep-step10/warp-specialized: right at
#: every shape, the fastest at 2048 x 128 and 4096 x 128, 0.85x and 0.91x SDPA against 0.78x and
#: 0.86x for step 10 without it); at three stages it wrote infinities, and with host-built
#: descriptors every warp-specialized config hung (docs/measured/h200-fa-ws-hang). And the
#: persistent form of that loop (one program an SM walking the tiles, the loop over tiles
#: warp-specialized): right at every shape on an H100 and an H200 and the fastest variant at
#: head dims 96 and 128 in seven of eight measurements, 1.01-1.11x over step 10 without it
#: (docs/measured/gpu-fa-persistent). Timed per shape by benchmarks/sweep_fa_hopper.py.
SEARCH_SPACE = {
    64: [_config(64, 128, 4, 2, PLAIN), _config(64, 128, 4, 3, PLAIN), _config(128, 64, 8, 3, PLAIN),
         _config(64, 128, 4, 2, PLAIN, lazy=True)],
    128: [_config(128, 64, 8, 3, PLAIN), _config(64, 64, 4, 3, PLAIN), _config(64, 64, 4, 3, PLAIN, lazy=True),
          _config(128, 128, 8, 3, PIPELINED), _config(64, 64, 4, 3, PIPELINED),
          _config(128, 128, 4, 2, WARP_SPECIALIZED), _config(128, 128, 4, 2, PERSISTENT_WS)],
    256: [_config(64, 64, 4, 2, PIPELINED), _config(64, 32, 4, 2, PIPELINED)],
}


def smem_bytes(config: triton.Config, block_d: int) -> int:
    """Shared memory ``config`` needs at head dim ``block_d`` (the columns of all tiles, padded or
    split), bytes: the fp16 Q tile, its num_stages K and V tiles, 1 KB of barriers and the
    warp-specialized partitions' share."""
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    ws = WS_SMEM_BYTES if config.kwargs["LOOP"] in (WARP_SPECIALIZED, PERSISTENT_WS) else 0
    return 2 * (bm * block_d + config.num_stages * 2 * bn * block_d) + 1024 + ws


def _prune(configs: list, named_args: dict, **kwargs) -> list:
    """Before compiling: drop configs over this device's shared-memory limit and query tiles far
    taller than the sequence."""
    get = lambda name: kwargs.get(name, named_args.get(name))  # noqa: E731
    block_d = get("BLOCK_D0") + (get("BLOCK_D1") if get("SPLIT") else 0)
    s, limit = named_args["S"], _smem_limit()
    kept = [c for c in configs if smem_bytes(c, block_d) <= limit
            and c.kwargs["BLOCK_M"] <= max(64, triton.next_power_of_2(s))]
    return kept or configs[:1]


@triton.jit
def _exp2_fma(x):
    """2^x for x <= 0 on the FMA units, not the special-function unit: 2^floor(x) placed in the
    exponent bits of a cubic for 2^frac(x) on [0, 1) (least-squares fit of the relative error,
    at most 8.7e-5: below fp16's rounding of the probabilities, 4.9e-4). Scores below -126 give
    2^-126 rather than 0, far under fp16's smallest normal. The technique of FlashAttention-4
    (Zadouri et al., 2025), where the exponentials, not the tensor cores, bound a block."""
    x = tl.maximum(x, -126.0)
    j = tl.floor(x)
    f = x - j
    poly = 1.0 + f * (0.69512331 + f * (0.22764372 + f * 0.07705975))
    bits = poly.to(tl.int32, bitcast=True) + (j.to(tl.int32) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, LAST: tl.constexpr, EXP_FMA: tl.constexpr = False):
    """Online-softmax statistics of one block of scores ``qk`` (keys from ``start``): the
    probabilities, the factor that rescales what was summed under the old row maximum, and the new
    row sum and maximum (base 2). LAST: keys past S get a score of -inf. EXP_FMA: the right half
    of the block's exponentials run on the FMA units (:func:`_exp2_fma`), the left half on the
    special-function unit, so the two share the work."""
    if LAST:
        qk = tl.where((start + offs_n)[None, :] < S, qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    alpha = tl.math.exp2(m_i - m_new)
    x = qk * qk_scale - m_new[:, None]
    if EXP_FMA:
        BM: tl.constexpr = x.shape[0]
        BN: tl.constexpr = x.shape[1]
        left, right = x.reshape([BM, 2, BN // 2]).permute(0, 2, 1).split()
        p_left = tl.math.exp2(left)
        p_right = _exp2_fma(right)
        l_i = l_i * alpha + tl.sum(p_left, 1) + tl.sum(p_right, 1)
        p = tl.join(p_left, p_right).permute(0, 2, 1).reshape([BM, BN])
    else:
        p = tl.math.exp2(x)
        l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, l_i, m_new


@triton.jit
def _scores(q0, q1, k0_desc, k1_desc, row, start, BLOCK_D0: tl.constexpr, SPLIT: tl.constexpr):
    """Q K^T of the BLOCK_N keys from ``start``; SPLIT: a second, narrower dot over the remaining
    head-dim columns accumulates into the same scores."""
    qk = tl.dot(q0, k0_desc.load([row + start, 0]).T)
    if SPLIT:
        qk = tl.dot(q1, k1_desc.load([row + start, BLOCK_D0]).T, qk)
    return qk


@triton.jit
def _pv(acc0, acc1, p, alpha, v0_desc, v1_desc, row, start, BLOCK_D0: tl.constexpr, SPLIT: tl.constexpr):
    """acc * alpha + P V for the BLOCK_N keys from ``start``, one accumulator per head-dim part."""
    p = p.to(v0_desc.dtype)
    acc0 = tl.dot(p, v0_desc.load([row + start, 0]), acc0 * alpha[:, None])
    if SPLIT:
        acc1 = tl.dot(p, v1_desc.load([row + start, BLOCK_D0]), acc1 * alpha[:, None])
    return acc0, acc1


@triton.jit
def _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row, start, offs_n, S, qk_scale,
            BLOCK_D0: tl.constexpr, SPLIT: tl.constexpr, LAST: tl.constexpr, LAZY: tl.constexpr,
            EXP_FMA: tl.constexpr = False):
    """One trip of the plain loop: scores, softmax, P V. LAZY: the row maxima move (and the
    accumulators and sums are rescaled) only when one of them would grow by more than 2^8; the
    probabilities under a stale maximum stay below 256."""
    qk = _scores(q0, q1, k0_desc, k1_desc, row, start, BLOCK_D0, SPLIT)
    if LAZY:
        if LAST:
            qk = tl.where((start + offs_n)[None, :] < S, qk, float("-inf"))
        m_blk = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        if tl.max(m_blk - m_i, 0) > 8.0:   # LAZY_GROWTH; m_i is -inf before the first block
            alpha = tl.math.exp2(m_i - m_blk)
            acc0 = acc0 * alpha[:, None]
            if SPLIT:
                acc1 = acc1 * alpha[:, None]
            l_i = l_i * alpha
            m_i = m_blk
        p = tl.math.exp2(qk * qk_scale - m_i[:, None])
        l_i = l_i + tl.sum(p, 1)
        p = p.to(v0_desc.dtype)
        acc0 = tl.dot(p, v0_desc.load([row + start, 0]), acc0)
        if SPLIT:
            acc1 = tl.dot(p, v1_desc.load([row + start, BLOCK_D0]), acc1)
    else:
        p, alpha, l_i, m_i = _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, LAST, EXP_FMA)
        acc0, acc1 = _pv(acc0, acc1, p, alpha, v0_desc, v1_desc, row, start, BLOCK_D0, SPLIT)
    return acc0, acc1, l_i, m_i


@triton.jit
def _halves(x):
    """The top and bottom halves of the rows of the 2-D tile ``x`` ([2h, w] -> two [h, w])."""
    H: tl.constexpr = x.shape[0] // 2
    W: tl.constexpr = x.shape[1]
    return x.reshape([2, H, W]).permute(1, 2, 0).split()


@triton.jit
def _rows(top, bottom):
    """The tile whose rows are ``top``'s then ``bottom``'s (two [h, w] -> [2h, w])."""
    H: tl.constexpr = top.shape[0]
    W: tl.constexpr = top.shape[1]
    return tl.join(top, bottom).permute(2, 0, 1).reshape([2 * H, W])


@triton.jit
def _rows_1d(top, bottom):
    """The vector of ``top``'s then ``bottom``'s entries (two [h] -> [2h])."""
    H: tl.constexpr = top.shape[0]
    return tl.join(top, bottom).permute(1, 0).reshape([2 * H])


@triton.jit
def _attend_halves(acc0a, acc1a, l_a, m_a, acc0b, acc1b, l_b, m_b, qa0, qa1, qb0, qb1, k0_desc, k1_desc, v0_desc,
                   v1_desc, row, start, offs_n, S, qk_scale, BLOCK_D0: tl.constexpr, SPLIT: tl.constexpr,
                   LAST: tl.constexpr):
    """One trip of the HALVES loop: the block's K and V are loaded once for both halves of the
    query tile; both halves' Q K^T are issued first, then half a's softmax and P V, then half b's,
    so that one half's dot has the other half's softmax to run beside (the ping-pong of two
    consumer warpgroups, FlashAttention-3's schedule, written as the order of one program's
    independent work: Triton 3.6 has no named barriers to make it a schedule between warpgroups)."""
    k0 = k0_desc.load([row + start, 0]).T
    qk_a = tl.dot(qa0, k0)
    qk_b = tl.dot(qb0, k0)
    if SPLIT:
        k1 = k1_desc.load([row + start, BLOCK_D0]).T
        qk_a = tl.dot(qa1, k1, qk_a)
        qk_b = tl.dot(qb1, k1, qk_b)
    v0 = v0_desc.load([row + start, 0])
    v1 = v0
    if SPLIT:
        v1 = v1_desc.load([row + start, BLOCK_D0])
    p_a, alpha_a, l_a, m_a = _softmax(qk_a, l_a, m_a, start, offs_n, S, qk_scale, LAST)
    p_a = p_a.to(v0.dtype)
    acc0a = tl.dot(p_a, v0, acc0a * alpha_a[:, None])
    if SPLIT:
        acc1a = tl.dot(p_a, v1, acc1a * alpha_a[:, None])
    p_b, alpha_b, l_b, m_b = _softmax(qk_b, l_b, m_b, start, offs_n, S, qk_scale, LAST)
    p_b = p_b.to(v0.dtype)
    acc0b = tl.dot(p_b, v0, acc0b * alpha_b[:, None])
    if SPLIT:
        acc1b = tl.dot(p_b, v1, acc1b * alpha_b[:, None])
    return acc0a, acc1a, l_a, m_a, acc0b, acc1b, l_b, m_b


@triton.jit
def _tile(q0_desc, q1_desc, k0_desc, k1_desc, v0_desc, v1_desc, o_ptr, pid_m, bh, S, D, qk_scale,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D0: tl.constexpr, BLOCK_D1: tl.constexpr,
          SPLIT: tl.constexpr, LOOP: tl.constexpr, LAZY: tl.constexpr, MASKED: tl.constexpr,
          EXP_FMA: tl.constexpr):
    """Output rows [pid_m*BLOCK_M, +BLOCK_M) of head ``bh``, in loop form LOOP."""
    row = bh * S                                 # this head's first row in the [B*A*S, D] view
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q0 = q0_desc.load([row + pid_m * BLOCK_M, 0])  # rows past S are never stored
    q1 = q0                                        # placeholder when the head dim is not split
    if SPLIT:
        q1 = q1_desc.load([row + pid_m * BLOCK_M, BLOCK_D0])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc0 = tl.zeros([BLOCK_M, BLOCK_D0], tl.float32)
    acc1 = tl.zeros([BLOCK_M, BLOCK_D1], tl.float32)
    n_full = (S // BLOCK_N) * BLOCK_N
    if LOOP == 6:   # two halves of the query tile, their dots issued alternately (_attend_halves)
        HALF: tl.constexpr = BLOCK_M // 2
        qa0, qb0 = _halves(q0)
        qa1, qb1 = _halves(q1)
        acc0a = tl.zeros([HALF, BLOCK_D0], tl.float32)
        acc0b = tl.zeros([HALF, BLOCK_D0], tl.float32)
        acc1a = tl.zeros([HALF, BLOCK_D1], tl.float32)
        acc1b = tl.zeros([HALF, BLOCK_D1], tl.float32)
        m_a = tl.full([HALF], float("-inf"), tl.float32)
        m_b = tl.full([HALF], float("-inf"), tl.float32)
        l_a = tl.zeros([HALF], tl.float32)
        l_b = tl.zeros([HALF], tl.float32)
        for start in range(0, n_full, BLOCK_N):
            acc0a, acc1a, l_a, m_a, acc0b, acc1b, l_b, m_b = _attend_halves(
                acc0a, acc1a, l_a, m_a, acc0b, acc1b, l_b, m_b, qa0, qa1, qb0, qb1, k0_desc, k1_desc, v0_desc,
                v1_desc, row, start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, False)
        for start in range(n_full, S, BLOCK_N):   # the ragged end: a loop of at most one trip
            acc0a, acc1a, l_a, m_a, acc0b, acc1b, l_b, m_b = _attend_halves(
                acc0a, acc1a, l_a, m_a, acc0b, acc1b, l_b, m_b, qa0, qa1, qb0, qb1, k0_desc, k1_desc, v0_desc,
                v1_desc, row, start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, True)
        acc0 = _rows(acc0a, acc0b)
        acc1 = _rows(acc1a, acc1b)
        l_i = _rows_1d(l_a, l_b)
    elif LOOP == 2:   # warp-specialized (two stages only, head dim 128): one loop, the ragged end's keys
        # masked on every block
        for start in tl.range(0, S, BLOCK_N, warp_specialize=True):
            acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row,
                                           start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, MASKED, False, EXP_FMA)
    elif LOOP == 3 or LOOP == 4:   # inside a persistent program: one key loop, the ragged end's keys
        # masked on every block where S is not a multiple of BLOCK_N
        for start in range(0, S, BLOCK_N):
            acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row,
                                           start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, MASKED, False, EXP_FMA)
    elif LOOP == 5:   # persistent, the key loop software-pipelined in one loop: block j's Q K^T is
        # issued before block j-1's softmax, so the tensor cores work during it (the warp-specialized
        # loop's consumers wait on each block's own product: docs/measured/h100-fa-ncu-source; Triton
        # 3.6 fails to compile this loop inside the warp-specialized one)
        # Prologue and epilogue are loops of one trip, as in step 7's loop: straight-line blocks
        # around a loop were miscompiled on the GPU where the head dim is split (step 8's fault,
        # docs/measured/h200-fa-step8; this form's first version, docs/measured/h100-fa-ppipe)
        last = (tl.cdiv(S, BLOCK_N) - 1) * BLOCK_N
        qk = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for start in range(0, BLOCK_N, BLOCK_N):
            qk = _scores(q0, q1, k0_desc, k1_desc, row, start, BLOCK_D0, SPLIT)
        for start in range(BLOCK_N, S, BLOCK_N):
            qk_next = _scores(q0, q1, k0_desc, k1_desc, row, start, BLOCK_D0, SPLIT)
            p, alpha, l_i, m_i = _softmax(qk, l_i, m_i, start - BLOCK_N, offs_n, S, qk_scale, MASKED, EXP_FMA)
            acc0, acc1 = _pv(acc0, acc1, p, alpha, v0_desc, v1_desc, row, start - BLOCK_N, BLOCK_D0, SPLIT)
            qk = qk_next
        for start in range(last, last + BLOCK_N, BLOCK_N):
            p, alpha, l_i, m_i = _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, MASKED, EXP_FMA)
            acc0, acc1 = _pv(acc0, acc1, p, alpha, v0_desc, v1_desc, row, start, BLOCK_D0, SPLIT)
    elif LOOP == 1:   # step 7's pipelined loop: P V of block j-1 in flight during block j's softmax
        p = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        alpha = tl.full([BLOCK_M], 1.0, tl.float32)
        for start in range(0, tl.minimum(n_full, BLOCK_N), BLOCK_N):
            qk = _scores(q0, q1, k0_desc, k1_desc, row, start, BLOCK_D0, SPLIT)
            p, alpha, l_i, m_i = _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, False, EXP_FMA)
        for start in range(BLOCK_N, n_full, BLOCK_N):
            qk = _scores(q0, q1, k0_desc, k1_desc, row, start, BLOCK_D0, SPLIT)
            acc0, acc1 = _pv(acc0, acc1, p, alpha, v0_desc, v1_desc, row, start - BLOCK_N, BLOCK_D0, SPLIT)
            p, alpha, l_i, m_i = _softmax(qk, l_i, m_i, start, offs_n, S, qk_scale, False, EXP_FMA)
        for start in range(tl.maximum(n_full - BLOCK_N, 0), n_full, BLOCK_N):
            acc0, acc1 = _pv(acc0, acc1, p, alpha, v0_desc, v1_desc, row, start, BLOCK_D0, SPLIT)
        for start in range(n_full, S, BLOCK_N):   # the ragged end: a loop of at most one trip
            acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row,
                                           start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, True, False)
    else:   # the plain loop over whole blocks, the ragged end as a loop of at most one trip
        for start in range(0, n_full, BLOCK_N):
            acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row,
                                           start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, False, LAZY, EXP_FMA)
        for start in range(n_full, S, BLOCK_N):
            acc0, acc1, l_i, m_i = _attend(acc0, acc1, l_i, m_i, q0, q1, k0_desc, k1_desc, v0_desc, v1_desc, row,
                                           start, offs_n, S, qk_scale, BLOCK_D0, SPLIT, True, LAZY, EXP_FMA)
    o = o_ptr + bh.to(tl.int64) * S * D + offs_m[:, None] * D
    rows_ok = offs_m[:, None] < S
    cols0 = tl.arange(0, BLOCK_D0)
    tl.store(o + cols0[None, :], (acc0 / l_i[:, None]).to(o_ptr.dtype.element_ty),
             mask=rows_ok & (cols0[None, :] < D))
    if SPLIT:
        cols1 = BLOCK_D0 + tl.arange(0, BLOCK_D1)
        tl.store(o + cols1[None, :], (acc1 / l_i[:, None]).to(o_ptr.dtype.element_ty),
                 mask=rows_ok & (cols1[None, :] < D))


@triton.heuristics({"MASKED": lambda args: args["S"] % args["BLOCK_N"] != 0})
@triton.jit
def _attn_fwd(q0_desc, q1_desc, k0_desc, k1_desc, v0_desc, v1_desc, q_ptr, k_ptr, v_ptr, o_ptr, S, D, BH, sm_scale,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D0: tl.constexpr, BLOCK_D1: tl.constexpr,
              SPLIT: tl.constexpr, LOOP: tl.constexpr, LAZY: tl.constexpr, PER_SM: tl.constexpr,
              EXP_FMA: tl.constexpr, MASKED: tl.constexpr):
    # *0_desc, *1_desc: host-built descriptors over the [B*A*S, D] views, BLOCK_D0 and BLOCK_D1 wide;
    # q_ptr, k_ptr, v_ptr: the same views, for the descriptors the warp-specialized forms build here.
    # Grid: (query tiles of a head, heads), one program a tile; for the persistent forms (LOOP 3, 4, 5)
    # PER_SM programs an SM, each walking the tiles pid, pid + programs, ... head by head
    if LOOP == 2 or LOOP == 4:   # Triton partitions the loads of device-built descriptors
        # between its consumer warpgroups, not those of host-built ones (with which every config hung)
        rows_total = BH * S
        q0_desc = tl.make_tensor_descriptor(q_ptr, [rows_total, D], [D, 1], [BLOCK_M, BLOCK_D0])
        q1_desc = tl.make_tensor_descriptor(q_ptr, [rows_total, D], [D, 1], [BLOCK_M, BLOCK_D1])
        k0_desc = tl.make_tensor_descriptor(k_ptr, [rows_total, D], [D, 1], [BLOCK_N, BLOCK_D0])
        k1_desc = tl.make_tensor_descriptor(k_ptr, [rows_total, D], [D, 1], [BLOCK_N, BLOCK_D1])
        v0_desc = tl.make_tensor_descriptor(v_ptr, [rows_total, D], [D, 1], [BLOCK_N, BLOCK_D0])
        v1_desc = tl.make_tensor_descriptor(v_ptr, [rows_total, D], [D, 1], [BLOCK_N, BLOCK_D1])
    qk_scale = sm_scale * 1.4426950408889634
    if LOOP == 3 or LOOP == 4 or LOOP == 5:   # persistent: no launch of a program per tile and no partial last wave; with warp
        # specialization over tiles the producer loads the next tile's Q and keys while the consumers
        # finish this one. Not flatten=True: with host-built descriptors Triton 3.6's TMA lowering
        # rejects the flattened nest (tests/fixtures/ir/flatten_descriptor.py); the pipelined key loop
        # (several loops) inside the warp-specialized one fails its compile too
        n_m = tl.cdiv(S, BLOCK_M)
        for tile in tl.range(tl.program_id(0), n_m * BH, tl.num_programs(0), flatten=False,
                             warp_specialize=LOOP == 4):
            _tile(q0_desc, q1_desc, k0_desc, k1_desc, v0_desc, v1_desc, o_ptr, tile % n_m, tile // n_m, S, D,
                  qk_scale, BLOCK_M, BLOCK_N, BLOCK_D0, BLOCK_D1, SPLIT, LOOP, LAZY, MASKED, EXP_FMA)
    else:
        _tile(q0_desc, q1_desc, k0_desc, k1_desc, v0_desc, v1_desc, o_ptr, tl.program_id(0), tl.program_id(1), S, D,
              qk_scale, BLOCK_M, BLOCK_N, BLOCK_D0, BLOCK_D1, SPLIT, LOOP, LAZY, MASKED, EXP_FMA)


def _tuned(block_d: int):
    return triton.autotune(configs=SEARCH_SPACE[block_d], key=["S", "BH", "BLOCK_D0", "BLOCK_D1"],
                           prune_configs_by={"early_config_prune": _prune})(_attn_fwd)


# one autotuned kernel per head-dim class, each with its own search space
attn_fwd_d64 = _tuned(64)
attn_fwd_d128 = _tuned(128)
attn_fwd_d256 = _tuned(256)
KERNELS = {64: attn_fwd_d64, 128: attn_fwd_d128, 256: attn_fwd_d256}


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


def _sm_count() -> int:
    """Streaming multiprocessors of the GPU Triton launches on, as its driver reports them (1
    where Triton has no GPU driver, as in the cpu interpreter on a machine without a GPU, so that
    each persistent program there walks several tiles)."""
    try:
        driver = triton.runtime.driver.active
        return int(driver.utils.get_device_properties(driver.get_current_device())["multiprocessor_count"])
    except Exception:  # noqa: BLE001 - no GPU driver: one program walks every tile
        return 1


def _grid(s: int, heads: int, sms: int, meta: dict) -> tuple[int, int]:
    """Launch grid of a config: (query tiles, heads), or for a persistent loop form PER_SM programs
    an SM, at most one a tile."""
    tiles = triton.cdiv(s, meta["BLOCK_M"])
    if meta["LOOP"] in PERSISTENT_FORMS:
        return (min(tiles * heads, sms * meta["PER_SM"]), 1)
    return (tiles, heads)


#: The host work of a call, prepared once per inputs: the [B*A*S, D] views, the six host-built
#: descriptors with the picked config's block shapes, the launch grid and that config. Built on
#: every call it took 114-170 µs of host time on an H200's host, as long as the 127 µs kernel at
#: S 2048, D 128 and longer than the benchmark's L2 flush hides, so that a call's time was the
#: host's; prepared once it took 23-51% less (an H100: docs/measured/gpu-fa-launch-gap). Keyed by
#: the inputs' storage, shape and dtypes and by the autotuner's config objects (kept alive in the
#: entry, so their ids are not reused), so that a config forced by replacing the autotuner's
#: configs is the one launched. One entry: it holds the last inputs' views, so their storage is
#: not reused under it.
_PREPARED: dict[tuple, tuple] = {}


def kernel_function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T / sqrt(D)) @ v for q, k, v [B, A, S, D] fp16 -> [B, A, S, D] fp16."""
    assert q.shape == k.shape == v.shape and q.ndim == 4
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    b, a, s, d = q.shape
    assert d % 8 == 0, f"tensor descriptors need 16-byte rows: head dim {d} is not a multiple of 8"
    out = torch.empty_like(q)
    d0, d1, split = head_dim_blocks(d)
    holds = [c for c in KERNELS if c >= d0 + (d1 if split else 0)]
    kernel = KERNELS[min(holds) if holds else max(KERNELS)]
    # scratch for descriptors a kernel builds itself (the warp-specialized forms)
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device=q.device))
    key = (q.data_ptr(), k.data_ptr(), v.data_ptr(), q.shape, q.dtype, k.dtype, v.dtype, q.device,
           tuple(map(id, kernel.configs)))
    prepared = _PREPARED.get(key)
    if prepared is not None:   # the picked config, launched without the autotuner's dispatch
        launch, grid, descs, views, config, meta, _configs = prepared
        kernel.best_config = config   # as the autotuner would say after this call
        launch[grid](*descs, *views, out, s, d, b * a, d ** -0.5, BLOCK_D0=d0, BLOCK_D1=d1, SPLIT=split, **meta)
        return out
    views = [t.view(b * a * s, d) for t in (q, k, v)]
    # block shapes are placeholders here: the pre-hook sets them for each config
    descs = [TensorDescriptor.from_tensor(t, [16, width]) for t in views for width in (d0, d1)]
    grid = partial(_grid, s, b * a, _sm_count())
    kernel[grid](*descs, *views, out, s, d, b * a, d ** -0.5, BLOCK_D0=d0, BLOCK_D1=d1, SPLIT=split)
    config = kernel.best_config   # its pre-hook left the descriptors at its block shapes
    meta = config.all_kwargs()
    _PREPARED.clear()
    _PREPARED[key] = (kernel.fn, grid(meta), descs, views, config, meta, tuple(kernel.configs))
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
