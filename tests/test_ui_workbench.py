"""The workbench controller (xeforge_core.ui.workbench) without a browser: plan editing, the
API key kept out of the session, manual replies, approval rules, and verification jobs that
fail or are cancelled."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from xeforge_core.ui.review import ReviewStatus
from xeforge_core.ui.workbench import EngineSettings, Workbench, WorkbenchError

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def wb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workbench:
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    bench = Workbench(tmp_path / "ws")
    bench.load_sample("07_gemm_fp32_upcast")
    return bench


def test_plan_add_skip_reorder(wb: Workbench) -> None:
    session = wb.start_session()
    assert session.plan[0] == "dtype_fix"
    wb.move_stage("autotuning", -10)
    assert session.plan[0] == "autotuning"
    wb.add_stage("fusion")
    assert "fusion" in session.plan
    assert session.plan.index("fusion") < session.plan.index("block_pointers")
    wb.skip_stage("autotuning")
    assert session.current_stage == "dtype_fix"
    items = {i.stage: i for i in wb.plan_items()}
    assert items["autotuning"].status == "skipped" and items["dtype_fix"].current
    assert any("line 35" in text for text in items["dtype_fix"].issues)
    wb.add_stage("autotuning")  # re-open a skipped stage
    assert session.stages["autotuning"]["status"] == "pending"
    with pytest.raises(WorkbenchError, match="unknown stage"):
        wb.add_stage("warp_magic")


def test_api_key_stays_out_of_history(wb: Workbench) -> None:
    wb.settings = EngineSettings(engine="llm", endpoint="http://127.0.0.1:9/v1", model="m", api_key=SECRET)
    assert SECRET not in repr(wb.settings) and SECRET not in str(wb.settings.public())
    assert wb.settings.engine_kwargs()["api_key"] == SECRET
    session = wb.start_session()
    code = session.source("head").replace("num_warps=4", "num_warps=8")
    rec = session.add_candidate("xpu_specific", code, engine="llm", rationale=f"reply echoed the key {SECRET}")
    session.reject(rec.id, f"key {SECRET} in the reply")
    dump = subprocess.run(["git", "-C", str(session.path), "log", "--all", "-p", "--format=%B"],
                          capture_output=True, text=True, check=True).stdout
    assert "[REDACTED]" in dump and SECRET not in dump


def test_manual_reply_without_code_and_unverified_approval(wb: Workbench) -> None:
    wb.start_session()
    with pytest.raises(WorkbenchError, match="no candidate"):
        wb.submit_manual("Sorry, I cannot help with that.")
    # a module with nothing to call is refused as `xeforge verify` refuses it, before any worker
    no_model = "import triton\n\n@triton.jit\ndef k(x_ptr):\n    pass\n\nclass Thing:\n    pass\n"
    with pytest.raises(WorkbenchError, match=r"no candidate: the candidate defines no Model or ModelNew class "
                                             r"\(classes found: Thing\)"):
        wb.submit_manual(no_model)
    with pytest.raises(WorkbenchError, match="no candidate under review"):
        wb.approve()
    current = wb.session.source("head")
    review = wb.submit_manual("```python\n" + current.replace("num_warps=4", "num_warps=8") + "```")
    assert review.engine == "manual" and review.status is ReviewStatus.PROPOSED
    with pytest.raises(WorkbenchError, match="cannot approve: not verified yet: verify it first"):
        wb.approve()  # never verified: said so (not "the code changed since it was verified")
    assert "dtype_fix" in wb.prompt_for("dtype_fix")


def test_verification_failure_and_cancel_keep_the_review(wb: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    import xeforge_core.verify as verify_mod

    wb.start_session()
    current = wb.session.source("head")
    wb.submit_manual(current.replace("num_warps=4", "num_warps=8"))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("worker pool exploded")

    monkeypatch.setattr(verify_mod, "verify", broken)
    job = wb.start_verify()
    assert wb.review.status is ReviewStatus.VERIFYING
    assert job.wait(10)
    messages = wb.poll()
    # a verifier that fails is a verdict (as in the CoVeR loop), kept with the candidate
    assert messages and messages[0][0] == "error" and "worker pool exploded" in messages[0][1]
    assert wb.review.verdict.kind.value == "runtime_error" and not wb.review.can_approve()[0]
    assert wb.session.candidate(wb.review_candidate_id).verdict.kind.value == "runtime_error"

    started = threading.Event()

    def slow(*args: object, cancel: threading.Event, **kwargs: object) -> None:
        started.set()
        cancel.wait(10)

    monkeypatch.setattr(verify_mod, "verify", slow)
    wb.edit(current.replace("num_warps=4", "num_warps=16"))  # new code: verified afresh
    job = wb.start_verify()
    assert started.wait(10)
    wb.cancel("verify")
    assert job.wait(10)
    assert wb.poll() == [("warning", "verification cancelled")]
    assert wb.review.status is ReviewStatus.PROPOSED
    assert wb.session.candidate(wb.review_candidate_id).verdict is None  # no verdict was reached
    assert len(wb.session.history()) == 1  # nothing committed, nothing lost


def test_a_bad_uploaded_spec_is_named_in_the_error(wb: Workbench) -> None:
    from xeforge_core.ui.validate import InputError

    root = Path(__file__).resolve().parents[1] / "sample_kernels"
    kernel = (root / "07_gemm_fp32_upcast.py").read_bytes()
    spec = (root / "07_gemm_fp32_upcast.yaml").read_text().replace("params: [", "params: [Z, ", 1)
    before = wb.loaded
    with pytest.raises(InputError) as err:
        wb.load_upload("k.py", kernel, yaml_name="my_spec.yaml", yaml_data=spec.encode())
    assert "my_spec.yaml" in str(err.value) and "Z" in str(err.value)
    assert wb.loaded is before  # nothing already loaded is lost


def _ok_verdict(*args: object, **kwargs: object) -> object:
    from xeforge_core.verdict import Step, StepStatus, Verdict, VerdictKind

    return Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.NOT_MEASURED)],
                   device={"type": "cpu", "interpreter": True})


def test_a_pasted_reply_keeps_its_rationale_into_the_commit(wb: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    import xeforge_core.verify as verify_mod

    monkeypatch.setattr(verify_mod, "verify", _ok_verdict)
    session = wb.start_session()
    current = session.source("head")
    prompt = wb.prompt_for(session.current_stage)
    assert prompt.splitlines()[0] == f"# Stage 1 of {len(session.plan)}: Data types"
    fixed = current.replace("tl.dot(a.to(tl.float32), b.to(tl.float32))", "tl.dot(a, b)")
    reply = ("```python\n" + fixed + "```\n\n- Feed the fp16 operands to tl.dot as loaded.\n"
             "- Accumulate in fp32 as before.\n")
    review = wb.submit_manual(reply, model="a-chat-model")
    assert review.rationale == "- Feed the fp16 operands to tl.dot as loaded.\n- Accumulate in fp32 as before."
    job = wb.start_verify()
    assert job.wait(30)
    assert wb.poll()[0][0] == "success"
    # approving is a git operation: the analysis of the new version was made when it was proposed
    calls: list[str] = []
    monkeypatch.setattr("xeforge_core.ui.workbench.analyze", lambda *a, **k: calls.append("analyze"))
    version = wb.approve()
    assert calls == [] and wb.analysis is not None and wb.analysis.source == fixed
    assert version.summary == "dtype_fix: Feed the fp16 operands to tl.dot as loaded. (manual)"
    assert "- Accumulate in fp32 as before." in version.message and version.model == "a-chat-model"
    assert session.stages["dtype_fix"]["status"] == "done"


def test_after_a_reject_the_stage_is_idle_and_the_counts_agree(wb: Workbench,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import xeforge_core.verify as verify_mod

    monkeypatch.setattr(verify_mod, "verify", _ok_verdict)
    wb.device = None
    session = wb.start_session()
    job = wb.start_propose("dtype_fix", "rules")
    assert job.wait(60)
    (level, text), = wb.poll()
    assert level == "success" and "after 1 CoVeR iteration:" in text and "iteration(s)" not in text
    assert wb.review.iteration_count == 1 and len(wb.review.iterations) == 1
    assert session.stages["dtype_fix"]["status"] == "review"
    wb.reject("not now")
    item = next(i for i in wb.plan_items() if i.stage == "dtype_fix")
    assert item.status == "pending" and item.current and "rejected" in item.reason
    assert session.candidate("dtype_fix/1").status == "rejected"


def test_approve_and_reject_are_git_operations_in_process(wb: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    """No analysis, no verification and no git subprocess for a reject; for an approve only the
    working-tree checkout (``git read-tree``) runs as a child process."""
    import subprocess

    import xeforge_core.verify as verify_mod

    monkeypatch.setattr(verify_mod, "verify", _ok_verdict)
    session = wb.start_session()
    spawned: list[str] = []
    execute = subprocess.Popen._execute_child

    def counting(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> object:
        spawned.append(" ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args))
        return execute(self, args, *rest, **kwargs)

    current = session.source("head")
    for action, warps in (("reject", 8), ("approve", 16)):
        wb.submit_manual(current.replace("num_warps=4", f"num_warps={warps}"))
        job = wb.start_verify()
        assert job.wait(30) and wb.poll()[0][0] == "success"
        spawned.clear()
        with monkeypatch.context() as m:
            m.setattr(subprocess.Popen, "_execute_child", counting)
            getattr(wb, action)()
        expected = ["git read-tree -u --reset HEAD"] if action == "approve" else []
        assert spawned == expected, (action, spawned)
    assert [v.kind for v in session.history()] == ["baseline", "manual"]


def test_unticking_the_grid_hunk_of_a_swizzle_is_caught_at_a_derived_variant(wb: Workbench) -> None:
    # the rules engine's xpu_specific proposal for the GEMM sample swizzles the tiles over a 1-D
    # grid; keeping the kernel change but not the launch-grid change leaves every program of
    # grid axis 1 doing axis 0's tiles. The ci shape fits one tile along N, so only the size
    # derived from the tiles (three programs on every growing axis) can show the unwritten tiles.
    from xeforge_core.diffmerge import diff_hunks

    session = wb.start_session()
    wb.set_target("arc_pro_b70")
    job = wb.start_propose("xpu_specific", engine="rules")
    assert job.wait(300)
    wb.poll()
    review = wb.review
    assert review is not None and review.verdict is not None and review.verdict.passed, review.verdict
    hunks = diff_hunks(session.source("head"), review.proposed_source)
    grid = [h.index for h in hunks if any("grid = " in line for line in h.added)]
    assert len(grid) == 1, [h.added for h in hunks]
    wb.apply_hunks([h.index for h in hunks if h.index not in grid])
    assert wb.start_verify().wait(300)
    wb.poll()
    verdict = review.verdict
    assert verdict.kind.value == "wrong_answer", verdict.reason
    assert "ci-tiles" in verdict.reason and "left unwritten" in verdict.reason


def test_the_allowed_precision_reaches_the_verifier_and_unknown_names_are_refused(
        wb: Workbench, monkeypatch: pytest.MonkeyPatch) -> None:
    import xeforge_core.verify as verify_mod
    from xeforge_core.precision import PrecisionError
    from xeforge_core.verdict import Verdict, VerdictKind

    wb.start_session()
    wb.submit_manual(wb.session.source("head").replace("num_warps=4", "num_warps=8"))
    seen: list[object] = []

    def record(problem: object, source: str, *, options: object = None, **kwargs: object) -> Verdict:
        seen.append(options)
        return Verdict(kind=VerdictKind.OK, precision={"dtype": "float16", "allowed": ["bf16"]})

    monkeypatch.setattr(verify_mod, "verify", record)
    assert wb.verify_options() is None  # the defaults: the problem's own precision
    with pytest.raises(PrecisionError, match="did you mean 'bf16'"):
        wb.set_allow_precision(["bf61"])
    wb.set_allow_precision(["bf16"])
    assert wb.start_verify().wait(10)
    wb.poll()
    assert [o.allow_precision for o in seen] == [["bf16"]]
