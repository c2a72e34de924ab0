"""Every anchor of one problem timed in one run by the verifier's timing method (a script for
bench_optimize_corpus.py, run as its own process so a compile that crashes or hangs takes
nothing else down).

The anchors (callables, each given its own copy of one input set, seed 0, like the verifier's):

- ``eager``: the problem's PyTorch ``Model``;
- ``compiled``: that model under ``torch.compile(mode=COMPILE_MODE)``, its first call (the
  compile) timed apart (``compile_s``), then called until its cache is warm;
- ``published``: the published solution's model;
- ``rules``: the rules engine's result (the solution's source after the kept codemods);
- ``published_aa``: a second instance of the published model, built and fed like the first,
  so ``published`` over ``published_aa`` is an A/A check of the method at this size, in the
  same run as the ratios it vouches for.

All of them go to one call of ``xeforge_core.worker.timing.measure`` (:func:`time_anchors`),
the function the verifier's timing role uses, with the verifier's options (``warmup_ms``,
``rep_ms``, ``l2_bytes``) and under the device's cross-process timing lock: the same warm-up,
method choice (one call per sample with the L2 flushed, or batched calls with it warm, the
same number of calls for all), interleaved trials in a carry-over balanced order, and the
same statistics: medians and, for each ratio, the paired bootstrap interval with its floor
(``xeforge_core.worker.timestats``). Ratios are ``anchor median / rules median`` (> 1: the
rules result is faster). A median under ``LAUNCH_BOUND_US`` is marked launch-bound: there
the ratio is about launch overhead, not the kernel. PyTorch's float32 products and convolutions
run at full float32 (``xeforge_core.worker.truth64.full_float32``), as in the verifier's workers:
PyTorch's default lets cuDNN run float32 convolutions in TF32, which the candidate is not allowed.

``python benchmarks/anchor_timing.py JOB.json`` prints one JSON line (:func:`run_job`; the
job's fields in its docstring).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: torch.compile's mode for the ``compiled`` anchor (autotuned, without CUDA graphs: the
#: verifier decides itself whether to replay calls from a graph).
COMPILE_MODE = "max-autotune-no-cudagraphs"
#: Below this median (µs per call) a callable is launch-bound: its time is mostly launching.
LAUNCH_BOUND_US = 5.0
#: The anchor every ratio is taken over.
RULES = "rules"
#: The ratios reported: ``(name, numerator anchor, denominator anchor)``.
RATIOS = (("rules_vs_published", "published", RULES), ("rules_vs_eager", "eager", RULES),
          ("rules_vs_compile", "compiled", RULES), ("aa", "published", "published_aa"))


def time_anchors(ops: Any, callables: Mapping[str, Callable[[], Any]], options: Mapping[str, Any],
                 measure: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Time ``callables`` (anchor name -> zero-argument call) together, in one run of the
    verifier's ``measure`` (or ``measure``, same signature, for tests) with ``options``, and
    summarise: per anchor its ``TimingStats`` fields (µs per call) and ``launch_bound``; per
    ratio of ``RATIOS`` whose anchors were both timed, ``{"point", "low", "high"}`` (the 95 %
    interval); the method and its reason, the trials and the settling. Raises ``ValueError``
    with no callables; exceptions from the callables propagate."""
    from xeforge_core.worker import timing

    if not callables:
        raise ValueError("no anchors to time")
    m = (measure or timing.measure)(ops, dict(callables), dict(options))
    anchors = {}
    for name in callables:
        st = m.stats(name)
        anchors[name] = {"median_us": st.median_us, "min_us": st.min_us, "cv": st.cv, "trials": st.trials,
                         "method": st.method, "calls_per_sample": st.calls_per_sample, "l2": st.l2,
                         "late": st.late, "launch_bound": st.median_us < LAUNCH_BOUND_US}
    ratios = {}
    for key, num, den in RATIOS:
        if num in callables and den in callables:
            point, low, high, _, _ = m.speedup(num, den)
            ratios[key] = {"point": point, "low": low if math.isfinite(low) else None,
                           "high": high if math.isfinite(high) else None}
    return {"anchors": anchors, "ratios": ratios, "method": m.plan.method, "method_reason": m.plan.reason,
            "trials": m.trials, "settle_ms": round(m.settle_ms, 1), "steady": m.steady}


def _import(source: str, label: str, workdir: Path, overrides: Mapping[str, Any]) -> Any:
    """``source`` written to ``workdir/<label>.py`` (Triton reads a kernel's source from its
    file) and imported, the size constants in ``overrides`` set on it."""
    path = workdir / f"{label}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"anchor_{label}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.__dict__.update(overrides)
    return module


def _tensors_to(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if hasattr(v, "to") else v for v in values]


def build_anchors(job: Mapping[str, Any], workdir: Path) -> tuple[dict[str, Callable[[], Any]], dict[str, Any]]:
    """The anchors' callables for ``job`` (:func:`run_job`) and what building them found:
    ``compile_s`` (seconds of the compiled model's first call) and ``autotune`` (per module
    with Triton autotuners, the config each chose, after the callables were first called).
    Every model is built under seed 0 from the same init inputs; the inputs are drawn once
    (seed 0) and each anchor calls with its own copy (a shared one from
    ``timing.SHARED_INPUT_BYTES``, as the verifier does). Raises what loading or calling a
    module raises, ``KeyError`` for a missing job field."""
    import torch

    from xeforge_core.worker import formats
    from xeforge_core.worker.formats.base import forward_params
    from xeforge_core.worker.timing import SHARED_INPUT_BYTES
    from xeforge_core.worker.truth64 import full_float32

    full_float32()  # eager and torch.compile at the precision the verifier times them (module docstring)
    device, overrides = job["device"], dict(job.get("overrides") or {})
    inputs_mod = _import(job["inputs"], "inputs", workdir, overrides)
    torch.manual_seed(0)
    init = list(inputs_mod.get_init_inputs()) if hasattr(inputs_mod, "get_init_inputs") else []
    torch.manual_seed(0)
    args = _tensors_to(list(inputs_mod.get_inputs()), device)
    cast = getattr(torch, job["dtype"]) if job.get("dtype") else None  # the problem posed at a dtype
    if cast is not None:
        args = [a.to(cast) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    total = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))

    def copy() -> list[Any]:
        return args if total >= SHARED_INPUT_BYTES else [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    modules = {label: _import(spec["source"], label, workdir, overrides)
               for label, spec in job["modules"].items() if spec}

    def model(label: str) -> Any:
        spec = job["modules"][label]
        if spec.get("entry") == "function":  # KernelAgent's kernel_function, bound as the verifier binds it
            fmt = formats.format_for_entry("function", spec["class_name"])
            binding = modules.get("eager") or _import(job["inputs"], "binding", workdir, overrides)
            torch.manual_seed(0)
            reference = binding.Model(*init).to(device).eval()
            if cast is not None:
                reference = reference.to(cast)
            return fmt.adapt(getattr(modules[label], spec["class_name"]), reference, forward_params(binding.Model))
        torch.manual_seed(0)
        net = getattr(modules[label], spec["class_name"])(*init).to(device).eval()
        return net.to(cast) if cast is not None else net

    def bind(net: Any) -> Callable[[], Any]:
        own = copy()

        def call() -> Any:
            with torch.no_grad():
                return net(*own)
        return call

    callables: dict[str, Callable[[], Any]] = {}
    info: dict[str, Any] = {}
    if "eager" in modules:
        callables["eager"] = bind(model("eager"))
        if job.get("compile_mode"):
            compiled = bind(torch.compile(model("eager"), mode=job["compile_mode"]))
            kind = str(device).partition(":")[0]
            sync = getattr(torch, kind).synchronize if kind != "cpu" else (lambda: None)
            started = time.perf_counter()
            compiled()
            sync()
            info["compile_s"] = round(time.perf_counter() - started, 2)
            for _ in range(3):  # the cache warm before timing
                compiled()
            callables["compiled"] = compiled
    callables["published"] = bind(model("published"))
    callables[RULES] = bind(model(RULES))
    if job.get("aa", True):
        callables["published_aa"] = bind(model("published"))
    for fn in callables.values():  # the first call: autotuning, so the chosen configs are known
        fn()
    info["autotune"] = {label: chosen for label, chosen in ((label, _chosen(mod)) for label, mod in modules.items())
                        if chosen}
    return callables, info


def _chosen(module: Any) -> dict[str, str]:
    """``{kernel: chosen config}`` for the Triton autotuners at ``module``'s top level."""
    out = {}
    for name, value in vars(module).items():
        best = getattr(value, "best_config", None)
        if best is not None and hasattr(value, "configs"):
            out[name] = str(best)
    return out


def run_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """Build the anchors of ``job`` with the device's timing lock shared (their compiles and
    first calls run kernels; no other verification times meanwhile), then time them under it
    exclusively.

    ``job``: ``device`` (``cuda``, ``xpu``, ``cpu``); ``inputs`` (the source defining
    ``get_inputs``/``get_init_inputs``, normally the problem); ``modules``: ``eager`` (may be
    ``None``), ``published`` and ``rules``, each ``{"source", "class_name"}`` and optionally
    ``"entry": "function"`` (a KernelAgent ``kernel_function``, bound to the problem's ``Model``
    built under the same seed, as the verifier binds it); ``overrides``
    (size constants); ``options`` (the verifier's ``warmup_ms``, ``rep_ms``, ``l2_bytes``);
    ``compile_mode`` (``None``: no ``compiled`` anchor); ``aa`` (default true); ``dtype`` (a
    torch dtype name: the floating-point inputs and every model cast to it, the problem posed
    at the dtype its kernels demand, as the verifier's ``--dtype``); ``lock_dir``
    and ``lock_key`` (the verifier's timing lock; without ``lock_key`` none is taken)."""
    import contextlib
    import tempfile

    from xeforge_core.devlock import default_lock_dir, device_lock, sharing
    from xeforge_core.worker.device_ops import DeviceOps

    ops = DeviceOps(str(job["device"]).partition(":")[0])  # bound before any module under test runs
    def lock(shared: bool) -> contextlib.AbstractContextManager[Any]:
        if not job.get("lock_key"):
            return contextlib.nullcontext()
        where = job.get("lock_dir") or default_lock_dir()
        return sharing(where, job["lock_key"]) if shared else device_lock(where, job["lock_key"])

    with tempfile.TemporaryDirectory() as tmp:
        with lock(shared=True):  # torch.compile's autotuning and the first calls run kernels too
            callables, info = build_anchors(job, Path(tmp))
        with lock(shared=False):
            out = time_anchors(ops, callables, dict(job.get("options") or {}))
    out.update(info)
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(__doc__.splitlines()[0], "\nusage: anchor_timing.py JOB.json", file=sys.stderr)
        return 2
    print(json.dumps(run_job(json.loads(Path(args[0]).read_text()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
