"""One target, one plan: the CLI (``xeforge optimize --plan-only``) and the workbench (the
Optimize page's controller) plan the same stages for every sample on every hardware profile,
and say which engines can do each stage. The target is the user's choice, separate from the run
device: on the cpu interpreter, targeting an Xe2 GPU plans and rewrites for Xe2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xeforge_core.cli import main
from xeforge_core.engines.registry import engines_for
from xeforge_core.pipeline.plan import plan_for
from xeforge_core.samples import list_samples
from xeforge_core.target import TargetError, resolve, targets
from xeforge_core.ui.workbench import Workbench, WorkbenchError
from xeforge_core.vocab.stages import STAGE_IDS

ROOT = Path(__file__).resolve().parents[1]
PROFILES = [t.profile for t in targets()]


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")


def _cli_plan(capsys: pytest.CaptureFixture[str], kernel: Path, *target: str) -> dict:
    assert main(["optimize", str(kernel), *target, "--plan-only", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_profiles_are_the_five_of_the_knowledge_base() -> None:
    assert sorted(PROFILES) == ["arc_b580", "arc_pro_b70", "iris_xe", "max_1550", "nvidia_h200"]


def test_cli_and_workbench_plan_the_same_for_every_sample_and_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cpu: None) -> None:
    samples = list_samples()
    assert len(samples) >= 13
    seen_families: dict[str, set[tuple[str, ...]]] = {}
    for sample in samples:
        wb = Workbench(tmp_path / "ws")
        wb.load_sample(sample.name)
        for profile in PROFILES:
            cli = _cli_plan(capsys, sample.kernel_path, "--target", profile)
            assert wb.set_target(profile).profile == profile
            ui = wb.plan_preview()
            assert [s["stage"] for s in cli["stages"]] == ui.ids, (sample.name, profile)
            assert cli["target"] == ui.target.to_dict()
            assert [s["engines"] for s in cli["stages"]] == [list(s.engines) for s in ui.stages]
            # and the same answer, per stage and engine, to "can it do this on this kernel?"
            assert [s["on_this_kernel"] for s in cli["stages"]] == [[c.to_dict() for c in s.checks] for s in ui.stages]
            seen_families.setdefault(ui.target.family, set()).add(tuple(ui.ids))
    # the plan follows the target: some kernel is planned differently for xpu and for cuda
    assert seen_families["xpu"] != seen_families["cuda"]


def test_without_a_choice_both_target_the_run_devices_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], cpu: None) -> None:
    kernel = ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py"
    cli = _cli_plan(capsys, kernel)
    wb = Workbench(tmp_path / "ws")
    wb.load_sample("07_gemm_fp32_upcast")
    # the cpu interpreter runs the kernels; the product's target, the Arc Pro B70, is planned for
    assert cli["target"]["profile"] == wb.target().profile == "arc_pro_b70"
    assert [s["stage"] for s in cli["stages"]] == wb.plan_preview().ids
    assert "block_pointers" in wb.plan_preview().ids  # the Xe2 plan, also on the interpreter


def test_the_session_starts_with_that_plan_and_keeps_the_target(tmp_path: Path, cpu: None) -> None:
    wb = Workbench(tmp_path / "ws")
    wb.load_sample("07_gemm_fp32_upcast")
    wb.set_target("nvidia_h200")
    expected = wb.plan_preview().ids
    session = wb.start_session()
    assert session.plan == expected and session.target.profile == "nvidia_h200" and session.target.chosen
    items = wb.plan_items()
    assert [(i.number, i.stage) for i in items] == list(enumerate(expected, start=1))
    assert all(i.engines == engines_for(i.stage) for i in items)
    # changing the target re-plans the stages not started yet, for the new target
    session.mark_stage(expected[0], "done", "by hand")
    wb.set_target("arc_b580")
    assert session.target.profile == "arc_b580"
    xe2 = plan_for(session.source("head"), resolve(None, "arc_b580"), session.problem("head")).ids
    assert session.plan[0] == expected[0] and [s for s in session.plan[1:]] == [s for s in xe2 if s != expected[0]]
    with pytest.raises(WorkbenchError, match="unknown target 'b999'"):
        wb.set_target("b999")


def test_each_planned_stage_says_which_engines_can_do_it() -> None:
    codemod_stages = {"dtype_fix", "fusion", "memory_access", "block_pointers", "persistent_kernel", "xpu_specific",
                      "autotuning"}
    for stage in STAGE_IDS:
        assert engines_for(stage) == (["rules", "llm", "manual"] if stage in codemod_stages else ["llm", "manual"])


def test_the_rules_engine_is_refused_at_once_for_a_stage_without_a_codemod(tmp_path: Path, cpu: None) -> None:
    wb = Workbench(tmp_path / "ws")
    wb.load_sample("07_gemm_fp32_upcast")
    wb.start_session()
    with pytest.raises(WorkbenchError, match="no codemod for stage 'algorithmic'.*llm or manual"):
        wb.start_propose("algorithmic", "rules")
    assert wb.jobs.current("propose") is None  # no job, no worker


def test_an_unknown_target_is_bad_input_naming_the_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    kernel = ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py"
    assert main(["optimize", str(kernel), "--target", "b999", "--plan-only"]) == 2
    err = capsys.readouterr().err
    assert "unknown target 'b999'" in err and "arc_b580" in err and "nvidia_h200" in err
    with pytest.raises(TargetError):
        resolve(None, "b999")


def test_resolve_follows_the_choice_then_the_device() -> None:
    assert resolve(None, "Intel Arc B580").profile == "arc_b580"
    assert resolve(None, "xpu").profile == "arc_pro_b70" and resolve(None, "cuda").profile == "nvidia_h200"
    assert resolve({"type": "cuda", "name": "NVIDIA H200"}, None).profile == "nvidia_h200"
    assert resolve({"type": "cuda", "name": "NVIDIA A100"}, None).profile == "nvidia_h200"  # its family's
    assert resolve({"type": "xpu", "name": "Intel(R) Arc(TM) B580 Graphics"}, None).profile == "arc_b580"
    # the run device never overrides a choice, and old sessions' strings still resolve
    assert resolve({"type": "cuda", "name": "NVIDIA H200"}, "max_1550").profile == "max_1550"
    assert resolve("cpu", "cpu").profile == "arc_pro_b70" and not resolve("cpu", None).chosen


def test_on_the_interpreter_an_xe2_target_gets_xe2_codemods_and_prompts(tmp_path: Path, cpu: None) -> None:
    """The run device is the cpu; the target decides the search space, the GRF mode and the
    prompt's hardware, and the codemod and the prompt agree on it."""
    from xeforge_core.engines import get_engine

    wb = Workbench(tmp_path / "ws")
    wb.load_sample("07_gemm_fp32_upcast")
    wb.set_target("arc_b580")
    wb.start_session()
    context = wb.context_for("autotuning")
    assert context.target.profile == "arc_b580" and context.target.arch == "xe2"
    cand = get_engine("rules").propose("autotuning", context)
    assert cand.applicable and '"grf_mode": "256"' in cand.code and "xpu_xe2" in cand.rationale
    prompt = wb.prompt_for("autotuning")
    assert "Intel Arc B580 (xe2, target `xpu`)" in prompt and "xpu_xe2.yaml" in prompt
    wb.set_target("nvidia_h200")
    cuda = get_engine("rules").propose("autotuning", wb.context_for("autotuning"))
    assert cuda.applicable and "grf_mode" not in cuda.code and "NVIDIA H200" in wb.prompt_for("autotuning")


def test_the_optimize_page_picks_the_target_and_shows_who_can_do_each_stage(tmp_path: Path, cpu: None) -> None:
    from streamlit.testing.v1 import AppTest

    wb = Workbench(tmp_path / "ws")
    wb.load_sample("07_gemm_fp32_upcast")
    wb.start_session()
    wb.add_stage("algorithmic")
    at = AppTest.from_file(str(ROOT / "pages" / "1_Optimize.py"), default_timeout=120)
    at.session_state["workbench"] = wb
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert any("on this kernel: rules ✓ llm ✓ manual ✓" in c for c in captions)  # dtype_fix: the codemod applies
    assert any("on this kernel: rules ✗ llm ✓ manual ✓" in c for c in captions)  # algorithmic: no codemod
    assert at.selectbox(key="opt_target").value == "arc_pro_b70"
    at.selectbox(key="opt_target").select("nvidia_h200").run()
    assert not at.exception, [e.value for e in at.exception]
    assert wb.session.target.profile == "nvidia_h200"
    fresh = wb.plan_preview(wb.session.source("head"), wb.session.problem("head")).ids
    assert wb.session.plan == fresh  # the stages not started were planned again for the H200


def test_the_plan_of_a_plain_pytorch_problem_starts_with_its_first_triton_version(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = tmp_path / "relu2.py"
    problem.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                       "        return torch.relu(x) * 2.0\n\n\ndef get_inputs():\n    return [torch.randn(8, 16)]\n\n\n"
                       "def get_init_inputs():\n    return []\n")
    assert main(["optimize", str(problem), "--target", "cuda", "--plan-only"]) == 0
    out = capsys.readouterr().out
    assert "first_version" in out and "TorchInductor" in out and "no stage has work" not in out


def test_the_rules_engines_answer_is_kept_per_source_stage_and_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan asks the rules engine's codemods again on every rerun: the answer for the same
    source, stage, target and problem is the kept one, and another source or target is asked."""
    from xeforge_core.engines import rules
    from xeforge_core.pipeline import feasibility

    asked: list[str] = []
    real = rules.RulesEngine.propose

    def counting(self, stage, context, feedback=None):
        asked.append(stage)
        return real(self, stage, context, feedback)

    monkeypatch.setattr(rules.RulesEngine, "propose", counting)
    monkeypatch.setattr(feasibility, "_ANSWERS", type(feasibility._ANSWERS)())
    source = (ROOT / "sample_kernels" / "02_elementwise_chain.py").read_text()
    xe2, hopper = resolve(None, "arc_pro_b70"), resolve(None, "nvidia_h200")
    first = feasibility.check_engine("rules", "autotuning", source, xe2)
    assert feasibility.check_engine("rules", "autotuning", source, xe2) is first and asked == ["autotuning"]
    feasibility.check_engine("rules", "autotuning", source, hopper)
    feasibility.check_engine("rules", "autotuning", source + "\n# edited\n", xe2)
    assert asked == ["autotuning"] * 3


def test_the_plan_answers_for_the_kernels_the_current_version_launched() -> None:
    """Where the current version's verdict says which kernels ran at the timed size, the plan's
    answer for autotuning is the stage's own: a module whose only launched kernel is not one of
    its own has nothing to tune, and says which kernels never ran."""
    from xeforge_core.pipeline.feasibility import check_stages
    from xeforge_core.target import resolve

    source = (Path(__file__).parent / "fixtures" / "lints" / "chosen_by_size.py").read_text()
    known = check_stages(["autotuning"], source, resolve("cuda"), engines=["rules"], launched=["scale_kernel"])
    assert known["autotuning"][0].can and "scale_small_kernel" not in known["autotuning"][0].reason
    other = check_stages(["autotuning"], source, resolve("cuda"), engines=["rules"], launched=["another_kernel"])
    assert not other["autotuning"][0].can
    assert "kernel scale_kernel never launched" in other["autotuning"][0].reason
