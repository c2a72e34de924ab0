"""Headless optimization of a directory of kernels: one session per kernel, auto-approval,
one worker thread per device, and a CSV summary table.

A kernel is a ``.py`` file with a sibling ``.yaml`` spec, or with a sibling reference
(``<stem>_ref.py`` / ``<stem>_pytorch.py``: a KernelBench problem beside its Triton solution), or
a plain-PyTorch problem on its own (TorchInductor writes its first version); references and
``__init__.py`` are not kernels themselves; a sibling reference is picked up by
``load_problem``. With several devices (``["cuda:0", "cuda:1"]``) each device has its own worker
thread taking kernels from one shared queue, so one device never runs two kernels at once
(timings stay honest) while all devices stay busy. Each kernel's failure (bad spec, engine
error, a crash) becomes that kernel's ``error`` and the batch goes on.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from xeforge_core.errors import XeForgeError, missing_path_hint
from xeforge_core.worker import formats


@dataclass
class BatchItem:
    """One kernel to optimize: the module, its spec and (when present) its reference."""

    kernel: Path
    spec: Path | None
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
    ``host`` is the machine the pipeline ran on (where ``session`` lies); ``attempts`` how many
    times it was started (more than 1 when a Ray task was retried after its worker or node
    died); ``jobs`` one entry per verification worker job (``role``, ``device`` as
    ``"<host>/<type>:<physical index>"``, ``start``/``end`` in seconds since the epoch), and
    ``timing_devices`` the devices its timing jobs ran on. ``not_triton``: the torch library
    calls a plain-PyTorch problem's first version (TorchInductor's) left in, not Triton yet, as
    its candidate noted them, kept or not (``["torch.addmm"]``; empty for a Triton kernel, a first
    version of Triton only, and where Inductor wrote no Triton kernel at all: the row's error
    names the calls then).
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
    #: per stage: the 95 % confidence interval ``[low, high]`` of its speedup (``None``: none)
    intervals: dict[str, list[float] | None] = field(default_factory=dict)
    host: str = ""
    attempts: int = 1
    timing_devices: list[str] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    not_triton: list[str] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        """Whether a session was started (a kernel refused before that has no final speedup
        to measure: the summary shows ``-``, not ``not measured``)."""
        return bool(self.session)

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "device": self.device, "session": self.session, "stages": list(self.stages),
                "status": dict(self.status), "verdicts": dict(self.verdicts), "speedups": dict(self.speedups),
                "final_speedup": self.final_speedup, "speed_measured": self.speed_measured,
                "error": self.error, "seconds": round(self.seconds, 2),
                "calls": dict(self.calls), "final_call": self.final_call, "intervals": dict(self.intervals),
                "host": self.host,
                "attempts": self.attempts, "timing_devices": list(self.timing_devices),
                "jobs": [dict(j) for j in self.jobs], "not_triton": list(self.not_triton)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchRow:
        """The row :meth:`to_dict` wrote (unknown keys are ignored, missing ones take their
        defaults). Raises ``ValueError`` when ``kernel`` is missing."""
        if not isinstance(data, dict) or not data.get("kernel"):
            raise ValueError("a summary row needs a kernel name")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def finished(self) -> bool:
        """True unless a stage was cancelled (an interrupted kernel is redone by ``--resume``)."""
        return "cancelled" not in self.status.values()

    def record_jobs(self, jobs: Iterable[dict[str, Any]]) -> None:
        """Keep the worker jobs' records and derive ``timing_devices`` from them."""
        self.jobs = [dict(j) for j in jobs]
        self.timing_devices = sorted({j["device"] for j in self.jobs if j.get("role") == "timing"})


class JobLog:
    """A ``run_worker`` for :func:`xeforge_core.verify.verify` that runs each job with
    ``runner.run_worker`` (or ``run``) and records its role, device and wall-clock span.

    ``device_type``/``device_index`` name the device as this process numbers it; the record
    names it as the machine does (``"<host>/cuda:3"``, through ``CUDA_VISIBLE_DEVICES`` /
    ``ZE_AFFINITY_MASK``). ``jobs`` holds the records (see :class:`BatchRow`)."""

    def __init__(self, device_type: str, device_index: int = 0, run: Callable[..., Any] | None = None) -> None:
        self.device_type = device_type
        self.device_index = device_index
        self.run = run
        self.jobs: list[dict[str, Any]] = []

    def __call__(self, job: dict[str, Any], **kwargs: Any) -> Any:
        from xeforge_core import runner
        from xeforge_core.devices import physical_index

        start = time.time()
        try:
            return (self.run or runner.run_worker)(job, **kwargs)
        finally:
            where = "cpu:0" if self.device_type == "cpu" else \
                f"{self.device_type}:{physical_index(self.device_type, self.device_index)}"
            self.jobs.append({"role": str(job.get("role", "")), "device": f"{socket.gethostname()}/{where}",
                              "start": round(start, 3), "end": round(time.time(), 3)})


def find_kernels(directory: str | Path) -> list[BatchItem]:
    """The kernels in ``directory`` (:func:`scan_directory`'s first part). Raises
    ``FileNotFoundError`` when ``directory`` is not a directory."""
    return scan_directory(directory)[0]


def scan_directory(directory: str | Path) -> tuple[list[BatchItem], list[tuple[Path, str]]]:
    """``(kernels, skipped)`` of ``directory`` (not recursive), in one pass, sorted by name.

    A kernel is every ``<stem>.py`` with a sibling ``<stem>.yaml`` or a sibling reference
    (``<stem>_ref.py``, ``<stem>_pytorch.py``), every plain-PyTorch problem, and every ``.py`` that
    is empty or does not parse (its row names the error and line), except references themselves
    and ``__init__.py``. ``skipped`` names the files that look meant for the batch but
    are left out, each with why and what to do: a ``.py`` that is none of these (a Triton solution
    without its problem is named as such), a reference with no ``<stem>.py``, a spec with no
    ``<stem>.py``. Raises ``FileNotFoundError`` when ``directory`` is not a directory."""
    root = Path(directory)
    if not root.is_dir():
        if root.exists():
            raise FileNotFoundError(f"{root} is not a directory")
        raise FileNotFoundError(f"{root} does not exist{missing_path_hint(root)}")
    items: list[BatchItem] = []
    skipped: list[tuple[Path, str]] = []
    suffixes = formats.reference_suffixes()
    for f in sorted(root.iterdir()):
        if f.suffix == ".py" and f.name != "__init__.py" and not f.stem.endswith(suffixes):
            spec = f.with_suffix(".yaml")
            ref = _sibling_reference(f)
            if spec.is_file() or ref is not None or _plain_pytorch(f) or _unreadable(f):
                # plain PyTorch: TorchInductor writes v1; a file that does not parse (or is empty) gets
                # the row its loading error makes, naming the line, as a kernel with a spec does
                items.append(BatchItem(kernel=f, spec=spec if spec.is_file() else None, reference=ref))
            elif _is_solution(f):
                skipped.append((f, f"a Triton solution with no problem beside it: put its problem next to it as "
                                   f"{f.stem}_ref.py (or give it a {f.stem}.yaml spec)"))
            else:
                gap = _plain_pytorch_gap(f)
                why = f" ({gap}: a problem defines Model and get_inputs())" if gap else ""
                # a problem short of a part is to be mended (optimize refuses it the same way); a
                # kernel module without a spec can be optimized alone
                alone = "" if "defines no" in gap else (" (optimize it alone with xeforge optimize, which also "
                                                        "takes a module without a spec)")
                skipped.append((f, f"no sibling {f.stem}.yaml spec or {f.stem}_ref.py reference, and not a "
                                   f"plain-PyTorch problem{why}{alone}"))
        elif f.suffix == ".py" and f.stem.endswith(suffixes):
            base = next(f.stem[: -len(x)] for x in suffixes if f.stem.endswith(x))
            if not f.with_name(f"{base}.py").is_file():
                skipped.append((f, f"a reference with no {base}.py beside it (a plain-PyTorch problem on its own "
                                   f"is a kernel of the batch under its own name: {base}.py)"))
        elif f.suffix == ".yaml" and not f.with_suffix(".py").is_file():
            skipped.append((f, f"a spec with no {f.stem}.py beside it"))
    return items, skipped


def _sibling_reference(py: Path) -> Path | None:
    """``<stem>_ref.py`` or ``<stem>_pytorch.py`` beside ``py``: the problem it solves."""
    return next((py.with_name(f"{py.stem}{s}.py") for s in formats.reference_suffixes()
                 if py.with_name(f"{py.stem}{s}.py").is_file()), None)


def _unreadable(py: Path) -> bool:
    """Whether ``py`` is empty, not UTF-8 text, or does not parse as Python (its row says why and
    where, as ``xeforge verify`` does: the loader names the line and the byte)."""
    from xeforge_core.worker.astutil import parse as parse_python

    try:
        text = py.read_bytes().decode("utf-8")
        parse_python(text)
    except (SyntaxError, ValueError):  # UnicodeDecodeError is a ValueError
        return True
    except OSError:
        return False
    return not text.strip()


def _plain_pytorch(py: Path) -> bool:
    from xeforge_core.inductor.first_version import is_plain_pytorch_file

    return is_plain_pytorch_file(py)


def meant_for_batch(path: Path) -> bool:
    """Whether a file :func:`scan_directory` skipped looks meant to be a kernel of the batch (a
    spec, a reference, a Triton solution, or part of a plain-PyTorch problem), so that leaving it
    out is a failure of the batch; a helper module (``utils.py``, ``notes.py``) is not."""
    path = Path(path)
    if path.suffix == ".yaml" or path.stem.endswith(formats.reference_suffixes()):
        return True
    return path.suffix == ".py" and (_is_solution(path) or bool(_plain_pytorch_gap(path)))


def _plain_pytorch_gap(py: Path) -> str:
    from xeforge_core.inductor.first_version import plain_pytorch_gap

    return plain_pytorch_gap(py)


def _is_solution(py: Path) -> bool:
    """Whether ``py`` binds a candidate's entry point (``ModelNew``, ``kernel_function``: the
    registered formats' names other than the problem's ``Model``)."""
    from xeforge_core.problem.entry import module_bindings
    from xeforge_core.worker.astutil import parse as parse_python

    try:
        bindings = module_bindings(parse_python(py.read_text(errors="replace")))
    except (OSError, SyntaxError, ValueError):
        return False
    bound = bindings.bound_names() | bindings.classes
    return any(n in bound for n in formats.class_names() if n != "Model") or any(
        n in bound for n in formats.function_names())


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
    the hardware to optimize for (``target.resolve`` decides, as for ``xeforge
    optimize``); ``engine_factory(target)`` builds the engine (default: ``service.make_engine(engine_name)``).
    Never raises for a bad kernel: the row's ``error`` says what went wrong."""
    from xeforge_core.devices import DeviceInfo, detect_device
    from xeforge_core.inductor.first_version import library_calls_noted
    from xeforge_core.pipeline.first_version import first_version_notes
    from xeforge_core.pipeline.loop import DEFAULT_MIN_SPEEDUP, LoopOptions
    from xeforge_core.pipeline.outcomes import inconsistent_problem
    from xeforge_core.problem import load_problem
    from xeforge_core.service import make_engine, replan_after_first_version, run_session, start_session
    from xeforge_core.session import report
    from xeforge_core.target import resolve

    started = time.monotonic()
    row = BatchRow(kernel=item.name, host=socket.gethostname())
    session = None
    log: JobLog | None = None
    try:
        dev = device if isinstance(device, DeviceInfo) else detect_device(device)
        row.device = f"{dev.type}:{dev.index}"
        tgt = resolve(dev, target)
        problem = load_problem(item.kernel, spec_path=item.spec, reference_path=item.reference)
        session = start_session(problem, workspace=workspace, device=dev, target=tgt, stages=stages)
        row.session = str(session.path)
        engine = engine_factory(tgt) if engine_factory is not None else make_engine(engine_name)
        if verify_fn is None:
            from xeforge_core.verify import verify

            log = JobLog(dev.type, dev.index)
            verify_fn = functools.partial(verify, run_worker=log)
        options = LoopOptions(iterations=iterations, best_of=best_of, auto=True,
                              min_speedup=min_speedup or DEFAULT_MIN_SPEEDUP, verify_options=verify_options,
                              verify_fn=verify_fn, portability=portability, on_progress=on_progress, cancel=cancel,
                              on_first_version=replan_after_first_version(tgt, stages))
        outcomes = run_session(session, dev, engine, options)
        data = report.json_report(session)
        by_stage = {s["stage"]: s for s in data["stages"]}
        for o in outcomes:
            if o.stage not in row.stages:
                row.stages.append(o.stage)
            row.status[o.stage] = str(o.status)
            s = by_stage.get(o.stage, {})
            verdicts = [v for v in s.get("verdicts", []) if v]
            row.verdicts[o.stage] = verdicts[-1] if verdicts else (o.verdict_kind or "-")
            row.speedups[o.stage] = s.get("speedup")
            row.calls[o.stage] = s.get("call")
            low, high = s.get("speedup_low"), s.get("speedup_high")
            row.intervals[o.stage] = [low, high] if low is not None and high is not None else None
        for sid in session.plan:  # stages not reached (a failure stopped the pipeline)
            if sid not in row.status:
                row.stages.append(sid)
                row.status[sid] = session.stages.get(sid, {}).get("status", "pending")
                row.verdicts[sid] = "-"
                row.speedups[sid] = None
        row.not_triton = library_calls_noted(first_version_notes(outcomes))
        row.final_speedup = data["cumulative_speedup"]
        row.final_call = data.get("cumulative_call")
        row.speed_measured = bool(data["speed_measured"])
        failed = [o for o in outcomes if o.status == "failed"]
        if failed:
            row.error = f"{failed[0].stage}: {failed[0].reason}"
        inconsistent = inconsistent_problem(outcomes)
        if inconsistent:  # no candidate can be judged faster than a right one: not done
            row.error = (row.error + "; " if row.error else "") + f"the problem is inconsistent: {inconsistent}"
        try:
            session.export_inside()
        except Exception as exc:  # the history is complete even when an export fails
            row.error = (row.error + "; " if row.error else "") + f"export failed: {exc}"
    except Exception as exc:  # one kernel's failure must not stop the batch
        row.error = f"{type(exc).__name__}: {exc}"
    if log is not None:
        row.record_jobs(log.jobs)
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
    from xeforge_core.vocab.stages import ALL_STAGE_IDS

    order = list(ALL_STAGE_IDS)
    seen = {s for r in rows for s in r.stages}
    extra = sorted(seen - set(order))
    return [s for s in order if s in seen] + extra


def csv_columns(rows: list[BatchRow]) -> list[str]:
    """The CSV header for ``rows``: kernel, device, stages, then per stage (canonical order)
    ``<stage>`` (status), ``<stage>_verdict``, ``<stage>_speedup``, ``<stage>_call`` (faster /
    slower / no measurable difference), then ``final_speedup``, ``final_call``,
    ``speed_measured``, ``not_triton`` (the library calls a first version left in,
    ``;``-separated), ``error``, ``seconds``, ``session``, ``host``, ``timing_devices``
    (``;``-separated) and ``attempts``."""
    cols = ["kernel", "device", "stages"]
    for s in _stage_order(rows):
        cols += [s, f"{s}_verdict", f"{s}_speedup", f"{s}_call"]
    return cols + ["final_speedup", "final_call", "speed_measured", "not_triton", "error", "seconds", "session", "host",
                   "timing_devices", "attempts"]


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
                                   "final_speedup": _num(r.final_speedup, r.ran), "final_call": r.final_call or "",
                                   "speed_measured": r.speed_measured, "not_triton": ";".join(r.not_triton),
                                   "error": r.error, "seconds": f"{r.seconds:.1f}", "session": r.session,
                                   "host": r.host, "timing_devices": ";".join(r.timing_devices),
                                   "attempts": r.attempts}
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


def _num(value: float | None, ran: bool = True) -> str:
    return f"{value:.3f}" if value is not None else ("not measured" if ran else "-")


# --------------------------------------------------------------------------------------------
# the summary on disk: CSV for people and spreadsheets, JSON for --resume and scripts

#: ``format`` of the JSON summary, and its version.
SUMMARY_FORMAT = "xeforge-batch-summary"
SUMMARY_VERSION = 1


def summary_json_path(csv_path: str | Path) -> Path:
    """The JSON summary beside the CSV one: ``summary.csv`` -> ``summary.json`` (a name not
    ending in ``.csv`` gets ``.json`` appended)."""
    path = Path(csv_path)
    return path.with_suffix(".json") if path.suffix.lower() == ".csv" else path.with_name(path.name + ".json")


def write_summary(rows: list[BatchRow], csv_path: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write the summary of ``rows`` (sorted by kernel) as CSV at ``csv_path`` and as JSON beside
    it (:func:`summary_json_path`: ``{"format", "version", "updated", "meta", "rows"}``, each row
    as :meth:`BatchRow.to_dict`), each atomically, so that a crash leaves the previous complete
    file. Returns the CSV path."""
    ordered = sorted(rows, key=lambda r: r.kernel)
    out = write_csv(ordered, csv_path)
    jpath = summary_json_path(out)
    data = {"format": SUMMARY_FORMAT, "version": SUMMARY_VERSION,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "meta": dict(meta or {}),
            "rows": [r.to_dict() for r in ordered]}
    tmp = jpath.with_name(f".{jpath.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, jpath)
    return out


class SummaryError(XeForgeError, ValueError):
    """A summary file that ``--resume`` cannot read (``file`` names it, ``line`` the CSV row)."""


def read_summary(csv_path: str | Path) -> list[BatchRow]:
    """The rows of an existing summary: from the JSON beside ``csv_path`` when there is one,
    else from the CSV itself (stage columns, speedups, error, session, host, attempts).
    ``[]`` when neither exists. Raises :class:`SummaryError` naming the file (and CSV line)
    that cannot be read."""
    jpath = summary_json_path(csv_path)
    if jpath.is_file():
        try:
            data = json.loads(jpath.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != SUMMARY_FORMAT:
                raise ValueError(f"not a batch summary (its format is not {SUMMARY_FORMAT!r})")
            return [BatchRow.from_dict(r) for r in data.get("rows", [])]
        except (OSError, ValueError, TypeError) as exc:
            raise SummaryError(f"cannot read the summary: {exc}", file=jpath) from exc
    path = Path(csv_path)
    if not path.is_file():
        return []
    rows = []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            stage_cols = [c for c in (reader.fieldnames or []) if f"{c}_verdict" in (reader.fieldnames or [])]
            for line, rec in enumerate(reader, start=2):
                if not rec.get("kernel"):
                    raise SummaryError("a row has no kernel name", file=path, line=line, field="kernel")
                row = BatchRow(kernel=rec["kernel"], device=rec.get("device", ""), session=rec.get("session", ""),
                               error=rec.get("error", ""), host=rec.get("host", "") or "",
                               speed_measured=rec.get("speed_measured") == "True",
                               final_speedup=_parse_num(rec.get("final_speedup")),
                               final_call=rec.get("final_call") or None,
                               seconds=_parse_num(rec.get("seconds")) or 0.0,
                               attempts=int(rec.get("attempts") or 1),
                               timing_devices=[d for d in (rec.get("timing_devices") or "").split(";") if d],
                               not_triton=[c for c in (rec.get("not_triton") or "").split(";") if c])
                row.stages = [st for st in (rec.get("stages") or "").split(";") if st]
                for st in stage_cols:
                    if st in row.stages:
                        row.status[st] = rec.get(st, "")
                        row.verdicts[st] = rec.get(f"{st}_verdict", "")
                        row.speedups[st] = _parse_num(rec.get(f"{st}_speedup"))
                        row.calls[st] = rec.get(f"{st}_call") or None
                rows.append(row)
    except (OSError, csv.Error, ValueError) as exc:
        if isinstance(exc, SummaryError):
            raise
        raise SummaryError(f"cannot read the summary: {exc}", file=path) from exc
    return rows


def _parse_num(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "not measured", "n/a", "-") else None
    except ValueError:
        return None


def split_resume(items: list[BatchItem], previous: list[BatchRow]) -> tuple[list[BatchItem], list[BatchRow]]:
    """For ``--resume``: the items still to run and the rows kept from ``previous``. A kernel
    whose row is :attr:`BatchRow.finished` (error rows included: they are results) is skipped;
    an interrupted one is run again and its old row dropped. Rows of kernels no longer in the
    directory are kept."""
    kept = [r for r in previous if r.finished]
    done = {r.kernel for r in kept}
    return [it for it in items if it.name not in done], kept
