"""Each knowledge-base lint fires on a planted violation and stays quiet on the fixed code."""

from __future__ import annotations

import textwrap

import pytest

from xeforge_core import lints
from xeforge_core.analysis import analyze, lint
from xeforge_core.knowledge import load_knowledge

HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n"

GEMM_BODY = """
@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr{extra_params}):
    {pid}
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn)
        {dot}
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc)
"""

PID_2D = "pid_m = tl.program_id(0)\n    pid_n = tl.program_id(1)"
PID_1D = ("pid = tl.program_id(0)\n    num_n = tl.cdiv(N, BLOCK_N)\n    group = pid // (GROUP_SIZE_M * num_n)\n"
          "    pid_m = group * GROUP_SIZE_M + (pid % GROUP_SIZE_M)\n    pid_n = (pid % (GROUP_SIZE_M * num_n)) // GROUP_SIZE_M")


def gemm(dot: str = "acc = tl.dot(a, b, acc)", pid: str = PID_2D, extra_params: str = "", decorators: str = "",
         launch: str = "") -> str:
    body = GEMM_BODY.format(dot=dot, pid=pid, extra_params=extra_params)
    return HEADER + decorators + body.lstrip("\n") + "\n" + textwrap.dedent(launch)


def wrapper(body: str) -> str:
    return "\n\ndef run(a, b, c, M, N, K):\n" + textwrap.indent(textwrap.dedent(body).strip() + "\n", "    ")


ROW_KERNEL = HEADER + """
@triton.jit
def row_kernel(x_ptr, y_ptr, N, stride_x, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * stride_x + offs, mask=offs < N)
    tl.store(y_ptr + row * stride_x + offs, x, mask=offs < N)
"""

ROW_KERNEL_I64 = ROW_KERNEL.replace("row = tl.program_id(0)", "row = tl.program_id(0).to(tl.int64)")

AUTOTUNED = """@triton.autotune(configs=[triton.Config({{"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}}, num_warps=4)],
                 key=["M", "N", "K"])
"""

FORWARD = HEADER + """
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64))

    def forward(self, x):
        return helper(x, self.weight)


def helper(x, w):
    {line}
    return x @ w2
"""

BLOCK_PTR = HEADER + """
@triton.jit
def bp_kernel(a_ptr, M, K, stride_am, stride_ak, BM: tl.constexpr, BK: tl.constexpr):
    a_bp = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (0, 0), (BM, BK), (1, 0))
    a = tl.load(a_bp, boundary_check={bc})
    tl.store(a_bp, a, boundary_check={bc})
"""

DESCRIPTOR = HEADER + """
@triton.jit
def d_kernel(a_ptr, M, K, stride_am, BM: tl.constexpr, BK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BM, BK])
    a = a_desc.load([0, 0])
    a_desc.store([0, 0], a)
"""

DEVICE_BAD = HEADER + """
def run(x):
    y = torch.empty_like(x, device="xpu")
    return y.to("cuda:0")
"""
DEVICE_GOOD = HEADER + """
def run(x):
    y = torch.empty_like(x, device=x.device)
    return y
"""

SOFTMAX = HEADER + """
@triton.jit
def sm_kernel(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + offs, mask=offs < N, other=-float("inf"))
    p = {expr}
    tl.store(y_ptr + offs, p / tl.sum(p, axis=0), mask=offs < N)
"""

TWO_LAUNCHES = HEADER + """
@triton.jit
def k1(x_ptr, t_ptr, N, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(t_ptr + o, tl.load(x_ptr + o) * 2, mask=o < N)


@triton.jit
def k2(t_ptr, y_ptr, N, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(t_ptr + o) + 1, mask=o < N)


def run(x, N):
    tmp = torch.empty_like(x)
    y = torch.empty_like(x)
    k1[(1,)](x, tmp, N, BLOCK=1024)
    {second}
    return y
"""

STREAMK = HEADER + """
@triton.jit
def splitk_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    part = tl.load(x_ptr + tl.program_id(0) * BLOCK + o, mask=o < N)
    dst = out_ptr + o
    tl.atomic_add(dst, part, mask=o < N)


def run(x, N):
    out = {alloc}
    splitk_kernel[(4,)](x, out, N, BLOCK=1024)
    return out
"""

# lint name -> (violating source, fixed source, target, triton version)
ADD = """
import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, {block}),)](x, y, out, n, BLOCK={block})
    return out
"""

#: a scatter-add: each program adds its block of values at indices it loads
SCATTER = HEADER + """
@triton.jit
def scatter_add_kernel(index_ptr, v_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(index_ptr + offs, mask=mask, other=0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    {update}
"""

CASES: dict[str, tuple[str, str, str, str | None]] = {
    "lint_pow2_num_warps": (
        gemm(launch=wrapper("mm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BLOCK_M=64, BLOCK_N=64, "
                            "BLOCK_K=32, num_warps=6)")),
        gemm(launch=wrapper("mm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BLOCK_M=64, BLOCK_N=64, "
                            "BLOCK_K=32, num_warps=8)")),
        "xpu", None),
    "lint_pow2_tile_sizes": (
        gemm(launch=wrapper("BM, BN = 96, 64\nmm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BM, BN, 32)")),
        gemm(launch=wrapper("BM, BN = 128, 64\nmm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BM, BN, 32)")),
        "xpu", None),
    "lint_grf_mode_values": (
        HEADER + 'cfgs = [triton.Config({"BLOCK_M": 256, "grf_mode": g}, num_warps=w) for g in ["large"] for w in [64]]\n',
        HEADER + 'cfgs = [triton.Config({"BLOCK_M": 256, "grf_mode": g}, num_warps=w) for g in ["256"] for w in [32]]\n',
        "xpu", None),
    "lint_grf_mode_portability": (
        gemm(launch=wrapper("mm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BLOCK_M=64, BLOCK_N=64, "
                            "BLOCK_K=32, grf_mode='256')")),
        gemm(launch=wrapper("mm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BLOCK_M=64, BLOCK_N=64, "
                            "BLOCK_K=32)")),
        "cuda", None),
    "lint_swizzle_1d_grid": (
        gemm(),
        gemm(pid=PID_1D, extra_params=", GROUP_SIZE_M: tl.constexpr"),
        "xpu", None),
    "lint_hardcoded_device": (DEVICE_BAD, DEVICE_GOOD, "xpu", None),
    "lint_device_sync": (
        DEVICE_GOOD.replace("    return y\n", "    torch.xpu.synchronize()\n    return y\n"),
        DEVICE_GOOD, "xpu", None),
    "lint_dot_operand_upcast": (
        gemm(dot="acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc)"),
        gemm(), "xpu", None),
    "lint_dot_accumulator_arg": (gemm(dot="acc += tl.dot(a, b)"), gemm(), "xpu", None),
    "lint_float64": (
        gemm(dot="acc = tl.dot(a, b, acc).to(tl.float64).to(tl.float32)"), gemm(), "xpu", None),
    "lint_int64_offsets": (ROW_KERNEL, ROW_KERNEL_I64, "xpu", None),
    "lint_forward_weight_transpose": (
        FORWARD.replace("{line}", "w2 = w.t().contiguous()"), FORWARD.replace("{line}", "w2 = w.t()"), "xpu", None),
    "lint_inner_loop_transpose": (
        gemm(dot="acc = tl.dot(a, tl.trans(b), acc)"), gemm(), "xpu", None),
    "lint_item_in_forward": (
        FORWARD.replace("{line}", "w2 = w * float(w.sum().item())"), FORWARD.replace("{line}", "w2 = w * 2.0"),
        "xpu", None),
    "lint_autotune_meta_conflict": (
        gemm(decorators=AUTOTUNED.format(), extra_params="").replace("BLOCK_K: tl.constexpr", "BLOCK_K: tl.constexpr = 32"),
        gemm(decorators=AUTOTUNED.format()), "xpu", None),
    "lint_autotune_launch_option_in_meta": (
        gemm(decorators=AUTOTUNED.format().replace('"BLOCK_K": 32}', '"BLOCK_K": 32, "num_warps": 8}')),
        gemm(decorators=AUTOTUNED.format().replace('num_warps=4', 'num_warps=8')), "xpu", None),
    "lint_autotune_grid_meta": (
        gemm(decorators=AUTOTUNED.format(),
             launch=wrapper("grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))\n"
                            "mm_kernel[grid](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1)")),
        gemm(decorators=AUTOTUNED.format(),
             launch=wrapper("grid = lambda META: (triton.cdiv(M, META['BLOCK_M']), triton.cdiv(N, META['BLOCK_N']))\n"
                            "mm_kernel[grid](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1)")),
        "xpu", None),
    "lint_no_autotune": (
        gemm(launch=wrapper("mm_kernel[(1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, 64, 64, 32)")),
        gemm(decorators=AUTOTUNED.format(),
             launch=wrapper("mm_kernel[lambda META: (1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1)")),
        "xpu", None),
    "lint_block_io_for_dot": (gemm(), DESCRIPTOR + gemm().replace(HEADER, "").replace(
        "a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak)",
        "a = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], "
        "block_shape=[BLOCK_M, BLOCK_K]).load([pid_m * BLOCK_M, k0])"), "xpu", None),
    "lint_block_ptr_api": (BLOCK_PTR.replace("{bc}", "(0, 1)"), DESCRIPTOR, "xpu", "3.9.0"),
    "lint_boundary_check_indices": (
        BLOCK_PTR.replace("{bc}", "(True, True)"), BLOCK_PTR.replace("{bc}", "(0, 1)"), "xpu", None),
    "lint_mixed_ptr_apis": (
        DESCRIPTOR.replace("    a_desc.store([0, 0], a)\n",
                           "    bp = tl.make_block_ptr(a_ptr, (M, K), (stride_am, 1), (0, 0), (BM, BK), (1, 0))\n"
                           "    tl.store(bp, a, boundary_check=(0, 1))\n"),
        DESCRIPTOR, "xpu", None),
    "lint_masked_load_without_other": (
        SOFTMAX.replace('mask=offs < N, other=-float("inf"))', "mask=offs < N)").replace("{expr}", "tl.exp(x)"),
        SOFTMAX.replace("{expr}", "tl.exp(x)"), "xpu", None),
    "lint_small_elementwise_block": (
        ADD.replace("{block}", "128"), ADD.replace("{block}", "4096"), "cuda", None),
    "lint_exp_not_exp2": (
        SOFTMAX.replace("{expr}", "tl.exp(x - tl.max(x, axis=0))"),
        SOFTMAX.replace("{expr}", "tl.math.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)"), "xpu", None),
    "lint_fusion_candidate": (
        TWO_LAUNCHES.replace("{second}", "k2[(1,)](tmp, y, N, BLOCK=1024)"),
        TWO_LAUNCHES.replace("{second}", "k2[(1,)](x, y, N, BLOCK=1024)"), "xpu", None),
    "lint_atomic_output_zeroed": (
        STREAMK.replace("{alloc}", "torch.empty(N, device=x.device, dtype=torch.float32)"),
        STREAMK.replace("{alloc}", "torch.zeros(N, device=x.device, dtype=torch.float32)"), "xpu", None),
    "lint_indirect_read_modify_write": (SCATTER.replace("{update}", (
        "cur = tl.load(out_ptr + idx, mask=mask, other=0.0)\n"
        "    tl.store(out_ptr + idx, cur + v, mask=mask)")),
        SCATTER.replace("{update}", "tl.atomic_add(out_ptr + idx, v, mask=mask)"), "cuda", None),
    "lint_capped_grid_without_loop": (
        ADD.replace("{block}", "1024").replace("add_kernel[(triton.cdiv(n, 1024),)]",
                                                "add_kernel[(min(triton.cdiv(n, 1024), 512),)]"),
        ADD.replace("{block}", "1024"), "cuda", None),
    "lint_descriptor_boundary_check": (
        DESCRIPTOR.replace("a = a_desc.load([0, 0])", "a = a_desc.load([0, 0], boundary_check=(0, 1))"),
        DESCRIPTOR, "xpu", None),
}


def _rule_for(lint_name: str):
    kb = load_knowledge()
    rules = [r for r in kb.rules.values() if r.lint == lint_name]
    assert rules, f"no knowledge-base rule uses {lint_name}"
    return rules[0]


def test_every_lint_has_a_case_and_a_rule():
    assert set(CASES) == set(lints.LINTS), "each lint needs a planted violation and a fix in CASES"
    used = {r.lint for r in load_knowledge().rules.values() if r.lint}
    assert used == set(lints.LINTS), "each lint must be referenced by a rule, and each rule's lint must exist"


@pytest.mark.parametrize("lint_name", sorted(CASES))
def test_lint_fires_on_violation_and_not_on_fix(lint_name: str):
    bad, good, target, version = CASES[lint_name]
    rule = _rule_for(lint_name)
    compile(bad, "<bad>", "exec")
    compile(good, "<good>", "exec")
    hits_bad = [i for i in analyze(bad, target, triton_version=version).issues if i.rule_id == rule.id]
    hits_good = [i for i in analyze(good, target, triton_version=version).issues if i.rule_id == rule.id]
    assert hits_bad, f"{lint_name} did not fire on the planted violation"
    assert all(h.line for h in hits_bad), "every hit names a line"
    assert all(h.stage == rule.stage for h in hits_bad)
    assert not hits_good, f"{lint_name} fired on the fixed code: {[h.message for h in hits_good]}"


def test_tile_sizes_a_host_heuristic_picks_are_an_autotuning_issue_too():
    """TorchInductor's launches compute their tiles on the host (``R0_BLOCK =
    min(1024, next_power_of_2(n))``): as fixed for every device as literals, so the autotuning
    stage is planned for a first version it generated."""
    src = ROW_KERNEL.replace("BLOCK_N", "R0_BLOCK") + wrapper(
        "R0_BLOCK = min(1024, triton.next_power_of_2(N))\n"
        "row_kernel[(M,)](a, b, N, N, R0_BLOCK=R0_BLOCK)")
    hits = [i for i in analyze(src, "xpu").issues if i.rule_id == "autotune_literal_blocks"]
    assert len(hits) == 1 and "its host code picks (R0_BLOCK)" in hits[0].message, hits
    assert hits[0].stage == "autotuning"


def test_a_count_of_rows_a_program_takes_is_not_a_tile():
    """``ROWS_PER_BLOCK=3`` counts rows; only tile names (``BLOCK_*``, Inductor's ``XBLOCK``,
    ``R0_BLOCK``) must be powers of two."""
    src = ROW_KERNEL.replace("BLOCK_N: tl.constexpr", "BLOCK_N: tl.constexpr, ROWS_PER_BLOCK: tl.constexpr") + wrapper(
        "row_kernel[(M,)](a, b, N, N, BLOCK_N=256, ROWS_PER_BLOCK=3)")
    assert not [i for i in analyze(src, "xpu").issues if i.rule_id == "pow2_tile_sizes"]
    assert [i for i in analyze(src.replace("ROWS_PER_BLOCK", "XBLOCK"), "xpu").issues if i.rule_id == "pow2_tile_sizes"]


def test_hardcoded_device_is_an_error_for_another_target():
    a = analyze(DEVICE_BAD, "xpu")
    sev = {i.line: i.severity for i in a.issues if i.rule_id == "hardcoded_device_strings"}
    src_lines = DEVICE_BAD.splitlines()
    cuda_line = next(n for n, text in enumerate(src_lines, 1) if '"cuda:0"' in text)
    xpu_line = next(n for n, text in enumerate(src_lines, 1) if '"xpu"' in text)
    assert sev[cuda_line] == "error"  # names a device other than the target
    assert sev[xpu_line] == "warning"
    assert not a.runs_on("cuda") and not a.runs_on("xpu")


def test_grf_mode_in_config_is_an_error_only_for_cuda():
    src = HEADER + 'cfgs = [triton.Config({"BLOCK_M": 64, "grf_mode": "256"}, num_warps=8)]\n'
    ids = lambda t: {i.rule_id for i in analyze(src, t).issues}  # noqa: E731
    assert "grf_mode_placement" in ids("cuda")
    assert "grf_mode_placement" not in ids("xpu")


def test_rule_version_filter_block_ptr():
    src = BLOCK_PTR.replace("{bc}", "(0, 1)")
    assert "block_ptr_removed" in {i.rule_id for i in analyze(src, "xpu", triton_version="3.9.0").issues}
    assert "block_ptr_removed" not in {i.rule_id for i in analyze(src, "xpu", triton_version="3.6.0").issues}


def test_lint_returns_kb_findings():
    findings = lint(gemm(dot="acc += tl.dot(a.to(tl.float32), b.to(tl.float32))"), "xpu")
    rules = {f.rule for f in findings}
    assert "kb:dot_fp32_accumulate_low_precision_operands" in rules
    assert all(f.rule.startswith("kb:") for f in findings)
    worse = lint(gemm(dot="acc += tl.dot(a.to(tl.float32), b.to(tl.float32))"), "xpu", min_severity="warning")
    assert worse and all(f.severity in ("error", "warning") for f in worse) and len(worse) < len(findings)


def test_autotune_conflict_severity_matches_measured_behaviour():
    # knowledge/checks/launch_rules.nvidia_h200.txt: a default is silently overridden (warning);
    # passing a tuned name at the launch fails (error).
    with_default = CASES["lint_autotune_meta_conflict"][0]
    (hit,) = [i for i in analyze(with_default).issues if i.rule_id == "autotune_keys_no_defaults"]
    assert hit.severity == "warning" and "never used" in hit.message
    passed = gemm(decorators=AUTOTUNED.format(),
                  launch=wrapper("mm_kernel[lambda META: (1, 1)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1, BLOCK_M=64)"))
    (hit,) = [i for i in analyze(passed).issues if i.rule_id == "autotune_keys_no_defaults"]
    assert hit.severity == "error" and "BLOCK_M" in hit.message


def test_a_grid_lambda_that_ignores_meta_is_wrong_only_when_it_counts_tiles():
    # one program per row, looping over the columns inside: right for every config (a public
    # KernelBench softmax + dropout launches `lambda meta: (B,)`), so no finding
    rows = gemm(decorators=AUTOTUNED.format(),
                launch=wrapper("mm_kernel[lambda meta: (M,)](a, b, c, M, N, K, 1, 1, 1, 1, 1, 1)"))
    assert not [i for i in analyze(rows).issues if i.rule_id == "autotune_grid_uses_meta"]
    tiles = gemm(decorators=AUTOTUNED.format(),
                 launch=wrapper("mm_kernel[lambda meta: (triton.cdiv(M, 128), triton.cdiv(N, 128))]"
                                "(a, b, c, M, N, K, 1, 1, 1, 1, 1, 1)"))
    (hit,) = [i for i in analyze(tiles).issues if i.rule_id == "autotune_grid_uses_meta"]
    assert "ignores its META argument but counts tiles" in hit.message


def test_an_update_at_a_block_of_offsets_is_not_an_indirect_update():
    """Reading and writing back ``out + offs`` (each program its own block) is no race, neither
    is a gather that stores elsewhere, nor an update of a segment whose start each program loads."""
    own = SCATTER.replace("{update}", "cur = tl.load(out_ptr + offs, mask=mask)\n"
                                      "    tl.store(out_ptr + offs, cur + v, mask=mask)")
    gather = SCATTER.replace("{update}", "g = tl.load(out_ptr + idx, mask=mask)\n"
                                         "    tl.store(v_ptr + offs, g, mask=mask)")
    segment = HEADER + """
@triton.jit
def varlen_scale_kernel(x_ptr, cu_ptr, D, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = tl.load(cu_ptr + pid)
    offs = tl.arange(0, BLOCK)
    mask = offs < (tl.load(cu_ptr + pid + 1) - start) * D
    ptrs = x_ptr + start * D + offs
    x = tl.load(ptrs, mask=mask, other=0.0)
    tl.store(ptrs, x / tl.sum(x, axis=0), mask=mask)
"""
    for source in (own, gather, segment):  # a base loaded once per program: its own segment
        assert not [i for i in analyze(source, "cuda").issues if i.rule_id == "indirect_update_atomic"]


def test_a_capped_grid_over_a_loop_is_a_persistent_kernel_not_a_gap():
    persistent = ADD.replace("{block}", "1024").replace(
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    mask = offs < n\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)\n",
        "    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):\n"
        "        offs = start + tl.arange(0, BLOCK)\n"
        "        mask = offs < n\n"
        "        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)\n"
    ).replace("add_kernel[(triton.cdiv(n, 1024),)]", "add_kernel[(min(triton.cdiv(n, 1024), 512),)]")
    assert "for start" in persistent and "min(" in persistent
    assert not [i for i in analyze(persistent, "cuda").issues if i.rule_id == "capped_grid_needs_loop"]


def test_no_rule_is_held_against_a_solutions_copy_of_the_input_functions():
    """The problem's own get_inputs() makes the inputs; a solution's copy beside its kernels
    (KernelBenchFiltered's, creating tensors on "cuda") never runs, so it breaks no rule. The same
    string where the module runs it does."""
    from xeforge_core.verify import kb_findings

    harness = textwrap.dedent('''
        import torch

        DEVICE = "cuda"
        batch_size = 16

        def get_inputs():
            return [torch.randn(batch_size, 256, device=DEVICE), torch.randn(4, device="cuda")]

        def get_init_inputs():
            return []
        ''')
    rules = lambda src: {f["rule"] for f in kb_findings(src, "xpu")}  # noqa: E731
    assert "kb:hardcoded_device_strings" not in rules(harness)
    run = harness + "\ndef forward(x):\n    return x.to('cuda')\n"
    assert "kb:hardcoded_device_strings" in rules(run)


def test_launches_in_alternative_branches_are_no_fusion_candidate():
    """Liger-Kernel picks one of two kernels per call (``if BLOCK_SIZE > 256 or row_mode: ...
    else: ...``); both read and write the same buffers, and no call runs both."""
    rule = _rule_for("lint_fusion_candidate").id
    sequential = TWO_LAUNCHES.replace("{second}", "k2[(1,)](tmp, y, N, BLOCK=1024)")
    alternatives = sequential.replace(
        "    k1[(1,)](x, tmp, N, BLOCK=1024)\n    k2[(1,)](tmp, y, N, BLOCK=1024)",
        "    if N > 4096:\n        k1[(1,)](x, tmp, N, BLOCK=1024)\n    else:\n        k2[(1,)](tmp, y, N, BLOCK=1024)")
    assert alternatives != sequential
    assert [i for i in analyze(sequential, "xpu").issues if i.rule_id == rule]
    assert not [i for i in analyze(alternatives, "xpu").issues if i.rule_id == rule]
    # in a loop, one trip may take each branch: both run
    looped = alternatives.replace("    if N > 4096:\n        k1", "    for step in range(2):\n      if step == 0:\n        k1") \
        .replace("    else:\n        k2", "      else:\n        k2")
    assert looped != alternatives
    assert [i for i in analyze(looped, "xpu").issues if i.rule_id == rule]


#: TorchInductor's one-output persistent reduction, as it writes it: an unmasked load with the
#: literal ``None`` as its mask, ``XBLOCK=1`` beside the row's ``R0_BLOCK``.
INDUCTOR_SUM = HEADER + '''@triton.jit
def sum_kernel(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    tmp0 = tl.load(in_ptr0 + (r0_index), None)
    tmp1 = tl.sum(tmp0, 1)[:, None]
    tl.store(out_ptr0 + (tl.full([XBLOCK, 1], 0, tl.int32)), tmp1, None)


def forward(x):
    out = torch.empty((), device=x.device, dtype=x.dtype)
    sum_kernel[(1,)](x, out, 1, {r}, XBLOCK=1, R0_BLOCK={r})
    return out
'''


def test_inductors_unmasked_loads_and_one_output_reductions_are_not_flagged():
    """``tl.load(ptr, None)`` has no mask, so nothing undefined reaches the sum; a program of
    ``XBLOCK=1`` rows by ``R0_BLOCK=2048`` moves 2048 elements, not one. The same launch with a
    tile of 16 x 8 elements is small."""
    issues = analyze(INDUCTOR_SUM.format(r=2048), "cuda").issues
    assert not [i for i in issues if i.rule_id in ("masked_load_other", "elementwise_block_size")], issues
    small = analyze(INDUCTOR_SUM.format(r=8).replace("XBLOCK=1", "XBLOCK=16"), "cuda").issues
    hits = [i for i in small if i.rule_id == "elementwise_block_size"]
    assert len(hits) == 1 and "R0_BLOCK=8 x XBLOCK=16 elements" in hits[0].message, hits


def test_a_one_dimensional_kernel_is_judged_by_its_largest_known_range():
    """A 1-D kernel's separate ranges are not one tile: a 128-element block beside a 16-wide bias
    range moves 128 a program, and a range whose extent the launch leaves to its default (NS = 4)
    does not hide the small block."""
    src = ADD.replace("{block}", "128").replace(
        "add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr)",
        "add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, BLOCK_C: tl.constexpr = 16)").replace(
        "    mask = offs < n\n", "    mask = offs < n\n    c = tl.sum(tl.arange(0, BLOCK_C), axis=0)\n")
    hits = [i for i in analyze(src, "cuda").issues if i.rule_id == "elementwise_block_size"]
    assert len(hits) == 1 and "BLOCK=128 elements" in hits[0].message, hits


def test_a_finding_in_a_kernel_that_never_launched_says_so() -> None:
    """A module picks one of two kernels by size; at the sizes checked only the 2048-wide one
    runs. The knowledge base's advice on the other (its 64-wide block) stays, saying that this
    kernel was not launched, and the advice on the launched kernel says nothing of the kind."""
    from pathlib import Path

    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    path = Path(__file__).parent / "fixtures" / "lints" / "chosen_by_size.py"
    options = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, use_cache=False,
                            measure_performance=False, target="xpu")
    verdict = verify(load_problem(path), path.read_text(), device="cpu", options=options)
    assert verdict.passed, verdict.feedback()
    small = [f.message for f in verdict.findings if f.rule.startswith("kb:") and "scale_small_kernel" in f.message]
    large = [f.message for f in verdict.findings if f.rule.startswith("kb:") and "scale_kernel " in f.message]
    assert small and all("kernel scale_small_kernel was not launched at any size checked" in m for m in small)
    assert large and not any("was not launched" in m for m in large)
