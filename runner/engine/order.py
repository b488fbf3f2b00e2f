"""The order a sweep walks its plan in: seeded, stratified and interleaved, so that every prefix is a
fair sample of the whole plan.

A benchmark's instances fall into sampling units, the benchmark's own (`Instance.group_id`: a
FollowBench group with its five levels, an EIFBench task, a CFBench or InFoBench instance), and its
units into strata: the split where the benchmark has splits, else the category, and the level where
every instance of a unit has the same one. Within each stratum the units are shuffled by a seeded
generator; the strata are then merged in proportion to their sizes, and the benchmarks are merged in
proportion to their unit counts the same way (`proportional_merge`). So after any k units of a
benchmark, each of its strata has had its share of k to within one unit, and every benchmark is about
as far along as every other: what a budget stop, a Ctrl-C or `limit` leaves done is a stratified random
sample of the plan (docs/metrics.md says what the estimates of a partial run assume of it).

Every model walks the same order, so two models stopped at different points share the units of the
shorter prefix (a paired sample). The order depends only on the seed, the benchmark's report name and
its data, never on the models or the partition, so a resume and every partition see the same one.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ifsweep.benchmarks import Instance

__all__ = [
    "FILE_ORDER",
    "SEEDED_ORDER",
    "Unit",
    "generator",
    "interleave",
    "proportional_merge",
    "seeded_units",
    "strata_units",
    "stratum_of",
    "units_of",
]

SEEDED_ORDER = "seeded"
FILE_ORDER = "file"
ALL = "all"  # the stratum of a benchmark whose instances have neither split nor category


@dataclass(frozen=True, slots=True)
class Unit:
    """One sampling unit: its id, its stratum, and its instances' positions in file order."""

    unit_id: str
    stratum: str
    members: tuple[int, ...]


def stratum_of(instances: Sequence[Instance]) -> str:
    """A unit's stratum: split, else category (else "all"), then "/L<level>" when the unit's
    instances share one level (a FollowBench group spans levels 1-5, so its stratum has none)."""
    first = instances[0]
    name = first.split or first.category or ALL
    levels = {inst.level for inst in instances}
    if len(levels) == 1 and first.level is not None:
        name += f"/L{first.level}"
    return name


def units_of(instances: Iterable[Instance]) -> list[Unit]:
    """The units of a benchmark's instances, in the order each first appears."""
    members: dict[str, list[int]] = {}
    seen: dict[str, list[Instance]] = {}
    for i, inst in enumerate(instances):
        members.setdefault(inst.group_id, []).append(i)
        seen.setdefault(inst.group_id, []).append(inst)
    return [Unit(gid, stratum_of(seen[gid]), tuple(idx)) for gid, idx in members.items()]


def generator(seed: int, *names: str) -> random.Random:
    """A generator of its own per (seed, names): adding a benchmark to a config leaves the order of
    the others as it was."""
    digest = hashlib.sha256("\0".join([str(seed), *names]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def proportional_merge(sizes: Sequence[int], rng: random.Random) -> list[int]:
    """Merge groups of the given sizes into one sequence of group indices (group g appears sizes[g]
    times) so that every prefix of k items holds each group's k * size / total to within one item.
    Such a sequence exists (Tijdeman's chairman assignment theorem, 1980); treating the (s+1)-th item
    of group g as a job released at ceil(s * total / size) and due at floor((s+1) * total / size), the
    earliest deadline first finds one, ties broken at random."""
    total = sum(sizes)
    taken = [0] * len(sizes)
    ties = [rng.random() for _ in sizes]
    out: list[int] = []
    for k in range(1, total + 1):
        ready = [g for g, n in enumerate(sizes) if taken[g] < n and -(-taken[g] * total // n) <= k]
        g = min(ready, key=lambda g: ((taken[g] + 1) * total // sizes[g], ties[g]))
        taken[g] += 1
        out.append(g)
    return out


def seeded_units(units: Sequence[Unit], seed: int, label: str) -> list[Unit]:
    """A benchmark's units in its seeded stratified order (`label`: its report name)."""
    rng = generator(seed, label)
    strata: dict[str, list[Unit]] = {}
    for unit in units:
        strata.setdefault(unit.stratum, []).append(unit)
    names = sorted(strata)
    shuffled = [rng.sample(strata[name], len(strata[name])) for name in names]
    nexts = [0] * len(names)
    out = []
    for g in proportional_merge([len(s) for s in shuffled], rng):
        out.append(shuffled[g][nexts[g]])
        nexts[g] += 1
    return out


def interleave(unit_sizes: Sequence[Sequence[int]], seed: int) -> list[tuple[int, int]]:
    """The sweep's sequence of (benchmark index, instance position) pairs: the benchmarks' units
    merged in proportion to their counts, each unit's instances together. `unit_sizes[b]`: the
    instance count of each unit of benchmark b, in its order."""
    rng = generator(seed, "\0interleave")
    nexts = [0] * len(unit_sizes)
    positions = [0] * len(unit_sizes)
    out: list[tuple[int, int]] = []
    for b in proportional_merge([len(s) for s in unit_sizes], rng):
        size = unit_sizes[b][nexts[b]]
        out += [(b, positions[b] + k) for k in range(size)]
        nexts[b] += 1
        positions[b] += size
    return out


def strata_units(units: Iterable[Unit]) -> dict[str, tuple[str, ...]]:
    """The unit ids of each stratum, strata by name."""
    out: dict[str, list[str]] = {}
    for unit in units:
        out.setdefault(unit.stratum, []).append(unit.unit_id)
    return {name: tuple(ids) for name, ids in sorted(out.items())}
