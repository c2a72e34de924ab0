"""Fusion, memory-access, persistent and autotune-pruning codemods, statically: what each
rewrites on the samples and the real Xe-Forge cases it targets, that the output parses and adds no
lint findings, that each leaves the kernels it does not recognise untouched and says why, and
that the choices come from the target's search space."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import triton
from test_codemods import _clean

from xeforge_core.codemods.autotune import add_autotune
from xeforge_core.codemods.autotune_prune import operand_bytes, prune_static, pruner_source, rank
from xeforge_core.codemods.descriptors import use_descriptors
from xeforge_core.codemods.dtype_fix import fix_dtypes
from xeforge_core.codemods.fusion import fuse
from xeforge_core.codemods.memory_access import improve_memory_access
from xeforge_core.codemods.persistent import make_persistent
from xeforge_core.codemods.portability import port_source
from xeforge_core.codemods.spaces import space_configs
from xeforge_core.engines import ProposalContext, get_engine
from xeforge_core.samples import SAMPLES_DIR, load_sample

SAMPLES = Path(SAMPLES_DIR)


def _sample(name: str) -> str:
    return (SAMPLES / f"{name}.py").read_text()


def _kernels(source: str) -> list[str]:
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in n.decorator_list)]


# --- fusion ------------------------------------------------------------------------------------

def test_fusion_turns_launch_chains_into_one_kernel() -> None:
    src = _sample("02_elementwise_chain")
    res = fuse(src)
    assert res.applicable and _kernels(res.source) == ["scale_bias_gelu_kernel"]
    assert "t1 = torch.empty" not in res.source and "t2 = " not in res.source  # intermediates gone
    assert "t1_val = (x * scale).to(tl.float32)" in res.source  # kept in its fp32 precision
    _clean(src, res.source)
    soft = fuse(_sample("03_row_softmax"))
    assert soft.applicable and len(_kernels(soft.source)) == 1
    assert any("recomputed where they are read" in n for n in soft.notes)  # exp(x) is never stored
    assert "e = torch.empty" not in soft.source
    ln = fuse(_sample("04_layernorm"))
    assert ln.applicable and "mean = torch.empty" not in ln.source and len(_kernels(ln.source)) == 1


def test_fusion_moves_elementwise_kernels_into_the_gemm_epilogue(xeforge_cases: Path) -> None:
    res = fuse(_sample("08_gemm_bias_act"))
    assert res.applicable and _kernels(res.source) == ["matmul_bias_silu_kernel"]
    body = res.source.split("def matmul_bias_silu_kernel")[1].split("def kernel_function")[0]
    assert "tl.sigmoid" in body and "tmp = torch.empty" not in res.source
    # the consumer's store also takes the producer's tile mask
    assert "mask=(mask) & ((offs_m[:, None] < M) & (offs_n[None, :] < N))" in body
    _clean(_sample("08_gemm_bias_act"), res.source)
    for case, mode in (("81_Gemm_Swish_Divide_Clamp_Tanh_Clamp", "2d"), ("95_Matmul_Add_Swish_Tanh_GELU_Hardtanh",
                                                                       "flat")):
        ported = port_source((xeforge_cases / f"{case}.py").read_text()).source
        got = fuse(ported)
        assert got.applicable and len(_kernels(got.source)) == 1, got.reason
        assert f"({mode} elementwise read" in got.notes[0]


def test_fusion_batches_a_host_loop_of_launches() -> None:
    res = fuse(_sample("10_batched_gemm"))
    assert res.applicable and "for i in range(batch)" not in res.source
    assert "pid_batch = tl.program_id(2)" in res.source and "a_ptr += pid_batch.to(tl.int64) * stride_a_batch" in res.source
    assert "a.stride(1), a.stride(2)" in res.source and ", batch)](" in res.source


#: Sample 09's row sum written with a scalar accumulator (``acc += tl.sum(tile)``), the other
#: spelling of the same reduction.
_SCALAR_ROWSUM = ("""    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(c_ptr + row * stride_row + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))""",
                  """    acc = 0.0
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(c_ptr + row * stride_row + offs, mask=offs < n_cols, other=0.0), axis=0)
    tl.store(out_ptr + row, (acc * 1.0).to(out_ptr.dtype.element_ty))""")


def scalar_rowsum_sample() -> str:
    """Sample 09 with its row sum accumulated as a scalar."""
    src = _sample("09_gemm_rowsum")
    assert _SCALAR_ROWSUM[0] in src
    return src.replace(*_SCALAR_ROWSUM)


def test_fusion_moves_a_row_sum_into_the_gemm_epilogue() -> None:
    src = _sample("09_gemm_rowsum")
    res = fuse(src)
    assert res.applicable and _kernels(res.source) == ["linear_rowsum_kernel", "row_sum_finish_kernel"], res.reason
    gemm = res.source.split("def linear_rowsum_kernel")[1].split("def row_sum_finish_kernel")[0]
    finish = res.source.split("def row_sum_finish_kernel")[1].split("def kernel_function")[0]
    assert "tl.store" not in gemm and "tl.atomic_add(c_ptr + offs_m[:, None], tl.sum(tmp_tile, axis=1, keep_dims=True)" in gemm
    assert "for " not in finish and "acc_total = tl.load(c_ptr + row)" in finish
    assert "tmp = torch.empty((m, n)" not in res.source  # the [M, N] intermediate is gone
    assert "tmp_rowsum = torch.zeros((m,), dtype=torch.float32, device=x.device)" in res.source
    assert "tmp.stride" not in res.source and "row_sum_finish_kernel[(m,)](tmp_rowsum, out)" in res.source
    _clean(src, res.source)
    scalar = fuse(scalar_rowsum_sample())
    assert scalar.applicable and "(acc_total * 1.0)" in scalar.source and "for " not in scalar.source.split(
        "def row_sum_finish_kernel")[1].split("def kernel_function")[0]
    # a row mean whose width comes from the intermediate's shape: spelled from its allocation
    mean = fuse(src.replace("tl.sum(acc, axis=0).to(", "(tl.sum(acc, axis=0) / n_cols).to(").replace(
        "row_sum_kernel[(m,)](tmp, out, n, ", "row_sum_kernel[(m,)](tmp, out, tmp.shape[1], "))
    assert mean.applicable and "row_sum_finish_kernel[(m,)](tmp_rowsum, out, (n))" in mean.source
    assert "(acc_total / n_cols)" in mean.source
    # autotuning the fused GEMM zeroes the atomic buffer before each config the autotuner times
    tuned = add_autotune(res.source, target="cuda", arch="hopper")
    assert tuned.applicable and 'reset_to_zero=["c_ptr"]' in tuned.source


def test_fusion_says_why_it_leaves_kernels_alone(xeforge_cases: Path) -> None:
    partial = _sample("09_gemm_rowsum").replace("row_sum_kernel[(m,)](tmp, out, n, ", "row_sum_kernel[(m,)](tmp, out, n - 1, ")
    rowsum = fuse(partial)
    assert not rowsum.changed and "does not run over the whole width of tmp" in rowsum.reason
    assert "reduction across the producer's tiles" in rowsum.reason  # the elementwise epilogue step's reason
    attn = fuse(_sample("13_flash_attention_fwd"))
    assert attn.changed and any("online softmax" in n for n in attn.notes)  # test_codemods_fusion_attention.py
    single = fuse(_sample("01_vector_add"))
    assert not single.changed and "no two consecutive launches share a launch grid" in single.reason
    # a reason a rewrite gave for a shape it found comes first; of the shapes not found, the
    # general ones lead and attention comes last (a shortened reason is not about attention)
    assert single.reason.startswith("same-grid chains: no two") and single.reason.index("epilogues") < \
        single.reason.index("materialised attention: no score"), single.reason
    assert rowsum.reason.index("does not run over the whole width") < rowsum.reason.index("no score"), rowsum.reason
    ported = port_source((xeforge_cases / "84_Gemm_BatchNorm_Scaling_Softmax.py").read_text()).source
    assert "gemm_needs_2d_tiles" in fuse(ported).reason


# --- memory access -----------------------------------------------------------------------------

def test_rows_get_a_block_covering_the_row_in_one_pass() -> None:
    fused = fuse(_sample("03_row_softmax")).source
    res = improve_memory_access(fused, target="cuda", arch="hopper")
    assert res.applicable and "if ROW_FITS:" in res.source and "def _row_launch(" in res.source
    one_pass = res.source.split("if ROW_FITS:")[1].split("else:")[0]
    assert one_pass.count("tl.load(") == 1  # the three passes read the row once
    configs, _ = space_configs("cuda", "hopper", "row")
    warps = {c["kwargs"]["BLOCK"]: c["num_warps"] for c in configs}  # a block may appear twice (loop depths)
    table = "{" + ", ".join(f"{b}: {w}" for b, w in sorted(warps.items())) + "}"
    assert f"_ROW_WARPS = {table}" in res.source  # warps by row size from the search space
    xe = improve_memory_access(fused, target="xpu", arch="xe2")
    assert "_ROW_WARPS = {1024: 4, 2048: 8, 4096: 8, 8192: 16, 16384: 32}" in xe.source  # Xe's own sizes
    _clean(fused, res.source)
    ln = improve_memory_access(fuse(_sample("04_layernorm")).source, target="cuda")
    assert ln.source.split("if ROW_FITS:")[1].split("else:")[0].count("tl.load(") == 3  # x once, weight, bias


def test_flat_elementwise_blocks_come_from_the_search_space() -> None:
    res = improve_memory_access(_sample("01_vector_add"), target="cuda", arch="hopper")
    cfg = space_configs("cuda", "hopper", "elementwise")[0][0]
    assert res.applicable and f"BLOCK_SIZE = {cfg['kwargs']['BLOCK']}" in res.source
    assert f"num_warps={cfg['num_warps']}" in res.source


def test_one_output_per_program_is_lifted_to_blocks() -> None:
    pool = improve_memory_access(_sample("11_maxpool2d"), target="cuda")
    assert pool.applicable and "pid = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)" in pool.source
    assert "tl.full([BLOCK_P], float(\"-inf\"), tl.float32)" in pool.source
    red = improve_memory_access(_sample("06_sum_reduction"), target="cuda")
    assert red.applicable and "[None, :]" in red.source and "tl.arange(0, BLOCK)[:, None]" in red.source
    assert "tl.zeros([BLOCK, BLOCK_P], tl.float32)" in red.source
    assert "mask=(r < n_red) & out_mask" in red.source


def test_memory_access_says_why_it_leaves_kernels_alone(xeforge_cases: Path) -> None:
    gemm = improve_memory_access(_sample("07_gemm_fp32_upcast"), target="cuda")
    assert not gemm.changed and "is a GEMM (tl.dot): its operands are loaded as 2-D tiles already" in gemm.reason
    rows = improve_memory_access(_sample("05_rmsnorm"), target="cuda")
    again = improve_memory_access(rows.source, target="cuda")
    assert not again.changed and "already has a one-block path" in again.reason
    tuned = improve_memory_access(port_source((xeforge_cases / "39_Gemm_Scale_BatchNorm.py").read_text()).source,
                                  target="cuda")
    assert not tuned.changed and "_fused_gemm_scale_bn_kernel is a GEMM (tl.dot)" in tuned.reason
    # a row kernel walking a 2-D tile is not a row of one block
    w = improve_memory_access(port_source((xeforge_cases / "14_Gemm_Divide_Sum_Scaling.py").read_text()).source,
                              target="cuda")
    assert w.applicable and any(n.startswith("kernel dot_row_kernel: one program per row") for n in w.notes)
    assert any(n.startswith("not changed: kernel sum_weight_kernel works on 2-D tiles") for n in w.notes)


# --- persistent and autotune pruning -------------------------------------------------------------

def test_persistent_kernel_for_batched_grids_only() -> None:
    problem = load_sample("10_batched_gemm")
    res = make_persistent(fuse(problem.kernel.source).source, target="cuda", problem=problem)
    assert res.applicable and "tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True)" in res.source
    assert "_compute_units(a) * 2" in res.source and "a_ptr_tile = a_ptr +" in res.source
    gemm = load_sample("07_gemm_fp32_upcast")
    got = make_persistent(gemm.kernel.source, target="cuda", problem=gemm)
    assert not got.changed and "compute-bound" in got.reason and "persistent_only_large_grids" in got.reason


def test_autotune_space_is_pruned_for_the_profile_and_per_call() -> None:
    src = _sample("07_gemm_fp32_upcast")
    res = add_autotune(src, target="cuda", arch="hopper")
    assert res.applicable and "prune_configs_by={\"early_config_prune\": _prune_matmul_kernel_configs}" in res.source
    assert res.source.count("triton.Config(") <= 6
    # static: a config whose tiles overflow shared memory or whose accumulator spills is dropped
    huge = {"kwargs": {"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128}, "num_warps": 4, "num_stages": 5}
    kept, dropped = prune_static([{"kwargs": {}, "num_warps": 4, "num_stages": 2}, huge], None, "cuda")
    assert len(kept) == 1 and "shared memory" in dropped[0]
    # at the problem's operand width: Hopper's 128 x 256 x 64 tile at three stages fits in float16
    # (147456 B), not in float32 (294912 B of the 232448 B a block may use)
    wide = {"kwargs": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, "num_warps": 8, "num_stages": 3}
    first = {"kwargs": {}, "num_warps": 4, "num_stages": 2}
    assert len(prune_static([first, wide], None, "cuda")[0]) == 1
    assert operand_bytes(load_sample("07_gemm_fp32_upcast")) == 2 and operand_bytes(None) == 4
    assert len(prune_static([first, wide], None, "cuda", elem=2)[0]) == 2
    # per call: the generated pruner keeps the kernel's own config and ranks the rest
    ns: dict = {"torch": __import__("torch")}
    exec(pruner_source("_p", {"M": "M", "N": "N", "K": "K"}, {"peak_tflops": 989.5, "bandwidth_gbps": 4800,
                                                              "smem_bytes": 232448, "units": 132, "lanes": 32},
                       "nvidia_h200"), ns)
    cfgs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=2)] + [
        triton.Config(c["kwargs"], num_warps=c["num_warps"], num_stages=c["num_stages"])
        for c in space_configs("cuda", "hopper", "gemm")[0]]
    kept = ns["_p"](cfgs, {"M": 4096, "N": 4096, "K": 4096})
    assert len(kept) in (3, 4) and kept[0] is cfgs[0]  # a smaller tile is added, never swapped in
    assert (kept[1].kwargs["BLOCK_M"], kept[1].kwargs["BLOCK_N"]) in {(128, 128), (128, 256), (256, 128)}
    skinny = ns["_p"](cfgs, {"M": 128, "N": 16384, "K": 16384})
    assert all(c.kwargs["BLOCK_M"] <= 128 for c in skinny)
    # the model the generated code embeds and the library's agree
    dicts = [{"kwargs": c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages} for c in cfgs]
    nums = {"peak_tflops": 989.5, "bandwidth_gbps": 4800.0, "smem_bytes": 232448.0, "units": 132.0, "lanes": 32.0}
    assert [cfgs[i] for i in rank(4096, 4096, 4096, dicts, nums)] == kept
    # where the model's picks are all of its first pick's tile area or larger, one smaller tile is
    # measured as well (a batched GEMM with K = 128 lost 16% with only large tiles benchmarked),
    # beside the model's picks: giving one of them up cost 10-15% on the H200
    assert len({c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] for c in kept[1:]}) == 2
    from xeforge_core.codemods.autotune_prune import hedged
    assert hedged([1, 2, 3, 4], lambda x: {1: 4, 2: 4, 3: 4, 4: 2}[x], 2) == [1, 2, 4]
    assert hedged([1, 2, 3], lambda x: {1: 4, 2: 2, 3: 1}[x], 2) == [1, 2]
    for dims in ((2048, 2048, 128), (512, 512, 4096), (4096, 128, 4096)):
        picked = [dicts[i] for i in rank(*dims, dicts, nums)][1:]
        area = [c["kwargs"]["BLOCK_M"] * c["kwargs"]["BLOCK_N"] for c in picked]
        smaller_exists = any(c["kwargs"]["BLOCK_M"] * c["kwargs"]["BLOCK_N"] < area[0] for c in dicts[1:])
        assert any(a < area[0] for a in area[1:]) or not smaller_exists
        assert [cfgs[i] for i in rank(*dims, dicts, nums)] == ns["_p"](cfgs, dict(zip("MNK", dims)))


# --- tensor descriptors --------------------------------------------------------------------------

def test_dot_operands_are_read_through_tensor_descriptors(xeforge_cases: Path) -> None:
    src = fix_dtypes(_sample("07_gemm_fp32_upcast")).source
    res = use_descriptors(src, target="cuda")
    assert res.applicable
    assert ("a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, stride_ak], "
            "block_shape=[BLOCK_M, BLOCK_K])") in res.source
    # weight [N, K] is contiguous along K, the tile's first axis: described as [N, K], loaded transposed
    assert "b = b_desc.load([pid_n * BLOCK_N, k0]).T" in res.source
    twin = res.source[res.source.index("def matmul_kernel_descriptor("):res.source.index("def kernel_function")]
    assert "offs_k = " not in twin and "_descriptor_scratch(x)" in res.source
    # the descriptors need 16-byte aligned operands: the original pointer loads run elsewhere
    # each launch owns the grid, so the autotuning stage can still make it a function of META
    grid = "[(triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))]("
    assert f"if _descriptor_aligned(x, weight):\n        matmul_kernel_descriptor{grid}" in res.source
    assert f"    else:\n        matmul_kernel{grid}" in res.source and "grid = " not in res.source
    _clean(src, res.source)
    ported = port_source((xeforge_cases / "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py").read_text()).source
    case = use_descriptors(ported, target="cuda")
    assert case.applicable and "weight_desc.load([pid_n * BLOCK_N, k_start])" in case.source
    conv = use_descriptors(_sample("12_conv2d_im2col"), target="cuda")
    assert not conv.changed and "unit stride the launch passes" in conv.reason


# --- wiring ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage,codemod", [("fusion", "fusion"), ("memory_access", "memory_access"),
                                           ("persistent_kernel", "persistent_kernel"),
                                           ("block_pointers", "block_pointers")])
def test_rules_engine_maps_the_new_stages(stage: str, codemod: str) -> None:
    engine = get_engine("rules")
    assert stage in engine.stages()
    src = {"fusion": _sample("02_elementwise_chain"), "memory_access": _sample("01_vector_add"),
           "persistent_kernel": fuse(_sample("10_batched_gemm")).source,
           "block_pointers": _sample("08_gemm_bias_act")}[stage]
    ctx = ProposalContext(stage=stage, original_code=src, current_code=src, target="cuda",
                          problem=load_sample("10_batched_gemm") if stage == "persistent_kernel" else None)
    cand = engine.propose(stage, ctx)
    assert cand.applicable and cand.model == f"codemod:{codemod}", cand.not_applicable_reason
