"""The overview: per benchmark and judge, the leaderboard with coverage, cost, errors and unparsed pairs.

Two parts of different weight. The leaderboards are the reports' own figures (runner.commands.rundir
.compute over the verdict rows, read from the compacted Parquet while it is current, else from the
shards): seconds on a large run, so the server computes them off the event loop and shows the last ones
with the time they were read. The counts and dollars come from the index, in one pass over its pairs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ifsweep.runner.view.index import RunIndex
from ifsweep.runner.view.marks import Entry, disagree
from ifsweep.runner.watch.board import natural_key
from ifsweep.runner.watch.status import RUNNING_WITHIN_S, SUMMARY_NAME

__all__ = ["Board", "BoardRow", "Leaderboards", "Overview", "leaderboards", "overview", "shards_state"]


@dataclass(frozen=True, slots=True)
class Leaderboards:
    """The headline metrics and coverage of every (benchmark, judge, model), as the reports print them."""

    texts: Mapping[tuple[str, str | None, str], tuple[str, ...]] = field(default_factory=dict)
    heads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    titles: Mapping[str, str] = field(default_factory=dict)
    order: tuple[str, ...] = ()  # benchmarks in report order
    note: str = ""  # why there are none
    read_at: float = 0.0
    took_s: float = 0.0  # how long they took to compute: a large run's are not redone every 2 s


def shards_state(run_dir: Path) -> tuple[tuple[str, int], ...]:
    """Each shard file's name and size: the leaderboards are read again only when these changed."""
    from ifsweep.runner.store.shards import shard_files

    out = []
    for _, _, path in shard_files(run_dir):
        try:
            out.append((path.name, path.stat().st_size))
        except FileNotFoundError:
            continue
    return tuple(out)


def leaderboards(run_dir: Path) -> Leaderboards:
    """Reads files only (no index): safe to run on a worker thread."""
    import polars as pl

    from ifsweep import metrics
    from ifsweep.metrics.leaderboard import header, leaderboard, value_texts
    from ifsweep.runner.commands.rundir import compute
    from ifsweep.runner.store.compact import load_verdict_rows

    read_at = time.time()
    rows = load_verdict_rows(run_dir)
    if rows.height == 0:
        return Leaderboards(note="no verdicts yet", read_at=read_at, took_s=time.time() - read_at)
    try:
        table, catalog = compute(rows)
    except (metrics.VerdictError, pl.exceptions.PolarsError, ValueError) as e:
        note = f"metrics cannot be computed: {e}"
        return Leaderboards(note=note, read_at=read_at, took_s=time.time() - read_at)
    texts: dict[tuple[str, str | None, str], tuple[str, ...]] = {}
    heads, titles = {}, {}
    benches = catalog.ordered(table.get_column("benchmark").unique().to_list())
    for bench in benches:
        names = (*catalog.headline(bench), "coverage")
        heads[bench] = tuple(header(catalog, bench, m) for m in names)
        titles[bench] = catalog.display(bench)
        part = table.filter(pl.col("benchmark") == bench)
        for judge in part.get_column("judge").unique().to_list():
            mine = part.filter(pl.col("judge").is_null() if judge is None else pl.col("judge") == judge)
            for r in leaderboard(mine, catalog, bench).iter_rows(named=True):
                texts[(bench, judge, str(r["model"]))] = tuple(value_texts(r, catalog, bench, names))
    return Leaderboards(texts, heads, titles, tuple(benches), "", read_at, time.time() - read_at)


@dataclass(frozen=True, slots=True)
class BoardRow:
    model: str
    values: tuple[str, ...]  # the headline metrics, then coverage
    instances: int  # pairs the run holds anything of
    judged: int  # pairs with this judge's verdict
    errors: int  # of those, in error
    unparsed: int  # of those, with a constraint the judge's reply left unparsed
    disagree: int  # pairs where two judges decided a constraint differently
    cost_usd: float  # the answers and this judge's calls on them (every record, retried errors too)


@dataclass(frozen=True, slots=True)
class Board:
    benchmark: str
    title: str
    judge: str | None
    headers: tuple[str, ...]
    rows: tuple[BoardRow, ...]


@dataclass(frozen=True, slots=True)
class Overview:
    run: str
    state: str  # running | complete | ... as summary.json says; "" without one
    spent_usd: float
    errors_by_kind: dict[str, int]
    boards: tuple[Board, ...]
    note: str  # why the metrics are missing, if they are
    damaged: int
    made_at: float
    metrics_at: float  # when the leaderboards' rows were read
    indexing: str = ""  # how far the server's first pass over the shards is, while it runs


def overview(
    index: RunIndex, boards: Leaderboards, panel: Sequence[str] = (), indexing: str = ""
) -> Overview:
    """`indexing`: the first pass's progress, when the counts are of what it has read so far."""
    judges: list[str | None] = [j for j in panel if j in index.judges]
    judges += sorted((j for j in index.judges if j not in judges), key=lambda j: natural_key(j or ""))
    benches = sorted({b for b, _ in index.groups})
    benches = [b for b in boards.order if b in benches] + [b for b in benches if b not in boards.order]
    counts = {group: _counts(entries.values(), judges or [None]) for group, entries in index.groups.items()}
    out = []
    for bench in benches:
        models = sorted((m for b, m in index.groups if b == bench), key=natural_key)
        for judge in judges or [None]:
            ranked = [m for m in models if (bench, judge, m) in boards.texts]
            rows = [
                _row(index, bench, m, judge, counts[(bench, m)], boards)
                for m in ranked + [m for m in models if m not in ranked]
            ]
            heads = boards.heads.get(bench, ())
            out.append(Board(bench, boards.titles.get(bench, bench), judge, heads, tuple(rows)))
    return Overview(
        run=index.run_dir.resolve().name,
        state=_state(index.run_dir),
        spent_usd=sum(index.cost.values()),
        errors_by_kind=errors_by_kind(index),
        boards=tuple(out),
        note=boards.note,
        damaged=len(index.damaged),
        made_at=time.time(),
        metrics_at=boards.read_at,
        indexing=indexing,
    )


def _counts(entries: Any, judges: Sequence[str | None]) -> dict[str | None, list[int]]:
    """Per judge: [pairs, judged, errors, unparsed, disagree] over one (benchmark, model)."""
    out = {j: [0, 0, 0, 0, 0] for j in judges}
    split = 0
    e: Entry
    for e in entries:
        if len(e.marks) > 1 and disagree(e.marks):
            split += 1
        for m in e.marks:
            c = out.get(m.judge)
            if c is not None:
                c[1] += 1
                c[2] += m.is_error
                c[3] += m.unparsed != 0
    n = len(entries)
    for c in out.values():
        c[0], c[4] = n, split
    return out


def _row(
    index: RunIndex,
    bench: str,
    model: str,
    judge: str | None,
    counts: dict[str | None, list[int]],
    boards: Leaderboards,
) -> BoardRow:
    pairs, judged, errors, unparsed, split = counts[judge]
    cost = index.cost.get((bench, model, None), 0.0)
    if judge is not None:
        cost += index.cost.get((bench, model, judge), 0.0)
    width = len(boards.heads.get(bench, ()))
    values = boards.texts.get((bench, judge, model), ("–",) * width)
    return BoardRow(model, values, pairs, judged, errors, unparsed, split, cost)


def errors_by_kind(index: RunIndex) -> dict[str, int]:
    """Pairs in error, by why (as `ifsweep status` counts them): the answer's error kind, or
    "judge:KIND" from the first judge call in error. Reads only those pairs' records."""
    kinds: dict[str, int] = {}
    for entries in index.groups.values():
        for e in entries.values():
            if not any(m.is_error for m in e.marks):
                continue
            kind = e.why
            if kind is None:  # read once per verdict: a failing run's overview is redrawn often
                kind = e.why = _why(index, e)
            kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def _why(index: RunIndex, e: Entry) -> str:
    gen = index.record(e.gen_key) if e.gen_key else None
    if gen is not None and gen.get("status") == "error":
        return str(gen.get("error_kind") or "other")
    for key in e.calls:
        rec = index.record(key)
        if rec is not None and rec.get("status") == "error":
            return f"judge:{rec.get('error_kind') or 'other'}"
    return "judge:other"


def _state(run_dir: Path) -> str:
    """What summary.json says of the sweep: "running" only while it is rewritten (every 2 s)."""
    try:
        summary: Any = orjson.loads((run_dir / SUMMARY_NAME).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return ""
    if not isinstance(summary, dict):
        return ""
    state = str(summary.get("status") or "")
    updated = summary.get("updated_at")
    fresh = isinstance(updated, int | float) and time.time() - float(updated) < RUNNING_WITHIN_S
    return "not running" if state == "running" and not fresh else state
