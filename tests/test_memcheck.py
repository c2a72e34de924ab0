"""The memory checker (``--memcheck``): compute-sanitizer's log parsed into findings, the
interpreter's bounds check, and a planted one-element out-of-bounds write refused end to end on
the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xeforge_core import memcheck
from xeforge_core.verdict import Step, StepStatus, Verdict, VerdictKind

FIX = Path(__file__).parent / "fixtures" / "memcheck"
PROBLEM = Path(__file__).parent / "fixtures" / "formats" / "kernelbench" / "residual_relu.py"
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------ the log


def test_sanitizer_log_of_the_planted_write():
    """What any real log of the checked call of residual_relu_oob_write.py shows (the fixture
    may be replaced by one captured on a GPU)."""
    report = memcheck.parse_sanitizer_log((FIX / "compute_sanitizer_oob_write.log").read_text())
    writes = [a for a in report.accesses if a.access == "write"]
    assert writes, report
    a = writes[0]
    assert (a.kernel, a.line, a.space, a.side) == ("residual_relu_kernel", 16, "global", "after")
    assert Path(a.file).name == "residual_relu_oob_write.py"
    # the output at the size checked (float32: a multiple of 4 bytes), the write one element past it
    assert a.allocation > 0 and a.allocation % 4 == 0 and a.size == 4 and a.distance >= 1
    found = memcheck.findings(report, "residual_relu_oob_write.py")
    assert found[0].rule == "memcheck_invalid_write" and found[0].severity == "error" and found[0].line == 16
    assert "kernel residual_relu_kernel at line 16" in found[0].message


OLD_AND_NEW = """\
========= CUDA-MEMCHECK
========= Invalid __global__ read of size 8
=========     at 0x000000c8 in /src/my_helper.cuh:75:void vector_projection<double>(double*, int)
=========     by thread (9,0,0) in block (0,0,0)
=========     Address 0x000370e8 is out of bounds
=========
========= Invalid __global__ read of size 8
=========     at 0x000000c8 in /src/my_helper.cuh:75:void vector_projection<double>(double*, int)
=========     by thread (8,0,0) in block (0,0,0)
=========     Address 0x000370e0 is out of bounds
=========
========= Invalid __global__ write of size 4 bytes
=========     at cuda_mul2_kernel_buggy(const float*, float*, int)+0x70
=========        in /mnt/vector_mul2/cuda_mul2.cu:53
=========     by thread (232,0,0) in block (3,0,0)
=========     Address 0x7c5838a00fa0 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7c5838a00000 of size 4,000 bytes
=========     Host Frame:launch_mul2_buggy [0x13cb4]
=========
========= Invalid __shared__ atomic of size 4 bytes
=========     at reduce+0x40
=========     by thread (1,0,0) in block (0,0,0)
=========     Address 0x00000404 is misaligned
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to \
cudaDeviceSynchronize.
========= Error: process didn't terminate successfully
========= ERROR SUMMARY: 5 errors
"""


def test_sanitizer_log_spellings_old_and_new():
    report = memcheck.parse_sanitizer_log(OLD_AND_NEW)
    assert report.error_summary == 5
    assert report.api_errors and "cudaErrorLaunchFailure" in report.api_errors[0]
    assert report.tool_errors == ["process didn't terminate successfully"]
    write, atomic, read = report.accesses  # writes (and atomics) first, then reads
    assert (write.access, write.kernel, write.file, write.line, write.size) == (
        "write", "cuda_mul2_kernel_buggy", "/mnt/vector_mul2/cuda_mul2.cu", 53, 4)
    assert (write.distance, write.side, write.allocation, write.block) == (1, "after", 4000, "3,0,0")
    assert (atomic.space, atomic.problem, atomic.line, atomic.kernel) == ("shared", "misaligned", None, "reduce")
    assert (read.kernel, read.line, read.count, read.size) == ("vector_projection<double>", 75, 2, 8)
    # only the candidate's own file gives a candidate line
    assert [f.line for f in memcheck.findings(report, "cuda_mul2.cu")] == [None, None, None]


def test_apply_fails_a_passing_verdict_on_a_write_and_on_a_read():
    ok = Verdict(kind=VerdictKind.OK, reason="matches", steps=[Step("correctness", StepStatus.PASSED, summary="ok")])
    report = memcheck.parse_sanitizer_log((FIX / "compute_sanitizer_oob_write.log").read_text())
    v = memcheck.apply(ok, report, candidate_file="residual_relu_oob_write.py", seconds=1.0, variant="module")
    assert v.kind is VerdictKind.WRONG_ANSWER and "out-of-bounds write" in v.reason and v.source_line == 16
    assert v.step("memcheck").status is StepStatus.FAILED and v.step("correctness").status is StepStatus.FAILED
    read_only = memcheck.MemcheckReport(tool="t", accesses=[memcheck.InvalidAccess(access="read", size=4, kernel="k")])
    v2 = memcheck.apply(Verdict(kind=VerdictKind.OK), read_only, candidate_file="c.py", seconds=0.0, variant="v")
    # no Triton kernel touches a masked-off lane: a read past the end is a mask that admits too much
    assert v2.kind is VerdictKind.WRONG_ANSWER and v2.reason.startswith("out-of-bounds read found by the memory")
    assert v2.findings[0].severity == "error" and v2.step("memcheck").status is StepStatus.FAILED
    v3 = memcheck.apply(Verdict(kind=VerdictKind.OK), None, candidate_file="c.py", seconds=0.0, variant="v",
                        unavailable="no checker")
    assert v3.kind is VerdictKind.OK and v3.step("memcheck").status is StepStatus.SKIPPED
    assert v3.findings[0].rule == "memcheck_unavailable"


def test_availability_names_where_the_tool_was_looked_for(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setattr(memcheck, "TOOLKIT_DIRS", (str(tmp_path / "none"),))
    monkeypatch.delenv(memcheck.SANITIZER_ENV, raising=False)
    ok, why = memcheck.availability("cuda")
    assert not ok and "compute-sanitizer" in why and str(tmp_path / "cuda" / "bin") in why
    tool = tmp_path / "compute-sanitizer"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert memcheck.availability("cuda") == (True, f"compute-sanitizer memcheck ({tool})")
    assert memcheck.availability("cpu")[0] and not memcheck.availability("xpu")[0]
    cmd = memcheck.sanitizer_command(str(tool), tmp_path / "memcheck.log")
    assert "PYTORCH_NO_CUDA_MEMORY_CACHING=1" in cmd and cmd[cmd.index("--tool") + 1] == "memcheck"


# ------------------------------------------------------------------------------------ interpreter


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    triton = pytest.importorskip("triton")
    if not os.environ.get("TRITON_INTERPRET") or not hasattr(triton, "jit"):
        pytest.skip("Triton's interpreter is not available")
    return triton


def _kernels(tmp_path):
    """Kernels in a file (the interpreter reads a kernel's source from its file)."""
    src = tmp_path / "kernels_under_check.py"
    src.write_text(
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef copy_kernel(x_ptr, y_ptr, n, EXTRA: tl.constexpr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    x = tl.load(x_ptr + offs, mask=offs < n + EXTRA, other=0.0)\n"
        "    tl.store(y_ptr + offs, x, mask=offs < n + EXTRA)\n\n"
        "@triton.jit\ndef add_kernel(t_ptr, v, OFFSET: tl.constexpr):\n"
        "    tl.atomic_add(t_ptr + OFFSET, v)\n\n"
        "@triton.jit\ndef scale_kernel(x_ptr, s_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n"
        "    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)\n"
        "    tl.store(y_ptr + offs, x * tl.load(s_ptr), mask=offs < n)\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("kernels_under_check", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, src


def test_bounds_check_finds_and_skips_one_element_past_the_end(interpreter, tmp_path):
    import torch

    from xeforge_core.worker.bounds import BoundsCheck

    mod, src = _kernels(tmp_path)
    x = torch.arange(10, dtype=torch.float32)
    y = torch.zeros(10)
    canary = torch.full((64,), 7.0)  # heap neighbours stay untouched: the bad lane is skipped
    with BoundsCheck() as check:
        mod.copy_kernel[(1,)](x, y, 10, EXTRA=0, BLOCK=16)
        assert check.accesses == []
        mod.copy_kernel[(1,)](x, y, 10, EXTRA=1, BLOCK=16)
        mod.add_kernel[(1,)](y, 1.0, OFFSET=10)
    assert torch.equal(y, x) and torch.equal(canary, torch.full((64,), 7.0))
    by = {(a["access"], a["line"]): a for a in check.accesses}
    assert set(by) == {("read", 7), ("write", 8), ("atomic", 12)}
    w = by[("write", 8)]
    assert (w["kernel"], w["size"], w["distance"], w["side"], w["allocation"], w["argument"], w["count"]) == (
        "copy_kernel", 4, 1, "after", 40, "y_ptr", 1)
    assert Path(w["file"]) == src and w["block"] == "0,0,0"
    assert by[("atomic", 12)]["kernel"] == "add_kernel"
    # the patches are gone after the block
    from triton.runtime import interpreter as itp

    assert itp.InterpreterBuilder.create_masked_store.__qualname__ == "InterpreterBuilder.create_masked_store"


def _verify_with_memcheck(tmp_path: Path, candidate: str, *, flag: bool = True, problem: Path = PROBLEM,
                          returncode: int = 1) -> dict:
    """``xeforge verify PROBLEM FIX/candidate [--memcheck] --json`` on the CPU, which must exit
    ``returncode``; the verdict as a dict."""
    env = {**os.environ, "XEFORGE_CACHE_DIR": str(tmp_path / "cache"), "XEFORGE_POOL": "0"}
    cmd = [sys.executable, "-m", "xeforge_core.cli", "verify", str(problem), str(FIX / candidate),
           "--device", "cpu", "--seeds", "1", "--no-odd-size", "--json"] + (["--memcheck"] if flag else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == returncode, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_every_call_is_bounds_checked_in_the_interpreter_without_asking(tmp_path):
    """Without ``--memcheck`` a store one element past the end matched the truth and was ``ok``
    (a new user's off-by-one ``offs <= n``): in the interpreter every call of the candidate is
    bounds-checked, so the verdict names the write."""
    v = _verify_with_memcheck(tmp_path, "residual_relu_oob_write.py", flag=False)
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("out-of-bounds write found by the memory checker")
    step = next(s for s in v["steps"] if s["name"] == "memcheck")
    assert step["status"] == "failed" and "every call of the candidate" in step["summary"]
    assert "--memcheck" not in v["reason"]


@pytest.mark.parametrize("candidate", ["pointer_table_add.py", "pointer_table_like.py"])
def test_a_kernel_with_a_table_of_pointers_is_not_bounds_checked_and_says_so(tmp_path, candidate):
    """Pointers made from integers (``tl.pointer_type``, or ``.to(ptr.dtype)`` as multi-tensor
    kernels write it: a table of addresses) reach tensors no launch passes: checked, a correct
    kernel's every load was called out of bounds and masked off (with ``--memcheck`` too). The
    interpreter's cast to a pointer is seen as it runs: the launch is left unchecked and the
    verdict says so."""
    problem = FIX / "pointer_table_problem.py"
    v = _verify_with_memcheck(tmp_path, candidate, flag=False, problem=problem, returncode=0)
    assert v["kind"] == "ok", v["reason"]
    (f,) = [f for f in v["findings"] if f["rule"] == "bounds_unchecked"]
    assert "table_add_kernel" in f["message"] and "pointers from integers" in f["message"]
    v = _verify_with_memcheck(tmp_path, candidate, problem=problem, returncode=0)
    step = next(s for s in v["steps"] if s["name"] == "memcheck")
    assert v["kind"] == "ok" and "not checked after making pointers from integers" in step["summary"]


def test_a_storage_inside_another_is_in_bounds(interpreter, tmp_path):
    """A tensor whose storage lies inside another argument's (``torch.from_numpy`` of a view,
    ``from_dlpack`` of a slice): a read of the outer one past the inner one's end was called out
    of bounds, measured from the inner storage, the nearest start below it."""
    import numpy as np
    import torch

    from xeforge_core.worker.bounds import BoundsCheck

    mod, _ = _kernels(tmp_path)
    base = np.arange(20, dtype=np.float32)
    outer, inner = torch.from_numpy(base), torch.from_numpy(base[5:6])
    y = torch.zeros(20)
    with BoundsCheck() as check:
        mod.scale_kernel[(1,)](outer, inner, y, 20, BLOCK=32)
    assert check.accesses == [] and torch.equal(y, outer * 5.0)


def test_planted_write_is_wrong_answer_with_memcheck_on_cpu(tmp_path):
    """``xeforge verify --memcheck`` on the CPU: the store one past the end fails correctness,
    named with kernel, line and size."""
    v = _verify_with_memcheck(tmp_path, "residual_relu_oob_write.py")
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("out-of-bounds write found by the memory checker")
    assert v["source_line"] == 16
    (f,) = [f for f in v["findings"] if f["rule"] == "memcheck_invalid_write"]
    assert f["line"] == 16 and "residual_relu_kernel at line 16" in f["message"] and "4 byte(s)" in f["message"]
    assert "1 byte(s) after the end of the nearest allocation of 192000 bytes (out_ptr)" in f["message"]
    step = next(s for s in v["steps"] if s["name"] == "memcheck")
    assert step["status"] == "failed" and "interpreter bounds check" in step["summary"]


def test_planted_read_is_wrong_answer_with_memcheck_on_cpu(tmp_path):
    """A load mask one past the end: the outputs match (the lane is masked away at the store),
    the read is still outside the input; ``--memcheck`` refuses it, naming the kernel."""
    v = _verify_with_memcheck(tmp_path, "residual_relu_oob_read.py")
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("out-of-bounds read found by the memory checker")
    reads = [f for f in v["findings"] if f["rule"] == "memcheck_invalid_read"]
    assert reads and all(f["severity"] == "error" for f in reads) and "residual_relu_kernel" in reads[0]["message"]


def test_a_race_between_programs_fails_and_an_atomic_handover_does_not(tmp_path):
    """Programs that add partial sums into one output with a plain load and store are right in
    the interpreter every time (it runs programs in order) and racy on a GPU: a new user's such
    kernel was ``ok``. The every-call check notes which program stored each element; a load of
    another program's store, in a launch without atomics, is a race. ``tl.atomic_add``, and a
    last program that an atomic counter picks to read the others' parts, are not."""
    problem = FIX / "column_sum_problem.py"
    v = _verify_with_memcheck(tmp_path, "column_sum_racy.py", flag=False, problem=problem)
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("a race between programs"), v["reason"]
    (f,) = [f for f in v["findings"] if f["rule"] == "race_between_programs"]
    assert f["line"] == 16 and "program (0,1,0) loads element(s) of out_ptr that program (0,0,0)" in f["message"]
    # an atomic whose result is dropped hands nothing over; a workspace every program stores to
    # and reads back races too
    v = _verify_with_memcheck(tmp_path, "column_sum_racy_beside_atomic.py", flag=False, problem=problem)
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("a race between programs"), v["reason"]
    v = _verify_with_memcheck(tmp_path, "flip_shared_workspace.py", flag=False, problem=FIX / "flip_problem.py")
    assert v["kind"] == "wrong_answer" and "a buffer the programs share" in v["reason"], v["reason"]
    for fine in ("column_sum_atomic.py", "column_sum_last_program.py"):
        v = _verify_with_memcheck(tmp_path, fine, flag=False, problem=problem, returncode=0)
        assert v["kind"] == "ok" and not any(f["rule"] == "race_between_programs" for f in v["findings"]), fine


def test_stores_that_race_are_found_and_stores_of_the_same_value_are_not(tmp_path):
    """Two kinds of race the interpreter's order hides, with a store: programs along axis 1 each
    storing a part of a column's sum into one element (the last, whole sum, wins in the
    interpreter; any of them on a GPU), and an in-place pass whose program reads the next
    block's first element, which that block's program then changes. Programs storing the same
    value into one element, and an in-place pass whose programs keep to their own elements, are
    not races."""
    v = _verify_with_memcheck(tmp_path, "column_sum_prefix.py", flag=False, problem=FIX / "column_sum_problem.py")
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("a race between programs"), v["reason"]
    (f,) = [f for f in v["findings"] if f["rule"] == "race_between_programs"]
    assert "stores into element(s) of out_ptr that program (0,0,0) of the same launch stored a different value" \
        in f["message"] and f["line"] == 16, f["message"]
    v = _verify_with_memcheck(tmp_path, "pair_sum_in_place.py", flag=False, problem=FIX / "pair_sum_problem.py")
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("a race between programs"), v["reason"]
    (f,) = [f for f in v["findings"] if f["rule"] == "race_between_programs"]
    assert "program (2,0,0) changes element(s) of buf_ptr that program (1,0,0) of the same launch loaded" \
        in f["message"] and f["line"] == 14, f["message"]
    for fine, problem in (("column_sum_redundant.py", "column_sum_problem.py"),
                          ("pair_sum_own_block.py", "pair_sum_problem.py")):
        v = _verify_with_memcheck(tmp_path, fine, flag=False, problem=FIX / problem, returncode=0)
        assert v["kind"] == "ok" and not any(f["rule"] == "race_between_programs" for f in v["findings"]), fine


def test_a_pointer_cast_to_another_pointer_type_keeps_the_launch_checked(tmp_path):
    """Triton stores a bool through an int8 pointer and takes a float ``atomic_max`` through an
    int32 one; the check took those casts for pointers made from integers and stopped checking
    (a store past the end then crashed the worker or passed). Both kernels are checked: the
    correct one is ``ok`` with no ``bounds_unchecked``, the one storing past the end is named."""
    problem = FIX / "positive_mask_problem.py"
    source = (FIX / "positive_mask.py").read_text()
    bad = tmp_path / "positive_mask_past_end.py"
    bad.write_text(source.replace("LAST = 0", "LAST = 1"))
    v = _verify_with_memcheck(tmp_path, "positive_mask.py", flag=False, problem=problem, returncode=0)
    assert v["kind"] == "ok" and not any(f["rule"] == "bounds_unchecked" for f in v["findings"]), v["findings"]
    v = _verify_with_memcheck(tmp_path, str(bad), flag=False, problem=problem)
    assert v["kind"] == "wrong_answer" and v["reason"].startswith("out-of-bounds write"), v["reason"]
    assert "positive_mask_kernel at line 15" in v["reason"], v["reason"]
