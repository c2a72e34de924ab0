"""Does the IR compiled ahead of time without a device (``xeforge_core.ir``) match what the GPU
itself compiles? On an NVIDIA GPU, verify each sample (the verifier keeps each launched
kernel's IR from the ``CompiledKernel`` the JIT built, ``worker/capture.py``), compile the same
module ahead of time for the GPU's target, and compare TTIR, TTGIR, LLVM IR and PTX with source
locations stripped, plus registers, spills and shared memory.

    python benchmarks/check_ir_on_gpu.py --out OUT_DIR [--device cuda:0] [--samples 01_vector_add ...]

Writes ``OUT_DIR/ir_check.json`` after each sample and prints a table last (per sample and
kernel: identical stages, differing stages with their changed-line counts, the resources of
both). On a machine without a GPU it compiles nothing and says so (exit status 2).

The JIT specializes on the launch's arguments as the AOT compile does (the same binder), but
the verifier launches at the spec's correctness shape (``ci``) and the IR page at its
benchmark shape; this script compiles ahead of time at ``ci`` so that both see the same
launch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xeforge_core.ir.compile import compile_ir  # noqa: E402
from xeforge_core.ir.present import diff_count  # noqa: E402
from xeforge_core.ir.text import strip_locations  # noqa: E402

STAGES = ("ttir", "ttgir", "llir", "ptx")


def _target_for(capability: str) -> str:
    major, minor = (int(x) for x in capability.split("."))
    return {90: "sm90", 80: "sm80", 89: "sm89", 100: "sm100"}.get(major * 10 + minor, "sm90")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--samples", nargs="*", default=None, help="sample names (default: all)")
    args = p.parse_args(argv)
    from xeforge_core.devices import detect_device
    from xeforge_core.samples import list_samples, load_sample
    from xeforge_core.verify import VerifyOptions, verify

    device = detect_device(args.device)
    if device.type != "cuda":
        print(f"check_ir_on_gpu: {device.label} is not an NVIDIA GPU: nothing to compare here", file=sys.stderr)
        return 2
    target = _target_for(str((device.fingerprint.get("extra") or {}).get("capability") or "9.0"))
    args.out.mkdir(parents=True, exist_ok=True)
    names = args.samples or [s.name for s in list_samples()]
    results: list[dict] = []
    for name in names:
        problem = load_sample(name)
        problem = problem if hasattr(problem, "kernel") else problem.problem
        verdict = verify(problem, problem.kernel.source, device=device,
                         options=VerifyOptions(measure_performance=False, include_odd_size=False, seeds=1))
        ci = problem.correctness_variants()[0].name if problem.spec is not None else None
        aot = compile_ir(problem.kernel.source, problem=problem, target=target, variant=ci, local_device="cuda")
        for k in verdict.kernels:
            mine = aot.kernel(k.name) if aot is not None else None
            row = {"sample": name, "kernel": k.name, "target": target, "identical": [], "different": {},
                   "gpu": {"registers": k.registers, "spills": k.spills, "shared_bytes": k.shared_bytes},
                   "aot": (mine.resources if mine is not None else None), "aot_error": aot.reason if aot else ""}
            for stage in STAGES:
                a, b = k.ir.get(stage), (mine.ir.get(stage) if mine is not None else None)
                if a is None or b is None:
                    continue
                count = diff_count(strip_locations(a, stage), strip_locations(b, stage))
                if count.identical:
                    row["identical"].append(stage)
                else:
                    row["different"][stage] = [count.removed, count.added]
            results.append(row)
        (args.out / "ir_check.json").write_text(json.dumps({"device": device.to_dict(), "rows": results}, indent=1))
    print(f"IR compiled ahead of time ({target}) against the JIT's on {device.label}")
    print(f"{'sample':26s} {'kernel':28s} {'identical':22s} {'different (-/+ lines)':28s} regs gpu/aot")
    for r in results:
        diff = ", ".join(f"{s} -{a}/+{b}" for s, (a, b) in r["different"].items()) or "-"
        aot_regs = (r["aot"] or {}).get("registers")
        print(f"{r['sample']:26s} {r['kernel']:28s} {' '.join(r['identical']) or '-':22s} {diff:28s} "
              f"{r['gpu']['registers']}/{aot_regs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
