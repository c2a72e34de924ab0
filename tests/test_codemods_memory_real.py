"""The memory-access codemod on kernels written the way published solutions write them:
early-return guards, ``lambda meta`` grids, launches from helper functions and inside ``if``
branches, several kernels in one forward; each rewrite verified in Triton's interpreter, and
a kernel it does not rewrite keeps its reason."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from xeforge_core.codemods.memory_access import improve_memory_access
from xeforge_core.codemods.memory_lift import apply_lift
from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions, verify

FIXTURES = Path(__file__).parent / "fixtures" / "memory_real"
FAST = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, use_cache=False,
                     measure_performance=False)


def _rewrite(name: str, source: str | None = None):
    return improve_memory_access(source or (FIXTURES / name).read_text(), target="cuda", arch="hopper")


def _verifies(name: str, code: str):
    verdict = verify(load_problem(FIXTURES / name), code, device="cpu", options=FAST)
    assert verdict.passed, verdict.feedback()
    return verdict


def test_two_kernels_launched_from_helpers_are_both_rewritten_and_verify() -> None:
    res = _rewrite("two_kernels_helpers.py")
    assert res.applicable, res.reason
    out = res.source
    # the flat kernel in the `if` branch: the lambda grid reads the new block from the launch
    assert "shift_relu_kernel[grid](x, out, n_elements, shift, BLOCK_SIZE=4096, num_warps=8)" in out
    assert 'grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)' in out
    # the row kernel keeps its guard in front of both paths
    assert "ROW_FITS: tl.constexpr" in out and out.count("if row >= n_rows:") == 1
    assert 'assert x.dtype == torch.float32, "float32 expected"' in out and "x = x.contiguous()" in out
    verdict = _verifies("two_kernels_helpers.py", out)
    # the row grid, cdiv(n_rows, 4) * 4 programs of one row, has no tile of its own: the rows are
    # rounded only as far as the flattened 4096-wide tile they share with the 512-wide row needs
    # (37 x 300 -> 64 x 512, not 512 x 512: eight times the interpreter's work)
    whole = next(s for s in verdict.sizes if s.variant == "module-whole")
    assert whole.sizes == {"SIZE_37": 64, "SIZE_300": 512}, whole


def test_an_early_return_guard_becomes_part_of_the_mask_and_verifies() -> None:
    res = _rewrite("column_guard.py")
    assert res.applicable, res.reason
    assert "if col >= n_cols" not in res.source.split("def col_mean_kernel")[1].split("class Model")[0].replace(
        "# was `if col >= n_cols: return`", "")
    assert "out_mask = out_mask & (col < n_cols)" in res.source
    assert "col_mean_kernel[(triton.cdiv(n_cols + 8, 64),)]" in res.source
    _verifies("column_guard.py", res.source)


def test_kernels_it_does_not_rewrite_keep_their_reason() -> None:
    src = (FIXTURES / "column_guard.py").read_text()
    # a guard that is not one comparison cannot become a mask
    notes: list[str] = []
    reasons: list[str] = []
    apply_lift(cst.parse_module(src.replace("if col >= n_cols:", "if col >= n_cols or n_rows == 0:")), "cuda", "hopper",
               notes, reasons)
    assert not notes and "`if col >= n_cols or n_rows == 0: return` is not one comparison" in reasons[0]
    # a flat kernel that reduces its block: the host sized its partials for the block
    flat = (FIXTURES / "two_kernels_helpers.py").read_text().replace(
        "tl.store(out_ptr + offsets, tl.maximum(x + shift, 0.0), mask=mask)",
        "tl.atomic_add(out_ptr, tl.sum(x, axis=0))")
    res = _rewrite("two_kernels_helpers.py", flat)
    assert any("kernel shift_relu_kernel reduces its block (`tl.atomic_add`)" in n for n in res.notes)
    # a block along a program-id axis the launch grid does not have is named as such
    other_axis = flat.replace("pid = tl.program_id(axis=0)", "pid = tl.program_id(axis=1)")
    other_axis = other_axis.replace("tl.atomic_add(out_ptr, tl.sum(x, axis=0))", "tl.store(out_ptr + offsets, x, mask=mask)")
    res = _rewrite("two_kernels_helpers.py", other_axis)
    assert any("kernel shift_relu_kernel: its block runs along program-id axis 1, which the launch grid with 1 "
               "axis does not have" in n for n in res.notes)


def test_a_2d_grid_with_strided_rows_launched_from_two_places_is_rewritten_at_each_launch() -> None:
    res = _rewrite("rows_grid_two_launches.py")
    assert res.applicable, res.reason
    out = res.source
    assert "grid = (R, triton.cdiv(C, min(4096, triton.next_power_of_2(C))))" in out
    assert "BLOCK_N=min(4096, triton.next_power_of_2(xt.shape[1])), num_warps=8" in out
    assert sum("along grid axis 1 of 2" in n for n in res.notes) == 2
    _verifies("rows_grid_two_launches.py", out)


def test_a_gemm_is_left_to_the_stages_that_serve_it() -> None:
    gemm = (Path(__file__).parent / "fixtures" / "codemods" / "matmul_fixed_tiles.py").read_text()
    res = improve_memory_access(gemm, target="cuda")
    assert not res.changed and "is a GEMM (tl.dot): its operands are loaded as 2-D tiles already" in res.reason
