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
    coverage and coverage_n. Ranked by the benchmark's primary metric, best first; equal scores keep
    the order of `metrics` (compute_metrics sorts by model name; a report puts config order first)."""
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
    rank = catalog.primary(benchmark)
    return out.sort(rank, descending=True, nulls_last=True, maintain_order=True)


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
