"""memory_access codemod, part 2: flat elementwise kernels get the target's block and warps.

Recognised: a kernel whose offsets are ``pid * BLOCK + tl.arange(0, BLOCK)`` (``pid =
tl.program_id(axis)``, also through ``block_start = pid * BLOCK``), with no loop, no 2-D tile
and no reduction of its block, where each launch passes ``BLOCK=B`` and the grid's ``axis``
divides by the same ``B`` (``triton.cdiv(n, B)``, ``(n + B - 1) // B``, or a ``lambda meta``
grid reading ``meta["BLOCK"]``); each launch (from a helper, inside an ``if``, from several
places) is rewritten on its own. On a grid of several axes (rows x column blocks) the block
runs along one row: it becomes ``min(B', triton.next_power_of_2(n))``. A 128- or 256-element block
moves 256-512 bytes a program: the grid is tens of thousands of tiny programs and each thread
issues one short load. The rewrite sets ``B`` (the host variable when it is assigned a
literal used only here, else the literal at both places) and ``num_warps`` to the first entry
of the target's ``elementwise`` configs (on the H200: 4096 elements over 8 warps, 16 elements
a thread, two 16-byte vectors of fp16; HOPPER.md "16-byte accesses per thread ... several
independent loads in flight"). Kernels already at least that large are left as they are.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from xeforge_core.codemods.common import (
    PROGRAM_ID,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    is_constexpr_param,
    keyword_arg,
)
from xeforge_core.codemods.host import grid_view, host_facts, host_functions
from xeforge_core.codemods.kernel_edit import (
    TL_ARANGE,
    Edits,
    body_of,
    calls_named,
    indexes_2d_tiles,
    module_kernels,
    once_defs,
    pointer_terms,
    read_names,
    simple_assign,
    walk,
)
from xeforge_core.codemods.spaces import SpaceError, default_config

_CDIV = {"triton.cdiv", "cdiv", "tl.cdiv"}
#: calls whose result depends on how many elements a program holds
_PER_PROGRAM = {f"tl.{n}" for n in ("sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "cumsum", "cumprod",
                                    "associative_scan", "atomic_add", "atomic_max", "atomic_min")}


def _ceil_div(el: cst.BaseExpression) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``(n, d)`` of a launch-grid axis ``triton.cdiv(n, d)`` or ``(n + d - 1) // d``."""
    if isinstance(el, cst.Call) and dotted_name(el.func) in _CDIV and len(el.args) == 2:
        return el.args[0].value, el.args[1].value
    if isinstance(el, cst.BinaryOperation) and isinstance(el.operator, cst.FloorDivide):
        left = el.left.with_changes(lpar=[], rpar=[])
        if isinstance(left, cst.BinaryOperation) and isinstance(left.operator, cst.Subtract) \
                and int_value(left.right) == 1 and isinstance(left.left, cst.BinaryOperation) \
                and isinstance(left.left.operator, cst.Add) and code_of(left.left.right) == code_of(el.right):
            return left.left.left, el.right
    return None


def _flat_block(fn: cst.FunctionDef) -> tuple[str, int] | None:
    """``(BLOCK, axis)`` of ``offs = tl.program_id(axis) * BLOCK + tl.arange(0, BLOCK)``, else
    ``None``."""
    constexprs = {p.name.value for p in fn.params.params if is_constexpr_param(p)}
    stmts = body_of(fn)
    defs = once_defs(stmts, fn.body)
    for s in stmts:
        a = simple_assign(s)
        if a is None:
            continue
        terms = pointer_terms(a[1])
        if len(terms) != 2:
            continue
        # `block_start = pid * BLOCK` ... `block_start + tl.arange(0, BLOCK)`: follow the name
        terms = [defs[t.value] if isinstance(t, cst.Name) and isinstance(defs.get(t.value), cst.BinaryOperation)
                 else t for t in terms]
        aranges = [t for t in terms if isinstance(t, cst.Call) and dotted_name(t.func) in TL_ARANGE]
        prods = [t for t in terms if isinstance(t, cst.BinaryOperation) and isinstance(t.operator, cst.Multiply)]
        if len(aranges) != 1 or len(prods) != 1:
            continue
        ar = aranges[0]
        if len(ar.args) != 2 or int_value(ar.args[0].value) != 0 or not isinstance(ar.args[1].value, cst.Name):
            continue
        block = ar.args[1].value.value
        p = prods[0]
        sides = [p.left, p.right]
        pid_side = [x for x in sides if (isinstance(x, cst.Call) and dotted_name(x.func) in PROGRAM_ID) or (
            isinstance(x, cst.Name) and isinstance(defs.get(x.value), cst.Call)
            and dotted_name(defs[x.value].func) in PROGRAM_ID)]  # type: ignore[union-attr]
        blk_side = [x for x in sides if isinstance(x, cst.Name) and x.value == block]
        if pid_side and blk_side and block in constexprs:
            call = pid_side[0] if isinstance(pid_side[0], cst.Call) else defs[pid_side[0].value]  # type: ignore[union-attr]
            axis = int_value(call.args[0].value) if call.args else None  # type: ignore[union-attr]
            return (block, axis) if axis is not None else None
    return None


def apply_flat(module: cst.Module, target: str, arch: str | None, notes: list[str], reasons: list[str],
               touched: set[str] | None = None) -> cst.Module:
    """Rewrite every recognised flat elementwise launch of ``module`` (module docstring)."""
    touched = touched if touched is not None else set()
    skip = set(touched)
    kernels = module_kernels(module)
    stmt_edits: dict[int, Any] = {}
    cfg = None
    for fn in host_functions(module):
        facts = host_facts(fn, kernels)
        host_defs = once_defs(facts.body, fn.body)
        for lc in facts.all_launches():
            kfn = kernels[lc.kernel]
            # the kernel itself is not changed: each of its launches is rewritten on its own
            if lc.kernel in skip:
                continue
            if any(isinstance(n, (cst.For, cst.While)) for n in walk(kfn.body)):
                continue
            found = _flat_block(kfn)
            if found is None:
                reasons.append(f"kernel {lc.kernel}: its offsets are not `pid * BLOCK + tl.arange(0, BLOCK)` "
                               "over one axis (a flat elementwise block)")
                continue
            block, axis = found
            if indexes_2d_tiles(kfn):
                reasons.append(f"kernel {lc.kernel} works on 2-D tiles; the flat rewrite sizes a 1-D block")
                continue
            if any(is_autotune_decorator(d) for d in kfn.decorators):
                reasons.append(f"kernel {lc.kernel} is autotuned: its configs own the block size")
                continue
            reduces = [c for c in calls_named(kfn.body, _PER_PROGRAM)]
            if reduces:
                reasons.append(f"kernel {lc.kernel} reduces its block (`{dotted_name(reduces[0].func)}`): each program's "
                               "partial result depends on the block size the host sized its buffers for")
                continue
            arg = lc.bound.get(block)
            if arg is None:
                reasons.append(f"kernel {lc.kernel}: {block} is not passed at the launch")
                continue
            view = grid_view(lc)
            grid_stmt = view.assign
            if view.elements is None or axis >= len(view.elements):
                axes = "" if view.elements is None else \
                    f" with {len(view.elements)} axis" + ("es" if len(view.elements) != 1 else "")
                reasons.append(f"kernel {lc.kernel}: its block runs along program-id axis {axis}, which the launch "
                               f"grid{axes} does not have as a tuple")
                continue
            el = view.elements[axis]
            split = _ceil_div(el)
            if view.is_lambda:
                # the grid reads the block from the launch's own argument: it follows a new value
                if block not in view.meta_keys:
                    reasons.append(f"kernel {lc.kernel}: the launch grid function does not read META[\"{block}\"]")
                    continue
            elif split is None or code_of(split[1]) != code_of(arg.value):
                reasons.append(f"kernel {lc.kernel}: the grid `{code_of(view.value or lc.grid)}` does not divide by the "
                               f"launch's {block}={code_of(arg.value)}")
                continue
            #: on a grid of several axes the block runs along one axis of a few hundred or thousand
            #: elements (a row): it covers that length at most
            multi = len(view.elements) > 1
            grid = view.value
            if cfg is None:
                try:
                    cfg, sid = default_config(target, arch, "elementwise")
                except SpaceError as exc:
                    reasons.append(str(exc))
                    return module
            new_block = int(next(iter(cfg["kwargs"].values())))
            warps = int(cfg["num_warps"])
            current = int_value(arg.value)
            if current is None and isinstance(arg.value, cst.Name):
                lit = host_defs.get(arg.value.value)
                current = int_value(lit) if lit is not None else None
            cur_warps = lc.options.get("num_warps")
            if current is not None and current >= new_block and cur_warps is not None:
                reasons.append(f"kernel {lc.kernel} already moves {current} elements a program")
                continue
            # the literal the launch and grid share
            var_stmt = None
            if not multi and isinstance(arg.value, cst.Name) and int_value(host_defs.get(arg.value.value)) is not None:
                var = arg.value.value
                users = [s for s in facts.body if var in read_names(s) and s is not lc.stmt and s is not grid_stmt
                         and not (simple_assign(s) and simple_assign(s)[0] == var)]
                if not users and lc.block is facts.body:
                    var_stmt = next(s for s in facts.body if simple_assign(s) and simple_assign(s)[0] == var)
            length = split[0] if split is not None else None
            value: cst.BaseExpression = cst.Integer(str(new_block))
            if multi and length is not None:
                value = cst.parse_expression(f"min({new_block}, triton.next_power_of_2({code_of(length)}))")
            new_args = []
            for a in lc.call.args:
                if a.keyword is not None and a.keyword.value == "num_warps":
                    continue
                if var_stmt is None and a is arg:
                    a = a.with_changes(value=value)
                new_args.append(a)
            extra = [keyword_arg("num_warps", cst.Integer(str(warps)))]
            for k, v in cfg.get("options", {}).items():
                extra.append(keyword_arg(k, cst.parse_expression(repr(v) if not isinstance(v, str) else f'"{v}"')))
            new_args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in new_args]
            new_args += [e.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                         for e in extra[:-1]] + [extra[-1]]
            call = lc.call.with_changes(args=new_args)
            if var_stmt is None and view.is_lambda:
                pass  # the lambda reads the new block from the launch
            elif var_stmt is None:
                new_el = cst.parse_expression(f"triton.cdiv({code_of(length)}, {code_of(value)})")  # type: ignore[arg-type]
                new_grid = grid.with_changes(elements=[e.with_changes(value=new_el) if i == axis else e  # type: ignore[union-attr]
                                                       for i, e in enumerate(grid.elements)])  # type: ignore[union-attr]
                if grid_stmt is not None:
                    stmt_edits[id(grid_stmt)] = grid_stmt.with_changes(
                        body=[grid_stmt.body[0].with_changes(value=new_grid)])  # type: ignore[attr-defined]
                else:
                    call = call.with_changes(func=call.func.with_changes(  # type: ignore[attr-defined]
                        slice=[cst.SubscriptElement(cst.Index(new_grid))]))
            else:
                stmt_edits[id(var_stmt)] = var_stmt.with_changes(
                    body=[var_stmt.body[0].with_changes(value=cst.Integer(str(new_block)))])  # type: ignore[attr-defined]
            stmt_edits[id(lc.stmt)] = lc.stmt.with_changes(body=[cst.Expr(call)])
            touched.add(lc.kernel)
            notes.append(f"kernel {lc.kernel}: {block}={code_of(value)} elements a program (was "
                         f"{current if current is not None else code_of(arg.value)}"
                         f"{f', along grid axis {axis} of {len(view.elements)}' if multi else ''}) "
                         f"with num_warps={warps} (search space {sid}, kind elementwise), so each thread issues wide "
                         "contiguous loads and the grid is a few thousand programs instead of tens of thousands")
    if not stmt_edits:
        return module

    return module.visit(Edits(statements=stmt_edits))


