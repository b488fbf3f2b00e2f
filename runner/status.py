"""`ifsweep status`: how far a run is, per model and benchmark, from its files alone (no network).

One pass over every writer's shards. `spent_usd` sums every call record ever written, superseded ones
included, because an error that was retried was still paid for; `errors` counts only the calls whose
newest record is still an error (what a resume would retry).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from runner.shards import DamageReport, scan_shards

__all__ = ["SUMMARY_NAME", "status_table"]

SUMMARY_NAME = "summary.json"


def _planned(run_dir: Path) -> dict[tuple[str, str], int]:
    path = run_dir / SUMMARY_NAME
    try:
        summary = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    entries = summary.get("by_model", []) if isinstance(summary, dict) else []
    if not isinstance(entries, list):
        raise ValueError(f"{path}: field 'by_model': expected a list")
    out: dict[tuple[str, str], int] = {}
    for i, item in enumerate(entries):
        if not isinstance(item, dict) or not isinstance(item.get("planned"), int):
            raise ValueError(f"{path}: by_model[{i}]: expected an object with an integer 'planned'")
        out[(str(item.get("model")), str(item.get("benchmark")))] = item["planned"]
    return out


def status_table(run_dir: Path, damaged: list[DamageReport] | None = None) -> list[dict[str, Any]]:
    """Rows {model, benchmark, planned, done, errors, spent_usd}, sorted by model then benchmark.
    `planned` is None when RUN_DIR/summary.json does not say; `done` counts instances with a verdict
    whose rows hold no error."""
    run_dir = Path(run_dir)
    spent: dict[tuple[str, str], float] = defaultdict(float)
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
    return [
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
