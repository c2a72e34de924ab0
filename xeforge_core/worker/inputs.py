"""Build models and inputs, identically in the baseline and the candidate job.

Inputs are drawn on the host from a ``torch.Generator`` seeded from (seed, distribution, input
position), then moved to the device, so the baseline and the candidate (and every device) see
the same values. Input distributions (``DISTRIBUTIONS``):

* ``normal``  standard normal.
* ``uniform`` uniform in [-1, 1].
* ``mixed``   mixed signs and magnitudes: sign * 10**u with u uniform in [-3, 1], so values
  span 1e-3..10 (large enough to expose precision loss, small enough that an fp16 GEMM over a
  few hundred terms does not overflow).
* ``shifted`` normal around ``SHIFTED_MEAN`` (100): far from zero, where numerically unstable
  kernels fail (a softmax without the max subtraction overflows, a one-pass variance cancels);
  run at the first seed only (``domain.redraw_seeds``), and skipped where the truth leaves its
  domain there, as every redraw is (an input of one sign, such as ``torch.rand``'s, is moved
  too: the normal redraw gives it both signs already, and where its domain matters the truth
  leaves it or the verdict says the kernel holds only on the problem's own inputs).
* ``spread``  a wide spread of magnitudes in every row, both signs: sign * 10**u with u uniform
  in [-2, 3] (``SPREAD_DECADES``), so values span 0.01..1000. A row's largest value lies
  anywhere in it, far above most of the row (a softmax that takes its maximum from the first
  tile only overflows), and large negatives come with large positives (a log-sigmoid written as
  ``-log(1 + exp(-x))`` overflows below -88). Run at the first seed only, like ``shifted``.
* ``zeros``   normal, with exact zeros: every element whose index along some dimension is 1
  modulo ``ZERO_STRIDE`` (4), so whole rows, columns and samples are zero along every axis a
  kernel may reduce (an RMSNorm without its eps divides 0 by 0), and one in ``ZERO_ODDS`` (8)
  of the others (``sign(0)`` is 0, not 1). Zeros are equal values, so what torch leaves
  undefined among equal values is watched as on ``ties``. Run at the first seed only.
* ``rowwise`` normal, each row (slice along the last dimension) scaled by its own 10**v, v uniform
  in ``ROWWISE_DECADES`` (-4 to 1), and given its own sign: all negative, all positive, or both,
  a third of the rows each. A whole row of small values shows an eps added outside a square root
  (``sqrt(ms) + eps`` for ``sqrt(ms + eps)``: 40% off at 1e-3), a row of negatives shows masked
  lanes padded with 0 before a maximum (``other=0.0`` for ``-inf``), a row of positives the same
  before a minimum; ``mixed`` and ``spread`` vary magnitudes within every row, so each row's
  scale stays about 1. Run at the first seed only, like ``shifted``.
* ``ties``    uniform on the 16 values ``(k + 1/2) / 8``, ``k`` in -8..7 (odd multiples of 1/16 in
  [-1, 1], none zero): a row of more than 16 holds equal values, where an argmax must keep the
  first of its equal maxima (as torch documents) and a sort its order; on a continuous law no
  two values tie. Run at the first seed only, like ``shifted``.
* ``module``  (no spec only) exactly what the module's ``get_inputs()`` returns under
  :func:`seed_all` (torch's, numpy's and Python's generators seeded): a problem's own inputs, the first distribution of every problem
  without a spec (``xeforge_core.worker.domain``).

Large floating-point inputs (``DEVICE_DRAW_BYTES`` and up) are drawn on the device instead,
in place, so that a published KernelBench size (a 6.4 GB tensor) never passes through host
memory; a variant with ``inputs_on_device`` also runs ``get_inputs()`` and the model's
constructor under ``torch.device(device)``. Without a spec, a variant's ``overrides`` set the
inputs module's size constants while ``get_inputs()`` / ``get_init_inputs()`` run.

Integer inputs are ``randint(0, 16)`` (bool: ``randint(0, 2)``) whatever the distribution, or
``randint(lo, hi)`` when the spec's input gives ``range: [lo, hi]`` (bounds may be dim names).
Without a spec, ``get_inputs()`` gives the shapes and dtypes, and its floating-point tensors are
redrawn from the distribution, keeping the structure the problem poses: its exact zeros (a
triangular operand), its symmetry and its sorted rows (:func:`input_structure`). With a spec, the variant's ``dtype`` overrides the dtype of every
floating-point input and the model is cast with ``model.to(dtype)``, as Xe-Forge does.

Weights: the model is constructed under :func:`seed_all`, and the parameters its
constructor fills with one value (a norm's ones, a zero bias) are redrawn as trained weights
would be (``xeforge_core.worker.parameters``); the candidate then takes
the baseline's ``state_dict`` (saved by the baseline job) when the two hold the same tensors (by
name, else by registration order with equal shapes: ``load_matching_state``), and the reference
takes the kernel model's the same way; otherwise both keep the seeded init.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import random
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from xeforge_core.verdict import PARTIAL, VerdictKind
from xeforge_core.worker import formats
from xeforge_core.worker.errors import Failure, WorkerError, classify
from xeforge_core.worker.formats.base import constructor_values
from xeforge_core.worker.loading import LoadedModule
from xeforge_core.worker.parameters import redraw_constant_parameters_

DISTRIBUTIONS = ("normal", "uniform", "mixed", "shifted", "ties", "spread", "zeros", "rowwise")
#: The mean of the ``shifted`` distribution: past 88.7, where float32's exp overflows, so a softmax
#: or logsumexp without the max subtraction gives Inf or NaN; a mean far above the spread, so a
#: variance computed as E[x^2] - mean^2 loses its digits; finite in float16 and bfloat16.
SHIFTED_MEAN = 100.0
#: The redraw whose values tie (below).
TIES = "ties"
#: The redraws holding equal values: those tied by design and the exact zeros of ``zeros``.
TIED = (TIES, "zeros")
#: The decades the ``spread`` distribution's magnitudes span: 10**-2 to 10**3. Its largest values
#: pass 88.7, where float32's exp overflows (a row's maximum then matters, and a large negative
#: overflows ``exp(-x)``), and stay finite in float16 (65504) and bfloat16.
SPREAD_DECADES = (-2.0, 3.0)
#: The decades the ``mixed`` distribution's magnitudes span: 10**-3 to 10**1.
MIXED_DECADES = (-3.0, 1.0)
#: The decades the scales of the ``rowwise`` distribution's rows span: 10**-4 to 10**1.
ROWWISE_DECADES = (-4.0, 1.0)
#: The distributions drawn as sign * 10**u, u uniform in their decades.
_DECADES = {"mixed": MIXED_DECADES, "spread": SPREAD_DECADES}
#: Every index along a dimension congruent to 1 modulo this is zero in the ``zeros`` distribution
#: (whole rows, columns and samples), and one in ``ZERO_ODDS`` of the other elements.
ZERO_STRIDE = 4
ZERO_ODDS = 8
#: The values of the ``ties`` distribution: this many, evenly spaced in [-1, 1], none zero (a
#: divisor stays finite); binary fractions, exact in every floating-point dtype.
TIE_LEVELS = 16


def _fail(reason: str, *, problem: bool = True) -> WorkerError:
    """A failure building the inputs or a module: with ``problem``, the problem (its
    ``get_inputs()``, ``get_init_inputs()`` or spec) breaks its contract (``Failure.problem``)."""
    return WorkerError(Failure(VerdictKind.RUNTIME_ERROR, reason, problem=problem))


def seed_all(seed: int) -> None:
    """Seed every generator a problem's ``get_inputs()``, ``get_init_inputs()`` or constructor may
    draw from: torch's, Python's ``random`` and numpy's global one (where the problem imported
    numpy; its seed is taken modulo 2**32, the range numpy accepts). Without numpy's, a
    ``get_inputs()`` built with ``np.random.rand`` gives new values at every call, and the
    baseline, the candidate and the truth's second call would each see other inputs."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (1 << 32))


@contextlib.contextmanager
def _generators_kept(device: torch.device) -> Iterator[None]:
    """The generators :func:`seed_all` seeds (and ``device``'s, where it is a GPU) as they were
    before the block, after it."""
    devices = [device] if device.type == "cuda" else []
    numpy = sys.modules.get("numpy")
    state = random.getstate(), numpy.random.get_state() if numpy is not None else None
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(state[0])
        if numpy is not None and state[1] is not None:
            numpy.random.set_state(state[1])


def dtype_from_name(name: str) -> torch.dtype:
    """``"float16"`` / ``"torch.float16"`` / ``"fp16"`` -> ``torch.float16``. Raises
    ``WorkerError`` naming the bad dtype."""
    aliases = {"fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32",
               "fp64": "float64", "double": "float64", "bf16": "bfloat16", "int": "int32",
               "long": "int64", "bool": "bool"}
    key = str(name).replace("torch.", "").strip()
    key = aliases.get(key, key)
    dt = getattr(torch, key, None)
    if not isinstance(dt, torch.dtype):
        raise _fail(f"unknown dtype {name!r} in the spec")
    return dt


def split_redraw(distribution: str) -> tuple[str, int | None]:
    """``("normal", 1)`` for the partial redraw ``normal@1`` (input position 1 redrawn from
    ``normal``, the others the problem's own), ``("normal", None)`` for ``normal``.

    Raises ``WorkerError`` (not the problem's) for a position that is not a number."""
    base, sep, position = distribution.partition(PARTIAL)
    if not sep:
        return distribution, None
    if not position.isdigit():
        raise _fail(f"partial redraw {distribution!r}: the input position after {PARTIAL!r} must be a number",
                    problem=False)
    return base, int(position)


def base_distribution(distribution: str) -> str:
    """The law a (partial) redraw draws from: ``normal`` for ``normal`` and ``normal@1``."""
    return distribution.partition(PARTIAL)[0]


def _generator(seed: int, distribution: str, index: int) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}:{distribution}:{index}".encode()).digest()
    g = torch.Generator(device="cpu")
    g.manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
    return g


def make_tensor(shape: list[int], dtype: torch.dtype, distribution: str, gen: torch.Generator,
                value_range: tuple[int, int] | None = None) -> torch.Tensor:
    """A host tensor of ``shape``/``dtype`` drawn from ``distribution`` (see module docstring).
    Integer tensors are ``randint(lo, hi)`` with ``value_range = (lo, hi)`` (default (0, 16))."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if not (dtype.is_floating_point or dtype.is_complex):
        lo, hi = value_range or (0, 16)
        return torch.randint(int(lo), int(hi), shape, generator=gen, dtype=torch.int64).to(dtype)
    if distribution == "uniform":
        x = torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1
    elif distribution in _DECADES:
        lo, hi = _DECADES[distribution]
        mag = 10 ** (torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo)
        x = mag * (torch.randint(0, 2, shape, generator=gen).float() * 2 - 1)
    elif distribution in ("normal", "module"):
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
    elif distribution == "shifted":
        x = torch.randn(shape, generator=gen, dtype=torch.float32) + SHIFTED_MEAN
    elif distribution == "ties":
        x = (torch.randint(-TIE_LEVELS // 2, TIE_LEVELS // 2, shape, generator=gen).float() + 0.5) * (2 / TIE_LEVELS)
    elif distribution == "zeros":
        x = _zero_out_(torch.randn(shape, generator=gen, dtype=torch.float32), gen)
    elif distribution == "rowwise":
        x = _rowwise_(torch.randn(shape, generator=gen, dtype=torch.float32), gen)
    else:
        raise _fail(f"unknown input distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})", problem=False)
    return x.to(dtype)


#: A floating-point input at least this large is drawn on the device with a device generator
#: (seeded like the host one) instead of on the host, so host memory does not grow with it.
#: Values then agree between roles on the same kind of device, not across kinds.
DEVICE_DRAW_BYTES = 64 << 20


def _derived_assignments(module: Any, names: set[str]) -> list[tuple[str, Any]]:
    """Module-level ``NAME = <expression>`` statements of ``module``'s own file that read any of
    ``names`` (directly or through an earlier such statement), in file order: e.g.
    ``bias_shape = (out_features,)``, which must follow an overridden ``out_features``."""
    import ast

    path = getattr(module, "__file__", None)
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, SyntaxError, ValueError):
        tree = None
    if tree is None:
        return []
    touched = set(names)
    out = []
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        read = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        if read & touched and stmt.targets[0].id not in names:
            out.append((stmt.targets[0].id, compile(ast.Expression(stmt.value), path, "eval")))
            touched.add(stmt.targets[0].id)
    return out


@contextlib.contextmanager
def module_overrides(module: Any, overrides: dict[str, Any] | None) -> Iterator[None]:
    """Set the module-level size constants ``overrides`` (``{"batch_size": 16}``) on
    ``module`` while ``get_inputs()`` / ``get_init_inputs()`` run, re-evaluate the module-level
    values computed from them (``bias_shape = (out_features,)``), and put the published values
    back afterwards. The module is the problem's own file (trusted code): its expressions are
    evaluated in its namespace."""
    if not overrides:
        yield
        return
    missing = object()
    derived = _derived_assignments(module, set(overrides))
    names = list(overrides) + [n for n, _ in derived]
    saved = {k: getattr(module, k, missing) for k in names}
    for k, v in overrides.items():
        if isinstance(v, (list, tuple)) and isinstance(saved[k], (list, tuple)):
            v = type(saved[k])(v)  # a job's JSON turns tuples into lists: keep the module's own kind
        setattr(module, k, v)
    for name, code in derived:
        with contextlib.suppress(Exception):  # a value that cannot be recomputed keeps its own
            setattr(module, name, eval(code, vars(module)))  # the problem's own expression
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is missing:
                with contextlib.suppress(AttributeError):
                    delattr(module, k)
            else:
                setattr(module, k, v)


@contextlib.contextmanager
def cuda_calls_to(device: torch.device) -> Iterator[None]:
    """While a problem's ``get_inputs()`` runs on another device than cuda, its hard-coded
    ``tensor.cuda()`` (KernelBench's examples write ``torch.randn(...).cuda()``) moves the
    tensor to ``device`` instead, which is what the problem means: "on the GPU under test"."""
    if device.type == "cuda":
        yield
        return
    original = torch.Tensor.cuda

    def cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.to(device)

    torch.Tensor.cuda = cuda  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.cuda = original  # type: ignore[method-assign]


def _device_generator(seed: int, distribution: str, index: int, device: torch.device) -> torch.Generator:
    digest = hashlib.sha256(f"{seed}:{distribution}:{index}".encode()).digest()
    g = torch.Generator(device=device)
    g.manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
    return g


def _zero_out_(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``t`` (contiguous) with the exact zeros of the ``zeros`` distribution, in place: every index
    congruent to 1 modulo ``ZERO_STRIDE`` along each dimension of more than one element, then one
    in ``ZERO_ODDS`` of the other elements (drawn with ``gen``, in slices, so no full-size
    temporary is made). Returns ``t``."""
    for d in range(t.dim()):
        if t.shape[d] > 1:
            t.index_fill_(d, torch.arange(1, t.shape[d], ZERO_STRIDE, device=t.device), 0)
    flat = t.view(-1)
    step = 1 << 24
    for start in range(0, flat.numel(), step):
        part = flat[start:start + step]
        odds = torch.empty(part.shape, dtype=torch.float32, device=t.device).uniform_(0.0, 1.0, generator=gen)
        part.masked_fill_(odds < 1 / ZERO_ODDS, 0)
    return t


def _rowwise_(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``t`` (contiguous, normal) with each row along its last dimension scaled by 10**v, v uniform
    in ``ROWWISE_DECADES``, and made all negative, all positive or left of both signs (a third of
    the rows each), in place, a slice of rows at a time (``rowwise``). Returns ``t``."""
    if t.dim() == 0 or t.numel() == 0:
        return t
    rows = t.view(-1, t.shape[-1])
    lo, hi = ROWWISE_DECADES
    step = max(1, (1 << 24) // max(1, rows.shape[1]))
    for start in range(0, rows.shape[0], step):
        part = rows[start:start + step]
        scale = torch.empty((part.shape[0], 1), dtype=torch.float32, device=t.device).uniform_(lo, hi, generator=gen)
        mode = torch.randint(0, 3, (part.shape[0], 1), generator=gen, device=t.device)
        signed = torch.where(mode == 2, part, part.abs() * (mode * 2 - 1).to(part.dtype))
        part.copy_(signed * torch.pow(10.0, scale).to(part.dtype))
    return t


def _signed_decades_(t: torch.Tensor, lo: float, hi: float, gen: torch.Generator) -> torch.Tensor:
    """``t`` (contiguous) filled in place with sign * 10**u, u uniform in [lo, hi), the sign a fair
    coin (``mixed``, ``spread``), drawn in slices so no full-size temporary is made. Returns ``t``."""
    flat = t.view(-1)
    step = 1 << 24
    for start in range(0, flat.numel(), step):
        part = flat[start:start + step]
        mag = torch.empty(part.shape, dtype=torch.float32, device=t.device).uniform_(lo, hi, generator=gen)
        sign = torch.empty(part.shape, dtype=torch.float32, device=t.device).bernoulli_(0.5, generator=gen)
        part.copy_(torch.pow(10.0, mag) * (sign * 2 - 1))
    return t


def fill_(t: torch.Tensor, distribution: str, gen: torch.Generator) -> torch.Tensor:
    """Redraw the floating-point tensor ``t`` in place from ``distribution`` with ``gen`` (a
    generator on ``t``'s device); ``mixed`` is drawn in slices so no full-size temporary is
    made. Returns ``t``."""
    if distribution == "uniform":
        return t.uniform_(-1.0, 1.0, generator=gen)
    if distribution in ("normal", "module"):
        return t.normal_(0.0, 1.0, generator=gen)
    if distribution == "shifted":
        return t.normal_(SHIFTED_MEAN, 1.0, generator=gen)
    if distribution == "ties":
        flat = t.view(-1)
        step = 1 << 24
        for start in range(0, flat.numel(), step):
            part = flat[start:start + step]
            k = torch.randint(-TIE_LEVELS // 2, TIE_LEVELS // 2, part.shape, generator=gen, device=t.device)
            part.copy_((k.float() + 0.5) * (2 / TIE_LEVELS))
        return t
    if distribution == "zeros":
        return _zero_out_(t.normal_(0.0, 1.0, generator=gen), gen)
    if distribution in _DECADES:
        return _signed_decades_(t, *_DECADES[distribution], gen)
    if distribution == "rowwise":
        return _rowwise_(t.normal_(0.0, 1.0, generator=gen), gen)
    raise _fail(f"unknown input distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})", problem=False)


def _large(shape: list[int], dtype: torch.dtype) -> bool:
    n = 1
    for d in shape:
        n *= int(d)
    return n * torch.empty((), dtype=dtype).element_size() >= DEVICE_DRAW_BYTES


def _resolve_dim(value: Any, dims: dict[str, Any], input_name: str) -> list[int]:
    if isinstance(value, bool):
        raise _fail(f"input {input_name}: shape entry {value!r} is not a size")
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        if value in dims:
            return _resolve_dim(dims[value], dims, input_name)
        try:
            return [int(value)]
        except ValueError:
            known = ", ".join(sorted(dims)) or "none"
            raise _fail(f"input {input_name}: unknown dim {value!r} in its shape (variant dims: {known})") from None
    if isinstance(value, float) and value.is_integer():
        return [int(value)]
    if isinstance(value, (list, tuple)):
        out: list[int] = []
        for v in value:
            out += _resolve_dim(v, dims, input_name)
        return out
    raise _fail(f"input {input_name}: shape entry {value!r} is not an integer size")


def init_values(loaded: LoadedModule, variant: dict[str, Any]) -> list[Any]:
    """Positional ``Model.__init__`` values: the variant's resolved ``init_values``, else the
    module's ``get_init_inputs()``, else none."""
    vals = variant.get("init_values")
    if vals:
        return list(vals)
    fn = getattr(loaded.module, formats.inputs_functions()[1], None)
    if fn is None:
        return []
    seed_all(0)  # one seed for every job: the baseline's and the candidate's models take the same values
    try:
        with module_overrides(loaded.module, variant.get("overrides")):
            got = fn()
    except Exception as exc:
        raise WorkerError(classify(exc, loaded.file, during="calling get_init_inputs()")) from exc
    if not isinstance(got, (list, tuple)):
        raise _fail(f"get_init_inputs() in {loaded.path.name} returned {type(got).__name__}, "
                    "not a list of constructor arguments")
    try:
        cls = loaded.model_class()
    except WorkerError:
        return list(got)
    return constructor_values(cls, got)  # KernelBook's [[args], {kwargs}] as positional values


def construct_model(loaded: LoadedModule, inits: list[Any], seed: int, device: torch.device,
                    dtype: torch.dtype | None, *, on_device: bool = False,
                    redrawn: dict[str, float] | None = None) -> torch.nn.Module:
    """Instantiate the module's model class under :func:`seed_all`, move it to
    ``device`` and (when the variant gives a dtype) cast it; with ``on_device`` (large
    problems) the parameters are created on the device directly. Parameters the constructor
    filled with one value are then redrawn as trained weights would be
    (:mod:`xeforge_core.worker.parameters`); ``redrawn``, when given, receives their names and
    fill values. Raises ``WorkerError`` naming the class and the init values it rejected."""
    cls = loaded.model_class()
    seed_all(seed)
    try:
        if on_device and device.type != "cpu":
            with torch.device(device):  # parameters are made there, not copied from the host
                model = cls(*inits)
        else:
            model = cls(*inits)
    except Exception as exc:
        failure = classify(exc, loaded.file, during="constructing the model")
        shown = ", ".join(repr(v) for v in inits)
        failure.reason = (f"{loaded.class_name}({shown}) rejected its init values: "
                          f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
        if failure.kind is VerdictKind.COMPILE_ERROR:
            failure.kind = VerdictKind.RUNTIME_ERROR
        raise WorkerError(failure) from exc
    if not isinstance(model, torch.nn.Module):
        raise _fail(f"{loaded.class_name}(...) is not a torch.nn.Module (got {type(model).__name__})",
                    problem=False)  # the module under test: the candidate's, in a candidate's job
    try:
        model = model.to(device)
        if dtype is not None:
            model = model.to(dtype)
    except Exception as exc:
        raise WorkerError(classify(exc, loaded.file, during="moving the model to the device")) from exc
    filled = redraw_constant_parameters_(model, seed)
    if redrawn is not None:
        redrawn.update(filled)
    return model


def load_matching_state(model: torch.nn.Module, state: dict[str, torch.Tensor] | None) -> str:
    """Copy ``state`` into ``model`` when they hold the same tensors; returns what happened
    (``"copied"``, ``"copied by position ..."`` or why not).

    The same keys and shapes copy by name. Different names (a ``ModelNew`` that keeps
    ``self.weight`` where ``Model`` has ``self.gemm = nn.Linear(...)``, often initialised in
    another order, so the same seed gives other values) copy by shape when both hold the same
    number of tensors of each shape, pairing tensors of one shape in registration order. Wrong
    weights can only make a candidate disagree with the truth, never agree with it by chance.
    Where the copy changed a value (the model's own init, under the same seed, is not the
    baseline's: ``torch.randn`` where ``nn.Linear`` draws Kaiming-uniform, or the tensors made in
    another order), the note says so with ``INIT_DIFFERS`` and names those tensors."""
    if not state:
        return "no saved weights"
    own = model.state_dict()
    if set(own) == set(state):
        pairs = [(k, k) for k in own]
        how = "copied"
    else:
        def by_shape(d: dict[str, torch.Tensor]) -> dict[tuple[int, ...], list[str]]:
            groups: dict[tuple[int, ...], list[str]] = {}
            for k, v in d.items():
                groups.setdefault(tuple(v.shape), []).append(k)
            return groups

        mine_by, theirs_by = by_shape(own), by_shape(state)
        if {k: len(v) for k, v in mine_by.items()} != {k: len(v) for k, v in theirs_by.items()}:
            return (f"state_dict keys differ and so do the tensors' shapes ({len(own)} vs {len(state)} tensors); "
                    "same init seed used")
        pairs = [pair for shape, names in mine_by.items() for pair in zip(names, theirs_by[shape])]
        how = (f"copied by shape: {', '.join(f'{a} <- {b}' for a, b in pairs[:4])}"
               + (" ..." if len(pairs) > 4 else "") + " (the names differ)")
    for mine, theirs in pairs:
        if tuple(own[mine].shape) != tuple(state[theirs].shape):
            return (f"state_dict shape of {mine} differs from {theirs}'s; same init seed used" if mine != theirs
                    else f"state_dict shape of {mine} differs; same init seed used")
    with torch.no_grad():
        differ = []
        for mine, theirs in pairs:
            value = state[theirs].to(device=own[mine].device, dtype=own[mine].dtype)
            if not torch.equal(own[mine], value):
                differ.append(mine)
            own[mine].copy_(value)
    if differ:
        how += (f"; {INIT_DIFFERS} ({', '.join(differ[:4])}{' ...' if len(differ) > 4 else ''}): built under the same "
                "seed, its own initial values were not the baseline's")
    return how


#: Marks a ``load_matching_state`` note whose copy changed the model's own initial values.
INIT_DIFFERS = "own initial values differ"


def inputs_list_problem(got: Any) -> str:
    """What is wrong with ``got``, what a problem's ``get_inputs()`` returned, where it is not a
    list or tuple of forward()'s arguments (``"returned None; it must return ..."``); ``""`` where
    it is one. The verifier's workers and the first-version generation say it alike."""
    if isinstance(got, torch.Tensor) or not isinstance(got, (list, tuple)):
        what = "None" if got is None else f"a {type(got).__name__}"
        return f"returned {what}; it must return a list of forward()'s arguments (tensors and numbers)"
    return ""


def build_inputs(loaded: LoadedModule, spec: dict[str, Any] | None, variant: dict[str, Any], seed: int,
                 distribution: str, device: torch.device) -> list[Any]:
    """The forward() arguments for (variant, seed, distribution), on ``device``. A variant
    ``dtype`` replaces every floating-point input's own (the spec's declared dtype, or what
    ``get_inputs()`` returned). Without a spec, a partial redraw (``normal@1``,
    :func:`split_redraw`) redraws the floating-point input at that position alone, with the
    values the whole redraw gives it, and keeps the others as ``get_inputs()`` returns them.

    Raises ``WorkerError`` (runtime_error) naming the problem when the spec or ``get_inputs()``
    cannot give inputs: unknown dim, bad dtype, an input the spec does not declare, or
    ``get_inputs()`` returning something that is not a list of tensors / numbers.
    """
    if spec and spec.get("inputs"):
        declared = spec["inputs"]
        names = list(variant.get("params") or declared.keys())
        dims = dict(variant.get("dims") or {})
        override = variant.get("dtype")
        args: list[Any] = []
        for i, name in enumerate(names):
            if name not in declared:
                raise _fail(f"variant {variant.get('name')!r} names input {name!r}, which the spec's "
                            f"inputs do not declare (declared: {', '.join(declared)})")
            entry = declared[name]
            shape = _resolve_dim(list(entry.get("shape") or []), dims, name)
            dtype = dtype_from_name(entry.get("dtype") or "float32")
            if override and (dtype.is_floating_point or dtype.is_complex):
                dtype = dtype_from_name(override)
            rng = entry.get("range")
            value_range = None
            if isinstance(rng, (list, tuple)) and len(rng) == 2:
                value_range = (int(_resolve_dim(rng[0], dims, name)[0]), int(_resolve_dim(rng[1], dims, name)[0]))
            if device.type != "cpu" and (dtype.is_floating_point or dtype.is_complex) and _large(shape, dtype):
                t = torch.empty(shape, dtype=dtype, device=device)
                args.append(fill_(t, distribution, _device_generator(seed, distribution, i, device)))
            else:
                args.append(make_tensor(shape, dtype, distribution, _generator(seed, distribution, i),
                                        value_range).to(device))
        return args

    fn = getattr(loaded.module, formats.inputs_functions()[0], None)
    if fn is None:
        raise _fail(f"{loaded.path.name} has no get_inputs() and no spec was given, so there are no inputs")
    seed_all(seed)
    on_device = bool(variant.get("inputs_on_device")) and device.type != "cpu"
    try:
        with module_overrides(loaded.module, variant.get("overrides")), cuda_calls_to(device), \
                (torch.device(device) if on_device else contextlib.nullcontext()):
            got = fn()
    except Exception as exc:
        raise WorkerError(classify(exc, loaded.file, during="calling get_inputs()")) from exc
    wrong = inputs_list_problem(got)
    if wrong:
        raise _fail(f"get_inputs() in {loaded.path.name} {wrong}")
    args = []
    target = dtype_from_name(variant["dtype"]) if variant.get("dtype") else None
    distribution, only = split_redraw(distribution)

    def draw(other: int) -> list[Any]:  # another draw of the problem's own, to tell sorted rows from chance
        with _generators_kept(device):  # what runs next draws as it would without this draw
            seed_all(other)
            try:
                with module_overrides(loaded.module, variant.get("overrides")), cuda_calls_to(device), \
                        (torch.device(device) if on_device else contextlib.nullcontext()):
                    again = fn()
            except Exception:  # noqa: BLE001 - a seed it refuses tells nothing: not sorted
                return []
        return list(again) if isinstance(again, (list, tuple)) else []

    orders: dict[int, int] = {}
    if distribution != "module":  # judged once a variant: the further draws are of the whole inputs
        known = _SORTED.setdefault(loaded.module, {})
        name = str(variant.get("name"))
        if name not in known:
            known[name] = sorted_inputs(list(got), draw, seed)
        orders = known[name]
    for i, item in enumerate(got):
        if isinstance(item, torch.Tensor):
            t = item.detach()
            floating = (t.dtype.is_floating_point or t.dtype.is_complex) and only in (None, i)
            if target is not None and t.dtype.is_floating_point and t.dtype != target:
                t = t.to(target)  # the problem posed at the variant's dtype (VerifyOptions.dtype)
            if distribution != "module" and floating and device.type != "cpu" and _large(list(t.shape), t.dtype):
                t = t.to(device)  # redrawn in place where it lives: no second full-size copy
                kept = input_structure(t, orders.get(i, 0))
                args.append(impose_structure_(fill_(t, distribution, _device_generator(seed, distribution, i, device)),
                                              kept))
                continue
            if distribution != "module" and floating:
                kept = input_structure(t, orders.get(i, 0))
                t = with_layout(impose_structure_(make_tensor(list(t.shape), t.dtype, distribution,
                                                              _generator(seed, distribution, i)), kept), t)
            args.append(t.to(device))
        elif isinstance(item, (bool, int, float)):
            args.append(item)
        else:
            raise _fail(f"get_inputs() in {loaded.path.name} returned a {type(item).__module__}."
                        f"{type(item).__name__} at position {i}; inputs must be torch tensors "
                        "(or Python numbers)")
    return args


#: Rows strictly sorted by chance at most this often are a relation the problem poses (sorted bucket
#: edges, offsets), not chance: all ``r`` rows of ``n`` distinct continuous values come sorted one
#: time in ``n!^r`` (one row of 6 edges: 1 in 720; 2 rows of 5: 1 in 14400).
SORTED_CHANCE = 1 / 500


def row_order(t: torch.Tensor) -> tuple[int, float]:
    """Whether every row of ``t``'s last dimension is strictly sorted: 1 ascending, -1
    descending, 0 not (a 0/1 mask is monotone, not strictly sorted), with the chance that
    continuous draws come so sorted, ``1 / n!`` a row of ``n`` (1.0 where it is not sorted)."""
    if t.dim() < 1 or t.shape[-1] < 2 or not t.dtype.is_floating_point or t.numel() == 0:
        return 0, 1.0
    n = t.shape[-1]
    order = 1 if bool((t[..., 1:] > t[..., :-1]).all()) else -1 if bool((t[..., 1:] < t[..., :-1]).all()) else 0
    return order, (math.exp(-(t.numel() // n) * math.lgamma(n + 1)) if order else 1.0)


def input_structure(t: torch.Tensor, order: int | None = None) -> tuple[torch.Tensor | None, bool, int]:
    """What a redraw of the problem's own input ``t`` keeps: its exact zeros (a bool mask, ``None``
    where it has none: a triangular, banded, masked or padded operand is zero there by
    construction, as ``torch.triu`` makes KernelBench's "upper triangular" matmul inputs),
    whether it is symmetric in its last two dimensions (KernelBench's "symmetric matrices"
    matmul: ``(A + A.T) / 2``, exactly symmetric), and the order of its rows (``order``, as
    :func:`sorted_inputs` judges it from several draws; without it, from ``t`` alone where chance
    would sort its rows at most ``SORTED_CHANCE`` of the time: ``torch.sort``'d bucket edges for
    ``torch.bucketize``, a cumulative sum of positive offsets). A solution may rely on each, as
    the problem poses them at every seed. Signs are not kept: a problem drawing ``torch.rand``
    where any sign would do is common, and a redraw that leaves a function's domain is skipped by
    its non-finite truth instead (``worker.domain``)."""
    zeros = t == 0
    mask = zeros if bool(zeros.any()) else None
    square = t.dim() >= 2 and t.shape[-1] == t.shape[-2] and t.shape[-1] > 1
    symmetric = bool(square and torch.equal(t, t.transpose(-1, -2)))
    if order is None:
        found, chance = row_order(t)
        order = found if chance <= SORTED_CHANCE else 0
    return mask, symmetric, 0 if symmetric else order


#: :func:`sorted_inputs` per problem module (while it is loaded: a warm worker loads many) and
#: variant: every redraw of a variant keeps the same rows sorted, and its further draws are of
#: every input, at the variant's size.
_SORTED: weakref.WeakKeyDictionary[Any, dict[str, dict[int, int]]] = weakref.WeakKeyDictionary()
#: Further draws of ``get_inputs()`` that :func:`sorted_inputs` may take (seeded apart from the
#: seeds a job runs at) to tell rows sorted by the problem from rows sorted by chance.
SORTED_DRAWS = 6


def sorted_inputs(got: list[Any], draw: Any, seed: int) -> dict[int, int]:
    """The positions of ``got`` (one ``get_inputs()`` draw) whose rows the problem sorts, with
    their order (:func:`row_order`): sorted in ``got`` and in further draws (``draw(seed)``
    returns one, at most ``SORTED_DRAWS``) until chance would sort them all at most
    ``SORTED_CHANCE`` of the time. Six bucket edges are sorted by chance one time in 720, three
    one in 6: three edges take four draws. A position unsorted in any draw is not sorted."""
    pending: dict[int, tuple[int, float]] = {}
    for i, item in enumerate(got):
        if isinstance(item, torch.Tensor):
            order, chance = row_order(item.detach())
            if order:
                pending[i] = (order, chance)
    decided = {i: o for i, (o, c) in pending.items() if c <= SORTED_CHANCE}
    pending = {i: v for i, v in pending.items() if i not in decided}
    for k in range(1, SORTED_DRAWS + 1):
        if not pending:
            break
        again = draw(seed + 7919 * k)
        for i, (order, chance) in list(pending.items()):
            item = again[i] if i < len(again) else None
            found, more = row_order(item.detach()) if isinstance(item, torch.Tensor) else (0, 1.0)
            if found != order:
                del pending[i]
            elif chance * more <= SORTED_CHANCE:
                decided[i] = order
                del pending[i]
            else:
                pending[i] = (order, chance * more)
    return decided


def with_layout(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``values`` (a redraw, contiguous) laid out in memory as the problem's own input ``like``:
    its strides (a transposed or permuted view, a slice with gaps) and its broadcast dimensions
    (stride 0: ``expand``, each broadcast copy the same values, taken from ``values``' first
    index there). A problem that poses a column-major or broadcast input poses its layout at
    every seed, and a kernel may rely on it (read it through its strides, or only one copy of a
    broadcast row). Returns ``values`` itself where ``like`` is contiguous."""
    if like.is_contiguous() or like.dim() == 0:
        return values
    expanded = [d for d in range(like.dim()) if like.stride(d) == 0 and like.shape[d] > 1]
    base = values[tuple(slice(0, 1) if d in expanded else slice(None) for d in range(like.dim()))]
    out = torch.empty_strided(tuple(base.shape), like.stride(), dtype=values.dtype, device=values.device)
    out.copy_(base)
    return out.expand(like.shape) if expanded else out


def impose_structure_(t: torch.Tensor, kept: tuple[torch.Tensor | None, bool, int]) -> torch.Tensor:
    """``t`` (a redraw) made symmetric where the problem's input was, zero where it was zero, then
    sorted along its last dimension in the problem's order where it was sorted (``kept``:
    :func:`input_structure`), in place. Returns ``t``."""
    mask, symmetric, order = kept
    if symmetric:
        t.copy_((t + t.transpose(-1, -2)) / 2)
    if mask is not None:
        t.masked_fill_(mask.to(t.device), 0)
    if order:
        t.copy_(torch.sort(t, dim=-1, descending=order < 0).values)
    return t


def clone_args(args: list[Any]) -> list[Any]:
    """Deep copies of the tensor arguments (others as is)."""
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def flatten_outputs(out: Any) -> list[Any]:
    """forward()'s result as a flat list: a tensor -> [tensor]; tuples/lists flattened
    recursively; anything else kept as one element."""
    if isinstance(out, (list, tuple)):
        flat: list[Any] = []
        for o in out:
            flat += flatten_outputs(o)
        return flat
    if isinstance(out, dict):
        flat = []
        for key in sorted(out, key=str):
            flat += flatten_outputs(out[key])
        return flat
    return [out]


def to_host(outputs: list[Any]) -> list[Any]:
    """Detached host copies of the tensors in ``outputs`` (for saving and comparing)."""
    return [o.detach().to("cpu", copy=True) if isinstance(o, torch.Tensor) else o for o in outputs]
