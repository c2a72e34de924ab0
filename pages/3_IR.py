"""IR view: the compiled IR (TTIR, TTGIR, LLVM IR, PTX or SPIR-V) of any version's kernels, as
kept in the verdicts stored with the session, and the diff of one IR between two versions."""

from __future__ import annotations

import streamlit as st

from xeforge_core.ui.diffmerge import unified_patch
from xeforge_core.ui.render import page_setup, require_session

wb = page_setup("IR", "🔬")
session = require_session(wb)

IR_NAMES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX", "spv": "SPIR-V",
            "spvdis": "SPIR-V (disassembly)", "amdgcn": "AMDGCN"}
LANG = {"llir": "llvm", "ptx": "text", "ttir": "mlir", "ttgir": "mlir"}

# every version with a verdict, and every kept candidate with one
entries: dict[str, tuple[str, object]] = {}
for v in reversed(session.history()):
    verdict = None
    try:
        verdict = session.verdict_of(v.sha)
    except Exception:  # a version without a readable verdict has no IR to show
        verdict = None
    if verdict is not None:
        entries[v.sha] = (f"#{v.index} {v.short} · {v.stage or v.kind}", verdict)
for c in reversed(session.candidates()):
    if c.verdict is not None:
        entries[c.id] = (f"candidate {c.id} · {c.status}", c.verdict)
if wb.review is not None and wb.review.verdict is not None:
    entries["__review__"] = ("candidate under review", wb.review.verdict)


def _kernels(verdict: object) -> dict[str, dict[str, str]]:
    return {k.name: dict(k.ir) for k in getattr(verdict, "kernels", []) if k.ir}


with_ir = {k: v for k, v in entries.items() if _kernels(v[1])}
if not with_ir:
    device = getattr(wb.device, "label", "this device")
    st.info("No compiled IR is stored yet. IR comes from the verdicts of versions verified on a GPU "
            f"(cuda or xpu); on {device} "
            + ("kernels run in Triton's interpreter, which compiles nothing."
               if getattr(wb.device, "interpreter", False) else "no verdict kept IR so far.")
            + f" Versions with a verdict: {len(entries)}.")
    st.stop()

labels = {k: v[0] for k, v in with_ir.items()}
keys = list(with_ir)
c1, c2, c3 = st.columns(3)
a = c1.selectbox("Version", keys, format_func=labels.get, key="ir_a")
kernels_a = _kernels(with_ir[a][1])
kernel = c2.selectbox("Kernel", list(kernels_a), key="ir_kernel")
order = list(IR_NAMES)
kinds = sorted(kernels_a.get(kernel, {}), key=lambda k: (order.index(k) if k in order else len(order), k))
kind = c3.selectbox("IR", kinds, format_func=lambda k: IR_NAMES.get(k, k), key="ir_kind")
text = kernels_a.get(kernel, {}).get(kind, "")
st.caption(f"{len(text.splitlines())} lines")
st.code(text, language=LANG.get(kind, "text"), line_numbers=True)
st.download_button("Download this IR", text, file_name=f"{kernel}.{kind}", key="ir_dl")

st.subheader("Diff of this IR against another version")
b = st.selectbox("Other version", keys, index=min(1, len(keys) - 1), format_func=labels.get, key="ir_b")
other = _kernels(with_ir[b][1]).get(kernel, {}).get(kind)
if other is None:
    st.info(f"{labels[b]} has no {IR_NAMES.get(kind, kind)} for kernel {kernel}.")
else:
    patch = unified_patch(other, text, from_name=f"{labels[b]}/{kernel}.{kind}",
                          to_name=f"{labels[a]}/{kernel}.{kind}")
    if patch:
        st.code(patch, language="diff")
    else:
        st.success("Identical.")
