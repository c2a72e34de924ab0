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
