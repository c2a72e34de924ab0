"""``xeforge batch --ray`` on a cluster of several nodes, simulated on this machine with
``ray.cluster_utils.Cluster`` (one raylet per node): the verification jobs' files travel between
nodes (nothing is shared), and a node that dies while it runs a problem's pipeline takes that
task with it: Ray starts it again on another node and every row is there.

Opt-in (``XEFORGE_RAY_CLUSTER_TESTS=1``): starting three raylets and losing one costs about a
minute on a 2-CPU machine, which the default run leaves to ``tests/test_batch_ray.py``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
if os.environ.get("XEFORGE_RAY_CLUSTER_TESTS") != "1":
    pytest.skip("multi-node Ray tests are opt-in: XEFORGE_RAY_CLUSTER_TESTS=1", allow_module_level=True)

from ray.cluster_utils import Cluster  # noqa: E402

from xeforge_core.raybatch import run_ray_batch  # noqa: E402
from xeforge_core.verify import VerifyOptions  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "sample_kernels"
LEAN = VerifyOptions(seeds=1, distributions=["normal"], include_odd_size=False, grid_coverage=False, timeout_s=240)


@pytest.fixture(scope="module")
def cluster():
    """A head node that runs nothing but the driver, and two worker nodes of one CPU each."""
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    c.add_node(num_cpus=1)
    c.add_node(num_cpus=1)
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def test_a_dead_node_takes_its_task_elsewhere(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))
    problems = tmp_path / "problems"
    problems.mkdir()
    for name in ("07a_gemm", "07b_gemm"):
        for suffix in (".py", ".yaml", "_ref.py"):
            shutil.copy(SAMPLES / f"07_gemm_fp32_upcast{suffix}", problems / f"{name}{suffix}")
    nodes: dict[str, str] = {}
    removed: list[str] = []

    def on_start(kernel: str, info: dict) -> None:
        nodes[kernel] = info["node"]

    def on_event(kernel: str, event: dict) -> None:
        if removed or event.get("event") != "job_started" or event["role"] != "candidate":
            return
        victim = next(n for n in cluster.worker_nodes if n.node_id == nodes[kernel])
        removed.append(kernel)
        cluster.remove_node(victim, allow_graceful=False)
        cluster.add_node(num_cpus=1)

    rows = run_ray_batch(problems, device="cpu", stages=["dtype_fix"], workspace=tmp_path / "ws",
                         verify_options=LEAN, on_start=on_start, on_event=on_event)
    assert len(removed) == 1
    by_name = {r.kernel: r for r in rows}
    assert sorted(by_name) == ["07a_gemm", "07b_gemm"]
    for r in rows:
        assert r.status == {"dtype_fix": "approved"} and r.verdicts == {"dtype_fix": "ok"} and not r.error, r
    survivor = next(r for r in rows if r.kernel != removed[0])
    assert [j["role"] for j in survivor.jobs] == ["baseline", "candidate"] and survivor.attempts == 1
    # started again on another node (which may serve its baseline, or its verdict, from the
    # verifier's caches: these simulated nodes share one disk)
    assert by_name[removed[0]].attempts == 2
