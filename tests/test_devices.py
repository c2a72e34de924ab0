"""Device selection (pure logic, no hardware), the probe worker, and the fingerprint."""

from __future__ import annotations

import pytest

from xeforge_core import devices
from xeforge_core.devices import DeviceInfo, build_device_info, detect_device, select_device


def test_auto_prefers_xpu_then_cuda_then_cpu():
    assert select_device(None, {"xpu": 2, "cuda": 1, "cpu": 1}) == ("xpu", 0)
    assert select_device("auto", {"xpu": 0, "cuda": 4, "cpu": 1}) == ("cuda", 0)
    assert select_device(None, {"xpu": 0, "cuda": 0, "cpu": 1}) == ("cpu", 0)
    assert select_device(None, {}) == ("cpu", 0)


def test_overrides():
    avail = {"xpu": 2, "cuda": 3, "cpu": 1}
    assert select_device("cpu", avail) == ("cpu", 0)
    assert select_device("cuda", avail) == ("cuda", 0)
    assert select_device("cuda:2", avail) == ("cuda", 2)
    assert select_device("XPU:1", avail) == ("xpu", 1)


@pytest.mark.parametrize("override,avail,words", [
    ("cuda", {"cpu": 1}, ["not available", "available: cpu"]),
    ("cuda:3", {"cuda": 2, "cpu": 1}, ["does not exist", "cuda:0..cuda:1"]),
    ("xpu", {"cuda": 1, "cpu": 1}, ["Intel's Triton backend", "cuda:0"]),
    ("tpu", {"cpu": 1}, ["unknown device", "xpu:N"]),
    ("cpu:1", {"cpu": 1}, ["only one cpu"]),
])
def test_bad_overrides_name_what_is_available(override, avail, words):
    reasons = {"xpu": "torch.xpu works but Intel's Triton backend is not installed"}
    with pytest.raises(ValueError) as err:
        select_device(override, avail, reasons)
    for w in words:
        assert w in str(err.value)


def _probe(name="NVIDIA H200", **extra):
    dev = {"type": "cuda", "index": 0, "name": name, "driver_version": "560.35.03",
           "triton_backend": "nvidia", "compute_units": 132, "l2_bytes": 62914560,
           "memory_bytes": 150_000_000_000, "extra": {}}
    dev.update(extra)
    return {"available": {"cuda": 1, "cpu": 1}, "reasons": {},
            "devices": {"cuda:0": dev},
            "versions": {"python": "3.12.3", "torch": "2.11.0", "triton": "3.6.0", "numpy": "2.5.2"}}


def test_fingerprint_key_is_stable_and_sensitive():
    a = build_device_info("cuda", 0, _probe())
    b = build_device_info("cuda", 0, _probe())
    assert a.fingerprint_key() == b.fingerprint_key()
    assert len(a.fingerprint_key()) == 16
    c = build_device_info("cuda", 0, _probe(driver_version="570.0"))
    assert c.fingerprint_key() != a.fingerprint_key()
    assert not a.interpreter and a.torch_device == "cuda:0"
    assert a.fingerprint["versions"]["torch"] == "2.11.0"


def test_profile_attached_when_knowledge_base_knows_the_device():
    info = build_device_info("cuda", 0, _probe())
    try:
        from xeforge_core.knowledge import load_knowledge

        known = load_knowledge().profile_for_device("NVIDIA H200") is not None
    except Exception:
        known = False
    if known:
        assert info.profile is not None
        assert info.profile["peak_tflops"]["fp16"] > 0
        assert info.profile["bandwidth_gbps"] > 0
        assert info.fingerprint["profile_id"] == info.profile["id"]
    unknown = build_device_info("cuda", 0, _probe(name="Mystery GPU 9000"))
    assert unknown.profile is None
    assert "no knowledge-base profile" in unknown.fingerprint["profile"]


def test_detect_cpu_in_a_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path))
    devices.clear_probe_cache()
    info = detect_device("cpu")
    assert isinstance(info, DeviceInfo)
    assert info.type == "cpu" and info.interpreter and info.profile is None
    fp = info.fingerprint
    assert fp["triton_backend"] == "interpreter"
    assert fp["versions"]["torch"] and fp["versions"]["triton"] and fp["versions"]["python"]
    assert fp["memory_bytes"] and fp["memory_bytes"] > 0
    # cached on disk: a fresh process-level cache reads it back with the same key
    assert list((tmp_path / "devices").glob("*.json"))
    devices.clear_probe_cache()
    assert detect_device("cpu").fingerprint_key() == info.fingerprint_key()


def test_detect_auto_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("XEFORGE_DEVICE", raising=False)
    devices.clear_probe_cache()
    probe = devices.probe_devices()
    info = detect_device()
    assert info.type == select_device(None, probe["available"])[0]
    with pytest.raises(ValueError):
        detect_device("gpu")


def test_probe_role_through_the_worker_entry_point(tmp_path):
    """``python -m xeforge_core.worker JOB_DIR`` dispatches role ``probe`` to worker/probe.py."""
    from xeforge_core.runner import run_worker

    out = run_worker({"role": "probe", "device": "cpu", "options": {"probe_types": ["cpu"]}},
                     timeout_s=120, job_dir=tmp_path / "job")
    assert out.result is not None, out.stderr[-2000:]
    assert out.result["available"] == {"cpu": 1}
    assert out.result["devices"]["cpu:0"]["triton_backend"] == "interpreter"
    assert "cuda" not in out.result["available"]  # a cpu-only probe never touches a GPU runtime


def test_a_probe_that_hangs_falls_back_to_cpu_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("XEFORGE_CACHE_DIR", str(tmp_path))
    devices.clear_probe_cache()
    try:
        probe = devices.probe_devices(refresh=True, timeout_s=0.05, use_disk=False)
        assert probe["available"] == {"cpu": 1}
        assert "device probe failed (timeout)" in probe["error"]
        with pytest.raises(ValueError, match="device probe failed"):
            select_device("cuda", probe["available"], probe["reasons"])
        info = build_device_info("cpu", 0, probe)
        assert info.type == "cpu" and any("probe failed" in w for w in info.warnings)
        assert not list(tmp_path.glob("devices/*.json"))  # failures are never stored on disk
    finally:
        devices.clear_probe_cache()
