"""``xeforge batch DIR``: optimize every kernel in DIR headless and write a CSV summary.

Every ``<stem>.py`` with a sibling ``<stem>.yaml`` is a kernel (references ``*_ref.py`` /
``*_pytorch.py`` are skipped and picked up as references). Each kernel gets its own session in
the workspace and runs the same pipeline as ``xeforge optimize --auto``. ``--devices
cuda:0,cuda:1`` runs one worker per device. The CSV has one row per kernel: the stages, per
stage its status, verdict and speedup, the final speedup and any error.

Exit status: 0 every kernel ran without error, 1 some kernel had an error, 2 bad input,
130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from xeforge_core.commands.optimize import (
    ProgressPrinter,
    add_common_arguments,
    check_common_arguments,
    loop_options,
    make_engine,
    verify_options,
    workspace_for,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``batch`` subcommand to the ``xeforge`` CLI."""
    p = subparsers.add_parser(
        "batch",
        help="optimize every kernel in a directory (auto-approve) and write a CSV summary",
        description=("Run the optimization pipeline with auto-approval on every kernel in DIR (a .py "
                     "with a sibling .yaml), one session each, on one device or several, and write a "
                     "summary table (CSV)."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  xeforge batch ../shared/cases/xeforge --devices cuda:0,cuda:1 --out summary.csv\n",
    )
    p.add_argument("directory", metavar="DIR", help="directory of kernels (.py + .yaml)")
    add_common_arguments(p)
    p.add_argument("--devices", metavar="D1,D2", default=None,
                   help="devices to spread the kernels over, one worker each (default: --device)")
    p.add_argument("--out", metavar="CSV", default="summary.csv", help="summary table (default: summary.csv)")
    p.add_argument("--quiet", "-q", action="store_true", help="only stage-level progress")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``xeforge batch``; returns the exit status (see the module docstring)."""
    from xeforge_core.batch import find_kernels, run_batch, unpaired_modules, write_csv
    from xeforge_core.report import text_table

    err = sys.stderr
    try:
        stages = check_common_arguments(args)
        items = find_kernels(args.directory)
        if not items:
            raise ValueError(f"no kernels in {args.directory} (a kernel is a .py with a sibling .yaml)")
        devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else [args.device]
        engine_name = args.engine
        make_engine(engine_name, args.target or "cuda")  # fail early on bad settings
    except (ValueError, OSError) as exc:
        print(f"xeforge batch: bad input: {exc}", file=err)
        return 2

    workspace = workspace_for(args)
    print(f"{len(items)} kernel(s) from {args.directory} on {', '.join(d or 'auto' for d in devices)}; "
          f"sessions in {workspace}", file=err, flush=True)
    for py in unpaired_modules(args.directory):
        print(f"skipped {py.name}: no sibling {py.stem}.yaml spec (optimize it alone with xeforge optimize, "
              "which also takes a module without a spec)", file=err)
    cancel = threading.Event()
    lock = threading.Lock()

    def progress_for(name: str) -> ProgressPrinter:
        return ProgressPrinter(err, quiet=args.quiet, prefix=f"{name}: ")

    done_rows: list = []

    def on_row(row) -> None:
        with lock:
            done_rows.append(row)
            # the table so far, so an interrupted batch still leaves its finished rows
            write_csv(sorted(done_rows, key=lambda r: r.kernel), args.out)
            state = "error: " + row.error if row.error else "done"
            speed = f"{row.final_speedup:.3f}x" if row.final_speedup is not None else "not measured"
            call = f", {row.final_call}" if row.final_call else ""
            print(f"== {row.kernel} on {row.device}: {state}; final speedup {speed}{call} ({row.seconds:.0f} s)",
                  file=err, flush=True)

    class _PerKernel:
        """Progress printer that names the kernel of each event (workers run kernels in parallel)."""

        def __init__(self) -> None:
            self.local = threading.local()

        def __call__(self, event: dict) -> None:
            printer = getattr(self.local, "printer", None)
            if printer is not None:
                printer(event)

    per_kernel = _PerKernel()
    def factory(target: str):
        return make_engine(engine_name, args.target or target)

    def on_start(item) -> None:
        per_kernel.local.printer = progress_for(item.name)

    try:
        rows = run_batch(items, devices=devices, on_row=on_row, on_start=on_start, cancel=cancel,
                         engine_factory=factory, stages=stages, target=args.target, workspace=workspace,
                         iterations=args.iterations, best_of=args.best_of, verify_options=verify_options(args),
                         portability=not args.no_portability, on_progress=per_kernel, **loop_options(args))
    except KeyboardInterrupt:
        cancel.set()
        print("\ninterrupted; finished kernels keep their sessions", file=err)
        return 130
    out = write_csv(rows, args.out)
    headers = ["kernel", "device", "stages", "final speedup", "call", "error"]
    table = [[r.kernel, r.device, " ".join(f"{s}:{r.status.get(s, '-')}" for s in r.stages),
              f"{r.final_speedup:.3f}x" if r.final_speedup is not None else "not measured", r.final_call or "-",
              (r.error[:80] + "…") if len(r.error) > 80 else r.error or "-"] for r in rows]
    print(text_table(headers, table))
    print(f"\nsummary: {Path(out).resolve()}")
    return 1 if any(r.error for r in rows) else 0
