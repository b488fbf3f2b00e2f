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

from ifsweep.runner.store.current import RunReading
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
    # Per benchmark, the report's "partial run: ... N of M planned instances" line ("" when done).
    partial: Mapping[str, str] = field(default_factory=dict)
    order: tuple[str, ...] = ()  # benchmarks in report order
    note: str = ""  # why there are none
    read_at: float = 0.0
    took_s: float = 0.0  # how long they took to compute: a large run's are not redone every 2 s
    # The run's reading (runner/store/current.py) they were computed from: the overview counts the
    # instances of each pair's plan, as the reports do.
    reading: RunReading | None = None


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
    from ifsweep.metrics.leaderboard import header, leaderboard, partial_note, value_texts
    from ifsweep.runner.commands.rundir import compute, in_model_order, planned_rows, with_progress
    from ifsweep.runner.store.current import read_run

    read_at = time.time()
    reading = read_run(run_dir)
    rows = planned_rows(reading).collect()
    if rows.height == 0:
        return Leaderboards(
            note="no verdicts yet", read_at=read_at, took_s=time.time() - read_at, reading=reading
        )
    try:
        table, catalog = compute(rows)
        # Ties rank as in the reports: by the next headline metric, then in the config's order.
        order = reading.model_order(table.get_column("model").unique().to_list())
        table = with_progress(in_model_order(table, order), reading)
    except (metrics.VerdictError, pl.exceptions.PolarsError, ValueError) as e:
        note = f"metrics cannot be computed: {e}"
        return Leaderboards(note=note, read_at=read_at, took_s=time.time() - read_at, reading=reading)
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
    partial = {bench: partial_note(table, bench) for bench in benches}
    took = time.time() - read_at
    return Leaderboards(texts, heads, titles, partial, tuple(benches), "", read_at, took, reading)


@dataclass(frozen=True, slots=True)
class BoardRow:
    model: str
    values: tuple[str, ...]  # the headline metrics, then coverage
    instances: int  # pairs of the plan the run holds anything of
    judged: int  # pairs with this judge's verdict
    errors: int  # of those, in error
    unparsed: int  # of those, with a constraint the judge's reply left unparsed
    disagree: int  # pairs where two judges decided a constraint differently
    # The answers and every judge's calls on them (every record, retried errors too): the one spent
    # figure per pair that `status` and the report show.
    cost_usd: float
    planned: int | None = None  # the pair's planned instances (the run's reading)
    done: int | None = None  # of those, judged without error


@dataclass(frozen=True, slots=True)
class Board:
    benchmark: str
    title: str
    judge: str | None
    headers: tuple[str, ...]
    rows: tuple[BoardRow, ...]
    partial: str = ""  # the report's line for a pair short of its plan


@dataclass(frozen=True, slots=True)
class Overview:
    run: str
    state: str  # running | complete | ... as summary.json says; "" without one
    spent_usd: float
    errors_by_kind: dict[str, int]
    boards: tuple[Board, ...]
    note: str  # why the metrics are missing, if they are
    damaged: tuple[str, ...]  # each damaged or unfinished shard line: where, and why
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
    reading = boards.reading
    counts = {
        group: _counts(_planned_entries(entries, group, reading), judges or [None])
        for group, entries in index.groups.items()
    }
    out = []
    for bench in benches:
        models = sorted((m for b, m in index.groups if b == bench), key=natural_key)
        for judge in judges or [None]:
            # The leaderboard's rank (boards.texts holds each board's models best first), then the rest.
            ranked = [m for b, j, m in boards.texts if (b, j) == (bench, judge) and m in models]
            rows = [
                _row(index, bench, m, judge, counts[(bench, m)], boards)
                for m in ranked + [m for m in models if m not in ranked]
            ]
            heads = boards.heads.get(bench, ())
            title = boards.titles.get(bench, bench)
            out.append(Board(bench, title, judge, heads, tuple(rows), boards.partial.get(bench, "")))
    return Overview(
        run=index.run_dir.resolve().name,
        state=_state(index.run_dir, reading),
        spent_usd=sum(index.cost.values()),
        errors_by_kind=errors_by_kind(index, reading),
        boards=tuple(out),
        note=boards.note,
        damaged=tuple(f"shards/{d.file.name} {d.reason}" for d in [*index.damaged, *index.unfinished()]),
        made_at=time.time(),
        metrics_at=boards.read_at,
        indexing=indexing,
    )


def _planned_entries(
    entries: Mapping[str, Entry], group: tuple[str, str], reading: RunReading | None
) -> list[Entry]:
    """The entries of the instances the pair's plan selects (every entry before the reading is in)."""
    if reading is None:
        return list(entries.values())
    bench, model = group
    return [e for iid, e in entries.items() if reading.selects(bench, model, iid)]


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
    cost = sum(v for (b, m, _), v in index.cost.items() if (b, m) == (bench, model))
    width = len(boards.heads.get(bench, ()))
    values = boards.texts.get((bench, judge, model), ("–",) * width)
    progress = boards.reading.of(bench, model) if boards.reading is not None else None
    planned = None if progress is None else progress.planned
    done = None if progress is None else progress.done
    return BoardRow(model, values, pairs, judged, errors, unparsed, split, cost, planned, done)


def errors_by_kind(index: RunIndex, reading: RunReading | None = None) -> dict[str, int]:
    """Pairs in error, by why (as `ifsweep status` counts them): the answer's error kind, or
    "judge:KIND" from the first judge call in error. Reads only those pairs' records. With the run's
    `reading`, only the instances of each pair's plan and the judges they wait for count."""
    kinds: dict[str, int] = {}
    for (bench, model), entries in index.groups.items():
        for iid, e in entries.items():
            if reading is not None and not reading.selects(bench, model, iid):
                continue
            if not any(
                m.is_error and (reading is None or reading.needs(bench, model, m.judge)) for m in e.marks
            ):
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


def _state(run_dir: Path, reading: RunReading | None = None) -> str:
    """What summary.json says of the sweep: "running" only while it is rewritten (every 2 s); not
    "complete" where the run's reading of its files says otherwise (a damaged line, a pair undone)."""
    try:
        summary: Any = orjson.loads((run_dir / SUMMARY_NAME).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return ""
    if not isinstance(summary, dict):
        return ""
    state = str(summary.get("status") or "")
    updated = summary.get("updated_at")
    fresh = isinstance(updated, int | float) and time.time() - float(updated) < RUNNING_WITHIN_S
    if state == "complete" and reading is not None and not reading.complete:
        return "incomplete"
    return "not running" if state == "running" and not fresh else state
