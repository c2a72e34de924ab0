"""Argument types for the CLI's numeric options: a value out of range is a usage error (exit
status 2, with the option's name and the value), never a verdict or a silent default."""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Callable


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (seconds, ratios)."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be greater than 0")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0 (tolerances)."""
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts: seeds, iterations)."""
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be 1 or more")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (retries, GPUs)."""
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


def engine_name(runnable: list[str]) -> Callable[[str], str]:
    """An ``--engine`` value among ``runnable`` (the engines a command line can run), with the
    nearest name for a typo, and for an engine that needs a person's text (``manual``) where to
    use it instead."""
    def parse(text: str) -> str:
        if text in runnable:
            return text
        from xeforge_core.engines.registry import ENGINES

        interactive = next((e for e in ENGINES if e.name == text and e.interactive), None)
        if interactive is not None:
            raise argparse.ArgumentTypeError(
                f"the {text} engine takes your own edit or a pasted reply, so it runs in the workbench (the "
                f"Optimize page of `streamlit run app.py`), not here; this command runs {', '.join(runnable)}")
        near = difflib.get_close_matches(text, runnable, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise argparse.ArgumentTypeError(f"unknown engine {text!r} (choose from {', '.join(runnable)}){hint}")

    return parse
