"""The precision a problem allows, and the rule a candidate's error is judged by.

The truth is also computed in float64 (inputs, weights and the reference upcast), so every
output element ``i`` has three values: the float64 truth ``t``, the reference at the problem's
own dtype ``r`` (float32 for a float32 problem) and the candidate's ``c``. The reference's own
error ``|r - t|`` measures, on the same inputs, how much a correct computation at the problem's
precision errs; the candidate is held to a multiple of it, elementwise:

    |c_i - t_i| <= K * s_i  +  2u * |t_i|  +  tiny

* ``s_i = max(|r_i - t_i|, E, sigma_i)``: the scale of a correct computation's error at element
  ``i``. ``E`` is the RMS of ``|r - t|`` over the output, so an element where the reference
  happens to round exactly is not held to zero; ``sigma_i = |t(x(1 + u d)) - t(x)|`` is the
  truth's change when every floating-point input and weight is perturbed by one unit roundoff
  ``u`` of the problem's dtype (``d`` random signs): the condition of the computation at that
  element, so an ill-conditioned element (a division by a value near zero, a cancelling sum)
  gets the error any implementation makes there. Two independent draws of the error scale (the
  reference's and the perturbation's) and their RMS make the bound robust where one draw is
  small by chance (a single-element output, such as a loss).
* ``2u * |t_i| + tiny`` (one unit in the last place of the output dtype at ``|t_i|``, and its
  smallest normal number): the final rounding to the output dtype, which may go the other
  way in a correct kernel; the floor for outputs near zero.
* ``K`` (:data:`K_ACCUMULATED`, :data:`K_ROUNDED`), by where the reference's error comes from.
  In float32 it is accumulated rounding (sums, dot products, scans), whose size depends on the
  order of summation. Measured on the CPU with ``benchmarks/bench_precision_rule.py`` (float64
  truth; 108 draws per case of normal, uniform and wide-range inputs at three sizes; recorded in
  ``docs/measured/cpu-precision-rule.md``), correct float32 orders reach these multiples of
  ``s``: GEMMs over K tiles 4.4, GEMMs summed sequentially over K=4096 24, blocked row sums 3.9,
  row sums of 20000 added one at a time 87, blocked scans 23, single-element sums of 262144
  terms added one at a time 306 (one draw in 72; a tree per block of 256 reaches 12); every
  precision downgrade measured 2200 or more (a 10-bit mantissa is 2^13 coarser than float32's
  23 bits: TF32 and float16 operands 2200-12600, float16 accumulators 2700-280000, bfloat16
  operands 17000-83000), and a wrong operand worth 0.1% of a 256-term sum 5700 or more.
  ``K = 512`` lies between the two: 1.7 times the worst correct order measured, which nobody
  writes in a kernel, and a quarter of the mildest downgrade. In float16 and bfloat16 the
  reference's error is the rounding of each op's result to the dtype, which does not depend on
  the order, so ``K = 16`` (the same script's float16 cases: correct kernels, a float16
  accumulator in a GEMM, exponentials in bfloat16).

Where the reference cannot run in float64 (a module that hard-codes a dtype, an op without
float64 on the device), where the truth is a Triton baseline (no PyTorch reference), for
float64 and complex outputs, and where the user or the spec gives ``rtol``/``atol``, outputs
are compared with tolerances instead (``worker/compare.py``) and the verdict says so.

**Allowed precision.** A problem allows its own dtype's precision by default: float32 for a
float32 problem. Each downgrade is a named opt-in (:data:`DOWNGRADES`: ``--allow tf32`` on the
command line, ``allow: [tf32]`` in a spec, the workbench's precision choice). An allowed
downgrade to unit roundoff ``u_a`` lets an element also err by ``K_a * (u_a / u) *
max(sigma_i, RMS(sigma))`` (:func:`allowance_terms`; ``K_a``: :data:`K_OPERANDS` or, for
accumulators, :data:`K_ACCUMULATED`): the error of rounding every operand to the coarser
precision, which the perturbation measures to first order, with the factor of that regime. A
downgrade whose operands may be cut toward zero instead of rounded (TF32 on Hopper) moves every
product the same way, which random signs average away: it may also err by ``2 (u_a / u) *
drift_i``, ``drift_i = |t(x(1 - u)) - t(x)|`` the truth's change when every input and weight
shrinks by one unit roundoff (a cut of a 10-bit mantissa is at most ``2 u_a``). The bound stays
tied to what the downgrade can change: allowing TF32 does not excuse a wrong constant in a sum
the operands barely move. The verdict names which downgrades applied,
and for a failure, which one would accept it (``OutputComparison.needs``).

**The baseline's precision.** ``--allow baseline`` (``allow: [baseline]``, the workbench's
``baseline`` choice) allows exactly the downgrades the baseline itself is measured to need
against the float64 truth on the same runs (a published GELU written with the tanh formula
where the reference is exact needs ``approx-math``): a user porting a kernel may ask for "no
less precise than what I have" without naming how it is less precise. The baseline's
verification measures them (its outputs against the reference, each failure a precision change
names, :func:`xeforge_core.worker.precision_report.explained`); a baseline that matches the
problem's precision adds nothing, and one that is wrong on some run in a way no precision change
explains adds nothing either (the problem is inconsistent, as before, and the small errors of its
other runs are not trusted to be a precision change). The verdict names what this resolved to.

KernelBench's own check (``torch.allclose(ref, new, atol=tol, rtol=tol)``, tol by dtype:
:data:`KERNELBENCH_TOLERANCE`) is reported beside the verdict for comparison.

Only the standard library is used: the worker imports this module.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Any

from xeforge_core.errors import XeForgeError

__all__ = ["DOWNGRADES", "K_ACCUMULATED", "K_OPERANDS", "K_ROUNDED", "KERNELBENCH_TOLERANCE", "UNIT_ROUNDOFF", "Downgrade",
           "PrecisionError", "PrecisionPolicy", "allowance_terms", "kernelbench_tolerance", "own_factor",
           "parse_allowances", "precision_lines"]

#: Unit roundoff (half the machine epsilon: 2^-p for p significand bits) of each dtype the
#: float64-calibrated check applies to.
UNIT_ROUNDOFF: dict[str, float] = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}

#: Factor on the reference's error scale where that error is accumulated rounding (float32
#: problems, and every allowed downgrade). See the module docstring for the measurements.
K_ACCUMULATED = 512

#: Factor where the reference's error is the rounding of each result to the dtype (float16 and
#: bfloat16 problems).
K_ROUNDED = 16

#: Factor of an allowed operand downgrade (TF32, float16 or bfloat16 operands, approximate
#: math), on its sensitivity scale ``(u_a / u) * max(sigma_i, RMS(sigma))``: measured on the CPU
#: (float32 GEMMs with K of 72, 512 and 4096, normal, uniform and wide-range inputs, 36 draws),
#: TF32 and float16 operands reach 1.1-2.6 times that scale and bfloat16 operands 8.4-23 times
#: the 10-bit one, so 8 accepts the first with a factor of three to spare and mostly not the
#: second, 8 times coarser.
K_OPERANDS = 8

#: KernelBench's tolerance (``atol = rtol``) by the problem's dtype: ``get_tolerance_for_precision``
#: in ScalingIntelligence/KernelBench ``src/kernelbench/eval.py`` (commit 423217d, 2026-03),
#: after torchbench: 1e-4 for float32, 1e-2 for float16 and bfloat16 (KernelBench v0 and v0.1
#: used 1e-2 for float32 as well).
KERNELBENCH_TOLERANCE: dict[str, float] = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


class PrecisionError(XeForgeError, ValueError):
    """An allowed-precision name that is not one of :data:`DOWNGRADES` (the message names the
    nearest valid one and where it was given)."""


@dataclass(frozen=True)
class Downgrade:
    """One named precision downgrade a user may allow: the ``unit_roundoff`` of the arithmetic
    it stands for, whether it is an accumulation (errors that grow with the length summed: the
    factor :data:`K_ACCUMULATED` instead of :data:`K_ROUNDED`), and whether it may round the
    output itself to that precision (the floor then uses ``unit_roundoff``). ``truncates``: the
    hardware may cut its operands toward zero instead of rounding them, every one the same way,
    so a sum's error gets a part that no random-sign perturbation measures: the allowance also
    covers the truth's drift when every input and weight shrinks by ``2 * unit_roundoff`` (the
    largest cut of a 10-bit mantissa), measured as the drift under a shrink of one unit
    roundoff of the dtype, scaled."""

    name: str
    what: str
    unit_roundoff: float
    accumulation: bool = False
    rounds_output: bool = True
    truncates: bool = False


#: Every precision downgrade that can be allowed, by name, the tightest first (operand
#: downgrades, finest first, then accumulators). Sources of the unit
#: roundoffs: TF32 and float16 have 10 explicit mantissa bits (u = 2^-11), bfloat16 7
#: (u = 2^-8); the PTX ISA gives ``tanh.approx.f32`` a maximum relative error of 2^-10.987, the
#: coarsest of the approximate functions kernels call (``ex2.approx``, ``rsqrt.approx``,
#: ``div.approx`` are within a few float32 units in the last place, inside the float32 bound).
#: TF32 operands may be truncated: on the H200 (2026-12-03) published Triton GEMMs erred by 6.6e-4
#: relative (normwise) against float64 on ``torch.rand`` inputs, what cutting both operands to
#: 10 bits toward zero gives (6.5e-4 emulated; rounding them gives 1.5e-5): Hopper's wgmma reads
#: TF32 operands from float32 bit patterns in shared memory and ignores the low 13 bits.
DOWNGRADES: dict[str, Downgrade] = {d.name: d for d in (
    Downgrade("tf32", "TF32 dot products (float32 operands multiplied with a 10-bit mantissa)", 2.0 ** -11,
              rounds_output=False, truncates=True),
    Downgrade("fp16", "float16 operands or intermediates", 2.0 ** -11),
    Downgrade("approx-math", "approximate math (tanh.approx, fast exp/log/division)", 2.0 ** -11,
              rounds_output=False),
    Downgrade("bf16", "bfloat16 operands or intermediates", 2.0 ** -8),
    Downgrade("fp16-accumulation", "float16 accumulators (sums, scans, dot products kept in float16)",
              2.0 ** -11, accumulation=True),
    Downgrade("bf16-accumulation", "bfloat16 accumulators", 2.0 ** -8, accumulation=True),
)}


#: The allowance that stands for the downgrades the baseline is measured to need (module
#: docstring, "The baseline's precision").
BASELINE = "baseline"


def allowance_choices() -> dict[str, str]:
    """Every name ``--allow`` (a spec's ``allow:``, the workbench's choice) accepts, with what it
    allows: :data:`DOWNGRADES` in order, then :data:`BASELINE`."""
    return {**{d.name: d.what for d in DOWNGRADES.values()},
            BASELINE: "whatever the baseline itself is measured to need (no less precise than the baseline)"}


def parse_allowances(names: Any, *, where: str = "allow", file: str | None = None,
                     line: int | None = None) -> tuple[str, ...]:
    """The allowance names in ``names`` (a name, a comma-separated string or a list), checked
    and deduplicated in the order of :data:`DOWNGRADES`, then :data:`BASELINE` if given. Raises
    :class:`PrecisionError` naming the bad entry, ``where`` it was given (a field path or an
    option) and the nearest valid name."""
    if names is None:
        return ()
    items = names.split(",") if isinstance(names, str) else list(names)
    known = [*DOWNGRADES, BASELINE]
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = item.strip().lower() if isinstance(item, str) else item
        if name not in known:
            # a name cut short ("fp16-acc") means the one it begins, not the nearest by letters ("fp16")
            begun = [k for k in known if name and k.startswith(str(name).replace("_", "-"))]
            close = begun[:1] if len(begun) == 1 else difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            field_name = f"{where}[{i}]" if not isinstance(names, str) and len(items) > 1 else where
            what = (f"an empty name (item {i + 1} of {len(items)}: a stray comma?)" if name == "" else repr(item))
            raise PrecisionError(f"{what} is not a precision allowance (known downgrades: {', '.join(DOWNGRADES)}; "
                                 f"and {BASELINE!r}: what the baseline is measured to need){hint}",
                                 file=file, line=line, field=field_name)
        seen.add(name)
    return tuple(n for n in known if n in seen)


def own_factor(dtype: str) -> float | None:
    """``K`` for an output of ``dtype`` (a torch dtype name): :data:`K_ACCUMULATED` for float32,
    :data:`K_ROUNDED` for float16 and bfloat16, ``None`` where the float64-calibrated check does
    not apply (float64, complex, integer dtypes)."""
    if dtype not in UNIT_ROUNDOFF:
        return None
    return float(K_ACCUMULATED if dtype == "float32" else K_ROUNDED)


def allowance_terms(dtype: str, allowed: tuple[str, ...] = ()) -> list[tuple[float, float, float]]:
    """The terms the ``allowed`` downgrades add to the bound of an output of ``dtype``, each
    ``(factor, floor unit roundoff, drift factor)``: the output may also err by ``factor *
    max(sigma_i, RMS(sigma)) + 2 * floor_u * |t_i| + drift_factor * drift_i`` (``drift_i``: the
    truth's change when every input shrinks by ``u``; ``drift_factor = 2 u_a / u`` for a
    downgrade that truncates, else 0), where ``factor = K * u_a / u`` (``K``:
    :data:`K_ACCUMULATED` for accumulations, whose error grows with the length summed, measured
    up to 33 times the 10-bit scale for float16 sums of 20000 terms; :data:`K_OPERANDS`
    otherwise; ``u_a / u`` the downgrade's unit roundoff over the dtype's). ``sigma`` is the
    truth's change under a perturbation of one unit roundoff ``u`` of every input: scaled by
    ``u_a / u`` it is the error of rounding the operands to the coarser precision, which is what
    TF32 and float16 operands do. Downgrades no coarser than the dtype itself add nothing."""
    u = UNIT_ROUNDOFF.get(dtype)
    if u is None:
        return []
    terms = []
    for name in allowed:
        d = DOWNGRADES[name]
        ratio = d.unit_roundoff / u
        if ratio < 1 or (ratio == 1 and not d.accumulation):
            continue
        terms.append(((K_ACCUMULATED if d.accumulation else K_OPERANDS) * ratio,
                      d.unit_roundoff if d.rounds_output else u, 2.0 * ratio if d.truncates else 0.0))
    return terms


def kernelbench_tolerance(dtype: str) -> float | None:
    """KernelBench's ``atol = rtol`` for a problem of ``dtype`` (``None``: KernelBench has none)."""
    return KERNELBENCH_TOLERANCE.get(dtype)


@dataclass(frozen=True)
class PrecisionPolicy:
    """The downgrades a verification allows, with where each came from (``options``: the CLI or
    the workbench; ``spec``: the problem's YAML; ``baseline``: what the baseline was measured to
    need, where either asked for :data:`BASELINE`). ``baseline_state``: how :data:`BASELINE`
    resolved (``measured``, ``unmeasured`` where no float64 truth measured the baseline,
    ``inconsistent`` where the baseline is wrong beyond any precision change, ``""`` before it
    resolved). ``inapplicable``: allowed downgrades with nothing to apply to (a TF32 allowance
    for kernels with no float32 ``tl.dot``, :meth:`restricted`): they do not widen the bound."""

    from_options: tuple[str, ...] = ()
    from_spec: tuple[str, ...] = ()
    from_baseline: tuple[str, ...] = ()
    baseline_state: str = ""
    inapplicable: tuple[str, ...] = ()
    #: what the baseline was measured to need, whether or not :data:`BASELINE` was asked for
    baseline_needs: tuple[str, ...] = ()

    @property
    def follows_baseline(self) -> bool:
        """Whether :data:`BASELINE` was asked for (the baseline's measured downgrades are allowed)."""
        return BASELINE in self.from_options or BASELINE in self.from_spec

    @property
    def allowed(self) -> tuple[str, ...]:
        """Every allowed downgrade that applies, in the order of :data:`DOWNGRADES`
        (:data:`BASELINE` resolved to ``from_baseline``)."""
        every = set(self.from_options) | set(self.from_spec) | set(self.from_baseline)
        return tuple(n for n in DOWNGRADES if n in every and n not in self.inapplicable)

    def with_baseline(self, measured: tuple[str, ...] | list[str] | None, state: str = "measured"
                      ) -> PrecisionPolicy:
        """This policy with the baseline's ``measured`` downgrades and how they resolved
        (``state``; ``measured`` None: ``unmeasured``), allowed where it follows the baseline
        (else only recorded in ``baseline_needs``, for the advice a failure gives)."""
        needs = tuple(n for n in DOWNGRADES if n in set(measured or ()))
        if not self.follows_baseline:
            return replace(self, baseline_needs=needs)
        if measured is None:
            return replace(self, from_baseline=(), baseline_state="unmeasured")
        return replace(self, from_baseline=needs, baseline_state=state, baseline_needs=needs)

    def restricted(self, found: Any, scanned: Any) -> PrecisionPolicy:
        """This policy where the downgrades a source scan finds wherever they are (``scanned``:
        TF32 dot products, half-precision types) apply only if the scan ``found`` them: an
        allowance vouches only for what it names, so ``--allow tf32`` does not widen the bound of
        kernels without a float32 ``tl.dot`` (where it would excuse an approximate formula)."""
        found, scanned = set(found), set(scanned)
        return replace(self, inapplicable=tuple(n for n in self.allowed if n in scanned and n not in found))

    def source_of(self, name: str) -> str:
        """Where allowing ``name`` came from, as the user wrote it: ``--allow tf32``, ``spec``, or
        ``--allow baseline`` (measured on the baseline)."""
        if name in self.from_options:
            return f"--allow {name}"
        if name in self.from_spec:
            return f"spec allow: [{name}]"
        return f"--allow {BASELINE} ({name})"

    def describe(self, dtype: str) -> str:
        """``float32`` or ``float32, allowing tf32 (--allow), fp16 (spec), approx-math (baseline)``,
        with what :data:`BASELINE` resolved to where it added nothing, and the allowances that
        had nothing to apply to."""
        def source(n: str) -> str:
            if n in self.from_options:
                return "--allow"
            return "spec" if n in self.from_spec else "baseline"

        parts = [f"{n} ({source(n)})" for n in self.allowed]
        if self.follows_baseline and not self.from_baseline:
            parts.append({
                "unmeasured": "the baseline's precision (not measured: no float64 truth to measure it against)",
                "inconsistent": "the baseline's precision (none: the baseline is wrong beyond any precision change)",
            }.get(self.baseline_state, "the baseline's precision (it needs no downgrade"
                                       + (" beyond those" if parts else "") + ")"))
        if self.inapplicable:
            parts.append(f"not {', '.join(self.inapplicable)} (nothing in the kernels to apply it to)")
        if not parts:
            return dtype
        return f"{dtype}, allowing {', '.join(parts)}"

    def to_data(self) -> dict[str, Any]:
        return {"options": list(self.from_options), "spec": list(self.from_spec),
                "baseline": list(self.from_baseline), "baseline_state": self.baseline_state,
                "inapplicable": list(self.inapplicable)}

    @classmethod
    def from_data(cls, data: dict[str, Any] | None) -> PrecisionPolicy:
        data = data or {}
        return cls(tuple(data.get("options") or ()), tuple(data.get("spec") or ()),
                   tuple(data.get("baseline") or ()), str(data.get("baseline_state") or ""),
                   tuple(data.get("inapplicable") or ()))


def precision_lines(precision: dict[str, Any]) -> list[str]:
    """What a verdict's ``precision`` record says, as lines for a report: the precision held
    to and how it was checked, the measured error, and KernelBench's tolerance beside it.
    ``[]`` for a verdict without one."""
    if not precision or not precision.get("dtype"):
        return []
    applied = precision.get("applied") or precision["dtype"]
    check = precision.get("check") or ""
    bounds = ", ".join(f"rtol {r:g}, atol {a:g}" for r, a in precision.get("tolerances") or [])
    if precision.get("fallback"):
        lines = [f"precision: {applied}; judged with tolerances: {precision['fallback']}"]
    elif check == "tolerance":
        lines = [f"precision: {applied}; judged with the explicit tolerances ({bounds or 'rtol/atol'}: --rtol/--atol "
                 "or the spec's rtol/atol), not the float64-calibrated bound, which is measured beside them"]
    elif "tolerance" in check:
        lines = [f"precision: {applied}; judged against the float64 truth where it was computed, with tolerances "
                 f"({bounds or 'rtol/atol'}) on the other outputs"]
    else:
        widened = f", plus what {', '.join(precision['allowed'])} adds" if precision.get("allowed") else ""
        lines = [f"precision: {applied}; judged against the float64 truth (errors up to {precision.get('factor'):g}x "
                 f"the reference's own error scale{widened})"]
    if precision.get("widened") and not precision.get("fallback"):
        ops = ", ".join(f"aten.{op}" for op in precision["widened"])
        lines.append(f"the truth computed in float64 what the reference asks in float32 ({ops}): an upcast sets "
                     "a floor on the precision, not the function")
    if precision.get("error_ratio") is not None:
        ratio = precision["error_ratio"]
        beyond = (f"{ratio:.3g}x the reference's error scale" if ratio > 0 else
                  "every element within rounding of the truth (2u|t|; 0x the reference's error scale)")
        nonfinite = precision.get("nonfinite") or 0
        where = " where the outputs are finite" if nonfinite else ""
        lines.append(f"measured{where}: relative error {precision.get('rel_error') or 0:.3g} against the float64 "
                     f"truth, {beyond} (the reference's own relative error: {precision.get('ref_rel_error') or 0:.3g})"
                     + (f"; {nonfinite} element(s) NaN or Inf where the truth is not, or placed otherwise"
                        if nonfinite else ""))
    kb = precision.get("kernelbench") or {}
    if kb.get("runs"):
        what = "would pass" if kb.get("passed") else f"would fail on {kb.get('failed_runs')} of {kb['runs']} run(s)"
        lines.append(f"KernelBench's tolerance (atol = rtol = {kb['tolerance']:g} for {precision['dtype']}): {what}")
    return lines
