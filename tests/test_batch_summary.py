"""The batch summary on disk (CSV + JSON, read back for ``--resume``), the progress line, the
pieces of the Ray batch that need no Ray (placement, file transport, environment, device names),
and the CLI where Ray is not installed. Fast: nothing here runs a kernel."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from xeforge_core.batch import (
    BatchItem,
    BatchRow,
    JobLog,
    SummaryError,
    read_summary,
    split_resume,
    summary_json_path,
    write_summary,
)
from xeforge_core.batch_progress import BatchProgress, format_duration
from xeforge_core.devices import DeviceInfo, physical_index
from xeforge_core.raybatch.driver import RaySetupError, device_kind, forwarded_environment
from xeforge_core.raybatch.jobs import JobPlacement, pack_files, unpack_files

ROOT = Path(__file__).resolve().parents[1]


def _rows() -> list[BatchRow]:
    good = BatchRow(kernel="b_gemm", device="cuda:1", session="/ws/b", stages=["portability", "dtype_fix"],
                    status={"portability": "approved", "dtype_fix": "approved"},
                    verdicts={"portability": "ok", "dtype_fix": "ok"},
                    speedups={"portability": None, "dtype_fix": 2.5}, final_speedup=2.5, speed_measured=True,
                    seconds=12.3, host="gpu-a", attempts=2, not_triton=["torch.addmm", "torch.convolution"])
    good.record_jobs([{"role": "baseline", "device": "gpu-a/cuda:1", "start": 1.0, "end": 2.0},
                      {"role": "timing", "device": "gpu-a/cuda:0", "start": 3.0, "end": 4.0}])
    bad = BatchRow(kernel="a_bad", stages=["dtype_fix"], status={"dtype_fix": "failed"}, verdicts={"dtype_fix": "-"},
                   speedups={"dtype_fix": None}, error="dtype_fix: spec has no variant")
    return [good, bad]


def test_summary_round_trips_through_json_and_csv(tmp_path):
    out = tmp_path / "runs" / "summary.csv"
    write_summary(_rows(), out, {"mode": "ray"})
    assert summary_json_path(out) == tmp_path / "runs" / "summary.json"
    data = json.loads(summary_json_path(out).read_text())
    assert data["format"] == "xeforge-batch-summary" and data["meta"] == {"mode": "ray"}
    assert [r["kernel"] for r in data["rows"]] == ["a_bad", "b_gemm"]  # sorted by kernel
    back = {r.kernel: r for r in read_summary(out)}
    assert back["b_gemm"].to_dict() == _rows()[0].to_dict()
    assert back["b_gemm"].timing_devices == ["gpu-a/cuda:0"]
    # without the JSON (a summary from before it existed), the CSV gives the same verdicts back
    summary_json_path(out).unlink()
    csv_rows = {r.kernel: r for r in read_summary(out)}
    for name in ("a_bad", "b_gemm"):
        a, b = csv_rows[name], back[name]
        assert (a.stages, a.status, a.verdicts, a.error, a.final_speedup, a.attempts, a.host, a.not_triton) == \
               (b.stages, b.status, b.verdicts, b.error, b.final_speedup, b.attempts, b.host, b.not_triton)
    assert csv_rows["b_gemm"].speedups["dtype_fix"] == 2.5 and csv_rows["b_gemm"].timing_devices == ["gpu-a/cuda:0"]
    assert read_summary(tmp_path / "none.csv") == []


def test_a_first_versions_library_calls_reach_the_batch_row():
    """The batch row names what a plain-PyTorch problem's first version left to torch library
    calls, read from the first version's candidate as the run kept it."""
    from types import SimpleNamespace

    from xeforge_core.inductor.capture import load_capture
    from xeforge_core.inductor.convert import convert
    from xeforge_core.inductor.first_version import FIRST_VERSION, _candidate, library_calls_noted
    from xeforge_core.pipeline.first_version import first_version_notes

    fix = ROOT / "tests" / "fixtures" / "inductor"
    fv = convert(load_capture(fix / "linear_bias_relu.capture.json"), (fix / "linear_bias_relu.py").read_text())
    attempt = SimpleNamespace(candidate=_candidate(fv, fv.source))
    outcomes = [SimpleNamespace(stage=FIRST_VERSION, attempts=[attempt, attempt]),
                SimpleNamespace(stage="autotuning", attempts=[SimpleNamespace(candidate=SimpleNamespace(notes=["x"]))])]
    notes = first_version_notes(outcomes)
    assert notes[0] == "not Triton yet (torch library calls): torch.addmm" and len(notes) == len(set(notes))
    assert library_calls_noted(notes) == ["torch.addmm"]
    assert library_calls_noted([]) == []


def test_an_unreadable_summary_is_named(tmp_path):
    out = tmp_path / "summary.csv"
    summary_json_path(out).write_text("{not json")
    with pytest.raises(SummaryError) as err:
        read_summary(out)
    assert err.value.file == str(summary_json_path(out)) and "cannot read the summary" in str(err.value)
    summary_json_path(out).write_text(json.dumps({"format": "xeforge-batch-summary", "rows": [{"device": "x"}]}))
    with pytest.raises(SummaryError, match="kernel name"):
        read_summary(out)


def test_resume_keeps_finished_rows_and_redoes_interrupted_ones():
    items = [BatchItem(kernel=Path(f"{n}.py"), spec=Path(f"{n}.yaml")) for n in ("a", "b", "c")]
    finished = BatchRow(kernel="a", stages=["dtype_fix"], status={"dtype_fix": "approved"})
    failed = BatchRow(kernel="b", error="bad spec")
    interrupted = BatchRow(kernel="c", stages=["dtype_fix"], status={"dtype_fix": "cancelled"})
    gone = BatchRow(kernel="z_removed", status={"dtype_fix": "approved"})
    todo, kept = split_resume(items, [finished, failed, interrupted, gone])
    assert [i.name for i in todo] == ["c"]
    assert [r.kernel for r in kept] == ["a", "b", "z_removed"]


def test_progress_line_counts_and_eta():
    now = [100.0]
    stream = io.StringIO()
    bar = BatchProgress(6, stream, skipped=2, tty=False, clock=lambda: now[0])
    assert "ETA –" in bar.line()
    bar.start("a")
    bar.start("b")
    now[0] += 30
    bar.finish("a", failed=False, seconds=30)
    bar.finish("b", failed=True, seconds=30)
    # 30 s per kernel, two at once: 4 left take 60 s
    assert bar.eta_s() == pytest.approx(60.0)
    assert bar.line() == "batch 2/6 (+2 from the summary): 1 done, 0 running, 1 failed; 30s elapsed, ETA 1m00s"
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(set(lines)) == 4  # a log gets a line only when a count changes
    bar.refresh()
    assert len(stream.getvalue().splitlines()) == 4
    tty = io.StringIO()
    live = BatchProgress(1, tty, tty=True)
    live.start("x")
    live.print("== x: done")
    live.close()
    assert "\r\033[K== x: done\n" in tty.getvalue() and tty.getvalue().endswith("\n")
    assert [format_duration(s) for s in (None, 9, 75, 3725)] == ["–", "9s", "1m15s", "1h02m"]


def test_job_placement_asks_ray_for_what_each_role_needs():
    cpu = JobPlacement()
    assert cpu.resources("timing") == cpu.resources("candidate") == {"num_cpus": 1}
    gpu = JobPlacement(device_type="cuda", correctness_gpus=0.25, max_retries=3, env={"XEFORGE_CACHE_DIR": "/c"})
    assert gpu.resources("timing") == {"num_cpus": 1, "num_gpus": 1}
    assert gpu.resources("baseline") == gpu.resources("candidate") == {"num_cpus": 1, "num_gpus": 0.25}
    assert gpu.resources("problem") == {"num_cpus": 1}  # never holds a GPU while it waits for jobs
    opts = gpu.task_options("timing")
    assert opts["max_retries"] == 3 and opts["runtime_env"] == {"env_vars": {"XEFORGE_CACHE_DIR": "/c"}}
    with pytest.raises(ValueError, match="correctness_gpus"):
        JobPlacement(device_type="cuda", correctness_gpus=1.5)
    with pytest.raises(ValueError, match="device type"):
        JobPlacement(device_type="tpu")


def test_job_files_travel_as_regular_files_only(tmp_path):
    src = tmp_path / "job"
    (src / "expected").mkdir(parents=True)
    (src / "result.json").write_text("{}")
    (src / "expected" / "meta.json").write_text("[]")
    (src / "expected" / "link").symlink_to("/etc/passwd")
    (src / "other.txt").write_text("not asked for")
    blob = pack_files(src, ["result.json", "expected", "missing.txt"])
    dest = tmp_path / "back"
    unpack_files(blob, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == \
           ["expected/meta.json", "result.json"]
    # an archive with a path leaving the directory is not followed out of it
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    unpack_files(evil.getvalue(), tmp_path / "safe")
    assert not (tmp_path / "escaped.txt").exists()


def test_environment_forwarded_to_tasks_leaves_secrets_out():
    env = {"XEFORGE_CACHE_DIR": "/c", "XEFORGE_LLM_API_KEY": "sk-secret", "XEFORGE_DEVICE": "cpu",
           "TRITON_INTERPRET": "1", "OPENAI_API_KEY": "sk-2", "HOME": "/root"}
    assert forwarded_environment(env) == {"XEFORGE_CACHE_DIR": "/c", "XEFORGE_DEVICE": "cpu", "TRITON_INTERPRET": "1"}


def test_device_names_go_through_the_visible_devices_mask(monkeypatch):
    assert physical_index("cuda", 0, {"CUDA_VISIBLE_DEVICES": "3,1"}) == "3"
    assert physical_index("cuda", 1, {"CUDA_VISIBLE_DEVICES": "3,1"}) == "1"
    assert physical_index("cuda", 2, {"CUDA_VISIBLE_DEVICES": "3,1"}) == "2"
    assert physical_index("xpu", 0, {"ZE_AFFINITY_MASK": "2"}) == "2"
    assert physical_index("cuda", 0, {}) == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    # the process that sees GPU 1 as cuda:0 takes GPU 1's timing lock
    assert DeviceInfo(type="cuda", index=0).lock_key().endswith("-cuda1")
    log = JobLog("cuda", 0, run=lambda job, **kw: "outcome")
    assert log({"role": "timing"}, timeout_s=1) == "outcome"
    assert log.jobs[0]["role"] == "timing" and log.jobs[0]["device"].endswith("/cuda:1")
    assert device_kind(None) is None and device_kind("cuda") == "cuda" and device_kind("cpu") == "cpu"
    with pytest.raises(RaySetupError, match="Ray assigns the GPU"):
        device_kind("cuda:1")


def test_a_cluster_address_where_nothing_listens_fails_at_once():
    import socket

    from xeforge_core.raybatch.driver import _check_answers

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RaySetupError, match=f"nothing answers at 127.0.0.1:{port}") as err:
        _check_answers(f"127.0.0.1:{port}", timeout_s=2)
    assert err.value.field == "--ray"
    with pytest.raises(RaySetupError):
        _check_answers(f"ray://127.0.0.1:{port}", timeout_s=2)
    _check_answers("auto")  # found by Ray itself, not checked here


FAST = ["--device", "cpu", "--stages", "dtype_fix", "--seeds", "1", "--no-odd-size", "--timeout", "120"]


def _problems(tmp_path: Path) -> Path:
    root = tmp_path / "problems"
    root.mkdir(parents=True)
    for f in (ROOT / "sample_kernels").glob("01_vector_add*"):
        shutil.copy(f, root / f.name)
    shutil.copy(ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py", root / "zz_unverifiable.py")
    (root / "zz_unverifiable.yaml").write_text(  # a spec its kernel cannot run: one input for a GEMM's two
        "inputs:\n  X:\n    shape: [M, K]\n    dtype: float16\nci:\n  - params: [X]\n    dims: {M: 8, K: 8}\n")
    return root


def test_ray_without_ray_installed_names_the_extra(monkeypatch, tmp_path, capsys):
    from xeforge_core.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    out = tmp_path / "s.csv"
    status = main(["batch", str(_problems(tmp_path)), "--ray", "--workspace", str(tmp_path / "ws"),
                   "--out", str(out), *FAST])
    err = capsys.readouterr().err
    assert status == 2 and 'install the "ray" extra, pip install -e ".[ray]"' in err, err
    assert not out.exists() and not (tmp_path / "ws").exists()
    assert main(["batch", str(_problems(tmp_path / "x")), "--ray", "--devices", "cpu,cpu", *FAST]) == 2
    assert "Ray assigns the devices" in capsys.readouterr().err


def test_sequential_batch_resumes_from_its_summary(tmp_path, capsys, monkeypatch):
    from xeforge_core.cli import main

    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    problems = _problems(tmp_path)
    out = tmp_path / "summary.csv"
    earlier = BatchRow(kernel="01_vector_add", device="cpu:0", session="/elsewhere/01", stages=["dtype_fix"],
                       status={"dtype_fix": "kept_current"}, verdicts={"dtype_fix": "-"}, speedups={"dtype_fix": None})
    write_summary([earlier], out)
    status = main(["batch", str(problems), "--resume", "--workspace", str(tmp_path / "ws"), "--out", str(out), *FAST])
    err = capsys.readouterr().err
    assert status == 1  # zz_unverifiable has an error
    assert "1 kernel(s) already in the summary are kept and skipped" in err and "== 01_vector_add" not in err
    rows = {r.kernel: r for r in read_summary(out)}
    assert sorted(rows) == ["01_vector_add", "zz_unverifiable"]
    assert rows["01_vector_add"].to_dict() == earlier.to_dict()
    assert rows["zz_unverifiable"].error and rows["zz_unverifiable"].host
    assert not any(p.name.startswith("01_vector_add") for p in (tmp_path / "ws").iterdir())
    assert "batch 1/1 (+1 from the summary): 0 done, 0 running, 1 failed" in err
    assert os.path.exists(summary_json_path(out))


def test_ctrl_c_also_sets_the_flag_the_batch_loops_poll():
    """A Ctrl-C that a library swallows on its way up still stops the batch: the handler sets
    the flag the loops poll before raising KeyboardInterrupt, and the old handler comes back."""
    import signal
    import threading

    from xeforge_core.commands.batch import _interrupt_sets

    flag = threading.Event()
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), _interrupt_sets(flag):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            assert flag.is_set()  # swallowed here, as a library might: the flag is still set
        raise KeyboardInterrupt
    assert flag.is_set() and signal.getsignal(signal.SIGINT) is before


def test_a_kernelbench_pair_is_a_kernel_of_the_batch(tmp_path):
    """A Triton solution beside its problem as ``<stem>_ref.py`` is a kernel (spec-less, the
    problem its reference), as is a plain-PyTorch problem alone; what is left out is named with
    why: a solution without its problem, a reference or a spec without its kernel, a module that
    is none of these. The pipeline on such a pair is ``xeforge optimize SOLUTION --reference
    PROBLEM``'s (tests/test_cli_optimize.py)."""
    from xeforge_core.batch import find_kernels, scan_directory
    from xeforge_core.problem import ProblemError, load_problem

    kb = ROOT / "tests" / "fixtures" / "formats" / "kernelbench"
    shutil.copy(kb / "residual_relu_new.py", tmp_path / "residual_relu.py")
    shutil.copy(kb / "residual_relu.py", tmp_path / "residual_relu_ref.py")
    shutil.copy(kb / "residual_relu.py", tmp_path / "plain_problem.py")
    shutil.copy(kb / "residual_relu_new.py", tmp_path / "lone_solution.py")
    shutil.copy(kb / "residual_relu.py", tmp_path / "orphan_ref.py")
    (tmp_path / "lonely.yaml").write_text("inputs: {}\n")
    (tmp_path / "notes.py").write_text("# neither: not a kernel of the batch\n")
    (tmp_path / "half_problem.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    (tmp_path / "broken.py").write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x:\n")
    items = find_kernels(tmp_path)
    assert [(i.kernel.name, i.spec, i.reference and i.reference.name) for i in items] == [
        ("broken.py", None, None), ("plain_problem.py", None, None), ("residual_relu.py", None, "residual_relu_ref.py")]
    with pytest.raises(ProblemError, match=r"broken.py:3: syntax error"):  # its row says where
        load_problem(items[0].kernel)
    (tmp_path / "broken.py").unlink()
    items = items[1:]
    assert scan_directory(tmp_path)[0] == items
    why = {p.name: reason for p, reason in scan_directory(tmp_path)[1]}
    assert sorted(why) == ["half_problem.py", "lone_solution.py", "lonely.yaml", "notes.py", "orphan_ref.py"]
    assert "not a plain-PyTorch problem (it defines no get_inputs()" in why["half_problem.py"], why["half_problem.py"]
    from xeforge_core.batch import meant_for_batch

    meant = {name for name in why if meant_for_batch(tmp_path / name)}
    assert meant == {"half_problem.py", "lone_solution.py", "lonely.yaml", "orphan_ref.py"}  # notes.py: a helper
    assert why["lone_solution.py"].startswith("a Triton solution with no problem beside it")
    assert "lone_solution_ref.py" in why["lone_solution.py"]
    assert why["orphan_ref.py"].startswith("a reference with no orphan.py beside it")
    assert why["lonely.yaml"] == "a spec with no lonely.py beside it"
    assert why["notes.py"].startswith("no sibling notes.yaml spec or notes_ref.py reference")
    problem = load_problem(items[1].kernel, spec_path=items[1].spec, reference_path=items[1].reference)
    assert problem.reference is not None and problem.kernel.class_name == "ModelNew"


def test_batch_bad_input_is_found_before_any_kernel_runs(tmp_path, capsys):
    """A directory with nothing to run says what it skipped and why; an --out that cannot be
    written is bad input before the first kernel, not a traceback after the last."""
    from xeforge_core.cli import main

    kb = ROOT / "tests" / "fixtures" / "formats" / "kernelbench"
    only_ref = tmp_path / "only_ref"
    only_ref.mkdir()
    shutil.copy(kb / "residual_relu.py", only_ref / "k_ref.py")
    assert main(["batch", str(only_ref), "--device", "cpu", "--out", str(tmp_path / "s.csv")]) == 2
    err = capsys.readouterr().err
    assert "skipped k_ref.py: a reference with no k.py beside it" in err and "no kernels in" in err
    pair = tmp_path / "pair"
    pair.mkdir()
    shutil.copy(kb / "residual_relu.py", pair / "k.py")
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert main(["batch", str(pair), "--device", "cpu", "--workspace", str(tmp_path / "ws"),
                 "--out", str(blocked / "s.csv")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "cannot make its folder" in err and not (tmp_path / "ws").exists()
    # a folder as --out: the summary was written last, over the folder, after every kernel ran
    assert main(["batch", str(pair), "--device", "cpu", "--workspace", str(tmp_path / "ws"),
                 "--out", str(pair)]) == 2
    err = capsys.readouterr().err
    assert f"--out {pair}: is a folder" in err and "summary.csv" in err and not (tmp_path / "ws").exists()


def test_a_problem_that_is_not_utf8_gets_a_row_naming_the_byte(tmp_path):
    """A plain-PyTorch problem saved in Latin-1 (an author's name in a comment) is a kernel of the
    batch whose row says where the text stops being UTF-8, as `xeforge verify` does; it was
    skipped as "not a plain-PyTorch problem" and left out of the failures."""
    from xeforge_core.batch import scan_directory

    kb = ROOT / "tests" / "fixtures" / "formats" / "kernelbench"
    (tmp_path / "latin1.py").write_bytes(b"# author: Jos\xe9\n" + (kb / "residual_relu.py").read_bytes())
    items, skipped = scan_directory(tmp_path)
    assert [i.kernel.name for i in items] == ["latin1.py"] and not skipped, skipped
    from xeforge_core.problem import ProblemError, load_problem

    with pytest.raises(ProblemError, match=r"latin1.py:1: .*not valid UTF-8 \(byte 0xe9 at offset 13\)"):
        load_problem(items[0].kernel)
