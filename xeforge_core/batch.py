"""Headless optimization of a directory of kernels: one session per kernel, auto-approval,
one worker thread per device, and a CSV summary table.

A kernel is a ``.py`` file with a sibling ``.yaml`` spec; ``*_ref.py`` and ``*_pytorch.py``
(references) and ``__init__.py`` are skipped; a sibling reference is picked up by
``load_problem``. With several devices (``["cuda:0", "cuda:1"]``) each device has its own worker
thread taking kernels from one shared queue, so one device never runs two kernels at once
(timings stay honest) while all devices stay busy. Each kernel's failure (bad spec, engine
error, a crash) becomes that kernel's ``error`` and the batch goes on.
"""

from __future__ import annotations

import csv
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REFERENCE_SUFFIXES = ("_ref", "_pytorch")


@dataclass
class BatchItem:
    """One kernel to optimize: the module, its spec and (when present) its reference."""

    kernel: Path
    spec: Path
    reference: Path | None = None

    @property
    def name(self) -> str:
        return self.kernel.stem


@dataclass
class BatchRow:
    """The result for one kernel.

    ``stages`` are the stage ids run, in order (``portability`` first when the kernel had to be
    ported); ``status``, ``verdicts`` and ``speedups`` are per stage (speedup ``None``: not
    measured or nothing approved); ``final_speedup`` the cumulative speedup of the final
    version (``None``: not measured); ``error`` is empty on success; ``seconds`` wall time.
    """

    kernel: str
    device: str = ""
    session: str = ""
    stages: list[str] = field(default_factory=list)
    status: dict[str, str] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    speedups: dict[str, float | None] = field(default_factory=dict)
    final_speedup: float | None = None
    speed_measured: bool = False
    error: str = ""
    seconds: float = 0.0
    #: per stage and for the final version: faster / slower / no measurable difference, by the
    #: one rule (``verdict.speedup_call``, through the session report); ``None``: not measured
    calls: dict[str, str | None] = field(default_factory=dict)
    final_call: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "device": self.device, "session": self.session, "stages": list(self.stages),
                "status": dict(self.status), "verdicts": dict(self.verdicts), "speedups": dict(self.speedups),
                "final_speedup": self.final_speedup, "speed_measured": self.speed_measured,
                "error": self.error, "seconds": round(self.seconds, 2),
                "calls": dict(self.calls), "final_call": self.final_call}


def find_kernels(directory: str | Path) -> list[BatchItem]:
    """The kernels in ``directory`` (not recursive), sorted by name: every ``<stem>.py`` with a
    sibling ``<stem>.yaml``, except references (``*_ref.py``, ``*_pytorch.py``) and
    ``__init__.py``. Raises ``FileNotFoundError`` when ``directory`` is not a directory."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    items = []
    for py in sorted(root.glob("*.py")):
        if py.name == "__init__.py" or py.stem.endswith(REFERENCE_SUFFIXES):
            continue
        spec = py.with_suffix(".yaml")
        if not spec.is_file():
            continue
        ref = next((py.with_name(f"{py.stem}{s}.py") for s in REFERENCE_SUFFIXES
                    if py.with_name(f"{py.stem}{s}.py").is_file()), None)
        items.append(BatchItem(kernel=py, spec=spec, reference=ref))
    return items


def unpaired_modules(directory: str | Path) -> list[Path]:
    """The ``.py`` files of ``directory`` that :func:`find_kernels` leaves out for want of a
    sibling ``<stem>.yaml`` (references and ``__init__.py`` are not listed), so that a batch
    can say what it skipped."""
    root = Path(directory)
    return [py for py in sorted(root.glob("*.py"))
            if py.name != "__init__.py" and not py.stem.endswith(REFERENCE_SUFFIXES)
            and not py.with_suffix(".yaml").is_file()]


def optimize_one(
    item: BatchItem,
    *,
    device: Any = None,
    engine_name: str = "rules",
    engine_factory: Callable[[str], Any] | None = None,
    stages: list[str] | None = None,
    target: str | None = None,
    workspace: str | Path = "workspace",
    iterations: int = 3,
    best_of: int = 1,
    min_speedup: float | None = None,
    verify_options: Any = None,
    verify_fn: Callable[..., Any] | None = None,
    portability: bool = True,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    cancel: Any = None,
) -> BatchRow:
    """Optimize one kernel with auto-approval in a new session under ``workspace`` and return
    its row. ``device`` is a ``DeviceInfo``, a device string or ``None`` (detect); ``target``
    defaults to the device type (cpu -> cuda); ``engine_factory(target)`` builds the engine
    (default: ``get_engine(engine_name, target=target)``). Never raises for a bad kernel: the
    row's ``error`` says what went wrong."""
    from xeforge_core import report
    from xeforge_core.cover import DEFAULT_MIN_SPEEDUP, run_pipeline
    from xeforge_core.devices import DeviceInfo, detect_device
    from xeforge_core.problem import load_problem
    from xeforge_core.session import Session

    started = time.monotonic()
    row = BatchRow(kernel=item.name)
    session = None
    try:
        dev = device if isinstance(device, DeviceInfo) else detect_device(device)
        row.device = f"{dev.type}:{dev.index}"
        tgt = target or ("xpu" if dev.type == "xpu" else "cuda")
        problem = load_problem(item.kernel, spec_path=item.spec, reference_path=item.reference)
        if stages:
            plan = list(stages)
        else:
            from xeforge_core.analysis import analyze

            plan = list(analyze(problem.kernel.source, tgt, problem).plan)
        session = Session.create(problem, workspace=workspace, device=dev, plan=plan, target=tgt)
        row.session = str(session.path)
        if engine_factory is not None:
            engine = engine_factory(tgt)
        else:
            from xeforge_core.engines import get_engine

            engine = get_engine(engine_name, target=tgt) if engine_name == "rules" else get_engine(engine_name)
        kwargs: dict[str, Any] = {}
        if verify_fn is not None:
            kwargs["verify_fn"] = verify_fn
        outcomes = run_pipeline(session, engine, iterations=iterations, best_of=best_of, auto=True,
                                min_speedup=min_speedup or DEFAULT_MIN_SPEEDUP, device=dev,
                                verify_options=verify_options, portability=portability,
                                on_progress=on_progress, cancel=cancel, **kwargs)
        data = report.json_report(session)
        by_stage = {s["stage"]: s for s in data["stages"]}
        for o in outcomes:
            if o.stage not in row.stages:
                row.stages.append(o.stage)
            row.status[o.stage] = o.status
            s = by_stage.get(o.stage, {})
            verdicts = [v for v in s.get("verdicts", []) if v]
            row.verdicts[o.stage] = verdicts[-1] if verdicts else (o.verdict_kind or "-")
            row.speedups[o.stage] = s.get("speedup")
            row.calls[o.stage] = s.get("call")
        for sid in session.plan:  # stages not reached (a failure stopped the pipeline)
            if sid not in row.status:
                row.stages.append(sid)
                row.status[sid] = session.stages.get(sid, {}).get("status", "pending")
                row.verdicts[sid] = "-"
                row.speedups[sid] = None
        row.final_speedup = data["cumulative_speedup"]
        row.final_call = data.get("cumulative_call")
        row.speed_measured = bool(data["speed_measured"])
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            row.error = f"{failed[0].stage}: {failed[0].reason}"
        try:
            session.export(session.path.parent / f"{session.path.name}-export")
        except Exception as exc:  # the history is complete even when an export fails
            row.error = (row.error + "; " if row.error else "") + f"export failed: {exc}"
    except Exception as exc:  # one kernel's failure must not stop the batch
        row.error = f"{type(exc).__name__}: {exc}"
    row.seconds = time.monotonic() - started
    return row


def run_batch(
    items: Iterable[BatchItem] | str | Path,
    *,
    devices: list[str | None] | None = None,
    on_row: Callable[[BatchRow], None] | None = None,
    on_start: Callable[[BatchItem], None] | None = None,
    cancel: Any = None,
    **kwargs: Any,
) -> list[BatchRow]:
    """Optimize every kernel of ``items`` (or of the directory ``items``) and return the rows in
    kernel-name order. ``devices``: one worker thread per entry (``None``: one worker on the
    default device). ``on_start(item)`` and ``on_row(row)`` are called as each kernel starts and
    finishes, from the worker thread that runs it (e.g. to name the kernel in progress lines);
    ``cancel`` (a ``threading.Event``) stops taking new kernels. Other keyword arguments go to
    :func:`optimize_one`."""
    todo = find_kernels(items) if isinstance(items, (str, Path)) else list(items)
    work: queue.Queue[BatchItem] = queue.Queue()
    for it in todo:
        work.put(it)
    rows: list[BatchRow] = []
    lock = threading.Lock()

    def worker(dev: str | None) -> None:
        resolved: Any = dev
        try:
            from xeforge_core.devices import detect_device

            resolved = detect_device(dev)
        except Exception as exc:
            resolved = exc
        while not (cancel is not None and cancel.is_set()):
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            if on_start is not None:
                on_start(item)
            if isinstance(resolved, Exception):
                row = BatchRow(kernel=item.name, device=str(dev or "auto"),
                               error=f"device {dev or 'auto'} unavailable: {resolved}")
            else:
                row = optimize_one(item, device=resolved, cancel=cancel, **kwargs)
            with lock:
                rows.append(row)
            if on_row is not None:
                on_row(row)

    devs = list(devices) if devices else [None]
    threads = [threading.Thread(target=worker, args=(d,), name=f"xeforge-batch-{d or 'auto'}", daemon=True)
               for d in devs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(rows, key=lambda r: r.kernel)


def _stage_order(rows: list[BatchRow]) -> list[str]:
    from xeforge_core.stages import STAGES

    canonical = [s.id for s in STAGES]
    order = ["portability"] + canonical
    seen = {s for r in rows for s in r.stages}
    extra = sorted(seen - set(order))
    return [s for s in order if s in seen] + extra


def csv_columns(rows: list[BatchRow]) -> list[str]:
    """The CSV header for ``rows``: kernel, device, stages, then per stage (canonical order)
    ``<stage>`` (status), ``<stage>_verdict``, ``<stage>_speedup``, ``<stage>_call`` (faster /
    slower / no measurable difference), then ``final_speedup``, ``final_call``,
    ``speed_measured``, ``error``, ``seconds``, ``session``."""
    cols = ["kernel", "device", "stages"]
    for s in _stage_order(rows):
        cols += [s, f"{s}_verdict", f"{s}_speedup", f"{s}_call"]
    return cols + ["final_speedup", "final_call", "speed_measured", "error", "seconds", "session"]


def write_csv(rows: list[BatchRow], path: str | Path) -> Path:
    """Write the summary table of ``rows`` to ``path`` (atomically). Speedups are plain numbers
    (``1.234``) or ``not measured`` (``n/a`` for the portability step, whose original cannot
    run on the device); stages a kernel did not plan are empty."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = csv_columns(rows)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            rec: dict[str, Any] = {"kernel": r.kernel, "device": r.device, "stages": ";".join(r.stages),
                                   "final_speedup": _num(r.final_speedup), "final_call": r.final_call or "",
                                   "speed_measured": r.speed_measured,
                                   "error": r.error, "seconds": f"{r.seconds:.1f}", "session": r.session}
            for s in r.stages:
                rec[s] = r.status.get(s, "")
                rec[f"{s}_verdict"] = r.verdicts.get(s, "")
                speed = r.speedups.get(s)
                if s == "portability":
                    rec[f"{s}_speedup"] = "n/a" if r.status.get(s) == "approved" else ""
                else:
                    rec[f"{s}_speedup"] = _num(speed) if r.status.get(s) == "approved" or speed is not None else ""
                    rec[f"{s}_call"] = (r.calls.get(s) or "") if speed is not None else ""
            w.writerow(rec)
    tmp.replace(path)
    return path


def _num(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "not measured"
