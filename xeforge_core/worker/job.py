"""The job format exchanged between the parent (``xeforge_core.runner``) and the worker.

Both sides speak plain JSON-able dicts so the worker needs nothing beyond the standard
library, torch, triton and numpy. The parent writes ``job.json`` in a fresh per-job directory;
the worker writes ``result.json`` there (atomically: ``result.json.tmp`` then rename) and
appends progress events, one JSON object per line, to ``progress.jsonl``.

Job (``Job``)::

    {
      "role": "baseline" | "candidate" | "timing" | "sizes" | "memcheck" | "probe",
      "device": "cpu" | "cuda" | "xpu",
      "job_dir": "/abs/dir",                 # the worker's cwd, temp dir, output dir
      "module":    ModuleSource,             # the code under test (baseline or candidate)
      "baseline":  ModuleSource | null,      # timing role: the baseline to interleave with
      "reference": ModuleSource | null,      # optional PyTorch reference
      "spec": SpecData | null,               # null: use the module's get_inputs/get_init_inputs
      "correctness_variants": [VariantData], # variants checked for correctness (one may carry its own
                                             # "seeds" and "distributions", a subset of the job's)
      "performance_variants": [VariantData], # variants timed (GPU only)
      "seeds": [int],                        # e.g. [0, 1, 2]
      "distributions": ["normal", "ties", ...],
      "expected_dir": "/abs/dir" | null,     # candidate role: where the baseline saved outputs
      "size_points": [VariantData],          # sizes role: the sizes to probe (``worker.sizes``)
      "validity_points": [str],              # sizes role: points the reference runs at too
      "options": {
          "allow_dtype_change": false, "allow_shape_change": false,
          "rtol": float | null, "atol": float | null,  # user override of tolerances
          "precision": {"options": [NAME], "spec": [NAME]},  # allowed downgrades (xeforge_core.precision)
          "l2_bytes": int | null,          # L2 size of the device (for the flush buffer)
          "warmup_ms": 25, "rep_ms": 100,  # timing budget per callable
          "lock_dir": "/abs/dir",          # per-device timing lock directory
          "lints": [ {"rule": str, "message": str, "severity": str, "line": int|null} ],
          "device_profile": {...} | null,  # peak TFLOP/s per dtype, bandwidth GB/s
          "lock_key": "cuda0" | null,      # name of the device's lock file (default: device+index)
          "force_timing": false,           # time even in the interpreter (tests the harness only)
      }
    }

ModuleSource::

    {"source": str, "filename": "candidate.py", "class_name": "Model" | "ModelNew",
     "label": "baseline" | "candidate" | "reference"}

SpecData (already resolved by the parent; see ``xeforge_core.problem``)::

    {"inputs": {NAME: {"shape": [DIM, ...], "dtype": "float16"}},
     "inits": [{"key": "dim", "value": DIM_OR_LITERAL}, ...]}

VariantData::

    {"name": "ci", "params": ["X"], "dims": {"BATCH": 4, ...}, "dtype": "float16" | null,
     "flop": float | null, "bytes": float | null, "rtol": float | null, "atol": float | null,
     "init_values": [resolved positional init values]}

Result (``result.json``): ``xeforge_core.verdict.Verdict.to_dict()`` of what the worker
established, plus the key ``"role"``. The baseline job also fills ``expected_dir`` (default
``JOB_DIR/expected``) with the outputs the candidate job compares against: ``meta.json``, one
``<variant>__s<seed>__<distribution>.pt`` per run and the model weights per (variant, seed); see
``xeforge_core.worker.roles``. Process-level outcomes (timeout, signal, OOM kill) are
decided by the parent, which never trusts the worker to report its own death.

Progress event (``progress.jsonl`` lines)::

    {"t": unix_seconds, "event": "step" | "queued" | "lock_acquired" | "note", "message": str}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

Job = dict[str, Any]
ModuleSource = dict[str, Any]
VariantData = dict[str, Any]
SpecData = dict[str, Any]

JOB_FILE = "job.json"
RESULT_FILE = "result.json"
PROGRESS_FILE = "progress.jsonl"


def read_job(job_dir: Path) -> Job:
    """The job in ``job_dir/job.json``; raises ``OSError`` or ``ValueError`` when it cannot be
    read."""
    return json.loads((Path(job_dir) / JOB_FILE).read_text(encoding="utf-8"))


def write_result(job_dir: Path, data: dict[str, Any], *, indent: int | None = None) -> None:
    """Write ``data`` as ``job_dir/result.json`` atomically (``result.json.tmp``, then a rename),
    so that the parent never reads half a result."""
    tmp = Path(job_dir) / (RESULT_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=str), encoding="utf-8")
    os.replace(tmp, Path(job_dir) / RESULT_FILE)
