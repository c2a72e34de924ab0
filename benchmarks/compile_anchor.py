"""The torch.compile anchor and the device's copy bandwidth for bench_optimize_corpus.py (a script,
run as its own process so a compile that crashes or hangs takes nothing else down).

``python benchmarks/compile_anchor.py PROBLEM.py --overrides JSON --device cuda`` prints one JSON
line: ``compile_s`` (first call, compile included), ``median_us`` and the 95 % interval of the
median (``low_us``/``high_us``, ``xeforge_core.worker.timestats``) of the compiled module
(``mode="max-autotune-no-cudagraphs"``) timed after the cache is warm, with CUDA events around
each call and the L2 flushed between calls (a 256 MiB write), as the verifier times kernels, and
under the verifier's cross-process timing lock of the device. PyTorch's float32 products and
convolutions run at full float32 (``xeforge_core.worker.truth64.full_float32``), as in the
verifier's workers, which time eager and the candidate so: PyTorch's default lets cuDNN run
float32 convolutions in TF32, which would time torch.compile at another precision than the
eager anchor beside it.
``--compile-only`` prints ``compile_s`` alone (no timing; the compile fills TorchInductor's
caches for a later process). ``--copy-bandwidth`` instead prints ``copy_gbps``: a device-to-device copy of 1 GiB, the measured
HBM bandwidth the memory-bound results are compared with.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _events(fn, device: str, reps: int) -> list[float]:
    import torch

    mod = getattr(torch, device)
    flush = torch.empty(64 * 2**20, dtype=torch.int32, device=device)
    out = []
    for _ in range(reps):
        flush.zero_()
        start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        mod.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def load_module(path: Path, name: str, overrides: dict | None = None) -> types.ModuleType:
    """The module at ``path`` executed as ``name``, its globals then updated with ``overrides``
    (a problem's size constants at a variant's values)."""
    module = types.ModuleType(name)
    module.__dict__["__file__"] = str(path)
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    module.__dict__.update(overrides or {})
    return module


def timing_lock(device: str, shared: bool = False):  # noqa: ANN201
    """The device's cross-process timing lock (``xeforge_core.devlock``), the one the verifier's
    timing takes, so runs of several problems at once never time the GPU together; ``shared``
    for kernel runs that are not timed (a compile's autotuning, a correctness check), which no
    timing run may overlap."""
    import socket

    from xeforge_core.devices import physical_index
    from xeforge_core.devlock import default_lock_dir, device_lock, sharing

    kind, _, index = device.partition(":")
    key = f"{socket.gethostname()}-{kind}{physical_index(kind, int(index or 0))}"
    return sharing(default_lock_dir(), key) if shared else device_lock(default_lock_dir(), key)


def copy_gbps(device: str) -> float:
    """Device-to-device copy bandwidth (GB/s, read plus write) of a 1 GiB buffer, median of 20."""
    import torch

    src = torch.empty(2**28, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    samples = sorted(_events(lambda: dst.copy_(src), device, 20))
    return 2 * src.numel() * 4 / (samples[len(samples) // 2] * 1e-6) / 1e9


def compiled_time(problem: Path, overrides: dict, device: str, reps: int, compile_only: bool = False) -> dict:
    """Compile time and warm timing of the problem's ``Model`` under torch.compile; with
    ``compile_only`` the compile time alone (the compile fills TorchInductor's on-disk caches, so
    a later process compiling the same model at the same sizes is quick)."""
    import torch

    from xeforge_core.worker.timestats import median_se, stats_of
    from xeforge_core.worker.truth64 import full_float32

    full_float32()  # the precision the verifier times eager and the candidate at (module docstring)
    module = load_module(problem, "reference", overrides)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).to(device).eval()
    inputs = [x.to(device) if hasattr(x, "to") else x for x in module.get_inputs()]
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    mod = getattr(torch, device)
    with torch.no_grad():
        with timing_lock(device, shared=True):  # max-autotune times its configs on the GPU
            started = time.perf_counter()
            compiled(*inputs)
            mod.synchronize()
            compile_s = time.perf_counter() - started
            if compile_only:
                return {"compile_s": round(compile_s, 2)}
            for _ in range(3):  # the cache is warm before timing
                compiled(*inputs)
        with timing_lock(device):  # never timed while a verifier (or another anchor) times this GPU
            samples = _events(lambda: compiled(*inputs), device, reps)
    st = stats_of(samples, "events")
    se = median_se(samples)
    return {"compile_s": round(compile_s, 2), "median_us": st.median_us, "cv": st.cv,
            "low_us": st.median_us - 1.96 * se, "high_us": st.median_us + 1.96 * se}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem", nargs="?")
    ap.add_argument("--overrides", default="{}")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--copy-bandwidth", action="store_true")
    ap.add_argument("--compile-only", action="store_true", help="compile (filling the caches) and time nothing")
    args = ap.parse_args(argv)
    if args.copy_bandwidth:
        print(json.dumps({"copy_gbps": copy_gbps(args.device)}))
        return 0
    print(json.dumps(compiled_time(Path(args.problem), json.loads(args.overrides), args.device, args.reps,
                                   compile_only=args.compile_only)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
