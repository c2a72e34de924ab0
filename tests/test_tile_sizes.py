"""Sizes chosen from what the kernels do (``xeforge_core.sizes``, ``worker.tiles``): loop trips
read from a kernel's source, dry launches, and the derived size from probed launches. The
probed launches here are computed from a model of each kernel (no worker runs), so every rule
is checked in milliseconds; ``test_verify_tiles.py`` runs the whole path on planted faults."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

from xeforge_core.problem import problem_from_source
from xeforge_core.problem.scaling import size_values, variant_with_sizes
from xeforge_core.sizes import choose_sizes, coverage_of, plan_probe, whole_gaps
from xeforge_core.worker.capture import LaunchRecorder
from xeforge_core.worker.tiles import helper_loops, kernel_sources, launch_facts, loop_trips

LOOPS = '''
@triton.jit
def k(x, N, K, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nk = tl.cdiv(K, BLOCK)
    for i in tl.range(0, nk):
        pass
    for j in range(pid, N, 4):
        pass
    for q in range((K + BLOCK - 1) // BLOCK):
        for r in range(0, q):
            pass
    for s in range(0, K, BLOCK):
        pass
    K = K * 2
    for t in range(0, K, BLOCK):
        pass
'''


def test_loop_trips_are_read_from_the_bounds_the_launch_decides():
    trips = loop_trips(LOOPS, 10, {"N": 10, "K": 100, "BLOCK": 32})
    # the program-id loop and the loop over an outer loop's variable are left out; a bound
    # computed first (nk) or written as (K + BLOCK - 1) // BLOCK is read; K rewritten halfway
    # counts from there on
    assert trips == [{"line": 15, "trips": 4, "step": 32, "extent": 100, "partial": True},
                     {"line": 19, "trips": 4, "step": 32, "extent": 100, "partial": True},
                     {"line": 22, "trips": 4, "step": 32, "extent": 100, "partial": True},
                     {"line": 25, "trips": 7, "step": 32, "extent": 200, "partial": True}]
    got = loop_trips(LOOPS, 1, {"N": 10, "K": 128, "BLOCK": 32})
    assert [(t["line"], t["trips"], t["partial"]) for t in got] == [(6, 4, False), (10, 4, False), (13, 4, False),
                                                                  (16, 8, False)]
    # a counted while loop is read like a range, from its counter's last value before it in its
    # block (a cdiv bound, a <= test, one nested in a for loop); one that may break is left out
    whiles = LOOPS.replace("    K = K * 2\n", """    t = 0
    while t < nk:
        t += 1
    for u in range(pid, N):
        v = 0
        while v <= K:
            v += BLOCK
    w = 0
    while w < K:
        w += 1
        if w > N:
            break
    K = K * 2
""")
    got = [(t["line"], t["trips"], t["step"], t["extent"], t["partial"]) for t in loop_trips(whiles, 1, {"N": 10, "K": 100, "BLOCK": 32})]
    assert got[3:] == [(16, 4, 32, 100, True), (20, 4, 32, 101, True), (28, 7, 32, 200, True)]
    # a counter moved after its start (c += 3, a branch, an earlier loop over it) has no one start
    for moved in ("    t = 0\n    t += 3\n", "    t = 0\n    if K > N:\n        t = 3\n",
                  "    t = 0\n    while t < N:\n        t += BLOCK\n", "    t = 3\n    t, u = 0, 0\n"):
        src = "@triton.jit\ndef k(x, N, K, BLOCK: tl.constexpr):\n" + moved + "    while t < K:\n        t += 1\n"
        assert [lp["extent"] for lp in loop_trips(src, 1, {"N": 10, "K": 100, "BLOCK": 32})] in ([], [10]), moved
    # a bound the kernel also writes inside a loop is left out
    assert loop_trips(LOOPS.replace("        pass\n    for q", "        K += 1\n    for q"), 1,
                      {"N": 10, "K": 128, "BLOCK": 32}) == []


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for _start in range(0, n, BLOCK):
        pass
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_a_dry_launch_is_recorded_with_its_sizes_and_tiles_and_not_run():
    recorder = LaunchRecorder()
    recorder.install()
    try:
        x, y = torch.ones(100), torch.zeros(100)
        recorder.dry = True
        _copy_kernel[(triton.cdiv(100, 32),)](x, y, 100, 32)  # the tile given by position
        assert torch.count_nonzero(y) == 0
        recorder.dry = False
        _copy_kernel[(triton.cdiv(100, 32),)](x, y, 100, BLOCK=32)
        assert torch.equal(x, y)
    finally:
        recorder.uninstall()
    dry, real = recorder.launches
    assert dry.scalars == {"n": 100} and dry.constants == {"BLOCK": 32} and dry.grid == (4, 1, 1)
    (fact,) = launch_facts([dry], kernel_sources([_copy_kernel]))
    assert fact["kernel"] == "_copy_kernel" and fact["grid"] == [4, 1, 1]
    assert fact["tiles"] == {"BLOCK": 32} and fact["axis_tiles"] == {"0": "BLOCK"}
    (loop,) = fact["loops"]
    assert loop["trips"] == 4 and loop["partial"] is True and loop["step"] == 32
    assert real.constants == {"BLOCK": 32}


GEMM_SPEC = '''
inputs:
  A: {shape: [M, K], dtype: float32}
  B: {shape: [K, N], dtype: float32}
ci:
  - params: [A, B]
    dims: {M: 40, K: 64, N: 48}
    flop: "2*M*N*K"
'''
GEMM_SRC = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"


def _gemm_facts(sizes: dict[str, int], *, bm: int = 64, bn: int = 64, bk: int = 32,
                head: int | None = None) -> list[dict[str, Any]]:
    """What a tiled GEMM launches at ``sizes``: cdiv(M, bm) x cdiv(N, bn) programs, a loop over K
    in steps of bk (and, with ``head``, the constexpr HEAD = K, a tile as wide as a size)."""
    m, k, n = sizes["M"], sizes["K"], sizes["N"]
    constants = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, **({"HEAD": k} if head else {})}
    return [{"kernel": "mm", "occurrence": 0, "grid": [math.ceil(m / bm), math.ceil(n / bn), 1],
             "scalars": {"M": m, "N": n, "K": k, "stride_am": k}, "constants": constants,
             "tiles": {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, **({"HEAD": k} if head else {})},
             "axis_tiles": {"0": "BLOCK_M", "1": "BLOCK_N"},
             "loops": [{"line": 12, "trips": math.ceil(k / bk), "step": bk, "extent": k, "partial": k % bk != 0}]}]


def _evidence(problem, probe, facts_at, *, errors: dict[str, str] | None = None) -> dict[str, Any]:
    """The sizes job's evidence for ``probe``, the candidate's launches given by ``facts_at``."""
    records = []
    for point in probe.points:
        if errors and point.name in errors:
            records.append({"point": point.name, "module": "reference", "error": errors[point.name]})
        records.append({"point": point.name, "module": "candidate", "config": None,
                        "facts": facts_at(size_values(problem, point))})
    return {"probes": records, "configs": {}}


def test_tiles_are_the_constexprs_a_kernel_tiles_with():
    from xeforge_core.worker.tiles import tile_roles

    src = (Path(__file__).parents[1] / "sample_kernels" / "12_conv2d_im2col.py").read_text()
    start = src.index("def conv_gemm_kernel")
    tiles, axes = tile_roles(src[start:src.index("\ndef ", start + 10)])
    assert tiles == {"BLOCK_M", "BLOCK_N", "BLOCK_K"} and axes == {0: "BLOCK_M", 1: "BLOCK_N"}
    # a kernel with one program per output element and a window loop has no tile: KSIZE bounds a
    # loop, STRIDE scales an index
    src = (Path(__file__).parents[1] / "sample_kernels" / "11_maxpool2d.py").read_text()
    start = src.index("def maxpool2d_kernel")
    assert tile_roles(src[start:src.index("\ndef ", start + 10)]) == (set(), {})
    # a tile named by an alias of a constexpr size is that size too: it must stay a power of two
    alias = ("def row_sum(x_ptr, out_ptr, N: tl.constexpr):\n    WIDTH: tl.constexpr = N\n"
             "    offs = tl.arange(0, WIDTH)\n    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs)))\n")
    assert tile_roles(alias)[0] == {"WIDTH", "N"}
    # so is a size passed to a helper that tiles with it
    helper = "def load_row(ptr, WIDTH: tl.constexpr):\n    return tl.load(ptr + tl.arange(0, WIDTH))\n"
    caller = "def row_sum(x_ptr, out_ptr, N: tl.constexpr):\n    tl.store(out_ptr, tl.sum(load_row(x_ptr, N)))\n"
    assert tile_roles(caller, {"load_row": helper})[0] == {"N"} and tile_roles(caller)[0] == set()
    # a block a program id is multiplied by tiles that axis though a loop, not a tl.arange, spans
    # it (lightllm's embedding, whose BLOCK_DMODEL of the same value was named instead); a
    # constexpr size is a row's offset, not a tile
    looped = ("def emb(out, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_NN: tl.constexpr, N: tl.constexpr):\n"
              "    start = tl.program_id(0) * BLOCK_N\n    row = tl.program_id(1) * N\n"
              "    for s in range(0, BLOCK_N, BLOCK_NN):\n"
              "        tl.store(out + row + start + s + tl.arange(0, BLOCK_NN)[:, None] + tl.arange(0, BLOCK_D)[None, :], 0)\n")
    assert tile_roles(looped)[1] == {0: "BLOCK_N"}


def test_every_size_is_made_odd_and_set_where_each_axis_has_three_programs_and_the_loop_two_trips():
    problem = problem_from_source(GEMM_SRC, name="mm", spec_text=GEMM_SPEC)
    ci = problem.spec.variants["ci"]
    probe = plan_probe(problem, ci, device_type="cpu")
    assert probe is not None and probe.checked == {"M": 40, "K": 64, "N": 48}
    # each size alone made ragged (odd; from 8 up 3 or 5 modulo 8, so no last tile is 1 wide),
    # smaller (down to 3) and larger (up to 16x), every value ragged
    assert probe.odd == {"M": "ci-probe-M-43", "K": "ci-probe-K-67", "N": "ci-probe-N-51"}
    assert sorted(v for s, v in probe.moves.values() if s == "K") == [5, 11, 19, 35, 67, 131, 195, 259, 515, 1027]
    choice = choose_sizes(problem, probe, _evidence(problem, probe, _gemm_facts), device_type="cpu")
    tiles = choice.variant
    assert tiles is not None and tiles.name == "ci-tiles"
    # M and N grow to three 64-wide programs, then N to four (a 3 x 3 grid hides swapped program
    # ids); K, which alone drives the loop, shrinks to two trips (161, 33 and 193 when the probe's
    # values were only odd: each left one element in its last tile)
    assert tiles.dims == {"M": 163, "K": 35, "N": 195}, tiles.dims
    at = _gemm_facts(tiles.dims)[0]
    assert at["grid"][:2] == [3, 4] and at["loops"][0]["trips"] == 2 and at["loops"][0]["partial"]
    assert "4 programs on axis 1 of mm, not the 3 of axis 0 (M), so swapped program ids show" in tiles.derived
    assert "M=163: 3 programs on axis 0 of mm (1 at M=40)" in tiles.derived
    assert "K=35: 2 trips on the loop at line 12 of mm (2 at K=64)" in tiles.derived
    assert "BLOCK_K=32" in tiles.derived
    coverage, gaps = coverage_of(choice, _gemm_facts(tiles.dims))
    assert gaps == [] and "axis 1: 4 programs of BLOCK_N=64 over N=195, the last 3 wide" in coverage[0]
    assert "loop at line 12: 2 trips of 32 over 35, the last partial" in coverage[0]


def test_whole_gaps_name_each_axis_and_loop_still_on_a_partial_tile_and_nothing_on_whole_ones():
    dims = {"mm/0/0": ["M"], "mm/0/1": ["N"]}
    assert whole_gaps(_gemm_facts({"M": 128, "K": 64, "N": 192}), dims) == []
    gaps = whole_gaps(_gemm_facts({"M": 128, "K": 65, "N": 193}), dims)
    assert gaps == ["at whole tiles axis 1 of mm still ends on a partial tile "
                    "(of BLOCK_N=64 over N=193, the last 1 wide)",
                    "at whole tiles the loop at line 12 of mm still ends on a partial tile (65 over steps of 32)"]


def test_a_size_the_kernel_takes_as_a_constexpr_or_the_problem_refuses_odd_keeps_its_value():
    problem = problem_from_source(GEMM_SRC, name="mm", spec_text=GEMM_SPEC)
    probe = plan_probe(problem, problem.spec.variants["ci"], device_type="cpu")
    # HEAD = K is a tile extent: K stays 64 (a power of two), though it drives the loop; a constexpr
    # the kernel does not tile with (a mask bound) would not pin it
    choice = choose_sizes(problem, probe, _evidence(problem, probe, lambda s: _gemm_facts(s, head=True)),
                          device_type="cpu")
    assert choice.variant.dims["K"] == 64 and "takes it as the constexpr HEAD" in choice.reasons["K"]
    def bound_only(sizes):
        facts = _gemm_facts(sizes, head=True)
        del facts[0]["tiles"]["HEAD"]
        return facts
    choice = choose_sizes(problem, probe, _evidence(problem, probe, bound_only), device_type="cpu")
    assert choice.variant.dims["K"] % 2 == 1 and "HEAD" not in choice.reasons.get("K", "")
    # the reference refuses an odd N: N stays 48, and the axis it drives is grown no further
    errors = {"ci-probe-N-51": "AssertionError: N must be even"}
    choice = choose_sizes(problem, probe, _evidence(problem, probe, _gemm_facts, errors=errors), device_type="cpu")
    assert choice.variant.dims["N"] == 48 and "N must be even" in choice.reasons["N"]
    coverage, gaps = coverage_of(choice, _gemm_facts(choice.variant.dims))
    # said, not hidden: the N tail is not exercised, and axis 1 has one program
    assert gaps == ["axis 1 of mm ran 1 program of BLOCK_N=64: no size the verifier may move, within its budget, "
                    "gave it 3", "mm: N=48 is a multiple of 16"]


def test_aims_no_probed_size_reaches_and_tiles_that_divide_a_size_are_named():
    problem = problem_from_source(GEMM_SRC, name="mm", spec_text=GEMM_SPEC)
    probe = plan_probe(problem, problem.spec.variants["ci"], device_type="cpu")
    # 512-wide tiles on axis 0: M=641 (16x) gives 2 programs, the most any probed size gives
    choice = choose_sizes(problem, probe, _evidence(problem, probe, lambda s: _gemm_facts(s, bm=512)),
                          device_type="cpu")
    assert "axis 0 of mm reaches 2 programs at most at the sizes probed (aim: 3)" in choice.gaps
    assert choice.variant.dims["M"] == 643  # the best it can do (641, moved up to a ragged last tile)
    # at a size the kernel's launches do not match the aims: named, with the tile dividing M
    coverage, gaps = coverage_of(choice, _gemm_facts({"M": 128, "K": 64, "N": 48}, bm=512))
    assert "mm: M=128 is a multiple of 128" in gaps
    assert any(g.startswith("axis 1 of mm ran 1 program (aim: at least 3)") for g in gaps), gaps


def test_a_size_too_large_for_the_budget_is_not_grown(monkeypatch):
    import xeforge_core.sizes as sizes

    monkeypatch.setitem(sizes.BUDGET_ELEMENTS, "cpu", 5600)  # M x K: 163 x 35 = 5705 is over
    problem = problem_from_source(GEMM_SRC, name="mm", spec_text=GEMM_SPEC)
    probe = plan_probe(problem, problem.spec.variants["ci"], device_type="cpu")
    choice = choose_sizes(problem, probe, _evidence(problem, probe, _gemm_facts), device_type="cpu")
    assert choice.variant.dims == {"M": 43, "K": 35, "N": 147}  # M grew most (4x): it gives way
    assert sizes._fits(problem, choice.variant, "cpu")
    assert any(g.startswith("M=163 (3 programs on axis 0 of mm") and g.endswith("is over the size budget")
               for g in choice.gaps), choice.gaps


def test_kernelbench_sizes_are_constants_and_tuple_elements():
    src = '''
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x.cumsum(1)
batch_size = 16
input_shape = (64, 32)
def get_inputs():
    return [torch.randn(batch_size, *input_shape)]
def get_init_inputs():
    return []
'''
    problem = problem_from_source(src, name="scan")
    module = problem.correctness_variants()[0]
    assert size_values(problem, module) == {"batch_size": 16, "input_shape[0]": 64, "input_shape[1]": 32}
    odd = variant_with_sizes(problem, module, {"input_shape[1]": 33, "batch_size": 17}, "odd", "why")
    assert odd.overrides == {"batch_size": 17, "input_shape": (64, 33)} and odd.derived == "why"


AUTOTUNED = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 4096})], key=["n"])
@triton.jit
def scale_kernel(x_ptr, b_ptr, y_ptr, n, dim, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + tl.load(b_ptr + offs % dim, mask=mask),
             mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, self.bias, y, n, x.shape[-1])
        return y
'''


def test_every_autotune_config_is_probed_and_its_tiles_reached(tmp_path):
    """The sizes job, run as the verifier runs it, on an autotuned candidate: each config's launches
    are probed on their own, and the derived size gives the 4096-wide config three programs too."""
    import json
    import os
    import subprocess
    import sys

    from xeforge_core.problem import load_problem

    root = Path(__file__).resolve().parents[1]
    problem = load_problem(root / "tests" / "fixtures" / "tiles" / "scale.py")
    base = problem.correctness_variants()[0]
    probe = plan_probe(problem, base, device_type="cpu")
    job = {"role": "sizes", "device": "cpu", "job_dir": str(tmp_path),
           "module": {"source": AUTOTUNED, "filename": "candidate.py", "class_name": "ModelNew", "label": "candidate"},
           "baseline": problem.kernel.to_data(), "reference": problem.reference.to_data(),
           "inputs": problem.inputs.to_data(), "spec": None, "baseline_is_reference": True,
           "size_points": probe.point_data(), "validity_points": probe.validity, "options": {}}
    (tmp_path / "job.json").write_text(json.dumps(job))
    env = dict(os.environ, PYTHONPATH=str(root), TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "xeforge_core.worker", str(tmp_path)], env=env, cwd=str(root),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    (step,) = [s for s in result["steps"] if s["name"] == "sizes"]
    evidence = step["evidence"]
    assert evidence["configs"] == {"candidate": ["scale_kernel[BLOCK=256, num_warps=4, num_stages=3]",
                                                "scale_kernel[BLOCK=4096, num_warps=4, num_stages=3]"]}
    at_base = {r["config"]: r["facts"][0]["grid"][0] for r in evidence["probes"]
               if r["point"] == "module" and r["module"] == "candidate"}
    assert at_base == {None: 16, "scale_kernel[BLOCK=4096, num_warps=4, num_stages=3]": 1}  # 4096 elements in 256- or 4096-wide tiles
    assert any(r["module"] == "reference" and "facts" in r for r in evidence["probes"])  # it ran there
    choice = choose_sizes(problem, probe, evidence, device_type="cpu")
    sizes = choice.variant.overrides
    assert sizes["batch_size"] % 2 and sizes["dim"] % 2
    assert math.ceil(sizes["batch_size"] * sizes["dim"] / 4096) >= 3, sizes
    assert "(candidate, config" not in choice.variant.derived  # said plainly
    assert "3 programs on axis 0 of scale_kernel" in choice.variant.derived or \
        "4 programs on axis 0 of scale_kernel" in choice.variant.derived, choice.variant.derived


def test_the_workbench_and_the_cli_report_name_the_sizes_checked():
    from streamlit.testing.v1 import AppTest

    from xeforge_core.commands.verify import render_report
    from xeforge_core.verdict import CheckedSize, Verdict, VerdictKind

    verdict = Verdict(kind=VerdictKind.WRONG_ANSWER, reason="wrong answer on variant module-tiles", sizes=[
        CheckedSize("module", {"K": 128}, "the published sizes"),
        CheckedSize("module-tiles", {"K": 65}, "sizes no tile hides a bug behind: every size odd",
                    ["k: grid 3x1x1; loop at line 9: 2 trips of 64 over 65, the last partial"],
                    ["axis 1 of k ran 1 program"])])
    text = render_report(verdict)
    assert "sizes checked\n  module (K=128): the published sizes\n  module-tiles (K=65): sizes no tile" in text
    assert "    k: grid 3x1x1; loop at line 9" in text and "    missed: axis 1 of k ran 1 program" in text

    def page(data):
        from xeforge_core.ui.render import verdict_panel
        from xeforge_core.verdict import Verdict

        verdict_panel(Verdict.from_dict(data))

    at = AppTest.from_function(page, args=(verdict.to_dict(),)).run(timeout=60)
    assert not at.exception
    assert any(m.value == "**Sizes checked**" for m in at.markdown)
    (table,) = [d.value for d in at.dataframe if "why" in d.value.columns]
    assert list(table["variant"]) == ["module", "module-tiles"] and table["sizes"][1] == "K=65"


def test_a_size_stops_growing_in_the_probe_only_when_nothing_short_of_its_aim_can_move():
    from xeforge_core.worker.sizes import settled

    def fact(grid, scalars, trips, extent):
        return [{"kernel": "k", "occurrence": 0, "grid": grid, "scalars": scalars, "axis_tiles": {"0": "BM", "1": "BN"},
                 "loops": [{"line": 5, "trips": trips, "extent": extent}]}]

    base = fact([2, 1, 1], {"P": 98, "OC": 5}, 1, 27)
    # OC 5 -> 11 leaves the 32-wide axis 1 at one program: it may still grow at OC = 41 or 81
    assert not settled(base, fact([2, 1, 1], {"P": 98, "OC": 11}, 1, 27))
    # a loop short of two trips whose extent this size changes may still get there
    assert not settled(base, fact([3, 3, 1], {"P": 98, "OC": 11}, 1, 40))
    # every tiled axis and loop there, an untiled axis (2) that never moves: nothing more to see
    assert settled(base, fact([3, 3, 1], {"P": 98, "OC": 81}, 2, 27))
    assert not settled(base, fact([3, 3, 2], {"P": 98, "OC": 81}, 2, 27))  # an untiled axis that moved


def test_an_axis_whose_program_id_the_kernel_ignores_keeps_the_probe_growing():
    """A kernel that reads no program id on axis 0 (``pid = 0``: every program computes the first
    tile) is right while the host launches one program there; the probe must grow the size
    until the host's grid gives that axis several programs."""
    from xeforge_core.worker.sizes import settled
    from xeforge_core.worker.tiles import axes_read

    assert axes_read("def k(x):\n    pid = 0\n    r = tl.program_id(1)\n") == {1}
    assert axes_read("def k(x):\n    p = tl.program_id(axis=0).to(tl.int64)\n") == {0}
    assert axes_read("def k(:\n") is None

    def fact(grid, m, read):
        return [{"kernel": "k", "occurrence": 0, "grid": grid, "scalars": {"M": m}, "axis_tiles": {},
                 "constants": {"BLOCK_M": 64}, "axes_read": read, "loops": []}]

    base = fact([1, 1, 1], 16, [])
    assert not settled(base, fact([1, 1, 1], 33, []))  # axis 0 unread: its count may still grow
    assert not settled(fact([1, 1, 1], 16, [1]), fact([1, 1, 1], 33, [1]))  # axis 0 below a read axis 1
    # a 1-D kernel that reads axis 0 (untiled, one program a row that did not move) never waits on axes 1, 2
    assert settled(fact([5, 1, 1], 5, [0]), fact([5, 1, 1], 9, [0]))
    assert settled(base, fact([1, 1, 1], 16, []))  # nothing moved

    def loop(n):  # one program that loops over n in tiles of 1024: its grid is fixed
        return [{"kernel": "k", "occurrence": 0, "grid": [1, 1, 1], "scalars": {"n": n}, "axis_tiles": {},
                 "constants": {"BLOCK": 1024}, "axes_read": [], "loops": [{"line": 3, "trips": n // 1024 + 1,
                                                                           "extent": n}]}]

    assert not settled(loop(1000), loop(2000))  # still inside three tiles: it might yet grow
    assert settled(loop(1000), loop(4000))  # past three tiles of every constant, still one program


def test_two_grid_axes_of_one_count_get_different_counts():
    """Swapped program ids hide on a square tile grid (3 x 3 programs): the size that alone drives
    the second axis moves up to its next probed value with a count of its own; the cost grows by
    that axis only. A pinned size, an axis a size drives together with another (the problem's
    own square), and sizes that drive no grid axis (a 3-D pool's dims in one flattened axis) stay."""
    from xeforge_core.sizes import Aim, _distinct_axes, _Series

    def axis(index, by, kernel="k", config=None):
        return _Series(Aim("candidate", config, kernel, 0, "grid", index, 3), 3, by)

    n_counts = {257: 3, 513: 5, 1025: 9}
    m_counts = {257: 3, 385: 4, 513: 5}
    sizes, reasons = {"N": 257, "M": 257, "K": 257}, {}
    moved = _distinct_axes(sizes, {}, [axis(0, {"N": n_counts}), axis(1, {"M": m_counts})], reasons)
    assert sizes == {"N": 257, "M": 385, "K": 257} and moved == {"M": 257}
    assert reasons["M"] == ["4 programs on axis 1 of k, not the 3 of axis 0 (N), so swapped program ids show"]

    sizes = {"N": 257, "M": 257}
    assert _distinct_axes(sizes, {"M": "pinned"}, [axis(0, {"N": n_counts}), axis(1, {"M": m_counts})], {}) == {}
    assert _distinct_axes(sizes, {}, [axis(0, {"N": n_counts}), axis(1, {"N": n_counts})], {}) == {}  # one size
    assert _distinct_axes(sizes, {}, [axis(0, {"N": n_counts, "M": m_counts})], {}) == {}  # one axis, shared
    other_config = [axis(0, {"N": n_counts}), axis(1, {"M": m_counts}, config="k[BLOCK=64]")]
    assert _distinct_axes(sizes, {}, other_config, {}) == {} and sizes == {"N": 257, "M": 257}


_TILED_SUM = """
def tiled_sum(ptr, n, BLOCK):
    acc = 0.0
    for start in range(0, n, BLOCK):
        acc += start
    return acc
"""

_ROW_SUM = """
def row_sum(ptr, width, BLOCK):
    return tiled_sum(ptr, width, BLOCK)
"""


def test_helper_loops_follow_every_call_and_helpers_of_helpers():
    """A helper's loop counts as the kernel's: bound from each call's arguments (two calls walking
    two sizes add their trips to the one loop, so either size moves it) and through a helper's
    own helper."""
    helpers = {"tiled_sum": (_TILED_SUM, 10), "row_sum": (_ROW_SUM, 20)}
    twice = "def k(x, y, n_cols, m, BLOCK):\n    a = tiled_sum(x, n_cols, BLOCK)\n    b = tiled_sum(y, m, BLOCK)\n"
    (loop,) = helper_loops(twice, helpers, {"n_cols": 300, "m": 200, "BLOCK": 128})
    assert loop["line"] == 13 and loop["trips"] == 3 + 2 and loop["partial"] is True
    (same,) = helper_loops(twice, helpers, {"n_cols": 300, "m": 256, "BLOCK": 128})
    assert same["trips"] == 3 + 2  # m moved from 200 to 256: still 2 trips, the sum says so
    halved = "def k(x, n, BLOCK):\n    n = n // 2\n    a = tiled_sum(x, n, BLOCK)\n"
    assert helper_loops(halved, helpers, {"n": 300, "BLOCK": 128}) == []  # n is not the launch's n there
    deep = "def k(x, n_cols, BLOCK):\n    s = row_sum(x, n_cols, BLOCK)\n"
    (loop,) = helper_loops(deep, helpers, {"n_cols": 384, "BLOCK": 128})
    assert loop["trips"] == 3 and loop["partial"] is False


def test_a_grid_rounded_up_to_a_multiple_of_programs_counts_the_tile_it_covers():
    """``cdiv(n_rows, 4) * 4`` programs of one row each: tile 1 (the extra programs return), not
    the launch's widest tile; a plain ``cdiv(n, 128)`` is 128; a count no rounding of a power of
    two explains has no tile."""
    from xeforge_core.sizes import Aim, _counted_tile, _Series

    aim = Aim("candidate", None, "k", 0, "grid", 0, 3)

    def series(count) -> _Series:
        values = (5, 9, 17, 33, 37, 65, 129)
        return _Series(aim, count(37), {"n": {v: count(v) for v in values}})

    assert _counted_tile(series(lambda n: -(-n // 4) * 4)) == 1
    assert _counted_tile(series(lambda n: -(-n // 128))) == 128
    assert _counted_tile(series(lambda n: n + 7)) is None
