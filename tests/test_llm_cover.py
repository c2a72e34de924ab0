"""The llm engine inside the CoVeR loop: broken code first, the verdict fed back, a fixed reply
second; real HTTP to a local OpenAI-compatible server, real verification in the interpreter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_llm_engine import FakeOpenAI, _engine, _fenced

from xeforge_core.pipeline.controller import MemoryController
from xeforge_core.pipeline.loop import LoopOptions, run_stage
from xeforge_core.problem import load_problem
from xeforge_core.verify import VerifyOptions

FIXTURES = Path(__file__).parent / "fixtures" / "codemods"
FAST = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, use_cache=False,
                     measure_performance=False)


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


def test_broken_then_fixed_across_two_iterations(endpoint: FakeOpenAI, tmp_path: Path) -> None:
    problem = load_problem(FIXTURES / "matmul_fp32_dot.py")
    slow = "acc += tl.dot(a.to(tl.float32), b.to(tl.float32))"
    assert slow in problem.kernel.source
    fixed = problem.kernel.source.replace(slow, "acc = tl.dot(a, b, acc)")
    broken = problem.kernel.source.replace(slow, "acc = tl.dot(a, b_tile, acc)")  # undefined name
    endpoint.reply(_fenced(broken, after="Operands stay fp16."))
    endpoint.reply(_fenced(fixed, after="Fixed the operand name."))
    engine = _engine(endpoint, tmp_path)

    outcome = run_stage(MemoryController(problem, device="cpu"), "dtype_fix", engine,
                        LoopOptions(iterations=2, auto=True, verify_options=FAST))

    assert len(endpoint.requests) == 2
    first, second = outcome.attempts[0], outcome.attempts[1]
    assert first.status == "failed" and first.verdict is not None and not first.verdict.passed
    assert second.verdict is not None and second.verdict.passed, second.verdict.feedback()
    # the second prompt carried the first verdict's feedback
    second_prompt = endpoint.requests[1]["body"]["messages"][-1]["content"]
    first_prompt = endpoint.requests[0]["body"]["messages"][-1]["content"]
    assert first.verdict.kind.value in second_prompt and first.verdict.kind.value not in first_prompt
    assert "b_tile" in second_prompt
    assert outcome.best_source is not None and "acc = tl.dot(a, b, acc)" in outcome.best_source
    assert engine.usage_by_stage["dtype_fix"].calls == 2
