"""Secrets never reach a session: every blob and message written into a session repository
passes through :func:`redact`, which replaces the values of secret-looking environment
variables (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*CREDENTIAL*``) and every value
given to :func:`register_secret` (an API key typed into the UI) with ``[REDACTED]``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"

_SECRET_NAME_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_EXTRA_SECRETS: set[str] = set()


def register_secret(value: str | None) -> None:
    """Add ``value`` (e.g. an API key typed into the UI) to the strings redacted from anything
    written into any session repository by this process. Values shorter than 6 characters are
    ignored (too likely to occur by chance)."""
    if value and len(value) >= 6:
        _EXTRA_SECRETS.add(value)


def _secret_values(extra: Iterable[str] = ()) -> list[str]:
    values = set(_EXTRA_SECRETS)
    values.update(v for v in extra if v and len(v) >= 6)
    for name, value in os.environ.items():
        if _SECRET_NAME_RE.search(name) and value and len(value) >= 8:
            values.add(value)
    return sorted(values, key=len, reverse=True)


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every known secret value replaced by ``[REDACTED]``."""
    for secret in _secret_values(extra):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
