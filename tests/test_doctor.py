"""The device doctor on this CPU-only machine: battery, planted faults, coverage, verdict
logic over recorded fault tables, experiments, stack analysis, and the OpenVINO way out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from xeforge_core.doctor.battery import DEFAULT_CHECKS, Check, run_battery, run_check
from xeforge_core.doctor.coverage import op_class_of, run_coverage
from xeforge_core.doctor.experiments import available_settings, run_experiments
from xeforge_core.doctor.stack import find_problems, inspect_stack, parse_library
from xeforge_core.doctor.verdict import DEGRADED, TRUSTED, UNUSABLE, Observation, SpeedEvidence, decide
from xeforge_core.doctor.wayout import measure_way_out, openvino_available
from xeforge_core.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "sample_kernels" / "03_row_softmax.py"


def _survivors(check_name: str) -> list[int]:
    """Doctor child processes anywhere on the machine still running the named check (orphans
    re-parented to init included)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if b"xeforge_core.doctor.child" not in cmd:
                continue
            job = json.loads((Path(cmd[-1].decode()) / "job.json").read_text())
        except (OSError, ValueError, IndexError):
            continue
        if job.get("name") == check_name:
            found.append(int(entry))
    return found


def _children_of_me() -> list[int]:
    me = os.getpid()
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == me and fields[0] != "Z":
                    kids.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return kids


def test_battery_passes_on_cpu():
    results = run_battery("cpu")
    assert [r.name for r in results] == [c.name for c in DEFAULT_CHECKS]
    assert {r.op_class for r in results} >= {"matmul", "reduction", "indexing+cast", "copy",
                                             "synchronisation", "triton"}
    bad = [(r.name, r.status, r.detail) for r in results if r.status != "ok"]
    assert not bad


PLANTED = {
    "hang": Check("planted hang", "synchronisation", "def run(device):\n    while True:\n        pass\n"),
    "crash": Check("planted abort", "reduction", "def run(device):\n    os.abort()\n"),
    "driver_error": Check("planted driver error", "reduction", (
        "def run(device):\n    raise RuntimeError('level_zero backend failed with error: 45 "
        "(UR_RESULT_ERROR_INVALID_ARGUMENT)')\n")),
    "wrong": Check("planted wrong sum", "reduction", (
        "def run(device):\n    t = torch.ones(8)\n    return t.sum() + 1, t.sum()\n")),
    "error": Check("planted python error", "indexing+cast", "def run(device):\n    return 1 / 0\n"),
}


@pytest.mark.parametrize("status", sorted(PLANTED))
def test_planted_faults_become_statuses_and_the_caller_survives(status):
    timeout = 8.0 if status == "hang" else 60.0
    before = set(_children_of_me())  # e.g. git helper processes an earlier test's session keeps open
    result = run_check(PLANTED[status], "cpu", timeout_s=timeout)
    assert result.status == status, (result.status, result.detail)
    if status == "hang":
        assert "while True" in result.stack or "run" in result.stack, result.stack
        assert "no result within" in result.detail
    if status == "driver_error":
        assert "UR_RESULT_ERROR_INVALID_ARGUMENT" in result.detail
        assert result.below_python
    if status == "crash":
        assert "SIGABRT" in result.detail
    if status == "wrong":
        assert "differ" in result.detail
    assert set(_children_of_me()) <= before
    assert _survivors(PLANTED[status].name) == []


def _obs(*rows: tuple[str, str]) -> list[Observation]:
    return [Observation(f"check {i}", cls, status) for i, (cls, status) in enumerate(rows)]


ALL_OK = _obs(("matmul", "ok"), ("reduction", "ok"), ("indexing+cast", "ok"), ("synchronisation", "ok"))


def test_verdict_all_ok_is_trusted():
    verdict = decide(ALL_OK)
    assert verdict.status == TRUSTED
    speed = next(c for c in verdict.criteria if c.name.startswith("beats the CPU"))
    assert speed.holds is None and speed.mark == "-"  # not measured: not ticked either
    assert all(c.holds for c in verdict.criteria if c is not speed)


def test_verdict_one_op_class_failing_is_degraded_and_names_it():
    verdict = decide(ALL_OK + _obs(("reduction", "driver_error"), ("reduction", "wrong")))
    assert verdict.status == DEGRADED
    assert verdict.failing_classes == ["reduction"]
    assert "reduction" in verdict.advice


def test_verdict_reductions_and_indexing_failing_is_unusable():
    verdict = decide(ALL_OK + _obs(("reduction", "driver_error"), ("indexing+cast", "driver_error")))
    assert verdict.status == UNUSABLE
    assert verdict.failing_classes == ["indexing+cast", "reduction"]
    crit = {c.name: c for c in verdict.criteria}
    assert not crit["failures confined to at most one op class"].holds
    assert not crit["no failure below the Python layer"].holds


def test_verdict_a_hang_is_unusable():
    verdict = decide(ALL_OK + _obs(("synchronisation", "hang")))
    assert verdict.status == UNUSABLE
    assert "hung" in verdict.advice


def test_verdict_a_device_slower_than_the_cpu_is_unusable_for_the_model():
    slow = SpeedEvidence(cpu_us=100.0, device_us=80.0, fallback_us=50.0)
    verdict = decide(ALL_OK, slow)
    assert verdict.status == UNUSABLE
    assert "slower than the CPU" in verdict.advice
    fast = SpeedEvidence(cpu_us=100.0, device_us=20.0, fallback_us=10.0)
    assert decide(ALL_OK, fast).status == TRUSTED


def test_op_classes():
    assert op_class_of("aten.sum.dim_IntList") == "reduction"
    assert op_class_of("aten.mm.default") == "matmul"
    assert op_class_of("aten._to_copy.default") == "indexing+cast"
    assert op_class_of("aten.add.Tensor") == "elementwise"


def test_coverage_of_a_sample_reference_on_cpu():
    problem = load_problem(SOFTMAX)
    coverage = run_coverage(problem, "cpu")
    assert coverage.error == ""
    assert coverage.source == "reference"
    assert coverage.ops, "the reference ran no aten op"
    assert any("softmax" in op.op for op in coverage.ops)
    assert all(op.status == "ok" for op in coverage.ops), [(o.op, o.status, o.detail) for o in coverage.ops]
    assert all(op.cpu_us is not None and op.device_us is not None for op in coverage.ops)


def test_experiments_exist_only_for_the_detected_stack(tmp_path):
    xpu = [s.name for s in available_settings("xpu", ["libur_adapter_level_zero", "libur_adapter_opencl"])]
    assert "OpenCL backend" in xpu and "immediate command lists off" in xpu and "runtime trace" in xpu
    assert "OpenCL backend" not in [s.name for s in available_settings("xpu", ["libur_adapter_level_zero"])]
    cuda = available_settings("cuda")
    assert any(s.env.get("CUDA_LAUNCH_BLOCKING") == "1" for s in cuda)
    assert not any("UR_L0" in k for s in cuda for k in s.env)
    assert [s.name for s in available_settings("cpu")] == ["runtime trace"]
    assert all(s.source for s in available_settings("xpu", ["libur_adapter_opencl"]))

    exps = run_experiments("cpu", [PLANTED["wrong"]], trace_dir=tmp_path)
    assert len(exps) == 1 and exps[0].results[0].status == "wrong"
    trace = Path(exps[0].trace_path)
    assert trace.exists() and json.loads(trace.read_text())  # a Chrome trace


def test_stack_flags_duplicate_versions_and_ld_library_path_shadowing(tmp_path):
    torch_lib = tmp_path / "site-packages" / "torch" / "lib"
    torch_lib.mkdir(parents=True)
    (torch_lib / "libgomp.so.1").write_bytes(b"")
    system = tmp_path / "opt" / "lib"
    system.mkdir(parents=True)
    libs = [str(system / "libgomp.so.1"), "/usr/lib/libsycl.so.7", "/opt/intel/lib/libsycl.so.8"]
    problems = find_problems(libs, ld_library_path=str(system), torch_lib_dir=str(torch_lib))
    assert any("two versions of libsycl" in p for p in problems)
    assert any("shadows" in p and "libgomp.so.1" in p for p in problems)
    assert find_problems(["/usr/lib/libz.so.1"], ld_library_path="", torch_lib_dir=str(torch_lib)) == []
    assert parse_library("/usr/lib/x86_64-linux-gnu/libze_loader.so.1.17.6").version == "1.17.6"


def test_stack_report_of_this_machine():
    report = inspect_stack("cpu")
    assert report.error == ""
    assert report.versions["torch"].startswith("2.")
    assert any(lib.stem == "libtorch_cpu" for lib in report.runtime_libraries)


@pytest.mark.skipif(not openvino_available(), reason="OpenVINO is not installed")
def test_openvino_way_out_agrees_with_pytorch_on_the_cpu_plugin():
    problem = load_problem(ROOT / "sample_kernels" / "04_layernorm.py")
    way = measure_way_out(problem)
    assert way.error == "", way.error
    ov_cpu = next(o for o in way.options if o.name == "OpenVINO on CPU")
    assert ov_cpu.correct, ov_cpu.detail
    assert ov_cpu.median_us and ov_cpu.median_us > 0
    assert way.options[0].median_us is not None  # measured options rank first
    assert way.options[-1].name == "A supported GPU"


def test_cli_doctor_reports_bad_model_input(tmp_path, capsys):
    from xeforge_core.cli import main

    bad = tmp_path / "nomodel.py"
    bad.write_text("x = 1\n")
    assert main(["doctor", "--device", "cpu", "--model", str(bad)]) == 2
    assert "nomodel.py" in capsys.readouterr().err


def test_speed_against_the_cpu_is_measured_at_the_benchmark_variant():
    from xeforge_core.doctor.coverage import CoverageResult
    from xeforge_core.doctor.report import _speed

    problem = load_problem(ROOT / "sample_kernels" / "04_layernorm.py")
    speed, note = _speed(problem, "cpu", CoverageResult("reference", "ci", ops=[]), timeout_s=180)
    assert note == "" and speed is not None
    assert "bench-gpu" in speed.how
    assert speed.cpu_us > 0 and speed.device_us > 0 and speed.fallback_us == 0
