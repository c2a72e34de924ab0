"""The ``sizes`` role: what the kernels launch at each size the verifier considers, without
running them.

The parent (``xeforge_core.sizes``) sends ``size_points``: the first correctness variant and
copies of it with one size changed at a time (those that grow a size, in increasing order,
name it in ``probe_climb``: once one shows nothing left to learn, the larger are skipped). For each point this role calls forward() of the
Triton modules (the baseline unless it is the eager reference, then the candidate) with the
launch hook in dry mode (``LaunchRecorder.dry``): host code runs, kernel launches are recorded
(grid, integer arguments, constexprs, loop trips; ``worker.tiles``) and not run, so a point
costs the inputs and the host code only. Each autotuner's configs are probed one by one. At the
points listed in ``validity_points`` the reference (or eager baseline) is also run for real, to
learn whether the problem accepts those sizes at all. Nothing is compared.

Result: a verdict with one step ``sizes`` whose evidence is::

    {"probes": [{"point": NAME, "module": LABEL, "config": DESC | null,
                 "facts": [launch fact, ...]} | {"point", "module", "error": str}],
     "configs": {LABEL: [autotune config description, ...]}}

The baseline and reference run before the candidate is imported. Before each module is loaded
and before each point is called, a progress note names them (``sizes: loading the candidate``,
``sizes: probing the candidate at NAME``): when the job is killed for a hang, the last note says
whose code hung, and the parent ends the verification there (``verify._Run.derive_tile_sizes``).
"""

from __future__ import annotations

from typing import Any

from xeforge_core.verdict import Step, VerdictKind
from xeforge_core.worker.context import WorkerContext
from xeforge_core.worker.errors import WorkerError
from xeforge_core.worker.loading import load_module
from xeforge_core.worker.roles import Combo, Harness
from xeforge_core.worker.tiles import kernel_sources, launch_facts


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0][:300] if text else ""


#: Programs per grid axis and trips per loop past which a larger size teaches nothing more
#: (``xeforge_core.sizes.MIN_PROGRAMS`` and ``MIN_TRIPS``).
ENOUGH = {"grid": 3, "loop": 2}


def _past_every_tile(fact: dict[str, Any], old: dict[str, Any], before: int, count: int) -> bool:
    """Whether an axis the kernel does not read stayed at ``count`` programs while every integer
    argument that moved grew past ``ENOUGH`` of the launch's largest constant: no tile of this
    launch divides the axis then, so its count is fixed (a one-program kernel that loops)."""
    if count != before:
        return False
    moved = [int(v) for k, v in (fact.get("scalars") or {}).items()
             if isinstance(v, int) and (old.get("scalars") or {}).get(k) != v]
    widest = max([int(v) for v in (fact.get("constants") or {}).values() if isinstance(v, int)] or [1])
    return bool(moved) and min(moved) >= ENOUGH["grid"] * widest


def settled(base: list[dict[str, Any]], facts: list[dict[str, Any]]) -> bool:
    """Whether a larger value of the size that turned ``base`` (the launch facts at the base
    point) into ``facts`` could show anything more: not when every grid axis has reached
    ``ENOUGH`` programs or is an untiled axis that did not move, and every loop has reached
    ``ENOUGH`` trips or runs over an extent this size does not change. A tiled axis short of its
    programs in a launch whose integer arguments this size changes may still grow: not
    settled; so may an axis the launch must have (axis 0, or one below an axis the kernel reads)
    whose program id the kernel never reads: its count comes from the host's grid alone, and
    only several programs there show that they all do the same work, until the arguments that
    moved are past every tile of the launch with the count unchanged (``_past_every_tile``)."""
    before = {(f["kernel"], f["occurrence"]): f for f in base}
    for f in facts:
        old = before.get((f["kernel"], f["occurrence"]))
        if old is None:
            return False
        moved = (f.get("scalars") or {}) != (old.get("scalars") or {})
        read = f.get("axes_read")
        for axis, count in enumerate(f.get("grid") or []):
            if int(count) >= ENOUGH["grid"]:
                continue
            tiled = str(axis) in (f.get("axis_tiles") or {})
            before_count = int((old.get("grid") or [1, 1, 1])[axis])
            unread = (read is not None and axis not in read and (axis == 0 or axis < max(read, default=-1))
                      and not _past_every_tile(f, old, before_count, int(count)))
            if ((tiled or unread) and moved) or (not tiled and int(count) != before_count):
                return False
        extents = {loop["line"]: loop["extent"] for loop in old.get("loops") or []}
        for loop in f.get("loops") or []:
            if int(loop["trips"]) < ENOUGH["loop"] and extents.get(loop["line"]) != loop["extent"]:
                return False
    return True


def fails_at_any_size(err: WorkerError) -> bool:
    """Whether building a module's inputs failed in a way no other size mends: inputs that
    break their contract (``Failure.problem``: ``get_inputs()`` returning no list). An exception
    raised by the problem's code (even a ``NameError`` in a branch) may belong to the size the
    verifier chose, so it is not one: that size is dropped and the baseline tried at others."""
    return err.failure.problem


def _probe_module(ctx: WorkerContext, harness: Harness, label: str, points: list[dict[str, Any]], *,
                  dry: bool, tuners_from: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Call ``harness``'s module at each point (when ``dry``, each of its autotuners' configs on
    its own: those registered from index ``tuners_from`` on, the module's); returns the probe
    records and the configs probed. The first point is the base; a point that grows one size
    (its ``probe_climb`` names it) is skipped once a smaller one of the same size ``settled``
    every count of every config: larger inputs and models there cost time and teach nothing."""
    records: list[dict[str, Any]] = []
    sources = kernel_sources(harness.loaded.jit_functions)
    selections: list[tuple[int, int, str] | None] = [None]
    if dry:  # config 0 of each autotuner is what runs unselected
        selections += [s for s in ctx.registry.variants() if s[0] >= tuners_from and s[1] > 0]
    base_facts: dict[str | None, list[dict[str, Any]]] = {}
    done: set[str] = set()
    for point in points:
        combo = Combo(point, 0, "normal")
        name = combo.vname
        climb = point.get("probe_climb")
        if climb in done:
            continue
        # the parent names what hung from the last of these when the job is killed
        ctx.progress.emit("note", f"sizes: probing the {label} at {name}")
        climbed = bool(climb)
        try:
            model = harness.model_for(combo, fresh=True)
            args = harness.inputs_for(combo)
        except WorkerError as err:
            if (not records and fails_at_any_size(err)) or err.failure.kind is VerdictKind.OOM:
                # at the base size, before any other: the job fails as the baseline would; out of
                # memory at any size: every other size would wait for memory too
                raise
            records.append({"point": name, "module": label, "error": _first_line(err.failure.reason)})
            continue
        except Exception as exc:  # noqa: BLE001 - the problem's own code at a size it may not accept
            records.append({"point": name, "module": label, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for sel in selections if dry else [None]:
            mark = ctx.recorder.mark()
            ctx.recorder.dry = dry
            try:
                if sel is None:
                    harness.run(model, list(args), during=f"probing the sizes at {name}")
                else:
                    with ctx.registry.select(sel[0], sel[1]):
                        harness.run(model, list(args), during=f"probing the sizes at {name} with {sel[2]}")
            except WorkerError as err:
                if err.failure.kind is VerdictKind.OOM:
                    raise
                records.append({"point": name, "module": label, "config": sel[2] if sel else None,
                                "error": _first_line(err.failure.reason)})
                continue
            except Exception as exc:  # noqa: BLE001 - host code fed unrun kernels' outputs
                records.append({"point": name, "module": label, "config": sel[2] if sel else None,
                                "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            finally:
                ctx.recorder.dry = False
            facts = launch_facts(ctx.recorder.since(mark), sources)
            config = sel[2] if sel else None
            records.append({"point": name, "module": label, "config": config, "facts": facts})
            base_facts.setdefault(config, facts)
            climbed = climbed and settled(base_facts[config], facts)
        if climbed:
            done.add(str(climb))
        del model, args
    described = [d for i, _, d in ctx.registry.variants() if i >= tuners_from] if dry else []
    return records, described


def run_sizes(ctx: WorkerContext) -> None:
    """The ``sizes`` role (see the module docstring)."""
    job = ctx.job
    points = list(job.get("size_points") or [])
    validity = set(job.get("validity_points") or [])
    eager = bool(job.get("baseline_is_reference"))

    def body(step: Step) -> None:
        ctx.registry.narrow_always()  # no autotuner benchmarks launches that do not run
        ctx.inputs_module()
        records: list[dict[str, Any]] = []
        configs: dict[str, list[str]] = {}
        plan: list[tuple[str, dict[str, Any] | None, bool]] = []
        if not eager:
            plan.append(("baseline", job.get("baseline"), True))
        plan.append(("reference", job.get("reference"), False))
        plan.append(("candidate", job.get("module"), True))
        first: Harness | None = None
        for label, source, dry in plan:
            if not source:
                continue
            tuners_from = len(ctx.registry.entries)
            ctx.progress.emit("note", f"sizes: loading the {label}")
            loaded = load_module(ctx.job_dir, dict(source, label=label), ctx.ops.kind)
            harness = Harness(ctx, loaded, init_fallback=first.loaded if first else None)
            if first is None:
                first = harness
            elif label == "reference":
                harness.input_source = first.input_source  # the same inputs as the baseline
            chosen = points if dry else [p for p in points if p.get("name") in validity]
            got, probed = _probe_module(ctx, harness, label, chosen, dry=dry, tuners_from=tuners_from)
            records += got
            if probed:
                configs[label] = probed
        step.evidence = {"probes": records, "configs": configs}
        step.summary = f"{len(points)} size(s) probed, {len(records)} call(s)"

    ctx.run_step("sizes", body)
