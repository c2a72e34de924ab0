"""What Triton's interpreter cannot run: CUDA's and ROCm's libdevice.

Triton's interpreter (3.6) implements ``tl`` and ``tl.math`` in numpy but not the extern math
libraries: a ``libdevice.tanh(x)`` there returns ``None``, and the kernel then fails wherever the
value is next used, with an error that names neither libdevice nor the call
("cannot convert None", "'NoneType' object has no attribute 'to'"). ``stub_libdevice`` replaces
every public function of ``triton.language.extra.libdevice`` (and of its ``cuda`` and ``hip``
back ends) with one that raises ``ExternUnsupported`` naming it, before a module under test is
imported (``from ... libdevice import tanh`` included), so the verdict says what cannot run
here (``errors.classify``: ``environment``), never a compile error. Worker-side, interpreter only.
"""

from __future__ import annotations

import importlib
from typing import Any

from xeforge_core.errors import XeForgeError

#: The libdevice modules a kernel may import (the dispatcher and its back ends).
MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice",
           "triton.language.extra.hip.libdevice")


class ExternUnsupported(XeForgeError):
    """A kernel called an extern function (``libdevice.tanh``) that Triton's interpreter does not
    implement. ``call`` is its name as the kernel wrote it."""

    def __init__(self, call: str) -> None:
        super().__init__(f"{call} is not implemented by Triton's interpreter")
        self.call = call


def _stub(name: str) -> Any:
    def stub(*args: Any, **kwargs: Any) -> Any:
        raise ExternUnsupported(f"libdevice.{name}")

    stub.__name__ = name
    return stub


def stub_libdevice() -> list[str]:
    """Replace the public functions of the libdevice modules (``MODULES``) with stubs raising
    ``ExternUnsupported``. Returns the modules patched (a back end that cannot be imported is
    left out). Call only in the interpreter: on a GPU these functions compile."""
    patched = []
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, value in list(vars(module).items()):
            if not attr.startswith("_") and callable(value) and getattr(value, "__module__", None) == module.__name__:
                setattr(module, attr, _stub(attr))
        patched.append(name)
    return patched
