"""One self-contained HTML report: inline CSS, inline SVG charts from `metrics.render.svg`, a few lines of JS
to sort tables. Nothing is fetched when it is opened; every string from the data is escaped."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import polars as pl

from ifsweep.metrics.catalog import Catalog
from ifsweep.metrics.leaderboard import (
    benchmarks_in,
    fmt_interval,
    fmt_value,
    header,
    leaderboard,
    partial_note,
)
from ifsweep.metrics.render import charts
from ifsweep.metrics.render.svg import Grid, Point, esc, heatmap, scatter

if TYPE_CHECKING:
    from ifsweep.metrics.agreement import Agreement

_CSS = """
:root{--ink:#1b1e23;--muted:#5f6672;--line:#e3e6ea;--bg:#f6f7f9;--card:#fff;--accent:#4269d0}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1360px;margin:0 auto;padding:28px 24px 60px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:19px;margin:0 0 12px}h3{font-size:15px;margin:18px 0 8px}
.sub{color:var(--muted);margin:0 0 22px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:18px 20px;margin:0 0 20px;overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:5px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left;white-space:normal;word-break:break-word}
th{font-weight:600;color:var(--muted);cursor:pointer;user-select:none;position:sticky;top:0;background:var(--card)}
th:hover{color:var(--ink)}tbody tr:hover{background:#f0f3fa}
.ci{color:var(--muted);font-size:12px;margin-left:4px}
.partial{background:#fff4d6;border:1px solid #e0b341;color:#5c4300;padding:6px 10px;
border-radius:6px;font-weight:600}
.note{color:var(--muted);font-style:italic}
.sig{color:#2f7d32;font-weight:600}.grid2{display:flex;flex-wrap:wrap;gap:18px}
.kpis{display:flex;gap:14px;flex-wrap:wrap;margin:0 0 20px}
.kpi{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 16px;min-width:150px}
.kpi b{display:block;font-size:20px}.kpi span{color:var(--muted);font-size:12px}
.scroll{overflow-x:auto;max-width:100%}
.wide table{width:auto;min-width:100%;font-size:13px}
.wide th{white-space:normal;vertical-align:bottom;min-width:4.5em}
.wide th,.wide td{padding:4px 8px}
.wide td:first-child,.wide th:first-child{white-space:nowrap;word-break:normal;
position:sticky;left:0;background:var(--card);z-index:1}
svg.chart{max-width:100%;height:auto;display:block}
figure{margin:0;flex:1 1 600px;min-width:0}figcaption{font-weight:600;margin:0 0 6px}
svg .grid{stroke:#e3e6ea;stroke-width:1}svg .tick{font-size:11px;fill:#5f6672}svg .cell-label{font-size:11px}
svg .axis{font-size:12px;fill:#1b1e23}svg .whisker{stroke:#1b1e23;stroke-width:1.2;opacity:.7}
svg.line:hover .series{opacity:.15}svg.line .series:hover{opacity:1}
svg.line .series:hover polyline{stroke-width:4}
svg.scatter circle:hover{stroke:#1b1e23;stroke-width:2}
svg .bar:hover,svg .cell:hover rect{opacity:.75}
"""

_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){
var tb=th.closest('table').tBodies[0];var rows=Array.prototype.slice.call(tb.rows);
var dir=th.dataset.dir==='desc'?'asc':'desc';th.dataset.dir=dir;
rows.sort(function(a,b){var x=a.cells[i].dataset.v,y=b.cells[i].dataset.v;
var nx=parseFloat(x),ny=parseFloat(y);var c=(isNaN(nx)||isNaN(ny))?String(x).localeCompare(String(y)):nx-ny;
return dir==='asc'?c:-c;});rows.forEach(function(r){tb.appendChild(r);});});});
"""


def _num(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(float(v))


def _cell(text: str, sort_value: Any, extra: str = "") -> str:
    key = sort_value if isinstance(sort_value, str) else _num(sort_value)
    return f'<td data-v="{esc(key)}">{text}{extra}</td>'


def _table(header: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _spend(analytics: pl.DataFrame | None) -> dict[tuple[str, str], float]:
    if analytics is None or analytics.height == 0:
        return {}
    return {
        (r["benchmark"], r["model"]): r["spent_usd"]
        for r in analytics.iter_rows(named=True)
        if r["spent_usd"] is not None
    }


def _leaderboards(metrics: pl.DataFrame, catalog: Catalog, spend: dict[tuple[str, str], float]) -> str:
    parts = []
    for bench in benchmarks_in(metrics, catalog):
        board = leaderboard(metrics, catalog, bench)
        names = [*catalog.headline(bench), "coverage"]
        rows = []
        for r in board.iter_rows(named=True):
            cells = [_cell(esc(r["model"]), str(r["model"]))]
            for m in names:
                levels = catalog.in_levels(bench, m)
                ci = fmt_interval(r[f"{m}_lo"], r[f"{m}_hi"], levels=levels)
                cells.append(
                    _cell(
                        esc(fmt_value(r[m], levels=levels)),
                        r[m],
                        f'<span class="ci">{esc(ci)}</span>' if ci else "",
                    )
                )
            cost = spend.get((bench, r["model"]))
            cells.append(_cell(esc(f"${cost:,.4f}") if cost is not None else "–", cost))
            rows.append(f"<tr>{''.join(cells)}</tr>")
        head = ["model", *(header(catalog, bench, m) for m in names), "spent"]
        n = int(board.select(pl.col("coverage_n").fill_null(0).max()).item() or 0)
        note = partial_note(metrics, bench)
        banner = f'<p class="partial" role="status">{esc(note)}</p>' if note else ""
        parts.append(
            f"<h3>{esc(catalog.display(bench))} <span class='note'>· {board.height} models · "
            f"up to {n} instances · 95% bootstrap interval in brackets</span></h3>"
            + banner
            + _table(head, rows)
        )
    return "".join(parts) or '<p class="note">No metrics.</p>'


def _cost_chart(metrics: pl.DataFrame, catalog: Catalog, spend: dict[tuple[str, str], float]) -> str:
    points: dict[str, list[Point]] = {}
    for bench in benchmarks_in(metrics, catalog):
        metric = catalog.primary(bench)
        part = metrics.filter(
            (pl.col("benchmark") == bench) & (pl.col("metric") == metric) & (pl.col("slice") == "all")
        )
        pts = [
            Point(spend[(bench, r["model"])], r["value"], str(r["model"]))
            for r in part.iter_rows(named=True)
            if (bench, r["model"]) in spend
        ]
        if pts:
            points[f"{catalog.display(bench)} {metric}"] = pts
    if not points:
        return '<p class="note">No cost records: run analytics were not given.</p>'
    return scatter(
        "Cost against score",
        points,
        x_title="spent (generation + judging), USD",
        y_title="headline score",
        width=1300,
    )


_ANALYTICS_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("spent_usd", "spent", "${:,.4f}"),
    ("input_tokens", "tokens in", "{:,}"),
    ("output_tokens", "tokens out", "{:,}"),
    ("cached_share", "cached in %", "{:.1%}"),
    ("cache_saved_usd", "cache saved", "${:,.4f}"),
    ("calls", "calls", "{:,}"),
    ("retries", "retries", "{:,}"),
    ("rate_limited", "429s", "{:,}"),
    ("latency_p50_s", "p50 s", "{:.2f}"),
    ("latency_p95_s", "p95 s", "{:.2f}"),
    ("judge_unparsed_rate", "unparsed %", "{:.1%}"),
    ("empty", "empty", "{:,}"),
    ("truncated", "truncated", "{:,}"),
    ("refused", "refused", "{:,}"),
    ("errors", "errors", "{:,}"),
    ("coverage", "coverage", "{:.1%}"),
)


def _analytics_table(analytics: pl.DataFrame | None, catalog: Catalog) -> str:
    if analytics is None or analytics.height == 0:
        return '<p class="note">No call records.</p>'
    rows = []
    for r in analytics.iter_rows(named=True):
        cells = [
            _cell(esc(r["model"]), str(r["model"])),
            _cell(esc(catalog.display(r["benchmark"])), str(r["benchmark"])),
        ]
        for key, _, fmt in _ANALYTICS_COLUMNS:
            v = r.get(key)
            cells.append(_cell("–" if v is None else esc(fmt.format(v)), v))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    table = _table(["model", "benchmark", *(h for _, h, _ in _ANALYTICS_COLUMNS)], rows)
    # Wider than a card on a laptop: it scrolls inside the card, its model column kept in view.
    return f'<div class="scroll wide" id="analytics">{table}</div>'


def _paired_table(paired: pl.DataFrame | None, catalog: Catalog) -> str:
    if paired is None:
        return ""
    if paired.height == 0:
        return '<section><h2>Paired differences</h2><p class="note">No pairs.</p></section>'
    rows = []
    for r in paired.sort(["benchmark", "metric", "diff"], descending=[False, False, True]).iter_rows(
        named=True
    ):
        ci = fmt_interval(r["ci_low"], r["ci_high"])
        sig = '<span class="sig">yes</span>' if r["significant"] else "no"
        rows.append(
            "<tr>"
            + _cell(esc(r["model_a"]), str(r["model_a"]))
            + _cell(esc(r["model_b"]), str(r["model_b"]))
            + _cell(
                esc(f"{catalog.display(r['benchmark'])} {r['metric']} ({r['slice']})"),
                f"{r['benchmark']}{r['metric']}",
            )
            + _cell(esc(fmt_value(r["diff"])), r["diff"], f'<span class="ci">{esc(ci)}</span>')
            + _cell(sig, str(r["significant"]))
            + "</tr>"
        )
    table = _table(["model A", "model B", "statistic", "A − B (points)", "significant"], rows)
    return (
        f"<section><h2>Paired differences</h2><p class='sub'>Same instances resampled for both models; "
        f"significant when the 95% interval excludes 0.</p>{table}</section>"
    )


def _kappa_figures(panel: Agreement, catalog: Catalog) -> list[str]:
    """Per benchmark, a heatmap of Cohen's kappa between every two judges."""
    judges = list(panel.judges)
    figures = []
    for bench in dict.fromkeys(s.benchmark for s in panel.stats):
        values = {}
        for a in judges:
            for b in judges:
                kappa = 1.0 if a == b else panel.kappa(bench, a, b)
                units = next(
                    (
                        s.units
                        for s in panel.stats
                        if s.benchmark == bench
                        and s.constraint_type == "all"
                        and s.statistic == "cohen_kappa"
                        and set(s.judges) == {a, b}
                    ),
                    0,
                )
                if kappa is not None:
                    values[(a, b)] = Point(kappa, kappa, str(units) if a != b else "-")
        grid = Grid(f"{catalog.display(bench)}: Cohen's kappa", judges, judges, values)
        chart = heatmap(grid, fmt="{:.2f}", tip_fmt="{:.3f}")
        figures.append(f"<figure><figcaption>{esc(catalog.display(bench))}</figcaption>{chart}</figure>")
    return figures


def _panel_table(panel: Agreement, catalog: Catalog) -> str:
    """The panel-wide statistics (Fleiss' kappa, Krippendorff's alpha) per benchmark."""
    rows = []
    for s in panel.stats:
        if s.constraint_type != "all" or len(s.judges) == 2:
            continue
        # Agreement is a coefficient, not a share: three decimals, not points.
        ci = f"[{s.ci_low:.3f}, {s.ci_high:.3f}]" if s.ci_low is not None and s.ci_high is not None else ""
        value = "–" if s.value is None else f"{s.value:.3f}"
        rows.append(
            "<tr>"
            + _cell(esc(catalog.display(s.benchmark)), s.benchmark)
            + _cell(esc(s.statistic.replace("_", " ")), s.statistic)
            + _cell(esc(value), s.value, f'<span class="ci">{esc(ci)}</span>')
            + _cell(str(s.units), s.units)
            + "</tr>"
        )
    return _table(["benchmark", "panel statistic", "value", "units"], rows) if rows else ""


def _rank_table(panel: Agreement, catalog: Catalog) -> str:
    """How each ranking moves between two judges."""
    moves = []
    for r in panel.ranks:
        tau = "–" if r.tau is None else f"{r.tau:.3f}"
        moves.append(
            "<tr>"
            + _cell(esc(f"{catalog.display(r.benchmark)} {r.metric}"), r.benchmark)
            + _cell(esc(f"{r.judge_a} vs {r.judge_b}"), f"{r.judge_a}|{r.judge_b}")
            + _cell(str(r.models), r.models)
            + _cell(esc(tau), r.tau)
            + _cell(str(r.max_change), r.max_change)
            + _cell(esc(", ".join(r.moved) or "–"), ", ".join(r.moved))
            + "</tr>"
        )
    if not moves:
        return '<p class="note">No model was scored by two judges.</p>'
    return _table(["ranking", "judges", "models", "Kendall tau-b", "largest rank change", "moved"], moves)


def _judges_section(panel: Agreement | None, catalog: Catalog) -> str:
    """Per benchmark a heatmap of Cohen's kappa between every two judges, the panel's statistics, and
    the rank changes between judges."""
    if panel is None or len(panel.judges) < 2:
        return ""
    return (
        '<section id="judges"><h2>Judges</h2><p class="sub">How much the judges agree on each '
        "judge-decided constraint (unparsed verdicts left out), and how the ranking moves between them. "
        f"Judges: {esc(', '.join(panel.judges))}.</p>"
        f'<div class="grid2">{"".join(_kappa_figures(panel, catalog))}</div>{_panel_table(panel, catalog)}'
        f"<h3>Rank changes</h3>{_rank_table(panel, catalog)}</section>"
    )


def render_html(
    metrics: pl.DataFrame,
    catalog: Catalog,
    analytics: pl.DataFrame | None = None,
    paired: pl.DataFrame | None = None,
    *,
    title: str = "ifsweep report",
    judges: Agreement | None = None,
    judge: str | None = None,
    audit: str = "",
) -> str:
    """The whole report as one HTML page: leaderboards, each benchmark's charts (the catalog's), cost
    against score, run analytics and paired differences; with `judges` (a run's panel) a section on
    their agreement. `judge`: whose verdicts the figures are (named under the title). `audit`: the
    judge-against-gold section, already HTML (metrics/render/corrected.audit_section), placed last."""
    spend = _spend(analytics)
    models = metrics.get_column("model").n_unique() if metrics.height else 0
    total = sum(spend.values())
    n_bench = len(benchmarks_in(metrics, catalog)) if metrics.height else 0
    kpis = (
        f'<div class="kpis"><div class="kpi"><b>{models}</b><span>models</span></div>'
        f'<div class="kpi"><b>{n_bench}</b><span>benchmarks</span></div>'
        f'<div class="kpi"><b>{esc(f"${total:,.2f}")}</b>'
        "<span>spent: answers and every judge</span></div></div>"
    )
    sections = [
        ("Leaderboard", "Headline slices; click a column to sort.", _leaderboards(metrics, catalog, spend)),
        *(
            (chart.heading, chart.note, charts.draw(metrics, catalog, bench, chart))
            for bench, chart in charts.wanted(catalog)
        ),
        (
            "Cost against score",
            "Each point is one model on one benchmark.",
            _cost_chart(metrics, catalog, spend),
        ),
        (
            "Run analytics",
            "Per model and benchmark; latency over generation calls.",
            _analytics_table(analytics, catalog),
        ),
    ]
    body = "".join(
        f"<section><h2>{esc(h)}</h2>"
        + (f'<p class="sub">{esc(sub)}</p>' if sub else "")
        + f"{content}</section>"
        for h, sub, content in sections
    )
    paired_section = _paired_table(paired, catalog) + _judges_section(judges, catalog) + audit
    whose = f" Verdicts of judge {esc(judge)}." if judge is not None else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{_CSS}</style></head>"
        f"<body><main><h1>{esc(title)}</h1><p class='sub'>Constraint-following results with 95% bootstrap "
        f"intervals.{whose}</p>{kpis}{body}{paired_section}</main><script>{_JS}</script></body></html>\n"
    )
