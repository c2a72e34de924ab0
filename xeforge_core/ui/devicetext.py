"""One honest sentence about the device, shared by the Home page, the sidebar and the Device
page, so that they say what the doctor says.

On Triton's interpreter (the cpu device) kernels run as Python on the host: correctness can be
trusted, timing is not measured. The doctor's verdict (``xeforge_core.doctor.verdict``) carries
the same distinction in ``DeviceVerdict.timing``; a report saved before that field existed is
read with the device's own ``interpreter`` flag instead.
"""

from __future__ import annotations

from typing import Any

from xeforge_core.doctor.verdict import INTERPRETER_TIMING, headline_text

#: What the workbench says about a device that runs kernels in Triton's interpreter.
INTERPRETER_SENTENCE = ("kernels run in Triton's interpreter: correctness can be trusted, timing is "
                        "not measured")


def doctor_headline(verdict: dict[str, Any] | None, *, interpreter: bool) -> str:
    """The doctor's verdict as one line, e.g. ``"TRUSTED for correctness; timing not measured:
    Triton's interpreter runs kernels as Python on the host"``; ``""`` without a verdict."""
    if not verdict:
        return ""
    timing = verdict.get("timing") or (INTERPRETER_TIMING if interpreter else "measured")
    return headline_text(str(verdict.get("status") or "?"), str(timing))


def doctor_advice(verdict: dict[str, Any] | None, *, interpreter: bool) -> str:
    """The verdict's advice; a report saved before the timing field existed said "trusted for
    verification and timing" on the interpreter too, which is corrected here."""
    if not verdict:
        return ""
    advice = str(verdict.get("advice") or "")
    if interpreter and "timing" not in verdict and "verification and timing" in advice:
        advice = ("Every check passed: correctness can be trusted here. Timing is not measured: "
                  "Triton's interpreter runs kernels as Python on the host.")
    return advice
