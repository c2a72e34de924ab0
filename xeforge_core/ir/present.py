"""IR reports as rows and diffs, shared by ``xeforge ir`` and the IR page (plain data, units
from :mod:`xeforge_core.units`; no Streamlit)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xeforge_core import units
from xeforge_core.diffmerge import diff_stats, unified_patch
from xeforge_core.ir.compile import IRKernel, IRReport
from xeforge_core.ir.targets import STAGE_NAMES, resolve_stage
from xeforge_core.ir.text import strip_locations


@dataclass
class DiffCount:
    """Lines removed and added between two IR texts."""

    removed: int
    added: int

    @property
    def identical(self) -> bool:
        return self.removed == 0 and self.added == 0


def diff_count(old: str, new: str) -> DiffCount:
    """How many lines the diff of ``old`` -> ``new`` removes and adds."""
    _, removed, added = diff_stats(old, new)
    return DiffCount(removed, added)


def resource_rows(report: IRReport) -> list[dict[str, Any]]:
    """One row per compiled kernel: registers (per thread), spills, shared memory (per program),
    warps, stages, compile time, and the error where it did not compile. Values the compiler
    did not report read ``—`` ("not reported by the compiler")."""
    rows = []
    for k in report.kernels:
        r = k.resources or {}
        detail = r.get("detail") or {}
        spills = r.get("spill_bytes")
        spill_text = units.size(spills) if spills is not None else units.MISSING
        if report.target.backend == "cuda" and (detail.get("spill_load_bytes") or detail.get("spill_store_bytes")):
            spill_text = (f"{units.size(detail.get('spill_store_bytes'))} stored, "
                          f"{units.size(detail.get('spill_load_bytes'))} loaded")
        rows.append({
            "kernel": k.label,
            "registers": units.number(r.get("registers")) if r.get("registers") is not None else units.MISSING,
            "spills": spill_text,
            "shared memory": units.size(r.get("shared_bytes")) if r.get("shared_bytes") is not None else units.MISSING,
            "num_warps": units.number(r.get("num_warps")),
            "num_stages": units.number(r.get("num_stages")),
            "compile": units.seconds(k.compile_seconds),
            "reported by": detail.get("source", ""),
            "error": k.error,
        })
    return rows


def specialization_text(kernel: IRKernel) -> str:
    """What Triton assumed about the launch's arguments, one clause per parameter, e.g.
    ``"a_ptr: *fp16, divisible by 16; stride_ak: specialized to the constant 1"``."""
    parts = []
    for name, typ in kernel.signature.items():
        if typ == "constexpr":
            value = kernel.constexprs.get(name)
            note = kernel.specialization.get(name)
            parts.append(f"{name} = {value!r}" + (" (specialized: the launch passed 1)" if note else ""))
        else:
            note = kernel.specialization.get(name)
            parts.append(f"{name}: {typ}" + (f", {note}" if note else ""))
    return "; ".join(parts)


def stage_choices(kernel: IRKernel, target_stages: tuple[str, ...] | list[str]) -> list[str]:
    """The stages of ``kernel`` in the target's lowering order (then any others)."""
    order = list(target_stages)
    return sorted(kernel.ir, key=lambda s: (order.index(s) if s in order else len(order), s))


def stage_text(kernel: IRKernel, stage: str, *, locations: bool = True) -> str | None:
    """The IR of ``stage`` (a user name: ``spirv`` works too), with or without source locations."""
    key = resolve_stage(stage, list(kernel.ir))
    if key is None:
        return None
    text = kernel.ir[key]
    return text if locations else strip_locations(text, key)


def ir_diff(old: IRKernel, new: IRKernel, stage: str, *, old_name: str, new_name: str,
            locations: bool = False) -> tuple[str, DiffCount] | None:
    """A unified diff of ``stage`` between two compiled kernels (source locations stripped
    unless ``locations``) and its removed/added line counts; ``None`` when either lacks it."""
    a = stage_text(old, stage, locations=locations)
    b = stage_text(new, stage, locations=locations)
    if a is None or b is None:
        return None
    label = STAGE_NAMES.get(stage, stage)
    patch = unified_patch(a, b, from_name=f"{old_name}/{old.name}.{label}", to_name=f"{new_name}/{new.name}.{label}")
    return patch, diff_count(a, b)


def diff_summary(count: DiffCount, stage: str, *, locations: bool = False) -> str:
    """``"TTGIR: 79 lines removed, 73 added (source locations stripped)"``, or identical."""
    label = STAGE_NAMES.get(stage, stage)
    where = "" if locations else " (source locations stripped)"
    if count.identical:
        return f"{label}: identical{where}"
    return (f"{label}: {units.plural(count.removed, 'line')} removed, {units.number(count.added)} added"
            f"{where}")


def pair_kernels(old: IRReport, new: IRReport) -> list[tuple[IRKernel, IRKernel]]:
    """Kernels of two reports matched by label, then by name, then, for those left (a kernel
    renamed between the versions: ``matmul_kernel`` -> ``matmul_bias_kernel``), by launch order
    among the unmatched ones. Pairs in the new report's order."""
    pairs: dict[int, IRKernel] = {}
    used: set[int] = set()
    for i, k in enumerate(new.kernels):
        other = old.kernel(k.label) or old.kernel(k.name)
        if other is not None and id(other) not in used:
            pairs[i] = other
            used.add(id(other))
    left_old = sorted((k for k in old.kernels if id(k) not in used), key=lambda k: k.launch)
    left_new = sorted((i for i in range(len(new.kernels)) if i not in pairs), key=lambda i: new.kernels[i].launch)
    for i, other in zip(left_new, left_old):
        pairs[i] = other
    return [(pairs[i], new.kernels[i]) for i in range(len(new.kernels)) if i in pairs]


def resource_compare_rows(old: IRReport, new: IRReport, *, old_name: str = "before",
                          new_name: str = "after") -> list[dict[str, Any]]:
    """The compiler's resources of both versions, one row per kernel pair (:func:`pair_kernels`,
    renamed kernels included): ``kernel`` (``old -> new`` when renamed), then registers, spills,
    shared memory, num_warps and num_stages as ``before -> after`` (one value when equal);
    kernels of one version only get a row with the other side ``—``."""
    old_rows = {k.label: r for k, r in zip(old.kernels, resource_rows(old))}
    new_rows = {k.label: r for k, r in zip(new.kernels, resource_rows(new))}
    fields = ("registers", "spills", "shared memory", "num_warps", "num_stages")
    missing = {f: units.MISSING for f in fields}

    def row(name: str, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"kernel": name}
        for f in fields:
            out[f] = a[f] if a[f] == b[f] else f"{a[f]} → {b[f]}"
        out["error"] = b.get("error") or a.get("error") or ""
        return out

    pairs = pair_kernels(old, new)
    rows = [row(n.label if o.name == n.name else f"{o.label} → {n.label} (renamed)", old_rows[o.label],
                new_rows[n.label]) for o, n in pairs]
    paired_old = {o.label for o, _ in pairs}
    paired_new = {n.label for _, n in pairs}
    rows += [row(f"{label} (only in {new_name})", missing, r) for label, r in new_rows.items()
             if label not in paired_new]
    rows += [row(f"{label} (only in {old_name})", r, missing) for label, r in old_rows.items()
             if label not in paired_old]
    return rows
