"""libcst codemods the rules engine applies (each returns a ``CodemodResult``).

Each codemod registers ``run(source, CodemodSettings) -> CodemodResult`` under its name in
:mod:`xeforge_core.codemods.registry` where it is defined; a stage names the codemod that
serves it (``vocab.stages``)."""

from xeforge_core.codemods.common import CodemodResult

__all__ = ["CodemodResult"]
