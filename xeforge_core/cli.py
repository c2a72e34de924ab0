"""The ``xeforge`` command line: a thin shell over the core API.

Each subcommand lives in ``xeforge_core/commands/<name>.py`` and exposes
``register(subparsers) -> None`` (adding its parser, with ``func`` set to a callable taking the
parsed ``argparse.Namespace`` and returning an exit status). Modules are imported lazily so
that ``xeforge verify`` does not pay for Streamlit or git imports.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import signal
import sys
from typing import Any

COMMANDS = ("verify", "optimize", "batch", "doctor", "ir", "inductor")


class _Parser(argparse.ArgumentParser):
    """A parser that takes options only as spelled in full: ``--seed 2`` is an error (did you mean
    ``--seeds``?), not ``--seeds 2`` read silently. Its subcommands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered, or only ``only`` (the command
    being run: building the others' parsers would load what their help texts list, such as the
    knowledge base's hardware profiles, before the command can start its workers)."""
    parser = _Parser(
        prog="xeforge",
        description="Verify and optimize Triton kernels for Intel Xe GPUs (cuda and cpu supported).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is None or name == only:
            importlib.import_module(f"xeforge_core.commands.{name}").register(sub)
    return parser


class _PipeSafe:
    """``sys.stdout`` for a command whose reader may go away (``xeforge verify ... | head``):
    after a ``BrokenPipeError`` the rest of the output is dropped, so the command still finishes
    and exits with its own status instead of a traceback and status 1."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self._gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)  # what is still buffered goes nowhere at exit
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _refuse_unknown(parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]) -> None:
    """Exit with status 2 for arguments no parser took, through the command's own parser (its
    usage line, not the top level's), naming the nearest option of that command for each
    mistyped ``--option`` (``--varient``: did you mean ``--variant``?)."""
    target, descended = parser, True
    while descended:  # down to the deepest command given (``xeforge inductor convert``)
        descended = False
        for action in target._actions:  # noqa: SLF001 - argparse keeps its subparsers only here
            chosen = getattr(args, action.dest, None) if isinstance(action, argparse._SubParsersAction) else None  # noqa: SLF001
            if chosen is not None and chosen in (getattr(action, "choices", None) or {}):
                target, descended = action.choices[chosen], True
                break
    options = [o for a in target._actions for o in a.option_strings if o.startswith("--")]  # noqa: SLF001
    hints = []
    for arg in unknown:
        if arg.startswith("--"):
            near = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1, cutoff=0.6)
            if near:
                hints.append(f"{arg.split('=', 1)[0]}: did you mean {near[0]}?")
    target.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" ({'; '.join(hints)})" if hints else ""))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``xeforge`` console script. Returns the process exit status.

    SIGTERM and SIGHUP are handled as Ctrl-C is: the command stops its worker processes, keeps
    what is committed and exits, instead of dying and leaving a worker running."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    if argv[:1] == ["verify"]:  # with --json, a usage error is a JSON record on stdout too
        from xeforge_core.commands.verify import json_usage_errors

        json_usage_errors(parser, argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, args, unknown)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous: dict[int, object] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, _interrupt)
        except ValueError:  # not the main thread (an embedding program): leave its handlers alone
            break
    stdout = sys.stdout
    sys.stdout = _PipeSafe(stdout)  # type: ignore[assignment]
    try:
        return int(args.func(args) or 0)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
