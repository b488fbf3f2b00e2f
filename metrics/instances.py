"""What an instance is, which instances are kept (every one of their rows has status ok), and the one
read of the rows every metric starts from."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from ifsweep.metrics.schema import (
    CONSTRAINT_KEY,
    METRIC_COLUMNS,
    OPTIONAL_COLUMNS,
    VERDICT_SCHEMA,
    VerdictError,
)

INSTANCE_KEY: list[str] = ["benchmark", "model", "instance_id"]


def kept_expr() -> pl.Expr:
    """Aggregation: the instance is kept when none of its rows failed to get a verdict. One unscored
    constraint drops its whole instance, so a partly judged answer never counts as a pass or a failure."""
    return (pl.col("status") == "ok").all().alias("kept")


def as_lazy(rows: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    return rows.lazy() if isinstance(rows, pl.DataFrame) else rows


_USED = list(METRIC_COLUMNS)


def prepared(rows: pl.LazyFrame | pl.DataFrame, benchmark: str | None = None) -> pl.LazyFrame:
    """The columns metrics use, typed per VERDICT_SCHEMA, optionally one benchmark's rows: a lazy
    plan, never the rows in memory. Every metric reads it with
    `streamed`, so a Parquet file of any size is read in batches and only per-instance summaries are
    held (measured: 10M InFoBench rows, 4.1 GB peak when these columns were collected first)."""
    lf = as_lazy(rows)
    schema = lf.collect_schema()
    missing = [c for c in _USED if c not in schema and c not in OPTIONAL_COLUMNS]
    if missing:
        raise VerdictError(f"verdict rows: field '{missing[0]}': column missing")
    lf = lf.select(
        [
            pl.col(c).cast(VERDICT_SCHEMA[c]) if c in schema else pl.lit(None, VERDICT_SCHEMA[c]).alias(c)
            for c in _USED
        ]
    )
    # Model and instance_id stay strings: the streaming engine groups them faster than it casts them
    # to categoricals (measured over 10M rows: 10.0 s with strings, 13.5 s with the cast).
    return lf if benchmark is None else lf.filter(pl.col("benchmark") == benchmark)


def streamed(lf: pl.LazyFrame) -> pl.DataFrame:
    """`lf` collected by Polars' streaming engine, named rather than left to the process's engine
    affinity (POLARS_ENGINE_AFFINITY may say in-memory, which would hold every row scanned)."""
    return lf.collect(engine="streaming")


def judges_of(rows: pl.LazyFrame) -> list[str | None]:
    """The distinct judges of `rows` (null: rows decided without one), in no particular order."""
    return streamed(rows.select(pl.col("judge").unique())).get_column("judge").to_list()


# The key of every figure: compute_metrics, benchmark_metrics and coverage_metrics give these columns
# first, the judge among them, and sort by them.
RESULT_KEY: tuple[str, ...] = ("benchmark", "model", "judge", "metric", "slice")


def by_judge(
    rows: pl.LazyFrame,
    compute: Callable[[pl.LazyFrame], pl.DataFrame],
    judges: Sequence[str | None] | None = None,
) -> pl.DataFrame:
    """`compute` over each judge's rows of `rows` apart, with a judge column: two judges' verdicts on
    one instance never meet in one figure (rows without a judge form a group of their own). `judges`:
    the judges `rows` holds, when a pass over them already found them."""
    judges = judges_of(rows) if judges is None else judges
    if len(judges) <= 1:  # one judge (the usual run): no filter
        parts = [compute(rows).with_columns(pl.lit(judges[0] if judges else None, pl.String).alias("judge"))]
    else:
        parts = [
            compute(
                rows.filter(pl.col("judge").is_null() if j is None else pl.col("judge") == j)
            ).with_columns(pl.lit(j, pl.String).alias("judge"))
            for j in judges
        ]
    out = pl.concat(parts)
    cols = [*RESULT_KEY, *(c for c in out.columns if c not in RESULT_KEY)]
    return out.select(cols).sort(list(RESULT_KEY), nulls_last=False)


# What describes an instance (docs/metrics.md: taken from its first row) and is a string: per_instance
# hands them to the aggregations as categoricals.
ATTRIBUTES: tuple[str, ...] = ("group_id", "category", "split")


def per_instance(
    rows: pl.LazyFrame | pl.DataFrame, benchmark: str, aggs: Sequence[pl.Expr], *, within: Sequence[str] = ()
) -> pl.LazyFrame:
    """`aggs` over each instance of `benchmark` in `rows` (or over each `within` part of an instance),
    with the instance key: streamed now, and returned as a lazy plan over the summaries, in which
    model, instance_id and the ATTRIBUTES columns are Categorical (of categories private to this
    call, freed with the summaries; compare them to strings, or cast them with `.cast(pl.String)`).

    The streaming group-by keeps a state per instance (18M at 100M InFoBench rows) and, for the rows
    its small table of hot groups misses, their keys and inputs until the end, so both are kept
    compact: one 64-bit key made of the model's and the instance's categorical codes, attributes
    cast to categoricals before the group-by (`first()` of a string kept far more; `first()` of an
    expression, such as a cast inside the aggregation, fell out of the streaming engine: 3.2 GB at
    30M rows), and the duplicate check in two columns of the smallest types (`_twice_aggs`).
    Measured over 100M InFoBench rows (18M instances), InFoBench's group-by alone, peak RSS: string
    keys and split 4.86 GB; categorical keys and split 3.22 GB; one 64-bit key 2.76 GB; and a row
    count for the second 64-bit sum of the duplicate check 2.46 GB.

    The same pass finds two verdicts of one constraint (`_twice_aggs`); only then `_one_verdict_each`
    runs, to name them (VerdictError)."""
    mine = rows.lazy().filter(pl.col("benchmark") == benchmark)
    ids = pl.Categorical(pl.Categories.random())
    # The categories live while data of their type does: this keeps the codes of the query below
    # valid until they are turned back into categoricals (`_decoded`), which then hold them.
    alive = pl.Series(dtype=ids)
    present = mine.collect_schema()
    # Rows of a benchmark without sub-instructions may leave the column out: each constraint is then
    # known by its index alone.
    mine = mine.with_columns(pl.lit(None, pl.Int64).alias(c) for c in CONSTRAINT_KEY if c not in present)
    attributes = mine.with_columns(pl.col(c).cast(ids) for c in ATTRIBUTES if c in present)
    code = [pl.col(c).cast(ids).to_physical().cast(pl.UInt64) for c in ("model", "instance_id")]
    key = (code[0] * _HALF + code[1]).alias("_key")
    inst = _decoded(streamed(attributes.group_by(key, *within).agg(*aggs, *_twice_aggs())), ids)
    del alive
    suspects = _maybe_twice(inst, bool(within)).cast({"model": pl.String, "instance_id": pl.String})
    if suspects.height:
        _one_verdict_each(mine.join(suspects.lazy(), on=["model", "instance_id"], how="semi"))
    return inst.drop(_TWICE).lazy().with_columns(pl.lit(benchmark).alias("benchmark"))


_HALF = 2**32  # a categorical code is 32 bits: the model's code above, the instance's below


def _decoded(inst: pl.DataFrame, ids: pl.Categorical) -> pl.DataFrame:
    """`inst` with its `_key` turned back into model and instance_id, categoricals of `ids`."""
    names = ids.categories.to_series().cast(ids)  # position i: the category whose code is i
    key = inst.get_column("_key")
    codes = {"model": key // _HALF, "instance_id": key % _HALF}
    decoded = {name: names.gather(code).alias(name) for name, code in codes.items()}
    # Each code must come back as itself: a code whose string was not yet readable (Polars reserves
    # codes before it names them, for queries that run concurrently) would be given another name.
    if any((decoded[name].to_physical() != codes[name]).any() for name in codes):
        raise RuntimeError("per_instance: an instance key's categorical code has no name")
    return inst.select(*decoded.values(), pl.exclude("_key"))


_TWICE = ["_rows", "_bits"]


def _twice_aggs() -> list[pl.Expr]:
    """Per group, its rows and the or of one bit per constraint (`_constraint_bit`): with no
    constraint verdicted twice, the bits set number the rows. (A sum of the bits beside the or, as
    before, held 8 bytes more per group and per row the hot groups missed; an n_unique per group held
    more than a hash set of every row: 30M InFoBench rows, 2.53 GB of peak RSS against 1.76 GB.)"""
    return [pl.len().alias("_rows"), _constraint_bit().bitwise_or().alias("_bits")]


_PER_PART = 8  # bit positions given to each sub-instruction before the next one's begin


def _constraint_bit() -> pl.Expr:
    """2 to a position of the constraint's identity (CONSTRAINT_KEY): its index plus 8 per
    sub-instruction before it, so EIFBench's indexes, restarting in each sub-instruction, take bits
    of their own. Positions outside 0-62 share bit 63, and an index past 7 may meet the next
    sub-instruction's: two rows on one bit only make the instance a suspect, left to
    `_one_verdict_each`; two verdicts of one constraint always share their bit."""
    part, c = (pl.col(name) for name in CONSTRAINT_KEY)
    at = c + part.fill_null(0) * _PER_PART
    inside = at.is_between(0, 62) & (part.is_null() | (part >= 0))
    return pl.lit(2, pl.UInt64).pow(pl.when(inside).then(at).otherwise(63))


def _maybe_twice(inst: pl.DataFrame, parts: bool) -> pl.DataFrame:
    """The (model, instance_id) of the instances that may hold two verdicts of one constraint
    (`_twice_aggs`); with `parts`, `inst` has a row per part of an instance, and a constraint's two
    verdicts may sit in two parts."""
    if parts:
        inst = inst.group_by("model", "instance_id").agg(pl.col("_rows").sum(), pl.col("_bits").bitwise_or())
    twice = pl.col("_bits").bitwise_count_ones() != pl.col("_rows")
    return inst.filter(twice).select("model", "instance_id").unique()


def _slot_mix() -> pl.Expr:
    """A 64-bit mix of each row's (benchmark, model, judge, instance, constraint): counting its distinct
    values finds two verdicts of one slot in about a third of the time an exact test takes (3M rows of
    perf/metrics_perf.py's synth, streamed, best of 3 in one run, load average 16 on 2 cores: 0.65 s;
    a hash of the struct 1.00 s; the exact n_unique 2.06 s). Each column is hashed with a seed of its
    own, so equal values in two columns never cancel."""
    columns = ("benchmark", "model", "judge", "instance_id", *CONSTRAINT_KEY)
    mix = pl.col(columns[0]).hash(1)
    for seed, column in enumerate(columns[1:], start=2):
        mix = mix ^ pl.col(column).hash(seed)
    return mix


def _one_verdict_each(rows: pl.LazyFrame) -> None:
    """Raise VerdictError naming the instances with two verdicts of one judge: two (a stale and a new
    one, or two scoring modes) would be pooled into one figure without a sign. `rows`: the instances
    the bits suspect; a count of distinct `_slot_mix` clears them first (as when two judges' verdicts
    met in one group, or indexes past 31 shared a bit), holding the exact frame only when it fails."""
    slot = ["benchmark", "model", "judge", "instance_id", *CONSTRAINT_KEY]
    counts = streamed(rows.select(_slot_mix().n_unique().alias("distinct"), pl.len().alias("n")))
    if counts.item(0, "distinct") == counts.item(0, "n"):
        return
    frame = streamed(rows.select(*slot, "scoring"))
    twice = (
        frame.filter(pl.struct(slot).is_duplicated())
        .group_by(slot[: -len(CONSTRAINT_KEY)], maintain_order=True)
        .agg(pl.col("scoring").unique(maintain_order=True))
    )
    named = "; ".join(
        f"benchmark={r['benchmark']!r}, model={r['model']!r}, judge={r['judge']!r}, "
        f"instance_id={r['instance_id']!r} (scoring {', '.join(map(str, r['scoring']))})"
        for r in twice.head(3).iter_rows(named=True)
    )
    if twice.height:
        raise VerdictError(
            f"verdict rows: {twice.height} instances have two verdicts, which metrics would pool: "
            f"{named}; keep one verdict per (benchmark, model, judge, instance)"
        )
