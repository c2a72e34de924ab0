"""Drive the workbench in a real headless browser: start ``streamlit run app.py`` on a free
localhost port, open it in Chromium through Playwright, wait for each script run to finish,
switch pages through the sidebar, paste through the clipboard, take whole-page screenshots.

Shared by the browser test (``tests/test_browser_e2e.py``), the screenshot script
(``tools/screenshots.py``) and the page-switch benchmark (``benchmarks/bench_page_switch.py``).
Needs Debian's ``chromium`` at ``/usr/bin/chromium`` (``.ci/run`` installs it) and the
``playwright`` Python package (the ``test`` extra); Playwright's own browser download is not
used. The launch flags are the ones measured to work on the CPU machine (FACTS.md).
"""

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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
VIEWPORT = {"width": 1400, "height": 1000}

_RUNNING = '[data-testid="stApp"][data-test-script-state="running"]'
_IDLE = '[data-testid="stApp"]:not([data-test-script-state="running"])'


class DriverError(RuntimeError):
    """The app or the browser could not be started."""


def missing_requirements() -> str:
    """Why a browser run cannot happen here ("" when it can)."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is absent (apt-get install chromium; .ci/run does it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install -e '.[test]')"
    return ""


def free_port() -> int:
    """A free TCP port on localhost."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def streamlit_app(workdir: Path, *, env: dict[str, str] | None = None,
                  start_timeout_s: float = 90.0) -> Iterator[tuple[str, Path]]:
    """``streamlit run app.py`` with its workspace and caches under ``workdir`` (device cpu,
    Triton's interpreter), yielding ``(url, log_path)``; its whole process group is stopped at
    the end. Raises :class:`DriverError` with the log's tail when it does not start."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    full_env = dict(os.environ, XEFORGE_WORKSPACE=str(workdir / "ws"), XEFORGE_DEVICE="cpu",
                    XEFORGE_CACHE_DIR=str(workdir / "cache"), TRITON_INTERPRET="1",
                    STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **(env or {}))
    log_path = workdir / "streamlit.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise DriverError("streamlit did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.3)
        yield url, log_path
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


@contextlib.contextmanager
def browser_page(url: str) -> Iterator[Any]:
    """A Chromium page on ``url`` (clipboard permitted, so pastes are real pastes)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=VIEWPORT, permissions=["clipboard-read", "clipboard-write"])
            page = context.new_page()
            page.set_default_timeout(60_000)
            page.goto(url)
            page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
            idle(page)
            yield page
        finally:
            browser.close()


def idle(page: Any, timeout_ms: int = 120_000) -> float:
    """Wait until the app has finished the run the last action started; returns the seconds
    waited. A run that ended before we looked is fine too."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    start = time.monotonic()
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_selector(_RUNNING, timeout=1000)
    page.wait_for_selector(_IDLE, timeout=timeout_ms)
    return time.monotonic() - start


def install_run_clock(page: Any) -> None:
    """Record in the page the time of every change of the app's script state (a
    MutationObserver on the app root), so a page switch is timed from the click to the end of
    the run it caused, however short the run is."""
    page.evaluate("""() => {
      if (window.__xfRuns) return;
      window.__xfRuns = [];
      const app = document.querySelector('[data-testid="stApp"]');
      // one callback may carry several changes: each record's old value counts too, so a run
      // that started and ended between two callbacks is still seen
      new MutationObserver(records => {
        const t = performance.now();
        for (const r of records) window.__xfRuns.push([t, r.oldValue]);
        window.__xfRuns.push([t, app.getAttribute('data-test-script-state')]);
      }).observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']});
    }""")


def switch_page(page: Any, label: str, *, heading: str | None = None, timeout_ms: int = 120_000) -> float:
    """Open a page through the sidebar navigation and return the seconds from the click until
    the run it started has finished and ``heading`` (default: the page's ``label``) is shown."""
    install_run_clock(page)
    t0 = page.evaluate("() => performance.now()")
    page.locator('[data-testid="stSidebarNav"] a', has_text=label).first.click()
    page.wait_for_function(
        """t0 => window.__xfRuns.some(([t, s]) => t > t0 && s === 'running')
                && window.__xfRuns[window.__xfRuns.length - 1][1] !== 'running'""", arg=t0, timeout=timeout_ms)
    page.get_by_role("heading", name=heading or label).first.wait_for(timeout=timeout_ms)
    t1 = page.evaluate("() => performance.now()")
    return (t1 - t0) / 1000.0


def goto(page: Any, label: str) -> None:
    """Open a page through the sidebar navigation (keeps the browser session's state)."""
    page.locator('[data-testid="stSidebarNav"] a', has_text=label).first.click()
    idle(page)


def wait_for(page: Any, locator: Any, timeout_ms: int) -> None:
    """Wait for ``locator`` to be visible; on timeout raise ``AssertionError`` with the messages
    the page shows."""
    deadline = time.monotonic() + timeout_ms / 1000
    while time.monotonic() < deadline:
        if locator.count() and locator.first.is_visible():
            return
        page.wait_for_timeout(500)
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    raise AssertionError(f"timed out after {timeout_ms / 1000:.0f} s; the page says: {alerts}")


def choose(page: Any, label: str, option: str, timeout_ms: int = 60_000) -> None:
    """Pick the option of the select box ``label`` whose text starts with ``option`` (e.g. a
    version's ``"#0 "``), then wait for the run it starts. Clicks the option in the open list
    (opening it again when a rerun of the page closed it) rather than typing into the box, which
    a busy machine can outrun; raises ``AssertionError`` if the box does not show the choice."""
    import re

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    box = page.get_by_role("combobox", name=label)
    choice = page.get_by_role("option", name=re.compile("^" + re.escape(option))).first
    for _attempt in range(5):
        idle(page)
        box.click()
        try:
            choice.wait_for(state="visible", timeout=5_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    choice.click(timeout=timeout_ms)
    idle(page)
    expect(box).to_have_value(re.compile("^" + re.escape(option)), timeout=timeout_ms)


def paste(page: Any, locator: Any, text: str, *, replace: bool = False) -> None:
    """Paste ``text`` into ``locator`` through the clipboard (Ctrl+V), as a user does (with
    ``replace``, over everything the box holds: Ctrl+A first); then leave the box so Streamlit
    receives the value."""
    locator.click()
    if replace:
        page.keyboard.press("Control+A")
    page.evaluate("t => navigator.clipboard.writeText(t)", text)
    page.keyboard.press("Control+V")
    page.keyboard.press("Tab")


def shot(page: Any, directory: Path, name: str, *, max_height: int = 7000) -> Path:
    """Screenshot the whole page into ``directory/name.png``: the app scrolls inside its own
    container, so the viewport is grown to the content's height (capped) for the shot."""
    directory.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("""() => {
      const main = document.querySelector('[data-testid="stMainBlockContainer"]');
      return main ? main.scrollHeight + 160 : document.body.scrollHeight;
    }""")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": int(min(max(height, 1000), max_height))})
    page.wait_for_timeout(700)
    path = directory / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)
    page.wait_for_timeout(200)
    return path


def element_shot(page: Any, locator: Any, directory: Path, name: str) -> Path:
    """Screenshot one element (a chart) into ``directory/name.png``, scrolled into view first."""
    directory.mkdir(parents=True, exist_ok=True)
    locator.scroll_into_view_if_needed()
    page.wait_for_timeout(700)  # let the chart finish drawing
    path = directory / f"{name}.png"
    locator.screenshot(path=str(path))
    return path
