"""What each variant costs to check, known at load, and the smaller ``ci`` offered when the
correctness variant is too big for Triton's interpreter (nothing runs: estimates from the spec)."""

from __future__ import annotations

from pathlib import Path

from xeforge_core.problem import load_problem, parse_spec, problem_from_source
from xeforge_core.variant_cost import DERIVED_CALL_S, derived_ci, rewrite_dims, variant_costs
from xeforge_core.verify import INTERPRETER_FLOP_PER_S, INTERPRETER_MAX_ELEMENTS_PER_S

ROOT = Path(__file__).resolve().parents[1]
GEMM = (ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py").read_text()
SPEC = (ROOT / "sample_kernels" / "07_gemm_fp32_upcast.yaml").read_text()
SMALL_CI = "      M: 40\n      K: 72\n      N: 48"
BENCH_CI = "      M: 1024\n      K: 8192\n      N: 8192"


def test_each_variant_has_its_elements_flop_and_interpreter_time() -> None:
    problem = problem_from_source(GEMM, name="gemm", spec_text=SPEC)
    costs = {c.variant: c for c in variant_costs(problem)}
    ci = costs["ci"]
    assert ci.correctness and not costs["bench-gpu"].correctness
    assert (ci.elements, ci.largest_input, ci.flop) == (40 * 72, 40 * 72, 2 * 40 * 48 * 72)
    assert ci.interpreter_s == max(ci.flop / INTERPRETER_FLOP_PER_S, ci.elements / INTERPRETER_MAX_ELEMENTS_PER_S)
    assert ci.status == "ok"
    assert costs["bench-gpu"].status == "refused"  # a benchmark shape: minutes per call on the CPU
    assert derived_ci(problem, SPEC) is None  # nothing to offer: ci fits


def test_a_bench_size_ci_gets_a_smaller_one_written_into_the_spec_text() -> None:
    spec = SPEC.replace(SMALL_CI, BENCH_CI)
    problem = problem_from_source(GEMM, name="gemm", spec_text=spec)
    ci = next(c for c in variant_costs(problem) if c.variant == "ci")
    assert ci.status == "refused" and ci.interpreter_s > 600
    offer = derived_ci(problem, spec)
    assert offer is not None and offer.original == "ci"
    assert offer.dims == {"M": 128, "K": 1024, "N": 1024}  # every size dim by the same power of two
    assert offer.summary == "M 1024->128, K 8192->1024, N 8192->1024"
    assert offer.cost.interpreter_s <= DERIVED_CALL_S and offer.cost.status == "ok"
    # only the ci entry's dims changed: comments, layout and the benchmark variants stay
    changed = [(a, b) for a, b in zip(spec.splitlines(), offer.spec_text.splitlines()) if a != b]
    assert changed == [("      M: 1024", "      M: 128"), ("      K: 8192", "      K: 1024"),
                       ("      N: 8192", "      N: 1024")]
    again = problem_from_source(GEMM, name="gemm", spec_text=offer.spec_text)
    assert again.spec.variants["ci"].dims == offer.dims
    assert again.spec.variants["bench-gpu"].dims == problem.spec.variants["bench-gpu"].dims


def test_flow_style_and_list_dims_are_rewritten_in_place() -> None:
    text = ("inputs:\n  X: {shape: [B, H]}\n"
            "ci:\n  - params: [X]\n    dims: {B: 64, H: 4096, S: [4096]}  # keep me\n")
    spec = parse_spec(text, "f.yaml")
    out = rewrite_dims(text, spec.lines, "ci", {"H": 512, "S": [512]})
    assert out.splitlines()[-1] == "    dims: {B: 64, H: 512, S: [512]}  # keep me"


def test_a_real_spec_with_a_bench_size_ci(xeforge_cases: Path) -> None:
    """39_Gemm_Scale_BatchNorm's ci is its benchmark shape (16384x4096x4096); its SCALE_SHAPE
    list repeats OUT_FEAT and shrinks with it, so the model's parameters still fit."""
    path = xeforge_cases / "39_Gemm_Scale_BatchNorm.py"
    problem = load_problem(path)
    offer = derived_ci(problem, path.with_suffix(".yaml").read_text())
    assert offer is not None
    assert offer.dims == {"BATCH": 1024, "IN_FEAT": 256, "OUT_FEAT": 256, "SCALE_SHAPE": [256]}
    assert offer.cost.status == "ok"


def test_a_memory_bound_bench_variant_is_refused_as_the_verifier_refuses_it() -> None:
    """sample 05's bench-gpu does 4 FLOP an element: its elements, not its FLOP, say it cannot be
    checked in the interpreter, and the load-time status agrees with the verifier."""
    problem = load_problem(ROOT / "sample_kernels" / "05_rmsnorm.py")
    costs = {c.variant: c for c in variant_costs(problem)}
    assert costs["bench-gpu"].status == "refused" and costs["ci"].status == "ok"
