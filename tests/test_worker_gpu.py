"""The worker on a real GPU (cuda or xpu): compiled-kernel metadata and IR, poisoned memory,
and the timing role. Skipped where no GPU is present (CI runs the interpreter tests instead).

Run on a GPU box with ``python -m pytest tests/test_worker_gpu.py``; the worker processes it
starts compile their kernels (TRITON_INTERPRET is removed from their environment).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.test_worker_planted import GEMM_SPEC, run_worker, source
from xeforge_core.verdict import Verdict


def _gpu() -> str | None:
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if torch.cuda.is_available():
        return "cuda"
    return None


DEVICE = _gpu()
pytestmark = pytest.mark.skipif(DEVICE is None, reason="no GPU (cuda or xpu) here: the interpreter tests cover the "
                                                       "worker on cpu")

VARIANTS = [{"name": "ci", "params": ["A", "B"], "dims": {"M": 256, "N": 256, "K": 256}, "flop": 2 * 256.0 ** 3,
             "bytes": 2 * (2 * 256 * 256) + 4 * 256 * 256},
            {"name": "odd", "params": ["A", "B"], "dims": {"M": 33, "N": 20, "K": 40}}]


def job(role: str, module: dict, tmp: Path, **extra) -> dict:
    j = {"role": role, "device": DEVICE, "module": module, "baseline": None,
         "reference": source("gemm_ref.py", "reference", "gemm_ref.py"), "spec": GEMM_SPEC,
         "correctness_variants": VARIANTS, "performance_variants": VARIANTS[:1], "seeds": [0, 1],
         "distributions": ["normal", "mixed"], "expected_dir": None,
         "options": {"lock_dir": str(tmp / "locks"), "warmup_ms": 5, "rep_ms": 20}}
    j.update(extra)
    return j


def test_gpu_baseline_candidate_timing(tmp_path):
    base = Verdict.from_dict(run_worker(tmp_path / "base", job("baseline", source("gemm_baseline.py", "baseline"),
                                                               tmp_path)))
    assert base.kind.value == "ok", base.reason
    k = base.kernels[0]
    assert k.num_warps and k.registers is not None and any(name in k.ir for name in ("ttir", "ttgir", "llir"))

    expected = str(tmp_path / "base" / "expected")
    for name, kind in [("cand_correct.py", "ok"), ("cand_odd_mask.py", "wrong_answer"),
                       ("cand_autotune_bad.py", "wrong_answer"), ("cand_cached.py", "cheating")]:
        v = Verdict.from_dict(run_worker(tmp_path / name, job("candidate", source(name, "candidate"), tmp_path,
                                                              expected_dir=expected)))
        assert v.kind.value == kind, (name, v.reason)

    timing = Verdict.from_dict(run_worker(tmp_path / "timing", job(
        "timing", source("cand_correct.py", "candidate"), tmp_path,
        baseline=source("gemm_baseline.py", "baseline"), expected_dir=expected)))
    assert timing.kind.value == "ok", timing.reason
    perf = timing.performance[0]
    assert perf.speedup > 0 and perf.candidate.trials >= 10 and perf.reference is not None
    assert perf.tflops and perf.gbps


DESCRIPTOR_MODULE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, M, N: tl.constexpr, BLOCK_M: tl.constexpr):
    row = tl.program_id(0) * BLOCK_M
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, N])
    yd = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, N])
    yd.store([row, 0], xd.load([row, 0]) * 2)


class Model(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.shape[0], 32),)](x, y, x.shape[0], N=x.shape[1], BLOCK_M=32)
        return y


def get_inputs():
    return [torch.randn(256, 64)]


def get_init_inputs():
    return []
'''


def test_device_side_tensor_descriptors_get_scratch_memory():
    """A kernel building tensor descriptors on the device needs Triton's global-scratch
    allocator on NVIDIA (TMA); the worker provides one, as an application would."""
    import triton.language as tl

    from xeforge_core.problem import problem_from_source
    from xeforge_core.verify import VerifyOptions, verify

    if not hasattr(tl, "make_tensor_descriptor"):
        pytest.skip("this Triton has no tl.make_tensor_descriptor")
    problem = problem_from_source(DESCRIPTOR_MODULE, name="scale_desc")
    v = verify(problem, DESCRIPTOR_MODULE, device=DEVICE,
               options=VerifyOptions(seeds=1, distributions=["normal"], use_cache=False))
    assert v.kind.value == "ok", v.feedback()


def test_tf32_dot_products_are_named_with_their_measured_error_and_accepted_only_when_allowed(tmp_path, monkeypatch):
    """On NVIDIA GPUs a float32 tl.dot without input_precision runs in TF32: a precision
    downgrade in a float32 problem, wrong unless --allow tf32; input_precision="ieee" is ok."""
    if DEVICE != "cuda":
        pytest.skip("TF32 is an NVIDIA GPU's")
    from dataclasses import replace

    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    fixtures = Path(__file__).resolve().parent / "fixtures" / "precision"
    problem = load_problem(fixtures / "gemm.py")
    opts = VerifyOptions(seeds=1, measure_performance=False, include_odd_size=False)
    tf32 = (fixtures / "gemm_tf32.py").read_text()
    v = verify(problem, tf32, device=DEVICE, options=opts)
    assert v.kind.value == "wrong_answer", v.reason
    assert "TF32 dot products" in v.reason and "--allow tf32" in v.reason
    finding = next(f for f in v.findings if f.rule == "precision_downgrade")
    assert finding.severity == "error" and "kernel matmul, line" in finding.message
    assert v.precision["error_ratio"] > 512 and not v.precision["kernelbench"]["passed"]
    allowed = verify(problem, tf32, device=DEVICE, options=replace(opts, allow_precision=["tf32"]))
    assert allowed.kind.value == "ok", allowed.reason
    ieee = verify(problem, (fixtures / "gemm_ieee.py").read_text(), device=DEVICE, options=opts)
    assert ieee.kind.value == "ok", ieee.reason
    assert ieee.precision["check"] == "float64" and ieee.precision["error_ratio"] < 512
