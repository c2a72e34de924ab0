"""dtype_fix codemod: low-precision ``tl.dot`` operands with an fp32 accumulator; no float64.

What it rewrites, inside ``@triton.jit`` kernels only:

* ``acc += tl.dot(a.to(tl.float32), b.to(tl.float32))`` (and ``acc = acc + tl.dot(...)``)
  becomes ``acc = tl.dot(a, b.to(a.dtype), acc)``: the fp16/bf16 tiles go to the matrix
  engine as they were loaded and the sum is kept in the fp32 accumulator passed as ``tl.dot``'s
  third argument. ``b.to(a.dtype)`` is a no-op when both tiles have the same dtype and keeps a
  mixed-dtype pair compiling; it is written only when ``a`` is a plain name.
* ``acc += tl.dot(a, b)`` (operands already low precision) becomes ``acc = tl.dot(a, b, acc)``.
* other ``tl.dot(x.to(tl.float32), y.to(tl.float32))`` lose both casts (``tl.dot`` returns
  fp32 for fp16/bf16 inputs by default, ``out_dtype=tl.float32``).
* ``tl.float64`` becomes ``tl.float32``.

Why: XMX/DPAS on Intel Xe and tensor cores on NVIDIA take fp16/bf16/int8 (Xe2 adds tf32)
operands; an fp32 ``tl.dot`` runs far slower (FACTS.md measured 69 against 558 TFLOP/s on a
4096³ fp16 GEMM on an H200; ``xe-hardware-notes.md`` "DPAS / XMX"). fp64 runs at 1/16 of fp32
on Arc ("Math" in the same notes). Host code is never changed, so the module's output dtype
stays what it was; host-side float64 is only reported.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from xeforge_core.codemods.common import (
    CodemodResult,
    NameReads,
    dotted_name,
    is_kernel,
    not_applicable,
    parse_module,
    still_parses,
)
from xeforge_core.codemods.registry import CodemodSettings, register

NAME = "dtype_fix"
_DOT = {"tl.dot", "triton.language.dot"}
_F32 = {"tl.float32", "triton.language.float32"}
_F64 = {"tl.float64", "triton.language.float64"}


def _strip_upcast(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` for ``x.to(tl.float32)`` / ``x.to(dtype=tl.float32)``; ``x.T`` for
    ``x.to(tl.float32).T``; ``tl.trans(x)`` for ``tl.trans(x.to(tl.float32))``; else ``None``."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "T":
        inner = _strip_upcast(expr.value)
        return None if inner is None else expr.with_changes(value=inner)
    if (isinstance(expr, cst.Call) and dotted_name(expr.func) in {"tl.trans", "triton.language.trans"}
            and expr.args):
        inner = _strip_upcast(expr.args[0].value)
        if inner is None:
            return None
        return expr.with_changes(args=[expr.args[0].with_changes(value=inner), *expr.args[1:]])
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "to" and len(expr.args) == 1):
        return None
    arg = expr.args[0]
    if arg.keyword is not None and arg.keyword.value != "dtype":
        return None
    if dotted_name(arg.value) not in _F32:
        return None
    inner = expr.func.value
    return inner.with_changes(lpar=[], rpar=[]) if isinstance(inner, cst.Name) else inner


def _is_fp32_tile(expr: cst.BaseExpression) -> bool:
    """``tl.zeros(shape, dtype=tl.float32)`` / ``tl.full(shape, v, tl.float32)`` and the like."""
    if not (isinstance(expr, cst.Call) and dotted_name(expr.func) in {"tl.zeros", "tl.full",
                                                                      "triton.language.zeros",
                                                                      "triton.language.full"}):
        return False
    return any(dotted_name(a.value) in _F32 for a in expr.args
               if a.keyword is None or a.keyword.value == "dtype")


def _is_dot(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and dotted_name(expr.func) in _DOT


def _positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def _has_acc(call: cst.Call) -> bool:
    return len(_positional(call)) >= 3 or any(a.keyword and a.keyword.value == "acc" for a in call.args)


class _Fix(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.kernel_depth = 0
        self.kernel_names: list[str] = []
        self.notes: list[str] = []
        self.skipped: list[str] = []
        self.host_f64: list[int] = []
        self.changes = 0
        self.dots = 0
        self._pending: dict[int, tuple[int, str]] = {}
        self._strip_assigns: set[int] = set()
        self._fp32_accs: set[str] = set()
        self._guard_dots: dict[int, tuple[str, str]] = {}
        self._notes_at: list[tuple[int, str]] = []

    def all_notes(self) -> list[str]:
        """What was changed, in line order."""
        found = sorted(self._notes_at + list(self._pending.values()))
        return [f"line {n}: {text}" for n, text in found] + self.notes

    def _line(self, node: cst.CSTNode) -> int:
        try:
            return self.get_metadata(PositionProvider, node).start.line
        except KeyError:
            return 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if is_kernel(node):
            self.kernel_depth += 1
            self.kernel_names.append(node.name.value)
            self._fp32_accs = set()
            self._plan_loaded_upcasts(node)
        return True

    def _plan_loaded_upcasts(self, fn: cst.FunctionDef) -> None:
        """Find ``a = <load>.to(tl.float32)`` / ``b = ....to(tl.float32)`` whose only use is as
        the two operands of one ``tl.dot(a, b, ...)``: those casts can go too."""
        assigns: dict[str, list[cst.Assign]] = {}
        dots: list[cst.Call] = []
        fp32_accs = self._fp32_accs

        class _Scan(NameReads):
            def visit_Assign(self, node: cst.Assign) -> bool:
                for t in node.targets:
                    if isinstance(t.target, cst.Name):
                        assigns.setdefault(t.target.value, []).append(node)
                        if _is_fp32_tile(node.value):
                            fp32_accs.add(t.target.value)
                node.value.visit(self)
                return False

            def visit_Call(self, node: cst.Call) -> None:
                if _is_dot(node):
                    dots.append(node)

        scan = _Scan()
        fn.body.visit(scan)
        reads = scan.reads
        for dot in dots:
            pos = _positional(dot)
            if len(pos) < 2 or not all(isinstance(p.value, cst.Name) for p in pos[:2]):
                continue
            names = [p.value.value for p in pos[:2]]  # type: ignore[attr-defined]
            if names[0] == names[1]:
                continue
            ok = all(len(assigns.get(n, [])) == 1 and reads.get(n, 0) == 1
                     and _strip_upcast(assigns[n][0].value) is not None for n in names)
            if ok:
                for n in names:
                    self._strip_assigns.add(id(assigns[n][0]))
                self._guard_dots[id(dot)] = (names[0], names[1])

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        if is_kernel(original):
            self.kernel_depth -= 1
        return updated

    # float64 ---------------------------------------------------------------------------
    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        name = dotted_name(original)
        if self.kernel_depth and name in _F64:
            self.changes += 1
            self.notes.append(f"line {self._line(original)}: {name} -> tl.float32 (fp64 runs at a small "
                              "fraction of the fp32 rate on Xe GPUs)")
            return updated.with_changes(attr=cst.Name("float32"))
        if not self.kernel_depth and name in {"torch.float64", "torch.double"}:
            self.host_f64.append(self._line(original))
        return updated

    # tl.dot ------------------------------------------------------------------------------
    def _low_precision_args(self, call: cst.Call, line: int) -> tuple[list[cst.Arg], bool]:
        """The dot's positional operands with both fp32 upcasts removed (when both are there)."""
        pos = _positional(call)
        if len(pos) < 2:
            return list(call.args), False
        a, b = _strip_upcast(pos[0].value), _strip_upcast(pos[1].value)
        if a is None or b is None:
            if (a is None) != (b is None):
                self.skipped.append(f"line {line}: tl.dot upcasts only one operand to fp32; left as is")
            return list(call.args), False
        if isinstance(a, cst.Name):
            b = cst.Call(func=cst.Attribute(value=b, attr=cst.Name("to")),
                         args=[cst.Arg(cst.Attribute(value=a, attr=cst.Name("dtype")))])
        new_args = list(call.args)
        i_a, i_b = call.args.index(pos[0]), call.args.index(pos[1])
        new_args[i_a] = pos[0].with_changes(value=a)
        new_args[i_b] = pos[1].with_changes(value=b)
        return new_args, True

    def _acc_ok(self, name: str, node: cst.CSTNode) -> bool:
        """Only an accumulator created as an fp32 tile in this kernel goes into tl.dot's acc
        argument (tl.dot's result dtype must match it)."""
        if name in self._fp32_accs:
            return True
        self.skipped.append(f"line {self._line(node)}: `{name}` is not created as an fp32 tile in this "
                            "kernel, so the accumulation stays outside tl.dot")
        return False

    def _dot_with_acc(self, dot: cst.Call, acc: cst.BaseExpression, line: int) -> cst.Call:
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in dot.args]
        pos_count = sum(1 for a in args if a.keyword is None and not a.star)
        args.insert(pos_count, cst.Arg(acc.deep_clone()))
        self.changes += 1
        if self._pending.pop(id(dot), None) is not None:
            self._notes_at.append((line, "tl.dot keeps its low-precision operands (the .to(tl.float32) "
                                         "upcasts are gone) and accumulates in fp32 through its acc argument"))
        else:
            self._notes_at.append((line, "the accumulation moved into tl.dot's acc argument "
                                         "(one fused multiply-accumulate instead of a dot plus an add)"))
        return dot.with_changes(args=args)

    def leave_AugAssign(self, original: cst.AugAssign, updated: cst.AugAssign):
        if not self.kernel_depth or not isinstance(updated.operator, cst.AddAssign):
            return updated
        if not (_is_dot(updated.value) and not _has_acc(updated.value)
                and isinstance(updated.target, cst.Name)):
            return updated
        if not self._acc_ok(updated.target.value, original):
            return updated
        new_dot = self._dot_with_acc(updated.value, updated.target, self._line(original))
        return cst.Assign(targets=[cst.AssignTarget(target=updated.target)], value=new_dot,
                          semicolon=updated.semicolon)

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        if id(original) in self._strip_assigns:
            stripped = _strip_upcast(updated.value)
            if stripped is not None:
                self.changes += 1
                self._notes_at.append((self._line(original), "the operand keeps its loaded (low-precision) "
                                                             "dtype: its only use is tl.dot, which accumulates in fp32"))
                return updated.with_changes(value=stripped)
        if not self.kernel_depth or len(updated.targets) != 1:
            return updated
        target = updated.targets[0].target
        value = updated.value
        if not (isinstance(target, cst.Name) and isinstance(value, cst.BinaryOperation)
                and isinstance(value.operator, cst.Add)):
            return updated
        for acc_side, dot_side in ((value.left, value.right), (value.right, value.left)):
            if (isinstance(acc_side, cst.Name) and acc_side.value == target.value and _is_dot(dot_side)
                    and not _has_acc(dot_side) and not dot_side.lpar):
                if not self._acc_ok(target.value, original):
                    return updated
                new_dot = self._dot_with_acc(dot_side, target, self._line(original))
                return updated.with_changes(value=new_dot)
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if not self.kernel_depth or not _is_dot(updated):
            return updated
        self.dots += 1
        line = self._line(original)
        if id(original) in self._guard_dots:
            a, _ = self._guard_dots[id(original)]
            pos = _positional(updated)
            i_b = updated.args.index(pos[1])
            guarded = cst.Call(func=cst.Attribute(value=pos[1].value, attr=cst.Name("to")),
                               args=[cst.Arg(cst.Attribute(value=cst.Name(a), attr=cst.Name("dtype")))])
            args = list(updated.args)
            args[i_b] = pos[1].with_changes(value=guarded)
            self.changes += 1
            return updated.with_changes(args=args)
        args, stripped = self._low_precision_args(updated, line)
        if not stripped:
            return updated
        self.changes += 1
        new = updated.with_changes(args=args)
        self._pending[id(new)] = (line, "tl.dot keeps its low-precision operands (the .to(tl.float32) "
                                        "upcasts are gone); its result is still fp32")
        return new


def fix_dtypes(source: str) -> CodemodResult:
    """Apply the dtype_fix rewrites (module docstring) to ``source``.

    Returns a :class:`CodemodResult`; not applicable (with the reason) when the module does not
    parse, has no Triton kernel, or has nothing to fix. Never raises on bad input.
    """
    parsed = parse_module(NAME, source)
    if isinstance(parsed, CodemodResult):
        return parsed
    fixer = _Fix()
    new = cst.MetadataWrapper(parsed).visit(fixer)
    if not fixer.kernel_names:
        return not_applicable(NAME, source, "the module has no @triton.jit kernel to fix")
    host_note = []
    if fixer.host_f64:
        lines = ", ".join(str(n) for n in sorted(set(fixer.host_f64)))
        host_note = [f"host code uses float64 (line {lines}); left as is so the module's output dtype "
                     "does not change"]
    if not fixer.changes:
        if fixer.dots:
            reason = ("every tl.dot already takes unconverted operands with an fp32 accumulator "
                      "argument (or has no fp32 upcast on both operands) and no kernel uses float64")
        else:
            reason = ("the kernels have no tl.dot and use no float64: nothing for this codemod "
                      "(elementwise fp32 upcasts are left to the llm/manual engines)")
        extra = sorted(set(fixer.skipped)) + host_note
        if extra:
            reason += "; " + "; ".join(extra)
        return not_applicable(NAME, source, reason)
    code = new.code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    return CodemodResult(codemod=NAME, source=code, changed=code != source,
                         notes=fixer.all_notes() + sorted(set(fixer.skipped)) + host_note)


@register("dtype_fix", "fp16/bf16 tl.dot operands with an fp32 accumulator, no float64")
def _run(source: str, settings: CodemodSettings) -> CodemodResult:
    return fix_dtypes(source)
