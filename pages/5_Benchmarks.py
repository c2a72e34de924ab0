"""Benchmarks: the session's measured numbers as charts (speedup per stage as a waterfall, a
roofline with every version as a point, the time distribution per version) and a table that
exports as CSV. Only measured numbers are shown; the cpu interpreter measures no speed."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from xeforge_core.ui.benchdata import attainable_tflops, roofline, session_rows, waterfall_steps
from xeforge_core.ui.render import page_setup, require_session

wb = page_setup("Benchmarks", "📈")
session = require_session(wb)

rows = session_rows(session)
df = pd.DataFrame([r.to_dict() for r in rows])
measured = df[df["median_us"].notna()] if not df.empty else df

st.caption(f"Session {session.name} · device {session.info.get('device_label', '')}")
if measured.empty:
    st.info("No version has measured timings yet. Speed is measured on a GPU (cuda or xpu) only; on the "
            "cpu interpreter the verdicts say “not measured: interpreter”. The table below lists the "
            "versions and their verdicts.")

# ------------------------------------------------------------------ waterfall
st.subheader("Speedup per stage")
steps = waterfall_steps(session)
if len(steps) > 1:
    labels = [s[0] for s in steps] + ["total"]
    deltas = [steps[0][1]] + [steps[i][1] - steps[i - 1][1] for i in range(1, len(steps))]
    fig = go.Figure(go.Waterfall(
        x=labels, y=deltas + [0], measure=["absolute"] + ["relative"] * (len(steps) - 1) + ["total"],
        text=[f"{s[1]:.2f}x" for s in steps] + [f"{steps[-1][1]:.2f}x"], textposition="outside"))
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
    st.caption(f"Roofline: peak {roof[0]:.0f} TFLOP/s, {roof[1]:.0f} GB/s; no measured points yet.")
else:
    peak, bw = roof
    lo = max(min(points["intensity"].min() / 4, 0.1), 1e-3)
    hi = max(points["intensity"].max() * 4, peak * 1000 / bw * 4)
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=xs, y=[attainable_tflops(x, peak, bw) for x in xs], mode="lines",
                             name=f"roofline ({peak:.0f} TFLOP/s, {bw:.0f} GB/s)"))
    fig.add_trace(go.Scatter(
        x=points["intensity"], y=points["tflops"], mode="markers+text",
        text=[f"#{i} {s}" for i, s in zip(points["index"], points["stage"])], textposition="top center",
        name="versions", marker={"size": 11}))
    fig.update_layout(xaxis_type="log", yaxis_type="log", xaxis_title="arithmetic intensity (flop/byte)",
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
    st.dataframe(df, hide_index=True, width="stretch")
    st.download_button("Download CSV", df.to_csv(index=False), file_name=f"{session.name}-benchmarks.csv",
                       mime="text/csv", key="bench_csv")
