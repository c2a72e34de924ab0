"""The worker on KernelBench-style modules without a spec, on baselines that cannot run here,
on integrity rules checked from the source, and the timing role; run as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_worker_planted import PLANTED, run_worker, source
from xeforge_core.verdict import Verdict


def scale_job(role: str, module: dict[str, Any], **extra: Any) -> dict[str, Any]:
    job = {"role": role, "device": "cpu", "module": module, "baseline": None, "reference": None, "spec": None,
           "correctness_variants": [], "performance_variants": [], "seeds": [0, 1],
           "distributions": ["normal", "module"], "expected_dir": None, "options": {}}
    job.update(extra)
    return job


@pytest.fixture(scope="module")
def scale_baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Verdict, Path]:
    job_dir = tmp_path_factory.mktemp("scale-baseline")
    result = run_worker(job_dir, scale_job("baseline", source("scale_baseline.py", "baseline", "scale.py")))
    return Verdict.from_dict(result), job_dir / "expected"


def candidate(tmp_path: Path, expected: Path, name: str, **extra: Any) -> Verdict:
    job = scale_job("candidate", source(name, "candidate", "candidate.py", extra.pop("class_name", "Model")),
                    expected_dir=str(expected), **extra)
    return Verdict.from_dict(run_worker(tmp_path / "cand", job))


def test_kernelbench_module_without_spec(tmp_path, scale_baseline):
    base, expected = scale_baseline
    assert base.kind.value == "ok", base.reason
    meta = json.loads((expected / "meta.json").read_text())
    assert sorted(meta["runs"]) == ["module__s0__module", "module__s0__normal", "module__s1__module",
                                    "module__s1__normal"]
    lints = [{"rule": "pow2_num_warps", "message": "num_warps should be a power of two", "severity": "warning",
              "line": 3}]
    v = candidate(tmp_path, expected, "scale_baseline.py", options={"lints": lints})
    assert v.kind.value == "ok", v.reason
    assert any(f.rule == "kb:pow2_num_warps" and f.line == 3 for f in v.findings)
    assert v.step("correctness").evidence["weights"] == {"module/s0": "copied", "module/s1": "copied"}


def test_error_severity_lint_fails_structure(tmp_path, scale_baseline):
    _, expected = scale_baseline
    lints = [{"rule": "kb:grf_mode", "message": "grf_mode must be 128 or 256", "severity": "error", "line": 12}]
    v = candidate(tmp_path, expected, "scale_baseline.py", options={"lints": lints})
    assert v.kind.value == "compile_error"  # the kernel as written fails on the target
    assert "knowledge-base rule kb:grf_mode broken" in v.reason and v.source_line == 12


def test_model_missing_at_run_time(tmp_path, scale_baseline):
    _, expected = scale_baseline
    v = candidate(tmp_path, expected, "scale_baseline.py", class_name="ModelNew")
    assert v.kind.value == "runtime_error"
    assert "ModelNew is missing" in v.reason and "defines classes: Model" in v.reason


def test_try_except_fallback_is_cheating(tmp_path, scale_baseline):
    _, expected = scale_baseline
    v = candidate(tmp_path, expected, "scale_try_fallback.py")
    assert v.kind.value == "cheating"
    finding = next(f for f in v.findings if f.rule == "try_except_fallback")
    assert finding.line == 25  # the except line
    assert v.source_line == 25


def test_patching_timers_is_cheating(tmp_path, scale_baseline):
    _, expected = scale_baseline
    v = candidate(tmp_path, expected, "scale_patches_timer.py")
    assert v.kind.value == "cheating"
    rules = {(f.rule, f.line) for f in v.findings}
    assert ("patches_timer", 12) in rules and ("patches_timer", 13) in rules
    messages = " ".join(f.message for f in v.findings)
    assert "torch.cuda.synchronize was replaced at run time" in messages
    assert "time.perf_counter was replaced at run time" in messages


def test_get_inputs_returning_non_tensors(tmp_path):
    v = Verdict.from_dict(run_worker(tmp_path, scale_job("baseline", source("scale_bad_inputs.py", "baseline"))))
    assert v.kind.value == "runtime_error"
    assert "get_inputs() in baseline.py returned a numpy.ndarray at position 0" in v.reason
    assert v.reason.startswith("the baseline failed")


def test_init_values_the_constructor_rejects(tmp_path):
    variant = {"name": "ci", "params": [], "dims": {}, "init_values": [48, 2, 3]}
    job = scale_job("baseline", source("scale_baseline.py", "baseline"), correctness_variants=[variant])
    v = Verdict.from_dict(run_worker(tmp_path, job))
    assert v.kind.value == "runtime_error"
    assert "Model(48, 2, 3) rejected its init values: TypeError" in v.reason


def test_baseline_hard_coding_xpu_says_so(tmp_path):
    v = Verdict.from_dict(run_worker(tmp_path, scale_job("baseline", source("scale_xpu_hardcoded.py", "baseline"))))
    assert v.kind.value == "runtime_error"
    assert "hard-codes the xpu device; it cannot run on cpu as written (the portability codemod rewrites it)" \
        in v.reason
    assert "XPU is not available" in v.reason


def test_baseline_falling_back_to_torch_without_xpu(tmp_path):
    v = Verdict.from_dict(run_worker(tmp_path, scale_job("baseline", source("scale_xpu_fallback.py", "baseline"))))
    assert v.kind.value == "environment"
    assert "launched no Triton kernel on cpu" in v.reason and "never ran" in v.reason
    assert "falls back to torch ops when no XPU is present" in v.reason


def test_real_xeforge_kernel_hard_codes_xpu(tmp_path, xeforge_cases):
    src = (xeforge_cases / "14_Gemm_Divide_Sum_Scaling.py").read_text()
    job = scale_job("baseline", {"source": src, "filename": "14_Gemm_Divide_Sum_Scaling.py", "class_name": "Model",
                                 "label": "baseline"},
                    spec={"inputs": {"X": {"shape": ["BATCH", "INPUT_SIZE"], "dtype": "float32"}}, "inits": []},
                    correctness_variants=[{"name": "ci", "params": ["X"], "dtype": "float16",
                                           "dims": {"BATCH": 4, "INPUT_SIZE": 64, "HIDDEN_SIZE": 32,
                                                    "SCALING_FACTOR": 1.5},
                                           "init_values": [64, 32, 1.5]}],
                    seeds=[0], distributions=["normal"])
    v = Verdict.from_dict(run_worker(tmp_path, job))
    assert v.kind.value == "runtime_error"
    assert "hard-codes the xpu device" in v.reason
    assert v.source_line == 80  # the assert on torch.xpu in kernel_function


def test_timing_role(tmp_path):
    module = source("scale_baseline.py", "candidate", "candidate.py")
    base = source("scale_baseline.py", "baseline", "scale.py")
    job = scale_job("timing", module, baseline=base, seeds=[0], distributions=["normal"])
    v = Verdict.from_dict(run_worker(tmp_path / "plain", job))
    assert v.kind.value == "ok"
    assert [(s.name, s.status.value) for s in v.steps] == [("performance", "not_measured")]
    assert "not measured: interpreter" in v.steps[0].summary

    # forced on the interpreter, the harness itself runs end to end (host-clocked, interleaved)
    profile = {"peak_tflops": {"fp32": 1e-9}, "bandwidth_gbps": 1.0}
    variant = {"name": "module", "params": [], "dims": {}, "dtype": "float32", "flop": 4 * 48.0,
               "bytes": 4 * 48 * 4 * 2.0}
    job = scale_job("timing", module, baseline=base, performance_variants=[variant],
                    options={"force_timing": True, "warmup_ms": 1, "rep_ms": 1, "lock_dir": str(tmp_path / "locks"),
                             "lock_key": "cpu-test", "device_profile": profile})
    v = Verdict.from_dict(run_worker(tmp_path / "forced", job))
    assert v.kind.value == "ok", v.reason
    perf = v.performance[0]
    assert perf.baseline.trials >= 10 and perf.candidate.trials == perf.baseline.trials
    assert perf.speedup > 0 and perf.tflops is not None and perf.gbps is not None
    assert perf.roofline_fraction is not None and perf.suspect  # far above this fake, tiny roofline
    events = [json.loads(x) for x in (tmp_path / "forced" / "progress.jsonl").read_text().splitlines()]
    assert any(e["event"] == "lock_acquired" for e in events)
    assert (tmp_path / "locks" / "cpu-test.lock").exists()


def test_planted_fixtures_exist():
    assert (PLANTED / "cand_syntax_error.py.txt").is_file()


def test_constant_reference_makes_correctness_inconclusive(tmp_path):
    job = scale_job("baseline", source("scale_baseline.py", "baseline", "scale.py"),
                    reference=source("scale_const_ref.py", "reference", "scale_ref.py"), distributions=["normal"])
    base = Verdict.from_dict(run_worker(tmp_path / "base", job))
    assert base.kind.value == "ok", base.reason
    assert base.step("correctness").status.value == "inconclusive"
    assert "does not depend on its inputs" in base.step("correctness").summary
    assert any("disagrees with the reference" in w for w in base.warnings)
    cand = Verdict.from_dict(run_worker(tmp_path / "cand", dict(
        job, role="candidate", module=source("scale_baseline.py", "candidate"),
        expected_dir=str(tmp_path / "base" / "expected"))))
    # the reference is the truth, even where the baseline disagrees with it: a candidate that
    # reproduces the baseline is wrong, and the verdict says the problem is inconsistent
    # (a candidate matching a constant reference is inconclusive: tests/test_formats.py)
    assert {r.against for r in cand.correctness} == {"reference"}
    assert cand.kind.value == "wrong_answer"
    assert "the problem is inconsistent" in cand.reason


def test_saved_baselines_are_bounded_by_bytes_as_well_as_count(tmp_path, monkeypatch):
    """Saved baseline outputs at a published size take tens of GB each: beyond the byte bound
    the least recently used go first, and the newest stays whatever its size."""
    import os

    from xeforge_core import verify as verify_mod

    monkeypatch.setattr(verify_mod, "BASELINE_CACHE_BYTES", 2500)
    for i, size in enumerate([1000, 1000, 1000, 5000]):  # oldest first
        entry = tmp_path / f"b{i}"
        entry.mkdir()
        (entry / "o0.bin").write_bytes(b"\0" * size)
        os.utime(entry, (1000 + i, 1000 + i))
    verify_mod._prune_baselines(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b3"]
    (tmp_path / "b3" / "o0.bin").write_bytes(b"\0" * 1000)
    for i in (4, 5):
        (tmp_path / f"b{i}").mkdir()
        (tmp_path / f"b{i}" / "o0.bin").write_bytes(b"\0" * 1000)
        os.utime(tmp_path / f"b{i}", (2000 + i, 2000 + i))
    verify_mod._prune_baselines(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b4", "b5"]


def test_outputs_with_no_element_make_correctness_inconclusive(tmp_path):
    """A problem whose inputs are empty (a size constant of 0) compares no element: a candidate
    computing something else would match, so the verdict is inconclusive, not ok."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    (tmp_path / "prob.py").write_text(
        "import torch\nimport torch.nn as nn\n\nN = 0\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x * 2.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(N)]\n\n\ndef get_init_inputs():\n    return []\n")
    wrong = ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n"
             "@triton.jit\ndef k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
             "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    m = offs < n\n"
             "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3.0, mask=m)\n\n\n"
             "class ModelNew(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n"
             "        k[(1,)](x, y, x.numel(), BLOCK=128)\n        return y\n")
    verdict = verify(load_problem(tmp_path / "prob.py"), wrong, device="cpu",
                     options=VerifyOptions(seeds=1, distributions=["normal"], measure_performance=False,
                                           use_cache=False))
    assert verdict.kind.value == "inconclusive", verdict.reason
    assert "has no element" in verdict.reason and "nothing was compared" in verdict.reason


def _verify_against_itself(tmp_path, capsys, problem: str) -> tuple[int, dict]:
    """``xeforge verify --json`` of the problem module ``problem`` with its own Model as the
    candidate (renamed ModelNew): the exit status and the verdict."""
    from xeforge_core.cli import main

    (tmp_path / "prob.py").write_text(problem)
    (tmp_path / "cand.py").write_text(problem.replace("class Model", "class ModelNew"))
    code = main(["verify", str(tmp_path / "prob.py"), str(tmp_path / "cand.py"), "--device", "cpu", "--no-cache",
                 "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_problem_whose_own_code_raises_is_bad_input_naming_its_line(tmp_path, capsys):
    """``get_inputs()`` using an undefined name is the problem file's fault, not the environment's:
    the verdict says so with the line, and ``xeforge verify`` exits as for bad input (2)."""
    code, out = _verify_against_itself(tmp_path, capsys, (
        "import torch\nimport torch.nn as nn\n\nN = 64\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x * 2.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(N, M)]\n\n\ndef get_init_inputs():\n    return []\n"))
    assert code == 2, out["reason"]
    assert out["reason"].startswith("the problem's own code failed") and "NameError" in out["reason"]
    assert "prob.py:13" in out["reason"]


def test_a_baseline_too_slow_for_the_interpreter_is_not_said_to_hang():
    """On the CPU a published size can outlast the timeout in Triton's interpreter: the verdict
    says the interpreter is too slow there and to verify smaller, not that the baseline hangs;
    on a GPU it hangs. Environment errors stay the environment's."""
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.verdict import Verdict, VerdictKind
    from xeforge_core.verify import _environment_verdict, problem_fault

    slow = Verdict(kind=VerdictKind.TIMEOUT, reason="no result within 300 s")
    assert "too large for Triton's interpreter" in _environment_verdict(slow, DeviceInfo("cpu", interpreter=True)).reason
    assert "the baseline itself hangs" in _environment_verdict(slow, DeviceInfo("cuda")).reason
    frame = 'Traceback (most recent call last):\n  File "/tmp/p/job/src/baseline/prob.py", line 9, in forward\n'
    driver = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=frame + "RuntimeError: CUDA error: an illegal memory access")
    missing = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=frame + "ModuleNotFoundError: No module named 'apex'")
    typo = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=frame + "TypeError: forward() takes 2 arguments")
    shapes = Verdict(kind=VerdictKind.RUNTIME_ERROR,
                     error_text=frame + "RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x4 and 3x3)")
    elsewhere = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=frame + "RuntimeError: baseline cannot run here")
    assert problem_fault(shapes) is not None and problem_fault(elsewhere) is None
    cpu_half = Verdict(kind=VerdictKind.RUNTIME_ERROR,
                       error_text=frame + "RuntimeError: linalg.inv: Low precision dtypes not supported. Got Half")
    old_api = Verdict(kind=VerdictKind.RUNTIME_ERROR,
                      error_text=frame + "AttributeError: module 'torch' has no attribute 'compiler_api'")
    assert all(problem_fault(v) is None for v in (driver, missing, cpu_half, old_api))
    assert problem_fault(typo) == "TypeError: forward() takes 2 arguments"
    # the problem's own raise statement is its fault whatever the type, and so is a file it cannot open
    raised = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=(
        'Traceback (most recent call last):\n  File "/tmp/p/job/src/baseline/prob.py", line 47, in get_inputs\n'
        '    raise RuntimeError("boom from get_inputs")\nRuntimeError: boom from get_inputs'))
    unopened = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=(
        frame + "FileNotFoundError: [Errno 2] No such file or directory: 'weights.pt'"))
    assert problem_fault(raised) == "RuntimeError: boom from get_inputs"
    # what this machine lacks is the environment's, even raised by the problem itself: a file the
    # sandboxed job does not hold, a package, a GPU (and jobs outside the pool have their own folder)
    assert problem_fault(unopened) is None
    for text in ('raise ImportError("flash_attn is not installed")\nImportError: flash_attn is not installed',
                 'raise RuntimeError("this problem needs a GPU")\nRuntimeError: this problem needs a GPU',
                 'raise RuntimeError("CUDA boom")\nRuntimeError: CUDA boom'):
        lacking = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=(
            'Traceback (most recent call last):\n  File "/tmp/p/job/src/baseline/prob.py", line 4, in forward\n    '
            + text))
        assert problem_fault(lacking) is None, text
    own_job = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=raised.error_text.replace(
        "/tmp/p/job/src/baseline/", "/tmp/xeforge-baseline-x1/src/inputs/"))
    assert problem_fault(own_job) == "RuntimeError: boom from get_inputs"


def test_a_kernel_that_is_not_numerically_stable_fails_on_the_shifted_redraw():
    """Inputs normal around 100 (the ``shifted`` stress redraw): a softmax without the max
    subtraction overflows there and is wrong, with the reason saying what those inputs stress;
    the same kernel subtracting the row maximum is ok."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    fixtures = Path(__file__).parent / "fixtures" / "stress"
    problem = load_problem(fixtures / "row_softmax_problem.py")
    naive = (fixtures / "row_softmax_naive.py").read_text()
    options = VerifyOptions(seeds=1, measure_performance=False, use_cache=False,
                            distributions=["normal", "uniform", "shifted"])
    verdict = verify(problem, naive, device="cpu", options=options)
    assert verdict.kind.value == "wrong_answer" and "shifted inputs" in verdict.reason, verdict.reason
    assert "normal around 100" in verdict.reason and "max subtraction" in verdict.reason
    stable = naive.replace("e = tl.exp(x)", "e = tl.exp(x - tl.max(x, axis=0))")
    assert verify(problem, stable, device="cpu", options=options).kind.value == "ok"


def test_shifted_is_a_default_redraw_and_catches_an_exponent_that_adds_the_row_maximum():
    """Sample 03's softmax with ``exp(x + row_max)`` in place of ``exp(x - row_max)`` matches on
    inputs near zero (exp of a few units) and overflows on logits far from it: the default
    options' ``shifted`` redraw finds it, and the sample itself stays ok."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    sample = Path(__file__).resolve().parents[1] / "sample_kernels" / "03_row_softmax.py"
    problem = load_problem(sample)
    assert "shifted" in VerifyOptions().distributions
    options = VerifyOptions(seeds=1, measure_performance=False, use_cache=False)
    plus = problem.kernel.source.replace("e = tl.exp(x - row_max)", "e = tl.exp(x + row_max)")
    assert plus != problem.kernel.source
    verdict = verify(problem, plus, device="cpu", options=options)
    assert verdict.kind.value == "wrong_answer" and "shifted inputs" in verdict.reason, verdict.reason
    assert "overflowed" in verdict.reason
    assert verify(problem, problem.kernel.source, device="cpu", options=options).kind.value == "ok"


def test_an_overflow_on_shifted_inputs_is_excused_only_within_a_float16_downgrade_shown_and_allowed():
    """float16's range (65504) is part of what ``--allow fp16`` or ``fp16-accumulation`` accepts
    for a kernel whose source keeps float16: an Inf output on the shifted redraw is excused there,
    and nowhere else (another redraw, an allowance the source does not use, one not given, a NaN:
    an unstable formula or unwritten memory, or no overflow at all)."""
    import torch

    from xeforge_core.worker.roles import _range_excuse

    overflowed = [torch.tensor([1.0, float("inf"), -float("inf")])]
    acc = ("fp16-accumulation",)
    note = _range_excuse("shifted", overflowed, acc, acc)
    assert "within the allowed fp16-accumulation" in note and "2 Inf" in note, note
    assert _range_excuse("shifted", overflowed, ("fp16",), ("fp16",))
    assert _range_excuse("normal", overflowed, acc, acc) == ""
    assert _range_excuse("shifted", overflowed, acc, ()) == ""  # allowed, but the source keeps no float16
    assert _range_excuse("shifted", overflowed, ("tf32",), acc) == ""  # float16 kept, not allowed
    assert _range_excuse("shifted", [torch.tensor([1.0, float("nan")])], acc, acc) == ""
    assert _range_excuse("shifted", [torch.tensor([1.0, 2.0])], acc, acc) == ""


def test_an_allowance_does_not_excuse_an_unstable_float32_softmax_on_shifted_inputs():
    """``--allow fp16-accumulation`` given to a float32 softmax without the max subtraction (no
    float16 in its source): its NaN on shifted inputs is still a wrong answer."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    fixtures = Path(__file__).parent / "fixtures" / "stress"
    problem = load_problem(fixtures / "row_softmax_problem.py")
    options = VerifyOptions(seeds=1, measure_performance=False, use_cache=False,
                            allow_precision=["fp16-accumulation"])
    verdict = verify(problem, (fixtures / "row_softmax_naive.py").read_text(), device="cpu", options=options)
    assert verdict.kind.value == "wrong_answer" and "shifted inputs" in verdict.reason, verdict.reason


def test_a_torch_module_given_shapes_that_do_not_fit_is_the_problems_fault():
    """A problem whose ``get_inputs()`` gives ``nn.Conv2d`` a 2-D tensor fails inside torch's own
    ``conv.py``, below the problem's ``forward``: that is the problem's fault (bad input, exit 2),
    not the environment's; torch's device faults raised there stay the environment's."""
    from xeforge_core.verdict import Verdict, VerdictKind
    from xeforge_core.verify import problem_fault

    tb = ('Traceback (most recent call last):\n'
          '  File "/x/xeforge_core/worker/run.py", line 10, in call\n    out = model(*inputs)\n'
          '  File "/tmp/p/job/src/baseline/prob.py", line 9, in forward\n    return self.conv(x)\n'
          '  File "/v/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl\n'
          '    return forward_call(*args, **kwargs)\n'
          '  File "/v/site-packages/torch/nn/modules/conv.py", line 548, in _conv_forward\n'
          '    return F.conv2d(\n')
    rank = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=tb + (
        "RuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 16]"))
    assert problem_fault(rank) and "Expected 3D" in problem_fault(rank)
    fault = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=tb + "RuntimeError: CUDA error: misaligned address")
    other = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=tb + "RuntimeError: cuDNN returned no algorithm")
    assert problem_fault(fault) is None and problem_fault(other) is None
    # torch's frames only, with no frame of the problem's above them: not the problem's
    alone = Verdict(kind=VerdictKind.RUNTIME_ERROR, error_text=(
        'Traceback (most recent call last):\n  File "/v/site-packages/torch/nn/modules/conv.py", line 548, in f\n'
        '    return F.conv2d(\nRuntimeError: Expected 3D (unbatched) or 4D (batched) input to conv2d'))
    assert problem_fault(alone) is None


def test_verify_names_a_conv_given_the_wrong_rank_as_bad_input(tmp_path, capsys):
    code, out = _verify_against_itself(tmp_path, capsys, (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(3, 4, 3)\n\n"
        "    def forward(self, x):\n        return self.conv(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(3, 16)]\n\n\ndef get_init_inputs():\n    return []\n"))
    assert code == 2, out["reason"]
    assert out["reason"].startswith("the problem's own code failed") and "conv2d" in out["reason"]
