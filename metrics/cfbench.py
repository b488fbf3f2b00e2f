"""CFBench: CSR, ISR and PSR per instance, averaged over instances (no rounding).

PSR follows the CFBench paper's priority rule: any unsatisfied primary requirement fails the instance;
otherwise an instance without secondary requirements passes; otherwise, without primary requirements it
passes when CSR > 0.8, and with both it passes when 0.5 + 0.5 * mean(secondary) > 0.8.
"""

from __future__ import annotations

import polars as pl

from metrics.components import PARENT_SCHEMA, Components, leaves_frame, point_estimates, split_slice
from metrics.instances import INSTANCE_KEY, kept_rows, materialized

BENCHMARK = "cfbench"


def _per_instance(rows: pl.LazyFrame) -> pl.LazyFrame:
    sat = pl.col("satisfied")
    primary = pl.col("priority") == "primary"
    secondary = pl.col("priority") == "secondary"
    inst = rows.group_by(INSTANCE_KEY).agg(
        sat.cast(pl.Float64).mean().alias("CSR"),
        sat.all().cast(pl.Float64).alias("ISR"),
        (primary & ~sat).any().alias("primary_failed"),
        primary.sum().alias("n_primary"),
        secondary.sum().alias("n_secondary"),
        sat.filter(secondary).cast(pl.Float64).mean().alias("secondary_mean"),
        pl.col("split").first(),
    )
    psr = (
        pl.when(pl.col("primary_failed"))
        .then(0.0)
        .when(pl.col("n_secondary") == 0)
        .then(1.0)
        .when(pl.col("n_primary") == 0)
        .then((pl.col("CSR") > 0.8).cast(pl.Float64))
        .otherwise((0.5 + 0.5 * pl.col("secondary_mean") > 0.8).cast(pl.Float64))
    )
    return inst.with_columns(psr.alias("PSR"))


def cfbench_components(rows: pl.LazyFrame | pl.DataFrame) -> Components:
    inst = _per_instance(kept_rows(rows)).cache()
    leaves = [
        leaves_frame(inst, metric=m, slice_=s, unit_kind="instance", unit="instance_id", num=pl.col(m))
        for m in ("CSR", "ISR", "PSR")
        for s in (pl.lit("all"), split_slice())
    ]
    return Components(pl.concat(leaves), pl.LazyFrame(schema=PARENT_SCHEMA))


def cfbench_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """CSR, ISR, PSR of CFBench rows: slices all and split=S; n = instances."""
    c = cfbench_components(materialized(rows, BENCHMARK))
    leaves, parents = pl.collect_all([c.leaves, c.parents])
    return point_estimates(leaves, parents)
