"""What a first version's index width is worth: each problem's TorchInductor first version timed
with its index dtype as chosen at launch against the same version forced to int64 (a script, not
a test; issue 27).

Generation makes Inductor index in int64 so a first version holds at every size; since
``xeforge_core/inductor/index_width.py`` a kernel whose indices only address memory and mask it
takes its index dtype at launch (int32 where every offset fits). For each plain-PyTorch problem
given (KernelBench's ``Model`` + ``get_inputs()``), at its published size:

1. the first version is generated on ``--device`` and converted, as ``xeforge optimize --engine
   rules`` does (``xeforge_core.inductor.first_version``'s capture and convert);
2. its output is compared with the same module forced to int64 (``index_dtype`` replaced by one
   that always answers ``tl.int64``): the two must agree bit for bit, and with eager within 1e-3;
3. timing: ``--rounds`` interleaved rounds of ``triton.testing.do_bench`` medians (L2 flushed
   before each call) of the version as chosen, the version forced to int64, the version as chosen
   again (the A/A: its ratio to the first is the method's noise) and eager; the median of the
   rounds is reported, with the ratios int64 / chosen and chosen#2 / chosen.

Usage (repository root, GPU machine)::

    python benchmarks/bench_index_width.py --out OUT corpus/KernelBench/KernelBench/level2/71_*.py ...

Writes ``OUT/results.json`` and ``OUT/summary.md`` after every problem. ``--device cpu`` checks
the agreement in Triton's interpreter at the published size and times nothing.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _module(source: str, name: str) -> dict[str, Any]:
    """``source`` imported from a file of its own (Triton's JIT reads a kernel's source from its
    file on a GPU); its namespace."""
    import importlib.util
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="xeforge-iw-"))
    path = folder / f"{name}_{abs(hash(source)) % 10**8}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module.__dict__


def measure(problem_path: Path, device: str, rounds: int) -> dict[str, Any]:
    """One problem's row: the kernels narrowed, agreement, and (on a GPU) the medians in µs."""
    import torch
    import triton
    import triton.language as tl

    from xeforge_core.inductor.capture import capture
    from xeforge_core.inductor.convert import convert
    from xeforge_core.inductor.index_width import PARAM

    source = problem_path.read_text(encoding="utf-8")
    row: dict[str, Any] = {"problem": problem_path.stem}
    fv = convert(capture(source, name=problem_path.stem, device=device), source)
    row["narrowed"] = [k for k in fv.kernels if f"def {k}(" in fv.source
                       and PARAM in fv.source.split(f"def {k}(", 1)[1].split(")", 1)[0]]
    row["kernels"] = fv.kernels
    chosen, wide = _module(fv.source, "chosen"), _module(fv.source, "wide")
    if "index_dtype" in wide:
        wide["index_dtype"] = lambda *args: tl.int64
    problem = _module(source, "problem")
    torch.manual_seed(0)
    init = problem["get_init_inputs"]()
    torch.manual_seed(1)
    eager = problem["Model"](*init).to(device)  # as KernelBench calls it: in training mode
    torch.manual_seed(1)
    model_chosen = chosen["ModelNew"](*init).to(device)
    torch.manual_seed(1)
    model_wide = wide["ModelNew"](*init).to(device)
    torch.manual_seed(2)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem["get_inputs"]()]
    with torch.no_grad():
        out_c, out_w, out_e = model_chosen(*inputs), model_wide(*inputs), eager(*inputs)
        row["bitwise_equal"] = bool(torch.equal(out_c, out_w))
        row["max_abs_vs_eager"] = float((out_c.float() - out_e.float()).abs().max())
        if device == "cpu":
            return row
        calls = {"chosen": lambda: model_chosen(*inputs), "int64": lambda: model_wide(*inputs),
                 "chosen#2": lambda: model_chosen(*inputs), "eager": lambda: eager(*inputs)}
        times: dict[str, list[float]] = {k: [] for k in calls}
        for _ in range(rounds):
            for name, fn in calls.items():
                times[name].append(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    row.update({f"{k}_us": v for k, v in med.items()})
    row["int64_over_chosen"] = med["int64"] / med["chosen"]
    row["aa"] = med["chosen#2"] / med["chosen"]
    row["eager_over_chosen"] = med["eager"] / med["chosen"]
    return row


def summary(res: dict[str, Any]) -> str:
    lines = [f"# First versions: index dtype as chosen at launch against int64 ({res['device']}, {res['started']})", "",
             f"versions: {res['versions']}; {res['rounds']} interleaved rounds of do_bench medians", "",
             "| problem | narrowed kernels | bit-equal | max abs vs eager | chosen µs | int64 µs | int64/chosen | "
             "A/A | eager µs | eager/chosen |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        if "error" in r:
            lines.append(f"| {r['problem']} | error: {r['error'][:200]} |")
            continue
        fmt = lambda k, f="{:.1f}", r=r: f.format(r[k]) if k in r else "-"  # noqa: E731
        lines.append(f"| {r['problem']} | {', '.join(r['narrowed']) or 'none'} | {r['bitwise_equal']} | "
                     f"{r['max_abs_vs_eager']:.2e} | {fmt('chosen_us')} | {fmt('int64_us')} | "
                     f"{fmt('int64_over_chosen', '{:.3f}')} | {fmt('aa', '{:.3f}')} | {fmt('eager_us')} | "
                     f"{fmt('eager_over_chosen', '{:.3f}')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problems", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    import torch
    import triton

    gpu = args.device != "cpu" and torch.cuda.is_available()
    res: dict[str, Any] = {"started": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                           "device": torch.cuda.get_device_name() if gpu else args.device, "rounds": args.rounds,
                           "versions": {"torch": torch.__version__, "triton": triton.__version__}, "rows": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.problems:
        try:
            row = measure(path, args.device, args.rounds)
        except Exception as exc:  # noqa: BLE001 - one problem's failure is its row
            row = {"problem": path.stem, "error": f"{type(exc).__name__}: {exc}"}
        res["rows"].append(row)
        print(json.dumps(row, default=str), flush=True)
        (args.out / "results.json").write_text(json.dumps(res, indent=1, default=str))
        (args.out / "summary.md").write_text(summary(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
