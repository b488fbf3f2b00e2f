"""InFoBench's metric, for the metrics engine: DRFR, satisfied decomposed questions / all questions (a
micro average over rows).

A row whose constraint_type holds several labels joined by "|" counts under each distinct label.
"""

from __future__ import annotations

import polars as pl

from ifsweep.metrics import BenchmarkMetrics, Chart, Components, Leaf, kept_expr, per_instance, split_slice

BENCHMARK = "infobench"
_KEY = ["benchmark", "model", "instance_id"]


def _labels(by_type: pl.LazyFrame) -> pl.LazyFrame:
    """constraint_type -> label, one row per distinct label of each distinct type string."""
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


def infobench_components(rows: pl.DataFrame) -> Components:
    """Statistics of the InFoBench rows among `rows` (as `metrics.instances.materialized` reads them)."""
    # Counting per (instance, type string) first means labels are split on the distinct type strings
    # (a few thousand), not on every row.
    by_type = per_instance(
        rows,
        BENCHMARK,
        [
            kept_expr(),
            pl.col("satisfied").cast(pl.Float64).sum().alias("sat"),
            pl.len().cast(pl.Float64).alias("cnt"),
            pl.col("split").first(),
        ],
        within=["constraint_type"],
    ).collect()
    inst = (
        by_type.lazy()
        .group_by(_KEY)
        .agg(pl.col("kept").all(), pl.col("sat").sum(), pl.col("cnt").sum(), pl.col("split").first())
        .collect()
    )
    kept = inst.filter(pl.col("kept")).lazy()
    kept_types = by_type.lazy().join(kept.select(_KEY), on=_KEY, how="semi")
    sat, cnt = pl.col("sat"), pl.col("cnt")
    leaves = (
        Leaf(kept, "DRFR", pl.lit("all"), (), "instance", "instance_id", sat, cnt),
        Leaf(kept, "DRFR", split_slice(), ("split",), "instance", "instance_id", sat, cnt),
        Leaf(
            kept_types,
            "DRFR",
            pl.format("constraint_type={}", pl.col("label")),
            ("constraint_type",),
            "instance",
            "instance_id",
            sat,
            cnt,
            expand=_labels(by_type.lazy()),
        ),
    )
    return Components(leaves, seen=inst.lazy())


def definitions(display: str) -> tuple[BenchmarkMetrics, ...]:
    """DRFR: slices all, split=S, constraint_type=T; n = rows."""
    by_type = Chart(
        kind="heatmap",
        metrics=("DRFR",),
        prefix="constraint_type=",
        heading="InFoBench: DRFR by constraint type",
        title="InFoBench DRFR by constraint type",
        file="infobench_by_type.svg",
    )
    return (
        BenchmarkMetrics(
            name=BENCHMARK,
            display=display,
            headline=("DRFR",),
            primary="DRFR",
            components=infobench_components,
            charts=(by_type,),
        ),
    )
