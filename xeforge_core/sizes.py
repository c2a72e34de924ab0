"""Sizes no tile hides a bug behind: the correctness variant ``<base>-tiles``, derived from what
the kernels do.

At sizes that are multiples of a kernel's tiles a dropped mask never matters (a 512x512x512
GEMM with 64x64x32 tiles runs no partial tile), at sizes of one tile a program-id or a
reduction bug never shows (an RMSNorm that divides by its tile width instead of its row width
is right when the row is one tile wide). So the verifier derives one more correctness size:

1. **probe** (the worker's ``sizes`` role; no kernel runs): the launches of the Triton baseline
   and the candidate at the first correctness variant, at a copy with each even size made odd,
   and at copies with one size at 2, 3, 4, 8 and 16 times its value (within the size budget):
   grids, integer arguments, constexprs (tile sizes; each autotune config's) and loop trips
   (``worker.tiles``). The reference runs for real at the odd copies, to learn whether the
   problem accepts them.
2. **choose** (``choose_sizes``): every size odd, so that no power-of-two tile (every
   ``tl.arange`` extent is one), and none of 16, 32, 64, 128 and 1024, divides a dimension made
   of sizes: the last tile of every masked loop and grid axis is partial. A size stays as
   checked where a kernel takes it as a constexpr (a tile extent that must stay a power of two)
   or the problem refuses it odd. Then for each grid axis that grows with a size and has fewer
   than ``MIN_PROGRAMS`` (3) programs, and each loop that grows with a size and runs fewer than
   ``MIN_TRIPS`` (2) trips (a reduction over a tiled loop covers at least two tiles), the size
   among those that drive it whose growth costs the fewest input elements is set to the
   smallest probed value that reaches the aim. Program counts and trips grow with sizes, so
   aims reached one size at a time hold together; the derived variant stays within the budget
   of ``xeforge_core.coverage`` (a few tiles, not the published size).
3. **check** (``coverage_of``): the candidate's launches at the derived size, recorded while
   its correctness is checked there, against those aims: what each kernel did is listed and
   any aim missed is named (``Verdict.sizes``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from xeforge_core.coverage import BUDGET_ELEMENTS, CPU_FLOP_BUDGET, MIN_PROGRAMS
from xeforge_core.errors import XeForgeError
from xeforge_core.problem.model import Problem, Variant
from xeforge_core.problem.scaling import size_values, variant_input_elements, variant_with_sizes
from xeforge_core.verdict import CheckedSize

#: Fewest trips a loop that grows with a size should run at the derived size (two, so that a
#: value carried from one trip to the next, and a partial last trip after a full one, are seen).
MIN_TRIPS = 2

#: Multiples of a size probed to find how far it must grow.
LADDER = (2, 3, 4, 8, 16)

#: Powers of two no dimension should be a multiple of, whatever the kernels' tiles (common
#: tile and vector widths: a sub-group of 16 or 32, 64- and 128-wide tiles, 1024-wide blocks).
COMMON_TILES = (16, 32, 64, 128, 1024)

#: Suffix of the derived variant's name.
SUFFIX = "-tiles"


def _odd(value: int) -> int:
    return value if value % 2 else value + 1


def _pow2(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def _fits(problem: Problem, variant: Variant, device_type: str) -> bool:
    elements = variant_input_elements(problem, variant)
    if elements is not None and elements > BUDGET_ELEMENTS["cpu" if device_type == "cpu" else "gpu"]:
        return False
    return not (device_type == "cpu" and variant.flop and variant.flop > CPU_FLOP_BUDGET)


@dataclass
class SizeProbe:
    """The sizes the ``sizes`` job probes: ``base`` (the first correctness variant) with its
    ``checked`` sizes, and ``points`` (``base`` first); ``moves`` maps each point's name to the
    (size, value) it changes (``("", 0)`` for ``base``); ``validity`` names the points the
    reference runs at too (``base`` and the odd copies)."""

    base: Variant
    checked: dict[str, int]
    points: list[Variant]
    moves: dict[str, tuple[str, int]]
    validity: list[str]


def plan_probe(problem: Problem, base: Variant, *, device_type: str) -> SizeProbe | None:
    """The points to probe around ``base`` (see the module docstring), within the size budget
    of ``device_type``; ``None`` when ``base`` has no sizes to move."""
    checked = size_values(problem, base)
    if not checked:
        return None
    points = [base]
    moves: dict[str, tuple[str, int]] = {base.name: ("", 0)}
    validity = [base.name]

    def add(size: str, value: int, name: str) -> bool:
        try:
            point = variant_with_sizes(problem, base, {size: value}, name)
        except XeForgeError:
            return False
        if not _fits(problem, point, device_type):
            return False
        points.append(point)
        moves[name] = (size, value)
        return True

    for size, value in checked.items():
        if value % 2 == 0 and add(size, value + 1, f"{base.name}-probe-{size}-odd"):
            validity.append(f"{base.name}-probe-{size}-odd")
        for m in LADDER:
            if not add(size, _odd(value * m), f"{base.name}-probe-{size}-x{m}"):
                break
    return SizeProbe(base=base, checked=checked, points=points, moves=moves, validity=validity)


@dataclass(frozen=True)
class Aim:
    """A program count or trip count the derived size should reach: grid axis ``index`` (kind
    ``grid``) or the loop at line ``index`` (kind ``loop``) of the ``occurrence``-th launch of
    ``kernel`` in one call of ``module``'s forward() (``config``: the autotune config, ``None``
    for the default one)."""

    module: str
    config: str | None
    kernel: str
    occurrence: int
    kind: str
    index: int
    target: int

    def text(self, *, where: bool = True) -> str:
        """``axis 0 of matmul_kernel``, ``the loop at line 31 of k (baseline, config k[BLOCK=64])``
        (the module and config named, with ``where``, unless the candidate's default)."""
        what = f"axis {self.index}" if self.kind == "grid" else f"the loop at line {self.index}"
        label = f" ({self.module}" + (f", config {self.config}" if self.config else "") + ")"
        return f"{what} of {self.kernel}{label if where and (self.module != 'candidate' or self.config) else ''}"


@dataclass
class TileChoice:
    """What ``choose_sizes`` decided: the derived ``variant`` (``None`` when the checked sizes
    need nothing more, or nothing can be derived: ``why`` says which), the reason per size
    (``reasons``), the aims the candidate's default config should reach there (``aims``), the
    integer arguments of each kernel that move with the sizes (``moving``: the dimensions no
    tile should divide), and the aims no size within the budget reaches (``gaps``)."""

    variant: Variant | None
    why: str
    reasons: dict[str, str] = field(default_factory=dict)
    aims: list[Aim] = field(default_factory=list)
    moving: dict[str, list[str]] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    #: per candidate grid axis (``"kernel/occurrence/axis"``), the integer arguments that grew
    #: whenever its program count did: the dimension the axis tiles
    axis_dims: dict[str, list[str]] = field(default_factory=dict)
    #: the candidate's constexprs, per kernel, that change with the sizes (a tile as wide as a
    #: dimension: ``next_power_of_2(n_cols)``)
    growing_tiles: dict[str, list[str]] = field(default_factory=dict)


def _index(evidence: dict[str, Any]) -> tuple[dict[tuple[str, str, str | None], list[dict[str, Any]]],
                                               dict[tuple[str, str], str]]:
    facts: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, str], str] = {}
    for rec in evidence.get("probes") or []:
        if "error" in rec:
            errors.setdefault((rec["point"], rec["module"]), str(rec["error"]))
        else:
            facts[(rec["point"], rec["module"], rec.get("config"))] = list(rec.get("facts") or [])
    return facts, errors


def _fact(facts: list[dict[str, Any]] | None, kernel: str, occurrence: int) -> dict[str, Any] | None:
    return next((f for f in facts or [] if f["kernel"] == kernel and f["occurrence"] == occurrence), None)


def _count(facts: list[dict[str, Any]] | None, kernel: str, occurrence: int, kind: str, index: int) -> int | None:
    for f in facts or []:
        if f["kernel"] != kernel or f["occurrence"] != occurrence:
            continue
        if kind == "grid":
            grid = f.get("grid")
            return int(grid[index]) if grid else None
        return next((int(loop["trips"]) for loop in f.get("loops") or [] if loop["line"] == index), None)
    return None


def _tiles(fact: dict[str, Any]) -> dict[str, int]:
    """A launch's tiles: the constexprs its kernel uses as one (``worker.tiles``), else (source
    not read) its power-of-two integer constexprs."""
    tiles = fact.get("tiles")
    if tiles is None:
        tiles = {n: v for n, v in (fact.get("constants") or {}).items() if _pow2(int(v)) and int(v) >= 2}
    return {n: int(v) for n, v in tiles.items()}


def _tiles_of(facts: list[dict[str, Any]]) -> dict[str, int]:
    """The tiles of the launches, by name (the largest value of each)."""
    out: dict[str, int] = {}
    for f in facts:
        for name, value in _tiles(f).items():
            out[name] = max(out.get(name, 0), value)
    return out


def _pinned(probe: SizeProbe, facts: dict[tuple[str, str, str | None], list[dict[str, Any]]],
            errors: dict[tuple[str, str], str]) -> dict[str, str]:
    """The sizes that must keep their checked value, with why: the problem or a kernel refuses
    them odd, or a kernel takes one as a constexpr that stops being a power of two."""
    out: dict[str, str] = {}
    base = probe.base.name
    for point, (size, value) in probe.moves.items():
        if not point.endswith("-odd"):
            continue
        failed = next(((m, e) for (p, m), e in errors.items() if p == point), None)
        if failed:
            out[size] = f"{size} stays {probe.checked[size]}: at {size}={value} the {failed[0]} fails ({failed[1]})"
            continue
        for (p, module, config), got in facts.items():
            if p != point or config is not None:
                continue
            before = {(f["kernel"], f["occurrence"]): f for f in facts.get((base, module, None), [])}
            for f in got:
                old = before.get((f["kernel"], f["occurrence"]))
                for name, v in (f.get("constants") or {}).items():
                    if old is not None and (old.get("constants") or {}).get(name) != v and not _pow2(int(v)):
                        out[size] = (f"{size} stays {probe.checked[size]}: {f['kernel']} takes it as the constexpr "
                                     f"{name}, a tile extent that must stay a power of two")
    return out


def _axis_key(kernel: str, occurrence: int, axis: int) -> str:
    return f"{kernel}/{occurrence}/{axis}"


def _note_axis_dims(out: dict[str, list[str]], aim: Aim, before: dict[str, Any], after: dict[str, Any] | None) -> None:
    """Keep, for ``aim``'s axis, the integer arguments that changed from ``before`` to ``after``
    (intersected with those kept from earlier growths)."""
    if after is None:
        return
    old, new = before.get("scalars") or {}, after.get("scalars") or {}
    changed = [n for n, v in new.items() if old.get(n) != v]
    key = _axis_key(aim.kernel, aim.occurrence, aim.index)
    out[key] = [n for n in out[key] if n in changed] if key in out else changed


def _moving(probe: SizeProbe, facts: dict[tuple[str, str, str | None], list[dict[str, Any]]],
            kind: str = "scalars") -> dict[str, list[str]]:
    """The candidate's integer arguments (``kind`` ``scalars``) or integer constexprs
    (``constants``), per kernel, whose value changes with some size."""
    base = {(f["kernel"], f["occurrence"]): f for f in facts.get((probe.base.name, "candidate", None), [])}
    out: dict[str, set[str]] = {}
    for (point, module, config), got in facts.items():
        if module != "candidate" or config is not None or point == probe.base.name:
            continue
        for f in got:
            old = base.get((f["kernel"], f["occurrence"]))
            if old is None:
                continue
            for name, v in (f.get(kind) or {}).items():
                if (old.get(kind) or {}).get(name) != v:
                    out.setdefault(f["kernel"], set()).add(name)
    return {k: sorted(v) for k, v in out.items()}


def choose_sizes(problem: Problem, probe: SizeProbe, evidence: dict[str, Any], *, device_type: str) -> TileChoice:
    """The derived variant ``<base>-tiles`` from the ``sizes`` job's ``evidence`` (see the module
    docstring).

    Args:
        problem: the problem (its spec or inputs module is resized).
        probe: the points that were probed (``plan_probe``).
        evidence: the ``sizes`` step's evidence (``worker.sizes``).
        device_type: ``cpu`` (the interpreter's budget) or a GPU type.
    """
    facts, errors = _index(evidence)
    base = probe.base.name
    for module in ("candidate", "baseline"):
        if (base, module) in errors:
            return TileChoice(None, f"the {module} fails at {base} ({errors[(base, module)]})")
    pinned = _pinned(probe, facts, errors)
    sizes = {s: (v if s in pinned else _odd(v)) for s, v in probe.checked.items()}
    reasons: dict[str, list[str]] = {}
    ladder: dict[str, list[tuple[int, str]]] = {}
    for point, (size, value) in probe.moves.items():
        if size and size not in pinned:
            ladder.setdefault(size, []).append((value, point))
    aims: list[Aim] = []
    gaps: list[str] = []
    grown: list[tuple[str, int]] = []
    axis_dims: dict[str, list[str]] = {}
    keys = sorted(k for k in facts if k[0] == base)
    for _, module, config in keys:
        for f in facts[(base, module, config)]:
            wanted = [("grid", i, MIN_PROGRAMS) for i in range(3) if f.get("grid")]
            wanted += [("loop", loop["line"], MIN_TRIPS) for loop in f.get("loops") or []]
            for kind, index, target in wanted:
                aim = Aim(module, config, f["kernel"], f["occurrence"], kind, index, target)
                c0 = _count([f], f["kernel"], f["occurrence"], kind, index) or 0
                options = []
                grows = False
                for size, steps in ladder.items():
                    for value, point in steps:
                        c = _count(facts.get((point, module, config)), aim.kernel, aim.occurrence, kind, index)
                        if c is not None and c > c0:
                            grows = True
                            if kind == "grid" and module == "candidate" and config is None:
                                _note_axis_dims(axis_dims, aim, f, _fact(facts.get((point, module, config)),
                                                                         aim.kernel, aim.occurrence))
                            if c >= target:
                                options.append((size, value, c))
                                break
                if not grows:
                    continue  # fixed by the problem, not by a size
                if module == "candidate" and config is None:
                    aims.append(aim)
                if c0 >= target:
                    continue
                if not options:
                    gaps.append(f"{aim.text()} grows with the sizes but reaches {target} "
                                f"{'programs' if kind == 'grid' else 'trips'} at no size within the budget")
                    continue

                def cost(option: tuple[str, int, int]) -> tuple[float, int]:
                    size, value, _ = option
                    trial = {**sizes, size: max(sizes[size], value)}
                    try:
                        v = variant_with_sizes(problem, probe.base, trial, "trial")
                    except XeForgeError:
                        return (math.inf, value)
                    return (float(variant_input_elements(problem, v) or 0), value)

                size, value, c = min(options, key=cost)
                if value > sizes[size]:
                    sizes[size] = value
                    grown.append((size, value))
                unit = "programs" if kind == "grid" else "trips"
                reasons.setdefault(size, []).append(f"{c} {unit} on {aim.text(where=False)} (fewer than {target} "
                                                    f"at {size}={probe.checked[size]})")
    variant = variant_with_sizes(problem, probe.base, sizes, probe.base.name + SUFFIX)
    while grown and not _fits(problem, variant, device_type):
        size, value = grown.pop()
        gaps.append(f"{size}={value} ({'; '.join(reasons.pop(size, []))}) is over the size budget")
        sizes[size] = _odd(probe.checked[size]) if size not in pinned else probe.checked[size]
        variant = variant_with_sizes(problem, probe.base, sizes, probe.base.name + SUFFIX)
    moving = _moving(probe, facts)
    growing = _moving(probe, facts, "constants")
    grows = {n for names in growing.values() for n in names}
    tiles = _tiles_of([f for (p, _, _), got in facts.items() if p == base for f in got])
    tile_text = ", ".join(f"{n}={v}" + (" at the checked size, growing with it" if n in grows else "")
                          for n, v in sorted(tiles.items()))
    why_size: dict[str, str] = {}
    for size, value in sizes.items():
        if size in pinned:
            why_size[size] = pinned[size]
        elif size in reasons:
            why_size[size] = f"{size}={value}: " + "; ".join(dict.fromkeys(reasons[size]))
        elif value != probe.checked[size]:
            why_size[size] = f"{size}={value}: odd, so no power-of-two tile divides it"
    if sizes == probe.checked:
        return TileChoice(None, f"the checked sizes of {base} already reach every aim", why_size, aims, moving, gaps,
                          axis_dims, growing)
    why = ("sizes no tile hides a bug behind: every size odd (no power-of-two tile divides it"
           + (f"; the kernels' tiles: {tile_text}" if tile_text else "") + ")"
           + "".join(f"; {why_size[s]}" for s in sizes if s in why_size and (s in reasons or s in pinned)))
    variant.derived = why
    return TileChoice(variant, why, why_size, aims, moving, gaps, axis_dims, growing)


def _partial_axis(fact: dict[str, Any], axis: int, dims: list[str]) -> str:
    """``" of BLOCK_M=64 over M=161, the last 33 wide"`` when an integer argument in ``dims``
    (those that grew with the axis) and a tile of the launch explain the axis's program count
    (``cdiv(M, BLOCK_M)``), else ``""``."""
    count = int(fact["grid"][axis])
    known = (fact.get("axis_tiles") or {}).get(str(axis))
    tiles = {known: fact["constants"][known]} if known else _tiles(fact)
    for name in dims:
        d = (fact.get("scalars") or {}).get(name)
        for tname, b in tiles.items():
            if d and b and int(b) > 1 and -(-int(d) // int(b)) == count:
                last = int(d) - (count - 1) * int(b)
                return f" of {tname}={b} over {name}={d}, the last {last} wide"
    return ""


def _one_tile(fact: dict[str, Any], tiles: list[str], moving: list[str]) -> list[str]:
    """``"BLOCK=128 spans n_cols=65 in one tile (63 lanes masked)"`` for each tile that grows
    with the sizes and is the next power of two of a moving integer argument."""
    out = []
    for tname in tiles:
        b = (fact.get("constants") or {}).get(tname)
        for name in moving:
            d = (fact.get("scalars") or {}).get(name)
            if b and d and _pow2(int(b)) and int(d) <= int(b) < 2 * int(d):
                out.append(f"{tname}={b} spans {name}={d} in one tile ({int(b) - int(d)} lanes masked)")
                break
    return out


def coverage_of(choice: TileChoice, facts: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """``(coverage, gaps)`` of the candidate's launches at the derived size (``facts``: launch
    facts of its default config's run there): one line per kernel launch on what it did (grid
    programs, with the tile and dimension behind an axis where known; loop trips, whether the
    last is partial), and the aims of ``choice`` it missed, with the moving integer arguments a
    tile (or one of ``COMMON_TILES``) divides."""
    lines: list[str] = []
    gaps: list[str] = []
    for f in facts:
        moving = choice.moving.get(f["kernel"], [])
        parts = []
        grid = f.get("grid")
        if grid:
            axes = [f"axis {i}: {int(g)} program{'s' if int(g) != 1 else ''}"
                    + _partial_axis(f, i, choice.axis_dims.get(_axis_key(f["kernel"], f["occurrence"], i), []))
                    for i, g in enumerate(grid) if int(g) > 1 or i == 0]
            parts.append("grid " + "x".join(str(int(g)) for g in grid) + " (" + "; ".join(axes) + ")")
        parts += _one_tile(f, choice.growing_tiles.get(f["kernel"], []), moving)
        for loop in f.get("loops") or []:
            last = {True: ", the last partial", False: ", the last full", None: ""}[loop.get("partial")]
            parts.append(f"loop at line {loop['line']}: {loop['trips']} trip{'s' if loop['trips'] != 1 else ''} "
                         f"of {loop['step']} over {loop['extent']}{last}")
        tiles_text = ", ".join(f"{n}={v}" for n, v in (f.get("constants") or {}).items())
        label = f["kernel"] + (f" (launch {f['occurrence'] + 1})" if f["occurrence"] else "") + \
            (f" [{tiles_text}]" if tiles_text else "")
        lines.append(f"{label}: " + ("; ".join(parts) if parts else "no grid or loop read"))
        tiles = sorted(set(_tiles(f).values()) | set(COMMON_TILES))
        for name in moving:
            d = (f.get("scalars") or {}).get(name)
            divides = [t for t in tiles if d and t <= d and d % t == 0]
            if divides:
                gaps.append(f"{f['kernel']}: {name}={d} is a multiple of {max(divides)}")
    for aim in choice.aims:
        c = _count(facts, aim.kernel, aim.occurrence, aim.kind, aim.index)
        if c is None:
            gaps.append(f"{aim.text()} was not seen at the derived size")
        elif c < aim.target:
            unit = "program" if aim.kind == "grid" else "trip"
            gaps.append(f"{aim.text()} ran {c} {unit}{'s' if c != 1 else ''} (aim: at least {aim.target})")
        elif aim.kind == "loop":
            loop = next((lp for f in facts if f["kernel"] == aim.kernel and f["occurrence"] == aim.occurrence
                         for lp in f.get("loops") or [] if lp["line"] == aim.index), None)
            if loop is not None and loop.get("partial") is False:
                gaps.append(f"{aim.text()} ends on a full tile ({loop['extent']} is a multiple of {loop['step']})")
    return lines, list(dict.fromkeys(gaps + choice.gaps))


def _shown(problem: Problem, variant: Variant) -> dict[str, Any]:
    return dict(size_values(problem, variant) or variant.dims or variant.overrides)


def checked_sizes(problem: Problem, variants: list[Variant], choice: TileChoice | None,
                  launches: dict[str, list[dict[str, Any]]]) -> list[CheckedSize]:
    """The ``Verdict.sizes`` entries: one per correctness variant, with its sizes and why it was
    checked; the variant ``choice`` derived (or, where the checked sizes needed nothing more,
    the first variant) also with the coverage the candidate's launches there reached
    (``launches``: ``{variant: launch facts}`` of the candidate job)."""
    out = []
    for i, v in enumerate(variants):
        if v.derived:
            why = v.derived
        elif problem.spec is not None:
            why = f"the spec's {v.name} variant"
        else:
            why = "the published sizes"
        entry = CheckedSize(variant=v.name, sizes=_shown(problem, v), why=why)
        covered = choice is not None and ((choice.variant is not None and v.name == choice.variant.name)
                                          or (choice.variant is None and i == 0))
        if covered and choice is not None:
            if choice.variant is None:
                entry.why += f"; {choice.why}"
            entry.coverage, entry.gaps = coverage_of(choice, launches.get(v.name) or [])
        out.append(entry)
    return out
