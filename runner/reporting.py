"""Glue between a run directory and the metrics package: `report`, `metrics` and `status`."""

from __future__ import annotations

from pathlib import Path

from runner.errors import UsageError


def _require_run_dir(run_dir: Path) -> None:
    if not (run_dir / "shards").is_dir():
        raise UsageError(f"{run_dir}: not a run directory (no shards/ folder)")


def report(run_dir: Path, *, fmt: str, ci: bool = False, out: Path | None = None) -> str:
    import metrics
    from runner.compact import load_call_records, load_verdict_rows

    _require_run_dir(run_dir)
    rows = load_verdict_rows(run_dir)
    if rows.height == 0:
        raise UsageError(f"{run_dir}: no verdicts yet; run the sweep first")
    table = metrics.compute_metrics(rows, ci=ci or fmt == "html")
    text = _render(fmt, table, rows, run_dir, load_call_records, out)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return text


def _render(fmt: str, table: object, rows: object, run_dir: Path, load_calls: object, out: Path | None) -> str:
    import metrics

    if fmt == "table":
        return str(metrics.render_table(table))
    if fmt == "json":
        return str(metrics.render_json(table))
    if fmt == "csv":
        return str(metrics.render_csv(table))
    calls = load_calls(run_dir)  # type: ignore[operator]
    analytics = metrics.analytics(calls, table)
    if fmt == "md":
        return str(metrics.render_markdown(table, analytics, (out.parent if out else run_dir)))
    paired = metrics.paired_all(rows) if hasattr(metrics, "paired_all") else None
    return str(metrics.render_html(table, analytics, paired))


def metrics_of_files(paths: list[Path], *, fmt: str, ci: bool) -> str:
    import metrics

    for p in paths:
        if not p.exists():
            raise UsageError(f"{p}: no such file")
    table = metrics.compute_metrics(metrics.read_verdicts(paths), ci=ci)
    return {
        "json": metrics.render_json,
        "csv": metrics.render_csv,
        "table": metrics.render_table,
        "md": metrics.render_table,
    }[fmt](table)


def render_status(run_dir: Path) -> str:
    from runner.status import status_table

    _require_run_dir(run_dir)
    rows = status_table(run_dir)
    head = f"{'model':24s} {'benchmark':12s} {'planned':>8s} {'done':>8s} {'errors':>7s} {'spent $':>10s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        planned = "?" if r.get("planned") is None else str(r["planned"])
        lines.append(
            f"{str(r['model'])[:24]:24s} {str(r['benchmark']):12s} {planned:>8s} {r['done']:8d} {r['errors']:7d} "
            f"{float(r['spent_usd']):10.4f}"
        )
    return "\n".join(lines)
