"""The IR page's logic (no Streamlit): which versions' kernels can be compiled, and the
background job that compiles them (``xeforge_core.ir.compile_ir`` runs the IR worker in its own
process; nothing here runs kernel code).

A version is the candidate under review, any commit of the session's branch, any kept
candidate, or, without a session, the kernel loaded on Home. Sources are read from git only
when a version is chosen (the list itself costs no ``git show``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xeforge_core.ir.compile import IRReport, compile_ir
from xeforge_core.ir.targets import TARGETS, CompileTarget, default_target, why_unavailable
from xeforge_core.ui.jobs import BackgroundJob

#: The job board purpose of IR compiles (one at a time per browser session).
PURPOSE = "ir"


@dataclass
class IRSource:
    """One version whose kernels can be compiled: ``key`` is stable across reruns, ``label``
    is shown, ``load()`` returns the module's source."""

    key: str
    label: str
    load: Callable[[], str]
    problem: Any


def ir_sources(wb: Any, *, history: list[Any] | None = None,
               candidates: list[Any] | None = None) -> dict[str, IRSource]:
    """The versions on offer, newest first: the candidate under review, the session's commits,
    its kept candidates; or the loaded kernel when no session is open. ``history`` and
    ``candidates`` may be given (already read, e.g. memoised by the page)."""
    out: dict[str, IRSource] = {}
    session = wb.session
    problem = wb.loaded.problem if wb.loaded is not None else None
    if session is not None:
        if problem is None:
            problem = session.problem("baseline")
        review = wb.review
        if review is not None:
            code = review.source
            out["review"] = IRSource("review", f"candidate under review ({review.stage})", lambda: code, problem)
        for v in reversed(history if history is not None else session.history()):
            out[f"v:{v.sha}"] = IRSource(f"v:{v.sha}", f"#{v.index} {v.short} · {v.stage or v.kind}",
                                         lambda sha=v.sha: session.source(sha), problem)
        for c in reversed(candidates if candidates is not None else session.candidates()):
            out[f"c:{c.id}"] = IRSource(f"c:{c.id}", f"candidate {c.id} · {c.stage} · {c.status}",
                                        lambda cid=c.id: session.source(cid), problem)
    elif wb.loaded is not None:
        code = wb.loaded.source
        out["loaded"] = IRSource("loaded", f"loaded kernel ({wb.source_label or wb.loaded.name})", lambda: code,
                                 problem)
    return out


def target_options() -> list[CompileTarget]:
    """Every target, the default first; unavailable ones stay listed (the page says why)."""
    first = default_target()
    return [first] + [t for t in TARGETS.values() if t.id != first.id]


def target_label(target: CompileTarget) -> str:
    """``"NVIDIA Hopper sm_90 (H100, H200)"``, or with ``" · backend not installed here"``."""
    return target.label + (" · backend not installed here" if why_unavailable(target) else "")


def request_key(source: str, target: CompileTarget, config: int | None, variant: str | None) -> str:
    """The key of one compile request (source hash, target, autotune config, variant)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return f"{digest}|{target.id}|{config}|{variant}"


@dataclass
class IRRequest:
    """One compile the page needs."""

    source: str
    problem: Any
    target: CompileTarget
    config: int | None = 0
    variant: str | None = None

    @property
    def key(self) -> str:
        return request_key(self.source, self.target, self.config, self.variant)

    def cached(self, local_device: str = "cpu") -> IRReport | None:
        """The report already on disk (no compile), or ``None``."""
        return compile_ir(self.source, problem=self.problem, target=self.target, config_index=self.config,
                          variant=self.variant, local_device=local_device, cached_only=True)


def start_compile(wb: Any, requests: list[IRRequest], *, local_device: str = "cpu") -> BackgroundJob:
    """Compile ``requests`` one after the other in the background; the job's result is
    ``{request key: IRReport}``. Replaces a running IR job."""

    def work(progress: Any, cancel: threading.Event) -> dict[str, IRReport]:
        out: dict[str, IRReport] = {}
        for n, req in enumerate(requests, start=1):
            if cancel.is_set():
                break
            progress(f"{n}/{len(requests)}: compiling for {req.target.label}")
            report = compile_ir(req.source, problem=req.problem, target=req.target, config_index=req.config,
                                variant=req.variant, local_device=local_device, on_progress=progress,
                                cancel=cancel)
            if report is not None:
                out[req.key] = report
        return out

    label = f"IR for {requests[0].target.label}" if requests else "IR"
    job = BackgroundJob(label, work, kind="ir", meta={"keys": [r.key for r in requests]})
    return wb.jobs.submit(PURPOSE, job)


def collect(wb: Any, store: dict[str, IRReport]) -> None:
    """Move the results of a finished IR job into ``store`` (once)."""
    job = wb.jobs.current(PURPOSE)
    if job is None or not job.finished or job.meta.get("applied"):
        return
    job.meta["applied"] = True
    if isinstance(job.result, dict):
        store.update(job.result)
