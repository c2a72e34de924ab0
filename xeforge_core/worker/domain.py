"""Which inputs the truth is defined on: the problem's own, and the redraws that keep it so.

A problem's own inputs are the *anchor* distribution of a job (its first): ``module`` for a
problem without a spec (what ``get_inputs()`` returns with the generators seeded (``inputs.seed_all``), as
KernelBench's evaluation draws them, so softmax'd probabilities, positive scales, index ranges
and masks keep their domain), else the spec's first distribution. The others are *redraws*
(``normal``, ``uniform``, ``mixed``, ``ties``, ``shifted``, ``spread``, ``zeros``: the floating-point inputs drawn
again from a fixed law) and stress the kernel where the problem's own inputs are tame (all positive, all small).
Where a whole redraw leaves the truth's domain, the baseline adds *partial* redraws (``normal@1``:
the input at position 1 redrawn alone, the others the problem's own; :meth:`TruthDomain.partial_redraws`).

A redraw can leave the truth's domain: a KL divergence fed normal "probabilities" takes the log
of negative numbers, and its reference is NaN, so no candidate can be judged there. The baseline
job keeps a redraw on a variant only where the truth stays finite on it (where it is finite on
the anchor) and depends on it (its outputs change with the redrawn inputs); otherwise the redraw
is skipped on that variant, and the verdict says why (``TruthDomain.skipped``).

A truth that is NaN or Inf on the problem's own inputs is the problem's property, never the
candidate's fault: its non-finite elements are named (``nonfinite_summary``), and a candidate
that differs from it only there is not wrong (``excused_by_nonfinite_truth``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from xeforge_core.verdict import OWN_INPUTS, PARTIAL, inputs_label
from xeforge_core.worker.compare import Tolerance, compare_outputs
from xeforge_core.worker.expected import StoredTensor, materialize
from xeforge_core.worker.inputs import ROWWISE_DECADES, SHIFTED_MEAN, SPREAD_DECADES, TIE_LEVELS, ZERO_STRIDE


def inputs_phrase(distribution: str) -> str:
    """How a distribution is named in a verdict: ``get_inputs() inputs`` for the problem's own,
    ``normal inputs`` for a redraw (``verdict.inputs_label``), ``get_inputs() inputs with
    get_inputs()[1] redrawn normal`` for a partial redraw (``normal@1``)."""
    base, sep, position = distribution.partition(PARTIAL)
    if sep:
        return f"{inputs_label(OWN_INPUTS)} inputs with get_inputs()[{position}] redrawn {base}"
    return f"{inputs_label(distribution)} inputs"


def redraw_seeds(distributions: list[str], seeds: list[int]) -> dict[str, list[int]]:
    """The seeds each distribution runs at: every seed for the anchor (and for every
    distribution of a spec, which are all the spec's own inputs, but :data:`STRESS`); only the
    first seed for the redraws of a ``get_inputs()`` problem and for a stress redraw, which
    stress the kernel once each."""
    if not distributions:
        return {}
    anchor = distributions[0]
    return {d: (list(seeds) if d == anchor or (anchor != OWN_INPUTS and d not in STRESS) else list(seeds[:1]))
            for d in distributions}


#: Redraws that stress a kernel where a problem's inputs rarely go (far from zero; a wide spread;
#: exact zeros; equal values),
#: with what each shows: one seed is enough.
STRESS_NOTES = {
    "shifted": f"shifted inputs are normal around {SHIFTED_MEAN:g}, far from zero, where a kernel that is not numerically stable "
               "loses its digits or overflows (a softmax without the max subtraction, a variance computed as "
               "E[x^2] - mean^2)",
    "spread": f"spread inputs span magnitudes 10^{SPREAD_DECADES[0]:g} to 10^{SPREAD_DECADES[1]:g} of both signs in "
              "every row, where a kernel that takes a row's maximum from part of the row, or computes exp of a large "
              "negative (-log(1 + exp(-x)) for a log-sigmoid), overflows",
    "rowwise": f"rowwise inputs give each row its own scale, 10^{ROWWISE_DECADES[0]:g} to 10^{ROWWISE_DECADES[1]:g}, and sign "
               "(all negative, all positive or both), where a kernel that adds its eps outside a square root, or pads a "
               "row's masked lanes with 0 before a maximum or a minimum, differs",
    "zeros": f"zeros inputs are exact zeros along every index 1 modulo {ZERO_STRIDE} of each dimension (whole rows, "
             "columns and samples) and at random elsewhere, where a kernel that divides by a norm without its eps, "
             "or treats 0 as a sign, differs",
    "ties": f"ties inputs take {TIE_LEVELS} values, so equal values abound: where torch defines what the reference "
            "keeps among equal values (the first of equal maxima for argmax, argmin and max or min over a dimension, "
            "the input order for a stable sort, the k largest values for topk), a kernel that keeps others differs",
}
STRESS = tuple(STRESS_NOTES)


def _countable(t: torch.Tensor) -> torch.Tensor:
    """``t`` where torch counts and replaces its NaN and Inf: a float8 tensor (torch has no
    ``isinf``, ``isfinite`` or ``where`` for it) widened to float32, which holds it exactly."""
    return t.float() if t.dtype.is_floating_point and t.element_size() == 1 else t


def nonfinite_summary(outputs: list[Any]) -> str | None:
    """``output 0: 3 NaN, 1 Inf of 4096 element(s)`` for each floating-point tensor output that
    holds a NaN or an Inf (joined by ``; ``), or ``None`` when every output is finite. Counted on
    the device, in one pass per output."""
    parts = []
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor) or not (out.dtype.is_floating_point or out.dtype.is_complex):
            continue
        wide = _countable(out)
        nan = int(torch.isnan(wide).sum())
        inf = int(torch.isinf(wide).sum())
        if nan or inf:
            counts = ", ".join(f"{n} {what}" for n, what in ((nan, "NaN"), (inf, "Inf")) if n)
            parts.append(f"output {i}: {counts} of {out.numel()} element(s)")
    return "; ".join(parts) or None


def excused_by_nonfinite_truth(outputs: list[Any], truth: list[Any], tol: Tolerance, device: torch.device,
                               *, where_output: bool = False, **compare_kwargs: Any) -> bool:
    """Whether ``outputs`` match ``truth`` everywhere the truth is finite: the comparison again,
    with the candidate's value replaced by the truth's wherever the truth is NaN or Inf. A
    candidate that differs only there is not wrong (the truth is undefined there), and one left
    unwritten where the truth has a value still fails. ``where_output``: replaced wherever the
    candidate's own output is not finite instead (it differs only where it overflowed)."""
    patched: list[Any] = []
    for out, exp in zip(outputs, truth):
        if isinstance(out, torch.Tensor) and isinstance(exp, (torch.Tensor, StoredTensor)) \
                and (out.dtype.is_floating_point or out.dtype.is_complex):
            full = materialize([exp], device)[0] if isinstance(exp, StoredTensor) else exp.to(device)
            if full.shape == out.shape:
                wide, full = _countable(out), _countable(full)
                bad = ~torch.isfinite(wide) if where_output else ~torch.isfinite(full)
                out = torch.where(bad, full.to(wide.dtype), wide).to(out.dtype)
        patched.append(out)
    patched += outputs[len(truth):]
    return compare_outputs(patched, truth, tol, **compare_kwargs)[0]


@dataclass
class _Seen:
    seed: int
    inputs: str
    truth: tuple[Any, ...]
    nonfinite: str | None
    #: what the truth (or the baseline) raised on these inputs, where it raised
    raised: str | None = None
    #: the torch calls whose results among equal values torch leaves undefined and the truth's
    #: results depend on (``tie_order``), where the distribution is the ``ties`` redraw
    undefined_order: tuple[str, ...] = ()


@dataclass
class TruthDomain:
    """The truth's outputs per (variant, distribution), recorded by the baseline job as it runs
    each combination (``record``), then judged (``decide``): which redraws to skip on which
    variant and why, and where the truth is non-finite on what is kept."""

    anchor: str
    truth_label: str = "reference"
    seen: dict[tuple[str, str], list[_Seen]] = field(default_factory=dict)
    #: per variant, the redraws left out because the truth did not change with them (filled by
    #: ``decide``): evidence, with the anchor's runs, that the truth ignores its inputs
    unchanged: dict[str, set[str]] = field(default_factory=dict)

    def record(self, variant: str, distribution: str, seed: int, inputs: str, truth_hashes: tuple[Any, ...],
               nonfinite: str | None, raised: str | None = None, undefined_order: tuple[str, ...] = ()) -> None:
        """One combination: its input fingerprint, the digests of the truth's outputs and what of
        them is non-finite (``nonfinite_summary``), or what the problem's code raised on it
        (``raised``: a redraw it refuses, as a scale that must be positive), and the calls whose
        result among equal values torch leaves undefined and its results depend on
        (``undefined_order``, ``tie_order.TieWatch.settle``)."""
        self.seen.setdefault((variant, distribution), []).append(
            _Seen(seed, inputs, truth_hashes, nonfinite, raised, tuple(undefined_order)))

    def record_refusal(self, variant: str, distribution: str, seed: int, inputs: str, reason: str) -> None:
        """One combination the problem's code raised on (its failure's ``reason``, first line)."""
        self.record(variant, distribution, seed, inputs, (), None, raised=reason.splitlines()[0][:200])

    def partial_redraws(self, floating: dict[str, list[int]], first_seed: int) -> list[tuple[str, str]]:
        """``(variant, "normal@1")`` for each floating-point input position of a variant (from
        ``floating``: at least two there) and each whole redraw at ``first_seed`` that left the
        truth's domain on it (the problem's code raised, or the truth is not finite where it is
        on the anchor), not yet recorded: the redraw again with one input at a time redrawn
        and the others the problem's own. One input whose domain the redraw leaves (the
        probabilities a log takes) would otherwise leave every other input unchecked on the
        values the problem never draws (a sign a kept ``relu`` handles). Only for the anchor
        ``module`` (a spec's inputs have no domain of their own)."""
        if self.anchor != OWN_INPUTS:
            return []
        out = []
        for (variant, dist), runs in list(self.seen.items()):
            positions = floating.get(variant) or []
            if dist == self.anchor or PARTIAL in dist or len(positions) < 2:
                continue
            anchor_runs = self.seen.get((variant, self.anchor), [])
            if not self._left(runs, anchor_runs, first_seed):
                continue
            out += [(variant, f"{dist}{PARTIAL}{p}") for p in positions
                    if (variant, f"{dist}{PARTIAL}{p}") not in self.seen]
        return out

    @staticmethod
    def _left(runs: list[_Seen], anchor_runs: list[_Seen], seed: int) -> bool:
        """Whether the runs at ``seed`` left the truth's domain (see :meth:`partial_redraws`)."""
        at = [r for r in runs if r.seed == seed]
        return bool(at) and (any(r.raised for r in at) and not any(r.raised for r in anchor_runs)
                             or any(r.nonfinite for r in at) and not any(r.nonfinite for r in anchor_runs))

    def decide(self) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
        """``(skipped, nonfinite)``: ``skipped[variant][distribution]`` is why a redraw is left
        out on that variant; ``nonfinite[variant][f"{distribution}/s{seed}"]`` names the truth's
        non-finite outputs on a kept combination."""
        skipped: dict[str, dict[str, str]] = {}
        nonfinite: dict[str, dict[str, str]] = {}
        own = inputs_phrase(self.anchor)
        for (variant, dist), runs in self.seen.items():
            anchor_runs = self.seen.get((variant, self.anchor), [])
            if dist != self.anchor:
                why, same = self._skip_reason(dist, runs, anchor_runs, own)
                if why:
                    skipped.setdefault(variant, {})[dist] = why
                    if same and PARTIAL not in dist:  # one input ignored is no evidence all are
                        self.unchanged.setdefault(variant, set()).add(dist)
                    continue
            for r in runs:
                if r.nonfinite:
                    nonfinite.setdefault(variant, {})[f"{dist}/s{r.seed}"] = r.nonfinite
        return skipped, nonfinite

    def _skip_reason(self, dist: str, runs: list[_Seen], anchor_runs: list[_Seen], own: str) -> tuple[str, bool]:
        """Why ``dist`` is left out on a variant ("" to keep it), and whether because the truth
        did not change with it."""
        undefined = next((r.undefined_order for r in runs if r.undefined_order), ())
        if undefined:
            calls = ", ".join(f"torch.{name}" for name in undefined)
            return (f"the {self.truth_label}'s results depend on what {calls} keeps among equal values, which "
                    f"torch leaves undefined, so {inputs_phrase(dist)} cannot judge which of equal values a kernel keeps"), False
        refused = next((r for r in runs if r.raised), None)
        if refused is not None and not any(r.raised for r in anchor_runs):
            return (f"the problem's code raised on {inputs_phrase(dist)} ({refused.raised}) while it runs on its own {own}: "
                    "those inputs leave its domain"), False
        bad = next((r for r in runs if r.nonfinite), None)
        if bad is not None and not any(r.nonfinite for r in anchor_runs):
            return (f"the {self.truth_label} is not finite on {inputs_phrase(dist)} ({bad.nonfinite}) while it is on the "
                    f"problem's own {own}: those inputs leave its domain"), False
        anchor_inputs = {r.seed: r.inputs for r in anchor_runs}
        if runs and all(anchor_inputs.get(r.seed) == r.inputs for r in runs):
            return (f"{inputs_phrase(dist)} are the problem's own: it has no floating-point element to redraw (no "
                    "floating-point input, or only empty ones; integer and bool inputs keep their own draw), so the "
                    "redraw adds nothing"), False
        anchor_truths = {r.truth for r in anchor_runs}
        redrawn = {r.truth for r in runs}
        inputs_differ = len({r.inputs for r in runs + anchor_runs}) > 1
        constant_anchor = len(anchor_truths) == 1 and len({r.inputs for r in anchor_runs}) > 1
        if inputs_differ and not constant_anchor and all(None not in t for t in redrawn) and (
                redrawn <= anchor_truths or (len(runs) > 1 and len(redrawn) == 1)):
            return (f"the {self.truth_label}'s output does not change with {inputs_phrase(dist)} (the same as on other "
                    "inputs), so matching it there proves nothing"), True
        return "", False
