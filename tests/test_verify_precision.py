"""Precision measured against a float64 truth, end to end in Triton's interpreter.

The fixtures (``fixtures/precision``) are float32 KernelBench-style problems: correct kernels
that sum in other orders than PyTorch (a tree, 32 sequential lanes over rows of 8000, partial
sums added atomically across programs, a blocked scan) must be ``ok``; a scan accumulated in
float16 is a precision downgrade, named with its measured error and accepted only with
``--allow fp16-accumulation``; a wrong operand worth 0.1% of a 256-term loss is
``wrong_answer`` (a 1e-2 tolerance passes it); a fault of logic whose error on zero-mean inputs
looks like a float16 operand's is not offered as a precision change; a wrong element is reported
by its coordinates with both values.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from xeforge_core.cli import main
from xeforge_core.precision import precision_lines
from xeforge_core.problem import load_problem
from xeforge_core.verdict import Verdict, VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker.truth64 import Float64Tracer

FIX = Path(__file__).resolve().parent / "fixtures" / "precision"
KB = Path(__file__).resolve().parent / "fixtures" / "formats" / "kernelbench"
FAST = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, grid_coverage=False, timeout_s=240)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    # one cache for the module: each problem's baseline job (and its float64 truth) runs once
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "precision-cache"))


def check(problem: str | Path, candidate: str, **options) -> Verdict:
    path = problem if isinstance(problem, Path) else FIX / problem
    return verify(load_problem(path), (FIX / candidate).read_text(), device="cpu",
                  options=replace(FAST, **options), candidate_name=candidate)


def findings(v: Verdict, rule: str) -> list:
    return [f for f in v.findings if f.rule == rule]


@pytest.mark.parametrize("problem, candidate", [
    ("rowsum.py", "rowsum_tree.py"), ("rowsum.py", "rowsum_sequential.py"), ("rowsum.py", "rowsum_split.py"),
    ("scan.py", "scan_blocked.py"), ("loss.py", "loss_tree.py")])
def test_correct_kernels_that_sum_in_another_order_are_ok(problem, candidate):
    v = check(problem, candidate, distributions=["normal", "mixed"])
    assert v.kind is VerdictKind.OK, v.reason
    assert v.precision["check"] == "float64" and v.precision["dtype"] == "float32"
    assert v.precision["factor"] == 512 and not v.precision["fallback"]
    assert all(r.check == "float64" for r in v.correctness)
    assert not findings(v, "precision_downgrade")


def test_a_float16_scan_in_a_float32_problem_is_named_with_its_measured_error():
    v = check("scan.py", "scan_fp16.py")
    assert v.kind is VerdictKind.WRONG_ANSWER
    assert "outside the float64-calibrated bound" in v.reason
    assert "precision change: float16 accumulators" in v.reason
    assert "--allow fp16-accumulation" in v.reason
    (f,) = findings(v, "precision_downgrade")
    assert f.severity == "error" and "kernel scan_rows, line" in f.message
    assert "relative error" in f.message and "reference's own error scale" in f.message
    worst = max(o.error_ratio for r in v.correctness for o in r.outputs)
    assert worst > 1000  # thousands of times the float32 reference's own error
    assert v.precision["error_ratio"] == worst

    allowed = check("scan.py", "scan_fp16.py", allow_precision=["fp16-accumulation"])
    assert allowed.kind is VerdictKind.OK, allowed.reason
    assert allowed.precision["allowed"] == ["fp16-accumulation"]
    assert "allowing fp16-accumulation (--allow)" in allowed.precision["applied"]
    (f,) = findings(allowed, "precision_downgrade")
    assert f.severity == "warning" and "allowed by --allow fp16-accumulation" in f.message


def test_a_float32_accumulator_rounded_once_is_ok_in_a_float16_problem():
    right = check("gemm_half.py", "gemm_half_fp32_acc.py", distributions=["normal", "mixed"])
    assert right.kind is VerdictKind.OK, right.reason
    assert right.precision["dtype"] == "float16" and right.precision["factor"] == 16


def test_a_float16_accumulator_does_not_excuse_a_wrong_float16_gemm():
    """A float16 accumulator beside products 2% too large (274x the reference's error scale): a
    wrong answer, with no allowance offered, as an accumulation allowance is too wide to explain
    an error on its own."""
    v = check("gemm_half.py", "gemm_half_fp16_acc_scaled.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "--allow" not in v.reason and not findings(v, "precision_downgrade"), v.reason


def test_a_float16_accumulator_is_right_where_the_reference_accumulates_in_float16():
    """A reference that rounds every step in float16 (a chain of adds, one op at a time) errs
    many roundings: a kernel that does the same in another order is as precise and is ok (a rule
    holding float16 accumulators to one rounding called it wrong, and was withdrawn)."""
    v = check("residual_chain_half.py", "residual_chain_half_reversed.py", distributions=["normal", "mixed"])
    assert v.kind is VerdictKind.OK, v.reason


def test_a_wrong_operand_worth_0_1_percent_of_a_large_sum_is_wrong():
    v = check("loss.py", "loss_wrong_operand.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "outside the float64-calibrated bound" in v.reason
    assert "precision change" not in v.reason  # a scalar with no lower precision in its source
    (out,) = v.correctness[-1].outputs
    assert out.first_mismatch == [] and out.first_actual != out.first_expected  # a 0-d output
    assert v.precision["kernelbench"]["tolerance"] == 1e-4 and not v.precision["kernelbench"]["passed"]
    # a 1e-2 tolerance, given explicitly, is the user's choice, and passes it
    loose = check("loss.py", "loss_wrong_operand.py", rtol=1e-2, atol=1e-2)
    assert loose.kind is VerdictKind.OK
    assert all(r.check == "tolerance" for r in loose.correctness)
    assert max(o.error_ratio for r in loose.correctness for o in r.outputs) > 512  # still measured


def test_a_reference_upcasting_by_name_keeps_the_float64_truth():
    # `.float()` / `.to(torch.float32)` / `dtype=torch.float32` in reference code is a floor on the
    # precision: the truth computes them in float64, so the 0.1% fault is found as with `loss.py`
    # (a fallback to 1e-2 tolerances had passed it) and a correct sum in another order stays ok
    wrong = check("loss_upcast.py", "loss_wrong_operand.py")
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "outside the float64-calibrated bound" in wrong.reason
    assert not wrong.precision["fallback"] and "_to_copy" in wrong.precision["widened"]
    assert any("computed in float64 what the reference asks in float32" in line
               for line in precision_lines(wrong.precision))
    right = check("loss_upcast.py", "loss_tree.py")
    assert right.kind is VerdictKind.OK, right.reason
    assert right.precision["check"] == "float64"


def test_the_float64_tracer_widens_named_float32_and_leaves_bit_views():
    tracer = Float64Tracer()
    x = torch.randn(8, dtype=torch.float64)
    with tracer:
        up = x.float() * 2
        made = torch.zeros(4, dtype=torch.float32)
        summed = torch.sum(x, dtype=torch.float32)
    assert up.dtype == made.dtype == summed.dtype == torch.float64 and tracer.narrow is None
    assert {"_to_copy", "zeros", "sum"} <= tracer.widened
    bits = torch.zeros(4, dtype=torch.int32)
    tracer = Float64Tracer()
    with tracer:
        view = bits.view(torch.float32)
    assert view.dtype == torch.float32 and tracer.narrow == ("view", "float32")
    tracer = Float64Tracer()
    with tracer:
        half = x.half()
    assert half.dtype == torch.float16 and tracer.narrow is not None  # a narrowing stays one


def test_the_first_wrong_element_is_given_by_its_coordinates_and_values(capsys):
    v = check(KB / "residual_relu.py", "residual_relu_one_wrong.py")
    assert v.kind is VerdictKind.WRONG_ANSWER
    run = next(r for r in v.correctness if not r.passed)
    (out,) = run.outputs
    assert out.mismatches == 1 and out.first_mismatch == [3, 17]
    assert out.first_actual == pytest.approx(out.first_expected + 1.0, abs=1e-5)
    assert f"first at [3, 17]: got {out.first_actual:.7g}, expected {out.first_expected:.7g}" in v.reason
    again = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
    assert again.correctness[-1].outputs[0].first_mismatch == [3, 17]


def test_the_cli_takes_allow_names_them_and_refuses_unknown_ones(capsys):
    args = ["verify", str(FIX / "scan.py"), str(FIX / "scan_fp16.py"), "--device", "cpu", "--seeds", "1",
            "--no-odd-size"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "--allow fp16-accumulation" in out and "precision: float32; judged against the float64 truth" in out
    assert "KernelBench's tolerance (atol = rtol = 0.0001 for float32): would fail" in out
    assert "float64 x512" in out  # the bound column of the correctness table
    assert main([*args, "--allow", "fp16-accumulation", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["precision"]["allowed"] == ["fp16-accumulation"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--allow", "fp16-accumulate"])
    assert exc.value.code == 2
    # the nearest valid name, as a spec's allow: list gets it
    assert "did you mean 'fp16-accumulation'?" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["optimize", "batch"])
def test_optimize_and_batch_take_allow_into_their_verify_options(command):
    from xeforge_core.cli import build_parser
    from xeforge_core.commands.optimize import verify_options

    args = build_parser().parse_args([command, "kernels", "--allow", "tf32", "--allow", "fp16-accumulation"])
    assert verify_options(args).allow_precision == ["tf32", "fp16-accumulation"]
    # a comma list in any case, as a spec's allow: list takes it
    args = build_parser().parse_args([command, "kernels", "--allow", "Approx-Math,tf32", "--allow", "tf32"])
    assert verify_options(args).allow_precision == ["tf32", "approx-math"]
    args = build_parser().parse_args([command, "kernels", "--allow", "Baseline,tf32"])
    assert verify_options(args).allow_precision == ["tf32", "baseline"]


def test_the_spec_and_the_options_allowances_both_reach_the_jobs():
    from xeforge_core.precision import PrecisionError, PrecisionPolicy
    from xeforge_core.problem import problem_from_source
    from xeforge_core.runner import WorkerOutcome

    spec = "inputs:\n  x: {shape: [N], dtype: float32}\nallow: [fp16]\nci:\n  - params: [x]\n    dims: {N: 8}\n"
    problem = problem_from_source((FIX / "rowsum_tree.py").read_text().replace("ModelNew", "Model"),
                                  spec_text=spec)
    jobs: list[dict] = []

    def record(job, **kwargs):
        jobs.append(job)
        return WorkerOutcome(result=None, returncode=1)

    verify(problem, "x = 1\n", device="cpu", options=replace(FAST, allow_precision=["tf32"], use_cache=False),
           run_worker=record)
    assert jobs and PrecisionPolicy.from_data(jobs[0]["options"]["precision"]) == PrecisionPolicy(("tf32",), ("fp16",))
    with pytest.raises(PrecisionError, match="--allow"):
        verify(problem, "x = 1\n", device="cpu", options=replace(FAST, allow_precision=["tf64"]), run_worker=record)


def test_a_logic_fault_that_looks_like_float16_on_normal_inputs_is_no_precision_change():
    """The masked-off lanes of a variance pass add mean**2 each: about 4e-4 relative error on
    normal inputs (a float16 operand's size, spread over most elements), 0.47 on the problem's
    own torch.rand inputs. No precision change explains the latter, so neither run is called
    one: no ``precision_downgrade`` finding and no ``--allow`` that would let the fault through."""
    v = check("rownorm.py", "rownorm_masked_lanes.py", distributions=["normal"])
    assert v.kind is VerdictKind.WRONG_ANSWER
    normal = [r for r in v.correctness if r.distribution == "normal" and not r.passed]
    assert normal and all(c.needs for r in normal for c in r.outputs)  # alone, it would pass for precision
    assert not findings(v, "precision_downgrade"), [f.message for f in v.findings]
    assert "--allow" not in v.reason and "precision change" not in v.reason


def test_an_approximate_formula_is_named_as_approximate_math_not_as_tf32():
    """GELU through tanh for the exact GELU: a spread error of a 10-bit mantissa's size that no
    TF32 dot and no half-precision type in the source explains; the verdict names approximate
    math and the option that accepts it, never TF32 in a kernel without a dot product."""
    v = check("gelu.py", "gelu_tanh.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "approximate math" in v.reason and "--allow approx-math" in v.reason, v.reason
    assert "TF32 dot products (" not in v.reason
    assert [f.message.split(":")[0] for f in findings(v, "precision_downgrade")] == [
        "approximate math (tanh.approx, fast exp/log/division)"]
    assert check("gelu.py", "gelu_tanh.py", allow_precision=["approx-math"]).kind is VerdictKind.OK


def test_another_formula_is_a_wrong_answer_not_a_downgrade_the_source_does_not_have():
    """x * sigmoid(1.702 x) for the exact GELU errs by about 1e-2: only a bfloat16 allowance would
    cover it, and the source has no bfloat16 (the scan finds every half-precision type), so the
    verdict offers no --allow that would let another function through; with approximate math
    allowed it still fails, and says the bound was widened by it."""
    v = check("gelu.py", "gelu_sigmoid.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "--allow" not in v.reason and "precision change" not in v.reason, v.reason
    assert not findings(v, "precision_downgrade")
    allowed = check("gelu.py", "gelu_sigmoid.py", allow_precision=["approx-math"])
    assert allowed.kind is VerdictKind.WRONG_ANSWER
    assert "512x allowed plus what --allow approx-math adds" in allowed.reason, allowed.reason


def test_approximate_math_neither_explains_nor_excuses_an_error_where_the_truth_has_nothing_to_approximate():
    """A row sum scaled by 1 + 4e-4 on odd rows errs like a 10-bit mantissa, but the truth is sums
    alone: no exponential, logarithm or other function a kernel computes approximately. So the
    verdict does not call it approximate math, and --allow approx-math does not widen the bound
    (a warning says why); the same allowance still accepts GELU through tanh (above)."""
    v = check("rowsum.py", "rowsum_scaled_rows.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "approximate math" not in v.reason and "--allow" not in v.reason, v.reason
    assert not findings(v, "precision_downgrade")
    allowed = check("rowsum.py", "rowsum_scaled_rows.py", allow_precision=["approx-math"])
    assert allowed.kind is VerdictKind.WRONG_ANSWER, allowed.reason
    assert any("--allow approx-math does not apply: the reference computes no function" in w
               for w in allowed.warnings), allowed.warnings


def test_a_fault_beside_a_precision_change_is_the_reason_not_the_precision_change():
    """A truncated-TF32 GEMM (emulated) whose K mask is wrong past the last full tile: at the
    problem's sizes its error is what TF32 gives, at the derived sizes (K=33) it is garbage. The
    reason names the fault and its variant, no allowance is offered, and allowing TF32 does not
    pass it."""
    v = check("gemm.py", "gemm_tf32_cut_k_tail.py")
    assert v.kind is VerdictKind.WRONG_ANSWER
    # the mask's read past B leads (every call is bounds-checked in the interpreter), then the
    # comparison that shows it
    assert v.reason.startswith("out-of-bounds read found by the memory checker: kernel matmul"), v.reason
    assert "; and the outputs: wrong answer on variant module-tiles" in v.reason, v.reason
    assert "--allow" not in v.reason and not findings(v, "precision_downgrade")
    allowed = check("gemm.py", "gemm_tf32_cut_k_tail.py", allow_precision=["tf32"])
    assert allowed.kind is VerdictKind.WRONG_ANSWER and "module-tiles" in allowed.reason


def test_allow_baseline_holds_candidates_to_the_baselines_measured_precision():
    """A published GELU written with the tanh formula where the problem asks for the exact one:
    the baseline is measured to need approximate math, so ``--allow baseline`` accepts a candidate
    that keeps the formula at another tile, names what it resolved to, and still refuses a
    candidate that errs beyond it (another function). Without it the candidate is held to
    float32, and the baseline's warning names the option."""
    problem = load_problem(FIX / "gelu_tanh.py", reference_path=FIX / "gelu.py")
    retiled = (FIX / "gelu_tanh.py").read_text().replace("cdiv(n, 1024),)](x, y, n, BLOCK=1024)",
                                                          "cdiv(n, 256),)](x, y, n, BLOCK=256)")
    assert "BLOCK=256" in retiled

    def run(source: str, **options) -> Verdict:
        return verify(problem, source, device="cpu", options=replace(FAST, **options), candidate_name="candidate.py")

    held = run(retiled)
    assert held.kind is VerdictKind.WRONG_ANSWER and "--allow approx-math" in held.reason, held.reason
    assert any("--allow baseline holds them to the baseline's: approx-math" in w for w in held.warnings), held.warnings
    assert "or --allow baseline: the baseline is measured to need it too" in held.reason, held.reason
    follows = run(retiled, allow_precision=["baseline"])
    assert follows.kind is VerdictKind.OK, follows.reason
    assert follows.precision["from_baseline"] == ["approx-math"] and follows.precision["allowed"] == ["approx-math"]
    assert follows.precision["applied"] == "float32, allowing approx-math (baseline)"
    said = [w for w in follows.warnings if "the baseline computes at a lower precision" in w]
    assert said and said[0].endswith("--allow baseline holds candidates to it (approx-math)"), said
    assert "pass --allow approx-math" not in said[0]  # it was passed, as baseline
    assert any("(allowed by --allow baseline (approx-math))" in f.message for f in follows.findings), follows.findings
    other = run((FIX / "gelu_sigmoid.py").read_text(), allow_precision=["baseline"])
    assert other.kind is VerdictKind.WRONG_ANSWER, other.reason


def test_allow_baseline_adds_nothing_where_the_baseline_is_at_the_problems_precision():
    v = check(KB / "residual_relu.py", "residual_relu_one_wrong.py", allow_precision=["baseline"])
    assert v.kind is VerdictKind.WRONG_ANSWER and v.precision["allowed"] == []
    assert v.precision["applied"] == "float32, allowing the baseline's precision (it needs no downgrade)"
    assert v.precision["baseline_state"] == "measured"


def test_an_allowance_with_nothing_to_apply_to_does_not_widen_the_bound():
    """``--allow tf32`` for a kernel with no float32 ``tl.dot``: an approximate GELU errs like TF32
    products would, but the allowance vouches only for what it names, so it is not applied (the
    verdict says so) and the approximate formula is named for what it is."""
    v = check("gelu.py", "gelu_tanh.py", allow_precision=["tf32"])
    assert v.kind is VerdictKind.WRONG_ANSWER and "--allow approx-math" in v.reason, v.reason
    assert v.precision["inapplicable"] == ["tf32"] and v.precision["allowed"] == []
    assert any(w.startswith("--allow tf32 does not apply: the kernels have no TF32 dot products") for w in v.warnings)


def test_allow_baseline_allows_nothing_for_a_baseline_wrong_beyond_precision():
    """A baseline with a fault whose error looks like a precision change on zero-mean inputs and is
    plainly wrong on the problem's own ``torch.rand`` inputs (masked lanes add mean² to a
    variance): its small errors are not trusted to be a precision change, so ``--allow baseline``
    allows nothing and the same fault in a candidate stays a wrong answer."""
    problem = load_problem(FIX / "rownorm_masked_lanes.py", reference_path=FIX / "rownorm.py")
    source = (FIX / "rownorm_masked_lanes.py").read_text()
    v = verify(problem, source, device="cpu", candidate_name="candidate.py",
               options=replace(FAST, allow_precision=["baseline"], distributions=["normal", "uniform"]))
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert v.precision["from_baseline"] == [] and v.precision["baseline_state"] == "inconsistent", v.precision


@pytest.mark.parametrize("problem", ["rownorm.py", "rownorm_pow.py"])
def test_a_variance_divided_by_n_minus_1_is_not_named_approximate_math(problem):
    """A row normalisation whose variance divides by n - 1: its error (4.5e-4 relative) is the
    size approximate math could give, but the reference's functions (a square root, a variance,
    a square written ``** 2``) have hardware approximations within a few float32 units in the
    last place, and the source calls no fast intrinsic. So the verdict does not call it a
    precision change (a fresh user was told it was, and offered the allowance); it says to look
    for a fault of logic first, and which allowance would accept an approximation of the
    kernel's own."""
    v = check(problem, "rownorm_unbiased.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "this is a precision change" not in v.reason and not findings(v, "precision_downgrade"), v.reason
    assert "no precision change the source shows explains it" in v.reason, v.reason
    assert "look for a fault of logic first" in v.reason and "--allow approx-math accepts errors" in v.reason


def test_an_exponential_of_the_kernels_own_is_accepted_when_approximate_math_is_allowed():
    """A softmax whose exponential is a polynomial (1.4e-4 relative): beyond the float32 bound,
    so a wrong answer by default, with the fault-first advice; given --allow approx-math, the
    user vouches for the approximation and the allowance applies (it is not restricted to
    kernels whose source shows a fast intrinsic)."""
    v = check("softmax.py", "softmax_poly_exp.py")
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "look for a fault of logic first" in v.reason and "--allow approx-math" in v.reason, v.reason
    allowed = check("softmax.py", "softmax_poly_exp.py", allow_precision=["approx-math"])
    assert allowed.kind is VerdictKind.OK, allowed.reason
    assert not any("does not apply" in w for w in allowed.warnings), allowed.warnings


def test_the_reason_shows_the_run_no_allowance_accepts_first():
    """A row normalisation without its eps: NaN on a row of equal values, 6e-5 relative on the
    problem's own inputs. The reason quotes the NaN run (the fault), not the small error that an
    approximation of the kernel's own could also give."""
    v = check("rownorm.py", "rownorm_noeps.py", distributions=["normal", "zeros"])
    assert v.kind is VerdictKind.WRONG_ANSWER, v.reason
    assert "zeros" in v.reason.split(" vs ")[0], v.reason


def test_an_integer_power_is_rational_arithmetic():
    """``torch.square(x) * 0.5``: the truth's power has an integer exponent, products alone, so a
    wrong constant is a wrong answer that --allow approx-math does not accept (as for ``x * x``)."""
    v = check("square.py", "square_scaled.py")
    assert v.kind is VerdictKind.WRONG_ANSWER and "fault of logic first" not in v.reason, v.reason
    allowed = check("square.py", "square_scaled.py", allow_precision=["approx-math"])
    assert allowed.kind is VerdictKind.WRONG_ANSWER, allowed.reason
    assert any("--allow approx-math does not apply" in w for w in allowed.warnings), allowed.warnings
