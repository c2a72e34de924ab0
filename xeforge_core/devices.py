"""Device detection and the device fingerprint.

Order of preference (DESIGN.md "Devices"): **xpu** (torch.xpu reports a device *and* Intel's
Triton backend is installed), then **cuda** (torch.cuda and Triton's nvidia backend), then
**cpu** (Triton's interpreter: correct, but its times say nothing about a GPU). An explicit
override (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"xpu"``, ``"xpu:N"``, or ``"auto"``) picks one;
``$XEFORGE_DEVICE`` is the default override when none is given.

What is available is observed in a worker process (``xeforge_core.worker.probe``) with a short
timeout, never in the calling process: initialising a GPU runtime can hang on an unsupported
device, and the caller may be the Streamlit server. Probe results are cached per process and
on disk (``cache_root()/devices``, for a day, keyed by the interpreter, library versions, host,
boot and visible-device masks). The choice itself is the pure function ``select_device`` of the
observed availability, so it is tested without hardware.

The fingerprint (``DeviceInfo.fingerprint``) names the device and its software: name, type,
index, driver version, torch/triton/numpy/python versions, Triton backend, compute units, L2
bytes, memory bytes, and, when the knowledge base has a profile for the device, its peak TFLOP/s
per dtype and memory bandwidth (``profile``; ``None`` otherwise, and ``fingerprint["profile"]``
says so). ``DeviceInfo.fingerprint_key()`` is a stable hash of it, used in cache keys.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core import runner
from xeforge_core.cache import cache_root, library_versions, stable_hash, worker_code_version
from xeforge_core.errors import nearest_name_hint
from xeforge_core.worker import backends

#: Seconds the device probe may take (importing torch cold plus a GPU runtime init).
PROBE_TIMEOUT_S = 90.0

#: Seconds a probe result stays valid on disk.
PROBE_DISK_TTL_S = 24 * 3600.0

_OVERRIDE = re.compile(r"^([a-z][a-z0-9_]*)(?::(\d+))?$")
_probe_memo: dict[str, dict[str, Any]] = {}
_probe_lock = threading.Lock()

#: Fingerprint fields that enter ``fingerprint_key`` (the index does not: identical devices
#: give identical verdicts).
KEY_FIELDS = ("type", "name", "driver_version", "triton_backend", "compute_units", "l2_bytes",
              "memory_bytes", "versions", "profile_id", "peak_tflops", "bandwidth_gbps")


@dataclass
class DeviceInfo:
    """The device a verification runs on.

    ``type`` is ``"xpu"``, ``"cuda"`` or ``"cpu"``; ``index`` the device index as the caller's
    environment numbers it (the worker sees only that device, as index 0); ``name`` as torch
    reports it; ``interpreter`` is True for cpu (kernels run in Triton's interpreter).
    ``fingerprint`` is a JSON-able dict (see module docstring); ``profile`` the knowledge-base
    profile summary (``peak_tflops`` per dtype in TFLOP/s, ``bandwidth_gbps`` in GB/s,
    ``l2_bytes``) or ``None`` when the device has none. ``warnings`` are human sentences about
    the detection (e.g. a GPU runtime that failed to initialise).
    """

    type: str
    index: int = 0
    name: str = ""
    interpreter: bool = False
    fingerprint: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def torch_device(self) -> str:
        """The torch device string in the caller's numbering (``"cuda:1"``, ``"cpu"``)."""
        return "cpu" if self.type == "cpu" else f"{self.type}:{self.index}"

    @property
    def label(self) -> str:
        """A short human label, e.g. ``"cuda:0 (NVIDIA H200)"``."""
        return f"{self.torch_device} ({self.name})" if self.name else self.torch_device

    @property
    def l2_bytes(self) -> int | None:
        """L2 size in bytes from the runtime, else from the profile, else ``None``."""
        value = self.fingerprint.get("l2_bytes")
        if not value and self.profile:
            value = self.profile.get("l2_bytes")
        return int(value) if value else None

    def fingerprint_key(self) -> str:
        """A stable hash (16 hex digits) of the fingerprint fields in ``KEY_FIELDS``."""
        return stable_hash({k: self.fingerprint.get(k) for k in KEY_FIELDS})[:16]

    def lock_key(self) -> str:
        """The name of this physical device for the cross-process timing lock
        (``"<host>-cuda0"``). Where this process sees a subset of the devices
        (``CUDA_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK``, as a Ray task or a job scheduler sets
        them), the index goes through that mask, so two processes that see the same GPU under
        different indices take the same lock."""
        return f"{socket.gethostname()}-{self.type}{physical_index(self.type, self.index)}"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able fields (for the UI and reports)."""
        return {"type": self.type, "index": self.index, "name": self.name,
                "interpreter": self.interpreter, "fingerprint": self.fingerprint,
                "profile": self.profile, "warnings": list(self.warnings)}


def visible_devices_var(device_type: str) -> str | None:
    """The variable that restricts which devices of ``device_type`` a process sees (the
    backend's ``visible_devices_var``: ``CUDA_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``)."""
    try:
        return backends.get_backend(device_type).visible_devices_var
    except ValueError:
        return None


def physical_index(device_type: str, index: int, environ: dict[str, str] | None = None) -> str:
    """The machine's name for device ``index`` of ``device_type`` as this process numbers it:
    the ``index``-th entry of ``CUDA_VISIBLE_DEVICES`` (cuda) or ``ZE_AFFINITY_MASK`` (xpu) when
    that variable is set and long enough (``"3"``, or a UUID), else ``str(index)``."""
    var = visible_devices_var(device_type)
    env = os.environ if environ is None else environ
    entries = [e.strip() for e in env.get(var, "").split(",") if e.strip()] if var else []
    return entries[index] if 0 <= index < len(entries) else str(index)


def parse_override(override: str | None) -> tuple[str, int | None] | None:
    """``"cuda:1"`` -> ``("cuda", 1)``, ``"xpu"`` -> ``("xpu", None)``, ``None``/``"auto"``/``""``
    -> ``None``. Raises ``ValueError`` for anything else."""
    if override is None:
        return None
    text = str(override).strip().lower()
    if text in ("", "auto"):
        return None
    m = _OVERRIDE.match(text)
    if not m or m.group(1) not in backends.names():
        gpus = ", ".join(f"{n}, {n}:N" for n in backends.gpu_names())
        hosts = ", ".join(n for n in backends.names() if n not in backends.gpu_names())
        choices = [*backends.names(), "auto"]
        raise ValueError(f"unknown device {override!r}: use {hosts}, {gpus} or auto"
                         + nearest_name_hint(text.split(":", 1)[0], choices))
    return m.group(1), (int(m.group(2)) if m.group(2) is not None else None)


def _describe(available: dict[str, int]) -> str:
    parts = []
    for t in backends.names():
        n = int(available.get(t, 0) or 0)
        if t not in backends.gpu_names():
            if n:
                parts.append("cpu")
        elif n == 1:
            parts.append(f"{t}:0")
        elif n > 1:
            parts.append(f"{t}:0..{t}:{n - 1}")
    return ", ".join(parts) or "none"


def select_device(override: str | None, available: dict[str, int],
                  reasons: dict[str, str] | None = None) -> tuple[str, int]:
    """Choose ``(type, index)`` from observed availability.

    ``available`` maps ``"xpu"``/``"cuda"``/``"cpu"`` to the number of usable devices
    (xpu counts only with Intel's Triton backend present); ``reasons`` optionally says why a
    type is unusable, for the error text. Without an override: xpu:0, else cuda:0, else cpu.
    Raises ``ValueError`` naming what is available for an unknown override, an unavailable
    type, or an index out of range.
    """
    reasons = reasons or {}
    parsed = parse_override(override)
    if parsed is None:
        for t in backends.gpu_names():
            if int(available.get(t, 0) or 0) > 0:
                return t, 0
        return "cpu", 0
    dtype, index = parsed
    count = int(available.get(dtype, 0) or 0)
    if backends.get_backend(dtype).interpreter:
        if index not in (None, 0):
            raise ValueError(f"device {override!r}: there is only one {dtype} device ({dtype} or {dtype}:0)")
        return dtype, 0
    if count <= 0:
        why = f" ({reasons[dtype]})" if reasons.get(dtype) else ""
        raise ValueError(f"device {override!r} is not available{why}; available: "
                         f"{_describe(available)}")
    if index is None:
        index = 0
    if index >= count:
        raise ValueError(f"device {override!r} does not exist: {count} {dtype} device(s) "
                         f"(available: {_describe(available)})")
    return dtype, index


# --------------------------------------------------------------------------------------------
# probing


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _probe_key(types: list[str]) -> str:
    masks = {k: os.environ.get(k) for k in backends.device_env()}
    return stable_hash({"types": sorted(types), "python": sys.executable, "masks": masks,
                        "versions": library_versions(), "host": socket.gethostname(),
                        "boot": _boot_id(), "probe": worker_code_version(),
                        "isolation": _isolation_code_version()})[:24]


def _isolation_code_version() -> str:
    """A hash of the code that starts the probe's process (runner and sandbox): a probe made
    under an older sandbox policy (which may have hidden the GPU) is not reused."""
    here = Path(__file__).resolve().parent
    parts = []
    for name in ("runner.py", "sandbox.py"):
        try:
            parts.append((here / name).read_bytes())
        except OSError:
            parts.append(b"")
    return stable_hash([p.hex() for p in parts])[:16]


def probe_devices(types: list[str] | tuple[str, ...] | None = None, *, refresh: bool = False,
                  timeout_s: float = PROBE_TIMEOUT_S, use_disk: bool = True) -> dict[str, Any]:
    """Run the probe role (``xeforge_core.worker.probe``) in a worker process and return its
    result dict (``available``, ``reasons``, ``devices``, ``versions``; see that module).

    Cached per process and, with ``use_disk``, on disk for ``PROBE_DISK_TTL_S``. A probe that
    hangs, crashes or fails is remembered for this process only; its result then has
    ``available = {"cpu": 1}`` and
    ``error`` saying what happened (the cpu interpreter is assumed: a broken torch will show up
    as an ``environment`` verdict when the baseline runs).
    """
    types = [t for t in backends.names() if types is None or t in types]
    key = _probe_key(types)
    with _probe_lock:
        if not refresh and key in _probe_memo:
            return _probe_memo[key]
        disk = cache_root() / "devices" / f"{key}.json"
        if use_disk and not refresh and disk.exists():
            try:
                if time.time() - disk.stat().st_mtime < PROBE_DISK_TTL_S:
                    data = json.loads(disk.read_text(encoding="utf-8"))
                    if isinstance(data, dict) and "available" in data:
                        _probe_memo[key] = data
                        return data
            except (OSError, ValueError):
                pass
        job_dir = runner.new_job_dir("xeforge-probe-")
        try:
            job = {"role": "probe", "device": "cpu" if types == ["cpu"] else "auto",
                   "options": {"probe_types": types}}
            outcome = runner.run_worker(job, timeout_s=timeout_s, module="xeforge_core.worker.probe",
                                        job_dir=job_dir, exit_grace_s=10.0)
        finally:
            runner.cleanup_job_dir(job_dir)
        data = outcome.result
        if data is None or "available" not in data:
            kind, reason = runner.classify(outcome)
            if data is not None and not reason:
                reason = "the probe returned no availability"
            error = f"device probe failed ({kind.value}): {reason}"
            failed = {"available": {"cpu": 1}, "reasons": {"xpu": error, "cuda": error},
                      "devices": {}, "versions": {}, "error": error,
                      "stderr": outcome.stderr[-2000:]}
            # Remembered for this process only (a hanging GPU runtime is not probed again on
            # every call; ``refresh=True`` retries), never on disk.
            _probe_memo[key] = failed
            return failed
        data["probe_warnings"] = list(outcome.warnings)
        _probe_memo[key] = data
        if use_disk:
            try:
                disk.parent.mkdir(parents=True, exist_ok=True)
                tmp = disk.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, default=str), encoding="utf-8")
                os.replace(tmp, disk)
            except OSError:
                pass
        return data


def profile_for(name: str, device_type: str) -> dict[str, Any] | None:
    """The knowledge-base profile of a device name as a plain dict, or ``None`` (no profile
    matches, or the device is cpu).

    Keys: ``id``, ``name``, ``arch``, ``supported``, ``use_instead``, ``peak_tflops``
    (dtype -> TFLOP/s), ``bandwidth_gbps`` (GB/s), ``l2_bytes``, ``compute_units``,
    ``max_grid`` (programs per launch-grid axis), ``source`` (the profile file under
    ``knowledge/hardware/``).
    """
    if device_type == "cpu" or not name:
        return None
    from xeforge_core.knowledge import load_knowledge

    prof = load_knowledge().profile_for_device(name)
    if prof is None:
        return None
    return {
        "id": prof.id, "name": prof.name, "arch": prof.arch, "supported": prof.supported,
        "use_instead": list(prof.use_instead),
        "peak_tflops": {k: (float(v.value) if v.value is not None else None)
                        for k, v in prof.peak_tflops.items()},
        "bandwidth_gbps": prof.bandwidth_gbps,
        "l2_bytes": prof.l2_bytes.value, "compute_units": prof.compute_units.value,
        "max_grid": prof.max_grid.value if prof.max_grid is not None else None,
        "source": f"knowledge/hardware/{prof.id}.yaml",
    }


def build_device_info(dtype: str, index: int, probe: dict[str, Any]) -> DeviceInfo:
    """The ``DeviceInfo`` of ``dtype:index`` from a probe result (adds versions and profile)."""
    raw = dict(probe.get("devices", {}).get(f"{dtype}:{index}") or {})
    warnings: list[str] = []
    if probe.get("error"):
        warnings.append(str(probe["error"]))
    warnings.extend(str(w) for w in probe.get("probe_warnings", []) or [])
    if not raw:
        raw = {"type": dtype, "index": index, "name": dtype, "triton_backend":
               "interpreter" if dtype == "cpu" else None}
    name = str(raw.get("name") or dtype)
    profile = profile_for(name, dtype)
    versions = dict(probe.get("versions") or {})
    if not versions:
        versions = {k: v for k, v in library_versions().items()}
        versions["python"] = ".".join(str(x) for x in sys.version_info[:3])
    fp: dict[str, Any] = {
        "type": dtype, "index": index, "name": name,
        "driver_version": raw.get("driver_version"),
        "triton_backend": raw.get("triton_backend"),
        "compute_units": raw.get("compute_units"),
        "l2_bytes": raw.get("l2_bytes") or (profile or {}).get("l2_bytes"),
        "memory_bytes": raw.get("memory_bytes"),
        "versions": {k: versions.get(k) for k in ("python", "torch", "triton", "numpy",
                                                   "torch_cuda", "torch_xpu") if k in versions},
        "extra": raw.get("extra") or {},
        "host": socket.gethostname(),
    }
    if profile:
        fp["profile_id"] = profile["id"]
        fp["peak_tflops"] = profile["peak_tflops"]
        fp["bandwidth_gbps"] = profile["bandwidth_gbps"]
        fp["profile"] = f"knowledge-base profile {profile['id']} ({profile['source']})"
        if profile.get("supported") is False:
            alt = ", ".join(profile.get("use_instead") or [])
            warnings.append(f"{name} is not supported by torch.xpu according to the knowledge "
                            f"base; its results cannot be trusted" + (f" (use instead: {alt})" if alt else ""))
    else:
        fp["profile_id"] = None
        fp["peak_tflops"] = None
        fp["bandwidth_gbps"] = None
        fp["profile"] = ("none: the cpu interpreter has no roofline" if dtype == "cpu" else
                         f"none: no knowledge-base profile matches {name!r}, so no roofline")
    return DeviceInfo(type=dtype, index=index, name=name, interpreter=dtype == "cpu",
                      fingerprint=fp, profile=profile, warnings=warnings)


def detect_device(override: str | None = None, *, refresh: bool = False,
                  timeout_s: float = PROBE_TIMEOUT_S) -> DeviceInfo:
    """Detect the device to verify on (see module docstring for the order and the override).

    ``override`` defaults to ``$XEFORGE_DEVICE``. ``"cpu"`` never touches a GPU runtime.
    ``refresh`` re-probes instead of using cached probe results. Raises ``ValueError`` for an
    invalid or unavailable override, naming what is available.
    """
    if override is None:
        override = os.environ.get("XEFORGE_DEVICE") or None
    parsed = parse_override(override)  # validates early, before any probe
    types = [parsed[0]] if parsed is not None and backends.get_backend(parsed[0]).interpreter \
        else list(backends.names())
    probe = probe_devices(types, refresh=refresh, timeout_s=timeout_s)
    dtype, index = select_device(override, probe.get("available", {}), probe.get("reasons", {}))
    return build_device_info(dtype, index, probe)


def clear_probe_cache() -> None:
    """Forget probe results held in this process (the disk cache stays)."""
    with _probe_lock:
        _probe_memo.clear()
