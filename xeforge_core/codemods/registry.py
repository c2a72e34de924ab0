"""The one registry of codemods.

A **codemod** is a name, a one-line description and a function with one signature,
``run(source, settings) -> CodemodResult``: ``source`` is the kernel module's text and
``settings`` a :class:`CodemodSettings` (target family, architecture, hardware profile, search
space, options, problem), of which each codemod reads what it needs. Each codemod module
registers its entry point where it is defined, the way lint rules do (``lints.py``)::

    @register("memory_access", "coalesced, vectorised loads and stores sized for the target")
    def _run(source: str, settings: CodemodSettings) -> CodemodResult: ...

Stages name the codemod that serves them (``vocab.stages.Stage.codemod``); the rules engine and
the feasibility check look the name up here (:func:`get_codemod`). Adding a codemod is its own
module plus a ``codemod:`` name on a stage. Every module of this package is imported once on
the first look-up, so a module registers itself by being in the package.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.codemods.common import CodemodResult


@dataclass(frozen=True)
class CodemodSettings:
    """What a codemod may read besides the source: ``target`` family (``xpu``/``cuda``/``cpu``),
    ``arch``, the hardware ``profile`` (a ``HardwareProfile`` or its dict), a ``search_space``
    (autotune config dicts) replacing the knowledge base's, ``options`` (e.g. ``max_configs``,
    ``group_size_m``) and the ``problem`` (for codemods that decide by its roofline)."""

    target: str = "xpu"
    arch: str | None = None
    profile: Any = None
    search_space: list[dict[str, Any]] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    problem: Any = None


CodemodFn = Callable[[str, CodemodSettings], CodemodResult]


@dataclass(frozen=True)
class CodemodSpec:
    """One registered codemod: ``name`` (what a stage's ``codemod`` says), a one-line
    ``description`` and ``run``."""

    name: str
    description: str
    run: CodemodFn


_REGISTRY: dict[str, CodemodSpec] = {}
_LOADED = False


def register(name: str, description: str) -> Callable[[CodemodFn], CodemodFn]:
    """Register the decorated ``run(source, settings)`` under ``name``. Raises ``ValueError``
    when another function already holds the name."""
    def deco(fn: CodemodFn) -> CodemodFn:
        held = _REGISTRY.get(name)
        if held is not None and held.run.__qualname__ != fn.__qualname__:
            raise ValueError(f"codemod {name!r} is registered twice ({held.run.__module__} and {fn.__module__})")
        _REGISTRY[name] = CodemodSpec(name, description, fn)
        return fn

    return deco


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    import xeforge_core.codemods as package

    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        importlib.import_module(info.name)
    _LOADED = True


def codemods() -> dict[str, CodemodSpec]:
    """Every registered codemod by name (the package's modules imported first)."""
    _load()
    return dict(_REGISTRY)


def get_codemod(name: str) -> CodemodSpec:
    """The codemod registered as ``name``. Raises ``KeyError`` naming the registered ones."""
    found = codemods().get(name)
    if found is None:
        raise KeyError(f"no codemod {name!r} is registered (registered: {', '.join(sorted(_REGISTRY))})")
    return found


__all__ = ["CodemodFn", "CodemodSettings", "CodemodSpec", "codemods", "get_codemod", "register"]
