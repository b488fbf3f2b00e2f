"""The headline view shared by every report: per benchmark, one row per model with its "all" slices."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from ifsweep.metrics.catalog import Catalog


def benchmarks_in(metrics: pl.DataFrame, catalog: Catalog) -> list[str]:
    return catalog.ordered(metrics.get_column("benchmark").to_list())


def leaderboard(metrics: pl.DataFrame, catalog: Catalog, benchmark: str) -> pl.DataFrame:
    """Columns: model, then per headline metric M: M, M_lo, M_hi (null without intervals), M_n; then
    coverage and coverage_n. Ranked by the benchmark's primary metric, best first, ties by its other
    headline metrics in order; what ties on all keeps the order of `metrics` (compute_metrics sorts by
    model name; `report`, `metrics`, `ifsweep.scores` and the viewer put the config's order, else the
    natural order, first)."""
    names = [*catalog.headline(benchmark), "coverage"]
    part = metrics.filter((pl.col("benchmark") == benchmark) & (pl.col("slice") == "all"))
    has_ci = "ci_low" in part.columns
    models = part.select(pl.col("model").unique(maintain_order=True))  # the order `metrics` gives
    out = models
    for m in names:
        cols = [pl.col("value").alias(m), pl.col("n").alias(f"{m}_n")]
        cols += (
            [pl.col("ci_low").alias(f"{m}_lo"), pl.col("ci_high").alias(f"{m}_hi")]
            if has_ci
            else [pl.lit(None, pl.Float64).alias(f"{m}_lo"), pl.lit(None, pl.Float64).alias(f"{m}_hi")]
        )
        out = out.join(part.filter(pl.col("metric") == m).select("model", *cols), on="model", how="left")
    # Ties on the primary metric go to the next headline metric, and so on; what ties on all of them
    # keeps the order of `metrics` (a report's: the config's).
    primary = catalog.primary(benchmark)
    ranks = [primary, *(m for m in catalog.headline(benchmark) if m != primary)]
    return out.sort(ranks, descending=True, nulls_last=True, maintain_order=True)


def partial_note(metrics: pl.DataFrame, benchmark: str) -> str:
    """What part of its plan each model of a benchmark's table covers, when any covers less than all:
    "partial run: alpha 32 of 425 planned instances; beta ...". From the `planned` and `done` columns a
    run directory's reading adds (runner/commands/rundir.with_progress); "" without them or when every
    model is done."""
    if "planned" not in metrics.columns or "done" not in metrics.columns:
        return ""
    part = (
        metrics.filter(pl.col("benchmark") == benchmark)
        .select("model", "planned", "done")
        .unique(subset="model", maintain_order=True)
        .drop_nulls()
    )
    if part.height == 0 or all(d >= p for d, p in zip(part["done"], part["planned"], strict=True)):
        return ""
    each = "; ".join(f"{m} {d} of {p} planned instances" for m, p, d in part.iter_rows())
    return f"partial run: {each}"


def header(catalog: Catalog, benchmark: str, metric: str) -> str:
    """A column head: the metric, with "%" unless it is counted in levels."""
    return metric if catalog.in_levels(benchmark, metric) else f"{metric} %"


def fmt_value(v: float | None, *, levels: bool = False) -> str:
    if v is None or math.isnan(v):
        return "–"
    return f"{v:.2f}" if levels else f"{100 * v:.1f}"


def fmt_interval(lo: float | None, hi: float | None, *, levels: bool = False) -> str:
    if lo is None or hi is None:
        return ""
    return f"[{fmt_value(lo, levels=levels)}, {fmt_value(hi, levels=levels)}]"


def value_texts(row: Mapping[str, Any], catalog: Catalog, benchmark: str, names: Sequence[str]) -> list[str]:
    """Each of `names` in a leaderboard row as text: its value, then its interval when computed."""
    out = []
    for m in names:
        levels = catalog.in_levels(benchmark, m)
        out.append(
            (
                fmt_value(row[m], levels=levels)
                + " "
                + fmt_interval(row[f"{m}_lo"], row[f"{m}_hi"], levels=levels)
            ).strip()
        )
    return out
