"""Coverage: the share of seen instances that every metric was computed over."""

from __future__ import annotations

import polars as pl

from ifsweep.metrics.components import Components, Leaf, point_estimates
from ifsweep.metrics.instances import INSTANCE_KEY, by_judge, kept_expr, prepared, streamed


def coverage_leaf(seen: pl.LazyFrame) -> Leaf:
    """Slice "all" per benchmark and model: instances kept / instances seen; n = instances seen.
    `seen` has one row per instance with its `kept` flag (what every benchmark's components carry)."""
    return Leaf(seen, "coverage", pl.lit("all"), (), "instance", "instance_id", pl.col("kept"))


def coverage_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    def one(mine: pl.LazyFrame) -> pl.DataFrame:
        seen = streamed(mine.group_by(INSTANCE_KEY).agg(kept_expr()))
        return point_estimates(Components((coverage_leaf(seen.lazy()),)))

    return by_judge(prepared(rows), one)
