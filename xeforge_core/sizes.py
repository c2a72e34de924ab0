"""Sizes no tile hides a bug behind: the correctness variant ``<base>-tiles``, derived from what
the kernels do.

At sizes that are multiples of a kernel's tiles a dropped mask never matters (a 512x512x512
GEMM with 64x64x32 tiles runs no partial tile), at sizes of one tile a program-id or a
reduction bug never shows (an RMSNorm that divides by its tile width instead of its row width
is right when the row is one tile wide). So the verifier derives one more correctness size:

1. **probe** (the worker's ``sizes`` role; no kernel runs): the launches of the Triton baseline
   and the candidate at the first correctness variant, and at copies with one size changed:
   made ragged (``_ragged``), divided by 2, 4, 8 and 16 (not below 3), multiplied by 2, 3, 4, 8
   and 16, each of those made ragged too (within
   ``PROBE_BUDGET_FACTOR`` times the size budget: no kernel runs there): grids, integer
   arguments, constexprs (tile sizes; each autotune config's) and loop trips (``worker.tiles``).
   The reference runs for real at the ragged and the smaller copies, to learn whether the problem
   accepts them.
2. **choose** (``choose_sizes``): every size odd, so that no power-of-two tile (every
   ``tl.arange`` extent is one), and none of 16, 32, 64, 128 and 1024, divides a dimension made
   of sizes: the last tile of every masked loop and grid axis is partial; and each size of 8 or
   more 3 or 5 modulo 8 (``_ragged``: the probe's values are such), so the last tile a size sets
   alone is neither 1 nor all but 1 wide for any power-of-two tile from 8 up (2^k + 1, the odd copy
   of a power of two, leaves one element in the last tile of every tile width; a product of such
   sizes, a flattened count, may still). A size stays as
   checked where a kernel takes it as a constexpr (a tile extent that must stay a power of two)
   or the problem refuses its ragged copy. The aims: each grid axis whose program count some size
   changes should have ``MIN_PROGRAMS`` (3) programs, each loop whose trips some size changes
   ``MIN_TRIPS`` (2) trips (so a reduction over a tiled loop covers at least two tiles). A size
   that alone drives all its aims (a GEMM's M, its grid axis 0) takes the smallest probed value
   that reaches them, smaller than checked where a few tiles do: its aims' counts do not depend
   on the other sizes, so they hold at the derived size exactly. A size that shares an aim with
   others (the rows and columns of a flattened element count) is never made smaller, and where
   the aim is not reached, the sharing size whose growth costs the fewest input elements is
   grown to the smallest probed value that reaches it alone: counts only grow with sizes, so it
   holds together. Where correctness runs at reduced sizes (``module-small``), a size the
   reduction took below a tile the kernels fix (one no size moves) that the published size
   exceeds is grown just past that tile: a kernel that reads one tile of a row and no more is
   right at every reduced size and wrong at the published one. The derived variant stays
   within the budget of ``xeforge_core.coverage`` (a few tiles, not the published size): the
   sizes grown most give way first, and say so.
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

#: Divisors of a size probed to find how far it may shrink (never below 3): where a few tiles
#: reach every aim, the derived size costs less than the checked one.
SHRINK = (16, 8, 4, 2)

#: A probe point runs no kernel (its inputs are made, its host code runs): it may hold this many
#: times the input elements a checked size may.
PROBE_BUDGET_FACTOR = 8

#: Powers of two no dimension should be a multiple of, whatever the kernels' tiles (common
#: tile and vector widths: a sub-group of 16 or 32, 64- and 128-wide tiles, 1024-wide blocks).
COMMON_TILES = (16, 32, 64, 128, 1024)

#: Suffix of the derived variant's name.
SUFFIX = "-tiles"

#: Suffix of the variant at whole tiles (``whole_tile_variant``).
WHOLE_SUFFIX = "-whole"


def _odd(value: int) -> int:
    return value if value % 2 else value + 1


def _ragged(value: int) -> int:
    """The smallest value from ``value`` up whose last tile is ragged for every power-of-two tile
    from 8 up: 3 or 5 modulo 8, so the last partial tile is neither 1 nor all but 1 wide (an odd
    size made from a power of two, 2^k + 1, leaves a tail of one element in every tile, where a
    kernel wrong only for tails of two or more passes). Values below 8 are only made odd."""
    if value < 8:
        return _odd(value)
    while value % 8 not in (3, 5):
        value += 1
    return value


def _pow2(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def _fits(problem: Problem, variant: Variant, device_type: str, *, probe: bool = False) -> bool:
    """Whether ``variant`` is within the size budget of ``device_type`` (``probe``: of a dry
    probe, ``PROBE_BUDGET_FACTOR`` times larger, with no flop limit)."""
    elements = variant_input_elements(problem, variant)
    budget = BUDGET_ELEMENTS["cpu" if device_type == "cpu" else "gpu"] * (PROBE_BUDGET_FACTOR if probe else 1)
    if elements is not None and elements > budget:
        return False
    return probe or not (device_type == "cpu" and variant.flop and variant.flop > CPU_FLOP_BUDGET)


@dataclass
class SizeProbe:
    """The sizes the ``sizes`` job probes: ``base`` (the first correctness variant) with its
    ``checked`` sizes, and ``points`` (``base`` first); ``moves`` maps each point's name to the
    (size, value) it changes (``("", 0)`` for ``base``); ``odd`` names each size's ragged copy
    (``_ragged``: odd, and from 8 up 3 or 5 modulo 8) where the checked value is not one;
    ``validity`` names the points the reference runs at too (``base``, the ragged copies and the
    smaller sizes)."""

    base: Variant
    checked: dict[str, int]
    points: list[Variant]
    moves: dict[str, tuple[str, int]]
    odd: dict[str, str]
    validity: list[str]
    #: the points that grow a size (larger than its odd copy), in increasing order per size
    climbs: set[str] = field(default_factory=set)

    def point_data(self, data_of: Any = None) -> list[dict[str, Any]]:
        """The points as the ``sizes`` job takes them (``data_of``: a variant's job data,
        ``Variant.to_data`` by default), a growing point naming its size in ``probe_climb``."""
        out = []
        for point in self.points:
            data = data_of(point) if data_of is not None else point.to_data()
            if point.name in self.climbs:
                data["probe_climb"] = self.moves[point.name][0]
            out.append(data)
        return out


#: Most program-trips one forward call may run at the reduced correctness size on the CPU
#: (programs x the trips of their loops, summed over launches): Triton's interpreter pays about
#: 0.3-0.7 ms per program and per loop trip whatever the tile (an elementwise tile of 64 lanes,
#: measured on the development machine), and a verification calls forward() tens of times, so
#: 4096 keep a call within a few seconds.
INTERPRETER_MAX_PROGRAM_TRIPS = 4096

#: Most tile work one forward call may do there: programs x the elements of their tiles x their
#: loop trips, summed over launches (an elementwise kernel's element count; M*N*K for a tiled
#: GEMM). Twice a 512x512x512 GEMM, which the interpreter verifies in about a minute.
INTERPRETER_MAX_TILE_WORK = 1 << 28


@dataclass
class LaunchWork:
    """What one module's forward() launched at one size (``launched_work``): ``programs``
    (every launch's grid, summed), ``program_trips`` (programs x loop trips, summed),
    ``tile_work`` (programs x tile elements x loop trips, summed) and the module's label."""

    programs: int = 0
    program_trips: int = 0
    tile_work: int = 0
    module: str = ""

    def over_interpreter_budget(self) -> float:
        """How many times over the interpreter's per-call budget
        (``INTERPRETER_MAX_PROGRAM_TRIPS``, ``INTERPRETER_MAX_TILE_WORK``) this work is; at
        most 1.0 when within it."""
        return max(self.program_trips / INTERPRETER_MAX_PROGRAM_TRIPS, self.tile_work / INTERPRETER_MAX_TILE_WORK)

    def text(self) -> str:
        """``"the candidate launched 16384 programs (16384 program-trips, 1.7e+07 tile elements
        x trips) per call"``."""
        return (f"the {self.module} launched {self.programs} programs ({self.program_trips} program-trips, "
                f"{self.tile_work:.2g} tile elements x trips) per call")


def launched_work(evidence: dict[str, Any], point: str) -> LaunchWork:
    """The largest work one module's forward() launched at ``point`` in a ``sizes`` job's
    ``evidence`` (the unselected autotune config); empty when no probe of ``point`` recorded
    launches."""
    best = LaunchWork()
    for record in evidence.get("probes") or []:
        if record.get("point") != point or record.get("config") or "facts" not in record:
            continue
        programs = program_trips = work = 0
        for f in record["facts"]:
            grid = math.prod(int(g) for g in (f.get("grid") or [1]))
            # loops one after another (a softmax's passes) add up; a loop nested in another
            # rarely has bounds the launch's arguments alone give, so the sum is the estimate
            trips = max(1, sum(int(loop.get("trips") or 0) for loop in f.get("loops") or []))
            programs += grid
            program_trips += grid * trips
            work += grid * math.prod(_tiles(f).values()) * trips
        mine = LaunchWork(programs, program_trips, work, str(record.get("module", "")))
        if mine.over_interpreter_budget() > best.over_interpreter_budget():
            best = mine
    return best


def plan_probe(problem: Problem, base: Variant, *, device_type: str) -> SizeProbe | None:
    """The points to probe around ``base``: each size on its own made ragged (``_ragged``: odd,
    from 8 up 3 or 5 modulo 8), divided by each of ``SHRINK`` and multiplied by each of ``LADDER``
    (ragged values too, within the probe budget of ``device_type``); ``None`` when ``base`` has no
    sizes to move."""
    checked = size_values(problem, base)
    if not checked:
        return None
    points = [base]
    moves: dict[str, tuple[str, int]] = {base.name: ("", 0)}
    odd: dict[str, str] = {}
    validity = [base.name]
    climbs: set[str] = set()

    def add(size: str, value: int) -> str | None:
        name = f"{base.name}-probe-{size}-{value}"
        if name in moves:
            return name
        try:
            point = variant_with_sizes(problem, base, {size: value}, name)
        except XeForgeError:
            return None
        if not _fits(problem, point, device_type, probe=True):
            return None
        if value > checked[size] + 1:
            climbs.add(name)
        points.append(point)
        moves[name] = (size, value)
        return name

    for size, value in checked.items():
        if _ragged(value) != value and (name := add(size, _ragged(value))):
            odd[size] = name
            validity.append(name)
        for d in SHRINK:
            small = _ragged(max(3, value // d))
            if small < value and (name := add(size, small)):
                validity.append(name)
        for m in LADDER:
            if not add(size, _ragged(value * m)):
                break
    return SizeProbe(base=base, checked=checked, points=points, moves=moves, odd=odd,
                     validity=list(dict.fromkeys(validity)), climbs=climbs)


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
    #: the variant at whole tiles (``whole_tile_variant``), ``None`` where the checked sizes are
    #: whole tiles already, no size moves a tile, or it is over the size budget
    whole: Variant | None = None


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
    them at their ragged copy (odd; from 8 up, 3 or 5 modulo 8), or a kernel takes one as a constexpr tile (a ``tl.arange`` extent, a block's
    dimension: ``worker.tiles.tile_roles``) that stops being a power of two. A constexpr that only
    bounds a mask (Liger's ``n_cols: tl.constexpr``) does not pin its size."""
    out: dict[str, str] = {}
    base = probe.base.name
    for size, point in probe.odd.items():
        value = probe.moves[point][1]
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
                tiles = f.get("tiles")  # None where the kernel's source was not read: any constexpr
                for name, v in (f.get("constants") or {}).items():
                    if tiles is not None and name not in tiles:
                        continue  # a constexpr the kernel bounds a mask or a loop with may take any value
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


@dataclass
class _Series:
    """One aim's program or trip count at the base (``c0``) and at each probed value of each
    size that changes it (``by``: ``{size: {value: count}}``, the checked value included)."""

    aim: Aim
    c0: int
    by: dict[str, dict[int, int]]

    def reach(self) -> int:
        return max([self.c0] + [c for counts in self.by.values() for c in counts.values()])

    def goal(self) -> int:
        """The aim's target, or the most any probed size reaches (a best effort) when none does."""
        return min(self.aim.target, max(self.c0, self.reach()))


def _series(probe: SizeProbe, facts: dict[tuple[str, str, str | None], list[dict[str, Any]]],
            values: dict[str, list[tuple[int, str]]], axis_dims: dict[str, list[str]]) -> list[_Series]:
    """Every grid axis and loop of every launch at the base, with the sizes that change its count
    and the counts they give (axes and loops no size changes are left out: the problem fixes
    them); notes in ``axis_dims`` the integer arguments that grow with each candidate axis."""
    base = probe.base.name
    out = []
    for _, module, config in sorted((k for k in facts if k[0] == base), key=lambda k: (k[1], k[2] or "")):
        for f in facts[(base, module, config)]:
            wanted = [("grid", i, MIN_PROGRAMS) for i in range(3) if f.get("grid")]
            wanted += [("loop", loop["line"], MIN_TRIPS) for loop in f.get("loops") or []]
            for kind, index, target in wanted:
                aim = Aim(module, config, f["kernel"], f["occurrence"], kind, index, target)
                c0 = _count([f], aim.kernel, aim.occurrence, kind, index) or 0
                by: dict[str, dict[int, int]] = {}
                for size, steps in values.items():
                    counts = {probe.checked[size]: c0}
                    for value, point in steps:
                        got = facts.get((point, module, config))
                        c = _count(got, aim.kernel, aim.occurrence, kind, index)
                        if c is None:
                            continue
                        counts[value] = c
                        if c > c0 and kind == "grid" and module == "candidate" and config is None:
                            _note_axis_dims(axis_dims, aim, f, _fact(got, aim.kernel, aim.occurrence))
                    if len(set(counts.values())) > 1:
                        by[size] = counts
                if by:
                    out.append(_Series(aim, c0, by))
    return out


def _unit(kind: str, count: int) -> str:
    return ("program" if kind == "grid" else "trip") + ("s" if count != 1 else "")


def _distinct_axes(sizes: dict[str, int], pinned: dict[str, str], series: list[_Series],
                   reasons: dict[str, list[str]]) -> dict[str, int]:
    """Give the grid axes of one candidate launch different program counts, in place: two axes of
    one count hide swapped program ids (a 3 x 3 tile grid is the same either way). Where an axis
    has the count of an earlier axis of its launch and another size alone drives it, that size
    moves up to the next value the probe ran it at (alone: the problem does not tie it to the
    other) that gives its axis a count no other axis of the launch has, noted in ``reasons``;
    axes one size drives together are the problem's own (a square matrix) and stay. Only the
    sizes of such axes move, so the cost grows by one axis's factor. Returns the sizes moved,
    each with the value it had."""
    launches: dict[tuple[str, int], list[tuple[int, str, dict[int, int]]]] = {}
    for sr in series:
        a = sr.aim
        if a.kind == "grid" and a.module == "candidate" and a.config is None and len(sr.by) == 1:
            ((size, counts),) = sr.by.items()
            launches.setdefault((a.kernel, a.occurrence), []).append((a.index, size, counts))
    moved: dict[str, int] = {}
    for (kernel, _), axes in sorted(launches.items()):
        seen: dict[int, tuple[int, str]] = {}  # program count -> (axis, size)
        for index, size, counts in sorted(axes):
            count = counts.get(sizes[size])
            if count is None:
                continue
            if count in seen and seen[count][1] != size and size not in pinned:
                options = sorted(v for v, c in counts.items() if v > sizes[size] and v % 2 and c not in seen)
                if options:
                    (axis, other), was = seen[count], count
                    moved.setdefault(size, sizes[size])
                    sizes[size], count = options[0], counts[options[0]]
                    reasons.setdefault(size, []).append(
                        f"{count} programs on axis {index} of {kernel}, not the {was} of axis {axis} ({other}), so "
                        "swapped program ids show")
            seen.setdefault(count, (index, size))
    return moved


def _distinct_sizes(sizes: dict[str, int], pinned: dict[str, str], values: dict[str, list[tuple[int, str]]],
                    reasons: dict[str, list[str]]) -> dict[str, int]:
    """Give sizes that are equal different values, in place: two sizes of one value hide a kernel
    that reads one for the other (a Linear layer's in and out features, a square GEMM's K and N
    as separate constants, C_in and C_out), and the odd copies of equal published sizes are equal
    again. Where a size has the value of an earlier one, it moves up to the next odd value the
    probe ran it at alone (so the problem accepts it without the other; a problem that ties the
    two, a residual ``x + fc(x)``, refused those and the sizes stay equal), noted in ``reasons``.
    Returns the sizes moved, each with the value it had."""
    moved: dict[str, int] = {}
    taken: dict[int, str] = {}
    for size in sizes:
        value = sizes[size]
        if value in taken and size not in pinned and value > 1:
            used = set(taken) | set(sizes.values())
            options = sorted(v for v, _ in values.get(size, []) if v > value and v % 2 and v not in used)
            if options:
                moved[size] = value
                sizes[size] = options[0]
                reasons.setdefault(size, []).append(
                    f"{options[0]}, not the {value} of {taken[value]}, so a kernel that reads one for the other shows")
        taken.setdefault(sizes[size], size)
    return moved


def choose_sizes(problem: Problem, probe: SizeProbe, evidence: dict[str, Any], *, device_type: str) -> TileChoice:
    """The derived variant ``<base>-tiles`` from the ``sizes`` job's ``evidence`` (see the module
    docstring). Each size is odd; a size that alone drives its aims (a GEMM's M and grid axis
    0) takes the smallest probed value that reaches them, which may be below the checked one; a
    size that shares an aim with others (rows and columns of a flattened element count) is not
    made smaller, and is grown, cheapest first, where the aim is not reached.

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
    failed = {point for point, _ in errors}
    values: dict[str, list[tuple[int, str]]] = {}
    for point, (size, value) in probe.moves.items():
        if size and size not in pinned and point not in failed:
            values.setdefault(size, []).append((value, point))
    axis_dims: dict[str, list[str]] = {}
    series = _series(probe, facts, values, axis_dims)
    shared = {size for sr in series if len(sr.by) > 1 for size in sr.by}
    sizes = {s: (v if s in pinned else _ragged(v)) for s, v in probe.checked.items()}
    reasons: dict[str, list[str]] = {}
    gaps = [f"{sr.aim.text()} reaches {sr.reach()} {_unit(sr.aim.kind, sr.reach())} at most at the sizes probed "
            f"(aim: {sr.aim.target})" for sr in series if sr.reach() < sr.aim.target]

    # a size that alone drives its aims: the smallest value that reaches all of them
    for size in values:
        own = [sr for sr in series if set(sr.by) == {size}]
        if not own:
            continue
        floor = sizes[size] if size in shared else 3
        chosen = sizes[size] if size in shared else None
        for sr in own:
            counts = sr.by[size]
            fit = [v for v, c in sorted(counts.items()) if v >= floor and v % 2 and c >= sr.goal()]
            if fit:
                chosen = max(chosen or 0, fit[0])
        if chosen is None:
            continue
        sizes[size] = chosen
        for sr in own:
            c = sr.by[size].get(chosen)
            if c is not None and (sr.c0 < sr.aim.target or chosen < probe.checked[size]):
                reasons.setdefault(size, []).append(
                    f"{c} {_unit(sr.aim.kind, c)} on {sr.aim.text(where=False)} ({sr.c0} at {size}="
                    f"{probe.checked[size]})")

    # an aim sizes share: a lower bound of its count is the most any one of them gives alone
    grown: list[tuple[str, int]] = []
    for sr in series:
        if len(sr.by) < 2:
            continue
        now = max(sr.by[d].get(sizes[d], sr.c0) for d in sr.by)
        if now >= sr.goal():
            continue
        options = [(d, v, c) for d, counts in sr.by.items() for v, c in counts.items()
                   if v >= sizes[d] and v % 2 and c >= sr.goal()]
        if not options:
            continue

        def cost(option: tuple[str, int, int]) -> tuple[float, int]:
            size, value, _ = option
            try:
                v = variant_with_sizes(problem, probe.base, {**sizes, size: value}, "trial")
            except XeForgeError:
                return (math.inf, value)
            return (float(variant_input_elements(problem, v) or 0), value)

        size, value, c = min(options, key=cost)
        sizes[size] = value
        grown.append((size, value))
        reasons.setdefault(size, []).append(f"{c} {_unit(sr.aim.kind, c)} on {sr.aim.text(where=False)} "
                                            f"({sr.c0} at {size}={probe.checked[size]})")

    # a tile the kernels fix (one no size moves) that the published size exceeds and the reduced
    # one does not: past it a kernel needs a loop, more programs or a mask it may lack
    growing = _moving(probe, facts, "constants")
    grows = {n for names in growing.values() for n in names}
    fixed = {n: v for n, v in _tiles_of([f for (p, m, c), got in facts.items() if p == base and m == "candidate"
                                         for f in got]).items() if n not in grows and v >= 8}
    for size, value in _published_sizes(problem, probe).items():
        if size in pinned or size not in sizes:
            continue
        crossed = [(v, n) for n, v in fixed.items() if sizes[size] <= v < value]
        if crossed:
            tile, name = max(crossed)
            sizes[size] = _ragged(tile + 1)
            grown.append((size, sizes[size]))
            reasons.setdefault(size, []).append(
                f"past the fixed tile {name}={tile}, as the published {size}={value} is")

    distinct = _distinct_axes(sizes, pinned, series, reasons)
    distinct.update({k: v for k, v in _distinct_sizes(sizes, pinned, values, reasons).items() if k not in distinct})
    variant = variant_with_sizes(problem, probe.base, sizes, probe.base.name + SUFFIX)
    while distinct and not _fits(problem, variant, device_type):  # over the budget: distinctness goes first
        size, value = distinct.popitem()
        gaps.append(f"{size}={sizes[size]} (a program count of its own on its axis) is over the size budget")
        sizes[size] = value
        reasons[size] = [r for r in reasons.get(size, []) if "swapped program ids" not in r]
        variant = variant_with_sizes(problem, probe.base, sizes, probe.base.name + SUFFIX)
    raised = [size for size, _ in grown] + sorted(
        (size for size in sizes if size not in pinned and sizes[size] > _ragged(probe.checked[size])),
        key=lambda size: sizes[size] / probe.checked[size])
    while raised and not _fits(problem, variant, device_type):
        size = raised.pop()  # the last grown, else the size grown most
        if sizes[size] <= _ragged(probe.checked[size]):
            continue
        gaps.append(f"{size}={sizes[size]} ({'; '.join(reasons.pop(size, []))}) is over the size budget")
        sizes[size] = _ragged(probe.checked[size])
        variant = variant_with_sizes(problem, probe.base, sizes, probe.base.name + SUFFIX)
    if not _fits(problem, variant, device_type):
        return TileChoice(None, f"no size derived from the tiles of {base} fits the size budget", gaps=gaps)
    aims = [sr.aim for sr in series if sr.aim.module == "candidate" and sr.aim.config is None]
    moving = _moving(probe, facts)
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
            why_size[size] = (f"{size}={value}: odd, so no power-of-two tile divides it"
                              + (", and 3 or 5 modulo 8, so no tile it sets alone ends 1 wide" if value >= 8 else ""))
    whole, whole_gap = whole_tile_variant(problem, probe, facts, series, pinned, device_type=device_type,
                                          independent=set(values))
    gaps += [whole_gap] if whole_gap else []
    if sizes == probe.checked:
        return TileChoice(None, f"the checked sizes of {base} already reach every aim", why_size, aims, moving, gaps,
                          axis_dims, growing, whole)
    why = ("sizes no tile hides a bug behind: every size odd (no power-of-two tile divides it; from 8 up "
           "3 or 5 modulo 8, so no tile of 8 or more that one size sets ends 1 or all but 1 wide"
           + (f"; the kernels' tiles: {tile_text}" if tile_text else "") + ")"
           + "".join(f"; {why_size[s]}" for s in sizes if s in why_size and (s in reasons or s in pinned)))
    variant.derived = why
    return TileChoice(variant, why, why_size, aims, moving, gaps, axis_dims, growing, whole)


def _published_sizes(problem: Problem, probe: SizeProbe) -> dict[str, int]:
    """The sizes of the variant the probe's base was reduced from (``module`` for
    ``module-small``, ``X`` for ``X-small``), or ``{}`` where the base is not a reduced copy."""
    name = probe.base.name
    if not name.endswith("-small"):
        return {}
    try:
        return size_values(problem, problem.variant(name.removesuffix("-small")))
    except XeForgeError:
        return {}


def _aim_tile(base_facts: list[dict[str, Any]], aim: Aim) -> int:
    """The tile of a candidate aim at the base (``base_facts``: the candidate's default config's
    launches there): a grid axis's tile (``axis_tiles``; an axis whose tile the source does not
    show, as tile rows from ``pid // group`` in Triton's grouped ordering, the widest tile of its
    launch), a loop's step; 1 where there is none, or the aim is another module's or config's."""
    f = _fact(base_facts, aim.kernel, aim.occurrence) if aim.module == "candidate" and aim.config is None else None
    if f is None:
        return 1
    if aim.kind == "grid":
        name = (f.get("axis_tiles") or {}).get(str(aim.index))
        return int((f.get("constants") or {}).get(name, 1)) if name else max(_tiles(f).values(), default=1)
    loop = next((lp for lp in f.get("loops") or [] if lp["line"] == aim.index), None)
    return int(loop.get("step") or 1) if loop else 1


def _counted_tile(sr: _Series) -> int | None:
    """The tile a grid axis moved by one size alone counts, read from its program counts: the
    smallest power of two ``t`` with ``cdiv(value, t)`` programs at every probed value of the size,
    or that count rounded up to a multiple of a power of two ``m`` up to 64 the same at every value
    (1 for an axis of one program per row: ``grid = (n_rows,)``, or ``cdiv(n_rows, 4) * 4`` with
    the extra programs returning); ``None`` where several sizes move the axis (a grouped
    ordering's tiles of two dimensions) or no power of two fits."""
    if sr.aim.kind != "grid" or len(sr.by) != 1:
        return None
    (counts,) = sr.by.values()
    if any(v <= 0 for v in counts):
        return None
    t = 1
    while t <= max(counts):
        for m in (1, 2, 4, 8, 16, 32, 64):
            if all(_round_up(_round_up(v, t) // t, m) == c for v, c in counts.items()):
                return t
        t *= 2
    return None


def _size_tiles(probe: SizeProbe, facts: dict[tuple[str, str, str | None], list[dict[str, Any]]],
                series: list[_Series]) -> dict[str, list[tuple[int, bool]]]:
    """Per size, the tiles of the candidate's default config that it moves at the base, each with
    whether the size alone moves it: a grid axis's or a loop's (``_aim_tile``; a grid axis whose
    tile the source does not show, moved by one size alone, the tile its program counts show,
    ``_counted_tile``), alone where no other size changes that axis or loop; a constexpr that
    changes with the size, as ``next_power_of_2(n_cols)`` does, alone."""
    base_facts = facts.get((probe.base.name, "candidate", None), [])
    tiles: dict[str, list[tuple[int, bool]]] = {}
    for sr in series:
        base = _fact(base_facts, sr.aim.kernel, sr.aim.occurrence)
        shown = sr.aim.kind != "grid" or (base is not None and str(sr.aim.index) in (base.get("axis_tiles") or {}))
        own = sr.aim.module == "candidate" and sr.aim.config is None  # as _aim_tile: the candidate's default config
        counted = _counted_tile(sr) if own and not shown else None
        tile = counted if counted is not None else _aim_tile(base_facts, sr.aim)
        if tile >= 2:
            for size in sr.by:
                tiles.setdefault(size, []).append((tile, len(sr.by) == 1))
    before = {(f["kernel"], f["occurrence"]): f for f in base_facts}
    for point, (size, _) in probe.moves.items():
        for f in facts.get((point, "candidate", None), []) if size else []:
            old = before.get((f["kernel"], f["occurrence"]))
            for name, value in ((old or {}).get("constants") or {}).items():
                if _pow2(int(value)) and int(value) >= 2 and (f.get("constants") or {}).get(name) != value:
                    tiles.setdefault(size, []).append((int(value), True))
    return tiles


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def whole_tile_variant(problem: Problem, probe: SizeProbe,
                       facts: dict[tuple[str, str, str | None], list[dict[str, Any]]], series: list[_Series],
                       pinned: dict[str, str], *, device_type: str,
                       independent: set[str] | None = None) -> tuple[Variant | None, str]:
    """``(<base>-whole, "")``: the checked sizes with each size that moves a tile of the candidate
    rounded up to a multiple of it, so that its tiled axes and loops end on a whole tile. A kernel
    wrong only there (a tail kernel launched only when ``n % BLOCK`` is not zero, with the whole
    tiles counted as ``(n - 1) // BLOCK``) passes at odd sizes; this size shows it. A tile the size
    alone drives (a GEMM's M and its grid axis, K and its loop step, ``n_cols`` and
    ``next_power_of_2(n_cols)``) is taken whole; one it shares with other sizes (a flattened
    element count) first to the largest power of two not above the size, then, where the product
    of the sharing sizes is still no multiple of the tile, the largest of them to what the product
    lacks. Sizes below 16 (the narrowest of ``COMMON_TILES``: a kernel size, a head count) and
    pinned ones stay. ``(None, "")`` where no size moves a tile or the checked sizes are whole
    tiles already; ``(None, why)`` where the variant is over the size budget (``_fits``). Extents
    the sizes do not make whole (a factor no size sets, a tile the probe could not name) show in
    the launches there (``whole_gaps``). A size left equal to an earlier one there, which the
    probe ran alone (``independent``), moves apart the other way round from the size derived
    from the tiles (:func:`_distinct_sizes` moves the later one up; here it goes down a tile,
    else up): a kernel that reads N for K is wrong only where N < K, so one of the two shows it."""
    whole = dict(probe.checked)
    steps: dict[str, int] = {}
    per_size = _size_tiles(probe, facts, series)
    movable = {size for size in per_size
               if size in probe.checked and size not in pinned and probe.checked[size] >= COMMON_TILES[0]}
    for size in sorted(movable):
        value = probe.checked[size]
        floor = 1 << (value.bit_length() - 1)
        steps[size] = max(tile if alone else min(tile, floor) for tile, alone in per_size[size])
        whole[size] = -(-value // steps[size]) * steps[size]
    base_facts = facts.get((probe.base.name, "candidate", None), [])
    for sr in series:  # a tile several sizes share: their product a multiple of it
        tile = _aim_tile(base_facts, sr.aim)
        if len(sr.by) < 2 or tile < 2:
            continue
        product = math.prod(whole[size] for size in sr.by if size in whole)
        grow = max((size for size in sr.by if size in movable), key=lambda size: whole[size], default=None)
        if grow is None or product % tile == 0:
            continue
        lacks = tile // math.gcd(tile, product // whole[grow])
        steps[grow] = steps[grow] * lacks // math.gcd(steps[grow], lacks)
        whole[grow] = -(-probe.checked[grow] // steps[grow]) * steps[grow]
    order = list(probe.checked)
    apart: list[str] = []
    for i, size in enumerate(order):  # a later size equal to an earlier one goes down a tile (else up)
        if size not in steps or size not in (independent or set()):
            continue
        earlier = {whole[other] for other in order[:i] if whole[other] > 1}
        if whole[size] not in earlier:
            continue
        step = steps[size]
        down = [v for v in range(whole[size] - step, max(step, COMMON_TILES[0]) - 1, -step) if v not in earlier]
        whole[size] = down[0] if down else next(v for v in range(whole[size] + step, whole[size] + step * (len(earlier) + 2),
                                                                 step) if v not in earlier)
        apart.append(size)
    notes = [f"{size}={whole[size]} (a multiple of {steps[size]}"
             + (", apart from a size it equalled" if size in apart else "") + ")" for size in sorted(steps)
             if whole[size] != probe.checked[size]]
    if not notes:
        return None, ""
    why = ("whole tiles: each size that moves a tile of the candidate rounded up to a multiple of it (" +
           ", ".join(notes) + "), so that its tiled axes and loops end on a whole tile, where a tail handled "
           "only when the size is not a multiple shows")
    try:
        variant = variant_with_sizes(problem, probe.base, whole, probe.base.name + WHOLE_SUFFIX, why)
    except XeForgeError as exc:
        return None, f"the size at whole tiles ({', '.join(notes)}) cannot be built: {exc}"
    if not _fits(problem, variant, device_type):
        return None, f"the size at whole tiles ({', '.join(notes)}) is over the size budget: not checked"
    return variant, ""


def whole_gaps(facts: list[dict[str, Any]], axis_dims: dict[str, list[str]]) -> list[str]:
    """What still ends on a partial tile in the candidate's launches at the size at whole tiles
    (``facts``: launch facts of its default config's run there; ``axis_dims``: the dimensions each
    grid axis tiles, ``TileChoice.axis_dims``): each loop whose last trip is partial, each grid
    axis whose last program covers less than its tile."""
    gaps = []
    for f in facts:
        for axis in range(len(f.get("grid") or [])):
            partial = _partial_axis(f, axis, axis_dims.get(_axis_key(f["kernel"], f["occurrence"], axis), []))
            if partial is not None and partial.last != partial.width:
                gaps.append(f"at whole tiles axis {axis} of {f['kernel']} still ends on a partial tile "
                            f"({partial.text()})")
        for loop in f.get("loops") or []:
            if loop.get("partial"):
                gaps.append(f"at whole tiles the loop at line {loop['line']} of {f['kernel']} still ends on a partial "
                            f"tile ({loop['extent']} over steps of {loop['step']})")
    return gaps


@dataclass(frozen=True)
class AxisTiling:
    """How a grid axis's program count is explained: ``cdiv(extent, width)`` programs of the tile
    ``tile`` (its constexpr name, ``width`` elements) over the integer argument ``dim``
    (``extent`` elements), the last program ``last`` elements wide."""

    tile: str
    width: int
    dim: str
    extent: int
    last: int

    def text(self) -> str:
        """``"of BLOCK_M=64 over M=161, the last 33 wide"``."""
        return f"of {self.tile}={self.width} over {self.dim}={self.extent}, the last {self.last} wide"


def _partial_axis(fact: dict[str, Any], axis: int, dims: list[str]) -> AxisTiling | None:
    """How an integer argument in ``dims`` (those that grew with the axis) and a tile of the
    launch explain the axis's program count (``cdiv(M, BLOCK_M)``), or ``None`` where none does."""
    count = int(fact["grid"][axis])
    known = (fact.get("axis_tiles") or {}).get(str(axis))
    tiles = {known: fact["constants"][known]} if known else _tiles(fact)
    for name in dims:
        d = (fact.get("scalars") or {}).get(name)
        for tname, b in tiles.items():
            if d and b and int(b) > 1 and -(-int(d) // int(b)) == count:
                return AxisTiling(tname, int(b), name, int(d), int(d) - (count - 1) * int(b))
    return None


def _axis_text(fact: dict[str, Any], axis: int, choice: TileChoice) -> str:
    partial = _partial_axis(fact, axis, choice.axis_dims.get(_axis_key(fact["kernel"], fact["occurrence"], axis), []))
    return " " + partial.text() if partial else ""


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
            aimed = {a.index for a in choice.aims if a.kind == "grid" and a.kernel == f["kernel"]
                     and a.occurrence == f["occurrence"]}
            for axis, tname in (f.get("axis_tiles") or {}).items():
                count, width = int(grid[int(axis)]), (f.get("constants") or {}).get(tname)
                if count < MIN_PROGRAMS and int(axis) not in aimed:
                    gaps.append(f"axis {axis} of {f['kernel']} ran {count} program{'s' if count != 1 else ''} of "
                                f"{tname}={width}: no size the verifier may move, within its budget, gave it "
                                f"{MIN_PROGRAMS}")
            axes = [f"axis {i}: {int(g)} program{'s' if int(g) != 1 else ''}" + _axis_text(f, i, choice)
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
            divides = [t for t in tiles if d and 1 < t <= d and d % t == 0]  # a 1-wide tile hides nothing
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
        if choice is not None and choice.whole is not None and v.name == choice.whole.name and v.name in launches:
            entry.gaps = whole_gaps(launches[v.name], choice.axis_dims)
        covered = choice is not None and ((choice.variant is not None and v.name == choice.variant.name)
                                          or (choice.variant is None and i == 0))
        if covered and choice is not None:
            if choice.variant is None:
                entry.why += f"; {choice.why}"
            if v.name in launches:
                entry.coverage, entry.gaps = coverage_of(choice, launches[v.name])
            else:  # the candidate never ran there (it failed earlier): only what was foreseen
                entry.gaps = list(choice.gaps)
        out.append(entry)
    return out
