"""Loading whole problems: the real Xe-Forge cases unmodified, pasted code, and bad input."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from xeforge_core.problem import ProblemError, load_problem, odd_size_variant, problem_from_source

FIXTURES = Path(__file__).parent / "fixtures" / "problems"
FORMATS_KB = Path(__file__).parent / "fixtures" / "formats" / "kernelbench"

# name -> (inits in order, ci dims, forward inputs)
REAL_CASES = {
    "14_Gemm_Divide_Sum_Scaling": ["INPUT_SIZE", "HIDDEN_SIZE", "SCALING_FACTOR"],
    "1_FlashAttention_Fwd": ["D"],
    "39_Gemm_Scale_BatchNorm": ["IN_FEAT", "OUT_FEAT", "SCALE_SHAPE"],
    "45_Gemm_Sigmoid_LogSumExp": ["INPUT_SIZE", "HIDDEN_SIZE", "OUTPUT_SIZE"],
    "55_Matmul_MaxPool_Sum_Scale": ["IN_FEAT", "OUT_FEAT", "KERNEL_SIZE", "SCALE_FACTOR"],
    "68_Matmul_Min_Subtract": ["IN_FEAT", "OUT_FEAT", "CONSTANT"],
    "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp": ["IN_FEAT", "OUT_FEAT"],
    "84_Gemm_BatchNorm_Scaling_Softmax": ["IN_FEAT", "OUT_FEAT", "BN_EPS", "BN_MOMENTUM", "SCALE_SHAPE"],
    "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh": ["IN_FEAT", "OUT_FEAT", "ADD_VALUE_SHAPE"],
    "99_Matmul_GELU_Softmax": ["IN_FEAT", "OUT_FEAT"],
}


@pytest.mark.parametrize("name", sorted(REAL_CASES))
def test_real_cases_load_unmodified(xeforge_cases, name):
    p = load_problem(xeforge_cases / f"{name}.py")  # spec found as the sibling .yaml
    assert p.name == name and p.spec is not None
    assert p.spec.path == xeforge_cases / f"{name}.yaml"
    assert p.kernel.class_name == "Model" and p.reference is None
    assert p.kernel.source == (xeforge_cases / f"{name}.py").read_text()
    assert [i.value for i in p.spec.inits] == REAL_CASES[name]
    assert {"ci", "bench-gpu"} <= set(p.spec.variants)
    ci = p.variant("ci")
    assert ci.init_values == [ci.dims[d] for d in REAL_CASES[name]]  # positional, resolved per variant
    for v in p.spec.variants.values():
        assert v.flop and v.flop > 0 and v.bytes and v.bytes > 0
    assert p.default_variant_name() == "bench-gpu"
    odd = odd_size_variant(p, ci)
    assert odd is not None and odd.init_values == ci.init_values


def test_real_l2_case_details(xeforge_cases):
    p = load_problem(xeforge_cases / "14_Gemm_Divide_Sum_Scaling.py")
    ci = p.variant("ci")
    assert p.spec.inputs["X"].dtype == "float32" and ci.dtype == "float16"
    assert ci.shapes == {"X": (4, 1024)} and ci.input_dtypes == {"X": "float16"}
    assert ci.init_values == [1024, 2048, 1.5]
    assert ci.flop == 2 * 4 * 2048 * 1024 and ci.bytes == 4 * 1024 * 2
    assert p.warnings == []  # forward() converts x to float16 before the assertion

    p84 = load_problem(xeforge_cases / "84_Gemm_BatchNorm_Scaling_Softmax.py")
    assert p84.variant("ci").init_values == [512, 512, "1e-5", 0.1, [1]]  # YAML 1.1 string kept
    p39 = load_problem(xeforge_cases / "39_Gemm_Scale_BatchNorm.py")
    assert p39.variant("bench-gpu").init_values == [4096, 4096, [4096]]
    assert p39.variant("ci").dims["SCALE_SHAPE"] == [4096]
    p45 = load_problem(xeforge_cases / "45_Gemm_Sigmoid_LogSumExp.py")
    assert p45.variant("ci").flop == 2 * 16384 * 4096 * 2048 + 2 * 16384 * 1024 * 4096


def test_flash_attention_variants_and_dtype_warning(xeforge_cases):
    p = load_problem(xeforge_cases / "1_FlashAttention_Fwd.py")
    names = list(p.spec.variants)
    assert len(names) >= 19
    assert "bench-gpu-old" in names and "bench-gpu-12" not in names
    assert {f"bench-gpu-{i}" for i in (1, 11, 13, 18)} <= set(names)
    assert p.variant("bench-gpu").dims == {"B": 1, "A": 40, "S": 16384, "D": 128}
    assert p.variant("bench-gpu-5").dims["A"] == 71
    ci = p.variant("ci")
    # ci overrides the inputs' float16 with float32, which the kernel's float16 tiles reject
    # ("Both operands must be same dtype" at compile time): it runs with the declared float16
    assert ci.params == ["Q", "K", "V"] and ci.dtype is None
    assert ci.input_dtypes == {"Q": "float16", "K": "float16", "V": "float16"}
    assert ci.shapes["Q"] == (1, 4, 128, 64) and ci.init_values == [64]
    assert ci.flop == 4 * 1 * 4 * 128 * 128 * 64
    (warning,) = p.warnings
    assert "variant ci" in warning and "float32" in warning and "float16" in warning
    assert "1_FlashAttention_Fwd.py:93" in warning and "dtype = tl.float16" in warning
    assert "[inputs.Q.dtype]" in warning and "runs with the inputs' declared dtypes" in warning
    odd = odd_size_variant(p, "ci")
    assert odd.dims == {"B": 1, "A": 3, "S": 127, "D": 64}  # D is an init: unchanged


def test_constructor_mismatch_in_real_case_is_a_warning(xeforge_cases):
    p = load_problem(xeforge_cases / "55_Matmul_MaxPool_Sum_Scale.py")
    (warning,) = p.warnings
    assert "KERNEL_SIZE" in warning and "'scale_shape'" in warning and "SCALE_FACTOR" in warning
    assert "55_Matmul_MaxPool_Sum_Scale.py:189" in warning


def test_inits_count_mismatch_is_an_error(xeforge_cases, tmp_path):
    # The real #14 kernel with a constructor that takes one argument fewer than its spec gives.
    src = (xeforge_cases / "14_Gemm_Divide_Sum_Scaling.py").read_text()
    src = src.replace("def __init__(self, input_size, hidden_size, scaling_factor):",
                      "def __init__(self, input_size, hidden_size):")
    kernel = tmp_path / "X.py"
    kernel.write_text(src)
    shutil.copy(xeforge_cases / "14_Gemm_Divide_Sum_Scaling.yaml", tmp_path / "X.yaml")
    with pytest.raises(ProblemError) as err:
        load_problem(kernel)
    msg = str(err.value)
    assert "spec X.yaml gives 3 inits (INPUT_SIZE, HIDDEN_SIZE, SCALING_FACTOR)" in msg
    assert "Model.__init__ at X.py:127 takes 2" in msg
    assert err.value.field == "inits" and err.value.line == 6


def test_fixture_problem_with_sibling_reference():
    p = load_problem(FIXTURES / "good_add.py")
    assert p.reference is not None and p.reference.path == FIXTURES / "good_add_ref.py"
    assert p.reference.class_name == "Model" and p.reference.label == "reference"
    assert p.variant("ci").init_values == [64]
    assert p.warnings == []
    job = p.job_spec()
    assert job["module"]["filename"] == "good_add.py" and job["reference"]["class_name"] == "Model"
    assert job["spec"]["inputs"]["X"] == {"shape": ["BATCH", "HIDDEN"], "dtype": "float32"}


def test_dtype_assertion_warning_names_variant_dtype_and_line():
    spec = (FIXTURES / "good_add.yaml").read_text().replace("  - params: [X, Y]\n    dims:\n      BATCH: 4\n",
                                                            "  - params: [X, Y]\n    dtype: half\n    dims:\n"
                                                            "      BATCH: 4\n", 1)
    p = problem_from_source((FIXTURES / "good_add.py").read_text(), name="add", spec_text=spec)
    (warning,) = p.warnings
    assert warning.startswith("add.py:17: variant ci gives X as float16")
    assert "accepts only float32" in warning and "assert x.dtype == torch.float32" in warning
    # the inputs section declares float32, which the module accepts: the override is dropped
    assert "runs with the inputs' declared dtypes" in warning and "[inputs.X.dtype]" in warning
    assert p.variant("ci").input_dtypes == {"X": "float32", "Y": "float32"}
    # when the inputs section agrees with the override, nothing is changed, only reported
    both = spec.replace("dtype: float32", "dtype: float16")
    q = problem_from_source((FIXTURES / "good_add.py").read_text(), name="add", spec_text=both)
    ci_warning, bench_warning = q.warnings
    assert "variant ci" in ci_warning and "variant bench-gpu" in bench_warning
    assert "accepts only float32" in ci_warning and "declared" not in ci_warning
    assert q.variant("ci").input_dtypes == {"X": "float16", "Y": "float16"}


def test_modelnew_file_uses_its_own_model_as_reference():
    p = load_problem(FIXTURES / "solution_new.py")
    assert p.kernel.class_name == "ModelNew"
    assert p.reference is not None and p.reference.class_name == "Model"
    assert p.reference.source == p.kernel.source


def test_modelnew_file_with_paired_reference():
    p = load_problem(FIXTURES / "solution_only_new.py")
    assert p.kernel.class_name == "ModelNew"
    assert p.reference.path == FIXTURES / "solution_only_new_ref.py"
    explicit = load_problem(FIXTURES / "solution_only_new.py",
                            reference_path=FIXTURES / "solution_only_new_ref.py")
    assert explicit.reference.path == FIXTURES / "solution_only_new_ref.py"


def test_reference_with_only_modelnew_is_rejected():
    with pytest.raises(ProblemError) as err:
        load_problem(FIXTURES / "good_add.py", reference_path=FIXTURES / "solution_only_new.py")
    assert err.value.file.endswith("solution_only_new.py")
    assert "it defines ModelNew" in err.value.message


def test_a_torch_model_is_the_reference_whatever_else_the_file_defines():
    """``Model = GetMask`` and an unused ``@triton.jit`` draft: plain PyTorch, so the reference
    and the eager baseline, and the warning names the kernel the Model never reaches."""
    p = load_problem(FORMATS_KB / "unused_jit.py")
    assert p.eager_baseline and p.reference is not None and p.reference.class_name == "Model"
    assert any("_draft_mask_kernel, which Model never reaches" in w for w in p.warnings)


@pytest.mark.parametrize("launch", [
    "helper(x)",                        # through a module-level function
    "Launch.apply(x)",                  # through an autograd.Function
    "self.op(x)",                       # through a submodule built in __init__
])
def test_a_model_that_reaches_a_kernel_is_a_triton_baseline(launch):
    source = textwrap.dedent(f"""
        import torch, triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr):
            pass

        def helper(x):
            k[(1,)](x)
            return x

        class Launch(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return helper(x)

        class Op(torch.nn.Module):
            def forward(self, x):
                return helper(x)

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.op = Op()

            def forward(self, x):
                return {launch}

        def get_inputs():
            return [torch.randn(4)]
    """)
    p = problem_from_source(source, name="reaches")
    assert not p.eager_baseline and p.reference is None
    assert not p.with_kernel_source(source).eager_baseline


def test_a_zero_dimensional_draw_in_get_inputs_still_allows_reduced_sizes():
    """KernelBench's losses draw a 0-d scale (``torch.rand(())``) beside their tensors: the
    published sizes are still read, and reduced for correctness."""
    source = textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, p, t):
                return torch.nn.functional.kl_div(torch.log(p), t, reduction="batchmean")

        batch_size = 8192 * 2
        input_shape = (8192 * 2,)

        def get_inputs():
            scale = torch.rand(())
            return [(torch.rand(batch_size, *input_shape) * scale).softmax(dim=-1),
                    torch.rand(batch_size, *input_shape).softmax(dim=-1)]
    """)
    small = problem_from_source(source, name="kl").variant("module-small")
    assert small.overrides == {"batch_size": 512, "input_shape": (512,)}


def test_a_mask_shaped_like_another_input_still_allows_reduced_sizes():
    """``torch.randint(0, 2, x.shape).bool()`` (KernelBench's masked cumsum) takes the shape of
    a tensor get_inputs() made before it: the sizes are read through it."""
    source = textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x, mask):
                return torch.cumsum(x * mask, dim=1)

        batch_size = 32768
        input_shape = (32768,)

        def get_inputs():
            x = torch.rand(batch_size, *input_shape)
            mask = torch.randint(0, 2, x.shape).bool()
            return [x, mask]
    """)
    small = problem_from_source(source, name="masked").variant("module-small")
    assert small.overrides == {"batch_size": 512, "input_shape": (512,)}


def test_sizes_bound_by_a_chained_assignment_are_read():
    """``height = width = 256`` (16 KernelBench level-2 problems) binds both sizes."""
    source = textwrap.dedent("""
        import torch

        class Model(torch.nn.Module):
            def forward(self, x):
                return x.amin(dim=1, keepdim=True)

        batch_size = 64
        channels = 64
        height = width = 256

        def get_inputs():
            return [torch.rand(batch_size, channels, height, width)]
    """)
    small = problem_from_source(source, name="chained").variant("module-small")
    assert small.overrides["height"] == small.overrides["width"] < 256


def test_candidate_entry_points_may_be_assigned_or_imported():
    from xeforge_core.problem import check_candidate_entry
    from xeforge_core.problem.entry import entry_point

    alias = "def triton_kernel_wrapper(x):\n    return x\n\nkernel_function = triton_kernel_wrapper\n"
    check_candidate_entry(alias)
    assert entry_point(alias) == ("function", "kernel_function")
    imported = "from fused_ops import kernel_function\n"
    check_candidate_entry(imported)
    assert entry_point(imported) == ("function", "kernel_function")
    klass = "class Fused:\n    pass\n\nModelNew = Fused\n"
    check_candidate_entry(klass)
    assert entry_point(klass) == ("class", "ModelNew")
    with pytest.raises(ProblemError) as err:
        check_candidate_entry("def kernel_fn(x):\n    return x\n", file="cand.py")
    assert "kernel_function" in err.value.message and "'kernel_fn'" in err.value.message


# --- bad input --------------------------------------------------------------------------


def test_no_model(tmp_path):
    """A problem file with get_inputs() and one outermost nn.Module poses that module (KernelBook's
    convention), said in a warning; with two candidates, or none, it is bad input naming them."""
    problem = load_problem(FIXTURES / "no_model.py")
    assert problem.kernel.class_name == "Net" and problem.reference.class_name == "Net"
    assert any("its one outermost nn.Module, Net, is the problem" in w for w in problem.warnings)
    assert not any("did you mean" in w for w in problem.warnings)  # a name of its own, not a typo
    typo = tmp_path / "typo.py"
    typo.write_text((FIXTURES / "no_model.py").read_text().replace("Net", "Modle"))
    assert any(w.endswith("did you mean 'Model'?") for w in load_problem(typo).warnings)
    two = tmp_path / "two.py"
    two.write_text((FIXTURES / "no_model.py").read_text().replace("class Net(", "class Other(nn.Module):\n"
                                                                    "    pass\n\n\nclass Net("))
    with pytest.raises(ProblemError) as err:
        load_problem(two)
    assert err.value.file.endswith("two.py") and "no class Model" in err.value.message
    assert "nn.Module subclasses here: Other, Net" in err.value.message


def test_syntax_error_names_file_and_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x)\n        return x\n")
    with pytest.raises(ProblemError) as err:
        load_problem(bad)
    assert err.value.file == str(bad) and err.value.line == 5
    assert f"{bad}:5" in str(err.value)


def test_empty_non_utf8_huge_and_missing_files(tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("\n\n")
    with pytest.raises(ProblemError, match="empty.py: kernel or problem module is empty"):
        load_problem(empty)
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"class Model:\n    x = '\xff\xfe'\n")
    with pytest.raises(ProblemError, match="not valid UTF-8") as err:
        load_problem(binary)
    assert err.value.line == 2
    huge = tmp_path / "huge.py"
    huge.write_text("#" * 1_100_000)
    with pytest.raises(ProblemError, match="limit is 1000000 bytes"):
        load_problem(huge)
    with pytest.raises(ProblemError, match="not found"):
        load_problem(tmp_path / "nope.py")
    with pytest.raises(ProblemError, match="module is empty"):
        problem_from_source("")


def _with_spec(spec_text: str) -> ProblemError:
    with pytest.raises(ProblemError) as err:
        problem_from_source((FIXTURES / "good_add.py").read_text(), name="add", spec_text=spec_text)
    return err.value


GOOD_SPEC = (FIXTURES / "good_add.yaml").read_text()


def test_bad_spec_errors_name_the_field():
    e = _with_spec(GOOD_SPEC.replace("shape: [BATCH, HIDDEN]\n    dtype: float32\n  Y", "shape: [BATCH, HIDEN]\n"
                                     "    dtype: float32\n  Y"))
    assert e.file == "add.yaml" and e.field == "inputs.X.shape[1]" and "HIDEN" in e.message
    assert e.message.endswith("did you mean 'HIDDEN'?")  # Y's shape uses HIDDEN: the shape is the typo
    e = _with_spec(GOOD_SPEC.replace("    dims:\n      BATCH:", "    dims:\n      BACTH:", 1))
    assert e.field == "ci[0].dims.BACTH" and e.message.endswith("did you mean 'BATCH' (written 'BACTH')?")
    e = _with_spec(GOOD_SPEC.replace("dtype: float32", "dtype: float33", 1))
    assert e.field == "inputs.X.dtype" and e.line == 4 and e.message.endswith("did you mean 'float32'?")
    e = _with_spec(GOOD_SPEC.replace("params: [X, Y]", "params: [X, W]", 1))
    assert e.field == "ci[0].params[1]" and "'W'" in e.message
    e = _with_spec(GOOD_SPEC.replace('flop: "BATCH*HIDDEN"', "flop: \"__import__('os')\"", 1))
    assert e.field == "ci[0].flop" and "__import__" in e.message


def test_non_arithmetic_flop_fixture():
    with pytest.raises(ProblemError) as err:
        load_problem(FIXTURES / "good_add.py", spec_path=FIXTURES / "bad_flop.yaml")
    assert err.value.field == "ci[0].flop" and err.value.line == 6 and "bad_flop.yaml" in err.value.file


def test_params_count_against_forward():
    e = _with_spec(GOOD_SPEC.replace("params: [X, Y]", "params: [X]", 1))
    assert e.field == "ci[0].params" and e.line == 13 and "Model.forward at add.py:30 takes 2" in e.message


def test_inits_count_against_constructor():
    three = GOOD_SPEC.replace("  - dim: HIDDEN\n", "  - dim: HIDDEN\n  - dim: BATCH\n  - dim: BATCH\n")
    e = _with_spec(three)
    assert "gives 3 inits (HIDDEN, BATCH, BATCH)" in e.message
    assert "Model.__init__ at add.py:25 takes 1 to 2" in e.message
    none = GOOD_SPEC.replace("inits:\n  - dim: HIDDEN\n", "")
    p = problem_from_source((FIXTURES / "good_add.py").read_text(), spec_text=none)  # get_init_inputs used
    assert p.variant("ci").init_values == []


def test_no_spec_needs_get_inputs_and_init_inputs():
    src = textwrap.dedent('''\
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
            def forward(self, x):
                return x
        ''')
    with pytest.raises(ProblemError, match=r"kernel.py:3.*needs 1 argument"):
        problem_from_source(src)
    with pytest.raises(ProblemError, match="defines no get_inputs"):
        problem_from_source(src + "def get_init_inputs():\n    return [1]\n")
    # a near name is named, at its line
    with pytest.raises(ProblemError, match=r"kernel.py:9: .*did you mean get_input\(\) to be get_inputs\(\)\?"):
        problem_from_source(src + "def get_init_inputs():\n    return [1]\ndef get_input():\n    return []\n")
    p = problem_from_source(src + "def get_init_inputs():\n    return [1]\ndef get_inputs():\n    return []\n")
    assert p.spec is None and p.correctness_variants()[0].name == "module"
    assert any("no @triton.jit kernel" in w for w in p.warnings)


def test_loading_never_imports_torch_or_runs_code(tmp_path):
    marker = tmp_path / "ran"
    src = (FIXTURES / "good_add.py").read_text() + f"\nopen({str(marker)!r}, 'w').write('x')\n"
    problem_from_source(src, spec_text=GOOD_SPEC)
    assert not marker.exists()
    code = ("import sys; from xeforge_core.problem import load_problem; "
            f"load_problem({str(FIXTURES / 'good_add.py')!r}); print('torch' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_solution_whose_forward_cannot_take_the_problems_inputs_is_bad_input(tmp_path):
    """A KernelBench pair whose ModelNew.forward takes 2 inputs where the problem's Model takes 3
    fails on every call: bad input naming both signatures and both files, before anything runs
    (not an `environment` verdict on the first run). Ranges that overlap stay a warning."""
    kb = Path(__file__).parent / "fixtures" / "formats" / "kernelbench"
    ref = (kb / "residual_relu.py").read_text()
    three = ref.replace("def forward(self, x: torch.Tensor, y: torch.Tensor)",
                        "def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor)")
    assert three != ref
    (tmp_path / "k_ref.py").write_text(three)
    shutil.copy(kb / "residual_relu_new.py", tmp_path / "k.py")
    with pytest.raises(ProblemError) as err:
        load_problem(tmp_path / "k.py", reference_path=tmp_path / "k_ref.py")
    msg = str(err.value)
    assert msg.startswith("k.py:") and "ModelNew.forward takes 2 input(s) (forward(x, y))" in msg
    assert "k_ref.py:" in msg and "forward(x, y, z)" in msg and "cannot be called" in msg
    optional = ref.replace("def forward(self, x: torch.Tensor, y: torch.Tensor)",
                           "def forward(self, x: torch.Tensor, y: torch.Tensor, z=None)")
    assert optional != ref
    (tmp_path / "k_ref.py").write_text(optional)
    problem = load_problem(tmp_path / "k.py", reference_path=tmp_path / "k_ref.py")
    assert any("takes 2 to 3" in w for w in problem.warnings)


KERNELAGENT = Path(__file__).parent / "fixtures" / "formats" / "kernelagent"

_SELF_TESTED = textwrap.dedent("""\
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


    def kernel_function(x):
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y


""") + (FIXTURES / "solution_only_new_ref.py").read_text()  # the self-test's copy of the problem


def test_a_kernelagent_module_is_the_kernel_of_its_references_problem():
    """A ``kernel_function`` module given with its reference loads as that problem's Triton
    version: the reference's Model, inputs and size constants, the function as the kernel."""
    p = load_problem(KERNELAGENT / "kernel.py", reference_path=KERNELAGENT / "problem.py")
    assert (p.kernel.entry, p.kernel.class_name, p.kernel.path) == ("function", "kernel_function", KERNELAGENT / "kernel.py")
    assert p.reference is not None and p.reference.path == KERNELAGENT / "problem.py"
    assert p.inputs is not None and p.inputs.path == KERNELAGENT / "problem.py"
    assert not p.eager_baseline and p.truth == "reference"
    assert any("kernel_function() (KernelAgent's convention)" in w for w in p.warnings)
    assert not any("plain-PyTorch Model" in w for w in p.warnings)


def test_a_self_tested_kernelagent_module_runs_its_function_not_its_model_copy(tmp_path):
    """KernelAgent's modules often carry the problem's plain-PyTorch ``Model`` for their own
    test: that class reaches no Triton kernel, so the entry is ``kernel_function``, and with no
    reference given the module's own ``Model`` is the reference."""
    from xeforge_core.problem.entry import entry_point

    assert entry_point(_SELF_TESTED) == ("function", "kernel_function")
    path = tmp_path / "kernel_code.py"
    path.write_text(_SELF_TESTED)
    p = load_problem(path)
    assert p.kernel.entry == "function" and p.reference is not None and p.reference.class_name == "Model"
    assert not p.eager_baseline
    # a Model that launches the kernel stays the entry
    launching = _SELF_TESTED.replace("return torch.relu(x)", "return kernel_function(x)")
    assert entry_point(launching) == ("class", "Model")


def test_a_kernelagent_module_without_any_reference_says_to_give_one(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text((KERNELAGENT / "kernel.py").read_text())
    with pytest.raises(ProblemError) as err:
        load_problem(path)
    assert "kernel_function()" in err.value.message and "--reference" in err.value.message
    assert str(path) in str(err.value)


def test_a_modelnew_stays_the_entry_beside_a_kernel_function():
    """KernelBench's harness runs ModelNew: a module whose ModelNew computes with torch alone is
    judged by its ModelNew (no Triton launch), not by a kernel_function beside it."""
    from xeforge_core.problem.entry import entry_point

    torch_only = _SELF_TESTED.replace("class Model(", "class ModelNew(")
    assert entry_point(torch_only) == ("class", "ModelNew")


def test_a_misspelt_model_class_beside_kernel_function_is_named_not_silently_skipped():
    """A candidate that binds ``kernel_function`` is entered by it; a class whose name is close
    to ``ModelNew`` (a typo) is then never called, and the verdict says so."""
    from xeforge_core.devices import detect_device
    from xeforge_core.problem.entry import ignored_lookalikes
    from xeforge_core.verify import VerifyOptions, verify

    path = Path(__file__).resolve().parents[1] / "sample_kernels" / "01_vector_add.py"
    src = path.read_text()
    typo = src.replace("class Model(", "class ModelNwe(")
    assert ignored_lookalikes(typo) == [("ModelNwe", "ModelNew")]
    assert ignored_lookalikes(src) == [] and ignored_lookalikes(src.replace("class Model(", "class VectorAdd(")) == []
    assert ignored_lookalikes("def broken(:\n") == []
    verdict = verify(load_problem(path), typo, device=detect_device("cpu"),
                     options=VerifyOptions(seeds=1, include_odd_size=False, tile_sizes=False, grid_coverage=False,
                                           use_cache=False))
    assert verdict.kind.value == "ok", verdict.reason
    assert ("the candidate defines class ModelNwe, which is not an entry point (did you mean ModelNew?): "
            "kernel_function() is what was verified") in verdict.warnings


def test_an_explicit_reference_builds_the_inputs_not_the_solutions_copy(tmp_path):
    """A published solution checked against its problem file (``--reference``) may carry its own
    get_inputs() (on the GPU by name, at other sizes): the problem's builds the inputs, the
    verdict's contract, and the difference is said. Without an explicit reference the kernel
    file's own get_inputs() is the problem's, as before."""
    problem = tmp_path / "problem.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return x * 2\n\nN = 4096\n\n"
                       "def get_inputs():\n    return [torch.randn(N)]\n\ndef get_init_inputs():\n    return []\n")
    solution = tmp_path / "solution.py"
    solution.write_text("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                        "    def forward(self, x):\n        return x * 2\n\n"
                        "def get_inputs():\n    return [torch.randn(64, device='cuda')]\n\n"
                        "def get_init_inputs():\n    return []\n")
    p = load_problem(solution, reference_path=problem)
    assert p.inputs is not None and p.inputs.path == problem
    assert any("solution.py's own get_inputs() differs from the problem's (problem.py)" in w for w in p.warnings)
    same = tmp_path / "same.py"
    same.write_text(solution.read_text().replace("torch.randn(64, device='cuda')", "torch.randn(N)"))
    assert not any("differs" in w for w in load_problem(same, reference_path=problem).warnings)
    assert load_problem(solution).inputs.path == solution  # no reference given: its own


def test_a_solution_keeping_its_problems_model_is_entered_by_modelnew():
    """KernelBench's solution files keep the problem's ``Model`` beside ``ModelNew``; verified
    against a plain-PyTorch problem (whose class, ``Model``, is what the harness prefers), the
    candidate is its ``ModelNew``, not the reference copy (which launched no Triton kernel and was
    called cheating). KernelBook's solutions name theirs after the problem's class."""
    from xeforge_core.problem.entry import entry_point

    both = "import torch\nclass ModelNew(torch.nn.Module): pass\nclass Model(torch.nn.Module): pass\n"
    assert entry_point(both, "Model") == ("class", "ModelNew")
    assert entry_point("import torch\nclass Model(torch.nn.Module): pass\n", "Model") == ("class", "Model")
    assert entry_point("import torch\nclass GetMaskNew(torch.nn.Module): pass\n", "GetMask") == ("class", "GetMaskNew")
    assert entry_point("import torch\nclass GetMask(torch.nn.Module): pass\nclass GetMaskNew(torch.nn.Module): pass\n",
                       "GetMask") == ("class", "GetMaskNew")


def test_a_kernelbench_solution_alone_is_told_to_take_its_problem_as_the_reference():
    src = textwrap.dedent('''\
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return x
        ''')
    with pytest.raises(ProblemError, match=r"defines no get_inputs.*--reference problem\.py"):
        problem_from_source(src)
