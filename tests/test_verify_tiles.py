"""verify() at the sizes derived from the kernels' tiles, on KernelBench-style problems whose
published sizes are multiples of every tile (``tests/fixtures/tiles``) and whose tiled sizes build
the model (get_init_inputs), so the odd-size copy leaves them as they are: a dropped K-tail
mask, a floor-divided grid and a mean over the tile width all pass without the derived size,
and are each a wrong answer at it, which the verdict names; their correct versions are ok."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.problem import load_problem
from xeforge_core.verdict import VerdictKind
from xeforge_core.verify import VerifyOptions, verify

FIX = Path(__file__).parent / "fixtures" / "tiles"


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    """One cache dir for the module: the reference's outputs at the derived size are computed
    once per problem, the planted copy having the correct one's tiles."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XEFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


def _verify(problem: str, candidate: str, **opts):
    options = VerifyOptions(**{"timeout_s": 120.0, "seeds": 1, "distributions": ["normal"], **opts})
    return verify(load_problem(FIX / f"{problem}.py"), (FIX / f"{candidate}.py").read_text(), device="cpu",
                  options=options, candidate_name=f"{candidate}.py")


def _tiles_entry(verdict):
    return next(s for s in verdict.sizes if s.variant == "module-tiles")


@pytest.mark.parametrize("problem,correct,planted,sizes,aim", [
    # K % 64 == 0 at the published size; at 65 M and N get a third 32-wide program each, then N
    # more (a 3 x 3 grid hides swapped program ids), and K, which drives the loop alone, two trips
    # of 64; each then up to 3 or 5 modulo 8, so no last tile is one element wide (65 -> 67); K,
    # then equal to the batch, up to the next value the probe ran it at (259: five trips), so
    # that a kernel reading one for the other shows
    ("linear", "linear_new", "linear_k_tail", {"batch_size": 67, "in_features": 259, "out_features": 131},
     "loop at line 17: 5 trips of 64 over 259"),
    ("scale", "scale_new", "scale_floor_grid", {"batch_size": 5, "dim": 1027}, "over n=5135, the last 15 wide"),
    # one program per row: three rows are enough
    ("rmsnorm", "rmsnorm_new", "rmsnorm_tile_mean", {"batch_size": 3, "features": 67},
     "BLOCK=128 spans n_cols=67 in one tile"),
    # a counted while loop over a row's tiles: the carry from one tile to the next needs two
    ("cumsum", "cumsum_new", "cumsum_carry_twice", {"batch_size": 3, "length": 35}, "loop at line 14: 2 trips"),
])
def test_a_fault_a_tile_hides_is_a_wrong_answer_at_the_derived_size(problem, correct, planted, sizes, aim):
    ok = _verify(problem, correct)
    assert ok.kind is VerdictKind.OK, ok.reason
    entry = _tiles_entry(ok)
    assert entry.sizes == sizes and entry.gaps == [], entry
    assert any(aim in line for line in entry.coverage), entry.coverage
    assert entry.why.startswith("sizes no tile hides a bug behind: every size odd")
    published = next(s for s in ok.sizes if s.variant == "module")
    assert published.why == "the published sizes"

    wrong = _verify(problem, planted)
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "variant module-tiles" in wrong.reason
    shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
    assert f"[module-tiles is the size derived from the kernels' tiles: {shown}]" in wrong.reason
    # at the published size the fault passes: that is what the derived size is for
    at_published = [r.passed for r in wrong.correctness if r.variant == "module"]
    assert len(at_published) >= 2 and all(at_published)  # the first call, then every run
    # and so it does at every size checked without it (the odd-size copy, launch-grid coverage)
    old = _verify(problem, planted, tile_sizes=False)
    assert old.kind is VerdictKind.OK, old.reason


def test_the_derived_size_leaves_no_last_tile_one_element_wide():
    """Odd sizes made from a power of two (65 from 256 columns in 64-wide tiles) leave one element
    in the last tile of every tile width: a kernel whose last tile is handled by its width, and
    wrong only where it is wider than one element, passed there. The derived size moves each size
    up to 3 or 5 modulo 8 (67: a three-element tail), where it is a wrong answer."""
    ok = _verify("rowsum", "rowsum_new")
    assert ok.kind is VerdictKind.OK, ok.reason
    entry = _tiles_entry(ok)
    assert entry.sizes["cols"] == 67 and entry.gaps == [], entry
    assert any("2 trips of 64 over 67" in line for line in entry.coverage), entry.coverage
    wrong = _verify("rowsum", "rowsum_wide_tail")
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "variant module-tiles" in wrong.reason, wrong.reason
    assert all(r.passed for r in wrong.correctness if r.variant == "module")  # a whole last tile there


def test_a_store_without_its_n_mask_is_refused_at_the_derived_size():
    # past the last column the store writes into the next row (and past the last row into the
    # slack the fixture allocates: a write past memory would corrupt the interpreter's heap)
    verdict = _verify("linear", "linear_n_store")
    assert verdict.kind is VerdictKind.WRONG_ANSWER, verdict.reason
    assert _tiles_entry(verdict).sizes == {"batch_size": 67, "in_features": 259, "out_features": 131}


def test_small_inputs_with_a_large_output_are_checked_smaller_in_the_interpreter():
    """An outer product of two 4096-vectors: inputs small enough to need no reduction, an output
    of 16M elements that 16384 programs write. The interpreter's budget per call, read from the
    probed launches, makes the checked size smaller (N=1024), and says why."""
    v = _verify("outer", "outer_new")
    assert v.kind is VerdictKind.OK, v.reason
    first = v.sizes[0]
    assert first.variant == "module-small" and first.sizes == {"N": 1024}, first
    assert "smaller for Triton's CPU interpreter" in first.why and "16384 programs" in first.why, first.why


def test_a_tail_kernel_wrong_only_at_whole_tiles_is_a_wrong_answer_in_the_interpreter():
    """A spec whose checked size (N=1000) is not a multiple of the kernels' 256-wide tiles, and a
    tail kernel that is wrong only where it is (the whole tiles counted as ``(N - 1) // BLOCK``,
    the tail launched only when ``N % BLOCK``): at the odd sizes it matches; the size at whole
    tiles, N=1024, leaves the last tile unwritten. Nothing is timed here (the timed size finds it
    on a GPU, ``tests/test_timed_size.py``)."""
    timed = Path(__file__).parent / "fixtures" / "timed"
    problem = load_problem(timed / "scale.py")
    options = VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False)
    wrong = verify(problem, (timed / "scale_tail.py").read_text(), device="cpu", options=options,
                   candidate_name="scale_tail.py")
    assert wrong.kind is VerdictKind.WRONG_ANSWER, wrong.reason
    assert "variant ci-whole" in wrong.reason and "[ci-whole is the size at whole tiles of the kernels: N=1024]" \
        in wrong.reason, wrong.reason
    assert all(r.passed for r in wrong.correctness if r.variant in ("ci", "ci-tiles"))
    right = verify(problem, (timed / "scale.py").read_text(), device="cpu", options=options)
    assert right.kind is VerdictKind.OK, right.reason
    entry = next(s for s in right.sizes if s.variant == "ci-whole")
    assert entry.sizes == {"N": 1024} and entry.why.startswith("whole tiles:"), entry


def test_a_class_nested_kernel_and_its_helper_are_read_for_their_tiles_and_loops():
    """trident's layout: the kernel and its helper are static methods named ``forward``, the helper
    reached through a namespace class, its loop walking the row in 128-wide tiles and checking the
    tail only where a heuristic's flag says so. The helper's loop counts as the kernel's (so the
    width is made odd, then a whole number of tiles), the flag is no tile (it does not pin the
    width), and the one-program-per-row axis is tile 1 (the rows are not rounded up)."""
    fix = Path(__file__).parent / "fixtures" / "nested"
    problem = load_problem(fix / "rowsum.py")
    options = VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False)
    right = verify(problem, (fix / "rowsum_nested.py").read_text(), device="cpu", options=options,
                   candidate_name="rowsum_nested.py")
    assert right.kind is VerdictKind.OK, right.reason
    sizes = {s.variant: s.sizes for s in right.sizes}
    assert sizes["module-tiles"]["cols"] % 2 == 1 and sizes["module-whole"] == {"rows": 4, "cols": 384}, sizes
    tiles = next(s for s in right.sizes if s.variant == "module-tiles")
    assert any("loop at line" in c and "of 128 over" in c for c in tiles.coverage), tiles.coverage
    wrong = verify(problem, (fix / "rowsum_nested_whole_fault.py").read_text(), device="cpu", options=options,
                   candidate_name="rowsum_nested_whole_fault.py")
    assert wrong.kind is VerdictKind.WRONG_ANSWER and "variant module-whole" in wrong.reason, wrong.reason


def test_the_whole_tile_size_takes_a_shared_tile_by_the_product_of_its_sizes():
    """Sample 08: a GEMM (64 x 64 tiles, K steps of 32) and a 1024-wide epilogue over the flattened
    M x N output. M and N alone drive the GEMM's grid axes: each a multiple of 64. The epilogue's
    tile they share: each a multiple of the largest power of two not above it (32 and 64), not
    of 1024, so the size stays near the checked one and M x N = 8192 is still 8 whole tiles. K,
    whole at 64 as M is, goes down a tile to 32: sizes equal there are checked apart."""
    root = Path(__file__).resolve().parents[1] / "sample_kernels"
    problem = load_problem(root / "08_gemm_bias_act.py")
    verdict = verify(problem, (root / "08_gemm_bias_act.py").read_text(), device="cpu",
                     options=VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False))
    assert verdict.kind is VerdictKind.OK, verdict.reason
    entry = next(s for s in verdict.sizes if s.variant == "ci-whole")
    assert entry.sizes == {"M": 64, "K": 32, "N": 128}, entry
    assert (entry.sizes["M"] * entry.sizes["N"]) % 1024 == 0
    runs = [r for r in verdict.correctness if r.variant == "ci-whole"]
    assert [(r.seed, r.distribution) for r in runs] == [(0, "normal")]  # one input set: the size is what it adds


def test_a_baseline_refusing_the_odd_sizes_keeps_the_size_at_whole_tiles():
    """The problem reads its input as pairs, so the odd sizes derived from the tiles fail in the
    baseline and are dropped, each named; the size at whole tiles, which it runs, is kept, and
    the tail kernel is wrong there."""
    whole = Path(__file__).parent / "fixtures" / "whole"
    verdict = verify(load_problem(whole / "pairs.py"), (whole / "pairs_tail.py").read_text(), device="cpu",
                     options=VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False), candidate_name="pairs_tail.py")
    assert verdict.kind is VerdictKind.WRONG_ANSWER, verdict.reason
    assert "variant module-whole" in verdict.reason, verdict.reason
    dropped = next(w for w in verdict.warnings if "the baseline fails at" in w)
    assert "(module-tiles)" in dropped and "the non-power-of-two copy" in dropped, dropped


def test_a_shared_tile_takes_what_the_product_lacks_from_its_largest_size():
    """3 rows of 500 under one 1024-wide tile of the flattened count: 3 rows stay (below 16), so
    the rows' width takes all that the product lacks (1024, not the 512 its own power of two
    gives), and the tail kernel is wrong there; the sizes checked name no tile left partial."""
    whole = Path(__file__).parent / "fixtures" / "whole"
    verdict = verify(load_problem(whole / "scale3.py"), (whole / "scale3_tail.py").read_text(), device="cpu",
                     options=VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False), candidate_name="scale3_tail.py")
    assert verdict.kind is VerdictKind.WRONG_ANSWER, verdict.reason
    assert "[module-whole is the size at whole tiles of the kernels: batch_size=3, dim=1024]" in verdict.reason
    entry = next(s for s in verdict.sizes if s.variant == "module-whole")
    assert entry.gaps == [], entry.gaps


def test_a_grid_axis_whose_tile_the_source_hides_takes_its_launchs_widest_tile():
    """Triton's grouped ordering derives tile rows and columns from ``pid`` through groups, so no
    axis tile is named: M and N, which move that axis, are rounded to the launch's widest tile (32)
    anyway, and the host's row-tile count that drops the last tile when 32 divides M is wrong."""
    whole = Path(__file__).parent / "fixtures" / "whole"
    verdict = verify(load_problem(whole / "matmul.py"), (whole / "matmul_grouped_rows.py").read_text(),
                     device="cpu", options=VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False),
                     candidate_name="matmul_grouped_rows.py")
    assert verdict.kind is VerdictKind.WRONG_ANSWER, verdict.reason
    assert "[module-whole is the size at whole tiles of the kernels: M=128, N=96, K=64]" in verdict.reason, \
        verdict.reason


def test_a_baseline_refusing_every_derived_size_drops_each_and_keeps_a_correct_kernel_ok():
    """Rows past 1004 refused too: the baseline fails at the size derived from the tiles, then at
    the odd copies put back, then at the size at whole tiles; each is dropped as it fails, and the
    right kernel is ok at the published size, never the environment's."""
    whole = Path(__file__).parent / "fixtures" / "whole"
    verdict = verify(load_problem(whole / "pairs_capped.py"), (whole / "pairs_masked.py").read_text(), device="cpu",
                     options=VerifyOptions(timeout_s=120.0, seeds=1, use_cache=False), candidate_name="pairs_masked.py")
    assert verdict.kind is VerdictKind.OK, verdict.reason
    dropped = next(w for w in verdict.warnings if "the baseline fails at" in w)
    assert "(module-tiles)" in dropped and "(module-whole)" in dropped, dropped
    assert [s.variant for s in verdict.sizes] == ["module"]


def test_a_size_reduced_below_a_fixed_tile_it_exceeds_when_published_is_grown_past_it():
    """A row kernel reading one fixed tile of 2048 (a new user's "rows are at most 2048 wide") was
    ``ok``: the published 4000 columns were reduced to 1000, inside the tile. A tile no size moves
    that the published size exceeds and the reduced one does not now sets the derived size past
    it, so the tile's end shows; the kernel that walks its rows in tiles stays ``ok``."""
    source = (FIX / "wide_rows_one_tile.py").read_text()
    problem = load_problem(FIX / "wide_rows.py")
    options = VerifyOptions(timeout_s=240.0, seeds=1, distributions=["normal"])
    wrong = verify(problem, source, device="cpu", options=options, candidate_name="wide_rows_one_tile.py")
    assert wrong.kind is VerdictKind.WRONG_ANSWER and "module-small-tiles" in wrong.reason, wrong.reason
    entry = next(s for s in wrong.sizes if s.variant == "module-small-tiles")
    assert entry.sizes["N_COLS"] == 2051 and "fixed tile BLOCK=2048" in entry.why, entry
    right = verify(problem, (FIX / "wide_rows_loop.py").read_text(), device="cpu", options=options,
                   candidate_name="wide_rows_loop.py")
    assert right.kind is VerdictKind.OK, right.reason
