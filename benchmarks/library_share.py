"""How much of a version's device time is not its own Triton kernels: the ceiling of what tuning
them can reach (a script for bench_inductor_kernelbench.py, run as its own process).

TorchInductor's first version of a KernelBench problem leaves matrix products and convolutions to
torch (cuBLAS, cuDNN); the rules stages tune the Triton kernels beside them. Where the library
calls take most of the time, no tuning of the rest moves the whole much: with every Triton
kernel free the version would still take the library calls' time, so ``eager / not_triton``
bounds the speedup over eager of any version that keeps those calls (Amdahl's law).

``python benchmarks/library_share.py PROBLEM.py VERSION.py --overrides JSON --device cuda``
prints one JSON line: ``triton_us`` and ``not_triton_us`` (device time a call, summed over the
kernels of the profiled calls, from ``torch.profiler``),
``not_triton_share`` and ``top_not_triton`` (the five longest other kernels, µs a call), and
``reps``: at least ``--reps``, and enough calls for :data:`PROFILED_S` seconds after
:data:`WARM_S` seconds of warm-up. A
kernel is the version's own when its name is one of the ``@triton.jit`` functions of VERSION.py
(the name the profiler records for a Triton launch); everything else (cuBLAS, cuDNN, PyTorch's
own kernels, copies) is not. ``VERSION.py`` is the version's module (``ModelNew``, or ``Model``),
built with the problem's ``get_init_inputs()`` and called on its ``get_inputs()`` at the sizes the
overrides set; its weights are its own initialisation's (the time does not depend on them).
PyTorch's float32 products and convolutions run at full float32, as in the verifier's workers;
the profiled calls hold the device's timing lock (``compile_anchor.timing_lock``), so they never
overlap a timing run of another problem.
On cpu nothing runs on a device: it prints a note.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def triton_kernel_names(module: types.ModuleType) -> set[str]:
    """The names of the ``@triton.jit`` functions of ``module``, autotuned or not (an autotuner
    or heuristics wraps the JIT function in ``.fn``; in the interpreter it is an interpreted
    function): the names the profiler records for their launches."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import KernelInterface

    names = set()
    for value in vars(module).values():
        fn, depth = value, 0
        while isinstance(fn, (Autotuner, Heuristics)) and depth < 4:
            fn, depth = fn.fn, depth + 1
        if isinstance(fn, KernelInterface) and callable(getattr(fn, "fn", None)):
            names.add(fn.fn.__name__)
    return names


def split_kernel_times(kernels: Iterable[tuple[str, float]], own: set[str], calls: int) -> dict[str, Any]:
    """``kernels``: (name, device µs summed over ``calls`` calls) of every device kernel profiled;
    ``own``: the version's Triton kernel names. Returns ``triton_us`` and ``not_triton_us`` a
    call, ``not_triton_share`` (of their sum) and ``top_not_triton`` (the five longest others,
    µs a call). A Triton kernel specialised by Triton keeps its function's name."""
    mine = other = 0.0
    others: dict[str, float] = {}
    for name, us in kernels:
        if name in own:
            mine += us
        else:
            other += us
            others[name] = others.get(name, 0.0) + us
    total = mine + other
    top = sorted(others.items(), key=lambda kv: -kv[1])[:5]
    return {"triton_us": round(mine / calls, 2), "not_triton_us": round(other / calls, 2),
            "not_triton_share": round(other / total, 4) if total else None,
            "top_not_triton": [[n[:120], round(us / calls, 2)] for n, us in top]}


def profile(problem: Path, version: Path, overrides: dict[str, Any], device: str, reps: int) -> dict[str, Any]:
    """The split of :func:`split_kernel_times` for ``version`` at ``problem``'s sizes with
    ``overrides``, over ``reps`` profiled calls on ``device`` (``cuda`` or ``xpu``)."""
    import torch
    from compile_anchor import load_module, timing_lock
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from xeforge_core.worker.truth64 import full_float32

    if device == "cpu":
        return {"note": "no device kernels on cpu"}
    full_float32()
    prob = load_module(problem, "reference", overrides)
    ver = load_module(version, "version", overrides)
    cls = getattr(ver, "ModelNew", None) or ver.Model
    torch.manual_seed(0)
    model = cls(*prob.get_init_inputs()).to(device).eval()
    inputs = [x.to(device) if hasattr(x, "to") else x for x in prob.get_inputs()]
    sync = getattr(torch, device).synchronize
    activity = ProfilerActivity.CUDA if device.startswith("cuda") else ProfilerActivity.XPU
    with torch.no_grad():
        with timing_lock(device, shared=True):  # autotuners time their configs on the first calls
            for _ in range(3):
                model(*inputs)
            sync()
        with timing_lock(device):  # never beside a timing run
            per_call = _warm(lambda: model(*inputs), sync)
            reps = max(reps, min(MAX_REPS, math.ceil(PROFILED_S / per_call)))
            with torch_profile(activities=[activity]) as prof:
                for _ in range(reps):
                    model(*inputs)
                sync()
    return {**split_kernel_times(kernel_times(prof), triton_kernel_names(ver), reps), "reps": reps}


#: Seconds of calls before the profiled ones, and at least as many profiled: a device that has
#: idled runs its first milliseconds of work at lower clocks, which made a 1.5 ms call's library
#: kernels measure 43% longer than the verifier's timing of the whole call (p71 of KernelBench
#: level 2 on an H100, 2026-12-07, 13 calls in all); the verifier warms up the same way.
WARM_S = 0.5
PROFILED_S = 0.3
MAX_REPS = 500


def _warm(call: Any, sync: Any) -> float:
    """Run ``call`` for at least :data:`WARM_S` seconds (and three calls); its wall seconds a call."""
    n, start = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - start < WARM_S:
        call()
        n += 1
        if n % 8 == 0 or n == 3:
            sync()
    sync()
    return max((time.perf_counter() - start) / n, 1e-6)


def kernel_times(prof: Any, field: str = "self_device_time_total") -> list[tuple[str, float]]:
    """(name, µs) of every event of a finished ``torch.profiler`` run with time in ``field``
    (device kernels by default; ``self_cpu_time_total`` for host ops). An averaged event's name
    is its ``key`` (``FunctionEventAvg`` has no ``name``).

    For a device field only the device's own events count: the host op that launched a kernel
    (``aten::cudnn_convolution``, ``aten::addmm``) reports that kernel's time as its own
    ``self_device_time_total`` too, so summing both counted every library call twice, and a
    Triton launch, which no aten op wraps, once (``torch/autograd/profiler_util.py``,
    ``FunctionEvent.self_device_time_total``)."""
    from torch.autograd import DeviceType

    device_field = "device" in field or "cuda" in field
    out = [(e.key, float(getattr(e, field, 0.0) or 0.0)) for e in prof.key_averages()
           if not (device_field and e.device_type == DeviceType.CPU)]
    return [(name, us) for name, us in out if us > 0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem")
    ap.add_argument("version")
    ap.add_argument("--overrides", default="{}")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args(argv)
    print(json.dumps(profile(Path(args.problem), Path(args.version), json.loads(args.overrides), args.device,
                             args.reps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
