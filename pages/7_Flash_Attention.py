"""Flash Attention demo: one click loads the naive Flash Attention sample and its teaching
trajectory (online softmax, fp16 operands with fp32 accumulation, block tiling, target tiles and
warps, autotune, a causal variant) and steps through it. Each step is verified live against the
current version, on this machine's device. Beside it, the same trajectory as recorded on a GPU
machine (the shipped H200 Flash Attention benchmark, or a results file the user opens), marked
recorded with its device, date and library versions: on a CPU-only machine that tab comes first,
since the interpreter measures no speed."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

from xeforge_core import units
from xeforge_core.ui.recorded import trajectory_table
from xeforge_core.ui.render import (
    cached,
    diff_view,
    flash,
    job_progress,
    page_setup,
    recorded_results_picker,
    verdict_badge,
    verdict_panel,
)
from xeforge_core.ui.review import ReviewStatus
from xeforge_core.ui.workbench import WorkbenchError

wb = page_setup("Flash Attention demo", "⚡")


def _live(recorded: Any) -> None:
    """The demo itself: load the trajectory, bring a step up, verify it here, approve it."""
    steps = wb.demo.get("steps")
    if st.button("Load the Flash Attention demo" if not steps else "Restart the demo (new session)",
                 key="fa_start", type="primary"):
        try:
            steps = wb.start_demo()
            flash("success", f"Loaded the naive Flash Attention kernel and a {len(steps) - 1}-step trajectory; "
                             f"session {wb.session.name} started with the naive kernel as its baseline.")
            st.rerun()
        except Exception as exc:
            st.error(f"Could not load the demo: {exc}")

    if not steps:
        st.info("The demo starts a session whose baseline is a naive attention forward (the score matrix "
                "materialised in global memory), then replays a teaching trajectory one stage at a time. "
                "Each step is verified here, on this machine's device, when you click Verify.")
        return

    session = wb.session
    history = cached(session, "history", session.history)
    st.caption(f"Session {session.name} · device {getattr(wb.device, 'label', 'detecting…')}"
               + (" · Triton interpreter: correctness can be trusted, timing is not measured (the tab "
                  "beside this one has the trajectory as recorded on a GPU)"
                  if getattr(wb.device, "interpreter", False) else ""))

    # ------------------------------------------------------------------ the trajectory
    by_title = getattr(recorded, "trajectory_by_title", None) or {}
    rows = []
    for step in steps:
        done = [v for v in history if v.model == f"flash-attention step {step.index}"] if step.index else history[:1]
        v = done[-1] if done else None
        rows.append({"step": step.index, "title": step.title, "stage": step.stage, "rule": step.rule_id or "",
                     "status": "baseline" if step.index == 0 else ("approved" if v else "not yet"),
                     "verdict": (v.verdict or "") if v else "",
                     "speedup": (units.speedup(v.speedup) if v and v.speedup else ("not measured" if v else "")),
                     "recorded speedup (GPU)": units.speedup(by_title[step.title]) if step.title in by_title
                     else "",
                     "causal": "yes" if step.causal else ""})
    st.dataframe(rows, hide_index=True, width="stretch", key="fa_table")
    if by_title:
        st.caption("“recorded speedup (GPU)”: geometric mean over the recorded shapes, for the steps the "
                   "recorded trajectory had under the same title (the other tab shows it as recorded).")

    nxt = int(wb.demo.get("next", 1))
    labels = {s.index: f"step {s.index}: {s.title}" for s in steps[1:]}
    if "_fa_next_pick" in st.session_state:  # set by Approve: move the stepper to the next step
        st.session_state["fa_pick"] = st.session_state.pop("_fa_next_pick")
    pick = st.selectbox("Step", list(labels), index=min(max(nxt - 1, 0), len(labels) - 1),
                        format_func=labels.get, key="fa_pick")
    step = steps[pick]
    st.subheader(labels[pick])
    st.markdown(f"Stage `{step.stage}`" + (f" · teaches rule `{step.rule_id}`" if step.rule_id else ""))
    st.markdown(step.annotation)
    if step.causal:
        st.warning("This step computes causal attention, another function than the baseline: it is verified "
                   "against its own reference, and its time is not a like-for-like speedup.")

    review = wb.review
    is_this = review is not None and wb.demo.get("current") == pick and review.proposed_source == step.code
    if not is_this:
        if st.button("Bring this step up as the candidate", key="fa_review"):
            try:
                wb.demo_step_review(pick)
                st.rerun()
            except WorkbenchError as exc:
                st.error(str(exc))
        with st.expander("Step code"):
            st.code(step.code, language="python", line_numbers=True)
        return

    diff_view(review.base_source, review.source, key=f"fa_diff_{pick}", hunk_choice=False)
    verify_job = wb.jobs.current("verify")
    busy = verify_job is not None and not verify_job.finished
    st.markdown(f"**Verdict:** {verdict_badge(review.verdict) if review.verdict_current else 'not verified yet'}")
    c1, c2, c3 = st.columns(3)
    if c1.button("Verify", key="fa_verify", type="primary", disabled=busy or review.status in (
            ReviewStatus.APPROVED, ReviewStatus.REJECTED)):
        try:
            wb.start_verify()
            st.rerun()
        except WorkbenchError as exc:
            st.error(str(exc))
    ok, why = review.can_approve()
    if c2.button("Approve and go to the next step", key="fa_approve", disabled=busy or not ok, help=why):
        try:
            v = wb.demo_approve()
            flash("success", f"Step {pick} committed as #{v.index} {v.short}.")
            if pick + 1 < len(steps):
                wb.demo_step_review(pick + 1)
                st.session_state["_fa_next_pick"] = pick + 1
            st.rerun()
        except WorkbenchError as exc:
            st.error(str(exc))
    if c3.button("Reject", key="fa_reject", disabled=busy):
        try:
            wb.reject("rejected in the Flash Attention demo")
            st.rerun()
        except WorkbenchError as exc:
            st.error(str(exc))
    job_progress(verify_job, key="fa_verify_job", on_cancel=lambda: wb.cancel("verify"))
    if review.verdict is not None and review.verdict_current:
        verdict_panel(review.verdict, key="fa_verdict")


def _recorded() -> Any:
    """The trajectory as recorded on a GPU machine: speedup over the naive kernel per step and
    shape, TFLOP/s and time against PyTorch's scaled_dot_product_attention."""
    results = recorded_results_picker(key="fa", want="trajectory")
    if results is None:
        return None
    if not results.trajectory:
        st.caption("This results file holds no Flash Attention trajectory (benchmarks/bench_flash_attention.py's "
                   "results.json does, and the pipeline benchmark's unless it ran with --skip-trajectory).")
        return results
    rows = [r for r in results.trajectory if r.get("speedup")]
    fig = go.Figure()
    for shape in dict.fromkeys(f"{r.get('variant')}: {r.get('dims')}" for r in rows):
        part = [r for r in rows if f"{r.get('variant')}: {r.get('dims')}" == shape]
        fig.add_trace(go.Scatter(x=[f"{r['step']} {r.get('title', '')[:28]}" for r in part],
                                 y=[r["speedup"] for r in part], mode="lines+markers", name=shape))
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_layout(yaxis_title="speedup over the naive kernel (x), recorded", yaxis_type="log", height=420,
                      margin={"t": 20, "b": 20}, legend={"orientation": "h"})
    st.plotly_chart(fig, key="fa_recorded_chart")
    by_step = results.trajectory_by_step
    if by_step:
        st.markdown("**Geometric mean over the shapes, per step:** " + " · ".join(
            f"step {k}: {units.speedup(v)}" for k, v in sorted(by_step.items()) if v))
    st.dataframe(trajectory_table(results), hide_index=True, width="stretch", key="fa_recorded_table")
    return results


interpreter = bool(getattr(wb.device, "interpreter", False)) or wb.device is None
names = ["Live demo on this machine", "Recorded on a GPU machine"]
first, second = st.tabs(names[::-1] if interpreter else names)
tab_live, tab_rec = (second, first) if interpreter else (first, second)
with tab_rec:
    recorded = _recorded()
with tab_live:
    _live(recorded)
