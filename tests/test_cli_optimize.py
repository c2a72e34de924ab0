"""``xeforge optimize`` and ``xeforge batch`` end to end in the cpu interpreter: the rules engine
with --auto on the tiled GEMM with fp32-upcast tl.dot operands (ci variant), the terminal
approve/reject prompt, resume, bad input, and the batch CSV.

One verdict cache directory is shared by this module: the batch and interactive runs verify the
same candidates as the first run, so they are served from the cache."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from xeforge_core.cli import main
from xeforge_core.session import Session

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_kernels"
GEMM = SAMPLES / "07_gemm_fp32_upcast.py"
FAST = ["--device", "cpu", "--seeds", "1", "--no-odd-size", "--timeout", "240"]


@pytest.fixture(scope="module", autouse=True)
def shared_cache(tmp_path_factory):
    old = os.environ.get("XEFORGE_CACHE_DIR")
    os.environ["XEFORGE_CACHE_DIR"] = str(tmp_path_factory.mktemp("xeforge-cache"))
    yield
    if old is None:
        os.environ.pop("XEFORGE_CACHE_DIR", None)
    else:
        os.environ["XEFORGE_CACHE_DIR"] = old


def only_session(workspace: Path) -> Path:
    sessions = [p for p in workspace.iterdir() if (p / ".git").exists()]
    assert len(sessions) == 1, sessions
    return sessions[0]


def test_optimize_rules_auto_end_to_end(tmp_path, capsys):
    ws = tmp_path / "ws"
    status = main(["optimize", str(GEMM), "--engine", "rules", "--auto", "--workspace", str(ws), *FAST])
    out, err = capsys.readouterr()
    assert status == 0, err[-3000:]
    # progress: stage, iteration and verification steps, as plain lines
    assert "[dtype_fix #1] verifying dtype_fix/1" in err
    assert "candidate: correctness: passed" in err
    # the final table names each stage with its verdict
    assert "07_gemm_fp32_upcast on cpu" in out and "cumulative speedup: not measured" in out
    for stage in ("dtype_fix", "xpu_specific", "autotuning"):
        assert stage in out
    session = Session.open(only_session(ws))
    history = session.history()
    assert [v.kind for v in history][0] == "baseline" and len(history) >= 2
    assert history[1].stage == "dtype_fix" and history[1].engine == "rules" and history[1].verdict == "ok"
    for v in history[1:]:
        assert v.trailers["Speedup"] == "not measured" and "speed not measured" in v.trailers["Note"]
        assert v.trailers["Device"].startswith("cpu")
    final = session.source()
    assert "a.to(tl.float32)" not in final and "tl.dot(a, " in final
    assert session.current_stage is None
    report = json.loads((session.path / "export" / "report.json").read_text())
    assert [s["stage"] for s in report["stages"]] == session.plan
    # nothing was timed in the interpreter: no cumulative speedup is claimed, not even 1.0
    assert report["cumulative_speedup"] is None and report["speed_measured"] is False
    assert "Cumulative speedup: **not measured**" in (session.path / "export" / "report.md").read_text()
    assert (session.path / "export" / "07_gemm_fp32_upcast.py").read_text() == final
    # exports stay out of the session's history
    assert subprocess.run(["git", "status", "--porcelain"], cwd=session.path, capture_output=True,
                          text=True, check=True).stdout == ""


def test_optimize_asks_on_the_terminal(tmp_path, capsys, monkeypatch):
    ws = tmp_path / "ws"
    monkeypatch.setattr("sys.stdin", io.StringIO("d\nn\n"))
    status = main(["optimize", str(GEMM), "--stages", "dtype_fix", "--engine", "rules", "--workspace", str(ws),
                   *FAST])
    out, err = capsys.readouterr()
    assert status == 0, err[-3000:]
    assert "approve? [y]es / [n]o / [d]iff" in err
    assert "-        acc += tl.dot(a.to(tl.float32), b.to(tl.float32))" in err  # the diff was shown
    session = Session.open(only_session(ws))
    assert len(session.history()) == 1
    assert session.candidate("dtype_fix/1").status == "rejected"
    assert session.stages["dtype_fix"]["status"] == "kept_current"
    assert "kept_current" in out

    # resume the same session with another answer: approved this time
    session.mark_stage("dtype_fix", "pending", "re-opened")
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    status = main(["optimize", "--resume", str(session.path), "--engine", "rules", *FAST])
    out, err = capsys.readouterr()
    assert status == 0, err[-3000:]
    assert "resuming session" in err
    reopened = Session.open(session.path)
    assert len(reopened.history()) == 2 and reopened.version("head").candidate == "dtype_fix/2"


def test_optimize_bad_input(tmp_path, capsys):
    assert main(["optimize", str(tmp_path / "missing.py"), "--workspace", str(tmp_path), "--device", "cpu"]) == 2
    assert "bad input" in capsys.readouterr().err
    assert main(["optimize", str(GEMM), "--stages", "dtype_fix,warp_drive", "--device", "cpu",
                 "--workspace", str(tmp_path)]) == 2
    assert "unknown stage" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's usage error, with what to do instead
        main(["optimize", str(GEMM), "--engine", "manual", "--device", "cpu", "--workspace", str(tmp_path)])
    assert "runs in the workbench" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["optimize", str(GEMM), "--engine", "rule", "--device", "cpu", "--workspace", str(tmp_path)])
    assert "did you mean 'rules'?" in capsys.readouterr().err
    assert main(["optimize", "03_row_softmax", "--device", "cpu", "--workspace", str(tmp_path)]) == 2
    assert "it is a sample: " in capsys.readouterr().err and not any(tmp_path.iterdir())
    for empty in ("", ","):  # names no stage: bad input, not the whole plan run unasked
        assert main(["optimize", str(GEMM), "--stages", empty, "--device", "cpu", "--workspace", str(tmp_path)]) == 2
        assert "names no stage" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_plan_the_engine_can_do_nothing_of_is_said_up_front(tmp_path, capsys):
    """A KernelBench solution whose only planned stage is autotuning, which the rules engine
    cannot do on a kernel launched with ``**kwargs`` (its meta-parameters cannot be told apart
    from its other arguments): the plan says so per stage, and optimize says so before it starts
    a session (instead of ending one having done nothing)."""
    kb = ROOT / "tests" / "fixtures" / "formats" / "kernelbench"
    starred = (kb / "residual_relu_new.py").read_text().replace(
        "(x, y, out, n, self.scale, BLOCK=1024)", "(x, y, out, n, self.scale, BLOCK=1024, **{})")
    solution = tmp_path.parent / f"{tmp_path.name}_starred_new.py"
    solution.write_text(starred)
    args = [str(solution), "--reference", str(kb / "residual_relu.py"),
            "--target", "arc_pro_b70", "--device", "cpu", "--workspace", str(tmp_path)]
    assert main(["optimize", *args, "--plan-only"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if " autotuning " in line)
    assert row.split()[3:5] == ["✗", "✓"]  # rules cannot, llm can
    assert "**kwargs" in row
    assert "The rules engine can do none of the 1 planned stage on this kernel" in out
    assert main(["optimize", *args, "--engine", "rules", "--auto"]) == 0
    err = capsys.readouterr().err
    assert "can do none of the 1 planned stage" in err and "No session was started." in err
    assert not any(tmp_path.iterdir())


def test_batch_writes_its_csv(tmp_path, capsys):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for f in SAMPLES.glob("07_gemm_fp32_upcast*"):
        shutil.copy(f, kernels / f.name)
    # a kernel whose spec has no variant to verify: its row carries the error, the batch goes on
    shutil.copy(GEMM, kernels / "zz_unverifiable.py")
    (kernels / "zz_unverifiable.yaml").write_text("inputs:\n  X:\n    shape: [M, K]\n    dtype: float16\n")
    (kernels / "notes.py").write_text("# no spec: not a kernel of the batch\n")
    out_csv = tmp_path / "summary.csv"
    # two workers (one per listed device) share the queue of kernels
    status = main(["batch", str(kernels), "--stages", "dtype_fix", "--engine", "rules",
                   "--workspace", str(tmp_path / "ws"), "--out", str(out_csv), "-q", *FAST,
                   "--devices", "cpu,cpu"])
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(out_csv.open()))
    assert [r["kernel"] for r in rows] == ["07_gemm_fp32_upcast", "zz_unverifiable"], err[-3000:]
    good, bad = rows
    assert good["dtype_fix"] == "approved" and good["dtype_fix_verdict"] == "ok" and good["error"] == "", good["error"]
    assert good["dtype_fix_speedup"] == "not measured" and good["final_speedup"] == "not measured"
    assert good["device"] == "cpu:0" and Path(good["session"]).is_dir()
    # refused where its spec is read, naming the spec and the fix; no stage ran for it
    assert "zz_unverifiable.yaml: the spec defines no variants" in bad["error"] and bad["dtype_fix"] == "", bad
    assert status == 1  # one kernel had an error
    assert "summary:" in out and "07_gemm_fp32_upcast" in out
    assert "2 kernel(s)" in err and "on cpu, cpu" in err
    assert "skipped notes.py: no sibling notes.yaml spec" in err
    assert "look meant for the batch were skipped" not in err  # notes.py is a helper, not a kernel
