"""What the viewer keeps of each record: a few integers and keys, never the texts (they stay in the shards
and are read back by offset when a page shows them).

A verdict becomes a `Mark`: one bit per constraint for each outcome (satisfied, failed, unparsed, error),
so the list's filters and the judges' disagreement are bit operations over a few hundred thousand pairs.
A pair's judge calls are kept as their keys alone: the instance page reads each record for the rest.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["Entry", "Mark", "disagree", "mark_of", "outcomes", "raw", "types_of"]


class Mark(NamedTuple):
    """One judge's newest verdict on one pair. Masks are over constraint indexes (bit i: constraint i)."""

    judge: str | None
    key: bytes  # the verdict record's raw key: where to read it back
    status_error: bool  # the record's own status is "error"
    satisfied: int
    failed: int
    unparsed: int
    errors: int

    @property
    def is_error(self) -> bool:
        return self.status_error or self.errors != 0


class Entry:
    """One (benchmark, model, instance): what the list shows, and the keys the instance page reads."""

    __slots__ = ("calls", "gen_key", "instance_id", "marks", "outcomes", "summary", "why")

    def __init__(self, instance_id: str, marks: list[Mark] | None = None) -> None:
        self.instance_id = instance_id
        self.marks: list[Mark] = marks or []
        self.gen_key: bytes | None = None
        self.calls: list[bytes] = []  # the judge calls' keys, in the order they were stored
        # `outcomes` of the marks, and bit i set when outcome i holds for any constraint: what a list
        # of 100k pairs is filtered on. The index settles them after each verdict.
        self.outcomes: tuple[int, int, int, int] = (0, 0, 0, 0)
        self.summary = 0
        self.why: str | None = None  # why the pair is in error, once the overview read it

    def settle(self, width: int) -> None:
        """Recompute `outcomes` and `summary` from the marks; `width`: the pair's constraint count."""
        o = self.outcomes = outcomes(self.marks, width)  # once per verdict read: kept tight
        self.summary = (o[0] != 0) | (o[1] != 0) << 1 | (o[2] != 0) << 2 | (o[3] != 0) << 3
        self.why = None

    def mark(self, judge: str | None) -> Mark | None:
        for m in self.marks:
            if m.judge == judge:
                return m
        return None

    def put_mark(self, new: Mark) -> None:
        """The judge's newest verdict replaces its older one, except that an error never replaces a
        success of the same key (the store's precedence)."""
        for i, m in enumerate(self.marks):
            if m.judge == new.judge:
                if new.key == m.key and new.is_error and not m.is_error:
                    return
                self.marks[i] = new
                break
        else:
            self.marks.append(new)

    def put_call(self, key: bytes) -> None:
        if key not in self.calls:
            self.calls.append(key)


def raw(key: object) -> bytes:
    """A record's hex key as raw bytes (b"" when the record carries none)."""
    if not isinstance(key, str):
        return b""
    try:
        return binascii.unhexlify(key)
    except (binascii.Error, ValueError):
        return b""


def mark_of(rec: Mapping[str, Any]) -> Mark:
    """A verdict record's Mark (this loop runs once per verdict when the index is built: kept tight)."""
    satisfied = failed = unparsed = errors = 0
    for row in rec.get("rows") or ():
        idx = row.get("constraint_idx")
        if type(idx) is not int:
            continue
        bit = 1 << idx
        status = row.get("status")
        if status == "ok":
            sat = row.get("satisfied")
            if sat is True:
                satisfied |= bit
            elif sat is False:
                failed |= bit
        elif status == "unparsed":
            unparsed |= bit
        elif status == "error":
            errors |= bit
    judge = rec.get("judge")
    return Mark(
        None if judge is None else str(judge),
        raw(rec.get("key")),
        rec.get("status") == "error",
        satisfied,
        failed,
        unparsed,
        errors,
    )


def types_of(rec: Mapping[str, Any]) -> tuple[str | None, ...]:
    """The constraint type of each constraint index a verdict record has a row for."""
    found: dict[int, str | None] = {}
    for row in rec.get("rows") or ():
        idx = row.get("constraint_idx")
        if type(idx) is int:
            found[idx] = row.get("constraint_type")
    return tuple(found.get(i) for i in range(max(found, default=-1) + 1))


def disagree(marks: Sequence[Mark]) -> int:
    """The constraints two judges decided differently (one satisfied, the other failed), as a mask."""
    out = 0
    for i, a in enumerate(marks):
        for b in marks[i + 1 :]:
            out |= (a.satisfied & b.failed) | (a.failed & b.satisfied)
    return out


def outcomes(marks: Sequence[Mark], width: int) -> tuple[int, int, int, int]:
    """(failed, unparsed, errors, disagree): the constraints of a pair with each outcome under any of
    `marks`, as masks. A verdict in error without rows (its answer failed) counts every one of the
    pair's `width` constraints as an error."""
    failed = unparsed = errors = 0
    for m in marks:
        failed |= m.failed
        unparsed |= m.unparsed
        errors |= m.errors
        if m.status_error and not m.errors:
            errors |= (1 << max(width, 1)) - 1
    return failed, unparsed, errors, disagree(marks) if len(marks) > 1 else 0
