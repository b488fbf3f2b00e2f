"""InFoBench DRFR: satisfied decomposed questions / all questions (a micro average over rows).

A row whose constraint_type holds several labels joined by "|" counts under each distinct label.
"""

from __future__ import annotations

import polars as pl

from metrics.components import PARENT_SCHEMA, Components, leaves_frame, point_estimates, split_slice
from metrics.instances import INSTANCE_KEY, kept_rows, materialized

BENCHMARK = "infobench"


def infobench_components(rows: pl.LazyFrame | pl.DataFrame) -> Components:
    # Counting per (instance, type string) first means labels are split on a few thousand strings,
    # not on every row.
    by_type = (
        kept_rows(rows)
        .group_by([*INSTANCE_KEY, "constraint_type"])
        .agg(
            pl.col("satisfied").cast(pl.Float64).sum().alias("sat"),
            pl.len().cast(pl.Float64).alias("cnt"),
            pl.col("split").first(),
        )
        .cache()
    )
    per_instance = by_type.group_by(INSTANCE_KEY).agg(
        pl.col("sat").sum(), pl.col("cnt").sum(), pl.col("split").first()
    )
    per_label = (
        by_type.with_columns(
            pl.col("constraint_type")
            .str.split("|")
            .list.eval(pl.element().str.strip_chars())
            .list.unique()
            .alias("label")
        )
        .explode("label")
        .filter(pl.col("label").is_not_null() & (pl.col("label") != ""))
        .group_by([*INSTANCE_KEY, "label"])
        .agg(pl.col("sat").sum(), pl.col("cnt").sum())
    )
    common = {"metric": "DRFR", "unit_kind": "instance", "unit": "instance_id"}
    leaves = pl.concat(
        [
            leaves_frame(per_instance, slice_=pl.lit("all"), num=pl.col("sat"), den=pl.col("cnt"), **common),
            leaves_frame(per_instance, slice_=split_slice(), num=pl.col("sat"), den=pl.col("cnt"), **common),
            leaves_frame(
                per_label,
                slice_=pl.format("constraint_type={}", pl.col("label")),
                num=pl.col("sat"),
                den=pl.col("cnt"),
                **common,
            ),
        ]
    )
    return Components(leaves, pl.LazyFrame(schema=PARENT_SCHEMA))


def infobench_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """DRFR of InFoBench rows: slices all, split=S, constraint_type=T; n = rows."""
    c = infobench_components(materialized(rows, BENCHMARK))
    leaves, parents = pl.collect_all([c.leaves, c.parents])
    return point_estimates(leaves, parents)
