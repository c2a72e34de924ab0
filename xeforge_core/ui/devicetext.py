"""One honest sentence about the device, shared by the Home page, the sidebar and the Device
page, so that they say what the doctor says.

On Triton's interpreter (the cpu device) kernels run as Python on the host: correctness can be
trusted, timing is not measured. The doctor's verdict (``xeforge_core.doctor.verdict``) carries
the same distinction in ``DeviceVerdict.timing``; a report saved before that field existed is
read with the device's own ``interpreter`` flag instead.
"""

from __future__ import annotations

from typing import Any

from xeforge_core import units
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


def fingerprint_rows(fingerprint: dict[str, Any]) -> list[dict[str, str]]:
    """The device fingerprint as ``{"field", "value"}`` rows with units: sizes (``l2_bytes``,
    ``memory_bytes``...) in MiB/GiB with the exact byte count, ``bandwidth_gbps`` in GB/s,
    ``peak_tflops`` per dtype in TFLOP/s; library versions last."""
    import json

    rows = []
    for key, value in fingerprint.items():
        if key == "versions":
            continue
        if key.endswith("_bytes") and isinstance(value, (int, float)):
            text = units.size_exact(int(value))
        elif key.endswith("_gbps") and isinstance(value, (int, float)):
            text = units.bandwidth(value)
        elif key == "peak_tflops" and isinstance(value, dict):
            text = ", ".join(f"{dt} {units.tflops(v)}" for dt, v in value.items())
        elif isinstance(value, (dict, list)):
            text = json.dumps(value)
        else:
            text = units.MISSING if value is None else str(value)
        rows.append({"field": key, "value": text})
    rows += [{"field": f"version: {k}", "value": str(v)} for k, v in (fingerprint.get("versions") or {}).items()]
    return rows
