"""What the verdict says about precision: which precision applied, what was measured against
the float64 truth, what KernelBench's tolerance would say, and, for a candidate whose error is
a precision change, its cause and the exact option that accepts it.

A failing output's error is called a precision change when some allowance of
``xeforge_core.precision.DOWNGRADES`` would accept it (``OutputComparison.needs``) and either
the candidate's source shows that downgrade (``worker/precision_hints.py``) or the error is
spread over a sizeable output (at least :data:`SPREAD_MIN_ELEMENTS` elements outside the bound,
and at least :data:`SPREAD_FRACTION` of it: a coarser arithmetic errs on every element, an
approximate formula on the ranges of values where it is coarsest, a quarter of a GELU's
``torch.rand`` inputs for a published erf approximation) and an operand downgrade (not an accumulator, whose allowance
grows with the length summed and would cover nearly anything) accepts it, as a coarser
arithmetic spreads it. An error confined to a few elements, or of a single-element output with
no such evidence, is a wrong answer and is not explained away as precision. So is every error of
an output that some run gets wrong in a way no precision change explains
(:func:`beyond_precision`): a coarser arithmetic errs alike on every input, so one input it
cannot explain shows a fault of another kind (a GroupNorm whose masked-off lanes add the mean
squared to the variance is off by 1e-3 on normal inputs, by 0.5 on the problem's own
``torch.rand`` inputs).
"""

from __future__ import annotations

from typing import Any

from xeforge_core.precision import BASELINE, DOWNGRADES, PrecisionPolicy, kernelbench_tolerance, own_factor
from xeforge_core.verdict import CorrectnessRun, Finding, OutputComparison, inputs_label
from xeforge_core.worker.precision_hints import SCANNED_DOWNGRADES, Hints

#: Outputs with fewer elements are not judged by how their error is spread.
SPREAD_MIN_ELEMENTS = 16

#: The share of an output's elements outside the bound that counts as spread (one in ten).
SPREAD_FRACTION = 0.1


def policy_of(options: dict[str, Any]) -> PrecisionPolicy:
    """The precision policy of a job's ``options`` (``"precision"``: ``PrecisionPolicy.to_data()``)."""
    return PrecisionPolicy.from_data(options.get("precision"))


def run_check(comps: list[OutputComparison]) -> tuple[str, bool | None]:
    """A run's ``check`` (``float64``, ``tolerance`` or ``float64+tolerance``) and whether
    KernelBench's tolerance would pass it (``None``: no output it applies to)."""
    checks = sorted({c.check for c in comps if c.check})
    judged = [c for c in comps if c.kernelbench_tol is not None]
    kb = all(c.kernelbench_mismatches == 0 for c in judged) if judged else None
    return "+".join(checks), kb


def _spread(comp: OutputComparison) -> bool:
    return comp.mismatches >= max(SPREAD_MIN_ELEMENTS, SPREAD_FRACTION * comp.numel)


def beyond_precision(runs: list[CorrectnessRun], hints: dict[str, list[str]]) -> frozenset[int]:
    """The indices of the outputs that some run of ``runs`` gets wrong in a way no precision
    change explains (a failing comparison :func:`explained` does not accept): on those outputs no
    failure of any run is a precision change."""
    return frozenset(c.index for r in runs for c in r.outputs if not c.passed and explained(c, hints) is None)


def explained(comp: OutputComparison, hints: dict[str, list[str]],
              beyond: frozenset[int] = frozenset()) -> tuple[str, str] | None:
    """``(downgrade to allow, its cause)`` when ``comp``'s failure is a precision change (see
    the module docstring), else ``None``. ``beyond``: the outputs :func:`beyond_precision` found
    wrong in another way on some run, never a precision change."""
    if comp.passed or not comp.needs or comp.index in beyond:
        return None
    named = [n for n in hints if n in comp.needs]
    if named:
        return named[0], hints[named[0]][0]
    # an accumulator's allowance is too wide to explain an unknown cause, and a downgrade the source
    # scan finds wherever it is (a TF32 dot, a half-precision type) is no cause where it found none
    operands = [n for n in comp.needs if not DOWNGRADES[n].accumulation and n not in _scanned(hints)
                and n not in _unlikely(hints)]
    if _spread(comp) and operands:
        return operands[0], ("no TF32 dot product and no half-precision type in the source: an approximation (a "
                             "formula, a fast intrinsic) errs like this")
    return None


def beyond_every_allowance(run: CorrectnessRun, hints: dict[str, list[str]]) -> bool:
    """Whether some failing output of ``run`` is no precision change even counting those
    ``hints`` leaves unnamed for lack of evidence (``Hints.unlikely``): the run whose fault the
    reason should show first (a missing eps's NaN on zero inputs, not a 6e-5 error elsewhere)."""
    lenient = Hints(dict(hints), _scanned(hints))
    return has_unexplained(run, lenient)


def has_unexplained(run: CorrectnessRun, hints: dict[str, list[str]]) -> bool:
    """Whether some failing output of ``run`` is no precision change (:func:`explained` accepts
    none): no allowance would make the run pass."""
    return any(not c.passed and explained(c, hints) is None for c in run.outputs)


def unseen_first(names: list[str], hints: dict[str, list[str]]) -> list[str]:
    """``names`` (downgrades, finest first) with those the source scan would have found but did
    not (``SCANNED_DOWNGRADES`` missing from ``hints``: a TF32 dot in a kernel with no dot) moved
    last: which of the allowed downgrades let an output through."""
    return sorted(names, key=lambda n: n in _scanned(hints) and n not in hints)


def _unlikely(hints: dict[str, list[str]]) -> frozenset[str]:
    """The downgrades ``hints`` does not name as a cause without the source's evidence
    (``precision_hints.Hints.unlikely``)."""
    return getattr(hints, "unlikely", frozenset())


def _fault_first(runs: list[CorrectnessRun], hints: dict[str, list[str]], policy: PrecisionPolicy) -> str:
    """For a failure no precision change explains, where an allowance the source gives no
    evidence of (``Hints.unlikely``: approximate math on a truth of square roots, exponentials
    and logarithms) would accept every failing output of every run, an error spread over some:
    what that means, fault first; else ""."""
    failing = [c for r in runs for c in r.outputs if not c.passed]
    names = [n for n in _unlikely(hints) if n not in policy.allowed and failing
             and all(n in (c.needs or ()) for c in failing) and any(_spread(c) for c in failing)]
    if not names:
        return ""
    name = names[0]
    return (f"; no precision change the source shows explains it: the reference's functions have hardware "
            f"approximations within a few float32 units in the last place, so look for a fault of logic first "
            f"(a divisor, a constant, a mask); if the kernel computes one of them through its own approximation, "
            f"--allow {name} accepts errors of this size ({_measured(failing[0])})")


def _scanned(hints: dict[str, list[str]]) -> frozenset[str]:
    """The downgrades ``hints`` would name wherever they are (``precision_hints.Hints.scanned``)."""
    return getattr(hints, "scanned", SCANNED_DOWNGRADES)


def _measured(comp: OutputComparison) -> str:
    return (f"relative error {comp.rel_error:.3g} against the float64 truth, {comp.error_ratio:.3g}x the "
            f"reference's own error scale (the reference: {comp.ref_rel_error:.3g})")


def advice(run: CorrectnessRun, hints: dict[str, list[str]], policy: PrecisionPolicy,
           runs: list[CorrectnessRun] | None = None) -> str:
    """The sentence a failing ``run``'s reason ends with when its failure is a precision change
    (what it is, what was measured, and the exact option that accepts it), else "". ``runs``:
    every run of the candidate, so an output another run gets wrong in a way no precision change
    explains is not called a precision change here either; nor is anything on a run with an
    output no precision change explains."""
    if has_unexplained(run, hints):
        return _fault_first(runs or [run], hints, policy)
    beyond = beyond_precision(runs or [run], hints)
    for comp in run.outputs:
        found = explained(comp, hints, beyond)
        if found is None:
            continue
        name, cause = found
        return (f"; this is a precision change: {DOWNGRADES[name].what} ({cause}); {_measured(comp)}. The "
                f"problem allows {policy.describe(comp.expected_dtype)}: to accept this precision, pass "
                f"--allow {name} (spec: allow: [{name}]; workbench: allowed precision)"
                + (f", or --allow {BASELINE}: the baseline is measured to need it too"
                   if name in policy.baseline_needs and not policy.follows_baseline else ""))
    return ""


def findings(runs: list[CorrectnessRun], hints: dict[str, list[str]], policy: PrecisionPolicy) -> list[Finding]:
    """``precision_downgrade`` findings: each precision change measured on any run, with its
    cause and measured error; an error where the downgrade is not allowed, a warning where it
    is (allowed downgrades that stayed within the float32 bound are not reported)."""
    out: dict[str, Finding] = {}
    allowed = set(policy.allowed)
    beyond = beyond_precision(runs, hints)
    for run in runs:
        for comp in run.outputs:
            if comp.error_ratio is None or not comp.needs:
                continue
            if comp.passed:  # accepted: an allowed downgrade (or explicit tolerances) let it through
                used = [n for n in comp.needs if n in allowed]
                name = next((n for n in hints if n in (used or comp.needs)), None) or (
                    unseen_first(used or comp.needs, hints)[0] if used or _spread(comp) else None)
                if name is None or name in out:
                    continue
                via = f"allowed by {policy.source_of(name)}" if name in allowed else "accepted by the explicit tolerances"
                out[name] = Finding("precision_downgrade", f"{DOWNGRADES[name].what}: "
                                    f"{hints.get(name, ['measured only'])[0]}; {_measured(comp)} ({via})", "warning")
                continue
            found = explained(comp, hints, beyond)
            if found is None or found[0] in out:
                continue
            name, cause = found
            out[name] = Finding("precision_downgrade", f"{DOWNGRADES[name].what}: {cause}; {_measured(comp)} on "
                                f"variant {run.variant} (seed {run.seed}, {inputs_label(run.distribution)} inputs), output "
                                f"{comp.index}. Not allowed: the problem allows "
                                f"{policy.describe(comp.expected_dtype)}; --allow {name} accepts it"
                                + (f" (so does --allow {BASELINE}: the baseline is measured to need it too)"
                                   if name in policy.baseline_needs and not policy.follows_baseline else ""),
                                "error")
    return list(out.values())



def summary(runs: list[CorrectnessRun], policy: PrecisionPolicy, truth64: dict[str, Any]) -> dict[str, Any]:
    """``Verdict.precision``: the dtype, the allowed downgrades and where each came from, the
    phrase of what applied, the check used and its factor, why the float64 truth was not used
    ("" when it was), the largest measured ratios, and KernelBench's tolerance with what it
    would say on these runs."""
    dtype = str(truth64.get("dtype") or next((c.expected_dtype for r in runs for c in r.outputs), ""))
    comps = [c for r in runs for c in r.outputs]
    checks = sorted({c.check for c in comps if c.check})
    measured = [c for c in comps if c.error_ratio is not None]
    tol = kernelbench_tolerance(dtype)
    judged = [r for r in runs if r.kernelbench is not None]
    out: dict[str, Any] = {
        "dtype": dtype, "allowed": list(policy.allowed), "from_options": list(policy.from_options),
        "from_spec": list(policy.from_spec), "from_baseline": list(policy.from_baseline),
        "baseline_state": policy.baseline_state, "inapplicable": list(policy.inapplicable), "applied": policy.describe(dtype) if dtype else "",
        "check": "+".join(checks), "factor": own_factor(dtype),
        "tolerances": sorted({(r.rtol, r.atol) for r in runs if "tolerance" in (r.check or "")}),
        "fallback": str(truth64.get("fallback") or ""),
        "widened": list(truth64.get("widened") or []),
        "error_ratio": max((c.error_ratio for c in measured), default=None),
        "rel_error": max((c.rel_error or 0.0 for c in measured), default=None),
        "ref_rel_error": max((c.ref_rel_error or 0.0 for c in measured), default=None),
        # the measured errors are over the elements both hold finite: these are the others
        "nonfinite": sum((c.nan_mismatch or 0) + (c.inf_mismatch or 0) for c in comps),
    }
    if tol is not None:
        failed = sum(1 for r in judged if not r.kernelbench)
        out["kernelbench"] = {"tolerance": tol, "runs": len(judged), "failed_runs": failed,
                              "passed": bool(judged) and failed == 0}
    return out

