"""A run directory as the commands that score it read it (`report`, `agreement`, the library's
`scores`): whether it is one, the judges its config names, and its verdict rows' metrics over every
registered benchmark's definitions (the metrics engine knows no benchmark)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ifsweep import benchmarks
from ifsweep.runner.errors import UsageError
from ifsweep.runner.watch.board import natural_key

if TYPE_CHECKING:
    import polars as pl

    from ifsweep.metrics import Catalog


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


def planned_rows(run_dir: Path, rows: pl.LazyFrame) -> tuple[pl.LazyFrame, int]:
    """The verdict rows of the instances the run's newest config selects, and how many instances
    (benchmark, instance id) were left out: judged under an earlier, higher `limit`. Benchmarks whose
    manifest entry does not say (an import, an older run) keep every row."""
    import polars as pl

    from ifsweep import metrics
    from ifsweep.runner.store.manifest import planned_instances

    plans = planned_instances(run_dir)
    if not plans:
        return rows, 0
    bench, inst = pl.col("benchmark").cast(pl.String), pl.col("instance_id").cast(pl.String)
    keep = ~bench.is_in(list(plans))
    for name, ids in plans.items():
        keep = keep | ((bench == name) & inst.is_in(list(ids)))
    beyond = metrics.streamed(rows.filter(~keep).select(bench, inst).unique().select(pl.len())).item()
    return (rows.filter(keep), int(beyond)) if beyond else (rows, 0)


def require_run_dir(run_dir: Path) -> None:
    if not (run_dir / "shards").is_dir():
        raise UsageError(f"{run_dir}: not a run directory (no shards/ folder)")


def model_order(run_dir: Path, models: Iterable[str]) -> list[str]:
    """`models` as reports list them: the run's config order (the manifest's), then any other in
    natural order (m2 before m10), as for a run whose config is not known (an import)."""
    from ifsweep.runner.store.manifest import read_manifest

    manifest = read_manifest(run_dir)
    configured = manifest.model_order if manifest is not None else ()
    present = set(models)
    rest = sorted(present - set(configured), key=natural_key)
    return [m for m in configured if m in present] + rest


def in_model_order(table: pl.DataFrame, order: Sequence[str]) -> pl.DataFrame:
    """`table` with each benchmark's rows in `order` of their model (stable within a model)."""
    import polars as pl

    rank = {m: i for i, m in enumerate(order)}
    at = pl.col("model").cast(pl.String).replace_strict(rank, default=len(rank), return_dtype=pl.Int64)
    return (
        table.with_columns(at.alias("_order")).sort("benchmark", "_order", maintain_order=True).drop("_order")
    )


def panel_of(run_dir: Path) -> tuple[str, ...]:
    """The judges the run's config names, in order (the manifest's); () when it names none."""
    from ifsweep.runner.store.manifest import read_manifest

    manifest = read_manifest(run_dir)
    return manifest.judge_order if manifest is not None else ()
