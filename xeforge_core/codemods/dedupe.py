"""Load deduplication and common-subexpression removal for straight-line kernel code.

Used by the memory-access codemod after it turns a row loop into one block: the three passes a
softmax made over a row (max, sum, normalise) then load the same addresses three times, and
Triton does not merge loads on its own. Over a list of top-level statements with no loops:

* a ``tl.load`` whose pointer and mask have the value numbers of an earlier one becomes the
  earlier value (``tl.where(mask, earlier, other)`` when the two ``other`` values differ), the
  first one moved into its own variable when it was part of a larger expression;
* ``b = expr`` where ``expr`` has the value number a live name ``a`` already holds is dropped
  and later reads of ``b`` read ``a`` (``b`` assigned once, ``a`` not reassigned later);
* ``a = expr`` rebinding ``a`` to the value it already holds is dropped.

Loads through a pointer parameter the kernel also stores through are never merged.
"""

from __future__ import annotations

import libcst as cst

from xeforge_core.codemods.common import code_of, dotted_name
from xeforge_core.codemods.kernel_edit import (
    TL_LOAD,
    TL_STORE,
    ValueNumbers,
    assigned_names,
    call_arg,
    calls_named,
    fresh_name,
    read_names,
    rename,
    simple_assign,
)

_SIDE_EFFECTS = ("tl.atomic", "triton.language.atomic", "tl.device_print", "tl.debug_barrier")


def _loads_in(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def leave_Call(self, n: cst.Call) -> None:
            if dotted_name(n.func) in TL_LOAD:
                out.append(n)

    node.visit(_V())
    return out


def _load_key(vn: ValueNumbers, call: cst.Call) -> str | None:
    ptr = call_arg(call, 0, "pointer")
    if ptr is None:
        return None
    mask = call_arg(call, 1, "mask")
    extra = [a for a in call.args if a.keyword is not None and a.keyword.value not in ("mask", "other")]
    if extra:
        return None  # cache modifiers, boundary checks: keep as written
    return f"{vn.sum_terms(ptr)}|{vn.number(mask) if mask is not None else ''}"


def _advance(vn: ValueNumbers, stmt: cst.BaseStatement) -> None:
    a = simple_assign(stmt)
    if a is not None:
        vn.bind(a[0], a[1])
        return
    for n in assigned_names(stmt):
        vn.opaque(n)


def dedupe(stmts: list[cst.BaseStatement], written_params: set[str], taken: set[str],
           context: list[cst.BaseStatement] | None = None) -> tuple[list[cst.BaseStatement], int]:
    """The statements with repeated loads and values removed (module docstring), and how many
    loads were merged. ``written_params``: pointer parameters the kernel stores through;
    ``taken``: names in use (new names are added to it); ``context``: statements that run
    before ``stmts`` (their values are known, they are not rewritten)."""
    context = [c for c in (context or []) if isinstance(c, cst.SimpleStatementLine)]
    if any(code_of(s).strip().startswith(_SIDE_EFFECTS) or any(x in code_of(s) for x in _SIDE_EFFECTS) for s in stmts):
        return stmts, 0
    if any(not isinstance(s, cst.SimpleStatementLine) for s in stmts):
        return stmts, 0
    # pass 1: the key of every load, in order
    vn = ValueNumbers()
    keys: dict[int, str] = {}
    seen: dict[str, int] = {}
    for c in context:
        _advance(vn, c)
    for s in stmts:
        for call in _loads_in(s):
            if read_names(call_arg(call, 0, "pointer")) & written_params:  # type: ignore[arg-type]
                continue
            k = _load_key(vn, call)
            if k is not None:
                keys[id(call)] = k
                seen[k] = seen.get(k, 0) + 1
        _advance(vn, s)
    dup = {k for k, n in seen.items() if n > 1}
    counts: dict[str, int] = {}
    for s in stmts:
        for n in assigned_names(s):
            counts[n] = counts.get(n, 0) + 1
    # pass 2: rewrite
    rw = _Rewrite(keys, dup, taken)
    out: list[cst.BaseStatement] = []
    for s in stmts:
        a = simple_assign(s)
        whole = a is not None and isinstance(a[1], cst.Call) and id(a[1]) in keys and keys[id(a[1])] in dup \
            and counts.get(a[0]) == 1
        rw.start(a if whole else None)
        new = s.visit(rw)
        out.extend(rw.hoisted)
        out.append(new)  # type: ignore[arg-type]
        if calls_named(s, TL_STORE):
            rw.holder.clear()  # a store may write what a later load reads: nothing merges across it
    merged = rw.merged
    return _cse(out, context), merged


class _Rewrite(cst.CSTTransformer):
    """Pass 2 of :func:`dedupe`: the first load of each repeated key is kept (in its own
    variable when it was part of a larger expression), the later ones read that variable."""

    def __init__(self, keys: dict[int, str], dup: set[str], taken: set[str]) -> None:
        super().__init__()
        self.keys, self.dup, self.taken = keys, dup, taken
        self.holder: dict[str, tuple[str, str]] = {}   # load key -> (name, other text)
        self.merged = 0
        self.hoisted: list[cst.BaseStatement] = []
        self.whole: tuple[str, cst.BaseExpression] | None = None

    def start(self, whole: tuple[str, cst.BaseExpression] | None) -> None:
        self.hoisted = []
        self.whole = whole

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        k = self.keys.get(id(original))
        if k is None or k not in self.dup:
            return updated
        other = call_arg(original, 2, "other")
        other_text = code_of(other) if other is not None else ""
        if k in self.holder:
            name, first_other = self.holder[k]
            self.merged += 1
            if other_text and other_text != first_other:
                mask = call_arg(original, 1, "mask")
                return cst.parse_expression(f"tl.where({code_of(mask)}, {name}, {other_text})")  # type: ignore[arg-type]
            return cst.Name(name)
        if self.whole is not None and original is self.whole[1]:
            self.holder[k] = (self.whole[0], other_text)
            return updated
        name = fresh_name("row_vals", self.taken)
        self.holder[k] = (name, other_text)
        self.hoisted.append(cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(name))],
                                                                     value=updated)]))
        return cst.Name(name)


def _cse(stmts: list[cst.BaseStatement], context: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """Drop rebinding to the same value and aliases of live values (module docstring)."""
    counts: dict[str, int] = {}
    for s in stmts:
        for n in assigned_names(s):
            counts[n] = counts.get(n, 0) + 1
    last_assign: dict[str, int] = {}
    for i, s in enumerate(stmts):
        for n in assigned_names(s):
            last_assign[n] = i
    vn = ValueNumbers()
    for c in context:
        _advance(vn, c)
    holders: dict[int, str] = {}     # value number -> a name holding it
    aliases: dict[str, str] = {}
    out: list[cst.BaseStatement] = []
    for i, s in enumerate(stmts):
        s = rename(s, aliases)  # type: ignore[assignment]
        a = simple_assign(s)
        if a is not None:
            name, value = a
            num = vn.number(value) if not isinstance(value, cst.Name) or value.value not in vn.env else vn.env[value.value]
            if vn.env.get(name) == num:
                continue  # same value as it already holds
            holder = holders.get(num)
            if (holder is not None and holder != name and counts.get(name) == 1 and last_assign.get(holder, -1) < i
                    and vn.env.get(holder) == num):
                aliases[name] = holder
                continue
            vn.env[name] = num
            holders.setdefault(num, name)
            if holders[num] != name and vn.env.get(holders[num]) != num:
                holders[num] = name
        else:
            for n in assigned_names(s):
                vn.opaque(n)
        out.append(s)
    return out
