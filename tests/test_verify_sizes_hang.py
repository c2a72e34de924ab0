"""A hang the ``sizes`` job finds ends the verification there: a ``timeout`` verdict naming the
job and whose code hung (a baseline's hang is the environment's), no other job started, and the
progress saying it timed out rather than finished. The worker's side (the notes that name whose
code is being probed) runs for real on a candidate whose forward() raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core import runner
from xeforge_core.problem import load_problem
from xeforge_core.verdict import StepStatus, VerdictKind
from xeforge_core.verify import VerifyOptions, verify
from xeforge_core.worker_outcome import WorkerOutcome

SAMPLES = Path(__file__).resolve().parent.parent / "sample_kernels"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path / "cache"))


def _hung_sizes_runner(last_progress: str, roles: list[str]):
    """A ``run_worker`` whose ``sizes`` job is killed at its limit with ``last_progress`` as its
    last note; any other job is recorded in ``roles`` and fails the test."""

    def run(job, *, timeout_s, **_kw):
        roles.append(job["role"])
        assert job["role"] == "sizes", f"a {job['role']} job ran after the sizes job hung"
        return WorkerOutcome(result=None, returncode=-9, signal_name="SIGKILL", timed_out=True,
                             seconds=timeout_s + 0.4, timeout_s=timeout_s, last_progress=last_progress)

    return run


def _verify(run_worker, progress: list[str]):
    problem = load_problem(SAMPLES / "01_vector_add.py")
    return verify(problem, (SAMPLES / "01_vector_add.py").read_text(), device="cpu",
                  options=VerifyOptions(timeout_s=300.0, seeds=1, distributions=["normal"]),
                  on_progress=progress.append, run_worker=run_worker, candidate_name="cand.py")


def test_a_candidate_hanging_in_the_sizes_job_is_a_timeout_at_once():
    roles: list[str] = []
    progress: list[str] = []
    verdict = _verify(_hung_sizes_runner("sizes: probing the candidate at ci-probe-TOKENS-3", roles), progress)
    assert roles == ["sizes"]
    assert verdict.kind is VerdictKind.TIMEOUT
    assert verdict.reason.startswith("the sizes job"), verdict.reason
    assert "hung in the candidate at ci-probe-TOKENS-3" in verdict.reason
    assert "120 s" in verdict.reason  # the sizes job's own limit, not the verification's 300 s
    sizes = verdict.step("sizes")
    assert sizes is not None and sizes.status is StepStatus.FAILED
    assert verdict.step("correctness").status is StepStatus.SKIPPED
    assert not any(line.startswith("sizes: finished") for line in progress), progress
    assert any(line.startswith("sizes: timed out after 120.4 s") for line in progress), progress
    assert any("the verification ends here (timeout)" in line for line in progress), progress


def test_a_baseline_hanging_in_the_sizes_job_is_the_environments_fault():
    roles: list[str] = []
    verdict = _verify(_hung_sizes_runner("sizes: loading the baseline", roles), [])
    assert roles == ["sizes"]
    assert verdict.kind is VerdictKind.ENVIRONMENT
    assert "hung in the baseline while loading it" in verdict.reason
    assert verdict.reason.startswith("the baseline itself hangs (timeout: ")


def test_a_hanging_baseline_is_named_with_its_line_and_not_ported():
    """The baseline's line comes from the faulthandler dump the killed job left, and the loop
    does not try the portability codemod on a baseline that hangs (it is not the device's)."""
    from xeforge_core.pipeline.loop import _baseline_hangs

    dump = ('Thread 0x01 (most recent call first):\n  File "/job/src/01_vector_add.py", line 29 in forward\n'
            '  File "/job/worker.py", line 7 in run\n')

    def run(job, *, timeout_s, **_kw):
        return WorkerOutcome(result=None, returncode=-9, signal_name="SIGKILL", timed_out=True, seconds=timeout_s,
                             timeout_s=timeout_s, last_progress="sizes: probing the baseline at ci", stderr=dump)

    verdict = _verify(run, [])
    assert verdict.kind is VerdictKind.ENVIRONMENT
    assert "(at baseline line 29)" in verdict.reason
    assert verdict.step("baseline").evidence["baseline_kind"] == "timeout"
    assert _baseline_hangs(verdict)
    refused = verdict.__class__(kind=VerdictKind.ENVIRONMENT, steps=[
        verdict.step("baseline").__class__(name="baseline", status=StepStatus.FAILED,
                                           evidence={"baseline_kind": "runtime_error"})])
    assert not _baseline_hangs(refused)  # a runtime error here may be the device's: porting is tried


def test_the_sizes_job_names_whose_code_it_probes(tmp_path):
    """The real worker: its notes name each module before it is loaded and each point before it
    is called, so the last note of a killed job says whose code hung."""
    source = (SAMPLES / "01_vector_add.py").read_text()
    broken = source.replace("def forward(self", "def forward(self, *args, **kwargs):\n"
                            "        raise RuntimeError('stop here')\n\n    def _unused(self", 1)
    assert broken != source
    seen: list[str] = []

    def only_sizes(job, **kw):
        if job["role"] != "sizes":
            raise _Stop
        return runner.run_worker(job, **kw)

    problem = load_problem(SAMPLES / "01_vector_add.py")
    with pytest.raises(_Stop):
        verify(problem, broken, device="cpu", on_progress=seen.append, run_worker=only_sizes,
               options=VerifyOptions(timeout_s=120.0, seeds=1, distributions=["normal"], use_cache=False))
    assert "sizes: loading the baseline" in seen, seen
    assert "sizes: loading the candidate" in seen, seen
    assert "sizes: probing the candidate at ci" in seen, seen


class _Stop(Exception):
    """Stops the verification after its sizes job."""
