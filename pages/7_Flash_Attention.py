"""Flash Attention demo: one click loads the naive Flash Attention sample and the teaching
trajectory of the target (online softmax, fp16 operands with fp32 accumulation, 2-D block reads,
then the target's own steps: tiles and GRF mode on Xe, tiles per head dim and warp
specialization on Hopper, autotuning, the head-dim split and the causal split) and steps through
it. The demo runs in a session of its own, created or resumed by the demo, never in the session
open on the other pages. Each step is verified live against the current version, on this
machine's device. Beside it, the same trajectory as recorded on a GPU machine (the shipped H200
Flash Attention benchmark, or a results file the user opens), marked recorded with its device,
date and library versions: on a CPU-only machine that tab is shown first, since the interpreter
measures no speed. The tab and the step shown survive reruns."""

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
    show_flash,
    verdict_badge,
    verdict_panel,
)
from xeforge_core.ui.review import ReviewStatus
from xeforge_core.ui.workbench import WorkbenchError

wb = page_setup("Flash Attention demo", "⚡")
demo = wb.demo_workbench()  # the demo's own session, review and jobs: the open session is never touched
for _level, _text in demo.poll():
    flash(_level, _text)
show_flash()

TABS = ["Live demo on this machine", "Recorded on a GPU machine"]


def _start(resume: str | None) -> None:
    try:
        steps = demo.start_demo(resume=resume)
        what = "Resumed" if resume else "Started"
        flash("success", f"{what} the demo's own session {demo.session.name} with a {len(steps) - 1}-step "
                         f"{steps[-1].target or ''} trajectory; the session open elsewhere is not touched.")
        st.session_state.pop("fa_pick", None)
        st.rerun()
    except Exception as exc:
        st.error(f"Could not load the demo: {exc}")


def _live(recorded: Any) -> None:
    """The demo itself: load the trajectory, bring a step up, verify it here, approve it."""
    steps = demo.demo.get("steps")
    earlier = demo.demo_sessions() if not steps else []
    c1, c2 = st.columns(2)
    if c1.button("Start the Flash Attention demo (new session)" if not steps else "Restart the demo (new session)",
                 key="fa_start", type="primary"):
        _start(None)
    if earlier and c2.button(f"Resume the demo session {earlier[0]['path'].rsplit('/', 1)[-1]}", key="fa_resume"):
        _start(earlier[0]["path"])

    if not steps:
        st.info("The demo starts a session of its own whose baseline is a naive attention forward (the score "
                "matrix materialised in global memory), then replays the target's teaching trajectory one stage "
                "at a time. Each step is verified here, on this machine's device, when you click Verify. A session "
                "open on the other pages is left as it is.")
        return

    session = demo.session
    history = cached(session, "history", session.history)
    other = f"; the session open elsewhere ({wb.session.name}) is not touched" if wb.session is not None else ""
    st.caption(f"Demo session {session.name} (its own{other}) · target {session.target.label} · device "
               f"{getattr(demo.device, 'label', 'detecting…')}"
               + (" · Triton interpreter: correctness can be trusted, timing is not measured (the other tab has "
                  "the trajectory as recorded on a GPU)" if getattr(demo.device, "interpreter", False) else ""))

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

    labels = {s.index: f"step {s.index}: {s.title}" for s in steps[1:]}
    if "_fa_next_pick" in st.session_state:  # set by Approve: move the stepper to the next step
        st.session_state["fa_pick"] = st.session_state.pop("_fa_next_pick")
    if st.session_state.get("fa_pick") not in labels:  # first render, or a new trajectory
        st.session_state["fa_pick"] = min(max(int(demo.demo.get("next", 1)), 1), max(labels))
    pick = st.selectbox("Step", list(labels), format_func=labels.get, key="fa_pick")
    step = steps[pick]
    st.subheader(labels[pick])
    st.markdown(f"Stage `{step.stage}`" + (f" · teaches rule `{step.rule_id}`" if step.rule_id else ""))
    st.markdown(step.annotation)
    if step.causal:
        st.warning("This step computes causal attention, another function than the baseline: it is verified "
                   "against its own reference, and its time is not a like-for-like speedup.")

    review = demo.review
    is_this = review is not None and demo.demo.get("current") == pick and review.proposed_source == step.code
    if not is_this:
        if st.button("Bring this step up as the candidate", key="fa_review"):
            try:
                demo.demo_step_review(pick)
                st.rerun()
            except WorkbenchError as exc:
                st.error(str(exc))
        with st.expander("Step code"):
            st.code(step.code, language="python", line_numbers=True)
        return

    diff_view(review.base_source, review.source, key=f"fa_diff_{pick}", hunk_choice=False)
    verify_job = demo.jobs.current("verify")
    busy = verify_job is not None and not verify_job.finished
    st.markdown(f"**Verdict:** {verdict_badge(review.verdict) if review.verdict_current else 'not verified yet'}")
    c1, c2, c3 = st.columns(3)
    if c1.button("Verify", key="fa_verify", type="primary", disabled=busy or review.status in (
            ReviewStatus.APPROVED, ReviewStatus.REJECTED)):
        try:
            demo.start_verify()
            st.rerun()
        except WorkbenchError as exc:
            st.error(str(exc))
    ok, why = review.can_approve()
    if c2.button("Approve and go to the next step", key="fa_approve", disabled=busy or not ok, help=why):
        try:
            v = demo.demo_approve()
            flash("success", f"Step {pick} committed as #{v.index} {v.short} in the demo session.")
            if pick + 1 < len(steps):
                demo.demo_step_review(pick + 1)
                st.session_state["_fa_next_pick"] = pick + 1
            st.rerun()
        except WorkbenchError as exc:
            st.error(str(exc))
    if c3.button("Reject", key="fa_reject", disabled=busy):
        try:
            demo.reject("rejected in the Flash Attention demo")
            st.rerun()
        except WorkbenchError as exc:
            st.error(str(exc))
    job_progress(verify_job, key="fa_verify_job", on_cancel=lambda: demo.cancel("verify"))
    if review.verdict is not None and review.verdict_current:
        verdict_panel(review.verdict, key="fa_verdict")


def _chart(rows: list[dict[str, Any]]) -> go.Figure:
    """Speedup over the naive kernel per step and shape, log scale. The step labels are short and
    the margins grow to fit them and the axis titles (Plotly's automargin), so none is cut."""
    fig = go.Figure()
    for shape in dict.fromkeys(f"{r.get('variant')}: {r.get('dims')}" for r in rows):
        part = [r for r in rows if f"{r.get('variant')}: {r.get('dims')}" == shape]
        fig.add_trace(go.Scatter(x=[f"{r['step']}. {str(r.get('title') or '')[:22]}" for r in part],
                                 y=[r["speedup"] for r in part], mode="lines+markers", name=shape,
                                 hovertext=[str(r.get("title") or "") for r in part]))
    fig.add_hline(y=1.0, line_dash="dot")
    fig.update_xaxes(title_text="step", tickangle=-35, automargin=True)
    fig.update_yaxes(title_text="speedup over the naive kernel (x)", type="log", automargin=True)
    fig.update_layout(height=520, margin={"t": 30, "b": 40, "l": 70, "r": 20},
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0})
    return fig


def _recorded() -> Any:
    """The trajectory as recorded on a GPU machine: each step's verdict, its speedup over the naive
    kernel per shape, TFLOP/s and time against PyTorch's scaled_dot_product_attention."""
    results = recorded_results_picker(key="fa", want="trajectory")
    if results is None:
        return None
    if not results.trajectory:
        st.caption("This results file holds no Flash Attention trajectory (benchmarks/bench_flash_attention.py's "
                   "results.json does, and the pipeline benchmark's unless it ran with --skip-trajectory).")
        return results
    rows = [r for r in results.trajectory if r.get("speedup")]
    st.plotly_chart(_chart(rows), key="fa_recorded_chart")
    by_step = results.trajectory_by_step
    if by_step:
        st.markdown("**Geometric mean over the shapes, per step:** " + " · ".join(
            f"step {k}: {units.speedup(v)}" for k, v in sorted(by_step.items()) if v))
    slower = [r for r in results.trajectory if r.get("slower")]
    if slower:
        st.warning("Slower than the step before it beyond that shape's noise: " + "; ".join(
            f"step {r['step']} on {r['variant']} ({units.speedup(r.get('vs_previous'))})" for r in slower))
    st.dataframe(trajectory_table(results), hide_index=True, width="stretch", key="fa_recorded_table")
    return results


interpreter = bool(getattr(wb.device, "interpreter", False)) or wb.device is None
# one order always; on the interpreter the recorded tab is the one shown first. The tabs keep the
# user's choice across reruns (a click on Verify or Approve does not switch back).
tab_live, tab_rec = st.tabs(TABS, key="fa_tab", on_change="rerun", default=TABS[1] if interpreter else TABS[0])
with tab_rec:
    recorded = _recorded()
with tab_live:
    _live(recorded)
