"""The main path in a real headless browser (Debian's chromium driven by playwright, through
``tools/appdriver.py``): load a sample, let the rules engine propose and verify a stage, apply
a hunk selection, verify it, approve it, restore the baseline from History, see the IR page
show TTGIR compiled for an NVIDIA target on this CPU machine, and have an oversized paste
refused with its size and the limit while the loaded kernel stays. Along the way: the diff shown
after a hunk selection is the merged code's, a key typed in a field is text while A outside one
approves, and a pasted spec with a misspelt key is refused with its line while the Paste tab
stays open through the reruns.

Skips, saying why, where chromium or playwright is missing (``.ci/run`` installs chromium).
Screenshots go to ``$XEFORGE_SCREENSHOT_DIR`` when set, else a temporary directory
(``tools/screenshots.py`` makes the documented ones).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import appdriver  # noqa: E402

pytestmark = pytest.mark.browser

SAMPLE = "05_rmsnorm"  # its dtype_fix proposal has three hunks; one of them is left out
VERIFY_TIMEOUT_MS = 300_000


@pytest.fixture
def app(tmp_path: Path):
    why = appdriver.missing_requirements()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the browser test, but: {why}")
        pytest.skip(why)
    with appdriver.streamlit_app(tmp_path / "app") as (url, log):
        try:
            yield url
        finally:
            print("---- streamlit log (tail) ----\n" + log.read_text()[-4000:])  # shown when the test fails


def test_main_path_in_chromium(app: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # a loaded CI machine can take a while to rerun the app
    shots = Path(os.environ.get("XEFORGE_SCREENSHOT_DIR") or tmp_path / "shots")
    started = time.monotonic()

    def phase(name: str) -> None:  # printed with the log when the test fails
        print(f"{time.monotonic() - started:6.1f} s  {name}")

    with appdriver.browser_page(app) as page:
        expect(page.get_by_role("heading", name="Xe-Forge Studio")).to_be_visible()

        # Home: the RMSNorm sample, its problem, a new session
        page.get_by_label("Sample kernel").click()
        page.get_by_role("option", name=SAMPLE, exact=False).first.click()
        appdriver.idle(page)
        page.get_by_role("button", name="Load sample").click()
        appdriver.idle(page)
        expect(page.get_by_text(f"Problem: {SAMPLE}")).to_be_visible()
        expect(page.get_by_text("FLOP/byte").first).to_be_attached()  # intensity with its unit (a grid cell)
        page.get_by_role("button", name="Start new session").click()
        appdriver.idle(page)
        expect(page.get_by_text("commit 0 is the baseline")).to_be_visible()

        phase("home done")
        # Optimize: the rules engine proposes dtype_fix; the CoVeR loop verifies it
        appdriver.goto(page, "Optimize")
        expect(page.get_by_role("heading", name="Stage: dtype_fix")).to_be_visible()
        page.get_by_role("button", name="Propose").click()
        appdriver.wait_for(page, page.get_by_role("heading", name="Candidate for dtype_fix"), VERIFY_TIMEOUT_MS)
        appdriver.idle(page)
        # the changed part of the line is marked within it
        expect(page.locator("span[style*='#ffc1bd']").first).to_be_attached()
        phase("proposed and verified")
        # leave the third hunk out (the second pass stays in fp64) and apply the selection: the merged
        # code must be verified again before it can be approved
        box = page.get_by_role("checkbox", name="hunk 2")
        page.get_by_text("hunk 2", exact=True).click()  # the label: Streamlit's input sits under it
        appdriver.idle(page)
        expect(box).not_to_be_checked()
        page.get_by_role("button", name="Apply hunk selection").click()
        appdriver.idle(page)
        expect(page.get_by_text("Kept hunks [0, 1]: verify the merged code before approving")).to_be_visible()
        phase("hunks applied")
        approve = page.get_by_role("button", name="Approve")
        expect(approve).to_be_disabled()
        page.get_by_role("button", name="Verify", exact=True).click()
        appdriver.wait_for(page, page.get_by_text("verdict: ok"), VERIFY_TIMEOUT_MS)
        appdriver.idle(page)
        expect(approve).to_be_enabled()
        # the diff shown is the merged code: the third hunk's line is not in it
        expect(page.get_by_text("kept hunks 0, 1 of 3").first).to_be_visible()
        appdriver.shot(page, shots, "02_optimize")
        # keyboard shortcuts: a key typed in a field is text, not a command ...
        reason = page.get_by_label("Reason for rejecting (optional)")
        reason.click()
        page.keyboard.type("a r")
        reason.press("Tab")  # commits the field (a rerun)
        appdriver.idle(page)
        expect(approve).to_be_enabled()  # neither approved nor rejected
        assert reason.input_value() == "a r"
        # ... and outside one, A approves
        page.evaluate("() => document.activeElement && document.activeElement.blur()")
        page.keyboard.press("a")
        appdriver.idle(page)
        expect(page.get_by_text("Approved: committed as a new version")).to_be_visible()

        phase("approved")
        # History: restore the baseline as a new version
        appdriver.goto(page, "History")
        expect(page.get_by_role("heading", name=f"Timeline of {SAMPLE}")).to_be_visible()
        expect(page.get_by_text("Stage: dtype_fix").first).to_be_visible()
        appdriver.choose(page, "Version to restore", "#0 ")
        page.get_by_role("button", name="Restore", exact=True).click()
        appdriver.idle(page)
        expect(page.get_by_text("Restored #0").first).to_be_visible()
        expect(page.get_by_text("as #2").first).to_be_visible()

        phase("restored")
        # IR: TTGIR compiled ahead of time for NVIDIA Hopper on this CPU machine
        appdriver.goto(page, "IR")
        appdriver.wait_for(page, page.get_by_text("compiled ahead of time by Triton"), VERIFY_TIMEOUT_MS)
        appdriver.idle(page)
        expect(page.get_by_text("IR for NVIDIA Hopper sm_90 (H100, H200)").first).to_be_visible()
        expect(page.get_by_text('ttg.target = "cuda:90"').first).to_be_attached()
        expect(page.get_by_text("TTGIR of rmsnorm_kernel").first).to_be_visible()
        appdriver.shot(page, shots, "04_ir")

        phase("IR shown")
        # Home: a 579 KB paste over the 512 KiB limit is refused with both sizes; nothing is lost
        appdriver.goto(page, "Home")
        page.get_by_role("tab", name="Paste").click()
        big = ((ROOT / "sample_kernels" / "01_vector_add.py").read_text() * 400)[:579_000]
        appdriver.paste(page, page.get_by_label("Kernel module (Python)"), big)
        appdriver.idle(page)
        page.get_by_role("button", name="Load pasted kernel").click()
        appdriver.idle(page)
        expect(page.get_by_text("the kernel is 565.4 KiB (579,000 bytes); the limit is 512.0 KiB "
                                "(524,288 bytes)")).to_be_visible()
        assert page.get_by_label("Kernel module (Python)").input_value() == big  # the text stays in the box
        expect(page.get_by_text(f"Problem: {SAMPLE}")).to_be_visible()  # the loaded kernel stays
        expect(page.locator('[data-testid="stException"]')).to_have_count(0)

        phase("oversized paste refused")
        # a misspelt spec key is refused with its line; the Paste tab stays open through the reruns
        kernel = (ROOT / "sample_kernels" / "01_vector_add.py").read_text()
        spec = (ROOT / "sample_kernels" / "01_vector_add.yaml").read_text()
        appdriver.paste(page, page.get_by_label("Kernel module (Python)"), kernel, replace=True)
        appdriver.paste(page, page.get_by_label("Spec (YAML, optional)"), spec.replace("bench-gpu:", "bench_gpu:", 1),
                        replace=True)
        appdriver.idle(page)
        page.get_by_role("button", name="Load pasted kernel").click()
        appdriver.idle(page)
        expect(page.locator('[data-testid="stAlert"]', has_text="spec, line 19: field bench_gpu: unknown top-level "
                            "key 'bench_gpu'; did you mean 'bench-gpu'?")).to_be_visible()
        expect(page.get_by_role("tab", name="Paste")).to_have_attribute("aria-selected", "true")
        appdriver.paste(page, page.get_by_label("Spec (YAML, optional)"), spec, replace=True)
        appdriver.idle(page)
        page.get_by_role("button", name="Load pasted kernel").click()
        appdriver.idle(page)
        expect(page.get_by_text("Loaded the pasted kernel.")).to_be_visible()
        expect(page.get_by_role("tab", name="Paste")).to_have_attribute("aria-selected", "true")
        # another kernel: the RMSNorm session is closed, so nothing shows it beside this problem
        expect(page.get_by_text("none for the loaded kernel").first).to_be_visible()
        # the upload widget states the limit that is applied, not Streamlit's megabytes
        page.get_by_role("tab", name="Upload").click()
        appdriver.idle(page)
        expect(page.locator(".st-key-home_up_py")).to_contain_text("Kernel (.py, at most 512.0 KiB)")
        expect(page.locator(".st-key-home_up_py [data-testid='stFileUploaderDropzoneInstructions']")).to_be_hidden()
        expect(page.locator('[data-testid="stException"]')).to_have_count(0)
