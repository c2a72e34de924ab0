"""KernelAgent's format (meta-pytorch/KernelAgent): a kernel module defines
``kernel_function(...)`` instead of a model class; the worker runs it as if it were one.

KernelAgent's convention: ``problem.py`` holds the PyTorch ``Model`` with ``get_inputs()`` /
``get_init_inputs()``; the kernel module's ``kernel_function`` launches Triton kernels and is
called with the forward() inputs and, where its signature asks for them, the reference model's
parameters and configuration (``weight``, ``bias``, ``eps``, ``stride``, ...). The binding
below matches each parameter of ``kernel_function``, in order:

1. by name to a forward() input (``x`` in ``Model.forward(self, x)``);
2. by name to the reference model (``w`` and ``add_bias`` mean ``weight`` and ``bias``, as in
   KernelAgent's own harness, meta-pytorch/KernelAgent ``examples/*/test.py``; a tensor an alias
   names is not also another name's: with ``add_bias`` for ``model.bias``, ``bias`` is the next
   match, a layer's bias): an attribute (``model.eps``), a parameter or buffer whose
   dotted name ends with it (``conv.weight`` for ``weight``), ``<submodule>_<attr>``
   (``conv_weight`` -> ``model.conv.weight``), or a submodule's attribute (``model.conv.stride``
   for ``stride``), the first match in ``named_modules()`` order;
3. by name to an argument of the problem's ``Model(...)`` constructor, with the value
   ``get_init_inputs()`` gave it (``hardtanh_min`` in ``Model.__init__(self, ..., hardtanh_min)``,
   which the model keeps only inside an ``nn.Hardtanh`` as ``min_val``);
4. positionally to the next forward() input not bound yet;
5. to its default, if it has one;
6. unless it has a default or a scalar annotation (``eps: float``), positionally to the
   reference model's next parameter not bound yet, in registration order (``W``, ``b`` for an
   ``nn.Linear``'s ``weight`` and ``bias``; ``scaling_param`` for a ``scaling_factor``
   parameter): KernelAgent's harness passes the weights after the inputs, in the model's order,
   whatever the function calls them; the description says so.

A ``kernel_function(*args)`` states no names, and KernelAgent's generated tests try its
documented call patterns in turn. It is called with, in order, until one call raises no
``TypeError``: the forward() inputs, the model's parameters in registration order and its
plain number attributes in the order ``__init__`` assigns them (``x, weight, bias,
scale_factor, clamp_min, clamp_max``); the inputs and the parameters; the inputs alone. The
call that was taken is kept for every later call and named in the description.

A function that returns ``None`` wrote its first input in place (KernelAgent's convention):
it is called on a copy of that input, which is its output, so the caller's input stays as it
was (the verdict checks that inputs are untouched); the copy is part of the timed call, as it
would be for a user who needs the input afterwards.

A parameter that binds to nothing is an error naming it. The binding is described in words
(``kernel_function(x=input 0, weight=model.conv.weight)``) so the verdict says how the function
was called. The reference model is built from the problem's ``Model`` with the same seed and
weights as the baseline, so the function sees the parameters the truth was computed with.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from typing import Any

from xeforge_core.worker.formats.base import ProblemFormat

_UNBOUND = object()

#: Names KernelAgent's harness maps to another model attribute (its ``_extract_model_params``:
#: ``w`` is the first weight, ``add_bias`` the model's own ``bias``).
_ALIASES = {"w": "weight", "add_bias": "bias"}


def _plain_attr(obj: Any, name: str) -> Any:
    import torch

    value = getattr(obj, name, _UNBOUND)
    if value is _UNBOUND or isinstance(value, torch.nn.Module):
        return _UNBOUND
    if callable(value) and not isinstance(value, torch.Tensor):
        return _UNBOUND
    return value


def _model_value(model: Any, name: str, exclude: frozenset[int] = frozenset()) -> tuple[Any, str]:
    """The value of ``name`` on ``model`` (a ``torch.nn.Module``; see the module docstring,
    rule 2) and where it came from, or ``(_UNBOUND, "")``; tensors whose ``id`` is in
    ``exclude`` (claimed by another parameter) are passed over."""
    import torch

    def free(value: Any) -> bool:
        return value is not _UNBOUND and id(value) not in exclude

    value = _plain_attr(model, name)
    if free(value):
        return value, f"model.{name}"
    if name in _ALIASES:
        return _model_value(model, _ALIASES[name], exclude)
    tensors = dict(model.named_parameters())
    tensors.update(dict(model.named_buffers()))
    ends = [k for k in tensors if (k == name or k.endswith("." + name)) and id(tensors[k]) not in exclude]
    if len(ends) == 1:
        return tensors[ends[0]], f"model.{ends[0]}"
    if "_" in name:
        for i in range(1, name.count("_") + 1):
            head, tail = name.rsplit("_", i)[0], "_".join(name.rsplit("_", i)[1:])
            sub = getattr(model, head, None)
            if isinstance(sub, torch.nn.Module):
                value = _plain_attr(sub, tail)
                if free(value):
                    return value, f"model.{head}.{tail}"
    for mod_name, sub in model.named_modules():
        if not mod_name:
            continue
        value = _plain_attr(sub, name)
        if free(value):
            return value, f"model.{mod_name}.{name}"
    return _UNBOUND, ""


def _in_registration_order(model: Any) -> list[tuple[str, Any]]:
    """``model.named_parameters()`` in the order ``__init__`` assigns their top-level attributes
    (``self.conv = ...`` before ``self.scale = nn.Parameter(...)``; ``named_parameters`` lists a
    module's own parameters before its submodules'); attributes the source does not show keep
    their place after those it does."""
    order = _assignment_order(model)
    params = list(model.named_parameters())
    rank = {name: i for i, name in enumerate(order)}
    return sorted(params, key=lambda item: rank.get(item[0].split(".")[0], len(rank)))


def _assignment_order(model: Any) -> list[str]:
    """The top-level attributes ``type(model).__init__`` assigns (``self.conv = ...``), in source
    order; ``[]`` where its source cannot be read."""
    return list(_init_assignments(type(model)))


@cache
def _init_assignments(cls: type) -> tuple[str, ...]:
    """:func:`_assignment_order` for a class, its source read and parsed once (the binding runs
    on every call of the function, inside the timed region)."""
    import ast
    import textwrap

    found: list[tuple[int, int, str]] = []
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls.__init__)))
    except (OSError, TypeError, SyntaxError):
        return ()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        targets = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple | ast.List) else [t])]
        found += [(t.lineno, t.col_offset, t.attr) for t in targets if isinstance(t, ast.Attribute)
                  and isinstance(t.value, ast.Name) and t.value.id == "self"]
    order: list[str] = []
    for _, _, attr in sorted(found):  # source order (ast.walk is breadth-first)
        if attr not in order:
            order.append(attr)
    return tuple(order)


def _number_attributes(model: Any) -> list[tuple[str, Any]]:
    """The model's plain ``int``/``float`` attributes (not ``bool``), in the order ``__init__``
    assigns them."""
    out = []
    for attr in _assignment_order(model):
        value = _plain_attr(model, attr)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append((attr, value))
    return out


def calls(fn: Callable[..., Any], inputs: list[Any], forward_params: list[str], model: Any | None,
          init_args: dict[str, Any] | None = None, only: int | None = None
          ) -> list[tuple[list[Any], dict[str, Any], str]]:
    """The calls to try, in order (module docstring): one :func:`bind` for a function that names
    its parameters; for a ``*args`` one, the inputs followed by the model's parameters and number
    attributes, by its parameters, and by nothing (the patterns that differ). ``only``: the
    index of the one pattern to bind (the one a first call took). Raises ``TypeError`` as
    :func:`bind` does."""
    has_var = any(p.kind is p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values())
    if not has_var or model is None:
        return [bind(fn, inputs, forward_params, model, init_args)]
    weights = [(f"model.{n}", t) for n, t in _in_registration_order(model)]
    numbers = [(f"model.{n}={v!r}", v) for n, v in _number_attributes(model)]
    patterns: list[list[tuple[str, Any]]] = []
    for extra in (weights + numbers, weights, []):
        if all(len(extra) != len(p) for p in patterns):
            patterns.append(extra)
    chosen = patterns if only is None else patterns[only:only + 1]
    return [bind(fn, inputs, forward_params, model, init_args, extra) for extra in chosen]


def bind(fn: Callable[..., Any], inputs: list[Any], forward_params: list[str],
         model: Any | None, init_args: dict[str, Any] | None = None,
         var_extra: list[tuple[str, Any]] | None = None) -> tuple[list[Any], dict[str, Any], str]:
    """``(args, kwargs, description)`` for calling ``fn`` with ``inputs`` (the forward()
    arguments, named ``forward_params``), ``model``'s parameters (a ``torch.nn.Module``) and
    ``init_args`` (the ``Model(...)`` constructor's arguments by name); a ``*args`` parameter
    takes the inputs not bound yet and then ``var_extra`` (``(description, value)`` pairs).
    Raises ``TypeError`` naming a parameter that binds to nothing."""
    import torch

    sig = inspect.signature(fn)
    named = {n: i for i, n in enumerate(forward_params[: len(inputs)])}
    used: set[int] = set()
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    shown: list[str] = []
    positional_ok = True
    by_name = {p.name: _model_value(model, p.name) for p in sig.parameters.values()} if model is not None else {}
    # a tensor an alias names (``add_bias``: the model's own bias) is that parameter's; a plain
    # name that found the same tensor (``bias``) takes its next match (the linear layer's bias)
    claimed = frozenset(id(v) for n, (v, _) in by_name.items() if n in _ALIASES and isinstance(v, torch.Tensor))
    for n, (v, _) in list(by_name.items()):
        if n not in _ALIASES and id(v) in claimed:
            by_name[n] = _model_value(model, n, claimed)
    # the model's tensors some parameter names (rule 2) are never another's by position (rule 6)
    bound = {id(v) for n, (v, _) in by_name.items() if n not in named and isinstance(v, torch.Tensor)}
    params = _in_registration_order(model) if model is not None else []
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            rest = [i for i in range(len(inputs)) if i not in used]
            args += [inputs[i] for i in rest] + [v for _, v in var_extra or []]
            used.update(rest)
            parts = ([f"inputs {', '.join(map(str, rest))}"] if rest else []) + [d for d, _ in var_extra or []]
            shown.append(f"*{p.name}={', '.join(parts)}" if parts else f"*{p.name}=()")
            positional_ok = False
            continue
        if p.kind is p.VAR_KEYWORD:
            continue
        value, where = _UNBOUND, ""
        if p.name in named and named[p.name] not in used:
            idx = named[p.name]
            value, where = inputs[idx], f"input {idx}"
            used.add(idx)
        elif model is not None:
            value, where = by_name[p.name]
        if value is _UNBOUND and init_args and p.name in init_args:
            value, where = init_args[p.name], f"Model({p.name})"
        if value is _UNBOUND:
            nxt = next((i for i in range(len(inputs)) if i not in used), None)
            if nxt is not None and p.kind is not p.KEYWORD_ONLY:
                value, where = inputs[nxt], f"input {nxt}"
                used.add(nxt)
        if value is _UNBOUND and p.default is p.empty and p.kind is not p.KEYWORD_ONLY \
                and p.annotation not in (int, float, bool, str, "int", "float", "bool", "str"):
            name, tensor = next(((n, t) for n, t in params if id(t) not in bound), ("", _UNBOUND))
            value, where = tensor, f"model.{name} (the model's next parameter)"
        if value is _UNBOUND:
            if p.default is not p.empty:
                positional_ok = False
                continue
            raise TypeError(f"{fn.__name__}() parameter {p.name!r} matches no forward() input "
                            f"({', '.join(forward_params) or 'none'}) and nothing on the reference model")
        if isinstance(value, torch.Tensor):
            bound.add(id(value))
            text = where
        else:
            text = f"{where}={value!r}"
        shown.append(f"{p.name}={text}")
        if p.kind is p.POSITIONAL_ONLY or (positional_ok and p.kind is p.POSITIONAL_OR_KEYWORD):
            args.append(value)
        else:
            kwargs[p.name] = value
            positional_ok = False
    return args, kwargs, f"{fn.__name__}({', '.join(shown)})"


@cache
def kernel_function_model() -> type:
    """The ``torch.nn.Module`` class that runs a ``kernel_function`` (defined on first use, so
    that reading this format does not import torch)."""
    import torch

    from xeforge_core.worker.integrity import aliased_outputs

    class KernelFunctionModel(torch.nn.Module):
        """A model whose ``forward(*inputs)`` calls ``fn`` bound as :func:`bind` says. The
        reference model is held without registering it as a submodule, so its weights are not the
        candidate's: ``state_dict()`` is empty."""

        def __init__(self, fn: Callable[..., Any], reference: torch.nn.Module | None, forward_params: list[str],
                     init_args: dict[str, Any] | None = None) -> None:
            super().__init__()
            self.fn = fn
            object.__setattr__(self, "_reference", reference)
            self.forward_params = list(forward_params)
            self.init_args = dict(init_args or {})
            self.description = ""
            #: which of :func:`calls` a ``*args`` function took on its first call (kept after)
            self.pattern: int | None = None
            #: whether it writes its first input in place and returns None (KernelAgent's
            #: convention), learnt on the first call
            self.in_place: bool | None = None
            #: whether the truth modifies its first input in place (``worker.effects``): a function
            #: that returns its first input, written, then writes the caller's as the truth does
            self.first_input_effect = False

        def forward(self, *inputs: Any) -> Any:
            inputs = list(inputs)
            owned = caller = None
            if self.in_place is not False and inputs and isinstance(inputs[0], torch.Tensor):
                caller = inputs[0]
                owned = caller.clone()  # what the convention overwrites: the caller's input stays whole
                inputs[0] = owned
            tries = calls(self.fn, inputs, self.forward_params, self._reference, self.init_args, only=self.pattern)
            for i, (args, kwargs, description) in enumerate(tries):
                try:
                    out = self.fn(*args, **kwargs)
                except TypeError:
                    if self.pattern is not None or i == len(tries) - 1:
                        raise
                    continue
                if self.pattern is None:
                    self.pattern = i
                self.description = description
                break
            if self.in_place is None:
                self.in_place = out is None and owned is not None
            if out is not None and caller is not None and (self.first_input_effect or not aliased_outputs(
                    list(out) if isinstance(out, (tuple, list)) else [out], [owned])):
                # it returned a separate result, or its written first input where the truth writes its
                # own (Swish(inplace=True)): what it wrote into its first input is an effect on the
                # caller's tensor (compared where the reference has that effect: worker.effects)
                with torch.no_grad():
                    caller.copy_(owned)
            if out is None and owned is not None:  # KernelAgent's convention: None means "wrote inputs[0] in place"
                self.description += (" (returned None: KernelAgent's convention for writing its first input in "
                                     "place; it ran on a copy of that input, which is the output, the copy timed "
                                     "with it)")
                return owned
            if out is None and inputs:
                return inputs[0]
            return out

    return KernelFunctionModel


def adapt(fn: Callable[..., Any], reference: Any, params: list[str], init_args: dict[str, Any] | None = None) -> Any:
    """``fn`` bound to ``reference`` (the problem's ``Model`` instance) as a ``torch.nn.Module``
    whose ``forward(*inputs)`` calls it; ``params`` names forward()'s inputs, ``init_args`` the
    arguments ``reference`` was constructed with (:func:`constructor_arguments`)."""
    return kernel_function_model()(fn, reference, params, init_args)


KERNELAGENT = ProblemFormat(
    name="kernelagent", title="KernelAgent (kernel_function bound to the problem's Model)",
    entry_kind="function", entry_names=("kernel_function",), reference_class="Model",
    inputs_function="get_inputs", init_inputs_function="get_init_inputs", adapt=adapt)
