"""The nine stages and their prompts: every stage's prompt holds the code, its issues, the
hardware profile, the problem context and the reply instructions."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.analysis import analyze
from xeforge_core.knowledge import load_knowledge
from xeforge_core.pipeline.prompts import PROMPTS_DIR, problem_context, render_prompt
from xeforge_core.problem import load_problem
from xeforge_core.verdict import Finding, Verdict, VerdictKind
from xeforge_core.vocab.stages import ALL_STAGE_IDS, STAGE_IDS, STAGES, get_stage

ORIGINAL = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float64)
    tl.store(out_ptr + offs, (x + tl.load(y_ptr + offs, mask=mask)).to(tl.float32), mask=mask)


def run(x, y):
    out = torch.empty_like(x, device="xpu")
    add_kernel[(triton.cdiv(x.numel(), 1000),)](x, y, out, x.numel(), BLOCK=1000)
    return out
'''
CURRENT = ORIGINAL.replace("BLOCK=1000", "BLOCK=1024").replace("1000),)", "1024),)")


def test_stages_are_portability_then_the_nine_in_canonical_order():
    assert [s.id for s in STAGES] == list(ALL_STAGE_IDS) == ["portability", *STAGE_IDS] and len(STAGE_IDS) == 9
    assert [s.number for s in STAGES] == list(range(0, 10))
    assert [s.id for s in STAGES if s.preparatory] == ["portability"]
    for s in STAGES:
        assert s.title and s.goal and s.must_not_change
        assert (PROMPTS_DIR / f"{s.id}.md").is_file()
    assert get_stage("dtype_fix").codemod == "dtype_fix" and get_stage("autotuning").codemod == "autotune"
    with pytest.raises(KeyError, match="unknown stage"):
        get_stage("nope")


@pytest.mark.parametrize("stage_id", list(ALL_STAGE_IDS))
def test_every_stage_prompt_is_complete(stage_id: str):
    kb = load_knowledge()
    profile = kb.profiles["arc_b580"]
    analysis = analyze(CURRENT, "xpu")
    issues = analysis.issues_for(stage_id)
    if not issues:  # give every stage an issue so the section is exercised
        issues = [{"rule_id": "planted_issue", "severity": "warning", "line": 7, "message": "planted message",
                   "fix": "planted fix"}]
    ctx = {"name": "add", "variant": "ci", "dims": {"N": 4096}, "inputs": {"X": {"shape": [4096], "dtype": "float32"}},
           "dtype": "float32", "flop": 4096.0, "bytes": 32768.0, "arithmetic_intensity": 0.125,
           "ridge_point": profile.ridge_point("float32"), "bound": "memory", "peak_tflops": 14.6,
           "bandwidth_gbps": 456.0, "roofline_floor_us": 0.07, "bytes_note": "inputs only"}
    rules = kb.rules_for(stage=stage_id, target="xpu")
    text = render_prompt(stage_id, original_code=ORIGINAL, current_code=CURRENT, issues=issues, profile=profile,
                         problem_context=ctx, rules=rules,
                         examples=[("tiny example", "a = b.to(tl.float64)", "a = b.to(tl.float32)")],
                         feedback="verdict: wrong_answer - max abs error 3.2 on variant ci")
    stage = get_stage(stage_id)
    # the code, byte for byte, each in its own fenced block
    assert "```python\n" + ORIGINAL.rstrip() + "\n```" in text
    assert "```python\n" + CURRENT.rstrip() + "\n```" in text
    # the stage's issues
    for i in issues:
        msg = i["message"] if isinstance(i, dict) else i.message
        assert msg in text
    # the hardware profile, named (never a fixed device line)
    assert "Intel Arc B580" in text and "456 GB/s" in text and "Ponte Vecchio" not in text
    # the problem context: shapes, dtype, flop, bytes, intensity, bound vs the ridge point
    assert "[4096]" in text and "float32" in text and "memory-bound" in text and "Ridge point" in text
    # rules and examples, feedback
    for r in rules:
        assert f"`{r.id}`" in text
    assert "tiny example" in text and "max abs error 3.2" in text
    # goal, constraints and exact reply instructions
    assert stage.goal in text and stage.title in text
    for c in stage.must_not_change:
        assert c in text
    assert "## Reply format" in text and "One fenced code block tagged `python`" in text
    assert "**whole** module" in text and "rationale" in text


def test_prompt_without_profile_context_or_feedback():
    text = render_prompt("fusion", original_code=ORIGINAL, current_code=ORIGINAL, issues=[], profile=None,
                         problem_context={}, rules=[], examples=[])
    assert "No hardware profile is selected" in text and "No spec variant is available" in text
    assert "None were found mechanically" in text and "Feedback on your previous attempt" not in text
    assert text.count(ORIGINAL.rstrip()) == 1  # unchanged code is shown once
    assert "## Reply format" in text


def test_prompt_takes_a_verdict_and_code_with_backticks():
    code = ORIGINAL + '\nDOC = """use ```python blocks```"""\n'
    verdict = Verdict(kind=VerdictKind.CHEATING, reason="replaced the kernel by torch.add",
                      findings=[Finding(rule="torch_fallback", message="torch.add on the hot path", line=12)])
    text = render_prompt("dtype_fix", original_code=ORIGINAL, current_code=code, issues=[], profile=None,
                         problem_context=None, rules=[], examples=[], feedback=verdict)
    assert "````python\n" + code.rstrip() + "\n````" in text  # longer fence than the code's own
    assert "replaced the kernel by torch.add" in text and "torch_fallback (line 12)" in text


def test_problem_context_for_a_real_case(xeforge_cases: Path):
    kb = load_knowledge()
    problem = load_problem(xeforge_cases / "68_Matmul_Min_Subtract.py")
    h200 = kb.profiles["nvidia_h200"]
    ctx = problem_context(problem, "ci", h200)
    v = problem.variant("ci")
    assert ctx["variant"] == "ci" and ctx["dims"] == v.dims and ctx["flop"] == v.flop and ctx["bytes"] == v.bytes
    assert ctx["arithmetic_intensity"] == pytest.approx(v.flop / v.bytes)
    assert ctx["ridge_point"] == pytest.approx(h200.ridge_point(v.dtype or "fp32"))
    assert ctx["bound"] == ("compute" if ctx["arithmetic_intensity"] >= ctx["ridge_point"] else "memory")
    assert ctx["roofline_floor_us"] > 0 and ctx["inputs"]
    default = problem_context(problem, None, h200)
    assert default["variant"] == problem.default_variant_name()
    bare = problem_context(None, None, None)
    assert bare["bound"] == "unknown" and bare["flop"] is None
    text = render_prompt("dtype_fix", original_code=problem.kernel.source, current_code=problem.kernel.source,
                         issues=analyze(problem.kernel.source).issues_for("dtype_fix"), profile=h200,
                         problem_context=ctx, rules=kb.rules_for(stage="dtype_fix", target="cuda"), examples=[])
    assert "dot_fp32_accumulate_low_precision_operands" in text and "NVIDIA H200" in text
    assert f"{ctx['bound']}-bound" in text


def test_prompt_reports_the_block_io_api_of_the_compiling_triton():
    new = render_prompt("block_pointers", original_code=ORIGINAL, current_code=ORIGINAL, profile=None,
                        triton_api={"version": "3.9.0", "tensor_descriptor": True, "block_ptr": False})
    assert "Triton 3.9.0: tensor descriptors available, block pointers NOT available" in new
    import triton

    here = render_prompt("block_pointers", original_code=ORIGINAL, current_code=ORIGINAL, profile=None)
    assert f"Triton {triton.__version__}:" in here


def test_tuning_prompts_carry_the_target_search_space():
    kb = load_knowledge()
    xe2 = render_prompt("autotuning", original_code=ORIGINAL, current_code=ORIGINAL, profile=kb.profiles["arc_b580"])
    assert "knowledge/search_spaces/xpu_xe2.yaml" in xe2 and '"grf_mode": "256"' in xe2
    assert "GEMM_CONFIGS = [" in xe2 and "REDUCTION_CONFIGS = [" in xe2 and '"warp_size": 16' in xe2
    hpc = render_prompt("xpu_specific", original_code=ORIGINAL, current_code=ORIGINAL, profile=kb.profiles["max_1550"])
    assert "xpu_xehpc.yaml" in hpc
    cuda = render_prompt("autotuning", original_code=ORIGINAL, current_code=ORIGINAL,
                         profile=kb.profiles["nvidia_h200"])
    assert "search_spaces/cuda.yaml" in cuda and "grf_mode\": " not in cuda
    other = render_prompt("dtype_fix", original_code=ORIGINAL, current_code=ORIGINAL, profile=kb.profiles["arc_b580"])
    assert "## Search space" not in other


def test_the_heading_numbers_the_stage_as_in_the_plan():
    two_of_four = render_prompt("dtype_fix", original_code=ORIGINAL, current_code=ORIGINAL, position=(2, 4))
    assert two_of_four.splitlines()[0] == "# Stage 2 of 4: Data types"
    assert "of 9" not in two_of_four
    alone = render_prompt("fusion", original_code=ORIGINAL, current_code=ORIGINAL)
    assert alone.splitlines()[0] == "# Fusion"
    port = render_prompt("portability", original_code=ORIGINAL, current_code=ORIGINAL)
    assert port.splitlines()[0] == "# Preparatory step: Portability" and "torch.accelerator" in port


def test_every_codemod_a_stage_names_is_implemented_by_the_rules_engine():
    """The stages name the codemod that serves them, the codemod registry holds each under that
    name, and a knowledge-base rule may name only those."""
    from xeforge_core.codemods.registry import codemods
    from xeforge_core.engines.rules import RulesEngine, stage_codemod
    from xeforge_core.vocab.stages import CODEMODS as NAMED

    assert set(NAMED) <= set(codemods())
    assert {s for s in RulesEngine.stages() if stage_codemod(s) is not None} == {s.id for s in STAGES if s.codemod}
    for rule in load_knowledge().rules.values():
        assert rule.codemod is None or rule.codemod in NAMED
