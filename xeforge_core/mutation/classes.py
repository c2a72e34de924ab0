"""The fault classes: where each can be planted in a module, in order of preference.

Each ``sites_<class>(facts)`` returns the places the fault applies, most telling first (for
example the mask of a store before the mask of a load: a store past the end corrupts memory
that only a memory checker sees). A ``Site`` is the planted fault: the nodes it replaces and
with what, the node whose line and text are recorded, and one sentence saying what it does.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from xeforge_core.codemods.common import dotted_name, int_value
from xeforge_core.mutation.facts import REDUCTIONS, ModuleFacts, arg, axis_of, names_in, tl_name


@dataclass
class Site:
    """One fault: ``edits`` maps ``id(original node)`` to its replacement (a node, or a
    ``cst.FlattenSentinel`` of statements for an insertion); ``anchor`` is the node whose line and
    text are recorded, ``kernel`` the function holding it, ``description`` what the fault does;
    ``before``/``after`` the recorded edit where it is not the anchor's text and replacement."""

    edits: dict[int, cst.CSTNode | cst.FlattenSentinel]
    anchor: cst.CSTNode
    replacement: cst.CSTNode | cst.FlattenSentinel
    kernel: str
    description: str
    #: the recorded edit, where it is not the anchor's text and its replacement (a swap)
    before: str = ""
    after: str = ""


def _site(facts: ModuleFacts, node: cst.CSTNode, new: cst.CSTNode | cst.FlattenSentinel, what: str) -> Site:
    return Site({id(node): new}, node, new, facts.owner(node), what)


def _without_args(call: cst.Call, drop: list[cst.Arg]) -> cst.Call:
    kept = [a for a in call.args if not any(a is d for d in drop)]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=kept)


def _mem_mask(call: cst.Call) -> cst.Arg | None:
    """The mask of a ``tl.load`` (position 1) or ``tl.store`` (position 2)."""
    return arg(call, "mask", 1 if tl_name(call) == "load" else 2)


# ------------------------------------------------------------------------------------ masks


def sites_mask_off_by_one(facts: ModuleFacts) -> list[Site]:
    """``offs < n`` -> ``offs <= n`` in a comparison that builds the mask of a store (first) or
    a load: one lane past the end is read or written."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        for rank, kind in ((0, "store"), (1, "load")):
            masks = [m.value for c in facts.collect(fn, lambda n, k=kind: tl_name(n) == k)
                     if (m := _mem_mask(c)) is not None]  # type: ignore[arg-type]
            names = facts.flows_into(fn, masks)
            roots = list(masks) + [v for name, _, v in facts.assignments(fn) if name in names]
            for root in roots:
                for cmp in facts.collect(root, lambda n: isinstance(n, cst.Comparison) and len(n.comparisons) == 1):
                    target = cmp.comparisons[0]  # type: ignore[attr-defined]
                    op = target.operator
                    new_op = {cst.LessThan: cst.LessThanEqual, cst.GreaterThan: cst.GreaterThanEqual}.get(type(op))
                    if new_op is None:
                        continue
                    new = cmp.with_changes(comparisons=[target.with_changes(operator=new_op(
                        whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after))])
                    out.append((rank, _site(facts, cmp, new, f"the {kind} mask admits one element past the bound")))
    return _unique(out)


def sites_mask_dropped(facts: ModuleFacts) -> list[Site]:
    """A ``tl.load``/``tl.store`` without its mask (and ``other``): first a load inside a loop (a
    K-tail), then a load feeding a reduction or ``tl.dot``, then a store, then any load."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        reduced = facts.flows_into(fn, [c.args[0].value for c in facts.collect(
            fn, lambda n: tl_name(n) in (*REDUCTIONS, "dot")) if c.args])  # type: ignore[attr-defined]
        for call in facts.collect(fn, lambda n: tl_name(n) in ("load", "store")):
            mask = _mem_mask(call)  # type: ignore[arg-type]
            if mask is None:
                continue
            kind = tl_name(call)
            drop = [mask]
            if kind == "load" and (other := arg(call, "other", 2)) is not None:  # type: ignore[arg-type]
                drop.append(other)
            if kind == "store":
                rank = 2
            elif facts.in_loop(call):
                rank = 0
            else:
                stmt = facts.statement_of(call)
                target = [n for n, s, _ in facts.assignments(fn) if s is stmt]
                rank = 1 if (target and target[0] in reduced) else 3
            out.append((rank, _site(facts, call, _without_args(call, drop), f"the {kind} has no mask")))  # type: ignore[arg-type]
    return _unique(out)


# ------------------------------------------------------------------------------------ grid


def _is_cdiv(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and dotted_name(node.func).split(".")[-1] == "cdiv" and len(node.args) == 2


def _is_ceil_by_hand(node: cst.CSTNode) -> bool:
    """``(a + b - 1) // b``."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.FloorDivide)):
        return False
    left = node.left
    return (isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract)
            and int_value(left.right) == 1 and isinstance(left.left, cst.BinaryOperation)
            and isinstance(left.left.operator, cst.Add))


def sites_floor_grid(facts: ModuleFacts) -> list[Site]:
    """A launch grid rounded down: ``triton.cdiv(n, B)`` (or ``(n + B - 1) // B``) becomes
    ``n // B`` in host code, so the last partial tile gets no program."""
    out: list[tuple[int, Site]] = []
    for node in facts.collect(facts.module, lambda n: _is_cdiv(n) or _is_ceil_by_hand(n)):
        if facts.in_kernel(node):
            continue
        if isinstance(node, cst.Call):
            a, b = node.args[0].value, node.args[1].value
        else:
            a, b = node.left.left.left, node.right  # type: ignore[attr-defined]
        new = cst.BinaryOperation(left=_paren(a), operator=cst.FloorDivide(), right=_paren(b))
        in_grid = any(isinstance(p, (cst.Lambda, cst.SubscriptElement)) for p in facts.ancestors(node)) or \
            "grid" in facts.code(facts.statement_of(node) or node).split("=")[0]
        out.append((0 if in_grid else 1, _site(facts, node, new, "the launch grid is rounded down (floor division)")))
    return _unique(out)


def _paren(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, (cst.Name, cst.Attribute, cst.Integer, cst.Call, cst.Subscript)):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def sites_program_id(facts: ModuleFacts) -> list[Site]:
    """Program ids swapped between axes 0 and 1 in a kernel that uses both, else the program id
    of axis 0 ignored (replaced by 0)."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        calls = facts.collect(fn, lambda n: tl_name(n) == "program_id")
        axes: dict[int, list[cst.Call]] = {}
        for c in calls:
            a = arg(c, "axis", 0)  # type: ignore[arg-type]
            value = int_value(a.value) if a is not None else None
            if value is not None:
                axes.setdefault(value, []).append(c)  # type: ignore[arg-type]
        if 0 in axes and 1 in axes:
            edits: dict[int, cst.CSTNode | cst.FlattenSentinel] = {}
            for axis, other in ((0, 1), (1, 0)):
                for c in axes[axis]:
                    a = arg(c, "axis", 0)
                    edits[id(c)] = c.with_changes(args=[x.with_changes(value=cst.Integer(str(other))) if x is a else x
                                                        for x in c.args])
            first = axes[0][0]
            out.append((0, Site(edits, first, edits[id(first)], fn.name.value,
                                "program ids of grid axes 0 and 1 are swapped",
                                before="tl.program_id(0), tl.program_id(1)",
                                after="tl.program_id(1), tl.program_id(0)")))
        elif 0 in axes:
            c = axes[0][0]
            out.append((1, _site(facts, c, cst.Integer("0"), "the program id of axis 0 is ignored (always 0)")))
    return _unique(out)


# ------------------------------------------------------------------------------------ indexing


def sites_strides_swapped(facts: ModuleFacts) -> list[Site]:
    """Two strides of one tensor swapped: adjacent ``x.stride(i), x.stride(j)`` arguments of a
    kernel launch, else ``a * stride_p + b * stride_q`` inside a kernel."""
    out: list[tuple[int, Site]] = []
    for call in facts.collect(facts.module, lambda n: isinstance(n, cst.Call) and isinstance(n.func, cst.Subscript)
                              and dotted_name(n.func.value) in facts.kernel_names):
        args = list(call.args)  # type: ignore[attr-defined]
        for i in range(len(args) - 1):
            a, b = args[i].value, args[i + 1].value
            sa, sb = _stride_of(a), _stride_of(b)
            if sa and sb and sa[0] == sb[0] and sa[1] != sb[1]:
                edits = {id(a): b.deep_clone(), id(b): a.deep_clone()}
                ta, tb = facts.code(a), facts.code(b)
                out.append((0, Site(edits, a, edits[id(a)], facts.owner(call),
                                    f"strides {ta} and {tb} are swapped at the launch",
                                    before=f"{ta}, {tb}", after=f"{tb}, {ta}")))
                break
    for fn in facts.kernels:
        for node in facts.collect(fn, lambda n: isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Add)):
            pa, pb = _stride_factor(node.left), _stride_factor(node.right)  # type: ignore[attr-defined]
            if pa is not None and pb is not None and pa.value != pb.value:
                edits = {id(pa): pb.deep_clone(), id(pb): pa.deep_clone()}
                out.append((1, Site(edits, pa, edits[id(pa)], fn.name.value,
                                    f"strides {pa.value} and {pb.value} are swapped in the address",
                                    before=facts.code(node), after=facts.code(node).replace(pa.value, "\0").replace(
                                        pb.value, pa.value).replace("\0", pb.value))))
    return _unique(out)


def _stride_of(node: cst.BaseExpression) -> tuple[str, int] | None:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "stride" \
            and len(node.args) == 1 and int_value(node.args[0].value) is not None:
        return dotted_name(node.func.value) or "?", int_value(node.args[0].value)  # type: ignore[return-value]
    return None


def _stride_factor(node: cst.BaseExpression) -> cst.Name | None:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        for side in (node.right, node.left):
            if isinstance(side, cst.Name) and side.value.lower().startswith("stride"):
                return side
    return None


# ------------------------------------------------------------------------------------ loops


def sites_loop_bound_short(facts: ModuleFacts) -> list[Site]:
    """A kernel loop that stops one trip early: ``range(a, b, s)`` -> ``range(a, b - s, s)``,
    ``range(n)`` -> ``range(n - 1)``; loops that load data first."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        for loop in facts.collect(fn, lambda n: isinstance(n, cst.For) and isinstance(n.iter, cst.Call)):
            it: cst.Call = loop.iter  # type: ignore[attr-defined]
            name = dotted_name(it.func).split(".")[-1]
            args = [a for a in it.args if a.keyword is None]
            if name not in ("range", "static_range") or not 1 <= len(args) <= 3:
                continue
            stop = args[0] if len(args) == 1 else args[1]
            step = args[2].value if len(args) == 3 else cst.Integer("1")
            new_stop = cst.BinaryOperation(left=_paren(stop.value), operator=cst.Subtract(), right=_paren(step))
            new = it.with_changes(args=[stop.with_changes(value=new_stop) if a is stop else a for a in it.args])
            loads = facts.collect(loop, lambda n: tl_name(n) == "load")
            out.append((0 if loads else 1, _site(facts, it, new, "the loop stops one trip early")))
    return _unique(out)


# ------------------------------------------------------------------------------------ precision


def sites_accumulator_fp16(facts: ModuleFacts) -> list[Site]:
    """An accumulator or scan in float16: a float32 ``tl.zeros``/``tl.full`` accumulator updated
    in a loop becomes float16 and every update is rounded to float16 (as code that accumulates
    in half precision does; without the rounding Triton would promote the loop-carried value
    back to float32 and refuse to compile), then a ``tl.cumsum``/``tl.cumprod``, then a
    ``tl.sum`` over a tile, runs on float16 values."""
    out: list[tuple[int, Site]] = []
    half = cst.parse_expression("tl.float16")
    for fn in facts.kernels:
        assigns = facts.assignments(fn)
        for name, stmt, value in assigns:
            if tl_name(value) not in ("zeros", "full"):
                continue
            dtype = arg(value, "dtype", 1 if tl_name(value) == "zeros" else 2)  # type: ignore[arg-type]
            if dtype is None or dotted_name(dtype.value).split(".")[-1] != "float32":
                continue
            updates = [(s, v) for n, s, v in assigns if n == name and s is not stmt and facts.in_loop(s)]
            if not updates:
                continue
            edits: dict[int, cst.CSTNode | cst.FlattenSentinel] = {
                id(value): value.with_changes(args=[dtype.with_changes(value=half) if a is dtype else a
                                                    for a in value.args])}  # type: ignore[attr-defined]
            before, after = [facts.code(value)], [facts.code(edits[id(value)])]
            for s, update in updates:
                small = s.body[0]
                edits[id(small)] = small.with_changes(value=_half(_accumulate_as_float32(update, name)))
                before.append(facts.code(small))
                after.append(facts.code(edits[id(small)]))
            additive = any(isinstance(s.body[0], cst.AugAssign) or (
                isinstance(u, cst.BinaryOperation) and isinstance(u.operator, cst.Add)) or tl_name(u) == "dot"
                for s, u in updates)
            out.append((0 if additive else 2, Site(edits, value, edits[id(value)], fn.name.value,
                                                   f"the accumulator {name} is float16 (each update rounded to float16)",
                                                   before="; ".join(before), after="; ".join(after))))
        for call in facts.collect(fn, lambda n: tl_name(n) in ("cumsum", "cumprod", "sum")):
            if not call.args:  # type: ignore[attr-defined]
                continue
            first = call.args[0]  # type: ignore[attr-defined]
            new = call.with_changes(args=[first.with_changes(value=_half(first.value)), *call.args[1:]])  # type: ignore[attr-defined]
            kind = tl_name(call)
            out.append((1 if kind != "sum" else 3, _site(facts, call, new, f"the {kind} runs in float16")))
    return _unique(out)


def _half(expr: cst.BaseExpression) -> cst.Call:
    """``(expr).to(tl.float16)``."""
    return cst.Call(func=cst.Attribute(value=_paren(expr), attr=cst.Name("to")),
                    args=[cst.Arg(cst.parse_expression("tl.float16"))])


def _accumulate_as_float32(update: cst.BaseExpression, name: str) -> cst.BaseExpression:
    """In ``tl.dot(a, b, acc)`` the accumulator must have the dot's float32 type: pass it as
    ``acc.to(tl.float32)`` (the value still lives in float16 between iterations)."""
    if tl_name(update) != "dot":
        return update
    acc = arg(update, "acc", 2)  # type: ignore[arg-type]
    if acc is None or not (isinstance(acc.value, cst.Name) and acc.value.value == name):
        return update
    wide = cst.parse_expression(f"{name}.to(tl.float32)")
    return update.with_changes(args=[a.with_changes(value=wide) if a is acc else a for a in update.args])  # type: ignore[attr-defined]


def sites_wrong_constant(facts: ModuleFacts) -> list[Site]:
    """A numeric constant of a kernel's arithmetic 10% off (a float other than 0 that is not a
    masked load's ``other``; then an integer factor of 2 or more, plus one)."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        others = {id(a.value) for c in facts.collect(fn, lambda n: tl_name(n) == "load")
                  if (a := arg(c, "other", 2)) is not None}  # type: ignore[arg-type]
        for node in facts.collect(fn, lambda n: isinstance(n, cst.Float)):
            value = float(node.evaluated_value)  # type: ignore[attr-defined]
            if value == 0.0 or id(node) in others:
                continue
            new = cst.Float(repr(round(value * 1.1, 12)))
            rank = 0 if abs(value) >= 1e-3 else 2
            out.append((rank, _site(facts, node, new, f"the constant {facts.code(node)} is 10% off")))
        for node in facts.collect(fn, lambda n: isinstance(n, cst.BinaryOperation)
                                  and isinstance(n.operator, (cst.Multiply, cst.Divide))):
            for side in (node.right, node.left):  # type: ignore[attr-defined]
                if isinstance(side, cst.Integer) and int(side.evaluated_value) >= 2:
                    out.append((1, _site(facts, side, cst.Integer(str(int(side.evaluated_value) + 1)),
                                         f"the factor {side.value} is one off")))
    return _unique(out)


# ------------------------------------------------------------------------------------ epilogue


_TRIVIAL = ("to",)


def sites_epilogue_twice(facts: ModuleFacts) -> list[Site]:
    """The computation that produces a stored value applied a second time: after ``y = f(x)``
    (the last non-trivial assignment in the chain feeding ``tl.store``) comes ``y = f(y)``; a
    stored expression ``f(x)`` becomes ``f(f(x))``. The last store of a kernel first."""
    out: list[tuple[int, Site]] = []
    for order, fn in enumerate(reversed(facts.kernels)):
        assigns = facts.assignments(fn)
        locals_ = {n for n, _, _ in assigns}
        stores = facts.collect(fn, lambda n: tl_name(n) == "store")
        for rank, store in enumerate(reversed(stores), start=100 * order):
            value_arg = arg(store, "value", 1)  # type: ignore[arg-type]
            if value_arg is None:
                continue
            value = value_arg.value
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) \
                    and value.func.attr.value in _TRIVIAL and isinstance(value.func.value, cst.Name):
                value = value.func.value  # y.to(out.dtype): the epilogue is what made y
            if not isinstance(value, cst.Name):
                again = _apply_again(facts, value, value, locals_) if _non_trivial(value) else None
                if again is not None:
                    out.append((rank, _site(facts, value, again, "the stored expression is applied twice")))
                continue
            site = _epilogue_of(facts, assigns, locals_, value.value, store)
            if site is not None:
                out.append((rank, site))
    return _unique(out)


def _epilogue_of(facts: ModuleFacts, assigns: list, locals_: set[str], target: str, store: cst.CSTNode) -> Site | None:
    """Follow ``target`` back from ``store`` through casts, copies and clamps (up to four steps)
    to the last non-trivial assignment that always runs before it (not one inside a branch),
    and plant its second application. An accumulation inside a loop when the store is after the
    loop is no epilogue; a clamp (``tl.minimum(tl.maximum(x, lo), hi)``, a ReLU) is passed over:
    applying it twice changes nothing."""
    enclosing = {id(a) for a in facts.ancestors(store)}
    before = facts.line(store)
    for _ in range(4):
        earlier = [(s, v) for n, s, v in assigns if n == target and facts.line(s) < before
                   and id(facts.parent(s)) in enclosing]
        if not earlier:
            return None
        stmt, expr = earlier[-1]
        inner = [n for n in names_in(expr) if n in locals_]
        if not _non_trivial(expr) or _clamp(expr):
            if len(inner) != 1:
                return None
            target, before = inner[0], facts.line(stmt)
            continue
        if facts.in_loop(stmt) and not facts.in_loop(store):
            return None
        new_value = expr if target in names_in(expr) else _apply_again(facts, expr, cst.Name(target), locals_)
        if new_value is None:
            return None
        small = stmt.body[0]
        twice = cst.FlattenSentinel([stmt, stmt.with_changes(body=[small.with_changes(value=new_value)],
                                                             leading_lines=[])])
        return _site(facts, stmt, twice, f"the epilogue producing {target} is applied twice")
    return None


def _clamp(expr: cst.BaseExpression) -> bool:
    """``tl.maximum``/``tl.minimum``/``tl.clamp`` of one tile and bounds (idempotent: a ReLU, a
    hardtanh)."""
    return tl_name(expr) in ("maximum", "minimum", "clamp") or (
        isinstance(expr, cst.Call) and dotted_name(expr.func).split(".")[-1] in ("relu",))


#: Calls that produce the value an epilogue works on (not part of the epilogue itself).
_CORE = ("dot", *REDUCTIONS)


def _non_trivial(expr: cst.BaseExpression) -> bool:
    """Elementwise arithmetic or a math call: not a bare name, a cast (``x.to(...)``), a load,
    a constructor, or a reduction or ``tl.dot`` alone (applying those twice is no epilogue)."""
    if isinstance(expr, cst.Name):
        return False
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _TRIVIAL:
            return False
        if tl_name(expr) in ("load", "zeros", "full", "arange", "program_id", *_CORE):
            return False
    return isinstance(expr, (cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.IfExp))


def _apply_again(facts: ModuleFacts, expr: cst.BaseExpression, value: cst.BaseExpression,
                 locals_: set[str]) -> cst.BaseExpression | None:
    """``expr`` applied to ``value`` instead of to what it works on: its ``tl.dot`` or
    reduction calls when it has them (``tl.dot(a, b) * s`` -> ``value * s``), else its first
    local name (``acc + bias`` -> ``value + bias``)."""
    cores = facts.collect(expr, lambda n: tl_name(n) in _CORE)
    if cores:
        outer = [c for c in cores if not any(o is not c and c in facts.collect(o, lambda n: True) for o in cores)]
        edits = {id(c): _paren(value).deep_clone() for c in outer}
        return expr.visit(_Replace(edits))  # type: ignore[return-value]
    u = next((n for n in names_in(expr) if n in locals_), None)
    return _substitute(expr, u, value) if u is not None else None


class _Replace(cst.CSTTransformer):
    def __init__(self, edits: dict[int, cst.BaseExpression]) -> None:
        super().__init__()
        self.edits = edits

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        return self.edits.get(id(original), updated)  # type: ignore[return-value]


class _Rename(cst.CSTTransformer):
    def __init__(self, name: str, new: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.new = name, new

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return True

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return _paren(self.new) if original.value == self.name else updated


def _substitute(expr: cst.BaseExpression, name: str, new: cst.BaseExpression) -> cst.BaseExpression:
    return expr.visit(_Rename(name, new))  # type: ignore[return-value]


# ------------------------------------------------------------------------------------ reductions


def sites_wrong_reduction_axis(facts: ModuleFacts) -> list[Site]:
    """A reduction or scan over the other axis of a 2-D tile (axis 1 <-> 0), in kernels that build
    2-D tiles; reductions over axis 1 first."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        if not facts.uses_2d_tiles(fn):
            continue
        for call in facts.collect(fn, lambda n: tl_name(n) in REDUCTIONS):
            found = axis_of(call)  # type: ignore[arg-type]
            if found is None or found[1] not in (0, 1):
                continue
            a, value = found
            new = call.with_changes(args=[x.with_changes(value=cst.Integer(str(1 - value))) if x is a else x
                                          for x in call.args])  # type: ignore[attr-defined]
            out.append((0 if value == 1 else 1, _site(facts, call, new, f"the {tl_name(call)} runs over axis {1 - value}")))
    return _unique(out)


_ATOMIC_OP = {"atomic_add": "{old} + {val}", "atomic_max": "tl.maximum({old}, {val})",
              "atomic_min": "tl.minimum({old}, {val})"}


def sites_add_without_atomic(facts: ModuleFacts) -> list[Site]:
    """A cross-program accumulation done as load, add, store instead of ``tl.atomic_add`` (or
    ``atomic_max``/``atomic_min``): programs that hit the same element race."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        for call in facts.collect(fn, lambda n: tl_name(n) in _ATOMIC_OP):
            if not isinstance(facts.parent(call), cst.Expr):
                continue  # the old value is used: a store returns none
            ptr, val = arg(call, "pointer", 0), arg(call, "val", 1)  # type: ignore[arg-type]
            mask = arg(call, "mask", 2)  # type: ignore[arg-type]
            if ptr is None or val is None:
                continue
            p, v = facts.code(ptr.value), facts.code(val.value)
            m = f", mask={facts.code(mask.value)}" if mask is not None else ""
            old = f"tl.load({p}{m})"
            new = cst.parse_expression(f"tl.store({p}, {_ATOMIC_OP[tl_name(call)].format(old=old, val=v)}{m})")  # type: ignore[index]
            out.append((0, _site(facts, call, new, f"the {tl_name(call)} is a plain load, add and store")))
    return _unique(out)


def _is_zero(node: cst.BaseExpression) -> bool:
    """Whether ``node`` is a literal zero (``0``, ``0.0``, ``-0.0``)."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            return float(node.value.replace("_", "")) == 0.0
        except ValueError:
            return False
    return False


def sites_load_without_other(facts: ModuleFacts) -> list[Site]:
    """A masked ``tl.load`` that feeds a max/min (first) or a sum loses its ``other=``: masked-off
    lanes then hold zeros instead of the reduction's identity. Not where ``other`` is zero: Triton
    fills the masked-off lanes of a load without ``other`` with zeros (the NVIDIA lowering, ``init
    = other == nullptr`` in ``LoadOpConversion``, initialises the destination registers to 0
    before the predicated load; the interpreter's ``create_masked_load`` does the same), so
    dropping a zero ``other`` is no fault."""
    out: list[tuple[int, Site]] = []
    for fn in facts.kernels:
        assigns = facts.assignments(fn)
        for rank, kinds in ((0, ("max", "min", "argmax", "argmin")), (1, ("sum", "xor_sum", "cumsum"))):
            reductions = [c for c in facts.collect(fn, lambda n, k=kinds: tl_name(n) in k) if c.args]  # type: ignore[attr-defined]
            feeding = facts.flows_into(fn, [c.args[0].value for c in reductions])  # type: ignore[attr-defined]
            direct = {id(n) for c in reductions for n in facts.collect(c.args[0].value,  # type: ignore[attr-defined]
                                                                          lambda n: tl_name(n) == "load")}
            for call in facts.collect(fn, lambda n: tl_name(n) == "load"):
                other = arg(call, "other", 2)  # type: ignore[arg-type]
                if other is None or _mem_mask(call) is None or _is_zero(other.value):  # type: ignore[arg-type]
                    continue
                stmt = facts.statement_of(call)
                target = [n for n, s, _ in assigns if s is stmt]
                if id(call) in direct or (target and target[0] in feeding):
                    out.append((rank, _site(facts, call, _without_args(call, [other]),  # type: ignore[arg-type]
                                            "the masked load has no other= before a reduction")))
    return _unique(out)


def _unique(ranked: list[tuple[int, Site]]) -> list[Site]:
    """Sites by rank, then source order; one per anchor."""
    order = sorted(range(len(ranked)), key=lambda i: (ranked[i][0], i))
    seen: set[int] = set()
    out = []
    for i in order:
        site = ranked[i][1]
        if id(site.anchor) not in seen:
            seen.add(id(site.anchor))
            out.append(site)
    return out
