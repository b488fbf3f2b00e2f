"""`ifsweep status`: how far a run is, per model and benchmark, from its files alone (no network).

One pass over every writer's shards. `spent_usd` sums every call record ever written, superseded ones
included, because an error that was retried was still paid for, and the worst case of every intent no
result resolves (a call a kill cut off), read by the one function a resumed run starts its budget
from (runner/store/intents.py SpendScan), so status shows the spend the next run starts at; `errors`
counts only the calls whose newest record is still an error (what a resume would retry). A
partitioned run also gets one row per partition (its summary file, and what its own shards spent) and
the spend every partition shares.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ifsweep.runner.store.current import PairPlan, PairProgress, RunReading, plans_of, reading_of, selects
from ifsweep.runner.store.intents import SpendScan
from ifsweep.runner.store.manifest import Manifest, ManifestError, read_manifest
from ifsweep.runner.store.shards import DamageReport, decode_record
from ifsweep.runner.watch.board import Board, Limits, Pace, natural_key
from ifsweep.runner.watch.eta import Outlook
from ifsweep.runner.watch.outcomes import SPEND_DECIMALS, Counters, SpendTally
from ifsweep.runner.watch.pace import LIMIT_WINDOW_S, RATE_WINDOW_S
from ifsweep.runner.watch.reading import Reading, SweepPlan, make_board, settled
from ifsweep.runner.watch.settling import stop_text
from ifsweep.runner.watch.tallied import (
    EveryRecord,
    Newest,
    calls_of,
    error_tally,
    every_record,
    held_winners,
    newest,
    newest_report,
    ordered,
    outside_plan,
)
from ifsweep.runner.watch.workload import Tally, Use

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "SUMMARY_NAME",
    "StatusReport",
    "status_board",
    "status_report",
    "status_table",
    "status_views",
    "summary_name",
]

SUMMARY_NAME = "summary.json"


_PARTITION_RE = re.compile(r"p(\d+)of(\d+)")


def summary_name(writer_id: str) -> str:
    """The summary file a writer keeps: `summary.json` for an unpartitioned run, `summary-p0of4.json`
    for partition 0 of 4. One file per writer, because partitions sharing a run dir would otherwise
    overwrite each other's plan and the last one to finish would decide `planned`."""
    return SUMMARY_NAME if writer_id == "main" else f"summary-{writer_id}.json"


def _writer_slot(path: Path) -> tuple[int, int] | None:
    """(partition count, index) a summary file speaks for; None for files no sweep writes."""
    if path.name == SUMMARY_NAME:
        return (1, 0)
    m = _PARTITION_RE.fullmatch(path.name[len("summary-") : -len(".json")])
    if m is None or not path.name.startswith("summary-"):
        return None
    index, count = int(m.group(1)), int(m.group(2))
    return (count, index) if 0 <= index < count else None


def _load_summary(path: Path) -> dict[str, Any]:
    try:
        summary = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(summary, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return summary


def _read_summary(path: Path) -> tuple[float, dict[tuple[str, str], int]]:
    summary = _load_summary(path)
    entries = summary.get("by_model", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: field 'by_model': expected a list")
    out: dict[tuple[str, str], int] = {}
    for i, item in enumerate(entries):
        if not isinstance(item, dict) or not isinstance(item.get("planned"), int):
            raise ValueError(f"{path}: by_model[{i}]: expected an object with an integer 'planned'")
        out[(str(item.get("model")), str(item.get("benchmark")))] = item["planned"]
    return _updated_at(summary), out


def _updated_at(summary: dict[str, Any]) -> float:
    """When a summary was written (0 when it does not say)."""
    t = summary.get("updated_at")
    return float(t) if isinstance(t, int | float) else 0.0


def _planned(run_dir: Path) -> dict[tuple[str, str], int]:
    """Planned pairs per (model, benchmark), from the newest complete set of summaries: the one
    summary.json of an unpartitioned run, or all n files of a run split in n partitions (each plans only
    its own keys, so their counts add up). An incomplete set (a partition that never started) says
    nothing reliable, so it gives {} and `planned` shows as unknown."""
    groups: dict[int, dict[int, Path]] = defaultdict(dict)
    for path in run_dir.glob("summary*.json"):
        slot = _writer_slot(path)
        if slot is not None:
            groups[slot[0]][slot[1]] = path
    best: tuple[float, dict[tuple[str, str], int]] | None = None
    for count, files in groups.items():
        if len(files) != count:
            continue
        total: dict[tuple[str, str], int] = defaultdict(int)
        newest = 0.0
        for path in files.values():
            updated, planned = _read_summary(path)
            newest = max(newest, updated)
            for group, n in planned.items():
                total[group] += n
        if best is None or newest > best[0]:
            best = (newest, dict(total))
    return {} if best is None else best[1]


@dataclass(frozen=True, slots=True)
class StatusReport:
    rows: list[dict[str, Any]]  # per (model, benchmark): see status_table
    # Per writer that left a summary or shards: {writer, partition ("i/n", or None for an unpartitioned
    # writer), status, planned, done, errors, spent_usd (its own shards), updated_at}.
    partitions: list[dict[str, Any]]
    spent_usd: float  # every call record of every writer, and the worst case of calls cut off
    # Pairs whose newest verdict is an error, by kind (runner/watch/outcomes.py ErrorTally.by_kind).
    errors_by_kind: dict[str, int]
    # The newest summary written under a coordinator: {coordinator, spent_usd (the shared ledger's
    # total as that process last saw it), updated_at}; None if no writer had one.
    shared: dict[str, Any] | None
    # Per judge that left a record: {judge, planned (pairs, None if unknown), done (error-free
    # verdicts), errors (verdicts with an error), calls (its distinct calls), spent_usd}.
    judges: list[dict[str, Any]] = field(default_factory=list)
    # Of spent_usd: the worst case charged for calls whose bill is unknown (cut off by a kill, or
    # cancelled or cut in flight); the rest is what the providers reported.
    worst_case_usd: float = 0.0
    # The run's reading (runner/store/current.py), whose rule decides `complete`; damaged shard lines.
    reading: RunReading | None = None
    damaged: tuple[str, ...] = ()
    # Batch mode's journal records, in shard order (runner/engine/batches.py open_batches reads them).
    batch_records: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)

    @property
    def paid_usd(self) -> float:
        return round(max(0.0, self.spent_usd - self.worst_case_usd), SPEND_DECIMALS)

    @property
    def complete(self) -> bool:
        """The reading's rule: every pair's plan done, none in error, no damaged line (False while a
        pair's `planned` is unknown)."""
        return (
            self.reading is not None
            and self.reading.complete
            and not self.errors_by_kind
            and all(r["planned"] is not None for r in self.rows)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "damaged": list(self.damaged),
            "errors_by_kind": self.errors_by_kind,
            "spent_usd": self.spent_usd,
            "paid_usd": self.paid_usd,
            "worst_case_usd": self.worst_case_usd,
            "rows": self.rows,
            "partitions": self.partitions,
            "shared": self.shared,
        }


def status_table(run_dir: Path, damaged: list[DamageReport] | None = None) -> list[dict[str, Any]]:
    """Rows {model, benchmark, planned, done, errors, spent_usd, judge_usd}, sorted by model then
    benchmark. `planned` is None when no complete set of summary files says (see `_planned`); `done`
    counts instances with a verdict whose rows hold no error; `spent_usd` is the model's answers plus
    the judge's calls on them, `judge_usd` the judge's part."""
    return status_report(run_dir, damaged).rows


def status_report(run_dir: Path, damaged: list[DamageReport] | None = None) -> StatusReport:
    """The per-model rows, the per-partition rows and the run's spend, from the shards' digest."""
    import polars as pl

    run_dir = Path(run_dir)
    damaged = [] if damaged is None else damaged
    parts = _digest(run_dir, damaged)
    every = every_record(run_dir, parts, time.time())
    return _report(run_dir, _manifest(run_dir), ordered(pl.concat(parts)), damaged, every)


def status_views(
    run_dir: Path, now: float | None = None, damaged: list[DamageReport] | None = None
) -> tuple[Board, StatusReport]:
    """`status_board` and `status_report` of a run directory from one reading of its shards' digest
    (what `ifsweep status` shows)."""
    import polars as pl

    run_dir = Path(run_dir)
    now = time.time() if now is None else now
    damaged = [] if damaged is None else damaged
    manifest = _manifest(run_dir)
    parts = _digest(run_dir, damaged)
    frame = ordered(pl.concat(parts))
    # Newest-per-key first: its group-by is the reading's largest, and what the allocator keeps of it
    # serves the part-at-a-time sums after it (the other way round, status peaked 20 MB higher).
    winners = held_winners(_winners(frame))
    every = every_record(run_dir, parts, now - RATE_WINDOW_S, now - LIMIT_WINDOW_S)
    whole = _report(run_dir, manifest, frame, damaged, every, winners)
    board = _board_scan(frame, now - RATE_WINDOW_S, plans_of(manifest), every, winners)
    # The board's pairs planned are the reading's too: a partition that never ran still counts.
    planned = {(r["model"], r["benchmark"]): r["planned"] for r in whole.rows if r["planned"] is not None}
    return _board(run_dir, now, board, manifest, planned), whole


def _manifest(run_dir: Path) -> Manifest | None:
    try:
        return read_manifest(run_dir)
    except ManifestError:
        return None


def _digest(run_dir: Path, damaged: list[DamageReport]) -> list[pl.LazyFrame]:
    """Every call, intent and verdict record of the run, a lazy plan per digest part in read order
    (runner/store/digest.py: only shard bytes no reader kept yet are parsed)."""
    from ifsweep.runner.store.digest import scan_digest

    parts, found = scan_digest(run_dir)
    damaged.extend(found)
    return parts


def _winners(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The newest record of each call key and verdict slot (intents and batches name no result)."""
    return newest(frame, ("generation", "judgment", "verdict"))


def _report(
    run_dir: Path,
    manifest: Manifest | None,
    frame: pl.LazyFrame,
    damaged: list[DamageReport],
    every: EveryRecord,
    winners: pl.LazyFrame | None = None,
) -> StatusReport:
    """`status_report` from the digest: spend by every record, errors and verdicts by the newest."""
    import polars as pl

    scans = every.scans
    winners = _winners(frame) if winners is None else winners
    found = newest_report(winners)
    spent, failed = every.spend, error_tally(winners)
    judge_spent: dict[str, float] = defaultdict(float)
    for scan in scans.values():
        for label, dollars in scan.by.items():
            judge_spent[label] += dollars
    # What is planned, done and complete: the one reading's rule (runner/store/current.py).
    reading = reading_of(run_dir, manifest, found.verdicts, damaged=damaged)
    judged = _judged(found, reading)
    summaries = _planned(run_dir)
    by_pair = {(p.model, p.benchmark): p for p in reading.progress}
    # A pair a summary plans that left no record yet (a run without a manifest) is a row too.
    groups = sorted(set(by_pair) | set(spent.groups) | set(found.errors) | set(summaries))
    rows = [
        _row(
            g,
            by_pair.get(g),
            reading.plans.get((g[1], g[0])),
            summaries,
            spent,
            found.errors,
            manifest is None,
        )
        for g in groups
    ]
    partitions, shared = _partitions(run_dir, {w: scan.total for w, scan in scans.items()})
    planned = [r["planned"] for r in rows]
    pairs = sum(planned) if planned and None not in planned else None
    judges = _judge_rows(judged, judge_spent, pairs)
    total = round(sum(scan.total for scan in scans.values()), SPEND_DECIMALS)
    worst = round(sum(scan.worst_case for scan in scans.values()), SPEND_DECIMALS)
    by_kind = failed.by_kind(
        lambda pair, judge: (
            reading.selects(pair[1], pair[0], pair[2]) and reading.needs(pair[1], pair[0], judge)
        )
    )
    shown = tuple(str(d) for d in damaged)
    lines = frame.filter(pl.col("kind") == "batch").select("line").collect().to_series()
    batches = tuple(decode_record(line.encode()) for line in lines)
    return StatusReport(rows, partitions, total, by_kind, shared, judges, worst, reading, shown, batches)


def _judged(found: Newest, reading: RunReading) -> dict[str, list[int]]:
    """judge -> [verdicts done, in error (of planned instances), distinct calls]."""
    import polars as pl

    judged: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    per_judge = found.verdicts.filter(selects(reading.plans) & pl.col("judge").is_not_null())
    ok, bad = (~pl.col("failed")).sum(), pl.col("failed").sum().alias("_bad")
    for judge, done, failed in per_judge.group_by("judge").agg(ok, bad).iter_rows():
        judged[judge][0] += done
        judged[judge][1] += failed
    for judge, n in found.judge_calls.items():
        judged[judge][2] += n
    return judged


def _judge_rows(
    judged: dict[str, list[int]], judge_spent: dict[str, float], pairs: int | None
) -> list[dict[str, object]]:
    """One row per judge: the pairs planned, its verdicts done and in error, its calls and spend."""
    return [
        {
            "judge": label,
            "planned": pairs,
            "done": judged[label][0],
            "errors": judged[label][1],
            "calls": judged[label][2],
            "spent_usd": round(judge_spent.get(label, 0.0), SPEND_DECIMALS),
        }
        for label in sorted(set(judged), key=natural_key)
    ]


def _row(
    group: tuple[str, str],
    progress: PairProgress | None,
    plan: PairPlan | None,
    summaries: dict[tuple[str, str], int],
    spent: SpendTally,
    errors: dict[tuple[str, str], int],
    unrecorded: bool = False,
) -> dict[str, Any]:
    """One (model, benchmark) row of `status`: planned and done as the reading counts them (a plan
    the manifest does not list, a run recorded before plans were kept, a sweep's directory without a
    manifest (`unrecorded`, with summaries): the summaries' count, None where they do not say; an
    import's directory, which has no summaries, plans what it imported)."""
    unknown = (
        progress is None
        or (plan is not None and plan.origin == "config" and plan.instances is None)
        or (unrecorded and bool(summaries))
    )
    planned = summaries.get(group) if unknown else progress.planned if progress is not None else None
    beyond = progress.beyond if progress is not None else 0
    return {
        "model": group[0],
        "benchmark": group[1],
        "planned": planned,
        "done": progress.done if progress is not None else 0,
        "errors": errors.get(group, 0),
        **spent.fields(group),
        **({"beyond_plan": beyond} if beyond else {}),
    }


def _partitions(
    run_dir: Path, by_writer: dict[str, float]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """A row per writer (from its summary file, if any, and its own spend), and the newest shared
    ledger figure."""
    summaries: dict[str, dict[str, Any]] = {}
    for path in run_dir.glob("summary*.json"):
        slot = _writer_slot(path)
        if slot is not None:
            count, index = slot
            summaries["main" if path.name == SUMMARY_NAME else f"p{index}of{count}"] = _load_summary(path)
    rows, shared = [], None
    for writer in sorted(set(summaries) | set(by_writer), key=_writer_order):
        summary = summaries.get(writer, {})
        m = _PARTITION_RE.fullmatch(writer)
        rows.append(
            {
                "writer": writer,
                "partition": f"{m.group(1)}/{m.group(2)}" if m else None,
                "status": summary.get("status"),
                "planned": summary.get("planned"),
                "done": summary.get("done"),
                "errors": summary.get("errors"),
                "spent_usd": round(by_writer.get(writer, 0.0), 10),
                "updated_at": summary.get("updated_at"),
            }
        )
        if summary.get("coordinator") and (shared is None or _newer(summary, shared)):
            shared = {k: summary.get(k) for k in ("coordinator", "spent_usd", "updated_at")}
    return rows, shared


def _writer_order(writer: str) -> tuple[int, int, str]:
    m = _PARTITION_RE.fullmatch(writer)
    return (int(m.group(2)), int(m.group(1)), writer) if m else (0, 0, writer)


def _newer(summary: dict[str, Any], than: dict[str, Any]) -> bool:
    return _updated_at(summary) > _updated_at(than)


# ---------------------------------------------------------------------------------------------- the board
# The same board as the live view (runner/watch/board.py): what was done from the shards, the plan's shape
# and the endpoints' limits from the summary the sweep rewrites every few seconds.

RUNNING_WITHIN_S = 10.0  # a running sweep's summary.json is never older than this (it is rewritten every 2 s)


@dataclass(slots=True)
class _Endpoint:
    """What the shards say of one endpoint label: every call record, those stamped within the rate
    window (`recent`), those within the last minute (`minute`: its rpm and tpm, counted, never scaled
    up from a few seconds past what the provider saw), and the 429s."""

    every: Use = field(default_factory=Use)
    recent: Use = field(default_factory=Use)
    minute: Use = field(default_factory=Use)
    rate_limited: int = 0


@dataclass(slots=True)
class _Scan:
    """What the board gathers from the shards' digest (`_board_scan`), then per pair (`finish`). A key
    written more than once (an error, then its retry) counts once, as its newest record says; every
    record counts for dollars, 429s and pace; `since`: where the recent pace window starts."""

    since: float
    endpoints: dict[str, _Endpoint] = field(default_factory=dict)
    # Per (model, benchmark), the counters the sweep keeps live, from the shards: distinct calls, their
    # tokens and unparsed replies; finished pairs as `done` and failed ones as `errors`.
    groups: dict[tuple[str, str], Counters] = field(default_factory=lambda: defaultdict(Counters))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # calls still in error
    judge_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # distinct, per judge
    # Per (model, benchmark), per judge: [current verdicts without error, in error] of planned instances.
    verdicts: dict[tuple[str, str], dict[str, list[int]]] = field(default_factory=dict)
    plans: dict[tuple[str, str], PairPlan] = field(default_factory=dict)
    spend: dict[str, SpendScan] = field(default_factory=dict)  # what a resumed run starts from

    def finish(self, panel: tuple[str, ...]) -> _Scan:
        """Each judge writes a verdict per pair: a pair is finished when each judge of the panel has
        (without a known panel, every judge that wrote one), failed when any of them failed."""
        for group, by_judge in self.verdicts.items():
            wanted = [by_judge.get(j, [0, 0]) for j in panel] if panel else list(by_judge.values())
            g = self.groups[group]
            g.errors = max(f for _, f in wanted)
            g.done = max(0, min(d + f for d, f in wanted) - g.errors)
        return self


def _board_scan(
    frame: pl.LazyFrame,
    since: float,
    plans: dict[tuple[str, str], PairPlan],
    every: EveryRecord,
    winners: pl.LazyFrame | None = None,
) -> _Scan:
    """The board's scan over the digest: each endpoint's calls (all, recent, last minute), each pair's
    distinct calls and tokens, the newest record per key; verdicts outside the plan left out (a slot
    is of one instance: leaving its records out before or after choosing the newest is the same)."""
    import polars as pl

    scan = _Scan(since=since, plans=plans, spend=every.scans)
    winners = _winners(frame) if winners is None else winners
    judged = pl.col("kind") == "judgment"
    by_label = pl.when(judged).then(pl.col("judge").fill_null("None")).otherwise(pl.col("model"))
    _endpoints(scan, every)
    # Each call key as it first appeared: the winners say where (`_first`).
    firsts = calls_of(winners).select("_first").collect().to_series()
    first = calls_of(frame).filter(pl.col("_ord").is_in(firsts.implode()))
    sums = (pl.col(c).sum() for c in ("input_tokens", "output_tokens", "unparsed"))
    pair = ("model", "benchmark", judged.alias("_j"), by_label.alias("_label"))
    for model, bench, is_judge, name, n, tokens_in, tokens_out, bad in (
        first.group_by(*pair, maintain_order=True).agg(pl.len(), *sums).collect().iter_rows()
    ):
        g = scan.groups[(model, bench)]
        c = g.judge if is_judge else g
        c.calls, c.input_tokens = c.calls + n, c.input_tokens + tokens_in
        c.output_tokens += tokens_out
        g.unparsed += int(bad) if is_judge else 0
        if is_judge:
            scan.judge_calls[name] += n
    for label, n in calls_of(winners).filter(pl.col("failed")).group_by(by_label).len().collect().iter_rows():
        scan.errors[label] = n
    # Only verdicts can lie outside the plan: the call queries above read every winner.
    inside = winners.filter(~outside_plan(plans))
    verdicts = inside.filter(pl.col("kind") == "verdict").group_by(
        "model", "benchmark", pl.col("judge").fill_null("None")
    )
    for model, bench, judge, ok, bad in (
        verdicts.agg((~pl.col("failed")).sum().alias("_ok"), pl.col("failed").sum().alias("_bad"))
        .collect()
        .iter_rows()
    ):
        scan.verdicts.setdefault((model, bench), {})[judge] = [int(ok), int(bad)]
    return scan


def _endpoints(scan: _Scan, every: EveryRecord) -> None:
    """Each endpoint's use: every call record, those within the rate window, those within the minute
    (tallied.every_record), in the order the endpoints first appear."""
    for label, e in sorted(every.endpoints.items(), key=lambda kv: kv[1].first):
        found = scan.endpoints[label] = _Endpoint(rate_limited=e.rate_limited)
        for use, (n, tokens, latency) in zip(
            (found.every, found.recent, found.minute), (e.every, e.recent, e.minute), strict=True
        ):
            use.add(n, tokens, latency)


def _progress_of(run_dir: Path) -> tuple[str, float, dict[str, Any]]:
    """(status, updated_at, progress fields) of an unpartitioned run's summary.json; ("", 0, {})
    without one."""
    path = run_dir / SUMMARY_NAME
    if not path.is_file():
        return "", 0.0, {}
    summary = _load_summary(path)
    progress = summary.get("progress", {})
    if not isinstance(progress, dict):
        raise ValueError(f"{path}: field 'progress': expected an object")
    return (
        str(summary.get("status", "")),
        _updated_at(summary),
        progress,
    )


def status_board(run_dir: Path, now: float | None = None, damaged: list[DamageReport] | None = None) -> Board:
    """The board of a run directory; with the ETA while its sweep runs (an unpartitioned one)."""
    run_dir = Path(run_dir)
    now = time.time() if now is None else now
    damaged = [] if damaged is None else damaged
    import polars as pl

    manifest = _manifest(run_dir)
    parts = _digest(run_dir, damaged)
    every = every_record(run_dir, parts, now - RATE_WINDOW_S, now - LIMIT_WINDOW_S)
    scan = _board_scan(ordered(pl.concat(parts)), now - RATE_WINDOW_S, plans_of(manifest), every)
    return _board(run_dir, now, scan, manifest)


def _board(
    run_dir: Path,
    now: float,
    gathered: _Scan,
    manifest: Manifest | None,
    planned: dict[tuple[str, str], int] | None = None,
) -> Board:
    state, updated, progress = _progress_of(run_dir)
    where = f"{run_dir / SUMMARY_NAME}: progress"
    plan = SweepPlan.from_json(where, progress) if progress else None
    running = state == "running" and now - updated < RUNNING_WITHIN_S
    if state == "running" and not running:
        state = "not running"
    scan = gathered.finish(plan.panel if plan is not None else _panel(manifest))
    planned = _planned(run_dir) if planned is None else planned
    reading = _reading(scan, planned, plan, progress, where, running, state or "not running")
    lanes = reading.lanes()
    seen = reading.outlook(lanes) if running else Outlook(None)
    board = make_board(reading, lanes, settled(seen, lanes, list(reading.made()), reading.judge))
    return _with_stopping(board, run_dir)


def _with_stopping(board: Board, run_dir: Path) -> Board:
    """The board with `[run] stop_when`'s lines, as summary.json last kept them (none without)."""
    path = run_dir / SUMMARY_NAME
    view = _load_summary(path).get("stop_when") if path.is_file() else None
    if not isinstance(view, dict):
        return board
    try:
        return dataclasses.replace(board, stopping=stop_text(view))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: field 'stop_when': {e}") from None


def _reading(
    scan: _Scan,
    planned: dict[tuple[str, str], int],
    plan: SweepPlan | None,
    progress: dict[str, Any],
    where: str,
    running: bool,
    state: str,
) -> Reading:
    recent = sum(e.recent.calls for e in scan.endpoints.values())
    recent_tokens = sum(e.recent.tokens for e in scan.endpoints.values())
    caps: dict[str | None, float | None] = {None: _cap(progress.get("cap_usd"), f"{where}.cap_usd")}
    caps.update(_numbers(progress, "caps", where))
    return Reading(
        tallies=_tallies(scan, planned),
        plan=plan,
        limits=_limits(scan, progress, where),
        pace={label: _pace(e, running) for label, e in scan.endpoints.items()},
        efficiency=_numbers(progress, "efficiency", where),
        spent=_spent(scan.spend, scan.endpoints),
        caps=caps,
        calls_per_s=recent / RATE_WINDOW_S if running else None,
        tokens_per_min=recent_tokens / RATE_WINDOW_S * 60 if running else None,
        pair_errors=sum(g.errors for g in scan.groups.values()),
        state="running" if running else state,
        judge_calls=dict(scan.judge_calls),
    )


def _spent(spend: dict[str, SpendScan], labels: Iterable[str]) -> dict[str | None, float]:
    """The run's spend (None) and each endpoint label's, as a resumed run's budget would start from."""
    scans = spend.values()
    out: dict[str | None, float] = {None: sum(s.total for s in scans)}
    out.update({label: sum(s.by.get(label, 0.0) for s in scans) for label in labels})
    return out


def _panel(manifest: Manifest | None) -> tuple[str, ...]:
    """The configured judges the manifest names (a run without summaries); () when it names none."""
    return manifest.judge_order if manifest is not None else ()


def _tallies(scan: _Scan, planned: dict[tuple[str, str], int]) -> dict[tuple[str, str], Tally]:
    tallies = {}
    for group in sorted(set(planned) | set(scan.groups), key=lambda g: (natural_key(g[0]), g[1])):
        g = scan.groups.get(group, Counters())
        tallies[group] = Tally.of(replace(g, planned=planned.get(group, g.done + g.errors)))
    return tallies


def _limits(scan: _Scan, progress: dict[str, Any], where: str) -> dict[str, Limits]:
    """Each endpoint's limits as the sweep last wrote them, with the 429s and errors of the shards."""
    found = progress.get("limits", {})
    if not isinstance(found, dict):
        raise ValueError(f"{where}.limits: expected an object")
    out = {}
    for label, obj in found.items():
        e = scan.endpoints.get(label, _Endpoint())
        lim = Limits.from_json(f"{where}.limits.{label}", obj)
        out[label] = replace(lim, rate_limited=e.rate_limited, errors=scan.errors.get(label, 0))
    return out


def _numbers(progress: dict[str, Any], name: str, where: str) -> dict[str, float]:
    found = progress.get(name, {})
    if not isinstance(found, dict):
        raise ValueError(f"{where}.{name}: expected an object")
    return {k: v for k, v in ((k, _cap(v, f"{where}.{name}.{k}")) for k, v in found.items()) if v is not None}


def _cap(v: object, where: str) -> float | None:
    if v is None:
        return None
    if not isinstance(v, int | float) or isinstance(v, bool):
        raise ValueError(f"{where}: expected a number or null, got {v!r}")
    return float(v)


def _pace(e: _Endpoint, running: bool) -> Pace:
    calls = e.recent if e.recent.calls else e.every
    latency = calls.latency_s / calls.calls if calls.calls else None
    if not running:
        return Pace(latency_s=latency)
    # Calls and tokens of the last LIMIT_WINDOW_S (a minute) as they were, as the live view counts them.
    return Pace(e.minute.calls, e.minute.tokens, latency)
