"""Run analytics: what each model cost and how its calls went, per benchmark, beside its coverage."""

from __future__ import annotations

import polars as pl

CALL_COLUMNS: tuple[str, ...] = (
    "kind",
    "model",
    "judge",
    "benchmark",
    "status",
    "cost_usd",
    "input_tokens",
    "output_tokens",
    "latency_s",
    "attempts",
    "rate_limited",
    "error_kind",
)
# Call fields recorded since prefix caching is settled (docs/design/judge-cache.md): 0 where absent.
OPTIONAL_CALL_COLUMNS: dict[str, pl.DataType] = {"cached_tokens": pl.Int64(), "cache_saved_usd": pl.Float64()}

ANALYTICS_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(),
    "model": pl.String(),
    "spent_usd": pl.Float64(),  # generation + judging of this model's answers
    "generation_usd": pl.Float64(),
    "judging_usd": pl.Float64(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "cached_share": pl.Float64(),  # of input_tokens, served from the providers' prefix caches
    "cache_saved_usd": pl.Float64(),  # what that saved against the full input price
    "calls": pl.Int64(),
    "generation_calls": pl.Int64(),
    "judgment_calls": pl.Int64(),
    "retries": pl.Int64(),  # attempts beyond the first, summed
    "rate_limited": pl.Int64(),  # attempts answered 429
    "latency_p50_s": pl.Float64(),  # generation calls
    "latency_p95_s": pl.Float64(),
    "judge_unparsed_rate": pl.Float64(),
    "empty": pl.Int64(),
    "truncated": pl.Int64(),
    "refused": pl.Int64(),
    "errors": pl.Int64(),  # generation calls that ended without an answer
    "coverage": pl.Float64(),
}


def analytics(calls: pl.DataFrame | pl.LazyFrame, metrics: pl.DataFrame) -> pl.DataFrame:
    """One row per (benchmark, model) seen in either the call records or the metrics."""
    lf = calls.lazy()
    missing = [c for c in CALL_COLUMNS if c not in lf.collect_schema()]
    if missing:
        raise ValueError(f"call records: field '{missing[0]}': column missing")
    have = lf.collect_schema()
    lf = lf.with_columns(
        [pl.lit(0, t).alias(c) for c, t in OPTIONAL_CALL_COLUMNS.items() if c not in have]
    ).with_columns([pl.col(c).cast(t).fill_null(0) for c, t in OPTIONAL_CALL_COLUMNS.items()])
    gen = pl.col("kind") == "generation"
    judg = pl.col("kind") == "judgment"
    status = pl.col("status")
    per = (
        lf.with_columns(pl.col("rate_limited").cast(pl.Int64), pl.col("attempts").cast(pl.Int64))
        .group_by(["benchmark", "model"])
        .agg(
            pl.col("cost_usd").sum().alias("spent_usd"),
            pl.col("cost_usd").filter(gen).sum().alias("generation_usd"),
            pl.col("cost_usd").filter(judg).sum().alias("judging_usd"),
            pl.col("input_tokens").sum(),
            pl.col("output_tokens").sum(),
            pl.when(pl.col("input_tokens").sum() > 0)
            .then(pl.col("cached_tokens").sum() / pl.col("input_tokens").sum())
            .alias("cached_share"),
            pl.col("cache_saved_usd").sum(),
            pl.len().alias("calls"),
            gen.sum().alias("generation_calls"),
            judg.sum().alias("judgment_calls"),
            (pl.col("attempts") - 1).clip(lower_bound=0).sum().alias("retries"),
            pl.col("rate_limited").sum(),
            pl.col("latency_s").filter(gen).quantile(0.5, "linear").alias("latency_p50_s"),
            pl.col("latency_s").filter(gen).quantile(0.95, "linear").alias("latency_p95_s"),
            pl.when(judg.sum() > 0)
            .then((judg & (status == "unparsed")).sum() / judg.sum())
            .alias("judge_unparsed_rate"),
            (gen & (status == "empty")).sum().alias("empty"),
            (gen & (status == "truncated")).sum().alias("truncated"),
            (gen & (status == "refused")).sum().alias("refused"),
            (gen & (status == "error")).sum().alias("errors"),
        )
        .collect()
    )
    coverage = metrics.filter((pl.col("metric") == "coverage") & (pl.col("slice") == "all")).select(
        "benchmark", "model", pl.col("value").alias("coverage")
    )
    out = per.join(coverage, on=["benchmark", "model"], how="full", coalesce=True)
    return out.select(list(ANALYTICS_SCHEMA)).cast(pl.Schema(ANALYTICS_SCHEMA)).sort(["benchmark", "model"])
