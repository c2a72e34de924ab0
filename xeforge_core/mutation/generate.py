"""Plant one fault per class in a kernel module and keep each copy that parses and differs.

The classes (``MUTATION_CLASSES``, in this order) are the faults kernels written by people and
models are known to carry (issue 23 lists them): a mask off by one, a mask dropped, a launch
grid rounded down, a program id ignored or two swapped, two strides swapped, a loop one trip
short, an accumulator or scan in float16, a wrong constant, an epilogue applied twice, a
reduction over the wrong axis, a cross-program add without an atomic, and a masked load
without ``other`` feeding a max or sum.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import libcst as cst

import xeforge_core.mutation.classes as c
from xeforge_core.mutation.facts import ModuleFacts

#: Fault class -> where it can be planted (``classes.sites_*``), in the order mutants are made.
MUTATION_CLASSES: dict[str, Callable[[ModuleFacts], list[c.Site]]] = {
    "mask_off_by_one": c.sites_mask_off_by_one,
    "mask_dropped": c.sites_mask_dropped,
    "floor_grid": c.sites_floor_grid,
    "program_id": c.sites_program_id,
    "strides_swapped": c.sites_strides_swapped,
    "loop_bound_short": c.sites_loop_bound_short,
    "accumulator_fp16": c.sites_accumulator_fp16,
    "wrong_constant": c.sites_wrong_constant,
    "epilogue_twice": c.sites_epilogue_twice,
    "wrong_reduction_axis": c.sites_wrong_reduction_axis,
    "add_without_atomic": c.sites_add_without_atomic,
    "load_without_other": c.sites_load_without_other,
}


@dataclass(frozen=True)
class Mutant:
    """One single-fault copy of a module.

    ``mutation_class``: a key of ``MUTATION_CLASSES``; ``line``: the 1-based line of the edit in
    the original file; ``before``/``after``: the exact text replaced and its replacement;
    ``kernel``: the function holding the edit (a kernel, or host code for the launch grid and
    launch arguments); ``description``: what the fault does; ``source``: the whole mutated module;
    ``index``: which site of the class (0 = the preferred one).
    """

    mutation_class: str
    line: int
    before: str
    after: str
    kernel: str
    description: str
    source: str
    index: int = 0

    @property
    def id(self) -> str:
        """``<class>`` or ``<class>-<index>`` for further sites of a class."""
        return self.mutation_class if self.index == 0 else f"{self.mutation_class}-{self.index}"

    def record(self) -> dict[str, Any]:
        """JSON-able description (the source left out)."""
        data = asdict(self)
        data.pop("source")
        data["id"] = self.id
        return data


class _Apply(cst.CSTTransformer):
    def __init__(self, edits: dict[int, cst.CSTNode | cst.FlattenSentinel]) -> None:
        super().__init__()
        self.edits = edits
        self.applied = 0

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
        new = self.edits.get(id(original))
        if new is None:
            return updated
        self.applied += 1
        return new


def _text(facts: ModuleFacts, node: cst.CSTNode | cst.FlattenSentinel) -> str:
    """The code of ``node`` (statements without the comments and blank lines above them)."""
    nodes = list(node.nodes) if isinstance(node, cst.FlattenSentinel) else [node]
    bare = [n.with_changes(leading_lines=[]) if isinstance(n, cst.SimpleStatementLine) else n for n in nodes]
    return "".join(facts.module.code_for_node(n) for n in bare).rstrip("\n")


def _apply(facts: ModuleFacts, site: c.Site) -> str | None:
    """The module with ``site`` planted, or ``None`` when the rewrite did not take, does not
    parse or changes nothing."""
    t = _Apply(site.edits)
    try:
        out = facts.module.visit(t).code
        ast.parse(out)
    except (SyntaxError, ValueError, cst.CSTValidationError):
        return None
    if t.applied != len(site.edits) or out == facts.source:
        return None
    return out


def generate(source: str, *, classes: list[str] | None = None, per_class: int = 1,
             launched: set[str] | None = None) -> list[Mutant]:
    """Mutants of ``source``: up to ``per_class`` per fault class that applies, each with one
    fault, in the order of ``MUTATION_CLASSES`` (``classes`` restricts which). Faults go only
    into code that can run: not into a branch of ``if FLAG:`` that every launch rules out with a
    literal constexpr, and with ``launched`` (the kernels a call of the module launched) only into
    those kernels, the ``@triton.jit`` helpers they call, and host code that launches them.

    Raises ``ValueError`` for an unknown class name and ``libcst.ParserSyntaxError`` when
    ``source`` does not parse. A module without a ``@triton.jit`` kernel gives no mutants."""
    unknown = [k for k in classes or [] if k not in MUTATION_CLASSES]
    if unknown:
        raise ValueError(f"unknown mutation class(es) {unknown}; known: {', '.join(MUTATION_CLASSES)}")
    facts = ModuleFacts(source, launched)
    if not facts.kernels:
        return []
    out: list[Mutant] = []
    for name, finder in MUTATION_CLASSES.items():
        if classes and name not in classes:
            continue
        made = 0
        for site in finder(facts):
            if facts.is_dead(site.anchor):
                continue
            mutated = _apply(facts, site)
            if mutated is None:
                continue
            out.append(Mutant(mutation_class=name, line=facts.line(site.anchor), before=site.before or _text(facts, site.anchor),
                              after=site.after or _text(facts, site.replacement), kernel=site.kernel,
                              description=site.description, source=mutated, index=made))
            made += 1
            if made >= per_class:
                break
    return out
