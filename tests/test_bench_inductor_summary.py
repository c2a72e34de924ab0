"""The KernelBench-from-PyTorch benchmark's summary counts each problem once: a first version
verified before the run's --budget stopped its timing is verified, not "not run"."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_inductor_kernelbench as ikb  # noqa: E402

HEADER = {"date": "2026-12-06", "device": "cuda", "torch": "2", "triton": "3", "mode": "first version only",
          "min_eager_us": 100.0}


def _row(problem: str, first: str = "", verdict: str = "", note: str = "") -> dict:
    return {"level": "2", "problem": problem, "size": "module", "first_version": first,
            "first_version_verdict": verdict, "note": note}


def test_a_first_version_verified_before_the_budget_ran_out_counts_once():
    rows = [_row("p1", "approved", "ok"),
            _row("p2", "approved", "ok", "stopped after 112 s at the end of --budget; last: timing"),
            _row("p3", "rejected", "wrong_answer", "stopped after 200 s at the end of --budget; last: timing"),
            _row("p4", note="stopped after 32 s at the end of --budget; last: generating"),
            _row("p5", note="not run: --budget spent")]
    text = ikb.summarize(rows, HEADER)
    line = next(x for x in text.splitlines() if x.startswith("| 2 |"))
    assert "| 2 | 5 | 2/3 (67%), 2 not run |" in line, line
    # the problem whose first version was judged wrong is named, though --budget stopped it later
    failures = text.split("## No verified first version", 1)[1]
    assert "p3: rejected wrong_answer" in failures and "p4" not in failures and "p5" not in failures


def test_the_ceiling_over_eager_is_summarised_where_it_was_measured():
    rows = [dict(_row("p1", "approved", "ok"), final_vs_eager="1.02", eager_ceiling="1.05"),
            dict(_row("p2", "approved", "ok"), final_vs_eager="1.5", eager_ceiling="20.0"),
            dict(_row("p3", "approved", "ok"), final_vs_eager="1.1")]
    line = next(x for x in ikb.summarize(rows, HEADER).splitlines() if x.startswith("| 2 |"))
    assert "| 4.583x |" in line, line  # sqrt(1.05 * 20): p3 has none


def test_a_versions_own_triton_kernels_are_told_from_library_calls():
    """library_share.py splits a profile's kernels into the version's own Triton kernels (by the
    names of its @triton.jit functions, autotuned ones included) and everything else."""
    import library_share
    from compile_anchor import load_module

    fixture = Path(__file__).parent / "fixtures" / "autotune_kinds" / "autotuned_elementwise.py"
    module = load_module(fixture, "version")
    own = library_share.triton_kernel_names(module)
    assert own and all(isinstance(n, str) for n in own)
    name = sorted(own)[0]
    got = library_share.split_kernel_times(
        [(name, 40.0), ("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_cublas", 300.0),
         ("void at::native::elementwise_kernel<128, 2>", 60.0)], own, calls=4)
    assert got["triton_us"] == 10.0 and got["not_triton_us"] == 90.0 and got["not_triton_share"] == 0.9
    assert got["top_not_triton"][0] == ["sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_cublas", 75.0]


def test_profiled_events_are_read_by_their_key():
    """The profiler's averaged events name an op by ``key`` (they have no ``name``): read on a
    profile of host ops, the one kind of event a machine without a GPU records."""
    import library_share
    import torch
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            torch.mm(a, a)
    names = {name for name, _ in library_share.kernel_times(prof, "self_cpu_time_total")}
    assert "aten::mm" in names, names


def test_a_library_call_is_counted_once_not_also_under_the_op_that_launched_it():
    """A device profile holds each cuDNN or cuBLAS kernel twice: as the kernel's own event and as
    the self device time of the aten op that launched it. Only the device's events count, so a
    convolution's 90 µs is 90 µs, not 180 (the profile's events are built here as torch's
    FunctionEventAvg, since this machine records no device events)."""
    import library_share
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEventAvg

    def event(key: str, device_type: DeviceType, self_device_us: float) -> FunctionEventAvg:
        e = FunctionEventAvg()
        e.key, e.device_type, e.self_device_time_total = key, device_type, self_device_us
        return e

    class Profile:
        def key_averages(self):
            return [event("aten::cudnn_convolution", DeviceType.CPU, 90.0),
                    event("sm90_xmma_fprop_implicit_gemm", DeviceType.CUDA, 90.0),
                    event("triton_poi_fused_add_clamp_0", DeviceType.CUDA, 10.0),
                    event("aten::empty", DeviceType.CPU, 0.0)]

    got = dict(library_share.kernel_times(Profile()))
    assert got == {"sm90_xmma_fprop_implicit_gemm": 90.0, "triton_poi_fused_add_clamp_0": 10.0}


def test_a_ceiling_beyond_the_whole_calls_time_is_not_trusted():
    """A profile that finds more time outside the Triton kernels than the verifier timed for the
    whole call bounds nothing: the ceiling is dropped and the row says why."""
    import bench_inductor_kernelbench as ikb

    kept = ikb._trusted_ceiling({"not_triton_us": 900.0, "not_triton_share": 0.6, "eager_ceiling": 1.9}, 1000.0)
    assert kept["eager_ceiling"] == 1.9 and "ceiling_note" not in kept
    dropped = ikb._trusted_ceiling({"not_triton_us": 2168.7, "not_triton_share": 0.65, "eager_ceiling": 0.82}, 1515.7)
    assert "eager_ceiling" not in dropped and dropped["not_triton_us"] == 2168.7
    assert "2169 µs outside the Triton kernels, more than the 1516 µs" in dropped["ceiling_note"]
