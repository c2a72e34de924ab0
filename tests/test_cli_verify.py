"""``xeforge verify`` end to end on the cpu interpreter: the GEMM pair at its ci variant, a
planted wrong answer, JSON output, the cache and --no-cache, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xeforge_core.cli import main
from xeforge_core.commands.verify import EXIT_CODES
from xeforge_core.verdict import VerdictKind

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "benchmarks" / "kernels"
BASE = str(KERNELS / "gemm_fp32_upcast.py")
CAND = str(KERNELS / "gemm_fp16_dot.py")
FAST = ["--device", "cpu", "--variant", "ci", "--seeds", "1", "--timeout", "180"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cli-cache"))
    monkeypatch.setenv("XEFORGE_LOCK_DIR", str(tmp_path_factory.getbasetemp() / "cli-locks"))


def test_gemm_pair_is_correct_and_not_measured_on_cpu(capsys):
    status = main(["verify", BASE, CAND, *FAST])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "verdict: OK" in out
    assert "not measured: interpreter" in out
    assert "ci-tiles" in out  # the size derived from the kernels' tiles was checked too, and named
    assert "\nsizes checked\n  ci (" in out and "  ci-tiles (" in out and "every size odd" in out
    assert "(cached)" not in out
    for step in ("compile", "structure", "correctness", "performance"):
        assert step in out


def test_wrong_answer_exits_non_zero(tmp_path, capsys):
    wrong = tmp_path / "gemm_wrong.py"
    wrong.write_text(Path(CAND).read_text().replace("acc.to(tl.float16)", "(acc * 1.1).to(tl.float16)"))
    status = main(["verify", BASE, str(wrong), *FAST, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "wrong_answer"
    assert status == EXIT_CODES[VerdictKind.WRONG_ANSWER] != 0
    assert data["exit_status"] == status and data["bad_input"] is False
    assert any(not run["passed"] for run in data["correctness"])


def test_cache_then_no_cache(capsys):
    args = ["verify", BASE, BASE, *FAST, "--no-odd-size"]
    assert main(args) == 0
    assert "(cached)" not in capsys.readouterr().out
    assert main(args) == 0
    assert "verdict: OK (cached)" in capsys.readouterr().out
    assert main([*args, "--no-cache"]) == 0
    assert "(cached)" not in capsys.readouterr().out


def test_bad_input_names_the_file(tmp_path, capsys):
    status = main(["verify", BASE, CAND, "--spec", str(tmp_path / "missing.yaml"), "--device", "cpu"])
    err = capsys.readouterr().err
    assert status == 2
    assert "missing.yaml" in err
    status = main(["verify", BASE, CAND, "--variant", "nope", "--device", "cpu"])
    err = capsys.readouterr().err
    assert status == 2 and "nope" in err and "ci" in err
    status = main(["verify", BASE, CAND, "--variant", "cii", "--device", "cpu"])
    assert status == 2 and "did you mean 'ci'?" in capsys.readouterr().err
    # --target takes what xeforge optimize takes: profiles and families, with the nearest named
    status = main(["verify", BASE, CAND, "--target", "nvidia_h20", "--device", "cpu"])
    assert status == 2 and "did you mean 'nvidia_h200'?" in capsys.readouterr().err


def test_a_misspelt_spec_key_is_bad_input_with_its_line(tmp_path, capsys):
    text = (KERNELS / "gemm_fp32_upcast.yaml").read_text()
    assert "\nbench-gpu:\n" in text
    bad = tmp_path / "typo.yaml"
    bad.write_text(text.replace("\nbench-gpu:\n", "\nbench_gpu:\n"))
    line = bad.read_text().splitlines().index("bench_gpu:") + 1
    for command in (["verify", BASE, CAND], ["optimize", BASE, "--plan-only", "--target", "arc_pro_b70"]):
        status = main([*command, "--spec", str(bad), "--device", "cpu"])
        err = capsys.readouterr().err
        assert status == 2, err
        assert f"typo.yaml:{line} [bench_gpu]: unknown top-level key 'bench_gpu'; did you mean 'bench-gpu'?" in err


@pytest.mark.parametrize("option, value, says", [
    ("--timeout", "0", "must be greater than 0"), ("--timeout", "-5", "must be greater than 0"),
    ("--timeout", "nan", "not a finite number"), ("--seeds", "0", "must be 1 or more"),
    ("--rtol", "-1", "must be 0 or more"), ("--atol", "x", "is not a number"),
])
def test_out_of_range_options_are_usage_errors(capsys, option, value, says):
    with pytest.raises(SystemExit) as exit_:
        main(["verify", BASE, CAND, option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and says in err, err


def test_usage_errors_with_json_are_records_on_stdout(capsys):
    """With --json every outcome is a JSON record on stdout, argparse's usage errors too."""
    with pytest.raises(SystemExit) as exit_:
        main(["verify", BASE, CAND, "--seeds", "0", "--json"])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"kind": "bad_input", "reason": "argument --seeds: 0 must be 1 or more",
                                        "bad_input": True, "exit_status": 2}
    assert "must be 1 or more" in captured.err
    with pytest.raises(SystemExit):
        main(["verify", BASE, "--seeds", "0"])  # without --json stdout stays empty
    assert capsys.readouterr().out == ""
    # an option the xeforge parser does not know, and a prefix of one, which is refused with the
    # full name (--seed is not read as --seeds)
    with pytest.raises(SystemExit):
        main(["verify", BASE, CAND, "--js", "--bogus"])
    assert json.loads(capsys.readouterr().out)["reason"] == ("unrecognized arguments: --js --bogus (--js: did you "
                                                             "mean --json?)")
    with pytest.raises(SystemExit) as exit_:
        main(["verify", BASE, CAND, "--seed", "2"])
    assert exit_.value.code == 2 and "--seed: did you mean --seeds?" in capsys.readouterr().err


def test_unavailable_device_is_bad_input(capsys):
    status = main(["verify", BASE, CAND, "--device", "tpu"])
    assert status == 2
    assert "unknown device" in capsys.readouterr().err


def test_report_shows_kernels_and_performance_columns():
    from xeforge_core.commands.verify import render_report
    from xeforge_core.verdict import (
        CompiledKernelInfo,
        PerformanceResult,
        Step,
        StepStatus,
        TimingStats,
        Verdict,
    )

    v = Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.PASSED, 3.2, "bench-gpu: 8.00x")],
                kernels=[CompiledKernelInfo(name="gemm_kernel", num_warps=8, num_stages=3)],
                performance=[PerformanceResult(
                    variant="bench-gpu", baseline=TimingStats(2000, 2010, 1990, 0.01, 50),
                    candidate=TimingStats(250, 251, 249, 0.02, 50), speedup=8.0, tflops=550.0,
                    gbps=400.0, roofline_fraction=0.55)],
                warnings=["timing waited 1.0 s for the device lock"])
    text = render_report(v)
    for piece in ("verdict: OK", "gemm_kernel", "8.00x", "550.0", "55%", "TFLOP/s", "GB/s", "roofline",
                  "warnings", "device lock"):
        assert piece in text, piece


def test_candidate_file_problems_name_the_user_file(tmp_path, capsys):
    from xeforge_core.cli import main

    base = str(Path(__file__).resolve().parents[1] / "benchmarks" / "kernels" / "gemm_fp32_upcast.py")
    cases = {
        "empty.py": (b"", "empty"),
        "nomodel.py": (b"class NotModel:\n    pass\n", "no Model or ModelNew class"),
        "binary.py": (bytes(range(256)) * 4, "candidate"),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert main(["verify", base, str(path), "--device", "cpu", "--quiet"]) == 2, name
        err = capsys.readouterr().err
        assert str(path) in err and message in err, (name, err)


def test_output_to_a_reader_that_went_away_is_dropped_not_a_traceback():
    # `xeforge verify ... | head -1`: once the reader closes the pipe, the rest of the output is
    # dropped and the command goes on to exit with its own status
    import io
    import os

    from xeforge_core.cli import _PipeSafe

    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    stream = _PipeSafe(io.TextIOWrapper(io.FileIO(write_fd, "w"), line_buffering=True))
    stream.write("verdict: OK\n")  # the reader is gone: EPIPE, swallowed
    stream.write("more\n")
    stream.flush()
    stream.close()


def test_a_compile_error_names_the_users_file(tmp_path, capsys):
    broken = tmp_path / "my_gemm.py"
    broken.write_text(Path(CAND).read_text().replace("import triton\n", "import triton\nx = = 1\n", 1))
    assert main(["verify", BASE, str(broken), "--device", "cpu", "--quiet", "--no-cache"]) == 3
    out = capsys.readouterr().out
    assert "SyntaxError at my_gemm.py:" in out and "candidate.py" not in out
    # the traceback names the user's file, not the sandboxed job's copy, and shows none of the
    # worker's own frames (the import's ast.parse above a SyntaxError)
    assert f'File "{broken}"' in out and "/job/src/" not in out and "xeforge_core" not in out, out


def test_a_problem_raising_in_get_inputs_is_bad_input(tmp_path, capsys):
    """A problem whose own get_inputs() raises, whatever the exception's type, is bad input
    (exit 2) with a verdict that says so; the candidate was not judged."""
    fixtures = ROOT / "tests" / "fixtures" / "caches"
    problem = fixtures / "scale_problem.py"
    text = problem.read_text()
    start = text.index("def get_inputs")
    body = text.index("\n", start) + 1
    raising = tmp_path / "raising_problem.py"
    raising.write_text(text[:body] + '    raise RuntimeError("no inputs today")\n' + text[body:])
    code = main(["verify", str(raising), str(fixtures / "ends_cache.py"),
                 "--device", "cpu", "--quiet", "--no-cache"])
    out = capsys.readouterr().out
    assert code == 2, out
    assert out.startswith("verdict: BAD INPUT") and "RuntimeError: no inputs today" in out, out
    assert f'File "{raising}"' in out, out
    # with --json the verdict says so too, and so does a problem that cannot be read at all
    code = main(["verify", str(raising), str(fixtures / "ends_cache.py"), "--device", "cpu", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 2 and data["exit_status"] == 2 and data["bad_input"] is True, data
    code = main(["verify", str(tmp_path / "absent.py"), str(fixtures / "ends_cache.py"), "--device", "cpu", "--json"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert code == 2 and data == {"kind": "bad_input", "reason": captured.err.strip()[len("xeforge verify: "):],
                                  "bad_input": True, "exit_status": 2}, data
    assert "absent.py" in data["reason"]


def test_the_llm_engine_without_a_key_for_openai_is_bad_input_before_a_session(tmp_path, monkeypatch, capsys):
    for name in ("OPENAI_API_KEY", "XEFORGE_LLM_API_KEY", "OPENAI_BASE_URL", "XEFORGE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env
    workspace = tmp_path / "ws"
    code = main(["optimize", str(ROOT / "sample_kernels" / "01_vector_add.py"), "--engine", "llm", "--auto",
                 "--device", "cpu", "--workspace", str(workspace)])
    err = capsys.readouterr().err
    assert code == 2 and "no API key" in err and "--engine rules" in err, err
    assert not workspace.exists() or not any(workspace.iterdir())


def test_a_candidate_that_does_not_parse_is_a_compile_error_before_any_job_runs(tmp_path):
    """A syntax error fails at every size: no baseline, size probe or worker is started for it,
    and no note about the sizes the verifier chose is attached."""
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    jobs = []
    verdict = verify(load_problem(BASE), "import triton\ndef f(:\n    pass\n", device="cpu",
                     options=VerifyOptions(use_cache=False), candidate_name="mine.py",
                     run_worker=lambda *a, **k: jobs.append(a) or pytest.fail("a job ran"))
    assert verdict.kind is VerdictKind.COMPILE_ERROR and not jobs
    assert verdict.reason.startswith("SyntaxError at mine.py:2") and verdict.source_line == 2, verdict.reason
    assert [s.status.value for s in verdict.steps] == ["failed", "skipped", "skipped", "skipped"]
    assert not verdict.warnings


@pytest.mark.parametrize("body, said, jobs", [
    ("    return 42\n", "returned a int", 1),
    ("    return [torch.randn(M)]\n", "NameError", None),
])
def test_a_problem_whose_get_inputs_breaks_at_every_size_is_bad_input(tmp_path, capsys, body, said, jobs):
    """``get_inputs()`` returning no list is the problem's fault (exit 2), found by the first job:
    no other size is tried, since none would mend it. One naming what it never defined is bad
    input too, once the published size fails as well (a raise may belong to a derived size)."""
    import xeforge_core.runner as runner
    from xeforge_core.problem import load_problem
    from xeforge_core.verify import VerifyOptions, verify

    fixtures = ROOT / "tests" / "fixtures" / "caches"
    text = (fixtures / "scale_problem.py").read_text()
    start = text.index("def get_inputs")
    body_at = text.index("\n", start) + 1
    broken = tmp_path / "broken_problem.py"
    broken.write_text(text[:body_at] + body + text[body_at:])
    roles = []

    def counting(job, *args, **kwargs):
        roles.append(job["role"])
        return runner.run_worker(job, *args, **kwargs)

    verdict = verify(load_problem(broken), (fixtures / "ends_cache.py").read_text(), device="cpu",
                     options=VerifyOptions(use_cache=False, seeds=1), run_worker=counting)
    assert verdict.kind is VerdictKind.ENVIRONMENT and verdict.problem_at_fault, verdict.reason
    assert said in verdict.reason and "fix the problem file" in verdict.reason, verdict.reason
    assert jobs is None or len(roles) == jobs, roles
    code = main(["verify", str(broken), str(fixtures / "ends_cache.py"), "--device", "cpu", "--quiet",
                 "--no-cache"])
    assert code == 2 and capsys.readouterr().out.startswith("verdict: BAD INPUT")


def test_a_published_variant_too_large_for_the_interpreter_is_refused_before_any_job(tmp_path, capsys):
    """``--variant module`` of a KernelBench problem states no shapes: its inputs' size is read
    from get_inputs()'s source, so a published size the interpreter cannot finish is said at
    once, not after its baseline runs out of memory."""
    problem = tmp_path / "big_problem.py"
    problem.write_text((ROOT / "tests" / "fixtures" / "caches" / "scale_problem.py").read_text()
                       .replace("N = 5000", "N = 2 ** 31"))
    code = main(["verify", str(problem), str(ROOT / "tests" / "fixtures" / "caches" / "ends_cache.py"),
                 "--device", "cpu", "--variant", "module", "--no-cache", "--quiet"])
    out = capsys.readouterr().out
    assert code == EXIT_CODES[VerdictKind.ENVIRONMENT], out
    assert "variant module's inputs take about 8.0 GiB (read from get_inputs())" in out, out
    assert "Verify on a GPU" in out, out


def test_a_problem_failing_only_at_a_derived_size_is_checked_at_its_own(tmp_path, capsys):
    """An exception a problem raises only at a size the verifier chose (an UnboundLocalError for
    odd widths) is not the problem's fault: that size is dropped and the problem's own is checked."""
    problem = tmp_path / "even_problem.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        n = x.shape[-1]\n        if n % 2 == 0:\n            half = n // 2\n"
        "        return torch.cat([x[..., :half] * 2.0 + 1.0, x[..., half:] * 2.0 + 1.0], dim=-1)\n\n\n"
        "N = 4096\n\n\ndef get_inputs():\n    return [torch.randn(N)]\n\n\ndef get_init_inputs():\n    return []\n")
    candidate = tmp_path / "scale.py"
    candidate.write_text(
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offs < n\n"
        "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)\n\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        out = torch.empty_like(x)\n"
        "        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)\n        return out\n")
    code = main(["verify", str(problem), str(candidate), "--device", "cpu", "--no-cache", "--quiet", "--seeds", "1"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("verdict: OK"), out


@pytest.mark.parametrize("argv, said", [
    (["verify", "a.py", "b.py", "--varient", "module"], "--varient: did you mean --variant?"),
    (["optimize", "k.py", "--auot"], "--auot: did you mean --auto?"),
    (["batch", "d", "--ouput", "s.csv"], "--ouput: did you mean --out?"),
])
def test_a_mistyped_option_names_the_nearest_option_of_its_command(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err, err
    assert f"usage: xeforge {argv[0]}" in err, err
