"""The Triton GEMM of a first version (``xeforge_core.inductor.gemm``) against the library's GEMM:
how fast, and how far from the float64 truth, per way of multiplying float32 operands.

For each KernelBench problem given (default: level 1's p1-p18, the matrix products), the first
version is generated with TorchInductor on the device as ``xeforge optimize --engine rules``
writes it; problems whose first version has no GEMM launcher are left out. Each of its variants
runs the generated module with the launcher's arguments forced:

* ``ieee``: float32 operands multiplied with FMA instructions, no split of K;
* ``ieee+split``: the same with K split over programs where the launcher's rule splits it;
* ``tf32x3``: three TF32 tensor-core products a product, no split of K;
* ``tf32x3+split``: the launcher's own choice on NVIDIA GPUs of compute capability 8.0 and newer.

Timing: ``triton.testing.do_bench`` (median over its repetitions, the L2 flushed between them)
of eager ``Model`` (cuBLAS), and of each variant, side by side in one process; ``eager#2`` times
eager again (an A/A check of the method). Error: ``max |out - truth| / max |truth|`` with the
truth from ``Model`` in float64 on the device (TF32 off), beside eager float32's own error.

Output: ``OUT/results.json`` and ``OUT/summary.md``. A script, not a test: it needs a CUDA GPU.

    python benchmarks/bench_gemm_first_version.py --kernelbench corpus/KernelBench --out OUT
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_inductor_kernelbench import geomean, problems_of  # noqa: E402

#: where first versions are generated (the CPU dry run of the script sets "cpu")
DEVICE = "cuda"

#: launcher keyword arguments per variant (None: the launcher's own choice)
VARIANTS: dict[str, dict[str, Any]] = {
    "ieee": {"input_precision": "ieee", "split_k": 1},
    "ieee+split": {"input_precision": "ieee", "split_k": None},
    "tf32x3": {"input_precision": "tf32x3", "split_k": 1},
    "tf32x3+split": {"input_precision": "tf32x3", "split_k": None},
}


def _generate(path: Path, timeout_s: float) -> tuple[Path, str | None, str]:
    """(problem, first version source or None, why not)."""
    from xeforge_core.inductor.first_version import inductor_first_version
    from xeforge_core.problem import load_problem

    cand = inductor_first_version(load_problem(path), device=DEVICE, timeout_s=timeout_s)
    if not cand.applicable:
        return path, None, cand.not_applicable_reason
    return path, cand.code, ""


def _module(name: str, source: str, work: Path) -> Any:
    file = work / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _launcher_name(mod: Any) -> str | None:
    """The GEMM launcher of a first version: the module-level function taking split_k."""
    import inspect

    for name, obj in vars(mod).items():
        if inspect.isfunction(obj) and "split_k" in inspect.signature(obj).parameters:
            return name
    return None


def _rel_error(out: Any, truth: Any) -> float:
    scale = truth.abs().max().item() or 1.0
    return (out.double() - truth).abs().max().item() / scale


def measure(path: Path, source: str, work: Path) -> dict[str, Any]:
    """The row of one problem: times (ms) and relative errors of eager and every variant."""
    import torch

    def do_bench(fn, return_mode="median"):
        if DEVICE != "cuda":  # the CPU dry run: one call, timed
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e3
        from triton.testing import do_bench as bench
        return bench(fn, return_mode=return_mode)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    stem = "p" + path.stem.replace("-", "_")
    mod = _module(stem, source, work)
    problem = _module(stem + "_problem", path.read_text(), work)
    launcher = _launcher_name(mod)
    row: dict[str, Any] = {"problem": path.stem}
    if launcher is None:
        row["skipped"] = "the first version has no GEMM launcher"
        return row
    torch.manual_seed(0)
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    model = problem.Model(*init).to(DEVICE)
    torch.manual_seed(0)
    new = mod.ModelNew(*init).to(DEVICE)
    new.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    row["shapes"] = [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    with torch.no_grad():
        truth = model.double()(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                 for x in inputs]).double()
        model.float()
        eager_out = model(*inputs)
        row["eager_rel_error"] = _rel_error(eager_out, truth)
        row["eager_ms"] = do_bench(lambda: model(*inputs), return_mode="median")
        original = getattr(mod, launcher)
        for name, kw in VARIANTS.items():
            def forced(*a, _kw=kw, **k):
                return original(*a, **{**k, **{key: v for key, v in _kw.items() if v is not None}})

            setattr(mod, launcher, forced)
            try:
                out = new(*inputs)
                row[f"{name}_rel_error"] = _rel_error(out, truth)
                row[f"{name}_ms"] = do_bench(lambda: new(*inputs), return_mode="median")
            except Exception as exc:  # noqa: BLE001 - a variant's failure is a row, not the end
                row[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            finally:
                setattr(mod, launcher, original)
        row["eager#2_ms"] = do_bench(lambda: model(*inputs), return_mode="median")
    del truth, eager_out
    return row


def summary(rows: list[dict[str, Any]], header: dict[str, Any]) -> str:
    lines = [f"# The first version's Triton GEMM against cuBLAS ({header['date']}, {header['device']})", "",
             f"torch {header['torch']}, triton {header['triton']}; times are do_bench medians (ms), "
             "speedup = eager / variant; error = max |out - truth| / max |truth| against float64.", "",
             "| problem | eager ms | A/A | " + " | ".join(f"{v} speedup (error / eager's)" for v in VARIANTS) + " |",
             "|---|---|---|" + "---|" * len(VARIANTS)]
    speed: dict[str, list[float | None]] = {v: [] for v in VARIANTS}
    for r in rows:
        if "eager_ms" not in r:
            lines.append(f"| {r['problem']} | {r.get('skipped', r.get('error', ''))} |")
            continue
        cells = []
        for v in VARIANTS:
            if f"{v}_ms" in r:
                s = r["eager_ms"] / r[f"{v}_ms"]
                speed[v].append(s)
                ratio = r[f"{v}_rel_error"] / max(r["eager_rel_error"], 1e-300)
                cells.append(f"{s:.3f}x ({ratio:.2g})")
            else:
                speed[v].append(None)
                cells.append(r.get(f"{v}_error", "-")[:60])
        lines.append(f"| {r['problem']} | {r['eager_ms']:.4g} | {r['eager_ms'] / r['eager#2_ms']:.3f} | "
                     + " | ".join(cells) + " |")
    gm = [f"{v}: {g:.3f}x" for v in VARIANTS if (g := geomean(speed[v])) is not None]
    lines += ["", "Geometric mean over eager: " + ", ".join(gm) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", type=Path, required=True, help="KernelBench checkout (its KernelBench/ folder)")
    ap.add_argument("--only", nargs="*", default=[str(i) for i in range(1, 19)],
                    help="problem numbers (or words of their names) of level 1 (default: 1 ... 18)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=4, help="first versions generated at once")
    ap.add_argument("--timeout", type=float, default=240, help="seconds to generate one first version")
    args = ap.parse_args(argv)
    import torch
    import triton

    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "modules"
    work.mkdir(exist_ok=True)
    paths = problems_of(args.kernelbench, 1, None, args.only)
    header = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        generated = list(pool.map(lambda p: _generate(p, args.timeout), paths))
    print(f"generated {sum(s is not None for _, s, _ in generated)} of {len(paths)} in "
          f"{time.monotonic() - t0:.0f} s", flush=True)
    rows = []
    for path, source, why in generated:
        if source is None:
            rows.append({"problem": path.stem, "skipped": why[:200]})
            continue
        try:
            rows.append(measure(path, source, work))
        except Exception as exc:  # noqa: BLE001
            rows.append({"problem": path.stem, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        print(json.dumps({k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else v)
                          for k, v in rows[-1].items()}), flush=True)
        (args.out / "results.json").write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    (args.out / "summary.md").write_text(summary(rows, header))
    print(summary(rows, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
