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
from xeforge_core.ui.benchdata import attainable_tflops, display_rows, roofline, session_rows, waterfall_steps
from xeforge_core.ui.recorded import problem_table
from xeforge_core.ui.render import cached, page_setup, recorded_results_picker

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
        fig = go.Figure()
        for kind in sorted({k for _, _, k in timed}):
            part = [(n, x) for n, x, k in timed if k == kind]
            fig.add_trace(go.Bar(x=[n for n, _ in part], y=[x for _, x in part], name=kind or "speedup",
                                 text=[units.speedup(x) for _, x in part], textposition="outside"))
        fig.add_hline(y=1.0, line_dash="dot")
        fig.update_layout(yaxis_title="speedup over the baseline (x), recorded", height=420,
                          margin={"t": 20, "b": 20}, xaxis_tickangle=-35)
        st.plotly_chart(fig, key="bench_recorded_chart")
    st.dataframe(table, hide_index=True, width="stretch", key="bench_recorded_table")
    if results.stages:
        with st.expander(f"Stages ({units.plural(len(results.stages), 'row')})"):
            st.dataframe([{k: ("" if v is None else units.speedup(v) if k == "speedup" and v else str(v))
                           for k, v in s.items()} for s in results.stages], hide_index=True, width="stretch")


def _live_empty_note() -> None:
    if session is None:
        st.info("No session is open: start one on **Home** to see its measured numbers here.")
    else:
        st.info("No version of this session has measured timings. Speed is measured on a GPU (cuda or xpu) "
                "only; on the cpu interpreter the verdicts say “not measured: interpreter”. The table below "
                "lists the versions and their verdicts.")


recorded_first = session is None or measured.empty
labels = ["Recorded on a GPU machine", f"This session{f' ({session.name})' if session is not None else ''}"]
tab_a, tab_b = st.tabs(labels if recorded_first else labels[::-1])
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
    profile = session.device.get("profile") if isinstance(session.device.get("profile"), dict) else None
    if profile is None and wb.device is not None and getattr(wb.device, "profile", None):
        profile = wb.device.profile
    roof = roofline(profile) if profile else None
    if roof is None and session.device.get("peak_tflops"):
        roof = roofline({"peak_tflops": session.device.get("peak_tflops"),
                         "bandwidth_gbps": session.device.get("bandwidth_gbps")})
    points = measured[measured["intensity"].notna() & measured["tflops"].notna()] if not measured.empty else measured
    if roof is None:
        st.caption("The device has no hardware profile (peak TFLOP/s and bandwidth), so there is no roofline.")
    elif points.empty:
        st.caption(f"Roofline: peak {units.tflops(roof[0])}, {units.bandwidth(roof[1])}; no measured points yet.")
    else:
        peak, bw = roof
        lo = max(min(points["intensity"].min() / 4, 0.1), 1e-3)
        hi = max(points["intensity"].max() * 4, peak * 1000 / bw * 4)
        xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=xs, y=[attainable_tflops(x, peak, bw) for x in xs], mode="lines",
                                 name=f"roofline ({units.tflops(peak)}, {units.bandwidth(bw)})"))
        fig.add_trace(go.Scatter(
            x=points["intensity"], y=points["tflops"], mode="markers+text",
            text=[f"#{i} {s}" for i, s in zip(points["index"], points["stage"])], textposition="top center",
            name="versions", marker={"size": 11}))
        fig.update_layout(xaxis_type="log", yaxis_type="log", xaxis_title="arithmetic intensity (FLOP/byte)",
                          yaxis_title="TFLOP/s", height=420, margin={"t": 20, "b": 20})
        st.plotly_chart(fig, key="bench_roofline")

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
