"""The mutation generator (xeforge_core.mutation): each fault class plants its intended edit.

Static only (libcst): nothing here runs a kernel, so the file takes well under a second.
"""

from __future__ import annotations

import ast

import pytest

from xeforge_core.mutation import MUTATION_CLASSES, generate

#: A row-sum over 2-D tiles with a K loop, an epilogue, a scan and an atomic: every class applies.
KERNEL = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def rows_kernel(x_ptr, out_ptr, total_ptr, M, N, stride_xm, stride_xn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
        mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn, mask=mask, other=0.0)
        acc += tl.sum(x, axis=1)
    peak = tl.max(tl.load(x_ptr + offs_m * stride_xm, mask=offs_m < M, other=float("-inf")), axis=0)
    y = acc * 0.5 + peak
    tl.store(out_ptr + offs_m, y, mask=offs_m < M)
    tl.atomic_add(total_ptr + pid_n, tl.sum(tl.cumsum(y, axis=0), axis=0))


def rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty(m, device=x.device)
    total = torch.zeros(1, device=x.device)
    grid = (triton.cdiv(m, 32), 1)
    rows_kernel[grid](x, out, total, m, n, x.stride(0), x.stride(1), BLOCK_M=32, BLOCK_N=64)
    return out
'''

#: class -> (line, exact text before, exact text after) of the preferred site in KERNEL.
EXPECTED = {
    "mask_off_by_one": (20, "offs_m < M", "offs_m <= M"),
    "mask_dropped": (16, "tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn, mask=mask, "
                         "other=0.0)", "tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :] * stride_xn)"),
    "floor_grid": (28, "triton.cdiv(m, 32)", "m // 32"),
    "program_id": (9, "tl.program_id(0), tl.program_id(1)", "tl.program_id(1), tl.program_id(0)"),
    "strides_swapped": (29, "x.stride(0), x.stride(1)", "x.stride(1), x.stride(0)"),
    "loop_bound_short": (13, "range(0, N, BLOCK_N)", "range(0, N - BLOCK_N, BLOCK_N)"),
    "accumulator_fp16": (12, "tl.zeros((BLOCK_M,), dtype=tl.float32); acc += tl.sum(x, axis=1)",
                         "tl.zeros((BLOCK_M,), dtype=tl.float16); acc += tl.sum(x, axis=1).to(tl.float16)"),
    "wrong_constant": (19, "0.5", "0.55"),
    "epilogue_twice": (19, "y = acc * 0.5 + peak", "y = acc * 0.5 + peak\ny = y * 0.5 + peak"),
    "wrong_reduction_axis": (17, "tl.sum(x, axis=1)", "tl.sum(x, axis=0)"),
    "add_without_atomic": (21, "tl.atomic_add(total_ptr + pid_n, tl.sum(tl.cumsum(y, axis=0), axis=0))",
                           "tl.store(total_ptr + pid_n, tl.load(total_ptr + pid_n) + tl.sum(tl.cumsum(y, axis=0), "
                           "axis=0))"),
    "load_without_other": (18, 'tl.load(x_ptr + offs_m * stride_xm, mask=offs_m < M, other=float("-inf"))',
                           "tl.load(x_ptr + offs_m * stride_xm, mask=offs_m < M)"),
}


@pytest.fixture(scope="module")
def mutants():
    return {m.mutation_class: m for m in generate(KERNEL)}


def test_every_class_is_planted(mutants):
    assert set(mutants) == set(MUTATION_CLASSES) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_class_makes_its_intended_edit(mutants, name):
    m = mutants[name]
    line, before, after = EXPECTED[name]
    assert (m.line, m.before, m.after) == (line, before, after)
    assert m.kernel == ("rows" if name in ("floor_grid", "strides_swapped") else "rows_kernel")
    ast.parse(m.source)
    assert m.source != KERNEL
    # a single fault: only the recorded lines differ from the original
    changed = {i for i, (a, b) in enumerate(zip(KERNEL.splitlines(), m.source.splitlines()), 1) if a != b}
    assert changed and min(changed) >= line


def test_fp16_accumulator_rounds_every_update(mutants):
    src = mutants["accumulator_fp16"].source
    assert "acc += tl.sum(x, axis=1).to(tl.float16)" in src


def test_store_mask_preferred_over_load_mask():
    """A store one past the end (memory only a checker sees) is planted before a load one past."""
    src = KERNEL.replace("tl.store(out_ptr + offs_m, y, mask=offs_m < M)", "tl.store(out_ptr + offs_m, y, mask=offs_m < M - 0)")
    m = generate(src, classes=["mask_off_by_one"])[0]
    assert m.before == "offs_m < M - 0" and m.line == 20


def test_program_id_ignored_when_one_axis():
    src = KERNEL.replace("pid_n = tl.program_id(1)", "pid_n = 0")
    m = generate(src, classes=["program_id"])[0]
    assert (m.before, m.after) == ("tl.program_id(0)", "0")


def test_dot_accumulator_keeps_a_float32_operand():
    src = ('import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr):\n'
           '    offs = tl.arange(0, BLOCK)\n    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)\n'
           '    for k0 in range(0, K, BLOCK):\n        a = tl.load(a_ptr + offs[:, None] * K + k0 + offs[None, :])\n'
           '        b = tl.load(b_ptr + (k0 + offs[:, None]) * BLOCK + offs[None, :])\n        acc = tl.dot(a, b, acc)\n'
           '    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)\n')
    m = generate(src, classes=["accumulator_fp16"])[0]
    assert "acc = tl.dot(a, b, acc.to(tl.float32)).to(tl.float16)" in m.source


def test_classes_that_do_not_apply_give_nothing():
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef copy(x_ptr, y_ptr):\n"
           "    tl.store(y_ptr, tl.load(x_ptr))\n")
    assert generate(src) == []


def test_per_class_gives_further_sites_with_indexed_ids():
    ms = generate(KERNEL, classes=["mask_dropped"], per_class=3)
    assert [m.id for m in ms] == ["mask_dropped", "mask_dropped-1", "mask_dropped-2"]
    assert len({m.source for m in ms}) == 3


def test_module_without_kernel_and_unknown_class():
    assert generate("def f(x):\n    return x + 1\n") == []
    with pytest.raises(ValueError, match="unknown mutation class"):
        generate(KERNEL, classes=["mask_of_by_one"])


DEAD_CODE = '''\
import triton
import triton.language as tl


@triton.jit
def scale(x):
    return x * 3.0


@triton.jit
def fast_kernel(x_ptr, y_ptr, n, EXACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if EXACT:
        y = x * 0.5
    else:
        y = scale(x) * 0.25
    tl.store(y_ptr + offs, y, mask=offs < n)


@triton.jit
def old_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def run(x, y):
    fast_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), EXACT=True, BLOCK=64)


def run_old(x, y):
    old_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
'''


def test_faults_go_only_into_code_that_runs():
    """The branch a literal constexpr rules out, and (given what a call launched) kernels and
    host functions that never run, get no fault."""
    every = generate(DEAD_CODE, classes=["wrong_constant", "floor_grid"], per_class=5)
    lines = {m.line for m in every}
    assert lines == {7, 15, 24, 28, 32}  # EXACT=True at every launch: the else branch (line 17) is dead
    live = generate(DEAD_CODE, classes=["wrong_constant", "floor_grid"], per_class=5, launched={"fast_kernel"})
    # scale() is called only in the dead branch; old_kernel and run_old never run
    assert {(m.line, m.kernel) for m in live} == {(15, "fast_kernel"), (28, "run")}


# ------------------------------------------------------------------------------------ the report


def test_survivor_arguments_are_proofs_or_left_open():
    from xeforge_core.mutation.report import survivor_analysis

    orig = {"kind": "ok", "runs": [["ci", 0, "normal", "", [[0.001, 0.01, 0]]]]}
    same = {"kind": "ok", "runs": [["ci", 0, "normal", "", [[0.001, 0.01, 0]]]], "findings": []}
    relu = {"mutation_class": "epilogue_twice", "before": "y = tl.maximum(acc, 0.0)", "ours": same}
    a = survivor_analysis("k/epilogue_twice", relu, orig, None, "cuda")
    assert a["status"] == "equivalent" and "idempotent" in a["argument"]
    assert "identical to the unmodified kernel's" in a["evidence"][0]
    masked = {"mutation_class": "epilogue_twice", "before": "acc = tl.where(value_mask, acc, 0.0)", "ours": same}
    assert survivor_analysis("k/w", masked, orig, None, "cuda")["status"] == "equivalent"
    scaled = {"mutation_class": "epilogue_twice", "before": "acc = tl.where(value_mask, acc * 2.0, 0.0)", "ours": same}
    assert survivor_analysis("k/w", scaled, orig, None, "cuda")["status"] == "unexplained"  # doubles twice
    for not_fixed in ("acc = tl.where(acc < 0, tl.abs(acc), 0.0)", "acc = tl.abs(tl.minimum(acc, -1.0))",
                      "acc = tl.where(acc > 0, tl.minimum(acc, -1.0), 0.0)", "acc = tl.where(m, acc * 2.0, acc)",
                      "acc = tl.where(acc > 1.0, acc - 1.0, acc)"):
        row = {"mutation_class": "epilogue_twice", "before": not_fixed, "ours": same}
        assert survivor_analysis("k/w", row, orig, None, "cuda")["status"] == "unexplained", not_fixed
    for fixed in ("acc = tl.minimum(tl.maximum(acc, 0.0), 6.0)", "acc = tl.where(acc < 2.0, acc, 0.0)",
                  "acc = tl.abs(acc)", "acc = tl.where(value_mask, tl.maximum(acc, 0.0), 0.0)",
                  "acc = tl.where(load_mask, x, acc)"):
        row = {"mutation_class": "epilogue_twice", "before": fixed, "ours": same}
        assert survivor_analysis("k/w", row, orig, None, "cuda")["status"] == "equivalent", fixed
    # the select applied again with its own result as the condition (a KernelBook padding kernel)
    first = "out_val = tl.where(valid_c, x, 0.0)"
    for again, status in (("out_val = tl.where(out_val, x, 0.0)", "equivalent"),
                          ("out_val = tl.where(out_val, x, 1.0)", "unexplained"),  # a zero lane becomes 1
                          ("out_val = tl.where(out_val, x * 2.0, 0.0)", "unexplained")):
        row = {"mutation_class": "epilogue_twice", "before": first, "after": f"{first}\n{again}", "ours": same}
        assert survivor_analysis("k/s", row, orig, None, "cuda")["status"] == status, again
    nonzero = "out_val = tl.where(valid_c, x, 1.0)"  # a lane of 1.0 selects x the second time
    row = {"mutation_class": "epilogue_twice", "before": nonzero, "ours": same,
           "after": f"{nonzero}\nout_val = tl.where(out_val, x, 0.0)"}
    assert survivor_analysis("k/s", row, orig, None, "cuda")["status"] == "unexplained"
    silu = {"mutation_class": "epilogue_twice", "before": "y = y * tl.sigmoid(y)", "ours": same}
    assert survivor_analysis("k/e", silu, orig, None, "cuda")["status"] == "unexplained"
    read = {"mutation_class": "mask_dropped", "before": "", "ours": {**same, "findings": [
        {"rule": "memcheck_invalid_read", "message": "kernel k at line 3: invalid global read"}]}}
    assert survivor_analysis("k/m", read, orig, None, "cuda")["status"] == "unexplained"  # evidence, no proof
    race = {"mutation_class": "add_without_atomic", "before": "", "ours": same}
    assert survivor_analysis("k/a", race, orig, None, "cpu")["status"] == "gap"
    assert survivor_analysis("k/a", race, orig, None, "cuda")["status"] == "unexplained"
    published = {"mutation_class": "mask_dropped", "ours": same, "published": {"kind": "wrong_answer"}}
    assert survivor_analysis("k/p", published, orig, None, "cuda")["status"] == "gap"
    given = {"status": "equivalent", "argument": "the tail is never reached"}
    assert survivor_analysis("k/m", read, orig, given, "cuda")["argument"] == "the tail is never reached"


def test_score_counts_a_refusal_only_where_the_tool_passes_the_unmodified_kernel(tmp_path):
    from xeforge_core.mutation.report import write_reports

    originals = {"a": {"ours": {"kind": "ok"}, "kb": {"kind": "pass"}}, "b": {"ours": {"kind": "ok"}, "kb": {"kind": "fail"}},
                 "c": {"ours": {"kind": "ok", "seconds": 150.0}}}
    rows = {
        "a/x": {"kernel_id": "a", "mutation_class": "x", "line": 1, "kernel": "k", "before": "", "after": "",
                "ours": {"kind": "wrong_answer"}, "kb": {"kind": "fail"}},
        "a/y": {"kernel_id": "a", "mutation_class": "y", "line": 2, "kernel": "k", "before": "", "after": "",
                "ours": {"kind": "ok"}, "kb": {"kind": "fail"}, "analysis": {"status": "gap", "argument": "why"}},
        "b/x": {"kernel_id": "b", "mutation_class": "x", "line": 1, "kernel": "k", "before": "", "after": "",
                "ours": {"kind": "environment"}},  # no verdict on the candidate: not counted
        "a/z": {"kernel_id": "a", "mutation_class": "z", "line": 3, "kernel": "k", "before": "", "after": "",
                "ours": {"kind": "wrong_answer"},  # KernelBench out of memory beside other runs: no verdict
                "kb": {"kind": "fail", "metadata": {"runtime_error_name": "torch.OutOfMemoryError"}}},
        # the unmodified kernel took half the limit: its mutant's timeout may be the run's load
        "c/x": {"kernel_id": "c", "mutation_class": "x", "line": 1, "kernel": "k", "before": "", "after": "",
                "ours": {"kind": "timeout"}},
    }
    header = {"date": "d", "device": "cpu", "versions": "", "host": "h", "seeds": 1}
    text = write_reports(tmp_path, header, originals, rows, {"wrong_answer", "timeout"}, {"ok"})
    assert "Not counted: 1 timeouts of mutants of kernels whose unmodified verification took over 33% of the 300 s" in text
    assert "Mutation score, ours: 2/3 (67%); KernelBench's evaluation: 2/2 (100%)" in text
    assert "Without the 0 survivors argued equivalent" in text
    assert "refuses but ours passes: 1: a/y" in text and "**gap**: why" in text
    assert (tmp_path / "mutants.csv").read_text().count("\n") == 6 and "no_verdict" in (tmp_path / "mutants.csv").read_text()


def test_a_zero_other_is_no_fault_to_drop():
    """Triton fills the masked-off lanes of a load without ``other`` with zeros, on NVIDIA GPUs
    and in the interpreter: dropping ``other=0.0`` before a sum changes nothing, so no mutant is
    made of it; dropping ``-inf`` before a max is a fault."""
    src = '''
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    peak = tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), axis=0)
    also = tl.sum(tl.load(y_ptr + offs, mask=offs < n, other=-0), axis=0)
    tl.store(y_ptr, total + peak + also)
'''
    found = generate(src, classes=["load_without_other"], per_class=5)
    assert [m.before for m in found] == ['tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))']
