"""History: the session's git log as a timeline with each version's verdict, every kept
candidate (rejected ones included), a diff between any two versions, restore, and downloads
(final kernel, patch, report)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import streamlit as st

from xeforge_core import units
from xeforge_core.ui.history import COLUMNS, decision_rows
from xeforge_core.ui.render import (
    cached,
    flash,
    page_setup,
    require_session,
    session_roofline,
    side_by_side_html,
    verdict_panel,
)
from xeforge_core.ui.workbench import WorkbenchError

wb = page_setup("History", "📜")
session = require_session(wb)


def _speed(x: float | None) -> str:
    return units.speedup(x) if x else "not measured"


versions = cached(session, "history", session.history)
st.subheader(f"Timeline of {session.name}")
st.dataframe([{
    "#": v.index, "commit": v.short, "kind": v.kind, "stage": v.stage or "", "engine": v.engine or "",
    "model": v.model or "", "verdict": v.verdict or "", "speedup": _speed(v.speedup) if v.index else "",
    "cumulative": _speed(v.cumulative_speedup), "device": v.device or "",
    "when": dt.datetime.fromtimestamp(v.time, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
    "summary": v.summary,
} for v in reversed(versions)], hide_index=True, width="stretch", key="history_table")

version_labels = {v.sha: f"#{v.index} {v.short} · {v.kind}" + (f" · {v.stage}" if v.stage else "")
                  for v in versions}
try:
    candidates = cached(session, "candidates", session.candidates)
except Exception as exc:
    candidates = []
    st.error(f"Could not list candidates: {exc}")
cand_labels = {c.id: f"candidate {c.id} · {c.status}" + (f" · {c.verdict.kind.value}" if c.verdict else "")
               for c in candidates}
all_labels = {**version_labels, **cand_labels}
order = [v.sha for v in reversed(versions)] + [c.id for c in reversed(candidates)]

# ------------------------------------------------------------------ verdict of a version
st.subheader("Verdict of a version")
pick = st.selectbox("Version", order, format_func=all_labels.get, key="hist_verdict_pick")
try:
    if pick in cand_labels:
        rec = session.candidate(pick)
        st.caption(f"{rec.engine} · iteration {rec.iteration} · status {rec.status}"
                   + (f" ({rec.reason})" if rec.reason else "") + f" · proposed against {rec.parent[:10]}")
        if rec.rationale:
            st.markdown(rec.rationale)
        verdict = rec.verdict
    else:
        v = session.version(pick)
        st.code(v.message, language="text")
        verdict = session.verdict_of(pick)
    if verdict is not None:
        verdict_panel(verdict, key="hist_verdict")
    else:
        st.caption("No verdict: the baseline, a restore or an unverified edit.")
except Exception as exc:
    st.error(f"Could not read that version: {exc}")

# ------------------------------------------------------------------ roofline of the version
st.subheader("Roofline")
chosen = next((v.index for v in versions if v.sha == pick), None)
session_roofline(session, key="hist_roofline", chosen=chosen, device_type=str(session.device.get("type") or "cpu"))

# ------------------------------------------------------------------ diff
st.subheader("Diff between two versions")
d1, d2 = st.columns(2)
a = d1.selectbox("From", order, index=len(versions) - 1 if len(versions) > 0 else 0,
                 format_func=all_labels.get, key="hist_diff_a")
b = d2.selectbox("To", order, index=0, format_func=all_labels.get, key="hist_diff_b")
try:
    diff = session.diff(a, b)
    if diff.empty:
        st.info("The two versions have the same files.")
    for f in diff.files:
        st.markdown(f"**{f.path}** ({f.status})")
        tab_u, tab_s = st.tabs([f"unified · {f.path}", f"side by side · {f.path}"])
        with tab_u:
            st.code(f.diff, language="diff")
        with tab_s:
            st.html(side_by_side_html(f.old, f.new, context=4, labels=(all_labels.get(a, a), all_labels.get(b, b))))
except Exception as exc:
    st.error(f"Could not diff: {exc}")

# ------------------------------------------------------------------ restore
st.subheader("Restore")
st.caption("Restoring makes a version (or a kept candidate) current again as a new commit: history is "
           "never rewritten.")
r1, r2 = st.columns([3, 1])
target = r1.selectbox("Version to restore", order, format_func=all_labels.get, key="hist_restore_pick")
if r2.button("Restore", key="hist_restore"):
    try:
        v = wb.restore(target)
        flash("success", f"Restored {all_labels.get(target, target)} as #{v.index} {v.short}.")
        st.rerun()
    except WorkbenchError as exc:
        st.error(str(exc))
    except Exception as exc:
        st.error(f"Could not restore: {exc}")

# ------------------------------------------------------------------ rejected candidates
st.subheader("Rejected and superseded candidates")
gone = [c for c in candidates if c.status in ("rejected", "superseded")]
if not gone:
    st.caption("None.")
else:
    st.dataframe([{"candidate": c.id, "status": c.status, "reason": c.reason, "engine": c.engine,
                   "verdict": c.verdict.kind.value if c.verdict else "", "ref": c.ref}
                  for c in reversed(gone)], hide_index=True, width="stretch")
    g1, g2 = st.columns([3, 1])
    again = g1.selectbox("Candidate", [c.id for c in reversed(gone)], key="hist_again_pick")
    if g2.button("Review again on Optimize", key="hist_again"):
        try:
            wb.candidate_to_review(again)
            flash("success", f"{again} is under review again on Optimize.")
            st.rerun()
        except Exception as exc:
            st.error(f"Could not bring it back: {exc}")

# ------------------------------------------------------------------ downloads
st.subheader("Downloads")
stem = Path(session.kernel_file).stem
c1, c2, c3, c4 = st.columns(4)
path = session.path


def _own_session():  # noqa: ANN202
    from xeforge_core.session import Session

    return Session.open(path)


def _report(kind: str):  # noqa: ANN202 - a download callable
    """Build the report only when its button is clicked (on Streamlit's download thread, with a
    Session of its own): building it runs several git commands."""
    def build() -> str:
        import json

        from xeforge_core.session import Session, report

        own = Session.open(path)
        if kind == "md":
            return report.markdown_report(own)
        return json.dumps(report.json_report(own), indent=2) + "\n"

    return build


c1.download_button("Final kernel", lambda: _own_session().source("head"), file_name=session.kernel_file,
                   mime="text/x-python", key="dl_kernel")
c2.download_button("Patch (baseline → current)", lambda: _own_session().patch("baseline", "head") or "",
                   file_name=f"{stem}.patch", mime="text/x-diff", key="dl_patch")
c3.download_button("Report (Markdown)", _report("md"), file_name=f"{stem}-report.md",
                   mime="text/markdown", key="dl_report_md")
c4.download_button("Report (JSON)", _report("json"), file_name=f"{stem}-report.json",
                   mime="application/json", key="dl_report_json")

with st.expander("Decision log"):
    labels = {v.sha: f"#{v.index} {v.short}" for v in versions}
    st.dataframe(decision_rows(cached(session, "decisions", lambda: session.decisions), labels),
                 hide_index=True, width="stretch", column_order=COLUMNS)
