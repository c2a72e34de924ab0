"""Streamlit widgets shared by the workbench pages: the verdict panel, the side-by-side diff
with per-hunk accept/reject, background-job progress, and the session-state accessors.

This module and :mod:`xeforge_core.ui.problemview` are the modules of ``xeforge_core.ui`` that
import Streamlit. They render data; the decisions live in :mod:`xeforge_core.ui.workbench` and
the core modules.
"""

from __future__ import annotations

import contextlib
import html
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from xeforge_core import units
from xeforge_core.diffmerge import diff_hunks, inline_changes, side_by_side
from xeforge_core.engines.registry import get_engine_spec
from xeforge_core.precision import precision_lines
from xeforge_core.target import hardware_of
from xeforge_core.ui.jobs import BackgroundJob, JobState
from xeforge_core.verdict import StepStatus, Verdict, VerdictKind, inputs_label

_KIND_ICON = {
    VerdictKind.OK: "✅", VerdictKind.COMPILE_ERROR: "🛠️", VerdictKind.RUNTIME_ERROR: "💥",
    VerdictKind.CRASH: "💀", VerdictKind.TIMEOUT: "⏱️", VerdictKind.OOM: "🧱",
    VerdictKind.WRONG_ANSWER: "❌", VerdictKind.CHEATING: "🚫", VerdictKind.ENVIRONMENT: "🌩️",
}
_STEP_ICON = {
    StepStatus.PASSED: "✅", StepStatus.FAILED: "❌", StepStatus.SKIPPED: "⏭️",
    StepStatus.NOT_MEASURED: "➖", StepStatus.INCONCLUSIVE: "❔",
}


def workspace_dir() -> Path:
    """Where session repositories live: ``$XEFORGE_WORKSPACE`` or ``./workspace``."""
    return Path(os.environ.get("XEFORGE_WORKSPACE", "workspace")).resolve()


def get_workbench() -> Any:
    """The browser session's :class:`~xeforge_core.ui.workbench.Workbench` (created once)."""
    from xeforge_core.ui.workbench import Workbench

    if "workbench" not in st.session_state:
        st.session_state["workbench"] = Workbench(workspace=workspace_dir())
    return st.session_state["workbench"]


def cached(session: Any, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()`` for ``session``, reused across reruns and pages while its repository is
    unchanged (:mod:`xeforge_core.ui.memo`): ``cached(session, "history", session.history)``."""
    from xeforge_core.ui.memo import RepoMemo

    memo = st.session_state.setdefault("_repo_memo", RepoMemo())
    return memo.get(session.path, name, compute)


def cached_sessions(wb: Any) -> list[dict[str, Any]]:
    """``wb.list_sessions()``, reused while no session of the workspace changed."""
    from xeforge_core.ui.memo import RepoMemo, workspace_stamp

    memo = st.session_state.setdefault("_repo_memo", RepoMemo())
    return memo.get(wb.workspace, "sessions", wb.list_sessions, stamp=workspace_stamp(wb.workspace))


def kept_tabs(labels: list[str], *, key: str) -> Any:
    """``st.tabs(labels)`` whose selection survives reruns and page switches: the tabs track
    their state under ``key`` (a click reruns the page), and the selection is remembered beside
    it, so a rerun (a button's ``st.rerun()``) or a visit to another page does not send the user
    back to the first tab. No default is passed, so Streamlit never sees a widget with both a
    default and a Session State value. Returns the tab containers."""
    shadow = f"_kept_{key}"
    if key not in st.session_state and st.session_state.get(shadow) in labels:
        st.session_state[key] = st.session_state[shadow]
    tabs = st.tabs(labels, key=key, on_change="rerun")
    st.session_state[shadow] = st.session_state.get(key)
    return tabs


def flash(kind: str, message: str) -> None:
    """Queue a message to show after the next rerun (``success``, ``info``, ``warning``, ``error``)."""
    st.session_state.setdefault("_flash", []).append((kind, message))


def show_flash() -> None:
    """Show (once) the messages queued with :func:`flash`."""
    for kind, message in st.session_state.pop("_flash", []):
        getattr(st, kind, st.info)(message)


def verdict_badge(verdict: Verdict | None) -> str:
    """A one-line label of a verdict, e.g. ``✅ ok · 1.84x faster`` or ``✅ ok · 1.00x, no measurable
    difference (±1.0%)`` (the rule of ``verdict.speedup_call``)."""
    if verdict is None:
        return "not verified"
    text = f"{_KIND_ICON.get(verdict.kind, '')} {verdict.kind.value}"
    if verdict.speedup:
        call = verdict.speed_call  # the one faster / slower / no measurable difference rule
        text += f" · {call.short}" if call.faster or call.slower else f" · {units.speedup(verdict.speedup)}, {call.text}"
    if verdict.escape_findings:
        n = len(verdict.escape_findings)
        text += f" · ⚠️ {n} escape attempt{'' if n == 1 else 's'}"
    if verdict.cached:
        text += " · cached"
    return text


def _value(value: Any) -> str:
    """An output element's value as the verdict reports it (seven significant digits)."""
    return f"{value:.7g}" if isinstance(value, float) else str(value)


def verdict_panel(verdict: Verdict, *, key: str = "verdict") -> None:
    """Render a verdict: kind and reason, then compile, structure, correctness and performance
    with their evidence."""
    headline = f"{_KIND_ICON.get(verdict.kind, '')} **{verdict.kind.value}**"
    if verdict.reason:
        headline += f": {verdict.reason}"
    escapes = verdict.escape_headline
    if escapes:
        headline += f" · ⚠️ {escapes}"
    # an ok whose candidate tried to leave its job is not shown as a clean pass
    (st.error if not verdict.passed else st.warning if escapes else st.success)(headline)
    if verdict.source_line:
        st.caption(f"at candidate line {verdict.source_line}")
    if verdict.error_text:
        st.code(verdict.error_text[-4000:], language="text")
    if verdict.isolation.get("sandboxed"):
        st.caption(f"🔒 The candidate ran {verdict.isolation_summary}")
    for w in verdict.warnings:
        st.warning(w)
    if verdict.steps:
        st.markdown(" · ".join(
            f"{_STEP_ICON.get(s.status, '')} {s.name} ({units.seconds(s.seconds)})" for s in verdict.steps))
    tab_c, tab_s, tab_k, tab_p, tab_log = kept_tabs(
        ["Compile", "Structure", "Correctness", "Performance", "Worker output"], key=f"{key}_tabs")
    with tab_c:
        step = verdict.step("compile")
        if step and step.summary:
            st.write(step.summary)
        if verdict.kernels:
            st.dataframe([{
                "kernel": k.name, "registers": units.number(k.registers), "spills": units.number(k.spills),
                "shared memory (SLM)": units.size(k.shared_bytes), "local memory": units.size(k.local_bytes),
                "num_warps": units.number(k.num_warps), "num_stages": units.number(k.num_stages),
                "GRF mode": k.grf_mode or units.MISSING,
                "config": ", ".join(f"{a}={b}" for a, b in k.config.items()),
                "IR": ", ".join(sorted(k.ir)),
            } for k in verdict.kernels], hide_index=True, width="stretch")
        else:
            st.caption("no compiled-kernel metadata (the interpreter compiles nothing; the IR page compiles "
                       "the kernels for a GPU target instead)")
    with tab_s:
        step = verdict.step("structure")
        if step and step.summary:
            st.write(step.summary)
        if verdict.findings:
            st.dataframe([{"severity": f.severity, "rule": f.rule, "line": f.line,
                           "finding": f.message} for f in verdict.findings],
                         hide_index=True, width="stretch")
        else:
            st.caption("no structure or integrity findings")
    with tab_k:
        for line in precision_lines(verdict.precision):
            st.caption(line)
        rows = []
        for run in verdict.correctness:
            worst_abs = max((o.max_abs_error or 0.0 for o in run.outputs), default=None)
            worst_rel = max((o.max_rel_error or 0.0 for o in run.outputs), default=None)
            first = next((o for o in run.outputs if o.first_mismatch is not None), None)
            factor = max((o.bound_factor or 0.0 for o in run.outputs if o.check == "float64"), default=0.0)
            rows.append({"variant": run.variant, "seed": run.seed, "inputs": inputs_label(run.distribution),
                         "against": run.against, "config": run.config or "",
                         "passed": "✅" if run.passed else "❌",
                         "max abs err": units.number(worst_abs), "max rel err": units.number(worst_rel),
                         "bound": f"float64 x{factor:g}" if factor else
                         f"rtol {units.number(run.rtol)}, atol {units.number(run.atol)}",
                         "KernelBench": "" if run.kernelbench is None else ("pass" if run.kernelbench else "fail"),
                         "first wrong element": "" if first is None else
                         f"output {first.index} {first.first_mismatch}: {_value(first.first_actual)} "
                         f"(expected {_value(first.first_expected)})", "note": run.note})
        if rows:
            st.dataframe(rows, hide_index=True, width="stretch")
        else:
            step = verdict.step("correctness")
            st.caption(step.summary if step and step.summary else "no correctness runs")
        if verdict.sizes:
            st.markdown("**Sizes checked**")
            st.dataframe([{"variant": e.variant, "sizes": ", ".join(f"{k}={v}" for k, v in e.sizes.items()),
                           "why": e.why, "what the kernels did": "\n".join(e.coverage),
                           "missed": "\n".join(e.gaps)} for e in verdict.sizes], hide_index=True, width="stretch")
        memcheck = verdict.step("memcheck")
        if memcheck is not None:  # the memory checker's call (Verify with memcheck); its findings: Structure
            (st.error if memcheck.status is StepStatus.FAILED else st.info)(f"memcheck: {memcheck.summary}")
    with tab_p:
        if verdict.performance:
            st.dataframe([{
                "variant": p.variant, "baseline": units.duration_us(p.baseline.median_us),
                "candidate": units.duration_us(p.candidate.median_us), "speedup": units.speedup(p.speedup),
                "call": p.call.text, "timed as": p.candidate.method,
                "TFLOP/s": units.tflops(p.tflops), "bandwidth": units.bandwidth(p.gbps),
                "roofline": units.percent(p.roofline_fraction, decimals=1),
                "cv": units.percent(p.candidate.cv, decimals=1), "launch-bound": "yes" if p.launch_bound else "",
                "PyTorch eager": units.duration_us(p.reference.median_us if p.reference else None),
                "suspect": p.suspect,
            } for p in verdict.performance], hide_index=True, width="stretch")
        else:
            step = verdict.step("performance")
            st.info(step.summary if step and step.summary else "performance not measured")
    with tab_log:
        if verdict.stdout:
            st.code(verdict.stdout[-4000:], language="text")
        if verdict.stderr:
            st.code(verdict.stderr[-4000:], language="text")
        if not verdict.stdout and not verdict.stderr:
            st.caption("the worker printed nothing")


#: Backgrounds of the side-by-side diff: whole changed lines, and the changed part within them.
_DIFF_BG = {"del": "#ffebe9", "add": "#e6ffec", "del_mark": "#ffc1bd", "add_mark": "#abf2bc", "none": "#f6f8fa"}

#: Pygments lexers for the languages the diffs show (IR stages included).
_LEXERS = {"python": "python", "llvm": "llvm", "llir": "llvm", "ptx": "ptx", "amdgcn": "gas", "text": "text",
           "ttir": "text", "ttgir": "text", "spvdis": "text"}


def _highlighter(language: str) -> Callable[[str, list[tuple[int, int]] | None, str], str]:
    """A function turning one source line into HTML: syntax colours from Pygments and, where
    ``marks`` (character ranges) are given, those ranges on the ``mark_bg`` background (the
    within-line change of a diff)."""
    from pygments.lexers import get_lexer_by_name
    from pygments.styles import get_style_by_name

    lexer = get_lexer_by_name(_LEXERS.get(language, language), stripnl=False, ensurenl=False)
    style = get_style_by_name("default")

    def css(ttype: Any) -> str:
        st_ = style.style_for_token(ttype)
        out = f"color:#{st_['color']};" if st_.get("color") else ""
        if st_.get("bold"):
            out += "font-weight:bold;"
        if st_.get("italic"):
            out += "font-style:italic;"
        return out

    def render(line: str, marks: list[tuple[int, int]] | None = None, mark_bg: str = "") -> str:
        if not line:
            return ""
        edges = sorted({0, len(line), *(p for m in (marks or []) for p in m)})
        marked = [any(a <= lo < b for a, b in (marks or [])) for lo in edges[:-1]]
        pieces: list[str] = []
        pos = 0
        for ttype, text in lexer.get_tokens(line):
            while text:
                seg = next(i for i in range(len(edges) - 1) if edges[i] <= pos < edges[i + 1])
                take = min(len(text), edges[seg + 1] - pos)
                chunk, text = text[:take], text[take:]
                style_text = css(ttype) + (f"background:{mark_bg};border-radius:2px;" if marked[seg] else "")
                esc = html.escape(chunk)
                pieces.append(f"<span style='{style_text}'>{esc}</span>" if style_text else esc)
                pos += take
        return "".join(pieces)

    return render


def side_by_side_html(current: str, candidate: str, *, language: str = "python",
                      context: int | None = None, labels: tuple[str, str] = ("current", "candidate")) -> str:
    """A two-column HTML table of the diff with syntax highlighting: removed lines on a red
    background, added lines on green, and within a changed line the part that changed on a
    stronger shade (token-level, ``diffmerge.inline_changes``); hunks numbered. With
    ``context``, unchanged runs longer than twice that are folded; ``labels`` head the columns."""
    hl = _highlighter(language)
    rows_data = side_by_side(current, candidate)
    keep = [True] * len(rows_data)
    if context is not None:
        changed = [i for i, r in enumerate(rows_data) if r.kind != "equal"]
        near = set()
        for c in changed:
            near.update(range(c - context, c + context + 1))
        keep = [i in near for i in range(len(rows_data))]
    rows = []
    folded = False
    for i, r in enumerate(rows_data):
        if not keep[i]:
            if not folded:
                rows.append("<tr><td class='n'>…</td><td></td><td></td><td class='n'>…</td><td></td></tr>")
            folded = True
            continue
        folded = False
        left_bg = {"equal": "", "replace": _DIFF_BG["del"], "delete": _DIFF_BG["del"], "insert": _DIFF_BG["none"]}[r.kind]
        right_bg = {"equal": "", "replace": _DIFF_BG["add"], "delete": _DIFF_BG["none"], "insert": _DIFF_BG["add"]}[r.kind]
        marks_l = marks_r = None
        if r.kind == "replace" and r.left_no and r.right_no:
            marks_l, marks_r = inline_changes(r.left, r.right)
        tag = f"<b>#{r.hunk}</b>" if r.hunk is not None else ""
        left = hl(r.left, marks_l, _DIFF_BG["del_mark"]) if r.left_no else ""
        right = hl(r.right, marks_r, _DIFF_BG["add_mark"]) if r.right_no else ""
        rows.append(
            f"<tr><td class='n'>{r.left_no or ''}</td><td style='background:{left_bg}'><pre>{left}</pre></td>"
            f"<td class='n'>{tag}</td><td class='n'>{r.right_no or ''}</td>"
            f"<td style='background:{right_bg}'><pre>{right}</pre></td></tr>")
    return ("<style>.xf-diff{border-collapse:collapse;width:100%;font-size:12px;table-layout:fixed}"
            ".xf-diff td{padding:0 4px;vertical-align:top;border:none}.xf-diff pre{margin:0;"
            "white-space:pre-wrap;word-break:break-all;font-family:monospace;background:none}"
            ".xf-diff .n{color:#888;text-align:right;width:3em}.xf-diff th{text-align:left}</style>"
            f"<table class='xf-diff'><tr><th class='n'></th><th>{html.escape(labels[0])}</th><th class='n'>hunk</th>"
            f"<th class='n'></th><th>{html.escape(labels[1])}</th></tr>" + "".join(rows) + "</table>")


def diff_view(current: str, candidate: str, *, key: str, hunk_choice: bool = True,
              accepted: list[int] | None = None) -> list[int] | None:
    """Show current vs candidate side by side with syntax highlighting (changed lines marked,
    long unchanged runs folded; both whole files in an expander), then each hunk with a
    checkbox. Returns the accepted hunk indices (``None`` when ``hunk_choice`` is off)."""
    hunks = diff_hunks(current, candidate)
    if hunks:
        st.html(side_by_side_html(current, candidate, context=4))
    with st.expander("Whole files side by side"):
        left, right = st.columns(2)
        with left:
            st.caption("current")
            st.code(current, language="python", line_numbers=True)
        with right:
            st.caption("candidate")
            st.code(candidate, language="python", line_numbers=True)
    if not hunk_choice:
        return None
    return hunk_checkboxes(current, candidate, key=key, accepted=accepted)


def hunk_checkboxes(current: str, candidate: str, *, key: str, accepted: list[int] | None = None) -> list[int]:
    """Each hunk of current -> candidate with a checkbox (ticked: ``accepted``, or all) and its
    removed and added lines. Returns the ticked hunk indices."""
    hunks = diff_hunks(current, candidate)
    if not hunks:
        st.info("The candidate is identical to the current version.")
        return []
    st.markdown(f"**Hunks** ({len(hunks)}): untick a hunk to keep the current code there, then "
                "apply the selection (the merged code is verified again before it can be approved).")
    chosen: list[int] = []
    for h in hunks:
        default = True if accepted is None else h.index in accepted
        if st.checkbox(f"hunk {h.index}", value=default, key=f"{key}_hunk_{h.index}",
                       help=f"{h.header}: accept this change"):
            chosen.append(h.index)
        cols = st.columns(2)
        with cols[0]:
            st.code("\n".join(h.removed) or "(nothing)", language="python")
        with cols[1]:
            st.code("\n".join(h.added) or "(nothing)", language="python")
    return chosen


def session_roofline(session: Any, *, key: str, chosen: int | None = None, device_type: str = "cpu") -> None:
    """The roofline of the session's target (its hardware profile: peak, bandwidth, ridge point)
    on log-log axes with each measured version placed (``chosen``: the version index to
    highlight); without measured versions, where the benchmark variant sits by its spec."""
    from xeforge_core.ui.benchdata import roofline_points, session_rows
    from xeforge_core.ui.charts import roofline_figure

    rows = cached(session, "bench_rows", lambda: session_rows(session))
    problem = cached(session, "problem_head", lambda: session.problem("head"))
    points, dtype = roofline_points(rows, problem, device_type=device_type, chosen=chosen)
    measured = [p for p in points if p.tflops]
    # measured points belong on the roofline of the device that timed them; the plan's target
    # otherwise (the two differ when a session targets an Xe GPU and runs elsewhere)
    from xeforge_core.knowledge import load_knowledge

    profiles = load_knowledge().profiles
    timed_on = profiles.get(str(session.device.get("profile_id") or "")) if measured else None
    profile = timed_on or hardware_of(session.target)
    try:
        fig = roofline_figure(profile, dtype, points)
    except ValueError as exc:
        st.caption(f"No roofline: {exc}")
        return
    st.plotly_chart(fig, key=key)
    if not measured:
        st.caption(f"Roofline of the target, {profile.name}. No version of this session was timed (speed is "
                   "measured on a GPU): the dotted line is where the benchmark variant sits by its spec, an upper "
                   "bound on its intensity since the spec counts input bytes only.")
    else:
        st.caption(f"Roofline of {profile.name}{' (the device that timed them)' if timed_on else ' (the target)'}: "
                   "each timed version at its arithmetic intensity (the least traffic one call must cause) and "
                   "measured TFLOP/s.")


#: The script behind :func:`keyboard_shortcuts`: one keydown listener on the page (installed
#: once, kept across reruns), reading the current bindings from ``window.__xfKeys``; a key clicks
#: the button whose Streamlit key it is bound to (``.st-key-<key> button``), unless the user is
#: typing (an input, a text area, a select, an editable element) or holds a modifier, or the
#: button is disabled or absent.
_HOTKEY_SCRIPT = """
<script>
(() => {
  window.__xfKeys = %s;
  if (window.__xfKeysInstalled) return;
  window.__xfKeysInstalled = true;
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;
    const t = ev.target;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
    const widget = (window.__xfKeys || {})[ev.key.toLowerCase()];
    if (!widget) return;
    const button = document.querySelector(".st-key-" + widget + " button");
    if (!button || button.disabled) return;
    ev.preventDefault();
    button.click();
  });
})();
</script>
"""


def keyboard_shortcuts(bindings: dict[str, str]) -> None:
    """Bind single keys to buttons of the page: ``{"a": "opt_approve"}`` makes the key ``a``
    click the button with Streamlit key ``opt_approve``. Streamlit has no hotkeys of its own;
    this is a small script on the page (Streamlit's ``st.html`` with JavaScript, our own constant
    text, no user input in it). Keys do nothing while the user types in a field, with a
    modifier held, or when the button is disabled or not on the page."""
    import json

    st.html(_HOTKEY_SCRIPT % json.dumps({k.lower(): v for k, v in bindings.items()}), unsafe_allow_javascript=True)


def job_progress(job: BackgroundJob | None, *, key: str,
                 on_cancel: Callable[[], None] | None = None) -> None:
    """Show a background job's progress, refreshing every second while it runs, with a Cancel
    button (``on_cancel`` runs instead of a plain ``job.cancel()`` when given). When the job
    finishes, the whole page reruns once so that ``Workbench.poll`` applies its result."""
    if job is None:
        return

    @st.fragment(run_every=1.0 if not job.finished else None)
    def _panel() -> None:
        state = job.state
        if state is JobState.RUNNING:
            frac = job.fraction
            st.progress(frac if frac is not None else 0.0,
                        text=f"{job.label}: {job.last_message or 'working'} ({units.seconds(job.elapsed)})")
            if st.button("Cancel", key=f"{key}_cancel_{job.id}"):
                (on_cancel or job.cancel)()
                st.rerun(scope="app")
            with st.expander("progress log", expanded=False):
                st.text("\n".join(f"{e.elapsed:6.1f}s  {e.message}" for e in job.events[-30:]))
            return
        done_key = f"_job_done_{job.id}"
        if not st.session_state.get(done_key):
            st.session_state[done_key] = True
            if not job.meta.get("applied"):
                st.rerun(scope="app")
        if state is JobState.CANCELLED:
            st.warning(f"{job.label}: cancelled after {units.seconds(job.elapsed)}")
        elif state is JobState.FAILED:
            st.error(f"{job.label} failed: {job.error}")

    _panel()


def page_setup(title: str, icon: str = "⚒️") -> Any:
    """Common start of every page: config, the workbench, finished jobs applied, queued
    messages shown, and the sidebar status. Returns the workbench."""
    st.set_page_config(page_title=f"{title} · Xe-Forge Studio", page_icon=icon, layout="wide")
    wb = get_workbench()
    if wb.device is None and wb.jobs.current("device") is None:
        wb.start_device_probe()
    for level, text in wb.poll():
        flash(level, text)
    sidebar_status(wb)
    st.title(f"{icon} {title}")
    show_flash()
    return wb


def sidebar_status(wb: Any) -> None:
    """Device, engine and session status in the sidebar (never blocks: the device probe runs
    as a background job)."""
    with st.sidebar:
        st.markdown("**Device**")
        if wb.device is not None:
            dev = wb.device
            st.caption(dev.label + (" · Triton interpreter: correctness can be trusted, timing is "
                                    "not measured" if dev.interpreter else ""))
            for w in getattr(dev, "warnings", []) or []:
                st.caption(f"⚠️ {w}")
        elif wb.device_error:
            st.caption(f"⚠️ probe failed: {wb.device_error}")
        else:
            job = wb.jobs.current("device")
            st.caption("probing in a worker…" if job is not None and not job.finished else "unknown")
            if job is not None and not job.finished:
                _poll_until_done(job, "sidebar_device")
        st.markdown("**Engine**")
        s = wb.settings
        spec = get_engine_spec(s.engine)
        label = f"{spec.name} ({s.model or 'no model set'})" if spec.needs_endpoint else f"{spec.name} ({spec.description})"
        st.caption(label)
        st.markdown("**Session**")
        if wb.session is not None:
            versions = cached(wb.session, "history", wb.session.history)
            st.caption(f"{wb.session.name} · {units.plural(len(versions), 'version')}")
        elif wb.loaded is not None:
            st.caption(f"none for the loaded kernel `{wb.loaded.name}`: start one (or resume one) on Home")
        else:
            st.caption("none: start or resume one on Home")
        running = wb.jobs.running()
        if running:
            st.caption("running: " + ", ".join(j.label for j in running))


def _poll_until_done(job: BackgroundJob, key: str) -> None:
    @st.fragment(run_every=1.0)
    def _tick() -> None:
        if job.finished and not st.session_state.get(f"_tick_done_{job.id}"):
            st.session_state[f"_tick_done_{job.id}"] = True
            st.rerun(scope="app")

    _tick()


def nav_link(page: str, label: str, icon: str | None = None) -> None:
    """A link to another page; silently absent when the page is run on its own (tests)."""
    with contextlib.suppress(Exception):  # a missing link must never break a page
        st.page_link(page, label=label, icon=icon)


def require_session(wb: Any) -> Any:
    """The open session, or an explanation and a stop of the page."""
    if wb.session is None:
        st.info("No session is open. On **Home**, load a kernel (a sample, a paste or an upload) and "
                "start a new session, or resume one.")
        nav_link("app.py", "Home", "🏠")
        st.stop()
    return wb.session


@st.cache_data(show_spinner=False, max_entries=16)
def _load_shipped(path: str, mtime: float) -> Any:
    from xeforge_core.ui.recorded import load_results

    return load_results(Path(path))


def recorded_results_picker(*, key: str, want: str = "problems") -> Any:
    """Choose results recorded on a GPU machine: one shipped under ``docs/measured/`` (the
    default) or a file the user opens (a pipeline benchmark ``results.json``, an ``xeforge
    batch`` summary CSV, a session ``report.json``, a Flash Attention benchmark ``results.json``).
    Shows the provenance banner (device, date,
    library versions; marked recorded, not live) and the summary. ``want="trajectory"`` lists
    only results that hold the Flash Attention trajectory. Returns the
    :class:`~xeforge_core.ui.recorded.RecordedResults`, or ``None``."""
    from xeforge_core.ui.recorded import MAX_RESULTS_BYTES, RecordedError, load_results, shipped_results

    shipped = shipped_results()
    options = [label for label in shipped if want != "trajectory" or "Flash Attention" in label or "pipeline" in label]
    if want == "trajectory":  # the benchmark of every step first: the pipeline's --quick run times only two
        options.sort(key=lambda label: "pipeline" in label)
    options += ["Open a results file…"]
    choice = st.selectbox("Recorded results", options, key=f"{key}_recorded_pick")
    results = None
    if choice in shipped:
        path = shipped[choice]
        try:
            results = _load_shipped(str(path), path.stat().st_mtime)
        except (RecordedError, OSError) as exc:
            st.error(f"Cannot read {path.name}: {exc}")
            return None
    else:
        up = st.file_uploader("Results file (results.json, summary .csv, report.json)", type=["json", "csv"],
                              key=f"{key}_recorded_upload")
        if up is None:
            st.caption("Open a results file produced on a GPU machine: `benchmarks/bench_pipeline.py --out DIR` "
                       "writes DIR/results.json, `xeforge batch DIR --out summary.csv` a summary, and History "
                       "exports a session's report.json.")
            return None
        if up.size > MAX_RESULTS_BYTES:
            st.error(f"Not opened: {up.name} is {units.size_exact(up.size)}; the limit is "
                     f"{units.size_exact(MAX_RESULTS_BYTES)}")
            return None
        try:
            results = load_results(up.getvalue(), name=up.name)
        except RecordedError as exc:
            st.error(f"Not opened: {exc}")
            return None
    prov = results.provenance
    st.info(f"**RECORDED, not live.** {prov.banner()}", icon="📼")
    for note in prov.notes:
        st.caption(note)
    if results.summary:
        cols = st.columns(min(len(results.summary), 4))
        for i, (label, value) in enumerate(results.summary.items()):
            cols[i % len(cols)].metric(label, value)
    return results
