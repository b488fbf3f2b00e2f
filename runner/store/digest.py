"""An index of the shards that grows with them: what `status` and `report` read instead of every shard.

Per shard file, RUN_DIR/compact/digest/<shard>/ holds parts, each a Parquet file of the records of one
byte range of that shard (`<start>-<end>.parquet`: one row per record with the fields the readers
need; `<start>-<end>.v.parquet`: the verdict records whole, as compact.py reads them). A reading loads
the parts and reads only the bytes past them, then writes those bytes' part, so each byte of a shard
is parsed once however often a person runs `status` (docs/design/reading.md, "The digest").

Why it is never wrong:
- A part covers whole, valid lines only: a range ends before the first damaged line of the file (a
  torn tail, a line that fails its checksum). Shards change only by appends, and by their own writer
  cutting them back to the end of their last valid line, which never reaches into a part; the bytes
  from the first damage on are read afresh by every reading, which reports them.
- Each part records the shard's inode and a CRC-32 of the last 4 KiB it covers. A file replaced,
  shorter than the parts say, or whose bytes there changed makes its parts discarded and the file read
  from its start.
- A part is written to a temporary name and renamed into place (the `.v` file first): a crash leaves
  an unused temporary file or a complete part, never half of one. Several readers writing one part
  write the same bytes.
- A directory the reader may not write is read the same way, without keeping anything.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from ifsweep.runner.store.keys import verdict_slot
from ifsweep.runner.store.shards import DamageReport, _FileEnd, _scan_file, shard_files

__all__ = [
    "DIGEST_COLUMNS",
    "DIGEST_DIR",
    "VERDICT_RECORD_SCHEMA",
    "scan_digest",
    "scan_verdicts",
    "verdict_records",
]

DIGEST_DIR = "compact/digest"  # beside compact.py's Parquet: what is derived from the shards
_SCHEMA = 2
_TAIL = 4096
_MERGE_AT = 12  # parts of one shard beyond which they are merged into one (a long sweep's status calls)
_KINDS = (b"generation", b"judgment", b"verdict", b"intent", b"batch")
_PART_RE = re.compile(r"(\d{12})-(\d{12})\.parquet")

_ROW_SCHEMA = pl.Struct(
    {
        "constraint_idx": pl.Int64,
        "instruction_idx": pl.Int64,
        "constraint_type": pl.String,
        "priority": pl.String,
        "satisfied": pl.Boolean,
        "source": pl.String,
        "status": pl.String,
    }
)
# A verdict record as the reports read it (compact.py explodes its rows).
VERDICT_RECORD_SCHEMA: dict[str, pl.DataType] = {
    "key": pl.String(),
    "benchmark": pl.String(),
    "model": pl.String(),
    "judge": pl.String(),
    "scoring": pl.String(),
    "instance_id": pl.String(),
    "group_id": pl.String(),
    "level": pl.Int64(),
    "category": pl.String(),
    "split": pl.String(),
    "rows": pl.List(_ROW_SCHEMA),
    "ts": pl.Float64(),
}


def verdict_records(lines: list[bytes]) -> pl.DataFrame:
    """Verdict lines (checked) as VERDICT_RECORD_SCHEMA, by Polars' NDJSON reader in one buffer."""
    if not lines:
        return pl.DataFrame(schema=VERDICT_RECORD_SCHEMA)
    return pl.read_ndjson(io.BytesIO(b"\n".join(lines)), schema=VERDICT_RECORD_SCHEMA)


# One row per record (generation, judgment, verdict, intent), numbers as the readers take them
# (`outcomes._number`: 0 for a missing or non-numeric field).
DIGEST_COLUMNS: dict[str, pl.DataType] = {
    "offset": pl.Int64(),
    "kind": pl.String(),
    "key": pl.String(),  # hex, as in the record
    "is_error": pl.Boolean(),  # the line's status is "error"
    "failed": pl.Boolean(),  # is_error, or (a verdict) a row in error
    "model": pl.String(),  # str(rec.get("model")), as group_of reads it
    "benchmark": pl.String(),
    "judge": pl.String(),  # null when the record names none
    "instance_id": pl.String(),  # str(rec.get("instance_id"))
    "slot": pl.String(),  # a verdict's slot (keys.verdict_slot)
    "gen_key": pl.String(),  # a verdict's generation key
    "error_kind": pl.String(),  # str(rec.get("error_kind") or "other")
    "unparsed": pl.Boolean(),
    "cost_usd": pl.Float64(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "cached_tokens": pl.Int64(),
    "cache_saved_usd": pl.Float64(),
    "latency_s": pl.Float64(),
    "rate_limited": pl.Int64(),
    "ts": pl.Float64(),
    "worst_case_usd": pl.Float64(),  # a call's: the part of its cost charged as a worst case
    "intents": pl.List(pl.String()),  # a call's: the intents it resolves
    "label": pl.String(),  # an intent's
    "worst_usd": pl.Float64(),  # an intent's
    "line": pl.String(),  # a batch record's whole line (batch mode's journal: a few a run)
}


def _number(rec: dict[str, Any], name: str) -> float:
    v = rec.get(name)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def _row(kind: str, is_error: bool, off: int, line: bytes, rec: dict[str, Any]) -> tuple[Any, ...]:
    """One record's digest row, in DIGEST_COLUMNS order."""
    judge = rec.get("judge")
    verdict = kind == "verdict"
    failed = is_error or (verdict and any(r.get("status") == "error" for r in rec.get("rows") or []))
    intents = rec.get("intents") or []
    label = rec.get("label")
    return (
        off,
        kind,
        str(rec.get("key")),
        is_error,
        failed,
        str(rec.get("model")),
        str(rec.get("benchmark")),
        None if judge is None else str(judge),
        str(rec.get("instance_id")),
        verdict_slot(rec) if verdict else None,
        str(rec.get("gen_key")) if verdict else None,
        str(rec.get("error_kind") or "other"),
        rec.get("parse") == "unparsed",
        _number(rec, "cost_usd"),
        int(_number(rec, "input_tokens")),
        int(_number(rec, "output_tokens")),
        int(_number(rec, "cached_tokens")),
        _number(rec, "cache_saved_usd"),
        _number(rec, "latency_s"),
        int(_number(rec, "rate_limited")),
        _number(rec, "ts"),
        float(rec.get("worst_case_usd") or 0.0),
        [str(i) for i in intents],
        None if label is None else str(label),
        float(rec.get("worst_usd") or 0.0),
        line.decode() if kind == "batch" else None,
    )


@dataclass(frozen=True, slots=True)
class _Part:
    start: int
    end: int
    lines: int  # lines of the shard before `end`
    records: pl.DataFrame
    verdicts: pl.DataFrame
    raw: bytes = b""  # `scan_digest`'s: the records' Parquet bytes as kept (empty: use `records`)
    vraw: bytes = b""  # `scan_verdicts`': the verdict records' Parquet bytes (empty: use `verdicts`)


_PART_BYTES = 32 << 20  # lines parsed into one part at a time: a first reading of a big shard is bounded


def _digest_lines(
    path: Path, start: tuple[int, int], damaged: list[DamageReport]
) -> Iterator[tuple[_Part, bool]]:
    """The records past `start` (byte offset, lines before it) as (part, may be kept): parts of whole,
    valid lines of about 32 MB of lines at most, then the rest from the first damaged line on (read
    again next time)."""
    end = _FileEnd()
    found: list[DamageReport] = []
    lines: list[tuple[int, bytes, bytes, bool, bytes]] = []
    rest: list[tuple[int, bytes, bytes, bool, bytes]] = []
    begin = clean = start
    size = 0
    for entry in _scan_file(path, found, end, start=start):
        off, line, _, _, kind = entry
        if found:
            if kind in _KINDS:
                rest.append(entry)
            continue
        clean = (off + len(line) + 1, clean[1] + 1)  # every line so far is whole and valid
        if kind in _KINDS:
            lines.append(entry)
            size += len(line)
        if size >= _PART_BYTES:
            yield _Part(begin[0], clean[0], clean[1], *_frames(lines)), True
            begin, lines, size = clean, [], 0
    damaged.extend(found)
    if clean[0] > begin[0]:
        yield _Part(begin[0], clean[0], clean[1], *_frames(lines)), True
    yield _Part(clean[0], end.size, end.good_lines, *_frames(rest)), False


# What Polars' NDJSON reader takes from every line (fields a record lacks come out null).
_READ_SCHEMA: dict[str, pl.DataType] = {
    **{k: v for k, v in VERDICT_RECORD_SCHEMA.items()},
    "gen_key": pl.String(),
    "error_kind": pl.String(),
    "parse": pl.String(),
    **{c: pl.Float64() for c in ("cost_usd", "input_tokens", "output_tokens", "cached_tokens")},
    **{c: pl.Float64() for c in ("cache_saved_usd", "latency_s", "rate_limited", "worst_case_usd")},
    "intents": pl.List(pl.String()),
    "label": pl.String(),
    "worst_usd": pl.Float64(),
}
_INTS = ("input_tokens", "output_tokens", "cached_tokens", "rate_limited")


def _frames(lines: list[tuple[int, bytes, bytes, bool, bytes]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(digest rows, verdict records) of checked lines: parsed by Polars in one buffer; a line whose
    fields are not of the types records have (none the sweep writes) sends them all through Python."""
    if not lines:
        return _records([]), _verdicts([], [])
    try:
        raw = pl.read_ndjson(io.BytesIO(b"\n".join(ln for _, ln, _, _, _ in lines)), schema=_READ_SCHEMA)
    except pl.exceptions.PolarsError:
        return _slow_frames(lines)
    kinds = [k.decode() for _, _, _, _, k in lines]
    raw = raw.with_columns(
        pl.Series("offset", [o for o, _, _, _, _ in lines], pl.Int64),
        pl.Series("_kind", kinds, pl.String),
        pl.Series("is_error", [e for _, _, _, e, _ in lines], pl.Boolean),
        pl.Series("_slot", [_slot(k, ln, key) for _, ln, key, _, k in lines], pl.String),
        pl.Series("line", [ln.decode() if k == b"batch" else None for _, ln, _, _, k in lines], pl.String),
    )
    verdict = pl.col("_kind") == "verdict"
    row_error = pl.col("rows").list.eval(pl.element().struct.field("status") == "error").list.any()
    error_kind = pl.col("error_kind")
    records = raw.select(
        "offset",
        pl.col("_kind").alias("kind"),
        pl.col("key").cast(pl.String),
        "is_error",
        (pl.col("is_error") | (verdict & row_error.fill_null(False))).alias("failed"),
        *(pl.col(c).fill_null("None") for c in ("model", "benchmark")),
        "judge",
        pl.col("instance_id").fill_null("None"),
        pl.col("_slot").alias("slot"),
        pl.when(verdict).then(pl.col("gen_key").fill_null("None")).alias("gen_key"),
        pl.when(error_kind.is_null() | (error_kind == ""))
        .then(pl.lit("other"))
        .otherwise(error_kind)
        .alias("error_kind"),
        (pl.col("parse") == "unparsed").fill_null(False).alias("unparsed"),
        *(
            pl.col(c).fill_null(0.0).cast(pl.Int64) if c in _INTS else pl.col(c).fill_null(0.0)
            for c in DIGEST_COLUMNS
            if DIGEST_COLUMNS[c] in (pl.Int64(), pl.Float64()) and c not in ("offset", "worst_usd")
        ),
        pl.col("intents").fill_null(pl.lit([], pl.List(pl.String()))),
        "label",
        pl.col("worst_usd").fill_null(0.0),
        "line",
    )
    verdicts = raw.filter(verdict).select(*VERDICT_RECORD_SCHEMA, "offset", "is_error")
    return records.select(list(DIGEST_COLUMNS)), verdicts


def _slot(kind: bytes, line: bytes, key: bytes) -> str | None:
    """A verdict's slot: its key (a record with a "basis"), else the slot its fields name (keys.py)."""
    if kind != b"verdict":
        return None
    return key.hex() if b'"basis":' in line else verdict_slot(orjson.loads(line))


def _slow_frames(lines: list[tuple[int, bytes, bytes, bool, bytes]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = [_row(k.decode(), e, o, ln, orjson.loads(ln)) for o, ln, _, e, k in lines]
    verdict = [(o, ln, e) for o, ln, _, e, k in lines if k == b"verdict"]
    return _records(rows), _verdicts([ln for _, ln, _ in verdict], [(o, e) for o, _, e in verdict])


def _records(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=DIGEST_COLUMNS, orient="row")


def _verdicts(lines: list[bytes], meta: list[tuple[int, bool]]) -> pl.DataFrame:
    frame = verdict_records(lines)
    return frame.with_columns(
        pl.Series("offset", [m[0] for m in meta], pl.Int64),
        pl.Series("is_error", [m[1] for m in meta], pl.Boolean),
    )


def _tail_crc(path: Path, end: int) -> int:
    with open(path, "rb") as f:
        f.seek(max(0, end - _TAIL))
        return zlib.crc32(f.read(end - max(0, end - _TAIL)))


def _kept_parts(folder: Path, path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The parts of one shard that still hold, chained from byte 0 (the longest at each start that was
    made from this very file). Parts made from another file under this name (a copied or restored run
    directory: another inode) are dropped, not merely passed over: left in place, such a part would be
    the longest at its start and shadow the parts a reading keeps in its stead, and every reading would
    parse the whole shard again."""
    try:
        names = os.listdir(folder)
        ino = path.stat().st_ino
    except OSError:
        return
    by_start: dict[int, list[tuple[int, str]]] = {}
    for name in names:
        m = _PART_RE.fullmatch(name)
        if m is not None:
            by_start.setdefault(int(m.group(1)), []).append((int(m.group(2)), name))
    chain: list[tuple[Path, dict[str, str]]] = []
    at = 0
    while at in by_start:
        for end, name in sorted(by_start[at], reverse=True):
            meta = _part_meta(folder / name, end, ino)
            if meta is not None:
                break
        else:
            break
        chain.append((folder / name, meta))
        at = end
    if chain and _holds(path, chain[-1][1]):
        yield from chain


def _part_meta(part: Path, end: int, ino: int) -> dict[str, str] | None:
    """A part's metadata when this code wrote it whole from the file with inode `ino`, else None; a part
    of another file is removed (best effort)."""
    try:
        meta = pl.read_parquet_metadata(part)
        if int(meta["schema"]) != _SCHEMA or int(meta["end"]) != end:
            return None
        int(meta["lines"])
        if int(meta["ino"]) == ino:
            return meta
    except (OSError, KeyError, ValueError, pl.exceptions.PolarsError):
        return None  # not a part this code wrote whole: the file is read again from here
    for stale in (part, _verdicts_of(part)):
        with contextlib.suppress(OSError):
            stale.unlink()
    return None


def _verdicts_of(part: Path) -> Path:
    """The file beside a part that holds its verdict records whole."""
    return part.with_name(part.name.replace(".parquet", ".v.parquet"))


def _holds(path: Path, meta: dict[str, str]) -> bool:
    """Whether the shard still holds the bytes a part was made from: the same file, long enough, the
    same last 4 KiB."""
    try:
        st = path.stat()
        end = int(meta["end"])
        return (
            int(meta["schema"]) == _SCHEMA
            and int(meta["ino"]) == st.st_ino
            and st.st_size >= end
            and _tail_crc(path, end) == int(meta["tail_crc"])
        )
    except (OSError, KeyError, ValueError):
        return False


def _write_part(folder: Path, path: Path, part: _Part) -> bytes:
    """Keep one part (best effort: a directory the reader may not write keeps nothing); its records'
    Parquet bytes, as kept."""
    name = f"{part.start:012d}-{part.end:012d}"
    meta = {
        "schema": str(_SCHEMA),
        "ino": str(path.stat().st_ino),
        "end": str(part.end),
        "lines": str(part.lines),
        "tail_crc": str(_tail_crc(path, part.end)),
    }
    buf = io.BytesIO()
    part.records.write_parquet(buf, metadata=meta)
    raw = buf.getvalue()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # One temporary name per writer: two threads of one process (the viewer's) may keep one part.
        tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        part.verdicts.write_parquet(tmp)
        os.replace(tmp, folder / f"{name}.v.parquet")
        tmp.write_bytes(raw)
        os.replace(tmp, folder / f"{name}.parquet")  # the commit point
    except OSError:
        pass
    return raw


def _file_digest(run_dir: Path, path: Path, damaged: list[DamageReport], records: bool) -> list[_Part]:
    """One shard's parts: those kept, then what lies past them (kept in its turn, up to any damage).
    Each holds its records (`records`) or else its verdict records, a kept part's as its Parquet bytes
    for a query to decode (`scan_digest`, `scan_verdicts`); the other frame is left empty. A records
    reading (status's, the keeper's) also merges a shard's parts once they are many."""
    folder = run_dir / DIGEST_DIR / path.name
    parts: list[_Part] = []
    for part_path, meta in _kept_parts(folder, path):
        try:
            kept = part_path.read_bytes() if records else b""  # its footer was read by _kept_parts
            vkept = b"" if records else _verdicts_of(part_path).read_bytes()
            if vkept:  # decoded later, by a query: a file cut short is found here, as a read would
                pl.read_parquet_metadata(io.BytesIO(vkept))
        except (OSError, pl.exceptions.PolarsError):
            break
        start = parts[-1].end if parts else 0
        end, lines = int(meta["end"]), int(meta["lines"])
        parts.append(_Part(start, end, lines, _records([]), _verdicts([], []), kept, vkept))
    at = (parts[-1].end, parts[-1].lines) if parts else (0, 0)
    grown = False
    for part, keep in _digest_lines(path, at, damaged):
        if keep:
            kept = _write_part(folder, path, part)
            grown = True
            if records:  # held encoded: a first reading holds one part decoded at a time
                part = replace(part, records=_records([]), raw=kept)
        parts.append(_one_side(part, records))
    if grown and records and len(parts) > _MERGE_AT + 1:  # the last part: the unkept rest
        merged = _merged_parts(folder, parts[:-1])
        if merged is not None:
            kept = _write_part(folder, path, merged)
            _drop_others(folder, merged)
            parts = [_one_side(replace(merged, records=_records([]), raw=kept), True), parts[-1]]
    return parts


def _one_side(part: _Part, records: bool) -> _Part:
    """The part with only what the reading takes: its records, or else its verdict records."""
    return replace(part, verdicts=_verdicts([], [])) if records else replace(part, records=_records([]))


def _merged_parts(folder: Path, parts: list[_Part]) -> _Part | None:
    """The parts of a records reading as one, their verdict records read from disk; None when one
    cannot be read (then they stay apart)."""
    try:
        parts = [
            replace(
                p,
                records=pl.read_parquet(io.BytesIO(p.raw)) if p.raw else p.records,
                verdicts=pl.read_parquet(folder / f"{p.start:012d}-{p.end:012d}.v.parquet"),
                raw=b"",
            )
            for p in parts
        ]
    except (OSError, pl.exceptions.PolarsError):
        return None
    return _merged(parts)


def _drop_others(folder: Path, kept: _Part) -> None:
    """After a merge: the parts it replaced (best effort; a reader that still lists one reads the
    merged part, the longest from byte 0)."""
    name = f"{kept.start:012d}-{kept.end:012d}"
    for p in folder.glob("*.parquet"):
        if not p.name.startswith(name):
            p.unlink(missing_ok=True)


def _merged(parts: list[_Part]) -> _Part:
    return _Part(
        parts[0].start,
        parts[-1].end,
        parts[-1].lines,
        pl.concat([p.records for p in parts]),
        pl.concat([p.verdicts for p in parts]),
    )


def scan_digest(run_dir: Path) -> tuple[list[pl.LazyFrame], tuple[DamageReport, ...]]:
    """The run's records as the readers need them (DIGEST_COLUMNS, `_FEW` as categories, plus
    `file_no`, the shard's place in read order, and `writer`), as lazy plans, one a part in read order,
    and the damaged lines. A kept part is a scan of its Parquet bytes (read into memory: a concurrent
    merge deleting the file does no harm), so a query decodes only the columns it reads; a reader that
    takes a part at a time holds one part's columns, never every record's (status's whole frame,
    decoded, held twice its size: docs/design/reading.md)."""
    damaged: list[DamageReport] = []
    frames: list[pl.LazyFrame] = []
    for file_no, writer, part in _raw_parts(Path(run_dir), damaged, records=True):
        frames.append(
            _placed_rows(pl.scan_parquet(part.raw) if part.raw else part.records.lazy(), file_no, writer)
        )
    return frames or [_placed_rows(_records([]).lazy(), 0, "")], tuple(damaged)


def scan_verdicts(run_dir: Path) -> tuple[list[pl.LazyFrame], tuple[DamageReport, ...]]:
    """The run's verdict records (compact.py's record schema plus `offset`, `is_error` and `file_no`)
    as lazy plans, one a part in read order, and the damaged lines: a kept part stays its Parquet
    bytes until a query decodes the columns it reads, so a reader can take the narrow columns of every
    part, then the rest a part at a time (`report`'s verdict rows: compact.py)."""
    damaged: list[DamageReport] = []
    frames: list[pl.LazyFrame] = []
    for file_no, _, part in _raw_parts(Path(run_dir), damaged, records=False):
        rows = pl.scan_parquet(part.vraw) if part.vraw else part.verdicts.lazy()
        frames.append(rows.with_columns(pl.lit(file_no, pl.Int64).alias("file_no")))
    if not frames:
        frames.append(_verdicts([], []).lazy().with_columns(pl.lit(0, pl.Int64).alias("file_no")))
    return frames, tuple(damaged)


def _raw_parts(
    run_dir: Path, damaged: list[DamageReport], *, records: bool
) -> Iterator[tuple[int, str, _Part]]:
    """(file number, writer, part) of every shard in read order, the parts' records (`records`) or
    else their verdict records (`_file_digest`)."""
    for file_no, (writer, _, path) in enumerate(shard_files(run_dir)):
        for part in _file_digest(run_dir, path, damaged, records):
            yield file_no, writer, part


# Columns of a few distinct values (a run's models, benchmarks, judges, instances), held as
# categories: 4 bytes a row instead of a 16-byte string view (about 60 MB of status's frame at full size).
_FEW = ("kind", "model", "benchmark", "judge", "instance_id", "error_kind")


def _placed_rows(rows: pl.LazyFrame, file_no: int, writer: str) -> pl.LazyFrame:
    """A part's records with their place in the run: `file_no` and `writer`, `_FEW` as categories."""
    return rows.with_columns(
        pl.col(_FEW).cast(pl.Categorical),
        pl.lit(file_no, pl.Int64).alias("file_no"),
        pl.lit(writer, pl.Categorical).alias("writer"),
    )


def keep_digest(run_dir: Path) -> None:
    """Digest every shard's bytes no part covers yet, keeping their parts (what a running sweep's
    DigestKeeper has a child process do: runner/store/keeping.py), so the first `status` of a run this
    version wrote parses at most the bytes of the last few seconds."""
    run_dir = Path(run_dir)
    for _, _, path in shard_files(run_dir):
        _file_digest(run_dir, path, [], True)


if __name__ == "__main__":  # python -m ifsweep.runner.store.digest RUN_DIR (keeping.py's child)
    import sys

    keep_digest(Path(sys.argv[1]))
