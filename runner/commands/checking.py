"""`ifsweep benchmarks check`: load a data set the way a run would, validate it, and count it.

The counts are the ones a benchmark's paper publishes (instances, groups, constraints, and how they split
by category, level, split, priority and constraint type), so a wrong or partial download shows at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep import benchmarks
from ifsweep.benchmarks import Instance
from ifsweep.runner.commands.textwidth import ljust, width
from ifsweep.runner.engine.datasets import ensure_release
from ifsweep.runner.errors import UsageError

__all__ = ["Counts", "check_benchmark", "count_instances", "parse_options", "render_counts"]

# A dimension with more values than this (CFBench has about 200 domains) shows its largest ones and
# sums up the rest, so the table stays readable; the totals above it still count everything.
MAX_ROWS = 12


@dataclass(slots=True)
class Counts:
    """What one pass over a benchmark's instances found. Per-instance dimensions count instances and
    constraints; priority and constraint type are properties of a constraint, so count constraints only."""

    instances: int = 0
    groups: int = 0
    constraints: int = 0
    sub_instructions: int = 0
    instances_by: dict[str, Counter[str]] = field(default_factory=dict)
    constraints_by: dict[str, Counter[str]] = field(default_factory=dict)

    def instances_in(self, dimension: str) -> Counter[str]:
        return self.instances_by.get(dimension, Counter())

    def constraints_in(self, dimension: str) -> Counter[str]:
        return self.constraints_by.get(dimension, Counter())


INSTANCE_DIMENSIONS = ("category", "level", "split")
CONSTRAINT_DIMENSIONS = ("priority", "type")


def _label(value: object) -> str:
    if value is None:
        return "(none)"
    text = str(value)
    return text if text.strip() else "(empty)"


def count_instances(instances: Iterable[Instance]) -> Counts:
    c = Counts()
    groups: set[str] = set()
    inst_by: dict[str, Counter[str]] = {d: Counter() for d in INSTANCE_DIMENSIONS}
    cons_by: dict[str, Counter[str]] = {d: Counter() for d in (*INSTANCE_DIMENSIONS, *CONSTRAINT_DIMENSIONS)}
    present: set[str] = set()
    for inst in instances:
        c.instances += 1
        groups.add(inst.group_id)
        n = len(inst.constraints)
        c.constraints += n
        for dim, value in (("category", inst.category), ("level", inst.level), ("split", inst.split)):
            if value is not None:
                present.add(dim)
            inst_by[dim][_label(value)] += 1
            cons_by[dim][_label(value)] += n
        for con in inst.constraints:
            if con.priority is not None:
                present.add("priority")
            if con.type is not None:
                present.add("type")
            cons_by["priority"][_label(con.priority)] += 1
            cons_by["type"][_label(con.type)] += 1
        # EIFBench's unit between a task and its scoring questions; the others have none.
        c.sub_instructions += len(
            {con.instruction_idx for con in inst.constraints if con.instruction_idx is not None}
        )
    c.groups = len(groups)
    # A dimension no instance sets (FollowBench has no split) is left out rather than shown as all "(none)".
    c.instances_by = {d: inst_by[d] for d in INSTANCE_DIMENSIONS if d in present}
    c.constraints_by = {d: cons_by[d] for d in cons_by if d in present}
    return c


def _order(counter: Counter[str], dimension: str) -> list[str]:
    if dimension in ("level",):
        return sorted(counter, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
    if dimension in ("split", "priority") or len(counter) <= MAX_ROWS:
        return sorted(counter)
    return [k for k, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]


def _table(title: str, rows: list[tuple[str, int | None, int]]) -> list[str]:
    """A title line with column heads, then one indented line per row. `None` instances: the dimension
    belongs to constraints, so that column is left out."""
    with_instances = any(r[1] is not None for r in rows)
    name_w = max(width(title), *(2 + width(r[0]) for r in rows))
    heads = (["instances"] if with_instances else []) + ["constraints"]
    cells = [([] if not with_instances else [str(r[1])]) + [str(r[2])] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    out = [f"  {ljust(title, name_w)}  " + "  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    for row, cell in zip(rows, cells, strict=True):
        nums = "  ".join(c.rjust(w) for c, w in zip(cell, widths, strict=True))
        out.append(f"  {ljust('  ' + row[0], name_w)}  {nums}")
    return out


def _dimension_rows(c: Counts, dimension: str) -> list[tuple[str, int | None, int]]:
    per_instance = dimension in c.instances_by
    inst = c.instances_in(dimension)
    cons = c.constraints_in(dimension)
    keys = _order(inst if per_instance else cons, dimension)
    # Levels are few and ordered: never cut.
    shown, rest = (keys, []) if dimension == "level" else (keys[:MAX_ROWS], keys[MAX_ROWS:])
    rows: list[tuple[str, int | None, int]] = [(k, inst[k] if per_instance else None, cons[k]) for k in shown]
    if rest:
        rows.append(
            (
                f"... {len(rest)} more",
                sum(inst[k] for k in rest) if per_instance else None,
                sum(cons[k] for k in rest),
            )
        )
    return rows


def render_counts(name: str, where: str, c: Counts, options: Mapping[str, Any] | None = None) -> str:
    opts = ", ".join(f"{k}={v}" for k, v in sorted((options or {}).items()))
    lines = [f"{name} ({where})" + (f" [{opts}]" if opts else "")]
    totals = [("instances", c.instances), ("groups", c.groups)]
    if c.sub_instructions:
        totals.append(("sub-instructions", c.sub_instructions))
    totals.append(("constraints", c.constraints))
    width = max(len(k) for k, _ in totals)
    lines += [f"  {k:<{width}}  {v}" for k, v in totals]
    for dimension in (*INSTANCE_DIMENSIONS, *CONSTRAINT_DIMENSIONS):
        if dimension not in c.constraints_by:
            continue
        title = "constraint type" if dimension == "type" else dimension
        lines.append("")
        lines += _table(f"by {title}", _dimension_rows(c, dimension))
    return "\n".join(lines)


# Options whose value is a list; given on the command line as comma-separated names.
LIST_OPTIONS = frozenset({"categories"})


def parse_options(items: Iterable[str]) -> dict[str, Any]:
    """`--option KEY=VALUE` arguments as the options mapping a [[benchmarks]] table would give."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        if key in options:
            raise UsageError(f"--option {key!r} given twice")
        options[key] = [v for v in value.split(",") if v] if key in LIST_OPTIONS else value
    return options


def check_benchmark(name: str, data: Path | None, options: Mapping[str, Any]) -> str:
    """Load `name` from `data` (or its pinned, verified download) with `options`; the rendered counts.
    Raises UsageError for a bad name, option or path, DataError for a file that breaks the schema."""
    if name not in benchmarks.names():
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(benchmarks.names())}")
    bench = benchmarks.get(name)
    unknown = set(options) - set(bench.options)
    if unknown:
        known = ", ".join(sorted(bench.options)) or "none"
        raise UsageError(f"{name} has no option {sorted(unknown)[0]!r}; options: {known}")
    try:
        bench.validate_options(options)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if data is None:
        data = ensure_release(name, bench.release)
    if not data.exists():
        raise UsageError(f"{data}: no such file or folder")
    return render_counts(name, str(data), count_instances(bench.load(data, options)), options)
