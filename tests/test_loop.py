"""The CoVeR loop on real verification (cpu interpreter): a broken candidate then a fixed one, a
worker that crashes in the middle of a stage, "kept current", best-of-k, cancellation, the
portability preparatory stage, a stage the engine cannot do, and the same rules in memory.

Real ``verify()`` runs kernels in isolated workers; the tiled GEMM sample's ``ci`` variant keeps
that small. One verdict cache directory is shared by this module, so a baseline is run once."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from xeforge_core.codemods.portability import hard_coded_devices
from xeforge_core.engines import get_engine
from xeforge_core.engines.base import Candidate, ProposalContext
from xeforge_core.engines.manual import ManualEngine
from xeforge_core.pipeline.controller import MemoryController, SessionController
from xeforge_core.pipeline.loop import LoopOptions, classify, prepare_portability, run_pipeline, run_stage
from xeforge_core.problem import load_problem, problem_from_source
from xeforge_core.session import Session
from xeforge_core.verdict import PerformanceResult, Step, StepStatus, TimingStats, Verdict, VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.vocab.status import AttemptStatus, OutcomeStatus, StageStatus

ROOT = Path(__file__).resolve().parents[1]
GEMM = ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py"
UPCAST = "tl.dot(a.to(tl.float32), b.to(tl.float32))"
QUICK = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, timeout_s=240)


@pytest.fixture(scope="module", autouse=True)
def shared_cache(tmp_path_factory):
    old = os.environ.get("XEFORGE_CACHE_DIR")
    os.environ["XEFORGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("xeforge-cache"))
    yield
    if old is None:
        os.environ.pop("XEFORGE_CACHE_DIR", None)
    else:
        os.environ["XEFORGE_CACHE_DIR"] = old


class ScriptedManual:
    """The manual engine answering with the user's next edit each time it is asked (a person
    pasting a new reply after reading the verdict). Records the feedback it was given."""

    name = "manual"

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)
        self.feedback: list[str | None] = []
        self.inner = ManualEngine()

    def propose(self, stage: str, context: ProposalContext, feedback: str | None = None) -> Candidate:
        self.feedback.append(feedback)
        self.inner.submit(self.texts.pop(0), kind="edit", rationale=f"edit {len(self.feedback)}")
        return self.inner.propose(stage, context, feedback)


def dtype_fixed(source: str) -> str:
    assert UPCAST in source
    return source.replace(UPCAST, "tl.dot(a, b)")


@pytest.fixture
def gemm_session(tmp_path) -> Session:
    return Session.create(load_problem(GEMM), workspace=tmp_path, plan=["dtype_fix", "autotuning"],
                          device={"type": "cpu", "interpreter": True})


def test_manual_engine_broken_then_fixed(gemm_session):
    base = gemm_session.source()
    broken = base.replace(UPCAST, "tl.dott(a, b)")
    engine = ScriptedManual([broken, dtype_fixed(base)])
    events: list[dict] = []
    outcome = run_stage(SessionController(gemm_session, "cpu"), "dtype_fix", engine,
                        LoopOptions(verify_fn=verify, iterations=3, auto=True, verify_options=QUICK,
                                    on_progress=events.append))
    assert outcome.status == "approved", outcome.reason
    assert outcome.iterations == 2 and [a.status for a in outcome.attempts] == [AttemptStatus.FAILED, AttemptStatus.CORRECT]
    # the first verdict went back to the engine
    assert engine.feedback[0] is None
    assert engine.feedback[1] and "dott" in engine.feedback[1]
    first = gemm_session.candidate("dtype_fix/1")
    assert first.verdict.kind in (VerdictKind.COMPILE_ERROR, VerdictKind.RUNTIME_ERROR)
    assert first.status == "superseded" and first.iteration == 1
    head = gemm_session.version("head")
    assert head.candidate == "dtype_fix/2" and head.engine == "manual" and head.iteration == 2
    assert head.trailers["Speedup"] == "not measured" and "speed not measured" in head.trailers["Note"]
    assert gemm_session.source() == dtype_fixed(base)
    assert gemm_session.stages["dtype_fix"]["status"] == "done"
    assert gemm_session.current_stage == "autotuning"
    assert {"propose", "verify", "verify_progress", "verdict", "approve", "done"} <= {e["event"] for e in events}


def test_worker_crash_mid_stage_loses_no_committed_work(gemm_session):
    base = gemm_session.source()
    # committed work first (the same code test_manual_engine_broken_then_fixed approves, so the
    # cached baseline outputs are reused)
    committed = gemm_session.commit_manual(dtype_fixed(base), stage="dtype_fix", message="fix dtypes by hand")
    current = gemm_session.source()
    crashing = current.replace("        return kernel_function(x, self.weight)",
                               "        import os\n        os.abort()\n        return kernel_function(x, self.weight)")
    assert crashing != current
    engine = ScriptedManual([crashing, current + "\n# the same kernel, documented\n"])
    outcome = run_stage(SessionController(gemm_session, "cpu"), "autotuning", engine,
                        LoopOptions(verify_fn=verify, iterations=2, auto=True, verify_options=QUICK))
    crashed = gemm_session.candidate("autotuning/1")
    assert crashed.verdict.kind is VerdictKind.CRASH, crashed.verdict.reason
    # the committed work is intact, and the stage went on to approve the fixed candidate
    history = gemm_session.history()
    assert [v.sha for v in history[:2]] == [gemm_session.baseline, committed.sha]
    assert outcome.status == "approved" and history[-1].candidate == "autotuning/2"
    assert history[-1].sha == gemm_session.head and len(history) == 3
    # after a restart the same: nothing lost
    reopened = Session.open(gemm_session.path)
    assert [v.sha for v in reopened.history()] == [v.sha for v in history]
    assert reopened.candidate("autotuning/1").verdict.kind is VerdictKind.CRASH
    assert json.loads(subprocess.run(
        ["git", "show", "refs/candidates/autotuning/1:.xeforge/verdicts/autotuning/1.json"], cwd=reopened.path,
        capture_output=True, text=True, check=True).stdout)["kind"] == "crash"


def rules_fixed(source: str) -> str:
    cand = get_engine("rules").propose("dtype_fix", ProposalContext(stage="dtype_fix", original_code=source,
                                                                    current_code=source, target="nvidia_h200"))
    assert cand.applicable and cand.code != source
    return cand.code


def test_rules_engine_keeps_current_when_nothing_to_do(tmp_path):
    fixed_src = rules_fixed(GEMM.read_text())
    problem = problem_from_source(fixed_src, name="gemm_fixed",
                                  spec_text=GEMM.with_suffix(".yaml").read_text())
    session = Session.create(problem, workspace=tmp_path, plan=["dtype_fix"])
    calls: list[str] = []

    def must_not_run(*args, **kwargs):
        calls.append("verify")
        raise AssertionError("nothing to verify")

    outcome = run_stage(SessionController(session), "dtype_fix", get_engine("rules"),
                        LoopOptions(verify_fn=must_not_run, auto=True))
    assert outcome.status == "kept_current" and not calls
    assert outcome.reason.startswith("kept current: rules:")
    assert session.stages["dtype_fix"]["status"] == "kept_current"
    assert len(session.history()) == 1 and session.current_stage is None


def _timed(speedup: float) -> Verdict:
    """A GPU-style verdict (timing measured): the interpreter cannot time kernels, so the
    speed rules are exercised with verdict data."""
    t = TimingStats(median_us=100.0, mean_us=100.0, min_us=99.0, cv=0.01, trials=20)
    c = TimingStats(median_us=100.0 / speedup, mean_us=100.0 / speedup, min_us=99.0 / speedup, cv=0.01, trials=20)
    return Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.PASSED)],
                   performance=[PerformanceResult(variant="bench-gpu", baseline=t, candidate=c, speedup=speedup)],
                   device={"type": "cuda", "index": 0, "name": "NVIDIA H200"})


def test_kept_current_when_nothing_beats_the_current_version(gemm_session):
    base = gemm_session.source()
    speeds = iter([0.8, 1.01, 0.95])
    feedback_seen: list[str | None] = []

    class Proposer:
        name = "llm"

        def __init__(self):
            self.n = 0

        def propose(self, stage, context, feedback=None):
            feedback_seen.append(feedback)
            self.n += 1
            return Candidate(code=base + f"\n# attempt {self.n}\n", engine="llm", model="m", rationale="try")

    outcome = run_stage(SessionController(gemm_session), "dtype_fix", Proposer(),
                        LoopOptions(iterations=3, auto=True, verify_fn=lambda problem, code, **kw: _timed(next(speeds))))
    assert outcome.status == "kept_current"
    assert "no candidate beat the current version" in outcome.reason and "1.010x" in outcome.reason
    assert all(a.status == AttemptStatus.NOT_FASTER for a in outcome.attempts)
    assert len(gemm_session.history()) == 1  # slower/equal candidates are never accepted
    assert [c.status for c in gemm_session.candidates()] == ["pending"] * 3
    assert "correct but not faster" in (feedback_seen[1] or "")


def test_best_of_k_approves_the_fastest_and_keeps_the_rest(gemm_session):
    base = gemm_session.source()
    speeds = {"a": 1.2, "b": 1.9, "c": 0.7}
    order = iter(["a", "b", "c"])

    class Proposer:
        name = "llm"

        def propose(self, stage, context, feedback=None):
            return Candidate(code=base + f"\n# variant {next(order)}\n", engine="llm", rationale="variant")

    def timed(problem, code, **kw):
        return _timed(speeds[code.strip()[-1]])

    outcome = run_stage(SessionController(gemm_session), "autotuning", Proposer(),
                        LoopOptions(best_of=3, iterations=1, auto=True, verify_fn=timed))
    assert outcome.status == "approved" and outcome.best == "autotuning/2"
    assert outcome.speedup == pytest.approx(1.9)
    statuses = {c.id: c.status for c in gemm_session.candidates()}
    assert statuses == {"autotuning/1": "superseded", "autotuning/2": "approved", "autotuning/3": "superseded"}
    assert gemm_session.version("head").speedup == pytest.approx(1.9)


def test_without_auto_the_best_candidate_waits_or_is_decided(gemm_session):
    base = gemm_session.source()

    class Proposer:
        name = "llm"

        def __init__(self):
            self.n = 0

        def propose(self, stage, context, feedback=None):
            self.n += 1
            return Candidate(code=base + f"\n# v{self.n}\n", engine="llm", rationale="v")

    ok = lambda problem, code, **kw: _timed(1.5)  # noqa: E731
    controller = SessionController(gemm_session)
    pending = run_stage(controller, "dtype_fix", Proposer(), LoopOptions(verify_fn=ok))
    assert pending.status is OutcomeStatus.REVIEW and pending.best == "dtype_fix/1"
    assert len(gemm_session.history()) == 1 and gemm_session.stages["dtype_fix"]["status"] == "review"
    # rejecting the candidate the stage waits on leaves the stage idle, not running
    controller.reject("dtype_fix/1", "not this one")
    assert gemm_session.stages["dtype_fix"]["status"] == StageStatus.PENDING
    assert gemm_session.current_stage == "dtype_fix"
    # a person rejects the next, approves the one after
    answers = iter([(False, "too clever"), True])
    decided = run_stage(controller, "dtype_fix", Proposer(),
                        LoopOptions(verify_fn=ok, iterations=3, decide=lambda rec, verdict: next(answers)))
    assert decided.status == "approved" and decided.best == "dtype_fix/3"
    assert gemm_session.candidate("dtype_fix/2").status == "rejected"
    assert gemm_session.candidate("dtype_fix/2").reason == "too clever"


def test_a_rejection_ends_the_stage_for_a_deterministic_engine(gemm_session):
    """The rules engine would give the same candidate again: after a person rejects it the stage
    is kept current with that reason, and the engine is not asked again (its reply would leak
    the text meant for an LLM into the reason)."""
    base = gemm_session.source()
    asked = []

    class Rules:
        name = "rules"

        def propose(self, stage, context, feedback=None):
            asked.append(feedback)
            return Candidate(code=base + "\n# rules\n", engine="rules", rationale="r")

    outcome = run_stage(SessionController(gemm_session), "dtype_fix", Rules(),
                        LoopOptions(verify_fn=lambda problem, code, **kw: _timed(1.5), iterations=3,
                                    decide=lambda rec, verdict: (False, "no answer on the terminal")))
    assert asked == [None] and outcome.status is OutcomeStatus.KEPT_CURRENT and outcome.iterations == 1
    assert outcome.reason == ("kept current: dtype_fix/1 rejected by the user: no answer on the terminal; the rules "
                              "engine is deterministic and has no other rewrite for this stage (the llm or manual "
                              "engine can propose another)")


def test_cancel_stops_between_steps(gemm_session):
    cancel = threading.Event()

    class Proposer:
        name = "llm"

        def propose(self, stage, context, feedback=None):
            cancel.set()  # the user presses Cancel while the engine works
            return Candidate(code=context.current_code + "\n# x\n", engine="llm")

    outcome = run_stage(SessionController(gemm_session), "dtype_fix", Proposer(),
                        LoopOptions(verify_fn=lambda *a, **k: _timed(2.0), iterations=3, cancel=cancel))
    assert outcome.status is OutcomeStatus.CANCELLED
    assert len(gemm_session.history()) == 1
    assert gemm_session.stages["dtype_fix"]["status"] == "pending"  # idle again, not "running"


def test_stage_without_a_session_and_engine_errors():
    problem = load_problem(GEMM)

    class Failing:
        name = "llm"

        def propose(self, stage, context, feedback=None):
            raise RuntimeError("endpoint down")

    memory = MemoryController(problem, target="cuda")
    outcome = run_stage(memory, "dtype_fix", Failing(), LoopOptions(verify_fn=lambda *a, **k: _timed(2.0)))
    assert outcome.status == "kept_current" and "endpoint down" in outcome.reason
    outcome2 = run_stage(memory, "dtype_fix", get_engine("rules"),
                         LoopOptions(verify_fn=lambda *a, **k: _timed(2.0), auto=True))
    assert outcome2.status == "approved" and outcome2.attempts[0].candidate.code == rules_fixed(problem.kernel.source)
    # in memory, the same rules as in a session: the approved code is the current version
    assert memory.current().kernel.source == rules_fixed(problem.kernel.source)
    assert memory.candidate(outcome2.best).status == "approved" and memory.stage_status("dtype_fix") == "done"


def test_classify_rules():
    assert classify(_timed(1.5))[0] == "faster"
    assert classify(_timed(1.01))[0] == AttemptStatus.NOT_FASTER
    assert classify(_timed(0.5))[0] == AttemptStatus.NOT_FASTER
    assert classify(Verdict(kind=VerdictKind.WRONG_ANSWER, reason="x"))[0] == AttemptStatus.FAILED
    cpu = Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.NOT_MEASURED)])
    assert classify(cpu)[0] == AttemptStatus.CORRECT
    inconclusive = _timed(1.5)
    inconclusive.steps = [Step("performance", StepStatus.INCONCLUSIVE, summary="cv too high")]
    assert classify(inconclusive)[0] == AttemptStatus.NOT_FASTER


def test_a_candidate_slower_at_one_timed_variant_is_not_kept():
    """Faster over the geometric mean of two sizes (1.15x and 0.96x, the H200's GELU pair) but
    measurably slower at the larger one: a regression there, never accepted automatically."""
    verdict = _timed(1.15)
    t = TimingStats(median_us=122.0, mean_us=122.0, min_us=121.0, cv=0.01, trials=20)
    c = TimingStats(median_us=127.0, mean_us=127.0, min_us=126.0, cv=0.01, trials=20)
    verdict.performance.append(PerformanceResult(variant="bench", baseline=t, candidate=c, speedup=0.96,
                                                 speedup_low=0.952, speedup_high=0.972))
    verdict.performance[0].speedup_low, verdict.performance[0].speedup_high = 1.14, 1.16
    status, reason, _ = classify(verdict)
    assert status == AttemptStatus.NOT_FASTER and "slower at bench" in reason
    verdict.performance[1] = PerformanceResult(variant="bench", baseline=t, candidate=t, speedup=1.0,
                                               speedup_low=0.99, speedup_high=1.01)
    assert classify(verdict)[0] == "faster"  # no difference at one size, faster overall


def test_hard_coded_device_detection():
    src = 'x = torch.empty(3, device="xpu")\ntorch.xpu.synchronize()\n'
    assert hard_coded_devices(src, "cpu") == ["xpu"] and hard_coded_devices(src, "xpu") == []
    assert hard_coded_devices("y = x.cuda()\n", "cpu") == ["cuda"]
    assert hard_coded_devices(GEMM.read_text(), "cpu") == []


def test_portability_prepares_a_kernel_that_hard_codes_xpu(tmp_path):
    src = GEMM.read_text().replace(
        "    out = torch.empty((m, n), dtype=x.dtype, device=x.device)",
        '    assert torch.xpu.is_available(), "XPU is not available"\n'
        '    x = x.to("xpu")\n'
        '    out = torch.empty((m, n), dtype=x.dtype, device="xpu")')
    problem = problem_from_source(src, name="gemm_xpu", spec_text=GEMM.with_suffix(".yaml").read_text(),
                                  reference_source=GEMM.with_name("07_gemm_fp32_upcast_ref.py").read_text())
    session = Session.create(problem, workspace=tmp_path, plan=["dtype_fix"], device={"type": "cpu"})
    outcome = prepare_portability(SessionController(session, "cpu"), LoopOptions(verify_fn=verify, verify_options=QUICK))
    assert outcome is not None and outcome.status == "approved", outcome.reason
    head = session.version("head")
    assert head.stage == "portability" and head.engine == "rules" and head.kind == "portability"
    assert '"xpu"' not in session.source() and hard_coded_devices(session.source(), "cpu") == []
    assert head.cumulative_speedup == pytest.approx(1.0)
    assert "verified on its own" in head.trailers["Note"]  # the original cannot run here
    assert session.stages["portability"]["status"] == "done"
    # nothing more to port the second time
    assert prepare_portability(SessionController(session, "cpu"),
                               LoopOptions(verify_fn=verify, verify_options=QUICK)) is None


def test_portability_fixes_a_grid_and_checks_the_port_against_the_original(tmp_path):
    from tests.test_codemods_verify import autotuned_with_fixed_grid

    problem = load_problem(autotuned_with_fixed_grid(tmp_path))
    session = Session.create(problem, workspace=tmp_path / "ws", plan=["dtype_fix"], device={"type": "cpu"})
    outcome = prepare_portability(SessionController(session, "cpu"), LoopOptions(verify_fn=verify, verify_options=QUICK))
    assert outcome is not None and outcome.status == "approved", outcome.reason
    head = session.version("head")
    assert 'META["BLOCK_M"]' in session.source()
    # the original runs in the interpreter (its autotuner picks the 32-wide config the grid fits),
    # so the port was held to the original's answers under every config
    assert "verified against the original" in head.trailers["Note"]
    assert "launches autotuned matmul_kernel with a grid that fixes the tile sizes" in head.trailers["Note"]


def _cpu_ok(problem, code, **kwargs):
    """The verdict the interpreter gives a correct candidate (speed not measured); used where the
    test is about the loop's decisions, not about the kernels."""
    return Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.NOT_MEASURED)],
                   device={"type": "cpu", "interpreter": True})


def test_pipeline_runs_the_remaining_plan_and_resumes(gemm_session):
    rules = get_engine("rules")
    # without auto or a decision, the pipeline stops at the first stage awaiting a decision
    first = run_pipeline(SessionController(gemm_session, "cpu"), rules, LoopOptions(verify_fn=_cpu_ok))
    assert [o.status for o in first] == ["review"] and gemm_session.current_stage == "dtype_fix"
    gemm_session.approve(first[0].best)
    assert gemm_session.current_stage == "autotuning"
    # a restart later: the pipeline continues from the current stage
    reopened = Session.open(gemm_session.path)
    rest = run_pipeline(SessionController(reopened, "cpu"), rules, LoopOptions(verify_fn=_cpu_ok, auto=True))
    assert [(o.stage, o.status) for o in rest] == [("autotuning", "approved")]
    assert reopened.current_stage is None
    assert [v.stage for v in reopened.history()] == ["baseline", "dtype_fix", "autotuning"]


def test_a_version_change_during_the_stage_is_not_overwritten(gemm_session):
    other = Session.open(gemm_session.path)
    base = gemm_session.source()

    class Proposer:
        name = "llm"

        def propose(self, stage, context, feedback=None):
            # meanwhile, the user commits an edit in another window
            other.commit_manual(base + "\n# edited elsewhere\n", message="edit elsewhere")
            return Candidate(code=base + "\n# candidate\n", engine="llm")

    outcome = run_stage(SessionController(gemm_session), "dtype_fix", Proposer(), LoopOptions(verify_fn=_cpu_ok, auto=True))
    assert outcome.status == "review" and "could not be approved" in outcome.reason
    assert gemm_session.source().endswith("# edited elsewhere\n")
    assert gemm_session.candidate("dtype_fix/1").status == "pending"


def test_a_stage_the_engine_cannot_do_is_answered_at_once(gemm_session):
    """The rules engine has no codemod for the algorithmic stage: the loop says so before any
    device probe, worker or candidate, and the pipeline moves on."""
    controller = SessionController(gemm_session)  # the product's verifier, the recorded device "cpu"
    outcome = run_stage(controller, "algorithmic", get_engine("rules"), LoopOptions())
    # the device was not probed (it would be a DeviceInfo now) and nothing was verified
    assert outcome.status is OutcomeStatus.KEPT_CURRENT and controller.device == "cpu"
    assert "no codemod for stage 'algorithmic'" in outcome.reason and "llm or manual" in outcome.reason
    assert gemm_session.candidates() == [] and gemm_session.stages["algorithmic"]["status"] == "kept_current"


def test_a_stage_reason_names_the_verdict_kind_once():
    from xeforge_core.pipeline.outcomes import kind_and_reason
    from xeforge_core.verdict import Verdict, VerdictKind

    said = kind_and_reason(Verdict(kind=VerdictKind.INCONCLUSIVE, reason="inconclusive: the baseline's output ..."))
    assert said == "inconclusive: the baseline's output ..."
    said = kind_and_reason(Verdict(kind=VerdictKind.WRONG_ANSWER, reason="wrong answer on variant ci"))
    assert said == "wrong_answer wrong answer on variant ci"


def test_a_problem_whose_baseline_disagrees_with_its_reference_stops_after_its_first_stage(gemm_session):
    """Every verdict of an inconsistent problem says its baseline disagrees with its reference,
    so no candidate can be judged faster than a right one; ``xeforge batch`` ran every stage's
    iterations for minutes and called the row done. The pipeline stops after the first stage
    that shows it, and says why."""
    from xeforge_core.verdict import INCONSISTENT_PROBLEM, Finding

    base = gemm_session.source()
    seen: list[dict] = []

    def inconsistent(problem, code, **kw):
        v = _timed(1.0)
        v.kind = VerdictKind.INCONSISTENT
        v.findings.append(Finding(INCONSISTENT_PROBLEM, "the problem's baseline disagrees with its reference on 1 "
                                  "run(s): the baseline is wrong", "warning"))
        return v

    class Proposer:
        name = "llm"

        def propose(self, stage, context, feedback=None):
            return Candidate(code=base + "\n# try\n", engine="llm", rationale="try")

    outcomes = run_pipeline(SessionController(gemm_session), Proposer(),
                            LoopOptions(iterations=1, auto=True, portability=False, verify_fn=inconsistent,
                                        on_progress=seen.append))
    assert [o.stage for o in outcomes] == ["dtype_fix"], outcomes
    assert any(p["event"] == "stopped" and "inconsistent" in p["message"] for p in seen), seen
