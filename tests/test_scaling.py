"""Sizes the verifier chooses: KernelBench's published sizes reduced for correctness, size
constants told from axes and kernel sizes, and scaled copies for launch-grid coverage."""

from __future__ import annotations

from xeforge_core.coverage import coverage_gaps, derive_grid_variant
from xeforge_core.problem import problem_from_source
from xeforge_core.problem.scaling import estimate_input_bytes, size_constants

SOFTMAX = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''

CONV = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        return self.conv(x).sum(self.dim)

batch_size = 128
in_channels = 3
out_channels = 16
height, width = 32, 32
kernel_size = 3
dim = 1

def get_inputs():
    return [torch.randn(batch_size, in_channels, 32, 32)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, dim]
'''


def test_the_published_softmax_size_is_reduced_for_correctness():
    assert size_constants(SOFTMAX) == {"batch_size": 4096, "dim": 393216}  # `dim` is a shape here
    assert estimate_input_bytes(SOFTMAX) == (4096 * 393216, 4096 * 393216 * 4)
    problem = problem_from_source(SOFTMAX, name="softmax")
    assert problem.eager_baseline and problem.inputs is not None
    small = problem.correctness_variants()[0]
    assert small.name == "module-small" and small.overrides == {"batch_size": 32, "dim": 3072}
    assert "batch_size=4096->32" in small.derived
    assert [v.name for v in problem.benchmark_variants("cuda")] == ["module"]


def test_a_shape_tuple_unpacked_into_the_inputs_is_reduced_too():
    # KernelBench's scans (cumsum, cumprod): `input_shape = (32768,)`, `torch.rand(batch_size,
    # *input_shape)`: 1G elements published, far beyond the interpreter (and 4 GB on the host)
    from xeforge_core.problem.scaling import odd_module_variant

    scan = SOFTMAX.replace("torch.softmax(x, dim=1)", "torch.cumsum(x, dim=1)").replace(
        "dim = 393216", "input_shape = (32768,)").replace("torch.randn(batch_size, dim)",
                                                         "torch.rand(batch_size, *input_shape)")
    assert size_constants(scan) == {"batch_size": 4096, "input_shape": (32768,)}
    assert estimate_input_bytes(scan) == (4096 * 32768, 4096 * 32768 * 4)
    problem = problem_from_source(scan, name="cumsum")
    small = problem.correctness_variants()[0]
    assert small.name == "module-small" and small.overrides == {"batch_size": 128, "input_shape": (1024,)}
    assert estimate_input_bytes(scan, small.overrides)[0] <= 1 << 18
    assert odd_module_variant(problem, small).overrides == {"batch_size": 127, "input_shape": (1023,)}


MLP = SOFTMAX.replace("torch.softmax(x, dim=1)", "self.net(x)").replace(
    "def forward(self, x):", "def __init__(self, input_size, layer_sizes, output_size):\n"
    "        super().__init__()\n"
    "        sizes = [input_size, *layer_sizes, output_size]\n"
    "        self.net = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])\n\n"
    "    def forward(self, x):").replace("dim = 393216", "input_size = 16384\nlayer_sizes = [16384, 16384]\n"
                                       "output_size = 8192").replace(
    "torch.randn(batch_size, dim)", "torch.rand(batch_size, input_size)").replace(
    "return []", "return [input_size, layer_sizes, output_size]")


def test_a_list_of_layer_sizes_the_constructor_takes_is_reduced_with_the_input():
    # KernelBench level 3's MLPs: a reduced input must not meet full-size 16384 x 16384 layers
    # (the size probe of one published MLP ran past its limit with them)
    assert size_constants(MLP) == {"batch_size": 4096, "input_size": 16384, "layer_sizes": (16384, 16384),
                                   "output_size": 8192}
    problem = problem_from_source(MLP, name="mlp")
    small = problem.correctness_variants()[0]
    assert small.overrides["layer_sizes"] == (small.overrides["input_size"],) * 2
    assert small.overrides["input_size"] < 16384


def test_kernel_sizes_and_axes_are_not_sizes():
    consts = size_constants(CONV)
    assert consts == {"batch_size": 128, "in_channels": 3, "out_channels": 16}
    problem = problem_from_source(CONV, name="conv")
    small = problem.correctness_variants()[0]  # 393216 input elements: halved once
    assert small.overrides == {"batch_size": 64, "in_channels": 3, "out_channels": 8}


def test_grid_coverage_asks_for_three_programs_per_growing_axis():
    spec = '''
inputs:
  A: {shape: [M, K], dtype: float16}
ci:
  - params: [A]
    dims: {M: 32, K: 32, BLOCK_FACTOR: 2}
'''
    src = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a):\n        return a\n"
    problem = problem_from_source(src, name="g", spec_text=spec)
    ci = problem.spec.variants["ci"]
    grids = {"ci": {"k": [1, 1, 1]}}
    probe = {"k": [2, 1, 1]}  # axis 0 grows with M, axis 1 does not
    assert coverage_gaps(grids, "ci", probe) == [("k", 0, 1, 1, 2.0)]
    derived, why = derive_grid_variant(problem, ci, grids, probe, device_type="cpu")
    assert derived is not None and derived.name == "ci-grid4"
    assert derived.dims == {"M": 128, "K": 128, "BLOCK_FACTOR": 2} and derived.shapes == {"A": (128, 128)}
    assert "axis 0 of k ran 1 program" in why
    assert derive_grid_variant(problem, ci, {"ci": {"k": [3, 1, 1]}}, {"k": [6, 1, 1]}, device_type="cpu") == (None, "")


def test_a_spec_without_ci_is_checked_at_a_reduced_copy_of_its_benchmark_variant(tmp_path):
    # a typo in the `ci` key leaves the spec with only its benchmark variant (4096 x 4096), which
    # the interpreter would run for minutes: correctness runs a reduced copy, and the loader says
    # why and which key it may have meant
    import shutil
    from pathlib import Path

    from xeforge_core.problem import load_problem

    samples = Path(__file__).resolve().parents[1] / "sample_kernels"
    shutil.copy(samples / "01_vector_add.py", tmp_path / "add.py")
    spec = (samples / "01_vector_add.yaml").read_text()
    assert "\nci:\n" in spec
    (tmp_path / "add.yaml").write_text(spec.replace("\nci:\n", "\ncii:\n"))
    problem = load_problem(tmp_path / "add.py")
    (small,) = problem.correctness_variants()
    assert small.name == "bench-gpu-small" and max(small.dims.values()) <= 512
    assert "TOKENS=4096->512" in small.derived and problem.variant("bench-gpu-small") == small
    assert any("[cii]: the spec has no ci variant" in w and "did you mean ci instead of 'cii'?" in w
               for w in problem.warnings), problem.warnings
    # with its ci variant, nothing is derived
    assert [v.name for v in load_problem(samples / "01_vector_add.py").correctness_variants()] == ["ci"]


def test_overrides_keep_the_kind_of_sequence_the_problem_module_wrote():
    """A job's JSON turns the tuple ``(1024,)`` into a list: the module gets its own kind back
    (``torch.rand(b, *input_shape)`` takes either, ``layer_sizes + [x]`` needs the list)."""
    import types

    from xeforge_core.worker.inputs import module_overrides

    mod = types.SimpleNamespace(input_shape=(32768,), layer_sizes=[16384, 16384], batch_size=4096)
    with module_overrides(mod, {"input_shape": [1024], "layer_sizes": [512, 512], "batch_size": 32}):
        assert mod.input_shape == (1024,) and mod.layer_sizes == [512, 512] and mod.batch_size == 32
    assert mod.input_shape == (32768,) and mod.layer_sizes == [16384, 16384] and mod.batch_size == 4096


def test_the_axes_a_module_reduces_over_are_not_sizes():
    """``dims = [1, 2]`` passed to the constructor names axes: a derived size that moved one to 3
    would change what the problem computes."""
    src = MLP.replace("layer_sizes = [16384, 16384]", "dims = [1, 2]").replace(
        "return [input_size, layer_sizes, output_size]", "return [input_size, dims, output_size]")
    assert "dims" not in size_constants(src)
    assert "perm" not in size_constants(src.replace("dims", "perm"))
