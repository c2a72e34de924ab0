"""Optimize: the stage plan as a stepper, the candidate of the current stage as a side-by-side
diff with per-hunk accept/reject, its verdict and CoVeR iterations, and the decisions
(approve, reject, edit, retry, skip). Verifications run in worker processes from a background
job, so the page stays responsive and every run can be cancelled."""

from __future__ import annotations

import streamlit as st

from xeforge_core import units
from xeforge_core.diffmerge import describe_merge, unified_patch
from xeforge_core.precision import allowance_choices
from xeforge_core.ui.problemview import smaller_ci_offer, spec_editor
from xeforge_core.ui.render import (
    cached,
    diff_view,
    flash,
    hunk_checkboxes,
    job_progress,
    kept_tabs,
    keyboard_shortcuts,
    nav_link,
    page_setup,
    require_session,
    verdict_badge,
    verdict_panel,
)
from xeforge_core.ui.review import ReviewStatus, code_hash
from xeforge_core.ui.validate import MAX_SOURCE_BYTES, InputError, check_size, size_note
from xeforge_core.ui.workbench import WorkbenchError, stage_ids
from xeforge_core.units import plural
from xeforge_core.verdict import Verdict

wb = page_setup("Optimize", "🛠️")
session = require_session(wb)

#: the names the "Allowed precision" choice offers, with what each allows
ALLOWANCES = allowance_choices()
STATUS_ICON = {"pending": "⚪", "running": "🔵", "review": "🟡", "done": "✅", "kept_current": "➖",
               "skipped": "⏭️", "failed": "❌"}


def _act(fn, *args, ok: str | None = None, **kwargs):  # noqa: ANN001, ANN202
    """Run a workbench action; show its error on the page instead of failing."""
    try:
        result = fn(*args, **kwargs)
    except WorkbenchError as exc:
        st.error(str(exc))
        return None
    except Exception as exc:  # a failing action must not break the page or lose work
        st.error(f"{type(exc).__name__}: {exc}")
        return None
    if ok:
        flash("success", ok)
    st.rerun()
    return result


def _within_limit(text: str | None, what: str) -> bool:
    """Refuse text over the source limit (its size and the limit shown), before any work."""
    try:
        check_size(text, limit=MAX_SOURCE_BYTES, what=what)
    except InputError as exc:
        st.error(f"Not used: {exc}")
        return False
    return True


# ------------------------------------------------------------------ target
choices = wb.targets()
target_now = wb.target()
picked = st.selectbox("Target hardware (the plan, codemods, lints and search spaces follow it; verification "
                      f"runs on {wb.device_type()})", [t.profile for t in choices],
                      index=[t.profile for t in choices].index(target_now.profile),
                      format_func=lambda p: next(t.label for t in choices if t.profile == p), key="opt_target")
if picked != target_now.profile:
    _act(wb.set_target, picked, ok=f"target: {picked}; the stages not started yet were planned again")

# ------------------------------------------------------------------ stepper
# the plan and its statuses live in the session's refs; the issues in the analysis of the head
items = cached(session, f"plan_items:{id(wb.analysis)}:{wb.target().profile}", wb.plan_items)
current = cached(session, "current_stage", lambda: session.current_stage)
plain_pytorch = cached(session, "plain_pytorch", wb.pytorch_start_needed)
engine = wb.settings.engine
run_engine = engine if engine != "manual" else "rules"  # the manual engine's Propose runs the rules engine
st.subheader("Stage plan")
if items:
    cols = st.columns(len(items))
    for col, item in zip(cols, items):
        with col:
            icon = STATUS_ICON.get(item.status, "⚪")
            text = f"{icon} **{item.number}. {item.stage}**" if item.current else f"{icon} {item.number}. {item.stage}"
            st.markdown(text)
            marks = " ".join(c.mark for c in item.checks) or ", ".join(item.engines)
            st.caption(item.status.replace("_", " ") + (f" · {plural(len(item.issues), 'issue')}" if item.issues else "")
                       + f" · on this kernel: {marks}")
    idle = wb.nothing_to_do(run_engine)
    if idle:
        st.warning(idle + " The Manual tab gives the exact prompt for any chat LLM.")
elif plain_pytorch:
    st.info("No stage is planned yet: the stages are planned on the first Triton version, which "
            "**Start from PyTorch** below writes.")
else:
    st.info("The plan is empty: analysis found no stage with work. Add a stage below.")

with st.expander("Edit the plan (add, skip, reorder)", expanded=not items):
    for item in items:
        c1, c2, c3, c4, c5 = st.columns([4, 1, 1, 1, 1])
        c1.markdown(f"{STATUS_ICON.get(item.status, '⚪')} `{item.stage}` — {item.status}"
                    + (f": {item.reason}" if item.reason else ""))
        mine = item.check(run_engine)
        if mine is not None:
            c1.caption(f"{'✓' if mine.can else '✗'} {run_engine} engine on this kernel: {mine.reason}")
        if c2.button("↑", key=f"plan_up_{item.stage}", help="move up"):
            _act(wb.move_stage, item.stage, -1)
        if c3.button("↓", key=f"plan_down_{item.stage}", help="move down"):
            _act(wb.move_stage, item.stage, +1)
        if item.status in ("pending", "running", "review"):
            if c4.button("Skip", key=f"plan_skip_{item.stage}"):
                _act(wb.skip_stage, item.stage, ok=f"{item.stage} skipped")
        elif c4.button("Re-open", key=f"plan_reopen_{item.stage}"):
            _act(wb.add_stage, item.stage, ok=f"{item.stage} re-opened")
        for issue in item.issues:
            st.caption(f"• {issue}")
    plan_now = [i.stage for i in items]
    addable = [s for s in stage_ids() if s not in plan_now]
    if addable:
        a1, a2 = st.columns([3, 1])
        to_add = a1.selectbox("Add a stage", addable, key="plan_add_pick")
        if a2.button("Add", key="plan_add"):
            _act(wb.add_stage, to_add, ok=f"{to_add} added to the plan")

if wb.analysis_error:
    st.warning(f"Analysis unavailable: {wb.analysis_error}")

# the contract: a correctness variant too big for this device is said before Propose, with a
# smaller one offered; the spec is editable here (a new version of the session)
smaller_ci_offer(wb, key="opt")
spec_editor(wb, key="opt")

# ------------------------------------------------------------------ current stage
propose_job = wb.jobs.current("propose")
verify_job = wb.jobs.current("verify")
port_job = wb.jobs.current("portability")
first_job = wb.jobs.current("first_version")
busy = any(j is not None and not j.finished for j in (propose_job, verify_job, port_job, first_job))

# ------------------------------------------------------------------ start from PyTorch
if plain_pytorch:
    st.info("The current version is a plain-PyTorch Model: no Triton kernel yet. **Start from PyTorch** asks "
            "TorchInductor (torch.compile's backend) for the Triton kernels of the model, in a sandboxed worker, "
            "converts them into a standalone ModelNew, verifies it against the problem and commits it as version 1. "
            "Matrix products run in the version's own Triton GEMM; convolutions and integer products stay torch "
            "library calls, and the rationale names them (not Triton yet).")
    saved = st.file_uploader("Saved TorchInductor capture (.json, optional: written on a GPU machine with "
                             "`xeforge inductor capture`; converted here instead of generating)",
                             type=["json"], key="opt_capture_upload")
    if st.button("Start from PyTorch", key="opt_from_pytorch", type="primary", disabled=busy):
        _act(wb.start_from_pytorch, saved.getvalue().decode("utf-8", "replace") if saved is not None else None,
             capture_name=saved.name if saved is not None else "capture")
job_progress(first_job, key="first_version", on_cancel=lambda: wb.cancel("first_version"))
first = next((c for c in cached(session, "candidates", session.candidates)
              if c.stage == "first_version" and c.status == "approved"), None)
if first is not None:
    with st.expander("Version 1: TorchInductor's first version", expanded=False):
        st.markdown(first.rationale)
        calls = first.rationale.partition("not Triton yet: ")[2]
        if calls:
            st.warning(f"Not Triton yet (torch library calls): {calls}. The later stages, or the LLM engine, "
                       "can replace them.")

# ------------------------------------------------------------------ portability
try:
    foreign = wb.portability_needed()
except Exception as exc:  # the check is advisory
    foreign = []
    st.caption(f"portability check unavailable: {exc}")
if foreign:
    st.warning(f"The current version {'; '.join(foreign)}, so it cannot run correctly on "
               f"{wb.device_type()} as written. The portability step rewrites device strings, synchronise "
               "calls and Intel-only compile options into device-agnostic code, makes the launch grid of an "
               "autotuned kernel follow the chosen config, verifies the result and commits it as its own "
               "version (Stage: portability) before any optimization stage.")
    if st.button("Make it portable", key="opt_portability", disabled=busy):
        _act(wb.start_portability)
job_progress(port_job, key="portability", on_cancel=lambda: wb.cancel("portability"))

if current is None and plain_pytorch:
    pass  # nothing to optimize before the first Triton version
elif current is None:
    st.success("Every planned stage is finished. See **History** for the timeline and downloads, "
               "or add a stage to the plan.")
    nav_link("pages/2_History.py", "History", "📜")
else:
    st.header(f"Stage: {current}")
    stage_issues = wb.issues_by_stage().get(current, [])
    if stage_issues:
        st.markdown("**Issues found for this stage**")
        for issue in stage_issues:
            st.markdown(f"- {issue}")
    tab_engine, tab_manual = kept_tabs([f"Engine ({run_engine})", "Manual: prompt for any chat LLM, or your own edit"],
                                       key="opt_tabs")
    with tab_engine:
        label = "Propose" if wb.review is None else "Retry (new proposal)"
        item = next(i for i in items if i.stage == current)
        check = item.check(run_engine)
        able = ", ".join(c.engine for c in item.checks if c.can) or ", ".join(item.engines)
        st.caption(f"The {run_engine} engine proposes a candidate; the CoVeR loop verifies it and "
                   f"refines it on failure, up to {wb.settings.max_iterations} iterations. Engines that can "
                   f"do this stage on this kernel: {able}.")
        cannot = check is not None and not check.can
        if cannot:
            st.warning(f"The {run_engine} engine cannot do {current} on this kernel: {check.reason}. "
                       "Use the Manual tab (the exact prompt for any chat LLM, or your own edit), choose the "
                       "llm engine on Home, or skip the stage.")
        elif check is not None:
            st.caption(f"✓ {run_engine}: {check.reason}")
        b1, b2, b3 = st.columns(3)
        if b1.button(label, key="opt_propose", type="primary", disabled=busy or cannot,
                     help=f"the {run_engine} engine cannot do {current} on this kernel" if cannot else "keyboard: N"):
            _act(wb.start_propose, current, run_engine)
        if b2.button("Skip stage", key="opt_skip", disabled=busy):
            _act(wb.skip_stage, current, ok=f"{current} skipped")
        if b3.button("Keep current version", key="opt_keep", disabled=busy):
            _act(wb.keep_current, ok=f"{current}: kept the current version")
    with tab_manual:
        try:
            prompt = cached(session, f"prompt:{current}:{wb.target()}", lambda: wb.prompt_for(current))
        except Exception as exc:
            prompt = ""
            st.warning(f"The prompt for {current} cannot be rendered: {exc}")
        if prompt:
            st.caption("The exact prompt for this stage (copy it with the button at the top right "
                       "of the box), then paste the chat LLM's reply below.")
            st.code(prompt, language="markdown")
        reply = st.text_area("Reply from a chat LLM, or your own version of the module", height=220,
                             key="opt_manual_reply")
        if reply:
            st.caption("Size: " + size_note(reply, limit=MAX_SOURCE_BYTES))
        model_name = st.text_input("Chat model (optional, recorded in history)", key="opt_manual_model")
        if st.button("Use this reply as the candidate", key="opt_manual_submit", disabled=busy) \
                and _within_limit(reply, "pasted reply"):
            _act(wb.submit_manual, reply, stage=current, model=model_name or None,
                 ok="Candidate taken from the pasted text: verify it next.")

    job_progress(propose_job, key="propose", on_cancel=lambda: wb.cancel("propose"))

# ------------------------------------------------------------------ candidate under review
review = wb.review
if review is not None:
    st.header(f"Candidate for {review.stage}")
    ok, why = review.can_approve()
    st.markdown(f"**Status:** {review.status.value} · **origin:** {review.origin} · **verdict:** "
                f"{verdict_badge(review.verdict) if review.verdict_current else 'not verified for this code'}"
                + (f" · **candidate:** `{wb.review_candidate_id}`" if wb.review_candidate_id else ""))
    if review.rationale:
        with st.expander("Rationale", expanded=True):
            st.markdown(review.rationale)
    if review.prompt:
        with st.expander("Prompt sent to the engine"):
            st.code(review.prompt, language="markdown")

    # the diff shown is always of the code Approve commits: after a hunk merge or an edit, that
    # code, not the engine's whole proposal (whose hunks are chosen below)
    changed_by_user = review.source != review.proposed_source
    st.subheader("Diff: current vs the code under review" if changed_by_user else "Diff: current vs candidate")
    if changed_by_user:
        what = (describe_merge(review.base_source, review.proposed_source, review.accepted_hunks)
                if review.origin == "merge" and review.accepted_hunks is not None else "your edit")
        st.info(f"The code under review is the {review.origin} result ({what}), not the {review.engine} "
                f"proposal as is: the diff below is what Approve commits, and it must be verified first.")
    rkey = f"review_{code_hash(review.base_source)}_{code_hash(review.proposed_source)}"
    diff_view(review.base_source, review.source, key=f"{rkey}_{code_hash(review.source)}", hunk_choice=False)
    kernel_file = session.kernel_file
    with st.expander("Patch: what Approve commits"):
        st.code(unified_patch(review.base_source, review.source, from_name=f"a/{kernel_file}",
                              to_name=f"b/{kernel_file}") or "(no change)", language="diff")
    if review.status not in (ReviewStatus.APPROVED, ReviewStatus.REJECTED):
        with st.expander(f"Choose hunks of the {review.engine} proposal", expanded=not changed_by_user):
            accepted = hunk_checkboxes(review.base_source, review.proposed_source, key=rkey,
                                       accepted=review.accepted_hunks)
            if st.button("Apply hunk selection", key="opt_apply_hunks", disabled=busy or not accepted,
                         help=None if accepted else "tick at least one hunk (none is the current version)"):
                _act(wb.apply_hunks, accepted, ok=f"Kept hunks {accepted}: verify the merged code before approving.")
    if changed_by_user:
        with st.expander("Code under review"):
            st.code(review.source, language="python", line_numbers=True)

    with st.expander("Edit the candidate (then verify again)"):
        edited = st.text_area("Candidate module", value=review.source, height=320,
                              key=f"opt_edit_{code_hash(review.source)}")
        if st.button("Save edit", key="opt_edit_save", disabled=busy) and _within_limit(edited, "edited candidate"):
            _act(wb.edit, edited, ok="Edit saved: verify it before approving.")

    st.subheader("Verdict")
    allowed = st.multiselect(
        "Allowed precision", list(ALLOWANCES), default=wb.allow_precision, key="opt_allow_precision",
        format_func=lambda n: f"{n}: {ALLOWANCES[n]}",
        help="Precision downgrades the next verifications accept (the CLI's --allow; a spec's allow: list "
             "adds to these). None: a float32 problem is held to float32 against a float64 truth.")
    if allowed != wb.allow_precision:
        wb.set_allow_precision(allowed)
    if review.verdict is not None and review.verdict_current:
        verdict_panel(review.verdict, key="review_verdict")
    elif review.verdict is not None:
        st.warning("The verdict below was given for earlier code; verify the current code.")
        with st.expander("Earlier verdict"):
            verdict_panel(review.verdict, key="review_old_verdict")
    else:
        st.caption("Not verified yet.")
    job_progress(verify_job, key="verify", on_cancel=lambda: wb.cancel("verify"))

    if review.iterations:
        with st.expander(f"CoVeR iterations ({review.iteration_count})"):
            for n, it in enumerate(review.iterations, start=1):
                vd = it.get("verdict")
                verdict = Verdict.from_dict(vd) if isinstance(vd, dict) else None
                head = (f"iteration {it.get('iteration', n)}"
                        + (f" · {it['candidate_id']}" if it.get("candidate_id") else "")
                        + f" · {verdict_badge(verdict)}"
                        + (f" · {it.get('status')}" if it.get("status") else "")
                        + (f": {it.get('reason')}" if it.get("reason") else ""))
                st.markdown(f"**{head}**")
                if it.get("rationale"):
                    st.caption(it["rationale"])
                if verdict is not None and not verdict.passed:
                    st.code(verdict.feedback(), language="text")

    c1, c2, c3, c4 = st.columns(4)
    closed = review.status in (ReviewStatus.APPROVED, ReviewStatus.REJECTED)
    if c1.button("Verify", key="opt_verify", disabled=busy or closed, help="keyboard: V"):
        _act(wb.start_verify)
    can_memcheck, memcheck_what = wb.memcheck_availability()
    if c4.button("Verify with memcheck", key="opt_verify_memcheck", disabled=busy or closed or not can_memcheck,
                 help=("Verify, then run one more correctness call under " + memcheck_what + ": every "
                       "out-of-bounds read or write becomes a finding with kernel, line and size, and an "
                       "out-of-bounds write fails correctness.") if can_memcheck else memcheck_what):
        _act(wb.start_verify, memcheck=True)
    if c2.button("Approve", key="opt_approve", type="primary", disabled=busy or not ok,
                 help=f"keyboard: A · {why}"):
        _act(wb.approve, ok="Approved: committed as a new version (see History).")
    reason = st.text_input("Reason for rejecting (optional)", key="opt_reject_reason")
    if c3.button("Reject", key="opt_reject", disabled=busy, help="keyboard: R"):
        _act(wb.reject, reason or "rejected by the user",
             ok="Rejected: the candidate stays in the session under its ref (see below and History).")
    if not ok:
        st.caption(f"Approve is disabled: {why}")

# ------------------------------------------------------------------ keyboard
keyboard_shortcuts({"a": "opt_approve", "r": "opt_reject", "n": "opt_propose", "v": "opt_verify"})
st.caption("Keyboard: **A** approve · **R** reject · **N** next proposal (Propose / Retry) · **V** verify "
           "(not while typing in a field).")

# ------------------------------------------------------------------ kept candidates
st.header("Kept candidates")
try:
    kept = cached(session, "candidates", session.candidates)
except Exception as exc:
    kept = []
    st.error(f"Could not list candidates: {exc}")
if not kept:
    st.caption("No candidates yet.")
else:
    st.dataframe([{"candidate": c.id, "status": c.status, "engine": c.engine,
                   "iteration": c.iteration, "verdict": c.verdict.kind.value if c.verdict else "",
                   "speedup": units.speedup(c.speedup) if c.speedup else "", "reason": c.reason}
                  for c in reversed(kept)], hide_index=True, width="stretch")
    revivable = [c.id for c in kept if c.status in ("rejected", "superseded", "pending")]
    if revivable:
        k1, k2 = st.columns([3, 1])
        pick = k1.selectbox("Bring a candidate back for review", list(reversed(revivable)),
                            key="opt_revive_pick")
        if k2.button("Review again", key="opt_revive", disabled=busy):
            _act(wb.candidate_to_review, pick, ok=f"{pick} is under review again.")
