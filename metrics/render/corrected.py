"""The corrected leaderboards (`report --gold FILE --correct ppi|rg`) as text, Markdown and HTML, and
the HTML report's audit section: the judge against gold (metrics/audit.py, metrics/corrected.py)."""

from __future__ import annotations

from collections.abc import Sequence

from ifsweep.metrics.agreement import competition_ranks
from ifsweep.metrics.audit import AUDIT_STATISTICS, AuditStat
from ifsweep.metrics.catalog import Catalog
from ifsweep.metrics.corrected import BenchCorrection, Corrected, Corrections
from ifsweep.metrics.leaderboard import fmt_interval, fmt_value
from ifsweep.metrics.render.svg import esc

__all__ = ["audit_section", "corrected_lines", "corrected_rows"]

_NAMES = {"ppi": "PPI++", "rg": "Rogan-Gladen"}
_HEAD = ("model", "metric", "judge", "corrected [95% CI]", "lambda", "gold inst", "rank", "note")


def _value(c: Corrected, method: str) -> float | None:
    v: float | None = getattr(c, f"value_{method}")
    return v


def _ranks(scores: Sequence[Corrected], metric: str, method: str) -> dict[str, str]:
    """Per model of `metric`: "judge rank -> corrected rank" among the models with both values."""
    both = [c for c in scores if c.metric == metric and c.value is not None and _value(c, method) is not None]
    before = competition_ranks({c.model: float(c.value or 0.0) for c in both})
    after = competition_ranks({c.model: float(_value(c, method) or 0.0) for c in both})
    return {m: f"{before[m]} -> {after[m]}" for m in before}


def corrected_rows(found: Corrections, catalog: Catalog, bench: str) -> list[list[str]]:
    """One row of cells per (model, headline metric) of `bench`, ranked by the corrected primary."""
    method = found.method
    scores = found.of(bench)
    summary = found.summary(bench)
    primary = catalog.primary(bench) if summary is None else summary.metric
    ranks = _ranks(scores, primary, method)
    key = {c.model: _value(c, method) for c in scores if c.metric == primary}
    order = sorted(key, key=lambda m: (key[m] is None, -(key[m] or 0.0)))
    rows = []
    for model in order:
        for c in sorted((c for c in scores if c.model == model), key=lambda c: c.metric != primary):
            levels = catalog.in_levels(bench, c.metric)
            lo, hi = getattr(c, f"ci_low_{method}"), getattr(c, f"ci_high_{method}")
            fixed = _value(c, method)
            shown = (
                "–"
                if fixed is None
                else f"{fmt_value(fixed, levels=levels)} {fmt_interval(lo, hi, levels=levels)}"
            )
            rows.append(
                [
                    c.model,
                    c.metric,
                    fmt_value(c.value, levels=levels),
                    shown,
                    "" if c.lam is None else f"{c.lam:.2f}",
                    str(c.n_gold) if method == "ppi" else "",
                    ranks.get(c.model, "") if c.metric == primary else "",
                    c.ppi_note if method == "ppi" else c.rg_note,
                ]
            )
    return rows


def _summary(s: BenchCorrection | None, method: str) -> str:
    if s is None:
        return ""
    tau = s.tau_ppi if method == "ppi" else s.tau_rg
    moved = s.max_change_ppi if method == "ppi" else s.max_change_rg
    shown = "n/a" if tau is None else f"{tau:.3f}"
    line = f"Kendall's tau-b ({s.metric}: judge vs {_NAMES[method]}) = {shown}; largest rank change {moved}."
    if method == "rg":
        se = "n/a" if s.sensitivity is None else f"{s.sensitivity:.3f}"
        sp = "n/a" if s.specificity is None else f"{s.specificity:.3f}"
        held = {None: "not checked (gold on under two models)", True: "yes", False: "NO (flagged)"}[
            s.homogeneous
        ]
        line += f" Pooled gold: sensitivity {se}, specificity {sp}; they hold across models: {held}."
    return line + (f" {s.note}." if s.note else "")


def corrected_lines(found: Corrections, catalog: Catalog, *, markdown: bool = False) -> list[str]:
    """Per benchmark a table of the corrected headline metrics (percent, CSL in levels), the rank
    change on the primary metric and the summary line (tau-b; RG's Se, Sp and their check)."""
    out: list[str] = []
    for bench in catalog.ordered({c.benchmark for c in found.scores}):
        rows = corrected_rows(found, catalog, bench)
        title = f"{catalog.display(bench)}: corrected by {_NAMES[found.method]} (judge {found.judge})"
        out += ["", f"## {title}" if markdown else title, ""]
        if markdown:
            out += ["| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)]
            out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        else:
            widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEAD)]
            out.append("  ".join(h.ljust(w) for h, w in zip(_HEAD, widths, strict=True)).rstrip())
            out.append("  ".join("-" * w for w in widths))
            out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        out += ["", _summary(found.summary(bench), found.method)]
    return out


def stat_text(s: AuditStat | None) -> str:
    """An audit statistic as `ifsweep audit` and the report's audit section print it."""
    if s is None or s.value is None:
        return "n/a"
    if s.ci_low is None or s.ci_high is None:
        return f"{s.value:.3f}"
    return f"{s.value:.3f} [{s.ci_low:.3f}, {s.ci_high:.3f}]"


def audit_section(
    stats: Sequence[AuditStat], corrections: Sequence[Corrections], catalog: Catalog, source: str
) -> str:
    """The HTML report's audit section: each judge against the gold per benchmark (every constraint
    type together, pooled over models), then the corrected leaderboards."""
    by: dict[tuple[str, str], dict[str, AuditStat]] = {}
    for s in stats:
        if s.constraint_type == "all" and s.model is None:
            by.setdefault((s.benchmark, s.judge), {})[s.statistic] = s
    head = "".join(
        f"<th>{esc(h)}</th>" for h in ("benchmark", "judge", "units", "instances", *AUDIT_STATISTICS)
    )
    body = "".join(
        f"<tr><td>{esc(catalog.display(b))}</td><td>{esc(j)}</td>"
        f"<td>{st['accuracy'].units}</td><td>{st['accuracy'].instances}</td>"
        + "".join(f"<td>{esc(stat_text(st.get(k)))}</td>" for k in AUDIT_STATISTICS)
        + "</tr>"
        for (b, j), st in sorted(by.items())
    )
    parts = [
        '<section id="audit"><h2>Judge audit</h2>',
        f'<p class="sub">Against gold: {esc(source)}. 95% bootstrap intervals over gold instances; '
        "n/a: fewer than 5 units.</p>",
        f'<table class="audit"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
    ]
    for found in corrections:
        for bench in catalog.ordered({c.benchmark for c in found.scores}):
            rows = corrected_rows(found, catalog, bench)
            cells = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
            heads = "".join(f"<th>{esc(h)}</th>" for h in _HEAD)
            parts.append(
                f"<h3>{esc(catalog.display(bench))}: corrected by {esc(_NAMES[found.method])}</h3>"
                f'<table class="corrected"><thead><tr>{heads}</tr></thead><tbody>{cells}</tbody></table>'
                f'<p class="note">{esc(_summary(found.summary(bench), found.method))}</p>'
            )
    return "".join(parts) + "</section>"
