"""The worker's autotune registry on a GPU: checking one config at a time must not make the
autotuner forget what it tuned (every later call would re-benchmark every config)."""

from __future__ import annotations

import triton
import triton.language as tl

from xeforge_core.worker.autotune import AutotuneRegistry


def _tuner():
    @triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    return copy_kernel


def test_gpu_tuner_keeps_its_tuned_keys_across_single_config_checks() -> None:
    registry = AutotuneRegistry(interpreter=False)
    tuner = _tuner()
    registry.add(tuner)
    tuner.cache[(1000, "torch.float32")] = tuner.configs[1]  # what a first call at n=1000 tuned
    with registry.select(0, 0):
        assert [c.kwargs["BLOCK"] for c in tuner.configs] == [64]
    assert [c.kwargs["BLOCK"] for c in tuner.configs] == [64, 128]
    assert tuner.cache == {(1000, "torch.float32"): registry.entries[0].configs[1]}


def test_interpreter_tuner_runs_one_config_after_its_first_call() -> None:
    registry = AutotuneRegistry(interpreter=True)
    tuner = _tuner()
    registry.add(tuner)
    assert len(tuner.configs) == 2  # the first call runs every config, as a GPU's benchmark does
    registry.entries[0].tuned = True
    registry.narrow_always()
    assert [c.kwargs["BLOCK"] for c in tuner.configs] == [64]
    assert tuner.cache == {}


def test_a_config_the_device_cannot_compile_is_skipped_as_the_autotuner_skips_it(tmp_path, monkeypatch):
    """A published autotune list with a config past the device's shared memory (a KernelAgent GEMM
    asked 270336 bytes on the H200's 232448) is correct: Triton's autotuner times that config as
    infinitely slow and never runs it. Checking each config alone, the verifier says it skipped it
    instead of calling the kernel a compile error; a kernel whose only config does not fit is one."""
    from dataclasses import replace
    from pathlib import Path

    from xeforge_core.problem import load_problem
    from xeforge_core.verdict import VerdictKind
    from xeforge_core.verify import VerifyOptions, verify

    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    fix = Path(__file__).resolve().parent / "fixtures" / "autotune_skip"
    source = (fix / "solution.py").read_text()
    options = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, grid_coverage=False,
                            tile_sizes=False, timeout_s=240)
    problem = load_problem(fix / "problem.py")
    v = verify(problem, source, device="cpu", options=options, candidate_name="solution.py")
    assert v.kind is VerdictKind.OK, v.reason
    assert any(w.startswith("autotune config twice_kernel[BLOCK=1024") and "OutOfResources" in w
               and "Triton's autotuner skips such a config" in w for w in v.warnings), v.warnings
    only = source.replace('triton.Config({"BLOCK": 256}),\n                          ', "")
    assert only.count("triton.Config(") == 1
    bad = verify(problem, only, device="cpu", options=replace(options, use_cache=False), candidate_name="solution.py")
    assert bad.kind is VerdictKind.COMPILE_ERROR and "does not fit the device" in bad.reason, bad.reason


def test_configs_that_differ_only_in_warps_are_one_check_in_the_interpreter() -> None:
    @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 64}, num_warps=1),
                              triton.Config({"BLOCK": 128}, num_warps=4),
                              triton.Config({"BLOCK": 128}, num_warps=8, num_stages=1)], key=["n"])
    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    registry = AutotuneRegistry(interpreter=True)
    registry.add(copy_kernel)
    assert [registry.same_in_interpreter(0, j) for j in range(4)] == [False, True, False, True]


def test_configs_are_told_apart_by_warps_where_the_kernel_reads_them() -> None:
    """A kernel with a ``num_warps`` parameter gets each config's value in the interpreter (and
    its grid reads it): configs that differ only there compute differently and are each checked."""
    @triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=1)],
                     key=["n"])
    @triton.jit
    def lanes_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, num_warps: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, 32 * num_warps)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    registry = AutotuneRegistry(interpreter=True)
    registry.add(lanes_kernel)
    assert registry.same_in_interpreter(0, 1) is False
