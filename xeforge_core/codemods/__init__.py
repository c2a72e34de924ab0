"""libcst codemods the rules engine applies (each returns a ``CodemodResult``):
``dtype_fix.fix_dtypes``, ``autotune.add_autotune``, ``xpu_specific.apply_xpu_knobs`` and
``portability.port_source``."""

from xeforge_core.codemods.common import CodemodResult

__all__ = ["CodemodResult"]
