"""A Markdown report, with charts written into `out_dir` beside it, or inside it as data URIs when
there is no directory (a report on standard output must not leave files where the reader never looks).

PNG charts need matplotlib, which ifsweep does not depend on: when it is importable they are drawn with
it, otherwise the report says so. SVG charts from our own drawing code are always written, so the
report has pictures either way.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import io
from pathlib import Path
from typing import Any

import polars as pl

from ifsweep.metrics.catalog import Catalog
from ifsweep.metrics.leaderboard import benchmarks_in, header, leaderboard, partial_note, value_texts
from ifsweep.metrics.render import charts


def _md(text: object) -> str:
    # Markdown renderers pass HTML through, so model names are HTML-escaped as well as pipe-escaped.
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _picture(name: str, data: bytes, mime: str, out_dir: Path | None) -> str:
    """A chart's Markdown image: a file beside the report, or a data URI inside it."""
    if out_dir is not None:
        (out_dir / name).write_bytes(data)
        return f"![{name}]({name})"
    return f"![{name}](data:{mime};base64,{base64.b64encode(data).decode()})"


def _png_charts(metrics: pl.DataFrame, catalog: Catalog, out_dir: Path | None) -> list[str]:
    import matplotlib  # only when importable; not a dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for bench in benchmarks_in(metrics, catalog):
        board = leaderboard(metrics, catalog, bench)
        metric = catalog.primary(bench)
        fig, ax = plt.subplots(figsize=(8, 0.3 * board.height + 1.2))
        ax.barh([str(m) for m in board["model"]], board[metric].fill_null(0).to_list())
        ax.invert_yaxis()
        ax.set_title(f"{catalog.display(bench)} {metric}")
        name = f"{bench}_{metric}.png"
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        names.append(_picture(name, buf.getvalue(), "image/png", out_dir))
    return names


_ANALYTICS_HEAD = [
    "model",
    "benchmark",
    "spent",
    "tokens in",
    "tokens out",
    "cached in",
    "cache saved",
    "calls",
    "retries",
    "429s",
    "p50 s",
    "p95 s",
    "judge unparsed",
    "empty/trunc/refused",
    "coverage",
]


def _share(v: float | None) -> str:
    return "–" if v is None else f"{v:.1%}"


def _secs(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _analytics_row(r: dict[str, Any]) -> list[str]:
    return [
        _md(r["model"]),
        _md(r["benchmark"]),
        f"${(r['spent_usd'] or 0):,.4f}",
        f"{r['input_tokens'] or 0:,}",
        f"{r['output_tokens'] or 0:,}",
        _share(r["cached_share"]),
        f"${(r['cache_saved_usd'] or 0):,.4f}",
        f"{r['calls'] or 0:,}",
        f"{r['retries'] or 0:,}",
        f"{r['rate_limited'] or 0:,}",
        _secs(r["latency_p50_s"]),
        _secs(r["latency_p95_s"]),
        _share(r["judge_unparsed_rate"]),
        f"{r['empty'] or 0}/{r['truncated'] or 0}/{r['refused'] or 0}",
        _share(r["coverage"]),
    ]


def _chart_lines(metrics: pl.DataFrame, catalog: Catalog, out: Path | None) -> list[str]:
    """The charts section: each SVG beside the report (or inline), then the PNGs when matplotlib is there."""
    lines = ["## Charts", ""]
    svgs = {
        chart.file: charts.draw(metrics, catalog, bench, chart)
        for bench, chart in charts.wanted(catalog)
        if chart.file
    }
    for name, markup in svgs.items():
        # A section may hold several charts (CFBench: one per metric); each becomes its own file.
        pieces = [p[: p.rfind("</svg>") + len("</svg>")] for p in markup.split("<svg")[1:]]
        for i, piece in enumerate(pieces):
            fname = name if len(pieces) == 1 else name.replace(".svg", f"_{i + 1}.svg")
            lines += [_picture(fname, f"<svg{piece}\n".encode(), "image/svg+xml", out), ""]
    if importlib.util.find_spec("matplotlib") is not None:
        lines += [*_png_charts(metrics, catalog, out), ""]
    else:
        lines += [
            "_PNG charts skipped: matplotlib is not installed (the SVG charts above need nothing)._",
            "",
        ]
    return lines


def render_markdown(
    metrics: pl.DataFrame, catalog: Catalog, analytics: pl.DataFrame | None, out_dir: str | Path | None
) -> str:
    """`out_dir`: where the chart files go (beside the report file); None: the charts inline."""
    out = None if out_dir is None else Path(out_dir)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    lines = ["# ifsweep report", ""]
    for bench in benchmarks_in(metrics, catalog):
        board = leaderboard(metrics, catalog, bench)
        names = [*catalog.headline(bench), "coverage"]
        rows = [
            [_md(r["model"]), *value_texts(r, catalog, bench, names)] for r in board.iter_rows(named=True)
        ]
        lines += [f"## {catalog.display(bench)}", ""]
        lines += _table(["model", *(header(catalog, bench, m) for m in names)], rows)
        if note := partial_note(metrics, bench):
            lines += ["", f"**{_md(note)}**"]
        lines.append("")
    if analytics is not None and analytics.height:
        lines += ["## Run analytics", ""]
        lines += _table(_ANALYTICS_HEAD, [_analytics_row(r) for r in analytics.iter_rows(named=True)])
        lines.append("")
    return "\n".join(lines + _chart_lines(metrics, catalog, out))
