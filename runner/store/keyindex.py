"""Where each record lives, by key: a compact hash map for the run store's index.

A `dict[bytes, int]` costs about 130 bytes a key (the key object, a big int, the dict slot), which is
the part of a sweep's memory that grows with every call. This map keeps each key's 128 bits and its
location in flat arrays (28 bytes an entry) with an open-addressing table of entry numbers beside
them (4 bytes a slot, a third to two thirds full): about 40 bytes a key, with no object per key at all.

Keys are 16 raw bytes (record_key's 32 hex digits). Keys of any other length are first reduced to
16 bytes with BLAKE2b, which keeps them distinct with the same certainty as the keys themselves.

The map also owns the store's one precedence rule, because every insert needs it: a newer record
replaces an older one for its key, except that an error never replaces a success (see shards.py).
"""

from __future__ import annotations

import hashlib
import struct
from array import array

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
_KEY = struct.Struct("=QQ")  # native order, as the arrays and their NumPy views
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
    """key -> (file number, offset, length, is_error); newest wins, errors never shadow successes."""

    __slots__ = ("_hi", "_lo", "_loc", "_mask", "_meta", "_slots")

    def __init__(self) -> None:
        self._hi = array("Q")
        self._lo = array("Q")
        self._loc = array("Q")
        self._meta = array("I")
        self._slots = array("i", [_EMPTY]) * _MIN_SLOTS
        self._mask = _MIN_SLOTS - 1

    def __len__(self) -> int:
        return len(self._hi)

    def nbytes(self) -> int:
        """Bytes held by the arrays (their allocated size may be up to an eighth more)."""
        return sum(a.itemsize * len(a) for a in (self._hi, self._lo, self._loc, self._meta, self._slots))

    def _probe(self, hi: int, lo: int) -> tuple[int, int]:
        """(entry number or -1, the slot where the probe stopped)."""
        slots, his, los, mask = self._slots, self._hi, self._lo, self._mask
        i = hi & mask
        while True:
            e = slots[i]
            if e == _EMPTY or (his[e] == hi and los[e] == lo):
                return e, i
            i = (i + 1) & mask

    def get(self, raw: bytes) -> Location | None:
        e, _ = self._probe(*_split(raw))
        if e == _EMPTY:
            return None
        loc, meta = self._loc[e], self._meta[e]
        return loc >> _OFF_BITS, loc & (_MAX_OFFSET - 1), meta >> 1, bool(meta & 1)

    def put(self, raw: bytes, file_no: int, offset: int, length: int, is_error: bool) -> bool:
        """Record a newer location for `raw`; returns whether it was kept (an error does not replace a
        success)."""
        loc, meta = _pack(file_no, offset, length, is_error)
        hi, lo = _split(raw)
        e, slot = self._probe(hi, lo)
        if e != _EMPTY:
            if is_error and not self._meta[e] & 1:
                return False
            self._loc[e], self._meta[e] = loc, meta
            return True
        self._slots[slot] = len(self._hi)
        self._hi.append(hi)
        self._lo.append(lo)
        self._loc.append(loc)
        self._meta.append(meta)
        if len(self._hi) * 3 > len(self._slots) * 2:
            self._rebuild_slots()
        return True

    def load(self, keys: bytes | bytearray, locs: array[int], metas: array[int]) -> None:
        """Add many records at once, in read order (oldest first, all newer than what is held), with
        the same precedence as `put` one by one. `keys` packs each record's `normalized` key (16 bytes
        each); `locs` and `metas` hold what `_pack` makes. Vectorized: a million records take well under
        a second, where `put` in a loop would take several."""
        n_new = len(locs)
        if len(keys) != 16 * n_new or len(metas) != n_new:
            raise ValueError(f"load: {len(keys)} key bytes, {n_new} locations, {len(metas)} metas")
        if n_new == 0:
            return
        import numpy as np  # here, not at the top: a store that never loads or grows needs none of it

        new_keys = np.frombuffer(keys, dtype=np.uint64).reshape(-1, 2)
        hi = np.concatenate([np.frombuffer(self._hi, dtype=np.uint64), new_keys[:, 0]])
        lo = np.concatenate([np.frombuffer(self._lo, dtype=np.uint64), new_keys[:, 1]])
        loc = np.concatenate([np.frombuffer(self._loc, dtype=np.uint64), np.frombuffer(locs, np.uint64)])
        meta = np.concatenate([np.frombuffer(self._meta, np.uint32), np.frombuffer(metas, np.uint32)])
        del new_keys
        # Per key, keep the newest success if there is one, else the newest error: sort by key, then by
        # (is a success, read position), and take each key's last row.
        order = np.lexsort((np.arange(hi.size), (meta & 1) == 0, lo, hi))
        hi_sorted, lo_sorted = hi[order], lo[order]
        last = np.ones(hi.size, dtype=bool)
        last[:-1] = (hi_sorted[1:] != hi_sorted[:-1]) | (lo_sorted[1:] != lo_sorted[:-1])
        chosen = np.sort(order[last])  # back in read order: entries stay in a reproducible order
        self._hi = array("Q", hi[chosen].tobytes())
        self._lo = array("Q", lo[chosen].tobytes())
        self._loc = array("Q", loc[chosen].tobytes())
        self._meta = array("I", meta[chosen].tobytes())
        self._rebuild_slots()

    def _rebuild_slots(self) -> None:
        """Size the slot table for the entries (at most half full afterwards) and place them all: a
        small table one entry at a time, a big one vectorized, where each round puts every waiting
        entry whose slot is free (one winner per slot) and moves the rest one slot on, which is exactly
        where linear probing would have put them."""
        n = len(self._hi)
        size = _MIN_SLOTS
        while n * 2 > size:
            size *= 2
        mask = size - 1
        if n < _NUMPY_FROM:
            self._slots, self._mask = _placed(self._hi, size), mask
            return
        import numpy as np

        # Filled in place through a NumPy view: no second copy of the table exists at any time, which
        # keeps the rebuild's transient memory (a peak of the sweep's RSS) to a few arrays of n.
        table = array("i", [_EMPTY]) * size
        slots = np.frombuffer(table, dtype=np.int32)
        waiting = np.arange(n, dtype=np.int32)
        pos = (np.frombuffer(self._hi, dtype=np.uint64) & np.uint64(mask)).astype(np.int32)
        while waiting.size:
            free = slots[pos] == _EMPTY
            slots[pos[free]] = waiting[free]  # several entries may target one slot: one of them wins
            placed = free & (slots[pos] == waiting)
            waiting, pos = waiting[~placed], (pos[~placed] + 1) & mask
        del slots  # the view pins the buffer: the array must be free to be read (and never resized)
        self._slots = table
        self._mask = mask


def _placed(his: array[int], size: int) -> array[int]:
    """A slot table of `size` with every entry placed by linear probing, one at a time."""
    table = array("i", [_EMPTY]) * size
    mask = size - 1
    for e, hi in enumerate(his):
        i = hi & mask
        while table[i] != _EMPTY:
            i = (i + 1) & mask
        table[i] = e
    return table
