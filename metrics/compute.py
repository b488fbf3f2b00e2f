"""compute_metrics: every benchmark's metrics, coverage and optional bootstrap intervals, in one pass."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from metrics.bootstrap import bootstrap_intervals
from metrics.cfbench import cfbench_components
from metrics.components import STAT_KEY, Components, point_estimates
from metrics.coverage import coverage_components
from metrics.eifbench import eifbench_components
from metrics.followbench import followbench_components
from metrics.infobench import infobench_components
from metrics.instances import materialized
from metrics.schema import VerdictError, describe_problem, first_problem

COMPONENTS: dict[str, Callable[[pl.LazyFrame], Components]] = {
    "cfbench": cfbench_components,
    "eifbench": eifbench_components,
    "followbench": followbench_components,
    "infobench": infobench_components,
}


def components_of(rows: pl.LazyFrame | pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Validated leaves and parents of every metric, collected in one query plan over rows read once."""
    lf = materialized(rows)
    parts = [coverage_components(lf)]
    parts += [build(lf.filter(pl.col("benchmark") == name)) for name, build in COMPONENTS.items()]
    c = Components.concat(parts)
    problem, leaves, parents = pl.collect_all([first_problem(lf), c.leaves, c.parents])
    if problem.height:
        raise VerdictError(describe_problem(problem))
    return leaves, parents


def compute_metrics(
    rows: pl.LazyFrame | pl.DataFrame,
    *,
    ci: bool = False,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """One row per (benchmark, model, metric, slice): value (a fraction; CSL in levels), n, and with
    `ci` the seeded bootstrap percentile interval ci_low / ci_high. Sorted by benchmark, model,
    metric, slice."""
    leaves, parents = components_of(rows)
    out = point_estimates(leaves, parents)
    if ci:
        intervals = bootstrap_intervals(
            leaves, parents, resamples=resamples, seed=seed, confidence=confidence
        )
        out = out.join(intervals, on=list(STAT_KEY), how="left").sort(list(STAT_KEY))
    return out
