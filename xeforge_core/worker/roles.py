"""The ``baseline`` and ``candidate`` roles: compile, structure/integrity, correctness.

Both roles run every (correctness variant x seed x input distribution) combination with the
same seeds, so inputs and weights match. The baseline job saves, per combination, its outputs
(and the reference's) to ``expected/`` with ``torch.save``, plus the model weights per
(variant, seed) and a ``meta.json`` (heavy aten ops, launch count, reference agreement, whether
the expected outputs are constant across seeds). The candidate job compares against those.

Files in ``expected/``::

    meta.json                       {"runs": {KEY: {...}}, "heavy_ops": [...], ...}
    <KEY>.pt                        {"outputs": [...], "reference": [...] | None}
    state__<variant>__s<seed>.pt    the baseline model's state_dict (before any forward)

with ``KEY = <variant>__s<seed>__<distribution>``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xeforge_core.verdict import CorrectnessRun, Finding, Step, StepStatus, VerdictKind
from xeforge_core.worker.compare import (
    Tolerance,
    bitwise_equal,
    compare_outputs,
    resolve_tolerance,
    summarize_failure,
)
from xeforge_core.worker.context import WorkerContext
from xeforge_core.worker.errors import Failure, WorkerError, classify, hardcoded_device_note
from xeforge_core.worker.inputs import (
    DISTRIBUTIONS,
    build_inputs,
    clone_args,
    construct_model,
    dtype_from_name,
    flatten_outputs,
    init_values,
    load_matching_state,
    to_host,
)
from xeforge_core.worker.integrity import (
    HarnessGuard,
    OpTracer,
    aliased_outputs,
    heavy,
    lint_findings,
    mutated_inputs,
    static_findings,
    subclass_outputs,
)
from xeforge_core.worker.loading import LoadedModule, load_module

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
        """Human description, e.g. ``variant ci (seed 0, normal inputs)``."""
        seed = f"seed {self.seed}" + (f", input seed {self.input_seed}" if self.input_seed is not None else "")
        return f"variant {self.vname} ({seed}, {self.distribution} inputs)"


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
    """Every correctness combination of the job, variant-major."""
    variants = list(job.get("correctness_variants") or []) or [{"name": "module", "params": [], "dims": {}}]
    seeds = [int(s) for s in (job.get("seeds") or DEFAULT_SEEDS)]
    dists = list(job.get("distributions") or DISTRIBUTIONS)
    return [Combo(v, s, d) for v in variants for s in seeds for d in dists]


def _variant_dtype(variant: dict[str, Any]) -> torch.dtype | None:
    return dtype_from_name(variant["dtype"]) if variant.get("dtype") else None


def _expected_dir(ctx: WorkerContext) -> Path:
    given = ctx.job.get("expected_dir")
    return Path(given) if given else ctx.job_dir / "expected"


class Harness:
    """Runs one loaded module over the job's combinations."""

    def __init__(self, ctx: WorkerContext, loaded: LoadedModule, init_fallback: LoadedModule | None = None) -> None:
        self.ctx = ctx
        self.loaded = loaded
        # a reference without get_init_inputs() is built with the kernel module's init values
        self.init_module = loaded if init_fallback is None or hasattr(loaded.module, "get_init_inputs") \
            else init_fallback
        self.spec = ctx.job.get("spec")
        self.models: dict[tuple[str, int], torch.nn.Module] = {}
        self.states: dict[tuple[str, int], dict[str, torch.Tensor]] = {}
        self.weight_notes: dict[str, str] = {}

    def model_for(self, combo: Combo, *, baseline_state: dict[str, torch.Tensor] | None = None,
                  fresh: bool = False) -> torch.nn.Module:
        """The model for (variant, seed): built under the seed, given ``baseline_state`` when its
        keys and shapes match; cached per (variant, seed) unless ``fresh``."""
        key = (combo.vname, combo.seed)
        if key in self.models and not fresh:
            return self.models[key]
        inits = init_values(self.init_module, combo.variant)
        model = construct_model(self.loaded, inits, combo.seed, self.ctx.ops.torch_device,
                                _variant_dtype(combo.variant))
        if baseline_state is not None:
            self.weight_notes[f"{combo.vname}/s{combo.seed}"] = load_matching_state(model, baseline_state)
        self.states[key] = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        if not fresh:
            self.models[key] = model
        return model

    def inputs_for(self, combo: Combo) -> list[Any]:
        """Fresh forward() arguments for ``combo`` on the device."""
        seed = combo.seed if combo.input_seed is None else combo.input_seed
        return build_inputs(self.loaded, self.spec, combo.variant, seed, combo.distribution,
                            self.ctx.ops.torch_device)

    def run(self, model: torch.nn.Module, args: list[Any], *, trace: OpTracer | None = None,
            during: str = "running forward") -> list[Any]:
        """Call ``model(*args)``; returns the flat outputs. Raises ``WorkerError`` with the failure
        classified (kind, line in the module, hard-coded-device note)."""
        try:
            out = self.ctx.call(model, args, trace=trace)
        except WorkerError:
            raise
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            failure = classify(exc, self.loaded.file, jit_functions=self.loaded.jit_functions, during=during)
            note = hardcoded_device_note(self.loaded.source, failure.reason + failure.error_text,
                                         self.ctx.ops.kind)
            if note:
                failure.reason = f"the {self.loaded.label} {note}. {failure.reason}"
            raise WorkerError(failure) from exc
        return flatten_outputs(out)


# ---------------------------------------------------------------------------------------------
# shared steps
# ---------------------------------------------------------------------------------------------

def _load(ctx: WorkerContext, source: dict[str, Any] | None, label: str) -> LoadedModule:
    if not source:
        raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR, f"the job has no {label} module"))
    source = dict(source, label=label)  # one directory per role: files never overwrite each other
    return load_module(ctx.job_dir, source, ctx.ops.kind)


def _compile_step(ctx: WorkerContext, combos: list[Combo], holder: dict[str, Any],
                  baseline_state_of: Any = None) -> None:
    def body(step: Step) -> None:
        loaded = _load(ctx, ctx.job.get("module"), ctx.role)
        holder["loaded"] = loaded
        harness = Harness(ctx, loaded)
        holder["harness"] = harness
        combo = combos[0]
        state = baseline_state_of(combo) if baseline_state_of else None
        mark = ctx.recorder.mark()
        model = harness.model_for(combo, baseline_state=state, fresh=True)
        args = harness.inputs_for(combo)
        harness.run(model, args, during=f"making the first call ({combo.describe()})")
        launches = ctx.recorder.since(mark)
        names = sorted({rec.kernel for rec in launches})
        step.summary = (f"imported {loaded.path.name}; first call launched {len(launches)} Triton kernel(s)"
                        + (f": {', '.join(names)}" if names else ""))
        step.evidence = {"file": loaded.path.name, "launches": len(launches), "kernels": names,
                         "autotuned": [e.name for e in ctx.registry.entries],
                         "interpreter": ctx.ops.interpreter}
        ctx.kernels_to_verdict()

    ctx.run_step("compile", body)


def _structure_runtime(ctx: WorkerContext, harness: Harness, combos: list[Combo],
                       expected: dict[str, dict[str, Any]] | None, baseline_state_of: Any,
                       tol_of: Any) -> tuple[list[Finding], dict[str, Any]]:
    """Runtime integrity checks on the first combination(s). Returns findings and evidence."""
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
    if not launches:
        findings.append(Finding("no_triton_launch", f"forward() launched no Triton kernel on {ctx.ops.kind}: "
                                "the work is not done by a Triton kernel (the Triton path never ran)"))
    if any(not rec.main_thread for rec in launches) or ctx.threads.started:
        findings.append(Finding("background_thread", "work ran on a background thread"
                                + (f" ({', '.join(ctx.threads.started)})" if ctx.threads.started else "")))
    if any(rec.side_stream for rec in launches):
        findings.append(Finding("side_stream", "a kernel was launched on a side stream, off the timed stream"))
    for i in mutated_inputs(before_a, args_a):
        findings.append(Finding("mutates_input", f"forward() modified its input {i} in place"))
    for oi, ii in aliased_outputs(out_a, args_a):
        findings.append(Finding("output_aliases_input", f"output {oi} shares memory with input {ii}"))
    for oi, tname in subclass_outputs(out_a):
        findings.append(Finding("tensor_subclass", f"output {oi} is a {tname}, not a plain torch.Tensor "
                                "(lazy or deferred results are not allowed)"))
    if not any(isinstance(o, torch.Tensor) for o in out_a):
        findings.append(Finding("no_tensor_output", "forward() returned no tensor"))

    if b is not None and expected is not None and a.key in expected and b.key in expected:
        snap_a = [o.clone() if isinstance(o, torch.Tensor) else o for o in out_a]
        model_b = model
        args_b = harness.inputs_for(b)
        pristine_b = clone_args(args_b)
        out_b = harness.run(model_b, args_b)
        exp_a, exp_b = expected[a.key]["outputs"], expected[b.key]["outputs"]
        if any(isinstance(x, torch.Tensor) and not bitwise_equal(x, y) for x, y in zip(out_a, snap_a)):
            findings.append(Finding("reused_output_buffer", "the first call's output changed when forward() was "
                                    "called again: it returns a buffer it reuses across calls"))
        expected_differ = any(not bitwise_equal(x, y) for x, y in zip(exp_a, exp_b))
        tol = tol_of(a)
        ok_b, _, _, _ = compare_outputs(to_host(out_b), exp_b, tol, poisoned=False)
        like_a, _, _, _ = compare_outputs(to_host(out_b), to_host(snap_a), tol, poisoned=False)
        if expected_differ and not ok_b and like_a:
            findings.append(Finding("cached_output", "called twice with different inputs of the same shape, "
                                    "forward() returned the first call's result again (results cached "
                                    "across calls)"))
        elif ok_b and expected_differ and not any(f.rule == "mutates_input" for f in findings):
            # same addresses and ids, new contents: catches caches keyed by id() or data_ptr()
            for x, y in zip(args_a, pristine_b):
                if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape:
                    x.copy_(y)
            out_c = harness.run(model_b, args_a)
            ok_c, _, _, _ = compare_outputs(to_host(out_c), exp_b, tol, poisoned=False)
            if not ok_c:
                findings.append(Finding("cached_output", "called again with the same tensors holding new "
                                        "values, forward() returned a stale result (cached by id() or "
                                        "data address)"))
        evidence["calls_checked"] = 3 if ok_b and expected_differ else 2
    return findings, evidence


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


# ---------------------------------------------------------------------------------------------
# baseline
# ---------------------------------------------------------------------------------------------

def run_baseline(ctx: WorkerContext) -> None:
    """The baseline role (see the module docstring)."""
    combos = combos_of(ctx.job)
    out_dir = _expected_dir(ctx)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx.enable_poison()
    holder: dict[str, Any] = {}
    _compile_step(ctx, combos, holder)
    if ctx.failed:
        if not ctx.verdict.reason.startswith("the baseline"):
            ctx.verdict.reason = f"the baseline failed: {ctx.verdict.reason}"
        ctx.skip_missing()
        return
    harness: Harness = holder["harness"]
    meta: dict[str, Any] = {"runs": {}, "heavy_ops": [], "launches_per_call": 0}

    def structure(step: Step) -> None:
        findings = [Finding(f.rule, f.message, "warning", f.line) for f in static_findings(harness.loaded.tree)]
        rt, evidence = _structure_runtime(ctx, harness, combos, None, None, _tol_of(ctx))
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
        step.summary = (f"{meta['launches_per_call']} launch(es) per call"
                        + (f"; heavy torch ops in forward: {', '.join(meta['heavy_ops'])}" if meta["heavy_ops"] else ""))

    ctx.run_step("structure", structure)

    def correctness(step: Step) -> None:
        reference = None
        ref_source = ctx.job.get("reference")
        if ref_source:
            try:
                reference = Harness(ctx, _load(ctx, ref_source, "reference"), init_fallback=harness.loaded)
            except WorkerError as err:
                ctx.verdict.warnings.append(f"the reference did not load, so it is not checked: "
                                            f"{err.failure.reason}")
        ref_failures: list[str] = []
        per_variant: dict[str, list[list[Any]]] = {}
        for combo in combos:
            model = harness.model_for(combo)
            if (combo.vname, combo.seed) not in meta.get("_saved", set()):
                torch.save(harness.states[(combo.vname, combo.seed)],
                           out_dir / f"state__{_safe(combo.vname)}__s{combo.seed}.pt")
                meta.setdefault("_saved", set()).add((combo.vname, combo.seed))
            args = harness.inputs_for(combo)
            outputs = to_host(harness.run(model, clone_args(args), during=f"running {combo.describe()}"))
            record: dict[str, Any] = {"variant": combo.vname, "seed": combo.seed,
                                      "distribution": combo.distribution, "ref_agrees": None}
            ref_out = None
            if reference is not None:
                try:
                    rmodel = reference.model_for(combo, baseline_state=harness.states[(combo.vname, combo.seed)])
                    ref_out = to_host(reference.run(rmodel, clone_args(args), during="running the reference"))
                except WorkerError as err:
                    ctx.verdict.warnings.append(f"the reference failed on {combo.describe()}, so it is not "
                                                f"checked: {err.failure.reason}")
                    reference = None
                if ref_out is not None:
                    tol = resolve_tolerance(ctx.options, combo.variant)
                    ok, comps, warns, note = compare_outputs(outputs, ref_out, tol, allow_dtype_change=True,
                                                             poisoned=False)
                    r, a = tol.for_dtype(ref_out[0].dtype)[:2] if ref_out and isinstance(
                        ref_out[0], torch.Tensor) else (0.0, 0.0)
                    ctx.verdict.correctness.append(CorrectnessRun(
                        variant=combo.vname, seed=combo.seed, distribution=combo.distribution,
                        against="reference", passed=ok, rtol=r, atol=a, outputs=comps,
                        note="baseline vs reference" + (f": {summarize_failure(comps, note)}" if not ok else "")))
                    record["ref_agrees"] = ok
                    if not ok:
                        ref_failures.append(f"{combo.describe()}: {summarize_failure(comps, note)}")
            torch.save({"outputs": outputs, "reference": ref_out}, out_dir / f"{combo.key}.pt")
            meta["runs"][combo.key] = record
            per_variant.setdefault(combo.vname, []).append(ref_out if ref_out is not None else outputs)
        # the integrity run: the first model with other inputs of the same shape
        extra = integrity_combo(combos)
        extra_out = to_host(harness.run(harness.model_for(extra), harness.inputs_for(extra),
                                        during=f"running {extra.describe()}"))
        torch.save({"outputs": extra_out, "reference": None}, out_dir / f"{extra.key}.pt")
        meta["integrity_run"] = extra.key
        constant = [v for v, outs in per_variant.items()
                    if len(outs) > 1 and all(len(o) == len(outs[0]) and all(bitwise_equal(x, y) for x, y in
                                                                             zip(o, outs[0])) for o in outs[1:])]
        meta["constant_outputs"] = constant
        meta["weights"] = {k: "baseline init" for k in harness.states}
        if ref_failures:
            ctx.verdict.warnings.append(f"the baseline disagrees with the reference on {len(ref_failures)} run(s), "
                                        f"e.g. {ref_failures[0]}; candidates are not judged against the "
                                        "reference on those runs")
        if constant:
            step.status = StepStatus.INCONCLUSIVE
            what = "reference" if ctx.job.get("reference") else "baseline"
            step.summary = (f"the {what}'s output does not depend on its inputs (identical across seeds and "
                            f"distributions on variant(s) {', '.join(constant)}): correctness is inconclusive")
            ctx.verdict.warnings.append(step.summary)
        else:
            step.summary = f"{len(combos)} run(s) saved" + (
                f"; checked against the reference ({len(ref_failures)} disagreement(s))" if ctx.job.get("reference")
                else "")
        step.evidence = {"expected_dir": str(out_dir), "runs": len(combos)}

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
    expected: dict[str, dict[str, Any]] = {}
    extra = meta.get("integrity_run")
    if extra and (out_dir / f"{extra}.pt").is_file():
        expected[extra] = torch.load(out_dir / f"{extra}.pt", weights_only=False)
    for combo in combos:
        path = out_dir / f"{combo.key}.pt"
        if not path.is_file():
            raise WorkerError(Failure(VerdictKind.RUNTIME_ERROR,
                                      f"the baseline saved no outputs for {combo.describe()} ({path.name})"))
        expected[combo.key] = torch.load(path, weights_only=False)
    return expected, meta


def run_candidate(ctx: WorkerContext) -> None:
    """The candidate role (see the module docstring)."""
    guard = HarnessGuard()  # before the candidate's code runs
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
    _compile_step(ctx, combos, holder, baseline_state_of)
    if ctx.failed:
        ctx.skip_missing()
        return
    harness: Harness = holder["harness"]
    tol_of = _tol_of(ctx)

    def structure(step: Step) -> None:
        findings = static_findings(harness.loaded.tree)
        rt, evidence = _structure_runtime(ctx, harness, combos, expected, baseline_state_of, tol_of)
        findings += rt
        base_heavy = set(meta.get("heavy_ops") or [])
        extra = sorted(set(evidence.get("heavy_ops", [])) - base_heavy)
        if extra:
            findings.append(Finding("torch_fallback", f"forward() runs torch {', '.join(extra)}, which the "
                                    "baseline does not: the hot op fell back to torch instead of a Triton kernel"))
        findings += ctx.timer_guard.check() + guard.check()
        findings += lint_findings(ctx.options.get("lints"))
        evidence["baseline_heavy_ops"] = sorted(base_heavy)
        step.evidence = evidence
        shared = set(meta.get("baseline_rules") or [])
        for f in findings:
            if f.severity == "error" and f.rule in shared:
                f.severity = "warning"
                f.message += " (the baseline does the same, so it is not held against the candidate)"
        errors = [f for f in findings if f.severity == "error"]
        ctx.verdict.findings += findings
        if errors:
            first = errors[0]
            where = f" (line {first.line})" if first.line else ""
            ctx.fail(step, Failure(VerdictKind.CHEATING, f"integrity rule {first.rule} broken{where}: "
                                   f"{first.message}", first.line))
            return
        step.summary = (f"{evidence.get('launches_per_call', 0)} Triton launch(es) per call; inputs untouched, "
                        "no aliasing, no caching across calls")

    ctx.run_step("structure", structure)

    def correctness(step: Step) -> None:
        runs = _candidate_runs(ctx, harness, combos, expected, meta, baseline_state_of)
        failed = [r for r in runs if not r.passed]
        step.evidence = {"runs": len(runs), "failed": len(failed), "weights": harness.weight_notes,
                         "autotune_configs": [d for _, _, d in ctx.registry.variants()]}
        if failed:
            r = failed[0]
            cfg = f" with autotune config {r.config}" if r.config else ""
            reason = f"wrong answer on variant {r.variant} (seed {r.seed}, {r.distribution} inputs){cfg} vs {r.against}: {r.note}"
            ctx.fail(step, Failure(VerdictKind.WRONG_ANSWER, reason))
            return
        constant = meta.get("constant_outputs") or []
        if constant:
            step.status = StepStatus.INCONCLUSIVE
            what = "reference" if ctx.job.get("reference") else "baseline"
            step.summary = (f"inconclusive: the {what}'s output does not depend on its inputs (identical across "
                            f"seeds on variant(s) {', '.join(constant)}), so matching it proves nothing")
            ctx.verdict.warnings.append(step.summary)
            ctx.verdict.reason = step.summary
            return
        nconf = len(ctx.registry.variants())
        step.summary = (f"matches the baseline on {len(runs)} run(s)"
                        + (f" including every one of {nconf} autotune config(s)" if nconf else ""))

    ctx.run_step("correctness", correctness)
    tampered = guard.check() + ctx.timer_guard.check()
    if tampered:  # replaced during the correctness runs: nothing they reported can be trusted
        ctx.verdict.findings += tampered
        step = ctx.verdict.step("correctness")
        if step is not None and not ctx.failed:
            ctx.fail(step, Failure(VerdictKind.CHEATING, f"integrity rule {tampered[0].rule} broken: "
                                   f"{tampered[0].message}"))
        ctx.verdict.kind = VerdictKind.CHEATING
    ctx.kernels_to_verdict()
    _performance_not_measured(ctx)
    ctx.skip_missing(("compile", "structure", "correctness"))
    if not ctx.failed and not ctx.verdict.reason:
        ctx.verdict.reason = "compiles, passes the integrity checks and matches the baseline"


def _candidate_runs(ctx: WorkerContext, harness: Harness, combos: list[Combo], expected: dict[str, dict[str, Any]],
                    meta: dict[str, Any], baseline_state_of: Any) -> list[CorrectnessRun]:
    allow_dtype = bool(ctx.options.get("allow_dtype_change"))
    allow_shape = bool(ctx.options.get("allow_shape_change"))
    runs: list[CorrectnessRun] = []
    selections: list[tuple[int, int, str] | None] = [None]
    for i, j, desc in ctx.registry.variants():
        if ctx.ops.interpreter and j == 0:
            continue  # on cpu the default run already uses each autotuner's first config
        selections.append((i, j, desc))
    default_desc = ctx.registry.default_description()
    for sel in selections:
        for combo in combos:
            model = harness.model_for(combo, baseline_state=baseline_state_of(combo))
            args = harness.inputs_for(combo)
            if ctx.ops.kind != "cpu":
                ctx.ops.poison_allocator(64 << 20)
            if sel is None:
                out = harness.run(model, args, during=f"running {combo.describe()}")
                config = default_desc if ctx.registry.entries and ctx.ops.interpreter else None
            else:
                with ctx.registry.select(sel[0], sel[1]):
                    out = harness.run(model, args, during=f"running {combo.describe()} with config {sel[2]}")
                config = sel[2]
            outputs = to_host(out)
            exp = expected[combo.key]
            tol = resolve_tolerance(ctx.options, combo.variant)
            ok, comps, warns, note = compare_outputs(outputs, exp["outputs"], tol, allow_dtype_change=allow_dtype,
                                                     allow_shape_change=allow_shape, poisoned=ctx.poisoned)
            for w in warns:
                if w not in ctx.verdict.warnings:
                    ctx.verdict.warnings.append(w)
            r, a = _tols_shown(tol, exp["outputs"])
            run = CorrectnessRun(variant=combo.vname, seed=combo.seed, distribution=combo.distribution,
                                 against="baseline", passed=ok, rtol=r, atol=a, config=config, outputs=comps,
                                 note=summarize_failure(comps, note) if not ok else "")
            runs.append(run)
            ctx.verdict.correctness.append(run)
            ref = exp.get("reference")
            agrees = (meta.get("runs", {}).get(combo.key) or {}).get("ref_agrees")
            if ref is not None and agrees and sel is None:
                ok_r, comps_r, _, note_r = compare_outputs(outputs, ref, tol, allow_dtype_change=True,
                                                           allow_shape_change=allow_shape, poisoned=ctx.poisoned)
                r2, a2 = _tols_shown(tol, ref)
                run_r = CorrectnessRun(variant=combo.vname, seed=combo.seed, distribution=combo.distribution,
                                       against="reference", passed=ok_r, rtol=r2, atol=a2, config=config,
                                       outputs=comps_r, note=summarize_failure(comps_r, note_r) if not ok_r else "")
                runs.append(run_r)
                ctx.verdict.correctness.append(run_r)
    return runs


def _tols_shown(tol: Tolerance, outputs: list[Any]) -> tuple[float, float]:
    first = next((o for o in outputs if isinstance(o, torch.Tensor)), None)
    if first is None:
        return (tol.rtol or 0.0, tol.atol or 0.0)
    r, a, _ = tol.for_dtype(first.dtype)
    return r, a
