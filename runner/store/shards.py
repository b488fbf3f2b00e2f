"""Append-only result shards: the one place a run's records live, and the index that makes resume exact.

Line format (design note: docs/design/shards.md). Each record is one JSON object on one line, written as

    {"_c":"<crc32 of the rest, 8 hex>","key":"<hex key>","kind":"<kind>"[,"status":"<status>"],...}\\n

The checksum sits at a fixed position and covers every byte after it, so a line cut short, a flipped
byte, a run of zeros or garbage is detected before anything is parsed. `key`, `kind` and `status` come
first so the resume index is built from byte slices, without parsing JSON (1M records in about a second).
The lines stay valid JSON objects, so `jq` or `pl.read_ndjson` can read a shard directly.

Newest per key: later lines win over earlier ones (writers in name order, then file sequence, then
offset), except that an error record never shadows a successful one. Errors are only ever retried, so a
success followed by an error for one key can only come from two writers racing; keeping the success
means nothing that was paid for is forgotten.
"""

from __future__ import annotations

import binascii
import errno
import hashlib
import os
import re
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson

from ifsweep.runner.store.keyindex import KeyIndex, normalized
from ifsweep.runner.store.locks import WRITER_RE, WriterBusyError, lock_writer

__all__ = [
    "DISK_FULL_ADVICE",
    "SHARDS_DIR",
    "DamageReport",
    "DiskFullError",
    "RunStore",
    "ShardLine",
    "WriterBusyError",
    "decode_record",
    "disk_full",
    "encode_line",
    "parse_line",
    "record_key",
    "scan_shards",
    "shard_files",
]

SHARDS_DIR = "shards"
_PREFIX = b'{"_c":"'
_HEAD = 17  # len(_PREFIX) + 8 hex digits + len('",')
_KEY_OPEN = b'"key":"'
_KIND_OPEN = b',"kind":"'
_ERROR_STATUS = (b',"status":"error",', b',"status":"error"}')
_HEX_RE = re.compile(r"[0-9a-f]{16,64}")  # a key: of even length too (`_is_key`)
_TOKEN_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
# Kinds and statuses every record of a sweep carries, known to match _TOKEN_RE: checked by a set lookup.
_KNOWN_TOKENS = frozenset(
    {"generation", "judgment", "verdict", "intent", "batch", "ok", "error", "empty", "truncated", "refused"}
)
_FILE_RE = re.compile(r"([A-Za-z0-9_.]{1,64})-(\d{5,})\.jsonl")
_READ_CHUNK = 16 << 20
# Past this much unwritten data, append() writes synchronously even when a flusher runs: backpressure
# that bounds memory if the disk cannot keep up.
_HARD_BUFFER_BYTES = 64 << 20
_FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def record_key(obj: object) -> str:
    """The one hash for every key: sha256 of canonical JSON (sorted keys, no whitespace), 32 hex chars."""
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


class DiskFullError(OSError):
    """The disk (or the file size limit) is full. The shard still ends on a whole line; the unwritten
    records stay buffered, so a later flush() may succeed, and a reopen resumes from what is on disk."""


# What to do about a DiskFullError, wherever it stops a run (runner/engine/sweep.py, the CLI).
DISK_FULL_ADVICE = "free space (or raise the limit) and run the same command again to resume"


def disk_full(e: OSError, what: str) -> OSError:
    """`e` as a DiskFullError saying `what` was lost when it is a full disk, quota or file size limit;
    any other error as it is."""
    if e.errno not in _FULL_ERRNOS:
        return e
    return DiskFullError(
        e.errno, f"{what}: disk full or file size limit reached ({os.strerror(e.errno or 0)})"
    )


@dataclass(frozen=True, slots=True)
class DamageReport:
    file: Path
    line_no: int  # 1-based
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line_no}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ShardLine:
    """One whole, checksummed line. `line` excludes the newline; `key` is the raw (unhexlified) key."""

    file_no: int
    offset: int
    line: bytes
    key: bytes
    kind: str
    is_error: bool

    def record(self) -> dict[str, Any]:
        return decode_record(self.line)


def encode_line(record: Mapping[str, Any]) -> bytes:
    """Serialize one record as a checksummed line (with its newline). Raises ValueError on a bad record."""
    key = record.get("key")
    kind = record.get("kind")
    if not isinstance(key, str) or not _is_key(key):
        raise ValueError(f"record key must be lowercase hex of 16-64 chars (record_key()), got {key!r}")
    if not isinstance(kind, str) or not _is_token(kind):
        raise ValueError(f"record {key}: field 'kind' must be a short identifier, got {kind!r}")
    status = record.get("status")
    leading = isinstance(status, str)
    if isinstance(status, str) and not _is_token(status):
        raise ValueError(f"record {key}: field 'status' must be a short identifier, got {status!r}")
    if type(record) is dict and _leads(record, leading):
        # Built in the line's order already (the pipeline's records): the same bytes, without a copy.
        payload = memoryview(orjson.dumps(record))[1:]
    else:
        ordered: dict[str, Any] = {"key": key, "kind": kind}
        if leading:
            ordered["status"] = status
        ordered.update(record)  # existing keys keep their leading positions
        payload = memoryview(orjson.dumps(ordered))[1:]
    return b'%s%08x",%s\n' % (_PREFIX, zlib.crc32(payload), payload)


def _leads(record: dict[str, Any], status: bool) -> bool:
    """Whether `record`'s fields start with key, kind (and status, when it has a string one): the
    order encode_line writes them in."""
    names = iter(record)
    if next(names) != "key" or next(names, None) != "kind":
        return False
    return not status or next(names, None) == "status"


def _is_key(key: str) -> bool:
    """Lowercase hex of an even length from 16 to 64 (record_key's 32, or raw bytes of 8 to 32)."""
    return not len(key) & 1 and _HEX_RE.fullmatch(key) is not None


def _is_token(text: str) -> bool:
    return text in _KNOWN_TOKENS or _TOKEN_RE.fullmatch(text) is not None


def parse_line(line: bytes) -> tuple[bytes, str, bool] | str:
    """(raw key, kind, is_error) of a whole line without its newline, or the reason it is damaged."""
    if len(line) < _HEAD + 8 or not line.startswith(_PREFIX) or line[15:17] != b'",':
        if not line:
            return "empty line"
        return "not a shard line" if line.strip(b"\x00") else "line of zero bytes"
    try:
        crc = int(line[7:15], 16)
    except ValueError:
        return "unreadable checksum"
    if zlib.crc32(memoryview(line)[_HEAD:]) != crc:
        return "checksum mismatch"
    return _header(line)


def _header(line: bytes) -> tuple[bytes, str, bool] | str:
    if not line.startswith(_KEY_OPEN, _HEAD):
        return "no leading key"
    kend = line.find(b'"', 24)
    if not line.startswith(_KIND_OPEN, kend + 1):
        return "no kind after the key"
    kstart = kend + 10
    kindend = line.find(b'"', kstart)
    try:
        key = binascii.unhexlify(line[24:kend])
    except (binascii.Error, ValueError):
        return "key is not hex"
    is_error = line.startswith(_ERROR_STATUS, kindend + 1)
    return key, line[kstart:kindend].decode(), is_error


def decode_record(line: bytes) -> dict[str, Any]:
    rec: dict[str, Any] = orjson.loads(line)
    del rec["_c"]
    return rec


def shard_files(run_dir: Path) -> list[tuple[str, int, Path]]:
    """(writer id, sequence, path) of every shard in RUN_DIR/shards, in read order."""
    d = Path(run_dir) / SHARDS_DIR
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        m = _FILE_RE.fullmatch(p.name)
        if m is not None:
            out.append((m.group(1), int(m.group(2)), p))
    out.sort(key=lambda t: (t[0], t[1]))
    return out


@dataclass(slots=True)
class _FileEnd:
    size: int = 0
    good_end: int = 0  # offset just past the last whole, valid line
    good_lines: int = 0  # lines up to good_end
    torn: int = 0  # bytes after the last newline


# (offset, line without newline, raw key, is_error, kind) of one valid line
_Entry = tuple[int, bytes, bytes, bool, bytes]


@dataclass(eq=False, slots=True)
class _Located:
    """Every valid line's key and location, in read order, packed for KeyIndex.load (28 bytes a line)."""

    keys: bytearray = field(default_factory=bytearray)
    locs: array[int] = field(default_factory=lambda: array("Q"))
    metas: array[int] = field(default_factory=lambda: array("I"))
    batches: int = 0  # lines of kind "batch" (batch mode's journal)


def _chunks(path: Path, end: _FileEnd, start: int = 0) -> Iterator[tuple[int, list[bytes]]]:
    """The whole lines of one shard (without their newlines) from byte `start` (a line's start), a
    chunk at a time, each chunk with the offset of its first line; then sets `end.size` and `end.torn`
    (bytes after the last newline)."""
    with open(path, "rb", buffering=0) as f:
        f.seek(start)
        base = start
        rest = b""
        while chunk := f.read(_READ_CHUNK):
            data = rest + chunk if rest else chunk
            lines = data.split(b"\n")
            rest = lines.pop()
            yield base, lines
            base += len(data) - len(rest)
        end.size = base + len(rest)
        end.torn = len(rest)


def _scan_file(
    path: Path,
    damaged: list[DamageReport],
    end: _FileEnd,
    located: _Located | None = None,
    file_no: int = 0,
    start: tuple[int, int] = (0, 0),
) -> Iterator[_Entry]:
    """Every valid line of one shard; damaged lines go to `damaged`; `end` tells where good data ends.

    This loop is the resume cost (1M lines per open), so parse_line is inlined, and with `located` the
    lines' keys and locations go straight into it and nothing is yielded. A line the fast path rejects
    gets its precise reason from parse_line. `start`: (byte offset, lines before it) to begin at a
    line boundary a reader already holds everything before (runner/store/digest.py)."""
    crc32 = zlib.crc32
    unhex = binascii.unhexlify
    if located is not None:
        add_key, add_loc, add_meta = located.keys.extend, located.locs.append, located.metas.append
    file_bits = file_no << 40  # KeyIndex's packing: file number above a 40-bit offset
    line_no = start[1]
    end.good_end, end.good_lines = start
    for off, lines in _chunks(path, end, start[0]):
        for line in lines:
            line_no += 1
            n = len(line) + 1
            try:
                ok = line.startswith(_PREFIX) and int(line[7:15], 16) == crc32(line[_HEAD:])
                if ok:
                    kend = line.find(b'"', 24)
                    kind_end = line.find(b'"', kend + 10)
                    ok = kend > 24 and kind_end > 0 and line.startswith(_KIND_OPEN, kend + 1)
                    key = unhex(line[24:kend])
            except (ValueError, binascii.Error):
                ok = False
            if ok:
                is_error = line.startswith(_ERROR_STATUS, kind_end + 1)
                if located is None:
                    yield off, line, key, is_error, line[kend + 10 : kind_end]
                else:
                    add_key(key if len(key) == 16 else normalized(key))
                    add_loc(file_bits | off)
                    add_meta(n << 1 | is_error)
                    if kind_end - kend == 15 and line.startswith(b"batch", kend + 10):
                        located.batches += 1
                end.good_end = off + n
                end.good_lines = line_no
            else:
                reason = parse_line(line)
                damaged.append(DamageReport(path, line_no, reason if type(reason) is str else "bad header"))
            off += n
    if end.torn:
        damaged.append(DamageReport(path, line_no + 1, f"torn tail: {end.torn} bytes without a newline"))


def scan_shards(
    run_dir: Path,
    damaged: list[DamageReport] | None = None,
    kinds: Collection[str] | None = None,
    writer: str | None = None,
) -> Iterator[ShardLine]:
    """Every valid line of every writer's shards (or of `writer`'s alone), in read order (no dedupe).
    Never modifies a file: a live writer's unfinished tail is simply reported as damage."""
    sink: list[DamageReport] = [] if damaged is None else damaged
    wanted = None if kinds is None else {k.encode() for k in kinds}
    for file_no, (wrote, _, path) in enumerate(shard_files(run_dir)):
        if writer is not None and wrote != writer:
            continue
        for off, line, key, is_error, kind in _scan_file(path, sink, _FileEnd()):
            if wanted is None or kind in wanted:
                yield ShardLine(file_no, off, line, key, kind.decode(), is_error)


def _raw_key(key: str) -> bytes:
    if not _is_key(key):
        raise ValueError(f"not a record key (lowercase hex of 16-64 chars): {key!r}")
    return binascii.unhexlify(key)


def _fsync_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(eq=False, slots=True)
class _Batch:
    """Records taken from the buffer for one write. Its state changes only under RunStore._io_lock."""

    file_no: int
    fd: int
    base: int
    data: bytearray
    written: bool = False
    failed: OSError | None = None
    restored: bool = False


@dataclass(eq=False, slots=True)
class RunStore:
    """The run's records: a newest-per-key index over every writer's shards, and this writer's appends.

    Build with `RunStore.open`. Not thread-safe: call it from the event loop thread only (the flusher
    moves only the disk writes to a worker thread)."""

    run_dir: Path
    writer_id: str
    flush_records: int
    flush_ms: float
    rotate_bytes: int
    fsync: bool
    retry_errors: bool
    damaged: list[DamageReport] = field(default_factory=list)
    _files: list[Path] = field(default_factory=list)
    _index: KeyIndex = field(default_factory=KeyIndex)
    _read_fds: dict[int, int] = field(default_factory=dict)
    _lock_fd: int = -1
    _seq: int = 0
    _cur_no: int = -1
    _cur_fd: int = -1
    _disk_end: int = 0  # bytes of the current file on disk; changed only under _io_lock
    _buf: bytearray = field(default_factory=bytearray)
    _buf_base: int = 0
    _buf_count: int = 0
    _first_append: float = 0.0
    _inflight: _Batch | None = None
    _io_lock: threading.Lock = field(default_factory=threading.Lock)
    _flusher_running: bool = False
    _wake: anyio.Event | None = None
    _full: anyio.Event | None = None
    _closed: bool = False
    write_through: bool = True
    _unsynced: bool = False
    batch_records: int = 0  # batch mode's journal lines found at open: any batch ever submitted
    # Told of every record this writer appends (the sweep's spend tally, runner/watch/outcomes.py).
    on_append: Callable[[Mapping[str, Any]], None] | None = None

    # ------------------------------------------------------------------------------------------ open

    @classmethod
    def open(
        cls,
        run_dir: Path,
        *,
        writer_id: str = "main",
        flush_records: int = 1000,
        flush_ms: float = 200,
        rotate_bytes: int = 256 << 20,
        fsync: bool = True,
        retry_errors: bool = True,
        write_through: bool = True,
    ) -> RunStore:
        """`write_through` (the default) hands every record to the kernel as it is appended, so a killed
        process loses nothing it appended, and groups only the fsyncs (a power cut loses at most
        `flush_ms` of records). Without it, records are also written in groups: faster, but a kill -9
        loses the records of the last group too."""
        if WRITER_RE.fullmatch(writer_id) is None:
            raise ValueError(f"writer_id must match [A-Za-z0-9_.]{{1,64}}, got {writer_id!r}")
        if flush_records < 1 or flush_ms <= 0 or rotate_bytes < 1024:
            raise ValueError("flush_records >= 1, flush_ms > 0 and rotate_bytes >= 1024 are required")
        store = cls(Path(run_dir), writer_id, flush_records, flush_ms, rotate_bytes, fsync, retry_errors)
        store.write_through = write_through
        shards = store.run_dir / SHARDS_DIR
        shards.mkdir(parents=True, exist_ok=True)
        store._index = KeyIndex(shards)  # its rows spill to the run's own disk
        store._take_lock(shards / f"{writer_id}.lock")
        try:
            store._load()
        except BaseException:
            store.close()
            raise
        return store

    def _take_lock(self, path: Path) -> None:
        # flock, unlike O_EXCL, is released by the kernel when the holder dies, even by kill -9.
        self._lock_fd = lock_writer(path, self.writer_id)

    def _load(self) -> None:
        own_last: tuple[int, Path, _FileEnd] | None = None
        located = _Located()
        for writer, seq, path in shard_files(self.run_dir):
            file_no = len(self._files)
            self._files.append(path)
            end = _FileEnd()
            for _ in _scan_file(path, self.damaged, end, located, file_no):
                pass
            if writer == self.writer_id:
                self._seq = max(self._seq, seq)
                if end.good_end < end.size:
                    self._truncate_tail(path, end)
                own_last = (file_no, path, end)
        self._index.load(located.keys, located.locs, located.metas)
        self.batch_records = located.batches
        del located
        if own_last is not None and own_last[2].good_end < self.rotate_bytes:
            self._cur_no = own_last[0]
            self._cur_fd = os.open(own_last[1], os.O_RDWR)
            self._disk_end = self._buf_base = own_last[2].good_end
        else:
            self._new_file()

    def _truncate_tail(self, path: Path, end: _FileEnd) -> None:
        """Cut this writer's file back to its last valid line, so appends start on a whole line."""
        with open(path, "r+b") as f:
            f.truncate(end.good_end)
            f.flush()
            os.fsync(f.fileno())
        self.damaged.append(
            DamageReport(
                path,
                end.good_lines + 1,
                f"truncated {end.size - end.good_end} bytes of torn or damaged tail at offset {end.good_end}",
            )
        )

    def _new_file(self) -> None:
        self._seq += 1
        path = self.run_dir / SHARDS_DIR / f"{self.writer_id}-{self._seq:05d}.jsonl"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        _fsync_dir(path.parent)
        if self._cur_fd >= 0:
            self._read_fds[self._cur_no] = self._cur_fd
        self._files.append(path)
        self._cur_no = len(self._files) - 1
        self._cur_fd = fd
        self._disk_end = self._buf_base = 0

    # ------------------------------------------------------------------------------------------ reads

    @property
    def index_size(self) -> int:
        return len(self._index)

    def get(self, key: str) -> dict[str, Any] | None:
        """The newest record for `key` (read from disk on demand), or None."""
        found = self._index.get(_raw_key(key))
        if found is None:
            return None
        file_no, offset, length, _ = found
        line = self._read(file_no, offset, length)
        head = parse_line(line[:-1])
        if type(head) is not tuple:
            raise OSError(f"{self._files[file_no]}: record at offset {offset} changed on disk ({head})")
        return decode_record(line[:-1])

    def done(self, key: str) -> bool:
        """A record exists for `key` and is not an error waiting to be retried."""
        found = self._index.get(_raw_key(key))
        return found is not None and not (self.retry_errors and found[3])

    def _read(self, file_no: int, offset: int, length: int) -> bytes:
        if file_no == self._cur_no and offset >= self._buf_base:
            start = offset - self._buf_base
            return bytes(self._buf[start : start + length])
        b = self._inflight
        if b is not None and b.file_no == file_no and b.base <= offset < b.base + len(b.data):
            start = offset - b.base
            return bytes(b.data[start : start + length])
        fd = self._cur_fd if file_no == self._cur_no else self._read_fds.get(file_no)
        if fd is None:
            fd = self._read_fds[file_no] = os.open(self._files[file_no], os.O_RDONLY)
        return os.pread(fd, length, offset)

    def iter_records(
        self, kinds: Collection[str] | None = None, *, writer: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every valid record of every writer (or of `writer` alone; this one's buffer flushed first),
        in read order."""
        self.flush()
        for sl in scan_shards(self.run_dir, kinds=kinds, writer=writer):
            yield sl.record()

    # ------------------------------------------------------------------------------------------ writes

    def append(self, record: Mapping[str, Any]) -> None:
        """Buffer one record; it is on disk after the next group commit (flusher) or flush()."""
        if self._closed:
            raise ValueError(f"{self.run_dir}: append to a closed RunStore")
        line = encode_line(record)
        end = self._buf_base + len(self._buf)
        if end > 0 and end + len(line) > self.rotate_bytes:
            self.flush()
            self._new_file()
            end = 0
        raw = binascii.unhexlify(record["key"])
        self._index.put(raw, self._cur_no, end, len(line), record.get("status") == "error")
        if self.write_through and not self._buf and self._write_line(line, end):
            if self.on_append is not None:
                self.on_append(record)
            return
        if not self._buf:
            self._first_append = time.monotonic()
            if self._wake is not None:
                self._wake.set()
        self._buf += line
        self._buf_count += 1
        if self.on_append is not None:
            self.on_append(record)
        if self.write_through:
            self._write_now()
            return
        if self._buf_count >= self.flush_records:
            if not self._flusher_running:
                self.flush()
            elif self._full is not None:
                self._full.set()
        if len(self._buf) > _HARD_BUFFER_BYTES:
            self.flush()

    def append_now(self, record: Mapping[str, Any]) -> None:
        """Append and hand to the kernel at once whatever the mode, for a record that must outlive a
        kill -9 of this process before the caller goes on (an intent, runner/store/intents.py)."""
        self.append(record)
        if not self.write_through:
            self._write_now()

    def _write_line(self, line: bytes, end: int) -> bool:
        """Write-through with nothing buffered: `line` straight to the kernel at `end`, without taking
        it through the buffer and a batch. False when it did not go whole: the line is then buffered
        and written again the usual way, which reports the error and keeps the shard whole."""
        with self._io_lock:
            if end != self._disk_end:
                return False
            try:
                done = os.pwrite(self._cur_fd, line, end)
                while done < len(line):
                    done += os.pwrite(self._cur_fd, memoryview(line)[done:], end + done)
            except OSError:
                return False
            self._disk_end = self._buf_base = end + len(line)
        if not self._unsynced:
            self._unsynced = True
            if self._wake is not None:
                self._wake.set()
        return True

    def _write_now(self) -> None:
        """Hand the buffer to the kernel now (write-through); the flusher fsyncs it within flush_ms."""
        batch = self._take()
        if batch is None:
            return
        self._commit_here(batch, sync=False)
        if not self._unsynced and self._wake is not None:
            self._wake.set()
        self._unsynced = True

    def flush(self) -> None:
        """Write and fsync everything buffered, now, on this thread (after a batch the flusher holds)."""
        for batch in (self._inflight, self._take()):
            if batch is not None:
                self._commit_here(batch, sync=True)
        if self._unsynced and self._cur_fd >= 0:
            if self.fsync:
                os.fsync(self._cur_fd)
            self._unsynced = False

    def _commit_here(self, batch: _Batch, *, sync: bool) -> None:
        """Commit on this thread; a failed batch goes back in front of the buffer, nothing forgotten."""
        with self._settled(batch):
            self._commit(batch, sync=sync)

    @contextmanager
    def _settled(self, batch: _Batch) -> Iterator[None]:
        """Around one commit, on the thread that appends (never in the worker that writes): a failed batch
        goes back in front of the buffer; either way it is no longer in flight."""
        try:
            yield
        except OSError:
            self._restore(batch)
            raise
        finally:
            if self._inflight is batch:
                self._inflight = None

    async def flusher(self) -> None:
        """Group commit until cancelled: whatever was appended is written and fsynced within flush_ms of
        its first record, or as soon as flush_records are waiting; the I/O runs in a worker thread."""
        if self._flusher_running:
            raise RuntimeError("RunStore.flusher() is already running")
        self._flusher_running = True
        try:
            while self.write_through:
                self._wake = anyio.Event()
                if not self._unsynced:
                    await self._wake.wait()
                await anyio.sleep(self.flush_ms / 1000)
                if self._unsynced and self._cur_fd >= 0:
                    self._unsynced = False
                    if self.fsync:
                        # A duplicate descriptor, so that a rotation closing the file cannot race the fsync.
                        fd = os.dup(self._cur_fd)
                        await anyio.to_thread.run_sync(_fsync_close, fd)
            while True:
                self._wake, self._full = anyio.Event(), anyio.Event()
                if not self._buf:
                    await self._wake.wait()
                wait = self._first_append + self.flush_ms / 1000 - time.monotonic()
                if self._buf_count < self.flush_records and wait > 0:
                    with anyio.move_on_after(wait):
                        await self._full.wait()
                batch = self._take()
                if batch is None:
                    continue
                with self._settled(batch):
                    await anyio.to_thread.run_sync(self._commit, batch)
        finally:
            self._flusher_running = False
            self._wake = self._full = None

    def close(self) -> None:
        """Flush, then release files and the writer lock. Safe to call twice."""
        if self._closed:
            return
        try:
            if self._cur_fd >= 0:
                self.flush()
        finally:
            self._closed = True
            for fd in [self._cur_fd, *self._read_fds.values(), self._lock_fd]:
                if fd >= 0:
                    os.close(fd)
            self._cur_fd = self._lock_fd = -1
            self._read_fds.clear()
            self._index.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> _Batch | None:
        if not self._buf:
            return None
        batch = _Batch(self._cur_no, self._cur_fd, self._buf_base, self._buf)
        self._buf = bytearray()
        self._buf_base += len(batch.data)
        self._buf_count = 0
        self._inflight = batch
        return batch

    def _restore(self, batch: _Batch) -> None:
        """Put a failed batch back in front of anything appended since (event loop thread only), so
        nothing is forgotten and a later flush, once space is freed, writes it at the right offset."""
        if batch.restored or batch.written:
            return
        batch.restored = True
        self._buf = batch.data + self._buf
        self._buf_base = batch.base
        self._buf_count += batch.data.count(b"\n")

    def _commit(self, batch: _Batch, *, sync: bool = True) -> None:
        """Write one batch at its offset (and fsync unless `sync` is false); any thread. Idempotent,
        and in offset order."""
        with self._io_lock:
            if batch.written:
                return
            path = self._files[batch.file_no]
            if batch.failed is not None:
                raise DiskFullError(batch.failed.errno, batch.failed.strerror)
            if batch.base != self._disk_end:
                raise DiskFullError(errno.EIO, f"{path}: an earlier write failed; nothing more written")
            view = memoryview(batch.data)
            done = 0
            try:
                while done < len(view):
                    done += os.pwrite(batch.fd, view[done:], batch.base + done)
                if self.fsync and sync:
                    os.fsync(batch.fd)
            except OSError as e:
                os.ftruncate(batch.fd, batch.base)
                lost = f"{len(view)} buffered bytes not written; the shard still ends whole at {batch.base}"
                err = disk_full(e, f"{path}: {lost}")
                batch.failed = err
                raise err from e
            batch.written = True
            self._disk_end = batch.base + len(view)
