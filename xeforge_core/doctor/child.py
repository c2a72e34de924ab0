"""The doctor's child process: one check, trace, op replay or OpenVINO run per process.

Started by ``xeforge_core.runner.run_worker(job, module="xeforge_core.doctor.child")`` as
``python -m xeforge_core.doctor.child JOB_DIR``; reads ``JOB_DIR/job.json`` and writes
``JOB_DIR/result.json``. Like the verification worker it imports only torch, triton, numpy and
the standard library (OpenVINO only for the ``openvino`` task, and only when installed; the
job and result files through ``xeforge_core.worker.job``), so
that a device that hangs or faults takes down this process and nothing else.

Job keys: ``task`` (``check`` | ``stack`` | ``trace`` | ``op`` | ``openvino`` | ``time_model`` |
``bandwidth``),
``device`` (``cpu`` | ``cuda`` | ``xpu``), and the task's own keys (see each ``_task_*``).
A hang is made visible before the parent kills the process: ``faulthandler`` dumps every
thread's Python stack to stderr ``hang_dump_s`` seconds after start.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from xeforge_core.worker.backends import DeviceBackend, get_backend
from xeforge_core.worker.job import read_job, write_result


def _device_module(torch: Any, device: str) -> Any:
    """The backend's runtime module of ``device`` (``torch.cuda``, ``torch.xpu``), or ``None``
    on the host or where this torch lacks it."""
    module = _backend(device).torch_module if _backend(device) else None
    return getattr(torch, module, None) if module else None


def _backend(device: str) -> DeviceBackend | None:
    """The registered backend of ``device`` (``cuda:1`` -> cuda), ``None`` for another name."""
    try:
        return get_backend(device)
    except ValueError:
        return None


def _sync(torch: Any, device: str) -> None:
    """Wait for ``device`` itself: ``synchronize()`` without an argument waits for the current
    device only, so work queued on ``cuda:1`` would not be waited for and times would be launch
    times."""
    mod = _device_module(torch, device)
    if mod is not None:
        mod.synchronize(torch.device(device))


def _compare(torch: Any, got: Any, expected: Any, rtol: float, atol: float) -> tuple[bool, str]:
    """Compare (nested) outputs on the CPU. Returns (ok, detail)."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return False, f"expected {len(expected)} outputs, got {type(got).__name__}"
        for i, (g, e) in enumerate(zip(got, expected)):
            ok, detail = _compare(torch, g, e, rtol, atol)
            if not ok:
                return False, f"output {i}: {detail}"
        return True, ""
    if not isinstance(expected, torch.Tensor):
        return (got == expected), f"got {got!r}, expected {expected!r}"
    got = got.detach().cpu()
    expected = expected.detach().cpu()
    if got.shape != expected.shape:
        return False, f"shape {tuple(got.shape)} != expected {tuple(expected.shape)}"
    if not expected.is_floating_point():
        same = bool(torch.equal(got.to(expected.dtype), expected))
        return same, "" if same else f"{int((got != expected).sum())} integer elements differ"
    g = got.double()
    e = expected.double()
    close = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return True, ""
    err = (g - e).abs()
    err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
    return False, (f"{int((~close).sum())} of {close.numel()} elements differ; "
                   f"max abs error {float(err.max()):.3g}")


def _time_call(torch: Any, device: str, fn: Any, repeats: int = 5) -> float:
    """Median wall time of ``fn()`` in µs, with a device synchronise around each call."""
    fn()
    _sync(torch, device)
    samples = []
    for _ in range(repeats):
        _sync(torch, device)
        start = time.perf_counter()
        fn()
        _sync(torch, device)
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def _import_file(path: Path, name: str) -> dict[str, Any]:
    """Import ``path`` as module ``name`` and return its namespace. A real file, not exec'd
    text: Triton's @jit reads kernel source from files, and tracebacks name the file's lines."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return vars(module)


# ------------------------------------------------------------------------------- tasks


def _task_check(job: dict[str, Any]) -> dict[str, Any]:
    """Run one battery check. ``code`` defines ``run(device) -> (got, expected)`` or
    ``run(device) -> None`` (nothing to compare); ``rtol``/``atol`` for the comparison."""
    import torch

    # A real file, imported as a module: Triton's @jit reads its kernels' source from files.
    path = Path(job["job_dir"]) / "doctor_check.py"
    path.write_text("import os\nimport time\nimport torch\n" + job["code"], encoding="utf-8")
    namespace = _import_file(path, "doctor_check")
    device = job["device"]
    profile_path = os.environ.get("XEFORGE_DOCTOR_PROFILE")
    start = time.perf_counter()
    if profile_path:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        backend = _backend(device)
        name = backend.profiler_activity if backend else None
        if name and hasattr(ProfilerActivity, name):
            activities.append(getattr(ProfilerActivity, name))
        with profile(activities=activities) as prof:
            out = namespace["run"](device)
            _sync(torch, device)
        prof.export_chrome_trace(profile_path)
    else:
        out = namespace["run"](device)
        _sync(torch, device)
    seconds = time.perf_counter() - start
    if out is None:
        return {"status": "ok", "seconds": seconds, "detail": ""}
    got, expected = out
    ok, detail = _compare(torch, got, expected, job.get("rtol", 1e-3), job.get("atol", 1e-3))
    return {"status": "ok" if ok else "wrong", "seconds": seconds, "detail": detail}


def _task_stack(job: dict[str, Any]) -> dict[str, Any]:
    """Initialise the device, then report versions and the shared libraries mapped into this
    process (from ``/proc/self/maps``)."""
    import numpy
    import torch

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": getattr(torch.version, "cuda", None),
        "torch_xpu": getattr(torch.version, "xpu", None),
        "torch_hip": getattr(torch.version, "hip", None),
        "numpy": numpy.__version__,
    }
    try:
        import triton

        info["triton"] = triton.__version__
        info["triton_file"] = triton.__file__
        try:
            from triton.backends import backends

            info["triton_backends"] = sorted(backends)
        except Exception as exc:  # older/newer layouts
            info["triton_backends_error"] = str(exc)
    except Exception as exc:
        info["triton_error"] = f"{type(exc).__name__}: {exc}"
    device = job["device"]
    mod = _device_module(torch, device)
    if mod is not None:
        try:
            x = torch.ones(16, device=device)
            float((x * 2).sum())
            mod.synchronize(torch.device(device))
            props = mod.get_device_properties(torch.device(device))
            info["device_name"] = getattr(props, "name", str(props))
            for attr in ("driver_version", "version", "total_memory", "L2_cache_size",
                         "multi_processor_count", "gpu_eu_count", "gpu_subslice_count",
                         "max_compute_units", "sub_group_sizes", "has_fp64"):
                if hasattr(props, attr):
                    value = getattr(props, attr)
                    info[attr] = value if isinstance(value, (int, float, str, bool, list)) else str(value)
        except Exception as exc:
            info["device_init_error"] = f"{type(exc).__name__}: {exc}"
    libs = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and ".so" in parts[5]:
                    libs.append(parts[5].strip())
    except OSError as exc:
        info["maps_error"] = str(exc)
    info["libraries"] = sorted(set(libs))
    info["torch_lib_dir"] = str(Path(torch.__file__).parent / "lib")
    return info


def _build_inputs(torch: Any, job: dict[str, Any], namespace: dict[str, Any]) -> tuple[list, list]:
    """Inputs and init values from the spec's variant data, or from the module's own
    ``get_inputs()`` / ``get_init_inputs()``."""
    variant = job.get("variant")
    spec = job.get("spec")
    gen = torch.Generator().manual_seed(int(job.get("seed", 0)))
    if variant and spec:
        inputs = []
        for name in variant["params"]:
            meta = spec["inputs"][name]
            shape = [int(variant["dims"][d]) if isinstance(d, str) else int(d) for d in meta["shape"]]
            dtype = getattr(torch, variant.get("dtype") or meta.get("dtype") or "float32")
            if dtype.is_floating_point:
                inputs.append(torch.randn(shape, generator=gen).to(dtype))
            else:
                inputs.append(torch.randint(0, 16, shape, generator=gen).to(dtype))
        return inputs, list(variant.get("init_values") or [])
    inputs = list(namespace["get_inputs"]())
    inits = list(namespace["get_init_inputs"]()) if "get_init_inputs" in namespace else []
    return inputs, inits


def _load_model(torch: Any, job: dict[str, Any]) -> tuple[Any, list]:
    path = Path(job["job_dir"]) / job.get("filename", "model.py")
    path.write_text(job["source"], encoding="utf-8")
    namespace = _import_file(path, "xeforge_doctor_model")
    torch.manual_seed(int(job.get("seed", 0)))
    inputs, inits = _build_inputs(torch, job, namespace)
    model = namespace[job.get("class_name", "Model")](*inits)
    model.eval()
    variant = job.get("variant") or {}
    if variant.get("dtype"):
        model = model.to(getattr(torch, variant["dtype"]))
    return model, inputs


def _task_trace(job: dict[str, Any]) -> dict[str, Any]:
    """Run the model's forward on the CPU under a dispatch-mode trace; save one replayable
    call per distinct (op, shapes, dtypes) to ``JOB_DIR/ops/<n>.pt``."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map

    model, inputs = _load_model(torch, job)
    seen: dict[str, dict[str, Any]] = {}
    calls: list[tuple[str, Any, Any]] = []

    def describe(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return {"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", ""),
                    "contiguous": x.is_contiguous()}
        return None

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            flat, _ = tree_flatten((args, kwargs))
            metas = [describe(a) for a in flat if isinstance(a, torch.Tensor)]
            key = f"{func}|" + json.dumps(metas, sort_keys=True)
            if key not in seen:
                seen[key] = {"op": str(func), "tensors": metas}
                clone = tree_map(lambda a: a.detach().clone() if isinstance(a, torch.Tensor) else a,
                                 (args, kwargs))
                calls.append((key, func, clone))
            return func(*args, **kwargs)

    # The math attention backend decomposes scaled_dot_product_attention into generic aten ops
    # (bmm, softmax, ...) instead of a CPU-only fused kernel that no other device has.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), Recorder():
        model(*inputs)
    out_dir = Path(job["job_dir"]) / "ops"
    out_dir.mkdir(exist_ok=True)
    ops = []
    for index, (key, func, (args, kwargs)) in enumerate(calls):
        path = out_dir / f"{index}.pt"
        torch.save({"op": str(func), "args": args, "kwargs": kwargs}, path)
        entry = dict(seen[key])
        entry["path"] = str(path)
        replay_args = tree_map(lambda a: a.clone() if isinstance(a, torch.Tensor) else a, (args, kwargs))
        with torch.no_grad():
            result = func(*replay_args[0], **replay_args[1])
            entry["cpu_us"] = _time_call(
                torch, "cpu", lambda f=func, a=replay_args: f(*a[0], **a[1]), repeats=3)
        tensors = [a for a in tree_flatten(((args, kwargs), result))[0] if isinstance(a, torch.Tensor)]
        entry["transfer_bytes"] = sum(a.numel() * a.element_size() for a in tensors)
        ops.append(entry)
    return {"ops": ops}


def _task_bandwidth(job: dict[str, Any]) -> dict[str, Any]:
    """Host-device copy bandwidth (GB/s, both directions averaged) over a 64 MiB buffer."""
    import torch

    device = job["device"]
    host = torch.ones(16 * 1024 * 1024, dtype=torch.float32)
    us = _time_call(torch, device, lambda: host.to(device).cpu(), repeats=3)
    return {"gbps": 2 * host.numel() * host.element_size() / (us * 1e-6) / 1e9, "round_trip_us": us}


def _resolve_op(torch: Any, name: str) -> Any:
    """``aten.mm.default`` -> ``torch.ops.aten.mm.default``."""
    obj: Any = torch.ops
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _task_op(job: dict[str, Any]) -> dict[str, Any]:
    """Replay one traced aten op alone on the device; compare with the CPU and time both."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_map

    saved = torch.load(job["path"], weights_only=False)
    func = _resolve_op(torch, saved["op"])
    args, kwargs = saved["args"], saved["kwargs"]
    device = job["device"]

    def to_device(a: Any) -> Any:
        return a.to(device) if isinstance(a, torch.Tensor) else (
            torch.device(device) if isinstance(a, torch.device) else a)

    def fresh(tree: Any, dev: bool) -> Any:
        return tree_map(lambda a: (to_device(a) if dev else a.clone()) if isinstance(a, torch.Tensor)
                        else (to_device(a) if dev else a), tree)

    expected = func(*fresh(args, False), **fresh(kwargs, False))
    d_args, d_kwargs = fresh(args, True), fresh(kwargs, True)
    got = func(*d_args, **d_kwargs)
    _sync(torch, device)
    got_cpu = tree_map(lambda a: a.cpu() if isinstance(a, torch.Tensor) else a, got)
    rtol = atol = 1e-2 if any(
        isinstance(a, torch.Tensor) and a.dtype in (torch.float16, torch.bfloat16)
        for a in tree_flatten((args, kwargs))[0]) else 1e-4
    ok, detail = _compare(torch, got_cpu, expected, rtol, atol)
    device_us = _time_call(torch, device, lambda: func(*d_args, **d_kwargs))
    return {"status": "ok" if ok else "wrong", "detail": detail, "device_us": device_us}


def _task_time_model(job: dict[str, Any]) -> dict[str, Any]:
    """Median forward time (µs) of the model on ``job['device']``, inputs already there."""
    import torch

    model, inputs = _load_model(torch, job)
    device = job["device"]
    model = model.to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        us = _time_call(torch, device, lambda: model(*inputs), repeats=int(job.get("repeats", 5)))
    return {"median_us": us}


def _task_openvino(job: dict[str, Any]) -> dict[str, Any]:
    """Convert the model with OpenVINO's converter; on each OpenVINO device, check the output
    against PyTorch on the CPU and time both (median µs)."""
    import openvino as ov
    import torch

    model, inputs = _load_model(torch, job)
    with torch.no_grad():
        expected = model(*inputs)
        torch_us = _time_call(torch, "cpu", lambda: model(*inputs), repeats=int(job.get("repeats", 5)))
    example = tuple(inputs)
    converted = ov.convert_model(model, example_input=example)
    core = ov.Core()
    results = []
    arrays = [x.numpy() if isinstance(x, torch.Tensor) else x for x in inputs]
    for dev in core.available_devices:
        entry: dict[str, Any] = {"device": dev}
        try:
            compiled = core.compile_model(converted, dev)
            out = compiled(arrays)
            got = [torch.from_numpy(out[k].copy()) for k in compiled.outputs]
            exp = list(expected) if isinstance(expected, (list, tuple)) else [expected]
            low = any(e.dtype in (torch.float16, torch.bfloat16) for e in exp)
            ok, detail = _compare(torch, got[: len(exp)], exp, 1e-2 if low else 1e-3, 1e-2 if low else 1e-3)
            samples = []
            compiled(arrays)
            for _ in range(int(job.get("repeats", 5))):
                start = time.perf_counter()
                compiled(arrays)
                samples.append((time.perf_counter() - start) * 1e6)
            entry.update(ok=ok, detail=detail, median_us=statistics.median(samples))
        except Exception as exc:
            entry.update(ok=False, detail=f"{type(exc).__name__}: {exc}", median_us=None)
        results.append(entry)
    return {"openvino": ov.__version__, "torch_cpu_us": torch_us, "devices": results}


TASKS = {
    "check": _task_check,
    "stack": _task_stack,
    "trace": _task_trace,
    "op": _task_op,
    "time_model": _task_time_model,
    "openvino": _task_openvino,
    "bandwidth": _task_bandwidth,
}


def main(argv: list[str]) -> int:
    """Run the job in ``argv[0]`` (a job directory); exit 0 whenever a result was written."""
    job_dir = Path(argv[0])
    job = read_job(job_dir)
    os.environ.update({str(k): str(v) for k, v in (job.get("env") or {}).items()})
    hang_dump_s = float(job.get("hang_dump_s") or 0)
    if hang_dump_s > 0:
        faulthandler.dump_traceback_later(hang_dump_s, repeat=False, file=sys.stderr)
    try:
        result = TASKS[job["task"]](job)
    except Exception as exc:
        # where in the problem's own files it raised (the job holds their copies): file and line
        inside = [fr for fr in traceback.extract_tb(exc.__traceback__)
                  if os.path.abspath(fr.filename).startswith(os.path.abspath(job_dir) + os.sep)]
        where = f" (at {Path(inside[-1].filename).name}:{inside[-1].lineno})" if inside else ""
        result = {"status": "error", "error_type": type(exc).__name__, "error_text": str(exc)[:4000] + where,
                  "traceback": traceback.format_exc()[-6000:]}
    faulthandler.cancel_dump_traceback_later()
    write_result(job_dir, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
