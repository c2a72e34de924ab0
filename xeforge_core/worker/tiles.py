"""What one kernel launch does with its sizes: grid, integer arguments, tiles and loop trips.

A *launch fact* is the JSON-able record of one launch that the verifier's size choice works
from (``xeforge_core.sizes``)::

    {"kernel": "matmul_kernel", "occurrence": 0, "grid": [3, 2, 1],
     "scalars": {"M": 161, "N": 97, "K": 73, "stride_am": 73, ...},
     "constants": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
     "tiles": {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, "axis_tiles": {"0": "BLOCK_M", "1": "BLOCK_N"},
     "loops": [{"line": 31, "trips": 3, "step": 32, "extent": 73, "partial": true}]}

``occurrence`` numbers the launches of one kernel within one call. ``tiles`` are the constexprs
the kernel's source uses as a tile: a ``tl.arange`` extent, a ``range`` step, a dimension of a
``tl.zeros``/``tl.full`` block (``None`` when the source cannot be read); ``axis_tiles`` names, per launch-grid axis, the tile its program
id is multiplied by (``pid_m * BLOCK_M``); ``axes_read`` the axes whose ``tl.program_id`` the
kernel reads at all (``None`` when the source cannot be read). ``loops`` are the ``for``
loops of the kernel's body whose bounds can be evaluated from the launch's integer arguments
alone (``range(0, K, BLOCK_K)``, ``tl.range(0, tl.cdiv(K, BLOCK_K))``, bounds computed in
simple assignments first), and the counted ``while`` loops (``t = 0; while t < T: ...; t += 1``):
``trips`` is the number of iterations, ``partial`` whether the last
one covers less than a whole tile (``extent`` not a multiple of ``step``; for a unit-step loop
over ``cdiv(X, B)`` tiles, ``X`` not a multiple of ``B``), ``None`` when that cannot be told. A
loop whose bounds depend on a program id or a tensor is left out. Nothing here runs a kernel:
the source is read with ``ast``.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

from xeforge_core.worker.astutil import dotted_name

#: Most launch facts kept per call (a forward() that launches a kernel per layer repeats itself).
MAX_FACTS = 32


def python_function(fn: Any) -> Any:
    """The Python function of a Triton kernel (``JITFunction``, the interpreter's
    ``InterpretedFunction``, or an autotuner or heuristics wrapper around one); ``None`` when
    ``fn`` is none of these."""
    py = getattr(fn, "fn", None)
    while py is not None and not inspect.isfunction(py):  # an autotuner or heuristics wrapper
        py = getattr(py, "fn", None)
    return py


def function_source(py: Any) -> tuple[str, int] | None:
    """``(source, line of its first source line in its file)`` of a Python function, decorators
    included; ``None`` where ``inspect`` cannot read it."""
    try:
        lines, first = inspect.getsourcelines(py)
    except (OSError, TypeError):
        return None
    return "".join(lines), max(1, first)


def kernel_sources(jit_functions: list[Any]) -> dict[str, tuple[str, int]]:
    """``{kernel name: (source, line of its first source line in its file)}`` of Triton kernels
    (``JITFunction`` or the interpreter's ``InterpretedFunction``; the Python function is read
    with ``inspect``, decorators included). Kernels whose source cannot be read are left out."""
    out: dict[str, tuple[str, int]] = {}
    for fn in jit_functions:
        py = python_function(fn)
        name = getattr(py, "__name__", None)
        found = function_source(py) if name else None
        if found is not None:
            out[name] = found
    return out


def jit_callees(py: Any, *, depth: int = 3) -> dict[str, tuple[str, int]]:
    """The ``@triton.jit`` functions the kernel ``py`` (a Python function) calls, by the callee
    as its source writes it (``helper``, ``language.VarMean.forward``: names and attributes
    resolved through the globals of the function that calls it, as the compiler resolves them),
    with their sources; callees' callees too, ``depth`` levels down. Triton's own library
    (``tl.sum``, ``tl.cdiv``: jit functions of the ``triton`` package) and functions whose source
    cannot be read are left out."""
    out: dict[str, tuple[str, int]] = {}
    todo = [(py, 0)]
    seen = {id(py)}
    while todo:
        fn, level = todo.pop()
        found = function_source(fn)
        if found is None or level >= depth:
            continue
        try:
            tree = ast.parse(textwrap.dedent(found[0]))
        except SyntaxError:
            continue
        scope = getattr(fn, "__globals__", {})
        for node in ast.walk(tree):
            text = dotted_name(node.func) if isinstance(node, ast.Call) else ""
            if not text or text in out:
                continue
            head, *rest = text.split(".")
            try:  # attributes of whatever the globals hold: a property may raise anything
                value = scope.get(head)
                for attr in rest:
                    value = getattr(value, attr, None)
                callee = python_function(value)
            except Exception:  # noqa: BLE001 - not a jit function, whatever went wrong reading it
                continue
            if callee is None or str(getattr(callee, "__module__", "")).split(".")[0] == "triton":
                continue  # tl.sum, tl.cdiv, tl.flip: Triton's own library, not the kernel's tiling
            source = function_source(callee)
            if source is None:
                continue
            out[text] = source
            if id(callee) not in seen:
                seen.add(id(callee))
                todo.append((callee, level + 1))
    return out


class _Eval:
    """Integer evaluation of loop bounds over a launch's integer arguments."""

    def __init__(self, env: dict[str, int]) -> None:
        self.env = env

    def value(self, node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.value(node.operand)
            return -v if v is not None else None
        if isinstance(node, ast.BinOp):
            a, b = self.value(node.left), self.value(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv) and b:
                return a // b
            if isinstance(node.op, ast.Mod) and b:
                return a % b
            return None
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = [self.value(a) for a in node.args]
            if node.keywords or any(a is None for a in args):
                return None
            if name == "cdiv" and len(args) == 2 and args[1]:
                return -(-args[0] // args[1])  # type: ignore[operator]
            if name in ("min", "minimum") and args:
                return min(args)  # type: ignore[type-var]
            if name in ("max", "maximum") and args:
                return max(args)  # type: ignore[type-var]
            if name == "next_power_of_2" and len(args) == 1:
                return 1 << max(0, int(args[0] - 1).bit_length())  # type: ignore[operator]
        return None


def _is_range(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return name in ("range", "static_range")


def _cdiv_parts(node: ast.AST, ev: _Eval, defs: dict[str, ast.expr]) -> tuple[int, int] | None:
    """``(X, B)`` of a ``cdiv(X, B)`` bound (also written ``(X + B - 1) // B``, or held in a name
    assigned so in ``defs``)."""
    if isinstance(node, ast.Name) and node.id in defs:
        return _cdiv_parts(defs[node.id], ev, {})
    if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "cdiv" \
            and len(node.args) == 2:
        x, b = ev.value(node.args[0]), ev.value(node.args[1])
        return (x, b) if x is not None and b else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        b = ev.value(node.right)
        top = ev.value(node.left)
        if b and top is not None and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Sub):
            return top - b + 1, b  # (X + B - 1) // B
    return None


def _loop_trips(node: ast.AST, ev: _Eval, defs: dict[str, ast.expr]) -> dict[str, Any] | None:
    """``{"trips", "step", "extent", "partial"}`` of a ``for ... in range(...)`` loop whose
    bounds ``ev`` can evaluate, else ``None``."""
    if not (isinstance(node, ast.For) and _is_range(node.iter)):
        return None
    call = node.iter
    assert isinstance(call, ast.Call)
    args = list(call.args)[:3]
    if not args:
        return None
    start_node, stop_node = (None, args[0]) if len(args) == 1 else (args[0], args[1])
    start = 0 if start_node is None else ev.value(start_node)
    step = ev.value(args[2]) if len(args) == 3 else 1
    return _trips(start, stop_node, ev.value(stop_node), step, ev, defs)


def _while_trips(node: ast.AST, before: list[ast.stmt], ev: _Eval, defs: dict[str, ast.expr]) -> dict[str, Any] | None:
    """The same for a counted ``while`` loop: ``while c < STOP:`` (or ``<=``) whose body steps
    ``c += STEP`` once at its top level, writes ``c`` nowhere else and has no ``break``, with
    ``c = START`` the last write of ``c`` among the statements ``before`` it in its block
    (``t = 0; while t < T: ...; t += 1``; a later ``c += 3``, a branch or a loop that writes it
    leaves the start unknown); else ``None``."""
    if not (isinstance(node, ast.While) and not node.orelse and isinstance(node.test, ast.Compare)):
        return None
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], (ast.Lt, ast.LtE)) or not isinstance(test.left, ast.Name):
        return None
    counter = test.left.id
    steps = [s for s in node.body if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add)
             and isinstance(s.target, ast.Name) and s.target.id == counter]
    writes = sum(_stores(s, counter) for s in node.body)
    if len(steps) != 1 or writes != 1 or any(isinstance(n, ast.Break) for s in node.body for n in ast.walk(s)):
        return None
    init = None
    for stmt in reversed(before):  # the counter's last write before the loop must be a plain c = START
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == counter:
            init = stmt.value
            break
        if _stores(stmt, counter):
            return None  # c += 3, a branch or an earlier loop that moves it: no one start
    if init is None:
        return None
    stop = ev.value(test.comparators[0])
    if stop is not None and isinstance(test.ops[0], ast.LtE):
        stop += 1
    return _trips(ev.value(init), test.comparators[0], stop, ev.value(steps[0].value), ev, defs)


def _stores(node: ast.AST, name: str) -> int:
    """How many times ``node`` writes ``name`` (assignment targets, ``+=``, ``for`` targets)."""
    return sum(1 for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store))


def _trips(start: int | None, stop_node: ast.AST, stop: int | None, step: int | None, ev: _Eval,
           defs: dict[str, ast.expr]) -> dict[str, Any] | None:
    """``{"trips", "step", "extent", "partial"}`` of a loop from ``start`` below ``stop`` (written
    ``stop_node``) by ``step``; ``None`` when a bound is unknown or the step is not positive."""
    if start is None or stop is None or not step or step < 0:
        return None
    extent = max(0, stop - start)
    trips = -(-extent // step)
    partial: bool | None = None
    if step > 1:
        partial = extent % step != 0
    else:
        parts = _cdiv_parts(stop_node, ev, defs)
        if parts is not None and start == 0:
            extent, step = parts
            partial = extent % step != 0
    return {"trips": trips, "step": step, "extent": extent, "partial": partial}


def loop_trips(source: str, first_line: int, values: dict[str, int]) -> list[dict[str, Any]]:
    """The loops of the kernel in ``source`` whose bounds ``values`` (the launch's integer
    arguments by name) decide: ``[{"line", "trips", "step", "extent", "partial"}]`` (see the
    module docstring), ``line`` counted in the kernel's file (``first_line`` is the line
    ``source`` starts at). ``[]`` when the source does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is None:
        return []
    env = dict(values)
    ev = _Eval(env)
    defs: dict[str, ast.expr] = {}
    top_level = {id(stmt.targets[0]) for stmt in fn.body
                 if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)}
    # a name also written inside a statement (a loop, a branch, +=) has no one value to read
    nested = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
              and id(n) not in top_level}
    for name in nested:
        env.pop(name, None)
    out = []
    for index, stmt in enumerate(fn.body):  # in order: bounds computed first (num_k = tl.cdiv(K, BLOCK_K)) are known
        if id(getattr(stmt, "targets", [None])[0]) in top_level:
            target = stmt.targets[0].id  # type: ignore[attr-defined]
            v = ev.value(stmt.value)  # type: ignore[attr-defined]
            if v is None or target in nested:
                env.pop(target, None)
                defs.pop(target, None)
            else:
                env[target] = v
                defs[target] = stmt.value  # type: ignore[attr-defined]
            continue
        found = [(node, _loop_trips(node, ev, defs)) for node in ast.walk(stmt)]
        found += [(node, _while_trips(node, before, ev, defs)) for node, before in _whiles(stmt, fn.body[:index])]
        out += sorted(({"line": first_line + node.lineno - 1, **loop} for node, loop in found if loop is not None),
                      key=lambda loop: loop["line"])
    return out


def _whiles(stmt: ast.stmt, before: list[ast.stmt]) -> list[tuple[ast.While, list[ast.stmt]]]:
    """``(loop, the statements before it in its block)`` of each ``while`` loop that is ``stmt``
    (preceded by ``before`` in the kernel's body) or lies in a statement list within it."""
    out: list[tuple[ast.While, list[ast.stmt]]] = [(stmt, before)] if isinstance(stmt, ast.While) else []
    for node in ast.walk(stmt):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                out += [(s, block[:i]) for i, s in enumerate(block) if isinstance(s, ast.While)]
    return out


def _program_id_axis(node: ast.AST) -> int | None:
    """The axis of ``tl.program_id(k)`` (also ``axis=k``, and cast: ``tl.program_id(0).to(...)``)."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to":
        node = node.func.value
    if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "program_id"):
        return None
    arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "axis"), None)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, int) else None


def tile_roles(source: str, helpers: dict[str, str] | None = None,
               _depth: int = 0) -> tuple[set[str], dict[int, str]]:
    """``(tiles, axis_tiles)`` of the kernel in ``source``: the names it uses as a tile (a
    ``tl.arange`` extent, a ``range`` step, a dimension of a ``tl.zeros``/``tl.full`` block, and
    the names such a tile is an alias of: ``WIDTH: tl.constexpr = N``, and the names passed to a
    helper ``@triton.jit`` function in ``helpers``, ``{callee as written: source}``
    (``jit_callees``), where that helper tiles with them), and per program-id axis the tile or
    constexpr parameter its program id is multiplied by. Empty when it does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return set(), {}
    tiles: set[str] = set()
    pids: dict[str, int] = {}
    aliases: dict[str, str] = {}  # WIDTH: tl.constexpr = N: a tile named WIDTH is N too
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Name):
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                getattr(node, "target", None)
            if isinstance(target, ast.Name):
                aliases[target.id] = node.value.id
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            axis = _program_id_axis(node.value)
            if axis is not None:
                pids[node.targets[0].id] = axis
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "arange" and len(node.args) == 2:
            tiles |= {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
        elif name in ("range", "static_range") and len(node.args) == 3 and isinstance(node.args[2], ast.Name):
            tiles.add(node.args[2].id)
        elif name in ("zeros", "full") and node.args and isinstance(node.args[0], (ast.Tuple, ast.List)):
            tiles |= {e.id for e in node.args[0].elts if isinstance(e, ast.Name)}
        elif helpers and dotted_name(node.func) in helpers and _depth < 3:
            tiles |= _helper_tiles(node, helpers[dotted_name(node.func)], helpers, _depth)
    for name in list(tiles):
        seen = {name}
        while name in aliases and aliases[name] not in seen:
            name = aliases[name]
            seen.add(name)
            tiles.add(name)
    # a constexpr a program id is multiplied by is that axis's tile even where no tl.arange spans
    # it (lightllm's embedding: `tl.program_id(0) * BLOCK_N`, then a loop over BLOCK_N in steps)
    # (a block by its name: a constexpr size such as `pid * N_COLS` is a row's offset, not a tile)
    constexprs = {a.arg for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                  for a in f.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
                  and re.search(r"BLOCK|TILE", a.arg)}
    axis_tiles: dict[int, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
            continue
        for a, b in ((node.left, node.right), (node.right, node.left)):
            axis = pids.get(a.id) if isinstance(a, ast.Name) else _program_id_axis(a)
            if axis is not None and isinstance(b, ast.Name) and (b.id in tiles or b.id in constexprs):
                axis_tiles.setdefault(axis, b.id)
    return tiles, axis_tiles


def _helper_tiles(call: ast.Call, source: str, helpers: dict[str, str], depth: int) -> set[str]:
    """The names a call passes to a helper's parameters that the helper tiles with."""
    bound = _bound(call, source)
    if bound is None:
        return set()
    inner, _ = tile_roles(source, helpers, depth + 1)
    return {n.id for param, value in bound if param in inner for n in ast.walk(value) if isinstance(n, ast.Name)}


def _bound(call: ast.Call, source: str) -> list[tuple[str, ast.expr]] | None:
    """``(parameter, argument expression)`` pairs of a call of the helper whose source is
    ``source`` (positional, then by keyword); ``None`` when the source does not parse."""
    try:
        fn = next(n for n in ast.parse(textwrap.dedent(source)).body if isinstance(n, ast.FunctionDef))
    except (SyntaxError, StopIteration):
        return None
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]


def axes_read(source: str) -> set[int] | None:
    """The launch-grid axes whose ``tl.program_id`` the kernel in ``source`` reads anywhere (a
    kernel that reads none of axis 0 runs the same work in every program of it); ``None`` when
    the source does not parse."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    return {a for node in ast.walk(tree) if (a := _program_id_axis(node)) is not None}


def helper_loops(source: str, helpers: dict[str, tuple[str, int]], values: dict[str, int],
                 _depth: int = 0) -> list[dict[str, Any]]:
    """The loops (as ``loop_trips`` gives them, lines in the helper's file) of the ``@triton.jit``
    helpers that the kernel in ``source`` calls (``helpers``: ``jit_callees``), and of the helpers
    they call, three levels down, evaluated with the launch's integer arguments ``values`` bound
    to each helper's parameters where a call passes them by name (``forward(x_size,
    x_block_size)``): a kernel that walks its rows in a helper has its loop trips counted as one
    that walks them itself. A helper loop run by several calls (``tiled_sum(x, n)`` and
    ``tiled_sum(y, m)``) is one loop whose trips add up, so that every size any call walks moves it."""
    found: dict[int, dict[str, Any]] = {}
    for loop in _helper_loops(source, helpers, values, _depth, set()):
        have = found.get(loop["line"])
        if have is None:
            found[loop["line"]] = dict(loop)
        else:
            have["trips"] += loop["trips"]
            both = (have.get("partial"), loop.get("partial"))
            have["partial"] = True if True in both else (None if None in both else False)
    return [found[line] for line in sorted(found)]


def _helper_loops(source: str, helpers: dict[str, tuple[str, int]], values: dict[str, int], depth: int,
                  done: set[tuple[str, tuple]]) -> list[dict[str, Any]]:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    out: list[dict[str, Any]] = []
    # a name the caller assigns (n = n // 2) no longer holds the value it was launched with
    written = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        text = dotted_name(node.func) if isinstance(node, ast.Call) else ""
        if text not in helpers or depth >= 3:
            continue
        helper_src, first = helpers[text]
        bound = _bound(node, helper_src)  # type: ignore[arg-type]
        if bound is None:
            continue
        env = {p: values[v.id] for p, v in bound if isinstance(v, ast.Name) and v.id in values and v.id not in written}
        key = (text, tuple(sorted(env.items())))
        if key in done:  # the same call twice (a loop around it): its loops once
            continue
        done.add(key)
        out += [loop for loop in loop_trips(helper_src, first, env) if loop.get("trips") is not None]
        out += _helper_loops(helper_src, helpers, env, depth + 1, done)
    return out


def launch_facts(launches: list[Any], sources: dict[str, tuple[str, int]]) -> list[dict[str, Any]]:
    """One launch fact (see the module docstring) per recorded launch (``LaunchRecord``), in
    launch order, at most ``MAX_FACTS``. A launch's kernel is read from the function it launched
    (``LaunchRecord.function``) where the record has it, else from ``sources`` by name; its
    helpers are the ``@triton.jit`` functions it calls (``jit_callees``) and those of ``sources``,
    and their loops count as the kernel's (``helper_loops``)."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    loops_cache: dict[tuple[str, int, tuple], list[dict[str, Any]]] = {}
    read_cache: dict[tuple[str, int], tuple[Any, ...]] = {}
    for rec in launches[:MAX_FACTS]:
        occurrence = seen.get(rec.kernel, 0)
        seen[rec.kernel] = occurrence + 1
        py = getattr(rec, "function", None)
        which = (rec.kernel, id(py))
        if which not in read_cache:
            src = (function_source(py) if py is not None else None) or sources.get(rec.kernel)
            helpers = {n: v for n, v in sources.items() if n != rec.kernel}
            if py is not None:
                helpers.update(jit_callees(py))
            role = tile_roles(src[0], {n: v[0] for n, v in helpers.items()}) if src else None
            read_cache[which] = (src, helpers, role, axes_read(src[0]) if src else None)
        src, helpers, role, read = read_cache[which]
        values = {**rec.scalars, **rec.constants}
        key = (*which, tuple(sorted(values.items())))
        if key not in loops_cache:
            loops_cache[key] = (loop_trips(src[0], src[1], values) + helper_loops(src[0], helpers, values)) \
                if src else []
        out.append({"kernel": rec.kernel, "occurrence": occurrence,
                    "grid": list(rec.grid) if rec.grid is not None else None,
                    "scalars": dict(rec.scalars), "constants": dict(rec.constants),
                    "tiles": {n: v for n, v in rec.constants.items() if n in role[0]} if role else None,
                    "axis_tiles": {str(a): n for a, n in role[1].items() if n in rec.constants} if role else {},
                    "axes_read": sorted(read) if read is not None else None,
                    "loops": loops_cache[key]})
    return out
