"""Every metric as per-unit sums plus a tree of unweighted means.

A *leaf* statistic (benchmark, model, metric, slice) is sum(num) / sum(den) over its units (instances, or
FollowBench groups for CSL): a plain mean when den is 1 per unit, a micro average (InFoBench DRFR) when
den counts rows. A *parent* statistic is the unweighted mean of child statistics of the same benchmark,
model and metric (FollowBench "level=L" over its categories, "all" over levels). Point estimates and the
bootstrap both evaluate this one description, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

STAT_KEY: tuple[str, ...] = ("benchmark", "model", "metric", "slice")

LEAF_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "unit_kind": pl.String(),  # "instance" or "group": what the bootstrap resamples
    "unit": pl.String(),
    "num": pl.Float64(),
    "den": pl.Float64(),
}

PARENT_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "child": pl.String(),  # the child's slice; same benchmark, model and metric
    "layer": pl.Int64(),  # 1: children are leaves; 2: children are layer-1 parents
}

RESULT_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "metric": pl.String(),
    "slice": pl.String(),
    "value": pl.Float64(),
    "n": pl.Int64(),
}


@dataclass(frozen=True, slots=True)
class Components:
    leaves: pl.LazyFrame  # LEAF_SCHEMA, one row per (stat, unit)
    parents: pl.LazyFrame  # PARENT_SCHEMA, one row per (parent stat, child slice)

    @staticmethod
    def empty() -> Components:
        return Components(pl.LazyFrame(schema=LEAF_SCHEMA), pl.LazyFrame(schema=PARENT_SCHEMA))

    @staticmethod
    def concat(parts: list[Components]) -> Components:
        if not parts:
            return Components.empty()
        return Components(
            pl.concat([p.leaves.select(list(LEAF_SCHEMA)) for p in parts]),
            pl.concat([p.parents.select(list(PARENT_SCHEMA)) for p in parts]),
        )


def leaves_frame(
    frame: pl.LazyFrame,
    *,
    metric: str,
    slice_: pl.Expr,
    unit_kind: str,
    unit: str,
    num: pl.Expr,
    den: pl.Expr | None = None,
) -> pl.LazyFrame:
    """Shape per-unit values into leaf rows (rows whose slice is null are dropped: no such slice)."""
    return frame.select(
        pl.col("benchmark"),
        pl.col("model"),
        pl.lit(metric).alias("metric"),
        slice_.alias("slice"),
        pl.lit(unit_kind).alias("unit_kind"),
        pl.col(unit).alias("unit"),
        num.cast(pl.Float64).alias("num"),
        (pl.lit(1.0) if den is None else den.cast(pl.Float64)).alias("den"),
    ).filter(pl.col("slice").is_not_null())


def split_slice() -> pl.Expr:
    return pl.format("split={}", pl.col("split"))


def point_estimates(leaves: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """Evaluate leaves and then each parent layer in order. n is sum(den) for a leaf (instances, groups
    or rows) and the number of children for a parent."""
    # Sorting inside each group fixes the order of float additions, so results are bit-for-bit the same
    # however the parallel group-by split the rows.
    values = leaves.group_by(list(STAT_KEY)).agg(
        (pl.col("num").sort().sum() / pl.col("den").sort().sum()).alias("value"),
        pl.col("den").sum().round().cast(pl.Int64).alias("n"),
    )
    key = ["benchmark", "model", "metric"]
    for layer in sorted(parents.get_column("layer").unique().to_list()):
        edges = parents.filter(pl.col("layer") == layer)
        derived = (
            edges.join(
                values.select([*key, pl.col("slice").alias("child"), "value"]),
                on=[*key, "child"],
                how="inner",
            )
            .group_by(list(STAT_KEY))
            .agg(pl.col("value").sort().mean(), pl.len().cast(pl.Int64).alias("n"))
        )
        values = pl.concat([values, derived.select(values.columns)])
    return values.select(list(RESULT_SCHEMA)).cast(pl.Schema(RESULT_SCHEMA)).sort(list(STAT_KEY))
