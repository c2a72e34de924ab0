"""``xeforge optimize KERNEL``: take one kernel through the optimization stages, in a session.

A new session repository is created in the workspace (or ``--resume PATH`` continues one); the
stage plan comes from the analysis unless ``--stages`` gives it; a kernel that hard-codes
another device is first ported (``Stage: portability``); then each stage runs the CoVeR loop
with the chosen engine. With ``--auto`` the best verified candidate of each stage is approved
automatically (never a wrong or slower one); without it the terminal asks approve/reject for
each acceptable candidate (answers are read from stdin, so ``yes``-style piping works; end of
input means reject). Progress is plain text on stderr (no TTY needed); the final per-stage
table, the session path and the export paths go to stdout.

The plan says, per stage and engine, whether the engine can do the stage on this kernel (the
rules engine's codemod is asked, statically); when the chosen engine can do none of the planned
stages, that is said up front with each stage's reason and no session is started.

Exit status: 0 done (including stages kept current, and a plan the engine can do nothing of), 1
a stage failed (the kernel cannot be verified on this device), 2 bad input (a problem whose own code
fails when the first stage verifies it among them), 11 the problem is
inconsistent (its baseline disagrees with its reference, so no candidate can be judged faster than
it; said before the table), 130 interrupted (the session keeps everything committed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from xeforge_core.commands.argtypes import engine_name, positive_float, positive_int
from xeforge_core.commands.verify import add_verification_arguments, allowances
from xeforge_core.engines.registry import engine_names
from xeforge_core.units import plural

if TYPE_CHECKING:
    from xeforge_core.devices import DeviceInfo
    from xeforge_core.pipeline.loop import DecideFn
    from xeforge_core.pipeline.plan import Plan
    from xeforge_core.problem import Problem
    from xeforge_core.session import CandidateRecord, Session
    from xeforge_core.target import Target
    from xeforge_core.verdict import Verdict
    from xeforge_core.verify import VerifyOptions

EXIT_OK = 0
EXIT_STAGE_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INCONSISTENT = 11
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
    runnable = engine_names(interactive=False)  # the manual engine takes a person's text
    p.add_argument("--engine", type=engine_name(runnable), default=runnable[0], metavar="{" + ",".join(runnable) + "}",
                   help=f"who proposes candidates (default: {runnable[0]}, no LLM needed)")
    p.add_argument("--workspace", metavar="W", default=None,
                   help="where session repositories go (default: $XEFORGE_WORKSPACE or ./workspace)")
    p.add_argument("--device", metavar="D", default=None,
                   help="cpu, cuda, cuda:N, xpu, xpu:N or auto (default: $XEFORGE_DEVICE or auto)")
    p.add_argument("--target", metavar="T", default=None,
                   help="the hardware to optimize for: a profile id (" + ", ".join(_profile_ids())
                        + "), its name, or a family (xpu, cuda). Default: the device's profile; "
                          "on cpu, the Arc Pro B70. Verification still runs on --device")
    p.add_argument("--iterations", metavar="N", type=positive_int, default=3,
                   help="CoVeR refinements per stage (default: 3)")
    p.add_argument("--best-of", metavar="K", type=positive_int, default=1,
                   help="candidates per iteration (default: 1)")
    p.add_argument("--min-speedup", metavar="X", type=positive_float, default=None,
                   help="smallest measured speedup a candidate must reach to be accepted (default: 1.03)")
    add_verification_arguments(p)
    p.add_argument("--no-portability", action="store_true",
                   help="do not port a kernel that hard-codes another device")


def _profile_ids() -> list[str]:
    from xeforge_core.target import targets

    return [t.profile for t in targets()]


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
    p.add_argument("kernel", metavar="KERNEL", nargs="?", help="the Triton kernel module (.py), or a plain-PyTorch problem (Model + get_inputs: its first Triton version comes from TorchInductor)")
    p.add_argument("--spec", metavar="S", help="Xe-Forge YAML spec (default: KERNEL's sibling .yaml)")
    p.add_argument("--reference", metavar="R",
                   help="PyTorch reference module (default: a sibling <stem>_pytorch.py / _ref.py)")
    p.add_argument("--resume", metavar="PATH", default=None, help="continue the session at PATH")
    add_common_arguments(p)
    p.add_argument("--auto", action="store_true",
                   help="approve the best verified candidate of each stage without asking")
    p.add_argument("--plan-only", action="store_true",
                   help="print the stage plan for the target (with the engines that can do each stage) and "
                        "exit, without a session or a worker")
    p.add_argument("--json", action="store_true", help="print the session report as JSON at the end")
    p.add_argument("--export", metavar="DIR", default=None,
                   help="also write the final kernel, patch and reports to DIR (default: <session>/export)")
    p.add_argument("--quiet", "-q", action="store_true", help="only stage-level progress")
    p.set_defaults(func=run)


# --------------------------------------------------------------------------------------------
# shared pieces (also used by ``xeforge batch``)


def parse_stages(text: str | None) -> list[str] | None:
    """``"a,b, c"`` -> ``["a", "b", "c"]``; ``None`` (not given) -> ``None`` (the analysis'
    plan). Raises ``ValueError`` for an unknown stage id, and for a list that names no stage
    (``--stages ""`` or ``","``), which would otherwise run the whole plan unasked."""
    if text is None:
        return None
    from xeforge_core.vocab.stages import STAGE_IDS, require_stages

    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ValueError(f"--stages {text!r} names no stage; give one or more of {', '.join(STAGE_IDS)}, "
                         "or leave --stages out for the analysis' plan")
    return require_stages(names)


def check_common_arguments(args: argparse.Namespace) -> list[str] | None:
    """Check the options of :func:`add_common_arguments`; returns the ``--stages`` list (or
    ``None``). Raises ``ValueError`` naming the bad option."""
    stages = parse_stages(args.stages)
    if args.iterations < 1 or args.best_of < 1:
        raise ValueError("--iterations and --best-of must be at least 1")
    if args.target:
        target_for(None, args.target)  # an unknown profile is bad input, named before any work
    return stages


def workspace_for(args: argparse.Namespace) -> str:
    """Where session repositories go: ``--workspace``, else ``$XEFORGE_WORKSPACE``, else
    ``workspace``."""
    return args.workspace or os.environ.get("XEFORGE_WORKSPACE") or "workspace"


def loop_options(args: argparse.Namespace) -> dict[str, Any]:
    """``LoopOptions`` fields that only apply when given on the command line (``--min-speedup``;
    otherwise the loop's default stands)."""
    return {"min_speedup": args.min_speedup} if args.min_speedup is not None else {}


def verify_options(args: argparse.Namespace) -> VerifyOptions:
    """The ``VerifyOptions`` the command-line flags ask for."""
    from xeforge_core.verify import VerifyOptions

    return VerifyOptions(timeout_s=args.timeout, baseline_timeout_s=args.timeout, seeds=args.seeds,
                         include_odd_size=not args.no_odd_size, tile_sizes=not args.no_odd_size,
                         allow_precision=allowances(args), dtype=getattr(args, "dtype", None))


def target_for(device: DeviceInfo, choice: str | None) -> Target:
    """The target of ``--target`` (``choice``) on ``device``: the one resolver's answer
    (:func:`xeforge_core.target.resolve`). Raises ``TargetError`` (a ``ValueError``)
    naming the known profiles for an unknown choice."""
    from xeforge_core.target import resolve

    return resolve(device, choice)


def plan_text(plan: Plan, engine: str | None = None) -> str:
    """The plan as a table: number, stage, issues, and per engine whether it can do the stage on
    this kernel (``✓``/``✗``, asked before anything runs), then the reason of ``engine`` (the one
    chosen; default: the first) for each stage."""
    from xeforge_core.session.report import text_table

    if not plan.stages:
        return "(no stage has work)"
    names = engine_names(interactive=False)
    engine = engine or names[0]
    headers = ["#", "stage", "issues", *names, f"{engine} engine on this kernel"]
    rows = []
    for s in plan.stages:
        marks = []
        for name in names:
            check = s.check(name)
            marks.append(("✓" if check.can else "✗") if check is not None else
                         ("✓" if name in s.engines else "✗"))
        mine = s.check(engine)
        rows.append([s.number, s.stage, len(s.issues), *marks, mine.reason if mine is not None else ""])
    return text_table(headers, rows)


def final_table(session: Session) -> tuple[str, dict[str, Any]]:
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


def _ask(stream_in: TextIO, stream_out: TextIO, session: Session) -> DecideFn:
    """The terminal approve/reject prompt (``LoopOptions.decide``)."""

    def decide(record: CandidateRecord, verdict: Verdict | None) -> tuple[bool, str]:
        from xeforge_core.pipeline.loop import classify

        _, why, _ = classify(verdict) if verdict is not None else ("", "not verified", None)
        print(f"\ncandidate {record.id} ({record.engine}): {why}", file=stream_out)
        rationale = record.rationale.strip()
        if rationale:
            print("  " + rationale.replace("\n", "\n  "), file=stream_out)
        while True:
            print("approve? [y]es / [n]o / [d]iff: ", end="", file=stream_out, flush=True)
            answer = stream_in.readline()
            if not answer:
                print("(no answer: rejected; the input ended, so nothing can approve it here: pass --auto to approve "
                      "every candidate that verifies ok, or run in a terminal to answer)", file=stream_out)
                return False, "no answer on the terminal"
            a = answer.strip().lower()
            if a in ("y", "yes", "a", "approve"):
                return True, ""
            if a in ("n", "no", "r", "reject"):
                return False, "rejected on the terminal"
            if a in ("d", "diff"):
                print(session.diff(record.parent, record.id).text or "(no change)", file=stream_out)

    return decide


# --------------------------------------------------------------------------------------------
# the command


def run(args: argparse.Namespace) -> int:
    """Run ``xeforge optimize``; returns the exit status (see the module docstring)."""
    from xeforge_core.inductor.first_version import FIRST_VERSION
    from xeforge_core.pipeline.loop import LoopOptions
    from xeforge_core.problem import ProblemError, load_problem
    from xeforge_core.service import (
        make_engine,
        plan_problem,
        replan_after_first_version,
        resume_session,
        run_session,
        start_session,
    )
    from xeforge_core.session import SessionError
    from xeforge_core.vocab.status import OutcomeStatus

    err = sys.stderr
    try:
        stages = check_common_arguments(args)
        if args.plan_only:
            return _plan_only(args, stages)
        engine = make_engine(args.engine)  # before a session exists: an engine that cannot answer is bad input
        from xeforge_core.devices import detect_device

        if not args.quiet:
            print("detecting the device ...", file=err, flush=True)
        device = detect_device(args.device)
        target = target_for(device, args.target)
        if args.resume:
            session = resume_session(args.resume, target=target if args.target else None, stages=stages)
            print(f"resuming session {session.path} at stage {session.current_stage or '(plan complete)'} "
                  f"(target {session.target.label})", file=err)
        else:
            if not args.kernel:
                raise ValueError("give KERNEL (or --resume PATH)")
            problem = load_problem(args.kernel, spec_path=args.spec, reference_path=args.reference)
            plan = plan_problem(problem, target, stages)
            idle = _nothing_to_do(plan, args, problem, device)
            if idle:
                print(f"{problem.name}: target {target.label}; plan from {plan.origin}:\n"
                      f"{plan_text(plan, args.engine)}\n{idle}\nNo session was started.", file=err)
                return EXIT_OK
            session = start_session(problem, workspace=workspace_for(args), device=device, target=target,
                                    plan=plan)
            print(f"session {session.path}", file=err)
            planned = plan_text(plan, args.engine)
            if not plan.stages and problem.eager_baseline and args.engine == "rules":
                planned = ("(a plain-PyTorch model: TorchInductor writes its first Triton version, "
                           "and the stages are planned on that code)")
            print(f"device {device.type}:{device.index} ({device.name}); target {target.label}; plan from "
                  f"{plan.origin} ({plural(len(plan.analysis.issues), 'issue')}):\n{planned}", file=err)
            for w in problem.warnings:
                print(f"warning: {w}", file=err)
    except (ProblemError, SessionError, ValueError, OSError) as exc:
        from xeforge_core.samples import sample_hint

        print(f"xeforge optimize: bad input: {exc}{sample_hint(args.kernel) if args.kernel else ''}", file=err)
        return EXIT_BAD_INPUT

    progress = ProgressPrinter(err, quiet=args.quiet)
    cancel = threading.Event()
    decide = None if args.auto else _ask(sys.stdin, err, session)
    try:
        options = LoopOptions(iterations=args.iterations, best_of=args.best_of, auto=args.auto, decide=decide,
                              verify_options=verify_options(args), portability=not args.no_portability,
                              on_progress=progress, cancel=cancel,
                              on_first_version=replan_after_first_version(target, stages), **loop_options(args))
        outcomes = run_session(session, device, engine, options)
    except KeyboardInterrupt:
        cancel.set()
        print(f"\ninterrupted; everything committed is kept in {session.path} "
              f"(continue with: xeforge optimize --resume {session.path})", file=err)
        return EXIT_INTERRUPTED

    from xeforge_core.pipeline.outcomes import inconsistent_problem

    inconsistent = inconsistent_problem(outcomes)
    if inconsistent:
        print(f"the problem is inconsistent ({inconsistent}); fix the baseline or the reference first", file=err)
    table, data = final_table(session)
    export_dir = Path(args.export) if args.export else session.path / "export"
    paths = session.export(export_dir) if args.export else session.export_inside()
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(f"\n{data['problem']} on {data['device']['label']} (target {data['target']['name']})")
        print(table)
        from xeforge_core.pipeline.first_version import first_version_notes

        for note in first_version_notes(outcomes):  # the table's reason column is cut at 90 characters
            print(f"first version: {note}")
        cumulative = data["cumulative_speedup"]
        print(f"\ncumulative speedup: {cumulative:.3f}x" if cumulative is not None
              else "\ncumulative speedup: not measured (no timing on this device)")
        print(f"session: {session.path}")
        print(f"final kernel: {paths['kernel']}\npatch: {paths['patch']}\nreport: {paths['report_md']}")
    failed = [o for o in outcomes if o.status == OutcomeStatus.FAILED]
    for o in failed:
        print(f"stage {o.stage} failed: {o.reason}", file=err)
    if any(o.verdict is not None and o.verdict.problem_at_fault for o in failed):
        print("xeforge optimize: bad input: the problem's own code failed (above); fix the problem file and "
              f"start again (the session {session.path} holds no new version)", file=err)
        return EXIT_BAD_INPUT
    if any(o.stage == FIRST_VERSION for o in failed):
        print("no Triton version was kept: the final kernel is the PyTorch model as given", file=err)
    if inconsistent:
        return EXIT_INCONSISTENT
    return EXIT_STAGE_FAILED if failed else EXIT_OK


def _plan_only(args: argparse.Namespace, stages: list[str] | None) -> int:
    """``--plan-only``: the plan for KERNEL and the target, printed; no session, no worker
    (the device is probed only when no ``--target`` names the hardware)."""
    from xeforge_core.problem import load_problem
    from xeforge_core.service import plan_problem

    if not args.kernel:
        raise ValueError("--plan-only needs KERNEL")
    if args.target:
        target = target_for(None, args.target)
    else:
        from xeforge_core.devices import detect_device

        target = target_for(detect_device(args.device), None)
    problem = load_problem(args.kernel, spec_path=args.spec, reference_path=args.reference)
    plan = plan_problem(problem, target, stages)
    first = FIRST_VERSION_PLAN if problem.eager_baseline else ""
    if args.json:
        print(json.dumps(plan.to_dict() | ({"first_version": first} if first else {}), indent=2))
    else:
        print(f"{problem.name}: target {target.label}; plan from {plan.origin} "
              f"({plural(len(plan.analysis.issues), 'issue')})")
        if first:
            print(first)
        else:
            print(plan_text(plan, args.engine))
            idle = plan.nothing_to_do(args.engine)
            if idle:
                print(idle)
    return EXIT_OK


#: What ``--plan-only`` says of a plain-PyTorch problem: its stages are planned on a Triton version.
FIRST_VERSION_PLAN = ("0. first_version: the problem is plain PyTorch; the rules engine first compiles its Model with "
                      "TorchInductor into a standalone Triton ModelNew (the llm engine writes one itself), verifies it, "
                      "and plans the stages on that version (`xeforge optimize PROBLEM --engine rules`)")


def _nothing_to_do(plan: Plan, args: argparse.Namespace, problem: Problem, device: DeviceInfo) -> str:
    """Why a new session would end having done nothing (the engine can do none of the planned
    stages on this kernel, and no portability step is due), or ``""``."""
    if args.engine == "rules" and problem.eager_baseline:
        return ""  # a plain-PyTorch problem: TorchInductor writes the first Triton version
    idle = plan.nothing_to_do(args.engine)
    if not idle or not plan.stages:
        return ""
    if not args.no_portability:
        from xeforge_core.codemods.portability import portability_needs

        if portability_needs(problem.kernel.source, str(device.type)):
            return ""  # the portability step has work before the stages
    return idle
