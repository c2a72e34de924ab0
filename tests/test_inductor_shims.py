"""The first version's runtime helpers (``xeforge_core.inductor.shims``) built on Triton's own
reductions give what TorchInductor's pairwise combines give: the same values and indices on
ties, NaN, infinities and integer inputs, along either axis (checked against ``tl.reduce`` with
the combine, in the interpreter)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from xeforge_core.inductor.shims import helpers_source

KERNEL = '''
@triton.jit
def pairwise_max(value, index, dim):
    return tl.reduce((value, index), dim, maximum_with_index)


@triton.jit
def pairwise_min(value, index, dim):
    return tl.reduce((value, index), dim, minimum_with_index)


@triton.jit
def pairwise_max2(value, dim):
    return tl.reduce(value, dim, maximum)


@triton.jit
def pairwise_min2(value, dim):
    return tl.reduce(value, dim, minimum)


@triton.jit
def reductions(x_ptr, i_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DIM: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    i = tl.load(i_ptr + offs)
    L: tl.constexpr = M if DIM == 1 else N
    o = tl.arange(0, L)
    a, b = max_with_index(x, i, DIM)
    c, d = pairwise_max(x, i, DIM)
    e, f = min_with_index(x, i, DIM)
    g, h = pairwise_min(x, i, DIM)
    results = (a, c, b, d, e, g, f, h, max2(x, DIM), pairwise_max2(x, DIM), min2(x, DIM), pairwise_min2(x, DIM))
    for k in tl.static_range(12):
        tl.store(out_ptr + k * L + o, results[k].to(tl.float32))
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    names = ["max_with_index", "min_with_index", "maximum_with_index", "minimum_with_index", "max2", "min2",
             "maximum", "minimum"]
    path = tmp_path_factory.mktemp("shims") / "shims_check.py"
    path.write_text("import triton\nimport triton.language as tl\n" + helpers_source(names) + KERNEL)
    spec = importlib.util.spec_from_file_location("shims_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_reductions_match_the_pairwise_combines(kernels, dtype):
    gen = torch.Generator().manual_seed(0)
    M, N = 8, 16
    for trial in range(4):
        x = torch.randint(-3, 3, (M, N), generator=gen).to(dtype)  # many ties
        if dtype.is_floating_point:
            x[torch.rand(M, N, generator=gen) < 0.1] = float("nan")
            x[torch.rand(M, N, generator=gen) < 0.1] = float("-inf")
            x[torch.rand(M, N, generator=gen) < 0.05] = float("inf")
        index = torch.randperm(M * N, generator=gen).reshape(M, N).to(torch.int32)
        if trial % 2:
            index[:, -3:] = 2**31 - 1  # Inductor's initial index of lanes past the row
        for dim in (0, 1):
            length = M if dim == 1 else N
            out = torch.empty(12 * length)
            kernels.reductions[(1,)](x, index, out, M=M, N=N, DIM=dim)
            out = out.view(6, 2, length).nan_to_num(1234.5)
            for k, what in enumerate(("max value", "max index", "min value", "min index", "max2", "min2")):
                assert torch.equal(out[k, 0], out[k, 1]), (what, dtype, dim, x, out[k])


SELECT = '''
@triton.jit
def pick_lane(x_ptr, out_ptr, LANE: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + cols)
    tl.store(out_ptr + tl.arange(0, M)[:, None], select_one(x, cols == LANE, dim=1, keep_dims=True))
'''


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int32, torch.int8, torch.bool])
def test_select_one_returns_the_masked_lane_bit_for_bit(tmp_path, dtype):
    """A looped scan carries its block's last lane with ``select_one`` (KernelBench level 1's
    cumsum, cumprod and masked cumsum): the value must come back exactly, NaN, infinities and
    -0.0 included, for every width."""
    path = tmp_path / "select_check.py"
    path.write_text("import triton\nimport triton.language as tl\n" + helpers_source(["select_one"]) + SELECT)
    spec = importlib.util.spec_from_file_location("select_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    M, N = 4, 8
    if dtype.is_floating_point:
        x = torch.randn(M, N, generator=torch.Generator().manual_seed(1)).to(dtype)
        x[0, 5], x[1, 5], x[2, 5], x[3, 5] = float("nan"), float("-inf"), -0.0, 3.0e-5
    elif dtype == torch.bool:
        x = torch.rand(M, N, generator=torch.Generator().manual_seed(1)) < 0.5
    else:
        x = torch.randint(-100, 100, (M, N), generator=torch.Generator().manual_seed(1)).to(dtype)
    for lane in (0, 5, N - 1):
        out = torch.empty(M, 1, dtype=dtype)
        module.pick_lane[(1,)](x, out, LANE=lane, M=M, N=N)
        bits = {torch.float32: torch.int32, torch.float16: torch.int16, torch.float64: torch.int64,
                torch.bool: torch.uint8}.get(dtype, dtype)
        assert torch.equal(out[:, 0].view(bits), x[:, lane].contiguous().view(bits)), (dtype, lane, out, x[:, lane])
