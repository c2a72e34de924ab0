"""The ``xeforge`` command line: a thin shell over the core API.

Each subcommand lives in ``xeforge_core/commands/<name>.py`` and exposes
``register(subparsers) -> None`` (adding its parser, with ``func`` set to a callable taking the
parsed ``argparse.Namespace`` and returning an exit status). Modules are imported lazily so
that ``xeforge verify`` does not pay for Streamlit or git imports.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

COMMANDS = ("verify", "optimize", "batch", "doctor", "ir")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered, or only ``only`` (the command
    being run: building the others' parsers would load what their help texts list, such as the
    knowledge base's hardware profiles, before the command can start its workers)."""
    parser = argparse.ArgumentParser(
        prog="xeforge",
        description="Verify and optimize Triton kernels for Intel Xe GPUs (cuda and cpu supported).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"xeforge_core.commands.{name}").register(sub)
    return parser


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``xeforge`` console script. Returns the process exit status.

    SIGTERM and SIGHUP are handled as Ctrl-C is: the command stops its worker processes, keeps
    what is committed and exits, instead of dying and leaving a worker running."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous: dict[int, object] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, _interrupt)
        except ValueError:  # not the main thread (an embedding program): leave its handlers alone
            break
    try:
        return int(args.func(args) or 0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
