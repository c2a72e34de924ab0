"""Shared pieces of the libcst codemods used by the rules engine.

Every codemod takes Python source text and returns a :class:`CodemodResult`: the rewritten
source (or the input unchanged), what was done (``notes``, one sentence each), and, when it
did not apply, ``reason`` saying why in one sentence a kernel engineer can act on.

Codemods never execute the code they rewrite: they only parse it (libcst keeps comments and
formatting, so the diff a user reviews shows only the change itself).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst

from xeforge_core.problem.module import triton_decorator_kind


@dataclass
class CodemodResult:
    """Outcome of one codemod on one module.

    ``source`` is the rewritten module (equal to the input when nothing changed); ``changed``
    says whether it differs; ``notes`` lists what was changed (and what was deliberately left
    alone); ``reason`` is set when the codemod did not apply.
    """

    codemod: str
    source: str
    changed: bool
    notes: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def applicable(self) -> bool:
        return self.changed and not self.reason

    def rationale(self) -> str:
        """The notes as a bullet list (what a reviewer reads next to the diff)."""
        if not self.changed:
            return self.reason
        return "\n".join(f"- {n}" for n in self.notes)


def not_applicable(codemod: str, source: str, reason: str, notes: Iterable[str] = ()) -> CodemodResult:
    """A result that leaves ``source`` unchanged and says why."""
    return CodemodResult(codemod=codemod, source=source, changed=False, notes=list(notes), reason=reason)


def parse_module(codemod: str, source: str) -> cst.Module | CodemodResult:
    """Parse ``source``; on a syntax error return a not-applicable result naming the line."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return not_applicable(
            codemod, source,
            f"the module does not parse (line {exc.raw_line}, column {exc.raw_column}): {exc.message}",
        )


def dotted_name(node: cst.BaseExpression | None) -> str:
    """``a.b.c`` for a Name/Attribute chain, else an empty string."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


class NameReads(cst.CSTVisitor):
    """Counts how often each name is read: a ``Name`` outside assignment targets, where the
    keyword of an argument (``f(x=1)``) and the attribute of ``a.b`` are not reads (``a`` is).

    ``reads`` maps name -> count; subclasses that count per scope override :meth:`read`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {}
        self._in_target = 0

    def read(self, name: str) -> None:
        self.reads[name] = self.reads.get(name, 0) + 1

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._in_target += 1

    def leave_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._in_target -= 1

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if not self._in_target:
            self.read(node.value)


def is_jit_decorator(dec: cst.Decorator) -> bool:
    """True for ``@triton.jit``, ``@jit``, ``@triton.jit(...)``."""
    expr = dec.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    return triton_decorator_kind(dotted_name(expr)) == "jit"


def is_autotune_decorator(dec: cst.Decorator) -> bool:
    """True for ``@triton.autotune(...)`` / ``@autotune(...)``."""
    expr = dec.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    return triton_decorator_kind(dotted_name(expr)) == "autotune"


def is_kernel(fn: cst.FunctionDef) -> bool:
    """A Triton kernel: a function decorated with ``triton.jit``."""
    return any(is_jit_decorator(d) for d in fn.decorators)


def kernel_defs(module: cst.Module) -> list[cst.FunctionDef]:
    """Top-level ``@triton.jit`` functions, in source order."""
    return [s for s in module.body if isinstance(s, cst.FunctionDef) and is_kernel(s)]


def parse_kernels(codemod: str, source: str) -> tuple[cst.Module, dict[str, cst.FunctionDef]] | CodemodResult:
    """Parse ``source`` and find its top-level ``@triton.jit`` kernels (name -> definition, in
    source order); a not-applicable result when it does not parse or has no kernel."""
    parsed = parse_module(codemod, source)
    if isinstance(parsed, CodemodResult):
        return parsed
    kernels = {fn.name.value: fn for fn in kernel_defs(parsed)}
    if not kernels:
        return not_applicable(codemod, source, "the module has no @triton.jit kernel")
    return parsed, kernels


def bind_launch_args(params: list[str], call: cst.Call) -> tuple[dict[str, cst.Arg], dict[str, cst.Arg],
                                                                  list[cst.Arg]]:
    """Match the arguments of a kernel launch to the kernel's parameter names.

    Returns ``(bound, options, unmatched)``: ``bound`` maps parameter -> argument (positional
    ones in order, or by keyword); ``options`` maps the other keywords (``num_warps``,
    ``grf_mode``, ...) -> argument; ``unmatched`` lists, in launch order, ``*args``/``**kwargs``,
    the positional arguments after a ``*args`` (which parameter each fills depends on how many
    values the star unpacks: :func:`star_filled` names the candidates) and positional arguments
    beyond the parameters.
    """
    bound: dict[str, cst.Arg] = {}
    options: dict[str, cst.Arg] = {}
    unmatched: list[cst.Arg] = []
    pos = 0
    starred = False
    for arg in call.args:
        if arg.star:
            unmatched.append(arg)
            starred = True
        elif arg.keyword is None:
            if pos < len(params) and not starred:
                bound[params[pos]] = arg
                pos += 1
            else:
                unmatched.append(arg)
        elif arg.keyword.value in params:
            bound[arg.keyword.value] = arg
        else:
            options[arg.keyword.value] = arg
    return bound, options, unmatched


def star_filled(params: list[str], call: cst.Call) -> set[str]:
    """The parameters a ``*args``/``**kwargs`` argument of the launch ``call`` may fill (empty
    without one): every parameter :func:`bind_launch_args` leaves unbound, since a ``*args``
    fills the parameters after the positional arguments before it, the positional arguments
    after it follow, and a ``**kwargs`` may name any."""
    if not any(a.star for a in call.args):
        return set()
    bound, _, _ = bind_launch_args(params, call)
    return {p for p in params if p not in bound}


def is_constexpr_param(param: cst.Param) -> bool:
    """``NAME: tl.constexpr`` (or ``triton.language.constexpr`` / ``constexpr``)."""
    if param.annotation is None:
        return False
    return dotted_name(param.annotation.annotation).endswith("constexpr")


def int_value(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal (``128``, ``-1``), else ``None``."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if (isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus)
            and isinstance(node.expression, cst.Integer)):
        return -int(node.expression.evaluated_value)
    return None


PROGRAM_ID = {"tl.program_id", "triton.language.program_id"}


def program_id_tiles(fn: cst.FunctionDef, tiles: set[str]) -> dict[int, set[str]]:
    """Launch-grid axis -> the names in ``tiles`` that kernel ``fn`` multiplies that axis's
    program id by: directly (``tl.program_id(0) * BLOCK_M``) or through the name the program id
    is assigned to (``pid_m = tl.program_id(0)`` ... ``pid_m * BLOCK_M``)."""
    def axis_of(node: cst.BaseExpression) -> int | None:
        if isinstance(node, cst.Call) and dotted_name(node.func) in PROGRAM_ID and node.args:
            return int_value(node.args[0].value)
        return None

    pid_names: dict[str, int] = {}
    found: dict[int, set[str]] = {}

    class _Pids(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            axis = axis_of(node.value)
            if axis is not None and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                pid_names[node.targets[0].target.value] = axis

    class _Products(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if not isinstance(node.operator, cst.Multiply):
                return
            for a, b in ((node.left, node.right), (node.right, node.left)):
                axis = axis_of(a)
                if axis is None and isinstance(a, cst.Name):
                    axis = pid_names.get(a.value)
                if axis is not None and isinstance(b, cst.Name) and b.value in tiles:
                    found.setdefault(axis, set()).add(b.value)

    fn.body.visit(_Pids())
    fn.body.visit(_Products())
    return found


def string_value(node: cst.BaseExpression | None) -> str | None:
    """The value of a plain (non-f, non-concatenated) string literal, else ``None``."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def tight_equal() -> cst.AssignEqual:
    """The ``=`` of a keyword argument, without spaces (``num_warps=8``)."""
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """The keyword argument ``name=value`` (no spaces around ``=``)."""
    return cst.Arg(keyword=cst.Name(name), value=value, equal=tight_equal())


def code_of(node: cst.CSTNode) -> str:
    """Source text of one node."""
    return cst.Module(body=[]).code_for_node(node)


def line_of(module: cst.Module, node: cst.CSTNode) -> int | None:
    """1-based line of ``node`` in ``module`` (``None`` if it is not found)."""
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    pos = positions.get(node)
    return pos.start.line if pos else None


def ensure_nonempty_blocks(module: cst.Module) -> cst.Module:
    """Put ``pass`` into any indented block a removal left empty (keeps the module valid)."""

    class _Fill(cst.CSTTransformer):
        def leave_IndentedBlock(self, original: cst.IndentedBlock,
                                updated: cst.IndentedBlock) -> cst.IndentedBlock:
            if not updated.body:
                return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
            return updated

    return module.visit(_Fill())


def still_parses(source: str) -> str | None:
    """``None`` when ``source`` compiles as Python, else the error text."""
    try:
        compile(source, "<codemod>", "exec")
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return None
