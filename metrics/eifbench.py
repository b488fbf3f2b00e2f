"""EIFBench: per task, GAcc (every constraint met), ILAcc (share of sub-instructions whose constraints
are all met) and CLAcc (share of constraints met), averaged over tasks.

Rows without an instruction_idx form one sub-instruction of their task.
"""

from __future__ import annotations

import polars as pl

from metrics.components import PARENT_SCHEMA, Components, leaves_frame, point_estimates, split_slice
from metrics.instances import INSTANCE_KEY, kept_rows, materialized

BENCHMARK = "eifbench"


def _per_task(rows: pl.LazyFrame) -> pl.LazyFrame:
    sub = rows.group_by([*INSTANCE_KEY, "instruction_idx"]).agg(
        pl.col("satisfied").all().alias("all_sat"),
        pl.col("satisfied").cast(pl.Float64).sum().alias("sat"),
        pl.len().cast(pl.Float64).alias("cnt"),
        pl.col("split").first(),
    )
    return sub.group_by(INSTANCE_KEY).agg(
        pl.col("all_sat").all().cast(pl.Float64).alias("GAcc"),
        pl.col("all_sat").cast(pl.Float64).mean().alias("ILAcc"),
        (pl.col("sat").sum() / pl.col("cnt").sum()).alias("CLAcc"),
        pl.col("split").first(),
    )


def eifbench_components(rows: pl.LazyFrame | pl.DataFrame) -> Components:
    task = _per_task(kept_rows(rows)).cache()
    leaves = [
        leaves_frame(task, metric=m, slice_=s, unit_kind="instance", unit="instance_id", num=pl.col(m))
        for m in ("GAcc", "ILAcc", "CLAcc")
        for s in (pl.lit("all"), split_slice())
    ]
    return Components(pl.concat(leaves), pl.LazyFrame(schema=PARENT_SCHEMA))


def eifbench_metrics(rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """GAcc, ILAcc, CLAcc of EIFBench rows: slices all and split=S; n = tasks."""
    c = eifbench_components(materialized(rows, BENCHMARK))
    leaves, parents = pl.collect_all([c.leaves, c.parents])
    return point_estimates(leaves, parents)
