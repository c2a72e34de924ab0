"""The mutation benchmark's ``--accept-offered`` (``benchmarks/bench_mutants.py``): a correct
kernel refused as a precision change it names is verified again with exactly the allowance its
verdict offers, and its mutants are verified under that allowance, which must still refuse a
wrong constant."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRECISION = ROOT / "tests" / "fixtures" / "precision"


@pytest.fixture()
def bench():
    spec = importlib.util.spec_from_file_location("bench_mutants_under_test", ROOT / "benchmarks" / "bench_mutants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_offered_allowances_read_only_refusing_precision_findings(bench):
    findings = [
        {"rule": "precision_downgrade", "severity": "error",
         "message": "TF32 products: ...; Not allowed: the problem allows float32; --allow tf32 accepts it"},
        {"rule": "precision_downgrade", "severity": "warning",
         "message": "float16 operands: measured only (allowed by --allow fp16)"},
        {"rule": "fp32_dot_tf32", "severity": "warning", "message": "--allow bf16 accepts it"},
        {"rule": "precision_downgrade", "severity": "error", "message": "again: --allow tf32 accepts it"},
    ]
    assert bench.offered_allowances(findings) == ["tf32"]
    assert bench.offered_allowances([]) == []


def test_resume_verifies_again_only_what_the_machine_failed(bench):
    assert not bench.settled(None) and not bench.settled({})
    assert not bench.settled({"kind": "environment", "reason": "out of memory: the device is full with other work"})
    for kind in ("ok", "wrong_answer", "oom", "timeout", "inconclusive"):
        assert bench.settled({"kind": kind})
    oom = {"kind": "fail", "metadata": {"runtime_error_name": "torch.OutOfMemoryError"}}
    assert not bench.kb_settled(oom) and not bench.kb_settled(None)
    assert bench.kb_settled({"kind": "fail", "metadata": {"runtime_error_name": "RuntimeError"}})
    assert bench.kb_settled({"kind": "pass", "metadata": {}})


def test_redo_forgets_our_verdicts_on_the_keys_it_names(bench, tmp_path):
    (tmp_path / "mutants.json").write_text(json.dumps({"originals": {"k1": {"ours": {"kind": "ok"}, "kb": {"kind": "pass"}}},
                                                       "mutants": {"k1/a": {"ours": {"kind": "ok"}, "published": {},
                                                                            "kb": {"kind": "pass"}},
                                                                   "k2/a": {"ours": {"kind": "wrong_answer"}}}}))
    run = bench.Run(tmp_path, {}, resume=True)
    run.forget(["k1/"])
    assert "ours" in run.originals["k1"] and "ours" not in run.mutants["k1/a"] and "published" not in run.mutants["k1/a"]
    assert run.mutants["k1/a"]["kb"] == {"kind": "pass"} and "ours" in run.mutants["k2/a"]
    run.forget(["k1"])
    assert "ours" not in run.originals["k1"]


def test_accept_offered_verifies_the_kernel_and_its_mutants_under_the_offered_allowance(bench, tmp_path):
    pair = tmp_path / "corpus" / "pairs" / "gelu_tanh"
    pair.mkdir(parents=True)
    shutil.copyfile(PRECISION / "gelu.py", pair / "problem.py")  # exact GELU
    shutil.copyfile(PRECISION / "gelu_tanh.py", pair / "solution.py")  # its tanh approximation
    out = tmp_path / "out"
    assert bench.main([str(tmp_path / "corpus"), "--out", str(out), "--device", "cpu", "--jobs", "1",
                       "--seeds", "1", "--accept-offered", "--classes", "wrong_constant"]) == 0
    data = json.loads((out / "mutants.json").read_text())
    original = data["originals"]["gelu_tanh"]
    assert original["ours_strict"]["kind"] == "wrong_answer"
    assert original["ours_strict"]["offered"] == ["approx-math"]
    assert original["ours"]["kind"] == "ok" and original["ours"]["allowed"] == ["approx-math"]
    (mutant,) = data["mutants"].values()
    assert mutant["mutation_class"] == "wrong_constant"
    assert mutant["ours"]["kind"] == "wrong_answer"  # the allowance widens the bound, not past a wrong constant
    assert "ok (--allow approx-math)" in (out / "mutants.md").read_text()
