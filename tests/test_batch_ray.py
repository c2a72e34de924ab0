"""``xeforge batch DIR --ray`` on a local Ray instance (2 CPUs, Triton's interpreter): the same
verdicts as the sequential batch; killed Ray workers (a problem task's, and a verification job's)
are retried and every row is there; Ctrl-C stops every task and leaves no process behind;
``--resume`` redoes nothing that finished; and timing jobs take a whole GPU each.

One Ray instance serves the module (the CLI test starts its own, as a user's laptop would, and
its resume run joins the module's by address). It declares two GPUs: on this CPU machine Ray
schedules them as resources and sets ``CUDA_VISIBLE_DEVICES`` for the tasks it gives them, while
the kernels run in Triton's interpreter (``force_timing`` times them host-clocked, which
exercises the timing job without a GPU); the batches run with ``--device cpu`` and ask for none. The problems are tiny: the vector add (no stage
applies: no verification), the fp32-upcast GEMM at its ``ci`` shape (one candidate, so one
baseline job and one candidate job), and a spec with no variant to verify (an error row). Every
process a batch starts carries a marker in its environment (``XEFORGE_TEST_MARK``: the batch
forwards ``XEFORGE_*`` variables into its tasks), which is how the tests look for leftovers.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from xeforge_core.batch import BatchRow, read_summary, run_batch  # noqa: E402
from xeforge_core.devices import detect_device  # noqa: E402
from xeforge_core.problem import load_problem  # noqa: E402
from xeforge_core.raybatch import JobPlacement, RayBatchOptions, RayWorkerRunner, run_ray_batch  # noqa: E402
from xeforge_core.verify import VerifyOptions, verify  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_kernels"
#: One seed, one distribution, no derived sizes: each verification is one baseline and one candidate job.
LEAN = {"seeds": 1, "distributions": ["normal"], "include_odd_size": False, "grid_coverage": False,
        "tile_sizes": False}
PIPELINE = {"stages": ["dtype_fix"], "verify_options": VerifyOptions(timeout_s=240, **LEAN)}
CLI_FAST = ["--device", "cpu", "--stages", "dtype_fix", "--seeds", "1", "--no-odd-size", "--timeout", "240"]


def make_problems(root: Path, *, gemms: tuple[str, ...] = ("07_gemm_fp32_upcast",), vector_add: bool = True,
                  bad: bool = True) -> Path:
    """A directory of problems: the vector add, a copy of the GEMM sample per name, and a spec
    with no variant (its row carries the error)."""
    root.mkdir(parents=True, exist_ok=True)
    for f in SAMPLES.glob("01_vector_add*") if vector_add else ():
        shutil.copy(f, root / f.name)
    for name in gemms:
        for suffix in (".py", ".yaml", "_ref.py"):
            shutil.copy(SAMPLES / f"07_gemm_fp32_upcast{suffix}", root / f"{name}{suffix}")
    if bad:
        shutil.copy(SAMPLES / "07_gemm_fp32_upcast.py", root / "zz_unverifiable.py")
        (root / "zz_unverifiable.yaml").write_text(  # a spec its kernel cannot run: one input for a GEMM's two
            "inputs:\n  X:\n    shape: [M, K]\n    dtype: float16\nci:\n  - params: [X]\n    dims: {M: 8, K: 8}\n")
    return root


def marked_processes(mark: str, *, workers_only: bool = False) -> list[str]:
    """``"pid: command line"`` of the live processes whose environment holds the marker (with
    ``workers_only``: only verification workers, not the Ray worker pool a test instance keeps)."""
    found = []
    needle = f"XEFORGE_TEST_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if (entry / "stat").read_text().split(")")[-1].split()[0] == "Z":
                continue
        except OSError:
            continue
        if not workers_only or "xeforge_core.worker" in cmd:
            found.append(f"{entry.name}: {cmd[:160]}")
    return found


def wait_until_gone(mark: str, *, workers_only: bool = False, timeout_s: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    left = marked_processes(mark, workers_only=workers_only)
    while left and time.monotonic() < deadline:
        time.sleep(0.25)
        left = marked_processes(mark, workers_only=workers_only)
    return left


def verdict_view(rows: list[BatchRow]) -> dict[str, tuple]:
    """What must not depend on how the batch ran: per kernel the stages, their status and
    verdicts, whether there was an error, and the final speedup."""
    return {r.kernel: (tuple(r.stages), tuple(sorted(r.status.items())), tuple(sorted(r.verdicts.items())),
                       bool(r.error), r.final_speedup) for r in rows}


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray instance (2 CPUs, 2 GPUs as scheduling resources) for the module; its GCS
    address."""
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture()
def fresh_env(tmp_path, monkeypatch):
    """A fresh verdict cache (nothing is served from an earlier run) and a marker."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XEFORGE_TEST_MARK", mark)
    return mark


@pytest.fixture(scope="module")
def sequential_rows(tmp_path_factory):
    """The sequential batch over the standard problems, on a verdict cache of its own."""
    tmp = tmp_path_factory.mktemp("sequential")
    old = os.environ.get("XEFORGE_CACHE_DIR")
    os.environ["XEFORGE_CACHE_DIR"] = str(tmp / "cache")
    try:
        rows = run_batch(make_problems(tmp / "problems"), devices=["cpu"], workspace=tmp / "ws", **PIPELINE)
    finally:
        if old is None:
            os.environ.pop("XEFORGE_CACHE_DIR", None)
        else:
            os.environ["XEFORGE_CACHE_DIR"] = old
    return rows


def test_ray_batch_gives_the_sequential_verdicts(ray_address, sequential_rows, fresh_env, tmp_path):
    streamed: list[str] = []
    rows = run_ray_batch(make_problems(tmp_path / "problems"), device="cpu", workspace=tmp_path / "ws",
                         on_row=lambda r: streamed.append(r.kernel), **PIPELINE)
    assert verdict_view(rows) == verdict_view(sequential_rows)
    assert sorted(streamed) == [r.kernel for r in rows] == ["01_vector_add", "07_gemm_fp32_upcast",
                                                             "zz_unverifiable"]
    by_name = {r.kernel: r for r in rows}
    gemm = by_name["07_gemm_fp32_upcast"]
    assert gemm.status == {"dtype_fix": "approved"} and gemm.verdicts == {"dtype_fix": "ok"} and not gemm.error
    # its verification ran as Ray jobs, recorded with the device and time span of each
    assert [j["role"] for j in gemm.jobs] == ["baseline", "candidate"]
    assert all(j["device"].endswith("/cpu:0") and j["end"] >= j["start"] for j in gemm.jobs)
    assert gemm.device == "cpu:0" and gemm.attempts == 1 and Path(gemm.session).is_dir()
    assert by_name["zz_unverifiable"].error and by_name["zz_unverifiable"].status["dtype_fix"] == "failed"
    assert wait_until_gone(fresh_env, workers_only=True) == []


def test_killed_workers_are_retried_and_every_row_is_there(ray_address, sequential_rows, fresh_env, tmp_path):
    """Kill the Ray worker running one problem's pipeline while it waits for its first job, and
    the Ray worker running another problem's candidate job: both are retried."""
    problems = make_problems(tmp_path / "problems", gemms=("07_gemm_fp32_upcast", "08_gemm_copy"), vector_add=False,
                             bad=False)
    pids: dict[str, int] = {}
    killed: dict[str, str] = {}

    def on_start(kernel: str, info: dict) -> None:
        pids[kernel] = info["pid"]

    def on_event(kernel: str, event: dict) -> None:
        if event.get("event") != "job_started":
            return
        if kernel == "07_gemm_fp32_upcast" and kernel not in killed:
            killed[kernel] = "problem task"
            os.kill(pids[kernel], signal.SIGKILL)
        elif kernel == "08_gemm_copy" and event["role"] == "candidate" and kernel not in killed:
            killed[kernel] = "candidate job"
            os.kill(event["pid"], signal.SIGKILL)

    rows = run_ray_batch(problems, device="cpu", workspace=tmp_path / "ws", on_start=on_start, on_event=on_event,
                         options=RayBatchOptions(max_retries=2), **PIPELINE)
    assert killed == {"07_gemm_fp32_upcast": "problem task", "08_gemm_copy": "candidate job"}
    by_name = {r.kernel: r for r in rows}
    assert sorted(by_name) == ["07_gemm_fp32_upcast", "08_gemm_copy"]
    expected = verdict_view(sequential_rows)["07_gemm_fp32_upcast"]
    copy = BatchRow(**{**by_name["08_gemm_copy"].to_dict(), "kernel": "07_gemm_fp32_upcast"})
    assert verdict_view([by_name["07_gemm_fp32_upcast"]]) == verdict_view([copy]) == {"07_gemm_fp32_upcast": expected}
    # the pipeline killed mid-run started again from scratch; the job killed mid-run ran again
    assert by_name["07_gemm_fp32_upcast"].attempts == 2 and by_name["08_gemm_copy"].attempts == 1
    assert [j["role"] for j in by_name["08_gemm_copy"].jobs] == ["baseline", "candidate"]
    # the killed Ray workers took their verification workers with them
    assert wait_until_gone(fresh_env, workers_only=True) == []


def _cli(args: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "xeforge_core.cli", "batch", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_ctrl_c_leaves_nothing_and_resume_redoes_nothing(ray_address, fresh_env, tmp_path):
    """Ctrl-C while the batch is provably running, never on timing: the GEMM's forward blocks in
    the baseline worker until the batch is interrupted, and the interrupt is sent once that worker
    is seen (polled in /proc) and the vector add is finished. The resume then runs the real GEMM."""
    problems = make_problems(tmp_path / "problems", bad=False)
    gemm = problems / "07_gemm_fp32_upcast.py"
    real = gemm.read_text()
    forward = "        return kernel_function(x, self.weight)\n"
    assert real.count(forward) == 1
    gemm.write_text(real.replace(forward, "        import time\n\n        time.sleep(3600)  # until interrupted\n"
                                          + forward))
    out = tmp_path / "runs" / "summary.csv"
    ws = tmp_path / "ws"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRITON_INTERPRET": "1"}
    # a batch on its own local Ray instance; Ctrl-C (SIGINT to its whole process group, as a
    # terminal sends it) while the GEMM's baseline job blocks and the vector add is finished
    proc = _cli([str(problems), "--ray", "--workspace", str(ws), "--out", str(out), *CLI_FAST], env,
                start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 600  # a generous bound for a loaded machine; nothing races it
    while True:
        seen = "".join(lines)
        if ("== 01_vector_add" in seen and "[07_gemm_fp32_upcast] baseline job on" in seen
                and marked_processes(fresh_env, workers_only=True)):
            break  # the blocked baseline worker is alive: the batch cannot finish on its own
        assert proc.poll() is None, f"the batch ended before it could be interrupted: {seen[-3000:]}"
        assert time.monotonic() < deadline, seen[-3000:]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=300)  # about 2 s on an idle machine; the bound only turns a hang into a report
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the batch did not exit within 300 s of Ctrl-C; what it printed:\n" + "".join(lines)[-4000:])
    reader.join(timeout=30)
    rest = "".join(lines)
    assert proc.returncode == 130, rest[-3000:]
    assert "interrupted; the summary keeps 1 finished kernel(s)" in rest
    # nothing of it is left: no verification worker, no Ray worker, no raylet
    assert wait_until_gone(fresh_env) == []
    first = {r.kernel: r for r in read_summary(out)}
    assert list(first) == ["01_vector_add"]
    data = json.loads(out.with_suffix(".json").read_text())
    assert [r["kernel"] for r in data["rows"]] == ["01_vector_add"] and data["meta"]["mode"] == "ray"

    # --resume, joining the module's Ray instance, on the real GEMM: the finished kernel is not run again
    gemm.write_text(real)
    proc = _cli([str(problems), "--ray", ray_address, "--resume", "--workspace", str(ws), "--out", str(out),
                 *CLI_FAST], env)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    assert "resuming" in stderr and "1 kernel(s) already in the summary are kept and skipped" in stderr
    assert "1 kernel(s) from" in stderr and "== 01_vector_add" not in stderr and "01_vector_add:" not in stderr
    rows = list(csv.DictReader(out.open()))
    assert [r["kernel"] for r in rows] == ["01_vector_add", "07_gemm_fp32_upcast"]
    assert rows[0]["session"] == first["01_vector_add"].session
    assert rows[1]["dtype_fix"] == "approved" and rows[1]["attempts"] == "1"
    sessions = [p.name for p in ws.iterdir() if (p / ".git").exists()]
    assert len([s for s in sessions if s.startswith("01_vector_add")]) == 1, sessions
    assert wait_until_gone(fresh_env, workers_only=True) == []


def test_timing_jobs_take_a_whole_gpu_each(ray_address, tmp_path, monkeypatch):
    """Two verifications at once: their correctness jobs take shares of a GPU and may overlap;
    their timing jobs each take a whole GPU, never overlap any other job on theirs, and take
    the timing lock named after the physical GPU Ray assigned."""
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    problem = load_problem(ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py")
    candidate = problem.kernel.source.replace("a.to(tl.float32), b.to(tl.float32)", "a, b")
    assert candidate != problem.kernel.source
    opts = VerifyOptions(use_cache=False, force_timing=True, warmup_ms=1, rep_ms=5, variants=["ci"],
                         performance_variants=["ci"], lock_dir=str(tmp_path / "locks"), **LEAN)
    device = detect_device("cpu")
    # as on a cluster of several nodes: the jobs' files travel with them
    hook = RayWorkerRunner(JobPlacement(device_type="cuda", correctness_gpus=0.5, ship_files=True))
    verdicts = {}

    def one(i: int) -> None:
        verdicts[i] = verify(problem, candidate, device=device, options=opts, run_worker=hook)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for v in verdicts.values():
        assert v.kind.value == "ok", v.reason
        assert [p.variant for p in v.performance] == ["ci"]
    host = socket.gethostname()
    timing = [j for j in hook.jobs if j["role"] == "timing"]
    assert sorted(j["role"] for j in hook.jobs) == ["baseline"] * 2 + ["candidate"] * 2 + ["timing"] * 2
    assert {j["device"] for j in hook.jobs} <= {f"{host}/cuda:0", f"{host}/cuda:1"}
    for t in timing:  # nothing else on its GPU while it timed
        rivals = [j for j in hook.jobs if j is not t and j["device"] == t["device"]]
        assert all(j["end"] <= t["start"] or j["start"] >= t["end"] for j in rivals), (t, rivals)
    a, b = timing
    if a["start"] < b["end"] and b["start"] < a["end"]:  # timed at once: on different GPUs
        assert a["device"] != b["device"]
    # each timing run took the lock of the physical GPU it was given
    locks = {p.name for p in (tmp_path / "locks").iterdir()}
    assert {f"{host}-cuda{j['device'].rsplit(':', 1)[1]}.lock" for j in timing} <= locks
