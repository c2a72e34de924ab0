"""The problem formats people have, verified end to end through ``xeforge verify`` in Triton's
interpreter: a KernelBench problem with a ModelNew-only solution, a KernelAgent problem with a
``kernel_function`` module, a file whose ModelNew disagrees with its own Model, a reference that
ignores its inputs, a baseline that disagrees with its reference, a candidate that ignores a
launch-grid axis at a one-tile ``ci`` shape, and the knowledge-base and run-time lints.

The exit statuses are the documented ones (``xeforge verify --help``): 0 ok, 1 wrong_answer,
4 runtime_error, 10 inconclusive, 11 inconsistent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xeforge_core.cli import main

FORMATS = Path(__file__).resolve().parent / "fixtures" / "formats"
KB = FORMATS / "kernelbench"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))


def verify(capsys, *args: str) -> tuple[int, dict]:
    code = main(["verify", *map(str, args), "--device", "cpu", "--json", "--seeds", "2"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def rules(verdict: dict) -> dict[str, dict]:
    return {f["rule"]: f for f in verdict["findings"]}


def test_kernelbench_problem_and_modelnew_only_solutions(capsys):
    code, v = verify(capsys, KB / "residual_relu.py", KB / "residual_relu_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert "matches the reference" in v["reason"]
    assert {r["against"] for r in v["correctness"]} == {"reference"}

    code, v = verify(capsys, KB / "residual_relu.py", KB / "residual_relu_tail.py")
    assert (code, v["kind"]) == (1, "wrong_answer")
    assert "7 output element(s) left unwritten" in v["reason"]

    code, v = verify(capsys, KB / "residual_relu.py", KB / "residual_relu_sign.py")
    assert (code, v["kind"]) == (1, "wrong_answer")
    assert "vs reference" in v["reason"] and "outside the float64-calibrated bound" in v["reason"]
    assert "(first at [" in v["reason"] and "expected" in v["reason"]


def test_a_wrong_first_call_is_wrong_even_when_later_calls_are_right(capsys):
    code, v = verify(capsys, KB / "residual_relu.py", KB / "residual_relu_first_call.py", "--no-odd-size")
    assert (code, v["kind"]) == (1, "wrong_answer")
    assert v["reason"].startswith("wrong answer on the first call")


def test_kernelagent_kernel_function_is_bound_to_the_model(capsys):
    code, v = verify(capsys, FORMATS / "kernelagent" / "problem.py", FORMATS / "kernelagent" / "kernel.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    compile_step = next(s for s in v["steps"] if s["name"] == "compile")
    assert compile_step["evidence"]["call"] == ("kernel_function(x=input 0, weight=model.linear.weight, "
                                                "bias=model.linear.bias)")


def test_an_aliased_kernel_function_verifies(capsys):
    """``kernel_function = triton_kernel_wrapper``: the entry point is a module attribute,
    however it is bound; the verdict names the function that ran."""
    code, v = verify(capsys, FORMATS / "kernelagent" / "problem.py", FORMATS / "kernelagent" / "kernel_alias.py",
                     "--no-odd-size")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    compile_step = next(s for s in v["steps"] if s["name"] == "compile")
    assert compile_step["evidence"]["call"].startswith("triton_kernel_wrapper(x=input 0, weight=model.linear.weight")


def test_a_problem_with_an_unused_triton_kernel_and_a_torch_model_is_the_reference(capsys):
    """The problem binds ``Model = GetMask`` and defines a ``@triton.jit`` draft it never calls;
    its Model computes with torch, so it is the truth (not a Triton baseline that "launched no
    Triton kernel"); the solution's class is bound as ``ModelNew = TritonMask``."""
    code, v = verify(capsys, KB / "unused_jit.py", KB / "unused_jit_new.py", "--no-odd-size")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert {r["against"] for r in v["correctness"]} == {"reference"}
    assert any("never reaches" in w for w in v["warnings"])


def test_a_loss_over_probabilities_is_checked_on_its_own_inputs(capsys):
    """get_inputs() softmaxes both operands of a cross-entropy: the truth is checked on them
    (KernelBench draws them so), and the normal/ties redraws, on which the reference's log is
    NaN, are skipped and named instead of calling a right kernel wrong (the shifted one, positive
    everywhere, keeps the log finite and is checked); the targets alone are redrawn where all
    inputs at once leave the domain (the predictions the log takes keep theirs); a wrong mean is
    wrong."""
    code, v = verify(capsys, KB / "soft_cross_entropy.py", KB / "soft_cross_entropy_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert {r["distribution"] for r in v["correctness"]} == {"module", "shifted", "normal@1", "ties@1",
                                                             "spread@1", "zeros@1", "rowwise@1"}
    step = next(s for s in v["steps"] if s["name"] == "correctness")
    assert "normal, normal at get_inputs()[0], rowwise, rowwise at get_inputs()[0], spread" in step["summary"], \
        step["summary"]
    assert "not finite on normal inputs" in step["summary"]
    assert any("normal, rowwise, spread, ties and zeros inputs were not used" in w for w in v["warnings"]), \
        v["warnings"]
    assert any("normal at get_inputs()[0], rowwise at get_inputs()[0], spread at get_inputs()[0]" in w
               for w in v["warnings"]), v["warnings"]

    code, v = verify(capsys, KB / "soft_cross_entropy.py", KB / "soft_cross_entropy_classmean.py")
    assert (code, v["kind"]) == (1, "wrong_answer")
    assert "(seed 0, get_inputs() inputs) vs reference" in v["reason"]


def test_a_reference_not_finite_on_its_own_inputs_is_never_the_candidates_fault(capsys):
    """log(x) of rates get_inputs() sometimes zeroes is -inf there: named as the reference's, and a
    candidate that clamps the log differs only there, so the verdict is inconclusive, not wrong."""
    code, v = verify(capsys, KB / "log_rates.py", KB / "log_rates_clamped.py", "--no-odd-size")
    assert (code, v["kind"]) == (10, "inconclusive"), v["reason"]
    assert "differs only where the reference itself is NaN or Inf" in v["reason"] and "Inf of 20" in v["reason"]
    assert any("not finite on the problem's own get_inputs() inputs" in w for w in v["warnings"])


def test_a_kernel_written_for_the_published_shape_is_ok_there_with_a_finding(capsys):
    """It asserts 40 x 8192 and spans the row with one unmasked tl.arange: it refuses the reduced
    size the verifier checks first, so it is checked at the published size, the problem's
    contract, and is ok there, with a shape_specialised finding naming the size it fails at."""
    code, v = verify(capsys, KB / "rms_rows.py", KB / "rms_rows_fixed_shape.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert "at the published size" in v["reason"]
    found = rules(v)["shape_specialised"]
    assert found["severity"] == "warning"
    assert "module-small (batch_size=20, dim=4096)" in found["message"] and "AssertionError" in found["message"]
    assert {r["variant"] for r in v["correctness"] if r["passed"]} == {"module"}


def test_a_published_shape_too_large_for_the_interpreter_leaves_it_inconclusive(capsys, tmp_path):
    """The same kernel for a problem whose published size would take the interpreter minutes:
    not called wrong, inconclusive, with the estimate and how to check it."""
    for name, fixed in (("rms_rows", "batch_size = 4096"), ("rms_rows_fixed_shape", None)):
        text = (KB / f"{name}.py").read_text().replace("40 x 8192", "4096 x 8192").replace("(40,", "(4096,")
        (tmp_path / f"{name}.py").write_text(text.replace("batch_size = 40", fixed) if fixed else text)
    code, v = verify(capsys, tmp_path / "rms_rows.py", tmp_path / "rms_rows_fixed_shape.py", "--no-odd-size")
    assert (code, v["kind"]) == (10, "inconclusive"), v["reason"]
    assert "published size, which was not checked" in v["reason"] and "min or more" in v["reason"]
    assert "--variant module" in v["reason"]


def test_modelnew_that_disagrees_with_its_own_model_is_wrong(capsys):
    f = KB / "disagrees_with_model.py"
    code, v = verify(capsys, f, f)
    assert (code, v["kind"]) == (1, "wrong_answer")
    assert "output 1" in v["reason"] and "the problem is inconsistent" in v["reason"]


def test_a_modelnew_with_its_own_init_is_verified_with_the_models_weights_and_says_so(capsys):
    """KernelBench's evaluation builds both modules under one seed and compares them as built, so
    a right kernel behind another init fails there; ours copies the Model's weights in (the
    kernels are what is judged) and names the difference as a finding."""
    code, v = verify(capsys, KB / "linear_relu.py", KB / "linear_relu_randn_init.py", "--no-odd-size")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    init = rules(v)["init_differs"]
    assert init["severity"] == "warning" and "weight" in init["message"] and "eval_kernel_against_ref" in init["message"]
    step = next(s for s in v["steps"] if s["name"] == "correctness")
    assert all("copied by shape" in note for note in step["evidence"]["weights"].values())


def test_a_reference_with_dropout_in_training_mode_is_random_and_inconclusive(capsys):
    """KernelBench's Dropout problems draw a new mask every call: no candidate can match them
    element by element, so the verdict is inconclusive (exit 10) and says why, not wrong_answer."""
    code, v = verify(capsys, KB / "dropout_relu.py", KB / "dropout_relu_new.py", "--no-odd-size")
    assert (code, v["kind"]) == (10, "inconclusive"), v["reason"]
    assert "output is random" in v["reason"] and "Dropout in training mode" in v["reason"]
    assert ".eval()" in v["reason"]


def test_inputs_drawn_from_numpys_unseeded_generator_are_the_same_in_every_job(capsys):
    """A get_inputs() built with np.random draws new values at every call unless numpy's global
    generator is seeded as torch's is: the truth's second call (the check for a random truth)
    would see other inputs, and a right kernel would be called inconclusive."""
    code, v = verify(capsys, KB / "numpy_inputs_relu.py", KB / "dropout_relu_new.py", "--no-odd-size")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]


def test_a_reference_drawing_from_numpy_in_forward_is_random_and_inconclusive(capsys):
    """Seeding numpy for get_inputs() must not hide a forward that draws from it: the truth's
    second call moves every generator, not only torch's."""
    code, v = verify(capsys, KB / "numpy_dropout_relu.py", KB / "dropout_relu_new.py", "--no-odd-size")
    assert (code, v["kind"]) == (10, "inconclusive"), v["reason"]
    assert "output is random" in v["reason"], v["reason"]


def test_only_the_configs_of_autotuned_kernels_that_ran_are_claimed_checked(capsys):
    """Two autotuned kernels, one never launched at the checked sizes: the correctness summary
    counts the two configs of the kernel that ran, and names the other as never launched."""
    code, v = verify(capsys, KB / "numpy_inputs_relu.py", KB / "relu_two_autotuned.py", "--no-odd-size")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    summary = next(s for s in v["steps"] if s["name"] == "correctness")["summary"]
    assert "every one of 2 autotune config(s) (autotuned column_relu_kernel never launched" in summary, summary


def test_a_reference_that_ignores_its_inputs_is_inconclusive(capsys):
    code, v = verify(capsys, KB / "ignores_input.py", KB / "ignores_input_new.py")
    assert (code, v["kind"]) == (10, "inconclusive")
    assert "does not depend on its inputs" in v["reason"]
    # with one seed the redraws left out because the output did not change with them are the evidence
    code = main(["verify", str(KB / "ignores_input.py"), str(KB / "ignores_input_new.py"), "--device", "cpu",
                 "--json", "--seeds", "1"])
    v = json.loads(capsys.readouterr().out)
    assert (code, v["kind"]) == (10, "inconclusive"), v["reason"]
    assert "does not depend on its inputs" in v["reason"]
    # one seed and no redraw: nothing can show it, and the verdict says so
    code = main(["verify", str(KB / "ignores_input.py"), str(KB / "ignores_input_new.py"), "--device", "cpu",
                 "--json", "--seeds", "1", "--own-inputs-only", "--no-odd-size"])
    v = json.loads(capsys.readouterr().out)
    assert any("depends on its inputs was not checked" in w for w in v["warnings"]), v["warnings"]


def test_a_cuda_only_solution_is_named_and_its_port_verifies(capsys, tmp_path):
    from xeforge_core.codemods.portability import port_source

    cuda_only = KB / "residual_relu_cuda_only.py"
    code, v = verify(capsys, KB / "residual_relu.py", cuda_only)
    assert (code, v["kind"]) == (4, "runtime_error")
    assert "inputs must be CUDA tensors" in v["reason"] and "hard-codes the cuda device" in v["reason"]
    port = port_source(cuda_only.read_text())
    assert port.changed and "x.is_cuda" not in port.source
    ported = tmp_path / "residual_relu_ported.py"
    ported.write_text(port.source)
    code, v = verify(capsys, KB / "residual_relu.py", ported)
    assert (code, v["kind"]) == (0, "ok"), v["reason"]


def test_a_tl_range_loop_variable_is_a_tensor_in_the_interpreter_too(capsys):
    # `c.to(tl.int64)` on a tl.range variable compiles on a GPU; Triton's interpreter yields
    # Python ints there, which once made this a false compile_error on the CPU machine
    code, v = verify(capsys, KB / "column_sum.py", KB / "column_sum_range_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]


def test_fixed_inputs_are_one_fixed_input_set_not_inconclusive(capsys):
    # get_inputs() gives an index tensor (nothing floating to redraw): identical output across
    # seeds because the inputs are identical, which is said as such, never as inconclusive
    code, v = verify(capsys, KB / "fixed_index.py", KB / "fixed_index_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    step = next(s for s in v["steps"] if s["name"] == "correctness")
    assert "one fixed input set checked" in step["summary"]
    assert "inconclusive" not in json.dumps(v)


def test_a_baseline_that_disagrees_with_the_reference_makes_the_problem_inconsistent(capsys):
    code, v = verify(capsys, KB / "residual_relu_sign.py", KB / "residual_relu_new.py",
                     "--reference", KB / "residual_relu.py")
    assert (code, v["kind"]) == (11, "inconsistent")
    assert "the problem's baseline disagrees with the reference" in v["reason"]
    # the finding `xeforge optimize` reads to say so up front and exit 11
    (finding,) = [f for f in v["findings"] if f["rule"] == "inconsistent_problem"]
    assert finding["severity"] == "warning" and "the baseline is wrong" in finding["message"]
    from xeforge_core.pipeline.outcomes import OutcomeStatus, StageOutcome, inconsistent_problem
    from xeforge_core.verdict import Verdict

    outcome = StageOutcome(stage="fusion", status=OutcomeStatus.KEPT_CURRENT, reason="",
                           verdict=Verdict.from_dict(v))
    assert inconsistent_problem([outcome]) == finding["message"]
    assert inconsistent_problem([StageOutcome(stage="fusion", status=OutcomeStatus.KEPT_CURRENT, reason="")]) == ""


def test_a_candidate_ignoring_grid_axis_1_fails_at_the_derived_variant(capsys):
    planted = FORMATS.parent / "planted"
    gemm = (planted / "gemm_baseline.py", "--spec", FORMATS / "gemm_grid" / "gemm.yaml",
            "--reference", planted / "gemm_ref.py", "--no-odd-size")
    code, v = verify(capsys, gemm[0], FORMATS / "gemm_grid" / "gemm_axis1_ignored.py", *gemm[1:])
    assert (code, v["kind"]) == (1, "wrong_answer")
    assert "variant ci-grid4" in v["reason"] and "left unwritten" in v["reason"]
    assert "axis 1 of matmul_kernel ran 1 program" in v["reason"]

    code, v = verify(capsys, gemm[0], gemm[0], *gemm[1:])
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    step = next(s for s in v["steps"] if s["name"] == "correctness")
    assert step["evidence"]["derived_variant"]["name"] == "ci-grid4"
    assert {r["variant"] for r in v["correctness"]} == {"ci", "ci-grid4"}


def test_lints_appear_as_findings(capsys):
    lints = FORMATS / "lints"
    code, v = verify(capsys, lints / "rows.py", lints / "rows_masked_no_other.py", "--no-odd-size")
    assert code == 0, v["reason"]
    found = rules(v)["kb:masked_load_other"]
    assert found["line"] == 15 and found["severity"] == "warning" and "other=" in found["message"]

    code, v = verify(capsys, lints / "rows.py", lints / "rows_grid_axis1.py", "--no-odd-size", "--target", "cuda")
    assert (code, v["kind"]) == (4, "runtime_error")
    assert "launch grid axis 1 has 70000 programs, over the device's limit of 65535" in v["reason"]
    assert rules(v)["grid_axis_limit"]["severity"] == "error"
    overflow = rules(v)["kb:int64_offsets_for_large_strides"]
    assert overflow["line"] == 12 and "row * stride_m" in overflow["message"]

    code, v = verify(capsys, lints / "gemm_fp32.py", lints / "gemm_fp32_tf32.py", "--no-odd-size")
    assert code == 0, v["reason"]
    tf32 = rules(v)["fp32_dot_tf32"]
    # the baseline allocates its output as float32 by name, which the truth computes in float64
    assert "input_precision" in tf32["message"] and "measured here against the float64 truth" in tf32["message"]
    assert "(line 17: no input_precision" in tf32["message"]  # the file's line, not the kernel's
    code, v = verify(capsys, lints / "gemm_fp32.py", lints / "gemm_fp32.py", "--no-odd-size")
    assert "fp32_dot_tf32" not in rules(v)


def test_the_workbench_takes_a_kernelbench_problem_and_its_first_triton_version(tmp_path, monkeypatch):
    """Paste a plain-PyTorch problem, write its first Triton version (here through the manual
    engine), verify: judged against the problem's Model and the prompt says what is asked."""
    from xeforge_core.ui.workbench import Workbench

    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    wb = Workbench(tmp_path / "ws")
    wb.load_text((KB / "residual_relu.py").read_text(), name="residual_relu")
    assert wb.loaded.problem.eager_baseline
    wb.start_session()
    assert "first Triton version" in wb.prompt_for("fusion")
    wb.submit_manual("```python\n" + (KB / "residual_relu_new.py").read_text() + "\n```", stage="fusion")
    job = wb.start_verify()
    assert job.wait(240)
    verdict = job.result
    assert verdict.kind.value == "ok", verdict.reason
    assert "matches the reference" in verdict.reason


def test_a_fixed_grid_under_autotuning_is_judged_by_running_every_config(capsys):
    """The lint ``autotune_grid_uses_meta`` guesses from the pattern; the verdict runs every
    config on NaN-filled fresh memory: a fixed grid that covers every config's tiles is correct
    (the lint stays a warning), one that leaves a config's output unwritten is wrong."""
    code, v = verify(capsys, KB / "residual_relu.py", KB / "residual_relu_autotune_over_grid.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    (lint,) = [f for f in v["findings"] if f["rule"] == "kb:autotune_grid_uses_meta"]
    assert lint["severity"] == "warning" and "the correctness check runs every autotune config" in lint["message"]

    code, v = verify(capsys, KB / "residual_relu.py", KB / "residual_relu_autotune_short_grid.py")
    assert (code, v["kind"]) == (1, "wrong_answer"), v["reason"]
    assert "BLOCK=256" in v["reason"] and "left unwritten" in v["reason"]


def test_kernel_function_parameters_no_name_matches_take_the_models_next_parameters():
    """KernelAgent's harness passes the weights after the inputs in the model's order, whatever
    the function calls them: ``W`` and ``b`` are an ``nn.Linear``'s weight and bias, and a
    ``scaling_param`` is the model's next parameter not passed yet; a parameter with a default
    keeps it, and one a name matches still binds by name."""
    import torch

    from xeforge_core.worker.formats.kernelagent import bind

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.matmul = torch.nn.Linear(4, 3)
            self.scaling_factor = torch.nn.Parameter(torch.ones(3))
            self.bias = torch.nn.Parameter(torch.zeros(3))

    def kernel_function(x, W, b, scaling_param, bias, pool=16):
        return x

    model, x = Model(), torch.randn(2, 4)
    args, kwargs, shown = bind(kernel_function, [x], ["x"], model)
    assert args[1] is model.matmul.weight and args[2] is model.matmul.bias
    assert args[3] is model.scaling_factor and args[4] is model.bias and not kwargs
    assert shown == ("kernel_function(x=input 0, W=model.matmul.weight (the model's next parameter), "
                     "b=model.matmul.bias (the model's next parameter), "
                     "scaling_param=model.scaling_factor (the model's next parameter), bias=model.bias)")

    def too_many(x, W, b, c, d, e):
        return x

    with pytest.raises(TypeError, match="parameter 'e' matches no forward"):
        bind(too_many, [x], ["x"], model)

    def named_later(x, W_, weight):  # `weight` names the linear weight: W_ takes the next one
        return x

    args, _, _ = bind(named_later, [x], ["x"], model)
    assert args[1] is model.matmul.bias and args[2] is model.matmul.weight

    class Branchy(torch.nn.Module):  # registration order is source order, branches included
        def __init__(self, shift=True):
            super().__init__()
            self.conv = torch.nn.Linear(2, 2, bias=False)
            if shift:
                self.shift = torch.nn.Parameter(torch.zeros(2))
            self.scale = torch.nn.Parameter(torch.ones(2))

    def two(x, w0, s1, s2):
        return x

    branchy = Branchy()
    args, _, _ = bind(two, [x], ["x"], branchy)
    assert args[1] is branchy.conv.weight and args[2] is branchy.shift and args[3] is branchy.scale

    def scalar(x, W, eps: float):
        return x

    with pytest.raises(TypeError, match="parameter 'eps' matches no forward"):  # never a weight
        bind(scalar, [x], ["x"], model)


def test_kernel_function_parameters_named_after_constructor_arguments_take_their_values():
    """``hardtanh_min`` is an argument of ``Model.__init__`` that the model keeps only inside an
    ``nn.Hardtanh`` (as ``min_val``): the function gets the value the problem constructed the
    model with; a name the model holds itself still comes from the model."""
    import torch

    from xeforge_core.worker.formats.base import constructor_arguments
    from xeforge_core.worker.formats.kernelagent import bind

    class Model(torch.nn.Module):
        def __init__(self, in_features, out_features, scaling_factor, hardtanh_min, hardtanh_max):
            super().__init__()
            self.gemm = torch.nn.Linear(in_features, out_features)
            self.scaling_factor = scaling_factor
            self.hardtanh = torch.nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def kernel_function(x, weight, bias, scaling_factor, hardtanh_min, hardtanh_max):
        return x

    inits = [4, 3, 0.5, -2, 2]
    model, x = Model(*inits), torch.randn(2, 4)
    init_args = constructor_arguments(Model, inits)
    assert init_args == {"in_features": 4, "out_features": 3, "scaling_factor": 0.5, "hardtanh_min": -2,
                         "hardtanh_max": 2}
    args, kwargs, shown = bind(kernel_function, [x], ["x"], model, init_args)
    assert args[1:] == [model.gemm.weight, model.gemm.bias, 0.5, -2, 2] and not kwargs
    assert shown.endswith("scaling_factor=model.scaling_factor=0.5, hardtanh_min=Model(hardtanh_min)=-2, "
                          "hardtanh_max=Model(hardtanh_max)=2)")
    with pytest.raises(TypeError, match="parameter 'hardtanh_min' matches no forward"):
        bind(kernel_function, [x], ["x"], model)
    assert constructor_arguments(Model, [1]) == {}  # too few values: no names


def test_a_star_args_kernel_function_gets_the_fullest_call_it_accepts_and_keeps_it():
    """``kernel_function(*args)`` documents call patterns and KernelAgent's tests try them in
    turn: the inputs with the model's weights and number attributes first, then with the weights
    only, then the inputs alone; the first call that raises no TypeError is kept."""
    import torch

    from xeforge_core.worker.formats.kernelagent import adapt

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.matmul = torch.nn.Linear(4, 3)
            self.scale_factor = 2.0
            self.clamp_min, self.clamp_max = -1.0, 1.0

        def forward(self, x):
            return torch.clamp(self.matmul(x) * self.scale_factor, self.clamp_min, self.clamp_max)

    seen: list[int] = []

    def full(*args):
        seen.append(len(args))
        x, w, b, scale, lo, hi = args  # six or a TypeError, as such wrappers parse their arguments
        return torch.clamp((x @ w.T + b) * scale, lo, hi)

    model, x = Model(), torch.randn(2, 4)
    wrapped = adapt(full, model, ["x"], {})
    torch.testing.assert_close(wrapped(x), model(x))
    assert wrapped.description == ("full(*args=inputs 0, model.matmul.weight, model.matmul.bias, "
                                   "model.scale_factor=2.0, model.clamp_min=-1.0, model.clamp_max=1.0)")

    def weights_only(*args):
        if len(args) != 3:
            raise TypeError(f"Unsupported signature for kernel_function: {len(args)} arguments")
        x, w, b = args
        return x @ w.T + b

    wrapped = adapt(weights_only, model, ["x"], {})
    torch.testing.assert_close(wrapped(x), model.matmul(x))
    assert wrapped.pattern == 1 and wrapped.description.endswith("model.matmul.bias)")
    seen.clear()
    wrapped = adapt(full, model, ["x"], {})
    wrapped(x)
    wrapped(x)
    assert seen == [6, 6]  # the call taken first is the call made after


def test_an_aliased_tensor_is_not_also_the_plain_names():
    """``add_bias`` names the model's own ``bias`` (KernelAgent's alias); ``bias`` beside it in
    the same signature is then the linear layer's bias, not the same tensor twice."""
    import torch

    from xeforge_core.worker.formats.kernelagent import bind

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.matmul = torch.nn.Linear(4, 3)
            self.bn = torch.nn.BatchNorm1d(3)
            self.bias = torch.nn.Parameter(torch.zeros(1))

    def kernel_function(x, weight, bias, bn_weight, bn_bias, running_mean, add_bias=None):
        return x

    model, x = Model(), torch.randn(2, 4)
    args, kwargs, _ = bind(kernel_function, [x], ["x"], model)
    assert args[1] is model.matmul.weight and args[2] is model.matmul.bias
    assert args[3] is model.bn.weight and args[4] is model.bn.bias and args[5] is model.bn.running_mean
    assert (args[6] if len(args) > 6 else kwargs["add_bias"]) is model.bias

    def plain(x, bias):  # without the alias, `bias` is still the model's own
        return x

    args, _, _ = bind(plain, [x], ["x"], model)
    assert args[1] is model.bias


def test_a_kernel_function_that_writes_its_input_in_place_runs_on_a_copy():
    """KernelAgent's convention: ``None`` means the first input was written in place. The
    function runs on a copy of that input, which is the output: the caller's input stays as it
    was (the verdict's integrity checks see no aliasing and untouched inputs), and a function
    that returns its result is called on the caller's own input after its first call."""
    import torch

    from xeforge_core.worker.formats.kernelagent import adapt

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)

    def in_place(x):
        x.clamp_(min=0)

    seen: list[int] = []

    def fresh(x):
        seen.append(x.data_ptr())
        return torch.relu(x)

    x = torch.randn(8)
    before = x.clone()
    wrapped = adapt(in_place, Model(), ["x"], {})
    for _ in range(2):
        out = wrapped(x)
        assert torch.equal(out, torch.relu(before)) and torch.equal(x, before)
        assert out.data_ptr() != x.data_ptr()
    assert wrapped.in_place and "ran on a copy of that input" in wrapped.description
    wrapped = adapt(fresh, Model(), ["x"], {})
    wrapped(x)
    wrapped(x)
    assert wrapped.in_place is False and seen[1] == x.data_ptr() != seen[0]


def test_kernelbook_problems_with_wrapper_and_new_class_solutions(capsys):
    """KernelBook's layout (fixtures written here): the problem's module keeps its own name beside
    a helper module, get_init_inputs() returns [[args], {kwargs}], and a solution is either a
    ``triton_kernel_wrapper`` function or a ``<Name>New`` class that keeps a copy of the problem's
    class."""
    kb = FORMATS / "kernelbook"
    code, v = verify(capsys, kb / "problem.py", kb / "wrapper.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    compiled = next(s for s in v["steps"] if s["name"] == "compile")["summary"]
    assert "called triton_kernel_wrapper(x=input 0, limit=model.limit=0.3, scale=model.scale=2.0, " \
           "offset=model.shift.offset=0.25)" in compiled
    assert any("its one outermost nn.Module, ClampedSquare, is the problem" in w for w in v["warnings"])
    code, v = verify(capsys, kb / "problem.py", kb / "wrapper_no_scale.py")
    assert (code, v["kind"]) == (1, "wrong_answer")
    code, v = verify(capsys, kb / "problem.py", kb / "solution_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert "solution_new.py" in next(s for s in v["steps"] if s["name"] == "compile")["summary"]


def test_kernelbook_constructor_values_are_laid_out_in_parameter_order():
    from xeforge_core.worker.formats.base import constructor_values

    class Clamp:
        def __init__(self, limit, scale=1.0, offset=0.25):
            pass

    class TakesTwo:
        def __init__(self, a, b):
            pass

    class KeywordOnly:
        def __init__(self, *, k=1):
            pass

    assert constructor_values(Clamp, [[0.3], {"scale": 2.0}]) == [0.3, 2.0, 0.25]
    assert constructor_values(Clamp, [[], {"limit": 1.0}]) == [1.0, 1.0, 0.25]
    assert constructor_values(Clamp, [4, 5]) == [4, 5]  # KernelBench's positional list
    assert constructor_values(TakesTwo, [[1], {"b": 2}]) == [1, 2]
    # not KernelBook's shape for this constructor, or a keyword only a keyword-only parameter takes
    assert constructor_values(Clamp, [[1, 2, 3, 4], {}]) == [[1, 2, 3, 4], {}]
    assert constructor_values(KeywordOnly, [[], {"k": 3}]) == [[], {"k": 3}]
    assert constructor_values(KeywordOnly, [[], {}]) == []


def test_redraws_keep_the_structure_the_problem_poses(capsys, tmp_path):
    """A triangular input stays triangular in the normal and ties redraws, so a solution that
    reads only the upper triangle is right (it was wrong on the full redraws: 0.998 relative error
    for a published triangular matmul); one that also drops the diagonal is still wrong."""
    from xeforge_core.worker.inputs import impose_structure_, input_structure

    code, v = verify(capsys, KB / "triu_rowsum.py", KB / "triu_rowsum_new.py")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert {r["distribution"] for r in v["correctness"]} >= {"module", "normal", "ties"}
    strict = tmp_path / "strict_upper.py"
    strict.write_text((KB / "triu_rowsum_new.py").read_text().replace("cols >= row", "cols > row"))
    code, v = verify(capsys, KB / "triu_rowsum.py", strict)
    assert (code, v["kind"]) == (1, "wrong_answer")
    # symmetric inputs stay symmetric, zeros stay zero, signs are not kept
    import torch

    a = torch.randn(5, 5)
    sym = (a + a.T) / 2
    redraw = impose_structure_(torch.randn(5, 5), input_structure(sym))
    assert torch.equal(redraw, redraw.T)
    tri = torch.triu(torch.rand(4, 4))
    redraw = impose_structure_(torch.randn(4, 4) - 2, input_structure(tri))
    assert torch.equal(redraw, torch.triu(redraw)) and bool((redraw < 0).any())
    assert input_structure(torch.randn(3, 4)) == (None, False, 0)


def test_literal_shapes_are_scaled_so_one_program_hides_nothing(capsys, tmp_path):
    """KernelBook writes shapes inline (torch.rand([4, 4, 4, 4])): the verifier names each literal
    size (SIZE_4) and derives a size from the kernel's tiles, so a kernel that ignores its program
    id, right while one program covers the 256 posed elements, is wrong; with the program id it
    is ok."""
    from xeforge_core.problem.scaling import lift_literal_sizes

    kb = FORMATS / "kernelbook"
    code, v = verify(capsys, kb / "literal_shape.py", kb / "literal_shape_wrapper.py")
    assert (code, v["kind"]) == (1, "wrong_answer") and "module-tiles" in v["reason"], v["reason"]
    right = tmp_path / "right.py"
    right.write_text((kb / "literal_shape_wrapper.py").read_text().replace(
        "offs = tl.arange(0, BLOCK)", "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)"))
    code, v = verify(capsys, kb / "literal_shape.py", right)
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert {r["variant"] for r in v["correctness"]} >= {"module", "module-tiles"}
    lifted = lift_literal_sizes((kb / "literal_shape.py").read_text())
    assert "torch.rand([SIZE_4, SIZE_4, SIZE_4, SIZE_4])" in lifted and lifted.endswith("SIZE_4 = 4\n")
    assert lifted.count("\n") == (kb / "literal_shape.py").read_text().count("\n") + 3  # lines keep their numbers
    # bounds and fill values are no sizes; a module with size constants is left as it is
    src = "import torch\ndef get_inputs():\n    return [torch.randint(0, 10, (8, 3)), torch.full((8,), 7.0)]\n"
    assert "torch.randint(0, 10, (SIZE_8, SIZE_3))" in lift_literal_sizes(src)
    assert "torch.full((SIZE_8,), 7.0)" in lift_literal_sizes(src)
    assert lift_literal_sizes((KB / "residual_relu.py").read_text()) is None


def test_a_kernel_right_only_on_the_problems_input_domain_says_so_and_can_be_judged_there(capsys):
    """The redraws stress a kernel outside the domain get_inputs() draws from (a clamp that no
    input in [0, 1) reaches, dropped): wrong by default, with the reason saying the problem's own
    inputs match and naming the option that judges it on them alone."""
    code, v = verify(capsys, KB / "margin.py", KB / "margin_no_clamp.py", "--no-odd-size")
    assert (code, v["kind"]) == (1, "wrong_answer"), v["reason"]
    assert "normal inputs" in v["reason"] or "ties inputs" in v["reason"]
    assert "on the problem's own inputs (get_inputs()) it matches at every variant and seed" in v["reason"]
    assert "--own-inputs-only" in v["reason"]
    code, v = verify(capsys, KB / "margin.py", KB / "margin_no_clamp.py", "--no-odd-size", "--own-inputs-only")
    assert (code, v["kind"]) == (0, "ok"), v["reason"]
    assert any("--own-inputs-only" in w for w in v["warnings"])
    # a spec's inputs are all its own: the option is refused there, naming the spec
    sample = Path(__file__).resolve().parents[1] / "sample_kernels"
    code = main(["verify", str(sample / "01_vector_add.py"), str(sample / "01_vector_add.py"), "--spec",
                 str(sample / "01_vector_add.yaml"), "--device", "cpu", "--own-inputs-only"])
    err = capsys.readouterr().err
    assert code == 2 and "01_vector_add.yaml" in err and "--own-inputs-only applies to" in err


def test_a_wrong_answer_at_the_first_size_decides_over_a_later_size_it_cannot_compile_at(capsys, tmp_path):
    """Wrong at the size the problem poses (KernelBook's literal [4, 4]) and unable to compile at
    the odd size the verifier adds (a row spanned by one tl.arange of 3): the wrong answer is the
    verdict, the compile error a warning after it, not the other way round."""
    (tmp_path / "double.py").write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x * 2\n\n\n"
        "def get_inputs():\n    return [torch.randn([4, 4])]\n\n\ndef get_init_inputs():\n    return []\n")
    (tmp_path / "triple_rows.py").write_text(
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def _row(x_ptr, y_ptr, N: tl.constexpr):\n    cols = tl.arange(0, N)\n    row = tl.program_id(0)\n"
        "    tl.store(y_ptr + row * N + cols, tl.load(x_ptr + row * N + cols) * 3)\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n"
        "        _row[(x.shape[0],)](x, y, N=x.shape[1])\n        return y\n")
    code, v = verify(capsys, tmp_path / "double.py", tmp_path / "triple_rows.py")
    assert (code, v["kind"]) == (1, "wrong_answer"), v["reason"]
    assert v["reason"].startswith("wrong answer on variant module ")
    assert any(w.startswith("then at variant module-odd") and "compile_error" in w for w in v["warnings"])


def test_an_error_in_a_lifted_problem_quotes_the_line_as_the_user_wrote_it(tmp_path):
    """The worker imports the lifted text (``SIZE_8``), so a traceback read it; the error shows
    the user's literal (``8``) at the same line, in the traceback and in the quoted line."""
    from xeforge_core.problem.scaling import lift_literal_sizes
    from xeforge_core.worker.errors import format_error, last_line_in

    user = ("import torch\n\n\ndef get_inputs():\n"
            "    return [torch.rand([8, 3]).view(5, -1)]\n\n\ndef get_init_inputs():\n    return []\n")
    lifted = lift_literal_sizes(user)
    assert lifted and "torch.rand([SIZE_8, SIZE_3])" in lifted
    path = tmp_path / "problem.py"
    path.write_text(lifted)
    namespace: dict = {}
    exec(compile(lifted, str(path), "exec"), namespace)
    try:
        namespace["get_inputs"]()
    except RuntimeError as exc:
        line = last_line_in(exc, str(path))
        text = format_error(exc, str(path), line)
    assert line == 5
    assert "problem.py:5: return [torch.rand([8, 3]).view(5, -1)]" in text, text
    assert "SIZE_" not in text, text


def test_only_the_lifted_names_are_written_back():
    """A module that binds its own ``SIZE_4`` gets ``SIZE_4_`` for its literal 4: a quoted line
    keeps the user's ``SIZE_4`` and an attribute ``self.SIZE_16``, and writes back ``SIZE_4_``."""
    from xeforge_core.problem.scaling import lift_literal_sizes
    from xeforge_core.worker.lifted import names_in, user_text

    user = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        SIZE_4 = x.shape[-1]\n"
            "        return x.view(-1, SIZE_4)\n\n\ndef get_inputs():\n    return [torch.rand([4, 8])]\n\n\n"
            "def get_init_inputs():\n    return []\n")
    lifted = lift_literal_sizes(user)
    assert lifted and "torch.rand([SIZE_4_, SIZE_8])" in lifted
    names = names_in(lifted)
    assert names == {"SIZE_4_": "4", "SIZE_8": "8"}
    assert user_text("        return x.view(-1, SIZE_4) + self.SIZE_8 + SIZE_4_", names) == \
        "        return x.view(-1, SIZE_4) + self.SIZE_8 + 4"
