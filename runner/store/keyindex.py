"""Where each record lives, by key: a compact hash map for the run store's index.

A `dict[bytes, int]` costs about 130 bytes a key (the key object, a big int, the dict slot), which is
the part of a sweep's memory that grows with every call. This map keeps in memory only 4 bytes an
entry (the low 32 bits of the key, its tag) and an open-addressing table of entry numbers (4 bytes a
slot, a third to two thirds full): about 12 bytes a key. Each entry's row (the key's 128 bits and its
location, 28 bytes) is written to an unnamed spill file once a few thousand rows have gathered, and read
back with `pread` when a probe meets an entry whose tag matches. A lookup of a key that is not there
reads nothing from disk but on a tag collision (about one lookup in several thousand), and a hit reads
28 bytes that the page cache holds. A sweep's memory then grows by 12 bytes a record, not 36: with
the rows in memory, the 40-model full-size sweep's index held 18.6 MiB of its peak, now 6.2 MiB.

Keys are 16 raw bytes (record_key's 32 hex digits). Keys of any other length are first reduced to
16 bytes with BLAKE2b, which keeps them distinct with the same certainty as the keys themselves.

The map also owns the store's one precedence rule, because every insert needs it: a newer record
replaces an older one for its key, except that an error never replaces a success (see shards.py).
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import weakref
from array import array
from typing import Any

__all__ = ["KeyIndex", "Location"]

# file number (24 bits) and offset (40 bits) share one 64-bit word; length and the error bit another 32.
_OFF_BITS = 40
_MAX_FILES = 1 << 24
_MAX_OFFSET = 1 << _OFF_BITS
_MAX_LENGTH = (1 << 31) - 1
_MIN_SLOTS = 1 << 10
# Below this many entries a growing table is rebuilt in plain Python (about 20 ms at the most): a sweep
# of a few thousand calls then never imports NumPy (0.15 s, a tenth of such a sweep's CPU).
_NUMPY_FROM = 1 << 15
# A vectorized rebuild places the entries this many at a time: its arrays of positions, masks and
# gathers are a chunk's, not every entry's (the rebuild at 349k entries, the 40-model full-size sweep's
# peak, rose 6 MB above the old table with them all at once, 3 MB so: docs/design/scheduler.md).
_PLACE_CHUNK = 1 << 15
_KEY = struct.Struct("=QQ")  # native order, as the arrays and their NumPy views
_ROW = struct.Struct("=QQQI")  # hi, lo, location word, length and error bit: an entry's 28 bytes
_ROW_LOC = struct.Struct("=QI")  # the row's last 12 bytes: what a newer record for the key replaces
_LOC_AT = 16
_TAG = 0xFFFFFFFF
# Rows kept in memory before they go to the spill file (112 KiB): the newest rows, which a sweep reads
# back most (the verdict it just wrote), are read without a system call.
_TAIL_ROWS = 4096
_EMPTY = -1

Location = tuple[int, int, int, bool]  # (file number, offset, length, is_error)


def normalized(raw: bytes) -> bytes:
    """The 16 bytes the map files `raw` under (for `KeyIndex.load`'s packed key buffer)."""
    return raw if len(raw) == 16 else hashlib.blake2b(raw, digest_size=16, person=b"ifsweep.key").digest()


def _split(raw: bytes) -> tuple[int, int]:
    hi, lo = _KEY.unpack(normalized(raw))
    return hi, lo


def _pack(file_no: int, offset: int, length: int, is_error: bool) -> tuple[int, int]:
    if not (0 <= file_no < _MAX_FILES and 0 <= offset < _MAX_OFFSET and 0 < length <= _MAX_LENGTH):
        raise ValueError(
            f"record location out of range: file {file_no}, offset {offset}, length {length} "
            f"(at most {_MAX_FILES - 1} files, offsets below 2**40, lines up to 2 GiB)"
        )
    return file_no << _OFF_BITS | offset, length << 1 | is_error


class KeyIndex:
    """key -> (file number, offset, length, is_error); newest wins, errors never shadow successes.

    `spill_dir` is the folder of the unnamed spill file (the run store gives its shards folder, so the
    rows go to the run's own disk, never to a /tmp that may be RAM; None: TMPDIR). Nothing is written
    before `tail_rows` entries are held. Not thread-safe."""

    __slots__ = (
        "__weakref__",
        "_closed",
        "_dir",
        "_fd",
        "_flushed",
        "_mask",
        "_release",
        "_slots",
        "_tags",
        "_tail",
        "_tail_len",
        "_tail_size",
    )

    def __init__(
        self, spill_dir: str | os.PathLike[str] | None = None, *, tail_rows: int = _TAIL_ROWS
    ) -> None:
        if tail_rows < 1:
            raise ValueError(f"tail_rows must be at least 1, got {tail_rows}")
        self._dir = spill_dir
        self._closed = False
        self._fd = -1
        self._release: weakref.finalize[[int], KeyIndex] | None = None
        self._flushed = 0  # entries 0 .. _flushed-1 are rows of the spill file, the rest rows of _tail
        # One buffer for the whole life of the index, filled and emptied in place: a new one for each
        # tail would leave the heap a hole of its size among the sweep's small objects at each spill.
        self._tail_size = tail_rows * _ROW.size
        self._tail = bytearray(self._tail_size)
        self._tail_len = 0  # bytes of _tail that hold rows; always less than its length
        self._tags = array("I")
        self._slots = array("i", [_EMPTY]) * _MIN_SLOTS
        self._mask = _MIN_SLOTS - 1

    def __len__(self) -> int:
        return len(self._tags)

    def nbytes(self) -> int:
        """Bytes held in memory (the arrays' allocated size may be up to an eighth more)."""
        return len(self._tags) * 4 + len(self._slots) * 4 + len(self._tail)

    def spilled(self) -> int:
        """Entries whose rows are in the spill file, not in memory."""
        return self._flushed

    def close(self) -> None:
        """Drop the spill file and every entry; any use after raises. Safe to call twice."""
        self._closed = True
        if self._release is not None:
            self._release()
            self._release, self._fd = None, -1
        self._flushed, self._tail, self._tail_len, self._tags = 0, bytearray(), 0, array("I")
        self._slots, self._mask = array("i", [_EMPTY]) * _MIN_SLOTS, _MIN_SLOTS - 1

    def __enter__(self) -> KeyIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spill_fd(self) -> int:
        if self._fd < 0:
            # Unnamed (O_TMPFILE where the system has it): gone when closed, or when the process dies.
            with tempfile.TemporaryFile(dir=self._dir, prefix="ifsweep-keyindex-") as f:
                self._fd = os.dup(f.fileno())
            # Closed by close(), or when the index is collected: a reader that never closes it (the
            # viewer's index lives as long as its server) leaks no descriptor and warns of nothing.
            self._release = weakref.finalize(self, os.close, self._fd)
        return self._fd

    def _row(self, e: int) -> tuple[int, int, int, int]:
        if e >= self._flushed:
            return _ROW.unpack_from(self._tail, (e - self._flushed) * _ROW.size)
        data = os.pread(self._fd, _ROW.size, e * _ROW.size)
        if len(data) != _ROW.size:
            raise OSError(f"key index spill file: row {e} is cut short ({len(data)} bytes)")
        return _ROW.unpack(data)

    def _probe(self, hi: int, lo: int) -> tuple[int, int, tuple[int, int, int, int] | None]:
        """(entry number or -1, the slot where the probe stopped, the entry's row when found)."""
        slots, tags, mask, tag = self._slots, self._tags, self._mask, hi & _TAG
        i = tag & mask
        while True:
            e = slots[i]
            if e == _EMPTY:
                return e, i, None
            if tags[e] == tag:
                row = self._row(e)
                if row[0] == hi and row[1] == lo:
                    return e, i, row
            i = (i + 1) & mask

    def get(self, raw: bytes) -> Location | None:
        if self._closed:
            raise ValueError("get from a closed KeyIndex")
        _, _, row = self._probe(*_split(raw))
        if row is None:
            return None
        loc, meta = row[2], row[3]
        return loc >> _OFF_BITS, loc & (_MAX_OFFSET - 1), meta >> 1, bool(meta & 1)

    def put(self, raw: bytes, file_no: int, offset: int, length: int, is_error: bool) -> bool:
        """Record a newer location for `raw`; returns whether it was kept (an error does not replace a
        success)."""
        if self._closed:
            raise ValueError("put to a closed KeyIndex")
        loc, meta = _pack(file_no, offset, length, is_error)
        hi, lo = _split(raw)
        e, slot, row = self._probe(hi, lo)
        if row is not None:
            if is_error and not row[3] & 1:
                return False
            if e >= self._flushed:
                _ROW_LOC.pack_into(self._tail, (e - self._flushed) * _ROW.size + _LOC_AT, loc, meta)
            else:
                _pwrite_all(self._fd, _ROW_LOC.pack(loc, meta), e * _ROW.size + _LOC_AT)
            return True
        self._slots[slot] = len(self._tags)
        self._tags.append(hi & _TAG)
        _ROW.pack_into(self._tail, self._tail_len, hi, lo, loc, meta)
        self._tail_len += _ROW.size
        if self._tail_len == len(self._tail):
            self._spill()
        if len(self._tags) * 3 > len(self._slots) * 2:
            self._rebuild_slots()
        return True

    def _spill(self) -> None:
        """Move the tail's rows to the end of the spill file. A disk that refuses them (full, or gone)
        loses nothing: the rows stay in memory, and the next try waits for twice as many."""
        try:
            _pwrite_all(self._spill_fd(), memoryview(self._tail)[: self._tail_len], self._flushed * _ROW.size)
            refused = False
        except OSError:
            refused = True
        if refused:  # grown here, not in the handler: its traceback still holds a view of the buffer
            self._tail += bytes(len(self._tail))
            return
        self._flushed += self._tail_len // _ROW.size
        self._tail_len = 0

    def load(self, keys: bytes | bytearray, locs: array[int], metas: array[int]) -> None:
        """Add many records at once, in read order (oldest first, all newer than what is held), with
        the same precedence as `put` one by one. `keys` packs each record's `normalized` key (16 bytes
        each); `locs` and `metas` hold what `_pack` makes. Vectorized: a million records take well under
        a second, where `put` in a loop would take several."""
        if self._closed:
            raise ValueError("load into a closed KeyIndex")
        n_new = len(locs)
        if len(keys) != 16 * n_new or len(metas) != n_new:
            raise ValueError(f"load: {len(keys)} key bytes, {n_new} locations, {len(metas)} metas")
        if n_new == 0:
            return
        import numpy as np  # here, not at the top: a store that never loads or grows needs none of it

        dt = np.dtype([("hi", "=u8"), ("lo", "=u8"), ("loc", "=u8"), ("meta", "=u4")])
        new_keys = np.frombuffer(keys, dtype=np.uint64).reshape(-1, 2)
        added = np.empty(n_new, dtype=dt)
        added["hi"], added["lo"] = new_keys[:, 0], new_keys[:, 1]
        added["loc"], added["meta"] = np.frombuffer(locs, np.uint64), np.frombuffer(metas, np.uint32)
        del new_keys
        rows = np.concatenate([self._rows(np, dt), added])
        del added
        hi, lo, meta = rows["hi"], rows["lo"], rows["meta"]
        # Per key, keep the newest success if there is one, else the newest error: sort by key, then by
        # (is a success, read position), and take each key's last row.
        order = np.lexsort((np.arange(hi.size), (meta & 1) == 0, lo, hi))
        hi_sorted, lo_sorted = hi[order], lo[order]
        last = np.ones(hi.size, dtype=bool)
        last[:-1] = (hi_sorted[1:] != hi_sorted[:-1]) | (lo_sorted[1:] != lo_sorted[:-1])
        del hi_sorted, lo_sorted
        chosen = np.sort(order[last])  # back in read order: entries stay in a reproducible order
        del order, last
        kept = rows[chosen]
        del rows, hi, lo, meta, chosen
        self._tags = array("I", (kept["hi"] & np.uint64(_TAG)).astype(np.uint32).tobytes())
        self._flushed, self._tail_len = 0, kept.size * _ROW.size
        self._tail = bytearray(kept.data.cast("B"))
        del kept
        if self._tail_len >= self._tail_size:
            self._spill()  # the rows to the file, or (refused) kept in a tail of twice their size
        if self._tail_len == 0:
            self._tail = bytearray(self._tail_size)
        elif len(self._tail) < self._tail_size:
            self._tail += bytes(self._tail_size - len(self._tail))
        self._rebuild_slots()

    def _rows(self, np: Any, dt: Any) -> Any:
        """Every entry's row, in entry order, as a NumPy record array (read back from the spill file)."""
        out = np.empty(len(self._tags), dtype=dt)
        view = memoryview(out).cast("B")
        spilled = self._flushed * _ROW.size
        if spilled:
            done = 0
            while done < spilled:
                got = os.preadv(self._fd, [view[done:spilled]], done)
                if got <= 0:
                    raise OSError(f"key index spill file: {spilled - done} bytes short")
                done += got
        view[spilled:] = memoryview(self._tail)[: self._tail_len]
        return out

    def _rebuild_slots(self) -> None:
        """Size the slot table for the entries (at most half full afterwards) and place them all: a
        small table one entry at a time, a big one vectorized, where each round puts every waiting
        entry whose slot is free (one winner per slot) and moves the rest one slot on, which is exactly
        where linear probing would have put them."""
        n = len(self._tags)
        size = _MIN_SLOTS
        while n * 2 > size:
            size *= 2
        mask = size - 1
        if n < _NUMPY_FROM:
            self._slots, self._mask = _placed(self._tags, size), mask
            return
        import numpy as np

        # Filled in place through a NumPy view: no second copy of the table exists at any time, and the
        # entries go in a chunk at a time, which keeps the rebuild's transient memory (a peak of the
        # sweep's RSS) to the new table and a few arrays of a chunk. Any order of placing gives a valid
        # table: an entry only moves on past slots already taken, so its probe from home finds it.
        table = array("i", [_EMPTY]) * size
        slots = np.frombuffer(table, dtype=np.int32)
        for start in range(0, n, _PLACE_CHUNK):
            count = min(_PLACE_CHUNK, n - start)
            waiting = np.arange(start, start + count, dtype=np.int32)
            tags = np.frombuffer(self._tags, dtype=np.uint32, count=count, offset=start * 4)
            pos = (tags & np.uint32(mask)).astype(np.int32)
            del tags  # the view pins the tags: the array must stay free to grow
            while waiting.size:
                free = slots[pos] == _EMPTY
                slots[pos[free]] = waiting[free]  # several entries may target one slot: one of them wins
                placed = free & (slots[pos] == waiting)
                waiting, pos = waiting[~placed], (pos[~placed] + 1) & mask
        del slots  # the view pins the buffer: the array must be free to be read (and never resized)
        self._slots = table
        self._mask = mask


def _placed(tags: array[int], size: int) -> array[int]:
    """A slot table of `size` with every entry placed by linear probing, one at a time."""
    table = array("i", [_EMPTY]) * size
    mask = size - 1
    for e, tag in enumerate(tags):
        i = tag & mask
        while table[i] != _EMPTY:
            i = (i + 1) & mask
        table[i] = e
    return table


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    view, done = memoryview(data), 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)
