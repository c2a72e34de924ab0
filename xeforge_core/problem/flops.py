"""Safe evaluation of a spec's ``flop`` formula over a variant's ``dims``.

A formula such as ``"2*BATCH*HIDDEN_SIZE*INPUT_SIZE"`` is parsed with :mod:`ast` and evaluated
node by node with the dims as a namespace. Only numbers, dim names, the binary operators
``+ - * / // % **``, unary ``+``/``-`` and parentheses are allowed; calls, attributes,
subscripts, comparisons, lambdas and every other construct are rejected before anything is
evaluated, so a formula can never run code (``__import__('os')`` is an error, not a call).

Names are looked up as whole identifiers, never by replacing text: with ``N=2`` and ``NH=3`` the
formula ``N*NH`` is ``6``. (Xe-Forge's loader substitutes dim values into the formula as text,
in ``dims`` order, which corrupts ``NH`` when ``N`` is substituted first; see the spec-format
notes, section 3.3.)
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Mapping
from typing import Any

from xeforge_core.errors import nearest_name_hint
from xeforge_core.worker.astutil import parse as parse_python

from .model import ProblemError

__all__ = ["evaluate_flop", "formula_names", "as_number"]

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARYOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos}

#: Longest formula accepted (characters); real formulas are a few dozen characters.
MAX_FORMULA_CHARS = 2000
#: Largest exponent accepted for ``**``: flop counts never need more, and a huge exponent
#: (``10**10**10``) would hang the evaluator.
MAX_EXPONENT = 64

_NUMERIC_STRING = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def as_number(value: Any) -> int | float | None:
    """``value`` as an int or float when it is one, or a string YAML 1.1 left unparsed
    (``"1e-5"``, ``"2E3"``); ``None`` otherwise. ``bool`` is not a number here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and _NUMERIC_STRING.match(value.strip()):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            return float(text)
    return None


def _describe(node: ast.AST, formula: str) -> str:
    """The source text of ``node`` (the offending token) for error messages."""
    segment = ast.get_source_segment(formula, node)
    return segment if segment else type(node).__name__


def formula_names(formula: str) -> set[str]:
    """Every name a formula refers to (for cross-checks). Raises ``ProblemError`` when the
    formula is not valid Python expression syntax."""
    try:
        tree = parse_python(formula.strip(), mode="eval")
    except SyntaxError as exc:
        raise ProblemError(f"flop formula {formula!r} is not an arithmetic expression: {exc.msg}") from None
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def evaluate_flop(formula: str | int | float, dims: Mapping[str, Any], *, field: str | None = None,
                  file: str | None = None, line: int | None = None) -> float:
    """Evaluate a flop formula (or pass a number through) with ``dims`` as the namespace.

    Args:
        formula: e.g. ``"4*B*A*S*S*D"``, or a number (``int``/``float``, or a numeric string
            such as ``"1e9"``).
        dims: dim name -> value; values used by the formula must be numbers (int, float, or a
            numeric string like ``"1e-5"``). List-valued dims (``SCALE_SHAPE: [4096]``) are
            rejected when the formula uses them.
        field, file, line: where the formula is (e.g. ``bench-gpu[0].flop``), for errors.

    Returns:
        The floating-point operation count as a ``float`` (a count, not a rate).

    Raises:
        ProblemError: the formula is not arithmetic (names the offending token), uses an
            unknown or non-numeric dim, divides by zero, or its result is not a finite number.
    """

    def fail(message: str) -> ProblemError:
        return ProblemError(message, file=file, line=line, field=field)

    if isinstance(formula, bool):
        raise fail(f"flop must be a formula or a number, got {formula!r}")
    if isinstance(formula, (int, float)):
        value = float(formula)
        if not math.isfinite(value):
            raise fail(f"flop {formula!r} is not a finite number")
        return value
    if not isinstance(formula, str):
        raise fail(f"flop must be a string formula or a number, got {type(formula).__name__}")
    text = formula.strip()
    if not text:
        raise fail("flop formula is empty")
    if len(text) > MAX_FORMULA_CHARS:
        raise fail(f"flop formula is {len(text)} characters long (limit {MAX_FORMULA_CHARS})")
    try:
        tree = parse_python(text, mode="eval")
    except SyntaxError as exc:
        raise fail(f"flop formula {text!r} is not an arithmetic expression ({exc.msg})") from None

    # Validate the whole tree before evaluating anything.
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load)):
            continue
        if isinstance(node, (ast.operator, ast.unaryop)):
            continue  # checked against the allowed operators below, with the expression's text
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            continue
        kind = {ast.Call: "a call", ast.Attribute: "an attribute access", ast.Subscript: "a subscript",
                ast.Constant: "a non-numeric constant"}.get(type(node), f"a {type(node).__name__} node")
        raise fail(f"flop formula {text!r} may only use numbers, dim names and + - * / // % **; "
                   f"found {kind}: {_describe(node, text)!r}")
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise fail(f"flop formula {text!r} uses an operator that is not allowed: "
                       f"{_describe(node, text)!r}")
        if isinstance(node, ast.UnaryOp) and type(node.op) not in _UNARYOPS:
            raise fail(f"flop formula {text!r} uses an operator that is not allowed: "
                       f"{_describe(node, text)!r}")

    def ev(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in dims:
                known = ", ".join(dims) or "none"
                raise fail(f"flop formula {text!r} uses {node.id!r}, which is not a dim of this "
                           f"variant (dims: {known})" + nearest_name_hint(node.id, list(dims)))
            raw = dims[node.id]
            if isinstance(raw, (list, tuple)):
                raise fail(f"flop formula {text!r} uses {node.id!r}, whose value {raw!r} is a list; "
                           f"a flop formula needs a number")
            number = as_number(raw)
            if number is None:
                raise fail(f"flop formula {text!r} uses {node.id!r}, whose value {raw!r} is not a number")
            return number
        if isinstance(node, ast.UnaryOp):
            return _UNARYOPS[type(node.op)](ev(node.operand))
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise fail(f"flop formula {text!r}: exponent {right!r} in {_describe(node, text)!r} "
                           f"is larger than {MAX_EXPONENT}")
            try:
                return _BINOPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise fail(f"flop formula {text!r} divides by zero in {_describe(node, text)!r}") from None
            except OverflowError:
                raise fail(f"flop formula {text!r} overflows in {_describe(node, text)!r}") from None
        raise fail(f"flop formula {text!r}: unexpected {_describe(node, text)!r}")  # pragma: no cover

    result = ev(tree)
    if isinstance(result, complex):
        raise fail(f"flop formula {text!r} is not a real number")
    try:
        value = float(result)
    except OverflowError:
        raise fail(f"flop formula {text!r} is too large for a float") from None
    if not math.isfinite(value):
        raise fail(f"flop formula {text!r} is not a finite number ({value})")
    return value
