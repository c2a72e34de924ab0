"""The ``masked_load_other`` lint fires only where the masked-off lanes of a ``tl.load`` without
``other`` (undefined values) can reach a result: a reduction, a dot, a scan, a store or atomic
whose mask does not imply the load's, a pointer. An elementwise kernel that stores them back
under the same (or a narrower) mask is clean: the trial's vector add, among others."""

from __future__ import annotations

from pathlib import Path

import pytest

from xeforge_core.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"


def _hits(source: str) -> list:
    return [i for i in analyze(source, "xpu").issues if i.rule_id == "masked_load_other"]


def _kernel(body: str) -> str:
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return (HEADER + "def k(x_ptr, w_ptr, y_ptr, n, K, BLOCK: tl.constexpr):\n"
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            "    mask = offs < n\n" + lines + "\n")


@pytest.mark.parametrize("sample", ["01_vector_add.py", "02_elementwise_chain.py", "03_row_softmax.py"])
def test_the_elementwise_samples_are_clean(sample):
    assert _hits((ROOT / "sample_kernels" / sample).read_text()) == []


@pytest.mark.parametrize("body", [
    # stored back under the mask it was loaded with: by name, inline, or narrower
    "x = tl.load(x_ptr + offs, mask=mask)\ntl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)",
    "tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) > 0.5, mask=offs < n)",
    "x = tl.load(x_ptr + offs, mask=mask)\ntl.store(y_ptr + offs, x, mask=mask & (offs % 2 == 0))",
    # its undefined lanes replaced before the sum
    "x = tl.load(x_ptr + offs, mask=mask)\nx = tl.where(mask, x, 0.0)\ntl.store(y_ptr, tl.sum(x, axis=0))",
    # an `other`: nothing undefined
    "x = tl.load(x_ptr + offs, mask=mask, other=0.0)\ntl.store(y_ptr, tl.sum(x, axis=0))",
])
def test_lanes_that_never_reach_a_result_are_not_flagged(body):
    assert _hits(_kernel(body)) == []


@pytest.mark.parametrize("body,line,reach", [
    ("x = tl.load(x_ptr + offs, mask=mask)\ntl.store(y_ptr, tl.sum(x, axis=0))", 10, "tl.sum at line 11"),
    ("x = tl.load(x_ptr + offs, mask=mask)\ns = x.max(axis=0)\ntl.store(y_ptr, s)", 10, "tl.max at line 11"),
    # through arithmetic and a loop-carried accumulator, summed after the loop
    ("acc = tl.zeros((BLOCK,), dtype=tl.float32)\nfor k in range(0, K):\n"
     "    acc += tl.load(x_ptr + k * n + offs, mask=mask).to(tl.float32) * 2.0\n"
     "tl.store(y_ptr, tl.sum(acc, axis=0))", 12, "tl.sum at line 13"),
    ("a = tl.load(x_ptr + offs[:, None] * K + offs[None, :], mask=offs[None, :] < K)\n"
     "b = tl.load(w_ptr + offs[:, None] * K + offs[None, :], mask=offs[:, None] < K, other=0.0)\n"
     "tl.store(y_ptr + offs[:, None] * K + offs[None, :], tl.dot(a, b))", 10, "tl.dot at line 12"),
    # stored under a wider mask, or none
    ("x = tl.load(x_ptr + offs, mask=mask & (offs % 2 == 0))\ntl.store(y_ptr + offs, x, mask=mask)", 10,
     "the store at line 11, whose mask does not imply the load's"),
    ("x = tl.load(x_ptr + offs, mask=mask)\ntl.store(y_ptr + offs, x)", 10, "the store at line 11 (no mask)"),
    # a gather through indices the mask left undefined, with a mask of its own that does not cover them
    ("i = tl.load(x_ptr + offs, mask=mask)\ntl.store(y_ptr + offs, tl.load(w_ptr + i), mask=mask)", 10,
     "the pointer of the load at line 11"),
])
def test_lanes_that_reach_a_result_are_flagged_at_the_load(body, line, reach):
    (hit,) = _hits(_kernel(body))
    assert hit.line == line
    assert hit.message.endswith(f"reach {reach}"), hit.message
    assert "without `other`" in hit.message
