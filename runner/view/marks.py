"""What the viewer keeps of each record: a few integers and keys, never the texts (they stay in the shards
and are read back by offset when a page shows them).

A verdict becomes a `Mark`: one bit per constraint for each outcome (satisfied, failed, unparsed, error),
so the list's filters and the judges' disagreement are bit operations over a few hundred thousand pairs.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Call", "Entry", "Mark", "disagree", "mark_of"]


@dataclass(frozen=True, slots=True)
class Mark:
    """One judge's newest verdict on one pair. Masks are over constraint indexes (bit i: constraint i)."""

    judge: str | None
    key: bytes  # the verdict record's raw key: where to read it back
    gen_key: bytes  # the generation it judged
    status: str  # the record's own status: ok | error
    satisfied: int
    failed: int
    unparsed: int
    errors: int
    rows: int

    @property
    def is_error(self) -> bool:
        return self.status == "error" or self.errors != 0


@dataclass(frozen=True, slots=True)
class Call:
    """A judge call stored for a pair (task, turn and re-ask index as its record says)."""

    judge: str
    task_idx: int
    turn_idx: int
    ask: int
    key: bytes


@dataclass(slots=True)
class Entry:
    """One (benchmark, model, instance): what the list shows, and the keys the instance page reads."""

    instance_id: str
    marks: list[Mark] = field(default_factory=list)
    gen_key: bytes | None = None
    calls: list[Call] = field(default_factory=list)

    def mark(self, judge: str | None) -> Mark | None:
        for m in self.marks:
            if m.judge == judge:
                return m
        return None

    def put_mark(self, new: Mark) -> None:
        """The judge's newest verdict replaces its older one (the store's precedence is applied before)."""
        self.marks = [m for m in self.marks if m.judge != new.judge]
        self.marks.append(new)
        self.gen_key = new.gen_key

    def put_call(self, call: Call) -> None:
        if all(c.key != call.key for c in self.calls):
            self.calls.append(call)


def raw(key: object) -> bytes:
    """A record's hex key as raw bytes (b"" when the record carries none)."""
    if not isinstance(key, str):
        return b""
    try:
        return binascii.unhexlify(key)
    except (binascii.Error, ValueError):
        return b""


def mark_of(rec: Mapping[str, Any]) -> tuple[Mark, tuple[str | None, ...]]:
    """A verdict record's Mark, and the constraint type of each constraint index it has a row for."""
    satisfied = failed = unparsed = errors = 0
    rows: Sequence[Any] = rec.get("rows") or []
    types: dict[int, str | None] = {}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("constraint_idx"), int):
            continue
        idx = row["constraint_idx"]
        bit = 1 << idx
        types[idx] = row.get("constraint_type")
        status = row.get("status")
        if status == "error":
            errors |= bit
        elif status == "unparsed":
            unparsed |= bit
        elif status == "ok" and row.get("satisfied") is True:
            satisfied |= bit
        elif status == "ok" and row.get("satisfied") is False:
            failed |= bit
    judge = rec.get("judge")
    mark = Mark(
        judge=None if judge is None else str(judge),
        key=raw(rec.get("key")),
        gen_key=raw(rec.get("gen_key")),
        status=str(rec.get("status") or "ok"),
        satisfied=satisfied,
        failed=failed,
        unparsed=unparsed,
        errors=errors,
        rows=len(rows),
    )
    width = max(types, default=-1) + 1
    return mark, tuple(types.get(i) for i in range(width))


def disagree(marks: Sequence[Mark]) -> int:
    """The constraints two judges decided differently (one satisfied, the other failed), as a mask."""
    out = 0
    for i, a in enumerate(marks):
        for b in marks[i + 1 :]:
            out |= (a.satisfied & b.failed) | (a.failed & b.satisfied)
    return out
