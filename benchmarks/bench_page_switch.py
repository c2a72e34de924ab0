"""Page-switch times of the workbench in headless Chromium: from the click on a sidebar link
until the run it started has finished and the page's title is shown.

    python benchmarks/bench_page_switch.py --out OUT_DIR [--rounds 5] [--sample 07_gemm_fp32_upcast]

Starts ``streamlit run app.py`` (device cpu, its own workspace and caches under OUT_DIR), loads
the sample, starts a session, visits every page once (the first visit of each page, and the
IR page's background compile, are waited for and reported apart), then switches through all
pages ``--rounds`` times. Writes ``OUT_DIR/page_switch.json`` after every round (the raw
times, the machine's load average, the versions) and prints a table last: per page the first
visit and the median and maximum of the later switches, in seconds.

Needs Debian's chromium and the playwright package (``tools/appdriver.py``). Times depend on
the machine and its load; the load average is recorded beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import appdriver  # noqa: E402

#: (sidebar label, page title) in the order they are visited.
PAGES = [("Optimize", "Optimize"), ("History", "History"), ("IR", "IR"), ("Knowledge", "Knowledge"),
         ("Benchmarks", "Benchmarks"), ("Device", "Device"), ("Flash Attention demo", "Flash Attention demo"),
         ("Home", "Xe-Forge Studio")]


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("streamlit", "playwright", "torch", "triton"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path, help="directory for page_switch.json and the app's files")
    p.add_argument("--rounds", type=int, default=5, help="switches through all pages after the first visits")
    p.add_argument("--sample", default="07_gemm_fp32_upcast", help="sample kernel to load")
    args = p.parse_args(argv)
    why = appdriver.missing_requirements()
    if why:
        print(f"bench_page_switch: {why}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict = {"what": "page switch, click to end of run with the title shown (seconds)",
                    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
                    "cpus": os.cpu_count(), "versions": _versions(), "sample": args.sample,
                    "first_load_s": None, "first_visit_s": {}, "rounds": [], "load_average": []}
    out_file = args.out / "page_switch.json"

    def save() -> None:
        result["load_average"].append(os.getloadavg())
        out_file.write_text(json.dumps(result, indent=1))

    with appdriver.streamlit_app(args.out / "app") as (url, _log):
        started = time.monotonic()
        with appdriver.browser_page(url) as page:
            result["first_load_s"] = round(time.monotonic() - started, 2)
            page.get_by_label("Sample kernel").click()
            page.get_by_role("option", name=args.sample, exact=False).first.click()
            appdriver.idle(page)
            page.get_by_role("button", name="Load sample").click()
            appdriver.idle(page)
            page.get_by_role("button", name="Start new session").click()
            appdriver.idle(page)
            for label, title in PAGES:
                result["first_visit_s"][label] = round(appdriver.switch_page(page, label, heading=title), 2)
                if label == "IR":  # let the background compile finish before timing anything else
                    appdriver.wait_for(page, page.get_by_text("compiled ahead of time by Triton"), 300_000)
            save()
            for _ in range(args.rounds):
                result["rounds"].append({label: round(appdriver.switch_page(page, label, heading=title), 3)
                                         for label, title in PAGES})
                save()
    rows = []
    for label, _ in PAGES:
        times = [r[label] for r in result["rounds"]]
        rows.append((label, result["first_visit_s"].get(label), statistics.median(times) if times else None,
                     max(times) if times else None))
    print(f"page switch on {result['host']} ({result['cpus']} CPUs, load {result['load_average'][-1][0]:.1f}); "
          f"first load {result['first_load_s']} s; {args.rounds} rounds; {out_file}")
    print(f"{'page':24s} {'first visit':>12s} {'median':>8s} {'max':>8s}")
    for label, first, med, mx in rows:
        print(f"{label:24s} {first:>10.2f} s {med:>6.2f} s {mx:>6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
