"""A few small SVG charts drawn by hand, so reports open anywhere without a plotting library.

Every string that reaches the SVG goes through `esc`. Hovering a series highlights it with CSS only.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

PALETTE: tuple[str, ...] = (
    "#4269d0",
    "#efb118",
    "#ff725c",
    "#6cc5b0",
    "#3ca951",
    "#ff8ab7",
    "#a463f2",
    "#97bbf5",
    "#9c6b4e",
    "#9498a0",
    "#1f3f99",
    "#b07d00",
    "#c2402e",
    "#2e8b7a",
    "#1f6f2e",
    "#c2417e",
    "#6b35b8",
    "#5c8fd6",
    "#6b4430",
    "#5f636b",
)
FONT = 'font-family="system-ui, sans-serif"'


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _money(v: float, scale: float) -> str:
    return f"${v:,.2f}" if scale >= 10 else f"${v:.3f}" if scale >= 0.1 else f"${v:.4f}"


def _fmt(v: float) -> str:
    return f"{v:.1f}"


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    label: str
    lo: float | None = None
    hi: float | None = None


def _frame(width: int, height: int, title: str, body: list[str], css_class: str) -> str:
    return (
        f'<svg class="chart {css_class}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{esc(title)}">'
        f"<title>{esc(title)}</title>{''.join(body)}</svg>"
    )


def _y_axis(x0: float, y0: float, h: float, w: float, y_max: float, fmt: str = "{:.0%}") -> list[str]:
    out = []
    for i in range(5):
        v = y_max * i / 4
        y = y0 + h - h * i / 4
        out.append(f'<line x1="{_fmt(x0)}" x2="{_fmt(x0 + w)}" y1="{_fmt(y)}" y2="{_fmt(y)}" class="grid"/>')
        out.append(
            f'<text x="{_fmt(x0 - 6)}" y="{_fmt(y + 4)}" text-anchor="end" class="tick" {FONT}>'
            f"{esc(fmt.format(v))}</text>"
        )
    return out


def _legend(names: Sequence[str], x: float, y: float, width: float) -> tuple[list[str], float]:
    """Wrapped legend; returns its marks and height."""
    out, cx, cy = [], x, y
    for i, name in enumerate(names):
        label = name if len(name) <= 28 else name[:27] + "…"
        step = 22 + 7 * len(label)
        if cx + step > x + width and cx > x:
            cx, cy = x, cy + 18
        out.append(
            f'<g class="legend-item"><rect x="{_fmt(cx)}" y="{_fmt(cy - 9)}" width="12" height="12" '
            f'rx="2" fill="{color(i)}"/><text x="{_fmt(cx + 16)}" y="{_fmt(cy + 1)}" class="tick" {FONT}>'
            f"<title>{esc(name)}</title>{esc(label)}</text></g>"
        )
        cx += step
    return out, cy - y + 18


def line_chart(
    title: str,
    x_labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    width: int = 900,
    y_max: float = 1.0,
) -> str:
    """One line per series over categorical x positions (None: no point there)."""
    names = list(series)
    legend, legend_h = _legend(names, 60, 20, width - 80)
    left, top, right, bottom = 60.0, 30.0 + legend_h, 20.0, 40.0
    plot_h = 300.0
    height = int(top + plot_h + bottom)
    w = width - left - right
    body = legend + _y_axis(left, top, plot_h, w, y_max)
    n = max(len(x_labels), 1)
    xs = [left + w * (i + 0.5) / n for i in range(n)]
    for x, label in zip(xs, x_labels, strict=True):
        body.append(
            f'<text x="{_fmt(x)}" y="{_fmt(top + plot_h + 20)}" text-anchor="middle" class="tick" '
            f"{FONT}>{esc(label)}</text>"
        )
    for i, name in enumerate(names):
        pts = [(x, v) for x, v in zip(xs, series[name], strict=True) if v is not None and not math.isnan(v)]
        if not pts:
            continue
        coords = " ".join(f"{_fmt(x)},{_fmt(top + plot_h - plot_h * v / y_max)}" for x, v in pts)
        dots = "".join(
            f'<circle cx="{_fmt(x)}" cy="{_fmt(top + plot_h - plot_h * v / y_max)}" r="3.5">'
            f"<title>{esc(name)}: {v:.1%}</title></circle>"
            for x, v in pts
        )
        body.append(
            f'<g class="series" stroke="{color(i)}" fill="{color(i)}"><title>{esc(name)}</title>'
            f'<polyline points="{coords}" fill="none" stroke-width="2"/>{dots}</g>'
        )
    return _frame(width, height, title, body, "line")


def _row_label(row: str, x: float, y: float) -> str:
    """A model's name right-aligned at (x, y) left of its bars or cells, cut to 30 characters (the
    whole name in its tooltip)."""
    label = row if len(row) <= 30 else row[:29] + "…"
    return (
        f'<text x="{_fmt(x)}" y="{_fmt(y)}" text-anchor="end" class="tick" '
        f"{FONT}><title>{esc(row)}</title>{esc(label)}</text>"
    )


@dataclass(frozen=True, slots=True)
class Grid:
    """What a bar chart and a heatmap draw: a title, rows (models, top to bottom), columns (a band's
    bars, or the heatmap's columns) and the point of each (row, column) that has one."""

    title: str
    rows: Sequence[str]
    cols: Sequence[str]
    values: Mapping[tuple[str, str], Point]

    def cells(self, row: str) -> Iterator[tuple[int, str, Point]]:
        """(column index, column, point) of each of `row`'s cells there is a point to draw for (not
        missing, not NaN)."""
        for c, col in enumerate(self.cols):
            p = self.values.get((row, col))
            if p is not None and not math.isnan(p.x):
                yield c, col, p


def bar_chart(grid: Grid, *, width: int = 900, x_max: float = 1.0) -> str:
    """Horizontal grouped bars: one band per row (model), one bar per column (group), whiskers for
    intervals."""
    rows, groups = grid.rows, grid.cols
    legend, legend_h = _legend(list(groups), 220, 20, width - 240)
    left, top, right = 220.0, 30.0 + legend_h, 60.0
    bar_h, gap = 11.0, 8.0
    band = bar_h * len(groups) + gap
    height = int(top + band * len(rows) + 30)
    w = width - left - right
    body = list(legend)
    for i in range(5):
        x = left + w * i / 4
        body.append(
            f'<line x1="{_fmt(x)}" x2="{_fmt(x)}" y1="{_fmt(top)}" y2="{_fmt(height - 24)}" class="grid"/>'
            f'<text x="{_fmt(x)}" y="{height - 8}" text-anchor="middle" class="tick" {FONT}>'
            f"{esc(f'{x_max * i / 4:.0%}')}</text>"
        )
    for r, row in enumerate(rows):
        y0 = top + r * band
        body.append(_row_label(row, left - 8, y0 + band / 2))
        for g, group, p in grid.cells(row):
            y = y0 + g * bar_h
            bw = max(w * p.x / x_max, 0.5)
            tip = (
                f"{row} · {group}: {p.x:.1%}"
                + (f" [{p.lo:.1%}, {p.hi:.1%}]" if p.lo is not None and p.hi is not None else "")
                + f" (n={p.label})"
            )
            body.append(
                f'<rect class="bar" x="{_fmt(left)}" y="{_fmt(y)}" width="{_fmt(bw)}" '
                f'height="{_fmt(bar_h - 2)}" fill="{color(g)}"><title>{esc(tip)}</title></rect>'
            )
            if p.lo is not None and p.hi is not None:
                yl = y + (bar_h - 2) / 2
                body.append(
                    f'<line class="whisker" x1="{_fmt(left + w * p.lo / x_max)}" '
                    f'x2="{_fmt(left + w * p.hi / x_max)}" y1="{_fmt(yl)}" y2="{_fmt(yl)}"/>'
                )
    return _frame(width, height, grid.title, body, "bars")


def _heat(v: float) -> str:
    # Pale to deep blue; the caller picks light text for dark cells.
    lo, hi = (0xF1, 0xF4, 0xFB), (0x1F, 0x3F, 0x99)
    r, g, b = (int(a + (z - a) * v) for a, z in zip(lo, hi, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    grid: Grid, *, cell_w: int = 74, cell_h: int = 20, fmt: str = "{:.0%}", tip_fmt: str = "{:.1%}"
) -> str:
    """Cells shaded by value in [0, 1] (clamped), labelled with `fmt`; a cell's title uses `tip_fmt`."""
    rows, cols = grid.rows, grid.cols
    left, top = 220.0, 90.0
    width = int(left + cell_w * max(len(cols), 1) + 20)
    height = int(top + cell_h * len(rows) + 10)
    body = []
    for c, col in enumerate(cols):
        x = left + c * cell_w + cell_w / 2
        label = col if len(col) <= 16 else col[:15] + "…"
        body.append(
            f'<text x="{_fmt(x)}" y="{_fmt(top - 8)}" transform="rotate(-30 {_fmt(x)} {_fmt(top - 8)})" '
            f'class="tick" {FONT}><title>{esc(col)}</title>{esc(label)}</text>'
        )
    for r, row in enumerate(rows):
        y = top + r * cell_h
        body.append(_row_label(row, left - 8, y + cell_h * 0.7))
        for c, col, p in grid.cells(row):
            x = left + c * cell_w
            text_fill = "#ffffff" if p.x > 0.55 else "#1b1e23"
            body.append(
                f'<g class="cell"><rect x="{_fmt(x)}" y="{_fmt(y)}" width="{cell_w - 2}" '
                f'height="{cell_h - 2}" fill="{_heat(min(max(p.x, 0.0), 1.0))}"/>'
                f'<text x="{_fmt(x + cell_w / 2 - 1)}" '
                f'y="{_fmt(y + cell_h * 0.68)}" text-anchor="middle" '
                f'style="fill:{text_fill}" class="cell-label" {FONT}>'
                f"{esc(fmt.format(p.x))}</text>"
                f"<title>{esc(f'{row} · {col}: {tip_fmt.format(p.x)} (n={p.label})')}</title></g>"
            )
    return _frame(width, height, grid.title, body, "heatmap")


def scatter(
    title: str,
    points: Mapping[str, Sequence[Point]],
    *,
    x_title: str,
    y_title: str,
    width: int = 900,
    height: int = 420,
) -> str:
    """Points grouped into coloured series; x on a linear scale from 0."""
    names = list(points)
    legend, legend_h = _legend(names, 70, 20, width - 90)
    left, top, right, bottom = 70.0, 30.0 + legend_h, 30.0, 50.0
    plot_h = height - top - bottom
    w = width - left - right
    x_max = max([p.x for ps in points.values() for p in ps] + [0.0])
    x_max = x_max * 1.05 if x_max > 0 else 1.0
    body = legend + _y_axis(left, top, plot_h, w, 1.0)
    for i in range(5):
        x = left + w * i / 4
        body.append(
            f'<text x="{_fmt(x)}" y="{_fmt(top + plot_h + 18)}" text-anchor="middle" class="tick" '
            f"{FONT}>{esc(_money(x_max * i / 4, x_max))}</text>"
        )
    body.append(
        f'<text x="{_fmt(left + w / 2)}" y="{_fmt(height - 8)}" text-anchor="middle" class="axis" '
        f"{FONT}>{esc(x_title)}</text>"
    )
    body.append(
        f'<text x="14" y="{_fmt(top + plot_h / 2)}" transform="rotate(-90 14 {_fmt(top + plot_h / 2)})" '
        f'text-anchor="middle" class="axis" {FONT}>{esc(y_title)}</text>'
    )
    for i, name in enumerate(names):
        dots = "".join(
            f'<circle cx="{_fmt(left + w * p.x / x_max)}" cy="{_fmt(top + plot_h - plot_h * p.y)}" r="5">'
            f"<title>{esc(f'{p.label} ({name}): {p.y:.1%} for ${p.x:,.4f}')}</title></circle>"
            for p in points[name]
            if not (math.isnan(p.x) or math.isnan(p.y))
        )
        body.append(f'<g class="series" fill="{color(i)}" fill-opacity="0.8">{dots}</g>')
    return _frame(width, height, title, body, "scatter")
