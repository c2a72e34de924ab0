"""Two rules-engine changes measured side by side on a GPU, without the pipeline around them.

1. **Attention fusion** (``xeforge_core/codemods/fusion_attention.py``): the attention sample
   (three kernels, S x S scores in global memory) against its fused online-softmax version and
   PyTorch's ``scaled_dot_product_attention``, at every benchmark shape of its spec.
2. **GEMM configs pruned at the problem's operand width** (``autotune_prune.operand_bytes``):
   for the GEMM samples (07-10, after the stages the pipeline keeps before autotuning: dtype_fix
   for 07, fusion for 08-10), the autotuning codemod's output with configs pruned at 4 bytes an
   operand element (before) and at the problem's 2 (after), against eager PyTorch, at the
   spec's benchmark variant, both capped at 4 configs as ``--quick`` does; and at the operands'
   width with the whole fitting space in the decorator (``operand-width-uncapped``), where the
   per-call roofline pruner alone picks the configs benchmarked.

Every callable is checked against the reference first (largest absolute error reported; a
wrong one is not timed), then timed interleaved with the reference timed twice (the A/A
row, ``reference again``: how far the method alone moves a ratio): ``--rounds`` rounds of
``triton.testing.do_bench`` medians, the order rotated each round; the table gives the median
of the rounds and the ratios to the reference. Usage (from the repository root, on a GPU)::

    python3 benchmarks/bench_rules_changes.py --out OUT

Writes ``OUT/results.json`` and ``OUT/summary.md``; about 1-2 minutes on an H200.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench_flash_attention import measure  # noqa: E402

GEMMS = ["07_gemm_fp32_upcast", "08_gemm_bias_act", "09_gemm_rowsum", "10_batched_gemm"]


def _module(source: str, tag: str, tmp: Path) -> Any:
    from xeforge_core.worker.loading import load_module

    return load_module(tmp, {"source": source, "label": tag, "filename": f"{tag}.py"}).module


def _inputs(variant: Any, device: str, seed: int = 0) -> list[Any]:
    import torch

    gen = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(variant.shapes[p], generator=gen).to(getattr(torch, variant.input_dtypes[p])).to(device)
            for p in variant.params]


def _models(sources: dict[str, str], ref_path: Path, variant: Any, tmp: Path, device: str) -> dict[str, Any]:
    """name -> Model instance on ``device`` (the reference first), parameters drawn alike."""
    import torch

    out = {}
    for name, src in {"reference": ref_path.read_text(), **sources}.items():
        mod = _module(src, f"rc_{name}_{variant.name}".replace("-", "_"), tmp)
        torch.manual_seed(0)
        out[name] = mod.Model(*variant.init_values).to(device)
    return out


def _compare(models: dict[str, Any], args: list[Any], rounds: int) -> dict[str, Any]:
    import torch

    with torch.no_grad():
        want = models["reference"](*args).float()
        errors, fns = {}, {}
        for name, model in models.items():
            got = model(*args).float()
            errors[name] = float((got - want).abs().max())
            scale = float(want.abs().max()) or 1.0
            if name == "reference" or errors[name] <= 2e-2 * scale:
                fns[name] = (lambda m: lambda: m(*args))(model)
        fns["reference again"] = fns["reference"]  # the A/A check: its ratio is the method's noise
        samples = measure(fns, rounds, 25, 100)
    med = {n: statistics.median(s) for n, s in samples.items()}
    return {"us": {n: round(v, 2) for n, v in med.items()}, "max_abs_error": errors,
            "vs_reference": {n: round(med["reference"] / v, 3) for n, v in med.items()},
            "not_timed": sorted(set(models) - set(fns))}


def attention(rounds: int, tmp: Path, device: str) -> dict[str, Any]:
    from xeforge_core.codemods.fusion import fuse
    from xeforge_core.samples import load_sample

    problem = load_sample("13_flash_attention_fwd")
    fused = fuse(problem.kernel.source)
    if not fused.changed:
        raise SystemExit(f"the attention fusion did not apply: {fused.reason}")
    rows = {}
    for variant in problem.benchmark_variants("cuda"):
        models = _models({"sample": problem.kernel.source, "fused": fused.source}, Path(problem.reference.path),
                         variant, tmp, device)
        rows[variant.name] = {"dims": variant.dims, **_compare(models, _inputs(variant, device), rounds)}
        print(variant.name, json.dumps(rows[variant.name]["vs_reference"]), flush=True)
    return rows


def gemms(rounds: int, tmp: Path, device: str) -> dict[str, Any]:
    from xeforge_core.codemods.autotune import add_autotune
    from xeforge_core.codemods.dtype_fix import fix_dtypes
    from xeforge_core.codemods.fusion import fuse
    from xeforge_core.samples import load_sample

    rows = {}
    for name in GEMMS:
        problem = load_sample(name)
        src = problem.kernel.source
        kept = fix_dtypes(src) if name.startswith("07") else fuse(src)
        src = kept.source if kept.changed else src
        versions = {}
        for label, width, cap in (("fp32-width", 4, 4), ("operand-width", 2, 4), ("operand-width-uncapped", 2, 16)):
            res = add_autotune(src, target="cuda", arch="hopper", options={"max_configs": cap, "operand_bytes": width})
            versions[label] = res.source if res.changed else src
        variant = problem.benchmark_variants("cuda")[0]
        models = _models({"stage input": src, **versions}, Path(problem.reference.path), variant, tmp, device)
        rows[name] = {"variant": variant.name, **_compare(models, _inputs(variant, device), rounds),
                      "configs": {k: v.count("triton.Config(") for k, v in versions.items()}}
        print(name, json.dumps(rows[name]["vs_reference"]), flush=True)
    return rows


def summary(res: dict[str, Any]) -> str:
    lines = [f"# Rules-engine changes side by side ({res['device']}, {res['date']})", "",
             "Median µs of interleaved rounds; x ref: the reference's time over the row's (above 1: faster).", ""]
    for title, key in (("Attention sample: three kernels, fused, SDPA (the reference)", "attention"),
                       ("GEMM samples: autotuned with configs pruned at fp32's width and at the operands'", "gemms")):
        lines += [f"## {title}", "", "| case | what | µs | x ref | max abs error |", "|---|---|---|---|---|"]
        for case, row in res[key].items():
            for what, us in row["us"].items():
                error = row["max_abs_error"].get(what, row["max_abs_error"]["reference"])
                lines.append(f"| {case} | {what} | {us} | {row['vs_reference'][what]} | {error:.3g} |")
            for what in row["not_timed"]:
                lines.append(f"| {case} | {what} | not timed (wrong) | - | {row['max_abs_error'][what]:.3g} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", choices=["attention", "gemms"], default=None)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("this script times kernels on a GPU: no cuda device here")
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    with tempfile.TemporaryDirectory() as tmp:
        res["attention"] = attention(args.rounds, Path(tmp), "cuda") if args.only != "gemms" else {}
        res["gemms"] = gemms(args.rounds, Path(tmp), "cuda") if args.only != "attention" else {}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(res, indent=1, default=str))
    (args.out / "summary.md").write_text(summary(res))
    print(summary(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
