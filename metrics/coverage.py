"""Coverage: the share of seen instances that every metric was computed over."""

from __future__ import annotations

import polars as pl

from metrics.components import PARENT_SCHEMA, Components, leaves_frame, point_estimates
from metrics.instances import INSTANCE_KEY, as_lazy, kept_expr, materialized


def coverage_components(rows: pl.LazyFrame | pl.DataFrame) -> Components:
    """Slice "all" per benchmark and model: instances kept / instances seen; n = instances seen."""
    inst = as_lazy(rows).group_by(INSTANCE_KEY).agg(kept_expr())
    leaves = leaves_frame(
        inst,
        metric="coverage",
        slice_=pl.lit("all"),
        unit_kind="instance",
        unit="instance_id",
        num=pl.col("kept"),
    )
    return Components(leaves, pl.LazyFrame(schema=PARENT_SCHEMA))


def coverage_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    c = coverage_components(materialized(rows))
    return point_estimates(c.leaves.collect(), c.parents.collect())
