"""``xeforge batch DIR``: optimize every kernel in DIR headless and write a summary (CSV + JSON).

Every ``<stem>.py`` with a sibling ``<stem>.yaml`` or a sibling reference (``<stem>_ref.py`` /
``<stem>_pytorch.py``, picked up as the problem: a KernelBench problem beside its Triton
solution) is a kernel, and so is every plain-PyTorch problem (a KernelBench ``Model`` with
``get_inputs()``, no Triton): TorchInductor writes its version 1. Each kernel gets its own
session in the workspace and runs the same pipeline as ``xeforge optimize --auto``. ``--devices
cuda:0,cuda:1`` runs one worker per device on this machine; ``--ray`` runs one Ray task per
kernel on a local Ray instance, and ``--ray ADDRESS`` (``auto``, ``HOST:PORT``,
``ray://HOST:10001``) on a Ray cluster, over every GPU it has (``xeforge_core.raybatch``).

The summary has one row per kernel: the stages, per stage its status, verdict and speedup, the
final speedup, any error, the host and the devices it was timed on (``--out``, and the same as
JSON beside it). It is rewritten as each kernel finishes, so an interrupted batch keeps its
finished rows; ``--resume`` then skips the kernels already in it. A progress line shows done /
running / failed and an ETA.

Exit status: 0 every kernel ran without error, 1 some kernel had an error (a kernel whose own
files are bad input, an unreadable spec or a reference it cannot be called with, is such a
row: the batch goes on) or a file that looks meant for the batch (a spec, a reference, a
solution, part of a problem) was skipped (each named with why, before the kernels run; a helper
module is named too, and does not count), 2 bad input to the command itself (arguments, the directory, an
``--out`` that cannot be written; nothing ran) or ``--ray`` without Ray installed, 130
interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xeforge_core.commands.argtypes import non_negative_int
from xeforge_core.commands.optimize import (
    ProgressPrinter,
    add_common_arguments,
    check_common_arguments,
    loop_options,
    verify_options,
    workspace_for,
)

EXIT_OK = 0
EXIT_KERNEL_ERROR = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

_EPILOG = """examples:
  xeforge batch ../shared/cases/xeforge --devices cuda:0,cuda:1 --out summary.csv
  xeforge batch sample_kernels --ray --device cpu          # a local Ray instance
  xeforge batch kernels/ --ray auto --out runs/summary.csv # the Ray cluster this node belongs to
  xeforge batch kernels/ --ray auto --out runs/summary.csv --resume   # after a crash or Ctrl-C
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``batch`` subcommand to the ``xeforge`` CLI."""
    p = subparsers.add_parser(
        "batch",
        help="optimize every kernel in a directory (auto-approve) and write a summary table",
        description=("Run the optimization pipeline with auto-approval on every kernel in DIR (a .py "
                     "with a sibling .yaml or a sibling reference <stem>_ref.py, or a plain-PyTorch problem "
                     "whose first Triton version TorchInductor writes), one session each, on one device or "
                     "several, or as Ray tasks over a cluster, and write a summary table (CSV, and JSON "
                     "beside it)."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EPILOG,
    )
    p.add_argument("directory", metavar="DIR",
                   help="directory of kernels (.py + .yaml, .py + _ref.py) and plain-PyTorch problems")
    add_common_arguments(p)
    p.add_argument("--devices", metavar="D1,D2", default=None,
                   help="devices to spread the kernels over, one worker each (default: --device)")
    p.add_argument("--ray", metavar="ADDRESS", nargs="?", const="", default=None,
                   help="run one Ray task per kernel: alone, on a local Ray instance; with ADDRESS (auto, "
                        "HOST:PORT, ray://HOST:10001), on that cluster (needs the ray extra)")
    p.add_argument("--ray-gpus", metavar="N", type=non_negative_int, default=None,
                   help="with --ray and no ADDRESS: GPUs the local Ray instance has (default: what Ray "
                        "detects; Intel GPUs may need it)")
    p.add_argument("--max-retries", metavar="N", type=non_negative_int, default=2,
                   help="with --ray: restarts of a task whose worker or node died (default: 2)")
    p.add_argument("--resume", action="store_true",
                   help="skip the kernels already in the summary (--out) and keep their rows")
    p.add_argument("--out", metavar="CSV", default="summary.csv",
                   help="summary table (default: summary.csv; the JSON goes beside it)")
    p.add_argument("--quiet", "-q", action="store_true", help="only stage-level progress")
    p.set_defaults(func=run)


class _AboveBar:
    """A text stream whose complete lines are printed above the progress line."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self.bar.print(line)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _row_line(row: Any) -> str:
    state = "error: " + row.error if row.error else "done"
    speed = f"{row.final_speedup:.3f}x" if row.final_speedup is not None else ("not measured" if row.ran else "-")
    call = f", {row.final_call}" if row.final_call else ""
    where = row.device + (f" on {row.host}" if row.host and row.device and "/" not in row.device else "")
    timed = f"; timed on {', '.join(row.timing_devices)}" if row.timing_devices else ""
    retried = f"; {row.attempts} attempts" if row.attempts > 1 else ""
    return f"== {row.kernel} on {where}: {state}; final speedup {speed}{call} ({row.seconds:.0f} s{timed}{retried})"


def _check_writable(out: str | Path) -> None:
    """Raise ``ValueError`` when the summary cannot be written to ``out`` (its folder cannot be
    made, or is not writable, or ``out`` is a folder itself): found before any kernel runs, not
    after."""
    if Path(out).is_dir():
        raise ValueError(f"--out {out}: is a folder; give the summary's file name, e.g. --out "
                         f"{Path(out) / 'summary.csv'}")
    folder = Path(out).resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot make its folder {folder} ({exc.strerror or exc})") from exc
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--out {out}: its folder {folder} is not writable")


def run(args: argparse.Namespace) -> int:
    """Run ``xeforge batch``; returns the exit status (see the module docstring)."""
    from xeforge_core.batch import SummaryError, read_summary, scan_directory, split_resume
    from xeforge_core.batch_progress import BatchProgress

    err = sys.stderr
    try:
        stages = check_common_arguments(args)
        items, skipped = scan_directory(args.directory)
        if not items:
            for path, why in skipped:
                print(f"skipped {path.name}: {why}", file=err)
            raise ValueError(f"no kernels in {args.directory} (a kernel is a .py with a sibling .yaml or "
                             "<stem>_ref.py, or a plain-PyTorch problem: a Model and get_inputs() without Triton)")
        _check_writable(args.out)
        if args.ray is not None and args.devices:
            raise ValueError("--devices and --ray: with --ray, Ray assigns the devices (drop --devices)")
        if args.max_retries < 0:
            raise ValueError("--max-retries must be 0 or more")
        if args.ray_gpus is not None and (args.ray is None or args.ray or args.ray_gpus < 0):
            raise ValueError("--ray-gpus N (N >= 0) goes with --ray and no ADDRESS: a cluster's nodes say "
                             "their GPUs (ray start --num-gpus N)")
        devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else [args.device]
        engine_name = args.engine
        from xeforge_core.service import make_engine

        make_engine(engine_name)  # fail early on bad settings
        kept: list = []
        if args.resume:
            items, kept = split_resume(items, read_summary(args.out))
    except (ValueError, OSError, SummaryError) as exc:
        print(f"xeforge batch: bad input: {exc}", file=err)
        return EXIT_BAD_INPUT

    workspace = workspace_for(args)
    where = ("Ray " + (f"cluster at {args.ray}" if args.ray else "(a local instance)") if args.ray is not None
             else ", ".join(d or "auto" for d in devices))
    print(f"{len(items)} kernel(s) from {args.directory} on {where}; sessions in {workspace}", file=err, flush=True)
    if args.resume:
        print(f"resuming {args.out}: {len(kept)} kernel(s) already in the summary are kept and skipped",
              file=err, flush=True)
    for path, why in skipped:
        print(f"skipped {path.name}: {why}", file=err)

    bar = BatchProgress(len(items), err, skipped=len(kept))
    lines = _AboveBar(bar)
    lock = threading.Lock()
    done_rows: list = list(kept)
    meta = {"directory": str(Path(args.directory).resolve()), "mode": "ray" if args.ray is not None else "local",
            "ray_address": args.ray or None, "devices": devices if args.ray is None else None,
            "workspace": str(Path(workspace).resolve())}

    def on_row(row: Any) -> None:
        from xeforge_core.batch import write_summary

        if not row.finished:  # interrupted: --resume runs it again
            return
        with lock:
            done_rows.append(row)
            # the table so far, so an interrupted batch still leaves its finished rows
            write_summary(done_rows, args.out, meta)
        bar.finish(row.kernel, failed=bool(row.error), seconds=row.seconds)
        bar.print(_row_line(row))

    common = {"stages": stages, "target": args.target, "workspace": workspace, "iterations": args.iterations,
              "best_of": args.best_of, "verify_options": verify_options(args), "portability": not args.no_portability,
              **loop_options(args)}
    interrupted = threading.Event()
    try:
        with _interrupt_sets(interrupted):
            if items and args.ray is not None:
                _run_ray(args, items, common, bar, lines, on_row, interrupted)
            elif items:
                _run_local(args, items, devices, common, bar, lines, on_row, interrupted)
        if interrupted.is_set():  # the KeyboardInterrupt was swallowed on the way; the flag stopped the batch
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        bar.close()
        print(f"\ninterrupted; the summary keeps {len(done_rows)} finished kernel(s), and finished kernels "
              f"keep their sessions (continue with --resume)", file=err)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - Ray missing or unreachable: say so, keep the summary
        from xeforge_core.errors import XeForgeError

        if not isinstance(exc, XeForgeError):
            raise
        bar.close()
        print(f"xeforge batch: {exc}", file=err)
        return EXIT_BAD_INPUT
    bar.close()
    from xeforge_core.batch import write_summary
    from xeforge_core.session.report import text_table

    all_rows = sorted(done_rows, key=lambda r: r.kernel)
    out = write_summary(all_rows, args.out, meta)
    headers = ["kernel", "device", "stages", "final speedup", "call", "not Triton yet", "error"]
    table = [[r.kernel, r.device, " ".join(f"{s}:{r.status.get(s, '-')}" for s in r.stages),
              f"{r.final_speedup:.3f}x" if r.final_speedup is not None else ("not measured" if r.ran else "-"),
              r.final_call or "-", ", ".join(r.not_triton) or "-",
              (r.error[:80] + "…") if len(r.error) > 80 else r.error or "-"] for r in all_rows]
    print(text_table(headers, table))
    print(f"\nsummary: {Path(out).resolve()}")
    from xeforge_core.batch import meant_for_batch

    missed = [p for p, _ in skipped if meant_for_batch(p)]
    if missed:
        print(f"{len(missed)} file(s) of {args.directory} that look meant for the batch were skipped "
              f"({', '.join(p.name for p in missed)}), each with why above; they have no row", file=err)
    return EXIT_KERNEL_ERROR if missed or any(r.error for r in all_rows) else EXIT_OK


@contextlib.contextmanager
def _interrupt_sets(flag: threading.Event) -> Iterator[None]:
    """Ctrl-C (SIGINT) also sets ``flag`` before raising ``KeyboardInterrupt`` as usual: the
    batch loops poll it, so the batch stops even where a library (Ray's client calls) catches
    the exception on its way up. Only in the main thread (where Python runs signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_interrupt(signum: int, frame: Any) -> None:
        flag.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_local(args: argparse.Namespace, items: list, devices: list, common: dict, bar: Any, lines: Any,
               on_row: Any, cancel: threading.Event) -> list:
    """The batch on this machine's devices, one worker thread each (``xeforge_core.batch``);
    ``cancel`` stops it."""
    from xeforge_core.batch import run_batch

    class _PerKernel:
        """Progress printer that names the kernel of each event (workers run kernels in parallel)."""

        def __init__(self) -> None:
            self.local = threading.local()

        def __call__(self, event: dict) -> None:
            printer = getattr(self.local, "printer", None)
            if printer is not None:
                printer(event)

    per_kernel = _PerKernel()

    def factory(target: object) -> Any:
        from xeforge_core.service import make_engine

        return make_engine(args.engine)

    def on_start(item: Any) -> None:
        per_kernel.local.printer = ProgressPrinter(lines, quiet=args.quiet, prefix=f"{item.name}: ")
        bar.start(item.name)

    try:
        return run_batch(items, devices=devices, on_row=on_row, on_start=on_start, cancel=cancel,
                         engine_factory=factory, on_progress=per_kernel, **common)
    except KeyboardInterrupt:
        cancel.set()
        raise


def _run_ray(args: argparse.Namespace, items: list, common: dict, bar: Any, lines: Any, on_row: Any,
             cancel: threading.Event) -> list:
    """The batch as Ray tasks (``xeforge_core.raybatch``); ``cancel`` stops it."""
    from xeforge_core.raybatch import RayBatchOptions, run_ray_batch

    printers: dict[str, ProgressPrinter] = {}

    def on_start(kernel: str, info: dict) -> None:
        bar.start(kernel)
        if (info.get("attempt") or 1) > 1:
            bar.print(f"== {kernel}: started again on {info.get('host')} (attempt {info.get('attempt')}): "
                      "the Ray worker or node of the last attempt died")

    def on_event(kernel: str, event: dict) -> None:
        kind = event.get("event")
        if kind in ("job_started", "job_finished"):
            if not args.quiet and kind == "job_started":
                bar.print(f"  [{kernel}] {event.get('role')} job on {event.get('device')}")
            return
        printer = printers.setdefault(kernel, ProgressPrinter(lines, quiet=args.quiet, prefix=f"{kernel}: "))
        printer(event)

    options = RayBatchOptions(address=args.ray or None, max_retries=args.max_retries, num_gpus=args.ray_gpus)
    return run_ray_batch(items, options=options, device=args.device, engine_name=args.engine,
                         on_row=on_row, on_start=on_start, on_event=on_event, on_info=bar.print, cancel=cancel,
                         **common)
