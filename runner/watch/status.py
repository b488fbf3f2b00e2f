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

import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import orjson

from ifsweep.runner.engine.pipeline import Counters
from ifsweep.runner.store.intents import INTENT, WriterSpend, run_spend
from ifsweep.runner.store.keys import verdict_slot
from ifsweep.runner.store.manifest import planned_instances
from ifsweep.runner.store.shards import DamageReport, ShardLine, scan_shards
from ifsweep.runner.watch.board import Board, Limits, Pace, natural_key
from ifsweep.runner.watch.eta import Outlook
from ifsweep.runner.watch.outcomes import SPEND_DECIMALS, ErrorTally, SpendTally, group_of
from ifsweep.runner.watch.pace import RATE_WINDOW_S
from ifsweep.runner.watch.reading import Reading, SweepPlan, make_board, settled
from ifsweep.runner.watch.workload import Tally, Use

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

    @property
    def paid_usd(self) -> float:
        return round(max(0.0, self.spent_usd - self.worst_case_usd), SPEND_DECIMALS)

    @property
    def complete(self) -> bool:
        """Every planned pair done and none in error (False while `planned` is unknown)."""
        return not self.errors_by_kind and all(
            r["planned"] is not None and r["done"] >= r["planned"] for r in self.rows
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
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
    """The per-model rows, the per-partition rows and the run's spend, from one pass over the shards."""
    run_dir = Path(run_dir)
    acc = _ReportScan(run_dir)
    _read(run_dir, damaged, acc)
    return acc.report()


def status_views(
    run_dir: Path, now: float | None = None, damaged: list[DamageReport] | None = None
) -> tuple[Board, StatusReport]:
    """`status_board` and `status_report` of a run directory from one pass over its shards (what
    `ifsweep status` shows: reading a large run's shards twice would double its wait)."""
    run_dir = Path(run_dir)
    now = time.time() if now is None else now
    plans = planned_instances(run_dir)
    board = _Scan(since=now - RATE_WINDOW_S, plans=plans, spend=run_spend(run_dir))
    report = _ReportScan(run_dir)
    _read(run_dir, damaged, board, report)
    return _board(run_dir, now, board), report.report()


class _Accumulator(Protocol):
    def add(self, sl: ShardLine, rec: dict[str, Any]) -> None: ...


def _read(run_dir: Path, damaged: list[DamageReport] | None, *into: _Accumulator) -> None:
    """Every call, intent and verdict record of the run, read and decoded once, handed to each of
    `into`."""
    for sl in scan_shards(run_dir, damaged, kinds=("generation", "judgment", "verdict", INTENT)):
        rec = sl.record()
        for acc in into:
            acc.add(sl, rec)


@dataclass(slots=True)
class _ReportScan:
    """What `status_report` gathers from the shards, record by record."""

    run_dir: Path
    spent: SpendTally = field(default_factory=SpendTally)
    failed: ErrorTally = field(default_factory=ErrorTally)
    spend: WriterSpend = field(default_factory=lambda: WriterSpend([]))
    # newest per key: (model, benchmark, is_error, instance_id or None for calls, judge or None)
    newest: dict[bytes, tuple[tuple[str, str], bool, str | None, str | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.spend = run_spend(self.run_dir)

    def add(self, sl: ShardLine, rec: dict[str, Any]) -> None:
        if sl.kind == INTENT:
            self.spend.add(sl.file_no, rec)
            return
        self.failed.add(rec)
        entry: tuple[tuple[str, str], bool, str | None, str | None]
        group = group_of(rec)
        judge = rec.get("judge") if sl.kind != "generation" else None
        judge = None if judge is None else str(judge)
        if sl.kind == "verdict":
            verdict_error = sl.is_error or any(r.get("status") == "error" for r in rec.get("rows") or [])
            entry = (group, verdict_error, str(rec.get("instance_id")), judge)
        else:
            self.spent.add(rec)
            self.spend.add(sl.file_no, rec)
            entry = (group, sl.is_error, None, judge)
        key = sl.key if sl.kind != "verdict" else bytes.fromhex(verdict_slot(rec))
        old = self.newest.get(key)
        if old is None or not entry[1] or old[1]:
            self.newest[key] = entry

    def report(self) -> StatusReport:
        run_dir, spent, scans = self.run_dir, self.spent, self.spend.finish()
        judge_spent: dict[str, float] = defaultdict(float)
        for scan in scans.values():
            for label, dollars in scan.by.items():
                judge_spent[label] += dollars
        # An instance is done when each configured judge has an error-free verdict of it (without a
        # known panel, when any judge has).
        verdicts: dict[tuple[tuple[str, str], str], set[str | None]] = defaultdict(set)
        errors: dict[tuple[str, str], int] = defaultdict(int)
        judged: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # judge -> [done, errors, calls]
        for group, is_error, instance, judge in self.newest.values():
            if instance is None:
                errors[group] += is_error
            elif not is_error:
                verdicts[(group, instance)].add(judge)
            if judge is not None:
                judged[judge][2 if instance is None else 1 if is_error else 0] += 1
        panel = set(_panel(run_dir))
        done: dict[tuple[str, str], set[str]] = defaultdict(set)
        for (group, instance), by in verdicts.items():
            if not panel or panel <= by:
                done[group].add(instance)
        beyond = _beyond_plan(done, planned_instances(run_dir))
        planned = _planned(run_dir)
        groups = sorted(set(planned) | set(spent.groups) | set(done) | set(errors))
        rows = [
            {
                "model": m,
                "benchmark": b,
                "planned": planned.get((m, b)),
                "done": len(done.get((m, b), ())),
                "errors": errors.get((m, b), 0),
                **spent.fields((m, b)),
                **({"beyond_plan": beyond[(m, b)]} if beyond.get((m, b)) else {}),
            }
            for m, b in groups
        ]
        partitions, shared = _partitions(run_dir, {w: scan.total for w, scan in scans.items()})
        pairs = sum(planned.values()) if planned else None
        judges = [
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
        total = round(sum(scan.total for scan in scans.values()), SPEND_DECIMALS)
        worst = round(sum(scan.worst_case for scan in scans.values()), SPEND_DECIMALS)
        return StatusReport(rows, partitions, total, self.failed.by_kind(), shared, judges, worst)


def _beyond_plan(
    done: dict[tuple[str, str], set[str]], plans: dict[str, frozenset[str]]
) -> dict[tuple[str, str], int]:
    """Takes out of `done` the instances the newest config no longer selects (a `limit` lowered after
    they were judged), and counts them per (model, benchmark): done never exceeds planned, and the
    extra verdicts are reported apart."""
    beyond: dict[tuple[str, str], int] = {}
    for group, instances in done.items():
        plan = plans.get(group[1])
        if plan is not None and not instances <= plan:
            beyond[group] = len(instances - plan)
            instances &= plan
    return beyond


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
    window (`recent`), and the 429s."""

    every: Use = field(default_factory=Use)
    recent: Use = field(default_factory=Use)
    rate_limited: int = 0


@dataclass(slots=True)
class _Scan:
    """What the board gathers from the shards, record by record (`add`), then per pair (`finish`). A
    key written more than once (an error, then its retry) counts once, as its newest record says;
    every record counts for dollars, 429s and pace; `since`: where the recent pace window starts."""

    since: float
    endpoints: dict[str, _Endpoint] = field(default_factory=dict)
    # Per (model, benchmark), the counters the sweep keeps live, from the shards: distinct calls, their
    # tokens and unparsed replies; finished pairs as `done` and failed ones as `errors`.
    groups: dict[tuple[str, str], Counters] = field(default_factory=lambda: defaultdict(Counters))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # calls still in error
    judge_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # distinct, per judge
    # key -> (endpoint label, group, error)
    newest: dict[bytes, tuple[str, tuple[str, str], bool]] = field(default_factory=dict)
    plans: dict[str, frozenset[str]] = field(default_factory=dict)  # instances planned, by benchmark
    spend: WriterSpend = field(default_factory=lambda: WriterSpend([]))  # what a resumed run starts from

    def add(self, sl: ShardLine, rec: dict[str, Any]) -> None:
        if sl.kind != "verdict":
            self.spend.add(sl.file_no, rec)
        if sl.kind == INTENT:
            return
        newest = self.newest
        group = (str(rec.get("model")), str(rec.get("benchmark")))
        label = str(rec.get("judge")) if sl.kind == "judgment" else group[0]
        if sl.kind == "verdict" and _outside(self.plans, group[1], rec):
            return  # judged under a higher `limit`: not a pair of this plan (status lists it apart)
        if sl.kind == "verdict":
            failed = sl.is_error or any(r.get("status") == "error" for r in rec.get("rows") or [])
            label = "verdict:" + str(rec.get("judge"))
        else:
            failed = sl.is_error
            _count_call(self, label, group, sl.kind, rec, self.since, first=sl.key not in newest)
            if sl.kind == "judgment" and sl.key not in newest:
                self.judge_calls[label] += 1
        key = sl.key if sl.kind != "verdict" else bytes.fromhex(verdict_slot(rec))
        old = newest.get(key)
        if old is None or not failed or old[2]:
            newest[key] = (label, group, failed)

    def finish(self, panel: tuple[str, ...]) -> _Scan:
        """Each judge writes a verdict per pair: a pair is finished when each judge of the panel has
        (without a known panel, every judge that wrote one), failed when any of them failed."""
        verdicts: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
        for label, group, failed in self.newest.values():
            if label.startswith("verdict:"):
                counts = verdicts[group].setdefault(label[len("verdict:") :], [0, 0])
                counts[failed] += 1
            elif failed:
                self.errors[label] += 1
        for group, by_judge in verdicts.items():
            wanted = [by_judge.get(j, [0, 0]) for j in panel] if panel else list(by_judge.values())
            g = self.groups[group]
            g.errors = max(f for _, f in wanted)
            g.done = max(0, min(d + f for d, f in wanted) - g.errors)
        return self


def _outside(plans: dict[str, frozenset[str]], bench: str, rec: dict[str, Any]) -> bool:
    plan = plans.get(bench)
    return plan is not None and str(rec.get("instance_id")) not in plan


def _number(rec: dict[str, Any], name: str) -> float:
    v = rec.get(name)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def _count_call(
    out: _Scan, label: str, group: tuple[str, str], kind: str, rec: dict[str, Any], since: float, first: bool
) -> None:
    e = out.endpoints.setdefault(label, _Endpoint())
    input_tokens, output_tokens = int(_number(rec, "input_tokens")), int(_number(rec, "output_tokens"))
    latency_s = _number(rec, "latency_s")
    e.every.add(1, input_tokens + output_tokens, latency_s)
    e.rate_limited += int(_number(rec, "rate_limited"))
    if _number(rec, "ts") >= since:
        e.recent.add(1, input_tokens + output_tokens, latency_s)
    if not first:
        return
    g = out.groups[group]
    if kind == "generation":
        g.calls += 1
        g.input_tokens += input_tokens
        g.output_tokens += output_tokens
    else:
        g.judge.calls += 1
        g.judge.input_tokens += input_tokens
        g.judge.output_tokens += output_tokens
        g.unparsed += rec.get("parse") == "unparsed"


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
    scan = _Scan(since=now - RATE_WINDOW_S, plans=planned_instances(run_dir), spend=run_spend(run_dir))
    _read(run_dir, damaged, scan)
    return _board(run_dir, now, scan)


def _board(run_dir: Path, now: float, gathered: _Scan) -> Board:
    state, updated, progress = _progress_of(run_dir)
    where = f"{run_dir / SUMMARY_NAME}: progress"
    plan = SweepPlan.from_json(where, progress) if progress else None
    running = state == "running" and now - updated < RUNNING_WITHIN_S
    if state == "running" and not running:
        state = "not running"
    scan = gathered.finish(plan.panel if plan is not None else _panel(run_dir))
    reading = _reading(scan, _planned(run_dir), plan, progress, where, running, state or "not running")
    lanes = reading.lanes()
    seen = reading.outlook(lanes) if running else Outlook(None)
    return make_board(reading, lanes, settled(seen, lanes, list(reading.made()), reading.judge))


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


def _spent(spend: WriterSpend, labels: Iterable[str]) -> dict[str | None, float]:
    """The run's spend (None) and each endpoint label's, as a resumed run's budget would start from."""
    scans = spend.finish().values()
    out: dict[str | None, float] = {None: sum(s.total for s in scans)}
    out.update({label: sum(s.by.get(label, 0.0) for s in scans) for label in labels})
    return out


def _panel(run_dir: Path) -> tuple[str, ...]:
    """The configured judges the manifest names (a run without summaries); () when it names none."""
    from ifsweep.runner.store.manifest import ManifestError, read_manifest

    try:
        manifest = read_manifest(run_dir)
    except ManifestError:
        return ()
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
    return Pace(
        round(e.recent.calls / RATE_WINDOW_S * 60), round(e.recent.tokens / RATE_WINDOW_S * 60), latency
    )
