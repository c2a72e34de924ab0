"""Argument types for the CLI's numeric options: a value out of range is a usage error (exit
status 2, with the option's name and the value), never a verdict or a silent default."""

from __future__ import annotations

import argparse
import math


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
