"""One answer to "which functions are Triton kernels": the problem reader, the analysis and the
codemods name the same kernels, on our samples and on the Xe-Forge kernels written outside the
project (read in place from ../shared/cases, skipped where absent)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from xeforge_core.analysis import extract_facts
from xeforge_core.codemods.common import kernel_defs
from xeforge_core.problem import read_module
from xeforge_core.problem.module import triton_decorator_kind

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT.parent / "shared" / "cases" / "xeforge"
SAMPLES = sorted(p for p in (ROOT / "sample_kernels").glob("*.py") if not p.stem.endswith("_ref"))


def _files() -> list[Path]:
    cases = sorted(CASES.glob("*.py")) if CASES.is_dir() else []
    return SAMPLES + cases


@pytest.mark.parametrize("name,kind", [
    ("triton.jit", "jit"), ("jit", "jit"), ("triton.autotune", "autotune"), ("autotune", "autotune"),
    ("triton.heuristics", "heuristics"), ("torch.jit", None), ("numba.jit", None), ("tl.jit", None),
    ("functools.cache", None), ("", None),
])
def test_decorator_names(name: str, kind: str | None) -> None:
    assert triton_decorator_kind(name) == kind


def test_the_readers_agree_on_every_kernel() -> None:
    files = _files()
    assert len(files) >= 13
    for path in files:
        source = path.read_text()
        by_reader = set(read_module(source, path).kernel_names)
        by_analysis = {k.name for k in extract_facts(source).kernels}
        by_codemods = {fn.name.value for fn in kernel_defs(cst.parse_module(source))}
        assert by_reader, f"{path.name}: no kernel found"
        assert by_reader == by_analysis == by_codemods, (path.name, by_reader, by_analysis, by_codemods)


def test_torch_jit_is_not_a_triton_kernel() -> None:
    source = ("import torch\nimport triton\n\n@torch.jit.script\ndef f(x):\n    return x\n\n"
              "@triton.jit(do_not_specialize=['n'])\ndef k(x_ptr, n):\n    pass\n")
    assert read_module(source, require_model=False).kernel_names == ["k"]
    assert [k.name for k in extract_facts(source).kernels] == ["k"]
    assert [fn.name.value for fn in kernel_defs(cst.parse_module(source))] == ["k"]
