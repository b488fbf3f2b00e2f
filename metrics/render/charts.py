"""The charts a benchmark asks for (`Chart`), drawn from the metrics table as inline SVG markup."""

from __future__ import annotations

import polars as pl

from ifsweep.metrics.catalog import Catalog, Chart
from ifsweep.metrics.leaderboard import leaderboard
from ifsweep.metrics.render.svg import Grid, Point, bar_chart, esc, heatmap, line_chart


def slice_values(metrics: pl.DataFrame, bench: str, metric: str, prefix: str) -> dict[tuple[str, str], Point]:
    """(model, slice value) -> the statistic, for the slices of `bench`'s `metric` named `prefix`..."""
    part = metrics.filter(
        (pl.col("benchmark") == bench)
        & (pl.col("metric") == metric)
        & pl.col("slice").str.starts_with(prefix)
    )
    has_ci = "ci_low" in part.columns
    return {
        (r["model"], r["slice"][len(prefix) :]): Point(
            r["value"], 0.0, str(r["n"]), r["ci_low"] if has_ci else None, r["ci_high"] if has_ci else None
        )
        for r in part.iter_rows(named=True)
    }


def _ranked_models(metrics: pl.DataFrame, catalog: Catalog, bench: str) -> list[str]:
    return [str(m) for m in leaderboard(metrics, catalog, bench).get_column("model").to_list()]


def _line(metrics: pl.DataFrame, catalog: Catalog, bench: str, chart: Chart) -> str:
    metric = chart.metrics[0]
    vals = slice_values(metrics, bench, metric, chart.prefix)
    if not vals:
        return f'<p class="note">No {esc(catalog.display(bench))} results.</p>'
    xs = sorted({x for _, x in vals}, key=lambda s: (len(s), s))  # "10" after "9"
    models = _ranked_models(metrics, catalog, bench)
    series = {m: [vals[(m, x)].x if (m, x) in vals else None for x in xs] for m in models}
    title = chart.title_of(metric)
    return line_chart(title, [f"{chart.axis} {x}" for x in xs], series, width=1300)


def _bars(metrics: pl.DataFrame, catalog: Catalog, bench: str, chart: Chart) -> str:
    models = _ranked_models(metrics, catalog, bench)
    figures = []
    for metric in chart.metrics:
        vals = slice_values(metrics, bench, metric, chart.prefix)
        groups = sorted({g for _, g in vals})
        if vals:
            svg = bar_chart(Grid(chart.title_of(metric), models, groups, vals), width=640)
            caption = f"{metric} by {chart.axis}"
            figures.append(f"<figure><figcaption>{esc(caption)}</figcaption>{svg}</figure>")
    if not figures:
        return f'<p class="note">No {esc(catalog.display(bench))} results.</p>'
    return f'<div class="grid2">{"".join(figures)}</div>'


def _heatmap(metrics: pl.DataFrame, catalog: Catalog, bench: str, chart: Chart) -> str:
    metric = chart.metrics[0]
    vals = slice_values(metrics, bench, metric, chart.prefix)
    if not vals:
        return f'<p class="note">No {esc(catalog.display(bench))} results by {esc(chart.axis)}.</p>'
    cols = sorted({c for _, c in vals})
    return heatmap(Grid(chart.title_of(metric), _ranked_models(metrics, catalog, bench), cols, vals))


_DRAW = {"line": _line, "bars": _bars, "heatmap": _heatmap}


def draw(metrics: pl.DataFrame, catalog: Catalog, bench: str, chart: Chart) -> str:
    """The chart as HTML: its SVG figure(s), or a note when `metrics` has nothing for it."""
    return _DRAW[chart.kind](metrics, catalog, bench, chart)


def wanted(catalog: Catalog) -> list[tuple[str, Chart]]:
    """(benchmark, chart) for every chart of every benchmark in the catalog, in catalog order: a report
    shows each section, with a note where the run has no results for it."""
    return [(b.name, chart) for b in catalog.benchmarks for chart in b.charts]
