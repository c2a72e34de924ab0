"""``xeforge inductor``: TorchInductor's Triton kernels for a plain-PyTorch problem, as a saved
capture or as a first version (``ModelNew``).

* ``xeforge inductor capture PROBLEM.py --out CAPTURE.json``: trace the problem's ``Model`` with
  TorchInductor in a sandboxed worker and save its output code with the meaning of each argument
  (``xeforge_core.inductor.capture``). On a GPU machine (``--device cuda`` / ``xpu``) the code is
  Inductor's for that device; on ``cpu`` it is generated for a stand-in sm_90 target.
* ``xeforge inductor convert PROBLEM.py CAPTURE.json --out MODELNEW.py``: write the standalone
  first version from a saved capture (no generation, no device: works anywhere), and say which
  operations stay torch library calls.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xeforge_core.commands.argtypes import positive_float

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

_EPILOG = """exit status:
  0  written   1  TorchInductor gave no code, or the code cannot be converted (the reason says which step)
  2  bad input (missing or unreadable file, not a plain-PyTorch problem, not a saved capture)   130 interrupted

examples:
  xeforge inductor capture problem.py --device cuda --out problem.capture.json   # on the GPU machine
  xeforge inductor convert problem.py problem.capture.json --out problem_new.py  # anywhere
  xeforge verify problem.py problem_new.py
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``inductor`` subcommand (``capture``, ``convert``) to the ``xeforge`` CLI."""
    p = subparsers.add_parser(
        "inductor", help="TorchInductor's Triton kernels for a plain-PyTorch problem: save a capture, convert one",
        description=__doc__.split("\n\n", 1)[1].replace("``", "") if __doc__ else None, epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="inductor_command", metavar="ACTION", required=True)
    cap = sub.add_parser("capture", help="trace PROBLEM with TorchInductor and save its output code (JSON)",
                         epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    cap.add_argument("problem", metavar="PROBLEM", help="plain-PyTorch problem module (KernelBench style: Model, "
                                                        "get_inputs(), get_init_inputs())")
    cap.add_argument("--out", "-o", metavar="CAPTURE", default=None,
                     help="where to write the capture (default: PROBLEM's name + .capture.json beside it)")
    cap.add_argument("--device", default="cpu",
                     help="cpu (code for a stand-in sm_90 target, no GPU needed), cuda, cuda:N, xpu (default: cpu)")
    cap.add_argument("--sizes", choices=["reduced", "published"], default="reduced",
                     help="trace at the reduced sizes the verifier checks correctness at (quick), or at the "
                          "problem's published sizes; the code is size-generic either way (default: reduced)")
    cap.add_argument("--timeout", metavar="SECONDS", type=positive_float, default=None,
                     help="wall-clock limit of the generation worker (default: 240)")
    cap.set_defaults(func=run_capture)
    conv = sub.add_parser("convert", help="write the first version (ModelNew) of PROBLEM from a saved capture",
                          epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    conv.add_argument("problem", metavar="PROBLEM", help="the plain-PyTorch problem module the capture is of")
    conv.add_argument("capture", metavar="CAPTURE", help="capture saved by `xeforge inductor capture`")
    conv.add_argument("--out", "-o", metavar="MODELNEW", default=None,
                      help="where to write the first version (default: PROBLEM's name + _inductor.py beside it)")
    conv.set_defaults(func=run_convert)


def _problem(path: str):  # noqa: ANN202
    """The plain-PyTorch problem at ``path``; prints the reason and returns ``None`` when it is not one."""
    from xeforge_core.errors import XeForgeError, missing_path_hint
    from xeforge_core.inductor.first_version import is_plain_pytorch
    from xeforge_core.problem import load_problem

    p = Path(path)
    if not p.is_file():
        print(f"xeforge inductor: {p}: file not found{missing_path_hint(p)}", file=sys.stderr)
        return None
    try:
        problem = load_problem(p)
    except XeForgeError as exc:
        text = str(exc)  # the loader's errors name the file already ("problem.py:17: ...")
        where = "" if Path(text.split(":", 1)[0]).name == p.name else f"{p}: "
        print(f"xeforge inductor: {where}{text}", file=sys.stderr)
        return None
    if not is_plain_pytorch(problem):
        print(f"xeforge inductor: {p}: not a plain-PyTorch problem (its forward() already launches Triton "
              "kernels); TorchInductor's first version is for a Model written in PyTorch", file=sys.stderr)
        return None
    return problem


def run_capture(args: argparse.Namespace) -> int:
    """``xeforge inductor capture``: generate and save. Returns the exit status."""
    from xeforge_core.inductor.capture import GenerationError, capture
    from xeforge_core.inductor.first_version import trace_overrides

    problem = _problem(args.problem)
    if problem is None:
        return EXIT_BAD_INPUT
    if args.device != "cpu":
        from xeforge_core.devices import detect_device

        try:
            detect_device(args.device)  # a GPU this machine lacks is bad input, named before tracing
        except ValueError as exc:
            print(f"xeforge inductor capture: bad input: --device {args.device}: {exc} "
                  "(--device cpu generates code for a stand-in sm_90 target without a GPU)", file=sys.stderr)
            return EXIT_BAD_INPUT
    out = Path(args.out) if args.out else Path(args.problem).with_suffix(".capture.json")
    overrides = trace_overrides(problem) if args.sizes == "reduced" else {}
    at = ", ".join(f"{k}={v}" for k, v in overrides.items()) or "the published sizes"
    print(f"tracing {problem.name} with TorchInductor on {args.device} at {at} ...", file=sys.stderr)
    try:
        kw = {"timeout_s": args.timeout} if args.timeout else {}
        cap = capture(problem.kernel.source, name=problem.name, device=args.device, overrides=overrides, **kw)
    except GenerationError as exc:
        print(f"xeforge inductor capture: {args.problem}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    cap.save(out)
    print(f"wrote {out} (torch {cap.torch}, code generated for {cap.generated_for or cap.device})")
    if cap.specialised:
        print("sizes TorchInductor fixed (the first version refuses others): "
              + ", ".join(f"{k} == {v}" for k, v in cap.specialised.items()))
    return EXIT_OK


def run_convert(args: argparse.Namespace) -> int:
    """``xeforge inductor convert``: a saved capture -> ``ModelNew`` module. Returns the exit status."""
    from xeforge_core.inductor.capture import GenerationError, check_capture_fits, load_capture
    from xeforge_core.inductor.convert import convert
    from xeforge_core.inductor.kernels import InductorCodeError

    problem = _problem(args.problem)
    if problem is None:
        return EXIT_BAD_INPUT
    try:
        cap = load_capture(args.capture)
        check_capture_fits(cap, problem.kernel.source, where=args.capture)
    except GenerationError as exc:
        print(f"xeforge inductor convert: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        fv = convert(cap, problem.kernel.source)
    except InductorCodeError as exc:
        print(f"xeforge inductor convert: {args.capture}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    out = Path(args.out) if args.out else Path(args.problem).with_name(Path(args.problem).stem + "_inductor.py")
    out.write_text(fv.source, encoding="utf-8")
    print(f"wrote {out}: {len(fv.kernels)} Triton kernel(s): {', '.join(fv.kernels) or 'none'}")
    if fv.library_calls:
        print(f"not Triton yet (torch library calls): {', '.join(sorted(set(fv.library_calls)))}")
    print(f"verify it: xeforge verify {args.problem} {out}")
    return EXIT_OK
