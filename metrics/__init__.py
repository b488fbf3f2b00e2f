"""Metrics and reports: pure Polars functions of verdict rows (imports nothing from the project)."""

from metrics.analytics import analytics
from metrics.cfbench import cfbench_metrics
from metrics.compute import compute_metrics
from metrics.coverage import coverage_metrics
from metrics.eifbench import eifbench_metrics
from metrics.followbench import followbench_metrics
from metrics.infobench import infobench_metrics
from metrics.paired import paired_differences
from metrics.report_html import render_html
from metrics.report_markdown import render_markdown
from metrics.report_text import render_csv, render_json, render_table
from metrics.schema import METRIC_COLUMNS, VERDICT_SCHEMA, VerdictError, read_verdicts, validate_verdicts

__all__ = [
    "METRIC_COLUMNS",
    "VERDICT_SCHEMA",
    "VerdictError",
    "analytics",
    "cfbench_metrics",
    "compute_metrics",
    "coverage_metrics",
    "eifbench_metrics",
    "followbench_metrics",
    "infobench_metrics",
    "paired_differences",
    "read_verdicts",
    "render_csv",
    "render_html",
    "render_json",
    "render_markdown",
    "render_table",
    "validate_verdicts",
]
