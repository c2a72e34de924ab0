"""What each variant of a problem costs to check, known when the problem is loaded, and a smaller
``ci`` when the correctness variant is too big for the run device.

Real Xe-Forge specs often give ``ci`` at benchmark size (a 1024x8192x8192 GEMM): on a GPU that
is a few milliseconds, in Triton's CPU interpreter it is a quarter of an hour per forward call,
and the verifier refuses it (``verify.interpreter_too_slow``). Rather than finding this at the
first Propose, the workbench shows, when the problem is loaded, each variant's input elements,
FLOP and estimated interpreter time per forward call (FLOP / ``verify.INTERPRETER_FLOP_PER_S``,
the measured throughput), marks a correctness variant that is slow or refused on the
interpreter, and offers a ``ci`` derived from it: the size dims divided by the smallest power of
two that brings its largest input to at most ``scaling.REDUCED_MAX_INPUT_ELEMENTS`` elements and
one call to at most :data:`DERIVED_CALL_S` seconds (the spec's own reduction rule,
``scaling.reduced_spec_variant``), written back into the spec text line by line, so comments and
layout stay. Nothing here runs a kernel.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xeforge_core.problem import ProblemError
from xeforge_core.problem.scaling import (
    REDUCED_MAX_INPUT_ELEMENTS,
    reduced_spec_variant,
    variant_input_elements,
)
from xeforge_core.problem.spec import parse_spec
from xeforge_core.verify import (
    INTERPRETER_FLOP_PER_S,
    INTERPRETER_MAX_ELEMENTS_PER_S,
    VerifyOptions,
    interpreter_too_slow,
)

if TYPE_CHECKING:
    from xeforge_core.problem import Problem, Variant

#: One forward call over this many seconds in the interpreter makes a verification slow (it runs
#: each correctness variant for several seeds and input distributions, baseline and candidate).
SLOW_CALL_S = 10.0

#: The verifier refuses a correctness variant one of whose calls would exceed this on the
#: interpreter (``verify._verify_uncached``: ``max(timeout, 300)`` with the default timeout).
REFUSED_CALL_S = max(VerifyOptions().timeout_s, 300.0)

#: Forward calls a default check makes at a correctness variant: the first call, one a seed and one
#: more an input distribution of the first seed (``verify.interpreter_too_slow``'s ``calls``).
CHECK_CALLS = 1 + len(VerifyOptions().seed_list()) + len(VerifyOptions().distributions)
#: Largest interpreter time of one call of a derived ``ci``, seconds.
DERIVED_CALL_S = 2.0


@dataclass(frozen=True)
class VariantCost:
    """The cost of one variant: ``elements`` of all its inputs, ``largest_input`` (elements of
    the largest one), ``flop`` per forward call (``None``: the spec gives no flop), and
    ``interpreter_s``: the estimated seconds of one forward call in Triton's CPU interpreter, the
    larger of its FLOP at ``verify.INTERPRETER_FLOP_PER_S`` and its input elements at
    ``verify.INTERPRETER_MAX_ELEMENTS_PER_S`` (``None`` with neither). ``correctness``: the
    verifier checks correctness at it; ``refused``: the verifier refuses it on the interpreter
    (``verify.interpreter_too_slow`` with the default options' calls)."""

    variant: str
    correctness: bool
    elements: int | None
    largest_input: int | None
    flop: float | None
    interpreter_s: float | None
    refused: bool = False

    @property
    def status(self) -> str:
        """On the interpreter: ``refused`` (the verifier refuses it), ``slow``, ``ok`` or
        ``unknown`` (no flop and no shapes)."""
        if self.refused:
            return "refused"
        if self.interpreter_s is None:
            return "unknown"
        return "slow" if self.interpreter_s > SLOW_CALL_S else "ok"


def _elements(problem: Problem, variant: Variant) -> tuple[int | None, int | None]:
    if variant.shapes:
        sizes = [math.prod(s) for s in variant.shapes.values()]
        return sum(sizes), max(sizes, default=0)
    largest = variant_input_elements(problem, variant)
    return None, largest


def variant_cost(problem: Problem, variant: Variant, *, correctness: bool = False) -> VariantCost:
    """The :class:`VariantCost` of ``variant`` of ``problem``."""
    total, largest = _elements(problem, variant)
    flop = float(variant.flop) if variant.flop else None
    times = [t for t in (flop / INTERPRETER_FLOP_PER_S if flop else None,
                         total / INTERPRETER_MAX_ELEMENTS_PER_S if total else None) if t is not None]
    return VariantCost(variant=variant.name, correctness=correctness, elements=total, largest_input=largest,
                       flop=flop, interpreter_s=max(times) if times else None,
                       refused=bool(interpreter_too_slow([variant], REFUSED_CALL_S, calls=CHECK_CALLS)))


def variant_costs(problem: Problem) -> list[VariantCost]:
    """The cost of every variant of the spec, in file order (the correctness variants marked),
    plus a correctness variant the verifier derived (``<default>-small``, ``module-small``)."""
    checked = problem.correctness_variants()
    names = {v.name for v in checked}
    variants = list(problem.spec.variants.values()) if problem.spec is not None else []
    variants += [v for v in checked if v.name not in {x.name for x in variants}]
    return [variant_cost(problem, v, correctness=v.name in names) for v in variants]


@dataclass(frozen=True)
class DerivedCi:
    """A smaller correctness variant offered for ``original`` (too slow on the interpreter):
    ``dims`` to write into it (a list for a list dim that repeats a size), its ``cost``, ``spec_text`` (the spec with those dims written in,
    comments kept) and a one-line ``summary`` (``BATCH 1024->128, ...``)."""

    original: str
    dims: dict[str, int | list[int]]
    cost: VariantCost
    spec_text: str
    summary: str


def _entry_path(variant: str) -> str:
    """``ci`` -> ``ci[0]``; ``ci[1]`` stays."""
    return variant if variant.endswith("]") else f"{variant}[0]"


def rewrite_dims(spec_text: str, lines: dict[str, int], variant: str, dims: dict[str, int | list[int]]) -> str:
    """``spec_text`` with the ``dims`` of ``variant`` set to the given values (an int, or a
    list of ints for a list dim), each on the line the spec parser recorded for it (block or flow
    style; comments and layout kept). Raises ``ValueError`` when a dim's line is unknown or holds
    no value of that kind to replace."""
    text = spec_text.splitlines(keepends=True)
    entry = _entry_path(variant)
    for name, value in dims.items():
        line = lines.get(f"{entry}.dims.{name}")
        if not line:
            raise ValueError(f"no line recorded for {entry}.dims.{name}")
        old = r"\[[^\]]*\]" if isinstance(value, list) else r"[-+]?\d[\d_]*"
        shown = "[" + ", ".join(map(str, value)) + "]" if isinstance(value, list) else str(value)
        pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(\s*:\s*){old}")
        new, count = pattern.subn(lambda m, n=name, v=shown: f"{n}{m.group(1)}{v}", text[line - 1], count=1)
        if not count:
            raise ValueError(f"line {line} holds no value for {name}")
        text[line - 1] = new
    return "".join(text)


def derived_ci(problem: Problem, spec_text: str | None) -> DerivedCi | None:
    """A smaller ``ci`` for the first correctness variant of ``problem``'s spec that is slow on
    the interpreter (:attr:`VariantCost.status` ``slow`` or ``refused``), or ``None`` (no spec
    text, nothing slow, or no size dims to reduce). The reduction is the spec's own
    (``scaling.reduced_spec_variant`` on that variant), tightened until one call fits
    :data:`DERIVED_CALL_S`."""
    spec = problem.spec
    if spec is None or not spec_text:
        return None
    slow = next((c for c in variant_costs(problem) if c.correctness and c.status in ("slow", "refused")
                 and c.variant in spec.variants), None)
    if slow is None:
        return None
    base = spec.variants[slow.variant]
    # the reduction the verifier applies to a spec without ci, applied to this variant alone
    alone = dataclasses.replace(problem, spec=dataclasses.replace(spec, variants={"x": base}, default_variant="x"),
                                module_variants={})
    limit = REDUCED_MAX_INPUT_ELEMENTS
    small = None
    for _ in range(16):
        small = reduced_spec_variant(alone, limit)
        if small is None:
            return None
        if not small.flop or small.flop / INTERPRETER_FLOP_PER_S <= DERIVED_CALL_S:
            break
        limit //= 4
    assert small is not None
    dims: dict[str, int | list[int]] = {d: int(v) for d, v in small.dims.items() if v != base.dims.get(d)}
    if not dims:
        return None
    # a list dim that repeats a size (SCALE_SHAPE: [4096] beside OUT_FEAT: 4096) shrinks with it
    scaled = {base.dims[d]: v for d, v in dims.items()}
    for name, value in base.dims.items():
        if isinstance(value, list) and any(item in scaled for item in value):
            dims[name] = [scaled.get(item, item) for item in value]
    try:
        text = rewrite_dims(spec_text, spec.lines, base.name, dims)
        reparsed = parse_spec(text, spec.path, label="spec")
    except (ValueError, ProblemError):
        return None
    cost = variant_cost(problem, reparsed.variants[base.name], correctness=True)
    summary = ", ".join(f"{d} {base.dims[d]}->{v}" for d, v in dims.items())
    return DerivedCi(original=base.name, dims=dims, cost=cost, spec_text=text, summary=summary)


__all__ = ["DERIVED_CALL_S", "REFUSED_CALL_S", "SLOW_CALL_S", "DerivedCi", "VariantCost", "derived_ci",
           "rewrite_dims", "variant_cost", "variant_costs"]
