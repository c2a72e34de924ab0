"""``xeforge ir KERNEL.py``: compile a module's Triton kernels ahead of time for a target and
print their IR and the compiler's resource report (registers, spills, shared memory).

No device is needed for the NVIDIA and AMD targets (the PyPI triton wheel has their
backends); Intel targets need Intel's backend (PyTorch's xpu build). The module's
``forward()`` runs once in a worker process, on CPU tensors, to record each launch's
signature; no kernel body runs. See ``xeforge_core.ir``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from xeforge_core import units
from xeforge_core.commands.argtypes import positive_float

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130

_EPILOG = """targets:
{targets}

exit status:
  0  compiled   1  a kernel did not compile, or forward() failed before a launch
  2  bad input (unreadable file, bad spec, unknown target, stage or variant)
  3  the target's backend is not installed here   130 interrupted

examples:
  xeforge ir sample_kernels/07_gemm_fp32_upcast.py --stage ttgir
  xeforge ir kernel.py --target gfx942 --stage amdgcn
  xeforge ir kernel.py --diff candidate.py --stage ttir
  xeforge ir solution.py --problem problem.py     # a KernelBench ModelNew or KernelAgent kernel_function
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``ir`` subcommand to the ``xeforge`` CLI."""
    from xeforge_core.ir.targets import DEFAULT_TARGET, TARGETS

    # static text: finding out which backends are installed imports triton, which every other
    # subcommand of the CLI would then pay for at start-up
    targets = "\n".join(f"  {t.id:8s} {t.label}" for t in TARGETS.values())
    default = f"xe2 where Intel's Triton backend is installed, else {DEFAULT_TARGET}"
    p = subparsers.add_parser(
        "ir", help="compile the kernels for a GPU target ahead of time and show their IR (no GPU needed)",
        description=("Compile every Triton kernel that KERNEL's forward() launches for TARGET, ahead of "
                     "time and without the device, and print the IR of one stage with the registers, "
                     "spills and shared memory the compiler reports."),
        epilog=_EPILOG.format(targets=targets), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernel", metavar="KERNEL", help="kernel module (.py)")
    p.add_argument("--target", "-t", metavar="T", default=None,
                   help=f"compile target, or a hardware-profile id as for `xeforge optimize --target` "
                        f"(default: {default}; see the list below)")
    p.add_argument("--stage", "-s", default="ttgir", choices=["ttir", "ttgir", "llir", "ptx", "amdgcn", "spirv"],
                   help="IR stage to print (default: ttgir)")
    p.add_argument("--spec", metavar="S", help="Xe-Forge YAML spec (default: KERNEL's sibling .yaml)")
    p.add_argument("--problem", metavar="P", default=None,
                   help="the problem KERNEL solves (a KernelBench or KernelAgent problem file, as in "
                        "`xeforge verify P KERNEL`): its get_inputs() and Model are used")
    p.add_argument("--variant", metavar="V", default=None,
                   help="spec variant whose shapes the launch is recorded with (default: the benchmark variant)")
    p.add_argument("--kernel-name", metavar="NAME", default=None, help="print only this kernel")
    p.add_argument("--config", metavar="N|all", default="0",
                   help="config of an @triton.autotune kernel to compile: its 0-based index, or all (default: 0)")
    p.add_argument("--diff", metavar="OTHER", default=None,
                   help="another version of the module: print the diff of the stage from KERNEL to OTHER")
    p.add_argument("--keep-locations", action="store_true",
                   help="keep source locations (loc(...), !dbg, .loc) in the IR and the diff")
    p.add_argument("--summary", action="store_true", help="only the resource table, no IR text")
    p.add_argument("--json", action="store_true", help="print the report(s) as JSON")
    p.add_argument("--timeout", metavar="SECONDS", type=positive_float, default=300.0,
                   help="wall-clock limit of the compile worker (default: 300)")
    p.add_argument("--no-cache", action="store_true", help="compile again even when a cached result exists")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``xeforge ir``; returns the exit status (see the epilog)."""
    from xeforge_core.ir.compile import IRError, compile_ir
    from xeforge_core.ir.targets import TargetError, get_target
    from xeforge_core.problem import ProblemError, load_problem, read_candidate

    err = sys.stderr
    try:
        target = get_target(args.target)
        config = None if str(args.config).lower() == "all" else int(args.config)
        if args.problem:
            problem = load_problem(args.problem, spec_path=args.spec).with_kernel_source(read_candidate(args.kernel))
        else:
            problem = load_problem(args.kernel, spec_path=args.spec)
        other = read_candidate(args.diff) if args.diff else None
    except (ProblemError, TargetError, IRError, OSError) as exc:
        print(f"xeforge ir: bad input: {exc}", file=err)
        return EXIT_BAD_INPUT
    except ValueError as exc:
        print(f"xeforge ir: bad input: --config must be an index or all ({exc})", file=err)
        return EXIT_BAD_INPUT

    def say(message: str) -> None:
        if not (args.quiet or args.json) and message:
            print(f"  .. {message}", file=err, flush=True)

    def one(source: str, path: str):  # noqa: ANN202
        return compile_ir(source, problem=problem, target=target, variant=args.variant, config_index=config,
                          timeout_s=args.timeout, use_cache=not args.no_cache, on_progress=say,
                          filename=Path(path).name)

    try:
        report = one(problem.kernel.source, args.kernel)
        other_report = one(other, args.diff) if other is not None else None
    except IRError as exc:
        print(f"xeforge ir: bad input: {exc}", file=err)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return EXIT_INTERRUPTED
    if args.json:
        out = {"report": report.to_dict()}
        if other_report is not None:
            out["other"] = other_report.to_dict()
        print(json.dumps(out, indent=1, default=str))
    else:
        print(render(report, args, other_report))
    if report.kind == "unavailable":
        return EXIT_UNAVAILABLE
    failed = not report.ok or (other_report is not None and not other_report.ok)
    return EXIT_FAILED if failed else EXIT_OK


def render(report, args: argparse.Namespace, other=None) -> str:  # noqa: ANN001
    """The terminal report: what the IR is for, the resource table, the stage's text or diff."""
    from xeforge_core.ir.present import (
        diff_summary,
        ir_diff,
        pair_kernels,
        resource_compare_rows,
        resource_rows,
        specialization_text,
        stage_text,
    )
    from xeforge_core.ir.targets import STAGE_NAMES
    from xeforge_core.session.report import text_table

    lines = [report.headline]
    if report.kind == "unavailable":
        return "\n".join(lines)
    dims = " ".join(f"{k}={v}" for k, v in report.variant_dims.items())
    lines += [f"  {n}" for n in report.notes]
    if dims:
        lines.append(f"  shapes: {dims}")
    built = sum(1 for k in report.kernels if not k.error)
    lines.append(f"  {units.plural(report.launches, 'launch')} recorded; {built} of "
                 f"{units.plural(len(report.kernels), 'kernel')} compiled"
                 + (" (cached result)" if report.cached else f" in {units.seconds(report.seconds)}"))
    if report.reason:
        lines.append(f"  {report.kind}: {report.reason}")
    if other is not None and other.reason:
        lines.append(f"  {args.diff}: {other.kind}: {other.reason}")
    if report.not_launched:
        lines.append(f"  not launched at this shape: {', '.join(report.not_launched)}")
    rows = resource_rows(report)
    if other is not None:  # both versions' resources, side by side (renamed kernels paired)
        rows = resource_compare_rows(report, other, old_name=args.kernel, new_name=args.diff)
        headers = ["kernel", "registers", "spills", "shared memory", "num_warps", "num_stages"]
        lines += ["", f"resources, {args.kernel} → {args.diff}:",
                  text_table(headers, [[r[h] for h in headers] for r in rows])]
    elif rows:
        headers = ["kernel", "registers", "spills", "shared memory", "num_warps", "num_stages", "compile"]
        lines += ["", text_table(headers, [[r[h] for h in headers] for r in rows])]
    label = STAGE_NAMES.get(args.stage, args.stage)
    kernels = [k for k in report.kernels if args.kernel_name in (None, k.name, k.label)]
    if args.summary:
        for k in kernels:
            lines.append(f"\n{k.label}: {specialization_text(k)}")
        return "\n".join(lines)
    if other is not None:
        lines.append(f"\nDiff of {label} from {args.kernel} to {args.diff}")
        for old, new in pair_kernels(report, other):
            if args.kernel_name not in (None, new.name, new.label):
                continue
            got = ir_diff(old, new, args.stage, old_name=args.kernel, new_name=args.diff,
                          locations=args.keep_locations)
            if got is None:
                lines.append(f"== {new.label}: no {label} on one side")
                continue
            patch, count = got
            name = new.label if old.name == new.name else f"{old.label} → {new.label} (renamed)"
            lines.append(f"== {name}: {diff_summary(count, args.stage, locations=args.keep_locations)}")
            if patch:
                lines.append(patch.rstrip("\n"))
        return "\n".join(lines)
    for k in kernels:
        lines.append(f"\n== {k.label} · {label} for {report.target.id} ==")
        lines.append(f"   {specialization_text(k)}")
        if k.error:
            lines.append(f"   did not compile: {k.error}")
            continue
        text = stage_text(k, args.stage, locations=args.keep_locations)
        if text is None:
            lines.append(f"   {report.target.label} produces no {label} (stages: {', '.join(k.ir)})")
        else:
            lines.append(text.rstrip("\n"))
    return "\n".join(lines)
