"""Shared test fixtures. Kernels run in Triton's interpreter: TRITON_INTERPRET=1 is set before
triton is imported anywhere in the test process or in workers started from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_CASES = ROOT.parent / "shared" / "cases" / "xeforge"


@pytest.fixture
def xeforge_cases() -> Path:
    """The real Xe-Forge kernels and specs, read in place (skips where ../shared is absent)."""
    if not SHARED_CASES.is_dir():
        pytest.skip(f"real Xe-Forge cases not present at {SHARED_CASES}")
    return SHARED_CASES
