"""Saved outputs stream through host memory in chunks, and comparing against them chunk by
chunk gives the same answer as comparing whole tensors."""

from __future__ import annotations

import torch

from xeforge_core.worker import compare, expected
from xeforge_core.worker.compare import Tolerance, compare_outputs
from xeforge_core.worker.expected import ExpectedStore, StoredTensor


def test_round_trip_in_small_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(expected, "CHUNK_BYTES", 100)  # 25 float32 per chunk
    store = ExpectedStore(tmp_path)
    x = torch.randn(7, 31)
    b = torch.randn(5).to(torch.bfloat16)
    hashes = store.save("run", [x, 3, b], reference=[x * 2])
    got = store.load("run")
    out, ref = got["outputs"], got["reference"]
    assert isinstance(out[0], StoredTensor) and out[0].shape == (7, 31) and out[1] == 3
    assert torch.equal(out[0].load(), x) and torch.equal(out[2].load(), b)
    assert torch.equal(ref[0].load(), x * 2)
    assert [c.numel() for c in out[0].chunks(50)] == [50, 50, 50, 50, 17]
    assert hashes["outputs"][0] == out[0].sha256 and hashes["outputs"][1] is None
    store.save("again", [x.clone(), 3, b.clone()])
    assert store.load("again")["outputs"][0].sha256 == out[0].sha256  # bitwise equal, same digest


def test_chunked_comparison_matches_the_whole_tensor_one(tmp_path, monkeypatch):
    monkeypatch.setattr(compare, "COMPARE_CHUNK", 37)
    store = ExpectedStore(tmp_path)
    e = torch.randn(20, 50) * 30
    store.save("k", [e])
    stored = store.load("k")["outputs"]
    a = e.clone()
    a[3, 7] += 5.0
    a[19, 49] = float("nan")
    for expected_side in ([e], stored):
        ok, comps, _, _ = compare_outputs([a], expected_side, Tolerance(), poisoned=True)
        assert not ok
        c = comps[0]
        assert (c.mismatches, c.nan_mismatch) == (2, 1)
        assert abs(c.max_abs_error - 5.0) < 1e-3
    ok, _, _, _ = compare_outputs([e.clone()], stored, Tolerance(), poisoned=True)
    assert ok


def test_outputs_that_do_not_fit_on_disk_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    """At a published size the saved parts of one run (outputs, reference, three float32 truth
    tensors) can exceed the disk: the float64 truth's parts are dropped first (that run is then
    checked at the dtype's tolerance, with a warning), and outputs that cannot fit at all are an
    ``environment`` verdict named with the bytes, not an OSError after minutes of writing."""
    import pytest

    from xeforge_core.verdict import VerdictKind
    from xeforge_core.worker import roles
    from xeforge_core.worker.calibrated import Truth64
    from xeforge_core.worker.errors import WorkerError

    out = [torch.zeros(1000)]  # 4000 bytes, and 4000 more for the reference
    truth = [Truth64(torch.zeros(1000), torch.zeros(1000), 0.0, 0.0, torch.zeros(1000))]  # 12000 bytes
    combo = roles.Combo(variant={"name": "module"}, seed=0, distribution="normal")
    meta: dict = {"truth64": {}}
    warnings: list[str] = []
    monkeypatch.setattr(roles, "disk_room", lambda root: 20_000)
    assert roles._fit_on_disk(tmp_path, combo, out, out, truth, meta, warnings) is truth and not warnings
    monkeypatch.setattr(roles, "disk_room", lambda root: 10_000)
    assert roles._fit_on_disk(tmp_path, combo, out, out, truth, meta, warnings) is None
    assert meta["truth64"]["not_saved"] == [combo.key] and "dtype's tolerance" in warnings[0]
    monkeypatch.setattr(roles, "disk_room", lambda root: 7_000)
    with pytest.raises(WorkerError) as err:
        roles._fit_on_disk(tmp_path, combo, out, out, truth, meta, warnings)
    assert err.value.failure.kind is VerdictKind.ENVIRONMENT and "7.8 KiB on disk" in err.value.failure.reason
    assert not list(tmp_path.iterdir())
