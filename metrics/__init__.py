"""Metrics and reports: pure Polars functions of verdict rows. A generic engine: it imports nothing else
of ifsweep and names no benchmark; each benchmark's definitions (`BenchmarkMetrics`) come from its
caller in a `Catalog`."""

from ifsweep.metrics.agreement import (
    Agreement,
    AgreementStat,
    RankChange,
    agreement_stats,
    kendall_tau_b,
    rank_changes,
)
from ifsweep.metrics.analytics import analytics
from ifsweep.metrics.catalog import BenchmarkMetrics, Catalog, Chart
from ifsweep.metrics.components import Components, Leaf, split_slice
from ifsweep.metrics.compute import benchmark_metrics, compute_metrics
from ifsweep.metrics.coverage import coverage_metrics
from ifsweep.metrics.instances import kept_expr, per_instance, streamed
from ifsweep.metrics.paired import paired_differences
from ifsweep.metrics.panel import MAJORITY, judges_in, majority_rows, one_judge, select_judges
from ifsweep.metrics.render.estimates import (
    estimate_lines,
    estimates_html,
    estimates_markdown,
    with_estimate_keys,
)
from ifsweep.metrics.render.report_html import render_html
from ifsweep.metrics.render.report_markdown import render_markdown
from ifsweep.metrics.render.report_text import render_csv, render_json, render_table
from ifsweep.metrics.sampling.estimates import estimate_metrics
from ifsweep.metrics.schema import (
    METRIC_COLUMNS,
    VERDICT_SCHEMA,
    VerdictError,
    read_verdicts,
    validate_verdicts,
)

__all__ = [
    "MAJORITY",
    "METRIC_COLUMNS",
    "VERDICT_SCHEMA",
    "Agreement",
    "AgreementStat",
    "BenchmarkMetrics",
    "Catalog",
    "Chart",
    "Components",
    "Leaf",
    "RankChange",
    "VerdictError",
    "agreement_stats",
    "analytics",
    "benchmark_metrics",
    "compute_metrics",
    "coverage_metrics",
    "estimate_lines",
    "estimate_metrics",
    "estimates_html",
    "estimates_markdown",
    "judges_in",
    "kendall_tau_b",
    "kept_expr",
    "majority_rows",
    "one_judge",
    "paired_differences",
    "per_instance",
    "rank_changes",
    "read_verdicts",
    "render_csv",
    "render_html",
    "render_json",
    "render_markdown",
    "render_table",
    "select_judges",
    "split_slice",
    "streamed",
    "validate_verdicts",
    "with_estimate_keys",
]
