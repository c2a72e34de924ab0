"""What a problem format declares (standard library only: the parent reads it without torch)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProblemFormat:
    """One way a kernel problem is laid out on disk and entered by the harness.

    ``entry_kind``: ``"class"`` (instantiate one of ``entry_names`` with the constructor
    arguments) or ``"function"`` (call one of ``entry_names`` bound by ``adapt`` to the
    problem's reference model). ``reference_class``: the class of the same file that is the
    truth when the entry is found (KernelBench's solution file keeps its ``Model``).
    ``spec_suffixes`` / ``reference_suffixes``: sibling files that complete a kernel file
    (``<stem>.yaml``, ``<stem>_ref.py``). ``inputs_function`` / ``init_inputs_function``: the
    module functions that build a spec-less problem's inputs and constructor arguments.
    ``adapt``: worker side, for a ``function`` entry, ``adapt(fn, reference_model,
    forward_params, constructor_arguments) -> torch.nn.Module`` (imports torch itself);
    ``None`` for a class entry.
    """

    name: str
    title: str
    entry_kind: str = "class"
    entry_names: tuple[str, ...] = ()
    reference_class: str | None = None
    spec_suffixes: tuple[str, ...] = ()
    reference_suffixes: tuple[str, ...] = ()
    inputs_function: str = ""
    init_inputs_function: str = ""
    adapt: Callable[..., Any] | None = None


def forward_params(model_cls: type) -> list[str]:
    """Names of ``model_cls.forward``'s parameters after ``self``."""
    try:
        params = list(inspect.signature(model_cls.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p.name for p in params[1:] if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def constructor_arguments(model_class: type, inits: list[Any]) -> dict[str, Any]:
    """``{name: value}`` of ``model_class(*inits)``'s ``__init__`` parameters; ``{}`` where
    the signature cannot be read or does not take ``inits``."""
    try:
        sig = inspect.signature(model_class.__init__)
        bound = sig.bind(None, *inits)
    except (TypeError, ValueError):
        return {}
    first = next(iter(sig.parameters))  # ``self``
    return {k: v for k, v in bound.arguments.items() if k != first}


def constructor_values(model_class: type, got: list[Any] | tuple[Any, ...]) -> list[Any]:
    """The positional ``model_class(...)`` values of what ``get_init_inputs()`` returned: the list
    itself (KernelBench's convention), or, for KernelBook's ``[[args], {kwargs}]`` (GPUMODE/KernelBook:
    every problem's ``get_init_inputs()`` returns ``[[], {}]`` or ``[[], {'pad_idx': 0}]``), the
    arguments and keywords laid out in ``__init__``'s parameter order, defaults filled in. The
    KernelBook reading is taken when the value has that shape and binds to ``__init__``; a keyword
    that only a keyword-only parameter takes keeps the value as it was (the constructor then says
    what it rejects)."""
    got = list(got)
    if not (len(got) == 2 and isinstance(got[0], (list, tuple)) and isinstance(got[1], dict)
            and all(isinstance(k, str) for k in got[1])):
        return got
    try:
        sig = inspect.signature(model_class.__init__)
        bound = sig.bind(None, *got[0], **got[1])
    except (TypeError, ValueError):
        return got
    bound.apply_defaults()
    values: list[Any] = []
    for i, (name, param) in enumerate(sig.parameters.items()):
        if i == 0:
            continue  # self
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            values.append(bound.arguments[name])
        elif param.kind == param.VAR_POSITIONAL:
            values.extend(bound.arguments.get(name, ()))
        elif name in got[1] or (param.kind == param.VAR_KEYWORD and bound.arguments.get(name)):
            return got
    return values
