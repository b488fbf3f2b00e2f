"""`ifsweep status`: how far a run is, per model and benchmark, from its files alone (no network).

One pass over every writer's shards. `spent_usd` sums every call record ever written, superseded ones
included, because an error that was retried was still paid for; `errors` counts only the calls whose
newest record is still an error (what a resume would retry). A partitioned run also gets one row per
partition (its summary file, and what its own shards spent) and the spend every partition shares.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ifsweep.runner.shards import DamageReport, scan_shards, shard_files

__all__ = ["SUMMARY_NAME", "StatusReport", "status_report", "status_table", "summary_name"]

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
    updated = summary.get("updated_at", 0.0)
    return (float(updated) if isinstance(updated, int | float) else 0.0), out


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
    spent_usd: float  # every call record of every writer
    # The newest summary written under a coordinator: {coordinator, spent_usd (the shared ledger's
    # total as that process last saw it), updated_at}; None if no writer had one.
    shared: dict[str, Any] | None


def status_table(run_dir: Path, damaged: list[DamageReport] | None = None) -> list[dict[str, Any]]:
    """Rows {model, benchmark, planned, done, errors, spent_usd}, sorted by model then benchmark.
    `planned` is None when no complete set of summary files says (see `_planned`); `done` counts
    instances with a verdict whose rows hold no error."""
    return status_report(run_dir, damaged).rows


def status_report(run_dir: Path, damaged: list[DamageReport] | None = None) -> StatusReport:
    """The per-model rows, the per-partition rows and the run's spend, from one pass over the shards."""
    run_dir = Path(run_dir)
    spent: dict[tuple[str, str], float] = defaultdict(float)
    writers = [writer for writer, _, _ in shard_files(run_dir)]
    by_writer: dict[str, float] = defaultdict(float)
    # newest per key: (model, benchmark, is_error, instance_id or None for calls)
    newest: dict[bytes, tuple[tuple[str, str], bool, str | None]] = {}
    for sl in scan_shards(run_dir, damaged, kinds=("generation", "judgment", "verdict")):
        rec = sl.record()
        entry: tuple[tuple[str, str], bool, str | None]
        group = (str(rec.get("model")), str(rec.get("benchmark")))
        if sl.kind == "verdict":
            verdict_error = sl.is_error or any(r.get("status") == "error" for r in rec.get("rows") or [])
            entry = (group, verdict_error, str(rec.get("instance_id")))
        else:
            cost = rec.get("cost_usd")
            if isinstance(cost, int | float):
                spent[group] += float(cost)
                by_writer[writers[sl.file_no]] += float(cost)
            entry = (group, sl.is_error, None)
        old = newest.get(sl.key)
        if old is None or not entry[1] or old[1]:
            newest[sl.key] = entry
    done: dict[tuple[str, str], set[str]] = defaultdict(set)
    errors: dict[tuple[str, str], int] = defaultdict(int)
    for group, is_error, instance in newest.values():
        if instance is None:
            errors[group] += is_error
        elif not is_error:
            done[group].add(instance)
    planned = _planned(run_dir)
    groups = sorted(set(planned) | set(spent) | set(done) | set(errors))
    rows = [
        {
            "model": m,
            "benchmark": b,
            "planned": planned.get((m, b)),
            "done": len(done.get((m, b), ())),
            "errors": errors.get((m, b), 0),
            "spent_usd": round(spent.get((m, b), 0.0), 10),
        }
        for m, b in groups
    ]
    partitions, shared = _partitions(run_dir, by_writer)
    return StatusReport(rows, partitions, round(sum(by_writer.values()), 10), shared)


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
    def when(d: dict[str, Any]) -> float:
        t = d.get("updated_at")
        return float(t) if isinstance(t, int | float) else 0.0

    return when(summary) > when(than)
