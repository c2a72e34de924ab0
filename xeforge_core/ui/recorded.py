"""Results measured on another machine, read for display: what was measured, where, when and
with which library versions. Plain data (no Streamlit); nothing here measures anything.

Formats recognised (by content, not by file name):

* **pipeline benchmark** ``results.json`` (``benchmarks/bench_pipeline.py``): ``started``,
  ``device``, ``versions``, ``shapes`` (one row per problem: baseline, rules-engine and PyTorch
  eager times in µs, speedups, TFLOP/s, roofline fractions, memory or compute bound, arithmetic
  intensity), ``stages``, ``trajectory`` (the Flash
  Attention teaching steps per shape), ``summary``, ``parts`` (merged runs, each with its device
  and start time).
* **Flash Attention benchmark** ``results.json`` (``benchmarks/bench_flash_attention.py``):
  ``started``, ``device``, ``versions``, ``settings`` and ``rows``: every trajectory step on every
  benchmark shape, its time and PyTorch's ``scaled_dot_product_attention`` time in µs, TFLOP/s,
  its largest error against SDPA, its ratio to the step before and whether it is slower beyond
  the shape's noise; ``verification``: each step's verdict from the product's verifier at every
  variant (runs before that field existed checked outputs at the benchmark shapes only, and the
  verdict column says so).
* **batch summary** CSV (``xeforge batch --out summary.csv``): one row per kernel with ``device``,
  per stage its status, verdict and speedup, ``final_speedup``, ``speed_measured``, ``error``. The
  CSV itself records the device id only; when a Markdown note with the same stem lies beside it
  (``docs/measured/h200-optimize-cases.md`` for ``h200-optimize-cases.csv``), its ``Device:`` and
  ``Date:`` lines are read, and the provenance says which fields came from there.
* **session report** JSON (``report.json``, exported from History or ``Session.export``):
  ``format``, ``device`` (label and fingerprint with its library versions), ``created``,
  ``versions`` (per commit: stage, verdict, speedup, TFLOP/s, times in µs).

Every result carries a :class:`Provenance`; a field the file does not record is listed in
``Provenance.missing`` rather than guessed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xeforge_core import units
from xeforge_core.errors import XeForgeError

#: The results recorded on GPU machines that ship with the repository (``docs/measured/``).
MEASURED_DIR = Path(__file__).resolve().parents[2] / "docs" / "measured"

#: Largest results file opened (bytes); the recorded pipeline results are about 60 KiB.
MAX_RESULTS_BYTES = 8 * 2**20


class RecordedError(XeForgeError, ValueError):
    """A results file that cannot be read, or is none of the recognised formats."""


@dataclass
class Provenance:
    """Where and when results were measured. ``versions`` maps library names to versions;
    ``missing`` names what the file does not record; ``notes`` are extra facts (merged runs,
    settings, which fields came from a sibling note)."""

    kind: str
    source: str
    device: str = ""
    date: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    command: str = ""
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def banner(self) -> str:
        """One paragraph marking the results as recorded, e.g. "Recorded on NVIDIA H200
        (cuda:1), 2026-11-30 07:50; python 3.12.3, torch 2.11.0, ... Not measured on this
        machine." """
        parts = [f"Recorded on {self.device or 'an unrecorded device'}"]
        if self.date:
            parts[0] += f", {self.date}"
        if self.versions:
            parts.append(", ".join(f"{k} {v}" for k, v in self.versions.items()))
        text = "; ".join(parts) + f" ({self.kind}, {Path(self.source).name})."
        if self.missing:
            text += " Not recorded in the file: " + ", ".join(self.missing) + "."
        return text + " These numbers were not measured on this machine."


@dataclass
class RecordedResults:
    """One results file: its provenance, a summary (``{label: text}``), per-problem rows, per-stage
    rows and the Flash Attention trajectory rows (plain dicts with numbers; the pages format
    them with :mod:`xeforge_core.units`)."""

    title: str
    provenance: Provenance
    summary: dict[str, str] = field(default_factory=dict)
    problems: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    trajectory_by_step: dict[int, float | None] = field(default_factory=dict)
    #: the knowledge-base hardware profile id of the device it was measured on ("" unknown)
    profile: str = ""

    @property
    def trajectory_by_title(self) -> dict[str, float]:
        """Geometric mean over the recorded shapes of each trajectory step's speedup over the
        naive kernel, by the step's title (the trajectory's steps may have changed since it was
        recorded: a live step gets a recorded number only under the same title)."""
        by: dict[str, list[float]] = {}
        for r in self.trajectory:
            x = _num(r.get("speedup"))
            if x and r.get("title"):
                by.setdefault(str(r["title"]), []).append(x)
        return {t: g for t, xs in by.items() if (g := _geomean(xs)) is not None}


def shipped_results() -> dict[str, Path]:
    """``{label: path}`` of the results recorded on GPU machines under ``docs/measured/``."""
    out: dict[str, Path] = {}
    pipeline = MEASURED_DIR / "h200-pipeline" / "results.json"
    if pipeline.is_file():
        out["NVIDIA H200 · pipeline benchmark (samples, Flash Attention trajectory, Xe-Forge cases)"] = pipeline
    flash = MEASURED_DIR / "h200-flash-attention" / "results.json"
    if flash.is_file():
        out["NVIDIA H200 · Flash Attention trajectory against SDPA (every step, every shape)"] = flash
    cases = MEASURED_DIR / "h200-optimize-cases.csv"
    if cases.is_file():
        out["NVIDIA H200 · xeforge batch over the Xe-Forge cases (earlier run)"] = cases
    return out


def _num(value: Any) -> float | None:
    if value in (None, "", "-", "None"):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def load_results(data: bytes | str | Path, *, name: str | None = None) -> RecordedResults:
    """Read a results file (a path, or its bytes/text with ``name``). Raises
    :class:`RecordedError` naming the file and what is wrong."""
    if isinstance(data, Path):
        name = str(data)
        try:
            data = data.read_bytes()
        except OSError as exc:
            raise RecordedError(f"cannot read the results file: {exc}", file=name) from None
    name = name or "results"
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_RESULTS_BYTES:
        raise RecordedError(f"the file is {units.size_exact(len(raw))}; the limit is "
                            f"{units.size_exact(MAX_RESULTS_BYTES)}", file=name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RecordedError("not UTF-8 text: a results file is JSON or CSV", file=name) from None
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordedError(f"not valid JSON: {exc.msg}", file=name, line=exc.lineno) from None
        if isinstance(obj, dict) and "shapes" in obj and "device" in obj:
            return _pipeline(obj, name)
        if isinstance(obj, dict) and "rows" in obj and "device" in obj and "steps" in (obj.get("settings") or {}):
            return _flash_attention(obj, name)
        if isinstance(obj, dict) and "format" in obj and isinstance(obj.get("versions"), list):
            return _session_report(obj, name)
        keys = ", ".join(list(obj)[:8]) if isinstance(obj, dict) else type(obj).__name__
        raise RecordedError("a JSON file that is none of a pipeline or Flash Attention benchmark results.json "
                            f"and a session report.json (its keys: {keys})", file=name)
    first = stripped.splitlines()[0] if stripped else ""
    if "kernel" in first.split(",") and "final_speedup" in first:
        return _batch_csv(text, name)
    raise RecordedError("not a results file: expected a pipeline benchmark results.json, an xeforge batch "
                        "summary CSV (columns kernel, ..., final_speedup) or a session report.json", file=name)


def _benchmark_provenance(obj: dict[str, Any], name: str, kind: str, command: str) -> Provenance:
    """The provenance of a benchmark script's results.json: its ``device`` (name, type, index),
    ``started`` and ``versions``; what the file lacks is listed as missing."""
    dev = obj.get("device") or {}
    device = str(dev.get("name") or dev.get("type") or "")
    if dev.get("type") and dev.get("type") != "cpu":
        device += f" ({dev.get('type')}:{dev.get('index', 0)})"
    prov = Provenance(kind=kind, source=name, device=device, date=str(obj.get("started") or ""),
                      versions={k: str(v) for k, v in (obj.get("versions") or {}).items() if v}, command=command)
    for key in ("device", "started", "versions"):
        if not obj.get(key):
            prov.missing.append({"started": "date"}.get(key, key))
    return prov


def _pipeline(obj: dict[str, Any], name: str) -> RecordedResults:
    settings = obj.get("settings") or {}
    prov = _benchmark_provenance(obj, name, "pipeline benchmark",
                                 "benchmarks/bench_pipeline.py" + (" --quick" if settings.get("quick") else ""))
    device = prov.device
    parts = obj.get("parts") or []
    if len(parts) > 1:
        prov.notes.append(f"{len(parts)} runs merged: " + "; ".join(
            f"{p.get('started')} on {(p.get('settings') or {}).get('device', '?')}, "
            f"{units.plural(len(p.get('problems') or []), 'problem')}" for p in parts))
    if settings:
        prov.notes.append(f"settings: {units.plural(int(settings.get('iterations') or 1), 'CoVeR iteration')} per "
                          f"stage, {units.plural(int(settings.get('seeds') or 1), 'seed')}, "
                          f"{settings.get('warmup_ms')} ms warm-up and {settings.get('rep_ms')} ms of trials per "
                          "callable")
    if not obj.get("complete", True):
        prov.notes.append("the run did not complete: some problems are missing")
    profile = str((obj.get("device") or {}).get("profile") or "")
    problems = []
    for r in obj.get("shapes") or []:
        problems.append({
            "kind": r.get("kind"), "problem": r.get("problem"), "variant": r.get("variant"), "dims": r.get("dims"),
            "baseline_us": _num(r.get("baseline_us")), "rules_us": _num(r.get("rules_us")),
            "eager_us": _num(r.get("eager_us")), "speedup": _num(r.get("speedup_rules")),
            "vs_eager": _num(r.get("rules_vs_eager")), "tflops_baseline": _num(r.get("tflops_baseline")),
            "tflops": _num(r.get("tflops_rules")), "roofline": _num(r.get("roofline_rules")),
            "bound": r.get("bound") or "", "intensity": _recorded_intensity(r, profile),
            "stages_applied": r.get("stages_applied") or "", "note": r.get("note") or ""})
    summary_in = obj.get("summary") or {}
    summary = {}
    if summary_in.get("rules_over_baseline"):
        count = units.plural(int(summary_in.get('problems_timed') or len(problems)), 'problem')
        summary[f"rules engine over the baselines (geometric mean, {count})"] = units.speedup(
            summary_in["rules_over_baseline"])
    if summary_in.get("rules_over_baseline_cases"):
        summary["Xe-Forge cases"] = units.speedup(summary_in["rules_over_baseline_cases"])
    if summary_in.get("rules_over_baseline_samples"):
        summary["samples"] = units.speedup(summary_in["rules_over_baseline_samples"])
    if summary_in.get("rules_vs_eager"):
        summary["against PyTorch eager (samples)"] = units.speedup(summary_in["rules_vs_eager"])
    if obj.get("seconds"):
        summary["benchmark wall time"] = units.seconds(obj["seconds"])
    by_step = {int(k): _num(v) for k, v in (summary_in.get("trajectory_geomean_by_step") or {}).items()}
    return RecordedResults(
        title=f"Pipeline benchmark on {device or 'a GPU'}", provenance=prov, summary=summary, problems=problems,
        stages=list(obj.get("stages") or []), trajectory=list(obj.get("trajectory") or []),
        trajectory_by_step=by_step, profile=profile)


def _recorded_intensity(row: dict[str, Any], profile_id: str) -> float | None:
    """A pipeline row's arithmetic intensity (FLOP/byte): as recorded, else (files recorded
    before the field existed) derived exactly for a memory-bound row, whose attainable TFLOP/s
    (measured TFLOP/s over its roofline fraction) is bandwidth x intensity, with the bandwidth
    of the profile it was measured against. A compute-bound row without it has none: its
    attainable is the peak, which says nothing of its intensity."""
    recorded = _num(row.get("intensity"))
    if recorded:
        return recorded
    tflops, fraction = _num(row.get("tflops_rules")), _num(row.get("roofline_rules"))
    if row.get("bound") != "memory" or not tflops or not fraction or not profile_id:
        return None
    from xeforge_core.knowledge import load_knowledge

    profile = load_knowledge().profiles.get(profile_id)
    bw = profile.bandwidth_gbps if profile is not None else None
    return tflops / fraction * 1e3 / bw if bw else None


def _flash_attention(obj: dict[str, Any], name: str) -> RecordedResults:
    settings = obj.get("settings") or {}
    atol = _num(settings.get("atol"))
    prov = _benchmark_provenance(obj, name, "Flash Attention benchmark", "benchmarks/bench_flash_attention.py")
    device = prov.device
    verification = {int(v["step"]): v for v in obj.get("verification") or [] if isinstance(v, dict) and "step" in v}
    timing = (f"timing: median of {settings.get('rounds')} interleaved rounds of do_bench medians "
              f"({settings.get('warmup')} ms warm-up, {settings.get('rep')} ms)")
    if verification:
        variants = settings.get("variants") or []
        prov.notes.append(f"{timing}; every step verified by the product's verifier at every variant of its spec "
                          f"({', '.join(variants)}) before it was timed; a step slower than the one before counts "
                          "only beyond the shape's noise (SDPA's A/A deviation and round-to-round spread)")
    else:
        prov.notes.append(f"{timing}; this run checked each step's output against scaled_dot_product_attention at the "
                          f"benchmark shapes only (to {settings.get('atol')}): it did not verify the steps at their "
                          "ci shapes")
    rows = [r for r in obj.get("rows") or [] if isinstance(r, dict)]
    naive = {r.get("variant"): _num(r.get("us")) for r in rows if r.get("step") == 0}
    trajectory = []
    for r in rows:
        us, base = _num(r.get("us")), naive.get(r.get("variant"))
        err = _num(r.get("max_err"))
        v = verification.get(int(r.get("step") or 0))
        if v is not None:
            verdict = "verified ok" if v.get("kind") == "ok" else f"{v.get('kind')}: {str(v.get('reason') or '')[:120]}"
            if r.get("step") == 0:
                verdict = "baseline, " + verdict
        elif r.get("step") == 0:
            verdict = "baseline"
        else:
            verdict = ("wrong" if err is not None and atol is not None and err > atol
                       else "matched SDPA here; ci shapes not verified")
        trajectory.append({
            "step": r.get("step"), "title": r.get("title"), "stage": r.get("stage"), "variant": r.get("variant"),
            "dims": r.get("dims"), "step_us": us, "naive_us": base, "causal": bool(r.get("causal")),
            "speedup": base / us if us and base and not r.get("causal") and r.get("step") != 0 else None,
            "tflops": _num(r.get("tflops")), "roofline": _num(r.get("roofline")), "vs_eager": _num(r.get("vs_sdpa")),
            "vs_previous": _num(r.get("vs_previous")), "noise": _num(r.get("noise")), "slower": bool(r.get("slower")),
            "verdict": verdict,
            "note": r.get("note") or (f"max abs error {err:.2g} vs SDPA" if err is not None else "")})
    by: dict[int, list[float]] = {}
    for t in trajectory:
        if t["speedup"]:
            by.setdefault(int(t["step"]), []).append(t["speedup"])
    by_step = {k: _geomean(v) for k, v in sorted(by.items())}
    summary = {}
    if verification:
        ok = sum(v.get("kind") == "ok" for v in verification.values())
        summary["steps verified ok at every variant"] = f"{ok} of {len(verification)}"
        failed = sorted(i for i, v in verification.items() if v.get("kind") != "ok")
        if failed:
            summary["steps not verified on this device (never timed)"] = ", ".join(
                f"{i} ({verification[i].get('kind')})" for i in failed)
    # the last non-causal step that has a time: a step that was not verified has none
    last = max((t["step"] for t in trajectory if not t["causal"] and t["step_us"]), default=None)
    vs = [t["vs_eager"] for t in trajectory if t["step"] == last and t["vs_eager"]]
    if vs:
        summary[f"step {last} vs SDPA (range over {units.plural(len(vs), 'shape')})"] = (
            f"{units.speedup(min(vs))}-{units.speedup(max(vs))}")
    if last is not None and by_step.get(last):
        summary[f"step {last} over the naive kernel (geometric mean)"] = units.speedup(by_step[last])
    return RecordedResults(title=f"Flash Attention trajectory on {device or 'a GPU'}", provenance=prov,
                           summary=summary, trajectory=trajectory, trajectory_by_step=by_step)


_MD_FIELD = re.compile(r"^\s*[-*]\s*(Device|Date)\s*:\s*(.+?)\s*$", re.MULTILINE)


def _batch_csv(text: str, name: str) -> RecordedResults:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        raise RecordedError("the summary CSV has a header but no rows", file=name)
    devices = sorted({r.get("device") or "" for r in rows} - {""})
    prov = Provenance(kind="xeforge batch summary", source=name, device=", ".join(devices),
                      command="xeforge batch DIR --out summary.csv")
    note = Path(name).with_suffix(".md")
    found = dict(_MD_FIELD.findall(note.read_text(encoding="utf-8"))) if note.is_file() else {}
    if found.get("Device"):
        prov.device = found["Device"].split(";")[0].strip()
        versions = found["Device"].split(";", 1)[1] if ";" in found["Device"] else ""
        for m in re.finditer(r"(python|torch|triton|numpy)\s+([\w.+-]+)", versions):
            prov.versions[m.group(1)] = m.group(2)
    if found.get("Date"):
        prov.date = found["Date"]
    if found:
        prov.notes.append(f"device, date and versions from {note.name}, the note beside the CSV")
    if not prov.date:
        prov.missing.append("date")
    if not prov.versions:
        prov.missing.append("library versions")
    stage_cols = [c[: -len("_verdict")] for c in rows[0] if c.endswith("_verdict")]
    problems = []
    for r in rows:
        stages = {s: (r.get(s) or "") + (f" {units.speedup(_num(r.get(f'{s}_speedup')))}"
                                         if _num(r.get(f"{s}_speedup")) else "") for s in stage_cols if r.get(s)}
        measured = str(r.get("speed_measured", "")).lower() == "true"
        problems.append({"kind": "kernel", "problem": r.get("kernel"), "device": r.get("device"),
                         "speedup": _num(r.get("final_speedup")) if measured else None,
                         "speed_measured": measured, "call": r.get("final_call") or "", "stages_applied": "; ".join(f"{s}: {v.strip()}"
                                                                                 for s, v in stages.items()),
                         "note": r.get("error") or "", "seconds": _num(r.get("seconds"))})
    timed = [p["speedup"] for p in problems if p["speedup"]]
    summary = {"kernels": units.plural(len(problems), "kernel")}
    if timed:
        summary[f"final speedup (geometric mean over {units.plural(len(timed), 'timed kernel')})"] = units.speedup(
            _geomean(timed))
    return RecordedResults(title=f"xeforge batch on {prov.device or 'a GPU'}", provenance=prov, summary=summary,
                           problems=problems)


def _session_report(obj: dict[str, Any], name: str) -> RecordedResults:
    dev = obj.get("device") or {}
    fp = dev.get("fingerprint") or {}
    versions = fp.get("versions") or (fp.get("fingerprint") or {}).get("versions") or {}
    prov = Provenance(kind="session report", source=name, device=str(dev.get("label") or fp.get("name") or ""),
                      date=str(obj.get("created") or obj.get("generated") or ""),
                      versions={k: str(v) for k, v in versions.items()
                                if v and k in ("python", "torch", "triton", "numpy")},
                      command="exported from History (report.json)")
    if not prov.versions:
        prov.missing.append("library versions")
    if not obj.get("speed_measured"):
        prov.notes.append("this session measured no speed (its device was Triton's interpreter or nothing was timed)")
    problems = []
    for v in obj.get("versions") or []:
        problems.append({"kind": v.get("kind"), "problem": f"#{v.get('index')} {v.get('stage') or v.get('kind')}",
                         "verdict": v.get("verdict"), "speedup": _num(v.get("speedup")),
                         "cumulative": _num(v.get("cumulative_speedup")), "rules_us": _num(v.get("time_us")),
                         "baseline_us": _num(v.get("parent_time_us")), "tflops": _num(v.get("tflops")),
                         "gbps": _num(v.get("gbps")), "roofline": _num(v.get("roofline_fraction")),
                         "eager_us": _num(v.get("reference_time_us")), "stages_applied": v.get("engine") or "",
                         "note": v.get("summary") or ""})
    summary = {"versions": units.plural(len(problems), "version")}
    if obj.get("cumulative_speedup"):
        summary["cumulative speedup over the baseline"] = units.speedup(obj["cumulative_speedup"])
    return RecordedResults(title=f"Session {obj.get('session')} ({obj.get('problem')}) on {prov.device or '?'}",
                           provenance=prov, summary=summary, problems=problems, stages=list(obj.get("stages") or []))


def problem_table(results: RecordedResults) -> list[dict[str, str]]:
    """The per-problem rows with units (µs, TFLOP/s, %, x), for a table."""
    out = []
    for p in results.problems:
        row = {"problem": str(p.get("problem") or "")}
        if p.get("kind") in ("sample", "case"):
            row["kind"] = str(p["kind"])
        if p.get("variant"):
            row["shape"] = f"{p.get('variant')}: {p.get('dims') or ''}".strip()
        if p.get("verdict") is not None:
            row["verdict"] = str(p.get("verdict") or "")
        for key, label in (("baseline_us", "baseline"), ("rules_us", "optimized"), ("eager_us", "PyTorch eager")):
            if key in p:
                row[label] = units.duration_us(p.get(key))
        row["speedup"] = units.speedup(p.get("speedup")) if p.get("speedup") else (
            "not measured" if p.get("speed_measured") is False else units.MISSING)
        if p.get("call"):
            row["call"] = str(p["call"])
        if "vs_eager" in p:
            row["vs eager"] = units.speedup(p.get("vs_eager"))
        if "tflops" in p:
            row["TFLOP/s"] = units.tflops(p.get("tflops"))
        if "roofline" in p:
            row["roofline"] = units.percent(p.get("roofline"))
        row["stages"] = str(p.get("stages_applied") or "")
        row["note"] = str(p.get("note") or "")
        out.append(row)
    return out


def trajectory_table(results: RecordedResults) -> list[dict[str, str]]:
    """The Flash Attention trajectory rows with units: step, shape, time, speedup over the naive
    kernel, TFLOP/s, against PyTorch's scaled_dot_product_attention."""
    out = []
    for r in results.trajectory:
        out.append({
            "step": str(r.get("step")), "title": str(r.get("title") or ""),
            "shape": f"{r.get('variant')}: {r.get('dims')}", "time": units.duration_us(_num(r.get("step_us"))),
            "naive kernel": units.duration_us(_num(r.get("naive_us"))),
            "speedup over naive": units.speedup(_num(r.get("speedup"))) if r.get("speedup") else (
                "not comparable (causal)" if r.get("causal") else units.MISSING),
            "TFLOP/s": units.tflops(_num(r.get("tflops"))),
            "vs sdpa": units.speedup(_num(r.get("vs_eager"))),
            "vs previous step": (units.speedup(_num(r.get("vs_previous"))) + (" (slower beyond noise)" if r.get("slower")
                                                                               else "")) if r.get("vs_previous") else "",
            "verdict": str(r.get("verdict") or ""), "note": str(r.get("note") or "")})
    return out
