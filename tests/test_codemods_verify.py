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


def test_fixed_grid_of_an_autotuned_kernel_is_caught_then_fixed() -> None:
    problem = load_problem(FIXTURES / "matmul_autotuned_fixed_grid.py")
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
