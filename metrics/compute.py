"""compute_metrics: every benchmark's metrics, coverage and optional bootstrap intervals, in one pass."""

from __future__ import annotations

import functools
from collections.abc import Callable

import polars as pl

from ifsweep.metrics.bootstrap import bootstrap_intervals
from ifsweep.metrics.cfbench import cfbench_components
from ifsweep.metrics.components import STAT_KEY, Components, estimates
from ifsweep.metrics.coverage import coverage_leaf
from ifsweep.metrics.eifbench import eifbench_components
from ifsweep.metrics.followbench import LANGUAGE_BENCHMARKS, followbench_components
from ifsweep.metrics.infobench import infobench_components
from ifsweep.metrics.instances import materialized
from ifsweep.metrics.schema import VerdictError, describe_problem, first_problem

COMPONENTS: dict[str, Callable[[pl.DataFrame], Components]] = {
    "cfbench": cfbench_components,
    "eifbench": eifbench_components,
    **{name: functools.partial(followbench_components, benchmark=name) for name in LANGUAGE_BENCHMARKS},
    "infobench": infobench_components,
}


def all_components(rows: pl.LazyFrame | pl.DataFrame) -> Components:
    """Every benchmark's statistics plus coverage, over rows read once and validated."""
    frame = materialized(rows)
    problem = first_problem(frame.lazy()).collect()
    if problem.height:
        raise VerdictError(describe_problem(problem))
    c = Components.concat([build(frame) for build in COMPONENTS.values()])
    return Components((*c.leaves, coverage_leaf(c.seen)), c.parents, c.seen, c.finals)


def components_of(rows: pl.LazyFrame | pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Validated per-unit leaves and parents of every metric (what the bootstrap resamples)."""
    c = all_components(rows)
    leaves, parents = pl.collect_all([c.per_unit(), c.parent_edges()])
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
    c = all_components(rows)
    sums, parents, finals = pl.collect_all([c.sums(), c.parent_edges(), c.finals])
    out = estimates(sums, parents, finals)
    if ci:
        intervals = bootstrap_intervals(
            c.per_unit().collect(), parents, resamples=resamples, seed=seed, confidence=confidence
        )
        out = out.join(intervals, on=list(STAT_KEY), how="left").sort(list(STAT_KEY))
    return out
