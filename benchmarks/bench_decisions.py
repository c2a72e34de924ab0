"""Time the workbench's decisions: approve and reject of a verified candidate, and the Optimize
page's rerun after each (Streamlit AppTest), on any machine (no GPU, no worker: the verdict is
given, since what is timed is the git side and the page, not verification).

    python benchmarks/bench_decisions.py --out DIR [--rounds 8]

Runs on this checkout's ``xeforge_core`` (copy it into an older checkout to time that one the
same way). Writes ``DIR/decisions.json`` (every round's times, in ms, with the machine and library
versions) after each round, and prints a table of medians last. A round is: submit a manual
candidate, attach a passing verdict (kept as the CoVeR loop keeps it), then time
``Workbench.approve()`` or ``Workbench.reject()`` alone, and the click of the page's button
with the rerun that follows. Approve and reject alternate; the first round of each is a
warm-up and is reported but not in the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _versions() -> dict[str, str]:
    import git
    import streamlit

    from xeforge_core.cache import library_versions

    return {**library_versions(), "python": platform.python_version(), "streamlit": streamlit.__version__,
            "gitpython": git.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for decisions.json (created)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of each decision (default 8)")
    parser.add_argument("--sample", default="07_gemm_fp32_upcast")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XEFORGE_DEVICE", "cpu")
    workspace = Path(tempfile.mkdtemp(prefix="xeforge-decisions-"))
    os.environ["XEFORGE_WORKSPACE"] = str(workspace)

    from streamlit.testing.v1 import AppTest

    from xeforge_core.ui.workbench import Workbench
    from xeforge_core.verdict import Step, StepStatus, Verdict, VerdictKind

    ok = Verdict(kind=VerdictKind.OK, steps=[Step("performance", StepStatus.NOT_MEASURED)],
                 device={"type": "cpu", "interpreter": True})
    wb = Workbench(workspace)
    wb.load_sample(args.sample)
    session = wb.start_session()
    page = AppTest.from_file(str(ROOT / "pages" / "1_Optimize.py"), default_timeout=300)
    page.session_state["workbench"] = wb
    page.run()
    record: dict = {"machine": {"host": platform.node(), "cpu": platform.processor() or platform.machine(),
                                "cores": os.cpu_count(), "load_1min": os.getloadavg()[0]},
                    "versions": _versions(), "sample": args.sample, "rounds": []}

    def candidate(n: int) -> None:
        current = session.source("head")
        review = wb.submit_manual(current + f"\n# revision {n}\n")
        # kept with its verdict, as a verification keeps it (Session.add_candidate: in every version)
        rec = session.add_candidate(review.stage, review.source, engine="manual", rationale="bench", verdict=ok)
        if isinstance(getattr(type(wb), "review_candidate_id", None), property):
            review.candidate_id = rec.id
        else:  # the workbench before the controller kept the id itself
            wb.review_candidate_id = rec.id
        review.start_verify()
        review.finish_verify(ok, review.source)

    for n in range(2 * args.rounds):
        action = "approve" if n % 2 == 0 else "reject"
        candidate(n)
        t0 = time.perf_counter()
        getattr(wb, action)()
        direct = (time.perf_counter() - t0) * 1000
        candidate(n + 1000)
        page.run()
        t0 = time.perf_counter()
        page.button(key=f"opt_{action}").click().run()
        clicked = (time.perf_counter() - t0) * 1000
        if page.exception:
            raise SystemExit(f"the page raised: {[e.value for e in page.exception]}")
        record["rounds"].append({"action": action, "round": n // 2, "workbench_ms": round(direct, 1),
                                 "click_and_rerun_ms": round(clicked, 1)})
        (out / "decisions.json").write_text(json.dumps(record, indent=1) + "\n")

    print(f"{'decision':10} {'workbench (ms)':>16} {'click + rerun (ms)':>20}   (median of {args.rounds - 1})")
    for action in ("approve", "reject"):
        rows = [r for r in record["rounds"] if r["action"] == action][1:]
        print(f"{action:10} {statistics.median(r['workbench_ms'] for r in rows):16.1f} "
              f"{statistics.median(r['click_and_rerun_ms'] for r in rows):20.1f}")
    print(f"machine: {record['machine']}; results in {out / 'decisions.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
