"""FLOP of the matrix products a KernelBench-style problem's ``Model.forward`` does, read
statically from the problem module (nothing is imported or run).

Counted, at ``2 * M * N * K`` per product (the multiply-add of every output over the inner
dimension):

* ``torch.matmul(a, b)`` / ``torch.mm`` / ``torch.bmm`` / ``a @ b`` on tensors ``forward``
  receives: ``2 * numel(a) * b.shape[-1]`` (``a`` is ``[..., M, K]``, ``b`` is ``[..., K, N]``);
* ``self.layer(x)`` where ``__init__`` made ``self.layer = nn.Linear(in_features, out_features)``:
  ``2 * numel(x) * out_features`` (``x`` the tensor ``forward`` received, or, after it was
  rebound, the first input: KernelBench's level-2 problems start with their GEMM).

Shapes come from ``get_inputs()`` (``torch.randn(M, K)``, also through local names), the
``Linear`` sizes from ``get_init_inputs()`` bound to ``__init__``'s parameters, every size from
the module's integer constants with ``overrides`` applied (a scaled variant). Products whose
shapes cannot be read are left out; ``None`` when none can.
"""

from __future__ import annotations

import ast
import math
from typing import Any

_MATMUL = {"matmul", "mm", "bmm"}
_FACTORIES = {"randn", "rand", "zeros", "ones", "empty", "randint", "full"}


def _constants(tree: ast.Module, overrides: dict[str, Any]) -> dict[str, int]:
    env: dict[str, int] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target = stmt.targets[0]
        pairs = [(target, stmt.value)]
        if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(target.elts) == len(stmt.value.elts):
            pairs = list(zip(target.elts, stmt.value.elts))  # M, K, N = 32, 16, 8
        for name, node in pairs:
            v = _value(node, env) if isinstance(name, ast.Name) else None
            if v is not None:
                env[name.id] = v  # type: ignore[union-attr]
    env.update({k: int(v) for k, v in overrides.items() if isinstance(v, int)})
    return env


def _value(node: ast.AST, env: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        a, b = _value(node.left, env), _value(node.right, env)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return a // b if b else None
    return None


def _shape(call: ast.Call, env: dict[str, int]) -> list[int] | None:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in _FACTORIES:
        return None
    args = list(call.args)
    if name == "randint":
        size = next((k.value for k in call.keywords if k.arg == "size"), args[-1] if args else None)
        args = [size] if size is not None else []
    if name == "full":
        args = args[:1]
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    dims = [_value(a, env) for a in args]
    return None if not dims or any(d is None for d in dims) else dims  # type: ignore[return-value]


def _dtype(tree: ast.AST) -> str:
    text = ast.unparse(tree)
    return "bf16" if "bfloat16" in text else "fp16" if ("float16" in text or ".half" in text) else "fp32"


def _returned(fn: ast.FunctionDef) -> list[ast.expr]:
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, (ast.List, ast.Tuple)):
            return list(node.value.elts)
    return []


def estimate_gemm_flop(source: str, overrides: dict[str, Any] | None = None,
                       inputs_source: str | None = None) -> tuple[float, str] | None:
    """``(FLOP per forward call, input dtype key fp32/fp16/bf16)`` of the products in the module
    docstring, ``None`` when the module has none that can be read. ``source`` holds ``Model``;
    ``inputs_source`` (default ``source``) the ``get_inputs()`` the call is timed with, whose
    constants, with ``overrides``, take precedence."""
    try:
        tree = ast.parse(source)
        inputs_tree = ast.parse(inputs_source) if inputs_source is not None else tree
    except (SyntaxError, ValueError):
        return None
    env = {**_constants(tree, {}), **_constants(inputs_tree, dict(overrides or {}))}
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    funcs.update({n.name: n for n in inputs_tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"})
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None or "get_inputs" not in funcs:
        return None
    methods = {n.name: n for n in model.body if isinstance(n, ast.FunctionDef)}
    forward, init = methods.get("forward"), methods.get("__init__")
    if forward is None:
        return None
    local: dict[str, list[int]] = {}
    for stmt in funcs["get_inputs"].body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call):
            got = _shape(stmt.value, env)
            if got is not None:
                local[stmt.targets[0].id] = got
    shapes: list[list[int] | None] = []
    for el in _returned(funcs["get_inputs"]):
        shapes.append(local.get(el.id) if isinstance(el, ast.Name) else _shape(el, env) if isinstance(el, ast.Call)
                      else None)
    params = [a.arg for a in forward.args.args[1:]]
    inputs = {p: s for p, s in zip(params, shapes) if s is not None}
    linears: dict[str, int] = {}
    if init is not None and "get_init_inputs" in funcs:
        init_env = dict(env)
        for p, el in zip([a.arg for a in init.args.args[1:]], _returned(funcs["get_init_inputs"])):
            v = _value(el, env)
            if v is not None:
                init_env[p] = v
        for node in ast.walk(init):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Attribute):
                f = node.value.func
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) == "Linear":
                    outs = node.value.args[1] if len(node.value.args) > 1 else next(
                        (k.value for k in node.value.keywords if k.arg == "out_features"), None)
                    v = _value(outs, init_env) if outs is not None else None
                    if v is not None:
                        linears[node.targets[0].attr] = v
    first = shapes[0] if shapes else None

    def tensor(node: ast.AST) -> list[int] | None:
        return inputs.get(node.id) if isinstance(node, ast.Name) else None

    flop = 0.0
    for node in ast.walk(forward):
        a = b = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            a, b = tensor(node.left), tensor(node.right)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _MATMUL and len(node.args) == 2:
                a, b = tensor(node.args[0]), tensor(node.args[1])
            elif isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                    and node.func.attr in linears and node.args:
                x = tensor(node.args[0]) or first
                if x is not None:
                    flop += 2.0 * math.prod(x) * linears[node.func.attr]
                continue
        if a is not None and b is not None and len(b) >= 2:
            flop += 2.0 * math.prod(a) * b[-1]
    return (flop, _dtype(funcs["get_inputs"])) if flop else None


__all__ = ["estimate_gemm_flop"]
