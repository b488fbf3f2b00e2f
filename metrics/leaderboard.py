"""The headline view shared by every report: per benchmark, one row per model with its "all" slices."""

from __future__ import annotations

import math

import polars as pl

BENCHMARK_ORDER: tuple[str, ...] = ("followbench", "followbench-zh", "cfbench", "infobench", "eifbench")
DISPLAY: dict[str, str] = {
    "followbench": "FollowBench",
    "followbench-zh": "FollowBench (zh)",
    "cfbench": "CFBench",
    "infobench": "InFoBench",
    "eifbench": "EIFBench",
}
HEADLINE: dict[str, tuple[str, ...]] = {
    "followbench": ("HSR", "SSR", "CSL"),
    "followbench-zh": ("HSR", "SSR", "CSL"),
    "cfbench": ("CSR", "ISR", "PSR"),
    "infobench": ("DRFR",),
    "eifbench": ("GAcc", "ILAcc", "CLAcc"),
}
# The one number a benchmark is ranked by (and plotted against cost).
PRIMARY: dict[str, str] = {
    "followbench": "HSR",
    "followbench-zh": "HSR",
    "cfbench": "PSR",
    "infobench": "DRFR",
    "eifbench": "GAcc",
}
LEVEL_METRICS = frozenset({"CSL"})  # counted in levels (0-5), not a fraction


def benchmarks_in(metrics: pl.DataFrame) -> list[str]:
    present = set(metrics.get_column("benchmark").to_list())
    return [b for b in BENCHMARK_ORDER if b in present] + sorted(present - set(BENCHMARK_ORDER))


def leaderboard(metrics: pl.DataFrame, benchmark: str) -> pl.DataFrame:
    """Columns: model, then per headline metric M: M, M_lo, M_hi (null without intervals), M_n; then
    coverage and coverage_n. Ranked by the benchmark's primary metric, best first."""
    names = [*HEADLINE.get(benchmark, ()), "coverage"]
    part = metrics.filter((pl.col("benchmark") == benchmark) & (pl.col("slice") == "all"))
    has_ci = "ci_low" in part.columns
    models = part.select(pl.col("model").unique().sort())
    out = models
    for m in names:
        cols = [pl.col("value").alias(m), pl.col("n").alias(f"{m}_n")]
        cols += (
            [pl.col("ci_low").alias(f"{m}_lo"), pl.col("ci_high").alias(f"{m}_hi")]
            if has_ci
            else [pl.lit(None, pl.Float64).alias(f"{m}_lo"), pl.lit(None, pl.Float64).alias(f"{m}_hi")]
        )
        out = out.join(part.filter(pl.col("metric") == m).select("model", *cols), on="model", how="left")
    rank = PRIMARY.get(benchmark, "coverage")
    return out.sort([rank, "model"], descending=[True, False], nulls_last=True)


def fmt_value(metric: str, v: float | None) -> str:
    if v is None or math.isnan(v):
        return "–"
    return f"{v:.2f}" if metric in LEVEL_METRICS else f"{100 * v:.1f}"


def fmt_interval(metric: str, lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return ""
    return f"[{fmt_value(metric, lo)}, {fmt_value(metric, hi)}]"
