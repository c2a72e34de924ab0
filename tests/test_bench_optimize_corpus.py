"""benchmarks/bench_optimize_corpus.py without running a pipeline: a sample is timed at its spec's
benchmark variant, ``--only`` names are checked with the nearest one offered, a pair run in a
child process over its time limit becomes a row saying where it stopped, and pairs run side by side
keep the corpus's order."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_optimize_corpus as corpus  # noqa: E402

from xeforge_core.problem import load_problem  # noqa: E402


def _pair(root: Path, name: str) -> None:
    d = root / "pairs" / name
    d.mkdir(parents=True)
    ka = ROOT / "tests" / "fixtures" / "formats" / "kernelagent"
    (d / "problem.py").write_text((ka / "problem.py").read_text())
    (d / "solution.py").write_text((ka / "kernel.py").read_text())


def test_a_sample_is_timed_at_its_specs_benchmark_variant():
    problem = load_problem(ROOT / "sample_kernels" / "01_vector_add.py")
    size, why = corpus.bench_size(problem, 4000.0, 100.0)
    assert size == problem.default_variant_name() == "bench-gpu" and "spec's benchmark variant" in why


def test_only_names_are_checked_and_the_nearest_offered(tmp_path):
    _pair(tmp_path, "ka_l2_001_linear_gelu__x")
    assert [n for n, _, _ in corpus._pairs(tmp_path, ["ka_l2_001_linear_gelu__x"], None, False)] == \
        ["ka_l2_001_linear_gelu__x"]
    with pytest.raises(SystemExit, match="nearest: ka_l2_001_linear_gelu__x"):
        corpus._pairs(tmp_path, ["ka_l2_001_linear_gelu_x"], None, False)


def test_a_pair_over_its_limit_is_a_row_that_says_so(tmp_path):
    _pair(tmp_path, "slow")
    args = argparse.Namespace(dir=tmp_path, out=tmp_path / "out", min_eager_us=100.0, compile_timeout=10.0,
                              device="cpu", quick=True)
    rows, reasons = corpus.pair_in_child("slow", args, 0.5, None)
    assert len(rows) == 1 and rows[0].note.startswith("stopped after") and "pair limit 0 s" in rows[0].note
    assert reasons == [] and (tmp_path / "out" / "logs" / "slow.log").exists()


def test_pairs_run_side_by_side_keep_their_order(tmp_path):
    """``--jobs 2``: two pairs in children at once, their rows in the corpus's order."""
    for name in ("b_second", "a_first"):
        _pair(tmp_path, name)
    out = tmp_path / "out"
    assert corpus.main([str(tmp_path), "--out", str(out), "--device", "cpu", "--jobs", "2",
                        "--pair-timeout", "0.5"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["pair"] for r in rows] == ["a_first", "b_second"]
    assert all(r["note"].startswith("stopped after") for r in rows)
    assert (out / "summary.md").exists()
    with pytest.raises(SystemExit):
        corpus.main([str(tmp_path), "--out", str(out), "--device", "cpu", "--jobs", "2"])


def test_a_resumed_run_adds_the_pairs_the_earlier_one_lacks(tmp_path):
    """``--resume``: rows of an earlier call are kept, pairs it did not run (or stopped at a limit
    its deadline cut short) are run now."""
    for name in ("a_first", "b_second"):
        _pair(tmp_path, name)
    out = tmp_path / "out"
    assert corpus.main([str(tmp_path), "--out", str(out), "--device", "cpu", "--pair-timeout", "0.5",
                        "--only", "b_second"]) == 0
    data = json.loads((out / "results.json").read_text())
    data["rows"].append({"pair": "a_first", "size": "-", "note": "not run: past the 1-minute deadline"})

    (out / "results.json").write_text(json.dumps(data))
    assert corpus.main([str(tmp_path), "--out", str(out), "--device", "cpu", "--pair-timeout", "0.5",
                        "--resume"]) == 0
    data = json.loads((out / "results.json").read_text())
    assert [r["pair"] for r in data["rows"]] == ["a_first", "b_second"]
    assert not any(r["note"].startswith("not run") for r in data["rows"])
    # --redo measures a pair again; a name no pair has is refused with the nearest offered
    data["rows"][0]["note"] = "marked"
    (out / "results.json").write_text(json.dumps(data))
    assert corpus.main([str(tmp_path), "--out", str(out), "--device", "cpu", "--pair-timeout", "0.5",
                        "--resume", "--redo", "a_first"]) == 0
    assert all(r["note"] != "marked" for r in json.loads((out / "results.json").read_text())["rows"])
    with pytest.raises(SystemExit, match="--redo a_frist: no such pair; nearest: a_first"):
        corpus.main([str(tmp_path), "--out", str(out), "--device", "cpu", "--resume", "--redo", "a_frist"])
    # a pair the deadline cut to 30 s runs again at the 300 s limit; one stopped at 300 s does not
    data["rows"] = [{"pair": "c_cut", "size": "-", "note": "stopped after 30 s (pair limit 30 s); last: x"},
                    {"pair": "d_slow", "size": "-", "note": "stopped after 300 s (pair limit 300 s); last: x"}]
    (out / "results.json").write_text(json.dumps(data))
    # a pair the machine failed (device memory or disk full beside other children) runs again
    data["rows"] += [
        {"pair": "e_oom", "size": "module", "note": "not timed: the baseline itself failed in this environment "
         "(environment: the baseline failed: the device ran out of memory while other processes held 134.2 GiB"},
        {"pair": "f_disk", "size": "module", "note": "the baseline itself failed in this environment (runtime_error: "
         "the verification worker failed in step correctness: OSError: [Errno 28] No space left on device)"},
        {"pair": "g_wrong", "size": "module", "note": "the baseline itself failed in this environment "
         "(compile_error: Triton compilation failed at solution.py:19)"}]
    (out / "results.json").write_text(json.dumps(data))
    data["rows"].append({"pair": "h_tf32", "size": "module", "note": "not timed: the baseline itself failed in this "
                         "environment (wrong_answer: ... The problem allows float32: to accept this precision, pass "
                         "--allow tf32 (spec: allow: [tf32]; workbench: allowed precision)"})
    (out / "results.json").write_text(json.dumps(data))
    rows, _, _, _ = corpus.resumed(out / "results.json", data["header"], 300.0)
    assert [r.pair for r in rows] == ["d_slow", "g_wrong"]
    assert len(data["header"]["runs"]) == 1


def test_a_published_kernel_with_tf32_dots_is_measured_at_that_precision(tmp_path):
    """A published GEMM whose ``tl.dot`` is TF32 (Triton's default on float32) is the baseline at
    its own precision: the pair runs with ``--allow tf32`` and its row says why; an IEEE one and
    one without dots run under the float32 contract."""
    tf32 = tmp_path / "tf32.py"
    tf32.write_text("import triton.language as tl\n\ndef k(a, b):\n    return tl.dot(a, b)\n")
    ieee = tmp_path / "ieee.py"
    ieee.write_text("import triton.language as tl\n\ndef k(a, b):\n    return tl.dot(a, b, input_precision='ieee')\n")
    allow, why = corpus.published_precision(tf32)
    assert allow == ["tf32"] and why.startswith("TF32 allowed") and "line 4" in why
    assert corpus.published_precision(ieee) == ([], "")
    assert corpus.published_precision(tmp_path / "missing.py") == ([], "")
    settings = corpus.replace(corpus._settings("cuda", True), allow_precision=allow)
    opts = corpus.final_options("module", ["module", "bench"], settings)
    assert opts.allow_precision == ["tf32"] and opts.variants == ["module"] and not opts.tile_sizes


def test_torch_compile_is_prewarmed_per_size_while_the_pipeline_runs(monkeypatch):
    """On a GPU the compile anchor runs in the background at each size, compile only; the CPU
    starts nothing (torch.compile's anchors are GPU-only here)."""
    ka = ROOT / "tests" / "fixtures" / "formats" / "kernelagent"
    problem = load_problem(ka / "kernel.py", reference_path=ka / "problem.py")
    sizes = [problem.default_variant_name()]
    calls = []

    def fake(path, overrides, device, timeout, compile_only=False):
        calls.append((path, overrides, device, compile_only))
        return {"compile_s": 1.5}

    monkeypatch.setattr(corpus, "compile_anchor", fake)
    thread, results = corpus.prewarm(problem, ka / "problem.py", sizes, argparse.Namespace(type="cpu"), 10.0)
    assert thread is None and results == {} and calls == []
    thread, results = corpus.prewarm(problem, ka / "problem.py", sizes, argparse.Namespace(type="cuda"), 10.0)
    thread.join(timeout=10)
    assert results == {sizes[0]: {"compile_s": 1.5}}
    assert calls == [(ka / "problem.py", dict(problem.variant(sizes[0]).overrides), "cuda", True)]


def test_a_models_weights_count_in_the_bytes_a_forward_moves(tmp_path):
    """A batch-1 MLP reads 4 KB of input and its weights: the weights decide its bench size, or the
    size constants would be scaled until the layers no longer fit any memory (on the H200 a
    published MLP's layer sizes were scaled 65536 times)."""
    problem_src = (
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, n_in, hidden, n_out):\n"
        "        super().__init__()\n"
        "        self.a = nn.Linear(n_in, hidden)\n"
        "        self.b = nn.Linear(hidden, n_out)\n\n"
        "    def forward(self, x):\n"
        "        return self.b(torch.relu(self.a(x)))\n\n"
        "batch_size = 1\nn_in = 1000\nhidden = 16384\nn_out = 1000\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, n_in)]\n\n"
        "def get_init_inputs():\n    return [n_in, hidden, n_out]\n"
    )
    path = tmp_path / "mlp.py"
    path.write_text(problem_src)
    sizes = [b for b, _ in corpus.meta_sizes(problem_src, [{}, {"hidden": 32768}])]
    assert sizes[0] == 4 * (1000 * 16384 + 16384 + 16384 * 1000 + 1000) and sizes[1] > sizes[0]
    size, why = corpus.bench_size(load_problem(path), 4000.0, 100.0)
    # 131 MB of fp32 weights: 33 µs at 4000 GB/s; doubling every size constant quadruples them
    assert size == "bench" and why.startswith("size constants x2: 131.1 MB"), why


def test_a_kernelbench_gemm_is_bound_by_its_flop_not_its_bytes(tmp_path):
    """A KernelBench GEMM has no spec to declare its FLOP: they are read from its ``forward`` at the
    size timed, so the table calls it compute-bound (it reported 137 GFLOP GEMMs memory-bound at
    3% of the copy bandwidth)."""
    path = tmp_path / "gemm.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        return torch.matmul(a, b)\n\n"
        "M = 256\nK = 128\nN = 64\n\n"
        "def get_inputs():\n    return [torch.randn(M, K), torch.randn(K, N)]\n\n"
        "def get_init_inputs():\n    return []\n")
    problem = load_problem(path)
    assert corpus.problem_flop(problem, problem.variant("module")) == 2 * 256 * 128 * 64
    scaled = corpus.scaled_variant(problem, problem.variant("module"), 2, "bench")
    assert corpus.problem_flop(problem, scaled) == 8 * 2 * 256 * 128 * 64


def test_a_broadcast_shapes_ones_stay_ones_at_the_bench_size(tmp_path):
    """A parameter shaped ``(out_channels, 1, 1, 1)`` broadcasts over its 1s: scaling the sizes up
    doubles ``out_channels`` in the tuple and leaves the 1s (KernelBench level 2 p74 failed its
    bench size in its own reference when they became 2s)."""
    path = tmp_path / "mul.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, multiplier_shape):\n"
        "        super().__init__()\n"
        "        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))\n"
        "    def forward(self, x):\n"
        "        return x * self.multiplier\n\n"
        "batch_size = 4\nout_channels = 16\nwidth = 32\nmultiplier_shape = (out_channels, 1, 1)\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, out_channels, width, width)]\n\n"
        "def get_init_inputs():\n    return [multiplier_shape]\n")
    problem = load_problem(path)
    scaled = corpus.scaled_variant(problem, problem.variant("module"), 2, "bench")
    assert scaled.overrides["multiplier_shape"] == (32, 1, 1)
    assert scaled.overrides["out_channels"] == 32 and scaled.overrides["width"] == 64


def test_the_bench_size_stops_before_a_tensor_passes_int32_offsets(tmp_path):
    """Scaling every size constant stops before a tensor the forward touches passes 2^31 - 1
    elements (int32 offsets): a published conv kernel crashed at a size scaled past that, which
    the problem never poses. Here the output is 8x the input: x2 keeps it at 2^30, x4 would not."""
    path = tmp_path / "widen.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x.repeat(1, 8)\n\n"
        "batch = 4096\ndim = 8192\n\n"
        "def get_inputs():\n    return [torch.randn(batch, dim)]\n\n"
        "def get_init_inputs():\n    return []\n")
    size, why = corpus.bench_size(load_problem(path), 4000.0, 1e7)
    assert size == "bench" and why.startswith("size constants x2: "), why
    assert "x4 would make a tensor of 4294967296 elements, past the 2^31 - 1" in why


def test_the_largest_tensor_is_read_with_the_derived_constants_recomputed(tmp_path):
    """A constant computed from the size constants (``bias_shape = (out_channels, 1, 1, 1)``)
    follows them on the meta device as in the verifier's runs: left at its published value, the
    scaled forward failed to broadcast, the largest tensor read as unknown, and a bench size
    whose output passed 2^31 elements was chosen (a published conv kernel then faulted there)."""
    src = (
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, bias_shape):\n"
        "        super().__init__()\n"
        "        self.bias = nn.Parameter(torch.randn(bias_shape))\n"
        "    def forward(self, x):\n"
        "        return x.repeat(1, 1, 4, 1) * self.bias\n\n"
        "batch_size = 64\nout_channels = 16\nwidth = 2048\nscale = 2.0\nbias_shape = (out_channels, 1, 1)\n\n"
        "def get_inputs():\n    return [torch.rand(batch_size, out_channels, width, width // 64)]\n\n"
        "def get_init_inputs():\n    return [bias_shape]\n")
    sizes = corpus.meta_sizes(src, [{}, {"batch_size": 128, "out_channels": 32, "width": 4096}])
    assert [n for _, n in sizes] == [64 * 16 * 8192 * 32, 128 * 32 * 16384 * 64]
    assert sizes[1][0] == 4 * 32


def test_a_kept_candidate_counts_as_improved_only_where_its_interval_is_above_one():
    """A rules stage kept at 1.006x [0.996, 1.02] (kb_l2_006 on an H100) is not an improvement
    the summary may count; 3.14x [3.04, 3.27] is; without an interval the pipeline's 1.03x decides."""
    row = corpus.Row
    assert corpus.is_improved(row("a", "module", rules_vs_published=3.14, interval="[3.04, 3.27] (events)",
                                  stages_applied="autotuning"))
    assert not corpus.is_improved(row("b", "module", rules_vs_published=1.006, interval="[0.996, 1.02] (graph)",
                                      stages_applied="autotuning"))
    assert not corpus.is_improved(row("c", "module", rules_vs_published=1.0,
                                      interval="measured 1.089x [0.913, 1.1] (events)", stages_applied=""))
    assert corpus.is_improved(row("d", "module", rules_vs_published=1.05, stages_applied="memory_access"))
    assert not corpus.is_improved(row("e", "module", rules_vs_published=1.02, stages_applied="memory_access"))
    assert corpus.is_improved(row("f", "module", rules_vs_published=1.5e3, interval="[1.2e+03, 1.8e+03] (events)",
                                  stages_applied="autotuning"))
