"""Reading a run for reports: newest record per key, as Polars frames, from Parquet or from the shards.

`compact` writes RUN_DIR/compact/{generations,judgments,verdicts}.parquet plus state.json, the list of
shard files (name, size, mtime) they were built from. Readers use the Parquet only while that list
still matches the shards exactly, so a report never shows stale numbers; otherwise they stream the
shards, which gives the same frame, only slower.

Checksums are verified line by line in Python (runner.store.shards), then the chosen lines go to Polars'
NDJSON reader in one buffer, which parses and types them far faster than building rows in Python.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from ifsweep.metrics import VERDICT_SCHEMA
from ifsweep.runner.store.digest import scan_verdicts, verdict_records
from ifsweep.runner.store.shards import DamageReport, scan_shards, shard_files

__all__ = [
    "CALL_COLUMNS",
    "COMPACT_DIR",
    "VERDICT_COLUMNS",
    "CompactResult",
    "compact",
    "held_rows",
    "latest_batches",
    "latest_lines",
    "load_call_records",
    "load_verdict_rows",
    "scan_verdict_rows",
    "verdict_rows",
    "without_audit",
]

COMPACT_DIR = "compact"
_STATE = "state.json"

# One current verdict per slot (runner.store.keys.verdict_key). A slot's key is its identity, so the
# newest record per key is already one per slot; a directory written when verdict keys also held what
# the verdict depends on may have several under old keys, of which the newest is the current one.
_SLOT = ["benchmark", "model", "judge", "scoring", "instance_id"]
# One row per constraint: the metrics package's verdict schema (its `scoring` says which mode decided a
# row: a run may score one benchmark in two modes over time, and CFBench's reference mode rounds).
VERDICT_COLUMNS: dict[str, pl.DataType] = dict(VERDICT_SCHEMA)
CALL_COLUMNS: dict[str, pl.DataType] = {
    "kind": pl.String(),
    "key": pl.String(),
    "model": pl.String(),
    "judge": pl.String(),
    "benchmark": pl.String(),
    "instance_id": pl.String(),
    "task_idx": pl.Int64(),
    "turn_idx": pl.Int64(),
    "ask": pl.Int64(),
    "status": pl.String(),
    "parse": pl.String(),
    "text": pl.String(),
    "finish_reason": pl.String(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "cost_usd": pl.Float64(),
    "cached_tokens": pl.Int64(),  # null in records written before prefix caching was recorded
    "cache_saved_usd": pl.Float64(),
    "latency_s": pl.Float64(),
    "attempts": pl.Int64(),
    "rate_limited": pl.Int64(),
    "error_kind": pl.String(),
    "error_message": pl.String(),
    "path": pl.String(),
    "ts": pl.Float64(),
}


@dataclass(frozen=True, slots=True)
class CompactResult:
    directory: Path
    generations: int
    judgments: int
    verdicts: int  # verdict records
    verdict_rows: int  # one per constraint
    damaged: list[DamageReport] = field(default_factory=list)


def latest_lines(
    run_dir: Path, kinds: Iterable[str], damaged: list[DamageReport] | None = None
) -> dict[str, list[bytes]]:
    """The newest valid line per key of each kind, merged over every writer (same rule as RunStore:
    later wins, but an error never shadows a success)."""
    wanted = set(kinds)
    best: dict[bytes, tuple[str, bytes, bool]] = {}
    get = best.get
    for sl in scan_shards(run_dir, damaged, kinds=wanted):
        old = get(sl.key)
        if old is None or not sl.is_error or old[2]:
            best[sl.key] = (sl.kind, sl.line, sl.is_error)
    out: dict[str, list[bytes]] = {k: [] for k in wanted}
    for kind, line, _ in best.values():
        out[kind].append(line)
    return out


def _frame(lines: list[bytes], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    if not lines:
        return pl.DataFrame(schema=schema)
    buf = io.BytesIO(b"\n".join(lines))
    return pl.read_ndjson(buf, schema=schema)


def _verdict_rows(lines: list[bytes], run: str) -> pl.DataFrame:
    return verdict_rows_of(verdict_records(lines), run)


def verdict_rows_of(records: pl.DataFrame, run: str, at: pl.Series | None = None) -> pl.DataFrame:
    """Verdict records (newest per key; `at`: the row numbers of those, in order, `records` whole
    when None) as verdict rows: the newest of each slot, one row per constraint (VERDICT_COLUMNS).
    The order is decided over the slot and `ts` columns alone, then the records are taken once: each
    sort of the records themselves copied their nested rows (150 MB at full size)."""
    pick = _newest_slots(records.select(*_SLOT, "ts").with_row_index("_i"), at)
    # One chunk first: a gather across the digest's parts' chunks copied their nested rows' strings
    # over again (160 MB at full size, against 100 MB rechunked).
    return _exploded(records.rechunk()[pick].lazy(), run).collect()


def _newest_slots(narrow: pl.DataFrame, at: pl.Series | None) -> pl.Series:
    """Of verdict records (their slot columns, `ts` and row number `_i`; `at`: the rows newest per key,
    all when None), the `_i` of the newest of each slot, in the order the slots first appear."""
    narrow = narrow if at is None else narrow[at]
    return narrow.sort("ts", nulls_last=False).unique(_SLOT, keep="last", maintain_order=True)["_i"]


def _exploded(records: pl.LazyFrame, run: str) -> pl.LazyFrame:
    """Verdict records as verdict rows, one a constraint (VERDICT_COLUMNS)."""
    rows = (
        records.filter(pl.col("rows").list.len() > 0)
        .explode("rows")
        .unnest("rows")
        .with_columns(pl.lit(run, pl.String).alias("run"))
    )
    return rows.select([pl.col(c).cast(t) for c, t in VERDICT_COLUMNS.items()])


def _digest_rows(run_dir: Path, run: str, damaged: list[DamageReport] | None) -> pl.DataFrame:
    """The shards' newest verdicts as verdict rows, from the digest a part at a time: which record is
    newest is decided over every part's narrow columns, then each part's chosen records are exploded
    on their own, in read order. Reading every part's records whole, then taking and exploding the
    chosen ones, held them twice over: report peaked at 350-360 MB on the 40-model run, 310-320 MB
    this way (issue 35)."""
    parts, found = scan_verdicts(run_dir)
    if damaged is not None:
        damaged.extend(found)
    at = pl.col("file_no") * (1 << 40) + pl.col("offset")  # a record's place: unique in the run
    narrow = (
        pl.concat([p.select("key", "is_error", "file_no", "offset", *_SLOT, "ts") for p in parts])
        .collect()
        .with_row_index("_i")
    )
    pick = _newest_slots(narrow.select(*_SLOT, "ts", "_i"), newest_per_key(narrow))
    chosen = narrow[pick].select(at).to_series()
    del narrow
    # A filter, not a join: it keeps each part's records in their order.
    return pl.concat(
        [_as_held(_exploded(p.filter(at.is_in(chosen.implode())), run)).collect() for p in parts]
    )


# Verdict rows held in memory (read from the shards) keep their text columns as categories: a string
# view costs 16 bytes a row, a category 4 (plus each distinct value once), and these columns repeat a
# few values over many rows (on the 40-model run 13 columns of 588,880 rows: report's peak 324-329 ->
# 254-271 MB, 0.2-0.3 s slower: docs/design/reading.md).
_TEXT = [c for c, t in VERDICT_COLUMNS.items() if t == pl.String]


def _as_held(rows: pl.LazyFrame) -> pl.LazyFrame:
    return rows.with_columns(pl.col(_TEXT).cast(pl.Categorical))


def held_rows(frame: pl.DataFrame) -> pl.LazyFrame:
    """A plan over held verdict rows (`verdict_rows`' frame) in VERDICT_COLUMNS' types: a query casts
    only the columns it reads, only while it runs."""
    return frame.lazy().with_columns(pl.col(_TEXT).cast(pl.String))


def newest_per_key(records: pl.DataFrame) -> pl.Series:
    """`latest_lines`' rule over records in read order (columns `key`, `is_error`, `file_no`,
    `offset`): per key the newest success, else the newest error; the row numbers of those, in the
    order keys first appear."""
    ordered = records.select(
        "key", "is_error", (pl.col("file_no") * (1 << 40) + pl.col("offset")).alias("_ord")
    ).with_row_index("_i")
    ok = pl.col("_ord").filter(~pl.col("is_error")).max().over("key")
    win = pl.coalesce(ok, pl.col("_ord").max().over("key"))
    first = pl.col("_ord").min().over("key")
    return ordered.filter(pl.col("_ord") == win).with_columns(first.alias("_first")).sort("_first")["_i"]


def _calls(kind: str, lines: list[bytes]) -> pl.DataFrame:
    """Call records of one kind (CALL_COLUMNS)."""
    schema = {k: v for k, v in CALL_COLUMNS.items() if k != "kind"}
    return (
        _frame(lines, schema).with_columns(pl.lit(kind, pl.String).alias("kind")).select(list(CALL_COLUMNS))
    )


def _call_records(gens: list[bytes], judgments: list[bytes]) -> pl.DataFrame:
    return pl.concat([_calls("generation", gens), _calls("judgment", judgments)])


def _shard_state(run_dir: Path) -> list[list[Any]]:
    state = []
    for _, _, p in shard_files(run_dir):
        st = p.stat()
        state.append([p.name, st.st_size, st.st_mtime_ns])
    return state


# Lines per Parquet part while compacting: about 100 MB of verdict lines held at a time.
_BATCH_LINES = 100_000
_KINDS = ("generation", "judgment", "verdict")


def _winners(run_dir: Path, kinds: Iterable[str], damaged: list[DamageReport]) -> set[tuple[int, int]]:
    """Where the newest valid line per key is, (file number, offset), by `latest_lines`' rule."""
    best: dict[bytes, tuple[int, int, bool]] = {}
    get = best.get
    for sl in scan_shards(run_dir, damaged, kinds=set(kinds)):
        old = get(sl.key)
        if old is None or not sl.is_error or old[2]:
            best[sl.key] = (sl.file_no, sl.offset, sl.is_error)
    return {(f, o) for f, o, _ in best.values()}


def latest_batches(
    run_dir: Path, kinds: Iterable[str], damaged: list[DamageReport], size: int = _BATCH_LINES
) -> Iterator[tuple[str, list[bytes]]]:
    """`latest_lines` in batches of at most `size` lines of one kind: a first pass finds where each
    key's newest line is, a second reads the shards again and hands those lines on, so memory holds
    the locations and one batch, never every line. Lines a writer appends between the passes are not
    among them (then `compact` writes no freshness state)."""
    chosen = _winners(run_dir, kinds, damaged)
    pending: dict[str, list[bytes]] = {k: [] for k in kinds}
    for sl in scan_shards(run_dir, [], kinds=set(kinds)):
        if (sl.file_no, sl.offset) in chosen:
            mine = pending[sl.kind]
            mine.append(sl.line)
            if len(mine) >= size:
                yield sl.kind, mine
                pending[sl.kind] = []
    yield from ((k, lines) for k, lines in pending.items() if lines)


def _part(kind: str, lines: list[bytes], run: str) -> pl.DataFrame:
    return _verdict_rows(lines, run) if kind == "verdict" else _calls(kind, lines)


def _empty(kind: str) -> pl.DataFrame:
    return pl.DataFrame(schema=VERDICT_COLUMNS if kind == "verdict" else CALL_COLUMNS)


_FILES = {"generation": "generations.parquet", "judgment": "judgments.parquet", "verdict": "verdicts.parquet"}


def compact(run_dir: Path, *, run: str | None = None) -> CompactResult:
    """Write the newest record per key of each kind to RUN_DIR/compact/*.parquet, in batches: each
    batch a Parquet part, the parts then copied into one file by Polars' streaming engine."""
    run_dir = Path(run_dir)
    name = run or _run_name(run_dir)
    before = _shard_state(run_dir)
    damaged: list[DamageReport] = []
    out = run_dir / COMPACT_DIR
    out.mkdir(parents=True, exist_ok=True)
    # Remove the freshness proof first: a crash midway must not leave new Parquet vouched for by old state.
    (out / _STATE).unlink(missing_ok=True)
    parts = out / f".parts.{os.getpid()}"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir()
    counts = dict.fromkeys(_KINDS, 0)
    rows = 0
    try:
        for kind, lines in latest_batches(run_dir, _KINDS, damaged):
            frame = _part(kind, lines, name)
            frame.write_parquet(parts / f"{kind}-{counts[kind]:012d}.parquet")
            counts[kind] += len(lines)
            rows += frame.height if kind == "verdict" else 0
        for kind, file in _FILES.items():
            found = sorted(parts.glob(f"{kind}-*.parquet"))
            tmp = out / f".{file}.{os.getpid()}.tmp"
            if found:
                pl.scan_parquet(found).sink_parquet(tmp)
            else:
                _empty(kind).write_parquet(tmp)
            os.replace(tmp, out / file)
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    # A writer that appended while we read makes the state differ: then no state, and readers stream.
    if _shard_state(run_dir) == before:
        (out / _STATE).write_bytes(orjson.dumps({"shards": before, "run": name}))
    return CompactResult(
        directory=out,
        generations=counts["generation"],
        judgments=counts["judgment"],
        verdicts=counts["verdict"],
        verdict_rows=rows,
        damaged=damaged,
    )


def _run_name(run_dir: Path) -> str:
    return run_dir.resolve().name


def _fresh(run_dir: Path, run: str) -> bool:
    try:
        state = orjson.loads((run_dir / COMPACT_DIR / _STATE).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return False
    return (
        isinstance(state, dict) and state.get("run") == run and state.get("shards") == _shard_state(run_dir)
    )


def load_verdict_rows(run_dir: Path, *, run: str | None = None, audit: bool = False) -> pl.DataFrame:
    """Verdict rows (VERDICT_COLUMNS), newest verdict per key; from Parquet when it is current."""
    return scan_verdict_rows(run_dir, run=run, audit=audit).collect()


def scan_verdict_rows(
    run_dir: Path, *, run: str | None = None, damaged: list[DamageReport] | None = None, audit: bool = False
) -> pl.LazyFrame:
    """`load_verdict_rows` as a lazy plan: over a current Parquet file a scan, so metrics stream it
    in batches whatever its size (`ifsweep compact` first, for a run too large to hold); otherwise the
    newest verdicts read from the shards. Rows of source "audit" (a judge's verdicts on constraints a
    rule decides, for `ifsweep audit`) only with `audit`: no metric, count or view ever sees them."""
    return verdict_rows(run_dir, run=run, damaged=damaged, audit=audit)[0]


def verdict_rows(
    run_dir: Path, *, run: str | None = None, damaged: list[DamageReport] | None = None, audit: bool = False
) -> tuple[pl.LazyFrame, pl.DataFrame | None]:
    """`scan_verdict_rows`, and the frame it is a plan over when its rows are held in memory (read
    from the shards), not scanned from the compacted Parquet: a reader of held rows may find once
    which of them it keeps (`without_audit` over the frame gives the same rows)."""
    run_dir = Path(run_dir)
    name = run or _run_name(run_dir)
    if _fresh(run_dir, name):
        rows, frame = pl.scan_parquet(run_dir / COMPACT_DIR / "verdicts.parquet"), None
    else:
        # The shards' digest (runner/store/digest.py): only bytes no reader has read yet are parsed.
        frame = _digest_rows(run_dir, name, damaged)
        rows = held_rows(frame)
    return (rows if audit else without_audit(rows)), frame


def without_audit(rows: pl.LazyFrame) -> pl.LazyFrame:
    """`rows` but those of source "audit" (a null source stays)."""
    return rows.filter(pl.col("source").ne_missing("audit"))


def load_call_records(run_dir: Path) -> pl.DataFrame:
    """Generation and judgment records (CALL_COLUMNS, `kind` tells which), newest per key."""
    run_dir = Path(run_dir)
    if _fresh(run_dir, _run_name(run_dir)):
        out = run_dir / COMPACT_DIR
        return pl.concat(
            [pl.read_parquet(out / "generations.parquet"), pl.read_parquet(out / "judgments.parquet")]
        )
    lines = latest_lines(run_dir, ("generation", "judgment"))
    return _call_records(lines["generation"], lines["judgment"])
