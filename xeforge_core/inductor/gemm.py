"""Matrix products of a first version as a Triton GEMM kernel instead of a library call.

TorchInductor leaves matrix products to library calls (``extern_kernels.mm``, ``addmm``,
``bmm``, ``baddbmm``, ``mv``, ``addmv``: cuBLAS on a GPU). A first version whose forward is one
matrix product would then launch no Triton kernel at all (the verifier calls that cheating), and
one with a GEMM and an epilogue would leave its heaviest part to torch. So the conversion writes
each such call as a call of one host function (:data:`LAUNCHER`, default name ``matmul``) that
launches one generic kernel (default name ``matmul_kernel``):

* ``C[b] = alpha * (A[b] @ B[b]) + beta * bias[b]``: A ``[M, K]`` or ``[batch, M, K]``, B
  ``[K, N]``, ``[batch, K, N]`` or a vector ``[K]`` (matrix-vector), the output ``[M, N]``,
  ``[batch, M, N]`` or ``[M]``; every operand with its own strides (a transposed or otherwise
  strided view is read in place); the bias broadcast to the output's shape (stride 0 where it
  broadcasts); ``beta == 0`` ignores the bias, as torch does (a NaN in it does not propagate);
* masked ``BLOCK_M x BLOCK_N`` output tiles, a ``BLOCK_K`` loop, tiles swizzled in groups of
  ``GROUP_SIZE_M`` rows for L2 reuse; the batch is the grid's second axis;
* accumulation in float32 (float64 for float64 operands); operands loaded in the problem's own
  dtype; float16/bfloat16 with the native tensor-core dot; float32 operands never in plain TF32
  (torch's float32 matmul does not use it by default on CUDA, and the verifier's
  float64-calibrated tolerance would not accept it): as three TF32 products
  (``input_precision="tf32x3"``, the 3xTF32 scheme of NVIDIA's CUTLASS, near float32's accuracy)
  where the GPU has TF32 tensor cores (NVIDIA, compute capability 8.0 and newer, as Triton's
  driver reports the target), else in full float32 with FMA instructions (``"ieee"``: the
  interpreter, AMD and Intel GPUs); the launcher's ``input_precision`` argument overrides it;
* a split of K over programs (``split_k``; the grid's third axis) where K is long against the
  output (``K >= 32 * max(M, N)``, the threshold of TorchInductor's ``decompose_k``) and the
  device has at least twice as many processors as the output has tiles (SMs / CUs / Xe-cores,
  from Triton's driver; the host's threads in the interpreter), ``processors // tiles`` splits
  of at least four ``BLOCK_K`` steps each: each program multiplies a run of whole ``BLOCK_K``
  steps into a float32 (float64) partial product, and a second kernel sums the splits in order
  (the same result on every run, no atomics) and applies alpha, the bias and the output's dtype;
* a matrix-vector product (``N == 1``, or ``M == 1`` read transposed: ``mv``, a ``[M, K] @ [K, 1]``
  product) by a kernel of its own (``<kernel>_gemv``): a tile of the GEMM kernel for one output
  column wasted its loads and tensor-core work on columns that do not exist (KernelBench level 1
  problem 4 at 0.107x of eager on an H100, docs/measured/h100-gemm-first-version); it reads the
  matrix once in tiles along its contiguous axis, multiplies on the FMA units in the accumulator's
  precision and splits K until the device has about 8 programs a processor (the same splits kernel
  sums them);
* address arithmetic in int64 where rows and batches start (operands of more than 2**31
  elements stay correct).

The launch passes the tile sizes, ``num_warps`` and ``num_stages`` as literals from the first
``gemm`` configuration of the target's search space (``knowledge/search_spaces``), so the
autotuning stage can sweep the rest of that space over it (``xeforge_core.codemods.autotune``:
one launch, literal tiles, a grid that counts them).

A call the kernel cannot express stays the torch call and is named as not Triton yet: a result
whose dtype is not float16/bfloat16/float32/float64 or is unknown from the host code (integer
products, ``_int_mm``), ``addbmm`` (a sum over the batch), convolutions. A float32 or float64
product stays the library call too where the forward runs other Triton kernels (its epilogue):
the library's float32 GEMM is faster than this kernel's at most shapes (:data:`TENSOR_CORE_DTYPES`),
so the kernel is written for it only where the forward would otherwise launch no Triton kernel at
all.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from xeforge_core.inductor.kernels import InductorCodeError

#: Inductor's ``extern_kernels.<op>`` matrix products -> their torch parameter names, in order
#: (``torch.addmm(input, mat1, mat2, *, beta, alpha, out)``): the conversion binds the call's
#: arguments by these names.
GEMM_OPS: dict[str, tuple[str, ...]] = {
    "mm": ("input", "mat2"),
    "bmm": ("input", "mat2"),
    "mv": ("input", "vec"),
    "addmm": ("input", "mat1", "mat2", "beta", "alpha"),
    "baddbmm": ("input", "batch1", "batch2", "beta", "alpha"),
    "addmv": ("input", "mat", "vec", "beta", "alpha"),
}

#: Result dtypes the kernel computes (``tl.dot`` operands with a float accumulator).
FLOAT_DTYPES = frozenset({"torch.float32", "torch.float16", "torch.bfloat16", "torch.float64"})
#: Result dtypes whose products run on tensor cores / XMX at their own precision in a Triton
#: ``tl.dot``, where this kernel rivals the library's GEMM. float64 has no such path, and float32
#: either none (FMA instructions) or three TF32 products (NVIDIA, compute capability 8.0 and
#: newer). On the H200 (2026-12-04, docs/measured/h200-inductor-kb-first) the first versions of
#: eleven KernelBench level 2 problems with a float32 GEMM and an epilogue ran at 0.30-0.60x of
#: eager with their products in this kernel in full float32; on an H100 (2026-12-06,
#: docs/measured/h100-gemm-first-version) level 1's float32 products ran at 0.71-0.80x of cuBLAS
#: at most shapes either way (1.7-1.9x where B is read transposed, with three TF32 products).
TENSOR_CORE_DTYPES = frozenset({"torch.float16", "torch.bfloat16"})

#: Default names of the host function and the kernel (made unique against the problem's names).
LAUNCHER = "matmul"
KERNEL = "matmul_kernel"

#: The tiles used when the knowledge base has no gemm space for the target (cuda's first entry).
FALLBACK_CONFIG: dict[str, Any] = {"kwargs": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_SIZE_M": 8},
                                   "num_warps": 8, "num_stages": 3, "options": {}}


class GemmCallError(InductorCodeError):
    """A matrix-product call whose arguments do not bind to its torch signature (a conversion
    bug or an Inductor version that spells the call otherwise); the message names the call."""


@dataclass(frozen=True)
class GemmConfig:
    """The launch configuration written into the host function: tile sizes ``block_m``,
    ``block_n``, ``block_k``, ``group_size_m``, ``num_warps``, ``num_stages``, launch
    ``options`` (Intel's ``grf_mode``...), and ``origin`` (the search space they come from)."""

    block_m: int
    block_n: int
    block_k: int
    group_size_m: int
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, Any], ...] = ()
    origin: str = ""


def target_of(generated_for: str, device: str) -> str:
    """The search-space target of a capture: ``xpu`` when the code was generated for an Intel
    GPU, else ``cuda`` (the interpreter on a CPU runs code generated for the stand-in cuda
    target)."""
    text = f"{generated_for} {device}".strip().lower()
    return "xpu" if text.startswith("xpu") or " xpu" in text else "cuda"


def gemm_config(target: str, arch: str | None = None) -> GemmConfig:
    """The first ``gemm`` configuration of ``target``'s search space (``cuda``, ``xpu``), or
    :data:`FALLBACK_CONFIG` when the knowledge base has none (``origin`` says which)."""
    from xeforge_core.codemods.spaces import SpaceError, default_config

    try:
        cfg, origin = default_config(target, arch, "gemm")
        origin = f"search space {origin}, first gemm config"
    except SpaceError as exc:
        cfg, origin = FALLBACK_CONFIG, f"built-in default ({exc})"
    kw = cfg["kwargs"]
    try:
        return GemmConfig(block_m=int(kw["BLOCK_M"]), block_n=int(kw["BLOCK_N"]), block_k=int(kw["BLOCK_K"]),
                          group_size_m=int(kw.get("GROUP_SIZE_M", 8)), num_warps=int(cfg["num_warps"]),
                          num_stages=int(cfg.get("num_stages") or 3),
                          options=tuple(sorted((cfg.get("options") or {}).items())), origin=origin)
    except (KeyError, TypeError, ValueError) as exc:
        raise GemmCallError(f"the gemm search space of {target} has a first config without integer "
                            f"BLOCK_M/BLOCK_N/BLOCK_K ({cfg!r}): {exc}") from None


def launcher_call(op: str, call: ast.Call, launcher: str) -> ast.Call:
    """``extern_kernels.<op>(...)`` (already rewritten to torch's argument expressions) as a
    call of the host function ``launcher``: ``launcher(a, b, out=..., bias=..., alpha=...,
    beta=...)``. Raises :class:`GemmCallError` when the arguments do not bind to ``op``'s torch
    signature (:data:`GEMM_OPS`)."""
    names = GEMM_OPS[op]
    if len(call.args) > len(names) or any(isinstance(a, ast.Starred) for a in call.args):
        raise GemmCallError(f"extern_kernels.{op} is called with {len(call.args)} positional argument(s); "
                            f"torch.{op} takes {', '.join(names)}")
    bound: dict[str, ast.expr] = dict(zip(names, call.args))
    for kw in call.keywords:
        if kw.arg is None or (kw.arg not in names and kw.arg != "out") or kw.arg in bound:
            raise GemmCallError(f"extern_kernels.{op}: argument {kw.arg or '**'} does not bind to torch.{op}"
                                f"({', '.join(names)}, out)")
        bound[kw.arg] = kw.value
    has_bias = op.startswith(("add", "badd"))
    a, b = (names[1], names[2]) if has_bias else (names[0], names[1])
    if a not in bound or b not in bound or (has_bias and "input" not in bound):
        raise GemmCallError(f"extern_kernels.{op} misses an operand ({', '.join(n for n in names[:3] if n not in bound)})")
    keywords = [ast.keyword(arg="out", value=bound["out"])] if "out" in bound else []
    if has_bias:
        keywords.append(ast.keyword(arg="bias", value=bound["input"]))
        keywords += [ast.keyword(arg=k, value=bound[k]) for k in ("alpha", "beta") if k in bound]
    return ast.Call(func=ast.Name(id=launcher, ctx=ast.Load()), args=[bound[a], bound[b]], keywords=keywords)


def source(launcher: str, kernel: str, config: GemmConfig, splits_kernel: str | None = None,
           gemv_kernel: str | None = None, helpers: tuple[str, str] | None = None) -> str:
    """The kernel ``kernel``, the kernel ``splits_kernel`` (default ``<kernel>_splits``) that sums
    the partial products of a split K, the matrix-vector kernel ``gemv_kernel`` (default
    ``<kernel>_gemv``) and the host function ``launcher`` that launches them with ``config``
    (module docstring), as module-level Python source. ``helpers``: the names of the launcher's
    two host helpers (the device's facts, the mat-vec launch; default ``_<kernel>_device`` and
    ``_<gemv_kernel>_launch``)."""
    splits_kernel = splits_kernel or f"{kernel}_splits"
    gemv_kernel = gemv_kernel or f"{kernel}_gemv"
    device_fn, gemv_launch = helpers or (f"_{kernel}_device", f"_{gemv_kernel}_launch")
    options = "".join(f", {k}={v!r}" for k, v in config.options)
    return f'''
@triton.jit
def {kernel}(
    a_ptr, b_ptr, c_ptr, bias_ptr, part_ptr, M, N, K,
    stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
    stride_cb, stride_cm, stride_cn, stride_biasb, stride_biasm, stride_biasn,
    alpha, beta, HAS_BIAS: tl.constexpr, ACC_DTYPE: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):
    # C[b] = alpha * (A[b] @ B[b]) + beta * bias[b]; A [M, K], B [K, N], C and bias [M, N] per batch b.
    # With SPLIT_K > 1 the grid's third axis splits K: each program writes its partial product
    # to part [SPLIT_K, batch, M, N] (no alpha, no bias) and {splits_kernel} sums them.
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # GROUP_SIZE_M row tiles in a group walk the columns together (their B tiles stay in L2)
    group = GROUP_SIZE_M * tiles_n
    first_m = (pid // group) * GROUP_SIZE_M
    rows_in_group = min(tiles_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % group) % rows_in_group
    pid_n = (pid % group) // rows_in_group
    # this program's run of K: whole BLOCK_K steps, the last split ending at K
    k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
    k_start = split * k_steps * BLOCK_K
    k_end = min(K, k_start + k_steps * BLOCK_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows = offs_m.to(tl.int64)
    cols = offs_n.to(tl.int64)
    a_ptrs = (a_ptr + batch * stride_ab + rows[:, None] * stride_am
              + (k_start + offs_k[None, :]).to(tl.int64) * stride_ak)
    b_ptrs = (b_ptr + batch * stride_bb + (k_start + offs_k[:, None]).to(tl.int64) * stride_bk
              + cols[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC_DTYPE)
    for k in range(k_start, k_end, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_end - k), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_end - k) & (offs_n[None, :] < N), other=0.0)
        # float32 operands: "tf32x3" (three TF32 tensor-core products, about float32's accuracy) or
        # "ieee" (full float32 FMA), chosen by the host; float16/bfloat16 use the tensor cores as they are
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=ACC_DTYPE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if SPLIT_K > 1:
        part_ptrs = part_ptr + ((split * tl.num_programs(1) + batch) * M + rows[:, None]) * N + cols[None, :]
        tl.store(part_ptrs, acc, mask=c_mask)
    else:
        acc = acc * alpha
        if HAS_BIAS:
            bias_ptrs = bias_ptr + batch * stride_biasb + rows[:, None] * stride_biasm + cols[None, :] * stride_biasn
            acc += beta * tl.load(bias_ptrs, mask=c_mask, other=0.0).to(ACC_DTYPE)
        c_ptrs = c_ptr + batch * stride_cb + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def {splits_kernel}(
    part_ptr, c_ptr, bias_ptr, total, M, N,
    stride_cb, stride_cm, stride_cn, stride_biasb, stride_biasm, stride_biasn,
    alpha, beta, HAS_BIAS: tl.constexpr, ACC_DTYPE: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr,
):
    # C = alpha * (sum of the SPLIT_K partial products in part [SPLIT_K, batch, M, N]) + beta * bias,
    # the splits summed in order (the same result on every run)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    acc = tl.zeros((BLOCK,), dtype=ACC_DTYPE)
    part_ptrs = part_ptr + offs   # 64-bit offsets: SPLIT_K * total may pass 2**31
    for s in range(SPLIT_K):
        acc += tl.load(part_ptrs, mask=mask, other=0.0)
        part_ptrs += total
    acc = acc * alpha
    batch = (offs // N) // M   # offs is int64; no .to on M, which Triton makes a constant where it is 1
    row = (offs // N) % M
    col = offs % N
    if HAS_BIAS:
        bias = tl.load(bias_ptr + batch * stride_biasb + row * stride_biasm + col * stride_biasn, mask=mask, other=0.0)
        acc += beta * bias.to(ACC_DTYPE)
    tl.store(c_ptr + batch * stride_cb + row * stride_cm + col * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def {gemv_kernel}(
    a_ptr, x_ptr, c_ptr, bias_ptr, part_ptr, M, K,
    stride_ab, stride_am, stride_ak, stride_xb, stride_xk, stride_cb, stride_cm, stride_biasb, stride_biasm,
    alpha, beta, HAS_BIAS: tl.constexpr, ACC_DTYPE: tl.constexpr, SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    # c[b] = alpha * (A[b] @ x[b]) + beta * bias[b]; A [M, K], x [K], c and bias [M] per batch b: a
    # matrix-vector product reads A once, so it is memory-bound and runs on the FMA units, a
    # BLOCK_M x BLOCK_K tile of A a step. With SPLIT_K > 1 the grid's third axis splits K: each
    # program writes its partial sums to part [SPLIT_K, batch, M] and {splits_kernel} sums them.
    pid_m = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
    k_start = split * k_steps * BLOCK_K
    k_end = min(K, k_start + k_steps * BLOCK_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_k = tl.arange(0, BLOCK_K)
    rows = offs_m.to(tl.int64)
    a_row = a_ptr + batch * stride_ab + rows[:, None] * stride_am
    x_row = x_ptr + batch * stride_xb
    acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=ACC_DTYPE)
    for k in range(k_start, k_end, BLOCK_K):
        kk = (k + offs_k).to(tl.int64)
        a = tl.load(a_row + kk[None, :] * stride_ak, mask=(offs_m[:, None] < M) & (kk[None, :] < k_end), other=0.0)
        x = tl.load(x_row + kk * stride_xk, mask=kk < k_end, other=0.0)
        acc += a.to(ACC_DTYPE) * x.to(ACC_DTYPE)[None, :]
    total = tl.sum(acc, axis=1)
    mask = offs_m < M
    if SPLIT_K > 1:
        tl.store(part_ptr + (split * tl.num_programs(1) + batch) * M + rows, total, mask=mask)
    else:
        total = total * alpha
        if HAS_BIAS:
            total += beta * tl.load(bias_ptr + batch * stride_biasb + rows * stride_biasm, mask=mask, other=0.0).to(ACC_DTYPE)
        tl.store(c_ptr + batch * stride_cb + rows * stride_cm, total.to(c_ptr.dtype.element_ty), mask=mask)


def {launcher}(a, b, out=None, bias=None, alpha=1.0, beta=1.0, split_k=None, input_precision=None):
    """out = alpha * (a @ b) + beta * bias with {kernel} ({gemv_kernel} where a or b is a vector, or
    M or N is 1), as torch.mm/addmm/bmm/baddbmm/mv/addmv.

    a: [M, K] or [batch, M, K]; b: [K, N], [batch, K, N] or a vector [K]; any strides, one
    floating dtype. bias: broadcastable to the result (ignored when beta == 0, as in torch).
    out: the result ([M, N], [batch, M, N] or [M]), written in place, any strides; allocated
    when None. split_k: programs that share one output tile's K (None: chosen from the sizes and
    the device). input_precision: tl.dot's for float32 operands (None: chosen for the device).
    Returns out."""
    if a.dim() not in (2, 3) or b.dim() not in (1, a.dim()) or (b.dim() == 1 and a.dim() != 2):
        raise ValueError(f"{launcher}: operands of shapes {{tuple(a.shape)}} and {{tuple(b.shape)}} are not a "
                         "matrix product (2-D @ 2-D, 2-D @ 1-D or 3-D @ 3-D)")
    vector = b.dim() == 1
    if out is None:
        shape = a.shape[:-1] + (b.shape[-1:] if not vector else ())
        out = torch.empty(shape, dtype=a.dtype, device=a.device)
    has_bias = bias is not None and beta != 0
    bias_full = bias.expand(out.shape) if has_bias else out
    if vector:
        b, c, bias_full = b.unsqueeze(1), out.unsqueeze(1), bias_full.unsqueeze(1)
    else:
        c = out
    if a.dim() == 2:
        a, b, c, bias_full = a.unsqueeze(0), b.unsqueeze(0), c.unsqueeze(0), bias_full.unsqueeze(0)
    batch, M, K = a.shape
    N = b.shape[2]
    if batch == 0 or M == 0 or N == 0:
        return out
    acc_dtype = tl.float64 if a.element_size() == 8 else tl.float32  # float64 operands keep float64
    if split_k is not None and split_k < 1:
        raise ValueError(f"{launcher}: split_k={{split_k}}: a split of K needs at least one program")
    if N == 1 or M == 1:  # a matrix-vector product: one output column (or row, read transposed)
        if N == 1:
            mat, vec, col, bias_col = a, b[:, :, 0], c[:, :, 0], bias_full[:, :, 0]
        else:  # out[b] (1 x N) = (B[b]^T (N x K) @ a[b] (K)) transposed, read in place
            mat, vec, col, bias_col = b.transpose(1, 2), a[:, 0, :], c[:, 0, :], bias_full[:, 0, :]
        {gemv_launch}(mat, vec, col, bias_col, has_bias, alpha, beta, acc_dtype, split_k)
        return out
    BLOCK_M = {config.block_m}
    BLOCK_N = {config.block_n}
    BLOCK_K = {config.block_k}
    processors, tf32_tensor_cores = {device_fn}(a)
    if input_precision is None:
        # a float32 product as three TF32 products where TF32 tensor cores exist, else FMA
        input_precision = "tf32x3" if tf32_tensor_cores and a.dtype == torch.float32 else "ieee"
    if split_k is None:
        # K split over programs where it is long (K >= 32 * max(M, N), TorchInductor's decompose_k
        # rule) and the output has at most half as many tiles as the device has processors
        tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N) * batch
        split_k = 1
        if K >= 32 * max(M, N):
            split_k = max(1, min(processors // tiles, triton.cdiv(K, 4 * BLOCK_K)))
    part = c
    if split_k > 1:
        # partial products at the accumulator's precision (float64 operands keep it, the rest float32)
        part = torch.empty((split_k, batch, M, N), dtype=torch.promote_types(a.dtype, torch.float32), device=a.device)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), batch, split_k)
    {kernel}[grid](
        a, b, c, bias_full, part, M, N, K,
        a.stride(0), a.stride(1), a.stride(2), b.stride(0), b.stride(1), b.stride(2),
        c.stride(0), c.stride(1), c.stride(2), bias_full.stride(0), bias_full.stride(1), bias_full.stride(2),
        float(alpha), float(beta), HAS_BIAS=has_bias, ACC_DTYPE=acc_dtype, INPUT_PRECISION=input_precision,
        SPLIT_K=split_k,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_SIZE_M={config.group_size_m},
        num_warps={config.num_warps}, num_stages={config.num_stages}{options},
    )
    if split_k > 1:
        total = batch * M * N
        {splits_kernel}[(triton.cdiv(total, 1024),)](
            part, c, bias_full, total, M, N,
            c.stride(0), c.stride(1), c.stride(2), bias_full.stride(0), bias_full.stride(1), bias_full.stride(2),
            float(alpha), float(beta), HAS_BIAS=has_bias, ACC_DTYPE=acc_dtype, SPLIT_K=split_k, BLOCK=1024,
        )
    return out


def {device_fn}(a):
    """(processors, whether float32 products may run as three TF32 products) of a's device."""
    if a.device.type == "cpu":  # Triton's interpreter: float32 FMA, the host's threads
        return torch.get_num_threads(), False
    # the GPU as Triton's driver sees it (cuda, hip or xpu alike)
    driver = triton.runtime.driver.active
    target = driver.get_current_target()
    # SMs (NVIDIA), CUs (AMD), Xe-cores (Intel) as the driver reports them; 1 (no split) if not
    processors = driver.utils.get_device_properties(driver.get_current_device()).get("multiprocessor_count") or 1
    # TF32 tensor cores: NVIDIA GPUs of compute capability 8.0 and newer (only NVIDIA's target
    # has a number for its arch, 10 * the capability; AMD's is a gfx name, Intel's a dict)
    return processors, isinstance(target.arch, int) and target.arch >= 80


def {gemv_launch}(mat, vec, col, bias_col, has_bias, alpha, beta, acc_dtype, split_k):
    """col[b] = alpha * (mat[b] @ vec[b]) + beta * bias_col[b] with {gemv_kernel}; mat [batch, M, K],
    vec [batch, K], col and bias_col [batch, M], any strides."""
    batch, M, K = mat.shape
    # the tile runs along mat's contiguous axis: rows of K where K is (row-major), columns of M where
    # M is (a transposed operand), so each step's loads are whole cache lines
    BLOCK_M, BLOCK_K = (128, 32) if mat.stride(1) == 1 and mat.stride(2) != 1 else (16, 256)
    programs = triton.cdiv(M, BLOCK_M) * batch
    if split_k is None:
        # a memory-bound loop needs several programs resident on every processor to hide the
        # latency of its loads: K split until there are 8 a processor (project heuristic), each
        # split at least four BLOCK_K steps
        processors = {device_fn}(mat)[0]
        split_k = max(1, min(triton.cdiv(8 * processors, programs), triton.cdiv(K, 4 * BLOCK_K)))
    part = col
    if split_k > 1:
        part = torch.empty((split_k, batch, M), dtype=torch.promote_types(mat.dtype, torch.float32), device=mat.device)
    {gemv_kernel}[(triton.cdiv(M, BLOCK_M), batch, split_k)](
        mat, vec, col, bias_col, part, M, K,
        mat.stride(0), mat.stride(1), mat.stride(2), vec.stride(0), vec.stride(1), col.stride(0), col.stride(1),
        bias_col.stride(0), bias_col.stride(1),
        float(alpha), float(beta), HAS_BIAS=has_bias, ACC_DTYPE=acc_dtype, SPLIT_K=split_k,
        BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K, num_warps=4,
    )
    if split_k > 1:
        total = batch * M
        {splits_kernel}[(triton.cdiv(total, 1024),)](
            part, col, bias_col, total, M, 1,
            col.stride(0), col.stride(1), 0, bias_col.stride(0), bias_col.stride(1), 0,
            float(alpha), float(beta), HAS_BIAS=has_bias, ACC_DTYPE=acc_dtype, SPLIT_K=split_k, BLOCK=1024,
        )
'''.strip("\n") + "\n"
