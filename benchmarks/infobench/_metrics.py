"""InFoBench's metric, for the metrics engine: DRFR, satisfied decomposed questions / all questions (a
micro average over rows).

A row whose constraint_type holds several labels joined by "|" counts under each distinct label.
"""

from __future__ import annotations

import polars as pl

from ifsweep.metrics import BenchmarkMetrics, Chart, Components, Leaf, kept_expr, per_instance, streamed
from ifsweep.metrics.components import split_leaves

BENCHMARK = "infobench"
_KEY = ["benchmark", "model", "instance_id"]


def _labels(by_type: pl.LazyFrame) -> pl.LazyFrame:
    """constraint_type -> label, one row per distinct label of each distinct type string (split on
    the few distinct type strings, not on every row)."""
    return (
        by_type.select(pl.col("constraint_type").unique())
        .with_columns(
            pl.col("constraint_type")
            .str.split("|")
            .list.eval(pl.element().str.strip_chars())
            .list.unique()
            .alias("label")
        )
        .explode("label")
        .filter(pl.col("label").is_not_null() & (pl.col("label") != ""))
    )


def infobench_components(rows: pl.LazyFrame) -> Components:
    """Statistics of the InFoBench rows among `rows` (a lazy plan: `metrics.instances.prepared`)."""
    # Counts in 32 bits per instance (a float each held 8 bytes more per instance while streaming).
    sat, cnt = pl.col("satisfied").sum().alias("sat"), pl.len().alias("cnt")
    inst = per_instance(rows, BENCHMARK, [kept_expr(), sat, cnt, pl.col("split").first()])
    kept = inst.filter(pl.col("kept"))
    # The rows of kept instances: an anti-join against the dropped ones, usually few.
    dropped = streamed(inst.filter(~pl.col("kept")).select(pl.col(_KEY[1:]).cast(pl.String))).lazy()
    mine = rows.filter(pl.col("benchmark") == BENCHMARK).join(dropped, on=_KEY[1:], how="anti")
    with_bench = pl.lit(BENCHMARK).alias("benchmark")
    # Per type string, summed in the same streaming pass; the rows per (instance, label) only for the
    # bootstrap (never collected for point estimates).
    totals = streamed(mine.group_by("model", "constraint_type").agg(sat, cnt).with_columns(with_bench))
    # The rows themselves are the per-type leaf's units: its expansion sums them per (instance, label)
    # in one group-by (one per (instance, type) string first held 4.6 GB at 30M rows). Model and
    # instance are codes of categories private to the call (strings held 0.7 GB more at 10M rows).
    ids = pl.Categorical(pl.Categories.random())
    units = mine.select(
        with_bench,
        pl.col(*_KEY[1:]).cast(ids),
        "constraint_type",
        pl.col("satisfied").cast(pl.UInt32).alias("sat"),
        pl.lit(1, pl.UInt32).alias("cnt"),
    )
    s, c = pl.col("sat"), pl.col("cnt")
    leaves = (
        *split_leaves(kept, "DRFR", s, c),
        Leaf(
            units,
            "DRFR",
            pl.format("constraint_type={}", pl.col("label")),
            ("constraint_type",),
            "instance",
            "instance_id",
            s,
            c,
            expand=_labels(totals.lazy()),
            totals=totals.lazy(),
        ),
    )
    return Components(leaves, seen=inst)


def definitions(display: str) -> tuple[BenchmarkMetrics, ...]:
    """DRFR: slices all, split=S, constraint_type=T; n = rows."""
    chart = Chart.heatmap("InFoBench", "DRFR", "constraint_type", "constraint type", "infobench_by_type.svg")
    return (
        BenchmarkMetrics(
            name=BENCHMARK,
            display=display,
            headline=("DRFR",),
            primary="DRFR",
            components=infobench_components,
            charts=(chart,),
        ),
    )
