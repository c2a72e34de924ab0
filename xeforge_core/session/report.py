"""Reports of an optimization session: per-stage verdicts and speedups, per-version timings,
the cumulative speedup and the device, as JSON (for tools and the UI) and Markdown (for people).

Speedups are the verified ones recorded in the history: each version's speedup is over the
version before it (that is what its verification compared), a stage's speedup is the product
over the versions committed in it, and the cumulative speedup is the product from the baseline
(after a portability step, from the ported version: the original cannot run on the device).
Anything measured on cpu (Triton's interpreter) is "not measured": no speed claim is made there.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any, Protocol

from xeforge_core.session.records import Version, device_label, format_speedup
from xeforge_core.verdict import combine_speedups, speedup_call
from xeforge_core.vocab.stages import ALL_STAGE_IDS, get_stage

REPORT_FORMAT = 1


class SessionView(Protocol):
    """What a report reads of a session (``xeforge_core.session.session.Session`` has all of
    it); the report is written from these alone, so the session can export its own reports."""

    path: Path

    @property
    def name(self) -> str: ...
    @property
    def info(self) -> dict[str, Any]: ...
    @property
    def target(self) -> Any: ...
    @property
    def device(self) -> dict[str, Any]: ...
    @property
    def kernel_file(self) -> str: ...
    @property
    def plan(self) -> list[str]: ...
    @property
    def stages(self) -> dict[str, dict[str, Any]]: ...
    def history(self) -> list[Version]: ...
    def candidates(self, stage: str | None = None, status: str | None = None) -> list[Any]: ...
    def problem(self, version: str | int | None = "head") -> Any: ...
    def verdict_of(self, version: str | int | None = "head") -> Any: ...


def _verdict_of(session: SessionView, version: Version) -> Any:
    """The verdict a candidate version was committed with, ``None`` for the baseline or where
    none can be read."""
    if not version.candidate:
        return None
    try:
        return session.verdict_of(version.sha)
    except Exception:
        return None


def _perf_of(verdict: Any) -> dict[str, Any]:
    """TFLOP/s, GB/s, times (µs) and roofline fraction of a version from its ``verdict``
    (geometric means over the timed variants), or ``{}`` when it has no timing."""
    if verdict is None or not verdict.performance:
        return {}

    def gmean(values: list[float]) -> float | None:
        values = [v for v in values if v is not None and v > 0]
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))

    perf = verdict.performance
    base_tflops = [p.flop / (p.baseline.median_us * 1e-6) / 1e12 for p in perf
                   if p.flop and p.baseline and p.baseline.median_us]
    return {
        "variants": [p.variant for p in perf],
        "tflops": gmean([p.tflops for p in perf]),
        "gbps": gmean([p.gbps for p in perf]),
        "roofline_fraction": gmean([p.roofline_fraction for p in perf]),
        "time_us": gmean([p.candidate.median_us for p in perf]),
        "parent_time_us": gmean([p.baseline.median_us for p in perf]),
        "parent_tflops": gmean(base_tflops),
        "reference_time_us": gmean([p.reference.median_us for p in perf if p.reference]),
        "suspect": "; ".join(p.suspect for p in perf if p.suspect),
        "speedup_interval": list(verdict.speedup_interval) if verdict.speedup_interval else None,
    }


def _precision_of(verdict: Any) -> str | None:
    """The precision a version's ``verdict`` held it to (``Verdict.precision["applied"]``:
    ``float32, allowing approx-math (baseline)``), ``None`` where there is no verdict or record."""
    return ((getattr(verdict, "precision", None) or {}).get("applied") or None) if verdict is not None else None


def _preparatory(stage: str) -> bool:
    """A preparatory stage (portability): its version is the baseline of speedups, not one."""
    return stage in ALL_STAGE_IDS and get_stage(stage).preparatory


def _call(speedups: list[tuple[float | None, list[float] | None]]) -> dict[str, Any]:
    """The product of versions' speedups with its interval and the one rule's call on it
    (``verdict.speedup_call``): ``{"speedup_low", "speedup_high", "call"}``."""
    parts = [(s, *(iv if iv else (None, None))) for s, iv in speedups]
    combined = combine_speedups(parts) if parts and all(s is not None for s, _ in speedups) else None  # type: ignore[arg-type]
    if combined is None:
        return {"speedup_low": None, "speedup_high": None, "call": speedup_call(None).text}
    call = speedup_call(*combined)
    return {"speedup_low": combined[1], "speedup_high": combined[2], "call": call.text}


def _product(values: list[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    out = 1.0
    for v in values:
        out *= v  # type: ignore[operator]
    return out


def _cumulative_call(cumulative: float | None, stages: list[dict[str, Any]]) -> str | None:
    """The one rule's call on the cumulative speedup: the stages' intervals combined as a
    product (``verdict.combine_speedups``), their relative width applied to ``cumulative``."""
    if cumulative is None:
        return None
    parts = [(st["speedup"], st.get("speedup_low"), st.get("speedup_high")) for st in stages
             if st["speedup"] is not None and not _preparatory(st["stage"])]
    combined = combine_speedups(parts) if parts else None
    if combined is None or combined[1] is None or combined[2] is None:
        return speedup_call(cumulative).text if parts else None
    scale = cumulative / combined[0]
    return speedup_call(cumulative, combined[1] * scale, combined[2] * scale).text


def json_report(session: SessionView) -> dict[str, Any]:
    """The session report as a JSON-able dict.

    Keys: ``format``, ``problem``, ``session``, ``path``, ``target`` (``Target.to_dict()``:
    profile, family, arch, name, chosen), ``device`` (label and
    fingerprint), ``created``, ``generated``, ``baseline``/``final`` (shas), ``plan``,
    ``stages`` (per stage: ``status``, ``reason``, ``versions``, ``speedup``, ``verdicts``,
    ``attempts``, ``candidates``), ``versions`` (per branch commit: kind, stage, engine,
    model, verdict, speedup, cumulative speedup, TFLOP/s, GB/s, times in µs),
    ``cumulative_speedup`` (``None``: not measured), ``speed_measured``, ``candidates`` (count
    per status). Each speedup comes with ``call``, the text of ``verdict.speedup_call`` (faster,
    slower or no measurable difference, from the verdicts' confidence intervals); stages also
    give the product's ``speedup_low``/``speedup_high``, and ``cumulative_call`` is the call on
    ``cumulative_speedup``.
    """
    history = session.history()
    stages_state = session.stages
    versions = []
    for v in history:
        verdict = _verdict_of(session, v)  # read once: the timings and the precision both come from it
        perf = _perf_of(verdict)
        versions.append({
            "index": v.index, "sha": v.sha, "short": v.short, "kind": v.kind, "stage": v.stage,
            "engine": v.engine, "model": v.model, "verdict": v.verdict, "speedup": v.speedup,
            "cumulative_speedup": v.cumulative_speedup, "device": v.device, "iteration": v.iteration,
            "candidate": v.candidate, "summary": v.summary, "note": v.trailers.get("Note"),
            "precision": _precision_of(verdict),
            "time": _dt.datetime.fromtimestamp(v.time, tz=_dt.timezone.utc).isoformat(),
            **{k: perf.get(k) for k in ("tflops", "gbps", "roofline_fraction", "time_us", "parent_time_us",
                                        "parent_tflops", "reference_time_us", "speedup_interval")},
            **(_call([(v.speedup, perf.get("speedup_interval"))]) if v.index else {"call": None}),
        })
    cand_records = session.candidates()
    stage_ids = list(session.plan)
    planned = set(stage_ids)
    before = 0  # steps whose versions came before any planned stage's (portability, a first version) lead
    seen_planned = False
    for v in history[1:]:
        if v.kind == "restore" or not v.stage:
            continue
        if v.stage in planned:
            seen_planned = True
        elif v.stage not in stage_ids:
            if _preparatory(v.stage) or not seen_planned:
                stage_ids.insert(before, v.stage)
                before += 1
            else:
                stage_ids.append(v.stage)
    # a step before the plan's stages that left no version (a first version that failed, a
    # portability step with nothing kept) still has its row, first
    for sid in reversed([s for s in stages_state if s not in stage_ids]):
        stage_ids.insert(0, sid)
    stages = []
    for sid in stage_ids:
        entry = stages_state.get(sid, {})
        in_stage = [v for v in history[1:] if v.stage == sid and v.kind != "restore"]
        cands = [c for c in cand_records if c.stage == sid]
        outcome = entry.get("outcome") or {}
        speed = None if _preparatory(sid) else _product([v.speedup for v in in_stage]) if in_stage else None
        call = _call([(v.speedup, versions[v.index].get("speedup_interval")) for v in in_stage]) \
            if speed is not None else {"speedup_low": None, "speedup_high": None, "call": None}
        status = entry.get("status") or ("done" if in_stage else "pending")
        stages.append({
            "stage": sid,
            "status": status,
            "reason": entry.get("reason") or "",
            "versions": [v.sha for v in in_stage],
            "engines": sorted({v.engine for v in in_stage if v.engine}),
            "speedup": speed,
            **call,
            "speed_measured": speed is not None,
            "verdicts": [v.verdict for v in in_stage],
            "iterations": outcome.get("iterations") or (max((c.iteration or 0 for c in cands), default=0) or None),
            "candidates": {s: sum(1 for c in cands if c.status == s)
                           for s in ("pending", "approved", "rejected", "superseded")},
            "attempts": [{"candidate": c.id, "iteration": c.iteration, "engine": c.engine, "status": c.status,
                          "verdict": c.verdict.kind.value if c.verdict else None,
                          "speedup": c.verdict.speedup if c.verdict else None,
                          "call": c.verdict.speed_call.text if c.verdict else None,
                          "reason": c.verdict.reason if c.verdict else ""} for c in cands],
            "tflops": next((versions[v.index]["tflops"] for v in reversed(in_stage)
                            if versions[v.index]["tflops"] is not None), None),
        })
    head = history[-1]
    counts: dict[str, int] = {}
    for c in cand_records:
        counts[c.status] = counts.get(c.status, 0) + 1
    info = session.info
    speed_measured = any(v["speedup"] is not None for v in versions)
    cumulative = (head.cumulative_speedup if len(history) > 1 else 1.0) if speed_measured else None
    if not speed_measured:
        for v in versions:  # the baseline's 1.0 is a definition, not a measurement: claim nothing
            v["cumulative_speedup"] = None
    try:
        warnings = list(session.problem("head").warnings)
    except Exception as exc:  # a report must not fail on a spec that no longer loads
        warnings = [f"the problem could not be loaded for its warnings: {exc}"]
    return {
        "format": REPORT_FORMAT,
        "problem": info.get("problem"),
        "session": session.name,
        "path": str(session.path),
        "target": session.target.to_dict(),
        "device": {"label": device_label(session.device), "fingerprint": session.device},
        "created": info.get("created"),
        "generated": _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "baseline": history[0].sha,
        "final": head.sha,
        "kernel_file": session.kernel_file,
        "plan": session.plan,
        "stages": stages,
        "versions": versions,
        # nothing timed (the interpreter): no speedup to claim, not even 1.0
        "cumulative_speedup": cumulative,
        "cumulative_call": _cumulative_call(cumulative, stages),
        "speed_measured": speed_measured,
        "candidates": counts,
        "warnings": warnings,
    }


def _fmt(value: float | None, spec: str = ".2f", empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped)."""
    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain-text table with aligned columns (for terminals and logs)."""
    cols = [headers] + [[str(x) for x in r] for r in rows]
    widths = [max(len(str(r[i])) for r in cols) for i in range(len(headers))]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)) for r in cols[1:]]
    return "\n".join(line.rstrip() for line in out)


def stage_rows(report: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the per-stage table of a :func:`json_report` dict."""
    headers = ["stage", "status", "iterations", "verdict", "speedup", "TFLOP/s", "reason", "call"]
    rows = []
    for s in report["stages"]:
        verdict = s["verdicts"][-1] if s["verdicts"] else (s["attempts"][-1]["verdict"] if s["attempts"] else "-")
        speed = format_speedup(s["speedup"]) if s["versions"] else "-"
        if _preparatory(s["stage"]) and s["versions"]:
            speed = "n/a (port)"
        rows.append([s["stage"], s["status"], s["iterations"] or "-", verdict or "-", speed,
                     _fmt(s["tflops"]), _short(s["reason"], 90),
                     (s.get("call") or "-") if not _preparatory(s["stage"]) else "-"])
    return headers, rows


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def markdown_report(session: SessionView, report: dict[str, Any] | None = None) -> str:
    """The session report as Markdown: device, summary, per-stage table, version history and
    the CoVeR attempts of each stage."""
    r = report or json_report(session)
    lines = [f"# Optimization report: {r['problem']}", ""]
    lines += [f"- Session: `{r['session']}` (`{r['path']}`)",
              f"- Device: {r['device']['label']}; target: {r['target']['name']} ({r['target']['arch']})",
              f"- Baseline: `{r['baseline'][:10]}`; final: `{r['final'][:10]}`",
              f"- Cumulative speedup: **{format_speedup(r['cumulative_speedup'])}**"
              + (f" ({r['cumulative_call']})" if r.get("cumulative_call") else "")]
    if not r["speed_measured"]:
        lines.append("- Speed was not measured on this device (Triton's interpreter or no timing): "
                     "verdicts here establish correctness only.")
    counts = ", ".join(f"{n} {s}" for s, n in sorted(r["candidates"].items())) or "none"
    lines += [f"- Candidates: {counts}", f"- Generated: {r['generated']}", ""]
    if r.get("warnings"):
        lines += ["## Problem warnings", ""] + [f"- {w}" for w in r["warnings"]] + [""]
    lines += ["## Stages", ""]
    headers, rows = stage_rows(r)
    lines += [markdown_table(headers, rows), ""]
    # the table cuts reasons at 90 characters; a step's reason that says more (a first version's
    # operations left to torch, and why) is given whole
    lines += [f"- {s['stage']}: {' '.join(str(s['reason']).split())}" for s in r["stages"]
              if s["stage"] not in ALL_STAGE_IDS and len(" ".join(str(s["reason"]).split())) > 90]
    lines += ["", "## Versions", ""] if lines[-1] != "" else ["## Versions", ""]
    vrows = [[v["index"], f"`{v['short']}`", v["kind"], v["stage"] or "-", v["engine"] or "-", v["model"] or "-",
              v["verdict"] or "-", format_speedup(v["speedup"]) if v["index"] else "-",
              format_speedup(v["cumulative_speedup"]), _fmt(v["tflops"]), _fmt(v["time_us"], ".1f"),
              _short(v["summary"], 70), v.get("call") or "-"] for v in r["versions"]]
    lines += [markdown_table(["#", "commit", "kind", "stage", "engine", "model", "verdict", "speedup",
                              "cumulative", "TFLOP/s", "time µs", "summary", "call"], vrows), ""]
    # the precision each version was held to, where it allowed more than the problem's own dtype
    lines += [f"- version {v['index']} (`{v['short']}`) was verified at {v['precision']}" for v in r["versions"]
              if v.get("precision") and "allowing" in str(v["precision"])]
    if lines[-1] != "":
        lines.append("")
    attempts = [(s["stage"], a) for s in r["stages"] for a in s["attempts"]]
    if attempts:
        lines += ["## CoVeR attempts", ""]
        arows = [[stage, a["candidate"], a["iteration"] or "-", a["engine"], a["status"], a["verdict"] or "-",
                  format_speedup(a["speedup"]) if a["speedup"] is not None else "-", _short(a["reason"] or "", 80)]
                 for stage, a in attempts]
        lines += [markdown_table(["stage", "candidate", "iteration", "engine", "status", "verdict", "speedup",
                                  "reason"], arows), ""]
    return "\n".join(lines).rstrip() + "\n"
