"""IR: every kernel of a version compiled ahead of time for a chosen GPU target (TTIR, TTGIR,
LLVM IR, PTX / AMDGCN / SPIR-V), with the registers, spills and shared memory the compiler
reports, and the diff of one IR between two versions. No device is needed for NVIDIA and AMD
targets: the compile runs in a worker process here (``xeforge_core.ir``). IR recorded by GPU
verifications is shown too."""

from __future__ import annotations

import streamlit as st

from xeforge_core import units
from xeforge_core.ir.present import (
    diff_summary,
    ir_diff,
    pair_kernels,
    resource_compare_rows,
    resource_rows,
    specialization_text,
    stage_choices,
    stage_text,
)
from xeforge_core.ir.targets import STAGE_NAMES, why_unavailable
from xeforge_core.ui.irview import IRRequest, collect, ir_sources, start_compile, target_label, target_options
from xeforge_core.ui.render import cached, job_progress, nav_link, page_setup, side_by_side_html

wb = page_setup("IR", "🔬")

LANG = {"llir": "llvm", "ptx": "text", "amdgcn": "text"}
MAX_SHOWN_LINES = 4000

sources = ir_sources(wb, history=cached(wb.session, "history", wb.session.history) if wb.session else None,
                     candidates=cached(wb.session, "candidates", wb.session.candidates) if wb.session else None)
if not sources:
    st.info("Load a kernel on **Home** (a sample, a paste or an upload) to compile its kernels here.")
    nav_link("app.py", "Home", "🏠")
    st.stop()


def _compiled_here() -> None:
    """The chosen version compiled for the chosen target in the IR worker (background job)."""
    store: dict = st.session_state.setdefault("_ir_reports", {})
    collect(wb, store)
    local = wb.device_type()

    st.caption("Each Triton kernel that forward() launches is compiled ahead of time for the chosen target, "
               "in a worker process on this machine: the launch's argument types and specialization are "
               "recorded on CPU tensors of the spec's shapes, no kernel runs, and no GPU is needed for NVIDIA "
               "and AMD targets.")
    targets = {t.id: t for t in target_options()}
    c1, c2, c3 = st.columns([3, 3, 1])
    key_a = c1.selectbox("Version", list(sources), format_func=lambda k: sources[k].label, key="ir_version")
    target = targets[c2.selectbox("Target", list(targets), format_func=lambda t: target_label(targets[t]),
                                  key="ir_target")]
    config = int(c3.number_input("Autotune config", min_value=0, max_value=63, value=0, key="ir_config",
                                 help="which config of an @triton.autotune kernel to compile (0 = the first): "
                                      "without a device there is no benchmark to choose one"))
    others = [k for k in sources if k != key_a]
    key_b = st.selectbox("Compare with", [None] + others, key="ir_compare",
                         format_func=lambda k: "nothing" if k is None else sources[k].label)

    missing = why_unavailable(target)
    if missing:
        st.warning(f"**No IR for {target.label} here.** {missing}.")
        return

    def _request(key: str) -> IRRequest:
        src = sources[key]
        return IRRequest(source=src.load(), problem=src.problem, target=target, config=config)

    wanted = [_request(key_a)] + ([_request(key_b)] if key_b else [])
    for req in wanted:
        if req.key not in store:
            try:
                hit = req.cached(local)
            except Exception as exc:  # a bad variant or spec: say so, keep the page
                st.error(f"Cannot compile {sources[key_a].label}: {exc}")
                return
            if hit is not None:
                store[req.key] = hit
    todo = [r for r in wanted if r.key not in store]
    job = wb.jobs.current("ir")
    running = job is not None and not job.finished
    if todo and not (running and set(job.meta.get("keys", [])) >= {r.key for r in todo}):
        job = start_compile(wb, todo, local_device=local)
        running = True
    job_progress(job if running else None, key="ir_job", on_cancel=lambda: wb.cancel("ir"))

    report = store.get(wanted[0].key)
    if report is None:
        st.info(f"Compiling {sources[key_a].label} for {target.label} in a worker process… "
                "(a GEMM takes a few seconds per kernel; the result is cached)")
        return

    (st.success if report.ok else st.error)(f"**{report.headline}**")
    for note in report.notes:
        st.caption(note)
    dims = ", ".join(f"{k}={v}" for k, v in report.variant_dims.items())
    built = sum(1 for k in report.kernels if not k.error)
    st.caption(f"{units.plural(report.launches, 'launch')} recorded"
               + (f" at {dims}" if dims else "") + f"; {built} of {units.plural(len(report.kernels), 'kernel')} compiled"
               + (" (cached)" if report.cached else f" in {units.seconds(report.seconds)}"))
    if report.reason:
        st.error(f"{report.kind.replace('_', ' ')}: {report.reason}")
        if report.error_text:
            with st.expander("Error output"):
                st.code(report.error_text[-6000:], language="text")
    if report.not_launched:
        st.caption("Defined but not launched by forward() at this shape: " + ", ".join(report.not_launched))
    if not report.kernels:
        return

    other = store.get(wanted[1].key) if key_b else None
    st.subheader("Resources reported by the compiler")
    if other is not None:  # both versions, kernel by kernel (a renamed kernel is paired by launch order)
        st.caption(f"{sources[key_b].label} → {sources[key_a].label}")
        st.dataframe(resource_compare_rows(other, report, old_name=sources[key_b].label,
                                           new_name=sources[key_a].label),
                     hide_index=True, width="stretch", key="ir_resources")
    else:
        st.dataframe(resource_rows(report), hide_index=True, width="stretch", key="ir_resources")
    st.caption("registers per thread; spills in bytes per thread; shared memory per program, as launched "
               "(SLM on Intel GPUs). — means the compiler did not report it.")

    labels = [k.label for k in report.kernels]
    k1, k2, k3 = st.columns([3, 3, 2])
    kernel_label = k1.selectbox("Kernel", labels, key="ir_kernel")
    kernel = report.kernel(kernel_label)
    if kernel.error:
        st.error(f"{kernel.label} does not compile for {target.label}: {kernel.error}")
        if kernel.error_text:
            st.code(kernel.error_text[-6000:], language="text")
        return
    stages = stage_choices(kernel, target.stages)
    stage = k2.radio("IR", stages, index=stages.index("ttgir") if "ttgir" in stages else 0, horizontal=True,
                     format_func=lambda s: STAGE_NAMES.get(s, s), key="ir_stage")
    locations = k3.checkbox("Keep source locations", value=False, key="ir_locations",
                            help="loc(...) in TTIR/TTGIR, !dbg in LLVM IR, .loc in PTX")
    with st.expander("Launch signature and specialization"):
        st.write(specialization_text(kernel))
        if kernel.autotune:
            st.caption(f"@triton.autotune: config {kernel.autotune['index'] + 1} of {kernel.autotune['count']}: "
                       f"{kernel.autotune['config']}")
    text = stage_text(kernel, stage, locations=locations) or ""
    lines = text.splitlines()
    st.markdown(f"**{STAGE_NAMES.get(stage, stage)} of `{kernel.name}` for {target.description}** · "
                f"{units.plural(len(lines), 'line')}" + ("" if locations else " (source locations stripped)"))
    shown = "\n".join(lines[:MAX_SHOWN_LINES])
    st.code(shown, language=LANG.get(stage, "text"), line_numbers=True, height=560 if len(lines) > 40 else "content")
    if len(lines) > MAX_SHOWN_LINES:
        st.caption(f"First {MAX_SHOWN_LINES:,} of {len(lines):,} lines shown; the download has all of them.")
    st.download_button(f"Download {STAGE_NAMES.get(stage, stage)}", text, file_name=f"{kernel.name}.{target.id}.{stage}",
                       key="ir_download")

    # ------------------------------------------------------------------ diff
    if key_b:
        st.subheader(f"Diff: {sources[key_b].label} → {sources[key_a].label}")
        if other is None:
            st.info(f"Compiling {sources[key_b].label} for {target.label}…")
        else:
            pair = next(((o, n) for o, n in pair_kernels(other, report) if n.label == kernel.label), None)
            if pair is not None and pair[0].name != kernel.name:
                st.caption(f"`{pair[0].name}` in {sources[key_b].label} is `{kernel.name}` here (renamed; paired "
                           "by launch order)")
            if pair is None:
                st.info(f"{sources[key_b].label} has no kernel {kernel.label} at this shape.")
            elif pair[0].error:
                st.warning(f"{kernel.label} does not compile in {sources[key_b].label}: {pair[0].error}")
            else:
                got = ir_diff(pair[0], pair[1], stage, old_name=sources[key_b].label, new_name=sources[key_a].label,
                              locations=locations)
                if got is None:
                    st.info(f"{sources[key_b].label} has no {STAGE_NAMES.get(stage, stage)}.")
                else:
                    patch, count = got
                    st.markdown(f"**{diff_summary(count, stage, locations=locations)}**")
                    if count.identical:
                        st.success("Identical.")
                    else:
                        with st.container(height=600):
                            st.html(side_by_side_html(stage_text(pair[0], stage, locations=locations) or "",
                                                      text, language=stage, context=3,
                                                      labels=(sources[key_b].label, sources[key_a].label)))
                        with st.expander("Unified diff"):
                            st.code(patch, language="diff")


def _recorded_by_verifications() -> None:
    """IR that verifications on a GPU kept in the session's verdicts (read as stored)."""
    recorded = {}
    if wb.session is not None:
        for c in reversed(cached(wb.session, "candidates", wb.session.candidates)):
            if c.verdict is not None and any(k.ir for k in c.verdict.kernels):
                dev = c.verdict.device or {}
                recorded[c.id] = (f"candidate {c.id} · {c.stage} · verified on {dev.get('name') or dev.get('type', '?')}",
                                  c.verdict)
    if not recorded:
        st.caption("No verification on a GPU has kept IR in this session (on the cpu interpreter nothing is "
                   "compiled; the tab beside this one compiles for a GPU target instead).")
        return
    pick = st.selectbox("Candidate", list(recorded), format_func=lambda c: recorded[c][0], key="ir_rec")
    kernels = {k.name: k for k in recorded[pick][1].kernels if k.ir}
    kname = st.selectbox("Kernel", list(kernels), key="ir_rec_kernel")
    kinds = sorted(kernels[kname].ir)
    kind = st.selectbox("IR", kinds, format_func=lambda s: STAGE_NAMES.get(s, s), key="ir_rec_kind")
    st.code(kernels[kname].ir[kind], language=LANG.get(kind, "text"), line_numbers=True)


tab_here, tab_rec = st.tabs(["Compiled here for a GPU target", "Recorded by GPU verifications"])
with tab_here:
    _compiled_here()
with tab_rec:
    _recorded_by_verifications()
