"""Each rules codemod turns a planted slow kernel into one the verifier finds correct (cpu,
Triton interpreter), and portability makes real Xe-Forge kernels that hard-code "xpu" run."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.codemods.autotune import add_autotune
from xeforge_core.codemods.autotune_grid import grid_follows_autotune
from xeforge_core.codemods.dtype_fix import fix_dtypes
from xeforge_core.codemods.xpu_specific import apply_xpu_knobs
from xeforge_core.engines import port_to_device_agnostic
from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify

FIXTURES = Path(__file__).parent / "fixtures" / "codemods"
FAST = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, use_cache=False,
                     measure_performance=False)
SPACE = [{"kwargs": {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, "num_warps": 4, "num_stages": 2}]


def _check(problem, code: str) -> None:
    verdict = verify(problem, code, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()
    assert verdict.step("correctness") is not None


def test_dtype_fix_candidate_verifies() -> None:
    problem = load_problem(FIXTURES / "matmul_fp32_dot.py")
    res = fix_dtypes(problem.kernel.source)
    assert res.applicable
    _check(problem, res.source)


def test_autotune_and_xpu_specific_candidates_verify() -> None:
    problem = load_problem(FIXTURES / "matmul_fixed_tiles.py")
    tuned = add_autotune(problem.kernel.source, target="cuda", search_space=SPACE)
    assert tuned.applicable
    _check(problem, tuned.source)
    knobs = apply_xpu_knobs(problem.kernel.source, target="cuda", options={"group_size_m": 2})
    assert knobs.applicable and "GROUP_SIZE_M" in knobs.source
    _check(problem, knobs.source)


@pytest.mark.parametrize("name", ["14_Gemm_Divide_Sum_Scaling", "84_Gemm_BatchNorm_Scaling_Softmax"])
def test_portability_makes_real_kernels_run_in_the_interpreter(xeforge_cases: Path, name: str) -> None:
    problem = load_problem(xeforge_cases / f"{name}.py", xeforge_cases / f"{name}.yaml")
    assert "xpu" in problem.kernel.source
    cand = port_to_device_agnostic(problem.kernel.source)
    assert cand.applicable
    # the original cannot run here: the ported version is verified as its own baseline (ci variant)
    ported = problem.with_kernel_source(cand.code, label="baseline")
    assert [v.name for v in ported.correctness_variants()] == ["ci"]
    _check(ported, cand.code)
    if name.startswith("84_"):
        # and the next stage's codemod on the ported real kernel verifies against it
        fixed = fix_dtypes(cand.code)
        assert fixed.applicable
        _check(ported, fixed.source)


def autotuned_with_fixed_grid(tmp: Path) -> Path:
    """The fixed-tile matmul fixture, autotuned over 16- and 32-wide tiles but launched with a
    grid fixed at 32: the 16-wide configs leave three quarters of the output unwritten (the
    pattern of Xe-Forge cases 39 and 55)."""
    src = (FIXTURES / "matmul_fixed_tiles.py").read_text()
    src = src.replace("@triton.jit\ndef matmul_kernel(", (
        "@triton.autotune(configs=[\n"
        '    triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4),\n'
        '    triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32}, num_warps=4),\n'
        '], key=["M", "N", "K"])\n@triton.jit\ndef matmul_kernel('))
    src = src.replace("grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))",
                      "grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))")
    src = src.replace("        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=32,\n", "")
    src = src.replace("    BLOCK_M, BLOCK_N = 16, 16\n", "")
    assert src.count("triton.cdiv(M, 32)") == 1 and "BLOCK_M=BLOCK_M" not in src
    path = tmp / "matmul_autotuned_fixed_grid.py"
    path.write_text(src)
    return path


def test_fixed_grid_of_an_autotuned_kernel_is_caught_then_fixed(tmp_path: Path) -> None:
    problem = load_problem(autotuned_with_fixed_grid(tmp_path))
    # the verifier runs every autotune config: the 16-wide ones leave output unwritten
    verdict = verify(problem, problem.kernel.source, device="cpu", options=FAST)
    assert not verdict.passed and "BLOCK_M=16" in verdict.reason, verdict.feedback()
    assert "left unwritten" in verdict.reason
    fixed = grid_follows_autotune(problem.kernel.source)
    assert fixed.applicable
    assert 'grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))' in fixed.source
    # portability applies the same fix (on any device), and the result verifies as its own baseline
    ported = port_to_device_agnostic(problem.kernel.source)
    assert ported.applicable and ported.code == fixed.source
    _check(problem.with_kernel_source(fixed.source, label="baseline"), fixed.source)
