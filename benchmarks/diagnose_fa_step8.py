"""Flash Attention step 8 (the head-dim split) at its ``ci`` shape: the version the H200 found
wrong and the fixed one, config by config (a script, not a test).

Two checks, each over every ``@triton.autotune`` config of both modules (the faulty one kept as
``benchmarks/kernels/fa_step8_h200_fault.py``, the fixed one the Hopper trajectory's head-dim
split step, which also carries the steps before it: per-head-dim search spaces and the loop
that pipelines the two dots):

1. **run** (on the device given; Triton's interpreter on cpu): each config forced alone, at the
   ``ci`` shape and at shapes like it (a key range shorter than one block, head dims split
   32 + 16 and 64 + 16, two heads so the last block reads the next head's rows), against
   PyTorch's ``scaled_dot_product_attention`` in float64. Per config and shape: the largest
   absolute error, how many outputs are off by more than ``atol + rtol * |expected|`` (fp16:
   1e-2 each), and which output columns and rows hold them (``cols 32-47`` says the second,
   16-wide part of the split).
2. **compiled** (any machine with Triton's NVIDIA backend; no GPU needed): each config compiled
   ahead of time for Hopper (sm_90) at the ``ci`` shape through ``xeforge_core.ir``, counting
   the fp32 accumulator tiles the compiler moves between MMA layouts (``convert_layout`` of an
   ``[M, N > 1]`` fp32 tensor from one ``#mma`` encoding to another). The faulty step moves both
   accumulators into the scores' wider layout and back around its ragged-end block, which runs
   outside the key loop; the fixed step runs that block as a loop of at most one trip and moves
   none, like the causal step, which the H200 found right.

Usage::

    python benchmarks/diagnose_fa_step8.py --device cuda          # on the GPU: both checks
    python benchmarks/diagnose_fa_step8.py --device cpu           # interpreter run + compiled check
    python benchmarks/diagnose_fa_step8.py --device cpu --skip-run

Prints one table per check and writes ``--out`` (JSON) when given. About a minute on an H200
(compiling 2 x 5 configs x 4 shapes); the compiled check takes 1-2 minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAULTY = ROOT / "benchmarks" / "kernels" / "fa_step8_h200_fault.py"

#: (B, A, S, D): the ci shape first, then shapes of the same class (a key range shorter than one
#: block and a split head dim; two heads, so the ragged block reads the next head's rows).
SHAPES = [(1, 2, 40, 48), (1, 2, 40, 80), (1, 2, 100, 48), (2, 1, 72, 96)]
RTOL = ATOL = 1e-2

_CONVERT = re.compile(r"ttg\.convert_layout .*: tensor<(\d+)x(\d+)xf32, (#mma\d*)> -> tensor<\d+x\d+xf32, (#mma\d*)>")


def fixed_step() -> Any:
    """The Hopper trajectory's head-dim split step (what the faulty module became)."""
    from xeforge_core.samples import flash_attention_trajectory

    return next(s for s in flash_attention_trajectory("cuda") if s.rule_id == "split_non_power_of_two_dims")


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _tuners(mod: Any) -> list[Any]:
    from triton.runtime.autotuner import Autotuner

    tuners = [v for v in vars(mod).values() if isinstance(v, Autotuner)]
    if not tuners:
        raise RuntimeError(f"{mod.__name__} has no @triton.autotune kernel")
    return tuners


def describe(cfg: Any) -> str:
    """``BLOCK_M=64 BLOCK_N=64 w4 s3`` (the kwargs, warps and pipeline stages of a config)."""
    kw = " ".join(f"{k}={v}" for k, v in cfg.kwargs.items())
    return f"{kw} w{cfg.num_warps} s{cfg.num_stages}"


def _ranges(idx: list[int]) -> str:
    """``[32, 33, 34, 40]`` -> ``32-34,40``."""
    out: list[str] = []
    for i in sorted(set(idx)):
        if out and i == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out) or "-"


def run_check(device: str) -> list[dict[str, Any]]:
    """Each config of both modules alone on every shape of :data:`SHAPES`, against float64 SDPA."""
    import torch
    import torch.nn.functional as F

    if device == "cuda" or device.startswith("cuda:"):
        import triton

        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=device))
    rows = []
    for label, path in (("faulty", FAULTY), ("fixed", fixed_step().path)):
        mod = _load(path, f"fa_step8_{label}")
        tuners = _tuners(mod)
        saved = [list(t.configs) for t in tuners]
        for j in range(max(len(c) for c in saved)):
            # config j of every autotuned kernel (the one per head-dim class the shape picks runs)
            for t, configs in zip(tuners, saved):
                t.configs, t.cache = [configs[min(j, len(configs) - 1)]], {}
            for b, a, s, d in SHAPES:
                gen = torch.Generator().manual_seed(1000 * s + d)
                q, k, v = (torch.randn(b, a, s, d, generator=gen).to(torch.float16) for _ in range(3))
                ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
                for t in tuners:
                    t.best_config = None
                row: dict[str, Any] = {"module": label, "shape": f"B={b} A={a} S={s} D={d}"}
                try:
                    out = mod.kernel_function(q.to(device), k.to(device), v.to(device)).double().cpu()
                except Exception as exc:  # a config that fails to run is a finding, not a crash
                    row["config"] = f"#{j}"
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                    rows.append(row)
                    continue
                ran = next((t.best_config for t in tuners if getattr(t, "best_config", None) is not None), None)
                row["config"] = describe(ran) if ran is not None else f"#{j}"
                err = (out - ref).abs()
                bad = (err > ATOL + RTOL * ref.abs()) | ~torch.isfinite(out)
                cols = bad.reshape(-1, d).any(0).nonzero().flatten().tolist()
                seq = bad.any(-1).any(0).any(0).nonzero().flatten().tolist()
                row.update(max_err=float(err.nan_to_num(float("inf")).max()), wrong=int(bad.sum()), outputs=err.numel(),
                           cols=_ranges(cols), rows=_ranges(seq))
                rows.append(row)
        for t, configs in zip(tuners, saved):
            t.configs, t.cache = configs, {}
    return rows


def accumulator_moves(ttgir: str) -> list[str]:
    """The ``convert_layout`` lines of ``ttgir`` that move an fp32 tile at least two columns wide
    from one MMA layout to another (``[M, 1]`` row statistics are left out)."""
    out = []
    for line in ttgir.splitlines():
        m = _CONVERT.search(line)
        if m and int(m.group(2)) > 1 and m.group(3) != m.group(4):
            out.append(f"{m.group(1)}x{m.group(2)} {m.group(3)} -> {m.group(4)}")
    return out


def compiled_check(timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """Each config of both modules compiled for sm_90 at the ``ci`` shape: the fp32 accumulator
    tiles moved between MMA layouts, and the shared memory and registers the compiler reports."""
    from xeforge_core.ir.compile import compile_ir
    from xeforge_core.problem import load_problem

    step = fixed_step()
    rows = []
    for label, path in (("faulty", FAULTY), ("fixed", step.path)):
        problem = load_problem(path, step.spec_path, step.reference_path)
        report = compile_ir(path.read_text(), problem=problem, target="sm90", variant="ci", config_index=None,
                            timeout_s=timeout_s, use_cache=False)
        if report is None or not report.kernels:
            rows.append({"module": label, "error": (report.reason if report is not None else "no report")})
            continue
        for k in report.kernels:
            moves = accumulator_moves(k.ir.get("ttgir", ""))
            cfg = k.autotune or {}
            kw = " ".join(f"{a}={b}" for a, b in (cfg.get("kwargs") or {}).items())
            rows.append({"module": label, "config": f"{kw} w{cfg.get('num_warps')} s{cfg.get('num_stages')}",
                         "accumulator_moves": len(moves), "moves": moves, "error": k.error,
                         "shared_bytes": k.resources.get("shared_bytes"), "registers": k.resources.get("registers"),
                         "spill_bytes": k.resources.get("spill_bytes")})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cuda, cuda:1 or cpu (default: cuda when available)")
    ap.add_argument("--out", type=Path, default=None, help="write the rows of both checks as JSON here")
    ap.add_argument("--skip-run", action="store_true", help="only the compiled check")
    ap.add_argument("--skip-compiled", action="store_true", help="only the run check")
    args = ap.parse_args(argv)
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    result: dict[str, Any] = {"device": device}
    if not args.skip_compiled:
        result["compiled"] = compiled_check()
        print("compiled for sm_90 at ci (B=1 A=2 S=40 D=48): fp32 accumulator tiles moved between MMA layouts")
        for r in result["compiled"]:
            print(f"  {r['module']:6} {r.get('config', ''):40}  moves={r.get('accumulator_moves', '-')}  "
                  f"smem={r.get('shared_bytes')}  regs={r.get('registers')}  {'; '.join(r.get('moves') or [])}"
                  + (f"  ERROR {r['error'][:120]}" if r.get("error") else ""), flush=True)
    if not args.skip_run:
        result["run"] = run_check(device)
        print(f"run on {device} against float64 SDPA (fp16 tolerance {ATOL} + {RTOL}·|expected|)")
        for r in result["run"]:
            if "error" in r:
                print(f"  {r['module']:6} {r['config']:40} {r['shape']:20} ERROR {r['error']}")
                continue
            print(f"  {r['module']:6} {r['config']:40} {r['shape']:20} max err {r['max_err']:.3g}  wrong "
                  f"{r['wrong']}/{r['outputs']}  cols {r['cols']}  rows {r['rows']}", flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
