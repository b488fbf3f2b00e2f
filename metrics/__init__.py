"""Metrics and reports: pure Polars functions of verdict rows. A generic engine: it imports nothing else
of ifsweep and names no benchmark; each benchmark's definitions (`BenchmarkMetrics`) come from its
caller in a `Catalog`."""

from ifsweep.metrics.analytics import analytics
from ifsweep.metrics.catalog import BenchmarkMetrics, Catalog, Chart
from ifsweep.metrics.components import Components, Leaf, split_slice
from ifsweep.metrics.compute import benchmark_metrics, compute_metrics
from ifsweep.metrics.coverage import coverage_metrics
from ifsweep.metrics.instances import kept_expr, per_instance
from ifsweep.metrics.paired import paired_differences
from ifsweep.metrics.report_html import render_html
from ifsweep.metrics.report_markdown import render_markdown
from ifsweep.metrics.report_text import render_csv, render_json, render_table
from ifsweep.metrics.schema import (
    METRIC_COLUMNS,
    VERDICT_SCHEMA,
    VerdictError,
    read_verdicts,
    validate_verdicts,
)

__all__ = [
    "METRIC_COLUMNS",
    "VERDICT_SCHEMA",
    "BenchmarkMetrics",
    "Catalog",
    "Chart",
    "Components",
    "Leaf",
    "VerdictError",
    "analytics",
    "benchmark_metrics",
    "compute_metrics",
    "coverage_metrics",
    "kept_expr",
    "paired_differences",
    "per_instance",
    "read_verdicts",
    "render_csv",
    "render_html",
    "render_json",
    "render_markdown",
    "render_table",
    "split_slice",
    "validate_verdicts",
]
