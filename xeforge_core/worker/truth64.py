"""The truth in float64, computed by the baseline job beside the truth's own outputs.

For each correctness run the baseline job calls the truth (the PyTorch reference, or the
baseline when it is the reference) a second time with every floating-point input, weight and
buffer upcast to float64, and a third time with those float64 values perturbed by one unit
roundoff of the problem's dtype (random signs, a fixed seed). Per floating-point output it
saves three float32 tensors of the output's shape (``xeforge_core.precision`` states the rule
that reads them) and two numbers:

* the deviation ``t - r`` (float64 truth minus the truth's output at the problem's dtype): the
  candidate job rebuilds ``t`` as ``r + (t - r)``, exact to float32's precision of a
  difference that is itself tiny, so the saved data is the size of one float32 output;
* the sensitivity ``sigma = |t(perturbed) - t|``: the condition of the computation at each
  element, in units of the dtype's rounding;
* the drift ``|t(x(1 - u)) - t(x)|``: the truth's change when every floating-point input,
  weight and buffer shrinks by one unit roundoff, all the same way: the scale of an error that
  moves every operand toward zero (TF32 products whose operands are truncated, not rounded),
  which a random-sign perturbation averages away (a fourth float64 call, with the weights scaled
  in place and put back exactly from the truth's own);
* ``E``, the RMS of ``|t - r|``, and the RMS of ``sigma`` over the output (zero is saved for
  the tensors where ``r`` or ``t`` is not finite, and such elements are left out of the RMS).

The float64 runs happen on the device, under ``torch.set_default_dtype(torch.float64)`` (so
tensors the module creates without a dtype are float64 too) and with an op tracer. A float32
the module asks for by name (``x.float()``, ``.to(torch.float32)``, ``dtype=torch.float32`` of a
factory or a reduction: the idiom of reference code that upcasts half-precision inputs for a
norm, a softmax or a loss) is a floor on the precision, not the function: the tracer computes it
in float64 (:data:`WIDENED`), and the verdict names the ops it widened; where the reference's
own output then sits far beyond its rounding scale from that truth, its float32 was part of the
function (a rounding remainder), and the truth is unavailable (:data:`WIDENED_FUNCTION_LIMIT`).
A reference that reads a floating-point tensor's bits (``x.view(torch.int32)``) has no float64
truth: those bits are another number's there. A module that still computes in a
lower precision (a cast to float16 or bfloat16 in the middle, an op with no float64 kernel, a
tensor built from a float32 array) is reported as :class:`Unavailable`, and the verifier falls
back to its tolerances, saying why. Host memory does not grow with the output: the deviation and scale are
computed on the device and written in chunks by ``ExpectedStore``.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from xeforge_core.errors import XeForgeError
from xeforge_core.precision import UNIT_ROUNDOFF
from xeforge_core.worker.errors import WorkerError
from xeforge_core.worker.integrity import OpTracer

#: Seed of the perturbation signs (any fixed value: the same on every run and device kind).
PERTURB_SEED = 0x64


class Unavailable(XeForgeError, RuntimeError):
    """The truth cannot be computed in float64 here; ``str(exc)`` says why."""


#: The dtype a float64 truth run computes in where the module names this one (module docstring).
WIDENED = {torch.float32: torch.float64}

#: Ops whose dtype argument reinterprets bits rather than converting values: never widened, and
#: a truth that reinterprets a floating-point tensor's bits is unavailable (in float64 they are
#: another number's bits).
_BITCASTS = frozenset({"view"})

#: How far beyond its rounding scale (the perturbed truth's spread plus one unit roundoff of the
#: truth) a reference's own output may sit from a truth computed with its named float32 widened
#: before that truth is taken for another function: a reference whose float32 rounding is what
#: it computes (a rounding remainder, ``p - p.float()``) has a widened truth of zero. Project
#: heuristic: four orders of magnitude, above the sqrt(n) growth of a float32 sum's rounding
#: (1e3 at a million terms) over the spread of its inputs' rounding.
WIDENED_FUNCTION_LIMIT = 1e4


def _widen(value: Any) -> tuple[Any, bool]:
    """``value`` with each ``torch.dtype`` in :data:`WIDENED` replaced (one level of lists,
    tuples and dicts: aten's dtype arguments are plain), and whether any was."""
    if isinstance(value, torch.dtype):
        return WIDENED.get(value, value), value in WIDENED
    if isinstance(value, (list, tuple)):
        parts = [_widen(v) for v in value]
        return type(value)(p for p, _ in parts), any(w for _, w in parts)
    if isinstance(value, dict):
        parts2 = {k: _widen(v) for k, v in value.items()}
        return {k: p for k, (p, _) in parts2.items()}, any(w for _, w in parts2.values())
    return value, False


class Float64Tracer(OpTracer):
    """Computes in float64 the float32 a module names (:data:`WIDENED`; ``widened``: the aten
    ops it changed) and records the first op that still produced a floating-point tensor
    narrower than float64 (``narrow``: op and dtype). A power of a tensor with an integer
    exponent (``x ** 2``, ``x ** -1``: products and a division) is rational arithmetic and not
    recorded; a half-integer one (``x ** 0.5``) is recorded as ``pow_root``, any other as ``pow``
    (``precision_hints``: what a kernel may approximate)."""

    def __init__(self) -> None:
        super().__init__()
        self._general_pow = False
        self.narrow: tuple[str, str] | None = None
        self.widened: set[str] = set()
        #: the dtype a floating-point tensor's bits were first read as (``x.view(torch.int32)``)
        self.bitcast: str | None = None

    def _record_pow(self, args: Any, kwargs: Any) -> None:
        exponent = args[1] if len(args) > 1 else (kwargs or {}).get("exponent")
        number = (bool(args) and isinstance(args[0], torch.Tensor) and isinstance(exponent, (int, float))
                  and not isinstance(exponent, bool))
        simple = number and float(2 * exponent).is_integer()
        self._general_pow = self._general_pow or not simple
        if not self._general_pow:
            self.ops.discard("pow")  # an integer power is products (rational), a half-integer one a root
            if not float(exponent).is_integer():
                self.ops.add("pow_root")

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func.overloadpacket, "__name__", str(func))
        if name in _BITCASTS:
            seen = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.dtype)]
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if seen and source is not None and source.dtype.is_floating_point and self.bitcast is None:
                self.bitcast = str(seen[0]).replace("torch.", "")
        else:
            args, wide_args = _widen(tuple(args))
            kwargs, wide_kwargs = _widen(dict(kwargs or {}))
            if wide_args or wide_kwargs:
                self.widened.add(name)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if name == "pow":
            self._record_pow(args, kwargs)
        if self.narrow is None:
            for leaf in tree_leaves(out):
                if isinstance(leaf, torch.Tensor) and leaf.dtype in (torch.float32, torch.float16, torch.bfloat16):
                    self.narrow = (getattr(func.overloadpacket, "__name__", str(func)),
                                   str(leaf.dtype).replace("torch.", ""))
                    break
        return out


def full_float32() -> None:
    """Make PyTorch's float32 matrix products and convolutions full float32 on this process
    (no TF32: PyTorch's cuDNN default allows it for convolutions): a reference computed in TF32
    would set the scale of a correct float32 computation 8192 times too wide."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def problem_dtype(outputs: list[Any]) -> str | None:
    """The finest dtype among the floating-point outputs that the calibrated check covers
    (float32, float16, bfloat16), as a name; ``None`` when there is none."""
    names = [str(o.dtype).replace("torch.", "") for o in outputs if isinstance(o, torch.Tensor)]
    covered = [n for n in names if n in UNIT_ROUNDOFF]
    return min(covered, key=lambda n: UNIT_ROUNDOFF[n]) if covered else None


def _wide(value: Any) -> Any:
    """A float64 copy of a floating-point tensor (always a copy: it is perturbed in place later)."""
    if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
        return value.detach().to(torch.float64, copy=True)
    return value


def perturb_(t: torch.Tensor, u: float, gen: torch.Generator) -> torch.Tensor:
    """``t *= 1 + u * (random +-1)`` in place (float64 ``t``)."""
    sign = torch.randint(0, 2, t.shape, generator=gen, device=t.device, dtype=torch.int8)
    return t.mul_(1.0 + u * (sign.to(torch.float64) * 2 - 1))


@contextlib.contextmanager
def _default_float64() -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


class Float64Truth:
    """Runs one truth harness in float64. ``harness`` is a ``roles.Harness`` (its ``run`` and
    ``inputs_for``); float64 copies of each (variant, seed) model are made once and kept."""

    def __init__(self, harness: Any, device: torch.device) -> None:
        self.harness = harness
        self.device = device
        self.models: dict[tuple[str, int], tuple[torch.nn.Module, torch.nn.Module]] = {}
        #: the module each float64 copy was made from (its weights put back after a shrink)
        self.sources: dict[tuple[str, int], torch.nn.Module] = {}
        #: aten ops whose float32 the float64 runs computed in float64 (module docstring)
        self.widened: set[str] = set()
        #: every aten op the float64 runs called (what the truth computes, where it is PyTorch)
        self.ops: set[str] = set()

    def _models(self, model: torch.nn.Module, key: tuple[str, int], u: float) -> tuple[torch.nn.Module, torch.nn.Module]:
        if key not in self.models:
            try:
                wide = copy.deepcopy(model).to(torch.float64)
                perturbed = copy.deepcopy(wide)
            except Exception as exc:  # noqa: BLE001 - a module that cannot be copied keeps today's check
                raise Unavailable(f"the model cannot be copied to float64 ({type(exc).__name__}: {exc})") from exc
            gen = torch.Generator(device=self.device).manual_seed(PERTURB_SEED)
            with torch.no_grad():
                for t in list(perturbed.parameters()) + list(perturbed.buffers()):
                    if t.dtype == torch.float64:
                        perturb_(t.data, u, gen)
            self.models[key] = (wide, perturbed)
            self.sources[key] = model
        return self.models[key]

    def _call(self, model: torch.nn.Module, args: list[Any], what: str) -> list[Any]:
        tracer = Float64Tracer()
        try:
            with _default_float64():
                out = self.harness.run(model, args, trace=tracer, during=what)
        except WorkerError as err:
            raise Unavailable(f"it does not run in float64 ({err.failure.reason.strip().splitlines()[0]})") from err
        self.widened |= tracer.widened
        self.ops |= tracer.ops
        if tracer.bitcast is not None:
            raise Unavailable(f"it reads the bits of a floating-point tensor as {tracer.bitcast} (aten.view): in "
                              "float64 those are another number's bits")
        if tracer.narrow is not None:
            op, dtype = tracer.narrow
            raise Unavailable(f"it computes in {dtype} even with float64 inputs and weights (aten.{op} "
                              f"returned {dtype}: a dtype hard-coded in the module)")
        return out

    def _shrunk(self, key: tuple[str, int], combo: Any, u: float) -> list[Any]:
        """The float64 truth with every floating-point input, weight and buffer scaled by
        ``1 - u``; the float64 copy's weights are scaled in place and put back exactly from the
        module it was made from (a float32, float16 or bfloat16 value is exact in float64)."""
        wide, source = self.models[key][0], self.sources[key]
        own = dict(source.named_parameters()) | dict(source.named_buffers())
        scaled = [(name, t) for name, t in list(wide.named_parameters()) + list(wide.named_buffers())
                  if t.dtype == torch.float64 and name in own]
        args = [_wide(a) for a in self.harness.inputs_for(combo)]
        for a in args:
            if isinstance(a, torch.Tensor) and a.dtype == torch.float64:
                a.mul_(1.0 - u)
        try:
            with torch.no_grad():
                for _, t in scaled:
                    t.data.mul_(1.0 - u)
            return self._call(wide, args, f"running the shrunk truth in float64 on {combo.describe()}")
        finally:
            with torch.no_grad():
                for name, t in scaled:
                    t.data.copy_(own[name].data)

    def calibrate(self, model: torch.nn.Module, combo: Any,
                  outputs: list[Any]) -> tuple[list[Any], list[Any], list[Any], dict]:
        """``(deviations, sensitivities, drifts, info)`` for the truth's ``outputs`` of
        ``combo`` (made by ``model``): per output a float32 tensor on the device, or ``None`` for
        an output the check does not cover. ``info`` holds ``dtype`` (the problem's) and, per
        output, its dtype, ``ref_rms_error`` (``E``), ``sigma_rms``, ``drift_rms`` and the
        reference's own normwise relative error ``ref_rel_error``. Raises :class:`Unavailable`
        saying why."""
        dtype = problem_dtype(outputs)
        if dtype is None:
            raise Unavailable("no float32, float16 or bfloat16 output")
        u = UNIT_ROUNDOFF[dtype]
        wide, perturbed = self._models(model, (combo.vname, combo.seed), u)
        args = [_wide(a) for a in self.harness.inputs_for(combo)]
        truth = self._call(wide, args, f"running the truth in float64 on {combo.describe()}")
        del args
        # the drift first, its float64 outputs freed before the perturbed run's are made
        shrunk = self._shrunk((combo.vname, combo.seed), combo, u)
        drift_parts = [drift_of(r, t, q) if isinstance(r, torch.Tensor) and isinstance(t, torch.Tensor)
                       else (None, 0.0) for r, t, q in zip(outputs, truth, shrunk)]
        del shrunk
        # fresh inputs again (a module may modify its own), perturbed in place
        args = [_wide(a) for a in self.harness.inputs_for(combo)]
        gen = torch.Generator(device=self.device).manual_seed(PERTURB_SEED + 1)
        for a in args:
            if isinstance(a, torch.Tensor) and a.dtype == torch.float64:
                perturb_(a, u, gen)
        moved = self._call(perturbed, args, f"running the perturbed truth in float64 on {combo.describe()}")
        del args
        if len(truth) != len(outputs):
            raise Unavailable(f"in float64 it returns {len(truth)} output(s), {len(outputs)} at its own dtype")
        deviations: list[Any] = []
        sensitivities: list[Any] = []
        drifts: list[Any] = []
        info: list[dict[str, Any] | None] = []
        for i, (r, t, p) in enumerate(zip(outputs, truth, moved)):
            name = str(r.dtype).replace("torch.", "") if isinstance(r, torch.Tensor) else ""
            if name not in UNIT_ROUNDOFF:
                deviations.append(None)
                sensitivities.append(None)
                drifts.append(None)
                info.append(None)
                continue
            if not isinstance(t, torch.Tensor) or t.dtype != torch.float64 or tuple(t.shape) != tuple(r.shape):
                got = f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}" if isinstance(t, torch.Tensor) else \
                    type(t).__name__
                raise Unavailable(f"output {i} in float64 is {got}, not float64 of shape {list(r.shape)}")
            d, sigma, stats = deviation_and_sensitivity(r, t, p)
            scale = stats["sigma_rms"] + UNIT_ROUNDOFF[name] * stats["truth_rms"]
            if self.widened and stats["ref_rms_error"] > WIDENED_FUNCTION_LIMIT * scale:
                ratio = f"{stats['ref_rms_error'] / scale:.3g}x" if scale > 0 else "infinitely far beyond"
                raise Unavailable(
                    f"with the float32 it names computed in float64 ({', '.join(sorted(self.widened))}) it is another "
                    f"function: its own output {i} is {ratio} its rounding scale from that truth, so its float32 is "
                    "part of what it computes")
            g, drift_rms = drift_parts[i] if i < len(drift_parts) else (None, 0.0)
            deviations.append(d)
            sensitivities.append(sigma)
            drifts.append(g)
            info.append(dict(stats, dtype=name, drift_rms=drift_rms))
        return deviations, sensitivities, drifts, {"dtype": dtype, "outputs": info, "widened": sorted(self.widened),
                                                    "ops": sorted(self.ops)}


#: Elements processed per step when deriving the deviation and sensitivity (float64 temporaries
#: of a few chunks: a few hundred MiB of device memory, whatever the output's size).
CHUNK = 1 << 24


def deviation_and_sensitivity(r: torch.Tensor, t: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """``(t - r, |p - t|)`` as float32 on ``t``'s device, zero where ``r`` or ``t`` is not
    finite, and their statistics (``ref_rms_error``, ``sigma_rms``, ``truth_rms``, ``ref_rel_error``). ``r``:
    the truth's output at the problem's dtype; ``t``, ``p``: the float64 truth and the perturbed
    one (same shape). Computed :data:`CHUNK` elements at a time."""
    flat_r, flat_t, flat_p = r.detach().reshape(-1), t.detach().reshape(-1), p.detach().reshape(-1)
    dev = torch.empty(flat_t.shape, dtype=torch.float32, device=t.device)
    sigma = torch.empty(flat_t.shape, dtype=torch.float32, device=t.device)
    zero = torch.zeros((), dtype=torch.float64, device=t.device)
    n = 0
    err_sq = sigma_sq = truth_sq = 0.0
    for start in range(0, flat_t.numel(), CHUNK):
        part = slice(start, start + CHUNK)
        r64, t64, p64 = flat_r[part].to(t.device, torch.float64), flat_t[part], flat_p[part]
        finite = torch.isfinite(r64) & torch.isfinite(t64)
        d = torch.where(finite, t64 - r64, zero)
        sg = torch.where(finite & torch.isfinite(p64), (p64 - t64).abs(), zero)
        n += int(finite.sum())
        err_sq += float(d.pow(2).sum())
        sigma_sq += float(sg.pow(2).sum())
        truth_sq += float(torch.where(finite, t64, zero).pow(2).sum())
        dev[part] = d
        sigma[part] = sg
    stats = {"ref_rms_error": math.sqrt(err_sq / n) if n else 0.0,
             "sigma_rms": math.sqrt(sigma_sq / n) if n else 0.0,
             "truth_rms": math.sqrt(truth_sq / n) if n else 0.0,
             "ref_rel_error": math.sqrt(err_sq / truth_sq) if truth_sq > 0 else 0.0}
    return dev.reshape(t.shape), sigma.reshape(t.shape), stats


def drift_of(r: torch.Tensor, t: torch.Tensor, q: Any) -> tuple[torch.Tensor | None, float]:
    """``(|q - t|, its RMS)``: float32 on ``t``'s device, zero where ``r``, ``t`` or ``q`` is not
    finite; ``(None, 0.0)`` when the shrunk truth ``q`` is no float64 tensor of ``t``'s shape.
    Computed :data:`CHUNK` elements at a time."""
    if not isinstance(q, torch.Tensor) or q.dtype != torch.float64 or tuple(q.shape) != tuple(t.shape):
        return None, 0.0
    flat_r, flat_t, flat_q = r.detach().reshape(-1), t.detach().reshape(-1), q.detach().reshape(-1)
    drift = torch.empty(flat_t.shape, dtype=torch.float32, device=t.device)
    zero = torch.zeros((), dtype=torch.float64, device=t.device)
    n, sq = 0, 0.0
    for start in range(0, flat_t.numel(), CHUNK):
        part = slice(start, start + CHUNK)
        r64, t64, q64 = flat_r[part].to(t.device, torch.float64), flat_t[part], flat_q[part]
        finite = torch.isfinite(r64) & torch.isfinite(t64) & torch.isfinite(q64)
        g = torch.where(finite, (q64 - t64).abs(), zero)
        n += int(finite.sum())
        sq += float(g.pow(2).sum())
        drift[part] = g
    return drift.reshape(t.shape), (math.sqrt(sq / n) if n else 0.0)
