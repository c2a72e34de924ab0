"""``xeforge doctor``: can this device be trusted for this model? (see ``xeforge_core.doctor``)."""

from __future__ import annotations

import argparse
import json
import sys

from xeforge_core.commands.argtypes import positive_float

#: Exit status by verdict.
EXIT_BY_VERDICT = {"trusted": 0, "degraded": 3, "unusable": 4}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``doctor`` subcommand."""
    p = subparsers.add_parser(
        "doctor", help="check whether a device can be trusted (stack, preflight, op coverage)",
        description="Stack integrity, a preflight battery (each check isolated, with a timeout), "
                    "op coverage for a model, runtime experiments, a verdict (trusted / degraded / "
                    "unusable) and, when not trusted, a measured way out. Exit status: 0 trusted, "
                    "3 degraded, 4 unusable, 2 bad input.")
    p.add_argument("--device", help="cpu, cuda, cuda:N, xpu, xpu:N (default: detected)")
    p.add_argument("--model", metavar="KERNEL.py", help="a KernelBench-style module (its reference is "
                   "traced when it has one)")
    p.add_argument("--spec", help="the model's YAML spec (default: sibling .yaml)")
    p.add_argument("--reference", help="the PyTorch reference (default: sibling _ref.py/_pytorch.py)")
    p.add_argument("--experiments", action="store_true", help="re-run failing checks under runtime settings")
    p.add_argument("--timeout", type=positive_float, default=60.0, help="seconds per check (default 60)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from xeforge_core.doctor import run_doctor
    from xeforge_core.problem import ProblemError, load_problem

    problem = None
    if args.model:
        try:
            problem = load_problem(args.model, args.spec, args.reference)
        except (ProblemError, OSError) as exc:
            print(f"xeforge doctor: {exc}", file=sys.stderr)
            return 2
    try:
        report = run_doctor(args.device, problem=problem, experiments=args.experiments,
                            timeout_s=args.timeout,
                            on_progress=None if args.json else lambda m: print(f"... {m}", file=sys.stderr))
    except ValueError as exc:
        print(f"xeforge doctor: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.render_text())
    return EXIT_BY_VERDICT.get(report.verdict.status if report.verdict else "unusable", 4)
