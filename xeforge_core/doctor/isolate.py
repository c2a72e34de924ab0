"""Run one doctor task in its own supervised process and turn how it ended into a status.

Uses the verification runner (``xeforge_core.runner.run_worker``): own process group, scrubbed
environment, hard wall-clock timeout, and the whole group killed afterwards. Statuses:

* ``ok`` / ``wrong``: the task finished; ``wrong`` when its result differs from the CPU's.
* ``error``: a Python-level exception (its text kept).
* ``driver_error``: an exception whose text is a driver/runtime fault (Level Zero
  ``UR_RESULT_ERROR_*``, CUDA errors): a failure *below* the Python layer.
* ``crash``: the process died by a signal (also below the Python layer).
* ``hang``: no result before the timeout; ``stack`` holds the Python stacks that
  ``faulthandler`` dumped shortly before the kill.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.runner import find_driver_fault, find_oom, run_worker

CHILD_MODULE = "xeforge_core.doctor.child"


@dataclass
class TaskOutcome:
    """What one isolated doctor task produced. ``seconds`` is the process wall time (s)."""

    status: str
    result: dict[str, Any] = field(default_factory=dict)
    error_text: str = ""
    stack: str = ""
    seconds: float = 0.0
    stderr: str = ""

    @property
    def below_python(self) -> bool:
        """True when the failure happened below the Python layer (driver fault or signal)."""
        return self.status in ("driver_error", "crash")


_STACK_RE = re.compile(r"(Thread 0x[0-9a-f]+.*?\(most recent call first\):.*)", re.S)


def run_task(job: dict[str, Any], *, timeout_s: float, env: dict[str, str] | None = None) -> TaskOutcome:
    """Run ``job`` (see ``xeforge_core.doctor.child``) in a fresh process.

    ``env`` adds runtime settings for an experiment (e.g. ``UR_L0_USE_IMMEDIATE_COMMANDLISTS``);
    the child applies them to its own environment before torch is imported, so the runtime
    reads them at start-up. Never raises for what the child does.
    """
    job = dict(job)
    job.setdefault("hang_dump_s", max(0.5, timeout_s - 1.5))
    if env:
        job["env"] = dict(env)
    # A profiler trace goes outside the job directory: the sandbox must let the child write there.
    profile = (env or {}).get("XEFORGE_DOCTOR_PROFILE")
    # An op saved by the tracing task (``job["path"]``) is read from that task's directory.
    outcome = run_worker(job, timeout_s=timeout_s, module=CHILD_MODULE, exit_grace_s=2.0,
                         writable=[os.path.dirname(os.path.abspath(profile))] if profile else (),
                         readable=[job["path"]] if job.get("path") else ())
    stderr = outcome.stderr or ""
    if outcome.timed_out:
        match = _STACK_RE.search(stderr)
        return TaskOutcome("hang", error_text=f"no result within {timeout_s:g} s",
                           stack=match.group(1).strip() if match else "", seconds=outcome.seconds,
                           stderr=stderr)
    result = outcome.result or {}
    if outcome.result is None:
        fault = find_driver_fault(stderr)
        if outcome.signal_name or fault:
            what = f"killed by {outcome.signal_name}" if outcome.signal_name else fault or ""
            return TaskOutcome("crash", error_text=what + (f"; {fault}" if fault and outcome.signal_name else ""),
                               seconds=outcome.seconds, stderr=stderr)
        oom = find_oom(stderr)
        return TaskOutcome("error", error_text=oom or (stderr.strip().splitlines() or ["no result"])[-1],
                           seconds=outcome.seconds, stderr=stderr)
    if result.get("status") == "error":
        text = f"{result.get('error_type', 'Error')}: {result.get('error_text', '')}"
        status = "driver_error" if find_driver_fault(text) else "error"
        return TaskOutcome(status, result=result, error_text=text, seconds=outcome.seconds, stderr=stderr)
    return TaskOutcome(result.get("status", "ok"), result=result, error_text=result.get("detail", ""),
                       seconds=outcome.seconds, stderr=stderr)
