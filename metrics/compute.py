"""compute_metrics: every benchmark's metrics, coverage and optional bootstrap intervals, streaming.

The rows are a lazy plan (a Parquet or JSONL scan, or a frame) read by Polars' streaming engine: one
pass validates them, then each benchmark's definition reduces its rows to per-instance summaries, and
everything after (sums, parents, the bootstrap) works on those. The row-level frame is never held.
"""

from __future__ import annotations

import polars as pl

from ifsweep.metrics.bootstrap import bootstrap_intervals
from ifsweep.metrics.catalog import BenchmarkMetrics, Catalog
from ifsweep.metrics.components import STAT_KEY, Components, estimates, point_estimates
from ifsweep.metrics.coverage import coverage_leaf
from ifsweep.metrics.instances import by_judge, prepared, streamed
from ifsweep.metrics.schema import VerdictError, any_problem, describe_problem, first_problem


def validated(rows: pl.LazyFrame | pl.DataFrame, catalog: Catalog) -> tuple[pl.LazyFrame, list[str | None]]:
    """`prepared(rows)` and the judges they hold, after one streaming pass found no row breaking the
    contract (else VerdictError naming the first such row). Two verdicts of one constraint are found
    by the per-instance pass every benchmark makes (`metrics.instances.per_instance`)."""
    lf = prepared(rows)
    found = streamed(any_problem(lf, catalog))
    if found.get_column("bad").any():
        raise VerdictError(describe_problem(streamed(first_problem(lf, catalog))))
    return lf, found.get_column("judge").to_list()


def all_components(rows: pl.LazyFrame, catalog: Catalog) -> Components:
    """Every benchmark's statistics plus coverage, over validated rows (`validated`)."""
    c = Components.concat([b.components(rows) for b in catalog.benchmarks])
    return Components((*c.leaves, coverage_leaf(c.seen)), c.parents, c.seen, c.finals)


def components_of(rows: pl.LazyFrame | pl.DataFrame, catalog: Catalog) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Validated per-unit leaves and parents of every metric (what the bootstrap resamples)."""
    c = all_components(validated(rows, catalog)[0], catalog)
    leaves, parents = pl.collect_all([c.per_unit(), c.parent_edges()])
    return leaves, parents


def compute_metrics(
    rows: pl.LazyFrame | pl.DataFrame,
    catalog: Catalog,
    *,
    ci: bool = False,
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """One row per (benchmark, model, judge, metric, slice): value (a fraction; metrics counted in
    levels, such as FollowBench's CSL, in levels), n, and with `ci` the seeded bootstrap percentile
    interval ci_low / ci_high. Sorted by benchmark, model, judge, metric, slice. Every row's benchmark
    must be in `catalog`.

    Each judge's rows are a run of their own: two judges' verdicts on one instance are never pooled
    into one figure (a null judge, rows decided without one, is a judge of its own too)."""
    lf, judges = validated(rows, catalog)
    return by_judge(
        lf,
        lambda mine: _one_judge(mine, catalog, ci=ci, resamples=resamples, seed=seed, confidence=confidence),
        judges,
    )


def _one_judge(
    rows: pl.LazyFrame, catalog: Catalog, *, ci: bool, resamples: int, seed: int, confidence: float
) -> pl.DataFrame:
    c = all_components(rows, catalog)
    sums, parents, finals = pl.collect_all([c.sums(), c.parent_edges(), c.finals])
    out = estimates(sums, parents, finals)
    if ci:
        intervals = bootstrap_intervals(
            c.unit_cells(), parents, resamples=resamples, seed=seed, confidence=confidence
        )
        out = out.join(intervals, on=list(STAT_KEY), how="left").sort(list(STAT_KEY))
    return out


def benchmark_metrics(rows: pl.LazyFrame | pl.DataFrame, benchmark: BenchmarkMetrics) -> pl.DataFrame:
    """The point estimates of one benchmark's rows among `rows` (the others are ignored, and not
    validated, but two verdicts of one constraint are refused): the rows `compute_metrics` gives for
    it, without coverage."""
    return by_judge(prepared(rows, benchmark.name), lambda mine: point_estimates(benchmark.components(mine)))
