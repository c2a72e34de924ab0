"""``xeforge verify PROBLEM CANDIDATE``: verify one candidate kernel against its problem.

PROBLEM is a Triton baseline module (with an optional spec and reference beside it), or a
plain-PyTorch problem (KernelBench's or KernelAgent's ``Model`` + ``get_inputs()``), which is
then both the truth and the eager baseline. CANDIDATE defines ``ModelNew`` / ``Model``, or
KernelAgent's ``kernel_function``.

Prints a human-readable report (steps with status and time, findings, correctness table,
performance table with speedup, TFLOP/s, GB/s and roofline fraction, warnings), or the
verdict as JSON with ``--json`` (with ``bad_input`` and ``exit_status`` added; where no verdict
is reached, bad input or an interruption, an object of ``kind``, ``reason``, ``bad_input`` and
``exit_status``). The exit status says the verdict kind (see ``EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any, TextIO

from xeforge_core.commands.argtypes import non_negative_float, positive_float, positive_int
from xeforge_core.precision import PrecisionError, allowance_choices, parse_allowances, precision_lines
from xeforge_core.verdict import StepStatus, Verdict, VerdictKind, inputs_label

#: Exit status per verdict kind. 2 is bad input (as argparse uses it); 130 an interruption.
EXIT_CODES: dict[VerdictKind, int] = {
    VerdictKind.OK: 0,
    VerdictKind.WRONG_ANSWER: 1,
    VerdictKind.COMPILE_ERROR: 3,
    VerdictKind.RUNTIME_ERROR: 4,
    VerdictKind.CRASH: 5,
    VerdictKind.TIMEOUT: 6,
    VerdictKind.OOM: 7,
    VerdictKind.CHEATING: 8,
    VerdictKind.ENVIRONMENT: 9,
    VerdictKind.INCONCLUSIVE: 10,
    VerdictKind.INCONSISTENT: 11,
}
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

_EPILOG = """exit status:
  0  ok: compiles, structure sound, matches the truth on every variant (and timed on a GPU)
  1  wrong_answer   3  compile_error   4  runtime_error   5  crash (signal or driver fault)
  6  timeout (hang) 7  oom             8  cheating        9  environment (the baseline failed)
  10 inconclusive: the truth's output ignores inputs that varied, or is random (dropout in
     training mode), so matching it proves nothing
  11 inconsistent: the candidate matches the reference but the problem's baseline does not
  2  bad input (unreadable file, bad spec, unknown variant or device, or the problem's own
     get_inputs()/forward raising: an environment verdict that names the problem's line)
  130 interrupted

the truth is the PyTorch reference when there is one (a plain-PyTorch PROBLEM, a ModelNew file's
own Model, --reference, or <stem>_ref.py), else the baseline.

examples:
  xeforge verify benchmarks/kernels/gemm_fp32_upcast.py benchmarks/kernels/gemm_fp16_dot.py
  xeforge verify kernel.py candidate.py --spec kernel.yaml --variant ci --device cpu --json
  xeforge verify sample_kernels/03_row_softmax.py sample_kernels/03_row_softmax.py   # a sample against itself
  xeforge verify 23_Softmax.py softmax_triton.py                   # KernelBench problem + ModelNew
  xeforge verify 23_Softmax.py softmax_triton.py --variant module  # at the published size
  xeforge verify problem.py kernel.py                              # KernelAgent kernel_function
  xeforge verify problem.py solution.py --memcheck                 # also look for out-of-bounds accesses
"""


class _RequireSandbox(argparse.Action):
    """``--require-sandbox``: set ``XEFORGE_REQUIRE_SANDBOX=1`` for this run, and refuse at once
    (bad usage, naming why) where the sandbox cannot be set up."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: ANN001
        import os

        from xeforge_core import sandbox

        os.environ[sandbox.REQUIRE_ENV] = "1"
        setattr(namespace, self.dest, True)
        try:
            sandbox.require_sandbox()
        except sandbox.SandboxRequired as exc:
            parser.error(f"{option_string}: {exc}")


def add_verification_arguments(p: argparse.ArgumentParser) -> None:
    """The worker settings of a verification (``--timeout``, ``--seeds``, ``--no-odd-size``,
    ``--require-sandbox``, ``--allow``), shared by ``verify``, ``optimize`` and ``batch``."""
    p.add_argument("--timeout", metavar="SECONDS", type=positive_float, default=300.0,
                   help="hard wall-clock limit per verification worker job, the baseline's included "
                        "(default: 300)")
    p.add_argument("--seeds", metavar="N", type=positive_int, default=3, help="seeds per variant (default: 3)")
    p.add_argument("--no-odd-size", action="store_true",
                   help="do not add the sizes the verifier derives (odd sizes, and the size chosen from the "
                        "kernels' tiles: every dimension a non-multiple of every tile, 3 programs per growing "
                        "grid axis, 2 trips per growing loop)")
    p.add_argument("--require-sandbox", action=_RequireSandbox, nargs=0, default=False,
                   help="refuse to run kernels outside the OS sandbox (no network, read-only file "
                        "system, secrets hidden; see README); also XEFORGE_REQUIRE_SANDBOX=1")
    p.add_argument("--allow", metavar="DOWNGRADE", action="append", default=[], type=_allowances,
                   help="accept a precision downgrade beyond the problem's own dtype (repeatable, or "
                        "comma-separated): "
                        + "; ".join(f"{name}: {what}" for name, what in allowance_choices().items())
                        + ". Default: none (a float32 problem is held to float32 against a float64 truth); "
                          "a spec's 'allow:' list adds to these")
    p.add_argument("--dtype", metavar="DTYPE", type=_dtype, default=None,
                   help="pose the problem at this floating-point dtype (float32, float16, bfloat16, float64; "
                        "also half, float, double, fp32, bf16, fp16, fp64, any case): "
                        "its model and floating-point inputs cast, as KernelBench's evaluation does with its "
                        "precision and KernelAgent's test harness with its dtype; the truth stays float64. "
                        "'kernel': the dtype a candidate demands when it refuses the problem's own (the verdict "
                        "then says so, dtype_specialised; a candidate that accepts the problem's own keeps it). "
                        "Default: the problem's own dtypes")


def _dtype(text: str) -> str | None:
    """One ``--dtype`` value, checked; a bad one is an argparse error naming the nearest name."""
    from xeforge_core.verify import normalised_dtype

    try:
        return normalised_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _allowances(text: str) -> tuple[str, ...]:
    """One ``--allow`` value (a name or a comma-separated list, any case) as checked names; a bad
    one is an argparse error naming the nearest valid name, as a spec's ``allow:`` list is."""
    try:
        return parse_allowances(text, where="--allow")
    except PrecisionError as exc:  # argparse names the option already
        raise argparse.ArgumentTypeError(exc.message) from None


def allowances(args: argparse.Namespace) -> list[str]:
    """Every downgrade the ``--allow`` options name, in the order given, once each."""
    return list(dict.fromkeys(n for group in getattr(args, "allow", None) or [] for n in group))


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``verify`` subcommand to the ``xeforge`` CLI."""
    p = subparsers.add_parser(
        "verify",
        help="verify a candidate kernel against its baseline (compile, structure, correctness, speed)",
        description=(
            "Verify CANDIDATE against PROBLEM (its baseline kernel, or its PyTorch model) in isolated worker "
            "processes: compile, structure "
            "and integrity, correctness on every variant, seed and input distribution (plus a "
            "size derived from the kernels' tiles), and on a GPU the speedup, TFLOP/s, GB/s and roofline fraction. "
            "On cpu the kernels run in Triton's interpreter and speed is not measured."),
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("baseline", metavar="PROBLEM",
                   help="the baseline kernel module, or a plain-PyTorch problem (KernelBench / KernelAgent)")
    p.add_argument("candidate", metavar="CANDIDATE",
                   help="the candidate module (ModelNew / Model, or KernelAgent's kernel_function)")
    p.add_argument("--spec", metavar="S", help="Xe-Forge YAML spec (default: PROBLEM's sibling .yaml)")
    p.add_argument("--reference", metavar="R",
                   help="PyTorch reference module (default: a sibling <stem>_pytorch.py / _ref.py)")
    p.add_argument("--variant", metavar="V", nargs="+", action="extend", default=None,
                   help="variant(s) to check and time (default: every ci entry plus odd-size copies, or "
                        "module-small for a large KernelBench problem; the benchmark variant, or the "
                        "published sizes, timed on a GPU). 'module' checks a KernelBench problem at its "
                        "published sizes")
    p.add_argument("--target", metavar="T", default=None,
                   help="the target whose knowledge-base lints apply: a hardware profile (arc_b580, nvidia_h200, "
                        "...) or a family (xpu, cuda), as xeforge optimize takes (default: the run device's; xpu on "
                        "cpu)")
    p.add_argument("--device", metavar="D", default=None,
                   help="cpu, cuda, cuda:N, xpu, xpu:N or auto (default: $XEFORGE_DEVICE or auto)")
    add_verification_arguments(p)
    p.add_argument("--no-performance", action="store_true", help="do not time on a GPU")
    p.add_argument("--rtol", type=non_negative_float, default=None,
                   help="relative tolerance: judge with rtol/atol instead of the float64-calibrated bound")
    p.add_argument("--atol", type=non_negative_float, default=None,
                   help="absolute tolerance: judge with rtol/atol instead of the float64-calibrated bound")
    p.add_argument("--allow-dtype-change", action="store_true",
                   help="accept an output dtype different from the baseline's")
    p.add_argument("--allow-shape-change", action="store_true",
                   help="accept an output shape different from the baseline's")
    p.add_argument("--own-inputs-only", action="store_true",
                   help="judge correctness on the problem's own get_inputs() only, without the normal, ties, "
                        "shifted, spread and zeros redraws that stress a kernel outside the domain those inputs lie in (a kernel "
                        "that drops a clamp no probability or label reaches); the verdict says it applied")
    p.add_argument("--memcheck", action="store_true",
                   help="after the candidate matched, run one more correctness call under a memory checker "
                        "(compute-sanitizer memcheck on cuda, the interpreter's bounds check on cpu; none on xpu) "
                        "and report every out-of-bounds access with kernel, line and size; an invalid write "
                        "fails correctness. Opt-in: it costs one more worker job, several times slower on a GPU")
    p.add_argument("--json", action="store_true",
                   help="print the verdict as JSON, with its exit_status and bad_input (on bad input: kind, reason)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the verdict cache (nor saved baseline outputs)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    p.set_defaults(func=run)
    json_usage_errors(p)


def json_requested(args: Any) -> bool:
    """Whether the command line ``args`` asks for ``--json`` (as argparse reads it: also an
    unambiguous prefix, ``--js``)."""
    return args is not None and any(str(a).startswith("--j") and "--json".startswith(str(a)) for a in args)


def json_usage_errors(parser: argparse.ArgumentParser, args: Any = None) -> None:
    """Make ``parser`` print a usage error as the ``_refused`` JSON record on stdout too when the
    command line asks for ``--json`` (argparse's message and exit status 2 on stderr as before),
    so a tool reading stdout gets a record for every outcome. ``args``: the command line, known
    to the caller (the ``xeforge`` parser's); else read from what ``parser`` parses (the
    ``verify`` subparser's)."""
    parse, fail = parser.parse_known_args, parser.error
    wanted = {"json": json_requested(args)}

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        wanted["json"] = wanted["json"] or json_requested(args)
        return parse(args, namespace)

    def error(message: str) -> Any:
        if wanted["json"]:
            print(_record("bad_input", message, EXIT_BAD_INPUT), flush=True)
        return fail(message)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]
    parser.error = error  # type: ignore[method-assign]


def run(args: argparse.Namespace) -> int:
    """Run ``xeforge verify``; returns the exit status (``EXIT_CODES``)."""
    if args.no_cache:  # jobs will run: their warm-pool workers import while the rest loads
        from xeforge_core.verify import start_for_verification

        try:
            start_for_verification(args.device)
        except KeyboardInterrupt:
            return _refused(args, "interrupted", "interrupted", EXIT_INTERRUPTED)
    from xeforge_core.problem import ProblemError, load_problem, read_candidate
    from xeforge_core.sandbox import SandboxRequired
    from xeforge_core.verify import VerificationCancelled, VerifyOptions, verify

    try:
        problem = load_problem(args.baseline, spec_path=args.spec, reference_path=args.reference)
        candidate = read_candidate(args.candidate, posed=problem.kernel.class_name)
        if args.own_inputs_only and problem.spec is not None and problem.spec.inputs:
            raise ProblemError("--own-inputs-only applies to a problem judged on its get_inputs(); this one has a "
                               "spec, whose inputs are all its own and all the contract: leave the option out",
                               file=problem.spec.path)
        options = VerifyOptions(
            timeout_s=args.timeout, baseline_timeout_s=args.timeout, variants=args.variant, include_odd_size=not args.no_odd_size,
            tile_sizes=not args.no_odd_size,
            seeds=args.seeds, performance_variants=args.variant,
            measure_performance=not args.no_performance, use_cache=not args.no_cache,
            allow_dtype_change=args.allow_dtype_change, allow_shape_change=args.allow_shape_change,
            rtol=args.rtol, atol=args.atol, target=_target_family(args.target), allow_precision=allowances(args),
            memcheck=args.memcheck, dtype=getattr(args, "dtype", None),
            **({"distributions": []} if args.own_inputs_only else {}),
        )
        progress = None if (args.quiet or args.json) else _progress_printer(sys.stderr)
        cancel = threading.Event()
        try:
            verdict = verify(problem, candidate, device=args.device, options=options,
                             on_progress=progress, cancel=cancel, candidate_name=args.candidate)
        except KeyboardInterrupt:
            cancel.set()
            return _refused(args, "interrupted", "interrupted", EXIT_INTERRUPTED)
    except ProblemError as exc:
        from xeforge_core.samples import sample_hint

        hint = sample_hint(args.baseline) or sample_hint(args.candidate)
        return _refused(args, "bad_input", f"bad input: {exc}{hint}", EXIT_BAD_INPUT)
    except VerificationCancelled as exc:
        return _refused(args, "interrupted", str(exc), EXIT_INTERRUPTED)
    except ValueError as exc:  # an invalid or unavailable --device
        return _refused(args, "bad_input", str(exc), EXIT_BAD_INPUT)
    except SandboxRequired as exc:  # XEFORGE_REQUIRE_SANDBOX=1 where there is no sandbox
        return _refused(args, VerdictKind.ENVIRONMENT.value, str(exc), EXIT_CODES[VerdictKind.ENVIRONMENT])

    for w in problem.warnings if hasattr(problem, "warnings") else []:
        verdict.warnings.append(f"problem: {w}")
    # the problem's own code raised: the input is what is wrong
    code = EXIT_BAD_INPUT if verdict.problem_at_fault else EXIT_CODES.get(verdict.kind, 1)
    if args.json:
        print(json.dumps({**verdict.to_dict(), "bad_input": verdict.problem_at_fault, "exit_status": code},
                         indent=2, default=str))
    else:
        print(render_report(verdict, baseline=args.baseline, candidate=args.candidate))
    return code


def _refused(args: argparse.Namespace, kind: str, message: str, code: int) -> int:
    """Say why no verdict was reached (on stderr; with ``--json`` also as a JSON object on stdout,
    ``{"kind", "reason", "bad_input", "exit_status"}``, so a tool reading stdout gets one too).
    Returns ``code``."""
    print(f"xeforge verify: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        print(_record(kind, message, code))
    return code


def _record(kind: str, message: str, code: int) -> str:
    """The JSON record of an outcome without a verdict: ``kind``, ``reason``, ``bad_input``, ``exit_status``."""
    return json.dumps({"kind": kind, "reason": message, "bad_input": code == EXIT_BAD_INPUT, "exit_status": code},
                      indent=2)


def _target_family(choice: str | None) -> str | None:
    """The family (``xpu``/``cuda``) of ``--target``, read as ``xeforge optimize`` reads it.
    Raises ``TargetError`` (a ``ValueError``: bad input) naming the profiles for an unknown one."""
    if not choice:
        return None
    from xeforge_core.target import resolve

    return resolve(None, choice).family


def _progress_printer(stream: TextIO):
    def show(message: str) -> None:
        print(f"  .. {message}", file=stream, flush=True)

    return show


# --------------------------------------------------------------------------------------------
# report


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    # the last column's padding only trails the line (a wide note column padded every row)
    return "\n".join(("  " + x).rstrip() for x in [line, rule, *body])


def _call_word(call: Any) -> str:
    """``faster``, ``slower`` or ``no difference (±x%)``: the rule's call in a table cell."""
    if call.faster or call.slower:
        return call.kind.value
    margin = call.margin_pct
    return f"no difference (±{margin:.1f}%)" if margin is not None else "-"


def _method(stats: Any) -> str:
    """How a callable was timed, in a few words (``events``, ``graph x64``, ``64 back-to-back``)."""
    if stats.method == "graph":
        return f"graph x{stats.calls_per_sample}"
    if stats.method == "back_to_back":
        return f"{stats.calls_per_sample} back-to-back"
    return stats.method


def _fmt(value: Any, spec: str = ".3g", suffix: str = "") -> str:
    if value is None:
        return "-"
    try:
        number = int(value) if spec == "d" else float(value)
        return format(number, spec) + suffix
    except (TypeError, ValueError):
        return str(value)


def _bound(run: Any) -> str:
    """How a correctness run was judged, in a table cell: ``float64 x256`` (the largest error
    ratio allowed against the float64 truth) or ``rtol/atol``."""
    factor = max((o.bound_factor for o in run.outputs if o.check == "float64" and o.bound_factor), default=None)
    tol = f"{run.rtol:g}/{run.atol:g}"
    if factor is None:
        return tol
    return f"float64 x{factor:g}" + (f", {tol}" if "tolerance" in run.check else "")


def _kernelbench(run: Any) -> str:
    """What KernelBench's tolerance says on one run: ``pass``, ``FAIL`` or ``-``."""
    return "-" if run.kernelbench is None else ("pass" if run.kernelbench else "FAIL")


_MARK = {StepStatus.PASSED: "ok", StepStatus.FAILED: "FAILED", StepStatus.SKIPPED: "skipped",
         StepStatus.NOT_MEASURED: "not measured", StepStatus.INCONCLUSIVE: "inconclusive"}


def render_report(verdict: Verdict, *, baseline: str = "", candidate: str = "") -> str:
    """The human-readable report of ``verdict`` (plain text, no colour)."""
    out: list[str] = []
    dev = verdict.device or {}
    title = f"verdict: {verdict.kind.value.upper()}"
    if verdict.problem_at_fault:  # exit 2, as for bad input: the problem file is what to fix
        title = "verdict: BAD INPUT (the problem's own code failed; the candidate was not judged)"
    if verdict.escape_findings:
        title += " WITH SECURITY WARNINGS"
    if verdict.cached:
        title += " (cached)"
    out.append(title)
    if verdict.reason:
        out.append(f"  {verdict.reason}")
    if verdict.escape_findings:
        out.append(f"  {verdict.escape_headline}")
    if baseline or candidate:
        out.append(f"  baseline {baseline}  candidate {candidate}")
    if dev:
        versions = dev.get("versions") or {}
        vtext = ", ".join(f"{k} {v}" for k, v in versions.items() if v and k in ("torch", "triton", "numpy"))
        out.append(f"  device {dev.get('type')}:{dev.get('index', 0)} ({dev.get('name')})"
                   + (f"; {vtext}" if vtext else ""))
    out.append(f"  took {verdict.seconds:.1f} s")
    if verdict.isolation_summary:
        out.append(f"  {verdict.isolation_summary}")
    if verdict.source_line:
        out.append(f"  at candidate line {verdict.source_line}")

    out.append("\nsteps")
    for s in verdict.steps:
        out.append(f"  {s.name:<12} {_MARK.get(s.status, s.status.value):<13} {s.seconds:7.2f} s  "
                   f"{s.summary}".rstrip())

    if verdict.findings:
        out.append("\nfindings")
        for f in verdict.findings:
            where = f" (line {f.line})" if f.line else ""
            out.append(f"  [{f.severity}] {f.rule}{where}: {f.message}")

    if verdict.kernels:
        out.append("\ncompiled kernels")
        rows = []
        for k in verdict.kernels:
            config = ", ".join(f"{a}={b}" for a, b in (k.config or {}).items())
            rows.append([k.name, _fmt(k.num_warps, "d"), _fmt(k.num_stages, "d"), _fmt(k.registers, "d"),
                         _fmt(k.spills, "d"), _fmt(k.shared_bytes, "d"), k.grf_mode or "-", config or "-"])
        out.append(_table(["kernel", "warps", "stages", "registers", "spills", "shared B", "GRF",
                           "config"], rows))

    if verdict.correctness:
        out.append("\ncorrectness")
        rows = []
        for c in verdict.correctness:
            worst_abs = max((o.max_abs_error for o in c.outputs if o.max_abs_error is not None), default=None)
            worst_rel = max((o.max_rel_error for o in c.outputs if o.max_rel_error is not None), default=None)
            bad = sum(o.mismatches for o in c.outputs)
            # the errors are measured over the finite elements: say so where some are NaN or Inf
            odd = sum((o.nan_mismatch or 0) + (o.inf_mismatch or 0) for o in c.outputs)
            finite = f" (+{odd} NaN/Inf)" if odd else ""
            rows.append([c.variant, str(c.seed), inputs_label(c.distribution), c.against, c.config or "-",
                         "pass" if c.passed else "FAIL", _fmt(worst_abs) + finite, _fmt(worst_rel), str(bad),
                         _bound(c), _kernelbench(c), c.note])
        out.append(_table(["variant", "seed", "inputs", "vs", "config", "result", "max abs err",
                           "max rel err", "mismatches", "bound", "KernelBench", "note"], rows))
    out.extend(f"  {line}" for line in precision_lines(verdict.precision))

    if verdict.sizes:
        out.append("\nsizes checked")
        for entry in verdict.sizes:
            shown = ", ".join(f"{k}={v}" for k, v in entry.sizes.items()) or "-"
            out.append(f"  {entry.variant} ({shown}): {entry.why}")
            out.extend(f"    {line}" for line in entry.coverage)
            out.extend(f"    missed: {gap}" for gap in entry.gaps)

    perf = verdict.step("performance")
    if verdict.performance:
        out.append("\nperformance")
        rows = []
        for p in verdict.performance:
            call = p.call
            rows.append([p.variant, _fmt(p.baseline.median_us, ".1f"), _fmt(p.candidate.median_us, ".1f"),
                         _fmt(p.speedup, ".2f", "x") + (" vs eager" if p.baseline_label == "eager" else ""),
                         "-" if call.assumed or call.low is None else f"{call.low:.3f}-{call.high:.3f}",
                         _call_word(call), _fmt(p.tflops, ".1f"), _fmt(p.gbps, ".0f"),
                         _fmt(p.roofline_fraction * 100 if p.roofline_fraction is not None else None, ".0f", "%"),
                         _fmt(p.candidate.cv * 100, ".1f", "%"),
                         _fmt(p.reference.median_us if p.reference else None, ".1f"),
                         _method(p.candidate), p.suspect or ""])
        ci = f"{verdict.performance[0].confidence * 100:g}% CI"
        out.append(_table(["variant", "baseline µs", "candidate µs", "speedup", ci, "call", "TFLOP/s", "GB/s",
                           "roofline", "cv", "eager µs", "timed as", "note"], rows))
        call = verdict.speed_call
        label = "geometric-mean speedup" if len(verdict.performance) > 1 else "speedup"
        out.append(f"  {label}: {call.text}")
        for p in verdict.performance:
            if p.baseline_label != "eager" and p.eager_speedup and p.reference is not None:
                out.append(f"  {p.variant}: {p.eager_speedup:.2f}x over eager PyTorch (the reference, "
                           f"{p.reference.median_us:.1f} µs)")
    elif perf is not None:
        out.append(f"\nperformance: {perf.summary}")

    if verdict.error_text and not verdict.passed:
        out.append("\nerror")
        out.extend("  " + line for line in verdict.error_text.strip().splitlines()[-30:])
    if verdict.warnings:
        out.append("\nwarnings")
        out.extend(f"  - {w}" for w in verdict.warnings)
    return "\n".join(out)
