"""The viewer's index of a run: per (benchmark, model), its instances and where their records are.

Built in one pass over every writer's shards, then kept current by reading only the bytes each shard
has grown by since (a live sweep appends while the viewer runs). Texts are never held: the key index
(runner.store.keyindex, about 12 bytes a record in memory, filled in one vectorized load per pass) says
where each record lives, and a page reads the few it shows back with `pread`, re-verifying their
checksums.
Precedence is the store's own: the newest record per key, except that an error never replaces a success.
"""

from __future__ import annotations

import binascii
import os
import sys
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ifsweep.runner.store.keyindex import KeyIndex, normalized
from ifsweep.runner.store.shards import DamageReport, decode_record, parse_line, shard_files
from ifsweep.runner.view.marks import Entry, mark_of, raw, types_of
from ifsweep.runner.watch.board import natural_key

__all__ = ["RunIndex", "count_lines"]

_CHUNK = 16 << 20
# The store's line layout (runner.store.shards): checksum, then key, kind and an error status first.
_PREFIX, _HEAD, _KEY_KIND, _KIND_OPEN = b'{"_c":"', 17, b'"key":"', b',"kind":"'
_ERROR_STATUS = (b',"status":"error",', b',"status":"error"}')
_ATTACHED = {b"generation": "generation", b"judgment": "judgment", b"verdict": "verdict"}
_OFF_BITS = 40  # KeyIndex's packing: the file number above a 40-bit offset
Group = tuple[str, str]  # (benchmark label, model label)


@dataclass(slots=True)
class _File:
    path: Path
    file_no: int
    offset: int = 0  # bytes read: always the end of a whole line
    good_end: int = 0  # the end of the last valid line (a writer may cut its file back to it)


@dataclass(eq=False, slots=True)
class _Batch:
    """The keys and locations of the lines one refresh read, for one KeyIndex.load."""

    keys: bytearray = field(default_factory=bytearray)
    locs: array[int] = field(default_factory=lambda: array("Q"))
    metas: array[int] = field(default_factory=lambda: array("I"))


@dataclass(eq=False, slots=True)
class RunIndex:
    """Per (benchmark, model), the instances in first-seen order, with their verdict marks and keys."""

    run_dir: Path
    keys: KeyIndex = field(default_factory=KeyIndex)
    groups: dict[Group, dict[str, Entry]] = field(default_factory=dict)
    # (benchmark, instance id) -> the constraint type of each constraint index (from verdict rows)
    types: dict[tuple[str, str], tuple[str | None, ...]] = field(default_factory=dict)
    # Dollars of every call record ever written (retried errors too: they were paid), per
    # (benchmark, model, judge id or None for the model's own answers).
    cost: dict[tuple[str, str, str | None], float] = field(default_factory=dict)
    judges: dict[str | None, None] = field(default_factory=dict)  # every judge a verdict names, in order
    ctypes: dict[str, set[str]] = field(default_factory=dict)  # benchmark -> every constraint type seen
    damaged: list[DamageReport] = field(default_factory=list)
    version: int = 0  # valid lines read so far: what caches of derived views key on
    behind: bool = False  # the last refresh stopped at its limit: the shards hold more than is indexed
    _files: list[_File] = field(default_factory=list)
    _by_path: dict[Path, _File] = field(default_factory=dict)
    _fds: dict[int, int] = field(default_factory=dict)
    _pending: _Batch = field(default_factory=_Batch)  # located lines not yet loaded into `keys`
    _recent: dict[bytes, tuple[int, int]] = field(default_factory=dict)  # their newest (loc, meta) by key
    _ordered: dict[Group, tuple[int, list[Entry]]] = field(default_factory=dict)  # by the group's size

    @classmethod
    def build(cls, run_dir: Path) -> RunIndex:
        index = cls(Path(run_dir))
        index.refresh()
        return index

    @property
    def lines_read(self) -> int:
        """Whole lines read so far, valid or damaged."""
        return self.version + len(self.damaged)

    def refresh(self, limit: int | None = None) -> int:
        """Read what the shards gained since the last call; returns the number of new valid lines.
        With `limit`, stop after about that many bytes (whole lines): `behind` then says more remain,
        so a server reads a large run in steps and answers requests between them."""
        before = self.version
        batch = _Batch()
        budget = limit
        self.behind = False
        for _, _, path in shard_files(self.run_dir):
            f = self._by_path.get(path)
            if f is None:
                f = self._by_path[path] = _File(path, len(self._files))
                self._files.append(f)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size < f.offset:  # the writer cut a damaged tail we had passed over: read on from there
                f.offset = min(f.good_end, size)
            if size > f.offset and budget is not None and budget <= 0:
                self.behind = True
            elif size > f.offset:
                start = f.offset
                self._read(f, batch, budget)
                budget = None if budget is None else budget - (f.offset - start)
                # Behind only when the budget stopped the read: a last line without its newline (torn,
                # or still being written) is not more to read now, and must not keep a pass going.
                self.behind |= budget is not None and budget <= 0 and f.offset < size
        self._locate(batch)
        return self.version - before

    def _locate(self, batch: _Batch) -> None:
        """The lines' locations, gathered in `_pending` (and newest per key in `_recent`, which reads
        consult meanwhile) until they are a quarter of the table, then added in one vectorized load,
        which rebuilds it: a run read in many steps, or a live sweep's few lines at a time, costs a
        dict entry a line and O(log n) loads, not a probe of the table in Python per line."""
        keys, locs, metas, pending = batch.keys, batch.locs, batch.metas, self._pending
        pending.keys += keys
        pending.locs.extend(locs)
        pending.metas.extend(metas)
        if len(pending.locs) > len(self.keys) // 4:
            self.keys.load(pending.keys, pending.locs, pending.metas)
            self._pending, self._recent = _Batch(), {}
            return
        recent = self._recent
        for i in range(len(locs)):
            key, meta = bytes(keys[16 * i : 16 * i + 16]), metas[i]
            old = recent.get(key)
            if old is None or not meta & 1 or old[1] & 1:  # an error never replaces a success
                recent[key] = (locs[i], meta)

    def _read(self, f: _File, batch: _Batch, limit: int | None) -> None:
        """Every whole line `f` gained: checked, located, and the records the pages need attached. The
        loop every record of a run goes through once: the store's parse_line is inlined for the lines
        that pass (a line that does not gets its reason from parse_line itself)."""
        add_key, add_loc, add_meta = batch.keys.extend, batch.locs.append, batch.metas.append
        file_bits, attach, loads, crc32, unhex = (
            f.file_no << _OFF_BITS,
            self._attach,
            orjson.loads,
            zlib.crc32,
            binascii.unhexlify,
        )
        valid, good_end = 0, f.good_end
        for off, lines in _pieces(f, limit):
            for line in lines:
                try:
                    ok = line.startswith(_PREFIX) and int(line[7:15], 16) == crc32(memoryview(line)[_HEAD:])
                    if ok:
                        kend = line.find(b'"', 24)
                        kind_end = line.find(b'"', kend + 10)
                        ok = (
                            kend > 24
                            and kind_end > 0
                            and line.startswith(_KEY_KIND, _HEAD)
                            and line.startswith(_KIND_OPEN, kend + 1)
                        )
                        key = unhex(line[24:kend])
                except (ValueError, binascii.Error):
                    ok = False
                if not ok:
                    self._damaged(f, off, line)
                    off += len(line) + 1
                    continue
                n = len(line) + 1
                good_end = off + n
                valid += 1
                add_key(key if len(key) == 16 else normalized(key))
                add_loc(file_bits | off)
                add_meta(n << 1 | line.startswith(_ERROR_STATUS, kind_end + 1))
                kind = _ATTACHED.get(line[kend + 10 : kind_end])
                if kind is not None:
                    attach(kind, loads(line), key)  # checked above; its "_c" is never read
                off += n
        f.good_end = good_end
        self.version += valid

    def _damaged(self, f: _File, off: int, line: bytes) -> None:
        reason = parse_line(line)
        why = reason if type(reason) is str else "bad header"
        self.damaged.append(DamageReport(f.path, -1, f"offset {off}: {why}"))

    def _attach(self, kind: str, rec: dict[str, Any], key: bytes) -> None:
        bench, model = str(rec.get("benchmark")), str(rec.get("model"))
        if kind != "verdict":
            judge = rec.get("judge") if kind == "judgment" else None
            slot = (bench, model, None if judge is None else str(judge))
            cost = rec.get("cost_usd")
            if type(cost) is float or type(cost) is int:
                self.cost[slot] = self.cost.get(slot, 0.0) + cost
        group = self.groups.get((bench, model))
        if group is None:
            group = self.groups[(bench, model)] = {}
        iid = str(rec.get("instance_id"))
        entry = group.get(iid)
        if entry is None:
            entry = group[sys.intern(iid)] = Entry(sys.intern(iid))
        if kind == "verdict":
            mark = mark_of(rec)
            entry.put_mark(mark)
            gen_key = raw(rec.get("gen_key"))
            if gen_key and gen_key != entry.gen_key:  # the generation this verdict judged
                entry.gen_key = gen_key
            self.judges.setdefault(mark.judge, None)
            types = self.types.get((bench, iid))
            if types is None:
                types = self.types[(bench, entry.instance_id)] = types_of(rec)
                self.ctypes.setdefault(bench, set()).update(t for t in types if t)
            entry.settle(len(types))
        elif kind == "generation":
            if entry.gen_key is None:
                entry.gen_key = key
        else:
            entry.put_call(key)

    def unfinished(self) -> list[DamageReport]:
        """Each shard whose last bytes are not a whole line yet: a line torn by a crash, or one a live
        writer is still writing (the next refresh reads it if it is finished)."""
        out = []
        for f in self._files:
            try:
                size = f.path.stat().st_size
            except FileNotFoundError:
                continue
            if size > f.offset:
                why = f"offset {f.offset}: {size - f.offset} bytes without a newline (a torn last line)"
                out.append(DamageReport(f.path, -1, why))
        return out

    def ordered(self, group: Group) -> list[Entry]:
        """The group's pairs in the benchmark's instance order (the natural order of their ids: 1:2
        before 1:10), whatever order they were answered in; sorted again only when the group grew."""
        entries = self.groups.get(group, {})
        cached = self._ordered.get(group)
        if cached is None or cached[0] != len(entries):
            ids = sorted(entries, key=natural_key)
            cached = self._ordered[group] = (len(entries), [entries[i] for i in ids])
        return cached[1]

    # ---------------------------------------------------------------------------------------- reads

    def line(self, key: bytes | str) -> bytes | None:
        """The newest line of `key` (raw or hex), read back from its shard and its checksum checked."""
        key = raw(key) if isinstance(key, str) else key
        if not key:
            return None
        found, newer = self.keys.get(key), self._recent.get(normalized(key))
        if newer is not None and (found is None or found[3] or not newer[1] & 1):
            loc, meta = newer
            found = (loc >> _OFF_BITS, loc & ((1 << _OFF_BITS) - 1), meta >> 1, bool(meta & 1))
        if found is None:
            return None
        file_no, offset, length, _ = found
        fd = self._fds.get(file_no)
        if fd is None:
            fd = self._fds[file_no] = os.open(self._files[file_no].path, os.O_RDONLY)
        line = os.pread(fd, length, offset)[:-1]
        head = parse_line(line)
        if type(head) is not tuple or head[0] != key:
            raise OSError(f"{self._files[file_no].path}: record at offset {offset} changed on disk")
        return line

    def record(self, key: bytes | str) -> dict[str, Any] | None:
        """The newest record of `key` (raw or hex), decoded."""
        line = self.line(key)
        return None if line is None else decode_record(line)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _pieces(f: _File, limit: int | None = None) -> Iterator[tuple[int, list[bytes]]]:
    """The whole lines past `f.offset` (without their newlines), a piece at a time, each with the
    offset of its first line; advances `f.offset`. A line still being written (no newline yet) is left
    for the next refresh. With `limit`, stops after the piece that reaches about that many bytes (a
    line longer than that is still read whole)."""
    with open(f.path, "rb", buffering=0) as fh:
        fh.seek(f.offset)
        rest = b""
        start = f.offset
        while limit is None or f.offset - start < limit:
            chunk = fh.read(_CHUNK if limit is None else min(_CHUNK, max(limit - len(rest), 1 << 16)))
            if not chunk:
                return
            data = rest + chunk if rest else chunk
            end = data.rfind(b"\n")
            if end < 0:
                rest = data
                continue
            off = f.offset
            f.offset = off + end + 1
            rest = data[end + 1 :]
            yield off, data[:end].split(b"\n")


def count_lines(run_dir: Path) -> int:
    """Whole lines in the run's shards now: what an index reading them all will have read (valid and
    damaged), so a server can say how far its first pass has come. Reads files only (a worker thread)."""
    total = 0
    for _, _, path in shard_files(run_dir):
        try:
            with open(path, "rb", buffering=0) as fh:
                while chunk := fh.read(_CHUNK):
                    total += chunk.count(b"\n")
        except FileNotFoundError:
            continue
    return total
