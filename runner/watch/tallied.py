"""What `ifsweep status` adds up, over the shards' digest (runner/store/digest.py) with Polars.

The rules are the store's and the tallies' (docs/design/shards.md, runner/watch/outcomes.py): the newest
record per key wins unless it is an error and an older one succeeded; dollars and 429s count every
record, superseded ones too; calls and tokens count each key once, as it first appeared. Here they run
as a few group-bys over every record's digest row instead of a Python loop per record, so a run of
half a million calls is read in a fraction of a second once its digest is kept.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import accumulate, chain
from math import fsum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.runner.store.current import PairPlan, selects
from ifsweep.runner.store.intents import SpendScan, exact_terms, spend_label
from ifsweep.runner.store.locks import writer_running
from ifsweep.runner.store.shards import SHARDS_DIR
from ifsweep.runner.watch.outcomes import ErrorTally, GroupSpend, SpendTally

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "EndpointSums",
    "EveryRecord",
    "Newest",
    "calls_of",
    "error_tally",
    "every_record",
    "held_winners",
    "newest",
]

_CALLS = ("generation", "judgment")


def _ord() -> pl.Expr:
    import polars as pl

    return pl.col("file_no") * (1 << 40) + pl.col("offset")


def ordered(records: pl.LazyFrame) -> pl.LazyFrame:
    """The records with `_ord`, their place in read order, and `_k`, what newest-per-key is keyed by
    (a verdict's slot, else the record's key)."""
    import polars as pl

    # `key` and `slot` live on in `_k` alone (an intent's `_k` is its key): 20 MB less at full size.
    keyed = records.with_columns(_ord().alias("_ord"), pl.coalesce("slot", "key").alias("_k"))
    return keyed.drop("key", "slot")


def newest(frame: pl.LazyFrame, kinds: tuple[str, ...]) -> pl.LazyFrame:
    """Per `_k` of the rows of `kinds`, the newest row not `failed`, else the newest row (in no
    particular order), each with `_first`, where its key first appeared, and `_n`, how many rows the
    key has. Lazy: only the winners' places are held (three integers a key); each use joins them to
    the columns it reads (a copy of the winners' columns, nearly every record, held 160 MB at full
    size)."""
    import polars as pl

    # A plain when/then max, not a filter inside the aggregation (which runs per group).
    ok = pl.when(~pl.col("failed")).then(pl.col("_ord")).max().alias("_ok")
    last, first = pl.col("_ord").max().alias("_last"), pl.col("_ord").min().alias("_first")
    rows = frame.lazy().filter(pl.col("kind").is_in(kinds))
    # Keys in two halves by their last character (hex keys: even halves; any other key, a null one
    # too, in the second), a group-by each: a key's records are all in one half, and each hash table
    # holds half of the keys (status's peak on the full-size run: 272 -> 245 MB).
    low = pl.col("_k").str.slice(-1).is_in(list("01234567")).fill_null(False)
    won = pl.concat(
        rows.filter(half)
        .group_by("_k")
        .agg(ok, last, first, pl.len().alias("_n"))
        .select(pl.coalesce("_ok", "_last").alias("_ord"), "_first", "_n")
        .collect()
        for half in (low, ~low)
    )
    return frame.lazy().join(won.lazy(), on="_ord")


def held_winners(winners: pl.LazyFrame) -> pl.LazyFrame:
    """`newest`'s rows with the columns status reads of them, decoded once for its seven queries (each
    one's join with the digest again was a third of status's time); a key and an error's reason only
    on rows in error, the only ones that read them (a 64-character key per record is 35 MB)."""
    import polars as pl

    failed = pl.col("failed")
    few = ("kind", "model", "benchmark", "judge", "instance_id", "failed", "is_error", "_first", "_ord")
    errs = [pl.when(failed).then(pl.col(c)).alias(c) for c in ("_k", "gen_key", "error_kind")]
    return winners.select(*few, *errs).collect().lazy()


def calls_of(frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The call records, lazily: each use reads only the columns it needs (a filtered copy of every
    column of half a million records is what held status's memory)."""
    import polars as pl

    return frame.lazy().filter(pl.col("kind").is_in(_CALLS))


@dataclass(slots=True)
class EndpointSums:
    """One endpoint label's call records: [calls, tokens, latency] of every one, of those stamped at or
    after `since` (`recent`) and `minute`, the 429s, and where the first one is (`_ord`)."""

    every: list[Any]
    recent: list[Any]
    minute: list[Any]
    rate_limited: int
    first: int


@dataclass(slots=True)
class EveryRecord:
    """What status adds up over every call record, superseded ones too (module docstring): the spend
    per (model, benchmark), each writer's SpendScan (runner/store/intents.py, finished), each
    endpoint's use."""

    spend: SpendTally
    scans: dict[str, SpendScan]
    endpoints: dict[str, EndpointSums]


_DOLLARS = ("cost_usd", "worst_case_usd", "cache_saved_usd")


def _part_sums(part: pl.LazyFrame, since: float, minute: float) -> pl.LazyFrame:
    """One digest part's call records per (writer, model, benchmark, kind, judge): counts and integer
    sums, and the float columns as lists (summed with math.fsum over every part at the end: exact)."""
    import polars as pl

    ts, tokens, latency = pl.col("ts"), pl.col("input_tokens") + pl.col("output_tokens"), pl.col("latency_s")

    def use(cond: pl.Expr, name: str) -> list[pl.Expr]:
        # Seconds of latency summed by Polars: a pace, shown rounded, not a figure that adds up.
        return [
            cond.sum().alias(f"{name}_n"),
            tokens.filter(cond).sum().alias(f"{name}_t"),
            latency.filter(cond).sum().alias(f"{name}_l"),
        ]

    return (
        part.filter(pl.col("kind").is_in(_CALLS))
        .group_by("writer", "model", "benchmark", "kind", "judge")
        .agg(
            *(pl.col(c) for c in _DOLLARS),
            pl.col("input_tokens").sum(),
            pl.col("cached_tokens").sum(),
            pl.col("rate_limited").sum(),
            _ord().min().alias("_first"),
            *use(pl.lit(True), "every"),
            *use(ts >= since, "recent"),
            *use(ts >= minute, "minute"),
        )
    )


class _Adding:
    """EveryRecord's sums as the parts come in: dollars kept as exact terms until every part is in."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], list[Any]] = {}  # gen, judge, saved arrays; input, cached
        self.scans: dict[str, SpendScan] = {}
        self.endpoints: dict[str, list[Any]] = {}

    def add(self, sums: pl.DataFrame) -> None:
        cols = {c: sums.get_column(c).to_list() for c in sums.columns if c not in _DOLLARS}
        # Each group's dollars as a slice of one list of Python floats per column: a Series element per
        # group was most of status's time, and math.fsum reads floats twice as fast as numpy scalars.
        ends = list(accumulate(sums.get_column("cost_usd").list.len().to_list()))
        flat = {c: sums.get_column(c).explode().to_list() for c in _DOLLARS}
        for i, (writer, model, bench, kind, judge) in enumerate(
            sums.select("writer", "model", "benchmark", "kind", "judge").iter_rows()
        ):
            start = ends[i - 1] if i else 0
            # Each group's dollars held as their exact terms (runner/store/intents.py), not a float
            # object per record: the sums come out the same to the last bit, in a few bytes a group.
            a = {c: exact_terms(flat[c][start : ends[i]]) for c in _DOLLARS}
            judged = kind == "judgment"
            g = self.groups.setdefault((model, bench), [[], [], [], 0, 0])
            g[1 if judged else 0].append(a["cost_usd"])
            g[2].append(a["cache_saved_usd"])
            g[3] += int(cols["input_tokens"][i])
            g[4] += int(cols["cached_tokens"][i])
            scan = self.scans.setdefault(writer, SpendScan())
            scan.add_costs(spend_label(kind, model, judge), a["cost_usd"], a["worst_case_usd"])
            label = ("None" if judge is None else judge) if judged else model
            e = self.endpoints.setdefault(
                label, [[0, 0, 0.0], [0, 0, 0.0], [0, 0, 0.0], 0, cols["_first"][i]]
            )
            for k, name in enumerate(("every", "recent", "minute")):
                e[k][0] += int(cols[f"{name}_n"][i])
                e[k][1] += int(cols[f"{name}_t"][i])
                e[k][2] += cols[f"{name}_l"][i]
            e[3] += int(cols["rate_limited"][i])
            e[4] = min(e[4], cols["_first"][i])

    def done(self) -> tuple[SpendTally, dict[str, EndpointSums]]:
        tally = SpendTally()
        for group, (gen, judge, saved, inp, cached) in self.groups.items():
            tally.groups[group] = GroupSpend(_fsum(gen), _fsum(judge), inp, cached, _fsum(saved))
        endpoints = {}
        for label, (every, recent, minute, limited, first) in self.endpoints.items():
            endpoints[label] = EndpointSums(every, recent, minute, limited, first)
        return tally, endpoints


def _fsum(arrays: list[Any]) -> float:
    return fsum(chain.from_iterable(arrays))


def every_record(
    run_dir: Path, parts: list[pl.LazyFrame], since: float, minute: float | None = None
) -> EveryRecord:
    """EveryRecord over the digest's parts (runner/store/digest.py scan_digest), one part decoded at a
    time: status's memory holds one part's columns, never every record's (issue 35)."""
    import polars as pl

    adding = _Adding()
    intents: list[pl.DataFrame] = []
    resolved: list[pl.DataFrame] = []
    for part in parts:
        # The part's three queries in one collection: the part is decoded once, not three times.
        sums, opened, closing = pl.collect_all(
            [
                _part_sums(part, since, since if minute is None else minute),
                part.filter(pl.col("kind") == "intent").select(
                    "writer", pl.col("key").alias("_k"), "label", "worst_usd", _ord().alias("_ord")
                ),
                part.filter(pl.col("kind").is_in(_CALLS) & (pl.col("intents").list.len() > 0))
                .select("writer", pl.col("intents").alias("_id"), _ord().alias("_at"))
                .explode("_id"),
            ]
        )
        adding.add(sums)
        intents.append(opened)
        resolved.append(closing)
    spend, endpoints = adding.done()
    scans = adding.scans
    _charge_open(run_dir, scans, pl.concat(intents), pl.concat(resolved))
    for scan in scans.values():
        scan.finish(charge_open=False)  # the open intents were charged above, a live writer's not
    return EveryRecord(spend, scans, endpoints)


def _charge_open(
    run_dir: Path, scans: dict[str, SpendScan], intents: pl.DataFrame, resolved: pl.DataFrame
) -> None:
    """Charge each intent no later call record of its writer resolves, unless the writer still runs
    (its calls in flight): SpendScan's rule over the digest."""
    import polars as pl

    closed = intents.join(resolved, left_on=["writer", "_k"], right_on=["writer", "_id"]).filter(
        pl.col("_at") > pl.col("_ord")
    )
    open_ = intents.join(closed.select("writer", "_k"), on=["writer", "_k"], how="anti").sort("_ord")
    shards = Path(run_dir) / SHARDS_DIR
    for writer in open_["writer"].unique(maintain_order=True).to_list():
        scan = scans.setdefault(writer, SpendScan())
        if not writer_running(shards, writer):
            for label, worst in (
                open_.filter(pl.col("writer") == writer).select("label", "worst_usd").iter_rows()
            ):
                scan.charge_open(label, worst)


def error_tally(winners: pl.LazyFrame) -> ErrorTally:
    """ErrorTally fed the newest record of each key that is in error (`newest`), in the order the keys
    first appeared: what its `by_kind` reads (a key's older records and its successes decide nothing)."""
    import polars as pl

    tally = ErrorTally()
    cols = ("kind", "_k", "model", "benchmark", "instance_id", "judge", "gen_key", "error_kind")
    failed = winners.filter(pl.col("failed") & (pl.col("kind") != "intent")).select(*cols, "_first")
    for kind, key, model, bench, iid, judge, gen_key, reason, _ in (
        failed.collect().sort("_first").iter_rows()
    ):
        rec: dict[str, Any] = {"kind": kind, "key": key, "status": "error", "error_kind": reason}
        rec.update(model=model, benchmark=bench, instance_id=iid, judge=judge, gen_key=gen_key, basis=1)
        tally.add(rec)
    return tally


@dataclass(frozen=True, slots=True)
class Newest:
    """What `status_report` takes from the newest record per key: the current verdicts (for the
    reading), calls in error per (model, benchmark), distinct calls per judge."""

    verdicts: pl.DataFrame  # benchmark, model, judge, instance_id, failed (current_reading's Verdict)
    errors: dict[tuple[str, str], int]
    judge_calls: dict[str, int]


def newest_report(winners: pl.LazyFrame) -> Newest:
    import polars as pl

    verdicts = winners.filter(pl.col("kind") == "verdict")
    # As the reading takes them (strings: the digest holds these columns as categories).
    names = pl.col("benchmark", "model", "judge", "instance_id").cast(pl.String)
    found = verdicts.select(names, "failed").collect()
    calls = calls_of(winners)
    errors: dict[tuple[str, str], int] = defaultdict(int)
    for model, bench, n in (
        calls.group_by("model", "benchmark").agg(pl.col("is_error").sum()).collect().iter_rows()
    ):
        errors[(model, bench)] = int(n)
    judged = calls.filter(pl.col("kind") == "judgment").drop_nulls("judge").group_by("judge").len().collect()
    return Newest(found, errors, {j: int(n) for j, n in judged.iter_rows()})


def outside_plan(plans: dict[tuple[str, str], PairPlan]) -> pl.Expr:
    """The verdict records of instances their pair's plan does not select (a `limit` lowered since):
    the board leaves them out. A mask over a frame's rows."""
    import polars as pl

    return (pl.col("kind") == "verdict") & ~selects(plans)
