"""IR without a device (xeforge_core.ir, ``xeforge ir``): kernels compiled ahead of time for an
NVIDIA target on this CPU machine, in a worker process; the compiler's resource report; a
kernel the interpreter runs but the GPU compiler rejects; a real Xe-Forge kernel that passes an
Intel-only launch option; the IR diff; the CLI; and the worker's import boundary."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from xeforge_core.ir.compile import IRReport, compile_ir
from xeforge_core.ir.present import diff_count, diff_summary, ir_diff, resource_rows, specialization_text
from xeforge_core.ir.stats import COMPILE_STDERR, compiler_diagnostics, parse_amdgcn, parse_ptxas_log
from xeforge_core.ir.targets import TARGETS, TargetError, backend_installed, get_target
from xeforge_core.ir.text import strip_locations
from xeforge_core.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_kernels"
DOT_K8 = ROOT / "tests" / "fixtures" / "ir" / "dot_k8.py"
FLATTEN_DESCRIPTOR = ROOT / "tests" / "fixtures" / "ir" / "flatten_descriptor.py"
COMPILE_ABORTS = ROOT / "tests" / "fixtures" / "ir" / "compile_aborts.py"
BAD_NUM_WARPS = ROOT / "tests" / "fixtures" / "ir" / "bad_num_warps.py"

pytestmark = pytest.mark.skipif(not backend_installed(TARGETS["sm90"]),
                                reason="the installed Triton has no NVIDIA backend")


@pytest.fixture(scope="module")
def ir_cache(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("XEFORGE_CACHE_DIR", str(tmp_path_factory.mktemp("ircache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def vector_add(ir_cache) -> IRReport:
    problem = load_problem(SAMPLES / "01_vector_add.py")
    return compile_ir(problem.kernel.source, problem=problem, target="sm90")


def test_targets_by_name_and_alias() -> None:
    assert get_target("h200").id == get_target("sm_90").id == get_target("cuda:90").id == "sm90"
    assert get_target("xpu").backend == "xpu"
    # the hardware-profile ids that `xeforge optimize --target` takes name IR targets too
    assert get_target("nvidia_h200").id == "sm90"
    assert get_target("arc_pro_b70").id == get_target("arc_b580").id == "xe2"
    assert get_target("max_1550").id == "pvc"
    with pytest.raises(TargetError, match="unknown target 'sm42'.*sm90"):
        get_target("sm42")


def test_nvidia_ir_and_resources_on_a_cpu_machine(vector_add: IRReport) -> None:
    r = vector_add
    assert r.kind == "ok", (r.reason, r.error_text[-2000:])
    assert r.headline.startswith("IR for NVIDIA Hopper sm_90 (H100, H200); warp size 32")
    assert r.variant == "bench-gpu" and r.variant_dims == {"TOKENS": 4096, "HIDDEN": 4096}
    (k,) = r.kernels
    assert k.name == "add_kernel" and set(k.ir) >= {"ttir", "ttgir", "llir", "ptx"}
    assert 'ttg.target = "cuda:90"' in k.ir["ttgir"] and "#ttg.blocked" in k.ir["ttgir"]
    assert ".target sm_90a" in k.ir["ptx"]
    assert "/tmp/" not in k.ir["ttir"] and "01_vector_add.py" in k.ir["ttir"]  # the job's path is not kept
    # the launch's own specialization: 16-aligned pointers, a size divisible by 16, the constexpr
    assert k.signature["x_ptr"] == "*fp16" and k.constexprs["BLOCK_SIZE"] == 128
    assert k.specialization["n_elements"] == "divisible by 16"
    res = k.resources
    assert isinstance(res["registers"], int) and 0 < res["registers"] <= 255
    assert res["spill_bytes"] == 0 and res["num_warps"] == 4 and res["detail"]["source"] == "ptxas -v"
    row = resource_rows(r)[0]
    assert row["spills"] == "0 bytes" and row["shared memory"] == "0 bytes" and row["registers"].isdigit()
    assert "n_elements: i32, divisible by 16" in specialization_text(k)


def test_a_second_compile_comes_from_the_cache(vector_add: IRReport) -> None:
    problem = load_problem(SAMPLES / "01_vector_add.py")
    started = time.monotonic()
    again = compile_ir(problem.kernel.source, problem=problem, target="sm90")
    assert again.cached and time.monotonic() - started < 10.0  # a read, not a compile (seconds under load)
    assert again.kernels[0].ir["ptx"] == vector_add.kernels[0].ir["ptx"]


def test_a_kernel_the_gpu_compiler_rejects_names_its_line(ir_cache) -> None:
    problem = load_problem(DOT_K8)
    r = compile_ir(problem.kernel.source, problem=problem, target="sm90")
    assert r.kind == "compile_error" and not r.ok
    assert r.line == 15 and "dot_k8.py:15" in r.reason and "K >= 16" in r.reason
    assert r.kernels[0].signature["a_ptr"] == "*fp16" and r.kernels[0].constexprs == {"BLOCK": 8}


def test_a_failed_compiler_pass_says_why_and_where(ir_cache) -> None:
    """Triton raises only "PassManager::run failed" when an MLIR pass rejects a kernel; the
    diagnostic MLIR writes to stderr (the op, its line in the user's file, the pass) is the
    report's reason, with the job folder's path cut to the file's name."""
    problem = load_problem(FLATTEN_DESCRIPTOR)
    r = compile_ir(problem.kernel.source, problem=problem, target="sm90")
    assert r.kind == "compile_error" and r.line == 15
    assert "flatten_descriptor.py:15:72: error: 'scf.if' op" in r.reason and "xeforge-job" not in r.reason
    assert "TMALowering" in r.kernels[0].error_text


def test_a_compiler_crash_keeps_what_the_compiler_wrote(ir_cache) -> None:
    """While a kernel compiles, the worker's native stderr goes to a file in the job folder (to
    read MLIR's diagnostics); a compile that aborts the worker must not take that text with it."""
    problem = load_problem(COMPILE_ABORTS)
    r = compile_ir(problem.kernel.source, problem=problem, target="sm90")
    assert r.kind == "crash" and "while compiling a kernel" in r.reason
    assert "LLVM ERROR: Cannot select: intrinsic %llvm.fixture.boom" in r.error_text


def test_a_launch_refused_before_its_compile_is_a_compile_error(ir_cache) -> None:
    problem = load_problem(BAD_NUM_WARPS)
    r = compile_ir(problem.kernel.source, problem=problem, target="sm90")
    assert r.kind == "compile_error" and "num_warps must be a power of 2" in r.reason, r.reason


def test_compiler_diagnostics_read_mlirs_forms() -> None:
    """The headline is the first error (not a warning before it); the line is taken only from a
    location in the user's file; unknown locations, colour codes and bare errors are kept."""
    stderr = "\n".join([
        "/tmp/xeforge-job-ab12/src/ir/k.py:21:5: warning: some remark from a pass",
        "%5 = tt.load %4 : tensor<64xf32>",
        "\x1b[1m/site/triton/language/standard.py:290:12: \x1b[31merror: \x1b[0m'tt.reduce' op failed",
        "/tmp/xeforge-job-ab12/src/ir/k.py:15:7: error: 'scf.if' op types differ",
        "<unknown>:0: note: Pipeline failed while executing [`SomePass`]",
        "error: Failures have been detected"])
    text, headline, line = compiler_diagnostics(stderr, "/tmp/xeforge-job-ab12/src/ir/k.py")
    assert headline == "/site/triton/language/standard.py:290:12: error: 'tt.reduce' op failed"
    assert line is None   # the first error is located in Triton's library, not in k.py
    assert "k.py:15:7: error" in text and "xeforge-job" not in text and "tt.load" not in text
    assert "<unknown>:0: note: Pipeline failed" in text and "error: Failures have been detected" in text
    _, headline, line = compiler_diagnostics(stderr.split("\n", 3)[3], "k.py")
    assert line == 15 and headline.startswith("k.py:15:7: error")
    assert compiler_diagnostics("plain text\n", "k.py") == ("", "", None)


def test_the_compile_stderr_file_goes_when_its_block_ends(tmp_path: Path) -> None:
    """A compile that raises must not leave its stderr file behind: the parent would blame a later
    death of the worker on that compile."""
    from xeforge_core.ir.worker import _native_stderr

    with pytest.raises(RuntimeError), _native_stderr(tmp_path) as native:
        import os
        os.write(2, b"k.py:3:1: error: boom\n")
        raise RuntimeError("PassManager::run failed")
    assert "error: boom" in native.getvalue() and not (tmp_path / COMPILE_STDERR).exists()


def test_real_xeforge_flash_attention_with_an_intel_only_launch_option(ir_cache, xeforge_cases: Path) -> None:
    problem = load_problem(xeforge_cases / "1_FlashAttention_Fwd.py")
    r = compile_ir(problem.kernel.source, problem=problem, target="sm90", variant="ci")
    assert r.kind == "ok", (r.reason, r.error_text[-2000:])
    (k,) = r.kernels
    assert k.name == "_attn_fwd" and k.dropped_options == ["grf_mode"]
    assert any("grf_mode dropped" in n for n in r.notes)
    assert k.resources["shared_bytes"] > 0 and k.resources["registers"] > 0
    # helpers inlined into the launched kernel are not reported as "not launched"
    assert "_attn_fwd_inner" not in r.not_launched and "_attn_bwd" in r.not_launched


def test_intel_targets_say_plainly_when_the_backend_is_absent(ir_cache) -> None:
    if backend_installed(TARGETS["xe2"]):
        pytest.skip("Intel's backend is installed here")
    problem = load_problem(SAMPLES / "01_vector_add.py")
    r = compile_ir(problem.kernel.source, problem=problem, target="xe2")
    assert r.kind == "unavailable" and not r.kernels
    assert "Intel's Triton backend (triton.backends.intel) is not installed here" in r.reason
    assert "pytorch-triton-xpu" in r.reason


def test_strip_locations_and_the_ir_diff(vector_add: IRReport) -> None:
    k = vector_add.kernels[0]
    ttir = strip_locations(k.ir["ttir"], "ttir")
    assert "loc(" not in ttir and "#loc" not in ttir and "tt.func public @add_kernel" in ttir
    llir = strip_locations(k.ir["llir"], "llir")
    assert "!dbg" not in llir and "define ptx_kernel void @add_kernel" in llir
    ptx = strip_locations(k.ir["ptx"], "ptx")
    assert ".loc\t" not in ptx and ".debug_info" not in ptx and ".entry add_kernel" in ptx
    # the same IR moved down a line differs only in locations
    moved = k.ir["ttir"].replace(":13:", ":14:")
    assert not diff_count(k.ir["ttir"], moved).identical
    assert diff_count(ttir, strip_locations(moved, "ttir")).identical
    changed = type(k)(**{**k.__dict__, "ir": {**k.ir, "ttir": k.ir["ttir"].replace("arith.addi", "arith.subi")}})
    patch, count = ir_diff(k, changed, "ttir", old_name="a", new_name="b")
    assert count.removed == count.added > 0 and "-" in patch and "arith.subi" in patch
    assert diff_summary(count, "ttir").startswith(f"TTIR: {count.removed} line")


def test_resource_parsers_on_compiler_output() -> None:
    log = ("ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
           "ptxas info    : Function properties for k\n    208 bytes stack frame, 212 bytes spill stores, "
           "204 bytes spill loads\nptxas info    : Used 255 registers, used 1 barriers, 128 bytes smem\n")
    got = parse_ptxas_log(log, "k")
    assert got == {"registers": 255, "spill_store_bytes": 212, "spill_load_bytes": 204, "stack_bytes": 208,
                   "static_smem_bytes": 128, "barriers": 1}
    assert parse_ptxas_log(log, "other")["registers"] is None
    amd = "; TotalNumSgprs: 34\n; NumVgprs: 64\n; ScratchSize: 0\n; LDSByteSize: 0 bytes/workgroup\n; Occupancy: 6\n"
    assert parse_amdgcn(amd) | {} == {"vgprs": 64, "sgprs": 34, "vgpr_spills": None, "sgpr_spills": None,
                                      "scratch_bytes": 0, "lds_bytes": 0, "occupancy": 6}


def test_cli_prints_the_target_and_the_stage(vector_add: IRReport, capsys: pytest.CaptureFixture) -> None:
    from xeforge_core.cli import main

    assert main(["ir", str(SAMPLES / "01_vector_add.py"), "--stage", "ttgir", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("IR for NVIDIA Hopper sm_90 (H100, H200)")
    assert "add_kernel · TTGIR for sm90" in out and "#ttg.blocked" in out and "(cached result)" in out
    assert main(["ir", str(SAMPLES / "01_vector_add.py"), "--target", "sm42"]) == 2
    assert "unknown target 'sm42'" in capsys.readouterr().err
    if not backend_installed(TARGETS["xe2"]):
        assert main(["ir", str(SAMPLES / "01_vector_add.py"), "--target", "xe2"]) == 3
        assert "not installed here" in capsys.readouterr().out


def test_an_error_in_another_file_than_the_problems_names_that_file(vector_add: IRReport, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """``xeforge ir K --problem P`` and ``--diff OTHER``: a syntax error of K or OTHER names that
    file, and the other side's error is printed, not only kept in --json."""
    from xeforge_core.cli import main

    broken = tmp_path / "my_kernel.py"
    broken.write_text((SAMPLES / "01_vector_add.py").read_text().replace("def ", "def (", 1))
    problem = ROOT / "tests" / "fixtures" / "caches" / "scale_problem.py"
    assert main(["ir", str(broken), "--problem", str(problem), "-q", "--summary"]) == 1
    out = capsys.readouterr().out
    assert "SyntaxError at my_kernel.py:" in out and "scale_problem.py" not in out, out
    assert main(["ir", str(SAMPLES / "01_vector_add.py"), "--diff", str(broken), "-q", "--summary"]) == 1
    out = capsys.readouterr().out
    assert f"{broken}: compile_error: SyntaxError at my_kernel.py:" in out, out


def test_the_ir_worker_imports_only_torch_triton_numpy() -> None:
    from test_dependencies import WORKER_ALLOWED, third_party_of, worker_closure

    files = worker_closure("xeforge_core.ir.worker")
    assert ROOT / "xeforge_core" / "ir" / "stats.py" in files
    extra = {k: v for k, v in third_party_of(files).items() if k not in WORKER_ALLOWED}
    assert not extra, f"the IR worker imports {sorted(extra)}: {extra}"


def test_a_renamed_kernel_is_compared_with_both_versions_resources(
        vector_add: IRReport, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The candidate renames the kernel and launches it with more warps: its IR is still diffed
    against the baseline's (paired by launch order), and the resources of both are shown."""
    from xeforge_core.cli import main
    from xeforge_core.ir.present import pair_kernels, resource_compare_rows

    source = (SAMPLES / "01_vector_add.py").read_text()
    renamed = source.replace("add_kernel", "vadd_kernel").replace("num_warps=4", "num_warps=8")
    assert renamed.count("vadd_kernel") >= 2
    problem = load_problem(SAMPLES / "01_vector_add.py")
    other = compile_ir(renamed, problem=problem, target="sm90")
    (old, new), = pair_kernels(vector_add, other)
    assert (old.name, new.name) == ("add_kernel", "vadd_kernel")
    row, = resource_compare_rows(vector_add, other, old_name="baseline", new_name="candidate")
    assert row["kernel"] == "add_kernel → vadd_kernel (renamed)" and row["num_warps"] == "4 → 8"
    assert row["registers"] != "—"

    path = tmp_path / "vadd_renamed.py"
    path.write_text(renamed)
    assert main(["ir", str(SAMPLES / "01_vector_add.py"), "--diff", str(path), "--stage", "ttgir", "-q"]) == 0
    out = capsys.readouterr().out
    assert "add_kernel → vadd_kernel (renamed)" in out and "4 → 8" in out  # both versions' resources
    assert "== add_kernel → vadd_kernel (renamed): TTGIR:" in out  # the diff, not "no kernel"
    assert '"ttg.num-warps" = 8' in out
