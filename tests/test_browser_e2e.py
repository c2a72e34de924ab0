"""End to end in a real headless browser: start ``streamlit run app.py`` on a free localhost
port, load a sample, start a session, let the rules engine propose and verify a stage, approve
it, and see History show the new commit. Every page is screenshotted on the way (into
``$XEFORGE_SCREENSHOT_DIR`` when set, else a temporary directory).

Needs Debian's chromium at /usr/bin/chromium (``.ci/run`` installs it) and the playwright
Python package; skips with the reason when either is missing."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
SAMPLE = "07_gemm_fp32_upcast"
VERIFY_TIMEOUT_MS = 300_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free localhost port, stopped (its whole process group)
    at the end."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium; .ci/run does it)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    port = _free_port()
    env = dict(os.environ, XEFORGE_WORKSPACE=str(tmp_path / "ws"), XEFORGE_DEVICE="cpu",
               TRITON_INTERPRET="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    log = open(tmp_path / "streamlit.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("streamlit did not start:\n" + (tmp_path / "streamlit.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait(timeout=15)
        log.close()
        # shown by pytest only when the test failed
        print("---- streamlit log (tail) ----\n" + (tmp_path / "streamlit.log").read_text()[-4000:])


def _idle(page, timeout_ms: int = 120_000) -> None:  # noqa: ANN001
    """Wait until the app has finished the run that the last action started (the app root
    carries the script state; a run that ended before we looked is fine too)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="running"]', timeout=1500)
    page.wait_for_selector('[data-testid="stApp"]:not([data-test-script-state="running"])', timeout=timeout_ms)
    page.wait_for_timeout(300)


def _goto(page, label: str) -> None:  # noqa: ANN001
    """Open a page through the sidebar navigation (keeps the browser session's state)."""
    page.locator('[data-testid="stSidebarNav"] a', has_text=label).first.click()
    _idle(page)


def _wait_for(page, locator, timeout_ms: int) -> None:  # noqa: ANN001
    """Wait for ``locator`` to be visible; on timeout, fail with the messages the page shows."""
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        if locator.count() and locator.first.is_visible():
            return
        page.wait_for_timeout(1000)
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    pytest.fail(f"timed out after {timeout_ms / 1000:.0f}s; the page says: {alerts}")


def _shot(page, shots: Path, name: str) -> None:  # noqa: ANN001
    """Screenshot the whole page: the app scrolls inside its own container, so the viewport is
    grown to the content's height (capped) for the shot, then restored."""
    height = page.evaluate(
        "() => Math.max(...Array.from(document.querySelectorAll('*')).map(e => e.scrollHeight))")
    page.set_viewport_size({"width": 1400, "height": int(min(max(height, 1000), 6000))})
    page.wait_for_timeout(800)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.wait_for_timeout(300)


def test_load_sample_approve_stage_and_see_history(app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a loaded CI machine can take a while to rerun the app
    shots = Path(os.environ.get("XEFORGE_SCREENSHOT_DIR") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            page.goto(app_url)
            expect(page.get_by_role("heading", name="Xe-Forge Studio")).to_be_visible()
            _idle(page)

            # Home: pick the GEMM sample, load it, read the problem, start a session
            page.get_by_label("Sample kernel").click()
            page.get_by_role("option", name=SAMPLE, exact=False).first.click()
            _idle(page)
            page.get_by_role("button", name="Load sample").click()
            _idle(page)
            expect(page.get_by_text(f"Problem: {SAMPLE}")).to_be_visible()
            page.get_by_role("button", name="Start new session").click()
            _idle(page)
            expect(page.get_by_text("commit 0 is the baseline")).to_be_visible()
            _shot(page, shots, "01_home")

            # Optimize: the rules engine proposes dtype_fix; the CoVeR loop verifies it
            _goto(page, "Optimize")
            expect(page.get_by_role("heading", name="Stage: dtype_fix")).to_be_visible()
            page.get_by_role("button", name="Propose").click()
            _wait_for(page, page.get_by_role("heading", name="Candidate for dtype_fix"), VERIFY_TIMEOUT_MS)
            _idle(page)
            approve = page.get_by_role("button", name="Approve")
            expect(approve).to_be_enabled()
            _shot(page, shots, "02_optimize")
            approve.click()
            _idle(page)
            expect(page.get_by_text("Approved: committed as a new version")).to_be_visible()

            # History: the approved stage is the newest commit of the timeline
            _goto(page, "History")
            expect(page.get_by_role("heading", name=f"Timeline of {SAMPLE}")).to_be_visible()
            expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible()
            # the newest version is selected for its verdict: the approved dtype_fix commit
            expect(page.get_by_text("Stage: dtype_fix").first).to_be_visible()
            expect(page.get_by_text("Engine: rules").first).to_be_visible()
            _shot(page, shots, "03_history")

            # the other pages render with this session
            for label, name in (("IR", "04_ir"), ("Knowledge", "05_knowledge"), ("Benchmarks", "06_benchmarks"),
                                ("Device", "07_device")):
                _goto(page, label)
                expect(page.locator('[data-testid="stException"]')).to_have_count(0)
                _shot(page, shots, name)

            # the Flash Attention demo loads its trajectory and brings up the first step
            _goto(page, "Flash Attention demo")
            page.get_by_role("button", name="Load the Flash Attention demo").click()
            _idle(page)
            page.get_by_role("button", name="Bring this step up as the candidate").click()
            _idle(page)
            expect(page.get_by_role("button", name="Verify")).to_be_enabled()
            expect(page.locator('[data-testid="stException"]')).to_have_count(0)
            _shot(page, shots, "08_flash_attention")
        finally:
            browser.close()
