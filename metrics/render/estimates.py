"""The estimate section of a partial run's report (metrics/sampling/estimates.py): each headline metric
estimated for the planned population with its interval, labelled "estimate from N of M planned
units", and the paired differences on the units both models have; as text, Markdown, HTML, and as
keys of the JSON rows."""

from __future__ import annotations

import html as _html
import math

import polars as pl

from ifsweep.metrics.catalog import Catalog

__all__ = ["ESTIMATE_KEYS", "estimate_lines", "estimates_html", "estimates_markdown", "with_estimate_keys"]

# What a JSON row of a partial run carries beside its value (render_json keeps them when present).
ESTIMATE_KEYS = ("estimate", "est_low", "est_high", "units_done", "units_planned")
_TITLE = "Estimates for the planned population"
_SUB = (
    "Post-stratified by the strata's planned sizes; 95% studentized (bootstrap-t) intervals from the "
    "Rao-Wu bootstrap within strata (finite-population correction). They assume the done units are "
    "the seeded order's prefix (docs/metrics.md)."
)


def _num(catalog: Catalog, bench: str, metric: str, v: float | None) -> str:
    if v is None or math.isnan(v):
        return "-"
    return f"{v:.2f}" if catalog.in_levels(bench, metric) else f"{100 * v:.1f}"


def _with_interval(catalog: Catalog, bench: str, metric: str, v: float, lo: float, hi: float) -> str:
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{_num(catalog, bench, metric, v)} [no interval]"
    low, high = _num(catalog, bench, metric, lo), _num(catalog, bench, metric, hi)
    return f"{_num(catalog, bench, metric, v)} [{low}, {high}]"


def _blocks(
    est: pl.DataFrame, paired: pl.DataFrame, catalog: Catalog
) -> list[tuple[str, list[list[str]], str]]:
    """Per (benchmark, judge): its title, a table (header first) and its notes."""
    out = []
    overall = est.filter(pl.col("slice") == "all")
    many = overall.get_column("judge").n_unique() > 1
    for (bench, judge), part in overall.group_by("benchmark", "judge", maintain_order=True):
        bench, judge = str(bench), None if judge is None else str(judge)
        metrics = [m for m in catalog.headline(bench) if m in set(part.get_column("metric"))]
        head = ["model", "estimate from", *(f"{m} [95% CI]" for m in metrics)]
        body = []
        notes = set()
        for model, rows in part.group_by("model", maintain_order=True):
            by = {r["metric"]: r for r in rows.iter_rows(named=True)}
            first = next(iter(by.values()))
            cells = [
                _with_interval(catalog, bench, m, by[m]["estimate"], by[m]["est_low"], by[m]["est_high"])
                if m in by
                else "-"
                for m in metrics
            ]
            body.append([str(model[0]), f"{first['units_done']} of {first['units_planned']} units", *cells])
            if first["note"]:
                notes.add(f"{model[0]}: {first['note']}")
        title = catalog.display(bench) + (f" (judge {judge})" if many and judge is not None else "")
        out.append((title, [head, *body], "; ".join(sorted(notes))))
        pairs = paired.filter((pl.col("benchmark") == bench) & _same_judge(judge))
        if pairs.height:
            metric = str(pairs.get_column("metric")[0])
            rows2 = [["pair", "on units both have", f"{metric} difference [95% CI]"]]
            for r in pairs.iter_rows(named=True):
                d = _with_interval(catalog, bench, metric, r["diff"], r["diff_low"], r["diff_high"])
                rows2.append(
                    [f"{r['model_a']} - {r['model_b']}", f"{r['units_both']} of {r['units_planned']}", d]
                )
            out.append((f"{title}: paired differences", rows2, ""))
    return out


def _same_judge(judge: str | None) -> pl.Expr:
    return pl.col("judge").is_null() if judge is None else pl.col("judge") == judge


def estimate_lines(est: pl.DataFrame, paired: pl.DataFrame, catalog: Catalog) -> str:
    """The section as terminal text."""
    lines = [f"{_TITLE} (estimate from N of M planned units)", _SUB, ""]
    for title, table, note in _blocks(est, paired, catalog):
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines.append(title)
        for k, row in enumerate(table):
            lines.append(
                "  ".join(
                    c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(row, widths, strict=True))
                )
            )
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        if note:
            lines.append(f"note: {note}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def estimates_markdown(est: pl.DataFrame, paired: pl.DataFrame, catalog: Catalog) -> str:
    lines = [f"## {_TITLE}", "", _SUB, ""]
    for title, table, note in _blocks(est, paired, catalog):
        lines += [f"### {title}", "", "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
        lines += ["", *([f"Note: {note}", ""] if note else [])]
    return "\n".join(lines)


def estimates_html(est: pl.DataFrame, paired: pl.DataFrame, catalog: Catalog) -> str:
    esc = _html.escape
    parts = [f'<section id="estimates"><h2>{esc(_TITLE)}</h2><p class="sub">{esc(_SUB)}</p>']
    for title, table, note in _blocks(est, paired, catalog):
        head = "".join(f"<th>{esc(c)}</th>" for c in table[0])
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in table[1:])
        parts.append(
            f"<h3>{esc(title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )
        if note:
            parts.append(f'<p class="note">{esc(note)}</p>')
    return "".join(parts) + "</section>"


def with_estimate_keys(table: pl.DataFrame, est: pl.DataFrame) -> pl.DataFrame:
    """`table` (metrics rows) with each row's estimate columns (null where none was made)."""
    key = ["benchmark", "model", "judge", "metric", "slice"]
    cast = table.with_columns(pl.col(k).cast(pl.String) for k in key)
    found = est.select(*key, *ESTIMATE_KEYS).with_columns(pl.col(k).cast(pl.String) for k in key)
    joined = cast.join(found, on=key, how="left", maintain_order="left", nulls_equal=True)
    return joined.with_columns(pl.col(k).cast(table.schema[k]) for k in key)
