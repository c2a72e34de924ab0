"""Engine protocol, reply extraction and the manual engine."""

from __future__ import annotations

from pathlib import Path

from xeforge_core.engines import (
    Candidate,
    Engine,
    ProposalContext,
    TokenUsage,
    extract_code,
    get_engine,
    render_stage_prompt,
)
from xeforge_core.engines.extract import reply_prose
from xeforge_core.engines.manual import ManualEngine

FIXTURES = Path(__file__).parent / "fixtures" / "codemods"
MODULE = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"


def _ctx(stage: str = "dtype_fix") -> ProposalContext:
    src = (FIXTURES / "matmul_fp32_dot.py").read_text()
    return ProposalContext(stage=stage, original_code=src, current_code=src, target="cuda")


def test_every_engine_speaks_the_protocol() -> None:
    for name in ("rules", "manual", "llm"):
        engine = get_engine(name)
        assert isinstance(engine, Engine) and engine.name == name


def test_candidate_round_trips_through_dict() -> None:
    cand = Candidate(code=MODULE, rationale="r", engine="llm", model="m", prompt="p",
                     tokens=TokenUsage(10, 5, 1), stage="dtype_fix", notes=["n"])
    back = Candidate.from_dict(cand.to_dict())
    assert back == cand and back.tokens.total_tokens == 15


def test_extract_fenced_largest_complete_module() -> None:
    small = "import triton\n\n@triton.jit\ndef a():\n    pass\n"
    reply = (f"Original:\n```python\n{small}```\nRewritten:\n```py\n{MODULE}```\n"
             "Usage:\n```python\nout = model(x)\n```\n")
    got = extract_code(reply)
    assert got.code == MODULE and got.source == "fenced"
    assert any("2 complete modules" in n for n in got.notes)


def test_extract_other_shapes() -> None:
    assert extract_code(MODULE).source == "whole_reply"
    unfenced = extract_code("Sure, here you go:\n\n" + MODULE + "\nThis keeps fp16 operands.")
    assert unfenced.code is not None and "@triton.jit" in unfenced.code and unfenced.source == "unfenced"
    think = extract_code(f"<think>maybe ```python\nimport x\n```</think>\n```python\n{MODULE}```")
    assert think.code == MODULE
    cut = extract_code(f"```python\n{MODULE}")  # the reply was cut off before the closing fence
    assert cut.code == MODULE and any("not closed" in n for n in cut.notes)
    broken = extract_code("```python\nimport triton\n@triton.jit\ndef k(:\n    pass\n```")
    assert broken.code is not None and any("does not parse" in n for n in broken.notes)
    tilde = extract_code(f"~~~python\n{MODULE}~~~")
    assert tilde.code == MODULE
    # the user's own edit, unfenced, with a typo inside a function: taken whole (not cut before
    # the typo, not "no code"), so the verifier names the line
    typo = MODULE.replace("    pass\n", "    offs = = 1\n    pass\n")
    own = extract_code(typo)
    assert own.code == typo and own.source == "whole_reply"
    assert own.notes == ["the code does not parse (line 7: invalid syntax)"]


def test_extract_rejections_say_why() -> None:
    assert "empty" in extract_code("   ").reason
    assert "no code" in extract_code("The kernel is already optimal.").reason
    partial = extract_code("def broken(:\n  pass\n")  # the user's own edit: a broken part of a module
    assert partial.code is None and partial.reason.startswith("the reply's code does not parse (line 1:"), partial.reason
    for prose in ("importantly, the kernel is fine", "from the profile it is memory bound", "classic tiling",
                  "import the kernel first", "class of kernels: memory bound"):
        assert "no code" in extract_code(prose).reason, prose
    diff = extract_code("--- a/k.py\n+++ b/k.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n")
    assert diff.code is None and "diff" in diff.reason
    fenced_diff = extract_code("```diff\n--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-a\n+b\n```")
    assert fenced_diff.code is None and "diff" in fenced_diff.reason
    fragment = extract_code("```python\n@triton.jit\ndef k(x):\n    pass\n```")
    assert fragment.code is None and "fragment" in fragment.reason
    other = extract_code("```bash\npip install triton\n```")
    assert other.code is None and "not Python" in other.reason


def test_manual_engine_edit_and_pasted_reply() -> None:
    ctx = _ctx()
    engine = ManualEngine()
    none = engine.propose("dtype_fix", ctx)
    assert not none.applicable and "no edited code" in none.not_applicable_reason
    edited = ctx.current_code.replace("tl.dot(a.to(tl.float32), b.to(tl.float32))", "tl.dot(a, b)")
    engine.submit(edited)
    cand = engine.propose("dtype_fix", ctx)
    assert cand.applicable and cand.code.strip() == edited.strip() and cand.engine == "manual"
    assert "user's own edit" in cand.rationale
    engine.submit(ctx.current_code)
    same = engine.propose("dtype_fix", ctx)
    assert not same.applicable and "identical" in same.not_applicable_reason
    # a reply pasted from a chat LLM, for the exact prompt the product shows
    prompt = engine.prompt_for("dtype_fix", ctx)
    assert prompt == render_stage_prompt("dtype_fix", ctx)
    assert "Data types" in prompt and ctx.current_code.strip().splitlines()[0] in prompt
    pasted = f"Great question! Here's the optimized version:\n\n```python\n{edited}```\nHope it helps."
    engine.submit(pasted, kind="pasted_reply", model="some-chat-model")
    cand = engine.propose("dtype_fix", ctx)
    assert cand.applicable and cand.code.strip() == edited.strip() and cand.model == "some-chat-model"
    assert cand.prompt == prompt and cand.raw_reply == pasted
    assert cand.rationale == "Great question! Here's the optimized version:\nHope it helps."
    engine.submit("Sorry, I can't help with that.", kind="pasted_reply")
    na = engine.propose("dtype_fix", ctx)
    assert not na.applicable and "no code" in na.not_applicable_reason
    # get_engine passes settings through
    assert get_engine("manual", text=edited).propose("dtype_fix", ctx).applicable


def test_prompt_carries_feedback() -> None:
    ctx = _ctx()
    text = render_stage_prompt("dtype_fix", ctx, feedback="verdict: wrong_answer - max abs error 3.5")
    assert "max abs error 3.5" in text
    given = ProposalContext(stage="dtype_fix", original_code="a", current_code="a", prompt="PROMPT")
    assert render_stage_prompt("dtype_fix", given) == "PROMPT"
    assert "verdict: crash" in render_stage_prompt("dtype_fix", given, feedback="verdict: crash")


def test_the_pasted_replys_rationale_is_the_candidates() -> None:
    """The reply's bullets (the prompts ask for them after the code block) become the rationale;
    a bare module (a hand edit) has none of its own."""
    ctx = _ctx()
    edited = ctx.current_code.replace("tl.dot(a.to(tl.float32), b.to(tl.float32))", "tl.dot(a, b)")
    reply = ("<think>the operands are fp16 already</think>\n```python\n" + edited + "```\n\n"
             "- Feed the fp16 tiles to tl.dot directly; the accumulator stays fp32.\n"
             "- The output dtype is unchanged.\n")
    cand = ManualEngine(reply, kind="pasted_reply").propose("dtype_fix", ctx)
    assert cand.rationale == ("- Feed the fp16 tiles to tl.dot directly; the accumulator stays fp32.\n"
                              "- The output dtype is unchanged.")
    assert reply_prose(reply) == cand.rationale
    bare = ManualEngine(edited, kind="pasted_reply").propose("dtype_fix", ctx)
    assert bare.rationale == "reply pasted from a chat LLM for stage dtype_fix"
    assert ManualEngine(edited, rationale="mine").propose("dtype_fix", ctx).rationale == "mine"
