"""Wording shared by the CLI, the reports and the pages."""

from __future__ import annotations


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"1 iteration"``, ``"2 iterations"`` (``words``: the plural when it is not ``word + "s"``)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
