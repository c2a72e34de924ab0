"""Op coverage for a user's model: every aten op it runs, tried alone on the target device.

1. A child process runs the model's forward on the CPU under a ``TorchDispatchMode`` trace and
   saves one replayable call per distinct (op, shapes, dtypes), with its CPU time.
2. Each distinct op is replayed alone on the device in its own process, with a timeout, and
   compared with the CPU result.

The table (op, shapes, dtype: ok / error text / hang / wrong) turns "each fix uncovers the
next failure" into a list known in advance. The PyTorch reference is traced when the problem
has one (a Triton module's hot ops are kernels, not aten ops); otherwise the module itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xeforge_core.doctor.isolate import run_task
from xeforge_core.problem import Problem, Variant

#: aten op name stems by op class (the classes the verdict reasons about).
_CLASSES: dict[str, tuple[str, ...]] = {
    "matmul": ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "convolution", "_convolution",
               "scaled_dot_product", "_scaled_dot_product", "addbmm", "dot", "mv"),
    "reduction": ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var",
                  "std", "logsumexp", "_softmax", "_log_softmax", "softmax", "_safe_softmax", "norm", "cumsum",
                  "native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                  "_native_batch_norm_legit_no_training", "native_group_norm", "max_pool2d_with_indices",
                  "avg_pool2d", "max_pool1d", "avg_pool1d"),
    "indexing+cast": ("index", "index_select", "gather", "scatter", "slice", "select", "unsqueeze",
                      "view", "_unsafe_view", "expand", "transpose", "permute", "reshape", "t",
                      "squeeze", "as_strided", "alias",
                      "_to_copy", "to", "masked_fill", "where", "index_put", "embedding", "take"),
    "copy": ("copy_", "clone", "contiguous", "_copy_from"),
}


def op_class_of(op: str) -> str:
    """The op class of an aten op name such as ``aten.sum.dim_IntList`` (``elementwise`` when
    it is none of matmul, reduction, indexing+cast, copy)."""
    parts = op.split(".")
    stem = parts[1] if len(parts) > 1 and parts[0] == "aten" else parts[0]
    for cls, stems in _CLASSES.items():
        if stem in stems:
            return cls
    if "scaled_dot_product" in stem or stem.startswith(("_flash_attention", "_efficient_attention")):
        return "matmul"
    return "elementwise"


@dataclass
class OpCoverage:
    """One distinct op of the model: ``status`` ok / wrong / error / driver_error / crash /
    hang; ``cpu_us``/``device_us`` median times of the op alone (µs); ``transfer_bytes`` the
    bytes of its inputs and outputs (what a CPU fallback must copy both ways)."""

    op: str
    op_class: str
    shapes: str
    dtypes: str
    status: str
    detail: str = ""
    cpu_us: float | None = None
    device_us: float | None = None
    transfer_bytes: int = 0


@dataclass
class CoverageResult:
    """The traced ops and their coverage on the device; ``error`` when tracing itself failed."""

    source: str
    variant: str
    ops: list[OpCoverage]
    error: str = ""


def _model_job(problem: Problem, variant: Variant | None) -> dict:
    module = problem.reference or problem.kernel
    job = {"source": module.source, "class_name": "Model" if problem.reference else module.class_name,
           "filename": (module.path.name if module.path else "model.py"), "seed": 0}
    if problem.spec is not None and variant is not None and variant.name != "module":
        job["spec"] = problem.spec.to_data()
        job["variant"] = variant.to_data()
    return job


def model_job(problem: Problem, variant: Variant | None = None) -> dict:
    """The job keys that let a doctor child build the problem's model and inputs (the
    reference when present), at ``variant`` (default: the first correctness variant)."""
    if variant is None:
        variant = problem.correctness_variants()[0]
    return _model_job(problem, variant)


def trace_ops(problem: Problem, variant: Variant | None = None, *, timeout_s: float = 120.0) -> tuple[list[dict], str]:
    """Trace the model's aten ops on the CPU. Returns (ops, error text or "")."""
    job = {"task": "trace", "device": "cpu", **model_job(problem, variant)}
    out = run_task(job, timeout_s=timeout_s)
    if out.status != "ok":
        return [], f"{out.status}: {out.error_text}"
    return list(out.result.get("ops", [])), ""


def run_coverage(problem: Problem, device: str, variant: Variant | None = None, *,
                 timeout_s: float = 60.0,
                 on_progress: Callable[[str], None] | None = None) -> CoverageResult:
    """Trace the model, then replay each distinct op alone on ``device``."""
    variant = variant or problem.correctness_variants()[0]
    label = "reference" if problem.reference else "module"
    ops, error = trace_ops(problem, variant, timeout_s=max(timeout_s, 120.0))
    rows: list[OpCoverage] = []
    for i, entry in enumerate(ops):
        if on_progress:
            on_progress(f"coverage: {entry['op']} ({i + 1}/{len(ops)})")
        shapes = "; ".join(str(tuple(t["shape"])) for t in entry["tensors"])
        dtypes = ", ".join(sorted({t["dtype"] for t in entry["tensors"]}))
        out = run_task({"task": "op", "device": device, "path": entry["path"]}, timeout_s=timeout_s)
        rows.append(OpCoverage(
            op=entry["op"], op_class=op_class_of(entry["op"]), shapes=shapes, dtypes=dtypes,
            status=out.status, detail=out.error_text, cpu_us=entry.get("cpu_us"),
            device_us=out.result.get("device_us"), transfer_bytes=int(entry.get("transfer_bytes", 0))))
    return CoverageResult(source=label, variant=variant.name, ops=rows, error=error)
