"""Metrics and reports: pure Polars functions of verdict rows (imports nothing from the project)."""

from ifsweep.metrics.analytics import analytics
from ifsweep.metrics.cfbench import cfbench_metrics
from ifsweep.metrics.compute import compute_metrics
from ifsweep.metrics.coverage import coverage_metrics
from ifsweep.metrics.eifbench import eifbench_metrics
from ifsweep.metrics.followbench import followbench_metrics
from ifsweep.metrics.infobench import infobench_metrics
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
