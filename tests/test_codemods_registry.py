"""Codemods register themselves, with one signature, into one registry; the stages name them
and the rules engine runs what the registry holds."""

from __future__ import annotations

import pytest

from xeforge_core.codemods import registry
from xeforge_core.codemods.common import CodemodResult
from xeforge_core.codemods.registry import CodemodSettings, codemods, get_codemod, register
from xeforge_core.engines.base import ProposalContext
from xeforge_core.engines.rules import RulesEngine
from xeforge_core.vocab.stages import STAGES


def test_every_stage_codemod_is_registered_with_a_description() -> None:
    found = codemods()
    for stage in STAGES:
        if stage.codemod:
            spec = found[stage.codemod]
            assert spec.description and spec.run.__module__.startswith("xeforge_core.codemods.")
    with pytest.raises(KeyError, match="registered: .*memory_access"):
        get_codemod("memory_acces")


def test_a_codemod_registered_in_a_module_of_its_own_serves_its_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    codemods()  # the package's own registered first
    monkeypatch.setattr(registry, "_REGISTRY", {k: v for k, v in registry._REGISTRY.items() if k != "dtype_fix"})

    @register("dtype_fix", "appends a marker (a toy replacing the real one for this test)")
    def _toy(source: str, settings: CodemodSettings) -> CodemodResult:
        return CodemodResult("dtype_fix", source + f"# {settings.target}\n", changed=True, notes=["marked"])

    src = "import triton\n\n@triton.jit\ndef k(x):\n    pass\n"
    cand = RulesEngine().propose("dtype_fix", ProposalContext(stage="dtype_fix", original_code=src, current_code=src))
    assert cand.applicable and cand.code.endswith("# xpu\n") and "marked" in cand.rationale


def test_one_name_is_held_by_one_function() -> None:
    def other(source: str, settings: CodemodSettings) -> CodemodResult:
        return CodemodResult("x", source, changed=False)

    with pytest.raises(ValueError, match="registered twice"):
        register("memory_access", "another")(other)
