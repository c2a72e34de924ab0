"""fusion codemod, part 1: consecutive launches over the same grid become one kernel.

A chain is two or more launches, one after the other in a host function (only allocations or
other assignments between them), with the same launch grid: for example a row softmax as
``row_max_kernel[(rows,)]``, ``exp_sum_kernel[(rows,)]``, ``normalize_kernel[(rows,)]``, or an
elementwise chain ``scale_kernel[grid]``, ``bias_kernel[grid]``, ``gelu_kernel[grid]``. Program
``i`` of every launch works on the same part of the data, so the bodies can run one after the
other in one program. The tensors the kernels exchange (allocated in the host function and
used nowhere else) disappear:

* a value stored at the top level of a kernel (``tl.store(max_ptr + row, m)``) and loaded at
  the same offset by a later one becomes a local variable;
* a value stored inside a loop (``tl.store(e_ptr + row * n + offs, e)`` in
  ``for start in range(0, n, BLOCK)``) and loaded by a later kernel's loop with the same header
  and the same offsets is recomputed there from what it was computed from (the loads of the
  inputs), so the full-size intermediate never reaches global memory.

Stored values keep their precision: the value is converted to the intermediate's dtype (from its
host allocation), as the store did. Identical leading statements (the program id, the offsets
and their mask) are written once; the later kernels' other names are renamed where they clash.
Chains it cannot fuse are left as they are, with the reason (an intermediate used after the
chain, read at another offset, or through a derived pointer; a kernel that is autotuned).
Source of the rule: knowledge rule ``fuse_when_intermediate_disappears``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import libcst as cst

from xeforge_core.codemods.common import (
    code_of,
    dotted_name,
    is_autotune_decorator,
    is_constexpr_param,
    keyword_arg,
)
from xeforge_core.codemods.host import (
    HostFacts,
    Launch,
    dead_allocations,
    fix_commas,
    host_facts,
    host_functions,
    launch_counts,
    movable,
    option_args,
    tl_dtype,
)
from xeforge_core.codemods.kernel_edit import (
    TL_LOAD,
    TL_STORE,
    Edits,
    assigned_names,
    base_and_offset,
    block_stmts,
    body_of,
    call_arg,
    calls_named,
    comment_line,
    expr_stmt_call,
    fresh_name,
    parse_expr,
    read_names,
    rename,
    simple_assign,
    with_body,
)
from xeforge_core.errors import XeForgeError


class FusionError(XeForgeError):
    """Internal: the chain cannot be fused; the message says why (one sentence)."""


@dataclass
class FusedParam:
    name: str
    param: cst.Param
    host: cst.BaseExpression | None      # the launch argument (None: the parameter's default)
    constexpr: bool


@dataclass
class _LoopValue:
    """A temporary stored inside a loop: how to recompute it."""

    iter_text: str
    target: str
    pre: list[cst.BaseStatement]
    offset_text: str
    value: cst.BaseExpression
    loop_assigned: set[str]
    position: int                      # index of the loop in the fused body


@dataclass
class ChainPlan:
    """A fused kernel and the host edits that launch it."""

    kernel: cst.FunctionDef
    params: list[FusedParam]
    launches: list[Launch]
    temps: list[str]
    notes: list[str] = field(default_factory=list)


def _has_load(node: cst.CSTNode) -> bool:
    return bool(calls_named(node, TL_LOAD))


def _where(mask: cst.BaseExpression | None, value: str, other: cst.BaseExpression | None) -> cst.BaseExpression:
    if mask is not None and other is not None:
        return parse_expr(f"tl.where({code_of(mask)}, {value}, {code_of(other)})")
    return parse_expr(value)


class _Merger:
    """Builds one fused kernel from the kernels of a chain, in launch order."""

    def __init__(self, host: HostFacts, temps: dict[str, str]) -> None:
        self.host = host
        self.temps = temps                      # temp host name -> tl dtype
        self.params: list[FusedParam] = []
        self.by_host: dict[str, str] = {}
        self.taken: set[str] = set()
        self.body: list[cst.BaseStatement] = []
        self.top_defs: dict[str, str] = {}
        self.top_values: dict[str, tuple[str, str]] = {}   # temp -> (offset text, local)
        self.loop_values: dict[str, _LoopValue] = {}
        self.placeholders: dict[str, str] = {}             # placeholder name -> temp
        self.recomputed: list[str] = []

    # -- parameters -------------------------------------------------------------------------
    def _params(self, fn: cst.FunctionDef, launch: Launch) -> dict[str, str]:
        kmap: dict[str, str] = {}
        for p in fn.params.params:
            name = p.name.value
            arg = launch.bound.get(name)
            if arg is None and p.default is None:
                raise FusionError(f"kernel {fn.name.value}: parameter {name} is not passed at its launch")
            host_text = code_of(arg.value).replace(" ", "") if arg is not None else None
            root = self.host.root(host_text) if host_text else None
            if root in self.temps:
                ph = fresh_name(f"_{root}_tmp", self.taken)
                kmap[name] = ph
                self.placeholders[ph] = root
                continue
            constexpr = is_constexpr_param(p)
            key = f"{host_text}|{constexpr}" if host_text is not None else None
            if key is not None and key in self.by_host:
                kmap[name] = self.by_host[key]
                continue
            new = name if name not in self.taken else fresh_name(name, self.taken)
            self.taken.add(new)
            kmap[name] = new
            self.params.append(FusedParam(new, p.with_changes(name=cst.Name(new)),
                                          arg.value if arg is not None else None, constexpr))
            if key is not None:
                self.by_host[key] = new
        return kmap

    # -- temporaries ----------------------------------------------------------------------------
    def _temp_access(self, call: cst.Call) -> tuple[str, cst.BaseExpression | None] | None:
        ptr = call_arg(call, 0, "pointer")
        if ptr is None:
            return None
        split = base_and_offset(ptr, set(self.placeholders))
        if split is None:
            if read_names(ptr) & set(self.placeholders):
                raise FusionError("an intermediate is addressed through a derived pointer "
                                  f"(`{code_of(ptr)}`); only `tmp_ptr + offsets` can be followed")
            return None
        return self.placeholders[split[0]], split[1]

    def _store_value(self, temp: str, call: cst.Call) -> str:
        value = call_arg(call, 1, "value")
        if value is None:
            raise FusionError("a store to an intermediate has no value argument")
        return f"({code_of(value)}).to({self._dtype(temp)})"

    def _dtype(self, temp: str) -> str:
        dtype = self.temps[temp]
        if dtype.startswith("tl."):
            return dtype
        found = tl_dtype(dtype, self.by_host)
        if found is None:
            raise FusionError(f"intermediate {temp} has dtype `{dtype}`, which none of the fused kernel's pointer "
                              "parameters carries")
        return found

    def _resolve_top(self, node: cst.CSTNode) -> cst.CSTNode:
        """Replace loads of temporaries stored at the top level by their locals."""
        merger = self

        class _T(cst.CSTTransformer):
            def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                if dotted_name(updated.func) not in TL_LOAD:
                    return updated
                hit = merger._temp_access(updated)
                if hit is None:
                    return updated
                temp, offset = hit
                stored = merger.top_values.get(temp)
                off_text = code_of(offset) if offset is not None else ""
                if stored is None or stored[0] != off_text:
                    raise FusionError(f"intermediate {temp} is read at offset `{off_text}`, not where a "
                                      "kernel before it stored it")
                return _where(call_arg(updated, 1, "mask"), stored[1], call_arg(updated, 2, "other"))

        return node.visit(_T())

    def _loop(self, loop: cst.For, position: int) -> cst.For:
        """Temporaries stored and loaded in the direct body of ``loop``."""
        stmts = block_stmts(loop.body)
        out: list[cst.BaseStatement] = []
        target = loop.target.value if isinstance(loop.target, cst.Name) else None
        for i, s in enumerate(stmts):
            call = expr_stmt_call(s)
            if call is not None and dotted_name(call.func) in TL_STORE:
                hit = self._temp_access(call)
                if hit is not None:
                    temp, offset = hit
                    if target is None:
                        raise FusionError("a loop storing an intermediate has a tuple target")
                    self.loop_values[temp] = _LoopValue(
                        iter_text=code_of(loop.iter).replace(" ", ""), target=target, pre=stmts[:i],
                        offset_text=code_of(offset) if offset is not None else "",
                        value=call_arg(call, 1, "value"), loop_assigned=set(assigned_names(loop)),  # type: ignore[arg-type]
                        position=position)
                    continue
            if calls_named(s, TL_LOAD) and isinstance(s, cst.SimpleStatementLine):
                s = self._recompute(s, loop, stmts[:i], out)
            elif not isinstance(s, cst.SimpleStatementLine) and self._touches_temp(s):
                raise FusionError("an intermediate is read or written in a nested block; only the top level "
                                  "and the direct body of a loop are followed")
            out.append(s)
        return loop.with_changes(body=loop.body.with_changes(body=out))  # type: ignore[attr-defined]

    def _touches_temp(self, node: cst.CSTNode) -> bool:
        return bool(read_names(node) & set(self.placeholders))

    def _recompute(self, stmt: cst.SimpleStatementLine, loop: cst.For, before: list[cst.BaseStatement],
                   out: list[cst.BaseStatement]) -> cst.SimpleStatementLine:
        merger = self
        target = loop.target.value if isinstance(loop.target, cst.Name) else ""
        inserts: list[cst.BaseStatement] = []

        class _T(cst.CSTTransformer):
            def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
                if dotted_name(updated.func) not in TL_LOAD:
                    return updated
                hit = merger._temp_access(updated)
                if hit is None:
                    return updated
                temp, offset = hit
                off_text = code_of(offset) if offset is not None else ""
                if temp in merger.top_values and merger.top_values[temp][0] == off_text:
                    stored = merger.top_values[temp][1]
                    return _where(call_arg(updated, 1, "mask"), stored, call_arg(updated, 2, "other"))
                lv = merger.loop_values.get(temp)
                if lv is None:
                    raise FusionError(f"intermediate {temp} is read before any kernel of the chain stores it")
                expr = merger._slice(temp, lv, code_of(loop.iter).replace(" ", ""), target, before, off_text,
                                     inserts)
                return _where(call_arg(updated, 1, "mask"), expr, call_arg(updated, 2, "other"))

        new = stmt.visit(_T())
        out.extend(inserts)
        return new  # type: ignore[return-value]

    def _slice(self, temp: str, lv: _LoopValue, iter_text: str, target: str, before: list[cst.BaseStatement],
               off_text: str, inserts: list[cst.BaseStatement]) -> str:
        if iter_text != lv.iter_text:
            raise FusionError(f"intermediate {temp} is stored in a loop over `{lv.iter_text}` and read in a loop "
                              f"over `{iter_text}`; the loops do not visit the same blocks")
        mapping = {lv.target: target}
        consumer_defs = {}
        for s in before:
            a = simple_assign(s)
            if a is not None:
                consumer_defs.setdefault(code_of(a[1]).replace(" ", ""), a[0])
        copy: list[tuple[str, cst.BaseExpression]] = []
        for s in lv.pre:
            a = simple_assign(s)
            if a is None:
                continue
            text = code_of(rename(a[1], mapping)).replace(" ", "")  # type: ignore[arg-type]
            if text in consumer_defs and not _has_load(a[1]):
                mapping[a[0]] = consumer_defs[text]
            else:
                copy.append(a)
        # the offset must be the same offset under the index mapping
        stored_off = lv.offset_text
        probe = code_of(rename(parse_expr(stored_off), mapping)) if stored_off else ""  # type: ignore[arg-type]
        if probe.replace(" ", "") != off_text.replace(" ", ""):
            raise FusionError(f"intermediate {temp} is stored at `{stored_off}` and read at `{off_text}`")
        # the statements the value needs, in order
        needed = read_names(lv.value)
        chosen: list[tuple[str, cst.BaseExpression]] = []
        for name, value in reversed(copy):
            if name in needed:
                chosen.insert(0, (name, value))
                needed |= read_names(value)
        local = {n for n, _ in chosen}
        for _name, value in chosen:
            for r in read_names(value) - local - set(mapping):
                if r in lv.loop_assigned:
                    raise FusionError(f"intermediate {temp} depends on `{r}`, which its loop updates; it cannot "
                                      "be recomputed elsewhere")
        for r in read_names(lv.value) - local - set(mapping):
            if r in lv.loop_assigned:
                raise FusionError(f"intermediate {temp} depends on `{r}`, which its loop updates")
        later = set()
        for s in self.body[lv.position + 1:]:
            later |= set(assigned_names(s))
        free = set()
        for _, value in chosen:
            free |= read_names(value)
        free = (free | read_names(lv.value)) - local - set(mapping)
        clobbered = sorted(free & later)
        if clobbered:
            raise FusionError(f"intermediate {temp} is computed from `{clobbered[0]}`, which is reassigned before "
                              "it is read")
        for name, value in chosen:
            new = fresh_name(f"{name}_r", self.taken)
            mapping[name] = new
            inserts.append(cst.SimpleStatementLine(body=[cst.Assign(
                targets=[cst.AssignTarget(cst.Name(new))], value=rename(value, mapping))]))  # type: ignore[arg-type]
        self.recomputed.append(temp)
        return f"({code_of(rename(lv.value, mapping))}).to({self._dtype(temp)})"

    # -- one kernel -------------------------------------------------------------------------
    def add(self, fn: cst.FunctionDef, launch: Launch, first: bool) -> None:
        kmap = self._params(fn, launch)
        stmts = body_of(fn)
        if not first and stmts and is_docstring(stmts[0]):
            stmts = stmts[1:]
        counts: dict[str, int] = {}
        for n in assigned_names(fn.body):
            counts[n] = counts.get(n, 0) + 1
        for s in stmts:
            assign = simple_assign(s)
            if (not first and assign is not None and counts.get(assign[0]) == 1 and assign[0] not in kmap
                    and not _has_load(assign[1])):
                key = code_of(rename(assign[1], kmap)).replace(" ", "")  # type: ignore[arg-type]
                if key in self.top_defs:
                    kmap[assign[0]] = self.top_defs[key]
                    continue
            for n in assigned_names(s):
                if n not in kmap:
                    kmap[n] = n if n not in self.taken else fresh_name(n, self.taken)
                    self.taken.add(kmap[n])
            new = rename(s, kmap)
            assign = simple_assign(new)
            if assign is not None and counts.get(simple_assign(s)[0]) == 1 and not _has_load(assign[1]):  # type: ignore[index]
                self.top_defs.setdefault(code_of(assign[1]).replace(" ", ""), assign[0])
            new = self._statement(new)  # type: ignore[arg-type]
            if new is not None:
                self.body.append(new)

    def _statement(self, s: cst.BaseStatement) -> cst.BaseStatement | None:
        call = expr_stmt_call(s)
        if call is not None and dotted_name(call.func) in TL_STORE:
            hit = self._temp_access(call)
            if hit is not None:
                temp, offset = hit
                local = fresh_name(f"{temp}_val", self.taken)
                self.top_values[temp] = (code_of(offset) if offset is not None else "", local)
                line = cst.parse_statement(f"{local} = {self._store_value(temp, call)}")
                return line.with_changes(leading_lines=s.leading_lines)  # type: ignore[attr-defined]
        if isinstance(s, cst.For):
            return self._loop(self._resolve_top_header(s), len(self.body))
        if isinstance(s, cst.SimpleStatementLine):
            return self._resolve_top(s)  # type: ignore[return-value]
        if self._touches_temp(s):
            raise FusionError("an intermediate is used inside an if/while block; only the top level and the "
                              "direct body of a loop are followed")
        return s

    def _resolve_top_header(self, loop: cst.For) -> cst.For:
        return loop.with_changes(iter=self._resolve_top(loop.iter))  # type: ignore[arg-type]

    def check_done(self) -> None:
        left = set()
        for s in self.body:
            left |= read_names(s) & set(self.placeholders)
        if left:
            ph = sorted(left)[0]
            raise FusionError(f"intermediate {self.placeholders[ph]} is still accessed in a way the fusion does not "
                              "follow")


def intermediate_tile(facts: HostFacts, prod: Launch, cons: Launch) -> tuple[str, set[str]]:
    """The intermediate one launch (``prod``) writes and the next (``cons``) reads, for the
    epilogue and prologue fusions: the first fresh allocation both are passed, which must be a 2-D
    ``torch.empty`` (its layout known) that nothing else reads. Returns it and its views; raises
    :class:`FusionError` saying why there is none."""
    cands = []
    for a in cons.bound.values():
        if isinstance(a.value, cst.Name):
            root = facts.root(a.value.value)
            if root in facts.allocs and facts.allocs[root].alias_of is None and any(
                    isinstance(pa.value, cst.Name) and facts.root(pa.value.value) == root for pa in prod.bound.values()):
                cands.append(root)
    if not cands:
        raise FusionError(f"{cons.kernel} reads nothing {prod.kernel} writes")
    tensor = cands[0]
    alloc = facts.allocs[tensor]
    if alloc.func != "torch.empty" or not (isinstance(alloc.shape, (cst.Tuple, cst.List)) and len(alloc.shape.elements) == 2):
        raise FusionError(f"{tensor} is not a fresh 2-D torch.empty allocation, so its layout is not known")
    aliases = {n for n in facts.allocs if facts.root(n) == tensor}
    skip = {prod.index, cons.index} | {facts.body.index(facts.allocs[n].stmt) for n in aliases}
    if any(facts.reads_outside(n, skip, data_only=True) for n in aliases):
        raise FusionError(f"{tensor} is also used outside {prod.kernel} and {cons.kernel}; it has to stay in "
                          "global memory")
    return tensor, aliases


#: ``plan(facts, producer, consumer, kernels, taken) -> (fused kernel, its params, intermediate,
#: notes)``, raising :class:`FusionError`: one fusion of two consecutive launches
PairPlan = Callable[[HostFacts, Launch, Launch, dict[str, cst.FunctionDef], set[str]],
                    tuple[cst.FunctionDef, list[FusedParam], str, list[str]]]


def fuse_adjacent(module: cst.Module, kernels: dict[str, cst.FunctionDef], plan: PairPlan, *,
                  launch: Literal["producer", "consumer"]) -> tuple[cst.Module, list[str], Launch] | list[str]:
    """The first pair of consecutive launches ``plan`` fuses, applied to ``module``: the fused
    kernel is launched where the consumer was, with the grid and options of ``launch``'s call
    (the epilogue fusion keeps the producer's tile grid, the prologue fusion the consumer's); it
    is defined where that kernel was (which stays beside it where it is launched elsewhere too),
    the other kernel goes where nothing else launches it, and the intermediate's allocation
    goes. Returns the new module, the notes and the launch that is gone (its grid name may be
    left unused), or every pair's reason it was not fused. Only statements that can move (no
    call, nothing rebinding what the producer's call reads) may stand between the two."""
    reasons: list[str] = []
    taken = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        for prod, cons in zip(facts.launches, facts.launches[1:]):
            between = facts.body[prod.index + 1:cons.index]
            if not movable(between):
                continue
            rebound: set[str] = set()
            for st in between:
                rebound |= set(assigned_names(st))
            if rebound & read_names(prod.call):
                continue  # the producer's arguments are read where the consumer launched
            try:
                kernel, params, tensor, notes = plan(facts, prod, cons, kernels, taken)
            except FusionError as exc:
                reasons.append(f"{prod.kernel} -> {cons.kernel}: {exc}")
                continue
            kept, gone = (prod, cons) if launch == "producer" else (cons, prod)
            call = kept.call.with_changes(
                func=kept.call.func.with_changes(value=cst.Name(kernel.name.value)),  # type: ignore[attr-defined]
                args=launch_args(params) + option_args(kept))
            edits: dict[int, Any] = {id(prod.stmt): cst.RemoveFromParent(),
                                     id(cons.stmt): cons.stmt.with_changes(body=[cst.Expr(call)])}
            edits.update(dead_allocations(facts, [tensor], {id(prod.stmt), id(cons.stmt)}))
            counts = launch_counts(module, kernels)
            new_body: list[Any] = []
            for st in module.body:
                name = st.name.value if isinstance(st, cst.FunctionDef) else None
                if name == kept.kernel:
                    new_body.append(kernel)
                    if counts.get(name, 0) > 1:
                        new_body.append(st)
                elif name != gone.kernel or counts.get(name, 0) > 1:
                    new_body.append(st)
            module = fix_commas(module.with_changes(body=new_body).visit(Edits(statements=edits)))
            return module, notes, gone
    return reasons


def is_docstring(stmt: cst.BaseStatement) -> bool:
    """Whether ``stmt`` is a bare string (a docstring)."""
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def fused_name(names: list[str], taken: set[str]) -> str:
    """``scale_bias_gelu_kernel`` from ``scale_kernel``, ``bias_kernel``, ``gelu_kernel``."""
    stems = [n[:-len("_kernel")] if n.endswith("_kernel") else n for n in names]
    stems = [s.lstrip("_") or s for s in stems]
    return fresh_name("_".join(stems) + "_kernel", set(taken))


def order_params(params: list[FusedParam]) -> list[FusedParam]:
    """Plain parameters first, then constexprs, then parameters with defaults (valid Python)."""
    plain = [p for p in params if not p.constexpr and p.param.default is None]
    const = [p for p in params if p.constexpr and p.param.default is None]
    dflt = [p for p in params if p.param.default is not None]
    return plain + const + dflt


def build_params(params: list[FusedParam]) -> cst.Parameters:
    """The fused kernel's parameter list, one per line as the first kernel wrote them."""
    out = []
    for i, p in enumerate(params):
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(params) - 1 else cst.MaybeSentinel.DEFAULT
        out.append(p.param.with_changes(comma=comma))
    return cst.Parameters(params=out)


def launch_args(params: list[FusedParam]) -> list[cst.Arg]:
    """Launch arguments for ``params``: positional for plain ones, keywords for the rest;
    parameters left at their default are not passed."""
    args: list[cst.Arg] = []
    for p in params:
        if p.host is None:
            continue
        if p.constexpr or p.param.default is not None:
            args.append(keyword_arg(p.name, p.host))
        else:
            args.append(cst.Arg(p.host))
    for i, a in enumerate(args[:-1]):
        args[i] = a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return args


def plan_chain(host: HostFacts, chain: list[Launch], kernels: dict[str, cst.FunctionDef],
               temps: dict[str, str], taken: set[str]) -> ChainPlan:
    """Fuse the kernels of ``chain`` (same grid, launch order) into one; raises
    :class:`FusionError` with the reason when it cannot."""
    merger = _Merger(host, temps)
    names = [lc.kernel for lc in chain]
    for i, lc in enumerate(chain):
        fn = kernels[lc.kernel]
        if any(is_autotune_decorator(d) for d in fn.decorators):
            raise FusionError(f"kernel {lc.kernel} is autotuned; its configs would not fit the fused kernel")
        merger.add(fn, lc, first=i == 0)
    merger.check_done()
    params = order_params(merger.params)
    first = kernels[chain[0].kernel]
    name = fused_name(names, taken | merger.taken)
    body = merger.body
    if body:
        body[0] = body[0].with_changes(leading_lines=[  # type: ignore[attr-defined]
            *getattr(body[0], "leading_lines", []),
            comment_line(f"fused from {', '.join(names)}: one launch; "
                         + (f"{', '.join(sorted(set(temps)))} stay on chip" if temps else "no intermediate tensor"))])
    kernel = with_body(first.with_changes(name=cst.Name(name), params=build_params(params)), body)
    notes = [f"fused {len(chain)} launches of {', '.join(names)} over the grid `{code_of(chain[0].grid)}` into one "
             f"kernel {name}"]
    if temps:
        kept = [t for t in temps if t not in merger.recomputed]
        if kept:
            notes.append(f"the intermediate(s) {', '.join(kept)} became local values (no global-memory round trip)")
        if merger.recomputed:
            notes.append(f"the intermediate(s) {', '.join(sorted(set(merger.recomputed)))} are recomputed where they "
                         "are read, from the inputs they were computed from, instead of being stored and loaded")
    opts = {k: code_of(a.value) for lc in chain for k, a in lc.options.items()}
    firsts = {k: code_of(a.value) for k, a in chain[0].options.items()}
    if opts != firsts:
        notes.append(f"launch options of the first launch kept ({firsts or 'none'})")
    return ChainPlan(kernel=kernel, params=params, launches=chain, temps=list(temps), notes=notes)
