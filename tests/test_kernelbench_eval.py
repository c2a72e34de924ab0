"""The bridge to KernelBench's own evaluation (``benchmarks/kernelbench_eval.py``): paths given
relative to the caller still reach the child that runs in the temporary directory, and a child
that ends without a result is no verdict of KernelBench's, with the reason from its log."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_EVAL = '''
def get_tolerance_for_precision(precision):
    return 1e-4


def get_torch_dtype_from_string(name):
    return name


def eval_kernel_against_ref(ref_src, src, **kw):
    return {"compiled": True, "correctness": "ModelNew" in src, "metadata": {"trials": kw["num_correct_trials"]}}
'''


@pytest.fixture()
def bridge():
    spec = importlib.util.spec_from_file_location("kernelbench_eval_under_test", ROOT / "benchmarks" / "kernelbench_eval.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pair(root: Path, solution: str) -> Path:
    pair = root / "pairs" / "p"
    pair.mkdir(parents=True)
    (pair / "problem.py").write_text("class Model: pass\n")
    (pair / "solution.py").write_text(solution)
    return pair


def test_relative_paths_reach_the_child_that_runs_elsewhere(bridge, tmp_path, monkeypatch):
    (tmp_path / "src" / "kernelbench").mkdir(parents=True)
    (tmp_path / "src" / "kernelbench" / "__init__.py").write_text("")
    (tmp_path / "src" / "kernelbench" / "eval.py").write_text(FAKE_EVAL)
    _pair(tmp_path, "class ModelNew: pass\n")
    monkeypatch.chdir(tmp_path)
    row = bridge._run_pair(Path("pairs/p"), Path("src"), 2, timeout=120)
    assert row["kb_pass"] and row["exitcode"] == 0, row.get("log_tail")
    assert row["metadata"] == {"trials": 2}


def test_a_child_without_a_result_is_no_verdict_with_its_last_log_line(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_mutants
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    _pair(tmp_path, "class ModelNew: pass\n")
    monkeypatch.chdir(tmp_path)
    v = bench_mutants.kb_verdict(Path("pairs/p"), Path("no-such-src"), 1, 120)
    assert v["kind"] == "no_verdict" and "no result" in v["reason"]
    assert "ModuleNotFoundError" in v["reason"] and "kernelbench" in v["reason"]


def test_a_solution_that_calls_its_module_model_is_entered_as_modelnew(bridge, tmp_path, monkeypatch):
    assert bridge.entry_alias("class Model:\n    pass\n") == "ModelNew = Model"
    assert bridge.entry_alias("class Model: pass\nclass ModelNew(Model): pass\n") is None
    assert bridge.entry_alias("class Model: pass\nModelNew = Model\n") is None
    assert bridge.entry_alias("def kernel_function(): pass\n") is None
    assert bridge.entry_alias("class Model(:\n") is None
    (tmp_path / "src" / "kernelbench").mkdir(parents=True)
    (tmp_path / "src" / "kernelbench" / "__init__.py").write_text("")
    (tmp_path / "src" / "kernelbench" / "eval.py").write_text(FAKE_EVAL)
    _pair(tmp_path, "class Model: pass\n")
    row = bridge._run_pair(tmp_path / "pairs" / "p", tmp_path / "src", 1, timeout=120)
    assert row["kb_pass"] and row["entry_alias"] == "ModelNew = Model", row.get("log_tail")
