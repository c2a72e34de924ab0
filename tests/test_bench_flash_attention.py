"""The Flash Attention benchmark's own logic, without timing anything: the noise a shape's A/A
timings give, the "slower than the step before beyond noise" flag, the sweep grid (every entry
fits the device's shared memory, the step's own search space first) and the summary."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from xeforge_core.samples import flash_attention_trajectory

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_flash_attention", ROOT / "benchmarks" / "bench_flash_attention.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_flash_attention"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_noise_is_the_larger_of_the_aa_deviation_and_the_round_spread(bench):
    ratio, noise = bench.noise_of([100.0, 101.0, 100.5], [102.0, 102.0, 102.0])
    assert ratio == pytest.approx(102.0 / 100.5)
    assert noise == pytest.approx(102.0 / 100.5 - 1)
    ratio, noise = bench.noise_of([100.0, 104.0, 100.0], [100.0, 100.0, 100.0])
    assert ratio == 1.0 and noise == pytest.approx(0.04)


def _module(step):
    spec = importlib.util.spec_from_file_location(f"sweep_{step.index}", step.path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("which", ["split", "causal"])
def test_the_sweep_grid_fits_and_starts_with_the_steps_own_space(bench, which):
    steps = flash_attention_trajectory("cuda")
    step = steps[-1] if which == "causal" else next(s for s in steps if s.path.name == "09_head_dim_split.py")
    mod = _module(step)
    for block_d in (64, 128):
        grid = bench.sweep_grid(mod, block_d, step.causal, 232448)
        own = [bench.config_key(c) for c in mod.SEARCH_SPACE[block_d]]
        assert grid[:len(own)] == own and len(set(grid)) == len(grid)
        # the candidates: 64 rows over one warpgroup or 128 over two, 64 or 128 keys, 2 or 3 stages
        others = set(grid) - set(own)
        assert others and all(bm in (64, 128) and bn in (64, 128) and stages in (2, 3) and warps == bm // 16
                              for bm, bn, warps, stages in others)
        assert len(grid) == (6 if step.causal else 8)
        for bm, bn, warps, stages in grid:
            assert mod.smem_bytes(mod._config(bm, bn, warps, stages), block_d) <= 232448
            assert not step.causal or bm % bn == 0
        # a smaller device (its own limit, e.g. an A100's 163 KB) adds only what fits it
        small = bench.sweep_grid(mod, block_d, step.causal, 166912)
        assert small[:len(own)] == own and set(small) <= set(grid)
        assert all(mod.smem_bytes(mod._config(*g), block_d) <= 166912 for g in small[len(own):])
        assert len(small) < len(grid) or block_d == 64 or step.causal
    assert bench.block_d_class(mod, 96) == 128 and bench.block_d_class(mod, 48) == 64


def test_the_summary_flags_slower_steps_and_shows_verdicts(bench):
    res = bench.Results(started="2026-12-03 10:00", device={"type": "cuda", "name": "NVIDIA H200"},
                        versions={"triton": "3.6.0"}, target="cuda",
                        settings={"rounds": 5, "warmup": 25, "rep": 60, "variants": ["ci", "bench-gpu"]},
                        steps=[{"index": 0, "title": "Baseline"}, {"index": 1, "title": "Fused"}],
                        verification=[{"step": 0, "kind": "ok", "variants": ["ci", "bench-gpu"], "runs": 2},
                                      {"step": 1, "kind": "wrong_answer", "reason": "wrong at ci", "variants": ["ci"]}])
    res.rows = [bench.Row(step=0, title="Baseline", stage="baseline", causal=False, variant="bench-gpu",
                          dims="B=1 A=32 S=2048 D=128", us=100.0, vs_sdpa=0.5, noise=0.01),
                bench.Row(step=1, title="Fused", stage="fusion", causal=False, variant="bench-gpu",
                          dims="B=1 A=32 S=2048 D=128", us=110.0, vs_sdpa=0.45, vs_previous=100 / 110, noise=0.01,
                          slower=True)]
    text = bench.summary_markdown(res)
    assert "wrong_answer: wrong at ci" in text and "**slower**" in text
    assert "- step 1 on bench-gpu: 0.909x (noise on that shape 1.0%" in text
    assert "misses 0.95x" in text
    table = bench.short_table(res)
    assert "wrong_answer" in table and "0.45x!" in table


def test_the_compile_check_counts_exponentials_under_a_dot_in_flight():
    """check_fa_hopper_compile's static count: ex2 after a wgmma commit and before a wait of 0
    pending groups overlaps the dot (step 7's pipelined loop); after the wait it does not (step 6)."""
    spec = importlib.util.spec_from_file_location("check_fa_hopper_compile",
                                                  ROOT / "benchmarks" / "check_fa_hopper_compile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    serial = "\n".join(["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;",
                        "ex2.approx.ftz.f32 %r1, %r2;", "wgmma.commit_group.sync.aligned;"])
    pipelined = "\n".join(["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;",
                           "wgmma.commit_group.sync.aligned;", "\tex2.approx.ftz.f32 %r1, %r2;",
                           "\tex2.approx.ftz.f32 %r3, %r4;", "wgmma.wait_group.sync.aligned 1;",
                           "ex2.approx.ftz.f32 %r5, %r6;", "wgmma.wait_group.sync.aligned 0;",
                           "ex2.approx.ftz.f32 %r7, %r8;"])
    assert mod.ex2_under_wgmma(serial) == 0 and mod.ex2_under_wgmma(pipelined) == 3


def test_the_loop_form_steps_sweep_keys_rebuild_its_configs(bench):
    """Step 10's configs carry the loop form and the lazy rescale: the sweep's keys are the full
    ``_config`` arguments, so a warp-specialized entry is never swept as a pipelined one."""
    step = next(s for s in flash_attention_trajectory("cuda") if s.path.name == "10_loop_form.py")
    mod = _module(step)
    forms = set()
    for block_d in (64, 128):
        own = [bench.config_key(c) for c in mod.SEARCH_SPACE[block_d]]
        forms |= {k[4] for k in own}
        assert all(bench.config_key(mod._config(*k)) == k and len(k) == 8 for k in own)
        grid = bench.sweep_grid(mod, block_d, False, 232448)
        assert grid[:len(own)] == own and len(set(grid)) == len(grid)
        # warp specialization only where the H200's sweep found it right and fastest: 128, two stages
        assert all(k[4] not in (mod.WARP_SPECIALIZED, mod.PERSISTENT_WS) or (block_d, k[3]) == (128, 2) for k in own)
        for key in grid:
            assert mod.smem_bytes(mod._config(*key), block_d) <= 232448
    # the loop form is chosen like the tile
    assert forms == {mod.PLAIN, mod.PIPELINED, mod.WARP_SPECIALIZED, mod.PERSISTENT_WS}
    with pytest.raises(ValueError, match="LAZY"):
        mod._config(64, 64, 4, 3, mod.PIPELINED, True)
