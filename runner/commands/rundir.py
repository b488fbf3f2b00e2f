"""A run directory as the commands that score it read it (`report`, `agreement`, the library's
`scores`): whether it is one, the judges its config names, and its verdict rows' metrics over every
registered benchmark's definitions (the metrics engine knows no benchmark)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ifsweep import benchmarks
from ifsweep.runner.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

    from ifsweep.metrics import Catalog
    from ifsweep.runner.store.current import RunReading


def metric_catalog() -> tuple[Catalog, tuple[benchmarks.BenchmarkLoadError, ...]]:
    """Every registered benchmark's metric definitions, in registry order, and an error for each
    benchmark that failed to load (its rows cannot be scored; the others can)."""
    from ifsweep.metrics import Catalog  # Polars: only for commands that compute metrics

    loaded = benchmarks.load_all()
    return Catalog(tuple(m for b in loaded.benchmarks for m in b.metrics())), loaded.errors


def compute(rows: pl.DataFrame | pl.LazyFrame, *, ci: bool = False) -> tuple[pl.DataFrame, Catalog]:
    """compute_metrics over every registered benchmark's definitions, and that catalog. Rows no
    definition scores fail with VerdictError, which then also names any registered benchmark that
    failed to load (the likely owner of those rows)."""
    from ifsweep import metrics

    catalog, errors = metric_catalog()
    try:
        return metrics.compute_metrics(rows, catalog, ci=ci), catalog
    except metrics.VerdictError as e:
        if not errors:
            raise
        failed = "; ".join(map(str, errors))
        raise metrics.VerdictError(f"{e}; registered benchmarks that failed to load: {failed}") from e


def read_run_dir(run_dir: Path) -> RunReading:
    """The one reading of a run directory (runner/store/current.py) every scoring command takes its
    rows, plan, judges and completeness from; UsageError when it is not a run directory."""
    from ifsweep.runner.store.current import read_run

    require_run_dir(run_dir)
    return read_run(run_dir)


def planned_rows(reading: RunReading) -> pl.LazyFrame:
    """The reading's verdict rows: the instances each (benchmark, model)'s plan selects."""
    if reading.rows is None:
        raise ValueError(f"{reading.run_dir}: a reading without rows (status's) has none to score")
    return reading.rows


def with_progress(table: pl.DataFrame, reading: RunReading) -> pl.DataFrame:
    """`table` (metrics, or any frame with benchmark and model) with each pair's `planned` and `done`
    instances from the reading: the columns by which a partial run's tables say how far they reach."""
    import polars as pl

    progress = pl.DataFrame(
        {
            "benchmark": [p.benchmark for p in reading.progress],
            "model": [p.model for p in reading.progress],
            "planned": [p.planned for p in reading.progress],
            "done": [p.done for p in reading.progress],
        },
        schema={"benchmark": pl.String, "model": pl.String, "planned": pl.Int64, "done": pl.Int64},
    )
    cast = table.with_columns(pl.col("benchmark").cast(pl.String), pl.col("model").cast(pl.String))
    joined = cast.join(progress, on=["benchmark", "model"], how="left", maintain_order="left")
    return joined.with_columns(
        pl.col("benchmark").cast(table.schema["benchmark"]), pl.col("model").cast(table.schema["model"])
    )


def require_run_dir(run_dir: Path) -> None:
    if not (run_dir / "shards").is_dir():
        raise UsageError(f"{run_dir}: not a run directory (no shards/ folder)")


def in_model_order(table: pl.DataFrame, order: Sequence[str]) -> pl.DataFrame:
    """`table` with each benchmark's rows in `order` of their model (stable within a model)."""
    import polars as pl

    rank = {m: i for i, m in enumerate(order)}
    at = pl.col("model").cast(pl.String).replace_strict(rank, default=len(rank), return_dtype=pl.Int64)
    return (
        table.with_columns(at.alias("_order")).sort("benchmark", "_order", maintain_order=True).drop("_order")
    )


def partial_estimates(
    reading: RunReading, rows: pl.LazyFrame, catalog: Catalog
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """A partial run's estimates for its planned population and the paired differences
    (metrics/sampling/estimates.py), over the strata the manifest records (the seeded order's population,
    before `limit`); None when every model has done every planned unit, or the run kept no strata
    (file order, an import)."""
    from ifsweep import metrics

    if reading.manifest is None:
        return None
    strata = {b: e.strata for b, e in reading.manifest.benchmarks.items() if e.strata}
    order = reading.manifest.order or {}
    if not strata or order.get("kind") != "seeded" or _covers_population(reading, rows, strata):
        return None
    est, paired = metrics.estimate_metrics(rows, catalog, strata)
    if est.height == 0 or bool((est.get_column("units_done") >= est.get_column("units_planned")).all()):
        return None
    return est, paired


def _covers_population(
    reading: RunReading, rows: pl.LazyFrame, strata: Mapping[str, Mapping[str, Sequence[str]]]
) -> bool:
    """Whether a complete run's every model has every unit of each stratified benchmark's population:
    then there is nothing to estimate, and one group-by spares the estimator's bootstrap (minutes on a
    full-size run, for a section the report would leave out)."""
    import polars as pl

    if not reading.complete:
        return False
    by = ["benchmark", "model", *(["judge"] if "judge" in rows.collect_schema().names() else [])]
    units = {
        bench: sorted({u for ids in by_stratum.values() for u in ids}) for bench, by_stratum in strata.items()
    }
    population = pl.DataFrame(
        [(bench, u) for bench, ids in units.items() for u in ids],
        schema={"benchmark": pl.String, "group_id": pl.String},
        orient="row",
    )
    # One pass over the rows for every benchmark (a filter per benchmark read them all each time).
    mine = rows.with_columns(pl.col("benchmark", "group_id").cast(pl.String))
    have = (
        mine.join(population.lazy(), on=["benchmark", "group_id"], how="semi")
        .group_by(*by)
        .agg(pl.col("group_id").n_unique().alias("n"))
        .collect()
    )
    for bench, ids in units.items():
        n = have.filter(pl.col("benchmark") == bench).get_column("n")
        if n.len() == 0 or bool((n < len(ids)).any()):
            return False
    return True
