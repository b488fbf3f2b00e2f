"""The verdict row contract: column types, allowed values, and readers for JSONL and Parquet shards."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from ifsweep.metrics.catalog import Catalog

SCORINGS: tuple[str, ...] = ("paper", "reference")
STATUSES: tuple[str, ...] = ("ok", "unparsed", "error")
SOURCES: tuple[str, ...] = ("rule", "judge")
PRIORITIES: tuple[str, ...] = ("primary", "secondary")

VERDICT_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.String(),
    "benchmark": pl.String(),
    "model": pl.String(),
    "judge": pl.String(),
    "scoring": pl.String(),  # paper | reference; null (read as paper) in files written without it
    "instance_id": pl.String(),
    "group_id": pl.String(),
    "level": pl.Int64(),
    "category": pl.String(),
    "split": pl.String(),
    "instruction_idx": pl.Int64(),
    "constraint_idx": pl.Int64(),
    "constraint_type": pl.String(),
    "priority": pl.String(),
    "satisfied": pl.Boolean(),
    "source": pl.String(),
    "status": pl.String(),
}

# The columns metrics read (all but run): `read_verdicts(paths, columns=METRIC_COLUMNS)` parses JSONL
# faster than reading every column. The judge is one: metrics are computed per judge, never pooled.
METRIC_COLUMNS: tuple[str, ...] = (
    "benchmark",
    "model",
    "judge",
    "scoring",
    "instance_id",
    "group_id",
    "level",
    "category",
    "split",
    "instruction_idx",
    "constraint_idx",
    "constraint_type",
    "priority",
    "satisfied",
    "source",
    "status",
)

# What identifies a constraint within an instance: its sub-instruction (null where a benchmark has none)
# and its index. EIFBench numbers its constraints from 0 in each sub-instruction, so the index alone
# does not (docs/metrics.md).
CONSTRAINT_KEY: tuple[str, ...] = ("instruction_idx", "constraint_idx")

_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_PARQUET_SUFFIXES = (".parquet", ".pq")
# Fields every row needs, whatever its benchmark; the others are null where a benchmark has no such notion
# (what a benchmark's rows must fill besides is its `BenchmarkMetrics.required`).
_REQUIRED = ("benchmark", "model", "instance_id", "constraint_idx", "source", "status")
# Columns a file may lack (written before they existed): read as null.
OPTIONAL_COLUMNS: frozenset[str] = frozenset({"scoring", "judge"})


class VerdictError(ValueError):
    """Verdict rows that break the contract. The message names where (file and line, or the row's key)
    and which field."""


def _as_paths(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    if isinstance(paths, str | Path):
        return [Path(paths)]
    return [Path(p) for p in paths]


def _scan_one(path: Path, columns: Sequence[str] | None = None) -> pl.LazyFrame:
    wanted = {c: VERDICT_SCHEMA[c] for c in (columns or VERDICT_SCHEMA)}
    if not path.is_file():
        raise VerdictError(f"{path}: no such verdict file")
    suffix = path.suffix.lower()
    if suffix in _PARQUET_SUFFIXES:
        found = pl.read_parquet_schema(path)
        missing = [c for c in wanted if c not in found and c not in OPTIONAL_COLUMNS]
        if missing:
            raise VerdictError(f"{path}: field '{missing[0]}': column missing from the Parquet file")
        # Casting lets shards written with Categorical or narrower ints share one schema.
        return pl.scan_parquet(path).select(
            [
                pl.col(c).cast(t, strict=True) if c in found else pl.lit(None, t).alias(c)
                for c, t in wanted.items()
            ]
        )
    if suffix in _JSONL_SUFFIXES:
        return pl.scan_ndjson(path, schema=wanted)
    raise VerdictError(f"{path}: unknown verdict file type '{suffix}' (want .jsonl or .parquet)")


def read_verdicts(
    paths: str | Path | Iterable[str | Path], *, columns: Sequence[str] | None = None
) -> pl.LazyFrame:
    """Lazily read verdict rows from JSONL and/or Parquet files into `VERDICT_SCHEMA` (or only
    `columns` of it, in schema order given; `METRIC_COLUMNS` is all that metrics need).

    Cheap checks (file exists, known type, Parquet columns) happen now; `validate_verdicts` reads the
    values and names the file, line and field of the first problem."""
    unknown = [c for c in columns or () if c not in VERDICT_SCHEMA]
    if unknown:
        raise VerdictError(f"field '{unknown[0]}': not a verdict column")
    frames = [_scan_one(p, columns) for p in _as_paths(paths)]
    if not frames:
        return pl.LazyFrame(schema={c: VERDICT_SCHEMA[c] for c in (columns or VERDICT_SCHEMA)})
    return pl.concat(frames, how="vertical")


def _checks(catalog: Catalog) -> list[tuple[pl.Expr, pl.Expr]]:
    """(condition, message) per contract rule, in the order a row's first problem is named. The
    benchmarks `catalog` defines are the only ones allowed, each with the columns it requires."""
    checks = [(pl.col(f).is_null(), pl.lit(f"field '{f}': missing")) for f in _REQUIRED]
    for field, allowed in (
        ("benchmark", tuple(sorted(catalog.names()))),
        ("status", STATUSES),
        ("source", SOURCES),
    ):
        checks.append(
            (
                ~pl.col(field).is_in(list(allowed)),
                pl.format(
                    "field '{}': '{}' is not one of {}", pl.lit(field), pl.col(field), pl.lit(str(allowed))
                ),
            )
        )
    for field, allowed in (("scoring", SCORINGS), ("priority", PRIORITIES)):
        checks.append(
            (
                pl.col(field).is_not_null() & ~pl.col(field).is_in(list(allowed)),
                pl.format(
                    "field '{}': '{}' is not one of {}", pl.lit(field), pl.col(field), pl.lit(str(allowed))
                ),
            )
        )
    checks.append(
        (
            (pl.col("status") == "ok") & pl.col("satisfied").is_null(),
            pl.lit("field 'satisfied': missing although status is 'ok'"),
        )
    )
    for bench in catalog.benchmarks:
        for field in bench.required:
            checks.append(
                (
                    (pl.col("benchmark") == bench.name) & pl.col(field).is_null(),
                    pl.lit(f"field '{field}': missing (required for {bench.name})"),
                )
            )
    return checks


def problems_expr(catalog: Catalog) -> pl.Expr:
    """A String expression: the first contract problem of a row (naming its field), or null."""
    expr: Any = pl.when(pl.lit(False)).then(pl.lit(None, dtype=pl.String))
    for condition, message in _checks(catalog):
        expr = expr.when(condition).then(message)
    done: pl.Expr = expr.otherwise(pl.lit(None, dtype=pl.String))
    return done


def any_problem(rows: pl.LazyFrame, catalog: Catalog) -> pl.LazyFrame:
    """One row per judge of `rows` (null: rows without one) with `bad`, whether any of its rows breaks
    the contract: the same pass finds the judges. An aggregate needs neither row order nor messages, so
    the streaming engine checks a file faster than `first_problem`, which is then asked only when there
    is a problem to name. A condition that is null counts as false, as in `problems_expr`. (A group-by:
    a select that also took the judges' unique values was run in memory, 7 GB over 30M rows.)"""
    flag = pl.any_horizontal([condition.fill_null(False) for condition, _ in _checks(catalog)])
    return rows.group_by("judge").agg(flag.any().alias("bad"))


def first_problem(rows: pl.LazyFrame, catalog: Catalog) -> pl.LazyFrame:
    """At most one row describing the first contract problem in `rows` (with its key), lazily."""
    return (
        rows.with_row_index("_row")
        .select(
            "_row",
            "benchmark",
            "model",
            "instance_id",
            "constraint_idx",
            problems_expr(catalog).alias("problem"),
        )
        .filter(pl.col("problem").is_not_null())
        .head(1)
    )


def describe_problem(found: pl.DataFrame, where: str = "verdict rows") -> str:
    r = found.row(0, named=True)
    return (
        f"{where}: row {r['_row']} (benchmark={r['benchmark']!r}, model={r['model']!r}, "
        f"instance_id={r['instance_id']!r}, constraint_idx={r['constraint_idx']!r}): {r['problem']}"
    )


def validate_verdicts(paths: str | Path | Iterable[str | Path], catalog: Catalog) -> None:
    """Read every file and raise `VerdictError` naming file, line (1-based for JSONL, row index for
    Parquet) and field of the first row that breaks the contract (for the benchmarks of `catalog`)."""
    for path in _as_paths(paths):
        try:
            found = first_problem(_scan_one(path), catalog).collect()
        except pl.exceptions.PolarsError as exc:
            raise VerdictError(f"{path}: cannot read as verdict rows: {exc}") from exc
        if found.height:
            r = found.row(0, named=True)
            where = f"line {r['_row'] + 1}" if path.suffix.lower() in _JSONL_SUFFIXES else f"row {r['_row']}"
            raise VerdictError(
                f"{path}: {where} (instance_id={r['instance_id']!r}, "
                f"constraint_idx={r['constraint_idx']!r}): "
                f"{r['problem']}"
            )
