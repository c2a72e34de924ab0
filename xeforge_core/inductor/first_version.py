"""The first-version step for a plain-PyTorch problem: TorchInductor's kernels as ``ModelNew``.

:func:`inductor_first_version` captures Inductor's output code for the problem (in a sandboxed
worker, :mod:`.capture`) at the sizes the verifier checks correctness at, and converts it
(:mod:`.convert`); :func:`first_version_from_capture` converts a capture saved elsewhere (on a
GPU machine) instead. Either way the result is a :class:`~xeforge_core.engines.base.Candidate`
of stage :data:`FIRST_VERSION` for the rules engine, with a rationale naming TorchInductor and
the operations left to torch library calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from xeforge_core.engines.base import Candidate
from xeforge_core.inductor.capture import Capture, GenerationError, capture, check_capture_fits, load_capture
from xeforge_core.inductor.convert import FirstVersion, convert
from xeforge_core.inductor.kernels import InductorCodeError

if TYPE_CHECKING:
    from xeforge_core.problem import Problem

#: The stage id a first version is kept and committed under.
FIRST_VERSION = "first_version"

#: How a first version's candidate notes the operations it leaves to torch library calls.
LIBRARY_NOTE = "not Triton yet (torch library calls): "


def library_calls_noted(notes: list[str]) -> list[str]:
    """The torch library calls a first version's candidate ``notes`` name as not Triton yet
    (``["torch.addmm", "torch.convolution"]``); empty when it left none."""
    return [c for n in notes if n.startswith(LIBRARY_NOTE) for c in n[len(LIBRARY_NOTE):].split(", ")]


def is_plain_pytorch(problem: Problem) -> bool:
    """Whether ``problem``'s current version is a plain-PyTorch ``Model`` (it reaches no
    Triton kernel): the kind of problem a first Triton version is written for."""
    return bool(problem.eager_baseline)


def is_plain_pytorch_file(path: str | Path) -> bool:
    """Whether the file is a plain-PyTorch problem in KernelBench's convention (a ``Model`` class,
    or KernelBook's own module name: ``problem.entry.problem_class``, and ``get_inputs()``, no
    ``@triton.jit`` kernel), read statically."""
    import ast

    from xeforge_core.problem.entry import problem_class

    try:
        text = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    return not _plain_pytorch_gaps(tree, problem_class(text))


def plain_pytorch_gap(path: str | Path) -> str:
    """Why the file is not a plain-PyTorch problem (:func:`is_plain_pytorch_file`), for a file
    that has part of one (a ``Model`` class or a ``get_inputs()``): e.g. "it defines Model but no
    get_inputs()", naming the kernel's line where it holds a ``@triton.jit`` kernel; "" for a
    problem, and for a file with neither part, or one that does not parse."""
    import ast

    from xeforge_core.problem.entry import problem_class

    try:
        text = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return ""
    cls = problem_class(text)
    top = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    if not top & {cls, "get_inputs"}:
        return ""
    return "; ".join(_plain_pytorch_gaps(tree, cls))


def _plain_pytorch_gaps(tree: Any, cls: str) -> list[str]:
    """What the module ``tree`` lacks (or holds) that keeps it from being a plain-PyTorch problem
    with problem class ``cls``: nothing for a problem."""
    import ast
    import difflib

    top = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    lines = {n.name: n.lineno for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    gaps = []
    for name, what in ((f"class {cls}", cls), ("get_inputs()", "get_inputs")):
        if what in top:
            continue
        near = difflib.get_close_matches(what, sorted(top - {"get_init_inputs", "Model", "ModelNew"}), n=1, cutoff=0.7)
        gaps.append(f"it defines no {name}" + (f" ({near[0]} at line {lines[near[0]]}: a misspelling?)" if near else ""))
    jit = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(
        isinstance(d, ast.Attribute) and d.attr == "jit" or isinstance(d, ast.Call) and "jit" in ast.unparse(d)
        for d in n.decorator_list)]
    if jit:
        gaps.append(f"it holds a @triton.jit kernel ({jit[0].name}, line {jit[0].lineno}), so it is a solution, "
                    "not a problem")
    return gaps


def trace_overrides(problem: Problem) -> dict[str, int]:
    """The size constants the verifier checks correctness at (``module-small``), so that
    tracing is quick and small; the code is shape-generic, so it holds at every size, except
    where TorchInductor fixed a size (then :func:`inductor_first_version` traces again at the
    published size)."""
    small = problem.module_variants.get("module-small")
    return dict(small.overrides) if small is not None else {}


def _candidate(fv: FirstVersion, source: str) -> Candidate:
    if not fv.kernels:   # nothing for a Triton stage to start from; as a candidate it would launch no
        # Triton kernel and be refused by the integrity rule no_triton_launch, a verdict about cheating
        calls = ", ".join(sorted(set(fv.library_calls))) or "no kernel at all"
        noted = [LIBRARY_NOTE + ", ".join(sorted(set(fv.library_calls)))] if fv.library_calls else []
        return Candidate.not_applicable(notes=noted,
            code=source, engine="rules", stage=FIRST_VERSION,
            reason=f"TorchInductor generates no Triton kernel for this problem: it leaves the work to torch "
                   f"library calls ({calls}{'; ' + fv.unexpressed_note if fv.unexpressed_products else ''}), so "
                   "there is no Triton first version to start from; write one with the LLM engine (`--engine llm`) "
                   "or by hand (the workbench's manual edit, or your own file checked with `xeforge verify`)")
    notes = [LIBRARY_NOTE + ", ".join(sorted(set(fv.library_calls)))] if fv.library_calls else []
    if fv.library_products:
        notes.append(fv.products_note)
    if fv.unexpressed_products:
        notes.append(fv.unexpressed_note)
    return Candidate(code=fv.source, rationale=fv.rationale, engine="rules", model="torchinductor",
                     stage=FIRST_VERSION, notes=notes)


def inductor_first_version(problem: Problem, *, device: str = "cpu", timeout_s: float | None = None,
                           published_size: bool = False) -> Candidate:
    """A first Triton version of the plain-PyTorch ``problem`` from TorchInductor, generated on
    ``device`` (cpu: for the stand-in driver's GPU target), traced at the verifier's reduced
    size (:func:`trace_overrides`), or at the published one with ``published_size``. A candidate
    that is not applicable (with the reason) when the problem is not plain PyTorch or Inductor's
    code cannot be had or converted; never raises for the problem's own faults."""
    source = problem.kernel.source
    if not is_plain_pytorch(problem):
        return Candidate.not_applicable(code=source, engine="rules", stage=FIRST_VERSION,
                                        reason="the problem already has a Triton version")
    try:
        kw = {"timeout_s": timeout_s} if timeout_s else {}
        small = {} if published_size else trace_overrides(problem)
        cap = capture(source, name=problem.name, device=device, overrides=small, **kw)
        if cap.specialised and small:
            # TorchInductor fixed some sizes, so the code holds only at the traced ones (its size
            # guards refuse the rest): generate it at the published size, the problem's contract
            cap = _at_published_size(cap, source, problem, device, kw)
        return _candidate(convert(cap, source), source)
    except (GenerationError, InductorCodeError) as exc:
        return Candidate.not_applicable(code=source, engine="rules", stage=FIRST_VERSION,
                                        reason=f"TorchInductor gave no first version: {exc}")


def _at_published_size(small: Capture, source: str, problem: Problem, device: str, kw: dict) -> Capture:
    """The capture of ``problem`` at its published sizes, where the one at the verifier's reduced
    size (``small``) had sizes fixed by TorchInductor (``Capture.specialised``: a tuple attribute
    such as LayerNorm's ``normalized_shape``, a pooling window's output length); ``small`` when
    that capture fails (its inputs too large for the worker, a timeout), whose size guards then
    refuse other sizes with a clear error."""
    try:
        return capture(source, name=problem.name, device=device, overrides={}, **kw)
    except GenerationError:
        return small


def first_version_from_capture(problem: Problem, saved: str | Capture) -> Candidate:
    """The first version of ``problem`` from a capture saved by ``Capture.save`` (a path or a
    ``Capture``). Raises ``GenerationError`` for an unreadable capture or one traced from another
    problem module, ``InductorCodeError`` for code that cannot be converted."""
    cap = load_capture(saved) if isinstance(saved, str) else saved
    check_capture_fits(cap, problem.kernel.source, where=saved if isinstance(saved, str) else "capture")
    return _candidate(convert(cap, problem.kernel.source), problem.kernel.source)
