"""The loaded problem's variants with what each costs to check, the smaller ``ci`` offered when
the correctness variant is too big for the run device, and the spec editor (Home and Optimize).

The numbers come from :mod:`xeforge_core.variant_cost` (nothing runs); the edits go through
``Workbench.edit_spec`` (a new version of an open session) or a reload of the loaded kernel
with the new spec. Streamlit rendering only.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from xeforge_core import units
from xeforge_core.ui.review import code_hash
from xeforge_core.ui.validate import InputError
from xeforge_core.variant_cost import REFUSED_CALL_S, SLOW_CALL_S, derived_ci, variant_costs

_STATUS = {"ok": "✓ fits", "slow": "⚠️ slow", "refused": "✗ refused", "unknown": "unknown (no flop)"}


def variants_table(wb: Any) -> None:
    """Each variant of the loaded problem: dims, dtype, work, input size, arithmetic intensity,
    tolerances, and its cost: input elements and the estimated time of one forward call in
    Triton's interpreter, with whether a correctness variant fits it."""
    problem = wb.loaded.problem
    spec = problem.spec
    costs = {c.variant: c for c in variant_costs(problem)}
    rows = []
    for name, v in (spec.variants.items() if spec is not None else []):
        cost = costs.get(name)
        ai = (v.flop / v.bytes) if v.flop and v.bytes else None
        rows.append({"variant": name, "checks": "correctness" if cost and cost.correctness else "timing",
                     "dims": ", ".join(f"{k}={d}" for k, d in v.dims.items()),
                     "dtype": v.dtype or "", "work": units.flop(v.flop),
                     "input elements": units.number(cost.elements if cost else None),
                     "input bytes": units.size(v.bytes), "FLOP per input byte": units.intensity(ai),
                     "interpreter, per call (est.)": units.seconds(cost.interpreter_s if cost else None),
                     "on the interpreter": _STATUS[cost.status] if cost and cost.correctness else "",
                     "rtol": units.number(v.rtol, missing="dtype default"),
                     "atol": units.number(v.atol, missing="dtype default")})
    st.markdown("**Variants** (correctness is checked at `ci`; `bench-*` are timed on a GPU)")
    st.dataframe(rows, hide_index=True, width="stretch")
    st.caption(f"Interpreter times are estimates from the spec's flop and input elements at the interpreter's "
               f"measured rates; a verification runs each correctness variant for several seeds and input "
               f"distributions, baseline and candidate. Over {units.seconds(SLOW_CALL_S)} a call is slow; where "
               f"a call's FLOP or a check's calls take over {units.seconds(REFUSED_CALL_S)}, the verifier refuses "
               "the variant on the interpreter.")


def smaller_ci_offer(wb: Any, *, key: str) -> None:
    """When the run device is Triton's interpreter and a correctness variant is slow or refused
    there: say so at load, with a smaller ``ci`` derived from it and a button that writes it
    into the spec (a new version of an open session)."""
    loaded = wb.loaded
    interpreter = wb.device is None or wb.device.interpreter
    if loaded is None or not interpreter:
        return
    slow = [c for c in variant_costs(loaded.problem) if c.correctness and c.status in ("slow", "refused")]
    if not slow:
        return
    first = slow[0]
    verb = "the verifier refuses it there" if first.status == "refused" else "a verification will be slow"
    text = (f"Correctness variant `{first.variant}` needs {units.flop(first.flop)} per call"
            + (f" over {units.number(first.elements)} input elements" if first.elements else "")
            + f": about {units.seconds(first.interpreter_s)} per call in Triton's interpreter on this machine, "
            f"so {verb}.")
    offer = derived_ci(loaded.problem, loaded.spec_text)
    if offer is None:
        st.warning(text + " Edit the spec below (a smaller `ci`), or verify on a GPU.")
        return
    st.warning(text + f" A smaller `{offer.original}` derived from it: {offer.summary} "
               f"({units.flop(offer.cost.flop)}, about {units.seconds(offer.cost.interpreter_s)} a call; its "
               f"largest input {units.number(offer.cost.largest_input)} elements). The benchmark variants stay "
               "as they are.")
    where = "as a new version of the session" if wb.session is not None else "into the loaded spec"
    if st.button(f"Use the smaller {offer.original} (written {where})", key=f"{key}_use_ci"):
        _apply_spec(wb, offer.spec_text, key=key,
                    ok=f"`{offer.original}` reduced for the interpreter: {offer.summary}.")


def spec_editor(wb: Any, *, key: str) -> None:
    """The spec of the loaded kernel, editable: saved as a new version of the open session (the
    kernel unchanged), or into the loaded problem when no session is open. A bad spec is refused
    with its file, line, field and nearest valid key; nothing changes then."""
    loaded = wb.loaded
    if loaded is None:
        return
    current = loaded.spec_text or ""
    label = "Edit the spec" + (" (saved as a new version of the session)" if wb.session is not None else "")
    with st.expander(label, expanded=False):
        if wb.session is not None and not wb.session.spec_file:
            st.caption("This session was started without a spec; start a new session with one to add it.")
            return
        text = st.text_area("Spec (YAML)", value=current, height=320, key=f"{key}_spec_{code_hash(current)}")
        if st.button("Save spec", key=f"{key}_spec_save"):
            if text == current:
                st.info("The spec is unchanged.")
                return
            _apply_spec(wb, text, key=key, ok="Spec saved" + (" as a new version of the session."
                                                              if wb.session is not None else "."))


def _apply_spec(wb: Any, text: str, *, key: str, ok: str) -> None:
    from xeforge_core.ui.render import flash
    from xeforge_core.ui.workbench import WorkbenchError

    try:
        wb.edit_spec(text)
    except (InputError, WorkbenchError) as exc:
        st.error(f"Spec not saved: {exc}")
        return
    if wb.source_label == "pasted":  # the paste box shows the spec that is loaded
        st.session_state["_home_paste_spec_next"] = text
    flash("success", ok)
    st.rerun()


__all__ = ["smaller_ci_offer", "spec_editor", "variants_table"]
