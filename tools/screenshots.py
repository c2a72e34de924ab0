"""Regenerate the screenshots of every page in ``docs/screenshots/`` on this machine.

    python tools/screenshots.py [--out docs/screenshots]

Starts the app (device cpu, its own workspace and caches in a temporary directory), and in
headless Chromium: loads the GEMM sample and starts a session (Home), lets the rules engine
propose and verify the ``dtype_fix`` stage (Optimize, with the side-by-side diff and its
within-line marks), approves it (History), compiles both versions for NVIDIA Hopper and shows
TTGIR with the registers and the diff between them (IR), lints the kernel (Knowledge), shows
the recorded H200 pipeline results with their speedup chart and roofline (Benchmarks), runs the
doctor (Device), shows the recorded
Flash Attention trajectory (Flash Attention demo), and has an oversized paste refused (Home).
One PNG per page, named as ``docs/screenshots/README.md`` lists them. Takes a few minutes
(the verifications run in Triton's interpreter).

Needs Debian's chromium and the playwright package (``tools/appdriver.py``); the page icons
need an emoji font (Debian's ``fonts-noto-color-emoji``), else they show as boxes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import appdriver  # noqa: E402

SAMPLE = "07_gemm_fp32_upcast"
LONG_MS = 600_000


def take(out: Path) -> list[Path]:
    """Drive the app and write the screenshots into ``out``; returns their paths."""
    from playwright.sync_api import expect

    expect.set_options(timeout=120_000)
    shots: list[Path] = []
    started = time.monotonic()

    def say(what: str) -> None:
        print(f"{time.monotonic() - started:6.1f} s  {what}", flush=True)

    with tempfile.TemporaryDirectory(prefix="xeforge-shots-") as tmp, \
            appdriver.streamlit_app(Path(tmp)) as (url, _log), appdriver.browser_page(url) as page:
        page.get_by_label("Sample kernel").click()
        page.get_by_role("option", name=SAMPLE, exact=False).first.click()
        appdriver.idle(page)
        page.get_by_role("button", name="Load sample").click()
        appdriver.idle(page)
        page.get_by_role("button", name="Start new session").click()
        appdriver.idle(page)
        expect(page.get_by_text("commit 0 is the baseline")).to_be_visible()
        appdriver.wait_for(page, page.get_by_text("Triton interpreter: correctness can be trusted"), LONG_MS)
        shots.append(appdriver.shot(page, out, "01_home"))
        say("home")

        appdriver.goto(page, "Optimize")
        page.get_by_role("button", name="Propose").click()
        appdriver.wait_for(page, page.get_by_role("heading", name="Candidate for dtype_fix"), LONG_MS)
        appdriver.idle(page)
        shots.append(appdriver.shot(page, out, "02_optimize"))
        page.get_by_role("button", name="Approve").click()
        appdriver.idle(page)
        say("optimize")

        appdriver.goto(page, "History")
        shots.append(appdriver.shot(page, out, "03_history"))
        say("history")

        appdriver.goto(page, "IR")
        appdriver.wait_for(page, page.get_by_text("compiled ahead of time by Triton"), LONG_MS)
        appdriver.choose(page, "Compare with", "#0 ")
        appdriver.wait_for(page, page.get_by_text("lines removed"), LONG_MS)
        appdriver.idle(page)
        shots.append(appdriver.shot(page, out, "04_ir"))
        say("ir")

        for label, name in (("Knowledge", "05_knowledge"), ("Benchmarks", "06_benchmarks")):
            appdriver.goto(page, label)
            shots.append(appdriver.shot(page, out, name))
            say(label)
        # the recorded H200 results: speedups on a log axis, and the roofline of the H200 with each
        # problem's baseline and rules-engine result placed on it
        page.set_viewport_size(appdriver.VIEWPORT)
        for key, name in (("bench_recorded_chart", "10_benchmarks_speedups"), ("bench_recorded_roofline",
                                                                              "11_roofline")):
            chart = page.locator(f".st-key-{key}")
            chart.wait_for(timeout=LONG_MS)
            shots.append(appdriver.element_shot(page, chart, out, name))
        say("charts")

        appdriver.goto(page, "Device")
        page.get_by_role("button", name="Run the doctor").click()
        appdriver.wait_for(page, page.get_by_text("TRUSTED for correctness"), LONG_MS)
        appdriver.idle(page)
        shots.append(appdriver.shot(page, out, "07_device"))
        say("device")

        appdriver.goto(page, "Flash Attention demo")
        shots.append(appdriver.shot(page, out, "08_flash_attention"))
        say("flash attention")

        appdriver.goto(page, "Home")
        page.get_by_role("tab", name="Paste").click()
        big = ((appdriver.ROOT / "sample_kernels" / "01_vector_add.py").read_text() * 400)[:579_000]
        appdriver.paste(page, page.get_by_label("Kernel module (Python)"), big)
        appdriver.idle(page)
        page.get_by_role("button", name="Load pasted kernel").click()
        appdriver.idle(page)
        expect(page.get_by_text("the limit is 512.0 KiB (524,288 bytes)").first).to_be_visible()
        shots.append(appdriver.shot(page, out, "09_paste_refused"))
        say("paste refused")
    return shots


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=appdriver.ROOT / "docs" / "screenshots",
                   help="directory for the PNG files (default: docs/screenshots)")
    args = p.parse_args(argv)
    why = appdriver.missing_requirements()
    if why:
        print(f"screenshots: {why}", file=sys.stderr)
        return 2
    for path in take(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
