"""EIFBench's metrics, for the metrics engine: per task, GAcc (every constraint met), ILAcc (share of
sub-instructions whose constraints are all met) and CLAcc (share of constraints met), averaged over tasks.

Rows without an instruction_idx form one sub-instruction of their task.
"""

from __future__ import annotations

import polars as pl

from ifsweep.metrics import BenchmarkMetrics, Chart, Components, kept_expr, per_instance, streamed
from ifsweep.metrics.components import instance_means

BENCHMARK = "eifbench"
METRICS = ("GAcc", "ILAcc", "CLAcc")


def _tasks(rows: pl.LazyFrame) -> pl.DataFrame:
    sub = per_instance(
        rows,
        BENCHMARK,
        [
            kept_expr(),
            pl.col("satisfied").all().alias("all_sat"),
            pl.col("satisfied").sum().alias("sat"),
            pl.len().alias("cnt"),
            pl.col("split").first(),
        ],
        within=["instruction_idx"],
    )
    return streamed(
        sub.group_by(["benchmark", "model", "instance_id"]).agg(
            pl.col("kept").all(),
            pl.col("all_sat").all().cast(pl.Float64).alias("GAcc"),
            pl.col("all_sat").cast(pl.Float64).mean().alias("ILAcc"),
            (pl.col("sat").sum() / pl.col("cnt").sum()).alias("CLAcc"),
            pl.col("split").first(),
        )
    )


def eifbench_components(rows: pl.LazyFrame) -> Components:
    """Statistics of the EIFBench rows among `rows` (a lazy plan: `metrics.instances.prepared`)."""
    return instance_means(_tasks(rows).lazy(), METRICS)


def definitions(display: str) -> tuple[BenchmarkMetrics, ...]:
    """GAcc, ILAcc, CLAcc: slices all and split=S (the scenarios); n = tasks. Ranked by GAcc."""
    by_scenario = Chart.heatmap("EIFBench", "GAcc", "split", "scenario", "eifbench_by_scenario.svg")
    return (
        BenchmarkMetrics(BENCHMARK, display, METRICS, "GAcc", eifbench_components, charts=(by_scenario,)),
    )
