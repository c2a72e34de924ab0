"""Every config of every step of the Flash Attention trajectory for Hopper, compiled ahead of time
for sm_90 at every shape of its spec (a script, not a test; no GPU needed).

For each step of ``flash_attention_trajectory("cuda")`` and each variant of its spec (the ``ci``
entries and the ``bench-gpu*`` shapes), every kernel the step launches there is compiled for the
H200's target through ``xeforge_core.ir`` (each ``@triton.autotune`` config on its own, its
pre-hook run), and the resources the compiler reports are recorded: shared memory per program
(bytes), registers per thread, spilled bytes, the warps the program runs with, and how many of the
kernel's exponentials (``ex2`` in its PTX) come while a wgmma group is still in flight: the softmax
overlapping a dot, what the pipelined steps are written for. A config over the 232448 bytes of
shared memory a block may use on the H200 would fail at launch there ("out of resource: shared
memory"); one that spills runs, slowly. The check therefore answers, before any GPU time is
spent, whether any config the verifier forces can fail for resources.

Usage::

    python benchmarks/check_fa_hopper_compile.py --out docs/measured/cpu-fa-hopper-compile
    python benchmarks/check_fa_hopper_compile.py --out /tmp/fa-aot --steps 8,9 --variants ci,bench-gpu

Writes ``results.json`` (one row per step, variant and compiled kernel) and ``summary.md`` (the
rows over the limit or spilling first, then every config's largest shared memory and registers),
rewritten after each step. Exit status 1 when a config is over the limit or failed to compile.
About 10 minutes on a 2-core CPU (each step and variant is one worker).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Shared memory a block may use on the H200 (knowledge/hardware/nvidia_h200.yaml).
SMEM_LIMIT = 232448


def _config_text(kernel: Any) -> str:
    cfg = kernel.autotune or {}
    if not cfg:
        opts = kernel.options or {}
        consts = {k: v for k, v in (kernel.constexprs or {}).items() if k.startswith("BLOCK_")}
        return " ".join(f"{k}={v}" for k, v in consts.items()) + f" w{opts.get('num_warps', '?')} s{opts.get('num_stages', '?')}"
    kw = " ".join(f"{k}={v}" for k, v in (cfg.get("kwargs") or {}).items())
    return f"{cfg.get('kernel', '')} {kw} w{cfg.get('num_warps')} s{cfg.get('num_stages')}"


def ex2_under_wgmma(ptx: str) -> int:
    """How many ``ex2`` instructions of ``ptx`` follow a ``wgmma.commit_group`` with no
    ``wgmma.wait_group`` between them, reading the text in order (a static count: the exponentials
    the hardware can run while a matrix product is still on the tensor cores). A wait of N
    pending groups counts as done only when N is 0."""
    in_flight, count = False, 0
    for line in ptx.splitlines():
        text = line.strip()
        if text.startswith("wgmma.commit_group"):
            in_flight = True
        elif text.startswith("wgmma.wait_group"):
            in_flight = not text.rstrip(";").endswith(" 0")
        elif in_flight and text.startswith("ex2."):
            count += 1
    return count


def check(steps: list[Any], variants: list[str] | None, out: Path, timeout_s: float) -> dict[str, Any]:
    """Compile every step at every chosen variant; returns the results written to ``out``."""
    import triton

    from xeforge_core.ir.compile import compile_ir

    res: dict[str, Any] = {"started": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
                           "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
                           "versions": {"python": platform.python_version(), "triton": triton.__version__},
                           "target": "sm90", "smem_limit": SMEM_LIMIT, "rows": [], "errors": []}
    start = time.monotonic()
    for step in steps:
        names = [n for n in step.problem.spec.variants if variants is None or n in variants]
        for name in names:
            report = compile_ir(step.code, problem=step.problem, target="sm90", variant=name, config_index=None,
                                timeout_s=timeout_s, use_cache=True, max_kernels=64)
            if report is None or report.kind not in ("ok", "compile_error"):
                res["errors"].append(f"step {step.index} at {name}: {report.kind if report else 'none'}: "
                                     f"{report.reason if report else ''}")
                continue
            for k in report.kernels:
                r = k.resources or {}
                res["rows"].append({
                    "step": step.index, "title": step.title, "variant": name,
                    "dims": " ".join(f"{a}={b}" for a, b in step.problem.variant(name).dims.items()),
                    "kernel": k.name, "config": _config_text(k), "error": k.error,
                    "shared_bytes": r.get("shared_bytes"), "registers": r.get("registers"),
                    "spill_bytes": r.get("spill_bytes"), "num_warps": (k.metadata or {}).get("num_warps"),
                    "ex2_under_wgmma": ex2_under_wgmma((k.ir or {}).get("ptx", "")),
                    "over_limit": bool(r.get("shared_bytes") and r["shared_bytes"] > SMEM_LIMIT)})
            print(f"[aot] {time.monotonic() - start:6.0f} s  step {step.index} {name}: {len(report.kernels)} kernel(s)",
                  flush=True)
        res["seconds"] = time.monotonic() - start
        write(out, res)
    return res


def summary_markdown(res: dict[str, Any]) -> str:
    """The problems first (over the limit, spilling, failed), then per step and config the largest
    shared memory and registers over all shapes."""
    rows = res["rows"]
    bad = [r for r in rows if r["over_limit"] or r["error"] or (r["spill_bytes"] or 0) > 0]
    lines = [
        "# Flash Attention trajectory for Hopper, every config compiled for sm_90 at every shape",
        "",
        f"- Compiled ahead of time on the CPU machine ({res['machine']}), {res['started']} UTC, "
        f"{res.get('seconds', 0) / 60:.1f} min; " + ", ".join(f"{k} {v}" for k, v in res["versions"].items()),
        f"- Command: `python benchmarks/check_fa_hopper_compile.py --out OUT`; limit: {res['smem_limit']} bytes of "
        "shared memory a block may use on the H200. Resources are what Triton's sm_90 compiler (ptxas) reports; "
        "ex2 under wgmma: the PTX's exponentials that follow a wgmma commit before any wait (fewest over the shapes).",
        f"- {len(rows)} compiled kernels; {sum(r['over_limit'] for r in rows)} over the limit, "
        f"{sum(bool(r['error']) for r in rows)} failed to compile, "
        f"{sum((r['spill_bytes'] or 0) > 0 for r in rows)} spilling.",
        "",
        "## Over the limit, failed or spilling",
        "",
    ]
    lines += [f"- step {r['step']} at {r['variant']} ({r['dims']}): {r['config']}: "
              + (f"error {r['error'][:200]}" if r["error"] else
                 f"{r['shared_bytes']} bytes shared, {r['spill_bytes']} bytes spilled") for r in bad] or ["- none"]
    lines += ["", "## Largest shared memory and registers per config (over all shapes)", "",
              "| step | config | shapes | shared memory (bytes) | registers | warps | ex2 under wgmma |",
              "|---|---|---|---|---|---|---|"]
    by: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["step"], r["config"]), []).append(r)
    for (step, config), rs in sorted(by.items()):
        lines.append(f"| {step} | {config} | {len(rs)} | {max(r['shared_bytes'] or 0 for r in rs)} | "
                     f"{max(r['registers'] or 0 for r in rs)} | {max(r['num_warps'] or 0 for r in rs)} | "
                     f"{min(r.get('ex2_under_wgmma') or 0 for r in rs)} |")
    if res["errors"]:
        lines += ["", "## Errors", ""] + [f"- {e[:300]}" for e in res["errors"]]
    return "\n".join(lines) + "\n"


def write(out: Path, res: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1))
    (out / "summary.md").write_text(summary_markdown(res))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", default="", help="comma-separated step indices (default: all)")
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: every one)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per step and variant")
    args = ap.parse_args(argv)
    from xeforge_core.samples import flash_attention_trajectory

    steps = flash_attention_trajectory("cuda")
    pick = {int(s) for s in args.steps.split(",") if s.strip()}
    steps = [s for s in steps if not pick or s.index in pick]
    variants = [v for v in args.variants.split(",") if v.strip()] or None
    res = check(steps, variants, args.out, args.timeout)
    print(summary_markdown(res).split("## Largest")[0])
    failed = any(r["over_limit"] or r["error"] for r in res["rows"]) or bool(res["errors"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
