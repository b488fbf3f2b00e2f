"""What a run directory holds, read the way the reports read it: verdicts per (model, benchmark,
instance, judge) without the fields that name the server or the moment, scores per judge, and a digest
of every file (a refused resume must leave the directory byte for byte as it was)."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import ifsweep
from ifsweep.runner.store.compact import latest_lines

Pair = tuple[str, str, str, str]  # model, benchmark, instance, judge
_VOLATILE = ("ts", "_c", "key", "gen_key")


def verdicts(run_dir: Path) -> dict[Pair, list[dict[str, Any]]]:
    """The newest verdict record of each key, grouped by pair: more than one per pair means a report
    would count that pair more than once."""
    out: dict[Pair, list[dict[str, Any]]] = defaultdict(list)
    if not (run_dir / "shards").is_dir():
        return out
    for line in latest_lines(run_dir, ("verdict",))["verdict"]:
        rec = json.loads(line)
        for name in _VOLATILE:
            rec.pop(name, None)
        out[(rec["model"], rec["benchmark"], rec["instance_id"], rec.get("judge") or "")].append(rec)
    return out


def scores(run_dir: Path, judge: str) -> list[dict[str, Any]]:
    """The scores a report shows for one judge, as sorted plain rows (the run name left out)."""
    frame = ifsweep.scores(run_dir, judge=judge)
    rows = [{k: v for k, v in row.items() if k != "run"} for row in frame.to_dicts()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def digest(run_dir: Path) -> dict[str, str]:
    """sha256 of every file under `run_dir`, by relative path."""
    if not run_dir.exists():
        return {}
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


def summary(run_dir: Path, partition: str | None) -> dict[str, Any] | None:
    name = "summary.json" if partition is None else f"summary-p{partition.replace('/', 'of')}.json"
    path = run_dir / name
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def secret_hits(paths: list[Path], texts: list[str], secrets: list[str]) -> list[str]:
    """Where any of `secrets` (or an Authorization header) appears: files under `paths`, or outputs."""
    needles = [s.encode() for s in secrets] + [b"Bearer "]
    hits = [f"output of process {i}" for i, t in enumerate(texts) if any(n.decode() in t for n in needles)]
    for root in paths:
        for f in sorted(root.rglob("*")) if root.exists() else []:
            if f.is_file() and any(n in f.read_bytes() for n in needles):
                hits.append(str(f))
    return hits
