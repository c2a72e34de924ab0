"""The Triton GEMM kernel a first version runs for the matrix products Inductor leaves to library
calls (:mod:`xeforge_core.inductor.gemm`): its results against torch's own products in Triton's
interpreter (transposed and strided operands, batches, bias with alpha/beta, matrix-vector,
float16/float64), how a library call binds to it, which calls stay torch, and that the
autotuning stage can tune it.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from xeforge_core.codemods.autotune import add_autotune
from xeforge_core.inductor import gemm
from xeforge_core.inductor.capture import load_capture
from xeforge_core.inductor.convert import convert
from xeforge_core.inductor.first_version import _candidate
from xeforge_core.inductor.kernels import InductorCodeError
from xeforge_core.worker.precision_hints import tf32_dots

FIX = Path(__file__).resolve().parent / "fixtures" / "inductor"


def _generated() -> dict:
    """The namespace of the generated GEMM module (cuda's first tiles): ``matmul``, ``matmul_kernel``
    and ``matmul_kernel_splits``."""
    ns: dict = {"torch": torch, "triton": triton, "tl": tl}
    exec(compile(gemm.source("matmul", "matmul_kernel", gemm.gemm_config("cuda")), "<gemm>", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def matmul():
    """The host function of the generated module, with the cuda search space's first tiles."""
    ns = _generated()
    return ns["matmul"]


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape))).to(dtype)


def _close(got: torch.Tensor, want: torch.Tensor, rel: float) -> None:
    """``got`` within ``rel`` of ``want``'s largest magnitude (float64 comparison), same shape/dtype."""
    assert got.shape == want.shape and got.dtype == want.dtype
    err = (got.double() - want.double()).abs().max().item()
    assert err <= rel * max(1.0, want.double().abs().max().item()), err


def test_products_match_torch_for_every_call_shape(matmul):
    # a transposed operand (read through its strides) and sizes that are no multiple of a tile
    a, b = _rand(72, 40), _rand(72, 150)
    _close(matmul(a.T, b), a.T @ b, 1e-6)
    # the result written into a transposed view of its buffer
    a, b = _rand(130, 70), _rand(70, 150)
    out = torch.empty(150, 130).T
    assert matmul(a, b, out=out) is out
    _close(out, a @ b, 1e-6)
    # batched, the second operand transposed per batch
    x, y = _rand(3, 20, 36), _rand(3, 28, 36).transpose(1, 2)
    _close(matmul(x, y), torch.bmm(x, y), 1e-6)
    # addmm / baddbmm: a broadcast bias with alpha and beta
    bias, bias2 = _rand(150), _rand(20, 28)
    _close(matmul(a, b, bias=bias, alpha=0.5, beta=2.0), torch.addmm(bias, a, b, alpha=0.5, beta=2.0), 1e-6)
    _close(matmul(x, y, bias=bias2, alpha=1.5, beta=0.5), torch.baddbmm(bias2, x, y, alpha=1.5, beta=0.5), 1e-6)
    # mv / addmv
    v, bias_v = _rand(70), _rand(130)
    _close(matmul(a, v), torch.mv(a, v), 1e-6)
    _close(matmul(a, v, bias=bias_v, beta=3.0), torch.addmv(bias_v, a, v, beta=3.0), 1e-6)


def test_beta_zero_ignores_the_bias_and_empty_k_gives_the_bias(matmul):
    a, b = _rand(9, 17), _rand(17, 5)
    nan_bias = torch.full((5,), math.nan)
    _close(matmul(a, b, bias=nan_bias, beta=0), torch.addmm(nan_bias, a, b, beta=0), 1e-6)
    bias = _rand(7)
    _close(matmul(_rand(5, 0), _rand(0, 7), bias=bias, beta=2.0), 2.0 * bias.expand(5, 7), 0.0)


@pytest.mark.parametrize("dtype,rel", [(torch.float16, 5e-3), (torch.float64, 1e-13)])
def test_operands_keep_their_dtype(matmul, dtype, rel):
    """float16 accumulates in float32 and stores float16; float64 accumulates in float64.
    (bfloat16 runs on GPUs; Triton 3.6's interpreter multiplies bfloat16 dot operands as their
    raw 16-bit integers, so it is not checked here.)"""
    a, b = _rand(33, 200, dtype=dtype), _rand(200, 65, dtype=dtype)
    _close(matmul(a, b), (a.double() @ b.double()).to(dtype), rel)


class _Launches:
    """Stands in for a kernel object: records each launch's grid and keyword arguments."""

    def __init__(self):
        self.calls: list[tuple[tuple, dict]] = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((grid, kw))


def _recorded(**launch_kw):
    """The launches of a 2 x 4096 @ 4096 x 3 product through the generated host function."""
    ns = _generated()
    ns["matmul_kernel"], ns["matmul_kernel_splits"] = _Launches(), _Launches()
    ns["matmul"](_rand(2, 4096), _rand(4096, 3), **launch_kw)
    return ns["matmul_kernel"].calls, ns["matmul_kernel_splits"].calls


def test_float32_precision_is_full_off_nvidia_and_settled_by_the_launch():
    """Off an NVIDIA GPU with TF32 tensor cores (here: Triton's interpreter) float32 operands are
    multiplied in full float32; the verifier's TF32 rule reads the launch's INPUT_PRECISION, so a
    launch in "ieee" has no dot to flag and one in "tf32x3" is named as such, not as TF32."""
    (grid, kw), = _recorded(split_k=1)[0]
    assert kw["INPUT_PRECISION"] == "ieee" and grid[2] == 1
    source = gemm.source("matmul", "matmul_kernel", gemm.gemm_config("cuda"))
    assert tf32_dots(source, {"INPUT_PRECISION": "ieee"}) == []
    x3 = tf32_dots(source, {"INPUT_PRECISION": "tf32x3"})
    assert len(x3) == 1 and 'input_precision="tf32x3"' in x3[0]
    assert "chosen at compile time" in tf32_dots(source)[0]  # not known without the launch
    assert "torch.float64" not in source  # the host code names no float64 (the no_float64 rule)


def test_long_k_is_split_over_the_programs_the_device_runs(monkeypatch):
    """K >= 32 * max(M, N) (TorchInductor's decompose_k rule) and fewer output tiles than the
    device runs programs at once: K is split, at most into runs of four BLOCK_K steps; the
    partial products are summed by the second kernel. A short K, or a forced split_k, is kept."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)  # the interpreter's "processors"
    main, sums = _recorded()
    (grid, kw), = main
    assert grid == (1, 1, 8) and kw["SPLIT_K"] == 8 and len(sums) == 1 and sums[0][1]["SPLIT_K"] == 8
    main, sums = _recorded(split_k=3)
    assert main[0][0][2] == 3 and sums
    ns = _generated()
    ns["matmul_kernel"], ns["matmul_kernel_splits"] = _Launches(), _Launches()
    ns["matmul"](_rand(200, 4096), _rand(4096, 200))  # K < 32 * 200: one program walks all of K
    assert ns["matmul_kernel"].calls[0][0][2] == 1 and not ns["matmul_kernel_splits"].calls


class _Driver:
    """Stands in for ``triton.runtime.driver.active`` of a GPU backend: its target's ``arch`` (an
    int for NVIDIA's compute capability, a gfx name for AMD, a property dict for Intel) and the
    device properties it reports."""

    def __init__(self, arch, properties):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("gpu", arch, 32)
        self.properties = properties

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    @property
    def utils(self):
        return type("Utils", (), {"get_device_properties": lambda _self, dev: self.properties})()


@pytest.mark.parametrize("arch,props,precision,split", [
    (90, {"multiprocessor_count": 132}, "tf32x3", 132),       # NVIDIA Hopper: TF32 tensor cores, 132 SMs
    (75, {"multiprocessor_count": 40}, "ieee", 40),           # NVIDIA Turing: no TF32
    ("gfx942", {"multiprocessor_count": 304}, "ieee", 304),   # AMD: float32 with FMA
    ({"name": "Intel Arc B580"}, {"multiprocessor_count": 20}, "ieee", 20),  # Intel: its Xe-cores
    ({"name": "an older driver"}, {}, "ieee", 1),             # no processor count: no split
])
def test_gpu_facts_come_from_tritons_driver_for_every_backend(monkeypatch, arch, props, precision, split):
    """On a GPU the launcher asks Triton's driver (no vendor named in the module): TF32 tensor
    cores only where the target's arch is NVIDIA's compute capability 8.0 or newer, and the
    processors a long K is split over (K = 4096 >> 32 * max(2, 3), one output tile)."""
    import types

    ns = _generated()
    fake = types.SimpleNamespace(cdiv=triton.cdiv,
                                 runtime=types.SimpleNamespace(driver=types.SimpleNamespace(active=_Driver(arch, props))))
    ns["triton"], ns["matmul_kernel"], ns["matmul_kernel_splits"] = fake, _Launches(), _Launches()
    a, b = torch.empty(2, 4096, device="meta"), torch.empty(4096, 3, device="meta")
    ns["matmul"](a, b)
    (grid, kw), = ns["matmul_kernel"].calls
    assert kw["INPUT_PRECISION"] == precision and kw["SPLIT_K"] == grid[2] == min(split, 4096 // (4 * 64))
    assert bool(ns["matmul_kernel_splits"].calls) == (split > 1)
    ns["matmul_kernel"].calls.clear()
    ns["matmul"](a.half(), b.half())  # half-precision operands: the tensor cores as they are
    assert ns["matmul_kernel"].calls[0][1]["INPUT_PRECISION"] == "ieee"


@pytest.mark.parametrize("split", [2, 5])
def test_split_k_products_match_torch(matmul, split):
    """Partial products of every split summed in order, then alpha, the bias and the output's
    dtype and strides: a K that is no multiple of BLOCK_K or of the split, batches, a transposed
    output, matrix-vector."""
    a, b, bias = _rand(70, 1000), _rand(1000, 9), _rand(9)
    _close(matmul(a, b, bias=bias, alpha=0.5, beta=2.0, split_k=split),
           torch.addmm(bias, a, b, alpha=0.5, beta=2.0), 1e-6)
    x, y = _rand(3, 20, 700), _rand(3, 10, 700).transpose(1, 2)
    out = torch.empty(3, 10, 20).transpose(1, 2)
    assert matmul(x, y, out=out, split_k=split) is out
    _close(out, torch.bmm(x, y), 1e-6)
    v = _rand(700)
    _close(matmul(x[0], v, split_k=split), torch.mv(x[0], v), 1e-6)
    h = _rand(33, 300, dtype=torch.float16), _rand(300, 17, dtype=torch.float16)
    _close(matmul(*h, split_k=split), (h[0].double() @ h[1].double()).half(), 5e-3)


@pytest.mark.parametrize("split", [None, 1, 3])
def test_matrix_vector_products_run_the_gemv_kernel_and_match_torch(split):
    """N == 1 (mv, addmv, a [M, K] @ [K, 1] product) and M == 1 (a row vector times a matrix, read
    transposed) go to the mat-vec kernel, not a GEMM tile of 128 columns for one: row-major and
    transposed matrices, a bias, batches, a K that is no multiple of the tile or of the split."""
    ns = _generated()
    matmul = ns["matmul"]
    real = ns["matmul_kernel_gemv"]
    gemm_launches, gemv_launches = _Launches(), _Launches()
    ns["matmul_kernel"], ns["matmul_kernel_gemv"] = gemm_launches, gemv_launches
    matmul(_rand(70, 1000), _rand(1000), split_k=split)
    matmul(_rand(1, 1000), _rand(1000, 9), split_k=split)
    assert len(gemv_launches.calls) == 2 and not gemm_launches.calls
    ns["matmul_kernel"], ns["matmul_kernel_gemv"] = _generated()["matmul_kernel"], real
    a, v, bias = _rand(70, 1000), _rand(1000), _rand(70)
    _close(matmul(a, v, split_k=split), torch.mv(a, v), 1e-6)
    _close(matmul(a.T.contiguous().T, v, bias=bias, alpha=0.5, beta=2.0, split_k=split),
           torch.addmv(bias, a, v, alpha=0.5, beta=2.0), 1e-6)
    _close(matmul(a, v[:, None], split_k=split), a @ v[:, None], 1e-6)
    row, m = _rand(1, 1000), _rand(1000, 9)
    _close(matmul(row, m, split_k=split), row @ m, 1e-6)
    _close(matmul(row, m.T.contiguous().T, bias=_rand(9), split_k=split), torch.addmm(_rand(9), row, m), 1e-6)
    x, y = _rand(3, 20, 300), _rand(3, 300, 1)
    _close(matmul(x, y, split_k=split), torch.bmm(x, y), 1e-6)
    h = _rand(33, 300, dtype=torch.float16), _rand(300, dtype=torch.float16)
    _close(matmul(*h, split_k=split), (h[0].double() @ h[1].double()).half(), 5e-3)


_COMPILE_SPLITS = """
import importlib.util, sys
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
spec = importlib.util.spec_from_file_location("generated_gemm", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
signature = {"part_ptr": "*fp32", "c_ptr": "*fp32", "bias_ptr": "*fp32", "total": "i64", "M": "i32", "N": "i32",
             **{f"stride_{n}": "i32" for n in ("cb", "cm", "cn", "biasb", "biasm", "biasn")},
             "alpha": "fp32", "beta": "fp32", "HAS_BIAS": "constexpr", "ACC_DTYPE": "constexpr",
             "SPLIT_K": "constexpr", "BLOCK": "constexpr"}
constexprs = {"M": 1, "N": 1, "HAS_BIAS": False, "ACC_DTYPE": tl.float32, "SPLIT_K": 2, "BLOCK": 1024}
triton.compile(triton.compiler.ASTSource(fn=module.matmul_kernel_splits, signature=signature, constexprs=constexprs),
               target=GPUTarget("cuda", 90, 32))
"""


def test_the_splits_kernel_compiles_where_m_and_n_are_one(tmp_path):
    """Triton makes an integer argument equal to 1 a constant when it compiles for a GPU, which the
    interpreter never does: a 1 x K @ K x 1 product split over K launches the splits kernel with
    M = N = 1, and it must compile for sm_90 (ahead of time, in a process without the interpreter;
    no GPU needed)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "generated_gemm.py"
    path.write_text("import torch\nimport triton\nimport triton.language as tl\n\n"
                    + gemm.source("matmul", "matmul_kernel", gemm.gemm_config("cuda")))
    done = subprocess.run([sys.executable, "-c", _COMPILE_SPLITS, str(path)], capture_output=True, text=True,
                          env={**os.environ, "TRITON_INTERPRET": "0"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_launch_starts_from_the_target_search_space_and_autotunes():
    cuda = gemm.gemm_config("cuda")
    assert "search space cuda" in cuda.origin
    source = gemm.source("matmul", "matmul_kernel", cuda)
    assert f"BLOCK_M = {cuda.block_m}" in source and f"num_warps={cuda.num_warps}" in source
    xpu = gemm.gemm_config("xpu")
    assert "grf_mode" in dict(xpu.options)  # Intel's launch option travels with the tiles
    cap = load_capture(FIX / "matmul_batched.capture.json")
    fv = convert(cap, (FIX / "matmul_batched.py").read_text())
    tuned = add_autotune(fv.source, target="cuda")
    assert tuned.applicable, tuned
    assert tuned.changed and "@triton.autotune(" in tuned.source and 'key=["M", "N", "K"]' in tuned.source


def test_library_calls_bind_to_the_launcher():
    call = ast.parse("extern_kernels.addmm(bias, x, w, alpha=1, beta=1, out=buf0)", mode="eval").body
    assert ast.unparse(gemm.launcher_call("addmm", call, "matmul")) == \
        "matmul(x, w, out=buf0, bias=bias, alpha=1, beta=1)"
    call = ast.parse("extern_kernels.bmm(a, b, out=buf)", mode="eval").body
    assert ast.unparse(gemm.launcher_call("bmm", call, "mm_2")) == "mm_2(a, b, out=buf)"
    with pytest.raises(gemm.GemmCallError, match="does not bind"):
        gemm.launcher_call("mm", ast.parse("extern_kernels.mm(a, b, scale=2)", mode="eval").body, "matmul")


def _with_out_dtype(name: str, dtype: str) -> str:
    cap = load_capture(FIX / f"{name}.capture.json")
    code = cap.output_code.replace("torch.float32)", f"{dtype})")
    assert code != cap.output_code
    cap.output_code = code
    return convert(cap, (FIX / f"{name}.py").read_text())


def test_a_product_the_kernel_cannot_compute_stays_torch_and_is_named():
    """An integer result is no tl.dot with a float accumulator: the library call stays, named."""
    fv = _with_out_dtype("matmul_transposed", "torch.int64")
    assert fv.library_calls == ["torch.mm"] and not fv.gemm_calls
    assert "def matmul_kernel(" not in fv.source and "torch.mm(" in fv.source
    assert "not Triton yet: torch.mm" in fv.rationale
    assert fv.unexpressed_products == ["torch.mm (int64 result)"]
    assert "torch.mm (int64 result): the Triton GEMM kernel computes float16" in fv.rationale
    reason = _candidate(fv, fv.source).not_applicable_reason  # no Triton kernel at all: the refusal says why
    assert "torch.mm (int64 result)" in reason, reason


def test_names_do_not_shadow_the_problem(tmp_path):
    cap = load_capture(FIX / "matmul_transposed.capture.json")
    source = (FIX / "matmul_transposed.py").read_text() + "\n\ndef matmul(x):\n    return x\n" \
        + "\n\ndef _matmul_kernel_device(x):\n    return x\n"
    fv = convert(cap, source)
    assert "def matmul_2(" in fv.source and "matmul_2(A.as_strided(" in fv.source
    # the launcher's helpers too: the problem's own function keeps its name and its body
    assert fv.source.count("def _matmul_kernel_device(") == 1 and "def _matmul_kernel_device_2(a):" in fv.source
    bad = load_capture(FIX / "matmul_transposed.capture.json")
    bad.output_code = bad.output_code.replace("extern_kernels.mm(", "extern_kernels.mm(1, 2, ")
    with pytest.raises(InductorCodeError, match="extern_kernels.mm"):
        convert(bad, (FIX / "matmul_transposed.py").read_text())


def test_the_tf32_rule_reads_the_precision_a_launch_chose():
    """``input_precision`` given by a constexpr is settled by the launch, whether the value is
    passed by keyword, by position or left at its default: "ieee" is no finding, "tf32x3" the
    info finding ``fp32_dot_tf32x3``, "tf32" the TF32 warning."""
    import inspect
    import textwrap

    from xeforge_core.worker.capture import LaunchRecorder
    from xeforge_core.worker.roles import launch_findings

    @triton.jit
    def dot_tile(a_ptr, b_ptr, c_ptr, PREC: tl.constexpr = "ieee"):
        offs = tl.arange(0, 16)
        a = tl.load(a_ptr + offs[:, None] * 16 + offs[None, :])
        b = tl.load(b_ptr + offs[:, None] * 16 + offs[None, :])
        tl.store(c_ptr + offs[:, None] * 16 + offs[None, :], tl.dot(a, b, input_precision=PREC))

    source = textwrap.dedent(inspect.getsource(dot_tile.fn))
    a, b, c = _rand(16, 16), _rand(16, 16), torch.empty(16, 16)
    found = {}
    for name, launch in {"default": lambda: dot_tile[(1,)](a, b, c), "positional": lambda: dot_tile[(1,)](a, b, c, "ieee"),
                         "keyword x3": lambda: dot_tile[(1,)](a, b, c, PREC="tf32x3"),
                         "positional tf32": lambda: dot_tile[(1,)](a, b, c, "tf32")}.items():
        rec = LaunchRecorder()
        rec.install()
        try:
            launch()
        finally:
            rec.uninstall()
        found[name] = [(f.rule, f.severity) for f in launch_findings(rec.launches, {"dot_tile": source})]
    assert found == {"default": [], "positional": [], "keyword x3": [("fp32_dot_tf32x3", "info")],
                     "positional tf32": [("fp32_dot_tf32", "warning")]}


def test_split_k_below_one_is_refused(matmul):
    with pytest.raises(ValueError, match="split_k=0"):
        matmul(_rand(4, 8), _rand(8, 4), split_k=0)
