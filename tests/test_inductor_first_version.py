"""TorchInductor's kernels as the first version of a plain-PyTorch problem.

The fixtures (elementwise, a row reduction, a looped row scan, a linear layer with an epilogue, a convolution with
an epilogue, one matrix product with a transposed operand, one batched matrix product) come with
captures that ``xeforge_core.inductor.capture`` wrote here on the CPU (code generated for the
stand-in sm_90 target); the tests convert them and verify the result in Triton's interpreter
through the product's verifier. One test runs the generation job itself (a sandboxed worker).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from xeforge_core.inductor.capture import GenerationError, capture, load_capture
from xeforge_core.inductor.convert import convert
from xeforge_core.inductor.first_version import first_version_from_capture, inductor_first_version
from xeforge_core.inductor.kernels import InductorCodeError
from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify

FIX = Path(__file__).resolve().parent / "fixtures" / "inductor"
#: fixture -> (operations left to torch library calls, matrix products written as the Triton GEMM kernel)
CASES = {"gelu_scale": ([], []), "row_logsumexp": ([], []), "row_cumsum": ([], []),
         "linear_bias_relu": (["torch.addmm"], []),
         "conv_relu_bias": (["torch.ops.aten.convolution"], []), "matmul_transposed": ([], ["torch.mm"]),
         "matmul_batched": ([], ["torch.bmm"])}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))


def _imports(source: str) -> set[str]:
    tree = ast.parse(source)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_saved_capture_becomes_a_verified_first_version(name):
    problem = load_problem(FIX / f"{name}.py")
    assert problem.eager_baseline
    cand = first_version_from_capture(problem, str(FIX / f"{name}.capture.json"))
    assert cand.applicable and cand.stage == "first_version" and "TorchInductor" in cand.rationale
    assert not any("_inductor" in m for m in _imports(cand.code)), "the first version imports torch._inductor"
    assert "class Model(" not in cand.code and "class ModelNew(" in cand.code
    library, products = CASES[name]
    for call in library:
        assert call in cand.rationale and call in cand.notes[0]  # what is not Triton yet is named
    if not library:
        assert not cand.notes and "not Triton yet" not in cand.rationale
    for call in products:  # Inductor's library call is now the Triton GEMM kernel, and says so
        assert call in cand.rationale and "matmul_kernel" in cand.rationale
    assert ("def matmul_kernel(" in cand.code) == bool(products)
    verdict = verify(problem, cand.code, device="cpu", options=VerifyOptions(seeds=2))
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert verdict.passed
    # no plain TF32 in the GEMM kernel (the interpreter multiplies in full float32), a Triton kernel
    # launched, torch named only where it still runs
    forbidden = {"fp32_dot_tf32", "no_triton_launch"} | (set() if library else {"torch_partial"})
    assert not {f.rule for f in verdict.findings} & forbidden, [(f.rule, f.message) for f in verdict.findings]


def test_wrong_conversion_is_caught_by_the_verifier():
    """A first version whose kernel drops the epilogue's bias is wrong_answer, not ok."""
    problem = load_problem(FIX / "linear_bias_relu.py")
    cap = load_capture(FIX / "linear_bias_relu.capture.json")
    good = convert(cap, problem.kernel.source).source
    bad = good.replace("linear_bias_relu_bias = self.bias", "linear_bias_relu_bias = self.bias * 0")
    if bad == good:
        bad = good.replace("bias = self.bias", "bias = self.bias * 0")
    assert bad != good
    verdict = verify(problem, bad, device="cpu", options=VerifyOptions(seeds=1))
    assert verdict.kind is VerdictKind.WRONG_ANSWER


def test_convolution_sizes_stay_symbols():
    """Inductor's convolution lowering fixes the weight's sizes (channels, kernel size) to
    integers; generation keeps the convolution a library call instead, so the epilogue kernel
    holds at every size (the verifier's odd sizes included: see the parametrised test above)."""
    cap = load_capture(FIX / "conv_relu_bias.capture.json")
    assert cap.specialised == {}
    fv = convert(cap, (FIX / "conv_relu_bias.py").read_text())
    cls = next(n for n in ast.parse(fv.source).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    forward = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    numbers = {n.value for n in ast.walk(forward) if isinstance(n, ast.Constant) and type(n.value) is int}
    assert not numbers & {4, 6, 10, 12}, f"traced sizes written as numbers: {sorted(numbers)}"
    assert "conv_weight.size(0)" in ast.unparse(forward)


def test_a_size_inductor_fixed_is_refused_by_name():
    """A size generation could not keep symbolic is checked in forward with a message naming it,
    so another size is a clear error, never a wrong answer."""
    cap = load_capture(FIX / "gelu_scale.capture.json")
    cap.specialised = {"x.size(1)": 64}
    source = convert(cap, (FIX / "gelu_scale.py").read_text()).source
    assert "if x.size(1) != 64:" in source and "generated for x.size(1) == 64" in source


def test_kernel_names_are_readable_and_launches_have_grids():
    cap = load_capture(FIX / "row_logsumexp.capture.json")
    fv = convert(cap, (FIX / "row_logsumexp.py").read_text())
    assert fv.kernels == ["logsumexp_sub_kernel"]
    assert "triton_per_" not in fv.source and "triton_red_" not in fv.source
    assert "logsumexp_sub_kernel[(" in fv.source
    # short rows share a program (the verified fixture above runs this launch at odd sizes too)
    assert "XBLOCK = max(1, min(64, 1024 // R0_BLOCK))" in fv.source and "XBLOCK=XBLOCK" in fv.source


def test_bad_capture_and_unknown_construct_are_named(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "other"}')
    with pytest.raises(GenerationError, match="not a saved TorchInductor capture"):
        load_capture(bad)
    cap = load_capture(FIX / "gelu_scale.capture.json")
    cap.output_code = cap.output_code.replace("tl.store(", "triton_helpers.nope(", 1)
    with pytest.raises(InductorCodeError, match="triton_helpers"):
        convert(cap, (FIX / "gelu_scale.py").read_text())


def test_generation_runs_in_a_worker_for_a_plain_pytorch_problem(tmp_path):
    """The whole generation on this CPU: the capture's code is Inductor's, for a GPU target."""
    source = (FIX / "gelu_scale.py").read_text()
    cap = capture(source, name="gelu_scale", device="cpu")
    assert "def call(" in cap.output_code and "@triton.jit" in cap.output_code
    assert "generated without the device" in cap.generated_for
    assert [g["kind"] for g in cap.graph_inputs if g["kind"] == "input"] == ["input"]
    # no int32 indexing: Inductor guards it by the traced sizes, and the first version keeps no
    # guards (an illegal memory access past 2**31 elements on the H200, KernelBench level 2 p50)
    assert "tl.program_id(0).to(tl.int64)" in cap.output_code
    saved = cap.save(tmp_path / "gelu_scale.capture.json")
    problem = load_problem(FIX / "gelu_scale.py")
    cand = first_version_from_capture(problem, str(saved))
    verdict = verify(problem, cand.code, device="cpu", options=VerifyOptions(seeds=1))
    assert verdict.kind is VerdictKind.OK, verdict.reason


def test_a_kernelbook_problem_gets_a_first_version(tmp_path):
    """KernelBook's layout (the module under its own name, [[args], {kwargs}] constructor values):
    generated on this CPU, converted with that class as ModelNew, and verified in the interpreter."""
    path = Path(__file__).resolve().parent / "fixtures" / "formats" / "kernelbook" / "problem.py"
    cap = capture(path.read_text(), name="clamped_square", device="cpu")
    saved = cap.save(tmp_path / "clamped_square.capture.json")
    problem = load_problem(path)
    assert problem.kernel.class_name == "ClampedSquare" and problem.eager_baseline
    cand = first_version_from_capture(problem, str(saved))
    assert "class ModelNew(" in cand.code and "class ClampedSquare(" not in cand.code
    verdict = verify(problem, cand.code, device="cpu", options=VerifyOptions(seeds=1))
    assert verdict.kind is VerdictKind.OK, verdict.reason


def test_generation_error_names_the_step():
    with pytest.raises(GenerationError, match="building the model"):
        capture("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
                name="noinputs", device="cpu")


@pytest.mark.parametrize("returned,said", [
    ("None", "problem.py:6: get_inputs() returned None; it must return a list of forward()'s arguments"),
    ("[]", "problem.py:6: get_inputs() returned 0 input(s); Model.forward requires 1 (x)"),
])
def test_inputs_that_break_the_contract_are_named_at_their_line(returned: str, said: str) -> None:
    """``get_inputs()`` returning nothing, or fewer inputs than ``forward`` takes: the problem's
    file and line and what is wrong, not a TypeError inside the generator."""
    source = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
              f"def get_inputs():\n    return {returned}\n\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(GenerationError) as info:
        capture(source, name="problem", device="cpu")
    assert said in str(info.value), str(info.value)


def test_a_modules_int_attribute_stays_a_symbol():
    """InstanceNorm2d compares its input's channel count with its int ``num_features``; traced
    at 4 channels, the first version must still hold at the problem's 6 (on the H200 a KernelBench
    problem traced at its small size was a wrong answer at the published one: channels fixed)."""
    problem = load_problem(FIX / "conv_instance_norm.py")
    cap = capture(problem.kernel.source, name="conv_instance_norm", device="cpu", overrides={"out_channels": 4})
    assert cap.specialised == {}
    fv = convert(cap, problem.kernel.source)
    verdict = verify(problem, fv.source, device="cpu", options=VerifyOptions(seeds=1))
    assert verdict.kind is VerdictKind.OK, verdict.reason


def test_sizes_dynamo_fixed_are_guarded_and_generated_at_the_published_size():
    """LayerNorm's tuple ``normalized_shape`` makes dynamo fix the input's trailing sizes, so
    Inductor's code holds only at the traced ones: every such size is guarded by name, and the
    first version is generated again at the published size, the contract it then verifies at
    (KernelBench level 1 problems 40 and 41 were wrong answers, traced at the reduced size)."""
    problem = load_problem(FIX / "layer_norm_tuple.py")
    assert problem.module_variants["module-small"].overrides["features"] == 8
    cand = inductor_first_version(problem)
    assert "generated for self.ln.weight.size(0) == 16" in cand.code, cand.code
    assert "== 8" not in cand.code
    verdict = verify(problem, cand.code, device="cpu", options=VerifyOptions(seeds=1))
    assert verdict.kind is VerdictKind.OK, verdict.reason
    assert any(f.rule == "shape_specialised" for f in verdict.findings)


def test_a_problem_inductor_leaves_to_the_library_has_no_first_version():
    """A padded 3-D average pooling alone is left to ``aten.avg_pool3d``: the step says there is
    no Triton kernel to start from, where a candidate launching none was refused as cheating."""
    problem = load_problem(FIX / "avg_pool3d_only.py")
    cand = inductor_first_version(problem)
    assert not cand.applicable
    assert "no Triton kernel" in cand.not_applicable_reason
    assert "torch.ops.aten.avg_pool3d" in cand.not_applicable_reason


def test_a_warning_in_forward_does_not_break_the_one_graph():
    """InstanceNorm warns when its ``num_features`` differs from its input's channels (KernelBench
    level 2 problem 28 applies one to a single channel); a warning or print is no part of the
    computation and must not split the graph Inductor's code is taken from."""
    source = (
        "import warnings\nimport torch\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        warnings.warn('a note from forward')\n"
        "        print('tracing')\n"
        "        return torch.relu(x) * 2\n\n"
        "def get_inputs():\n    return [torch.randn(8, 16)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    cap = capture(source, name="warns", device="cpu")
    assert "@triton.jit" in cap.output_code


def test_a_failure_names_the_line_it_was_raised_at():
    """A bare ``AssertionError`` inside TorchInductor says nothing by itself (KernelBench level 2
    problem 25 on the H200): the error names the innermost frame of the cause chain."""
    from xeforge_core.inductor.generate import _fail

    def inner():
        assert 1 + 1 == 3

    try:
        try:
            inner()
        except AssertionError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as exc:
        failed = _fail("generate", exc)
    assert "raised at" in failed["error"] and "in inner: `assert 1 + 1 == 3`" in failed["error"]


def test_float32_products_beside_an_epilogue_stay_the_librarys_gemm_and_half_ones_become_triton():
    """A float32 GEMM is faster in the library than in a Triton kernel at most shapes: beside
    Inductor's epilogue kernel it stays the library's GEMM (named as not Triton yet); at bfloat16 it is the Triton
    GEMM kernel. A forward that is one float32 product still gets the Triton kernel (else no
    Triton kernel would run at all: ``matmul_transposed`` above)."""
    fp32 = convert(load_capture(FIX / "linear_bias_relu.capture.json"), (FIX / "linear_bias_relu.py").read_text())
    assert fp32.library_products == ["torch.addmm"] and "torch.addmm" in fp32.library_calls
    assert not fp32.gemm_calls and "faster there than a Triton kernel's product" in fp32.rationale
    source = (
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(64, 32).to(torch.bfloat16)\n\n"
        "    def forward(self, x):\n"
        "        return torch.relu(self.lin(x)) * 2\n\n"
        "def get_inputs():\n    return [torch.randn(16, 64, dtype=torch.bfloat16)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    half = convert(capture(source, name="lin_bf16", device="cpu"), source)
    assert half.gemm_calls and not half.library_products and "def matmul_kernel(" in half.source


def test_scan_combines_get_readable_names_unique_per_body():
    """A scan's combine function, defined beside its kernel as ``_triton_helper_fn_add0``, becomes
    ``combine_add``; two kernels whose combines share Inductor's name but differ in body get one
    function each, every kernel calling its own (Inductor numbers them per kernel)."""
    from xeforge_core.inductor.convert import _kernel_sources, _KernelRewrite
    from xeforge_core.inductor.kernels import parse_kernel

    def kernel(name: str, op: str) -> str:
        return (f"@triton.jit\ndef _triton_helper_fn_add0(arg0_0, arg1_0):\n    return arg0_0 {op} arg1_0\n\n\n"
                f"@triton.jit\ndef {name}(in_ptr0, XBLOCK: tl.constexpr):\n"
                "    x = tl.load(in_ptr0 + tl.arange(0, XBLOCK))\n"
                "    tl.store(in_ptr0 + tl.arange(0, XBLOCK), tl.associative_scan(x, 0, _triton_helper_fn_add0))\n")

    emitted: dict[str, str] = {}
    out = []
    for name, op, new in (("triton_per_a_0", "+", "scan_a"), ("triton_per_b_1", "+", "scan_b"),
                          ("triton_per_c_2", "*", "scan_c")):
        k = parse_kernel(name, kernel(name, op))
        assert [f.name for f in k.local_functions] == ["_triton_helper_fn_add0"]
        out += _kernel_sources(k, new, _KernelRewrite(name), emitted, {"combine_add_2"})
    text = "\n\n".join(out)
    assert sorted(emitted) == ["combine_add", "combine_add_3"], text  # one per body; _2 was taken
    assert "_triton_helper_fn" not in text
    assert text.count("tl.associative_scan(x, 0, combine_add)") == 2
    assert "tl.associative_scan(x, 0, combine_add_3)" in text and "arg0_0 * arg1_0" in emitted["combine_add_3"]
    compile(text, "<converted>", "exec")
    # two combines of one kernel (a value and an index scanned together): one function each
    two = ("@triton.jit\ndef _triton_helper_fn_add0(a, b):\n    return a + b\n\n\n"
           "@triton.jit\ndef _triton_helper_fn_add1(a0, a1, b0, b1):\n    return a0 + b0, a1 + b1\n\n\n"
           "@triton.jit\ndef triton_per_d_3(in_ptr0, XBLOCK: tl.constexpr):\n"
           "    x = tl.load(in_ptr0 + tl.arange(0, XBLOCK))\n"
           "    y = tl.associative_scan(x, 0, _triton_helper_fn_add0)\n"
           "    z, w = tl.associative_scan((x, y), 0, _triton_helper_fn_add1)\n"
           "    tl.store(in_ptr0 + tl.arange(0, XBLOCK), z + w)\n")
    emitted = {}
    text = "\n\n".join(_kernel_sources(parse_kernel("triton_per_d_3", two), "scan_d", _KernelRewrite("d"),
                                        emitted, set()))
    assert sorted(emitted) == ["combine_add", "combine_add_2"], text
    assert "tl.associative_scan(x, 0, combine_add)" in text and "(x, y), 0, combine_add_2)" in text
    assert "a0 + b0" in emitted["combine_add_2"]


def test_inductor_is_given_the_published_sizes_as_hints_where_it_traces_smaller_ones():
    """A whole-tensor loss traced at the reduced size: Inductor's split reduction takes its number
    of partial sums from the sizes' hints, so with the traced size as the hint a billion elements
    were reduced by a handful of programs (KernelBench level 1's losses at 0.14-0.27x of eager).
    The capture gives it the published sizes as hints (recorded in ``size_hints``): more partial
    sums than for the same trace without them, and every size is still a symbol, so the code is
    right at the small size it was traced at."""
    import re

    import torch

    source = (FIX / "whole_tensor_loss.py").read_text()
    small = {"batch_size": 512, "dim": 256}
    hinted = capture(source, name="whole_tensor_loss", device="cpu", overrides=small)
    assert hinted.size_hints == {f"input {i} dim {d}": 32768 for i in (0, 1) for d in (0, 1)}
    plain = capture(source.replace("= 32768", "= 512", 1).replace("dim = 32768", "dim = 256"),
                    name="whole_tensor_loss", device="cpu", overrides=small)
    assert plain.size_hints == {}
    partial_sums = [max(int(n) for n in re.findall(r"xnumel = (\d+)", c.output_code)) for c in (hinted, plain)]
    assert partial_sums[0] > partial_sums[1], partial_sums
    fv = convert(hinted, source)
    ns: dict = {}
    exec(compile(fv.source.replace("batch_size = 32768", "batch_size = 512").replace("dim = 32768", "dim = 256"),
                 "whole_tensor_loss_new.py", "exec"), ns)
    a, b = torch.rand(512, 256), torch.rand(512, 256)
    got = ns["ModelNew"]()(a, b)
    assert torch.allclose(got, torch.mean((a.double() - b.double()) ** 2).float(), rtol=1e-5), got


def test_a_capture_says_why_inductor_was_given_no_published_sizes():
    """A ``get_inputs()`` that takes a tensor through numpy does not run on the meta device (a meta
    tensor has no data), so the published sizes
    cannot be had without allocating them: the capture traces as before and says why, and the
    first version's rationale carries it."""
    source = (
        "import torch\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.abs(x).mean()\n\n"
        "rows = 256\ncols = 128\n\n"
        "def get_inputs():\n"
        "    return [torch.from_numpy(torch.randn(rows, cols).numpy())]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    cap = capture(source, name="numpy_inputs", device="cpu", overrides={"rows": 64, "cols": 32})
    assert cap.size_hints == {} and "meta device" in cap.size_hints_note, cap.size_hints_note
    assert "meta device" in convert(cap, source).rationale


def test_the_index_width_is_chosen_at_each_launch():
    """Generation makes Inductor index in int64 so the first version holds at every size; each
    kernel takes its index dtype as a constexpr instead, and each launch passes int32 where every
    offset fits (2.1x faster on an H100 for a pointwise kernel of 130M elements), int64 past it.
    Both widths compute the same values."""
    import torch
    import triton.language as tl

    cap = load_capture(FIX / "row_cumsum.capture.json")
    assert ".to(tl.int64)" in cap.output_code
    fv = convert(cap, (FIX / "row_cumsum.py").read_text())
    kernel = next(n for n in ast.parse(fv.source).body if isinstance(n, ast.FunctionDef) and n.name == "cumsum_kernel")
    assert "INDEX_DTYPE" in [a.arg for a in kernel.args.args]
    assert ".to(tl.int64)" not in ast.unparse(kernel) and "tl.program_id(0).to(INDEX_DTYPE)" in ast.unparse(kernel)
    assert "INDEX_DTYPE=index_dtype(x, buf0, " in fv.source
    module: dict = {}
    exec(compile(fv.source, "first_version.py", "exec"), module)
    pick = module["index_dtype"]
    assert pick(torch.empty(4, 8), 8, 4, 1.5) is tl.int32
    assert pick(torch.empty(4, 8), 2**31) is tl.int64
    assert pick(torch.empty(2**31, device="meta")) is tl.int64
    assert pick(torch.empty(1).expand(2**31)) is tl.int32  # a broadcast reads one element
    assert pick(torch.empty(0, 2**31, device="meta")) is tl.int32  # nothing to address
    x = torch.randn(3, 1500)
    narrow = module["ModelNew"]()(x)
    module["index_dtype"] = lambda *args: tl.int64
    wide = module["ModelNew"]()(x)
    assert torch.equal(narrow, wide) and torch.allclose(narrow, torch.cumsum(x, dim=1), atol=1e-4)


def test_the_autotune_cache_follows_the_index_width():
    """Each index width compiles its own kernel: the autotuning stage keys a first version's
    kernels on ``INDEX_DTYPE`` too, so a config tuned at int32 offsets never serves int64 ones, and
    the tuned module computes the same values at both widths."""
    import torch
    import triton.language as tl

    from xeforge_core.codemods.autotune import add_autotune
    from xeforge_core.worker.autotune import run_once

    fv = convert(load_capture(FIX / "row_cumsum.capture.json"), (FIX / "row_cumsum.py").read_text())
    tuned = add_autotune(fv.source, target="cuda")
    assert tuned.changed and 'key=["xnumel", "r0_numel", "INDEX_DTYPE"]' in tuned.source, tuned.source[:2000]
    module: dict = {}
    exec(compile(tuned.source, "tuned.py", "exec"), module)
    tuner = module["cumsum_kernel"]
    tuner._do_bench = run_once  # the interpreter has no timer: each config runs once, as in the verifier
    x = torch.randn(3, 1500)
    narrow = module["ModelNew"]()(x)
    module["index_dtype"] = lambda *args: tl.int64
    wide = module["ModelNew"]()(x)
    assert sorted(str(key[2]) for key in tuner.cache) == ["int32", "int64"], tuner.cache
    assert torch.equal(narrow, wide) and torch.allclose(narrow, torch.cumsum(x, dim=1), atol=1e-4)


def test_a_kernel_that_computes_values_from_its_indices_keeps_int64():
    """Inductor forms values from indices (``torch.arange(n) * n``, a linear index as a float) in the
    index dtype: in int32 ``ks0 * x0`` wraps where each size fits, so such a kernel is not narrowed.
    A comparison of an index with sizes (a looped scan picking its carry) is no such value."""
    from xeforge_core.inductor import index_width

    head = ("def k(in_ptr0, out_ptr0, ks0, xnumel, XBLOCK: tl.constexpr):\n"
            "    xoffset = tl.program_id(0).to(tl.int64) * XBLOCK\n"
            "    xindex = xoffset + tl.arange(0, XBLOCK)[:].to(tl.int64)\n"
            "    xmask = xindex < xnumel\n    x0 = xindex % ks0\n    x2 = xindex\n"
            "    tmp0 = tl.load(in_ptr0 + x2, xmask)\n")
    cases = {
        "    tmp1 = (ks0 * x0).to(tl.int64)\n    tl.store(out_ptr0 + x2, tmp0 + tmp1, xmask)\n": False,
        "    tmp1 = x0.to(tl.float32)\n    tl.store(out_ptr0 + x2, tmp0 * tmp1, xmask)\n": False,
        "    tl.store(out_ptr0 + x2, tl.where(x0 < ks0 * ks0, tmp0, 0.0), xmask)\n": False,
        "    tl.store(out_ptr0 + x2, tl.where(x0 == ks0 - 1, tmp0, 0.0), xmask)\n": True,
        "    tl.store(out_ptr0 + (x0 + ks0 * x2), tmp0 * 2.0, xmask)\n": True,
    }
    for tail, narrowed in cases.items():
        fn = ast.parse(head + tail).body[0]
        assert index_width.narrows(fn) is narrowed, tail
        assert index_width.narrow(fn) is narrowed and ("INDEX_DTYPE" in ast.unparse(fn)) is narrowed, tail


def test_an_input_of_another_layout_is_put_in_the_layout_the_kernels_index():
    """Inductor's kernels index each input with the strides it asserted at the trace: a transposed
    view given to the first version is copied into that layout first (it was read as the traced
    layout and silently wrong), and an input already in it is not copied."""
    import torch

    cap = load_capture(FIX / "row_cumsum.capture.json")
    fv = convert(cap, (FIX / "row_cumsum.py").read_text())
    assert "x = as_layout(x, (s77, s27), (s27, 1))" in fv.source and "assert_size_stride" not in fv.source
    module: dict = {}
    exec(compile(fv.source, "first_version.py", "exec"), module)
    x = torch.randn(1500, 3).t()
    assert not x.is_contiguous()
    assert torch.allclose(module["ModelNew"]()(x), torch.cumsum(x, dim=1), atol=1e-4)
    same = torch.randn(3, 70)
    assert module["as_layout"](same, (3, 70), (70, 1)) is same
    row = same[:1]   # a dimension of one element: its stride does not matter
    assert module["as_layout"](row, (1, 70), (999, 1)) is row


def test_a_constructor_float_written_into_the_kernels_is_checked_in_forward(tmp_path):
    """Dynamo makes a float the constructor takes (``divisor``) a constant of the kernels; the first
    version keeps ``Model.__init__``, so ``ModelNew(..., divisor=4.0)`` would compute with 2.0,
    silently. Generation notes Dynamo's constant guards, and ``forward`` refuses another value by
    name; the value it was generated for runs."""
    import torch

    source = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
              "    def __init__(self, divisor, slope):\n        super().__init__()\n"
              "        self.divisor = divisor\n        self.slope = slope\n        self.unused = 0.5\n\n"
              "    def forward(self, x):\n"
              "        return torch.nn.functional.leaky_relu(x / self.divisor, negative_slope=self.slope)\n\n\n"
              "def get_inputs():\n    return [torch.randn(4, 37)]\n\n\n"
              "def get_init_inputs():\n    return [2.0, 0.01]\n")
    cap = capture(source, name="divide_leaky")
    assert cap.constants == {"self.divisor": 2.0, "self.slope": 0.01}   # not the unused attribute
    fv = convert(cap, source)
    module: dict = {}
    exec(compile(fv.source, "first_version.py", "exec"), module)
    x = torch.randn(4, 37)
    want = torch.nn.functional.leaky_relu(x / 2.0, negative_slope=0.01)
    assert torch.allclose(module["ModelNew"](2.0, 0.01)(x), want)
    with pytest.raises(ValueError, match=r"generated for self\.divisor == 2\.0 .*got 4\.0"):
        module["ModelNew"](4.0, 0.01)(x)
