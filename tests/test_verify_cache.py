"""The verdict cache: keys move with everything that can change a verdict; entries round-trip."""

from __future__ import annotations

from xeforge_core import cache
from xeforge_core.verdict import Step, StepStatus, Verdict, VerdictKind
from xeforge_core.verify import VerifyOptions


def _key(**over):
    args = dict(baseline_source="b", candidate_source="c", reference_source=None,
                spec={"inputs": {}}, correctness_variants=[{"name": "ci", "dims": {"N": 8}}],
                performance_variants=[], options=VerifyOptions().result_affecting(),
                device_key="dev1")
    args.update(over)
    return cache.verdict_key(**args)


def test_key_is_stable_and_moves_with_every_input():
    k = _key()
    assert k == _key() and len(k) == 64
    changed = [
        _key(candidate_source="c2"), _key(baseline_source="b2"), _key(reference_source="r"),
        _key(spec={"inputs": {"X": {}}}), _key(correctness_variants=[{"name": "ci", "dims": {"N": 9}}]),
        _key(performance_variants=[{"name": "bench-gpu"}]), _key(device_key="dev2"),
        _key(options=VerifyOptions(seeds=5).result_affecting()),
        _key(options=VerifyOptions(rtol=1e-3).result_affecting()),
        _key(options=VerifyOptions(allow_dtype_change=True).result_affecting()),
    ]
    assert len({k, *changed}) == len(changed) + 1


def test_limits_do_not_change_the_key():
    assert _key(options=VerifyOptions(timeout_s=5, memory_bytes=1 << 30).result_affecting()) == _key()


def test_worker_code_version_and_versions():
    v = cache.worker_code_version()
    assert len(v) == 16 and v == cache.worker_code_version()
    assert len(cache.verifier_code_version()) == 16 and cache.verifier_code_version() != v
    versions = cache.library_versions()
    assert versions["torch"] and versions["triton"] and versions["numpy"]


def test_round_trip_marks_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path))
    assert cache.cache_root() == tmp_path
    store = cache.VerdictCache()
    verdict = Verdict(kind=VerdictKind.WRONG_ANSWER, reason="differs",
                      steps=[Step("correctness", StepStatus.FAILED, 0.5, "max abs error 3")])
    assert store.get("k") is None
    store.set("k", verdict)
    hit = store.get("k")
    assert hit is not None and hit.cached and hit.kind is VerdictKind.WRONG_ANSWER
    assert hit.steps[0].status is StepStatus.FAILED and hit.steps[0].summary == "max abs error 3"
    assert not verdict.cached
    store.close()


def test_a_change_to_how_a_verdict_is_decided_invalidates_cached_verdicts(tmp_path, monkeypatch):
    """Not only the worker's code: a change to the sizes the parent derives or to the contract
    (``xeforge_core/contract.py``) changes what a verification concludes, so it changes the key."""
    package = tmp_path / "xeforge_core"
    (package / "worker").mkdir(parents=True)
    (package / "worker" / "roles.py").write_text("ROLE = 1\n")
    (package / "contract.py").write_text("LIMIT = 1\n")
    monkeypatch.setattr(cache, "PACKAGE_DIR", package)
    cache.verifier_code_version.cache_clear()
    before = cache.verifier_code_version()
    (package / "contract.py").write_text("LIMIT = 2\n")
    cache.verifier_code_version.cache_clear()
    assert cache.verifier_code_version() != before
    cache.verifier_code_version.cache_clear()
