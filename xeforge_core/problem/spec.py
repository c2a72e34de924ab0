"""Parse an Xe-Forge YAML spec into a :class:`~xeforge_core.problem.model.Spec`.

The format (as the public Xe-Forge repository's ``test_kernels/*.yaml`` use it):

* ``inputs``: name -> ``{shape: [DIM, ...], dtype: NAME}``; ``dtype`` defaults to float32.
* ``inits``: a list of single-entry maps, ``- dim: DIM`` or ``- NAME: DIM``. The key is
  ignored; the value is resolved per variant: a dim name gives that variant's ``dims`` value,
  otherwise the value is parsed as int, then float, else kept as the raw string. The values are
  passed *positionally* to ``Model.__init__`` (``Variant.init_values``).
* ``default_variant``: optional name of the variant used when none is asked for.
* ``allow``: optional list of the precision downgrades the problem accepts beyond its own
  dtype (``allow: [tf32]``; the names of ``xeforge_core.precision.DOWNGRADES``), as
  ``xeforge verify --allow`` does. Not read by Xe-Forge itself.
* every other top-level key must be a list: a variant family (``ci``,
  ``bench-gpu``, ``bench-gpu-N``, ``bench-xpu``, ``bench-cpu``, ``bench-gpu-old``, ...). Every
  entry of a list is a variant: entry 0 is named after the family (``ci``), the others
  ``ci[1]``, ``ci[2]``, ... (Xe-Forge itself reads only entry 0; the verifier checks every
  ``ci`` entry for correctness).
* a variant entry has ``params`` (input names in forward() order), ``dims``, ``dtype``
  (overrides every floating-point input's dtype), ``flop`` (formula over dims, or a number), ``rtol``/``atol``.

Unknown keys are refused, not dropped (Xe-Forge ignores them, so a typo changes what is checked
and timed without a word): ``dtpye`` in an input, ``dimz`` in a variant entry, a scalar or map
at the top level, and a list whose name misspells a standard family (``bench_gpu``, ``CI``,
``bench-gup``) each raise a ``ProblemError`` at the key's own line with the nearest valid key
(``difflib``). Families of one's own (``small``, ``bench-gpu-old``) stay valid. Keys of later
AI-bench versions (``mem_bytes``, ``memory_format``; an input's ``range`` and ``inits``) are
accepted with a warning that they are not read.

Quirks kept on purpose: YAML 1.1 (PyYAML) reads ``1e-5`` (no dot) as the *string* ``"1e-5"``;
such a dim stays a string in ``dims`` and in ``init_values`` (the real kernels call
``float()`` on it, as Xe-Forge passes it), while flop formulas and ``rtol``/``atol`` read it
as a number. Flop formulas are evaluated with dims as a namespace (:mod:`.flops`), not by
textual substitution.

Errors are :class:`ProblemError` naming the spec file, the YAML line and the field path
(``bench-gpu[0].dims.BATCH``).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from xeforge_core.errors import nearest_name_hint
from xeforge_core.precision import PrecisionError, parse_allowances

from .dtypes import DTYPE_SIZES, KNOWN_DTYPE_NAMES, normalize_dtype
from .flops import as_number, evaluate_flop
from .model import InitSpec, InputSpec, ProblemError, Spec, Variant, is_ci_variant

__all__ = ["parse_spec", "build_variant", "variant_name", "resolve_init_value", "odd_size_variant", "check_text", "MAX_SOURCE_BYTES"]

#: Largest spec or module text accepted (bytes of UTF-8). Real specs are a few kB.
MAX_SOURCE_BYTES = 1_000_000

_RESERVED = ("inputs", "inits", "default_variant", "allow")
_VARIANT_KEYS = {"params", "dims", "dtype", "flop", "rtol", "atol"}
_INPUT_KEYS = {"shape", "dtype"}
#: Keys that later AI-bench versions added (see the module docstring); a real spec may carry them,
#: so they are accepted with a warning that they are not read, never refused as typos.
_VARIANT_KEYS_IGNORED = {"mem_bytes", "memory_format"}
_INPUT_KEYS_IGNORED = {"range", "inits"}
#: The variant families every tool knows by name; ``bench-gpu-N`` and ``bench-gpu-<name>`` extend them.
_STANDARD_FAMILIES = ("ci", "bench-gpu", "bench-cpu", "bench-xpu")
_STANDARD_FAMILY = re.compile(r"^(ci|bench-(gpu|cpu|xpu)(-[A-Za-z0-9_.]+)*)$")
#: How close (``difflib`` ratio) a family name must be to a standard one to read as its misspelling.
_TYPO_RATIO = 0.85

#: The same for a dim name against the variant's dims: short names, where swapping two letters
#: (BACTH for BATCH, 0.8) is the usual typo.
_NAME_TYPO_RATIO = 0.75
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Path_ = tuple[Any, ...]


def _line_map_child(node: yaml.Node, path: Path_, out: dict[Path_, int], dups: list[tuple[Path_, int]]) -> None:
    """Record the 1-based line of every key and list item below ``node`` by its path (keys
    and list indices); a nested collection keeps the line of its key. Duplicate keys are
    collected in ``dups``."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.start_mark)
                if key in seen:
                    dups.append((path + (key,), key_node.start_mark.line + 1))
                seen.add(key)
                out[path + (key,)] = key_node.start_mark.line + 1
                _line_map_child(value_node, path + (key,), out, dups)
        else:
            for i, item in enumerate(node.value):
                out.setdefault(path + (i,), item.start_mark.line + 1)
                _line_map_child(item, path + (i,), out, dups)


def _field(path: Path_) -> str:
    """``("ci", 0, "dims", "B")`` -> ``ci[0].dims.B``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


class _Ctx:
    """Error/warning helper that knows the file and the line of each YAML path."""

    def __init__(self, path: Path | None, lines: dict[Path_, int], label: str | None = None) -> None:
        self.path = path
        self.where: str | Path | None = path if path is not None else label
        self.lines = lines
        self.warnings: list[str] = []

    def line(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def error(self, path: Path_, message: str) -> ProblemError:
        return ProblemError(message, file=self.where, line=self.line(path), field=_field(path) or None)

    def warn(self, path: Path_, message: str) -> None:
        where = self.path.name if self.path else str(self.where or "spec")
        line = self.line(path)
        if line:
            where += f":{line}"
        field = _field(path)
        self.warnings.append(f"{where} [{field}]: {message}" if field else f"{where}: {message}")


def check_text(text: Any, path: Path | None, what: str) -> str:
    """Common guards for spec and module text: a ``str`` (or UTF-8 ``bytes``), not empty, not
    over :data:`MAX_SOURCE_BYTES`. Returns the text without a leading byte-order mark; raises
    ``ProblemError`` naming the file."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_SOURCE_BYTES:
            raise ProblemError(f"{what} is {len(text)} bytes; the limit is {MAX_SOURCE_BYTES} bytes",
                               file=path)
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            line = bytes(text)[: exc.start].count(b"\n") + 1
            raise ProblemError(f"{what} is not valid UTF-8 (byte 0x{bytes(text)[exc.start]:02x} at "
                               f"offset {exc.start})", file=path, line=line) from None
    if not isinstance(text, str):
        raise ProblemError(f"{what} must be text, got {type(text).__name__}", file=path)
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write: Python reads past it too
    if len(text) > MAX_SOURCE_BYTES and len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        raise ProblemError(f"{what} is {len(text.encode('utf-8', 'surrogatepass'))} bytes; the limit is "
                           f"{MAX_SOURCE_BYTES} bytes", file=path)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ProblemError(f"{what} contains a NUL byte (binary data?)", file=path, line=line)
    if not text.strip():
        raise ProblemError(f"{what} is empty", file=path)
    return text


def resolve_init_value(value: Any, dims: Mapping[str, Any]) -> Any:
    """Xe-Forge's rule for one ``inits`` value: a dim name -> that dim's value (as given,
    lists and strings included); otherwise int, then float, else the raw value."""
    if isinstance(value, str):
        if value in dims:
            return dims[value]
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            return value
    return value


def _variants_defining(ctx: _Ctx, dim: str) -> int:
    """How many variant entries of the file define ``dim`` in their ``dims``."""
    return sum(1 for p in ctx.lines if len(p) == 4 and p[2] == "dims" and p[3] == dim)


def _shape_of(inp: InputSpec, dims: Mapping[str, Any], variant_label: str, ctx: _Ctx | None,
              input_path: Path_, entry_path: Path_ = (), used: frozenset[str] = frozenset()) -> tuple[int, ...]:
    """Concrete shape of one input in one variant. A list-valued dim is spliced in. A dim the
    variant leaves out is reported at the input's shape, unless the variant defines a dim of a
    close name that no input's shape uses (``used``: the dim names the inputs' shapes use) and no
    other variant defines: then the variant's entry is the typo (``TOKNS`` for ``TOKENS``) and is
    reported where it was written; a dim whose value is not a size, at the variant's ``dims``
    entry (``entry_path``)."""
    shape: list[int] = []
    for i, entry in enumerate(inp.shape):
        where = input_path + ("shape", i)
        if isinstance(entry, int):
            shape.append(entry)
            continue
        if entry not in dims:
            known = ", ".join(dims) or "none"
            msg = (f"input {inp.name} has shape [{', '.join(map(str, inp.shape))}], which uses dim "
                   f"{entry!r}, but variant {variant_label} does not define it (its dims: {known})")
            near = difflib.get_close_matches(str(entry), [str(k) for k in dims], n=1, cutoff=_NAME_TYPO_RATIO)
            # the variant's dim is misspelt (said where it was written) unless another shape uses its
            # name, or other variants spell it so too: then the shape is the typo
            if near and entry_path and near[0] not in used and (ctx is None or _variants_defining(ctx, near[0]) < 2):
                msg += f"; did you mean {entry!r} (written {near[0]!r})?"
                where = entry_path + ("dims", near[0])
            elif near:
                msg += f"; did you mean {near[0]!r}?"
            raise ctx.error(where, msg) if ctx else ProblemError(msg, field=_field(where))
        value = dims[entry]
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            number = as_number(item)
            if not isinstance(number, int) or isinstance(number, bool) or number < 1:
                msg = (f"input {inp.name}: dim {entry!r} = {value!r} in variant {variant_label} is not "
                       "a positive integer, so it cannot be a tensor size"
                       + (" a check can use (a tensor with no element compares nothing)" if number == 0 else ""))
                at = entry_path + ("dims", entry) if entry_path else where
                raise ctx.error(at, msg) if ctx else ProblemError(msg, field=_field(at))
            shape.append(number)
    return tuple(shape)


def _is_float(dtype: str) -> bool:
    """Floating-point or complex: the dtypes a variant ``dtype`` overrides."""
    return dtype.startswith(("float", "bfloat", "complex"))


def build_variant(name: str, *, params: list[str], dims: dict[str, Any], inputs: Mapping[str, InputSpec],
                  inits: list[InitSpec], dtype: str | None = None, flop_formula: str | float | None = None,
                  rtol: float | None = None, atol: float | None = None, ctx: _Ctx | None = None,
                  entry_path: Path_ = ()) -> Variant:
    """Build a :class:`Variant` with everything derived from its dims resolved: concrete
    input shapes (``Variant.shapes``), per-input dtypes (``Variant.input_dtypes``; the
    variant ``dtype`` overrides every floating-point input's dtype: Xe-Forge's inputs are all
    floating point, and an integer index input keeps its dtype, as the worker does), ``bytes`` (sum of the *input* tensors' sizes in bytes;
    outputs are not included because their shapes are unknown until the module runs),
    evaluated ``flop`` and positional ``init_values``.

    Raises ``ProblemError`` for an unknown input in ``params``, a shape dim the variant does not
    define, or a flop formula that does not evaluate."""
    label = _field(entry_path) or name
    for i, pname in enumerate(params):
        if pname not in inputs:
            known = ", ".join(inputs) or "none"
            msg = f"variant {label} names input {pname!r} in params, but the spec's inputs are: {known}"
            raise ctx.error(entry_path + ("params", i), msg) if ctx else ProblemError(msg)
    shapes: dict[str, tuple[int, ...]] = {}
    input_dtypes: dict[str, str] = {}
    total_bytes = 0
    for pname in params:
        inp = inputs[pname]
        used = frozenset(str(e) for i in inputs.values() for e in i.shape if isinstance(e, str))
        shape = _shape_of(inp, dims, label, ctx, ("inputs", pname), entry_path, used)
        eff = dtype if dtype and _is_float(inp.dtype) else inp.dtype
        shapes[pname] = shape
        input_dtypes[pname] = eff
        total_bytes += math.prod(shape) * DTYPE_SIZES[eff]
    flop = None
    if flop_formula is not None:
        fpath = entry_path + ("flop",)
        flop = evaluate_flop(flop_formula, dims, field=_field(fpath) or f"{name}.flop",
                             file=str(ctx.where) if ctx and ctx.where else None,
                             line=ctx.line(fpath) if ctx else None)
    init_values: list[Any] = []
    for i, init in enumerate(inits):
        value = init.value
        if init.key == "dim" and isinstance(value, str) and _IDENT.match(value) and value not in dims \
                and as_number(value) is None:
            known = ", ".join(dims) or "none"
            msg = (f"inits[{i}] is '- dim: {value}', but variant {label} defines no dim {value!r} "
                   f"(its dims: {known})")
            raise ctx.error(("inits", i), msg) if ctx else ProblemError(msg, field=f"inits[{i}]")
        init_values.append(resolve_init_value(value, dims))
    return Variant(name=name, params=list(params), dims=dict(dims), dtype=dtype, flop_formula=flop_formula,
                   flop=flop, bytes=float(total_bytes), rtol=rtol, atol=atol, init_values=init_values,
                   shapes=shapes, input_dtypes=input_dtypes)


def _refuse_unknown_keys(record: Mapping[Any, Any], known: set[str], ignored: set[str], ctx: _Ctx,
                        path: Path_, what: str) -> None:
    """Refuse the first key of ``record`` that is neither ``known`` nor ``ignored`` (a key of a
    later format version, warned about), naming its line and the nearest known key; a typo such
    as ``dtpye`` or ``dimz`` would otherwise be dropped silently. Raises ``ProblemError``."""
    for key in record:
        if key in known:
            continue
        if key in ignored:
            ctx.warn(path + (key,), f"{key} of {what} is not read (a key of later AI-bench versions)")
            continue
        name = str(key)
        close = difflib.get_close_matches(name, sorted(known | ignored), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ctx.error(path + (key,), f"unknown key {name!r} in {what}{hint} (its keys are "
                                       f"{', '.join(sorted(known))})")


def _family_typo(key: str) -> str | None:
    """The standard name (``ci``, ``bench-gpu``, ``inputs``...) that the top-level list key
    ``key`` misspells, or ``None`` when it is a standard family or a name of its own.

    A misspelling is a key that is a standard name once case, ``_`` and spaces are normalised
    (``bench_gpu``, ``CI``, ``bench_gpu_1``), or one that is within a letter or two of a standard
    name (``difflib`` ratio at least ``_TYPO_RATIO``) without extending it: ``bench-gup`` and
    ``input`` are typos; ``bench-gpu-old``, ``small`` and ``large`` are families of their own."""
    if key in _RESERVED or _STANDARD_FAMILY.match(key):
        return None
    norm = re.sub(r"[\s_]+", "-", key.strip().lower())
    for reserved in _RESERVED:
        if norm == reserved.replace("_", "-"):
            return reserved
    if _STANDARD_FAMILY.match(norm):
        return norm
    if any(key.startswith(f"{name}-") for name in _STANDARD_FAMILIES):
        return None
    close = difflib.get_close_matches(norm, [*_STANDARD_FAMILIES, *_RESERVED], n=1, cutoff=_TYPO_RATIO)
    return close[0] if close else None


def _dtype(value: Any, ctx: _Ctx, path: Path_) -> str:
    canonical = normalize_dtype(value)
    if canonical is None:
        near = difflib.get_close_matches(str(value).lower(), KNOWN_DTYPE_NAMES, n=1, cutoff=_TYPO_RATIO)
        raise ctx.error(path, f"{value!r} is not a torch dtype (e.g. float16, bfloat16, float32, int32; "
                              f"aliases half, float, fp16, bf16 are accepted)"
                        + (f"; did you mean {near[0]!r}?" if near else ""))
    return canonical


def _tolerance(value: Any, ctx: _Ctx, path: Path_) -> float | None:
    if value is None:
        return None
    number = as_number(value)
    if number is None or not math.isfinite(float(number)) or number < 0:
        raise ctx.error(path, f"{value!r} is not a non-negative number")
    return float(number)


def _parse_inputs(raw: Any, ctx: _Ctx) -> dict[str, InputSpec]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ctx.error(("inputs",), f"inputs must be a map from input name to {{shape, dtype}}, "
                                     f"got {type(raw).__name__}")
    inputs: dict[str, InputSpec] = {}
    for name, record in raw.items():
        path = ("inputs", name)
        if not isinstance(name, str) or not _IDENT.match(name):
            raise ctx.error(path, f"input name {name!r} is not an identifier")
        if not isinstance(record, dict):
            raise ctx.error(path, f"input {name} must be a map with 'shape' and 'dtype', got {record!r}")
        _refuse_unknown_keys(record, _INPUT_KEYS, _INPUT_KEYS_IGNORED, ctx, path, f"input {name}")
        shape_raw = record.get("shape")
        if not isinstance(shape_raw, list):
            raise ctx.error(path + ("shape",), f"input {name} needs a 'shape' list of dim names, got {shape_raw!r}")
        shape: list[str | int] = []
        for i, entry in enumerate(shape_raw):
            if isinstance(entry, bool) or not isinstance(entry, (str, int)):
                raise ctx.error(path + ("shape", i), f"shape entry {entry!r} of input {name} is neither a dim "
                                                     f"name nor an integer")
            if isinstance(entry, str) and not _IDENT.match(entry):
                raise ctx.error(path + ("shape", i), f"shape entry {entry!r} of input {name} is not a dim name")
            shape.append(entry)
        dtype = _dtype(record.get("dtype", "float32"), ctx, path + ("dtype",))
        inputs[name] = InputSpec(name=name, shape=tuple(shape), dtype=dtype)
    return inputs


def _parse_inits(raw: Any, ctx: _Ctx) -> list[InitSpec]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ctx.error(("inits",), f"inits must be a list of single-entry maps (- dim: NAME), got "
                                    f"{type(raw).__name__}")
    inits: list[InitSpec] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or len(entry) != 1:
            raise ctx.error(("inits", i), f"inits[{i}] must be a single-entry map such as '- dim: HIDDEN', "
                                          f"got {entry!r}")
        ((key, value),) = entry.items()
        if isinstance(value, (dict, type(None))):
            raise ctx.error(("inits", i), f"inits[{i}] ({key}) has no usable value: {value!r}")
        inits.append(InitSpec(key=str(key), value=value))
    return inits


def _parse_allow(raw: Any, ctx: _Ctx) -> tuple[str, ...]:
    """The spec's ``allow`` list (a name or a list of names), checked against the known
    precision downgrades; a bad entry is a ``ProblemError`` at its line naming the nearest."""
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ctx.error(("allow",), f"allow must be a list of precision downgrade names (e.g. [tf32]), got {raw!r}")
    for i, item in enumerate(items):
        try:
            parse_allowances([item])
        except PrecisionError as exc:
            path: Path_ = ("allow", i) if not isinstance(raw, str) else ("allow",)
            raise ctx.error(path, exc.message) from None
    return parse_allowances(items)


def _parse_dims(raw: Any, ctx: _Ctx, path: Path_) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ctx.error(path, f"dims must be a map from dim name to value, got {type(raw).__name__}")
    dims: dict[str, Any] = {}
    for name, value in raw.items():
        where = path + (name,)
        if not isinstance(name, str) or not _IDENT.match(name):
            raise ctx.error(where, f"dim name {name!r} is not an identifier")
        if isinstance(value, bool) or value is None or isinstance(value, dict):
            raise ctx.error(where, f"dim {name} = {value!r}: a dim is an int, float, list or numeric string")
        if isinstance(value, list):
            for item in value:
                if isinstance(item, (bool, dict, list)) or item is None:
                    raise ctx.error(where, f"dim {name} = {value!r}: list items must be numbers")
        dims[name] = value
    return dims


def _check_top_level_key(key: str, value: Any, ctx: _Ctx) -> None:
    """Refuse a top-level key that is not ``inputs``, ``inits``, ``default_variant`` or a
    variant family (a list): a misspelt standard name (``bench_gpu`` for ``bench-gpu``, which
    would otherwise become a family of its own and leave the GPU timing the ``ci`` shape), a
    map or a scalar (Xe-Forge drops those silently: a ``default_varient`` typo would go
    unnoticed). Raises ``ProblemError`` naming the key's line and the nearest valid key."""
    typo = _family_typo(key)
    if typo is not None:
        message = f"unknown top-level key {key!r}; did you mean {typo!r}?"
        if typo not in _RESERVED:
            message += (" (a variant family of your own may have any name that does not read as a "
                        "misspelt standard one, such as small or bench-gpu-<name>)")
        raise ctx.error((key,), message)
    if isinstance(value, list):
        return
    got = "a map" if isinstance(value, dict) else f"the {type(value).__name__} {value!r}"
    if _STANDARD_FAMILY.match(key):
        raise ctx.error((key,), f"variant family {key!r} must be a list of variant entries ('{key}:' then "
                                f"'  - params: ...'), got {got}")
    close = difflib.get_close_matches(key, [*_RESERVED, *_STANDARD_FAMILIES], n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ctx.error((key,), f"unknown top-level key {key!r}{hint} (the top level holds inputs, inits, "
                            f"default_variant and variant families, which are lists; {key!r} holds {got}; "
                            f"notes belong in YAML comments)")


def variant_name(family: str, index: int) -> str:
    """The name of entry ``index`` of a variant list: ``ci`` for entry 0, ``ci[1]`` after."""
    return family if index == 0 else f"{family}[{index}]"


def _parse_variant(family: str, entry: Any, inputs: dict[str, InputSpec], inits: list[InitSpec],
                   ctx: _Ctx, index: int = 0) -> Variant:
    path: Path_ = (family, index)
    if not isinstance(entry, dict):
        raise ctx.error(path, f"variant {family}[{index}] must be a map (params, dims, dtype, flop, ...), "
                              f"got {entry!r}")
    _refuse_unknown_keys(entry, _VARIANT_KEYS, _VARIANT_KEYS_IGNORED, ctx, path,
                         f"variant {variant_name(family, index)}")
    params_raw = entry.get("params")
    if params_raw is None:
        params = list(inputs)
        if inputs:
            ctx.warn(path, f"no params given; using the inputs in spec order ({', '.join(params)})")
    else:
        if not isinstance(params_raw, list) or not all(isinstance(p, str) for p in params_raw):
            raise ctx.error(path + ("params",), f"params must be a list of input names, got {params_raw!r}")
        params = list(params_raw)
        dupes = sorted({p for p in params if params.count(p) > 1})
        if dupes:
            raise ctx.error(path + ("params",), f"params name {', '.join(dupes)} more than once")
    dims = _parse_dims(entry.get("dims"), ctx, path + ("dims",))
    dtype = _dtype(entry["dtype"], ctx, path + ("dtype",)) if entry.get("dtype") is not None else None
    flop_formula = entry.get("flop")
    if isinstance(flop_formula, bool) or (flop_formula is not None and not isinstance(flop_formula, (str, int, float))):
        raise ctx.error(path + ("flop",), f"flop must be a formula string or a number, got {flop_formula!r}")
    rtol = _tolerance(entry.get("rtol"), ctx, path + ("rtol",))
    atol = _tolerance(entry.get("atol"), ctx, path + ("atol",))
    return build_variant(variant_name(family, index), params=params, dims=dims, inputs=inputs, inits=inits,
                         dtype=dtype, flop_formula=flop_formula, rtol=rtol, atol=atol, ctx=ctx, entry_path=path)


def parse_spec(text: str | bytes, path: str | Path | None = None, *, label: str | None = None) -> Spec:
    """Parse Xe-Forge YAML spec text (see the module docstring for the format).

    Args:
        text: the YAML text (``bytes`` must be UTF-8).
        path: the file it came from, used in messages only (nothing is read from it).
        label: the name used in messages when there is no ``path`` (e.g. ``kernel.yaml``).

    Returns:
        A :class:`Spec` whose ``variants`` maps variant name (``ci``, ``ci[1]``, ``bench-gpu``)
        -> resolved :class:`Variant`, in file order, and whose ``warnings`` lists what was
        ignored or looks odd.

    Raises:
        ProblemError: empty, non-UTF-8 or over-1-MB text; YAML syntax errors (with line);
            a bad dtype, an unknown input in ``params``, a shape dim a variant does not define,
            a malformed ``inits`` entry, a flop formula that is not arithmetic on dims, a
            negative or non-numeric tolerance; an unknown key at any level (a misspelt
            ``bench_gpu`` family, ``dtpye`` in an input, ``dimz`` in a variant, a scalar or map
            at the top level), named at its own line with the nearest valid key; a spec with no
            variant at all. Each names the file, line and field.
    """
    p = Path(path) if path is not None else None
    where: str | Path | None = p if p is not None else label
    text = check_text(text, where, "spec")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        hint = ""
        if p is not None and p.suffix == ".py":
            hint = (" (this is a Python file: --spec takes the kernel's YAML spec; a KernelBench-style "
                    "problem or reference .py is given as the kernel, or with --reference)")
        raise ProblemError(f"YAML syntax error: {exc.problem or exc}{hint}", file=where, line=line) from None
    except yaml.YAMLError as exc:
        raise ProblemError(f"YAML error: {exc}", file=where) from None
    lines: dict[Path_, int] = {}
    dups: list[tuple[Path_, int]] = []
    if node is not None:
        _line_map_child(node, (), lines, dups)
    ctx = _Ctx(p, lines, label)
    for dup_path, dup_line in dups:
        ctx.warnings.append(f"{p.name if p else (label or 'spec')}:{dup_line} [{_field(dup_path)}]: key given more than "
                            f"once; YAML keeps only the last one")
    if not isinstance(data, dict):
        raise ProblemError(f"a spec must be a YAML map (inputs, inits, variants), got {type(data).__name__}",
                           file=where, line=1)
    for key, value in data.items():
        if not isinstance(key, str):
            raise ctx.error((key,), f"top-level key {key!r} is not a string")
        if key not in _RESERVED:
            _check_top_level_key(key, value, ctx)
    inputs = _parse_inputs(data.get("inputs"), ctx)
    inits = _parse_inits(data.get("inits"), ctx)
    default = data.get("default_variant")
    if default is not None and not isinstance(default, str):
        raise ctx.error(("default_variant",), f"default_variant must be a variant name, got {default!r}")
    allow = _parse_allow(data.get("allow"), ctx)

    variants: dict[str, Variant] = {}
    for key, value in data.items():
        if key in _RESERVED:
            continue
        if not value:
            ctx.warn((key,), f"variant family {key!r} is an empty list and is ignored")
            continue
        for index, entry in enumerate(value):
            variant = _parse_variant(key, entry, inputs, inits, ctx, index)
            variants[variant.name] = variant

    if default is not None and default not in variants:
        ctx.warn(("default_variant",), f"default_variant {default!r} is not a variant of this spec "
                                       f"(variants: {', '.join(variants) or 'none'}); it is ignored")
    if not variants:  # nothing could be checked or timed: every later step would fail on it
        empty = [k for k, v in data.items() if isinstance(k, str) and k not in _RESERVED and v == []]
        raise ctx.error((empty[0],) if empty else (), (
            f"every variant list of the spec is empty ({', '.join(f'{k}: []' for k in empty)})" if empty else
            "the spec defines no variants (no top-level key with a list value)")
            + ": add a `ci` list of small shapes to check correctness at, and a `bench-gpu` list to time at")
    if not any(is_ci_variant(n) for n in variants):
        families = [k for k in data if isinstance(k, str) and k not in _RESERVED and isinstance(data[k], list)]
        close = difflib.get_close_matches("ci", families, n=1, cutoff=0.6)
        fallback = default if default in variants else ("bench-gpu" if "bench-gpu" in variants else next(iter(variants)))
        hint = f"; did you mean ci instead of {close[0]!r}?" if close else ""
        ctx.warn((close[0],) if close else (), f"the spec has no ci variant, so correctness is checked at {fallback!r} "
                                               f"(reduced to {fallback}-small where it is large){hint}")
    return Spec(path=p, inputs=inputs, inits=inits, variants=variants, default_variant=default,
                warnings=ctx.warnings, lines={_field(k): v for k, v in lines.items() if k}, allow=allow)


def _odd_value(value: int) -> int:
    """A nearby size that is not a power of two: 2 -> 3, 4 -> 3, 64 -> 63, 128 -> 127;
    sizes that are already not powers of two, and 0 or 1, are kept."""
    if value < 2 or value & (value - 1):
        return value
    return 3 if value == 2 else value - 1


def odd_size_variant(problem_or_spec: Any, variant: Variant | str) -> Variant | None:
    """A copy of ``variant`` whose input-only dims sit at a nearby non-power-of-two size.

    The dims moved are those that appear in the shape of an input the variant passes and are
    not used by ``inits`` (so the model's weights, built from the inits, are unchanged): each
    power of two ``v >= 2`` becomes ``v - 1`` (``2`` becomes ``3``). The copy is named
    ``<name>-odd`` and has its shapes, ``bytes``, ``flop`` and ``init_values`` recomputed. The
    verifier runs it to catch masking bugs that power-of-two shapes hide.

    Args:
        problem_or_spec: a :class:`~xeforge_core.problem.model.Problem` (its spec is used) or
            a :class:`Spec`.
        variant: a :class:`Variant` of that spec, or its name.

    Returns:
        The odd-size :class:`Variant`, or ``None`` when there is no spec or no dim to move.
    """
    spec = problem_or_spec if isinstance(problem_or_spec, Spec) else getattr(problem_or_spec, "spec", None)
    if spec is None:
        return None
    if isinstance(variant, str):
        if variant not in spec.variants:
            raise ProblemError(f"unknown variant {variant!r} (known: {', '.join(spec.variants) or 'none'})"
                               + nearest_name_hint(variant, list(spec.variants)), file=spec.path)
        variant = spec.variants[variant]
    init_dims = {i.value for i in spec.inits if isinstance(i.value, str)}
    shape_dims: set[str] = set()
    for pname in variant.params:
        inp = spec.inputs.get(pname)
        if inp is not None:
            shape_dims |= {d for d in inp.shape if isinstance(d, str)}
    dims = dict(variant.dims)
    moved = False
    for name in shape_dims - init_dims:
        value = dims.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            new = _odd_value(value)
            if new != value:
                dims[name] = new
                moved = True
    if not moved:
        return None
    return build_variant(f"{variant.name}-odd", params=list(variant.params), dims=dims, inputs=spec.inputs,
                         inits=spec.inits, dtype=variant.dtype, flop_formula=variant.flop_formula,
                         rtol=variant.rtol, atol=variant.atol)
