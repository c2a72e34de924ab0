"""The autotuning codemod on every kind of kernel (elementwise, row reductions, scans, pooling,
GEMM): the kind picks the target's search space, blocks are tuned only where any power of two
keeps the kernel correct, and the candidates verify in Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from xeforge_core.codemods.autotune import add_autotune
from xeforge_core.codemods.autotune_kinds import classify, prune_for_registers
from xeforge_core.codemods.autotune_prune import prune_static, smem_bytes
from xeforge_core.codemods.common import kernel_defs
from xeforge_core.codemods.spaces import space_configs
from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify

FIXTURES = Path(__file__).parent / "fixtures" / "autotune_kinds"
FAST = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, use_cache=False,
                     measure_performance=False)


def _kinds(name: str) -> dict[str, str]:
    module = cst.parse_module((FIXTURES / name).read_text())
    return {fn.name.value: classify(fn).kind for fn in kernel_defs(module)}


def _tuned(name: str) -> str:
    res = add_autotune((FIXTURES / name).read_text(), target="cuda", arch="hopper")
    assert res.applicable, res.reason
    return res.source


def test_kinds_come_from_the_kernel_body() -> None:
    assert _kinds("elementwise_guard.py") == {"scale_shift_kernel": "elementwise"}
    assert _kinds("row_loop_two_kernels.py") == {"row_max_kernel": "row", "row_expsum_kernel": "row"}
    assert _kinds("row_derived_norm.py") == {"rms_rows_kernel": "row"}
    assert _kinds("scan_rows.py") == {"cumsum_rows_kernel": "scan"}
    assert _kinds("pool_window.py") == {"avg_pool_kernel": "elementwise"}
    gemm = cst.parse_module((Path(__file__).parent / "fixtures" / "codemods" / "matmul_fixed_tiles.py").read_text())
    assert classify(kernel_defs(gemm)[0]).kind == "gemm"


def test_elementwise_block_counted_by_the_grid_is_tuned() -> None:
    out = _tuned("elementwise_guard.py")
    assert 'triton.Config({"BLOCK_SIZE": 256})' in out and '"BLOCK_SIZE": 4096' in out
    assert 'lambda META: (triton.cdiv(n_elements, META["BLOCK_SIZE"]),)' in out
    assert "if start >= n_elements:" in out and "x = x.contiguous()" in out  # guard and host kept
    assert "BLOCK_SIZE=BLOCK_SIZE" not in out


def test_the_launchs_own_tile_is_tried_at_the_warp_counts_it_fills() -> None:
    """A pooling kernel's 32-wide tile at Triton's default 4 warps gives each element to four
    threads: the configs try it at one warp (32 threads, one element each), never at counts with
    more threads than elements, and keep the space's wider tiles after it."""
    out = _tuned("pool_window.py")
    configs = [line.strip() for line in out.splitlines() if line.strip().startswith("triton.Config(")]
    assert configs[:2] == ['triton.Config({"BLOCK_L": 32}),', 'triton.Config({"BLOCK_L": 32}, num_warps=1),']
    assert not any('"BLOCK_L": 32}, num_warps=' in c and "num_warps=1" not in c for c in configs), configs
    wide = add_autotune((FIXTURES / "elementwise_guard.py").read_text(), target="cuda", arch="hopper").source
    # a 256-wide tile at 4 warps already gives each thread elements: it is tried at 1, 2 and 8
    # warps after the space's tiles, so a cap on the configs keeps those first
    assert all(f'triton.Config({{"BLOCK_SIZE": 256}}, num_warps={w})' in wide for w in (1, 2, 8))
    assert 'triton.Config({"BLOCK_SIZE": 256}, num_warps=16)' not in wide
    assert wide.index('"BLOCK_SIZE": 1024}, num_warps=4') < wide.index('triton.Config({"BLOCK_SIZE": 256}, num_warps=1)')


def test_sizes_passed_as_constexpr_key_the_autotune_cache() -> None:
    res = add_autotune((FIXTURES / "constexpr_sizes.py").read_text(), target="cuda", arch="hopper")
    assert res.applicable, res.reason
    assert 'key=["C", "L"]' in res.source
    assert any("its sizes are tl.constexpr (C, L)" in n for n in res.notes), res.notes


def test_loop_step_blocks_of_several_kernels_are_tuned_without_touching_the_grid() -> None:
    out = _tuned("row_loop_two_kernels.py")
    assert out.count("@triton.autotune(") == 2 and out.count("row_max_kernel[(n_rows,)]") == 1
    assert "BLOCK=64" not in out and "num_warps=2)" not in out.split("def forward")[1]
    assert 'triton.Config({"BLOCK": 64, "LOOP_STAGES": 1}, num_warps=2)' in out  # the second launch's own config


def test_blocks_that_cover_a_row_stay_as_the_launch_derives_them() -> None:
    derived = _tuned("row_derived_norm.py")
    assert "BLOCK_SIZE=BLOCK_SIZE" in derived and '"BLOCK_SIZE"' not in derived
    assert "num_warps=num_warps" not in derived.split("def forward")[1]
    scan = add_autotune((FIXTURES / "scan_rows.py").read_text(), target="cuda", arch="hopper")
    assert "BLOCK=128" in scan.source and any("cover a whole row" in n for n in scan.notes)


def test_unmasked_block_access_keeps_the_authors_block() -> None:
    src = (FIXTURES / "elementwise_guard.py").read_text().replace("mask=mask, other=0.0", "")
    res = add_autotune(src, target="cuda", arch="hopper")
    assert res.applicable and '"BLOCK_SIZE": 4096' not in res.source
    assert any("not every tl.load/tl.store is masked" in n for n in res.notes)


def test_a_grid_block_and_a_loop_step_are_tuned_together_through_a_grid_function() -> None:
    """A mat-vec's rows a program (counted by a ``def grid(meta)`` launch grid) and its K chunk (a
    loop step) take the tile_2d space's pairs: small row blocks are what fill a GPU when M is short
    (on the H200 a published mat-vec of 2048 rows in blocks of 128 ran 16 programs at 0.14x of eager)."""
    out = _tuned("matvec_grid_function.py")
    assert 'triton.Config({"BLOCK_M": 64, "BLOCK_K": 128, "LOOP_STAGES": 1}, num_warps=4)' in out  # the launch's own
    assert '"BLOCK_M": 8, "BLOCK_K": 512' in out and '"BLOCK_M": 4, "BLOCK_K": 1024' in out
    assert 'return (triton.cdiv(M, meta["BLOCK_M"]),)' in out  # the grid function already follows the config
    assert "BLOCK_M=BLOCK_M" not in out and "BLOCK_M = 64" not in out
    res = add_autotune((FIXTURES / "matvec_grid_function.py").read_text(), target="cuda", arch="hopper")
    assert any("tile_2d space" in n for n in res.notes)
    # a grid function that does not read the block it counts is not trusted to follow a config
    fixed = (FIXTURES / "matvec_grid_function.py").read_text().replace('meta["BLOCK_M"]', "64")
    res = add_autotune(fixed, target="cuda", arch="hopper")
    assert '"BLOCK_M": 8' not in res.source


def test_a_streaming_loop_is_pipelined_by_a_tuned_loop_depth() -> None:
    """A loop whose loads feed no tl.dot is pipelined only by its own ``tl.range(num_stages=)``
    (the kernel's num_stages "only pipelines loads that feed into dot operations", Triton's
    tl.range documentation): the configs tune that depth, 1 (the loop as written) beside 3 at the
    same tile; a GEMM's dot loop and a target whose space gives no depth are left as they are."""
    out = _tuned("matvec_grid_function.py")
    assert "for k0 in tl.range(0, K, BLOCK_K, num_stages=LOOP_STAGES):" in out
    assert "BLOCK_K: tl.constexpr, LOOP_STAGES: tl.constexpr):" in out
    assert '"BLOCK_M": 4, "BLOCK_K": 1024, "LOOP_STAGES": 3}' in out
    assert '"BLOCK_M": 4, "BLOCK_K": 1024, "LOOP_STAGES": 1}' in out
    xe = add_autotune((FIXTURES / "matvec_grid_function.py").read_text(), target="xpu", arch="xe2")
    assert xe.applicable and "LOOP_STAGES" not in xe.source and "for k0 in range(0, K, BLOCK_K):" in xe.source
    gemm = add_autotune((Path(__file__).parent / "fixtures" / "codemods" / "matmul_fixed_tiles.py").read_text(),
                        target="cuda", arch="hopper")
    assert gemm.applicable and "LOOP_STAGES" not in gemm.source
    # a loop that stores through the pointer it loads through keeps its plain range: a load issued
    # stages ahead could read memory before an earlier trip's store to it
    in_place = _tuned("row_softmax_in_place.py")
    assert in_place.count("num_stages=LOOP_STAGES") == 2 and in_place.count("in range(0, N, BLOCK):") == 1
    # a parameter with a default stays after the new one, which has none (a tuned meta-parameter)
    with_default = (FIXTURES / "matvec_grid_function.py").read_text().replace(
        "BLOCK_K: tl.constexpr):", "BLOCK_K: tl.constexpr, SCALE: tl.constexpr = 1.0):")
    res = add_autotune(with_default, target="cuda", arch="hopper")
    assert "LOOP_STAGES: tl.constexpr, SCALE: tl.constexpr = 1.0):" in res.source


def test_a_gemm_launched_through_a_grid_function_is_autotuned() -> None:
    src = (Path(__file__).parent / "fixtures" / "codemods" / "matmul_fixed_tiles.py").read_text()
    src = src.replace("    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n",
                      "    def grid(META):\n        return (triton.cdiv(M, META['BLOCK_M']), triton.cdiv(N, META['BLOCK_N']))\n\n")
    assert "def grid(META)" in src
    res = add_autotune(src, target="cuda", arch="hopper")
    assert res.applicable, res.reason
    assert "@triton.autotune(" in res.source and "def grid(META)" in res.source
    assert "BLOCK_M=BLOCK_M" not in res.source


def test_configs_are_pruned_by_the_device_limits() -> None:
    # GEMM: operand tiles over the stages at 4 bytes; the H200 allows 232448 B a block
    gemm, _ = space_configs("cuda", "hopper", "gemm")
    kept, dropped = prune_static([{"kwargs": {}, "num_warps": 4, "num_stages": 2}, *gemm], None, "cuda", max_configs=99)
    assert all(smem_bytes(c) <= 232448 for c in kept[1:])
    assert any("294912 B" in d for d in dropped)  # 128x256x64 over 3 stages of fp32
    # non-GEMM: registers a thread and warps a work-group
    shape = classify(kernel_defs(cst.parse_module((FIXTURES / "elementwise_guard.py").read_text()))[0])
    cfgs = [{"kwargs": {"BLOCK_SIZE": 65536}, "num_warps": 4}, {"kwargs": {"BLOCK_SIZE": 1024}, "num_warps": 64}]
    kept, dropped = prune_for_registers(cfgs, shape, lanes=32, max_warps=32)
    assert kept == [] and "spill" in dropped[0] and "64 warps" in dropped[1]


def test_a_block_the_body_fixes_is_part_of_every_tile() -> None:
    """An Inductor persistent reduction fixes its row in the body (``R0_BLOCK: tl.constexpr =
    256``) and the grid counts XBLOCK rows: the row space's block values count a tile's elements,
    so XBLOCK takes them divided by the row, and no config makes a tile past Triton's 2**20
    elements (a new user's fixed-shape softmax got XBLOCK up to 8192: "numel (2097152) exceeds
    triton maximum tensor numel", every config refused)."""
    res = add_autotune((FIXTURES / "persistent_row_fixed.py").read_text(), target="cuda", arch="hopper")
    decorator = res.source.split("@triton.jit")[0]
    blocks = [int(v) for v in __import__("re").findall(r'"XBLOCK": (\d+)', decorator)]
    assert len(blocks) > 2 and max(blocks) * 256 <= 1 << 20 and max(blocks) < 1024, blocks
    shape = classify(kernel_defs(cst.parse_module((FIXTURES / "persistent_row_fixed.py").read_text()))[0])
    kept, dropped = prune_for_registers([{"kwargs": {"XBLOCK": 8192}, "num_warps": 32}], shape, lanes=32,
                                        max_warps=32, fixed={"R0_BLOCK": 256})
    assert kept == [] and "2097152 elements with R0_BLOCK=256 > the 1048576" in dropped[0]


@pytest.mark.parametrize("name", ["elementwise_guard.py", "row_loop_two_kernels.py", "row_derived_norm.py",
                                  "scan_rows.py", "pool_window.py", "row_softmax_in_place.py",
                                  "matvec_grid_function.py", "constexpr_sizes.py", "persistent_row_fixed.py"])
def test_autotuned_candidates_verify_in_the_interpreter(name: str) -> None:
    problem = load_problem(FIXTURES / name)
    verdict = verify(problem, _tuned(name), device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()


def test_a_kernel_that_rewrites_its_buffer_is_restored_between_benchmarked_configs() -> None:
    """The autotuner benchmarks every config on the same arguments: an in-place softmax would
    start the second config from the first one's output (on the H200 the attention sample's
    autotuned softmax was a wrong answer, 2026-12-04); restore_value names the buffer, and the
    interpreter's first call runs every config as a GPU's benchmarking does."""
    decorator = _tuned("row_softmax_in_place.py").split("@triton.jit")[0]
    assert 'restore_value=["s_ptr"]' in decorator and "reset_to_zero" not in decorator
    # without it, the first call's benchmarking (every config once, in the interpreter as on a GPU)
    # leaves the buffer rewritten: a wrong answer on the first call
    unsafe = _tuned("row_softmax_in_place.py").replace('    restore_value=["s_ptr"],\n', "")
    verdict = verify(load_problem(FIXTURES / "row_softmax_in_place.py"), unsafe, device="cpu", options=FAST)
    assert verdict.kind is VerdictKind.WRONG_ANSWER and "first call" in verdict.reason, verdict.reason


def test_an_output_the_wrapper_did_not_allocate_is_restored_between_benchmarked_configs() -> None:
    """A kernel with separate input and output pointers, launched with ``y = x`` by a wrapper
    that writes in place (the published NCHW RMSNorm's autotuned candidate was a wrong answer on
    the H200, 2026-12-04): the output may be the input, so it is restored; an output the wrapper
    allocates itself is not."""
    source = (FIXTURES / "elementwise_out_or_in_place.py").read_text()
    tuned = _tuned("elementwise_out_or_in_place.py")
    assert 'restore_value=["y_ptr"]' in tuned.split("@triton.jit")[0]
    unsafe = tuned.replace('    restore_value=["y_ptr"],\n', "")
    problem = load_problem(FIXTURES / "elementwise_out_or_in_place.py")
    verdict = verify(problem, unsafe, device="cpu", options=FAST)
    assert verdict.kind is VerdictKind.WRONG_ANSWER, verdict.reason
    assert verify(problem, tuned, device="cpu", options=FAST).passed
    fresh = add_autotune(source.replace("y = x if out is None else out", "y = torch.empty_like(x)"),
                         target="cuda", arch="hopper")
    assert fresh.applicable and "restore_value" not in fresh.source
    shared = add_autotune(source.replace("affine_kernel[grid](x, y,", "affine_kernel[grid](y, y,")
                          .replace("y = x if out is None else out", "y = torch.empty_like(x)"),
                          target="cuda", arch="hopper")
    assert 'restore_value=["y_ptr"]' in shared.source
    # each note says why: the launch passes the fresh y for x_ptr too, or a y the wrapper did not allocate
    assert any("the launch passes y for it and for x_ptr" in n for n in shared.notes), shared.notes
    in_place = add_autotune(source, target="cuda", arch="hopper")
    assert any("a buffer the wrapper did not allocate" in n for n in in_place.notes), in_place.notes


def _extended(name: str, source: str | None = None):
    from xeforge_core.codemods.autotune_extend import extend_autotune

    return extend_autotune(source or (FIXTURES / name).read_text(), target="cuda", arch="hopper")


def test_an_autotuned_kernel_keeps_its_configs_and_gets_its_kinds() -> None:
    res = _extended("autotuned_elementwise.py")
    assert res.applicable, res.reason
    configs = res.source.split("configs=[")[1].split("],")[0]
    # the author's own first and in order, then the elementwise space's blocks and warps
    assert configs.index('"BLOCK_SIZE": 256') < configs.index('"BLOCK_SIZE": 512') < configs.index('"BLOCK_SIZE": 4096')
    assert "BLOCK_SIZE and warps" in res.notes[0]
    # a block that must cover the row (derived at the launch): warps only
    row = _extended("autotuned_row_once.py")
    assert row.applicable and "num_warps/num_stages only" in row.notes[0]
    assert "triton.Config({}, num_warps=8" in row.source and '"BLOCK"' not in row.source


def test_an_in_place_kernel_gets_restore_value_with_more_configs_unless_its_tuner_has_hooks() -> None:
    src = (FIXTURES / "autotuned_elementwise.py").read_text().replace(
        "tl.store(out_ptr + offsets", "tl.store(x_ptr + offsets")
    res = _extended("autotuned_elementwise.py", src)
    assert res.changed and 'restore_value=["x_ptr"]' in res.source.split("@triton.jit")[0], res.reason
    hooked = src.replace("key=[", "pre_hook=lambda args: None, key=[")
    assert "pre_hook=" in hooked
    res = _extended("autotuned_elementwise.py", hooked)
    assert not res.changed and "its own pre_hook/post_hook" in res.reason


def test_the_autotuning_stage_extends_an_autotuned_kernel() -> None:
    from xeforge_core.codemods.registry import CodemodSettings
    from xeforge_core.engines.rules import stage_codemod

    out = stage_codemod("autotuning")((FIXTURES / "autotuned_elementwise.py").read_text(),
                                      CodemodSettings(target="cuda", arch="hopper"))
    assert out.changed and out.codemod == "autotune_extend"


@pytest.mark.parametrize("name", ["autotuned_elementwise.py", "autotuned_row_once.py"])
def test_extended_candidates_verify_in_the_interpreter(name: str) -> None:
    problem = load_problem(FIXTURES / name)
    verdict = verify(problem, _extended(name).source, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()


def _configs_elsewhere(form: str) -> str:
    """The elementwise fixture with its configs in a module-level function or name, as
    KernelAgent's and KernelBench's published GEMMs often keep them."""
    src = (FIXTURES / "autotuned_elementwise.py").read_text()
    listed = src.split("configs=")[1].split("],")[0] + "]"
    head = ("def _configs():\n    # the author's configs\n    return " + listed + "\n\n\n" if form == "function"
            else "_CONFIGS = " + listed + "\n\n\n")
    src = src.replace("configs=" + listed, "configs=" + ("_configs()" if form == "function" else "_CONFIGS"))
    return src.replace("@triton.autotune(", head + "@triton.autotune(", 1)


@pytest.mark.parametrize("form, call", [("function", "_configs() + ["), ("name", "_CONFIGS + [")])
def test_configs_given_by_a_function_or_a_name_are_extended(form: str, call: str) -> None:
    src = _configs_elsewhere(form)
    res = _extended("autotuned_elementwise.py", src)
    assert res.applicable, res.reason
    assert call in res.source and "BLOCK_SIZE and warps" in res.notes[0]
    assert '"BLOCK_SIZE": 4096' in res.source.split(call)[1]  # the space's configs follow the author's
    if form == "function":
        problem = load_problem(FIXTURES / "autotuned_elementwise.py")
        verdict = verify(problem, res.source, device="cpu", options=FAST)
        assert verdict.passed, verdict.feedback()
    # a function that computes its list is not read
    computed = src.replace("    return [", "    return list([", 1).replace("]\n\n\n@triton", "])\n\n\n@triton", 1)
    if form == "function":
        assert not _extended("autotuned_elementwise.py", computed).changed


def test_atomic_targets_are_zeroed_only_where_they_start_from_zeros() -> None:
    """An output the programs add into atomically, which the wrapper starts from the bias: Triton's
    autotuner zeroes a ``reset_to_zero`` buffer before every benchmarked config and before the
    tuned config's own run on the call that tunes, so that call would lose the bias. It is
    restored instead; a fresh ``torch.zeros`` buffer no earlier launch wrote is still zeroed."""
    tuned = _tuned("atomic_sum_bias.py")
    assert 'restore_value=["out_ptr"]' in tuned.split("@triton.jit")[0] and "reset_to_zero" not in tuned
    problem = load_problem(FIXTURES / "atomic_sum_bias.py")
    assert verify(problem, tuned, device="cpu", options=FAST).passed
    zeroed = tuned.replace('restore_value=["out_ptr"]', 'reset_to_zero=["out_ptr"]')
    verdict = verify(problem, zeroed, device="cpu", options=FAST)
    assert verdict.kind is VerdictKind.WRONG_ANSWER and "first call" in verdict.reason, verdict.reason
    from_zeros = (FIXTURES / "atomic_sum_bias.py").read_text().replace(
        "out = self.bias.detach().clone()", "out = torch.zeros(n_rows, device=x.device)")
    res = add_autotune(from_zeros, target="cuda", arch="hopper")
    assert 'reset_to_zero=["out_ptr"]' in res.source and "restore_value" not in res.source


def test_an_autotuned_atomic_kernel_without_hooks_gets_restore_value_with_its_new_configs() -> None:
    """A published autotuned kernel adding into its output atomically, without ``reset_to_zero`` or
    ``restore_value``: its own autotuner sums every config into the output on the call that tunes
    (the verifier's first-call check refuses it). Extending its configs adds ``restore_value``, and
    the candidate verifies."""
    from xeforge_core.codemods.autotune_extend import extend_autotune

    source = (FIXTURES / "autotuned_atomic_sum.py").read_text()
    problem = load_problem(FIXTURES / "autotuned_atomic_sum.py")
    published = verify(problem, source, device="cpu", options=FAST)
    assert published.kind is VerdictKind.WRONG_ANSWER and "first call" in published.reason, published.reason
    res = extend_autotune(source, target="cuda", arch="hopper")
    assert res.changed and 'restore_value=["out_ptr"])' in res.source, res.reason
    assert any("restore_value=['out_ptr'] added" in n for n in res.notes), res.notes
    assert verify(problem, res.source, device="cpu", options=FAST).passed


def test_warps_written_as_a_meta_parameter_become_the_configs_launch_option() -> None:
    """``triton.Config({"BLOCK_SIZE": bs, "num_warps": nw})`` launches 4 warps whatever ``nw``
    is (``Config.all_kwargs()`` lays the config's own ``num_warps`` over the dict): the stage moves
    the value to the keyword Triton reads, then extends the comprehension's configs (expanded
    from its literal value lists) with the kind's, and the candidate verifies."""
    from xeforge_core.codemods.autotune_options import move_launch_options
    from xeforge_core.codemods.registry import CodemodSettings
    from xeforge_core.engines.rules import stage_codemod

    source = (FIXTURES / "autotuned_comprehension.py").read_text()
    out = stage_codemod("autotuning")(source, CodemodSettings(target="cuda", arch="hopper"))
    assert out.changed, out.reason
    assert 'triton.Config({"BLOCK_SIZE": bs}, num_stages=1, num_warps=nw)' in out.source
    assert "for nw in (4, 8)\n    ] + [" in out.source and '"BLOCK_SIZE": 4096' in out.source
    assert "num_warps moved" in out.notes[0] and "added after its own 4" in out.notes[1], out.notes
    verdict = verify(load_problem(FIXTURES / "autotuned_comprehension.py"), out.source, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()
    # a launch given **cfg.kwargs does launch the dict's warps: such a module is left as written
    reads = source.replace("softsign_kernel[grid](x, out, n_elements)",
                           "softsign_kernel[grid](x, out, n_elements)\n        _ = softsign_kernel.configs[0].kwargs")
    assert "the module reads a config's kwargs" in move_launch_options(reads).reason
    # a kernel whose parameter has that name takes it as a meta-parameter
    param = source.replace("BLOCK_SIZE: tl.constexpr):", "BLOCK_SIZE: tl.constexpr, num_warps: tl.constexpr):")
    assert "has a parameter named num_warps" in move_launch_options(param).reason


def test_only_comprehensions_over_literal_values_are_read_as_config_lists() -> None:
    from xeforge_core.codemods.config_lists import literal_configs

    def read(expr: str, head: str = "") -> list[str] | None:
        module = cst.parse_module(head + "x = " + expr + "\n")
        got = literal_configs(module, module.body[-1].body[0].value)
        return None if got is None else [cst.Module([]).code_for_node(e.value) for e in got.elements]

    assert read("[Config({'B': b}, num_warps=w) for b in range(5, 7) for w in (4,)]") == [
        "Config({'B': 5}, num_warps=4)", "Config({'B': 6}, num_warps=4)"]
    assert read("[Config({'B': b, 'S': s}) for b, s in S]", "S = [(1, 2), (3, 4)]\n") == [
        "Config({'B': 1, 'S': 2})", "Config({'B': 3, 'S': 4})"]
    assert read("[Config({'B': b}) for b in [1, 2] if b > 1]") is None  # a condition: not evaluated
    assert read("[Config({'B': b}) for b in sizes()]") is None  # a call: not evaluated
    assert read("[Config({'B': b}) for b in range(100000)]") is None  # past MAX_EXPANDED
    # an empty list filled by top-level loops that only append is the comprehension they spell
    loops = "for b in (1, 2):\n    for w in [4]:\n        x.append(Config({'B': b}, num_warps=w))\n"
    module = cst.parse_module("x = []\n" + loops)
    got = literal_configs(module, cst.Name("x"))
    assert got is not None and [cst.Module([]).code_for_node(e.value) for e in got.elements] == [
        "Config({'B': 1}, num_warps=4)", "Config({'B': 2}, num_warps=4)"]
    for spoilt in ("x.append(Config({'B': 9}))\n", "x += [Config({'B': 9})]\n", "for b in (3,):\n    if b:\n        x.append(Config({'B': b}))\n"):
        assert literal_configs(cst.parse_module("x = []\n" + loops + spoilt), cst.Name("x")) is None, spoilt


def test_a_launch_with_unpacked_strides_is_autotuned_where_its_meta_parameters_are_named() -> None:
    """``k[grid](x, out, n, *x.stride(), *out.stride(), 0.5, BLOCK=128)``: which parameter each
    positional argument after a ``*args`` fills depends on how many values it unpacks, so none is
    bound (``0.5`` is not ``stride_c``); the block named at the launch is tuned, and one the star
    may pass is refused with the reason."""
    from xeforge_core.codemods.common import bind_launch_args, star_filled

    source = (FIXTURES / "row_star_strides.py").read_text()
    fn = kernel_defs(cst.parse_module(source))[0]
    pnames = [p.name.value for p in fn.params.params]
    call = cst.parse_expression("row_scale_kernel[(r,)](x, out, n, *x.stride(), *out.stride(), 0.5, BLOCK=128)")
    bound, _, unmatched = bind_launch_args(pnames, call)  # type: ignore[arg-type]
    assert set(bound) == {"x_ptr", "out_ptr", "n_cols", "BLOCK"} and len(unmatched) == 3
    assert star_filled(pnames, call) == {"stride_r", "stride_c", "ostride_r", "ostride_c", "scale"}  # type: ignore[arg-type]
    tuned = _tuned("row_star_strides.py")
    assert "*x.stride(), *out.stride(), 0.5)" in tuned and "BLOCK=128" not in tuned
    verdict = verify(load_problem(FIXTURES / "row_star_strides.py"), tuned, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()
    # a block the star may pass keeps the launch's value, even where the kernel gives it a default
    positional = source.replace("0.5, BLOCK=128,", "0.5, 128,").replace("BLOCK: tl.constexpr", "BLOCK: tl.constexpr = 64")
    res = add_autotune(positional, target="cuda", arch="hopper")
    assert res.changed and "0.5, 128)" in res.source and '"BLOCK"' not in res.source
    assert any("BLOCK may be passed through the launch's *args" in n for n in res.notes), res.notes
    # a loop-depth parameter inserted before one with a default would take what the star's
    # followers fill: the loops keep their plain range
    tail = source.replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, EPS: tl.constexpr = 0.0):").replace(
        "0.5, BLOCK=128,", "0.5, 128, 0.0,")
    res = add_autotune(tail, target="cuda", arch="hopper")
    assert res.changed and "LOOP_STAGES" not in res.source and "0.5, 128, 0.0)" in res.source
    verdict = verify(load_problem(FIXTURES / "row_star_strides.py"), res.source, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()


def test_inductor_positional_masks_count_as_masks_and_its_helpers_are_not_kernels() -> None:
    """TorchInductor writes ``tl.load(in_ptr0 + x0, xmask)``: the mask is the load's second
    positional argument (the store's third). Its first versions' blocks are tuned, the
    @triton.jit helpers its kernels call get no "not launched" note, and the tuned first version
    verifies in the interpreter."""
    from xeforge_core.inductor.first_version import first_version_from_capture

    inductor = Path(__file__).parent / "fixtures" / "inductor"
    problem = load_problem(inductor / "gelu_scale.py")
    first = first_version_from_capture(problem, str(inductor / "gelu_scale.capture.json"))
    assert "tl.load(in_ptr0 + x0, xmask)" in first.code and "tl.store(out_ptr0 + x0, tmp15, xmask)" in first.code
    res = add_autotune(first.code, target="cuda", arch="hopper")
    assert res.applicable, res.reason
    assert '"XBLOCK": 4096' in res.source and not any("masked" in n for n in res.notes), res.notes
    assert not any("not launched" in n for n in res.notes), res.notes
    verdict = verify(problem, res.source, device="cpu", options=FAST)
    assert verdict.kind is VerdictKind.OK, verdict.reason
    # a positional mask of None masks nothing: the author's block stays
    unmasked = (FIXTURES / "elementwise_guard.py").read_text().replace("mask=mask, other=0.0", "None, 0.0")
    res = add_autotune(unmasked, target="cuda", arch="hopper")
    assert '"BLOCK_SIZE": 4096' not in res.source
    assert any("not every tl.load/tl.store is masked" in n for n in res.notes), res.notes


@pytest.mark.parametrize("kept", ["memory", "session"])
def test_a_kernel_the_current_version_never_launched_is_left_untuned(kept: str, tmp_path: Path) -> None:
    """A first version that carries a GEMM kernel beside the mat-vec one that runs at the
    problem's sizes: the verdict that admitted the current version names the kernels it launched,
    the controller hands them to the engine, and the autotuning stage tunes only those (with the
    reason for the other), in memory as in a git session."""
    from xeforge_core.engines import get_engine
    from xeforge_core.pipeline.controller import MemoryController, SessionController
    from xeforge_core.session import Session
    from xeforge_core.verdict import CompiledKernelInfo, CorrectnessRun, Verdict

    problem = load_problem(FIXTURES / "row_loop_two_kernels.py")
    if kept == "memory":
        controller = MemoryController(problem, target="cuda")
    else:
        controller = SessionController(Session.create(problem, workspace=tmp_path, plan=["dtype_fix", "memory_access", "autotuning"]),
                                       "cpu")
    assert controller.context("autotuning").launched is None  # the baseline: no verdict says
    def checked_at(variant: str) -> Verdict:
        return Verdict(kind=VerdictKind.OK, kernels=[CompiledKernelInfo(name="row_expsum_kernel")],
                       correctness=[CorrectnessRun(variant, 0, "normal", "reference", True, 1e-5, 1e-5)])

    # checked at smaller sizes only: a kernel chosen by size may run at the published one
    smaller = controller.keep("dtype_fix", problem.kernel.source + "\n# smaller\n", verdict=checked_at("module-small"))
    controller.approve(smaller.id)
    assert controller.context("autotuning").launched is None
    rec = controller.keep("memory_access", problem.kernel.source + "\n# the current version\n",
                          verdict=checked_at("module"))
    controller.approve(rec.id)
    context = controller.context("autotuning")
    assert context.launched == ["row_expsum_kernel"]
    out = get_engine("rules").propose("autotuning", context)
    assert out.code != context.current_code, out.rationale
    tuned = {fn.name.value for fn in kernel_defs(cst.parse_module(out.code))
             if any("autotune" in cst.Module([]).code_for_node(d) for d in fn.decorators)}
    assert tuned == {"row_expsum_kernel"}
    assert ("kernel row_max_kernel never launched when the current version was verified "
            "(it launched row_expsum_kernel)") in out.rationale
