"""`ifsweep benchmarks check`: load a data set the way a run would, validate it, and count it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchmarks
from benchmarks import Instance
from runner.errors import UsageError


@dataclass(slots=True)
class Counts:
    instances: int = 0
    groups: int = 0
    constraints: int = 0
    by_category: Counter[str] = field(default_factory=Counter)
    by_level: Counter[str] = field(default_factory=Counter)
    by_split: Counter[str] = field(default_factory=Counter)
    by_priority: Counter[str] = field(default_factory=Counter)
    sub_instructions: int = 0


def count_instances(instances: Iterable[Instance]) -> Counts:
    c = Counts()
    groups: set[str] = set()
    for inst in instances:
        c.instances += 1
        groups.add(inst.group_id)
        c.constraints += len(inst.constraints)
        if inst.category is not None:
            c.by_category[inst.category] += 1
        if inst.level is not None:
            c.by_level[str(inst.level)] += 1
        if inst.split is not None:
            c.by_split[inst.split] += 1
        for con in inst.constraints:
            if con.priority is not None:
                c.by_priority[con.priority] += 1
        c.sub_instructions += len({con.instruction_idx for con in inst.constraints if con.instruction_idx is not None})
    c.groups = len(groups)
    return c


def render_counts(name: str, where: str, c: Counts) -> str:
    lines = [
        f"{name} ({where})",
        f"  instances   {c.instances}",
        f"  groups      {c.groups}",
        f"  constraints {c.constraints}",
    ]
    if c.sub_instructions:
        lines.append(f"  sub-instructions {c.sub_instructions}")
    for title, counter in (
        ("category", c.by_category),
        ("level", c.by_level),
        ("split", c.by_split),
        ("priority", c.by_priority),
    ):
        if counter:
            lines.append(f"  by {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counter.items())))
    return "\n".join(lines)


def check_benchmark(name: str, data: Path | None, options: Mapping[str, Any]) -> str:
    if name not in benchmarks.names():
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(benchmarks.names())}")
    bench = benchmarks.get(name)
    unknown = set(options) - set(bench.options)
    if unknown:
        raise UsageError(f"{name} has no option {sorted(unknown)[0]!r}; options: {', '.join(sorted(bench.options))}")
    try:
        bench.validate_options(options)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if data is None:
        from runner.datasets import ensure_release

        data = ensure_release(name, bench.release)
    if not data.exists():
        raise UsageError(f"{data}: no such file or folder")
    return render_counts(name, str(data), count_instances(bench.load(data, options)))
