"""The viewer's index of a run: per (benchmark, model), its instances and where their records are.

Built in one pass over every writer's shards, then kept current by reading only the bytes each shard
has grown by since (a live sweep appends while the viewer runs). Texts are never held: the key index
(runner.store.keyindex, about 40 bytes a record) says where each record lives, and a page reads the few
it shows back with `pread`, re-verifying their checksums. Precedence is the store's own: newest record
per key, except that an error never replaces a success (KeyIndex.put decides, for every record).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep.runner.store.keyindex import KeyIndex
from ifsweep.runner.store.shards import DamageReport, decode_record, parse_line, shard_files
from ifsweep.runner.view.marks import Call, Entry, mark_of, raw
from ifsweep.runner.watch.outcomes import ErrorTally, SpendTally

__all__ = ["RunIndex"]

_CHUNK = 16 << 20
_KINDS = frozenset({"generation", "judgment", "verdict"})
Group = tuple[str, str]  # (benchmark label, model label)


@dataclass(slots=True)
class _File:
    path: Path
    file_no: int
    offset: int = 0  # bytes read: always the end of a whole line
    good_end: int = 0  # the end of the last valid line (a writer may cut its file back to it)


@dataclass(eq=False, slots=True)
class RunIndex:
    """Per (benchmark, model), the instances in first-seen order, with their verdict marks and keys."""

    run_dir: Path
    keys: KeyIndex = field(default_factory=KeyIndex)
    groups: dict[Group, dict[str, Entry]] = field(default_factory=dict)
    # (benchmark, instance id) -> the constraint type of each constraint index (from verdict rows)
    types: dict[tuple[str, str], tuple[str | None, ...]] = field(default_factory=dict)
    # Dollars per (model, benchmark): generations under None, each judge's calls under its id.
    spend: dict[str | None, SpendTally] = field(default_factory=dict)
    errors: ErrorTally = field(default_factory=ErrorTally)
    damaged: list[DamageReport] = field(default_factory=list)
    version: int = 0  # valid lines read so far: what caches of derived views key on
    _files: list[_File] = field(default_factory=list)
    _by_path: dict[Path, _File] = field(default_factory=dict)
    _fds: dict[int, int] = field(default_factory=dict)

    @classmethod
    def build(cls, run_dir: Path) -> RunIndex:
        index = cls(Path(run_dir))
        index.refresh()
        return index

    def refresh(self) -> int:
        """Read what the shards gained since the last call; returns the number of new valid lines."""
        before = self.version
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
            if size > f.offset:
                for off, line in _lines(f):
                    self._add(f, off, line)
        return self.version - before

    def _add(self, f: _File, off: int, line: bytes) -> None:
        head = parse_line(line)
        if type(head) is not tuple:
            self.damaged.append(DamageReport(f.path, -1, f"offset {off}: {head}"))
            return
        key, kind, is_error = head
        f.good_end = off + len(line) + 1
        self.version += 1
        kept = self.keys.put(key, f.file_no, off, len(line) + 1, is_error)
        if kind not in _KINDS:
            return
        rec = decode_record(line)
        self.errors.add(rec)
        if kind != "verdict":
            judge = rec.get("judge") if kind == "judgment" else None
            self.spend.setdefault(None if judge is None else str(judge), SpendTally()).add(rec)
        if kept:
            self._attach(kind, rec, key)

    def _attach(self, kind: str, rec: dict[str, Any], key: bytes) -> None:
        bench, model = str(rec.get("benchmark")), str(rec.get("model"))
        iid = sys.intern(str(rec.get("instance_id")))
        group = self.groups.get((bench, model))
        if group is None:
            group = self.groups[(bench, model)] = {}
        entry = group.get(iid)
        if entry is None:
            entry = group[iid] = Entry(iid)
        if kind == "verdict":
            mark, types = mark_of(rec)
            entry.put_mark(mark)
            if len(types) >= len(self.types.get((bench, iid), ())):
                self.types[(bench, iid)] = types
        elif kind == "generation":
            if entry.gen_key is None:
                entry.gen_key = key
        else:
            entry.put_call(
                Call(
                    judge=str(rec.get("judge")),
                    task_idx=_int(rec.get("task_idx")),
                    turn_idx=_int(rec.get("turn_idx")),
                    ask=_int(rec.get("ask")),
                    key=key,
                )
            )

    # ---------------------------------------------------------------------------------------- reads

    def record(self, key: bytes | str) -> dict[str, Any] | None:
        """The newest record of `key` (raw or hex), read back from its shard and checked again."""
        key = raw(key) if isinstance(key, str) else key
        if not key:
            return None
        found = self.keys.get(key)
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
        return decode_record(line)

    def judges(self) -> list[str | None]:
        """Every judge some verdict names, in first-seen order."""
        seen: dict[str | None, None] = {}
        for group in self.groups.values():
            for entry in group.values():
                for m in entry.marks:
                    seen.setdefault(m.judge, None)
        return list(seen)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _lines(f: _File) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) of every whole line past `f.offset`; advances it. A line still
    being written (no newline yet) is left for the next refresh."""
    with open(f.path, "rb", buffering=0) as fh:
        fh.seek(f.offset)
        rest = b""
        while True:
            chunk = fh.read(_CHUNK)
            if not chunk:
                return
            data = rest + chunk if rest else chunk
            end = data.rfind(b"\n")
            if end < 0:
                rest = data
                continue
            off = f.offset
            for line in data[:end].split(b"\n"):
                yield off, line
                off += len(line) + 1
            f.offset = off
            rest = data[end + 1 :]


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else -1
