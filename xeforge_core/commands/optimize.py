"""``xeforge optimize KERNEL``: take one kernel through the optimization stages, in a session.

A new session repository is created in the workspace (or ``--resume PATH`` continues one); the
stage plan comes from the analysis unless ``--stages`` gives it; a kernel that hard-codes
another device is first ported (``Stage: portability``); then each stage runs the CoVeR loop
with the chosen engine. With ``--auto`` the best verified candidate of each stage is approved
automatically (never a wrong or slower one); without it the terminal asks approve/reject for
each acceptable candidate (answers are read from stdin, so ``yes``-style piping works; end of
input means reject). Progress is plain text on stderr (no TTY needed); the final per-stage
table, the session path and the export paths go to stdout.

Exit status: 0 done (including stages kept current), 1 a stage failed (the kernel cannot be
verified on this device), 2 bad input, 130 interrupted (the session keeps everything committed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from xeforge_core.commands.verify import add_verification_arguments

EXIT_OK = 0
EXIT_STAGE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

_EPILOG = """examples:
  xeforge optimize sample_kernels/07_gemm_fp32_upcast.py --engine rules --auto --device cpu
  xeforge optimize kernel.py --spec kernel.yaml --stages dtype_fix,autotuning --engine llm
  xeforge optimize --resume workspace/kernel-20261130-101500 --auto
"""


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by ``optimize`` and ``batch`` (engine, stages, device, loop and verify
    settings)."""
    p.add_argument("--stages", metavar="a,b,...", default=None,
                   help="stage ids in the order to run (default: the analysis' plan)")
    p.add_argument("--engine", choices=("rules", "llm"), default="rules",
                   help="who proposes candidates (default: rules, no LLM needed)")
    p.add_argument("--workspace", metavar="W", default=None,
                   help="where session repositories go (default: $XEFORGE_WORKSPACE or ./workspace)")
    p.add_argument("--device", metavar="D", default=None,
                   help="cpu, cuda, cuda:N, xpu, xpu:N or auto (default: $XEFORGE_DEVICE or auto)")
    p.add_argument("--target", choices=("xpu", "cuda"), default=None,
                   help="hardware the rules aim at (default: the device's type; cpu uses cuda)")
    p.add_argument("--iterations", metavar="N", type=int, default=3,
                   help="CoVeR refinements per stage (default: 3)")
    p.add_argument("--best-of", metavar="K", type=int, default=1,
                   help="candidates per iteration (default: 1)")
    p.add_argument("--min-speedup", metavar="X", type=float, default=None,
                   help="smallest measured speedup a candidate must reach to be accepted (default: 1.03)")
    add_verification_arguments(p)
    p.add_argument("--no-portability", action="store_true",
                   help="do not port a kernel that hard-codes another device")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``optimize`` subcommand to the ``xeforge`` CLI."""
    p = subparsers.add_parser(
        "optimize",
        help="optimize one kernel stage by stage (CoVeR loop), keeping every step in a git session",
        description=(
            "Run the optimization stages on KERNEL: each stage's engine proposes candidates, each "
            "candidate is verified against the current version in an isolated worker, failures "
            "are fed back for refinement, and approved candidates become commits of the "
            "session repository. On cpu, kernels run in Triton's interpreter: correctness is "
            "checked, speed is not measured."),
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kernel", metavar="KERNEL", nargs="?", help="the Triton kernel module (.py)")
    p.add_argument("--spec", metavar="S", help="Xe-Forge YAML spec (default: KERNEL's sibling .yaml)")
    p.add_argument("--reference", metavar="R",
                   help="PyTorch reference module (default: a sibling <stem>_pytorch.py / _ref.py)")
    p.add_argument("--resume", metavar="PATH", default=None, help="continue the session at PATH")
    add_common_arguments(p)
    p.add_argument("--auto", action="store_true",
                   help="approve the best verified candidate of each stage without asking")
    p.add_argument("--json", action="store_true", help="print the session report as JSON at the end")
    p.add_argument("--export", metavar="DIR", default=None,
                   help="also write the final kernel, patch and reports to DIR (default: <session>/export)")
    p.add_argument("--quiet", "-q", action="store_true", help="only stage-level progress")
    p.set_defaults(func=run)


# --------------------------------------------------------------------------------------------
# shared pieces (also used by ``xeforge batch``)


def parse_stages(text: str | None) -> list[str] | None:
    """``"a,b, c"`` -> ``["a", "b", "c"]``; ``None``/empty -> ``None``. Raises ``ValueError``
    for an unknown stage id (when the stage list is available)."""
    if not text:
        return None
    stages = [s.strip() for s in text.split(",") if s.strip()]
    from xeforge_core.pipeline.registry import ALL_STAGE_IDS

    known = list(ALL_STAGE_IDS)
    bad = [s for s in stages if s not in known]
    if bad:
        raise ValueError(f"unknown stage(s): {', '.join(bad)} (known: {', '.join(known)})")
    return stages


def check_common_arguments(args: argparse.Namespace) -> list[str] | None:
    """Check the options of :func:`add_common_arguments`; returns the ``--stages`` list (or
    ``None``). Raises ``ValueError`` naming the bad option."""
    stages = parse_stages(args.stages)
    if args.iterations < 1 or args.best_of < 1:
        raise ValueError("--iterations and --best-of must be at least 1")
    return stages


def workspace_for(args: argparse.Namespace) -> str:
    """Where session repositories go: ``--workspace``, else ``$XEFORGE_WORKSPACE``, else
    ``workspace``."""
    return args.workspace or os.environ.get("XEFORGE_WORKSPACE") or "workspace"


def loop_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for ``run_pipeline``/``run_batch`` that only apply when given on the
    command line (``--min-speedup``; otherwise the loop's default stands)."""
    return {"min_speedup": args.min_speedup} if args.min_speedup is not None else {}


def verify_options(args: argparse.Namespace) -> Any:
    """The ``VerifyOptions`` the command-line flags ask for."""
    from xeforge_core.verify import VerifyOptions

    return VerifyOptions(timeout_s=args.timeout, baseline_timeout_s=args.timeout, seeds=args.seeds,
                         include_odd_size=not args.no_odd_size)


def target_for(device: Any, override: str | None) -> str:
    """The rules target: ``override``, else the device type (``cpu`` -> ``cuda``)."""
    if override:
        return override
    kind = getattr(device, "type", None) or "cpu"
    return "xpu" if kind == "xpu" else "cuda"


def make_engine(name: str, target: str) -> Any:
    """Build the engine; for ``llm`` the key from the settings is registered as a secret so
    that it can never be written into a session. Raises ``ValueError`` for bad settings."""
    from xeforge_core.engines import get_engine
    from xeforge_core.session import register_secret

    if name == "llm":
        from xeforge_core.settings import load_llm_settings

        settings = load_llm_settings()
        if settings.has_key():
            register_secret(settings.key_value())
        return get_engine("llm")
    return get_engine(name, target=target)


def plan_for(problem: Any, target: str, stages: list[str] | None) -> tuple[list[str], str]:
    """The stage plan and where it came from (``--stages`` or the analysis)."""
    if stages:
        return stages, "given"
    from xeforge_core.analysis import analyze

    analysis = analyze(problem.kernel.source, target, problem)
    return list(analysis.plan), f"analysis ({len(analysis.issues)} issue(s))"


def final_table(session: Any) -> tuple[str, dict[str, Any]]:
    """The per-stage table (plain text) and the JSON report of ``session``."""
    from xeforge_core.session import report

    data = report.json_report(session)
    headers, rows = report.stage_rows(data)
    return report.text_table(headers, rows), data


class ProgressPrinter:
    """Plain-text progress on a stream: one line per loop event, verify steps indented
    (``quiet`` keeps stage-level lines only). Works without a TTY."""

    def __init__(self, stream: TextIO, *, quiet: bool = False, prefix: str = "") -> None:
        self.stream = stream
        self.quiet = quiet
        self.prefix = prefix
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        if self.quiet and kind in ("verify_progress", "propose", "verify"):
            return
        stage = event.get("stage") or "-"
        it = event.get("iteration")
        where = f"[{self.prefix}{stage}" + (f" #{it}" if it else "") + "]"
        text = str(event.get("message", ""))
        line = f"  {where}   .. {text}" if kind == "verify_progress" else f"{where} {text}"
        with self._lock:
            print(line, file=self.stream, flush=True)


def _ask(stream_in: TextIO, stream_out: TextIO, session: Any) -> Any:
    """The terminal approve/reject prompt for ``run_stage(decide=...)``."""

    def decide(record: Any, verdict: Any) -> tuple[bool, str]:
        from xeforge_core.cover import classify

        cid = getattr(record, "id", None) or getattr(record, "candidate_id", None) or "candidate"
        _, why, _ = classify(verdict) if verdict is not None else ("", "not verified", None)
        print(f"\ncandidate {cid} ({getattr(record, 'engine', '?')}): {why}", file=stream_out)
        rationale = (getattr(record, "rationale", "") or "").strip()
        if rationale:
            print("  " + rationale.replace("\n", "\n  "), file=stream_out)
        while True:
            print("approve? [y]es / [n]o / [d]iff: ", end="", file=stream_out, flush=True)
            answer = stream_in.readline()
            if not answer:
                print("(no answer: rejected)", file=stream_out)
                return False, "no answer on the terminal"
            a = answer.strip().lower()
            if a in ("y", "yes", "a", "approve"):
                return True, ""
            if a in ("n", "no", "r", "reject"):
                return False, "rejected on the terminal"
            if a in ("d", "diff") and session is not None and getattr(record, "id", None):
                print(session.diff(getattr(record, "parent", "head"), record.id).text or "(no change)",
                      file=stream_out)

    return decide


# --------------------------------------------------------------------------------------------
# the command


def run(args: argparse.Namespace) -> int:
    """Run ``xeforge optimize``; returns the exit status (see the module docstring)."""
    from xeforge_core.cover import run_pipeline
    from xeforge_core.problem import ProblemError, load_problem
    from xeforge_core.session import Session, SessionError

    err = sys.stderr
    try:
        stages = check_common_arguments(args)
        from xeforge_core.devices import detect_device

        print("detecting the device ...", file=err, flush=True)
        device = detect_device(args.device)
        target = target_for(device, args.target)
        if args.resume:
            session = Session.open(args.resume)
            if stages:
                session.set_plan(stages)
            print(f"resuming session {session.path} at stage {session.current_stage or '(plan complete)'}",
                  file=err)
        else:
            if not args.kernel:
                raise ValueError("give KERNEL (or --resume PATH)")
            problem = load_problem(args.kernel, spec_path=args.spec, reference_path=args.reference)
            plan, origin = plan_for(problem, target, stages)
            session = Session.create(problem, workspace=workspace_for(args), device=device, plan=plan, target=target)
            print(f"session {session.path}", file=err)
            print(f"device {device.type}:{device.index} ({device.name}); target {target}; plan from {origin}: "
                  f"{', '.join(plan) or '(no stage has work)'}", file=err)
            for w in problem.warnings:
                print(f"warning: {w}", file=err)
        engine = make_engine(args.engine, target)
    except (ProblemError, SessionError, ValueError, OSError) as exc:
        print(f"xeforge optimize: bad input: {exc}", file=err)
        return EXIT_BAD_INPUT

    progress = ProgressPrinter(err, quiet=args.quiet)
    cancel = threading.Event()
    decide = None if args.auto else _ask(sys.stdin, err, session)
    try:
        outcomes = run_pipeline(session, engine, iterations=args.iterations, best_of=args.best_of,
                                auto=args.auto, decide=decide, device=device,
                                verify_options=verify_options(args), portability=not args.no_portability,
                                on_progress=progress, cancel=cancel, **loop_options(args))
    except KeyboardInterrupt:
        cancel.set()
        print(f"\ninterrupted; everything committed is kept in {session.path} "
              f"(continue with: xeforge optimize --resume {session.path})", file=err)
        return EXIT_INTERRUPTED

    table, data = final_table(session)
    export_dir = Path(args.export) if args.export else session.path / "export"
    paths = session.export(export_dir) if args.export else _export_inside(session, export_dir)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(f"\n{data['problem']} on {data['device']['label']} (target {data['target']})")
        print(table)
        cumulative = data["cumulative_speedup"]
        print(f"\ncumulative speedup: {cumulative:.3f}x" if cumulative is not None
              else "\ncumulative speedup: not measured (no timing on this device)")
        print(f"session: {session.path}")
        print(f"final kernel: {paths['kernel']}\npatch: {paths['patch']}\nreport: {paths['report_md']}")
    failed = [o for o in outcomes if o.status == "failed"]
    return EXIT_STAGE_FAILED if failed else EXIT_OK


def _export_inside(session: Any, export_dir: Path) -> dict[str, Path]:
    """Export into the session directory, kept out of its history by ``.git/info/exclude``."""
    exclude = session.path / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text() if exclude.exists() else ""
    if "/export/" not in text.splitlines():
        exclude.write_text(text + ("" if text.endswith("\n") or not text else "\n") + "/export/\n")
    return session.export(export_dir)
