"""The published shape as the contract of a fixed-shape problem.

A KernelBench or KernelAgent problem poses one shape: its published sizes (the ``module``
variant). The sizes the verifier checks by default are its own choice (``module-small``, the
``-odd`` copies, the launch-grid and tile-derived variants): a fast path that holds for kernels
written for any shape. A kernel written for the published shape (it asserts the shape, takes
``tl.arange`` over a dimension that is a power of two only there, or hard-codes the grid) fails
at those sizes and is still right for the problem. So when a candidate fails only at a size the
verifier chose, with a failure that can depend on the shape, it is checked at the published
size; right there, it is ``ok`` with a ``shape_specialised`` finding that names the sizes it
fails at and why. An Xe-Forge spec's variants are all the contract: none of this applies to them.

What counts as a failure that can depend on the shape:

* a compile error, a run-time error or a crash at a chosen size (the kernel refuses the size;
  whether it is right at the published one is then a question the published size answers);
* a wrong answer, only where the candidate evidently specialises on the published sizes: its
  source writes one of them as a number (``tl.arange(0, 4096)``, ``grid = (128,)``) where the
  chosen size differs (``hardcoded_sizes``). A wrong answer of a kernel that reads its sizes
  from its inputs (a dropped tail mask, a floor-divided grid) is a bug at any size, and stays
  ``wrong_answer``.

The problem's dtype is the contract too (float32 for a float32 problem), but a harness may pose
it at another: KernelBench's evaluation casts the problem to its ``precision`` and KernelAgent's
test harness to its ``dtype`` (bfloat16 in its examples). A candidate written for such a harness
refuses the problem's own inputs, naming the dtype it accepts (``raise TypeError("A and B must be
torch.bfloat16")``, ``assert x.dtype == torch.float16``): :func:`refused_dtype` reads that dtype
from the verdict, and the verifier says so (``dtype_refusal``) with the option that poses the
problem at it (``--dtype``), or, asked to (``--dtype kernel``), checks it there.

Everything here is static (``ast``, the verdict's words); the jobs that check the published size
run in ``xeforge_core.verify``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from xeforge_core.problem.scaling import describe_overrides, size_constants, variant_input_elements
from xeforge_core.units import plural
from xeforge_core.verdict import Finding, Verdict, VerdictKind
from xeforge_core.worker import formats
from xeforge_core.worker.astutil import dotted_name
from xeforge_core.worker.astutil import parse as parse_python

#: The published sizes' variant of a problem without a spec.
PUBLISHED = "module"

#: Verdict kinds where the kernel refused the size itself (see the module docstring).
REFUSED_SIZE = frozenset({VerdictKind.COMPILE_ERROR, VerdictKind.RUNTIME_ERROR, VerdictKind.CRASH})

#: Names of tile and launch settings: a number bound to one of them is a block size, not a
#: problem size, so it is no evidence of a hard-coded shape.
_TILE_NAME = re.compile(r"block|tile|group|warp|stage|split|chunk|num_(?:warps|stages|ctas|sms|programs|progs)|vec|unroll|grf",
                        re.IGNORECASE)

#: Words of error messages that refuse a shape (Triton's and PyTorch's words for them).
_SHAPE_WORDS = re.compile(
    r"power of (?:2|two)|shape|dimension|divisible|multiple of|make_shape_compatible|broadcast|"
    r"size of tensor|AssertionError", re.IGNORECASE)
#: Words of a memory fault: a kernel written for the published shape faults at others, and so
#: does a kernel that reads its sizes from its inputs and has a bug; only the first writes the
#: published sizes as numbers, so these count only beside that evidence.
_FAULT_WORDS = re.compile(r"out of (?:bounds|range)|index \d+ is out|illegal memory access|misaligned", re.IGNORECASE)

#: A source line a verdict quotes (`...`): code, not the error's words.
_QUOTED = re.compile(r"`[^`]*`")

#: Elements per second Triton's interpreter moves through an elementwise kernel on the
#: development machine (2 shared cores, under load): 1.2e5-1.7e5 with 256-element blocks,
#: 4.7e5-6.5e5 with 1024-element blocks, for 2^18 to 2^22 elements (measured 2026-12-03).
INTERPRETER_ELEMENTS_PER_S = 2e5

#: The published size is checked in the interpreter without being asked when that is estimated
#: to take at most this long (seconds); beyond it, only on request (``--variant module``).
PUBLISHED_ON_CPU_SECONDS = 60.0


def failed_variant(verdict: Verdict, first: str, checked: list[str] | None = None) -> str:
    """The variant a failing verdict failed at: its first failed correctness run's, else the one
    its reason names (``variant module-small (seed 0, ...)``), else the first of ``checked`` (the
    variants in the order they ran) with no passing run (a compile error or a crash at the third
    variant leaves runs of the first two and names none), else ``first`` (the first call)."""
    run = next((r for r in verdict.correctness if not r.passed), None)
    if run is not None:
        return run.variant
    m = re.search(r"variant (\S+) \(seed", verdict.reason or "")
    if m:
        return m.group(1)
    passed = {r.variant for r in verdict.correctness if r.passed}
    if passed:
        return next((v for v in checked or [] if v not in passed), first)
    return first


def hardcoded_sizes(source: str, problem: Any, variant: Any) -> list[str]:
    """Where ``source`` writes a published size of ``problem`` as a number that ``variant``
    (a size the verifier chose) changes, one ``"4096 (line 12, dim)"`` each; numbers bound to
    a tile setting (``BLOCK_N=128``, ``"BLOCK": 64``, ``num_warps=4``), compared with one
    (``if BLOCK_SIZE > 256``) or dividing a size (``triton.cdiv(n, 1024)``, ``n // 1024``) do not
    count."""
    if problem.inputs is None or variant is None:
        return []
    published = size_constants(problem.inputs.source)
    chosen = dict(getattr(variant, "overrides", {}) or {})
    changed: dict[int, str] = {}
    for name, value in published.items():
        new = chosen.get(name, value)
        pairs = zip(value, new) if isinstance(value, tuple) and isinstance(new, (tuple, list)) else [(value, new)]
        for old, now in pairs:
            if isinstance(old, int) and old != now and old >= 8:
                changed.setdefault(int(old), name)
    if not changed:
        return []
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return []
    tile_names, tile_values = _tiles_by_use(tree)
    tile_literals: set[int] = set()
    for node in ast.walk(tree):
        named: list[tuple[str, ast.AST]] = []
        if isinstance(node, ast.keyword) and node.arg:
            named.append((node.arg, node.value))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named += [(t.id, node.value) for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.Dict):
            named += [(k.value, v) for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args
            named += [(a.arg, d) for a, d in zip(args[len(args) - len(node.args.defaults):], node.args.defaults)]
        for name, value in named:
            if _TILE_NAME.search(name) or name in tile_names:
                tile_literals |= {id(n) for n in ast.walk(value)}
            elif isinstance(node, ast.keyword) and isinstance(value, ast.Constant) and value.value in tile_values:
                tile_literals.add(id(value))  # `BN=16` beside a grid of `triton.cdiv(N, 16)`
        # a bound on a tile is a tile setting: `if BLOCK_SIZE > 256` chooses a path by the tile
        if isinstance(node, ast.Compare) and any(
                isinstance(n, ast.Name) and _TILE_NAME.search(n.id) for n in [node.left, *node.comparators]):
            tile_literals |= {id(n) for n in [node.left, *node.comparators] if isinstance(n, ast.Constant)}
        # a divisor is a tile: triton.cdiv(n, 1024), n // 1024, n % 1024
        if isinstance(node, ast.Call) and dotted_name(node.func).rsplit(".", 1)[-1] == "cdiv":
            tile_literals |= {id(a) for a in node.args[1:]}
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            tile_literals.add(id(node.right))
    tile_literals |= _harness_literals(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value in changed \
                and id(node) not in tile_literals:
            found.append(f"{node.value} (line {node.lineno}, the published {changed[node.value]})")
    return list(dict.fromkeys(found))


def _tiles_by_use(tree: ast.Module) -> tuple[set[str], set[int]]:
    """Tiles told by what the code does with them, whatever their names (``BM``, ``TN``, ``R``):
    the ``tl.constexpr`` parameters of a ``@triton.jit`` function that multiply a program id
    (``pid_m * BM``, ``tl.program_id(0) * BM``) or step a loop (``range(0, K, BK)``), and the
    numbers a size is divided by (``triton.cdiv(N, 16)``, ``n // 16``): a keyword argument that
    gives one of those numbers is a tile too."""
    names: set[str] = set()
    values: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
                  if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)}
        if not params:
            continue
        pids = {t.id for node in ast.walk(fn) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and dotted_name(node.value.func).endswith("program_id") for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                sides = [node.left, node.right]
                if any((isinstance(x, ast.Name) and x.id in pids) or
                       (isinstance(x, ast.Call) and dotted_name(x.func).endswith("program_id")) for x in sides):
                    names |= {x.id for x in sides if isinstance(x, ast.Name) and x.id in params}
            elif isinstance(node, ast.Call) and dotted_name(node.func) in ("range", "tl.range", "triton.language.range") \
                    and len(node.args) == 3 and isinstance(node.args[2], ast.Name) and node.args[2].id in params:
                names.add(node.args[2].id)
    for node in ast.walk(tree):
        divisor = None
        if isinstance(node, ast.Call) and dotted_name(node.func).rsplit(".", 1)[-1] == "cdiv" and len(node.args) == 2:
            divisor = node.args[1]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            divisor = node.right
        if isinstance(divisor, ast.Constant) and type(divisor.value) is int:
            values.add(divisor.value)
    return names, values


def _harness_literals(tree: ast.Module) -> set[int]:
    """The literal nodes of the assignments only the input functions read
    (``formats.harness_statements``): a solution's copy of the problem's size constants
    (``batch_size = 16`` beside its kernels) that the verifier never runs."""
    return {id(n) for stmt in formats.harness_statements(tree)
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) for n in ast.walk(stmt.value)}


def error_message(verdict: Verdict) -> str:
    """What a failing verdict's error says: its reason's first line without the source lines it
    quotes, and the last line of its error text (the exception, ``AssertionError: ...``)."""
    reason = _QUOTED.sub("", (verdict.reason or "").strip().splitlines()[0] if verdict.reason else "")
    lines = [ln.strip() for ln in (verdict.error_text or "").strip().splitlines() if ln.strip()]
    last = lines[-1] if lines and re.match(r"^[\w.]*(Error|Exception)\b", lines[-1]) else ""
    return f"{reason}\n{last}"


def shape_dependence(verdict: Verdict, hardcoded: list[str]) -> str:
    """Why a failing verdict at a chosen size may depend on the shape, in words, or "": the
    error's own words (``error_message``; never the code it quotes) where they refuse a shape,
    or name a memory fault beside ``hardcoded`` evidence, or published sizes the candidate
    writes as numbers."""
    message = error_message(verdict)
    words = _SHAPE_WORDS.search(message) or (_FAULT_WORDS.search(message) if hardcoded else None)
    if verdict.kind in REFUSED_SIZE and words:
        return f"it {_refusal(verdict.kind)} there ({words.group(0)!r} in the error)"
    if hardcoded:
        return f"it writes published sizes as numbers: {', '.join(hardcoded[:3])}"
    return ""


def _refusal(kind: VerdictKind) -> str:
    return {VerdictKind.COMPILE_ERROR: "does not compile", VerdictKind.RUNTIME_ERROR: "raises",
            VerdictKind.CRASH: "crashes"}.get(kind, "fails")


def interpreter_seconds(problem: Any, calls: int) -> float | None:
    """A floor on the seconds Triton's interpreter needs for ``calls`` forward calls at the
    published size (its largest input through an elementwise kernel at
    ``INTERPRETER_ELEMENTS_PER_S``; a kernel doing more per element takes longer), or ``None``
    when the published sizes cannot be read statically."""
    elements = variant_input_elements(problem, problem.variant(PUBLISHED))
    if elements is None:
        return None
    return calls * elements / INTERPRETER_ELEMENTS_PER_S


#: The floating-point dtypes a problem may be posed at (``--dtype``), with the short names and
#: torch's aliases kernels and harnesses use for them.
DTYPES = {"float32": "float32", "fp32": "float32", "float": "float32", "float16": "float16", "fp16": "float16",
          "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "float64": "float64", "fp64": "float64",
          "double": "float64"}
#: Lower-precision floating dtypes a kernel may demand, by the names code and messages use.
_LOW_DTYPES = {name: dtype for name, dtype in DTYPES.items() if dtype in ("bfloat16", "float16")}
_DTYPE_WORD = re.compile(rf"\b(?:torch\.)?({'|'.join(_LOW_DTYPES)})\b", re.IGNORECASE)


def refused_dtype(verdict: Verdict, given: str | None = None) -> str | None:
    """The lower-precision dtype (``bfloat16``, ``float16``) a candidate that raised on the
    problem's inputs demands, or ``None``: a ``runtime_error`` whose error names such a dtype
    besides ``given`` (the dtype the problem was posed at, which a message names as what it got),
    in its message or in the quoted line that raised when that line tests a ``dtype``. A kernel
    that names both (``Supported dtypes: float16 and bfloat16``) is posed at ``bfloat16``: its
    exponent range is float32's, so a problem's float32 values stay finite there, where float16
    overflows past 65504 (KernelAgent's harness casts to bfloat16 for the same reason)."""
    if verdict.kind is not VerdictKind.RUNTIME_ERROR:
        return None
    message = error_message(verdict)
    quoted = " ".join(_QUOTED.findall(verdict.reason or ""))
    named = {_LOW_DTYPES[m.lower()] for m in _DTYPE_WORD.findall(message)} - {given}
    if not named and "dtype" in quoted:
        named = {_LOW_DTYPES[m.lower()] for m in _DTYPE_WORD.findall(quoted)} - {given}
    if named == {"bfloat16", "float16"}:
        return "bfloat16"
    return named.pop() if len(named) == 1 else None


def dtype_refusal_finding(dtype: str, failed: Verdict) -> Finding:
    """The ``dtype_refusal`` finding: the candidate refuses the problem's dtype, naming ``dtype``;
    the option that poses the problem at it."""
    first = clipped((failed.reason or failed.kind.value).strip().splitlines()[0])
    return Finding("dtype_refusal", (
        f"it refuses the problem's inputs at the problem's dtype and names {dtype}: {first}. A kernel written "
        f"for a harness that casts the problem to {dtype} (KernelAgent's test harness, KernelBench's evaluation "
        f"at another `precision`) does this; `--dtype {dtype}` poses the problem at {dtype} (its model and "
        f"floating-point inputs cast, the truth still float64) and `--dtype kernel` does so whenever a "
        "candidate refuses the problem's dtype"), "error")


def dtype_specialised_finding(dtype: str, failed: Verdict) -> Finding:
    """The ``dtype_specialised`` finding of a verification posed at the dtype the kernels demand
    (``--dtype kernel``): the candidate, or the baseline (a published kernel), refuses the
    problem's own dtype."""
    first = clipped((failed.reason or failed.kind.value).strip().splitlines()[0])
    return Finding("dtype_specialised", (
        f"checked with the problem posed at {dtype}, the dtype the kernels demand (`--dtype kernel`): at the "
        f"problem's own dtype: {first}. The verdict holds for the problem at {dtype} only"), "warning")


#: How a failed verdict's kind reads after "it" in a sentence.
_FAILS_AS = {"wrong_answer": "gives a wrong answer", "runtime_error": "raises an error", "crash": "crashes",
             "timeout": "does not finish", "compile_error": "does not compile", "oom": "runs out of memory"}


def clipped(text: str, limit: int = 300) -> str:
    """``text`` cut to at most ``limit`` characters at the last ``;`` or ``,`` outside brackets,
    or after the last closed bracket (a cut inside "(first at [0, " reads as a garbled
    sentence), with "..." where it was cut."""
    if len(text) <= limit:
        return text
    depth, cut = 0, 0
    for i, ch in enumerate(text[:limit]):
        depth += ch in "([{"
        depth -= ch in ")]}" and depth > 0
        if depth == 0 and ch in ";,":
            cut = i
        elif depth == 0 and ch in ")]}":
            cut = i + 1  # after a closed bracket
    return (text[:cut] if cut else text[:limit]).rstrip() + " ..."


def _fails(failed: Verdict) -> str:
    """"gives a wrong answer on variant ... (seed 0 ...)": the verdict's first line after the
    verb of its kind, without repeating the kind's own words."""
    first = (failed.reason or failed.kind.value).strip().splitlines()[0]
    words = failed.kind.value.replace("_", " ")
    rest = first[len(words):].lstrip(" :") if first.lower().startswith(words) else first
    verb = _FAILS_AS.get(failed.kind.value, f"ends as {words}")
    return f"{verb} {clipped(rest)}" if rest.startswith(("on ", "at ", "in ")) else f"{verb}: {clipped(rest)}"


def shape_specialised_finding(variant: Any, failed: Verdict, why: str) -> Finding:
    """The ``shape_specialised`` finding of a candidate right at the published size: the chosen
    size it fails at (with its sizes), how, and why that depends on the shape."""
    sizes = describe_overrides(getattr(variant, "overrides", {}) or {})
    return Finding("shape_specialised", (
        f"right at the published size, which is the problem's contract, but written for it: at "
        f"{getattr(variant, 'name', variant)}{f' ({sizes})' if sizes else ''}, a size the verifier chose, it "
        f"{_fails(failed)}. {why[0].upper() + why[1:]}. It is right only at the "
        "shape it was written for; a shape-generic kernel would pass there too"), "warning")


def not_checked_reason(failed: Verdict, variant: Any, why: str, seconds: float | None, calls: int) -> str:
    """The reason of a verdict left ``inconclusive`` because the published size was not checked
    here (the interpreter, a size over ``PUBLISHED_ON_CPU_SECONDS``)."""
    first = clipped((failed.reason or failed.kind.value).strip().splitlines()[0])
    est = (f"about {seconds / 60:.0f} min or more for its {plural(calls, 'call')}" if seconds and seconds >= 120
           else f"about {seconds:.0f} s or more" if seconds else "an unknown time")
    return (f"inconclusive: at {getattr(variant, 'name', variant)}, a size the verifier chose, the candidate "
            f"{failed.kind.value.replace('_', ' ')}s ({first}), and {why}; the problem's contract is its published "
            f"size, which was not checked: Triton's interpreter would need {est} there. Check it with "
            "`--variant module` (here, slowly) or on a GPU")
