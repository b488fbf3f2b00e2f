"""The overview: per benchmark and judge, the leaderboard with coverage, cost, errors and unparsed pairs.

The metrics are the reports' own (runner.commands.reporting.compute over the verdict rows, which come from
the compacted Parquet while it is current, else from the shards); counts and dollars come from the index.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ifsweep.runner.view.index import RunIndex
from ifsweep.runner.view.marks import disagree
from ifsweep.runner.watch.board import natural_key
from ifsweep.runner.watch.status import RUNNING_WITHIN_S, SUMMARY_NAME

if TYPE_CHECKING:
    import polars as pl

    from ifsweep.metrics import Catalog

__all__ = ["Board", "BoardRow", "Overview", "overview"]


@dataclass(frozen=True, slots=True)
class BoardRow:
    model: str
    values: tuple[str, ...]  # the headline metrics, then coverage, as the reports print them
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


def overview(index: RunIndex, panel: tuple[str, ...] = ()) -> Overview:
    table, catalog, note = _metrics(index.run_dir)
    judges = index.judges()
    order = [j for j in panel if j in judges] + sorted(
        (j for j in judges if j not in panel), key=lambda j: natural_key(j or "")
    )
    benches = sorted({b for b, _ in index.groups})
    if catalog is not None:
        benches = catalog.ordered(benches) + [b for b in benches if catalog.get(b) is None]
    boards = tuple(_board(index, b, j, table, catalog) for b in benches for j in order or [None])
    spent = sum(t.fields(g)["spent_usd"] for t in index.spend.values() for g in t.groups)
    return Overview(
        run=index.run_dir.resolve().name,
        state=_state(index.run_dir),
        spent_usd=float(spent),
        errors_by_kind=index.errors.by_kind(),
        boards=boards,
        note=note,
        damaged=len(index.damaged),
        made_at=time.time(),
    )


def _metrics(run_dir: Path) -> tuple[pl.DataFrame | None, Catalog | None, str]:
    from ifsweep import metrics
    from ifsweep.runner.commands.rundir import compute
    from ifsweep.runner.store.compact import load_verdict_rows

    rows = load_verdict_rows(run_dir)
    if rows.height == 0:
        return None, None, "no verdicts yet"
    try:
        table, catalog = compute(rows)
    except metrics.VerdictError as e:
        return None, None, f"metrics cannot be computed: {e}"
    return table, catalog, ""


def _board(
    index: RunIndex, bench: str, judge: str | None, table: pl.DataFrame | None, catalog: Catalog | None
) -> Board:
    names: tuple[str, ...] = ()
    heads: tuple[str, ...] = ()
    texts: dict[str, tuple[str, ...]] = {}
    title = bench
    if table is not None and catalog is not None and catalog.get(bench) is not None:
        import polars as pl

        from ifsweep.metrics.leaderboard import header, leaderboard, value_texts

        names = (*catalog.headline(bench), "coverage")
        heads = tuple(header(catalog, bench, m) for m in names)
        title = catalog.display(bench)
        mine = table.filter(pl.col("judge").is_null() if judge is None else pl.col("judge") == judge)
        for r in leaderboard(mine, catalog, bench).iter_rows(named=True):
            texts[str(r["model"])] = tuple(value_texts(r, catalog, bench, names))
    models = [m for b, m in index.groups if b == bench]
    ranked = [m for m in texts if m in models] + sorted(
        (m for m in models if m not in texts), key=natural_key
    )
    rows = tuple(_row(index, bench, m, judge, texts.get(m, ("–",) * len(names))) for m in ranked)
    return Board(bench, title, judge, heads, rows)


def _row(index: RunIndex, bench: str, model: str, judge: str | None, values: tuple[str, ...]) -> BoardRow:
    judged = errors = unparsed = split = 0
    for entry in index.groups[(bench, model)].values():
        mark = entry.mark(judge)
        if len(entry.marks) > 1 and disagree(entry.marks):
            split += 1
        if mark is None:
            continue
        judged += 1
        errors += mark.is_error
        unparsed += mark.unparsed != 0
    cost = 0.0
    for who in (None, judge) if judge is not None else (None,):
        tally = index.spend.get(who)
        if tally is not None:
            cost += float(tally.fields((model, bench))["spent_usd"])
    return BoardRow(
        model=model,
        values=values,
        instances=len(index.groups[(bench, model)]),
        judged=judged,
        errors=errors,
        unparsed=unparsed,
        disagree=split,
        cost_usd=cost,
    )


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
