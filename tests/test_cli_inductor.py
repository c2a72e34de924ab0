"""``xeforge inductor``: converting a saved capture into a first version, and clear errors for
bad input (exit status 2, the file and what is wrong named). Generation itself is tested in
``test_inductor_first_version.py``."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from xeforge_core.cli import main

FIX = Path(__file__).resolve().parent / "fixtures" / "inductor"
ROOT = FIX.parents[2]


def test_convert_writes_a_modelnew_and_names_library_calls(tmp_path, capsys):
    """A forward that is one matrix product gets the first version's own Triton GEMM; a float32
    linear layer beside its epilogue keeps the library's GEMM and a convolution stays a torch
    library call, each named as not Triton yet."""
    out = tmp_path / "mm_new.py"
    rc = main(["inductor", "convert", str(FIX / "matmul_transposed.py"), str(FIX / "matmul_transposed.capture.json"),
               "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "matmul_kernel" in text and "not Triton yet" not in text and "xeforge verify" in text
    tree = ast.parse(out.read_text())
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)

    rc = main(["inductor", "convert", str(FIX / "linear_bias_relu.py"), str(FIX / "linear_bias_relu.capture.json"),
               "--out", str(tmp_path / "linear_new.py")])
    assert rc == 0 and "not Triton yet (torch library calls): torch.addmm" in capsys.readouterr().out

    conv = tmp_path / "conv_new.py"
    rc = main(["inductor", "convert", str(FIX / "conv_relu_bias.py"), str(FIX / "conv_relu_bias.capture.json"),
               "--out", str(conv)])
    assert rc == 0
    assert "not Triton yet (torch library calls): torch.ops.aten.convolution" in capsys.readouterr().out


def test_bad_input_is_named(tmp_path, capsys):
    problem = str(FIX / "gelu_scale.py")
    assert main(["inductor", "convert", str(tmp_path / "absent.py"), "x.json"]) == 2
    assert "absent.py: file not found" in capsys.readouterr().err
    assert main(["inductor", "convert", problem, str(tmp_path / "absent.json")]) == 2
    assert "absent.json: file not found" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["inductor", "convert", problem, str(broken)]) == 2
    assert "broken.json: cannot read it as JSON" in capsys.readouterr().err
    triton_kernel = str(ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py")
    assert main(["inductor", "capture", triton_kernel, "--out", str(tmp_path / "c.json")]) == 2
    assert "not a plain-PyTorch problem" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()
    assert main(["inductor", "capture", problem, "--device", "cdua", "--out", str(tmp_path / "c.json")]) == 2
    assert "bad input: --device cdua: unknown device 'cdua'" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()
    # the nearest name of a device, stage or target is offered; a loader error names its file once
    assert main(["inductor", "capture", problem, "--device", "cudaa", "--out", str(tmp_path / "c.json")]) == 2
    assert "did you mean 'cuda'?" in capsys.readouterr().err
    broken_py = tmp_path / "broken.py"
    broken_py.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                         "        return torch.relu(x\n")
    assert main(["inductor", "capture", str(broken_py), "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "broken.py:4: syntax error" in err and err.count("broken.py") == 1, err
    from xeforge_core.target import resolve
    from xeforge_core.vocab.stages import require_stages

    with pytest.raises(ValueError, match="did you mean 'autotuning'"):
        require_stages(["autotunning"])
    with pytest.raises(Exception, match="did you mean 'arc_b580'"):
        resolve(None, "arc_b850")


def test_a_forward_that_raises_is_named_with_the_users_file(tmp_path, capsys):
    problem = tmp_path / "bad_forward.py"
    problem.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        raise ValueError('boom in forward')\n\n\ndef get_inputs():\n"
                       "    return [torch.randn(4, 4)]\n\n\ndef get_init_inputs():\n    return []\n")
    assert main(["inductor", "capture", str(problem), "--device", "cpu", "--out", str(tmp_path / "c.json")]) == 1
    err = capsys.readouterr().err
    assert "running the model's forward on its inputs failed: ValueError: boom in forward" in err
    assert "raised at bad_forward.py:6 in forward" in err and "xeforge-job" not in err


def test_capture_of_another_problem_is_refused(tmp_path, capsys):
    """A capture records the problem module it was traced from; another problem's is bad input."""
    other = tmp_path / "other.py"
    other.write_text((FIX / "conv_relu_bias.py").read_text().replace("* 0.1", "* 0.2"))
    rc = main(["inductor", "convert", str(other), str(FIX / "conv_relu_bias.capture.json"),
               "--out", str(tmp_path / "x.py")])
    assert rc == 2
    assert "conv_relu_bias.capture.json: traced from another problem module ('conv_relu_bias'" in capsys.readouterr().err
    assert not (tmp_path / "x.py").exists()


def test_optimize_says_why_the_first_version_failed(tmp_path, capsys):
    """A plain-PyTorch model whose TorchInductor code launches no Triton kernel (a view): there is
    no first version, and the run says so (its row, its reason, the final kernel unchanged)."""
    problem = tmp_path / "view_only.py"
    problem.write_text("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                       "        return x.view(-1)\n\n\ndef get_inputs():\n    return [torch.randn(8, 16)]\n\n\n"
                       "def get_init_inputs():\n    return []\n")
    rc = main(["optimize", str(problem), "--auto", "--quiet", "--workspace", str(tmp_path / "ws")])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "TorchInductor writes its first Triton version" in err and "no stage has work" not in err
    assert any(line.startswith("first_version  failed") for line in out.splitlines()), out
    assert "TorchInductor generates no Triton kernel for this problem" in err, err
    assert "the final kernel is the PyTorch model as given" in err


def test_optimize_says_what_it_planned_on_the_first_version(tmp_path, capsys):
    """After TorchInductor's first version, the run says which stages it planned on that code,
    or that none has work there and the first version is the result (it went silent before)."""
    problem = tmp_path / "residual_relu.py"
    shutil.copy(Path(__file__).parent / "fixtures" / "formats" / "kernelbench" / "residual_relu.py", problem)
    rc = main(["optimize", str(problem), "--engine", "rules", "--auto", "--device", "cpu", "--seeds", "1",
               "--workspace", str(tmp_path / "ws")])
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    lines = out.splitlines()
    rows = [ln.split()[0] for ln in lines[lines.index(next(x for x in lines if x.startswith("stage "))) + 2:]
            if ln and not ln.startswith((" ", "cumulative", "first version:"))][:1]
    assert rows == ["first_version"], out  # the step that ran first leads the table
    said = [line for line in err.splitlines() if line.startswith("[first_version] ")]
    assert len(said) == 1 and ("stages planned on the first Triton version: " in said[0]
                               or "no stage has work on the first Triton version" in said[0]), err[-2000:]


def test_a_first_version_wrong_at_another_size_is_traced_again_at_the_published_size(tmp_path, capsys, monkeypatch):
    """TorchInductor may fold a relation of the reduced sizes it traced at into its index
    expressions (KernelBench level 2 problem 19 with torch 2.11: a channel stride right only
    where each GroupNorm group holds one channel): a first version the verifier finds wrong is
    generated again at the published size, verified and kept as the second attempt."""
    from xeforge_core.pipeline import first_version as step

    real, calls = step.inductor_first_version, []

    def traced(problem, *, device="cpu", timeout_s=None, published_size=False):
        calls.append(published_size)
        cand = real(problem, device=device, timeout_s=timeout_s, published_size=published_size)
        if not published_size:  # as if the traced sizes' relation were folded into the indices
            cand.code = cand.code.replace("        return buf3\n", "        return buf3 * 1.001\n", 1)
        return cand

    monkeypatch.setattr(step, "inductor_first_version", traced)
    rc = main(["optimize", str(FIX / "layer_norm_tuple.py"), "--engine", "rules", "--auto", "--device", "cpu",
               "--seeds", "1", "--workspace", str(tmp_path / "ws")])
    out, err = capsys.readouterr()
    assert rc == 0, err[-3000:]
    assert calls == [False, True]
    assert "asking TorchInductor again, traced at the published size" in err, err[-3000:]
    assert any(line.startswith("first_version") and "done" in line for line in out.splitlines()), out


def test_a_batch_row_names_the_library_call_when_inductor_writes_no_triton_kernel(tmp_path, capsys):
    """A plain convolution: TorchInductor leaves it all to torch's convolution and writes no Triton
    kernel, so there is no first version; the batch's row still names the call that is not Triton
    yet (before, only the error text did)."""
    from xeforge_core.batch import read_summary

    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "conv_only.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = torch.nn.Conv2d(3, 8, 3)\n\n    def forward(self, x):\n        return self.conv(x)\n\n\n"
        "batch_size = 2\n\n\ndef get_inputs():\n    return [torch.randn(batch_size, 3, 16, 16)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    out = tmp_path / "summary.csv"
    rc = main(["batch", str(problems), "--engine", "rules", "--device", "cpu", "--seeds", "1",
               "--workspace", str(tmp_path / "ws"), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1, err[-2000:]
    row = next(iter(read_summary(out)))
    assert "TorchInductor generates no Triton kernel" in row.error, row.error
    assert row.not_triton and all("convolution" in c for c in row.not_triton), row.not_triton
    assert (Path(row.session) / "export" / "conv_only.py").is_file()  # where `xeforge optimize` puts it too


def test_a_forward_that_kills_its_worker_is_named_where_it_stopped():
    """A problem whose forward ends TorchInductor's worker (a segmentation fault here; a hang ends
    the same way at the job's limit, a user's ``while True`` in the workbench): the error names the
    problem's line from the worker's stack dump (it quoted the worker's last stderr lines before,
    the interpreter's frozen modules and extension list). A crash, not a hang, so the test does
    not depend on how long the import takes on a loaded machine."""
    from xeforge_core.inductor.capture import GenerationError, capture

    source = ("import ctypes\n\nimport torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
              "        ctypes.string_at(0)\n        return x\n\n\ndef get_inputs():\n    return [torch.randn(4, 8)]\n\n\n"
              "def get_init_inputs():\n    return []\n")
    with pytest.raises(GenerationError) as info:
        capture(source, name="crash", timeout_s=240)
    message = str(info.value)
    assert "while running the problem's code, at crash.py:8: ctypes.string_at(0)" in message, message
    assert "Extension modules" not in message
    assert info.value.stage == "forward"  # the worker's own step lines say where it was


def test_a_job_stopped_at_its_limit_inside_torchinductor_says_which_step_and_how_to_give_it_time():
    """A generation job that reaches its limit outside the problem's code (TorchInductor compiling
    a large graph) names its step and the command with more time, not the worker's last stderr
    lines. The outcome is built as the runner builds one for a job killed at its limit, with the
    step lines ``generate`` writes, so the test does not wait for a real limit."""
    from xeforge_core.inductor.capture import stopped_without_result
    from xeforge_core.inductor.generate import STEP_MARK
    from xeforge_core.worker_outcome import WorkerOutcome

    stderr = "".join(f"{STEP_MARK}{s}\n" for s in ("load", "inputs", "forward", "trace", "generate"))
    stopped = WorkerOutcome(result=None, returncode=-9, signal_name="SIGKILL", timed_out=True, timeout_s=240.0,
                            stderr=stderr + "  File \"torch/_inductor/scheduler.py\", line 10, in fuse\n")
    err = stopped_without_result(stopped, "import torch\n", name="big")
    assert err.stage == "generate"
    assert str(err).startswith("the TorchInductor job reached its 240 s limit while TorchInductor's code generation;")
    assert "xeforge inductor capture big.py --timeout SECONDS" in str(err) and STEP_MARK not in str(err)
    crashed = WorkerOutcome(result=None, returncode=-11, signal_name="SIGSEGV", stderr=f"{STEP_MARK}load\n{STEP_MARK}inputs\nboom\n")
    err = stopped_without_result(crashed, "import torch\n", name="big")
    assert err.stage == "inputs" and "while building the model and its inputs: boom" in str(err), str(err)
