"""Static analysis: facts from the AST, issues mapped to stages, the stage plan, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.analysis import Analysis, analyze, lint, plan_stages
from xeforge_core.vocab.stages import STAGE_IDS

SAMPLE = '''
import torch
import triton
import triton.language as tl


def _configs():
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": 64, "grf_mode": "256"}, num_warps=w, num_stages=2)
            for bm in [64, 128] for w in [8, 16]]


@triton.autotune(configs=_configs(), key=["M", "N"])
@triton.jit
def tuned_kernel(x_ptr, w_ptr, y_ptr, M, N, K, stride_xm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, 16):
        a = tl.load(x_ptr + offs_m[:, None] * stride_xm + k, mask=offs_m[:, None] < M)
        b = tl.load(w_ptr + offs_n[None, :] + k)
        acc = tl.dot(a, b, acc)
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float64))


@triton.jit
def plain_kernel(x_ptr, N, BLOCK: tl.constexpr):
    bp = tl.make_block_ptr(x_ptr, (N,), (1,), (0,), (BLOCK,), (0,))
    x = tl.load(bp, boundary_check=(0,))
    tl.store(bp, x, boundary_check=(0,))


def run(x, w):
    M, K = x.shape
    N = w.shape[0]
    wt = w.t().contiguous()
    y = torch.empty((M, N), device="xpu", dtype=torch.float32)
    tuned_kernel[lambda META: (triton.cdiv(M, META["BLOCK_M"]),)](x, wt, y, M, N, K, x.stride(0))
    plain_kernel[(1,)](y, M * N, BLOCK=1024, num_warps=4)
    torch.xpu.synchronize()
    return y


class Model(torch.nn.Module):
    def forward(self, x):
        return run(x, x)
'''


def test_facts_cover_kernels_launches_and_host_code():
    a = analyze(SAMPLE)
    f = a.facts
    assert [k.name for k in f.kernels] == ["tuned_kernel", "plain_kernel"]
    tuned, plain = f.kernels
    assert tuned.constexprs == ["BLOCK_M", "BLOCK_N"] and plain.constexprs == ["BLOCK"]
    assert tuned.autotune.keys == ["M", "N"]
    assert tuned.autotune.config_names == {"BLOCK_M", "BLOCK_N", "grf_mode"}
    cfg = tuned.autotune.configs[0]
    assert cfg.kwargs["BLOCK_M"] == [64, 128] and cfg.num_warps == [8, 16] and cfg.kwargs["grf_mode"] == ["256"]
    assert [lp.kind for lp in tuned.loops] == ["tl.range"]
    assert tuned.program_id_axes == [0]
    (dot,) = tuned.dots
    assert dot.has_acc and dot.in_loop and [o.cast for o in dot.operands] == [None, None]
    assert {(x.op, x.kind) for x in tuned.accesses} == {("load", "pointer"), ("store", "pointer")}
    assert any(x.masked for x in tuned.accesses)
    assert tuned.float64_lines and plain.block_ptr_lines and not plain.descriptor_lines
    assert {(x.op, x.kind, x.boundary_check) for x in plain.accesses} == {("load", "block_ptr", "(0,)"),
                                                                           ("store", "block_ptr", "(0,)")}
    l1, l2 = f.launches
    assert (l1.kernel, l1.grid_kind, l1.grid_dims, l1.grid_uses_meta) == ("tuned_kernel", "lambda", 1, True)
    assert (l2.kernel, l2.grid_kind, l2.grid_dims) == ("plain_kernel", "tuple", 1)
    assert l2.constexprs == {"BLOCK": 1024} and l2.num_warps == 4
    assert {d.kind for d in f.device_refs} == {"string", "sync"}
    assert [d.text for d in f.sync_calls] == ["torch.xpu.synchronize()"]
    assert [t for _, t in f.weight_transposes] == ["w.t().contiguous()"]
    assert f.has_model and "run" in f.forward_functions
    assert a.to_dict()["facts"]["kernels"][0]["name"] == "tuned_kernel"


def test_issues_are_mapped_to_stages_and_plan_is_canonical():
    a = analyze(SAMPLE)
    ids = {i.rule_id for i in a.issues}
    assert {"no_float64", "hardcoded_device_strings", "device_specific_sync", "no_weight_repack_in_forward",
            "block_io_for_dot_operands"} <= ids
    assert "grf_mode_placement" not in ids  # grf_mode in an xpu Config is the chosen placement
    for i in a.issues:
        assert i.stage in STAGE_IDS and i.severity in ("error", "warning", "info") and i.message
    assert a.plan == [s for s in STAGE_IDS if a.issues_for(s)]
    assert a.plan.index("dtype_fix") < a.plan.index("memory_access") < a.plan.index("xpu_specific")
    cuda = analyze(SAMPLE, "cuda")
    assert "grf_mode_placement" in {i.rule_id for i in cuda.issues}
    assert "block_io_for_dot_operands" not in {i.rule_id for i in cuda.issues}  # an xpu-only rule


def test_plan_stages_add_skip_reorder():
    a = analyze(SAMPLE)
    plan = plan_stages(a, add=("autotuning", "algorithmic"), skip=("memory_access",))
    assert plan[0] == "algorithmic" and "autotuning" in plan and "memory_access" not in plan
    assert plan == [s for s in STAGE_IDS if s in plan]
    reordered = plan_stages(a, add=("autotuning",), order=["autotuning", "dtype_fix"])
    assert reordered[:2] == ["autotuning", "dtype_fix"]
    assert set(reordered) == set(plan_stages(a, add=("autotuning",)))
    assert plan_stages(["fusion"], add=["dtype_fix"]) == ["dtype_fix", "fusion"]
    with pytest.raises(ValueError, match="unknown stage 'warp_magic'"):
        plan_stages(a, add=("warp_magic",))


@pytest.mark.parametrize("bad", [
    "def broken(:\n    pass\n",
    "import triton\n\n@triton.jit\ndef k(x):\n    if x\n        return 1\n",
    "x = '''unterminated",
    "",
    "\x00\x01binary",
])
def test_bad_source_gives_an_issue_not_an_exception(bad: str):
    a = analyze(bad)
    assert isinstance(a, Analysis)
    if bad.strip() and "\x00" not in bad:
        assert a.syntax_error and a.facts is None and a.plan == []
        (issue,) = a.issues
        assert issue.severity == "error" and issue.line and issue.line >= 1
        assert "line" not in issue.message or issue.line
    elif "\x00" in bad:
        assert a.syntax_error
    findings = lint(bad)
    assert all(f.rule.startswith("kb:") for f in findings)


def test_syntax_error_names_the_line():
    src = "import triton\n\n\ndef f(x):\n    return x +\n"
    (issue,) = analyze(src).issues
    assert issue.rule_id == "syntax" and issue.line == 5
    (finding,) = lint(src)
    assert finding.rule == "kb:syntax" and finding.line == 5 and finding.severity == "error"


def _cases(root: Path) -> list[Path]:
    files = sorted(root.glob("*.py"))
    assert len(files) >= 10
    return files


def test_real_cases_hardcoded_xpu_is_found(xeforge_cases: Path):
    for path in _cases(xeforge_cases):
        src = path.read_text()
        a = analyze(src, "xpu")
        assert not a.syntax_error, path.name
        has_literal = '"xpu"' in src or "torch.xpu." in src
        found = [i for i in a.issues if i.rule_id in ("hardcoded_device_strings", "device_specific_sync")]
        assert bool(found) == has_literal, path.name
        for i in found:
            line = src.splitlines()[i.line - 1]
            assert "xpu" in line, (path.name, i.line, line)
        if has_literal:
            assert not a.runs_on("cuda")
            cuda = analyze(src, "cuda")
            assert any(i.severity == "error" for i in cuda.portability_issues), path.name
            assert all(i.codemod == "portability" for i in cuda.portability_issues)


def test_real_cases_plan_sensible_stages(xeforge_cases: Path):
    for path in _cases(xeforge_cases):
        src = path.read_text()
        a = analyze(src, "xpu")
        assert a.facts.kernels, path.name
        assert a.plan and a.plan == [s for s in STAGE_IDS if s in a.plan], path.name
        upcast = ".to(tl.float32), " in src and "tl.dot(" in src
        if upcast:  # fp16 GEMMs that upcast both dot operands: the 8x dtype_fix win
            assert "dtype_fix" in a.plan, path.name
            assert any(i.rule_id == "dot_fp32_accumulate_low_precision_operands" and i.severity == "warning"
                       for i in a.issues), path.name
        gemm = any(k.dots for k in a.facts.kernels)
        if gemm:
            assert "xpu_specific" in a.plan and "autotuning" in a.plan, path.name
        assert "persistent_kernel" not in a.plan  # needs shapes and judgement: the user adds it


def test_real_case_39_autotuned_with_fixed_grid(xeforge_cases: Path):
    src = (xeforge_cases / "39_Gemm_Scale_BatchNorm.py").read_text()
    a = analyze(src)
    k = a.facts.kernel("_fused_gemm_scale_bn_kernel")
    assert k.autotune and k.autotune.keys == ["M", "N", "K"] and len(k.autotune.configs) == 6
    issue = next(i for i in a.issues if i.rule_id == "autotune_grid_uses_meta")
    assert "triton.cdiv(M, 128)" in issue.message and issue.severity == "error"
    assert "grf_mode_placement" in {i.rule_id for i in analyze(src, "cuda").issues}


def test_real_case_flash_attention_descriptors(xeforge_cases: Path):
    src = (xeforge_cases / "1_FlashAttention_Fwd.py").read_text()
    a = analyze(src)
    fwd = a.facts.kernel("_attn_fwd")
    assert len(fwd.descriptor_lines) == 5 and not fwd.block_ptr_lines
    inner = a.facts.kernel("_attn_fwd_inner")
    assert any(x.kind == "descriptor" for x in inner.accesses)
    launch = next(lf for lf in a.facts.launches if lf.kernel == "_attn_fwd")
    assert launch.grf_mode == "256" and launch.num_warps == 16
    assert any(i.rule_id == "grf_mode_placement" and i.line == launch.line for i in a.issues)


PORTABLE = '''
import torch
import triton


def _on_xpu():
    return hasattr(torch, "xpu") and torch.xpu.is_available()


CONFIGS = ["xpu list"] if _on_xpu() else ["cuda list"]


def pick(x):
    if x.device.type == "xpu":
        return 1
    return 2 if x.device.type == "cuda" else 3


def strict(x):
    if not torch.xpu.is_available():
        raise RuntimeError("XPU is required")
    assert x.device.type == "xpu"
    return x
'''


def test_device_branches_are_portable_but_asserts_and_raises_are_not():
    a = analyze(PORTABLE)
    lines = sorted(i.line for i in a.issues if i.rule_id == "hardcoded_device_strings")
    src = PORTABLE.splitlines()
    assert [src[n - 1].strip() for n in lines] == ['if not torch.xpu.is_available():',
                                                    'assert x.device.type == "xpu"']


def test_attention_grid_is_not_a_swizzle_candidate(xeforge_cases: Path):
    a = analyze((xeforge_cases / "1_FlashAttention_Fwd.py").read_text())
    assert "swizzle_1d_grid" not in {i.rule_id for i in a.issues}
    gemm = analyze((xeforge_cases / "68_Matmul_Min_Subtract.py").read_text())
    assert "swizzle_1d_grid" in {i.rule_id for i in gemm.issues}


def test_int64_offsets_use_the_problem_shapes(xeforge_cases: Path):
    from xeforge_core.problem import load_problem

    path = xeforge_cases / "14_Gemm_Divide_Sum_Scaling.py"
    src = path.read_text()
    assert "int64_offsets_for_large_strides" in {i.rule_id for i in analyze(src).issues}
    problem = load_problem(path)  # largest offset 1024 x 8192 elements: int32 is enough
    assert "int64_offsets_for_large_strides" not in {i.rule_id for i in analyze(src, problem=problem).issues}
