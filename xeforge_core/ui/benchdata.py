"""Tables behind the Benchmarks page: one row per (version, variant) with the measured times,
speedups, TFLOP/s, GB/s and roofline position, taken from the verdicts kept in a session.

Plain data (no Streamlit, no plotting) so the numbers are tested; nothing is estimated: a
version whose verdict measured nothing (the cpu interpreter) has ``None`` in the timing columns.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from xeforge_core import units


@dataclass
class BenchRow:
    """One version × variant. ``speedup`` is over the version's parent; ``cumulative`` over the
    baseline (both ``None`` when not measured). Times in µs."""

    index: int
    version: str
    stage: str
    engine: str
    verdict: str
    variant: str | None = None
    speedup: float | None = None
    cumulative: float | None = None
    baseline_median_us: float | None = None
    median_us: float | None = None
    mean_us: float | None = None
    min_us: float | None = None
    cv: float | None = None
    trials: int | None = None
    flop: float | None = None
    bytes_moved: float | None = None
    intensity: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline_fraction: float | None = None
    eager_median_us: float | None = None
    launch_bound: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def session_rows(session: Any) -> list[BenchRow]:
    """Rows for every version on the session branch (baseline first)."""
    rows: list[BenchRow] = []
    history = session.history()
    # nothing timed (the interpreter): the baseline's 1.0 is a definition, not a measurement
    measured = any(v.speedup is not None for v in history)
    for v in history:
        try:
            verdict = session.verdict_of(v.sha)
        except Exception:  # a version without a readable verdict has no numbers
            verdict = None
        base = dict(index=v.index, version=v.short, stage=v.stage or v.kind, engine=v.engine or "",
                    verdict=v.verdict or ("baseline" if v.index == 0 else ""), speedup=v.speedup,
                    cumulative=v.cumulative_speedup if measured else None)
        perf = list(getattr(verdict, "performance", None) or [])
        if not perf:
            rows.append(BenchRow(**base))
            continue
        for p in perf:
            intensity = (p.flop / p.bytes_moved) if p.flop and p.bytes_moved else None
            rows.append(BenchRow(
                **base, variant=p.variant, baseline_median_us=p.baseline.median_us,
                median_us=p.candidate.median_us, mean_us=p.candidate.mean_us, min_us=p.candidate.min_us,
                cv=p.candidate.cv, trials=p.candidate.trials, flop=p.flop, bytes_moved=p.bytes_moved,
                intensity=intensity, tflops=p.tflops, gbps=p.gbps, roofline_fraction=p.roofline_fraction,
                eager_median_us=p.reference.median_us if p.reference else None,
                launch_bound=p.launch_bound))
    return rows


def waterfall_steps(session: Any) -> list[tuple[str, float]]:
    """``(label, cumulative speedup)`` after each version that changed the speed, starting with
    ``("baseline", 1.0)``; versions whose speed was not measured are left out."""
    steps = [("baseline", 1.0)]
    for v in session.history()[1:]:
        if v.cumulative_speedup is not None and v.speedup is not None:
            steps.append((f"#{v.index} {v.stage or v.kind}", float(v.cumulative_speedup)))
    return steps


def display_rows(rows: list[BenchRow]) -> list[dict[str, str]]:
    """The rows with units for the page's table (µs, TFLOP/s, GB/s, GFLOP, MiB, %); a value
    that was not measured reads "not measured" (times) or "—"; the CSV download keeps the raw
    numbers, named with their units (``median_us``, ``tflops``...)."""
    out = []
    for r in rows:
        timed = r.median_us is not None
        out.append({
            "#": str(r.index), "version": r.version, "stage": r.stage, "engine": r.engine, "verdict": r.verdict,
            "variant": r.variant or "", "speedup": units.speedup(r.speedup) if r.speedup else units.MISSING,
            "cumulative": units.speedup(r.cumulative) if r.cumulative else units.MISSING,
            "median": units.duration_us(r.median_us) if timed else "not measured",
            "baseline median": units.duration_us(r.baseline_median_us),
            "min": units.duration_us(r.min_us), "cv": units.percent(r.cv, decimals=1),
            "trials": units.number(r.trials), "work": units.flop(r.flop), "input bytes": units.size(r.bytes_moved),
            "intensity": units.intensity(r.intensity), "TFLOP/s": units.tflops(r.tflops),
            "bandwidth": units.bandwidth(r.gbps), "roofline": units.percent(r.roofline_fraction),
            "PyTorch eager": units.duration_us(r.eager_median_us), "launch-bound": "yes" if r.launch_bound else "",
        })
    return out


def roofline_points(rows: list[BenchRow], problem: Any = None, *, device_type: str = "cpu",
                    chosen: int | None = None) -> tuple[list[Any], str]:
    """The session's versions as :class:`~xeforge_core.ui.charts.RooflinePoint` (each measured
    version at its intensity and TFLOP/s, linked to the measured version before it; version
    ``chosen`` highlighted), and the dtype of the timed variant (the roofline's peak). Without a
    measured version, the problem's benchmark variant is drawn at its spec intensity, as an upper
    bound (the spec counts input bytes only) and marked not measured."""
    from xeforge_core.ui.charts import RooflinePoint

    points: list[RooflinePoint] = []
    previous: str | None = None
    for r in rows:
        if r.intensity and r.tflops:
            label = f"#{r.index} {r.stage}" + (f" [{r.variant}]" if r.variant else "")
            points.append(RooflinePoint(label, r.intensity, r.tflops, group="version", chosen=r.index == chosen,
                                        link=previous))
            previous = label
    dtype = "float32"
    variant = None
    if problem is not None:
        try:
            variant = problem.benchmark_variants(device_type)[0]
        except Exception:  # no spec variant to time: no dtype, no intensity
            variant = None
    if variant is not None:
        dtype = variant.dtype or next(iter(variant.input_dtypes.values()), "float32")
        if not points and variant.flop and variant.bytes:
            points.append(RooflinePoint(f"{variant.name} at ≤ {variant.flop / variant.bytes:.3g} FLOP/byte",
                                        variant.flop / variant.bytes, None, chosen=True))
    return points, dtype
