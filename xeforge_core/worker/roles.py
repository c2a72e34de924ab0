"""The ``baseline`` and ``candidate`` roles: compile, structure/integrity, correctness.

Both roles run every (correctness variant x seed x input distribution) combination with the
same seeds, so inputs and weights match; a ``get_inputs()`` problem's own inputs (its first
distribution) at every seed, its redraws at the first seed, and the candidate skips the redraws the
baseline found outside the truth's domain on a variant (``xeforge_core.worker.domain``). The baseline job saves, per combination, its outputs
and the reference's (``xeforge_core.worker.expected``: streamed to disk, so host memory does
not grow with tensor size), plus the model weights per (variant, seed) and a ``meta.json``
(heavy aten ops, launch count, whether the baseline agrees with the reference, what the truth
is, whether the truth's outputs ignore inputs that varied, and whether they depend on memory
nothing wrote: ``meta["unwritten_truth"]``, from one more call per variant of a Triton baseline
that is the truth, on fresh memory, ``truth_memory.py``). The candidate job compares against those; where the truth is
random or reads memory nothing wrote, its verdict is inconclusive and names the truth's fault.

The truth is the reference when one exists (``meta["truth"] == "reference"``), else the
baseline. A PyTorch truth is also run in float64 (``truth64.py``): candidates are then judged by
the float64-calibrated bound of ``xeforge_core.precision`` under the precision the job allows
(``options["precision"]``), and ``meta["truth64"]`` says why not where it could not be. When
the baseline *is* the reference (``baseline_is_reference``: a plain-PyTorch KernelBench or
KernelAgent problem), its outputs are the truth and it need launch no Triton
kernel. A candidate judged against the reference keeps the baseline's output dtypes and shapes
(``allow_dtype_change`` / ``allow_shape_change`` waive that).

Files in ``expected/``::

    meta.json                       {"runs": {KEY: {...}}, "heavy_ops": [...], "truth": ..., "truth64": ...}
    <KEY>.json, <KEY>.o<i>.bin, ... outputs and reference outputs, and the float64 truth's
                                    deviation and sensitivity (see ``expected.py``, ``truth64.py``)
    state__<variant>__s<seed>.pt    the baseline model's state_dict (before any forward)
    <KEY>__effects.json, ...        the inputs and buffers the truth changed, after the call
                                    (``worker.effects``; ``meta["effects"]`` names them)

with ``KEY = <variant>__s<seed>__<distribution>`` (characters outside ``[A-Za-z0-9_.-]`` written ``_``: a partial
redraw ``normal@1`` is ``normal_1``).

The candidate job also records the launch grid of every Triton launch, and per variant the launch
facts of its first run (grid, integer arguments, tiles, loop trips: ``worker.tiles``), and when
the job gives a ``grid_probe`` variant (the first correctness variant at twice its sizes) runs the
candidate once there, so the parent can tell which grid axes grow with the input and derive a
larger variant when one of them ran with fewer than three programs.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xeforge_core.precision import BASELINE, DOWNGRADES, PrecisionPolicy
from xeforge_core.units import size
from xeforge_core.verdict import (
    INCONSISTENT_PROBLEM,
    OWN_INPUTS,
    PARTIAL,
    CorrectnessRun,
    Finding,
    Step,
    StepStatus,
    VerdictKind,
    inputs_label,
)
from xeforge_core.worker import formats, tie_order
from xeforge_core.worker.autotune import skipped_by_autotuner, skipped_config_note
from xeforge_core.worker.calibrated import Truth64
from xeforge_core.worker.capture import INT32_LIMIT, LaunchRefused
from xeforge_core.worker.compare import (
    Tolerance,
    bitwise_equal,
    compare_outputs,
    resolve_tolerance,
    summarize_failure,
)
from xeforge_core.worker.context import WorkerContext
from xeforge_core.worker.domain import (
    STRESS,
    STRESS_NOTES,
    TruthDomain,
    excused_by_nonfinite_truth,
    inputs_phrase,
    nonfinite_summary,
    redraw_seeds,
)
from xeforge_core.worker.effects import Effects, buffer_digests, changed_inputs, effect_tensors, observe
from xeforge_core.worker.effects import digests as effect_digests
from xeforge_core.worker.errors import Failure, WorkerError, classify, hardcoded_device_note
from xeforge_core.worker.expected import (
    ExpectedStore,
    StoredTensor,
    disk_room,
    materialize,
    tensor_bytes,
    tensor_fingerprint,
)
from xeforge_core.worker.formats.base import constructor_arguments, forward_params
from xeforge_core.worker.fresh_fill import FIRST_FILL, SECOND_FILL, FirstCall, FreshMemory
from xeforge_core.worker.inputs import (
    DISTRIBUTIONS,
    INIT_DIFFERS,
    TIED,
    base_distribution,
    build_inputs,
    clone_args,
    construct_model,
    dtype_from_name,
    flatten_outputs,
    init_values,
    load_matching_state,
    seed_all,
)
from xeforge_core.worker.integrity import (
    HarnessGuard,
    OpTracer,
    aliased_outputs,
    heavy,
    lint_findings,
    mutated_inputs,
    refillable,
    splice_ends,
    static_findings,
    subclass_outputs,
)
from xeforge_core.worker.loading import LoadedModule, load_module
from xeforge_core.worker.parameters import redrawn_note
from xeforge_core.worker.precision_hints import (
    SCANNED_DOWNGRADES,
    Hints,
    jit_reached,
    precision_hints,
    tf32_dots,
    truth_scanned,
    truth_unlikely,
)
from xeforge_core.worker.precision_report import (
    advice,
    beyond_every_allowance,
    explained,
    has_unexplained,
    policy_of,
    run_check,
)
from xeforge_core.worker.precision_report import findings as precision_findings
from xeforge_core.worker.precision_report import summary as precision_summary
from xeforge_core.worker.tiles import kernel_sources, launch_facts
from xeforge_core.worker.timed_check import gross_mismatch
from xeforge_core.worker.truth64 import Float64Truth, Unavailable, full_float32
from xeforge_core.worker.truth_memory import unwritten_truth, unwritten_truth_summary

DEFAULT_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Combo:
    """One (variant, seed, distribution) combination."""

    variant: dict[str, Any]
    seed: int
    distribution: str
    #: seed of the inputs when it differs from the weights' seed (the integrity run)
    input_seed: int | None = None

    @property
    def vname(self) -> str:
        """The variant's name (``module`` without a spec)."""
        return str(self.variant.get("name") or "module")

    @property
    def key(self) -> str:
        """File-safe key of this combination (names its saved outputs)."""
        extra = f"__in{self.input_seed}" if self.input_seed is not None else ""
        return _safe(f"{self.vname}__s{self.seed}__{self.distribution}{extra}")

    def describe(self) -> str:
        """Human description, e.g. ``variant ci (seed 0, normal inputs)``, ``variant module-small
        (seed 1, get_inputs() inputs)``."""
        seed = f"seed {self.seed}" + (f", input seed {self.input_seed}" if self.input_seed is not None else "")
        return f"variant {self.vname} ({seed}, {inputs_phrase(self.distribution)})"


#: offset of the integrity run's input seed from the first run's seed
INTEGRITY_SEED_OFFSET = 7919


def integrity_combo(combos: list[Combo]) -> Combo:
    """The second call of the caching checks: the first combination's model (same weights) with
    inputs of the same shape from another seed; the baseline saves its outputs too."""
    first = combos[0]
    return Combo(first.variant, first.seed, first.distribution, first.seed + INTEGRITY_SEED_OFFSET)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def combos_of(job: dict[str, Any]) -> list[Combo]:
    """Every correctness combination of the job, variant-major (a variant's own ``seeds`` and
    ``distributions``, when it has them, in place of the job's); the first is the anchor
    distribution's (the problem's own inputs) at the first seed. The redraws of a
    ``get_inputs()`` problem run at the first seed only (``domain.redraw_seeds``)."""
    variants = list(job.get("correctness_variants") or []) or [{"name": "module", "params": [], "dims": {}}]
    seeds = [int(s) for s in (job.get("seeds") or DEFAULT_SEEDS)]
    dists = list(job.get("distributions") or DISTRIBUTIONS)
    combos = []
    for v in variants:
        own = [int(s) for s in (v.get("seeds") or seeds)]
        drawn = [d for d in dists if d in (v.get("distributions") or dists)]
        per = redraw_seeds(drawn, own)
        combos += [Combo(v, s, d) for s in own for d in drawn if s in per[d]]
    return combos


def _growing(combos: list[Combo], more: Callable[[], list[Combo]]) -> Iterator[Combo]:
    """Each of ``combos`` in turn, and after each, what ``more`` then gives, inserted next (into
    ``combos`` too): the baseline's partial redraws, known once their whole redraw has run
    (``TruthDomain.partial_redraws``), checked on its variant before the next variant's sizes,
    which a kernel may refuse."""
    i = 0
    while i < len(combos):
        yield combos[i]
        i += 1
        combos[i:i] = more()


def with_partial_redraws(combos: list[Combo], meta: dict[str, Any]) -> list[Combo]:
    """``combos`` with the partial redraws the baseline added (``meta["partial_redraws"]``, per
    variant), each right after its whole redraw on its variant (``normal@1`` after ``normal``),
    in the order the baseline ran them."""
    added = meta.get("partial_redraws") or {}
    out = []
    for c in combos:
        out.append(c)
        out += [Combo(c.variant, c.seed, d) for d in added.get(c.vname, ())
                if PARTIAL not in c.distribution and base_distribution(d) == c.distribution]
    return out


def _inconclusive(ctx: WorkerContext, step: Any, summary: str, *, warn: bool = True) -> None:
    """End the correctness ``step`` inconclusive: ``summary`` is its summary and the verdict's
    reason (and, with ``warn``, a warning too)."""
    step.status = StepStatus.INCONCLUSIVE
    step.summary = summary
    if warn:
        ctx.verdict.warnings.append(summary)
    ctx.verdict.kind = VerdictKind.INCONCLUSIVE
    ctx.verdict.reason = summary


def _only_redraws_fail(failed: list[CorrectnessRun], runs: list[CorrectnessRun], anchor: str) -> bool:
    """True when every failed run is on a redraw of a ``get_inputs()`` problem and runs on its
    own inputs passed: the kernel is right on the domain the problem draws from."""
    return anchor == OWN_INPUTS and bool(failed) and all(r.distribution != anchor for r in failed) \
        and any(r.distribution == anchor for r in runs)


def anchor_distribution(job: dict[str, Any]) -> str:
    """The job's first distribution: the problem's own inputs (``module`` without a spec)."""
    return str((job.get("distributions") or DISTRIBUTIONS)[0])


def _variant_dtype(variant: dict[str, Any]) -> torch.dtype | None:
    return dtype_from_name(variant["dtype"]) if variant.get("dtype") else None


def _expected_dir(ctx: WorkerContext) -> Path:
    given = ctx.job.get("expected_dir")
    return Path(given) if given else ctx.job_dir / "expected"


class Harness:
    """Runs one loaded module over the job's combinations.

    Inputs and constructor arguments come from the job's inputs module when it has one
    (KernelBench's problem file, ``WorkerContext.inputs_module``), else from ``loaded`` itself;
    a module without ``get_init_inputs()`` takes them from ``init_fallback``. A ``function``
    entry (KernelAgent's ``kernel_function``) is adapted by its format (``worker.formats``) into
    a model bound to the problem's reference model, built with the same seed and weights."""

    def __init__(self, ctx: WorkerContext, loaded: LoadedModule, init_fallback: LoadedModule | None = None) -> None:
        self.ctx = ctx
        self.loaded = loaded
        problem_inputs = ctx.inputs_module()
        self.input_source = problem_inputs or loaded
        candidates = [m for m in (problem_inputs, loaded, init_fallback) if m is not None]
        self.init_module = next((m for m in candidates if hasattr(m.module, formats.inputs_functions()[1])), candidates[0])
        self.spec = ctx.job.get("spec")
        self.models: dict[tuple[str, int], torch.nn.Module] = {}
        self.states: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        #: instances shared by the variants built alike (same init values, dtype and seed): the
        #: first variant's instance and name, by (init values, dtype, seed, on device, weights)
        self.shared: dict[tuple[Any, ...], tuple[torch.nn.Module, str]] = {}
        #: variant -> the variant whose instance it was called on (first called there)
        self.instance_of: dict[str, str] = {}
        #: inputs the truth modifies in place (``worker.effects``; set by the candidate job): a
        #: ``kernel_function`` returning its written first input then writes the caller's too
        self.truth_mutates: frozenset[int] = frozenset()
        self.weight_notes: dict[str, str] = {}
        #: parameters the constructor filled with one value, redrawn (name -> the fill value)
        self.redrawn: dict[str, float] = {}
        self._binding: LoadedModule | None = None
        self.call_description = ""

    def _binding_module(self) -> LoadedModule:
        """The module whose ``Model`` a ``function`` entry is bound to: the reference, else the
        baseline, else the inputs module."""
        if self._binding is None:
            job = self.ctx.job
            source = job.get("reference") or job.get("baseline")
            if source:
                # the reference's class is the problem's (``Model``, or KernelBook's ``GetMask``)
                name = (source.get("class_name") if job.get("reference") else None) or "Model"
                self._binding = load_module(self.ctx.job_dir, dict(source, label="binding", entry="class",
                                                                   class_name=name), self.ctx.ops.kind)
            elif self.ctx.inputs_module() is not None:
                self._binding = self.ctx.inputs_module()
            else:
                raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                          f"{self.loaded.path.name} defines {self.loaded.class_name}() but the "
                                          "job has no problem Model to bind its parameters to"))
        return self._binding

    def model_for(self, combo: Combo, *, baseline_state: dict[str, torch.Tensor] | None = None,
                  fresh: bool = False, share: bool = False) -> torch.nn.Module:
        """The model for (variant, seed): built under the seed, given ``baseline_state`` when its
        keys and shapes match; cached per (variant, seed) unless ``fresh``. With ``share``, a
        variant built alike to an earlier one (the same init values, dtype, seed and weights'
        shapes) is given that variant's instance, as a model is called at another batch size or
        sequence length: state a module keeps from its first call (a size, a buffer, a grid) is
        then used at another size (``instance_of`` records which)."""
        key = (combo.vname, combo.seed)
        if key in self.models and not fresh:
            return self.models[key]
        inits = init_values(self.init_module, combo.variant)
        on_device = bool(combo.variant.get("inputs_on_device"))
        shared_key = self.share_key(combo, baseline_state, inits) if share else ()
        if share and not fresh and shared_key in self.shared:
            model, first = self.shared[shared_key]
            self.models[key] = model
            self.states[key] = self.states[(first, combo.seed)]
            self.instance_of[combo.vname] = first
            return model
        adapt = self.loaded.adapter()
        if adapt is not None:
            binding = self._binding_module()
            reference = construct_model(binding, inits, combo.seed, self.ctx.ops.torch_device,
                                        _variant_dtype(combo.variant), on_device=on_device, redrawn=self.redrawn)
            if baseline_state is not None:
                self.weight_notes[f"{combo.vname}/s{combo.seed}"] = load_matching_state(reference, baseline_state)
            model: torch.nn.Module = adapt(self.loaded.entry_function(), reference,
                                           forward_params(binding.model_class()),
                                           constructor_arguments(binding.model_class(), inits))
            model.first_input_effect = 0 in self.truth_mutates
        else:
            model = construct_model(self.loaded, inits, combo.seed, self.ctx.ops.torch_device,
                                    _variant_dtype(combo.variant), on_device=on_device, redrawn=self.redrawn)
            if baseline_state is not None:
                self.weight_notes[f"{combo.vname}/s{combo.seed}"] = load_matching_state(model, baseline_state)
        self.states[key] = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        if not fresh:
            self.models[key] = model
            if share:
                self.shared.setdefault(shared_key, (model, combo.vname))
        return model

    def share_key(self, combo: Combo, baseline_state: dict[str, torch.Tensor] | None = None,
                  inits: list[Any] | None = None) -> tuple[Any, ...]:
        """What makes two variants' models built alike (``model_for(share=True)``): the init
        values (``inits`` where the caller has read them), the dtype, the seed, where the
        parameters are made and the weights' shapes."""
        inits = init_values(self.init_module, combo.variant) if inits is None else inits
        return (repr(inits), str(_variant_dtype(combo.variant)), combo.seed,
                bool(combo.variant.get("inputs_on_device")),
                tuple(sorted((k, tuple(v.shape)) for k, v in (baseline_state or {}).items())))

    def inputs_for(self, combo: Combo) -> list[Any]:
        """Fresh forward() arguments for ``combo`` on the device."""
        seed = combo.seed if combo.input_seed is None else combo.input_seed
        return build_inputs(self.input_source, self.spec, combo.variant, seed, combo.distribution,
                            self.ctx.ops.torch_device)

    def integrity_inputs(self, combo: Combo, first: Combo) -> list[Any]:
        """The arguments of the caching checks' second call (``combo``, the integrity run): its
        own draw with the end elements of ``first``'s spliced in (``integrity.splice_ends``), so
        it differs from the first call only inside."""
        args = self.inputs_for(combo)
        if combo.input_seed is not None:
            splice_ends(args, self.inputs_for(first))
        return args

    def run(self, model: torch.nn.Module, args: list[Any], *, trace: OpTracer | None = None,
            during: str = "running forward") -> list[Any]:
        """Call ``model(*args)``; returns the flat outputs. Raises ``WorkerError`` with the failure
        classified (kind, line in the module, hard-coded-device note)."""
        try:
            out = self.ctx.call(model, args, trace=trace)
        except WorkerError:
            raise
        except LaunchRefused as exc:
            self.ctx.verdict.findings.append(Finding("grid_axis_limit", str(exc), "error"))
            raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR, f"{during}: {exc}")) from exc
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            failure = classify(exc, self.loaded.file, jit_functions=self.loaded.jit_functions, during=during)
            note = hardcoded_device_note(self.loaded.source, failure.reason + failure.error_text,
                                         self.ctx.ops.kind)
            if note:
                failure.reason = f"the {self.loaded.label} {note}. {failure.reason}"
            raise WorkerError(failure) from exc
        if self.loaded.adapter() is not None and getattr(model, "description", ""):
            self.call_description = model.description
        return flatten_outputs(out)


def input_fingerprint(args: list[Any], tensors: list[str | None] | None = None) -> str:
    """A digest of the forward() arguments (tensor bytes and plain values), to tell whether the
    inputs of two runs differed (``expected.tensor_fingerprint`` per tensor; ``tensors``: those
    fingerprints when already taken, ``effects.digests``)."""
    import hashlib

    h = hashlib.sha256()
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            h.update(f"{tuple(a.shape)}{a.dtype}".encode())
            h.update((tensors[i] if tensors is not None and tensors[i] is not None else tensor_fingerprint(a)).encode())
        else:
            h.update(repr(a).encode())
    return h.hexdigest()


def launch_grids(launches: list[Any]) -> dict[str, list[int]]:
    """``{kernel: [programs on axis 0, 1, 2]}``: the largest count seen per axis over the
    launches of each kernel (launches whose grid could not be evaluated are left out)."""
    grids: dict[str, list[int]] = {}
    for rec in launches:
        if rec.grid is None:
            continue
        have = grids.setdefault(rec.kernel, [0, 0, 0])
        for i, g in enumerate(rec.grid):
            have[i] = max(have[i], int(g))
    return grids


def launch_findings(launches: list[Any], jit_sources: dict[str, str]) -> list[Finding]:
    """Run-time facts about the launches that explain faults the compiler does not report:
    an int32 offset that overflows (a tensor argument of 2^31 elements or more, in a kernel
    whose source never uses int64), and a float32 ``tl.dot`` that runs in TF32 on NVIDIA GPUs
    (``tf32_dots``: Triton's default there, a 10-bit mantissa; a warning) or as three TF32
    products (``input_precision="tf32x3"``, also where a constexpr the launch passes says so; an
    ``info`` finding, ``fp32_dot_tf32x3``)."""
    found: dict[tuple[str, str], Finding] = {}
    # each kernel's source parsed once per set of constexpr values, however often it launched
    tf32_by_kernel: dict[tuple[str, tuple], list[str]] = {}
    for rec in launches:
        src = jit_sources.get(rec.kernel, "")
        # int64 offsets: written in the kernel, or a dtype the launch passes (a first version's INDEX_DTYPE)
        wide = "int64" in src or "int64" in rec.constexprs.values()
        if rec.largest_arg and rec.largest_arg[1] > INT32_LIMIT and not wide:
            name, n = rec.largest_arg
            found[("int32_offset_overflow", rec.kernel)] = Finding(
                "int32_offset_overflow", f"kernel {rec.kernel}: argument {name} has {n} elements, past 2^31 - 1, "
                "and the kernel never computes offsets in int64: element offsets wrap and address the wrong "
                "memory. Cast the program id (or the offsets) with .to(tl.int64) before multiplying by strides",
                "warning")
        if not rec.float32_args:
            continue
        choices = {**rec.choices, **{k: v for k, v in rec.constexprs.items() if isinstance(v, (str, bool))}}
        key = (rec.kernel, tuple(sorted(choices.items())))
        if key not in tf32_by_kernel:
            tf32_by_kernel[key] = tf32_dots(src, choices)
        tf32 = tf32_by_kernel[key]
        if tf32 and all('"tf32x3"' in why for why in tf32):
            found[("fp32_dot_tf32x3", rec.kernel)] = Finding(
                "fp32_dot_tf32x3", f"kernel {rec.kernel}: tl.dot on float32 data as three TF32 products "
                f"({'; '.join(tf32[:3])}): on NVIDIA GPUs each operand is split into a high and a low TF32 part "
                "and three of the four products are summed on the tensor cores (the 3xTF32 scheme of NVIDIA's "
                "CUTLASS, near float32's accuracy; the low parts' own product is dropped); the comparison "
                "with the float64 truth measures what it costs", "info")
        elif tf32:
            found[("fp32_dot_tf32", rec.kernel)] = Finding(
                "fp32_dot_tf32", f"kernel {rec.kernel}: tl.dot on float32 data in TF32 ({'; '.join(tf32[:3])}): "
                "on NVIDIA GPUs Triton then multiplies in TF32 (10-bit mantissa), about 1e-3 relative error per "
                "product; pass input_precision=\"ieee\" where float32 accuracy is needed", "warning")
    return list(found.values())


def _jit_sources(loaded: LoadedModule) -> dict[str, str]:
    """``{kernel name: source}`` of the module's Triton kernels, read with ``inspect`` from the
    Python function and preceded by blank lines up to its first line in the file, so that a line
    counted in it is the file's (``JITFunction.src``, from its ``def`` on, where ``inspect`` cannot
    read the file)."""
    import inspect

    out: dict[str, str] = {}
    for fn in loaded.jit_functions:
        py = getattr(fn, "fn", None)
        name = getattr(py, "__name__", None)
        src = None
        if py is not None:
            try:  # padded to its place in the file, so that a finding's line is the file's
                lines, start = inspect.getsourcelines(py)
                src = "\n" * (start - 1) + "".join(lines)
            except (OSError, TypeError):
                src = None
        if src is None:
            src = getattr(fn, "src", None)
        if name and isinstance(src, str):
            out[name] = src
    return out


# ---------------------------------------------------------------------------------------------
# shared steps
# ---------------------------------------------------------------------------------------------

def _load(ctx: WorkerContext, source: dict[str, Any] | None, label: str) -> LoadedModule:
    if not source:
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR, f"the job has no {label} module"))
    source = dict(source, label=label)  # one directory per role: files never overwrite each other
    return load_module(ctx.job_dir, source, ctx.ops.kind)


def _compile_step(ctx: WorkerContext, combos: list[Combo], holder: dict[str, Any],
                  baseline_state_of: Any = None, truth_mutates: frozenset[int] = frozenset()) -> None:
    def body(step: Step) -> None:
        ctx.inputs_module()  # the problem's own inputs module first, before the module under test
        loaded = _load(ctx, ctx.job.get("module"), ctx.role)
        holder["loaded"] = loaded
        harness = Harness(ctx, loaded)
        harness.truth_mutates = truth_mutates
        holder["harness"] = harness
        combo = combos[0]
        state = baseline_state_of(combo) if baseline_state_of else None
        mark = ctx.recorder.mark()
        model = harness.model_for(combo, baseline_state=state, fresh=True)
        args = harness.inputs_for(combo)
        holder["first_outputs"] = harness.run(model, args, during=f"making the first call ({combo.describe()})")
        del args
        launches = ctx.recorder.since(mark)
        names = sorted({rec.kernel for rec in launches})
        # an autotuned kernel launches once a config on the call that tunes it: launches, not kernels
        step.summary = (f"imported {loaded.path.name}; first call launched "
                        + (f"{len(names)} Triton kernel(s) in {len(launches)} launch(es): {', '.join(names)}"
                           if len(launches) != len(names) else f"{len(launches)} Triton kernel(s)"
                           + (f": {', '.join(names)}" if names else "")))
        if harness.call_description:
            step.summary += f"; called {harness.call_description}"
        holder["launched"] = set(names)
        step.evidence = {"file": loaded.path.name, "launches": len(launches), "kernels": names,
                         "autotuned": [e.name for e in ctx.registry.entries],
                         "interpreter": ctx.ops.interpreter}
        if harness.call_description:
            step.evidence["call"] = harness.call_description
        ctx.kernels_to_verdict()

    ctx.run_step("compile", body)


def _structure_runtime(ctx: WorkerContext, harness: Harness, combos: list[Combo],
                       expected: dict[str, dict[str, Any]] | None, baseline_state_of: Any,
                       tol_of: Any, *, eager_ok: bool = False,
                       truth_mutates: frozenset[int] = frozenset()) -> tuple[list[Finding], dict[str, Any]]:
    """Runtime integrity checks on the first combination(s). Returns findings and evidence.
    ``eager_ok``: the module is the eager reference, so launching no Triton kernel is fine;
    ``truth_mutates``: inputs the truth modifies in place (a warning, not an error, where the
    module does the same: ``worker.effects`` compares them)."""
    findings: list[Finding] = []
    evidence: dict[str, Any] = {}
    a = combos[0]
    # a second input set of the same shape: the next combination of the same variant
    b = integrity_combo(combos)
    if expected is not None and b.key not in expected:  # outputs saved by an older baseline
        b = next((c for c in combos[1:] if c.vname == a.vname), None)
    model = harness.model_for(a, baseline_state=baseline_state_of(a) if baseline_state_of else None,
                              fresh=True)
    args_a = harness.inputs_for(a)
    before_a = clone_args(args_a)
    tracer = OpTracer()
    mark = ctx.recorder.mark()
    out_a = harness.run(model, args_a, trace=tracer)
    launches = ctx.recorder.since(mark)
    evidence["launches_per_call"] = len(launches)
    evidence["aten_ops"] = sorted(tracer.ops)
    evidence["heavy_ops"] = sorted(heavy(tracer.ops))
    if not launches and not eager_ok:
        findings.append(Finding("no_triton_launch", f"forward() launched no Triton kernel on {ctx.ops.kind}: "
                                "the work is not done by a Triton kernel (the Triton path never ran)"))
    if any(not rec.main_thread for rec in launches) or ctx.threads.started:
        findings.append(Finding("background_thread", "work ran on a background thread"
                                + (f" ({', '.join(ctx.threads.started)})" if ctx.threads.started else "")))
    if any(rec.side_stream for rec in launches):
        findings.append(Finding("side_stream", "a kernel was launched on a side stream, off the timed stream"))
    for i in mutated_inputs(before_a, args_a):
        if i in truth_mutates:
            findings.append(Finding("mutates_input", f"forward() modified its input {i} in place, as the truth does "
                                    "(compared with the truth's after each call)", "warning"))
        else:
            findings.append(Finding("mutates_input", f"forward() modified its input {i} in place"))
    del before_a
    aliased = aliased_outputs(out_a, args_a)
    for oi, ii in aliased:
        findings.append(Finding("output_aliases_input", f"output {oi} shares memory with input {ii}"))
    for oi, tname in subclass_outputs(out_a):
        findings.append(Finding("tensor_subclass", f"output {oi} is a {tname}, not a plain torch.Tensor "
                                "(lazy or deferred results are not allowed)"))
    if not any(isinstance(o, torch.Tensor) for o in out_a):
        findings.append(Finding("no_tensor_output", "forward() returned no tensor"))
    knockout = [c for c in knockout_combos(combos) if expected is not None and c.key in expected]
    if launches and knockout and knockout[0] is a:
        unused = _kernels_unused(ctx, harness, [(c, expected[c.key]["outputs"]) for c in knockout],
                                 baseline_state_of, tol_of)
        if unused:
            findings.append(unused)

    if b is not None and expected is not None and a.key in expected and b.key in expected:
        snap_a = [o.clone() if isinstance(o, torch.Tensor) else o for o in out_a]
        model_b = model
        args_b = harness.integrity_inputs(b, a)
        pristine_b = clone_args(args_b)
        out_b = harness.run(model_b, args_b)
        exp_a, exp_b = expected[a.key]["outputs"], expected[b.key]["outputs"]
        if any(isinstance(x, torch.Tensor) and not bitwise_equal(x, y) for x, y in zip(out_a, snap_a)):
            findings.append(Finding("reused_output_buffer", "the first call's output changed when forward() was "
                                    "called again: it returns a buffer it reuses across calls"))
        expected_differ = any(not _same_stored(x, y) for x, y in zip(exp_a, exp_b))
        tol = tol_of(a)
        ok_b, _, _, _ = compare_outputs(out_b, exp_b, tol, poisoned=False)
        like_a, _, _, _ = compare_outputs(out_b, snap_a, tol, poisoned=False)
        # a first answer that was already wrong is a wrong answer (the correctness step says so),
        # not a cache: an output that ignores its inputs (tiles never written) looks the same twice
        ok_a = not like_a or compare_outputs(snap_a, exp_a, tol, poisoned=False)[0]
        # device memory: at most three copies of the inputs and of the outputs are held at once
        del out_b
        if expected_differ and not ok_b and like_a and ok_a:
            findings.append(Finding("cached_output", "called twice with different inputs of the same shape, "
                                    "forward() returned the first call's result again (results cached "
                                    "across calls)"))
        elif (ok_b and expected_differ and not any(f.rule == "mutates_input" for f in findings)
              and refillable(args_a, pristine_b)):
            # same addresses and ids, new contents: catches caches keyed by id() or data_ptr()
            for x, y in zip(args_a, pristine_b):
                if isinstance(x, torch.Tensor):
                    x.copy_(y)
            out_c = harness.run(model_b, args_a)
            ok_c, _, _, _ = compare_outputs(out_c, exp_b, tol, poisoned=False)
            del out_c
            views = {oi for oi, _ in aliased}  # views of the inputs the third call refilled
            if not any(f.rule == "reused_output_buffer" for f in findings) and any(
                    isinstance(x, torch.Tensor) and i not in views and not bitwise_equal(x, y)
                    for i, (x, y) in enumerate(zip(out_a, snap_a))):
                findings.append(Finding("reused_output_buffer", "the first call's output changed when forward() "
                                        "was called a third time: it returns buffers it reuses every other call"))
            if not ok_c:
                findings.append(Finding("cached_output", "called again with the same tensors holding new "
                                        "values, forward() returned a stale result (cached by id() or "
                                        "data address)"))
        third = ok_b and expected_differ and refillable(args_a, pristine_b)
        evidence["calls_checked"] = 3 if third else 2
        if ok_b and expected_differ and not third:
            evidence["third_call"] = ("not made: the two draws' inputs differ in shape, dtype or a plain value, so "
                                      "the first call's tensors cannot hold the second's inputs")
    return findings, evidence


def knockout_combos(combos: list[Combo]) -> list[Combo]:
    """The combinations of the knockout check (:func:`_kernels_unused`): the first, and one of
    the same variant drawn from another distribution where the job has one (inputs on which a
    kernel that changes little, as a clamp wider than ``randn``'s values, does change them)."""
    first = combos[0]
    other = next((c for c in combos if c.vname == first.vname and c.distribution != first.distribution), None)
    return [first] + ([other] if other is not None else [])


def _kernels_unused(ctx: WorkerContext, harness: Harness, checks: list[tuple[Combo, list[Any]]],
                    baseline_state_of: Any, tol_of: Any) -> Finding | None:
    """The knockout check: each combination of ``checks`` called again on a fresh instance with
    every Triton launch recorded and skipped (``LaunchRecorder.dry``; autotuners' caches kept as
    they were). Outputs that still match the truth's (each check's expected outputs) on every
    one were computed without the kernels (by torch, the kernels' results discarded or never
    read): a ``kernels_unused`` error; ``None`` where the outputs change, or the call fails,
    without them."""
    saved = [(e.tuner, dict(getattr(e.tuner, "cache", {}) or {}), getattr(e.tuner, "best_config", None))
             for e in ctx.registry.entries]
    skipped = 0
    try:
        for combo, expected in checks:
            model = harness.model_for(combo, baseline_state=baseline_state_of(combo) if baseline_state_of else None,
                                      fresh=True)
            args = harness.inputs_for(combo)
            mark = ctx.recorder.mark()
            ctx.recorder.dry = True
            try:
                out = harness.run(model, args, during=f"running {combo.describe()} with its Triton launches skipped")
            except Exception:  # noqa: BLE001 - host code fed unrun kernels' outputs: the kernels are used
                return None
            finally:
                ctx.recorder.dry = False
                skipped = max(skipped, len(ctx.recorder.since(mark)))
                del ctx.recorder.launches[mark:]
            if not skipped or not any(isinstance(o, torch.Tensor) and o.numel() for o in out):
                return None
            if not compare_outputs(out, expected, tol_of(combo), poisoned=True)[0]:
                return None
    finally:
        for tuner, cache, best in saved:
            if hasattr(tuner, "cache"):
                tuner.cache = cache
            if best is not None:
                tuner.best_config = best
    where = " and ".join(c.describe() for c, _ in checks)
    return Finding("kernels_unused", f"with its {skipped} Triton launch(es) skipped, forward() still returns the "
                   f"expected outputs on {where}: what it returns is computed without its kernels (by torch), and "
                   "what the kernels compute is discarded")


def _side_effects_to_verdict(ctx: WorkerContext, effects: list[Finding] | None, truth: str) -> None:
    """Fail a candidate that changed its inputs in place where the truth leaves them unchanged
    (``effects``: its ``mutates_input`` findings) as a wrong answer: the caller sees the changed
    input, so the result differs from the truth's whatever the outputs are. Called after the
    correctness step, so the reason says whether the outputs themselves match (an in-place
    kernel written for a caller that allows it, such as a RoPE applied to its query tensor, is
    right in its values and wrong for this problem's contract); a correctness failure stands
    as the reason, with the side effect named after it."""
    if not effects:
        return
    what = " and ".join(f.message.replace("forward() modified", "it modified")
                        for f in effects if f.rule == "mutates_input")
    aliases = [f.message for f in effects if f.rule == "output_aliases_input"]
    structure = ctx.verdict.step("structure")
    if ctx.failed:
        ctx.verdict.reason += f"; besides, {what}, which the {truth} leaves unchanged"
        return
    if aliases:
        what += f" ({' and '.join(aliases)})"
    correctness = ctx.verdict.step("correctness")
    runs = (correctness.evidence or {}).get("runs") if correctness is not None else None
    matched = (f"its outputs match the {truth} on {runs} run(s)" if runs else
               f"its outputs match the {truth}")
    if ctx.verdict.kind is VerdictKind.INCONCLUSIVE:  # the outputs could not be judged
        matched = f"whether its outputs are right could not be judged ({ctx.verdict.reason})"
    those = "those inputs" if " and it modified" in what else "that input"
    reason = (f"wrong answer: {what}; the {truth} leaves {those} unchanged: the caller's tensor changes, a "
              f"side effect this problem does not allow; {matched} (a kernel meant to work in place needs a "
              "problem whose reference works in place too)")
    if structure is not None:
        ctx.fail(structure, Failure(VerdictKind.WRONG_ANSWER, reason))
    else:
        ctx.failed, ctx.verdict.kind, ctx.verdict.reason = True, VerdictKind.WRONG_ANSWER, reason


def effects_key(combo: Combo) -> str:
    """The saved key of the truth's effects on ``combo`` (``worker.effects``)."""
    return f"{combo.key}__effects"


def _truth_effects(meta: dict[str, Any], known: Effects, seen: tuple[list[str | None], dict[str, str]],
                   args: list[Any], model: torch.nn.Module, truth: Harness, combo: Combo,
                   state: dict[str, torch.Tensor] | None = None) -> Effects:
    """The truth's effects found on its first call (``seen``: the digests of its arguments and
    buffers before it; ``truth`` and ``combo`` call it again to tell state from a workspace),
    kept in ``meta["effects"]``."""
    def rerun(before: Any) -> torch.nn.Module:
        fresh = truth.model_for(combo, baseline_state=state, fresh=True)
        before(fresh)
        truth.run(fresh, truth.inputs_for(combo), during=f"calling the truth again on {combo.describe()} from "
                  "other buffer values (which of them it keeps as state)")
        return fresh

    found = observe(seen[0], args, seen[1], model, rerun) or known
    if found:
        meta["effects"] = found.to_json()
    return found


def _same_stored(x: Any, y: Any) -> bool:
    """Bitwise equality of two saved outputs (by their digests when saved as files)."""
    if isinstance(x, StoredTensor) and isinstance(y, StoredTensor):
        return x.shape == y.shape and x.dtype == y.dtype and bool(x.sha256) and x.sha256 == y.sha256
    return bitwise_equal(x, y)


def _float64_truth(ctx: WorkerContext, meta: dict[str, Any], truth: Harness | None) -> Float64Truth | None:
    """The float64 runner of the truth (the reference, or the baseline where it is the
    reference); ``None`` with the reason in ``meta["truth64"]["fallback"]`` where there is no
    PyTorch truth."""
    meta["truth64"] = {"fallback": "", "dtype": None, "runs": {}}
    if truth is None:
        meta["truth64"]["fallback"] = ("the truth is the Triton baseline (there is no PyTorch reference), which is "
                                       "not run in float64")
        return None
    return Float64Truth(truth, ctx.ops.torch_device)


def _calibrate(f64: Float64Truth | None, meta: dict[str, Any], model: torch.nn.Module, combo: Combo,
               outputs: list[Any]) -> list[Truth64 | None] | None:
    """The float64 truth of each of the truth's ``outputs`` for one run, or ``None`` once it is
    known not to be available (the reason kept in ``meta["truth64"]``)."""
    info = meta["truth64"]
    if f64 is None or info["fallback"]:
        return None
    try:
        deviations, sensitivities, drifts, stats = f64.calibrate(model, combo, outputs)
    except Unavailable as why:
        info["fallback"] = f"the reference cannot be computed in float64 here: {why}"
        return None
    info["dtype"] = stats["dtype"]
    info["runs"][combo.key] = stats["outputs"]
    info["widened"] = sorted(set(info.get("widened", [])) | set(stats["widened"]))
    info["ops"] = sorted(set(info.get("ops", [])) | set(stats["ops"]))
    return _truth64(deviations, sensitivities, stats["outputs"], drifts)


def _fit_on_disk(out_dir: Path, combo: Combo, outputs: list[Any], ref_out: list[Any] | None,
                 calibration: list[Truth64 | None] | None, meta: dict[str, Any],
                 warnings: list[str]) -> list[Truth64 | None] | None:
    """The float64 truth's parts to save with one run (``calibration``, or ``None`` when only the
    outputs fit on the job's disk: that run is then checked at the dtype's tolerance, and a
    warning says so). Raises :class:`WorkerError` (``environment``) before anything is written
    when even the outputs do not fit: at a published size a 15 GB output with its reference and
    three float32 truth tensors is 75 GB, more than a 64 GB disk (NVIDIA H200 machine, 2026-12-04)."""
    room = disk_room(out_dir)
    core = tensor_bytes(outputs) + tensor_bytes(ref_out)
    if core > room:
        raise WorkerError(Failure(
            VerdictKind.ENVIRONMENT,
            f"the outputs of {combo.describe()} need {size(core)} on disk for the candidate to be compared "
            f"with, and {out_dir.parent} has {size(room)} free beyond a reserve: free disk there (or point "
            "XEFORGE_CACHE_DIR, or TMPDIR where the cache is off, at a larger one), or check a smaller variant"))
    if not calibration:
        return calibration
    truth = sum(tensor_bytes([getattr(c, part) for c in calibration if c is not None])
                for part in ("deviation", "sensitivity", "drift"))
    if core + truth <= room:
        return calibration
    meta["truth64"].setdefault("not_saved", []).append(combo.key)
    warnings.append(f"{combo.describe()}: the float64 truth's per-element bounds ({size(truth)}) do not fit on "
                    f"the job's disk ({size(room)} free beyond a reserve, {size(core)} of it for the outputs): "
                    "that run is checked at the dtype's tolerance")
    return None


def _truth64(deviations: list[Any], sensitivities: list[Any], stats: list[Any],
             drifts: list[Any] | None = None) -> list[Truth64 | None]:
    """One :class:`Truth64` per output (``None`` where there is none) from the saved parts
    (``drifts``: ``None`` for runs saved before the drift was measured)."""
    drifts = drifts if drifts is not None else [None] * len(deviations)
    return [Truth64(d, s, float(st["ref_rms_error"]), float(st["sigma_rms"]), g)
            if d is not None and s is not None and st else None
            for d, s, st, g in zip(deviations, sensitivities, stats, drifts)]


def _hints(loaded: LoadedModule, truth64: dict[str, Any] | None, launched: set[str] | None = None) -> Hints:
    """Lower-precision arithmetic in ``loaded``'s source for a problem of the float64 truth's
    dtype: in the kernels the first call ``launched`` and the ``@triton.jit`` helpers they call
    (every kernel when ``launched`` is not known; a kernel defined but never launched computes
    nothing); scanned with the aten ops the truth called (``truth_scanned``: a truth of rational
    arithmetic leaves approximate math nothing to approximate)."""
    kernels = set(_jit_sources(loaded))
    if launched:
        kernels = jit_reached(loaded.tree, launched & kernels, kernels) or kernels
    truth64 = truth64 or {}
    return Hints(precision_hints(loaded.tree, kernels, truth64.get("dtype")), truth_scanned(truth64.get("ops")),
                 truth_unlikely(truth64.get("ops")))


def _tol_of(ctx: WorkerContext):
    def tol(combo: Combo) -> Tolerance:
        return resolve_tolerance(ctx.options, combo.variant)

    return tol


def _performance_not_measured(ctx: WorkerContext) -> None:
    if ctx.ops.interpreter:
        def body(step: Step) -> None:
            step.status = StepStatus.NOT_MEASURED
            step.summary = "not measured: interpreter (cpu runs kernels in Triton's interpreter)"

        ctx.run_step("performance", body)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# ---------------------------------------------------------------------------------------------
# baseline
# ---------------------------------------------------------------------------------------------

def run_baseline(ctx: WorkerContext) -> None:
    """The baseline role (see the module docstring)."""
    full_float32()
    policy = policy_of(ctx.options)
    combos = combos_of(ctx.job)
    out_dir = _expected_dir(ctx)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = ExpectedStore(out_dir)
    eager = bool(ctx.job.get("baseline_is_reference"))
    ctx.enable_poison()
    holder: dict[str, Any] = {}
    _compile_step(ctx, combos, holder)
    if ctx.failed:
        if not ctx.verdict.reason.startswith("the baseline"):
            ctx.verdict.reason = f"the baseline failed: {ctx.verdict.reason}"
        ctx.skip_missing()
        return
    harness: Harness = holder["harness"]
    holder.pop("first_outputs", None)
    meta: dict[str, Any] = {"runs": {}, "heavy_ops": [], "launches_per_call": 0, "eager": eager,
                            "truth": "reference" if (eager or ctx.job.get("reference")) else "baseline"}

    def structure(step: Step) -> None:
        findings = [Finding(f.rule, f.message, "warning", f.line) for f in static_findings(harness.loaded.tree)]
        rt, evidence = _structure_runtime(ctx, harness, combos, None, None, _tol_of(ctx), eager_ok=eager)
        meta["heavy_ops"] = evidence.get("heavy_ops", [])
        meta["launches_per_call"] = evidence.get("launches_per_call", 0)
        step.evidence = evidence
        no_launch = [f for f in rt if f.rule == "no_triton_launch"]
        for f in rt:
            f.severity = "warning" if f.rule != "no_triton_launch" else "error"
        findings += rt + [Finding(f.rule, f.message, "warning", f.line)
                          for f in lint_findings(ctx.options.get("lints"))]
        findings += [Finding(f.rule, f.message, "warning", f.line) for f in ctx.timer_guard.check()]
        ctx.verdict.findings += findings
        # integrity rules the baseline itself breaks are not held against candidates
        meta["baseline_rules"] = sorted({f.rule for f in findings if f.rule != "no_triton_launch"
                                         and not f.rule.startswith("kb:")})
        if no_launch:
            fallback = ("it falls back to torch ops when no XPU is present"
                        if re.search(r"xpu", harness.loaded.source) else "it computes with torch ops")
            ctx.fail(step, Failure(VerdictKind.ENVIRONMENT,
                                   f"the baseline launched no Triton kernel on {ctx.ops.kind}: the Triton path "
                                   f"never ran ({fallback}), so there is no Triton baseline to compare with"))
            return
        if eager:
            step.summary = ("the baseline is the PyTorch reference (eager); heavy torch ops: "
                            + (", ".join(meta["heavy_ops"]) or "none"))
        else:
            step.summary = (f"{meta['launches_per_call']} launch(es) per call"
                            + (f"; heavy torch ops in forward: {', '.join(meta['heavy_ops'])}"
                               if meta["heavy_ops"] else ""))

    ctx.run_step("structure", structure)

    def correctness(step: Step) -> None:
        reference = None
        ref_source = None if eager else ctx.job.get("reference")
        if ref_source:
            try:
                reference = Harness(ctx, _load(ctx, ref_source, "reference"), init_fallback=harness.loaded)
                reference.input_source = harness.input_source  # the same inputs as the baseline
            except WorkerError as err:
                raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                          f"the reference did not load: {err.failure.reason}",
                                          err.failure.line, err.failure.error_text)) from err
        ref_failures: list[str] = []
        precision_notes: list[str] = []
        needed: set[str] = set()  # the downgrades the baseline needs against the reference (--allow baseline)
        truth_hashes: dict[str, list[tuple[str, tuple, str]]] = {}
        domain = TruthDomain(anchor_distribution(ctx.job), meta["truth"])
        f64 = _float64_truth(ctx, meta, reference or (harness if eager else None))
        checked_memory: set[str] = set()
        effects = Effects()
        floating: dict[str, list[int]] = {}  # per variant, where its floating-point inputs are
        variant_of = {c.vname: c.variant for c in combos}
        added: set[tuple[str, str]] = set()

        def partial_redraws() -> list[Combo]:  # those not yet run or queued
            new = [(v, d) for v, d in domain.partial_redraws(floating, combos[0].seed) if (v, d) not in added]
            added.update(new)
            return [Combo(variant_of[v], combos[0].seed, d) for v, d in new]

        for combo in _growing(combos, partial_redraws):
            model = harness.model_for(combo, fresh=bool(effects.buffers))
            if (combo.vname, combo.seed) not in meta.get("_saved", set()):
                torch.save(harness.states[(combo.vname, combo.seed)],
                           out_dir / f"state__{_safe(combo.vname)}__s{combo.seed}.pt")
                meta.setdefault("_saved", set()).add((combo.vname, combo.seed))
            args = harness.inputs_for(combo)
            if combo.distribution == domain.anchor:
                floating.setdefault(combo.vname, [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                                                  and (a.is_floating_point() or a.is_complex()) and a.numel()])
            first = combo is combos[0]
            own_truth = reference is None  # the baseline is the truth (eager, or a Triton baseline alone)
            before = effect_digests(args) if first else None  # each tensor's fingerprint, taken once
            fingerprint = input_fingerprint(args, before)
            if first and own_truth:
                seen = (before, buffer_digests(model))
            try:
                with tie_order.watch(own_truth and base_distribution(combo.distribution) in TIED) as undefined_order:
                    outputs = harness.run(model, args, during=f"running {combo.describe()}")
            except WorkerError as err:
                if not _refused_redraw(err, combo, domain):
                    raise
                domain.record_refusal(combo.vname, combo.distribution, combo.seed, fingerprint, err.failure.reason)
                continue
            if own_truth:
                effects = _truth_effects(meta, effects, seen, args, model, harness, combo) if first else effects
                truth_effects = effect_tensors(effects, model, args) if effects else []
            elif first:  # which inputs the baseline modifies, to hold against the reference's
                base_inputs = set(changed_inputs(before, args))
            del args
            record: dict[str, Any] = {"variant": combo.vname, "seed": combo.seed,
                                      "distribution": combo.distribution, "ref_agrees": True if eager else None,
                                      "inputs": fingerprint}
            ref_out = None
            calibration: list[Truth64 | None] | None = None
            if eager:
                calibration = _calibrate(f64, meta, model, combo, outputs)
            if reference is not None:
                try:
                    rmodel = reference.model_for(combo, baseline_state=harness.states[(combo.vname, combo.seed)],
                                                 fresh=bool(effects.buffers))
                    rargs = reference.inputs_for(combo)
                    if first:
                        seen = (effect_digests(rargs), buffer_digests(rmodel))
                    with tie_order.watch(base_distribution(combo.distribution) in TIED) as undefined_order:
                        ref_out = reference.run(rmodel, rargs, during="running the reference")
                    effects = (_truth_effects(meta, effects, seen, rargs, rmodel, reference, combo,
                                              harness.states[(combo.vname, combo.seed)]) if first else effects)
                    if first and base_inputs != set(effects.inputs):
                        ref_failures.append(
                            f"{combo.describe()}: the reference modifies input(s) "
                            f"{sorted(effects.inputs) or 'none'} in place, the baseline "
                            f"{sorted(base_inputs) or 'none'}")
                    truth_effects = effect_tensors(effects, rmodel, rargs) if effects else []
                    del rargs
                except WorkerError as err:
                    if _refused_redraw(err, combo, domain):
                        domain.record_refusal(combo.vname, combo.distribution, combo.seed, fingerprint,
                                              err.failure.reason)
                        continue
                    raise WorkerError(Failure(
                        VerdictKind.RUNTIME_ERROR, f"the reference failed on {combo.describe()}: "
                        f"{err.failure.reason}", err.failure.line, err.failure.error_text)) from err
                calibration = _calibrate(f64, meta, rmodel, combo, ref_out)
                base_hints = _hints(harness.loaded, meta["truth64"], holder.get("launched"))
                bpolicy = policy.restricted(base_hints, base_hints.scanned)
                tol = resolve_tolerance(ctx.options, combo.variant)
                ok, comps, warns, note = compare_outputs(outputs, ref_out, tol, allow_dtype_change=True,
                                                         poisoned=False, calibration=calibration,
                                                         allowed=bpolicy.allowed, hints=tuple(base_hints))
                if not ok and nonfinite_summary(ref_out):  # only where the reference is NaN/Inf: no fault
                    ok = excused_by_nonfinite_truth(outputs, ref_out, tol, ctx.ops.torch_device,
                                                    allow_dtype_change=True, poisoned=False, calibration=calibration,
                                                    allowed=bpolicy.allowed, hints=tuple(base_hints))
                first = next((o for o in ref_out if isinstance(o, torch.Tensor)), None)
                r, a = tol.for_dtype(first.dtype)[:2] if first is not None else (0.0, 0.0)
                check, kb = run_check(comps)
                run = CorrectnessRun(
                    variant=combo.vname, seed=combo.seed, distribution=combo.distribution,
                    against="reference", passed=ok, rtol=r, atol=a, outputs=comps, check=check, kernelbench=kb,
                    note="baseline vs reference" + (f": {summarize_failure(comps, note)}" if not ok else ""))
                ctx.verdict.correctness.append(run)
                lower = not ok and all(c.passed or explained(c, base_hints) for c in comps) and not note
                if lower:  # a baseline of lower precision than the problem's still computes the same thing
                    precision_notes.append(f"{combo.describe()}: {summarize_failure(comps, note)}"
                                           + ("" if policy.follows_baseline else advice(run, base_hints, bpolicy)))
                    needed.update(found[0] for c in comps if not c.passed
                                  and (found := explained(c, base_hints)) is not None)
                record["ref_agrees"] = ok or lower
                if not ok and not lower:
                    ref_failures.append(f"{combo.describe()}: {summarize_failure(comps, note)}")
            # a Triton baseline that is the truth: nothing else would catch it reading memory nothing
            # wrote (a PyTorch truth cannot; a baseline beside a reference is compared with it)
            if reference is None and not eager and combo.vname not in checked_memory \
                    and not meta.get("unwritten_truth"):
                checked_memory.add(combo.vname)
                unwritten = _unwritten_truth(ctx, harness, combo, outputs, meta["truth"])
                if unwritten:
                    meta["unwritten_truth"] = {"variant": combo.vname, "note": unwritten}
            if combo is combos[0] and not meta.get("unwritten_truth"):
                random_note = _random_truth(ctx, reference or harness, rmodel if reference is not None else model,
                                            combo, ref_out if reference is not None else outputs)
                if random_note:
                    meta["random_truth"] = {"variant": combo.vname, "note": random_note}
            if not effects.buffers and "history_dependent" not in meta:
                history = _truth_history(reference or harness, combo, combos,
                                         rmodel if reference is not None else model,
                                         ref_out if reference is not None else outputs,
                                         harness.states if reference is not None else None)
                if history:
                    meta["history_dependent"] = history
            truth_out = ref_out if reference is not None else outputs
            order = () if undefined_order is None else undefined_order.settle(
                truth_out, truth_effects, list((rmodel if reference is not None else model).buffers()))
            nonfinite = nonfinite_summary(truth_out)
            del truth_out
            calibration = _fit_on_disk(out_dir, combo, outputs, ref_out, calibration, meta, ctx.verdict.warnings)
            hashes = store.save(combo.key, outputs, ref_out,
                                deviation=[c and c.deviation for c in calibration] if calibration else None,
                                sensitivity=[c and c.sensitivity for c in calibration] if calibration else None,
                                drift=[c and c.drift for c in calibration] if calibration else None)
            del outputs, ref_out, calibration
            if truth_effects:
                store.save(effects_key(combo), truth_effects, None)
            del truth_effects
            meta["runs"][combo.key] = record
            truth = hashes.get("reference") or hashes["outputs"]
            truth_hashes.setdefault(combo.vname, []).append((fingerprint, tuple(truth), combo.distribution))
            domain.record(combo.vname, combo.distribution, combo.seed, fingerprint, tuple(truth), nonfinite,
                          undefined_order=order)
        meta["partial_redraws"] = {}
        for c in combos:
            if PARTIAL in c.distribution:
                meta["partial_redraws"].setdefault(c.vname, []).append(c.distribution)
        # the integrity run: the first model with other inputs of the same shape
        extra = integrity_combo(combos)
        extra_out = harness.run(harness.model_for(extra), harness.integrity_inputs(extra, combos[0]),
                                during=f"running {extra.describe()}")
        _fit_on_disk(out_dir, extra, extra_out, None, None, meta, ctx.verdict.warnings)
        store.save(extra.key, extra_out, None)
        del extra_out
        meta["integrity_run"] = extra.key
        skipped, nonfinite = domain.decide()
        meta["skipped_inputs"], meta["nonfinite_truth"] = skipped, nonfinite
        ctx.verdict.warnings += _domain_warnings(skipped, nonfinite, domain.anchor, meta["truth"])
        constant, fixed, one_set = [], [], []
        for vname, runs in truth_hashes.items():
            # a redraw left out because the truth did not change with it still shows that it ignores
            # its inputs: with one seed it is the only evidence there is
            seen = [(fp, h) for fp, h, d in runs
                    if d not in skipped.get(vname, {}) or d in domain.unchanged.get(vname, set())]
            if len(seen) < 2:  # one seed and no redraw: nothing to compare the truth across
                fixed.append(vname)
                one_set.append(vname)
                continue
            inputs_varied = len({fp for fp, _ in seen}) > 1
            outputs_same = len({h for _, h in seen}) == 1 and all(x is not None for x in seen[0][1])
            if not inputs_varied:
                fixed.append(vname)
            elif outputs_same:
                constant.append(vname)
        meta["constant_outputs"] = constant
        meta["fixed_inputs"] = fixed
        meta["weights"] = {k: "baseline init" for k in harness.states}
        meta["baseline_disagrees"] = len(ref_failures)
        # what --allow baseline resolves to: measured only against a float64 truth of a reference, and
        # nothing where some run is wrong beyond any precision change (as for a candidate's outputs, a
        # fault on one run means the small errors of another are not trusted to be a precision change)
        measured = (reference is not None or eager) and not (meta.get("truth64") or {}).get("fallback")
        meta["baseline_downgrades"] = ([] if ref_failures else [n for n in DOWNGRADES if n in needed]) \
            if measured else None
        meta["baseline_state"] = ("inconsistent" if ref_failures else "measured") if measured else "unmeasured"
        if precision_notes:
            needs = ", ".join(meta["baseline_downgrades"] or []) or "its precision"
            held = (f"--allow {BASELINE} holds candidates to it ({needs})" if policy.follows_baseline else
                    f"candidates are held to the precision the problem allows, not to the baseline's (--allow "
                    f"{BASELINE} holds them to the baseline's: {needs})")
            ctx.verdict.warnings.append(f"the baseline computes at a lower precision than the problem's on "
                                        f"{len(precision_notes)} run(s), e.g. {precision_notes[0]}; {held}")
        if ref_failures:
            ctx.verdict.warnings.append(f"the baseline disagrees with the reference on {len(ref_failures)} run(s), "
                                        f"e.g. {ref_failures[0]}: the reference is the truth, so the problem is "
                                        "inconsistent")
        what = "reference" if meta["truth"] == "reference" else "baseline"
        if meta.get("unwritten_truth"):
            step.status = StepStatus.INCONCLUSIVE
            step.summary = unwritten_truth_summary(what, meta["unwritten_truth"])
            ctx.verdict.warnings.append(step.summary)
        elif meta.get("random_truth"):
            step.status = StepStatus.INCONCLUSIVE
            step.summary = _random_truth_summary(what, meta["random_truth"])
            ctx.verdict.warnings.append(step.summary)
        elif constant:
            step.status = StepStatus.INCONCLUSIVE
            step.summary = (f"the {what}'s output does not depend on its inputs (identical across seeds and "
                            f"distributions while the inputs differed, on variant(s) {', '.join(constant)}): "
                            "correctness is inconclusive")
            ctx.verdict.warnings.append(step.summary)
        else:
            step.summary = f"{len(combos)} run(s) saved" + (
                f"; checked against the reference ({len(ref_failures)} disagreement(s))" if reference is not None
                else "") + _skipped_phrase(skipped)
            if fixed:
                step.summary += _fixed_inputs_phrase(fixed, one_set)
        step.evidence = {"expected_dir": str(out_dir), "runs": len(combos)}
        if skipped:
            step.evidence["skipped_inputs"] = skipped

    ctx.run_step("correctness", correctness)
    meta.pop("_saved", None)
    meta["weights"] = {f"{k[0]}/s{k[1]}": v for k, v in meta.get("weights", {}).items()}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    ctx.kernels_to_verdict()
    if ctx.failed and not ctx.verdict.reason.startswith("the baseline"):
        ctx.verdict.reason = f"the baseline failed: {ctx.verdict.reason}"
    _performance_not_measured(ctx)
    ctx.skip_missing(("compile", "structure", "correctness"))


# ---------------------------------------------------------------------------------------------
# candidate
# ---------------------------------------------------------------------------------------------

def _load_expected(ctx: WorkerContext, combos: list[Combo]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    out_dir = _expected_dir(ctx)
    meta_path = out_dir / "meta.json"
    if not meta_path.is_file():
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                  f"the baseline's expected outputs are missing ({meta_path} not found)"))
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    store = ExpectedStore(out_dir)
    expected: dict[str, dict[str, Any]] = {}
    extra = meta.get("integrity_run")
    if extra and store.has(extra):
        expected[extra] = store.load(extra)
    skipped = meta.get("skipped_inputs") or {}
    for combo in with_partial_redraws(combos, meta):
        if combo.distribution in skipped.get(combo.vname, {}):
            continue  # a redraw left out (one the problem refused has no outputs)
        if not store.has(combo.key):
            raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                      f"the baseline saved no outputs for {combo.describe()} ({combo.key}.json)"))
        expected[combo.key] = store.load(combo.key)
        if meta.get("effects") and store.has(effects_key(combo)):
            expected[effects_key(combo)] = store.load(effects_key(combo))
    return expected, meta


def run_candidate(ctx: WorkerContext) -> None:
    """The candidate role (see the module docstring)."""
    guard = HarnessGuard()  # before the candidate's code runs
    full_float32()
    combos = combos_of(ctx.job)
    ctx.enable_poison()
    out_dir = _expected_dir(ctx)
    state_cache: dict[tuple[str, int], dict[str, torch.Tensor] | None] = {}

    def baseline_state_of(combo: Combo) -> dict[str, torch.Tensor] | None:
        key = (combo.vname, combo.seed)
        if key not in state_cache:
            path = out_dir / f"state__{_safe(combo.vname)}__s{combo.seed}.pt"
            state_cache[key] = torch.load(path, weights_only=False) if path.is_file() else None
        return state_cache[key]

    holder: dict[str, Any] = {}
    loaded_expected: dict[str, Any] = {}

    def load_expected(step: Step) -> None:
        loaded_expected["expected"], loaded_expected["meta"] = _load_expected(ctx, combos)

    step = ctx.run_step("expected", load_expected)
    ctx.verdict.steps.remove(step)
    if ctx.failed:
        step.name = "compile"  # nothing can be judged without the baseline's outputs
        ctx.verdict.steps.append(step)
        ctx.skip_missing()
        return
    expected, meta = loaded_expected["expected"], loaded_expected["meta"]
    skipped = meta.get("skipped_inputs") or {}
    combos = [c for c in with_partial_redraws(combos, meta)
              if c.distribution not in skipped.get(c.vname, {})]  # the anchor is never skipped
    eager = bool(meta.get("eager"))
    _compile_step(ctx, combos, holder, baseline_state_of, frozenset(Effects.from_json(meta.get("effects")).inputs))
    if ctx.failed:
        ctx.skip_missing()
        return
    harness: Harness = holder["harness"]
    tol_of = _tol_of(ctx)
    # the integrity checks compare whole tensors: they run at the first (small) combination
    small_expected = {k: {"outputs": materialize(v["outputs"] or [], ctx.ops.torch_device)}
                      for k, v in expected.items() if k in (combos[0].key, integrity_combo(combos).key)
                      or k == meta.get("integrity_run") or k in {c.key for c in knockout_combos(combos)}}

    def structure(step: Step) -> None:
        findings = static_findings(harness.loaded.tree)
        rt, evidence = _structure_runtime(ctx, harness, combos, small_expected, baseline_state_of, tol_of,
                                          truth_mutates=frozenset(Effects.from_json(meta.get("effects")).inputs))
        findings += rt
        base_heavy = set(meta.get("heavy_ops") or [])
        cand_heavy = set(evidence.get("heavy_ops", []))
        if eager:
            kept = sorted(cand_heavy)
            if kept:
                findings.append(Finding("torch_partial", f"forward() still runs torch {', '.join(kept)}: that part "
                                        "of the problem is done by PyTorch, not by a Triton kernel", "warning"))
        else:
            extra = sorted(cand_heavy - base_heavy)
            if extra:
                findings.append(Finding("torch_fallback", f"forward() runs torch {', '.join(extra)}, which the "
                                        "baseline does not: the hot op fell back to torch instead of a Triton kernel"))
        findings += ctx.timer_guard.check() + guard.check()
        findings += lint_findings(ctx.options.get("lints"))
        evidence["baseline_heavy_ops"] = sorted(base_heavy)
        step.evidence = evidence
        shared = set(meta.get("baseline_rules") or [])
        for f in findings:
            # an input changed in place is judged per input against the truth's own effects
            # (truth_mutates), not excused because the baseline changes some other input
            if f.severity == "error" and f.rule in shared and f.rule != "mutates_input":
                f.severity = "warning"
                f.message += " (the baseline does the same, so it is not held against the candidate)"
        # a module that forged the verifier's own functions or clocks forged what the other checks
        # saw too: that is the reason
        errors = sorted((f for f in findings if f.severity == "error"),
                        key=lambda f: f.rule not in ("tampers_with_harness", "patches_timer"))
        ctx.verdict.findings += findings
        if errors and any(f.rule == "mutates_input" for f in errors) and \
                all(f.rule in ("mutates_input", "output_aliases_input") for f in errors):
            # a side effect the truth does not have (an in-place kernel, which may return the
            # tensor it wrote): a wrong result, judged after the outputs are compared, so the
            # reason says whether the values themselves are right
            holder["side_effects"] = errors
            step.summary = (f"{evidence.get('launches_per_call', 0)} Triton launch(es) per call; "
                            + "; ".join(f.message for f in errors))
            return
        if errors:
            first = errors[0]
            where = f" (line {first.line})" if first.line else ""
            kind = VerdictKind.CHEATING if not first.rule.startswith("kb:") else VerdictKind.COMPILE_ERROR
            what = "integrity rule" if kind is VerdictKind.CHEATING else "knowledge-base rule"
            ctx.fail(step, Failure(kind, f"{what} {first.rule} broken{where}: {first.message}", first.line))
            return
        step.summary = (f"{evidence.get('launches_per_call', 0)} Triton launch(es) per call; inputs untouched, "
                        "no aliasing, no caching across calls")

    ctx.run_step("structure", structure)
    small_expected.clear()

    def correctness(step: Step) -> None:
        hints = _hints(harness.loaded, meta.get("truth64"), holder.get("launched"))
        policy = policy_of(ctx.options).with_baseline(
            meta.get("baseline_downgrades"), meta.get("baseline_state") or "measured").restricted(hints, hints.scanned)
        for name in policy.inapplicable:
            what = (f"the kernels have no {DOWNGRADES[name].what.split(' (')[0]}" if name in SCANNED_DOWNGRADES else
                    "the reference computes no function a kernel would approximate (no exponential, logarithm, "
                    "tanh, erf, power, root or trigonometric function: "
                    f"{', '.join((meta.get('truth64') or {}).get('ops', [])[:12])})")
            ctx.verdict.warnings.append(
                f"{policy.source_of(name)} does not apply: {what} "
                "(an allowance vouches only for what it names, so it does not widen the bound here)")
        excused: list[CorrectnessRun] = []
        first = _first_call_run(ctx, holder.pop("first_outputs", None), combos[0], expected, meta, policy, hints,
                                excused)
        launches: dict[str, list[dict[str, Any]]] = {}
        first_call = FirstCall()
        runs, grids = _candidate_runs(ctx, harness, combos, expected, meta, baseline_state_of, policy, hints,
                                      excused, launches, first_call)
        _precision_to_verdict(ctx, runs + ([first] if first is not None else []), policy, hints, meta)
        failed = [r for r in runs if not r.passed and r not in excused]
        truth_fault = meta.get("random_truth") or meta.get("unwritten_truth")
        if first is not None and not first.passed and first not in excused and not failed \
                and not truth_fault:
            step.evidence = {"runs": len(runs) + 1, "failed": 1, "truth": meta.get("truth", "baseline")}
            ctx.fail(step, Failure(VerdictKind.WRONG_ANSWER, (
                f"wrong answer on the first call ({combos[0].describe()}) vs {first.against}: {first.note}"
                f"{advice(first, hints, policy, runs + [first])}; every later call matched. A first call that differs from later ones is a fault users meet: e.g. an "
                "autotuner that benchmarks every config on the first call, each adding into the same output")))
            return
        step.evidence = {"runs": len(runs), "failed": len(failed), "weights": harness.weight_notes,
                         "autotune_configs": [d for _, _, d in ctx.registry.variants()], "grids": grids,
                         "launches": launches, "truth": meta.get("truth", "baseline")}
        if harness.call_description:
            step.evidence["call"] = harness.call_description
        disagreeing = int(meta.get("baseline_disagrees") or 0)
        if disagreeing and meta.get("truth") == "reference":
            ctx.verdict.findings.append(Finding(
                INCONSISTENT_PROBLEM, f"the problem's baseline disagrees with its reference on {disagreeing} run(s): "
                "the baseline is wrong, so no speedup over it means anything", "warning"))
        if failed and not truth_fault:
            # the reason names a failure no precision change explains where a run has one: a TF32
            # error on one size must not stand for a fault another size shows
            r = next((x for x in failed if beyond_every_allowance(x, hints) and not _range_hinted(x, hints)),
                     None) or next((x for x in failed if has_unexplained(x, hints) and not _range_hinted(x, hints)),
                                   failed[0])
            # an overflow on shifted inputs that the source's float16 downgrade explains leaves the
            # advice to allow it standing
            explicable = [x for x in runs if not _range_hinted(x, hints)]
            cfg = f" with autotune config {r.config}" if r.config else ""
            reason = (f"wrong answer on variant {r.variant} (seed {r.seed}, {inputs_phrase(r.distribution)}){cfg} "
                      f"vs {r.against}: {r.note}{advice(r, hints, policy, explicable)}")
            if disagreeing and r.against == "reference":
                reason += (f"; the baseline disagrees with the reference too ({disagreeing} run(s)): the problem "
                           "is inconsistent")
            if base_distribution(r.distribution) in STRESS:
                reason += f"; {STRESS_NOTES[base_distribution(r.distribution)]}"
            if _only_redraws_fail(failed, runs, anchor_distribution(ctx.job)) and \
                    any(base_distribution(r.distribution) not in STRESS for r in failed):  # stress redraws judge a contract or
                # numerical stability, not a domain the problem's inputs may leave
                reason += ("; on the problem's own inputs (get_inputs()) it matches at every variant and seed: it "
                           "holds only on the domain those inputs are drawn from, and the redraws stress it outside "
                           "(--own-inputs-only judges a kernel that may assume that domain on them alone)")
            if harness.redrawn:
                reason += (f"; the parameters its constructor fills with one value were redrawn, as training "
                           f"changes them: {redrawn_note(harness.redrawn)}")
            differs = sorted(k for k, n in harness.weight_notes.items() if INIT_DIFFERS in n)
            if differs:
                names = re.search(rf"{INIT_DIFFERS} \(([^)]*)\)", harness.weight_notes[differs[0]])
                reason += (f"; its own initial values of {names.group(1) if names else 'its parameters'} are not the "
                           "baseline's, and it ran with the baseline's "
                           "copied in, as trained weights would be loaded: a module that changes its weights at "
                           "construction (a constant folded into them) or keeps copies made there is wrong for "
                           "any other weights (KernelBench's evaluation, comparing the two as constructed, may pass it)")
            ctx.fail(step, Failure(VerdictKind.WRONG_ANSWER, reason))
            return
        refilled = None if truth_fault else _second_fill_run(ctx, harness, combos[0], expected, meta, baseline_state_of,
                                                             policy, hints, first_call)
        if refilled is not None and not refilled.passed:
            ctx.verdict.correctness.append(refilled)
            ctx.fail(step, Failure(VerdictKind.WRONG_ANSWER, (
                f"wrong answer on variant {refilled.variant} (seed {refilled.seed}) vs {refilled.against} with "
                f"{SECOND_FILL}: {refilled.note}; with the poison ({FIRST_FILL}) every call matched, so those "
                "elements were never written, or were computed from memory nothing wrote, and the poison happened "
                "to be the value needed there (the expected value itself, or what a minimum, a maximum or a "
                "comparison passes over)")))
            return
        if refilled is not None:
            step.evidence["second_fill"] = refilled.note
        differs = sorted(k for k, note in harness.weight_notes.items() if INIT_DIFFERS in note)
        if differs:
            ctx.verdict.findings.append(Finding(
                "init_differs", f"{harness.loaded.class_name}() built under the same seed as the baseline has other "
                f"initial parameter values ({harness.weight_notes[differs[0]].split('; ', 1)[-1]}); it was "
                "verified with the baseline's values copied in, so the kernels are right for the same weights. "
                "An evaluation that compares the two modules as constructed (KernelBench's eval_kernel_against_ref) "
                "fails it: initialise the parameters as the baseline does", "warning"))
        probe = ctx.job.get("grid_probe")
        if probe:
            step.evidence["probe"] = _grid_probe(ctx, harness, probe, baseline_state_of)
        constant = meta.get("constant_outputs") or []
        truth = meta.get("truth", "baseline")
        if truth_fault:
            _inconclusive(ctx, step, "inconclusive: " + (
                unwritten_truth_summary(truth, meta["unwritten_truth"]) if meta.get("unwritten_truth")
                else _random_truth_summary(truth, meta["random_truth"])))
            return
        if constant:
            _inconclusive(ctx, step, f"inconclusive: the {truth}'s output does not depend on its inputs (identical "
                          f"across seeds and redraws on variant(s) {', '.join(constant)} while the inputs differed), "
                          "so matching it proves nothing")
            return
        if excused:
            where = excused[0].note.split(": ", 1)[-1]
            _inconclusive(ctx, step, f"inconclusive: the candidate matches the {truth} wherever it is finite, and "
                          f"differs only where the {truth} itself is NaN or Inf, on variant {excused[0].variant} "
                          f"(seed {excused[0].seed}, {inputs_phrase(excused[0].distribution)}: {where}). That is the "
                          "problem's property, not the candidate's fault: no answer can be judged there", warn=False)
            return
        if runs and not any(getattr(c, "numel", 0) for r in runs for c in r.outputs):
            _inconclusive(ctx, step, f"inconclusive: every output of the {len(runs)} run(s) has no element (variant(s) "
                          f"{', '.join(dict.fromkeys(r.variant for r in runs))}), so nothing was compared: a "
                          "dimension of the checked sizes is 0; check a size with at least one element")
            return
        # configs of autotuned kernels some run launched: another kernel's configs (the GEMM kernel
        # beside the mat-vec one that ran) were forced on runs that never launched it
        ran = set(holder.get("launched") or ()) | {k for per in grids.values() for k in per}
        tuned = [e for e in ctx.registry.entries if not ran or e.name in ran]
        nconf = sum(len(e.configs) for e in tuned)
        idle = sorted({e.name for e in ctx.registry.entries} - {e.name for e in tuned})
        firsts = sum(1 for r in ctx.verdict.correctness if r.config == "first call" and r.passed)
        step.summary = (f"matches the {truth} on {len(runs)} run(s)"
                        + (f" including every one of {nconf} autotune config(s)" if nconf else "")
                        + (f" (autotuned {', '.join(idle)} never launched at the checked sizes, so its configs ran nothing)"
                           if idle else "")
                        + (", and on its first call" if firsts else "")
                        + _skipped_phrase(skipped))
        fixed = meta.get("fixed_inputs") or []
        if fixed:
            step.summary += f"; one fixed input set checked on {', '.join(fixed)}"
            if set(fixed) >= {c.vname for c in combos}:
                ctx.verdict.warnings.append(
                    f"whether the {truth}'s output depends on its inputs was not checked: each variant saw one "
                    f"input set, so a {truth} that ignored them would pass unseen")
        if disagreeing and truth == "reference":
            ctx.verdict.kind = VerdictKind.INCONSISTENT
            ctx.verdict.reason = (f"the candidate matches the reference, but the problem's baseline disagrees with "
                                  f"the reference on {disagreeing} run(s): the problem is inconsistent (its baseline "
                                  "is wrong), so a speedup over it means nothing")

    ctx.run_step("correctness", correctness)
    _side_effects_to_verdict(ctx, holder.pop("side_effects", None), meta.get("truth", "baseline"))
    tampered = guard.check() + ctx.timer_guard.check()
    if tampered:  # replaced during the correctness runs: nothing they reported can be trusted
        ctx.verdict.findings += tampered
        step = ctx.verdict.step("correctness")
        if step is not None and not ctx.failed:
            ctx.fail(step, Failure(VerdictKind.CHEATING, f"integrity rule {tampered[0].rule} broken: "
                                   f"{tampered[0].message}"))
        ctx.verdict.kind = VerdictKind.CHEATING
    ctx.verdict.findings += [f for f in launch_findings(ctx.recorder.launches, _jit_sources(harness.loaded))
                             if (f.rule, f.message) not in {(g.rule, g.message) for g in ctx.verdict.findings}]
    ctx.kernels_to_verdict()
    _performance_not_measured(ctx)
    ctx.skip_missing(("compile", "structure", "correctness"))
    if not ctx.failed and not ctx.verdict.reason:
        truth = meta.get("truth", "baseline")
        ctx.verdict.reason = f"compiles, passes the integrity checks and matches the {truth}"


def _grid_probe(ctx: WorkerContext, harness: Harness, variant: dict[str, Any], baseline_state_of: Any) -> dict[str, Any]:
    """Run the candidate once on ``variant`` (the first correctness variant at twice its sizes)
    and return the grids it launched; nothing is compared. A failure is reported, not judged:
    the baseline never ran at that size."""
    from xeforge_core.worker.bounds import unjudged

    combo = Combo(variant, 0, anchor_distribution(ctx.job))
    mark = ctx.recorder.mark()
    try:
        model = harness.model_for(combo, fresh=True)
        with unjudged():  # nor are its memory accesses: the baseline's may fault there as well
            harness.run(model, harness.inputs_for(combo), during=f"probing the launch grid at {combo.vname}")
    except WorkerError as err:
        return {"variant": combo.vname, "error": _first_line(err.failure.reason)}
    return {"variant": combo.vname, "grids": launch_grids(ctx.recorder.since(mark))}


def _calibration(exp: dict[str, Any], meta: dict[str, Any], key: str) -> list[Truth64 | None] | None:
    """The float64 truth saved with run ``key``, or ``None`` where the baseline job could not
    compute it for every run (then no run uses it: one rule per verdict)."""
    info = meta.get("truth64") or {}
    stats = (info.get("runs") or {}).get(key)
    if info.get("fallback") or exp.get("deviation") is None or exp.get("sensitivity") is None or not stats:
        return None
    return _truth64(exp["deviation"], exp["sensitivity"], stats, exp.get("drift"))


def _precision_to_verdict(ctx: WorkerContext, runs: list[CorrectnessRun], policy: PrecisionPolicy,
                          hints: dict[str, list[str]], meta: dict[str, Any]) -> None:
    """The verdict's precision record and findings, and a warning where the float64 truth was
    not used."""
    info = meta.get("truth64") or {}
    ctx.verdict.precision = precision_summary(runs, policy, info)
    ctx.verdict.findings += precision_findings(runs, hints, policy)
    if info.get("fallback"):
        ctx.verdict.warnings.append(f"precision: judged with the dtype tolerances, not against a float64 truth: "
                                    f"{info['fallback']}")


def _shared_instance_note(harness: Harness, combo: Combo, state: dict[str, torch.Tensor] | None, truth: Any,
                          tol: Any, allow_dtype: bool, allow_shape: bool, policy: PrecisionPolicy,
                          hints: dict[str, list[str]], calibration: Any) -> str:
    """Why a run on an instance first called at another variant (``Harness.instance_of``) is
    wrong: the same call on a fresh instance, compared with the same truth, tells whether the
    state kept from that first call is the cause."""
    first = harness.instance_of[combo.vname]
    try:
        fresh = harness.model_for(combo, baseline_state=state, fresh=True)
        out = harness.run(fresh, harness.inputs_for(combo), during=f"running {combo.describe()} on a fresh instance")
        ok, *_ = compare_outputs(out, truth, tol, allow_dtype_change=allow_dtype, allow_shape_change=allow_shape,
                                 poisoned=harness.ctx.poisoned, calibration=calibration, allowed=policy.allowed,
                                 hints=tuple(hints))
    except WorkerError:
        ok = False
    if ok:
        return (f"this call ran on the instance first called at variant {first}, and on a fresh instance it "
                "matches: the module keeps state from its first call (a size, a buffer or a launch grid captured "
                "then) that is stale at another size, as when a model is called at another batch size")
    return f"this call ran on the instance first called at variant {first}; a fresh instance is wrong here too"


def _candidate_runs(ctx: WorkerContext, harness: Harness, combos: list[Combo], expected: dict[str, dict[str, Any]],
                    meta: dict[str, Any], baseline_state_of: Any, policy: PrecisionPolicy,
                    hints: dict[str, list[str]], excused: list[CorrectnessRun],
                    launches: dict[str, list[dict[str, Any]]] | None = None,
                    first_call: FirstCall | None = None) -> tuple[list[CorrectnessRun], dict[str, Any]]:
    """Every (autotune selection x combination) against the truth (the float64-calibrated bound
    under ``policy`` where the float64 truth was saved; ``hints`` name the downgrades in the
    candidate's source). Returns the runs and the launch grids of the default-config runs per
    variant (``{variant: {kernel: [g0, g1, g2]}}``); runs that differ only where the truth is NaN
    or Inf are appended to ``excused`` too; fills ``launches`` with the launch facts of each
    variant's first default-config run, and ``first_call`` with what the first run allocated
    uninitialised (``worker.fresh_fill``)."""
    allow_dtype = bool(ctx.options.get("allow_dtype_change"))
    allow_shape = bool(ctx.options.get("allow_shape_change"))
    eager = bool(meta.get("eager"))
    runs: list[CorrectnessRun] = []
    grids: dict[str, dict[str, list[int]]] = {}
    selections: list[tuple[int, int, str] | None] = [None]
    for i, j, desc in ctx.registry.variants():
        if ctx.ops.interpreter and (j == 0 or ctx.registry.same_in_interpreter(i, j)):
            # on cpu the default run already uses each autotuner's first config, and a config
            # that differs from an earlier one only in warps, stages or launch options computes
            # the same there
            continue
        selections.append((i, j, desc))
    default_desc = ctx.registry.default_description()
    # In the interpreter every config costs a full run per combination: the other configs are
    # checked on each variant's first combination (all of them on a GPU).
    first_of_variant = [c for i, c in enumerate(combos) if i == 0 or combos[i - 1].vname != c.vname]
    effects = Effects.from_json(meta.get("effects"))
    for sel in selections:
        for combo in (combos if sel is None or not ctx.ops.interpreter else first_of_variant):
            model = harness.model_for(combo, baseline_state=baseline_state_of(combo), fresh=bool(effects.buffers),
                                      share=not meta.get("history_dependent"))
            if sel is None and combo.vname in harness.instance_of:  # named where a crash would leave it
                ctx.progress.emit("note", f"correctness: {combo.describe()} on the instance first called at "
                                          f"variant {harness.instance_of[combo.vname]}")
            args = harness.inputs_for(combo)
            if ctx.ops.kind != "cpu":
                ctx.ops.poison_allocator(64 << 20)
            mark = ctx.recorder.mark()
            if sel is None:
                watch = first_call.watch() if first_call is not None and combo is combos[0] else contextlib.nullcontext()
                try:
                    with watch:
                        out = harness.run(model, args, during=f"running {combo.describe()}")
                except WorkerError as err:
                    if not any(not r.passed for r in runs):
                        raise
                    # a size it cannot run at, after a wrong answer at an earlier variant: the wrong
                    # answer decides (the first variant is the one the problem poses or reduces)
                    ctx.verdict.warnings.append(f"then at {combo.describe()} it failed: "
                                                f"{err.failure.kind.value}: {err.failure.reason[:300]}")
                    return runs, grids
                config = default_desc if ctx.registry.entries and ctx.ops.interpreter else None
                for kernel, g in launch_grids(ctx.recorder.since(mark)).items():
                    have = grids.setdefault(combo.vname, {}).setdefault(kernel, [0, 0, 0])
                    grids[combo.vname][kernel] = [max(x, y) for x, y in zip(have, g)]
                if launches is not None and combo.vname not in launches:
                    launches[combo.vname] = launch_facts(ctx.recorder.since(mark),
                                                         kernel_sources(harness.loaded.jit_functions))
            else:
                try:
                    with ctx.registry.select(sel[0], sel[1]):
                        out = harness.run(model, args, during=f"running {combo.describe()} with config {sel[2]}")
                except WorkerError as err:
                    skipped = skipped_by_autotuner(err)
                    if skipped is None or len(ctx.registry.entries[sel[0]].configs) < 2:
                        raise
                    _warn_once(ctx, skipped_config_note(sel[2], skipped))
                    del args, model
                    break  # its other combinations compile the same config
                config = sel[2]
            after = effect_tensors(effects, model, args, _stored_shapes(expected, combo, effects)) if effects else []
            del args
            exp = expected[combo.key]
            truth_is_ref = exp.get("reference") is not None or eager
            truth = exp["reference"] if exp.get("reference") is not None else exp["outputs"]
            against = "reference" if truth_is_ref else "baseline"
            tol = resolve_tolerance(ctx.options, combo.variant)
            # against a separate reference the output dtype/shape contract is the baseline's
            relaxed = truth_is_ref and not eager
            how = {"allow_dtype_change": allow_dtype or relaxed, "allow_shape_change": allow_shape,
                   "poisoned": ctx.poisoned, "calibration": _calibration(exp, meta, combo.key),
                   "allowed": policy.allowed, "hints": tuple(hints)}
            ok, comps, warns, note = compare_outputs(out, truth, tol, **how)
            ranged = _range_passed(ctx, ok, out, truth, tol, combo, **how)
            ok = ok or bool(ranged)
            undefined = _excused(ctx, ok, out, truth, tol, combo, meta, **how)
            if ok and relaxed:
                contract = _contract_note(out, exp["outputs"], allow_dtype, allow_shape)
                if contract:
                    ok, note = False, contract
            if ok and after:
                effect_note = _effects_note(ctx, effects, after, expected.get(effects_key(combo)), tol, against)
                if effect_note:
                    ok, note = False, effect_note
            del after
            if not ok and sel is None and combo.vname in harness.instance_of:
                note = summarize_failure(comps, note) + "; " + _shared_instance_note(
                    harness, combo, baseline_state_of(combo), truth, tol, allow_dtype or relaxed, allow_shape,
                    policy, hints, _calibration(exp, meta, combo.key))
            for w in warns:
                _warn_once(ctx, w)
            r, a = _tols_shown(tol, truth)
            check, kb = run_check(comps)
            run = CorrectnessRun(variant=combo.vname, seed=combo.seed, distribution=combo.distribution,
                                 against=against, passed=ok, rtol=r, atol=a, config=config, outputs=comps,
                                 note=undefined or ranged or (summarize_failure(comps, note) if not ok else ""),
                                 check=check, kernelbench=kb)
            if undefined:
                excused.append(run)
            runs.append(run)
            ctx.verdict.correctness.append(run)
            del out
    return runs, grids


def _second_fill_run(ctx: WorkerContext, harness: Harness, combo: Combo, expected: dict[str, dict[str, Any]],
                     meta: dict[str, Any], baseline_state_of: Any, policy: PrecisionPolicy,
                     hints: dict[str, list[str]], first_call: FirstCall) -> CorrectnessRun | None:
    """The first combination called again with every uninitialised allocation holding the second
    fill (``worker.fresh_fill``), judged against the same truth, where ``first_call`` shows it
    can matter; ``None`` where it cannot. Its ``note`` says why it ran (passed) or what differs."""
    exp = expected[combo.key]
    truth = exp["reference"] if exp.get("reference") is not None else exp["outputs"]
    why = first_call.why_refill(truth or [])
    if why is None:
        return None
    ctx.progress.emit("note", f"correctness: {combo.describe()} again with {SECOND_FILL}: {why}")
    with FreshMemory(refill=True):  # buffers the constructor leaves uninitialised too
        model = harness.model_for(combo, baseline_state=baseline_state_of(combo), fresh=True,
                                  share=not meta.get("history_dependent"))
        args = harness.inputs_for(combo)
        out = harness.run(model, args, during=f"running {combo.describe()} with {SECOND_FILL}")
    run, undefined = _judge_call(ctx, out, combo, exp, meta, policy, hints, config=None, poisoned=False)
    if run.passed or undefined:  # excused where the truth is not finite, as every run is
        run.passed, run.note = True, f"called again because {why}"
    return run


def _stored_shapes(expected: dict[str, dict[str, Any]], combo: Combo,
                   effects: Effects) -> list[tuple[int, ...] | None]:
    """The shapes of the truth's saved buffers after ``combo`` (to match the candidate's by)."""
    saved = (expected.get(effects_key(combo)) or {}).get("outputs") or []
    tail = saved[len(effects.inputs):]
    return [tuple(t.shape) if t is not None else None for t in tail] or [None] * len(effects.buffers)


def _effects_note(ctx: WorkerContext, effects: Effects, after: list[Any], saved: dict[str, Any] | None,
                  tol: Tolerance, against: str) -> str:
    """Why the candidate's inputs or buffers after the call differ from the truth's (``""`` when
    they match). A buffer the candidate does not hold is reported once as a warning, not judged."""
    if saved is None:
        return ""
    truth = materialize(saved["outputs"] or [], ctx.ops.torch_device)
    for label, got, want in zip(effects.labels, after, truth):
        if got is None:
            _warn_once(ctx, f"the {against} updates {label.removesuffix(' after the call')} during forward(); the "
                       "candidate holds no buffer of that name or shape, so its state after the call was not compared")
            continue
        ok, comps, _, note = compare_outputs([got], [want], tol, poisoned=False)
        if not ok:
            what = summarize_failure(comps, note).removeprefix("output 0: ").removeprefix("output 0 ")
            return (f"{label} differs from the {against}'s ({what}): the {against} changes it during forward(), "
                    "and that change is part of its result")
    return ""


def _unwritten_truth(ctx: WorkerContext, truth: Harness, combo: Combo, outputs: list[Any], what: str) -> str | None:
    """Why the truth's ``outputs`` for ``combo`` depend on memory nothing wrote, or ``None``:
    the truth called again on a fresh model and fresh inputs (``worker.truth_memory``)."""
    def call_fresh() -> list[Any]:
        return truth.run(truth.model_for(combo, fresh=True), truth.inputs_for(combo),
                         during=f"calling the truth again on fresh memory on {combo.describe()}")

    return unwritten_truth(ctx.ops, call_fresh, outputs, what, combo.vname,
                           resolve_tolerance(ctx.options, combo.variant))


def _random_truth(ctx: WorkerContext, truth: Harness, model: torch.nn.Module, combo: Combo,
                  outputs: list[Any]) -> str | None:
    """Call the truth (the reference, or the baseline where it is the truth) a second time on
    the same inputs with torch's generator in another state; why it is random, or ``None`` where
    the two calls agree within the tolerance. A model with dropout in training mode draws a new
    mask every call, so no candidate can match it element by element (KernelBench's Dropout
    problems are built so); the harness seeds the generator before each call, which would hide
    that from a plain second call."""
    args = truth.inputs_for(combo)  # seeds torch's, numpy's and Python's generators, as for the first call ...
    seed_all(0x5EED ^ combo.seed)  # ... then moves them all, so only a forward() that draws from one changes
    again = truth.run(model, args, during=f"calling the truth again on {combo.describe()}")
    tol = resolve_tolerance(ctx.options, combo.variant)
    ok, comps, _, note = compare_outputs(again, outputs, tol, allow_dtype_change=False, poisoned=False)
    if ok:
        return None
    layers = sorted({type(m).__name__ for m in model.modules()
                     if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.training and m.p > 0})
    cause = (f"{', '.join(layers)} in training mode draws a new mask every call" if layers
             else "something in it is random or depends on state kept between calls")
    return f"two calls on the same inputs of {combo.describe()} differ ({summarize_failure(comps, note)}): {cause}"


def _random_truth_summary(truth: str, info: dict[str, Any]) -> str:
    return (f"the {truth}'s output is random: {info['note']}. No candidate can be checked against it element "
            "by element; make the problem deterministic: a model in eval mode (call .eval() in the problem) or "
            "dropout p = 0 where the randomness is dropout, the random tensor passed in as an input (from "
            "get_inputs()) where forward draws one (torch.rand, torch.randn, torch.randint, torch.bernoulli, np.random)")


def _and(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _fixed_inputs_phrase(fixed: list[str], one_set: list[str]) -> str:
    """``; one fixed input set checked on module-whole (...)``: why each variant in ``fixed`` saw
    a single input set: it ran one seed and no redraw at that size (``one_set``), or its
    get_inputs() gave the same inputs at every seed."""
    same = [v for v in fixed if v not in one_set]
    why = [f"{', '.join(v for v in fixed if v in one_set)}: one seed and no redraw at that size"] if one_set else []
    why += [f"{', '.join(same)}: get_inputs() gives the same inputs whatever the seed"] if same else []
    return f"; one fixed input set checked on {', '.join(fixed)} ({'; '.join(why)})"


def _skipped_phrase(skipped: dict[str, dict[str, str]]) -> str:
    """``; normal, uniform inputs skipped on module-small (the reference is not finite on ...)``,
    or "" when every distribution was kept."""
    if not skipped:
        return ""
    dists = sorted({inputs_label(d) for per in skipped.values() for d in per})
    variants = sorted(skipped)
    first = next(iter(next(iter(skipped.values())).values()))
    return f"; {', '.join(dists)} inputs skipped on {', '.join(variants)} ({first})"


def _truth_history(truth: Harness, combo: Combo, combos: list[Combo], model: torch.nn.Module, out: list[Any],
                   states: dict[tuple[str, int], dict[str, torch.Tensor]] | None) -> str:
    """Whether the truth's output on ``combo`` depends on what its instance was called with
    before: run it again on the instance of the first variant built alike (already called at
    that variant) and compare. A module that keeps state from its first call (a data-dependent
    initialisation, a running count) makes the candidate's shared instances
    (``Harness.model_for(share=True)``) unfair: the candidate job then gives each variant its
    own. Returns why ("" when it does not, or when no earlier variant is built alike); checked
    once per variant, on its first combination at the first seed and distribution."""
    head = combos[0]
    if combo.vname == head.vname or combo.seed != head.seed or combo.distribution != head.distribution:
        return ""

    def state_of(c: Combo) -> dict[str, torch.Tensor] | None:
        return states.get((c.vname, c.seed)) if states is not None else None

    key = truth.share_key(combo, state_of(combo))
    # the variant whose instance the candidate's would be shared with: the first built alike
    earlier = next((c for c in combos[:combos.index(combo)] if c.seed == combo.seed and c.vname != combo.vname
                    and (c.vname, c.seed) in truth.models and truth.share_key(c, state_of(c)) == key), None)
    if earlier is None or truth.models[(earlier.vname, earlier.seed)] is model:
        return ""
    try:  # a copy, so the instance's own history stays what the later checks expect
        instance = copy.deepcopy(truth.models[(earlier.vname, earlier.seed)])
    except Exception:  # noqa: BLE001 - a module that cannot be copied is not checked
        return ""
    try:
        again = truth.run(instance, truth.inputs_for(combo), during=f"running {combo.describe()} again")
    except WorkerError as err:
        return f"on the instance first called at {earlier.vname} it raised: {err.failure.reason[:200]}"
    differ = gross_mismatch(again, out, relative=HISTORY_RELATIVE)
    return f"on the instance first called at {earlier.vname}: {differ}" if differ else ""


#: how far the truth's output may move with its call history and still count as the same
HISTORY_RELATIVE = 1e-3


def _refused_redraw(err: WorkerError, combo: Combo, domain: TruthDomain) -> bool:
    """Whether the problem's code (baseline or reference) raising ``err`` on ``combo`` refuses a
    redraw the verifier made (an input distribution other than the problem's own, as normal
    values where it asserts a positive scale): that redraw leaves its domain and is skipped, as a
    non-finite truth is. Device faults and out-of-memory are never that."""
    return combo.distribution != domain.anchor and err.failure.kind is VerdictKind.RUNTIME_ERROR


def _domain_warnings(skipped: dict[str, dict[str, str]], nonfinite: dict[str, dict[str, str]], anchor: str,
                     truth: str) -> list[str]:
    """What the verdict says about the inputs the truth is defined on: the redraws left out and
    why, and where the truth is NaN or Inf on the problem's own inputs."""
    out = []
    by_variants: dict[tuple[Any, ...], list[str]] = {}
    for dist in sorted({d for per in skipped.values() for d in per}):
        variants = tuple(v for v in skipped if dist in skipped[v])
        # partial redraws apart, and by why: one input's may be skipped for another reason
        kind = (PARTIAL in dist, "does not change" in skipped[variants[0]][dist])
        by_variants.setdefault((variants, kind), []).append(dist)
    for (variants, _), dists in by_variants.items():
        out.append(f"{_and([inputs_label(d) for d in dists])} inputs were not used on variant(s) {', '.join(variants)}: "
                   f"{skipped[variants[0]][dists[0]]}")
    own = [(v, k, text) for v, per in nonfinite.items() for k, text in per.items() if k.startswith(f"{anchor}/")]
    if own:
        v, k, text = own[0]
        out.append(f"the {truth} is not finite on the problem's own {inputs_phrase(anchor)} (variant {v}, seed "
                   f"{k.rsplit('/s', 1)[-1]}: {text}): that is the problem's, not a candidate's: a candidate is "
                   "judged where the truth is finite, and a difference only where it is not makes the verdict "
                   "inconclusive, never wrong")
    return out


def _first_call_run(ctx: WorkerContext, outputs: list[Any] | None, combo: Combo, expected: dict[str, dict[str, Any]],
                    meta: dict[str, Any], policy: PrecisionPolicy, hints: dict[str, list[str]],
                    excused: list[CorrectnessRun]) -> CorrectnessRun | None:
    """The first call's outputs (made in the compile step, when autotuners benchmark their
    configs) against the truth of the first combination."""
    if outputs is None or combo.key not in expected:
        return None
    run, undefined = _judge_call(ctx, outputs, combo, expected[combo.key], meta, policy, hints,
                                 config="first call", poisoned=ctx.poisoned)
    if undefined:
        excused.append(run)
    ctx.verdict.correctness.append(run)
    return run


def _judge_call(ctx: WorkerContext, outputs: list[Any], combo: Combo, exp: dict[str, Any], meta: dict[str, Any],
                policy: PrecisionPolicy, hints: dict[str, list[str]], *, config: str | None,
                poisoned: bool) -> tuple[CorrectnessRun, str]:
    """One call's ``outputs`` against the truth of ``combo`` (``exp``: its saved outputs), judged
    as every correctness run is (the float64-calibrated bound under ``policy``, an allowed
    float16 range far from zero); returns the run and, where it differs only where the truth is
    not finite, the note that excuses it ("" otherwise)."""
    eager = bool(meta.get("eager"))
    truth_is_ref = exp.get("reference") is not None or eager
    truth = exp["reference"] if exp.get("reference") is not None else exp["outputs"]
    tol = resolve_tolerance(ctx.options, combo.variant)
    how = {"allow_dtype_change": bool(ctx.options.get("allow_dtype_change")) or (truth_is_ref and not eager),
           "allow_shape_change": bool(ctx.options.get("allow_shape_change")), "poisoned": poisoned,
           "calibration": _calibration(exp, meta, combo.key), "allowed": policy.allowed, "hints": tuple(hints)}
    ok, comps, _, note = compare_outputs(outputs, truth, tol, **how)
    ranged = _range_passed(ctx, ok, outputs, truth, tol, combo, **how)
    ok = ok or bool(ranged)
    undefined = _excused(ctx, ok, outputs, truth, tol, combo, meta, **how)
    r, a = _tols_shown(tol, truth)
    check, kb = run_check(comps)
    run = CorrectnessRun(variant=combo.vname, seed=combo.seed, distribution=combo.distribution,
                         against="reference" if truth_is_ref else "baseline", passed=ok, rtol=r, atol=a,
                         config=config, outputs=comps,
                         note=undefined or ranged or (summarize_failure(comps, note) if not ok else ""),
                         check=check, kernelbench=kb)
    return run, undefined


def _excused(ctx: WorkerContext, ok: bool, outputs: list[Any], truth: list[Any], tol: Tolerance, combo: Combo,
             meta: dict[str, Any], **compare_kwargs: Any) -> str:
    """For a failed comparison on a combination where the truth is NaN or Inf (the baseline
    job's ``nonfinite_truth``): the note saying the outputs differ only there, or "" when they
    differ where the truth is finite as well (a wrong answer) or the comparison passed."""
    if ok:
        return ""
    where = (meta.get("nonfinite_truth") or {}).get(combo.vname, {}).get(f"{combo.distribution}/s{combo.seed}")
    if not where or not excused_by_nonfinite_truth(outputs, truth, tol, ctx.ops.torch_device, **compare_kwargs):
        return ""
    return f"differs only where the {meta.get('truth', 'baseline')} is not finite: {where}"


#: Allowed downgrades that narrow float32's range to float16's (largest finite value 65504, IEEE
#: 754 binary16): a candidate allowed them may overflow where float32 would not.
FLOAT16_RANGE = ("fp16", "fp16-accumulation")
#: How the note of a run excused by :func:`_range_excuse` begins.
RANGE_NOTE = "overflows on inputs far from zero"
#: The stress redraws far from zero (normal around 100; magnitudes up to 1000), where an allowed
#: float16 downgrade may overflow.
FAR_FROM_ZERO = ("shifted", "spread")


def _range_passed(ctx: WorkerContext, ok: bool, outputs: list[Any], truth: list[Any], tol: Tolerance, combo: Combo,
                  **compare_kwargs: Any) -> str:
    """For a failed comparison that float16's allowed range excuses (:func:`_range_excuse`) and
    that matches wherever the outputs stayed finite: the run's note (it passes, as an allowed
    downgrade does, and the verdict warns once); "" otherwise."""
    if ok:
        return ""
    narrow = _range_excuse(combo.distribution, outputs, compare_kwargs.get("allowed") or (),
                           compare_kwargs.get("hints") or ())
    if not narrow or not excused_by_nonfinite_truth(outputs, truth, tol, ctx.ops.torch_device, where_output=True,
                                                    **compare_kwargs):
        return ""
    _warn_once(ctx, f"variant {combo.vname} (seed {combo.seed}): {narrow}")
    return narrow


def _range_excuse(distribution: str, outputs: list[Any], allowed: tuple[str, ...] | list[str],
                  hints: tuple[str, ...] | list[str]) -> str:
    """For a failed comparison on a stress redraw far from zero (:data:`FAR_FROM_ZERO`) of a candidate
    whose source keeps float16 (``hints``) where that downgrade is allowed (:data:`FLOAT16_RANGE`),
    and whose outputs overflowed to Inf (not NaN: Inf - Inf or Inf / Inf is an unstable formula,
    and NaN is also the poison of unwritten memory; but on ``spread``, whose large values take
    both signs, an allowed float16 accumulator's overflowed sum meets Inf - Inf, and the other
    redraws still see unwritten memory): the note excusing it, since float16's range
    is part of what the user allowed (a sum of a few hundred terms near 100 passes 65504); ""
    otherwise. The caller excuses it only where the outputs match everywhere they stayed finite
    (a finite mismatch is lost digits, which the allowance's bound judges)."""
    names = [n for n in FLOAT16_RANGE if n in allowed and n in hints]
    if base_distribution(distribution) not in FAR_FROM_ZERO or not names:
        return ""
    overflow = nonfinite_summary(outputs)
    # NaN is Inf - Inf only where a float16 accumulator sums spread's large terms of both signs
    nan_sum = base_distribution(distribution) == "spread" and "fp16-accumulation" in names
    if not overflow or ("NaN" in overflow and not nan_sum):
        return ""
    return (f"{RANGE_NOTE} ({overflow}) within the allowed {' and '.join(names)}: float16's largest finite value, "
            "65504, bounds what the allowance accepts, so this redraw does not judge the kernel there")


def _warn_once(ctx: WorkerContext, text: str) -> None:
    """Add ``text`` to the verdict's warnings unless it, or the same warning with other measured
    numbers (another run's share of vacuous elements, 99% beside 100%), is there already; the
    output a warning names still tells two apart."""
    def key(t: str) -> str:
        return re.sub(r"(?<!output )(?<![\w.])\d[\d.e+-]*%?", "#", t)

    if key(text) not in {key(w) for w in ctx.verdict.warnings}:
        ctx.verdict.warnings.append(text)


def _range_hinted(run: CorrectnessRun, hints: dict[str, list[str]]) -> bool:
    """Whether ``run`` is an overflow on a redraw far from zero (NaN or Inf placed where the
    truth has none) of a kernel whose source shows a float16 downgrade (``hints``): what allowing
    that downgrade explains, as the other runs' errors may be."""
    return base_distribution(run.distribution) in FAR_FROM_ZERO and any(h in hints for h in FLOAT16_RANGE) and any(
        c.nan_mismatch or c.inf_mismatch for c in run.outputs)


def _contract_note(outputs: list[Any], baseline: list[Any], allow_dtype: bool, allow_shape: bool) -> str:
    """Why the outputs break the baseline's output contract (count, dtype, shape), or ""."""
    if len(outputs) != len(baseline):
        return f"returned {len(outputs)} output(s), the baseline returns {len(baseline)}"
    for i, (o, b) in enumerate(zip(outputs, baseline)):
        if not isinstance(b, (torch.Tensor, StoredTensor)) or not isinstance(o, torch.Tensor):
            continue
        if o.dtype != b.dtype and not allow_dtype:
            return (f"output {i} dtype changed: expected {str(b.dtype).replace('torch.', '')}, got "
                    f"{str(o.dtype).replace('torch.', '')} (the baseline's output dtype; an output dtype change is "
                    "not allowed, --allow-dtype-change permits it)")
        if tuple(o.shape) != tuple(b.shape) and not allow_shape:
            return (f"output {i} shape changed: expected {list(b.shape)}, got {list(o.shape)} (the baseline's "
                    "output shape)")
    return ""


def _tols_shown(tol: Tolerance, outputs: list[Any]) -> tuple[float, float]:
    first = next((o for o in outputs if isinstance(o, (torch.Tensor, StoredTensor))), None)
    if first is None:
        return (tol.rtol or 0.0, tol.atol or 0.0)
    r, a, _ = tol.for_dtype(first.dtype)
    return r, a
