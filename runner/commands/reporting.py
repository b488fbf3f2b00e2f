"""Glue between a run directory and the metrics package: `report`, `metrics` and `status`. The metrics
engine knows no benchmark; `rundir.metric_catalog` hands it every registered benchmark's definitions."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.runner.commands.agreement import run_agreement
from ifsweep.runner.commands.audit import ReportAudit, check_correction, report_audit
from ifsweep.runner.commands.rundir import (
    compute,
    in_model_order,
    partial_estimates,
    planned_rows,
    read_run_dir,
    require_run_dir,
    with_progress,
)
from ifsweep.runner.errors import UsageError
from ifsweep.runner.watch.board import natural_key

if TYPE_CHECKING:
    import polars as pl

    from ifsweep.metrics import Agreement, Catalog
    from ifsweep.runner.store.current import RunReading
    from ifsweep.runner.watch.status import StatusReport


def judged_rows(
    run_dir: Path, judge: str | None, reading: RunReading | None = None
) -> tuple[RunReading, pl.LazyFrame, list[str | None]]:
    """The run's reading, its planned verdict rows for `judge` (an id, "all", "majority", or None: the
    first configured judge), lazily (metrics stream them), and the judges they hold; UsageError for a
    judge the run has no verdicts of."""
    import polars as pl

    from ifsweep import metrics

    reading = reading if reading is not None else read_run_dir(run_dir)
    rows = planned_rows(reading)
    if metrics.streamed(rows.select(pl.len())).item() == 0:
        raise UsageError(f"{run_dir}: no verdicts yet; run the sweep first")
    try:
        chosen, judges = metrics.select_judges(rows, judge, reading.panel)
    except ValueError as e:
        raise UsageError(f"{run_dir}: {e}") from None
    return reading, chosen, judges


def report(
    run_dir: Path,
    *,
    fmt: str,
    ci: bool = False,
    out: Path | None = None,
    judge: str | None = None,
    gold: Path | None = None,
    correct: str | None = None,
) -> str:
    """The report of one judge's verdicts (`judge`: an id, "majority", or None for the first configured
    judge), or with "all" every judge's figures apart (table, json and csv). A run that is not complete
    says, per benchmark and model, how many of its planned instances the figures cover. With `gold` (a
    gold file) and `correct` ("ppi" or "rg"): the headline metrics corrected for judge error
    (docs/metrics.md, "Corrected scores"); the html report then has an audit section."""
    from ifsweep import metrics
    from ifsweep.runner.store.compact import load_call_records

    if judge == "all" and fmt in ("md", "html"):
        raise UsageError("--judge all: md and html reports show one judge; use table, json or csv")
    check_correction(gold, correct, fmt)
    reading, rows, judges = judged_rows(run_dir, judge)
    table, catalog = compute(rows, ci=ci or fmt == "html")
    # Config order (natural order when the config is not known); leaderboards rank by score and keep
    # this order among equal scores.
    order = reading.model_order(table.get_column("model").unique().to_list())
    table = with_progress(in_model_order(table, order), reading)
    found = None if gold is None else report_audit(run_dir, rows, gold, correct, stats=fmt == "html")
    table = with_corrections(table, found)
    partial = partial_estimates(reading, rows, catalog)
    if fmt == "json":
        table = _estimate_keys(table, partial)
    if fmt in ("table", "json", "csv"):
        text = _render_plain(table, catalog, fmt) + _corrected_text(found, catalog, fmt)
        if reading.beyond and fmt == "table":
            text += f"\n\n{_beyond_note(reading.beyond)}"
    else:
        calls = load_call_records(run_dir)
        analytics = in_model_order(_analytics(calls, table, judges, reading), order)
        if fmt == "md":
            text = metrics.render_markdown(table, catalog, analytics, out.parent if out else None)
            text += _corrected_text(found, catalog, fmt)
        else:
            panel = _panel_section(reading)
            text = metrics.render_html(
                table,
                catalog,
                analytics,
                _paired_primary(rows, table, catalog),
                judges=panel,
                judge=judges[0],
                audit=_audit_html(found, catalog),
            )
    if partial is not None:
        text = _with_estimates(text, fmt, partial, catalog)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return text


def with_corrections(table: pl.DataFrame, found: ReportAudit | None) -> pl.DataFrame:
    """The metrics table with the corrected columns joined on its headline "all" rows (null elsewhere)."""
    if found is None or not found.corrections:
        return table
    import polars as pl

    from ifsweep.metrics.corrected import corrections_frame

    extra = pl.concat([corrections_frame(c) for c in found.corrections])
    key = ["benchmark", "model", "judge", "metric", "slice"]
    return table.join(extra, on=key, how="left", maintain_order="left", nulls_equal=True)


def _corrected_text(found: ReportAudit | None, catalog: Catalog, fmt: str) -> str:
    """The corrected leaderboards after a text or Markdown report (JSON carries them in its rows)."""
    if found is None or fmt not in ("table", "md"):
        return ""
    from ifsweep.metrics.render.corrected import corrected_lines

    lines = [line for c in found.corrections for line in corrected_lines(c, catalog, markdown=fmt == "md")]
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def _audit_html(found: ReportAudit | None, catalog: Catalog) -> str:
    if found is None:
        return ""
    from ifsweep.metrics.render.corrected import audit_section

    return audit_section(found.stats, found.corrections, catalog, found.gold.source)


def _estimate_keys(table: pl.DataFrame, partial: tuple[pl.DataFrame, pl.DataFrame] | None) -> pl.DataFrame:
    """JSON rows of a partial run carry their estimates (`report` and `metrics` of a run directory:
    one reading, one figure)."""
    from ifsweep import metrics

    return table if partial is None else metrics.with_estimate_keys(table, partial[0])


def _with_estimates(text: str, fmt: str, partial: tuple[pl.DataFrame, pl.DataFrame], catalog: Catalog) -> str:
    """A partial run's report with its estimate section (issue 34): after the table or the Markdown,
    at the end of the HTML page's main part; JSON rows carry theirs, CSV none."""
    from ifsweep import metrics

    est, paired = partial
    if fmt == "table":
        return f"{text.rstrip()}\n\n{metrics.estimate_lines(est, paired, catalog)}"
    if fmt == "md":
        return f"{text.rstrip()}\n\n{metrics.estimates_markdown(est, paired, catalog)}\n"
    if fmt == "html":
        return text.replace("</main>", metrics.estimates_html(est, paired, catalog) + "</main>", 1)
    return text


def _beyond_note(pairs: int) -> str:
    return (
        f"note: {pairs} (model, instance) pair{'s' if pairs != 1 else ''} judged under an earlier, higher "
        "`limit` "
        "left out: these scores cover the instances the config now selects"
    )


def _analytics(
    calls: pl.DataFrame, table: pl.DataFrame, judges: list[str | None], reading: RunReading
) -> pl.DataFrame:
    """Per (benchmark, model): one spent figure, the answers plus every judge's calls on them (as
    `status` and the viewer count it), and the shown judges' unparsed rate."""
    import polars as pl

    from ifsweep import metrics

    every = metrics.analytics(calls, table)
    shown = _calls_of(calls, judges, reading)
    if shown.height == calls.height:
        return every
    rate = metrics.analytics(shown, table).select("benchmark", "model", "judge_unparsed_rate")
    return (
        every.drop("judge_unparsed_rate")
        .join(rate, on=["benchmark", "model"], how="left", maintain_order="left")
        .select(every.columns)
        .with_columns(pl.col("judge_unparsed_rate"))
    )


def _calls_of(calls: pl.DataFrame, judges: list[str | None], reading: RunReading) -> pl.DataFrame:
    """The generations, and the judgments of the judges whose figures the report shows (the majority's:
    the panel's)."""
    import polars as pl

    from ifsweep import metrics

    if judges == [metrics.MAJORITY]:
        named = [j for j in metrics.judges_in(calls.filter(pl.col("kind") == "judgment")) if j is not None]
        shown = [j for j in reading.panel if j in named] or named
    else:
        shown = [j for j in judges if j is not None]
    if not shown:
        return calls
    return calls.filter((pl.col("kind") == "generation") | pl.col("judge").is_in(shown))


def _render_plain(table: pl.DataFrame, catalog: Catalog, fmt: str) -> str:
    import polars as pl

    from ifsweep import metrics

    if fmt == "json":
        return metrics.render_json(table)
    if fmt == "csv":
        return metrics.render_csv(table)
    judges = table.get_column("judge").unique(maintain_order=True).to_list() if table.height else []
    if len(judges) <= 1:
        return metrics.render_table(table, catalog)
    # Every judge's leaderboards apart, one after another, each under its judge's name.
    parts = []
    for j in judges:
        mine = table.filter(pl.col("judge").is_null() if j is None else pl.col("judge") == j)
        parts.append(f"judge: {j if j is not None else '(none)'}\n{metrics.render_table(mine, catalog)}")
    return "\n\n".join(parts)


def _panel_section(reading: RunReading) -> Agreement | None:
    """The HTML report's judge section: agreement and rank changes, when the run has 2+ judges."""
    found = run_agreement(reading.run_dir, resamples=200, reading=reading)
    return found if len(found.judges) > 1 else None


def _paired_primary(rows: pl.LazyFrame, table: pl.DataFrame, catalog: Catalog) -> pl.DataFrame:
    """Model-vs-model differences on each benchmark's ranking metric (each benchmark of `table`, the
    rows' metrics): which gaps are real."""
    import polars as pl

    from ifsweep import metrics

    parts = [
        metrics.paired_differences(rows, catalog, bench, catalog.primary(bench))
        for bench in sorted(set(table.get_column("benchmark").to_list()))
        if catalog.get(bench) is not None
    ]
    return pl.concat(parts) if parts else pl.DataFrame()


def metrics_of_files(paths: list[Path], *, fmt: str, ci: bool) -> str:
    """`ifsweep metrics`: verdict-row files' metrics; of a run directory, its reading's (every judge
    apart, the instances each plan selects, with planned and done): what `report --judge all` shows."""
    from ifsweep import metrics

    if len(paths) == 1 and paths[0].is_dir():
        reading, rows, _ = judged_rows(paths[0], "all")
        table, catalog = compute(rows, ci=ci)
        order = reading.model_order(table.get_column("model").unique().to_list())
        plain = "table" if fmt == "md" else fmt
        table = with_progress(in_model_order(table, order), reading)
        if plain == "json":
            table = _estimate_keys(table, partial_estimates(reading, rows, catalog))
        return _render_plain(table, catalog, plain)
    for p in paths:
        if not p.exists():
            raise UsageError(f"{p}: no such file")
    # Only the columns metrics read: a JSONL parse is most of the time, and it scales with columns.
    table, catalog = compute(metrics.read_verdicts(paths, columns=metrics.METRIC_COLUMNS), ci=ci)
    models = table.get_column("model").unique().to_list()
    table = in_model_order(table, sorted(models, key=natural_key))  # no config here: natural order
    return _render_plain(table, catalog, "table" if fmt == "md" else fmt)


def status_json(run_dir: Path) -> str:
    """`ifsweep status --json`: the per-(model, benchmark) rows, the partitions, whether the run is
    complete and its pairs in error by kind."""
    import orjson

    from ifsweep.runner.watch.status import status_report

    require_run_dir(run_dir)
    try:
        report = status_report(run_dir)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode()


def _open_batches(run_dir: Path, records: tuple[dict[str, Any], ...]) -> list[Any]:
    """The run's open Batch API batches; without a batch record, none, and the batch machinery (the
    provider clients among it, a tenth of status's start) is never imported."""
    if not records:
        return []
    from ifsweep.runner.engine.batches import open_batches

    return list(open_batches(run_dir, records))


def render_status(run_dir: Path) -> str:
    """The board (totals, one row per endpoint, the ETA while the sweep runs), then per model and
    benchmark what is planned, done, failed and spent, then a row per partition when there are any."""
    from ifsweep.runner.watch.board import table_lines
    from ifsweep.runner.watch.status import status_views

    require_run_dir(run_dir)
    try:
        whole, report = status_views(run_dir)
        if whole.totals.state == "complete" and not report.complete:
            # The summary's word against the reading of the files: the files decide (a damaged line,
            # a pair left undone), as `status --json` does.
            whole = dataclasses.replace(whole, totals=dataclasses.replace(whole.totals, state="incomplete"))
        board = table_lines(whole)
    except ValueError as e:  # a summary file that is not what a sweep writes: say which, and where
        raise UsageError(str(e)) from None
    rows = sorted(report.rows, key=lambda r: (natural_key(str(r["model"])), str(r["benchmark"])))
    head = f"{'model':24s} {'benchmark':14s} {'planned':>8s} {'done':>8s} {'errors':>7s} {'spent $':>10s}"
    # Of the prompt tokens paid for (the judge's included), the share providers served from their prefix
    # caches, and the dollars that saved against the full input price.
    head += f" {'cached':>7s} {'saved $':>9s}"
    lines = [*board, "", head, "-" * len(head)]
    for r in rows:
        planned = "?" if r.get("planned") is None else str(r["planned"])
        prompt = int(r.get("input_tokens") or 0)
        share = f"{int(r.get('cached_tokens') or 0) / prompt:.0%}" if prompt else "-"
        lines.append(
            f"{str(r['model'])[:24]:24s} {r['benchmark']!s:14s} {planned:>8s} {r['done']:8d} "
            f"{r['errors']:7d} {float(r['spent_usd']):10.4f} {share:>7s} "
            f"{float(r.get('cache_saved_usd') or 0.0):9.4f}"
        )
    if len(report.judges) > 1:  # a panel: each judge's progress (one judge is the board's judge row)
        lines += ["", *_judge_lines(report)]
    if report.shared is not None or any(p["partition"] for p in report.partitions):
        lines += ["", *_partition_lines(report)]
    beyond = [r for r in rows if r.get("beyond_plan")]
    if beyond:
        lines += [""] + [
            f"{r['model']} {r['benchmark']}: {r['beyond_plan']} more done, judged under an earlier, higher "
            "`limit` (not counted above; `ifsweep report` leaves them out)"
            for r in beyond
        ]
    batches = _open_batches(run_dir, report.batch_records)
    if batches:
        requests = sum(b.requests for b in batches)
        lines += [
            "",
            f"{len(batches)} Batch API batches open ({requests} requests): `ifsweep batches {run_dir}` "
            "shows them at the provider; `ifsweep run` collects them",
        ]
    if report.worst_case_usd > 0:  # calls a kill cut off: the next run starts from this spend
        from ifsweep.runner.watch.outcomes import spend_text

        lines += ["", spend_text(report.spent_usd, report.worst_case_usd)]
    if report.damaged:
        lines += ["", f"{len(report.damaged)} damaged shard lines (their records are not counted):"]
        lines += [f"  {d}" for d in report.damaged]
    return "\n".join([*lines, *_incomplete_lines(report)])


def _incomplete_lines(report: StatusReport) -> list[str]:
    """The line a run with pairs in error ended on, as `ifsweep run` printed it; for a run short of
    its plan without errors, how far it is (the reading's rule, as `status --json`'s `complete`)."""
    if not report.errors_by_kind and not report.complete:
        done = sum(int(r["done"]) for r in report.rows)
        planned = [r["planned"] for r in report.rows]
        of = f" of {sum(planned)} planned" if None not in planned else ""
        damage = f"; {len(report.damaged)} damaged shard lines (above)" if report.damaged else ""
        return [
            "",
            f"incomplete: {done}{of} (model, instance) pairs done{damage}; run the sweep again to finish",
        ]
    if not report.errors_by_kind:
        return []
    from ifsweep.runner.watch.outcomes import errors_message

    failed = sum(report.errors_by_kind.values())
    return ["", f"incomplete: {errors_message(failed, report.errors_by_kind)}"]


def _judge_lines(report: StatusReport) -> list[str]:
    """Per judge: the pairs it has judged (a verdict of its own each), its calls and its spend."""
    head = f"{'judge':24s} {'planned':>8s} {'judged':>8s} {'errors':>7s} {'calls':>8s} {'spent $':>10s}"
    lines = [head, "-" * len(head)]
    for j in report.judges:
        lines.append(
            f"{str(j['judge'])[:24]:24s} {_opt(j['planned']):>8s} {j['done']:8d} {j['errors']:7d} "
            f"{j['calls']:8d} {float(j['spent_usd']):10.4f}"
        )
    return lines


def _partition_lines(report: StatusReport) -> list[str]:
    """Per partition: its summary's progress and what its own shards spent; then the shared spend."""
    head = f"{'partition':10s} {'status':17s} {'planned':>8s} {'done':>8s} {'errors':>7s} {'spent $':>10s}"
    head += "  updated"
    lines = [head, "-" * len(head)]
    for p in report.partitions:
        when = time.strftime("%H:%M:%S", time.localtime(p["updated_at"])) if p["updated_at"] else "-"
        lines.append(
            f"{p['partition'] or p['writer']:10s} {p['status'] or 'no summary':17s} {_opt(p['planned']):>8s} "
            f"{_opt(p['done']):>8s} {_opt(p['errors']):>7s} {p['spent_usd']:10.4f}  {when}"
        )
    lines.append(f"spent by all partitions: ${report.spent_usd:.4f} (their shards)")
    if report.shared is not None:
        s = report.shared
        when = time.strftime("%H:%M:%S", time.localtime(s["updated_at"])) if s["updated_at"] else "?"
        lines.append(
            f"shared ledger at {s['coordinator']}: ${float(s['spent_usd'] or 0):.4f} (as seen at {when})"
        )
    return lines


def _opt(value: object) -> str:
    return "?" if value is None else str(value)
