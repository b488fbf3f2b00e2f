"""FollowBench's metrics, for the metrics engine: HSR and SSR per (category, level), averaged up to levels
and overall; CSL per category.

Definitions follow the FollowBench paper: an instance is a hard success when every added constraint is
satisfied (HSR) and scores the fraction satisfied (SSR). "level=L" is the unweighted mean over the
categories present at L, "all" the mean over levels. CSL is computed over groups (one evolution path,
levels 1..5) whose five instances were all kept: the number of consecutive levels from 1 that are hard
successes.
"""

from __future__ import annotations

import functools

import polars as pl

from ifsweep.benchmarks.followbench._load import LANGUAGES, report_name
from ifsweep.metrics import BenchmarkMetrics, Chart, Components, Leaf, kept_expr, per_instance, streamed

CSL_LEVELS: tuple[int, ...] = (1, 2, 3, 4, 5)


def _instances(rows: pl.LazyFrame, benchmark: str) -> pl.DataFrame:
    aggs = [
        kept_expr(),
        pl.col("satisfied").all().cast(pl.Float64).alias("hsr"),
        pl.col("satisfied").cast(pl.Float64).mean().alias("ssr"),
        pl.col("level").first(),
        pl.col("category").first(),
        pl.col("group_id").first(),
    ]
    return streamed(per_instance(rows, benchmark, aggs))


def _groups(inst: pl.DataFrame) -> pl.DataFrame:
    return (
        inst.lazy()
        .filter(pl.col("level").is_in(list(CSL_LEVELS)))
        .group_by(["benchmark", "model", "category", "group_id"])
        .agg(
            (pl.col("kept").all() & (pl.col("level").n_unique() == len(CSL_LEVELS))).alias("complete"),
            # The first failing level l means levels 1..l-1 passed; no failure means all five did.
            (
                pl.when(pl.col("hsr") < 1.0).then(pl.col("level")).min().fill_null(len(CSL_LEVELS) + 1) - 1
            ).alias("csl"),
        )
        .filter(pl.col("complete"))
        # Group ids are only promised unique within a category.
        .with_columns(pl.format("{}/{}", pl.col("category"), pl.col("group_id")).alias("group_unit"))
        .collect()
    )


def _cell() -> pl.Expr:
    return pl.format("category={},level={}", pl.col("category"), pl.col("level"))


def _parents(kept: pl.LazyFrame, groups: pl.LazyFrame) -> pl.LazyFrame:
    cells = kept.select("benchmark", "model", "category", "level").unique()
    levels = kept.select("benchmark", "model", "level").unique()
    parents = []
    for metric in ("HSR", "SSR"):
        parents.append(
            cells.select(
                "benchmark",
                "model",
                pl.lit(metric).alias("metric"),
                pl.format("level={}", pl.col("level")).alias("slice"),
                _cell().alias("child"),
                pl.lit(1, pl.Int64).alias("layer"),
            )
        )
        parents.append(
            levels.select(
                "benchmark",
                "model",
                pl.lit(metric).alias("metric"),
                pl.lit("all").alias("slice"),
                pl.format("level={}", pl.col("level")).alias("child"),
                pl.lit(2, pl.Int64).alias("layer"),
            )
        )
    parents.append(
        groups.select("benchmark", "model", "category")
        .unique()
        .select(
            "benchmark",
            "model",
            pl.lit("CSL").alias("metric"),
            pl.lit("all").alias("slice"),
            pl.format("category={}", pl.col("category")).alias("child"),
            pl.lit(1, pl.Int64).alias("layer"),
        )
    )
    return pl.concat(parents)


def followbench_components(rows: pl.LazyFrame, benchmark: str) -> Components:
    """Statistics of the rows of `benchmark` (one FollowBench language) among `rows` (a lazy plan:
    `metrics.instances.prepared`)."""
    inst = _instances(rows, benchmark)
    kept = inst.filter(pl.col("kept")).lazy()
    groups = _groups(inst).lazy()
    leaves = [
        Leaf(kept, m, _cell(), ("category", "level"), "instance", "instance_id", pl.col(c))
        for m, c in (("HSR", "hsr"), ("SSR", "ssr"))
    ]
    leaves.append(
        Leaf(
            groups,
            "CSL",
            pl.format("category={}", pl.col("category")),
            ("category",),
            "group",
            "group_unit",
            pl.col("csl"),
        )
    )
    return Components(tuple(leaves), _parents(kept, groups), inst.lazy())


_BY_LEVEL = Chart(
    kind="line",
    metrics=("HSR",),
    prefix="level=",
    heading="FollowBench: hard satisfaction by level",
    note="Hover a line to single out a model.",
    title="FollowBench HSR by level",
    file="followbench_hsr_by_level.svg",
)


def definitions(display: str) -> tuple[BenchmarkMetrics, ...]:
    """One entry per language: each reports as a benchmark of its own ("followbench" for English,
    "followbench-zh"), scored alike and never averaged together (the languages share instance ids)."""
    return tuple(
        BenchmarkMetrics(
            name=report_name(language),
            display=display if language == "en" else f"{display} ({language})",
            headline=("HSR", "SSR", "CSL"),
            primary="HSR",
            components=functools.partial(followbench_components, benchmark=report_name(language)),
            required=("group_id", "level", "category"),
            levels=frozenset({"CSL"}),
            charts=(_BY_LEVEL,) if language == "en" else (),
        )
        for language in LANGUAGES
    )
