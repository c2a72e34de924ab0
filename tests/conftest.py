"""Shared test fixtures. Kernels run in Triton's interpreter: TRITON_INTERPRET=1 is set before
triton is imported anywhere in the test process or in workers started from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")
# The warm pool as users get it: one single-use worker kept ready, importing torch and triton
# while the test before it runs (a verification's jobs wait for their imports otherwise: about
# 30% of the verification tests' time on two cores). A test that changes the environment (its own
# cache dir) gets workers of its own; pytest's PYTEST_CURRENT_TEST does not count (pool.py).
os.environ.setdefault("XEFORGE_POOL_SIZE", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_CASES = ROOT.parent / "shared" / "cases" / "xeforge"


@pytest.fixture
def xeforge_cases() -> Path:
    """The real Xe-Forge kernels and specs, read in place (skips where ../shared is absent)."""
    if not SHARED_CASES.is_dir():
        pytest.skip(f"real Xe-Forge cases not present at {SHARED_CASES}")
    return SHARED_CASES


@pytest.fixture
def home_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The workbench's Home page (``app.py`` through its navigation) in Streamlit's AppTest, run
    once, with its own workspace and the cpu device."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("XEFORGE_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("XEFORGE_DEVICE", "cpu")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at
