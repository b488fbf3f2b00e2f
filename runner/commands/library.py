"""The Python API, `ifsweep.run` and friends: the `ifsweep` command's work without the command line.

Nothing here changes process-wide state: no signal handler, no garbage-collector or allocator setting
(those are the command's, runner/engine/process.py). A sweep is stopped by cancelling the task that awaits
`arun` (or by Ctrl-C during `run`): what was stored is kept and the same call resumes it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.from_thread import start_blocking_portal

from ifsweep.exports import LIBRARY_NAMES
from ifsweep.runner.commands.planning import Estimate as Estimate
from ifsweep.runner.commands.planning import estimate
from ifsweep.runner.commands.reporting import report as render_report
from ifsweep.runner.commands.rundir import compute, planned_rows, read_run_dir, require_run_dir
from ifsweep.runner.config import SweepConfig, check_output_dir, load_config, parse_config
from ifsweep.runner.engine.sweep import SweepResult as SweepResult
from ifsweep.runner.engine.sweep import check_ready, load_work, run_sweep
from ifsweep.runner.errors import UsageError
from ifsweep.runner.watch.status import status_table

if TYPE_CHECKING:
    import polars as pl

    from ifsweep import metrics
    from ifsweep.runner.engine.scheduler import Work

__all__ = list(LIBRARY_NAMES)  # the names `ifsweep` re-exports, listed once in api/exports.py

# A sweep config: the path of a TOML file, or the same tables as a dict.
ConfigSource = str | os.PathLike[str] | Mapping[str, Any]
# What a dict config is called in error messages; relative paths in it resolve against the current
# working directory (in a file, against the file's folder), and its default output_dir is
# runs/config dict.
DICT_CONFIG_NAME = "config dict"
REPORT_FORMATS = ("table", "json", "csv", "md", "html")


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One (model, benchmark) of a run directory, from its files alone. `planned` is None when the
    summaries do not say; `done` counts instances with an error-free verdict; `errors`, calls whose
    newest record is an error (what a resume retries); `spent_usd`, every call ever paid for: the
    model's answers and the judge's calls on them (the figure summary.json's row holds); `judge_usd`,
    the judge's part."""

    model: str
    benchmark: str
    planned: int | None
    done: int
    errors: int
    spent_usd: float
    # Prompt tokens paid for, those served from the providers' prefix caches, and the dollars saved.
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_saved_usd: float = 0.0
    judge_usd: float = 0.0


def sweep_config(config: ConfigSource, *, check_env: bool = True) -> SweepConfig:
    """The validated config; ConfigError names the file (or "config dict") and the key."""
    if isinstance(config, Mapping):
        return parse_config(config, Path.cwd() / DICT_CONFIG_NAME, check_env=check_env)
    return load_config(Path(config), check_env=check_env)


def _ready(config: ConfigSource) -> tuple[SweepConfig, Work]:
    cfg = sweep_config(config)
    check_output_dir(cfg)
    work = load_work(cfg)
    check_ready(cfg, work)
    return cfg, work


async def arun(
    config: ConfigSource,
    *,
    progress: str | None = None,
    partition: tuple[int, int] | None = None,
    retry_errors: bool | None = None,
) -> SweepResult:
    """Run (or resume) a sweep in the running event loop (asyncio or trio; a notebook's loop too).

    `progress`: auto | rich | plain | off (default: the config's run.progress); `partition`: (i, n)
    runs partition i of n (0-based) of the keys; `retry_errors`: override run.retry_errors. Raises
    ConfigError, DataError or IncompatibleRun before anything is spent. Cancelling the awaiting task
    stops the sweep: the shards are flushed, summary.json says "interrupted", and awaiting `arun` with
    the same config resumes without paying twice."""
    # Reading the data (and, for price checks, importing LiteLLM) takes seconds: not on the loop.
    cfg, work = await anyio.to_thread.run_sync(_ready, config)
    return await run_sweep(cfg, work, partition=partition, progress=progress, retry_errors=retry_errors)


def run(
    config: ConfigSource,
    *,
    progress: str | None = None,
    partition: tuple[int, int] | None = None,
    retry_errors: bool | None = None,
) -> SweepResult:
    """`arun`, blocking until the sweep ends. Works from any thread, and inside a running event loop
    (a notebook cell): the sweep runs on an event loop of its own, in a worker thread. Ctrl-C
    (KeyboardInterrupt in the calling thread) cancels the sweep, waits for it to flush, and re-raises."""
    sweep = partial(arun, config, progress=progress, partition=partition, retry_errors=retry_errors)
    with start_blocking_portal() as portal:
        future = portal.start_task_soon(sweep)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()  # the portal's exit waits for the cancelled sweep to finish
            raise


def plan(config: ConfigSource) -> list[Estimate]:
    """What the sweep would send and may cost, per (model, benchmark), before anything is spent (no
    API key needed). Each Estimate: calls and judge_calls, input_tokens, output_low / output_high
    tokens (short answers / every answer at max_tokens), cost_low / cost_high in dollars (None for an
    unknown price) and minutes_by_limits (what the model's own rpm / tpm imply; None without limits)."""
    cfg = sweep_config(config, check_env=False)
    return estimate(cfg, load_work(cfg))


def status(run_dir: str | os.PathLike[str]) -> list[StatusRow]:
    """How far a run directory is, per model and benchmark, from its files alone (no network)."""
    path = Path(run_dir)
    require_run_dir(path)
    return [
        StatusRow(
            model=str(r["model"]),
            benchmark=str(r["benchmark"]),
            planned=r["planned"],
            done=int(r["done"]),
            errors=int(r["errors"]),
            spent_usd=float(r["spent_usd"]),
            input_tokens=int(r["input_tokens"]),
            cached_tokens=int(r["cached_tokens"]),
            cache_saved_usd=float(r["cache_saved_usd"]),
            judge_usd=float(r["judge_usd"]),
        )
        for r in status_table(path)
    ]


def verdicts(run_dir: str | os.PathLike[str]) -> pl.DataFrame:
    """The current verdict rows of a run directory, of the instances its plans select (what `report`
    scores): one per constraint, in `ifsweep.metrics.VERDICT_SCHEMA`."""
    return planned_rows(read_run_dir(Path(run_dir))).collect()


def scores(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | pl.DataFrame | pl.LazyFrame,
    *,
    ci: bool = False,
    judge: str | None = "all",
    gold: str | os.PathLike[str] | None = None,
    correct: str | None = None,
) -> pl.DataFrame:
    """Every benchmark's metrics: one row per (benchmark, model, judge, metric, slice) with value and n
    (and with `ci`, 95% bootstrap bounds ci_low / ci_high; of a run directory also `planned` and
    `done`, the instances its plan selects and those judged). `source`: a run directory, verdict-row
    files (JSONL or Parquet), or verdict rows in a frame. `judge`: "all" (each judge's figures apart,
    never pooled), a judge's id, "majority" (the vote of the run's configured judges, or of every
    judge), or None (a run directory's first configured judge). `gold` (a gold file) and `correct`
    ("ppi" or "rg"), of a run directory: the headline "all" rows gain value_ppi, ci_low_ppi,
    ci_high_ppi, lambda, n_gold, value_rg, ci_low_rg, ci_high_rg and correction_note, as
    `ifsweep report --gold FILE --correct ppi|rg --format json` gives them. (Named `scores` because
    `ifsweep.metrics` is the metrics engine's package.)"""
    import polars as pl  # only for the calls that compute metrics

    from ifsweep import metrics
    from ifsweep.runner.commands.rundir import in_model_order, with_progress
    from ifsweep.runner.watch.board import natural_key

    if gold is not None or correct is not None:
        return _corrected_scores(source, ci=ci, judge=judge, gold=gold, correct=correct)
    if isinstance(source, pl.DataFrame | pl.LazyFrame):
        rows: pl.DataFrame | pl.LazyFrame = source
    elif isinstance(source, str | os.PathLike) and Path(source).is_dir():
        # The run's reading, as `report` takes it: the instances each plan selects, streamed from a
        # compacted run's Parquet.
        reading = read_run_dir(Path(source))
        chosen, _ = metrics.select_judges(planned_rows(reading), judge, reading.panel)
        table = compute(chosen, ci=ci)[0]
        # Models as the reports list them: the run's config order, else natural order (m2 before m10).
        order = reading.model_order(table.get_column("model").unique().to_list())
        return with_progress(in_model_order(table, order), reading)
    else:
        paths = [source] if isinstance(source, str | os.PathLike) else list(source)
        rows = metrics.read_verdicts([Path(p) for p in paths], columns=metrics.METRIC_COLUMNS)
    chosen, _ = metrics.select_judges(rows, judge)
    table = compute(chosen, ci=ci)[0]
    models = table.get_column("model").unique().to_list()
    return in_model_order(table, sorted(models, key=natural_key))  # no config: natural order


def _corrected_scores(
    source: object, *, ci: bool, judge: str | None, gold: str | os.PathLike[str] | None, correct: str | None
) -> pl.DataFrame:
    """`scores` of a run directory with the corrected columns (`report`'s reading and corrections)."""
    from ifsweep.runner.commands.audit import check_correction, report_audit
    from ifsweep.runner.commands.reporting import judged_rows, with_corrections
    from ifsweep.runner.commands.rundir import in_model_order, with_progress

    if not (isinstance(source, str | os.PathLike) and Path(source).is_dir()):
        raise UsageError("gold and correct: the source must be a run directory (the gold names its answers)")
    check_correction(None if gold is None else Path(gold), correct, "json")
    assert gold is not None and correct is not None
    reading, rows, _ = judged_rows(Path(source), judge)
    table = compute(rows, ci=ci)[0]
    order = reading.model_order(table.get_column("model").unique().to_list())
    table = with_progress(in_model_order(table, order), reading)
    return with_corrections(table, report_audit(Path(source), rows, Path(gold), correct, stats=False))


def agreement(
    run_dir: str | os.PathLike[str],
    *,
    judges: Iterable[str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> metrics.Agreement:
    """How much a run's judges agree (raw agreement, Cohen's kappa per pair, Fleiss' kappa for three
    or more, Krippendorff's alpha, each with a seeded bootstrap interval over instances; per benchmark
    and constraint type) and how the leaderboard moves between them (Kendall's tau-b, largest rank
    change). `judges`: default the configured ones. `.as_json()` gives the `ifsweep agreement
    --format json` document."""
    from ifsweep.runner.commands.agreement import run_agreement

    return run_agreement(
        Path(run_dir), judges=list(judges) if judges is not None else None, resamples=resamples, seed=seed
    )


def report(
    run_dir: str | os.PathLike[str],
    format: str = "table",
    *,
    ci: bool = False,
    out: str | os.PathLike[str] | None = None,
    judge: str | None = None,
    gold: str | os.PathLike[str] | None = None,
    correct: str | None = None,
) -> str:
    """A run directory's report: format table | json | csv | md | html (html always has intervals;
    md writes its charts beside `out`, or into the run directory). Written to `out` when given; the
    text is returned either way. `judge`: whose verdicts (an id, "majority", "all" for table / json /
    csv; default the first configured judge). `gold` and `correct` ("ppi" | "rg"): the corrected
    leaderboards of `ifsweep report --gold FILE --correct ...`."""
    if format not in REPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(REPORT_FORMATS)}, got {format!r}")
    return render_report(
        Path(run_dir),
        fmt=format,
        ci=ci,
        out=Path(out) if out is not None else None,
        judge=judge,
        gold=Path(gold) if gold is not None else None,
        correct=correct,
    )
