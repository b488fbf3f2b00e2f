"""CFBench: CSR, ISR and PSR per instance, averaged over instances (no rounding).

PSR follows the CFBench paper's priority rule: any unsatisfied primary requirement fails the instance;
otherwise an instance without secondary requirements passes; otherwise, without primary requirements it
passes when CSR > 0.8, and with both it passes when 0.5 + 0.5 * mean(secondary) > 0.8.
"""

from __future__ import annotations

import polars as pl

from ifsweep.metrics.components import Components, Leaf, point_estimates, split_slice
from ifsweep.metrics.instances import kept_expr, materialized, per_instance

BENCHMARK = "cfbench"


def _instances(rows: pl.DataFrame) -> pl.DataFrame:
    sat = pl.col("satisfied")
    primary = pl.col("priority") == "primary"
    secondary = pl.col("priority") == "secondary"
    aggs = [
        kept_expr(),
        sat.cast(pl.Float64).mean().alias("CSR"),
        sat.all().cast(pl.Float64).alias("ISR"),
        (primary & ~sat).any().alias("primary_failed"),
        primary.sum().alias("n_primary"),
        secondary.sum().alias("n_secondary"),
        # A filter inside a group-by aggregation is about 5x slower than this ratio of sums; both are
        # null or NaN only when there is no secondary row, which PSR checks first.
        ((sat & secondary).sum() / secondary.sum()).alias("secondary_mean"),
        pl.col("split").first(),
    ]
    psr = (
        pl.when(pl.col("primary_failed"))
        .then(0.0)
        .when(pl.col("n_secondary") == 0)
        .then(1.0)
        .when(pl.col("n_primary") == 0)
        .then((pl.col("CSR") > 0.8).cast(pl.Float64))
        .otherwise((0.5 + 0.5 * pl.col("secondary_mean") > 0.8).cast(pl.Float64))
    )
    return per_instance(rows, BENCHMARK, aggs).with_columns(psr.alias("PSR")).collect()


def cfbench_components(rows: pl.DataFrame) -> Components:
    """Statistics of the CFBench rows among `rows` (read into memory: see `materialized`)."""
    inst = _instances(rows)
    kept = inst.filter(pl.col("kept")).lazy()
    leaves = tuple(
        Leaf(kept, m, s, by, "instance", "instance_id", pl.col(m))
        for m in ("CSR", "ISR", "PSR")
        for s, by in ((pl.lit("all"), ()), (split_slice(), ("split",)))
    )
    return Components(leaves, seen=inst.lazy())


def cfbench_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """CSR, ISR, PSR of CFBench rows: slices all and split=S; n = instances."""
    return point_estimates(cfbench_components(materialized(rows, BENCHMARK)))
