"""Charts a performance engineer reads: the roofline of a target with kernels placed on it, and
speedups on a logarithmic axis (one 58x kernel must not flatten the 1.1x ones). Plotly figures
only (no Streamlit), built from plain numbers so they are tested.

The roofline is the target's hardware profile from ``knowledge/hardware/`` (``HardwareProfile``:
peak TFLOP/s per dtype, memory bandwidth, ridge point = peak / bandwidth), drawn on log-log
axes: attainable TFLOP/s = min(peak, bandwidth x arithmetic intensity). A kernel is placed at
its intensity (FLOP per byte of the least traffic one call must cause, as the verdicts compute
it) and its measured TFLOP/s; a kernel whose intensity is known but whose speed was not measured
(the CPU interpreter) is drawn as a dotted vertical line at its intensity, so the chart still
says which side of the ridge it sits on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from xeforge_core import units
from xeforge_core.vocab.roofline import attainable_tflops

#: Colours of the point groups (baseline before, optimized after; the chosen version stands out).
_COLOURS = {"baseline": "#8c8c8c", "rules engine": "#0068b5", "version": "#0068b5", "chosen": "#d62728"}


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel on a roofline: ``label``, ``intensity`` (FLOP/byte), ``tflops`` (measured;
    ``None``: not measured, drawn as a line at its intensity), ``group`` (legend entry: e.g.
    ``baseline``, ``rules``, ``version``), ``chosen`` (drawn highlighted), ``link`` (the label
    of the point it improved on, drawn as an arrow from it)."""

    label: str
    intensity: float
    tflops: float | None = None
    group: str = "version"
    chosen: bool = False
    link: str | None = None


def _ranks(values: Sequence[float]) -> list[int]:
    """Each value's position in ascending order."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = rank
    return ranks


def dtype_key(dtype: str | None) -> str:
    """``float16``/``torch.float16``/``fp16`` -> ``fp16`` (the profiles' peak keys); fp32 else."""
    name = str(dtype or "float32").replace("torch.", "").lower()
    return {"float16": "fp16", "half": "fp16", "fp16": "fp16", "bfloat16": "bf16", "bf16": "bf16",
            "float32": "fp32", "float": "fp32", "fp32": "fp32", "float64": "fp64", "fp64": "fp64",
            "int8": "int8"}.get(name, "fp32")


def roofline_figure(profile: Any, dtype: str, points: Sequence[RooflinePoint], *, height: int = 460,
                    title: str = "") -> go.Figure:
    """The roofline of ``profile`` (a knowledge-base ``HardwareProfile``) for ``dtype`` on log-log
    axes, with its ridge point marked, and ``points`` placed on it. Raises ``ValueError`` when
    the profile has no peak for the dtype or no bandwidth."""
    key = dtype_key(dtype)
    peak, bw, ridge = profile.peak(key), profile.bandwidth_gbps, profile.ridge_point(key)
    if not peak or not bw or not ridge:
        raise ValueError(f"{profile.name} has no peak {key} TFLOP/s or no bandwidth: no roofline")
    xs_known = [p.intensity for p in points if p.intensity and p.intensity > 0]
    lo = min([ridge / 1000, *[x / 4 for x in xs_known]])
    hi = max([ridge * 100, *[x * 4 for x in xs_known]])
    n = 200
    xs = [lo * (hi / lo) ** (i / n) for i in range(n + 1)]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[attainable_tflops(x, peak, bw) for x in xs], mode="lines",
                             line={"color": "#222", "width": 2.5},
                             name=f"{profile.name}: {units.tflops(peak)} {key}, {units.bandwidth(bw)}",
                             hovertemplate="%{x:.3g} FLOP/byte: attainable %{y:.3g} TFLOP/s<extra></extra>"))
    fig.add_trace(go.Scatter(x=[ridge], y=[peak], mode="markers+text", marker={"size": 10, "symbol": "diamond",
                                                                                 "color": "#222"},
                             text=[f"ridge {ridge:.3g} FLOP/byte"], textposition="bottom right",
                             name=f"ridge point ({ridge:.3g} FLOP/byte)", hoverinfo="skip"))
    measured = [p for p in points if p.tflops and p.tflops > 0 and p.intensity > 0]
    bottom = min([peak / 1e4, *[p.tflops / 3 for p in measured]])
    by_label = {p.label: p for p in measured}
    for group in dict.fromkeys(p.group for p in measured):
        part = [p for p in measured if p.group == group]
        fig.add_trace(go.Scatter(
            x=[p.intensity for p in part], y=[p.tflops for p in part], mode="markers+text", name=group,
            text=[p.label if group != "baseline" or p.chosen else "" for p in part],
            # neighbours by intensity alternate sides, so close labels do not print over each other
            textposition=[("top left", "top right")[rank % 2] for rank in _ranks([p.intensity for p in part])],
            marker={"size": [15 if p.chosen else 10 for p in part],
                    "color": [_COLOURS["chosen"] if p.chosen else _COLOURS.get(group, "#2ca02c") for p in part],
                    "line": {"width": 1, "color": "#fff"}},
            customdata=[[p.label, p.tflops / attainable_tflops(p.intensity, peak, bw)] for p in part],
            hovertemplate="%{customdata[0]}: %{x:.3g} FLOP/byte, %{y:.3g} TFLOP/s (%{customdata[1]:.0%} of the "
                          "roofline)<extra>" + group + "</extra>"))
    for p in measured:
        before = by_label.get(p.link or "")
        if before is not None:
            fig.add_annotation(x=math.log10(p.intensity), y=math.log10(p.tflops), ax=math.log10(before.intensity),
                               ay=math.log10(before.tflops), xref="x", yref="y", axref="x", ayref="y",
                               showarrow=True, arrowhead=2, arrowwidth=1, arrowcolor="#999", text="")
    for p in points:
        if (p.tflops is None or p.tflops <= 0) and p.intensity > 0:
            colour = _COLOURS["chosen"] if p.chosen else "#999"
            fig.add_vline(x=p.intensity, line_dash="dot", line_color=colour)
            # an annotation on a log axis takes log10 of the value (a shape takes the value)
            fig.add_annotation(x=math.log10(p.intensity), xref="x", y=0.04, yref="paper", xanchor="right",
                               text=f"{p.label}: not measured", showarrow=False, font={"color": colour})
    fig.update_layout(
        xaxis={"type": "log", "title": "arithmetic intensity (FLOP per byte)", "range": [math.log10(lo),
                                                                                         math.log10(hi)]},
        yaxis={"type": "log", "title": f"TFLOP/s ({key})", "range": [math.log10(bottom), math.log10(peak * 2)]},
        height=height, margin={"t": 40 if title else 20, "b": 40, "l": 60, "r": 20}, title=title or None,
        legend={"orientation": "h", "y": -0.2})
    return fig


def speedup_bars(names: Sequence[str], speedups: Sequence[float], groups: Sequence[str] | None = None, *,
                 axis_title: str = "speedup over the baseline (x)", height: int = 440) -> go.Figure:
    """Speedups as bars on a logarithmic axis around 1x (a 58x kernel and a 1.1x one both
    readable; a slowdown points down from the 1x line), each bar labelled with its value."""
    groups = list(groups) if groups is not None else ["speedup"] * len(names)
    fig = go.Figure()
    for group in dict.fromkeys(groups):
        part = [(n, x) for n, x, g in zip(names, speedups, groups) if g == group]
        # a bar spans [base, base + y]: from the 1x line to the speedup, down for a slowdown
        fig.add_trace(go.Bar(x=[n for n, _ in part], y=[x - 1.0 for _, x in part], base=1.0, name=group or "speedup",
                             text=[units.speedup(x) for _, x in part], textposition="outside",
                             hovertemplate="%{x}: %{text}<extra></extra>"))
    values = [x for x in speedups if x and x > 0] or [1.0]
    lo, hi = min(min(values), 1.0), max(max(values), 1.0)
    fig.add_hline(y=1.0, line_dash="dot", line_color="#444")
    fig.update_layout(yaxis={"type": "log", "title": axis_title + " — log scale",
                             "range": [math.log10(lo) - 0.15, math.log10(hi) + 0.35]},
                      height=height, margin={"t": 20, "b": 20}, xaxis_tickangle=-35, barmode="overlay")
    return fig


__all__ = ["RooflinePoint", "dtype_key", "roofline_figure", "speedup_bars"]
