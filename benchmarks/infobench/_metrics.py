"""InFoBench DRFR: satisfied decomposed questions / all questions (a micro average over rows).

A row whose constraint_type holds several labels joined by "|" counts under each distinct label.
"""

from __future__ import annotations

import polars as pl

from ifsweep.metrics.components import Components, Leaf, point_estimates, split_slice
from ifsweep.metrics.instances import kept_expr, materialized, per_instance

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
    """Statistics of the InFoBench rows among `rows` (read into memory: see `materialized`)."""
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


def infobench_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """DRFR of InFoBench rows: slices all, split=S, constraint_type=T; n = rows."""
    return point_estimates(infobench_components(materialized(rows, BENCHMARK)))
