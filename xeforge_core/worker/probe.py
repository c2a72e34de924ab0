"""Worker role ``probe``: which devices this Python environment can use, and their fingerprints.

Runs inside an isolated worker process (never in the caller: initialising a GPU runtime can
hang on an unsupported device, and the caller may be the Streamlit server). Imports only the
standard library, torch and triton (and numpy for its version).

Entry points: ``run(job) -> dict`` (dispatched by ``python -m xeforge_core.worker JOB_DIR`` for
``role == "probe"``) and ``python -m xeforge_core.worker.probe JOB_DIR``, which writes the same
dict to ``JOB_DIR/result.json`` on its own.

``job["options"]["probe_types"]`` lists the device types to probe (default
``["xpu", "cuda", "cpu"]``); ``["cpu"]`` never touches a GPU runtime. The result::

    {"role": "probe", "kind": "ok",
     "available": {"xpu": 0, "cuda": 1, "cpu": 1},     # usable device count per type
     "reasons": {"xpu": "torch.xpu.is_available() is False"},  # why a type is unusable
     "devices": {"cuda:0": FINGERPRINT, "cpu:0": FINGERPRINT},
     "versions": {"python": ..., "torch": ..., "triton": ..., "numpy": ...},
     "triton_backends": ["nvidia", "amd"]}

FINGERPRINT: ``type``, ``index``, ``name``, ``driver_version``, ``triton_backend``
(``intel``/``nvidia``/``interpreter``), ``compute_units`` (EUs or Xe-cores as torch reports
them on xpu, SMs on cuda, logical CPUs on cpu), ``l2_bytes`` (``None`` where the runtime does
not report it), ``memory_bytes`` (device memory; host RAM for cpu), plus ``extra`` with
backend-specific properties (capability, sub-group sizes, ...).
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path
from typing import Any

from xeforge_core.worker.backends import get_backend, names
from xeforge_core.worker.backends.base import unavailable
from xeforge_core.worker.job import read_job, write_result

#: Every registered backend's device type, in preference order (``worker.backends``).
DEFAULT_TYPES = names()


def _versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in ("torch", "triton", "numpy"):
        try:
            module = __import__(name)
            out[name] = str(getattr(module, "__version__", "unknown"))
        except Exception as exc:  # noqa: BLE001 - report, do not fail the probe
            out[name] = None
            out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        import torch

        out["torch_cuda"] = getattr(torch.version, "cuda", None)
        out["torch_xpu"] = getattr(torch.version, "xpu", None)
    except Exception:  # noqa: BLE001
        pass
    return out


def _triton_backends() -> list[str]:
    try:
        from triton.backends import backends

        return sorted(backends)
    except Exception:  # noqa: BLE001
        return []


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Probe the device types named in ``job["options"]["probe_types"]`` (each by its backend's
    ``probe``, ``worker.backends``) and return the result dict described in the module docstring. Failures of one type are recorded in ``reasons``
    (with that type's count 0) and do not stop the others; the cpu interpreter is always
    listed as available when torch and triton import."""
    options = job.get("options") or {}
    types = list(options.get("probe_types") or DEFAULT_TYPES)
    start = time.perf_counter()
    out: dict[str, Any] = {"role": "probe", "kind": "ok", "reason": "", "available": {},
                           "reasons": {}, "devices": {}, "versions": _versions(),
                           "triton_backends": _triton_backends()}
    for dtype in types:
        try:
            get_backend(dtype).probe(out)
        except Exception as exc:  # noqa: BLE001 - one broken runtime must not hide the others
            unavailable(out, dtype, f"probe failed: {type(exc).__name__}: {exc}"[:500])
    out["seconds"] = time.perf_counter() - start
    return out


def main(argv: list[str]) -> int:
    """``python -m xeforge_core.worker.probe JOB_DIR``: run the probe, write ``result.json``."""
    job_dir = Path(argv[0])
    write_result(job_dir, run(read_job(job_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
