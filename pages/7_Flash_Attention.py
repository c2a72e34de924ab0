"""Flash Attention demo: one click loads the naive Flash Attention sample and its teaching
trajectory (online softmax, fp16 operands with fp32 accumulation, block tiling, target tiles and
warps, autotune, a causal variant) and steps through it. Each step is verified live against the
current version; nothing is pre-recorded."""

from __future__ import annotations

import streamlit as st

from xeforge_core.ui.render import diff_view, flash, job_progress, page_setup, verdict_badge, verdict_panel
from xeforge_core.ui.review import ReviewStatus
from xeforge_core.ui.workbench import WorkbenchError

wb = page_setup("Flash Attention demo", "⚡")

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
    st.stop()

session = wb.session
history = session.history()
st.caption(f"Session {session.name} · device {getattr(wb.device, 'label', 'detecting…')}"
           + (" · Triton interpreter: correctness is checked, speed is not measured"
              if getattr(wb.device, "interpreter", False) else ""))

# ------------------------------------------------------------------ the trajectory
rows = []
for step in steps:
    done = [v for v in history if v.model == f"flash-attention step {step.index}"] if step.index else history[:1]
    v = done[-1] if done else None
    rows.append({"step": step.index, "title": step.title, "stage": step.stage, "rule": step.rule_id or "",
                 "status": "baseline" if step.index == 0 else ("approved" if v else "not yet"),
                 "verdict": (v.verdict or "") if v else "",
                 "speedup": (f"{v.speedup:.2f}x" if v and v.speedup else ("not measured" if v else "")),
                 "causal": "yes" if step.causal else ""})
st.dataframe(rows, hide_index=True, width="stretch", key="fa_table")

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
    st.stop()

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
