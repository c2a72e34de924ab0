"""Knowledge: the rules by stage and target (each with its why and its before/after), a live
lint of the current kernel whose findings each carry their rule, and the hardware profiles side
by side, one section at a time. Everything comes from the knowledge base under ``knowledge/`` and ``xeforge_core.analysis``."""

from __future__ import annotations

import streamlit as st

from xeforge_core import units
from xeforge_core.ui.render import page_setup
from xeforge_core.ui.validate import MAX_SOURCE_BYTES, InputError, check_size
from xeforge_core.ui.workbench import stage_ids
from xeforge_core.units import plural

wb = page_setup("Knowledge", "📚")

try:
    from xeforge_core.knowledge import installed_triton_pointer_api, load_knowledge

    kb = load_knowledge()
except Exception as exc:
    st.error(f"The knowledge base cannot be loaded: {exc}")
    st.stop()

SEVERITY_ICON = {"error": "🔴", "warning": "🟠", "info": "🔵"}


def _rule_body(rule: object) -> None:
    """A rule's why, fix, before/after example and sources."""
    st.markdown(f"**Why.** {rule.why}")
    if rule.fix:
        st.markdown(f"**Fix.** {rule.fix}")
    try:
        before, after = rule.example_code(kb.root)
    except Exception as exc:
        before, after = "", ""
        st.caption(f"example unavailable: {exc}")
    if before or after:
        b, a = st.columns(2)
        b.caption("before")
        b.code(before, language="python")
        a.caption("after")
        a.code(after, language="python")
    st.caption("Sources: " + "; ".join(rule.sources))


def _lint() -> None:
    """A live lint of a kernel; each finding links to its rule."""
    sources = {}
    if wb.session is not None:
        sources["current version of the session"] = wb.session.source("head")
    if wb.loaded is not None:
        sources["loaded kernel"] = wb.loaded.source
    sources["paste a kernel here"] = None
    which = st.radio("Kernel to lint", list(sources), key="kb_lint_which", horizontal=True)
    source = sources[which]
    if source is None:
        source = st.text_area("Kernel module", height=240, key="kb_lint_paste")
        try:
            check_size(source, limit=MAX_SOURCE_BYTES, what="pasted kernel")
        except InputError as exc:
            st.error(f"Not linted: {exc}")
            source = None
    target = st.selectbox("Target", ["xpu", "cuda"], key="kb_lint_target")
    if source and source.strip():
        from xeforge_core.analysis import analyze

        analysis = analyze(source, target)
        if not analysis.issues:
            st.success("No rule violations found.")
        else:
            st.markdown(f"**{plural(len(analysis.issues), 'finding')}** "
                        f"({plural(analysis.count('error'), 'error')}, {plural(analysis.count('warning'), 'warning')}); "
                        f"stages with work: {', '.join(analysis.plan) or 'none'}")
            lines = source.splitlines()
            for issue in analysis.issues:
                rule = kb.rules.get(issue.rule_id)
                link = f"`{issue.rule_id}`"  # the rule's why, fix and example are in the expander below
                where = f"line {issue.line}" if issue.line else "module"
                st.markdown(f"{SEVERITY_ICON.get(issue.severity, '')} **{where}** · {link} · "
                            f"stage `{issue.stage}`: {issue.message}")
                if issue.line and 0 < issue.line <= len(lines):
                    st.code(f"{issue.line}: {lines[issue.line - 1]}", language="python")
                if issue.fix:
                    st.caption(f"fix: {issue.fix}" + (f" (codemod `{issue.codemod}`)" if issue.codemod else ""))
                if rule is not None:
                    with st.expander(f"Rule `{rule.id}`: {rule.title}"):
                        _rule_body(rule)
    else:
        st.caption("Nothing to lint yet.")


def _rules() -> None:
    """The rules by stage and target, each with its why, fix and before/after."""
    api = installed_triton_pointer_api()
    st.caption(f"Installed Triton {api.get('version', '?')}: "
               + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in api.items()
                           if isinstance(v, bool)))
    f1, f2, f3 = st.columns(3)
    stages_sel = f1.multiselect("Stages", stage_ids(), key="kb_rules_stages")
    target_sel = f2.selectbox("Target", ["any", "xpu", "cuda"], key="kb_rules_target")
    only_installed = f3.checkbox("Only rules for the installed Triton", value=False, key="kb_rules_triton")
    rules = kb.rules_for(target=None if target_sel == "any" else target_sel,
                         triton_version=api.get("version") if only_installed else None)
    if stages_sel:
        rules = [r for r in rules if r.stage in stages_sel]
    st.caption(plural(len(rules), "rule"))
    for rule in rules:
        st.subheader(f"{SEVERITY_ICON.get(rule.severity, '')} {rule.title}",
                     anchor=f"rule-{rule.id.replace('_', '-')}")
        st.caption(f"`{rule.id}` · stage `{rule.stage}` · targets {', '.join(rule.targets)} · "
                   f"Triton {rule.triton}" + (f" · lint `{rule.lint}`" if rule.lint else "")
                   + (f" · codemod `{rule.codemod}`" if rule.codemod else ""))
        _rule_body(rule)
        st.divider()


def _hardware() -> None:
    """The hardware profiles side by side."""
    ids = list(kb.profiles)
    chosen = st.multiselect("Profiles", ids, default=ids, key="kb_hw_pick",
                            format_func=lambda i: kb.profiles[i].name)
    if chosen:
        summaries = {kb.profiles[i].name: kb.profiles[i].summary() for i in chosen}
        keys: list[str] = []
        for s in summaries.values():
            for k in s:
                if k not in keys:
                    keys.append(k)

        def _cell(v: object) -> str:
            if isinstance(v, dict):
                return ", ".join(f"{k}: {x}" for k, x in v.items())
            if isinstance(v, list):
                return ", ".join(map(str, v))
            return "" if v is None else str(v)

        st.dataframe([{"property": k, **{name: _cell(s.get(k)) for name, s in summaries.items()}}
                      for k in keys], hide_index=True, width="stretch")
        for i in chosen:
            p = kb.profiles[i]
            if not p.supported:
                st.warning(f"{p.name}: not supported for this workload. Use instead: "
                           + "; ".join(p.use_instead))
            ridge = p.ridge_point("fp16")
            if ridge:
                st.caption(f"{p.name}: fp16 ridge point {units.intensity(ridge)} (above it a kernel is "
                           "compute-bound, below memory-bound)")


# One section at a time (not tabs): tabs send and render every rule's code blocks on each visit,
# which made this the slowest page to switch to (2-4 s in Chromium); a section renders only itself.
SECTIONS = {"Lint my kernel": _lint, "Rules": _rules, "Hardware profiles": _hardware}
section = st.radio("Section", list(SECTIONS), horizontal=True, key="kb_section", label_visibility="collapsed")
SECTIONS[section]()
