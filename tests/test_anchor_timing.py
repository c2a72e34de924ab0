"""benchmarks/anchor_timing.py on the CPU: every anchor goes to one run of the verifier's timing
function with the same settings, identical callables give ratios of 1 with intervals holding 1
on a simulated device with a virtual clock, and the anchors build from a KernelBench pair.
No numbers of real timing are checked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.test_timing_method import SimOps, kernel
from xeforge_core.worker import timing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import anchor_timing  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "formats" / "kernelbench"
NAMES = ["eager", "compiled", "published", "rules", "published_aa"]
OPTIONS = {"warmup_ms": 1, "rep_ms": 30, "settle_ms": 1, "settle_max_ms": 2, "l2_bytes": 50 << 20}


@pytest.fixture
def sim(monkeypatch):
    from tests.test_timing_method import SimClock

    clock = SimClock()
    monkeypatch.setattr(timing, "_perf", clock)
    monkeypatch.setattr(timing, "_monotonic", clock)
    return clock


def test_all_anchors_are_timed_in_one_run_with_the_verifiers_settings(sim):
    ops = SimOps(sim)
    calls = []

    def spy(ops_, callables, options):
        calls.append((list(callables), dict(options)))
        return timing.measure(ops_, callables, options)

    fns = {n: kernel(ops, 40e-6, 5e-6) for n in NAMES}
    out = anchor_timing.time_anchors(ops, fns, OPTIONS, measure=spy)
    assert calls == [(NAMES, OPTIONS)]  # one measurement, all anchors, the options as given
    # the same method, calls per sample, L2 policy and trials for every anchor
    assert len({(a["method"], a["calls_per_sample"], a["l2"], a["trials"]) for a in out["anchors"].values()}) == 1
    assert set(out["ratios"]) == {"rules_vs_published", "rules_vs_eager", "rules_vs_compile", "aa"}
    assert out["trials"] % 120 == 0  # whole cycles of the balanced order of five


def test_identical_anchors_give_ratios_of_one_with_intervals_holding_one(sim):
    """A/A on a deterministic clock: five copies of one 40 µs kernel (events) and of one 3 µs
    kernel (batched, launch-bound) are the same to the last digit, whatever their order."""
    for device_s, method in ((40e-6, "events"), (3e-6, "back_to_back")):
        ops = SimOps(sim)
        out = anchor_timing.time_anchors(ops, {n: kernel(ops, device_s, 5e-6) for n in NAMES}, OPTIONS)
        assert out["method"] == method
        for key, r in out["ratios"].items():
            assert r["point"] == pytest.approx(1.0) and r["low"] <= 1.0 <= r["high"], key
        launch_bound = {a["launch_bound"] for a in out["anchors"].values()}
        assert launch_bound == {device_s * 1e6 < anchor_timing.LAUNCH_BOUND_US}


def test_a_faster_rules_result_shows_in_every_ratio_but_the_aa(sim):
    ops = SimOps(sim)
    fns = {n: kernel(ops, 80e-6, 5e-6) for n in NAMES}
    fns["rules"] = kernel(ops, 40e-6, 5e-6)
    ratios = anchor_timing.time_anchors(ops, fns, OPTIONS)["ratios"]
    for key in ("rules_vs_published", "rules_vs_eager", "rules_vs_compile"):
        assert ratios[key]["point"] == pytest.approx(2.0) and ratios[key]["low"] > 1.0
    assert ratios["aa"]["point"] == pytest.approx(1.0)
    with pytest.raises(ValueError):
        anchor_timing.time_anchors(ops, {}, OPTIONS)


def test_anchors_build_from_a_kernelbench_pair_and_agree(tmp_path, monkeypatch):
    """The problem's Model, the published ModelNew, the rules result and the A/A copy, from the
    same inputs and init inputs; a size constant overridden reaches the inputs."""
    import torch

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    problem = (FIXTURES / "residual_relu.py").read_text()
    solution = (FIXTURES / "residual_relu_new.py").read_text()
    job = {"device": "cpu", "inputs": problem, "overrides": {"batch_size": 4},
           "modules": {"eager": {"source": problem, "class_name": "Model"},
                       "published": {"source": solution, "class_name": "ModelNew"},
                       "rules": {"source": solution, "class_name": "ModelNew"}}}
    # PyTorch's default lets cuDNN convolve float32 in TF32; the anchors run at the precision the
    # verifier times eager and the candidate at (full float32), or torch.compile's convolutions
    # would be timed at TF32 beside a full-float32 eager
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    callables, info = anchor_timing.build_anchors(job, tmp_path)
    assert not torch.backends.cudnn.allow_tf32 and torch.get_float32_matmul_precision() == "highest"
    assert list(callables) == ["eager", "published", "rules", "published_aa"] and "compile_s" not in info
    outs = {n: fn() for n, fn in callables.items()}
    assert outs["eager"].shape == (4, 1000)
    for n in ("published", "rules", "published_aa"):
        torch.testing.assert_close(outs[n], outs["eager"])



def test_a_kernelagent_kernel_function_is_an_anchor_bound_to_the_problems_model(tmp_path, monkeypatch):
    """A published ``kernel_function`` is called with the inputs and the parameters of the
    problem's Model built under the same seed, as the verifier binds it (the H200 run said
    "kernel_function() missing 1 required positional argument" before)."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_optimize_corpus import anchor_job

    from xeforge_core.devices import detect_device
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ka = Path(__file__).parent / "fixtures" / "formats" / "kernelagent"
    problem = load_problem(ka / "kernel.py", reference_path=ka / "problem.py")
    job = anchor_job(problem, problem.kernel.source, {}, detect_device("cpu"), VerifyOptions())
    assert job["modules"]["published"]["entry"] == job["modules"]["rules"]["entry"] == "function"
    callables, _ = anchor_timing.build_anchors({**job, "compile_mode": None}, tmp_path)
    outs = {n: fn() for n, fn in callables.items()}
    for n in ("published", "rules", "published_aa"):
        torch.testing.assert_close(outs[n], outs["eager"], rtol=1e-4, atol=1e-4)

def test_the_corpus_rows_take_the_anchors_and_say_launch_bound(sim):
    """bench_optimize_corpus fills a row from one anchor run: all medians and ratios from it,
    a launch-bound size said so, an A/A interval without 1 flagged, 1.00 by identity kept."""
    import bench_optimize_corpus as corpus

    ops = SimOps(sim)
    fns = {n: kernel(ops, 3e-6, 5e-6) for n in NAMES}
    got = anchor_timing.time_anchors(ops, fns, OPTIONS)
    got["compile_s"] = 12.5
    row = corpus.Row("p", "bench", rules_vs_published=1.0)
    corpus.apply_anchors(row, got)
    assert row.rules_vs_published == 1.0 and row.interval.startswith("measured 1.000x")
    assert (row.rules_us, row.compile_us, row.eager_us) == (got["anchors"]["rules"]["median_us"],
                                                            got["anchors"]["compiled"]["median_us"],
                                                            got["anchors"]["eager"]["median_us"])
    assert row.compile_s == 12.5 and row.aa_ratio == pytest.approx(1.0) and row.launch_bound
    assert "launch-bound" in row.note and "excludes 1" not in row.note
    got["ratios"]["aa"] = {"point": 1.12, "low": 1.08, "high": 1.16}
    flagged = corpus.Row("p", "bench")
    corpus.apply_anchors(flagged, got)
    assert "A/A 1.120x [1.08, 1.16] excludes 1" in flagged.note
    failed = corpus.Row("p", "bench")
    corpus.apply_anchors(failed, {"note": "anchors not timed: exit 1: OOM"})
    assert failed.rules_us is None and failed.note == "anchors not timed: exit 1: OOM"
    text = corpus.summarize([row], __import__("collections").Counter(),
                            {"device": "sim", "date": "-", "versions": "-", "min_eager_us": 100.0})
    assert "launch-bound at the size reported (left out below): 1" in text and "(launch-bound)" in text
