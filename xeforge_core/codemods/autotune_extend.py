"""autotune_extend codemod: an already-autotuned kernel gets its kind's configs added to its own.

Published solutions often carry ``@triton.autotune`` with a few hand-picked configs (one block
size at two warp counts, or a single config "to avoid long tuning"). The autotuning stage keeps
every config the author wrote, first and in order, and appends the target's search space for
the kernel's kind (:mod:`xeforge_core.codemods.autotune_kinds`: ``gemm``, ``row`` for rows and
scans, ``elementwise``), named for the kernel's own meta-parameters:

* a meta-parameter takes the space's values only where the kernel allows other values: the
  author's configs already vary it (the kernel and its launch grid were written for several
  values; a block varied only so, being possibly one that must cover a row, takes no value
  below the author's smallest), or every block-indexed load and store is masked and the launch
  grid reads it from ``META`` or the kernel uses it as a loop step; a non-GEMM kernel with an
  unmasked block access keeps its blocks; otherwise every new config keeps the author's first
  value and only ``num_warps``/``num_stages`` change;
* a non-GEMM kernel's first config also gets its own tile at the other warp counts it fills
  (:func:`~xeforge_core.codemods.autotune_kinds.warp_neighbours`): before the space's configs
  where the author gave the tile more threads than elements (a short pooling row at 4 warps),
  after them otherwise;
* GEMM space keys map to the kernel's by their axis (``BLOCK_M`` -> ``BLOCK_SIZE_M``,
  ``GROUP_SIZE_M`` -> ``GROUP_M``); a non-GEMM space sizes one 1-D block, so it is used only
  where exactly one meta-parameter may change and the kernel does not work on 2-D tiles;
* the new configs are pruned by the device's limits before anything is compiled
  (:func:`~xeforge_core.codemods.autotune_prune.prune_static`: shared memory per block and
  accumulator registers for GEMM; :func:`~xeforge_core.codemods.autotune_kinds.prune_for_registers`:
  registers a thread and warps a work-group otherwise) and capped at ``max_configs`` (6), the
  own tile's variants that come first (at most four, one a warp count) besides.

A kernel that adds into a buffer with ``tl.atomic_*``, or stores through a pointer it also
loads, without ``reset_to_zero``/``restore_value`` gets ``restore_value`` for those pointers: the
autotuner runs each config on the same buffers while it benchmarks, so the author's own tuner
already returned a wrong answer on the call that tuned each key (the verifier's first-call check
sees it), and more configs would pile up more. ``restore_value`` puts each buffer back after
every benchmarked config, whatever it started as (``reset_to_zero`` would be wrong for a buffer
that does not start at zero).

Refused, with the reason: configs that are not a literal list of ``triton.Config({...})`` with
literal values (written in the decorator, bound once to a module-level name, or returned by an
argument-free module-level function, whose result the new configs are appended to; a
comprehension over literal values counts as the list it builds,
:mod:`xeforge_core.codemods.config_lists`), such an
in-place kernel whose tuner has its own ``pre_hook``/``post_hook`` (Triton then ignores
``restore_value``), and kernels whose every space config is already there or pruned.
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from xeforge_core.codemods.autotune import in_place_params, never_launched
from xeforge_core.codemods.autotune_kinds import (
    BLOCK_NAME,
    classify,
    prune_for_registers,
    stage_free_key,
    warp_neighbours,
)
from xeforge_core.codemods.autotune_prune import STATIC_ELEMENT_BYTES
from xeforge_core.codemods.common import (
    CodemodResult,
    code_of,
    dotted_name,
    int_value,
    is_autotune_decorator,
    not_applicable,
    parse_kernels,
    still_parses,
)
from xeforge_core.codemods.config_lists import literal_configs
from xeforge_core.codemods.kernel_edit import indexes_2d_tiles

NAME = "autotune_extend"
#: New configs a kernel gets at most (the autotuner benchmarks each at the first call of a key).
MAX_NEW = 6


def _config(call: cst.BaseExpression) -> dict[str, Any] | None:
    """``{"kwargs": {...}, "num_warps": int|None, "num_stages": int|None}`` of a literal
    ``triton.Config({...}, num_warps=.., num_stages=..)``; ``None`` for anything else."""
    if not (isinstance(call, cst.Call) and dotted_name(call.func).split(".")[-1] == "Config" and call.args):
        return None
    first = call.args[0].value
    if call.args[0].keyword is not None or not isinstance(first, cst.Dict):
        return None
    kwargs: dict[str, int] = {}
    for el in first.elements:
        if not isinstance(el, cst.DictElement) or not isinstance(el.key, cst.SimpleString):
            return None
        v = int_value(el.value)
        if v is None:
            return None
        kwargs[str(el.key.evaluated_value)] = v
    out: dict[str, Any] = {"kwargs": kwargs, "num_warps": None, "num_stages": None}
    for a in call.args[1:]:
        if a.keyword is None:
            return None
        if a.keyword.value in ("num_warps", "num_stages"):
            v = int_value(a.value)
            if v is None:
                return None
            out[a.keyword.value] = v
    return out


def _text(cfg: dict[str, Any]) -> str:
    items = ", ".join(f'"{k}": {v}' for k, v in cfg["kwargs"].items())
    extra = "".join(f", {k}={cfg[k]}" for k in ("num_warps", "num_stages") if cfg.get(k) is not None)
    return f"triton.Config({{{items}}}{extra})"


def _key(cfg: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(cfg["kwargs"].items())), cfg.get("num_warps"), cfg.get("num_stages")


def _axis(name: str) -> str | None:
    """The GEMM axis a meta-parameter tiles (``BLOCK_SIZE_M`` -> ``M``, ``GROUP_M`` -> ``G``)."""
    if name.startswith("GROUP"):
        return "G"
    hit = re.match(r"^(?:BLOCK|TILE)(?:_SIZE)?_?([MNK])$", name)
    return hit.group(1) if hit else None


def _grid_meta_keys(module: cst.Module, kernel: str) -> set[str]:
    """Keys every ``lambda META: ...`` launch grid of ``kernel`` reads (through a grid name
    assigned anywhere in the module), empty when any launch's grid is not such a lambda."""
    keys: set[str] | None = None
    lambdas: dict[str, cst.Lambda] = {}
    launches: list[cst.BaseExpression] = []

    class _V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and isinstance(node.value, cst.Lambda):
                lambdas[node.targets[0].target.value] = node.value

        def visit_Call(self, node: cst.Call) -> None:
            f = node.func
            if isinstance(f, cst.Subscript) and isinstance(f.value, cst.Name) and f.value.value == kernel:
                launches.append(f.slice[0].slice.value)  # type: ignore[attr-defined]

    module.visit(_V())
    for grid in launches:
        if isinstance(grid, cst.Name):
            grid = lambdas.get(grid.value, grid)
        if not isinstance(grid, cst.Lambda):
            return set()
        found = set(re.findall(r"""\[\s*["'](\w+)["']\s*\]""", code_of(grid.body)))
        keys = found if keys is None else keys & found
    return keys or set()


def _space(kind: str, target: str, arch: str | None, profile: Any, elem: int = STATIC_ELEMENT_BYTES
           ) -> tuple[list[dict[str, Any]], str, list[str]]:
    """The kind's configs for the target, GEMM ones pruned for the profile at ``elem`` bytes an
    operand element; the space id and the sentences of what was pruned."""
    from xeforge_core.codemods.autotune_prune import prune_static
    from xeforge_core.codemods.spaces import space_configs

    configs, sid = space_configs(target, arch, kind)
    if kind != "gemm":
        return configs, sid, []
    kept, dropped = prune_static([{"kwargs": {}, "num_warps": 4, "num_stages": 2}, *configs], profile, target,
                                 max_configs=len(configs) + 1, elem=elem)
    return kept[1:], sid, dropped


def _plan(module: cst.Module, fn: cst.FunctionDef, deco: cst.Decorator, target: str, arch: str | None,
          profile: Any, limit: int, elem: int = STATIC_ELEMENT_BYTES) -> tuple[cst.Decorator, str] | str:
    """The decorator with the new configs appended and the note; or why not."""
    from xeforge_core.codemods.spaces import SpaceError, profile_value

    name = fn.name.value
    call = deco.decorator
    if not isinstance(call, cst.Call):
        return f"kernel {name}: @triton.autotune without arguments"
    arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == "configs"), None)
    if arg is None and call.args and call.args[0].keyword is None:
        arg = call.args[0]
    listed = literal_configs(module, arg.value) if arg is not None else None
    if arg is None or listed is None:
        return (f"kernel {name}: its autotune configs are not a literal list (or a module-level name or "
                "argument-free function giving one, or a comprehension over literal values) the codemod can extend")
    own = [_config(e.value) for e in listed.elements]
    if not own or any(c is None for c in own):
        return f"kernel {name}: its autotune configs are not all literal triton.Config({{...}}) with literal values"
    mine: list[dict[str, Any]] = own  # type: ignore[assignment]
    keys = list(mine[0]["kwargs"])
    if any(list(c["kwargs"]) != keys and set(c["kwargs"]) != set(keys) for c in mine):
        return f"kernel {name}: its configs set different meta-parameters"
    kws = {a.keyword.value for a in call.args if a.keyword is not None}
    touched = in_place_params(fn)
    restore: list[str] = []
    if touched and not kws & {"reset_to_zero", "restore_value"}:
        if kws & {"pre_hook", "post_hook"}:  # Triton then ignores reset_to_zero and restore_value
            return (f"kernel {name} writes into {', '.join(touched)} in place (atomics or load-and-store) and its "
                    "autotuner has its own pre_hook/post_hook: restore_value would be ignored")
        restore = touched
    shape = classify(fn)
    try:
        space, sid, pruned = _space(shape.space_kind, target, arch, profile, elem)
    except SpaceError as exc:
        return f"kernel {name} ({shape.kind}): {exc}"
    varied = {k for k in keys if len({c["kwargs"][k] for c in mine}) > 1}
    follows = (_grid_meta_keys(module, name) | set(shape.steps)) & set(keys)
    allowed = set(varied)
    if shape.kind != "gemm":
        allowed = (varied | follows) if shape.masked else set()
    #: a block only the author's configs vary (not a loop step, not counted by the grid) may have to
    #: cover a whole row: new values no smaller than the author's smallest
    floor = {k: min(c["kwargs"][k] for c in mine) for k in allowed - follows}
    if shape.kind == "gemm":
        if not varied:  # a GEMM's tiles also size its K loop and its grid: only where the author varied them
            allowed = set()
        by_axis = {_axis(k): k for k in keys if k in allowed and _axis(k)}
    else:
        blocks = [k for k in keys if k in allowed and BLOCK_NAME.match(k)]
        # the kind's space sizes a 1-D block (elements of a row, or a flat block), not one side of a 2-D tile
        by_axis = {"B": blocks[0]} if len(blocks) == 1 and not indexes_2d_tiles(fn) else {}
    new: list[dict[str, Any]] = []
    own_tiles: list[dict[str, Any]] = []  # the author's first tile at other warps, tried before the space's
    neighbours: list[dict[str, Any]] = []  # all of them, before and after
    for cfg in space:
        kwargs = dict(mine[0]["kwargs"])
        values = list((cfg.get("kwargs") or {}).items())
        if shape.kind == "gemm":
            for sk, v in values:
                k = by_axis.get(_axis(sk))
                if k is not None:
                    kwargs[k] = v
        elif "B" in by_axis and values:
            kwargs[by_axis["B"]] = values[0][1]
        stages = cfg.get("num_stages") if cfg.get("num_stages") is not None else mine[0].get("num_stages")
        new.append({"kwargs": kwargs, "num_warps": cfg.get("num_warps"), "num_stages": stages})
    new = [c for c in new if all(c["kwargs"][k] >= v for k, v in floor.items())]
    dropped: list[str] = list(pruned)
    if shape.kind != "gemm":
        max_warps = profile_value(profile, "max_warps_per_workgroup")
        lanes = int((profile_value(profile, "subgroup_sizes") or [32])[0])
        block = by_axis.get("B")
        probes = [{"kwargs": {block: c["kwargs"][block]} if block else {}, "num_warps": c["num_warps"], "_cfg": c}
                  for c in new]
        kept, gone = prune_for_registers(probes, shape, lanes, int(max_warps) if max_warps else None)
        new = [p["_cfg"] for p in kept]
        dropped += gone
        # the author's first tile at the warp counts it fills, before the space's tiles
        lead = mine[0]
        tile = {k: v for k, v in lead["kwargs"].items() if BLOCK_NAME.match(k) and isinstance(v, int)}
        first, later = warp_neighbours(tile, int(lead.get("num_warps") or 4), lanes)
        around = [{"kwargs": tile, "num_warps": w, "_cfg": {**lead, "num_warps": w}} for w in first + later]
        kept, gone = prune_for_registers(around, shape, lanes, int(max_warps) if max_warps else None)

        def key(cfg: dict[str, Any]) -> tuple[Any, ...]:
            return stage_free_key(cfg["kwargs"], cfg.get("num_warps"))

        # a kernel without tl.dot pipelines no load by its num_stages: configs equal in all but it are one
        taken = {key(c) for c in mine}
        own_tiles = [p["_cfg"] for p in kept if p["num_warps"] in first and key(p["_cfg"]) not in taken]
        taken |= {key(c) for c in own_tiles}
        new = own_tiles + [c for c in new if key(c) not in taken]
        taken |= {key(c) for c in new}
        new += [p["_cfg"] for p in kept if p["num_warps"] in later and key(p["_cfg"]) not in taken]
        neighbours = [p["_cfg"] for p in kept]
        dropped += gone
    seen = {_key(c) for c in mine}
    added: list[dict[str, Any]] = []
    for c in new:
        if _key(c) not in seen:
            seen.add(_key(c))
            added.append(c)
    # the own tile's first variants are a fix, not a search: they do not count against the cap
    fixes = [c for c in added if any(c is o for o in own_tiles)]
    added = fixes + [c for c in added if not any(c is o for o in own_tiles)][:limit]
    if not added:
        return (f"kernel {name}: every config of the {shape.space_kind} space ({sid}) that fits the device is "
                "already among its own")
    comma = cst.Comma(whitespace_after=cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
        last_line=cst.SimpleWhitespace(" " * 8)))
    if isinstance(arg.value, cst.List):
        elements = list(arg.value.elements)
        last = elements[-1]
        elements[-1] = last.with_changes(comma=comma)
        for i, c in enumerate(added):
            el = cst.Element(cst.parse_expression(_text(c)))
            elements.append(el.with_changes(comma=comma if i < len(added) - 1 else last.comma))
        new_arg = arg.with_changes(value=arg.value.with_changes(elements=elements))
    else:  # the author's name or function stays; the new configs follow it
        extra = cst.parse_expression("[" + ", ".join(_text(c) for c in added) + "]")
        new_arg = arg.with_changes(value=cst.BinaryOperation(
            left=arg.value, operator=cst.Add(whitespace_before=cst.SimpleWhitespace(" "),
                                             whitespace_after=cst.SimpleWhitespace(" ")), right=extra))
    args = [new_arg if a is arg else a for a in call.args]
    if restore:  # the author's own tuner ran every config into the same buffers: its tuning call was wrong
        # one argument a line stays one a line: the new one takes the separator before the last one
        # and the last one's ending (a line break before the closing parenthesis)
        # (each line keeps its own comment)
        last = args[-1]
        sep = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
        own = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
        if sep is not None and isinstance(sep.whitespace_after, cst.ParenthesizedWhitespace):
            first = own.first_line if isinstance(own, cst.ParenthesizedWhitespace) else cst.TrailingWhitespace()
            sep = sep.with_changes(whitespace_after=sep.whitespace_after.with_changes(first_line=first))
        ending = last.comma
        if isinstance(own, cst.ParenthesizedWhitespace):
            ending = last.comma.with_changes(whitespace_after=own.with_changes(first_line=cst.TrailingWhitespace()))  # type: ignore[union-attr]
        args[-1] = last.with_changes(comma=sep or cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                                     whitespace_after_arg=cst.SimpleWhitespace(""))
        args.append(cst.Arg(keyword=cst.Name("restore_value"), value=cst.parse_expression(
            "[" + ", ".join(f'"{n}"' for n in restore) + "]"), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            comma=ending, whitespace_after_arg=last.whitespace_after_arg))
    new_call = call.with_changes(args=args)
    tuned = sorted(set(by_axis.values()))
    what = f"{', '.join(tuned)} and warps" if tuned else "num_warps/num_stages only (its meta-parameters keep the author's first values)"
    warps_only = sum(1 for c in added if any(c is o for o in neighbours))
    source = f"{len(added) - warps_only} config(s) of the {shape.space_kind} space ({sid})"
    if warps_only:
        source = f"its first tile at {warps_only} other warp count(s) and {source}"
    note = f"kernel {name} ({shape.kind}): {source} added after its own {len(mine)} ({what})"
    if dropped:
        note += f"; pruned for the device: {'; '.join(dropped[:3])}{' ...' if len(dropped) > 3 else ''}"
    if restore:
        note += (f"; restore_value={restore} added: the kernel writes into {', '.join(restore)} in place (atomics or "
                 "load-and-store) and its own autotuner benchmarked every config on the same buffers, so the call "
                 "that tuned a key returned what all of them left there")
    return deco.with_changes(decorator=new_call), note


def extend_autotune(source: str, *, target: str = "xpu", arch: str | None = None, profile: Any = None,
                    options: dict[str, Any] | None = None) -> CodemodResult:
    """Append the kind's configs to every already-autotuned kernel of ``source`` (module
    docstring) for ``target`` (``xpu``/``cuda``; ``cpu`` takes cuda's) and ``arch``, pruned for
    ``profile`` (default: the knowledge base's for the target) at ``options["operand_bytes"]``
    an operand element (default fp32's 4); ``options["max_configs"]`` caps the configs added a
    kernel from the space (the own tile's first variants come besides). Returns a :class:`CodemodResult`; never executes the code."""
    from xeforge_core.codemods.spaces import resolve_profile

    target = "cuda" if target == "cpu" else target
    found = parse_kernels(NAME, source)
    if isinstance(found, CodemodResult):
        return found
    module, kernels = found
    prof = resolve_profile(profile, target, arch)
    limit = (options or {}).get("max_configs")
    limit = limit if isinstance(limit, int) and limit > 0 else MAX_NEW
    new_decos: dict[str, cst.Decorator] = {}
    notes: list[str] = []
    reasons: list[str] = []
    for name, fn in kernels.items():
        deco = next((d for d in fn.decorators if is_autotune_decorator(d)), None)
        if deco is None:
            continue
        idle = never_launched(name, options)
        if idle:
            reasons.append(idle)
            continue
        got = _plan(module, fn, deco, target, arch, prof, limit,
                    int((options or {}).get("operand_bytes") or STATIC_ELEMENT_BYTES))
        if isinstance(got, str):
            reasons.append(got)
            continue
        new_decos[name] = got[0]
        notes.append(got[1])
    if not new_decos:
        return not_applicable(NAME, source, "; ".join(reasons) or "no kernel is autotuned")

    class _Apply(cst.CSTTransformer):
        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
            deco = new_decos.get(original.name.value)
            if deco is None or original is not kernels.get(original.name.value):
                return updated
            return updated.with_changes(decorators=[deco if is_autotune_decorator(d) else d
                                                    for d in updated.decorators])

    code = module.visit(_Apply()).code
    error = still_parses(code)
    if error:
        return not_applicable(NAME, source, f"the rewrite would not parse ({error}); nothing changed")
    return CodemodResult(codemod=NAME, source=code, changed=code != source,
                         notes=notes + [f"not extended: {r}" for r in reasons])


__all__ = ["MAX_NEW", "NAME", "extend_autotune"]
