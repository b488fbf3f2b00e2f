"""What an instance is, and which instances are kept (every one of their rows has status ok)."""

from __future__ import annotations

import polars as pl

INSTANCE_KEY: list[str] = ["benchmark", "model", "instance_id"]


def kept_expr() -> pl.Expr:
    """Aggregation: the instance is kept when none of its rows failed to get a verdict."""
    return (pl.col("status") == "ok").all().alias("kept")


def as_lazy(rows: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    return rows.lazy() if isinstance(rows, pl.DataFrame) else rows


def kept_rows(rows: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """Rows of kept instances only. One unscored constraint drops its whole instance, so a partly
    judged answer never counts as a pass or a failure."""
    lf = as_lazy(rows)
    kept = lf.group_by(INSTANCE_KEY).agg(kept_expr()).filter(pl.col("kept")).select(INSTANCE_KEY)
    return lf.join(kept, on=INSTANCE_KEY, how="semi")


def of_benchmark(rows: pl.LazyFrame | pl.DataFrame, benchmark: str) -> pl.LazyFrame:
    return as_lazy(rows).filter(pl.col("benchmark") == benchmark)
