"""The verification worker, run as a real subprocess (``python -m xeforge_core.worker JOB_DIR``)
on planted candidates against small baselines, in Triton's interpreter.

The GEMM baseline job runs once per module; every candidate job compares against its saved
outputs. Shapes are tiny: variant ``ci`` is 32x32x32 (multiples of the 32-wide tiles), variant
``odd`` is 33x20x40 (not a power of two, not a multiple of the tile).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xeforge_core.verdict import Verdict

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "fixtures" / "planted"

GEMM_SPEC = {
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["K", "N"], "dtype": "float16"}},
    "inits": [],
}
GEMM_VARIANTS = [
    {"name": "ci", "params": ["A", "B"], "dims": {"M": 32, "N": 32, "K": 32}, "flop": 2 * 32 * 32 * 32},
    {"name": "odd", "params": ["A", "B"], "dims": {"M": 33, "N": 20, "K": 40}, "flop": 2 * 33 * 20 * 40},
]


def source(name: str, label: str, filename: str | None = None, class_name: str = "Model") -> dict[str, Any]:
    return {"source": (PLANTED / name).read_text(), "filename": filename or f"{label}.py",
            "class_name": class_name, "label": label}


def run_worker(job_dir: Path, job: dict[str, Any]) -> dict[str, Any]:
    """Write job.json, run the worker as a subprocess, return result.json."""
    job_dir.mkdir(parents=True, exist_ok=True)
    job = dict(job, job_dir=str(job_dir))
    (job_dir / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if job.get("device", "cpu") == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:  # a GPU job compiles its kernels
        env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "xeforge_core.worker", str(job_dir)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((job_dir / "result.json").read_text())
    assert not (job_dir / "result.json.tmp").exists()
    return result


def gemm_job(role: str, module: dict[str, Any], **extra: Any) -> dict[str, Any]:
    job = {"role": role, "device": "cpu", "module": module, "baseline": None,
           "reference": source("gemm_ref.py", "reference", "gemm_ref.py"), "spec": GEMM_SPEC,
           "correctness_variants": GEMM_VARIANTS, "performance_variants": [], "seeds": [0, 1],
           "distributions": ["normal", "mixed"], "expected_dir": None, "options": {}}
    job.update(extra)
    return job


@pytest.fixture(scope="module")
def gemm_baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    job_dir = tmp_path_factory.mktemp("gemm-baseline")
    result = run_worker(job_dir, gemm_job("baseline", source("gemm_baseline.py", "baseline", "gemm.py")))
    return result, job_dir / "expected"


def run_candidate(tmp_path: Path, gemm_baseline: tuple[dict[str, Any], Path], name: str,
                  **options: Any) -> Verdict:
    _, expected = gemm_baseline
    job = gemm_job("candidate", source(name, "candidate", "candidate.py"), expected_dir=str(expected),
                   options=options)
    result = run_worker(tmp_path / "cand", job)
    assert result["role"] == "candidate"
    return Verdict.from_dict(result)


def step_status(v: Verdict, name: str) -> str:
    step = v.step(name)
    assert step is not None, [s.name for s in v.steps]
    return step.status.value


# --------------------------------------------------------------------------------------------

def test_baseline_saves_outputs_and_agrees_with_reference(gemm_baseline):
    result, expected = gemm_baseline
    v = Verdict.from_dict(result)
    assert result["role"] == "baseline"
    assert v.kind.value == "ok", v.reason
    assert [s.name for s in v.steps] == ["compile", "structure", "correctness", "performance"]
    assert step_status(v, "performance") == "not_measured"
    assert "interpreter" in v.step("performance").summary
    meta = json.loads((expected / "meta.json").read_text())
    assert len(meta["runs"]) == 8  # 2 variants x 2 seeds x 2 distributions
    assert all(run["ref_agrees"] for run in meta["runs"].values())
    assert meta["heavy_ops"] == []
    assert {r.against for r in v.correctness} == {"reference"} and all(r.passed for r in v.correctness)
    assert [k.name for k in v.kernels] == ["matmul_kernel"]
    assert v.kernels[0].config == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}
    events = [json.loads(line) for line in (expected.parent / "progress.jsonl").read_text().splitlines()]
    assert any(e["event"] == "step" and e["message"].startswith("correctness") for e in events)


def test_correct_candidate_is_ok(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_correct.py")
    assert v.kind.value == "ok", v.reason
    assert step_status(v, "compile") == "passed"
    assert step_status(v, "structure") == "passed"
    assert step_status(v, "correctness") == "passed"
    assert step_status(v, "performance") == "not_measured"
    runs = {(r.variant, r.seed, r.distribution, r.against) for r in v.correctness}
    # the reference is the truth: every run is judged against it
    assert ("odd", 1, "mixed", "reference") in runs and ("ci", 0, "normal", "reference") in runs
    assert {r.against for r in v.correctness} == {"reference"}
    assert all(r.passed for r in v.correctness)
    assert "matches the reference" in v.reason
    grids = v.step("correctness").evidence["grids"]
    assert grids["ci"]["matmul_kernel"] == [1, 2, 1] and grids["odd"]["matmul_kernel"] == [2, 2, 1]
    assert v.kernels[0].config["BLOCK_N"] == 16


def test_syntax_error_is_compile_error_at_its_line(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_syntax_error.py.txt")
    assert v.kind.value == "compile_error"
    assert v.source_line == 18
    assert "candidate.py:18" in v.reason and "for k0 in range(0, K, BLOCK_K)" in v.reason
    assert [step_status(v, n) for n in ("structure", "correctness", "performance")] == ["skipped"] * 3


def test_triton_compile_error_maps_to_the_kernel_line(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_compile_error.py")
    assert v.kind.value == "compile_error"
    assert v.source_line == 16
    assert "tl.arange(0, 24)" in v.reason and "power of 2" in v.reason
    assert "candidate.py:16" in v.error_text


def test_wrong_answer(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_wrong_answer.py")
    assert v.kind.value == "wrong_answer"
    assert "variant ci" in v.reason and "vs reference" in v.reason and "max abs error" in v.reason
    assert step_status(v, "structure") == "passed"
    failed = [r for r in v.correctness if not r.passed]
    assert failed and failed[0].outputs[0].mismatches > 0


def test_off_by_one_only_wrong_at_the_odd_size(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_odd_mask.py")
    assert v.kind.value == "wrong_answer"
    assert "variant odd" in v.reason and "left unwritten" in v.reason
    by_variant: dict[str, set[bool]] = {}
    for r in v.correctness:
        if r.against == "reference":
            by_variant.setdefault(r.variant, set()).add(r.passed)
    assert by_variant["ci"] == {True}
    assert by_variant["odd"] == {False}


def test_partly_unwritten_output_is_named(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_unwritten.py")
    assert v.kind.value == "wrong_answer"
    assert "512 output element(s) left unwritten" in v.reason  # half of the 32x32 output


def test_fp16_output_where_baseline_returns_fp32(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_fp16_out.py")
    assert v.kind.value == "wrong_answer"
    assert "dtype changed: expected float32, got float16" in v.reason
    comp = next(r for r in v.correctness if not r.passed).outputs[0]
    assert (comp.dtype, comp.expected_dtype) == ("float16", "float32")


def test_fp16_output_passes_when_dtype_change_allowed(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_fp16_out.py", allow_dtype_change=True)
    assert v.kind.value == "ok", v.reason


def test_torch_matmul_in_place_of_tl_dot_is_cheating(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_torch_matmul.py")
    assert v.kind.value == "cheating"
    assert any(f.rule == "torch_fallback" and "mm" in f.message for f in v.findings)
    assert "torch_fallback" in v.reason
    assert step_status(v, "correctness") == "skipped"


def test_result_cached_across_calls_is_cheating(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_cached.py")
    assert v.kind.value == "cheating"
    assert [f.rule for f in v.findings if f.severity == "error"] == ["cached_output"]


def test_an_output_that_ignores_its_inputs_is_a_wrong_answer_not_a_cache(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_constant.py")
    assert v.kind.value == "wrong_answer", v.reason
    assert not any(f.rule == "cached_output" for f in v.findings)


def test_input_mutation_is_a_wrong_answer_whose_reason_says_the_outputs_match(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_mutates.py")
    assert v.kind.value == "wrong_answer"
    assert [f.rule for f in v.findings if f.severity == "error"] == ["mutates_input"]
    assert "input 0" in v.reason and "its outputs match the reference on" in v.reason, v.reason


def test_autotune_config_checked_on_its_own(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_autotune_bad.py")
    assert v.kind.value == "wrong_answer"
    assert "BLOCK_K=16" in v.reason and "num_warps=2" in v.reason
    configs = {r.config for r in v.correctness if r.against == "reference"}
    good = "matmul_kernel[BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=2]"
    assert good in configs
    assert all(r.passed for r in v.correctness if r.config == good)
    assert {k.config.get("BLOCK_K") for k in v.kernels} == {16, 32}


def test_a_launch_that_passes_a_tuned_key_is_named_as_triton_names_it(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_autotune_conflict.py")
    assert v.kind.value == "runtime_error"
    assert v.reason.startswith("Conflicting meta-parameters: BLOCK_K is tuned by @triton.autotune"), v.reason
    assert "matmul_kernel[grid]" in v.reason and "LaunchRecorder" not in v.reason


def test_missing_expected_outputs_is_a_clear_error(tmp_path):
    job = gemm_job("candidate", source("cand_correct.py", "candidate"), expected_dir=str(tmp_path / "nowhere"))
    v = Verdict.from_dict(run_worker(tmp_path / "cand", job))
    assert v.kind.value == "runtime_error"
    assert "expected outputs are missing" in v.reason


def test_rules_the_baseline_breaks_are_not_held_against_the_candidate(tmp_path):
    small = {"correctness_variants": GEMM_VARIANTS[:1], "seeds": [0], "distributions": ["normal"], "reference": None}
    base = Verdict.from_dict(run_worker(tmp_path / "base", gemm_job(
        "baseline", source("cand_mutates.py", "baseline"), **small)))
    assert base.kind.value == "ok", base.reason
    assert [(f.rule, f.severity) for f in base.findings] == [("mutates_input", "warning")]
    cand = Verdict.from_dict(run_worker(tmp_path / "cand", gemm_job(
        "candidate", source("cand_mutates.py", "candidate"), expected_dir=str(tmp_path / "base" / "expected"),
        **small)))
    assert cand.kind.value == "ok", cand.reason
    # the baseline is the truth here, and what it modifies is compared after each call (worker.effects)
    assert any(f.rule == "mutates_input" and f.severity == "warning" and "as the truth does" in f.message
               for f in cand.findings)


def test_rebinding_the_verifiers_functions_is_cheating(tmp_path, gemm_baseline):
    v = run_candidate(tmp_path, gemm_baseline, "cand_forges_verdict.py")
    assert v.kind.value == "cheating"
    assert "tampers_with_harness" in v.reason and "compare_outputs was replaced" in v.reason


def test_a_kernel_whose_result_is_discarded_is_cheating(tmp_path, gemm_baseline):
    """The knockout call: with every Triton launch skipped the outputs still match, so torch
    computed them (a broadcast product and a sum, which no heavy-op trace names); the correct
    candidate's outputs change without its kernel (``test_correct_candidate_is_ok``)."""
    v = run_candidate(tmp_path, gemm_baseline, "cand_kernel_discarded.py")
    assert v.kind.value == "cheating", v.reason
    assert "kernels_unused" in v.reason and "1 Triton launch(es) skipped" in v.reason
    assert step_status(v, "correctness") == "skipped"
