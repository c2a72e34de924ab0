"""Launch options written as meta-parameters in autotune configs, moved to where Triton reads them.

``triton.Config({"BLOCK_SIZE": 1024, "num_warps": 8})`` does not launch 8 warps: a config's
dict holds the kernel's meta-parameters, and ``Config.all_kwargs()`` lays the config's own
``num_warps`` (default 4), ``num_stages`` (default 3) and ``num_ctas`` (default 1) over it
(``triton/runtime/autotuner.py``, Triton 3.x;
:data:`~xeforge_core.compile_options.CONFIG_LAUNCH_OPTIONS`), so the dict's value is dropped and every such
config runs at the defaults. Published solutions written by language models do this often (8 of
the 230 pairs of ``benchmarks/corpus_manifest.json``), and a search "over warps" then benchmarks
the same kernel two to four times.

:func:`move_launch_options` rewrites each ``Config`` call of an autotuned kernel's configs whose
dict has such a key into the call Triton reads: ``triton.Config({"BLOCK_SIZE": bs}, num_warps=nw,
num_stages=1)``. Where the call already passes that option as a keyword, the dict's value was
never used and is dropped. The rewrite follows the configs as published solutions build them: a
list or comprehension in the decorator, a module-level name bound to one, or a module-level list
filled by ``configs.append(triton.Config(...))`` in loops.

Left alone, with the reason: a module that reads a config's ``kwargs`` itself (``**cfg.kwargs``
passed to a launch does launch those warps), and a kernel that has a parameter of that name.
"""

from __future__ import annotations

import libcst as cst

from xeforge_core.codemods.common import (
    CodemodResult,
    dotted_name,
    is_autotune_decorator,
    not_applicable,
    parse_kernels,
    still_parses,
)
from xeforge_core.codemods.config_lists import touches
from xeforge_core.compile_options import CONFIG_LAUNCH_OPTIONS

NAME = "autotune_options"
#: Keywords of ``triton.Config`` that ``all_kwargs()`` lays over the config's dict.
LAUNCH_OPTIONS = CONFIG_LAUNCH_OPTIONS


def _is_config(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Call) and dotted_name(node.func).split(".")[-1] == "Config" and bool(node.args)


def _misplaced(call: cst.Call) -> list[str]:
    first = call.args[0]
    if first.keyword is not None or not isinstance(first.value, cst.Dict) or any(a.star for a in call.args):
        return []
    if any(a.keyword is not None and a.keyword.value in LAUNCH_OPTIONS and isinstance(a.value, cst.Name)
           and a.value.value == "None" for a in call.args):
        return []  # `num_warps=None`: all_kwargs() leaves it out and the dict's value is used
    return [str(el.key.evaluated_value) for el in first.value.elements
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString)
            and el.key.evaluated_value in LAUNCH_OPTIONS]


def _fixed(call: cst.Call) -> tuple[cst.Call, list[str], list[str]]:
    """The call with the dict's launch options as keywords; the options moved and those dropped
    (already passed as keywords)."""
    first = call.args[0]
    # options passed by position follow the dict in Config's signature, in LAUNCH_OPTIONS' order
    positional = [a for a in call.args[1:] if a.keyword is None and not a.star]
    given = {a.keyword.value for a in call.args if a.keyword is not None} | set(LAUNCH_OPTIONS[:len(positional)])
    keep, moved, dropped = [], [], []
    new_args: list[cst.Arg] = []
    for el in first.value.elements:  # type: ignore[attr-defined]
        key = el.key.evaluated_value if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) else None
        if key not in LAUNCH_OPTIONS:
            keep.append(el)
            continue
        if key in given:
            dropped.append(key)
            continue
        moved.append(key)
        new_args.append(cst.Arg(keyword=cst.Name(key), value=el.value, equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
    if keep:
        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    args = [first.with_changes(value=first.value.with_changes(elements=keep))] + list(call.args[1:])  # type: ignore[attr-defined]
    sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    args = [a.with_changes(comma=sep) for a in args[:-1]] + [args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
    if new_args:
        args[-1] = args[-1].with_changes(comma=sep)
        args += [a.with_changes(comma=sep) for a in new_args[:-1]] + [new_args[-1]]
    return call.with_changes(args=args), moved, dropped


def _config_sources(module: cst.Module, kernels: dict[str, cst.FunctionDef]) -> dict[str, list[cst.CSTNode]]:
    """Per autotuned kernel, the nodes its configs are built in: the decorator's ``configs``
    expression, and for a module-level name, every top-level statement that binds it or
    appends to it."""
    found: dict[str, list[cst.CSTNode]] = {}
    for name, fn in kernels.items():
        deco = next((d for d in fn.decorators if is_autotune_decorator(d)), None)
        if deco is None or not isinstance(deco.decorator, cst.Call):
            continue
        call = deco.decorator
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "configs"), None)
        if arg is None and call.args and call.args[0].keyword is None:
            arg = call.args[0]
        if arg is None:
            continue
        nodes: list[cst.CSTNode] = [arg.value]
        if isinstance(arg.value, cst.Name):
            nodes += [s for s in module.body if touches(s, arg.value.value)]
        found[name] = nodes
    return found


def _config_calls(nodes: list[cst.CSTNode]) -> list[cst.Call]:
    """The ``Config(...)`` calls under ``nodes`` whose dict sets a launch option."""
    found: list[cst.Call] = []

    class _V(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if _is_config(node) and _misplaced(node):
                found.append(node)

    for n in nodes:
        n.visit(_V())
    return found


def _reads_kwargs(module: cst.Module) -> bool:
    hit = False

    class _V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal hit
            hit = hit or node.attr.value in ("kwargs", "all_kwargs")

    module.visit(_V())
    return hit


def move_launch_options(source: str) -> CodemodResult:
    """Move ``num_warps``/``num_stages``/``num_ctas`` out of the dicts of every
    autotuned kernel's ``triton.Config`` calls into the calls' keywords (module docstring).

    Returns a changed :class:`CodemodResult` with one note per kernel, or not applicable with
    the reason (no such key; the module reads ``cfg.kwargs`` itself; a kernel parameter of that
    name). Never executes the code."""
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    module, kernels = found
    sources = _config_sources(module, kernels)
    calls: dict[int, tuple[str, cst.Call]] = {}
    skipped: list[str] = []
    for kernel, nodes in sources.items():
        params = {p.name.value for p in kernels[kernel].params.params}
        for node in _config_calls(nodes):
            clash = sorted(params & set(_misplaced(node)))
            if clash:
                skipped.append(f"kernel {kernel} has a parameter named {', '.join(clash)}: its configs' "
                               f"{', '.join(clash)} is its meta-parameter, left as written")
            else:
                calls[id(node)] = (kernel, node)
    if not calls:
        return not_applicable(NAME, source, "; ".join(dict.fromkeys(skipped)) or "no autotune config sets num_warps, "
                              "num_stages or num_ctas in its meta-parameter dict")
    if _reads_kwargs(module):
        return not_applicable(NAME, source, "autotune configs set launch options in their meta-parameter dict, but "
                                            "the module reads a config's kwargs itself (a launch given **cfg.kwargs "
                                            "does use them): left as written")
    per_kernel: dict[str, tuple[set[str], set[str]]] = {}

    class _Apply(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            hit = calls.get(id(original))
            if hit is None:
                return updated
            new, moved, dropped = _fixed(updated)
            got = per_kernel.setdefault(hit[0], (set(), set()))
            got[0].update(moved)
            got[1].update(dropped)
            return new

    code = module.visit(_Apply()).code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    notes = []
    for kernel, (moved, dropped) in per_kernel.items():
        parts = []
        if moved:
            parts.append(f"{', '.join(sorted(moved))} moved from the configs' meta-parameter dict to triton.Config's "
                         "keywords (in the dict Triton drops the value and launches its defaults, 4 warps and 3 "
                         "stages, so the search over them benchmarked one kernel several times)")
        if dropped:
            parts.append(f"{', '.join(sorted(dropped))} removed from the dict (the keyword beside it is what Triton "
                         "uses)")
        notes.append(f"kernel {kernel}: " + "; ".join(parts))
    return CodemodResult(codemod=NAME, source=code, changed=code != source, notes=notes)


__all__ = ["LAUNCH_OPTIONS", "NAME", "move_launch_options"]
