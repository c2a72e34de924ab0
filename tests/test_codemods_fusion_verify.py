"""The fusion, memory-access and persistent codemods' outputs are correct in Triton's interpreter:
every rewritten sample against its PyTorch reference on its ci shape (every autotune config on
its own), the streaming path of the row rewrite too, and a chain of stages through the
verifier itself (isolated workers)."""

from __future__ import annotations

import re
from pathlib import Path

from test_codemods_fusion import scalar_rowsum_sample
from test_samples_support import case_for, run_against_reference

from xeforge_core.codemods.autotune import add_autotune
from xeforge_core.codemods.descriptors import use_descriptors
from xeforge_core.codemods.dtype_fix import fix_dtypes
from xeforge_core.codemods.fusion import fuse
from xeforge_core.codemods.memory_access import improve_memory_access
from xeforge_core.codemods.persistent import make_persistent
from xeforge_core.samples import load_sample
from xeforge_core.verify import VerifyOptions, verify

FAST = VerifyOptions(seeds=1, distributions=["normal"], use_cache=False, measure_performance=False)


def _stages(name: str) -> tuple[object, str]:
    """A sample through dtype_fix, fusion, memory_access, block_pointers, persistent_kernel and
    autotuning (each where it applies), for the cuda target."""
    problem = load_sample(name)
    src = problem.kernel.source
    for step in (fix_dtypes, fuse, lambda s: improve_memory_access(s, target="cuda", arch="hopper"),
                 lambda s: use_descriptors(s, target="cuda"),
                 lambda s: make_persistent(s, target="cuda", problem=problem),
                 lambda s: add_autotune(s, target="cuda", arch="hopper", options={"max_configs": 3})):
        res = step(src)
        if res.changed:
            src = res.source
    return problem, src


def test_rewritten_samples_match_their_references(tmp_path: Path) -> None:
    names = ["01_vector_add", "02_elementwise_chain", "03_row_softmax", "04_layernorm", "05_rmsnorm",
             "06_sum_reduction", "07_gemm_fp32_upcast", "08_gemm_bias_act", "09_gemm_rowsum", "10_batched_gemm",
             "11_maxpool2d", "12_conv2d_im2col", "13_flash_attention_fwd"]
    cases = []
    sources = {}
    for name in names:
        # 10's ci rows (N = 36 fp16, 72 bytes) are not 16-byte aligned: its launch runs the pointer
        # loads there, the descriptor kernel only where the operands are aligned
        problem, src = _stages(name)
        assert src != problem.kernel.source, f"{name}: no codemod applied"
        sources[name] = src
        path = tmp_path / f"{name}.py"
        path.write_text(src)
        case = case_for(name, problem)
        case["kernel"] = str(path)
        cases.append(case)
    # the streaming path of a row kernel: a table whose largest row is shorter than the ci rows
    for name in ("03_row_softmax", "04_layernorm"):
        streaming = re.sub(r"_ROW_WARPS = \{[^}]*\}", "_ROW_WARPS = {16: 1}", sources[name])
        assert streaming != sources[name]
        path = tmp_path / f"{name}_streaming.py"
        path.write_text(streaming)
        case = case_for(f"{name}_streaming", load_sample(name))
        case["kernel"] = str(path)
        cases.append(case)
    # the row sum's scalar-accumulator spelling, fused the same way (atomic partial sums)
    problem = load_sample("09_gemm_rowsum")
    scalar = fuse(scalar_rowsum_sample())
    assert scalar.changed
    path = tmp_path / "09_gemm_rowsum_scalar.py"
    path.write_text(scalar.source)
    case = case_for("09_gemm_rowsum_scalar", problem)
    case["kernel"] = str(path)
    cases.append(case)
    results = run_against_reference(cases, tmp_path)
    bad = {k: v for k, v in results.items() if not v["ok"]}
    assert not bad, bad
    assert len(results["10_batched_gemm"]["runs"]) == 3  # every autotune config of the persistent kernel


def test_verifier_accepts_the_fused_one_pass_softmax() -> None:
    problem, src = _stages("03_row_softmax")
    verdict = verify(problem, src, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()
    assert verdict.step("correctness") is not None


def test_descriptor_kernels_run_only_where_operands_are_aligned() -> None:
    """A tensor descriptor needs 16-byte aligned operands (the interpreter asserts it; on the
    H200 a 37-column fp16 operand read wrong tiles): the rewrite launches its descriptor kernel
    only there, so it verifies at the tile-derived odd sizes too, and autotuning still applies."""
    from xeforge_core.codemods.descriptors import use_descriptors

    problem = load_sample("07_gemm_fp32_upcast")
    described = use_descriptors(fix_dtypes(problem.kernel.source).source, target="cuda")
    assert described.changed and "if _descriptor_aligned(x, weight):" in described.source
    tuned = add_autotune(described.source, target="cuda", arch="hopper", options={"max_configs": 2})
    assert tuned.changed and sum("@triton.autotune" in n for n in tuned.notes) == 2, tuned.notes
    verdict = verify(problem, tuned.source, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()
    odd = [s for s in verdict.sizes if s.variant.endswith("-tiles")]
    assert odd and odd[0].sizes["K"] % 8, odd  # K not a multiple of 8 fp16 elements: the pointer path ran
