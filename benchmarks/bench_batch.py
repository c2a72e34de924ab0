"""Benchmark of ``xeforge batch`` against ``xeforge batch --ray`` (a script, not a test).

Runs the real command line, as a user would, over the samples (``sample_kernels/``) and over a
directory of Xe-Forge cases given on the command line, once per mode:

* ``sequential``: ``xeforge batch DIR`` (one kernel after another on the device),
* ``ray``: ``xeforge batch DIR --ray [ADDRESS]`` (a local Ray instance over every GPU of the
  machine, or the cluster at ADDRESS),
* ``ray-1gpu``: the same on a local instance given one GPU, for the throughput of one GPU against
  all of them,
* ``sequential#2`` / ``ray#2``: the same again, an A/A run that measures the run-to-run noise.

Each mode gets its own verdict cache, so nothing is served from another mode's measurements.
It then compares the modes kernel by kernel and writes, in ``--out``:

* ``summary.md``: the device, the wall time of each mode and the throughput ratio, whether the
  verdicts are the same, how far the speedups differ against the noise band, and on which
  devices the timing runs ran (the most at once on one device, which must be 1, and across
  devices);
* ``rows.csv``: per kernel and mode the stages' statuses and verdicts, the final and per-stage
  speedups, the devices it was timed on, its attempts and error;
* ``results.json``: all of it, with each mode's command, wall time and log file;
* per suite and mode, the batch's own ``summary.csv``/``summary.json`` and its log; the sessions,
  verdict caches and copies of the problems go to ``--work`` (by default under the temp dir), so
  ``--out`` stays small enough to keep (``docs/measured/``) and to carry to the next run.

Before the first mode, a Ray preflight (``preflight.json``; ``--preflight-only`` stops there)
checks that Ray starts and that a ``num_gpus=1`` task gets one GPU pinned, so a machine where
Ray cannot run costs seconds, not a sequential batch first.

Checkpointing: a mode that finished is not run again (``done.json``); one that was interrupted
(a device call's time limit) is continued with ``--resume`` and its wall time is marked as not
comparable. Each stage speedup measured in both modes is judged by the timing method's own 95 %
confidence intervals (do they overlap?), and the differences against two noise bands: ``2 * sqrt(2) * 0.72 %`` (0.72 % is the
run-to-run coefficient of variation of one pair's speedup over fresh verifications on an H200,
``docs/measured/h200-verifier/report.md``; the ratio of two independent runs has sqrt(2)
times that; twice that is the band) and, where an A/A mode was run, the largest difference
between it and its twin.

Usage::

    python benchmarks/bench_batch.py --out OUT --cases ../shared/cases/xeforge --device cuda
    python benchmarks/bench_batch.py --out OUT --suite samples --modes sequential,ray,ray#2
    python benchmarks/bench_batch.py --out /tmp/bb --device cpu --suite samples \\
        --only 01_vector_add --only 07_gemm --stages dtype_fix          # on a CPU, in minutes
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from xeforge_core.batch import BatchRow, read_summary  # noqa: E402

#: Run-to-run coefficient of variation of a speedup measured by the verifier on an H200 (four
#: fresh verifications of one GEMM pair, 2026-12-01; docs/measured/h200-verifier/report.md).
MEASURED_SPEEDUP_CV = 0.0072

#: ``ray-1gpu``: a local Ray instance given one GPU (``--ray-gpus 1``), for the throughput of one
#: GPU against all of them on the same machine.
MODES = ("sequential", "ray", "ray-1gpu", "sequential#2", "ray#2")


# ---------------------------------------------------------------------------------------------
# problems


def problem_set(source: Path, dest: Path, only: list[str]) -> list[str]:
    """Copy the kernels of ``source`` (a ``.py`` with a sibling ``.yaml``, and its reference)
    whose name contains one of ``only`` (all when empty) into ``dest``; returns their names."""
    from xeforge_core.batch import find_kernels

    dest.mkdir(parents=True, exist_ok=True)
    names = []
    for item in find_kernels(source):
        if only and not any(o in item.name for o in only):
            continue
        for path in (item.kernel, item.spec, item.reference):
            if path is not None:
                shutil.copy(path, dest / path.name)
        names.append(item.name)
    return names


# ---------------------------------------------------------------------------------------------
# running the modes


def mode_dir(out: Path, suite: str, mode: str) -> Path:
    return out / suite / mode.replace("#", "-")


def batch_command(problems: Path, mdir: Path, wdir: Path, mode: str, args: argparse.Namespace,
                  resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "xeforge_core.cli", "batch", str(problems), "--out", str(mdir / "summary.csv"),
           "--workspace", str(wdir / "ws"), "--iterations", str(args.iterations), "--seeds", str(args.seeds),
           "--timeout", str(args.timeout), "-q"]
    if args.device:
        cmd += ["--device", args.device]
    if args.stages:
        cmd += ["--stages", args.stages]
    if args.no_odd_size:
        cmd.append("--no-odd-size")
    if mode.startswith("ray"):
        cmd.append("--ray")
        if args.ray_address and mode != "ray-1gpu":
            cmd.append(args.ray_address)
        if mode == "ray-1gpu":
            cmd += ["--ray-gpus", "1"]
        elif args.ray_gpus is not None and not args.ray_address:
            cmd += ["--ray-gpus", str(args.ray_gpus)]
    if resume:
        cmd.append("--resume")
    return cmd


def run_mode(problems: Path, out: Path, work: Path, suite: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one mode (or continue it); returns its record (command, wall s, exit status, ...).
    Its summary, log and checkpoint go to ``out``; its sessions and verdict cache to ``work``."""
    mdir = mode_dir(out, suite, mode)
    wdir = mode_dir(work, suite, mode)
    done = mdir / "done.json"
    if done.exists():
        record = json.loads(done.read_text())
        print(f"[{suite}/{mode}] already done ({record['wall_s']:.0f} s); skipped", file=sys.stderr, flush=True)
        return record
    mdir.mkdir(parents=True, exist_ok=True)
    resume = (mdir / "summary.json").exists()
    earlier = json.loads((mdir / "partial.json").read_text()) if (mdir / "partial.json").exists() else None
    cmd = batch_command(problems, mdir, wdir, mode, args, resume)
    env = dict(os.environ, XEFORGE_CACHE_DIR=str(wdir / "cache"), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    print(f"[{suite}/{mode}] {' '.join(cmd)}", file=sys.stderr, flush=True)
    started = time.time()
    (mdir / "partial.json").write_text(json.dumps({"started": started, "resumed": resume or bool(earlier)}))
    t0 = time.monotonic()
    with open(mdir / "log.txt", "a", encoding="utf-8") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    starts = re.findall(r"Ray: (?:started a local instance|joined the cluster at \S+) in ([\d.]+) s",
                        (mdir / "log.txt").read_text(encoding="utf-8", errors="replace"))
    record = {"suite": suite, "mode": mode, "command": cmd, "returncode": rc, "wall_s": round(wall, 2),
              "ray_start_s": float(starts[-1]) if starts else None,
              "started": _dt.datetime.fromtimestamp(started, tz=_dt.timezone.utc).isoformat(),
              "resumed": bool(resume or earlier), "log": str(mdir / "log.txt")}
    if rc in (0, 1):  # 1: some kernel had an error, which is a result
        done.write_text(json.dumps(record, indent=1))
        (mdir / "partial.json").unlink(missing_ok=True)
    print(f"[{suite}/{mode}] exit {rc} after {wall:.0f} s", file=sys.stderr, flush=True)
    return record


def ray_preflight(out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Before any mode runs: can Ray start (or be joined) here, what does it see, and does a
    ``num_gpus=1`` task get a GPU pinned? Written to ``preflight.json`` (and reused from it)."""
    path = out / "preflight.json"
    if path.exists():
        return json.loads(path.read_text())
    import ray

    started = time.monotonic()
    ray.init(address=args.ray_address or "local", num_gpus=args.ray_gpus if not args.ray_address else None,
             include_dashboard=False, log_to_driver=False)
    try:
        info: dict[str, Any] = {"ray": ray.__version__, "start_s": round(time.monotonic() - started, 2),
                                "resources": {k: v for k, v in ray.cluster_resources().items()
                                              if k in ("CPU", "GPU", "memory") or k.startswith("accelerator")},
                                "nodes": len([n for n in ray.nodes() if n.get("Alive")])}

        def seen() -> dict[str, Any]:
            return {"gpu_ids": [str(i) for i in ray.get_gpu_ids()], "host": os.uname().nodename,
                    "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
                    "ZE_AFFINITY_MASK": os.environ.get("ZE_AFFINITY_MASK")}

        if info["resources"].get("GPU", 0) > 0:
            probe = ray.remote(seen)
            info["whole_gpu_task"] = ray.get(probe.options(num_gpus=1).remote(), timeout=120)
            info["gpu_share_task"] = ray.get(probe.options(num_gpus=0.25).remote(), timeout=120)
        info["no_gpu_task"] = ray.get(ray.remote(seen).options(num_gpus=0).remote(), timeout=120)
    finally:
        ray.shutdown()
    path.write_text(json.dumps(info, indent=1))
    return info


# ---------------------------------------------------------------------------------------------
# comparing


def _verdict_key(row: BatchRow) -> tuple:
    return tuple((s, row.verdicts.get(s, "")) for s in row.stages) + (("error", bool(row.error)),)


def _status_key(row: BatchRow) -> tuple:
    return tuple((s, row.status.get(s, "")) for s in row.stages)


def timing_concurrency(rows: list[BatchRow]) -> dict[str, Any]:
    """From the rows' job records: the most timing runs at once on one device (must be 1), the
    most at once across devices, how often a timing run overlapped any other job on its
    device, and the devices timed on."""
    jobs = [j for r in rows for j in r.jobs if j.get("start") is not None and j.get("end") is not None]
    timing = [j for j in jobs if j.get("role") == "timing"]

    def most_at_once(spans: list[dict[str, Any]]) -> int:
        events = sorted([(j["start"], 1) for j in spans] + [(j["end"], -1) for j in spans])
        best = now = 0
        for _, step in events:
            now += step
            best = max(best, now)
        return best

    per_device = {}
    for dev in sorted({j["device"] for j in timing}):
        per_device[dev] = most_at_once([j for j in timing if j["device"] == dev])
    shared = sum(1 for t in timing for j in jobs
                 if j is not t and j["device"] == t["device"] and j["start"] < t["end"] and t["start"] < j["end"])
    return {"timing_runs": len(timing), "devices": sorted(per_device), "most_at_once_per_device": per_device,
            "most_at_once_on_one_device": max(per_device.values(), default=0),
            "most_at_once_overall": most_at_once(timing), "timing_overlapping_another_job_on_its_device": shared}


def _log_ratio(a: float | None, b: float | None) -> float | None:
    return math.log(b / a) if a and b and a > 0 and b > 0 else None


def compare(rows_by_mode: dict[str, list[BatchRow]]) -> dict[str, Any]:
    """Kernel-by-kernel comparison of the modes of one suite (the first mode is the reference)."""
    modes = list(rows_by_mode)
    base = modes[0]
    maps = {m: {r.kernel: r for r in rows} for m, rows in rows_by_mode.items()}
    kernels = sorted({k for m in maps.values() for k in m})
    out: dict[str, Any] = {"reference_mode": base, "kernels": kernels, "pairs": {}}
    for other in modes[1:]:
        same_v, same_s, diffs, ratios = 0, 0, [], []
        for k in kernels:
            a, b = maps[base].get(k), maps[other].get(k)
            if a is None or b is None:
                diffs.append({"kernel": k, "what": f"missing in {base if a is None else other}"})
                continue
            if _verdict_key(a) == _verdict_key(b):
                same_v += 1
            else:
                diffs.append({"kernel": k, "what": "verdicts", base: dict(a.verdicts), other: dict(b.verdicts),
                              "errors": [a.error, b.error]})
            if _status_key(a) == _status_key(b):
                same_s += 1
            else:
                diffs.append({"kernel": k, "what": "statuses", base: dict(a.status), other: dict(b.status)})
            lr = _log_ratio(a.final_speedup, b.final_speedup)
            if lr is not None:
                ratios.append({"kernel": k, "stage": "final", base: a.final_speedup, other: b.final_speedup,
                               "log_ratio": lr})
            for s in a.stages:
                if s in b.stages and a.status.get(s) == b.status.get(s) == "approved":
                    lr = _log_ratio(a.speedups.get(s), b.speedups.get(s))
                    if lr is not None:
                        ia, ib = a.intervals.get(s), b.intervals.get(s)
                        overlap = None if not (ia and ib) else (ia[0] <= ib[1] and ib[0] <= ia[1])
                        ratios.append({"kernel": k, "stage": s, base: a.speedups[s], other: b.speedups[s],
                                       "log_ratio": lr, "intervals": [ia, ib], "intervals_overlap": overlap})
        absl = sorted(abs(r["log_ratio"]) for r in ratios)
        judged = [r["intervals_overlap"] for r in ratios if r.get("intervals_overlap") is not None]
        out["pairs"][other] = {
            "intervals_compared": len(judged), "intervals_overlapping": sum(1 for j in judged if j),
            "same_verdicts": same_v, "same_statuses": same_s, "compared": len(kernels), "differences": diffs,
            "speedup_pairs": ratios,
            "median_abs_diff": (math.exp(absl[len(absl) // 2]) - 1) if absl else None,
            "max_abs_diff": (math.exp(absl[-1]) - 1) if absl else None,
        }
    return out


def aa_pairs(rows_by_mode: dict[str, list[BatchRow]]) -> dict[str, dict[str, Any]]:
    """Each A/A pair (``X`` against ``X#2``) compared as :func:`compare` does."""
    return {m: compare({m[:-2]: rows_by_mode[m[:-2]], m: rows_by_mode[m]})["pairs"][m]
            for m in rows_by_mode if m.endswith("#2") and m[:-2] in rows_by_mode}


def noise_bands(aa: dict[str, dict[str, Any]]) -> list[tuple[str, float, str]]:
    """The relative speedup differences two runs may show by chance: ``(name, band, source)``
    for the measured run-to-run CV (always) and for the A/A run (where one was made)."""
    cv_band = math.exp(2 * math.sqrt(2) * MEASURED_SPEEDUP_CV) - 1
    bands = [("CV", cv_band, "2 x sqrt(2) x 0.72 %: twice the standard deviation of the ratio of two runs, "
                             "with the verifier's run-to-run CV of a speedup on an H200 "
                             "(docs/measured/h200-verifier/report.md)")]
    measured = [(pair["max_abs_diff"], name) for name, pair in aa.items() if pair["max_abs_diff"] is not None]
    if measured:
        band, name = max(measured)
        bands.append(("A/A", band, f"the largest difference between {name[:-2]} and {name} "
                                   f"over {len(aa[name]['speedup_pairs'])} speedup(s)"))
    return bands


# ---------------------------------------------------------------------------------------------
# report


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "–" if x is None else format(x, spec)


def write_outputs(out: Path, meta: dict[str, Any], records: list[dict[str, Any]],
                  results: dict[str, dict[str, Any]], rows: dict[str, dict[str, list[BatchRow]]]) -> str:
    """Write ``results.json``, ``rows.csv`` and ``summary.md``; returns the markdown."""
    (out / "results.json").write_text(json.dumps({"meta": meta, "modes": records, "suites": results}, indent=1,
                                                 default=str))
    with open(out / "rows.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["suite", "kernel", "mode", "stages", "statuses", "verdicts", "final_speedup", "stage_speedups",
                    "timing_devices", "attempts", "seconds", "error"])
        for suite, by_mode in rows.items():
            for mode, mrows in by_mode.items():
                for r in sorted(mrows, key=lambda r: r.kernel):
                    w.writerow([suite, r.kernel, mode, ";".join(r.stages),
                                ";".join(f"{s}={r.status.get(s, '')}" for s in r.stages),
                                ";".join(f"{s}={r.verdicts.get(s, '')}" for s in r.stages),
                                _fmt(r.final_speedup, ".4f"),
                                ";".join(f"{s}={_fmt(r.speedups.get(s), '.4f')}" for s in r.stages),
                                ";".join(r.timing_devices), r.attempts, f"{r.seconds:.1f}", r.error])
    md = ["# Batch benchmark: `xeforge batch` and `xeforge batch --ray`", "",
          f"- Device: **{meta['device']}**; host {meta['host']}, {meta['cpus']} CPUs",
          f"- Libraries: {meta['versions']}",
          f"- Run: {meta['date']}; settings: {meta['settings']}", ""]
    md += ["## Wall time and throughput", "",
           "Wall time of the whole command (for --ray: starting and stopping the local Ray instance included; "
           "its start alone is the next column).", "",
           "| suite | mode | kernels | errors | wall s | of it, Ray start s | throughput vs first mode | note |",
           "|---|---|---|---|---|---|---|---|"]
    for suite in results:
        recs = [r for r in records if r["suite"] == suite]
        first = recs[0] if recs else None
        for r in recs:
            n = len(rows[suite].get(r["mode"], []))
            errors = sum(1 for x in rows[suite].get(r["mode"], []) if x.error)
            ratio = (first["wall_s"] / r["wall_s"]) if first and r["wall_s"] and not (r["resumed"] or first["resumed"]) \
                else None
            note = "resumed after an interruption: wall time not comparable" if r["resumed"] else \
                (f"exit {r['returncode']}" if r["returncode"] not in (0, 1) else "")
            md.append(f"| {suite} | {r['mode']} | {n} | {errors} | {r['wall_s']:.0f} | "
                      f"{_fmt(r.get('ray_start_s'), '.1f')} | {_fmt(ratio, '.2f') + 'x' if ratio else '–'} | {note} |")
    md += ["", "## Same verdicts? Speedups within noise?", ""]
    for suite, res in results.items():
        bands = noise_bands(res["aa"])
        md.append(f"**{suite}** (reference: {res['comparison']['reference_mode']}; noise bands: "
                  + "; ".join(f"{n} ±{b:.1%}, {why}" for n, b, why in bands) + ")")
        md += ["", "| against | same verdicts | same statuses | speedup pairs | median diff | max diff | "
               "95 % intervals overlap | " + " | ".join(f"within {n} band" for n, _, _ in bands) + " |",
               "|---|---|---|---|---|---|---|" + "---|" * len(bands)]
        for other, pair in res["comparison"]["pairs"].items():
            within = ["–" if pair["max_abs_diff"] is None else ("yes" if pair["max_abs_diff"] <= b else "no")
                      for _, b, _ in bands]
            md.append(f"| {other} | {pair['same_verdicts']}/{pair['compared']} | {pair['same_statuses']}/"
                      f"{pair['compared']} | {len(pair['speedup_pairs'])} | {_fmt(pair['median_abs_diff'], '.1%')} | "
                      f"{_fmt(pair['max_abs_diff'], '.1%')} | "
                      f"{pair['intervals_overlapping']}/{pair['intervals_compared']} | " + " | ".join(within) + " |")
            for d in pair["differences"][:12]:
                md.append(f"  - {d['kernel']}: {d['what']} differ: "
                          + json.dumps({k: v for k, v in d.items() if k not in ('kernel', 'what')}, default=str)[:300])
        md.append("")
    md += ["## Where the timing ran", "",
           "| suite | mode | timing runs | devices | most at once on one device | most at once overall | "
           "timing overlapping another job on its GPU |", "|---|---|---|---|---|---|---|"]
    for suite, res in results.items():
        for mode, conc in res["timing"].items():
            md.append(f"| {suite} | {mode} | {conc['timing_runs']} | {', '.join(conc['devices']) or '–'} | "
                      f"{conc['most_at_once_on_one_device']} | {conc['most_at_once_overall']} | "
                      f"{conc['timing_overlapping_another_job_on_its_device']} |")
    md += ["", "## Speedups per kernel (final, cumulative)", ""]
    for suite, by_mode in rows.items():
        modes = list(by_mode)
        md += [f"**{suite}**", "", "| kernel | " + " | ".join(modes) + " | timed on (" + modes[-1] + ") |",
               "|---|" + "---|" * (len(modes) + 1)]
        maps = {m: {r.kernel: r for r in by_mode[m]} for m in modes}
        for k in sorted({k for m in maps.values() for k in m}):
            cells = []
            for m in modes:
                r = maps[m].get(k)
                cells.append("missing" if r is None else ("error" if r.error and r.final_speedup is None
                                                          else _fmt(r.final_speedup, ".3f") + ("x" if r.final_speedup else "")))
            last = maps[modes[-1]].get(k)
            md.append(f"| {k} | " + " | ".join(cells) + f" | {', '.join(last.timing_devices) if last else ''} |")
        md.append("")
    text = "\n".join(md) + "\n"
    (out / "summary.md").write_text(text)
    return text


def _device_meta(device: str | None) -> dict[str, Any]:
    from xeforge_core.devices import detect_device

    try:
        dev = detect_device(device)
        fp = dev.fingerprint
        versions = ", ".join(f"{k} {v}" for k, v in (fp.get("versions") or {}).items())
        return {"device": dev.label, "versions": versions, "driver": fp.get("driver_version")}
    except Exception as exc:  # noqa: BLE001 - the batch itself will say more
        return {"device": f"unknown ({exc})", "versions": "", "driver": None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="output directory (created; reruns continue in it)")
    p.add_argument("--work", type=Path, default=None,
                   help="sessions, verdict caches and problem copies (default: <tmp>/xeforge-bench-batch/<out name>)")
    p.add_argument("--cases", type=Path, default=None, help="directory of Xe-Forge cases (.py + .yaml)")
    p.add_argument("--samples", type=Path, default=ROOT / "sample_kernels", help="the samples (default: ours)")
    p.add_argument("--suite", choices=("all", "samples", "cases"), default="all")
    p.add_argument("--modes", default="sequential,ray",
                   help=f"comma-separated, first is the reference (from {', '.join(MODES)})")
    p.add_argument("--only", action="append", default=[], help="kernels whose name contains this (repeatable)")
    p.add_argument("--device", default=None, help="--device for the batches (cuda, xpu, cpu; default: auto)")
    p.add_argument("--stages", default=None, help="--stages for the batches (default: each kernel's plan)")
    p.add_argument("--iterations", type=int, default=1, help="CoVeR iterations per stage (default: 1)")
    p.add_argument("--seeds", type=int, default=1, help="correctness seeds (default: 1)")
    p.add_argument("--no-odd-size", action="store_true", help="no odd-size copies of the variants")
    p.add_argument("--timeout", type=float, default=300.0, help="per verification job, seconds")
    p.add_argument("--ray-address", default=None, help="join this Ray cluster instead of a local instance")
    p.add_argument("--ray-gpus", type=int, default=None, help="GPUs of the local Ray instance (default: detected)")
    p.add_argument("--preflight-only", action="store_true",
                   help="only check that Ray starts here and pins GPUs (preflight.json), then stop")
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        p.error(f"unknown mode(s) {bad}: use {', '.join(MODES)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = (args.work or Path(tempfile.gettempdir()) / "xeforge-bench-batch" / out.name).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if any(m.startswith("ray") for m in modes) or args.preflight_only:
        pre = ray_preflight(out, args)
        print(f"Ray preflight: {json.dumps(pre)}", file=sys.stderr, flush=True)
        if args.device in ("cuda", "xpu") and not pre["resources"].get("GPU"):
            print(f"Ray sees no GPU here but --device {args.device} was asked for: give --ray-gpus N",
                  file=sys.stderr)
            return 2
        if args.preflight_only:
            return 0
    suites: dict[str, Path] = {}
    if args.suite in ("all", "samples"):
        suites["samples"] = args.samples
    if args.suite in ("all", "cases"):
        if args.cases is None or not args.cases.is_dir():
            if args.suite == "cases":
                p.error("--cases DIR is needed for --suite cases")
            print("no --cases directory: the samples only", file=sys.stderr)
        else:
            suites["cases"] = args.cases
    meta = {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": os.uname().nodename,
            "cpus": os.cpu_count(), **_device_meta(args.device),
            "settings": (f"modes {', '.join(modes)}; iterations {args.iterations}, seeds {args.seeds}, "
                         f"stages {args.stages or 'each plan'}, odd sizes {'off' if args.no_odd_size else 'on'}, "
                         f"device {args.device or 'auto'}"
                         + (f", Ray cluster {args.ray_address}" if args.ray_address else ", local Ray instance"))}
    records, results, rows = [], {}, {}
    for suite, source in suites.items():
        problems = work / suite / "problems"
        names = problem_set(source, problems, args.only)
        if not names:
            print(f"[{suite}] no kernel matches {args.only}", file=sys.stderr)
            continue
        print(f"[{suite}] {len(names)} kernel(s): {', '.join(names)}", file=sys.stderr, flush=True)
        for mode in modes:
            records.append(run_mode(problems, out, work, suite, mode, args))
        rows[suite] = {m: read_summary(mode_dir(out, suite, m) / "summary.csv") for m in modes}
        results[suite] = {"kernels": names, "comparison": compare(rows[suite]), "aa": aa_pairs(rows[suite]),
                          "timing": {m: timing_concurrency(r) for m, r in rows[suite].items()}}
    text = write_outputs(out, meta, records, results, rows)
    print(text)
    return 0 if all(r["returncode"] in (0, 1) for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
