"""Xe-Forge Studio: the entry point (``streamlit run app.py``) and its Home page.

Home: load a kernel (paste, upload or sample), read the parsed problem, check the device and
the engine settings, and start or resume an optimization session. The other pages live in
``pages/`` and are registered in the navigation below.

This app only renders state and calls ``xeforge_core``; no kernel code runs here.
"""

from __future__ import annotations

import streamlit as st

from xeforge_core import units
from xeforge_core.engines.registry import ENGINES
from xeforge_core.ui.devicetext import INTERPRETER_SENTENCE, doctor_advice, doctor_headline
from xeforge_core.ui.problemview import smaller_ci_offer, spec_editor, variants_table
from xeforge_core.ui.render import cached, cached_sessions, flash, kept_tabs, nav_link, page_setup
from xeforge_core.ui.validate import MAX_SOURCE_BYTES, MAX_SPEC_BYTES, InputError, size_note
from xeforge_core.ui.workbench import Workbench, WorkbenchError, sample_titles


@st.cache_data(show_spinner=False, max_entries=32)
def _module_facts(source: str) -> object:
    """The static facts of a module (``read_module``: an AST walk, no code run), per source text."""
    from xeforge_core.problem import read_module

    return read_module(source)


def _problem_summary(wb: Workbench) -> None:
    """The parsed problem: kernels, inputs, variants with flop and arithmetic intensity."""
    loaded = wb.loaded
    problem = loaded.problem
    st.subheader(f"Problem: {problem.name}")
    st.caption(f"from {wb.source_label}")
    facts = _module_facts(loaded.source)
    cols = st.columns(3)
    cols[0].metric("Triton kernels", len(facts.kernels))
    cols[1].metric("Kernel launches", len(facts.launches))
    cols[2].metric("Variants", len(problem.spec.variants) if problem.spec else 1)
    if facts.kernels:
        st.dataframe([{"kernel": k.name, "line": k.line, "parameters": ", ".join(k.params),
                       "autotuned": "yes" if k.autotuned else ""} for k in facts.kernels],
                     hide_index=True, width="stretch")
    else:
        st.warning("No `@triton.jit` kernel found in this module: a plain-PyTorch Model. Start a session, "
                   "then **Start from PyTorch** on Optimize writes TorchInductor's Triton kernels as version 1 "
                   "(`xeforge optimize --engine rules` does the same).")
    spec = problem.spec
    if spec is None:
        st.info("No spec: inputs come from the module's own `get_inputs()` (one variant, `module`). "
                "Add a YAML spec for shape variants, flop and tolerances.")
    else:
        st.markdown("**Inputs**")
        st.dataframe([{"input": n, "shape": "[" + ", ".join(map(str, i.shape)) + "]", "dtype": i.dtype}
                      for n, i in spec.inputs.items()], hide_index=True, width="stretch")
        st.caption("Tolerances: “dtype default” means the verifier's tolerance for the output dtype "
                   "(the spec gives none).")
        variants_table(wb)
        st.caption("Arithmetic intensity here is flop per byte of the forward() inputs the spec declares; "
                   "weights held by the module and the outputs are not in the spec, so the true intensity "
                   "is lower (the verdicts' GB/s and roofline position use the same byte count).")
    smaller_ci_offer(wb, key="home")
    spec_editor(wb, key="home")
    st.caption("Reference: " + ("PyTorch reference given" if problem.reference else "none"))
    with st.expander("Kernel source"):
        st.code(loaded.source, language="python", line_numbers=True)


@st.cache_resource(show_spinner=False, ttl=600)
def _isolation() -> object:
    """How the verification workers are isolated on this machine (``sandbox.isolation``: one
    sandboxed probe per server process, about 0.1 s)."""
    from xeforge_core.sandbox import isolation

    return isolation()


@st.cache_resource(show_spinner=False)
def _sample_titles() -> dict[str, str]:
    """The bundled samples (read once per server: they ship with the code)."""
    return sample_titles()


def _loaded(wb: Workbench, message: str) -> None:
    """Say what was loaded and, when that closed the session of another kernel, that it did."""
    flash("success", message)
    if wb.detached:
        flash("info", f"The session {wb.detached} (another kernel) is closed and stays in the workspace: resume "
                      f"it below, or start a new session for {wb.loaded.name}.")


def home() -> None:
    """The Home page."""
    wb = page_setup("Xe-Forge Studio", "⚒️")
    st.caption("Optimize Triton kernels for Intel Xe GPUs stage by stage: every candidate is verified "
               "(compile, structure, correctness, speed) in an isolated worker, and every decision is "
               "kept in git.")

    # ------------------------------------------------------------------ 1. load
    st.header("1 · Load a kernel")
    tab_sample, tab_paste, tab_upload = kept_tabs(["Sample", "Paste", "Upload"], key="home_load_tab")
    with tab_sample:
        titles = _sample_titles()
        choice = st.selectbox("Sample kernel", list(titles), key="home_sample", persist_state="session",
                              format_func=lambda n: f"{n} · {titles[n]}" if titles.get(n) else n)
        if st.button("Load sample", key="home_load_sample", type="primary"):
            try:
                wb.load_sample(choice)
                _loaded(wb, f"Loaded sample {choice}.")
            except Exception as exc:  # a broken sample must not break the page
                flash("error", f"Could not load sample {choice}: {exc}")
            st.rerun()
    with tab_paste:
        st.caption("A KernelBench-style module: `class Model(nn.Module)` launching `@triton.jit` kernels, "
                   "`get_inputs()`, `get_init_inputs()`. The spec is optional.")
        # No max_chars: Streamlit's text area drops a paste longer than max_chars altogether
        # (the box stays empty, silently). The size is checked here instead, first, and the
        # refusal names the size and the limit.
        # The boxes keep their text across reruns and page switches (persist_state), so a refused
        # or loaded paste is fixed in place, never pasted again.
        pasted = st.text_area("Kernel module (Python)", height=260, key="home_paste_src", persist_state="session")
        st.caption("Size: " + size_note(pasted, limit=MAX_SOURCE_BYTES))
        if "_home_paste_spec_next" in st.session_state:  # a spec edited below shows here too
            st.session_state["home_paste_spec"] = st.session_state.pop("_home_paste_spec_next")
        pasted_spec = st.text_area("Spec (YAML, optional)", height=140, key="home_paste_spec",
                                   persist_state="session")
        if pasted_spec:
            st.caption("Spec size: " + size_note(pasted_spec, limit=MAX_SPEC_BYTES))
        pasted_name = st.text_input("Name", value="kernel", key="home_paste_name", persist_state="session")
        if st.button("Load pasted kernel", key="home_load_paste", type="primary"):
            try:
                wb.load_text(pasted, spec_text=pasted_spec or None, name=pasted_name or "kernel")
                _loaded(wb, "Loaded the pasted kernel.")
                st.rerun()
            except InputError as exc:
                st.error(f"Not loaded: {exc}")
    with tab_upload:
        # Streamlit states an upload limit in whole megabytes (its transport limit, 1 MB here, so a
        # larger file is refused by the browser); the real limits are ours, in the labels, and the
        # megabyte line is hidden so that the widget never states a limit that is not the one applied.
        st.html("<style>" + "".join(f".st-key-{k} [data-testid='stFileUploaderDropzoneInstructions']{{display:none}}"
                                    for k in ("home_up_py", "home_up_yaml", "home_up_ref")) + "</style>")
        up_py = st.file_uploader(f"Kernel (.py, at most {units.size(MAX_SOURCE_BYTES)})", type=["py"],
                                 key="home_up_py", max_upload_size=1)
        up_yaml = st.file_uploader(f"Spec (.yaml, optional, at most {units.size(MAX_SPEC_BYTES)})",
                                   type=["yaml", "yml"], key="home_up_yaml", max_upload_size=1)
        up_ref = st.file_uploader(f"PyTorch reference (.py, optional, at most {units.size(MAX_SOURCE_BYTES)})",
                                  type=["py"], key="home_up_ref", max_upload_size=1)
        # refused as soon as a file arrives, before Load is pressed
        for up, limit in ((up_py, MAX_SOURCE_BYTES), (up_yaml, MAX_SPEC_BYTES), (up_ref, MAX_SOURCE_BYTES)):
            if up is not None and up.size > limit:
                st.error(f"Not loaded: uploaded file {up.name}: the file is {units.size_exact(up.size)}; "
                         f"the limit is {units.size_exact(limit)}")
        if st.button("Load upload", key="home_load_upload", type="primary"):
            if up_py is None:
                st.error("Not loaded: choose a kernel .py file first.")
            else:
                try:
                    wb.load_upload(up_py.name, up_py.getvalue(),
                                   yaml_name=up_yaml.name if up_yaml else None,
                                   yaml_data=up_yaml.getvalue() if up_yaml else None,
                                   ref_name=up_ref.name if up_ref else None,
                                   ref_data=up_ref.getvalue() if up_ref else None)
                    _loaded(wb, f"Loaded {up_py.name}.")
                    st.rerun()
                except InputError as exc:
                    st.error(f"Not loaded: {exc}")

    # ------------------------------------------------------------------ 2. problem
    st.header("2 · Problem")
    if wb.loaded is None:
        st.info("Load a kernel above to see its kernels, inputs, variants, flop and arithmetic intensity.")
    else:
        try:
            _problem_summary(wb)
        except Exception as exc:  # display only; the loaded problem stays
            st.error(f"Could not summarise the problem: {exc}")

    # ------------------------------------------------------------------ device
    st.header("3 · Device")
    if wb.device is not None:
        dev = wb.device
        st.markdown(f"**{dev.label}**" + (f" · {INTERPRETER_SENTENCE}" if dev.interpreter else ""))
        if dev.interpreter:
            st.info("On this machine the verdicts check compile, structure and correctness for real; "
                    "speed is measured on a GPU only. The IR page compiles kernels ahead of time for a "
                    "GPU target without one, and the Benchmarks and Flash Attention pages show results "
                    "recorded on a GPU.")
        saved = wb.cached_doctor_report()
        verdict = (saved or {}).get("verdict") or {}
        if verdict:
            st.caption(f"Doctor (last run): {doctor_headline(verdict, interpreter=dev.interpreter)} — "
                       f"{doctor_advice(verdict, interpreter=dev.interpreter)}")
        else:
            st.caption("The doctor has not been run on this device yet.")
    elif wb.device_error:
        st.warning(f"Device probe failed: {wb.device_error}")
    else:
        st.caption("Probing the device in a worker process…")
    iso = _isolation()
    if iso.sandboxed:
        st.caption(f"🔒 Candidates run {iso.summary}")
    else:
        st.warning(f"Candidates run {iso.summary}. Machine-written kernels are not sandboxed here: see the "
                   "README, “The sandbox”.")
    nav_link("pages/6_Device.py", "Device report and doctor", "🩺")

    # ------------------------------------------------------------------ 3. engine
    st.header("4 · Engine")
    s = wb.settings
    engine_labels = {e.name: f"{e.name}: {e.description}" for e in ENGINES}
    s.engine = st.radio("Engine", list(engine_labels), index=list(engine_labels).index(s.engine),
                        format_func=engine_labels.get, key="home_engine")
    with st.expander("LLM endpoint settings", expanded=s.engine == "llm" or bool(s.settings_error)):
        if s.settings_error:
            st.error(s.settings_error)
        s.endpoint = st.text_input("Base URL", value=s.endpoint, placeholder="https://host/v1",
                                   key="home_endpoint")
        s.model = st.text_input("Model", value=s.model, key="home_model")
        key = st.text_input("API key", value="", type="password", key="home_api_key",
                            help="Kept in this browser session's memory only: never written to the "
                                 "session history, caches or logs.")
        if key:
            s.api_key = key
            from xeforge_core.session import register_secret

            register_secret(key)
        st.caption("API key: " + ("set for this browser session" if s.api_key else
                                  "from the environment / .env" if s.key_configured else "not set"))
    s.max_iterations = int(st.number_input("CoVeR iterations per stage", 1, 10, s.max_iterations,
                                           key="home_iters"))
    if s.engine == "llm":
        ok, why = s.llm_ready()
        (st.success if ok else st.warning)("llm engine " + ("ready" if ok else f"not ready: {why}"))

    # ------------------------------------------------------------------ 4. session
    st.header("5 · Session")
    if wb.session is not None:
        n_versions = len(cached(wb.session, "history", wb.session.history))
        st.success(f"Open session: **{wb.session.name}** ({units.plural(n_versions, 'version')}) at "
                   f"`{wb.session.path}`")
        nav_link("pages/1_Optimize.py", "Go to Optimize", "🛠️")
    col_new, col_resume = st.columns(2)
    with col_new:
        st.markdown("**New session** for the loaded kernel")
        if st.button("Start new session", key="home_start", type="primary", disabled=wb.loaded is None):
            try:
                session = wb.start_session()
                flash("success", f"Session {session.name} started: commit 0 is the baseline. "
                                 f"Plan: {', '.join(session.plan) or 'empty (add stages on Optimize)'}.")
                idle = wb.nothing_to_do()
                if idle:
                    flash("warning", idle + " (the Manual tab on Optimize gives the exact prompt for any chat LLM)")
                st.rerun()
            except (WorkbenchError, InputError) as exc:
                st.error(str(exc))
            except Exception as exc:
                st.error(f"Could not start the session: {type(exc).__name__}: {exc}")
    with col_resume:
        st.markdown("**Resume** a session from the workspace")
        try:
            sessions = cached_sessions(wb)
        except Exception as exc:
            sessions = []
            st.error(f"Could not list sessions: {exc}")
        if sessions:
            labels = {x["path"]: f"{x['name']} · {units.plural(int(x['versions']), 'version')} · {x.get('created', '')}"
                      for x in sessions}
            picked = st.selectbox("Session", list(labels), format_func=labels.get, key="home_resume_pick",
                                  persist_state="session")
            if st.button("Resume", key="home_resume"):
                try:
                    wb.resume_session(picked)
                    flash("success", f"Resumed {wb.session.name}.")
                    st.rerun()
                except Exception as exc:
                    st.error(f"Could not resume: {exc}")
        else:
            st.caption(f"No sessions yet in `{wb.workspace}`.")


PAGES = [
    st.Page(home, title="Home", icon="🏠", default=True, url_path="home"),
    st.Page("pages/1_Optimize.py", title="Optimize", icon="🛠️"),
    st.Page("pages/2_History.py", title="History", icon="📜"),
    st.Page("pages/3_IR.py", title="IR", icon="🔬"),
    st.Page("pages/4_Knowledge.py", title="Knowledge", icon="📚"),
    st.Page("pages/5_Benchmarks.py", title="Benchmarks", icon="📈"),
    st.Page("pages/6_Device.py", title="Device", icon="🩺"),
    st.Page("pages/7_Flash_Attention.py", title="Flash Attention demo", icon="⚡"),
]

st.navigation(PAGES).run()
