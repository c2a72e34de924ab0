"""Benchmarks: results recorded on a GPU machine (the pipeline benchmark, an ``xeforge batch``
summary, a session exported from another machine; shipped H200 results by default), each marked
recorded with its device, date and library versions; and the open session's own measured
numbers as charts (speedup per stage as a waterfall, a roofline with every version as a point,
the time distribution per version) and a table that exports as CSV. The cpu interpreter
measures no speed, so on a CPU-only machine the recorded results come first."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from xeforge_core import units
from xeforge_core.ui.benchdata import display_rows, session_rows, waterfall_steps
from xeforge_core.ui.charts import RooflinePoint, roofline_figure, speedup_bars
from xeforge_core.ui.recorded import problem_table
from xeforge_core.ui.render import cached, kept_tabs, page_setup, recorded_results_picker, session_roofline

wb = page_setup("Benchmarks", "📈")
session = wb.session

rows = cached(session, "bench_rows", lambda: session_rows(session)) if session is not None else []
df = pd.DataFrame([r.to_dict() for r in rows])
measured = df[df["median_us"].notna()] if not df.empty else df


def _recorded() -> None:
    results = recorded_results_picker(key="bench")
    if results is None:
        return
    table = problem_table(results)
    timed = [(p["problem"], p["speedup"], p.get("kind") or "") for p in results.problems if p.get("speedup")]
    if timed:
        st.plotly_chart(speedup_bars([n for n, _, _ in timed], [x for _, x, _ in timed], [k for _, _, k in timed],
                                     axis_title="speedup over the baseline (x), recorded"),
                        key="bench_recorded_chart")
    _recorded_roofline(results)
    st.dataframe(table, hide_index=True, width="stretch", key="bench_recorded_table")
    if results.stages:
        with st.expander(f"Stages ({units.plural(len(results.stages), 'row')})"):
            st.dataframe([{k: ("" if v is None else units.speedup(v) if k == "speedup" and v else str(v))
                           for k, v in s.items()} for s in results.stages], hide_index=True, width="stretch")


def _recorded_roofline(results: object) -> None:
    """The recorded problems on the roofline of the device they were measured on: each baseline
    and its rules-engine result, an arrow between them."""
    from xeforge_core.knowledge import load_knowledge

    profile = load_knowledge().profiles.get(results.profile) if results.profile else None
    placed = [p for p in results.problems if p.get("intensity") and p.get("tflops")]
    if profile is None or not placed:
        return
    st.subheader(f"Roofline of the {profile.name}, recorded")
    dtype = st.selectbox("Peak for", ["fp16", "bf16", "fp32"], key="bench_recorded_roof_dtype",
                         help="the compute roof of this dtype (the memory roof is the same for all)")
    points = []
    for p in placed:
        name = str(p["problem"])
        if p.get("tflops_baseline"):
            points.append(RooflinePoint(f"{name} (baseline)", p["intensity"], p["tflops_baseline"], group="baseline"))
        points.append(RooflinePoint(name, p["intensity"], p["tflops"], group="rules engine",
                                    link=f"{name} (baseline)" if p.get("tflops_baseline") else None))
    st.plotly_chart(roofline_figure(profile, dtype, points, height=520), key="bench_recorded_roofline")
    unplaced = [str(p["problem"]) for p in results.problems if p.get("tflops") and not p.get("intensity")]
    st.caption("Each problem's baseline (grey) and rules-engine result (blue) at its arithmetic intensity (FLOP "
               "per byte of the least traffic one call must cause) and measured TFLOP/s."
               + (f" Not placed: {', '.join(unplaced)} (compute-bound, recorded without their intensity)."
                  if unplaced else ""))


def _live_empty_note() -> None:
    if session is None:
        st.info("No session is open: start one on **Home** to see its measured numbers here.")
    else:
        st.info("No version of this session has measured timings. Speed is measured on a GPU (cuda or xpu) "
                "only; on the cpu interpreter the verdicts say “not measured: interpreter”. The table below "
                "lists the versions and their verdicts.")


recorded_first = session is None or measured.empty
labels = ["Recorded on a GPU machine", f"This session{f' ({session.name})' if session is not None else ''}"]
tab_a, tab_b = kept_tabs(labels if recorded_first else labels[::-1], key="bench_tabs")
tab_rec, tab_live = (tab_a, tab_b) if recorded_first else (tab_b, tab_a)
with tab_rec:
    _recorded()

with tab_live:
    if session is not None:
        st.caption(f"Session {session.name} · device {session.info.get('device_label', '')} · measured live")
    if measured.empty:
        _live_empty_note()
    if session is None:
        st.stop()
    # ------------------------------------------------------------------ waterfall
    st.subheader("Speedup per stage")
    steps = cached(session, "waterfall", lambda: waterfall_steps(session))
    if len(steps) > 1:
        labels = [s[0] for s in steps] + ["total"]
        deltas = [steps[0][1]] + [steps[i][1] - steps[i - 1][1] for i in range(1, len(steps))]
        fig = go.Figure(go.Waterfall(
            x=labels, y=deltas + [0], measure=["absolute"] + ["relative"] * (len(steps) - 1) + ["total"],
            text=[units.speedup(s[1]) for s in steps] + [units.speedup(steps[-1][1])], textposition="outside"))
        fig.update_layout(yaxis_title="cumulative speedup over the baseline (x)", height=380,
                          margin={"t": 20, "b": 20})
        st.plotly_chart(fig, key="bench_waterfall")
    else:
        st.caption("No measured speedups yet.")

    # ------------------------------------------------------------------ roofline
    st.subheader("Roofline")
    session_roofline(session, key="bench_roofline", device_type=str(session.device.get("type") or "cpu"))

    # ------------------------------------------------------------------ time distribution
    st.subheader("Time per version")
    if measured.empty:
        st.caption("No timings yet.")
    else:
        fig = go.Figure()
        for variant, part in measured.groupby("variant"):
            fig.add_trace(go.Box(
                name=str(variant), x=[f"#{i} {s}" for i, s in zip(part["index"], part["stage"])],
                lowerfence=part["min_us"], q1=part["median_us"] - part["cv"] * part["mean_us"],
                median=part["median_us"], q3=part["median_us"] + part["cv"] * part["mean_us"],
                upperfence=part["mean_us"] * (1 + 2 * part["cv"]), mean=part["mean_us"]))
        fig.update_layout(yaxis_title="µs per call (min, median ± 1 sd, mean)", height=380,
                          margin={"t": 20, "b": 20})
        st.plotly_chart(fig, key="bench_times")

    # ------------------------------------------------------------------ table
    st.subheader("Table")
    if df.empty:
        st.caption("No versions.")
    else:
        st.dataframe(display_rows(rows), hide_index=True, width="stretch", key="bench_live_table")
        st.download_button("Download CSV", df.to_csv(index=False), file_name=f"{session.name}-benchmarks.csv",
                           mime="text/csv", key="bench_csv")
