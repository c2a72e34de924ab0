"""Device: the doctor's report (stack, preflight battery, op coverage, experiments, verdict and
the measured way out) and the device fingerprint, with buttons to probe the device and run the
doctor again. Every check runs in a supervised child process, never in this one."""

from __future__ import annotations

import json

import streamlit as st

from xeforge_core import units
from xeforge_core.ui.devicetext import INTERPRETER_SENTENCE, doctor_advice, doctor_headline, fingerprint_rows
from xeforge_core.ui.render import job_progress, page_setup

wb = page_setup("Device", "🩺")

STATUS_ICON = {"ok": "✅", "error": "❌", "driver_error": "💥", "crash": "💀", "hang": "⏱️",
               "wrong": "⚠️", "skipped": "⏭️"}
VERDICT_STYLE = {"trusted": st.success, "degraded": st.warning, "unusable": st.error}

# ------------------------------------------------------------------ fingerprint
st.subheader("Device fingerprint")
c1, c2 = st.columns([3, 1])
with c2:
    if st.button("Probe again", key="dev_probe"):
        wb.start_device_probe(refresh=True)
        st.rerun()
probe_job = wb.jobs.current("device")
with c1:
    if wb.device is not None:
        dev = wb.device
        st.markdown(f"**{dev.label}**" + (f" · {INTERPRETER_SENTENCE}" if dev.interpreter else ""))
        st.dataframe(fingerprint_rows(dev.fingerprint), hide_index=True, width="stretch")
        if dev.profile:
            with st.expander("Hardware profile (knowledge base)"):
                st.json(dev.profile)
        for w in dev.warnings:
            st.warning(w)
    elif wb.device_error:
        st.error(f"The device probe failed: {wb.device_error}")
    else:
        st.caption("Probing the device in a worker process…")
job_progress(probe_job, key="probe")

# ------------------------------------------------------------------ doctor
st.subheader("Doctor")
st.caption("Can this device be trusted? The doctor checks the software stack, runs a preflight battery "
           "(matmul, reductions, indexing with casts, host/device copies, synchronisation, one Triton "
           "kernel), each in its own process with a timeout, and decides trusted / degraded / unusable "
           "from explicit criteria.")
doctor_job = wb.jobs.current("doctor")
running = doctor_job is not None and not doctor_job.finished
o1, o2, o3 = st.columns(3)
with_model = o1.checkbox("Also trace the loaded model's ops (coverage)", value=False,
                         key="dev_with_model", disabled=wb.loaded is None)
experiments = o2.checkbox("Run experiments on failing checks", value=False, key="dev_experiments")
if o3.button("Run the doctor", key="dev_run_doctor", type="primary", disabled=running):
    wb.start_doctor(with_model=with_model, experiments=experiments)
    st.rerun()
job_progress(doctor_job, key="doctor", on_cancel=lambda: wb.cancel("doctor"))
if wb.doctor_error:
    st.error(f"The doctor failed: {wb.doctor_error}")

report = None
if wb.doctor_report is not None:
    report = wb.doctor_report.to_dict() if hasattr(wb.doctor_report, "to_dict") else wb.doctor_report
else:
    report = wb.cached_doctor_report()
    if report is not None:
        st.caption("Showing the last saved report for this device.")

if report is None:
    st.info("No doctor report yet for this device: run the doctor.")
else:
    verdict = report.get("verdict") or {}
    interp = bool(getattr(wb.device, "interpreter", False)) or str(report.get("device", "")).startswith("cpu")
    if verdict:
        VERDICT_STYLE.get(verdict.get("status"), st.info)(
            f"**{doctor_headline(verdict, interpreter=interp)}** — {doctor_advice(verdict, interpreter=interp)}")
        st.dataframe([{"criterion": c.get("name"), "holds": "➖ not checked" if c.get("holds") is None else ("✅" if c.get("holds") else "❌"),
                       "evidence": c.get("evidence")} for c in verdict.get("criteria", [])],
                     hide_index=True, width="stretch")
    tab_b, tab_s, tab_c, tab_e, tab_w, tab_t = st.tabs(
        ["Preflight battery", "Stack", "Op coverage", "Experiments", "Way out", "Text report"])
    with tab_b:
        st.dataframe([{"": STATUS_ICON.get(r.get("status"), ""), "check": r.get("name"),
                       "op class": r.get("op_class"), "status": r.get("status"),
                       "time": units.seconds(r.get("seconds")), "detail": r.get("detail")}
                      for r in report.get("battery", [])], hide_index=True, width="stretch")
        for r in report.get("battery", []):
            if r.get("stack"):
                with st.expander(f"last Python stack of {r.get('name')}"):
                    st.code(r["stack"], language="text")
    with tab_s:
        stack = report.get("stack") or {}
        if stack.get("error"):
            st.error(stack["error"])
        for p in stack.get("problems", []):
            st.warning(p)
        st.dataframe([{"component": k, "version": str(v)} for k, v in (stack.get("versions") or {}).items()],
                      hide_index=True, width="stretch")
        libs = stack.get("runtime_libraries") or []
        if libs:
            st.markdown("**Runtime libraries loaded by a process that initialised the device**")
            st.dataframe(libs, hide_index=True, width="stretch")
        for n in stack.get("notes", []):
            st.caption(n)
    with tab_c:
        cov = report.get("coverage")
        if not cov:
            st.caption("No model traced: tick “Also trace the loaded model's ops” and run the doctor.")
        else:
            st.caption(f"{cov.get('source')} · variant {cov.get('variant')}")
            if cov.get("error"):
                st.error(cov["error"])
            st.dataframe([{"": STATUS_ICON.get(o.get("status"), ""), **o} for o in cov.get("ops", [])],
                         hide_index=True, width="stretch")
    with tab_e:
        exps = report.get("experiments") or []
        if not exps:
            st.caption("No experiments run (they re-run failing checks under changed runtime settings).")
        for e in exps:
            setting = e.get("setting") or {}
            st.markdown(f"**{setting.get('name')}** `{setting.get('env')}` — {setting.get('what')} "
                        f"(source: {setting.get('source')})")
            st.dataframe([{"check": r.get("name"), "status": r.get("status"), "detail": r.get("detail")}
                          for r in e.get("results", [])], hide_index=True, width="stretch")
    with tab_w:
        way = report.get("way_out")
        if not way:
            st.caption("No way out needed or measured (only for a device that is not trusted, with a model).")
        else:
            if way.get("error"):
                st.warning(way["error"])
            st.dataframe(way.get("options", []), hide_index=True, width="stretch")
    with tab_t:
        if hasattr(wb.doctor_report, "render_text"):
            st.code(wb.doctor_report.render_text(), language="text")
        st.download_button("Download the report (JSON)", json.dumps(report, indent=1),
                           file_name="doctor-report.json", mime="application/json", key="dev_dl")
