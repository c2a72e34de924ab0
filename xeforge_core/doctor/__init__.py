"""The device doctor: can this GPU be trusted for this model?

Stack integrity (``stack``), a preflight battery (``battery``), op coverage for a model
(``coverage``), runtime experiments (``experiments``), a verdict from explicit criteria
(``verdict``) and a measured way out (``wayout``), put together by ``run_doctor``
(``report``). Everything that touches the device runs in a supervised child process
(``child`` via ``isolate``).

This ``__init__`` imports nothing eagerly: the child process imports this package too, and it
may only need torch, triton, numpy and the standard library.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DoctorReport", "load_cached_report", "run_doctor"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from xeforge_core.doctor import report

        return getattr(report, name)
    raise AttributeError(name)
