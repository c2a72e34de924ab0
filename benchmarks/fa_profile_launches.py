"""One launch each of Flash Attention's step 10 (autotuned), two of its configs forced alone and
SDPA, inside a ``cudaProfilerStart`` range and an NVTX range named for each, for Nsight Compute
(a script, not a test; issue 25's look at where the kernel's time goes):

    ncu --set full --profile-from-start off --nvtx -o OUT/fa -f \\
        python benchmarks/fa_profile_launches.py --shape bench-gpu
    ncu --import OUT/fa.ncu-rep --page details --print-nvtx-rename kernel > OUT/details.txt
    ncu --import OUT/fa.ncu-rep --page raw --csv > OUT/raw.csv

Every callable is warmed up (autotuned, compiled) before the range, so the profiled launch is
the one a user's call makes. Under Nsight Compute the autotuner's own timing is distorted (every
launch is serialised and replayed), so the "auto" launch may run another config than outside it:
its grid in the report says which. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_flash_attention import inputs  # noqa: E402
from sweep_fa_hopper import PERSISTENT_WS, PLAIN, STEP10, _v, forced, load_module, shapes_of  # noqa: E402

#: The configs forced alone beside the autotuned step: the persistent warp-specialized loop step
#: 10 picks at head dim 128 on Hopper, and the plain 128 x 64 loop it picked before.
FORCED = {"pws": _v(128, 128, 4, 2, PERSISTENT_WS), "plain": _v(128, 64, 8, 3, PLAIN)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="bench-gpu", help="a bench-gpu* variant of the attention spec")
    ap.add_argument("--warmup", type=int, default=5, help="calls of each callable before the profiled one")
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    bench, _ = shapes_of([args.shape])
    if args.shape not in bench:
        ap.error(f"unknown shape {args.shape!r}")
    q, k, v = inputs(bench[args.shape], "cuda")
    fns = {"sdpa": partial(F.scaled_dot_product_attention, q, k, v)}
    auto = load_module(STEP10, "profile_auto")
    auto.kernel_function(q, k, v)
    fns["auto"] = partial(auto.kernel_function, q, k, v)
    for tag, config in FORCED.items():
        mod = forced(load_module(STEP10, f"profile_{tag}"), config)
        mod.kernel_function(q, k, v)
        fns[tag] = partial(mod.kernel_function, q, k, v)
    for fn in fns.values():
        for _ in range(args.warmup):
            fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in fns.items():
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled one launch each of {', '.join(fns)} at {args.shape} {bench[args.shape]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
