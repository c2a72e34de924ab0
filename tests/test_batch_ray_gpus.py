"""How verification jobs share GPUs under Ray, on a CPU machine: a local instance that declares
two GPUs (Ray schedules them as resources and sets ``CUDA_VISIBLE_DEVICES`` for the tasks it
gives them; the kernels still run in Triton's interpreter, and ``force_timing`` times them
host-clocked, which exercises the timing job without a GPU).

Two verifications at once: their correctness jobs take shares of a GPU and may overlap; their
timing jobs each take a whole GPU, run at the same time on different GPUs, never overlap any
other job on theirs, and take the timing lock named after the physical GPU Ray assigned.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from xeforge_core.devices import detect_device  # noqa: E402
from xeforge_core.problem import load_problem  # noqa: E402
from xeforge_core.raybatch import JobPlacement, RayWorkerRunner  # noqa: E402
from xeforge_core.verify import VerifyOptions, verify  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_gpu_instance():
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_timing_jobs_take_a_whole_gpu_each(two_gpu_instance, tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    problem = load_problem(ROOT / "sample_kernels" / "07_gemm_fp32_upcast.py")
    candidate = problem.kernel.source.replace("a.to(tl.float32), b.to(tl.float32)", "a, b")
    assert candidate != problem.kernel.source
    opts = VerifyOptions(seeds=1, include_odd_size=False, use_cache=False, force_timing=True, warmup_ms=1, rep_ms=5,
                         variants=["ci"], performance_variants=["ci"], lock_dir=str(tmp_path / "locks"))
    device = detect_device("cpu")
    hook = RayWorkerRunner(JobPlacement(device_type="cuda", correctness_gpus=0.5))
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
