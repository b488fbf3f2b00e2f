"""The instance list's filters: which pairs of one (benchmark, model) a list page or an export shows.

Every filter but the text search is a bit test on the marks the index holds; the search reads the
answers and judge replies back from the shards, only for the pairs the other filters kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ifsweep.runner.view.marks import Entry, disagree

__all__ = ["PAGE_SIZE", "Filters", "flags_of", "select"]

PAGE_SIZE = 50
_FLAGS = ("failed", "unparsed", "errors", "disagree")


@dataclass(frozen=True, slots=True)
class Filters:
    """All set filters must hold. `ctype` narrows `failed`/`unparsed`/`errors` to constraints of that
    type when one of them is set, else asks for a constraint of that type at all."""

    failed: bool = False
    unparsed: bool = False
    errors: bool = False
    disagree: bool = False
    ctype: str = ""
    text: str = ""
    judge: str = ""  # "" : any judge's verdict may match

    @classmethod
    def from_query(cls, q: Mapping[str, str]) -> Filters:
        flags = {name: q.get(name, "") not in ("", "0") for name in _FLAGS}
        return cls(**flags, ctype=q.get("type", ""), text=q.get("q", "").strip(), judge=q.get("judge", ""))

    def query(self) -> dict[str, str]:
        """The query string that gives these filters back (for links that keep them)."""
        out = {name: "1" for name in _FLAGS if getattr(self, name)}
        for name, value in (("type", self.ctype), ("q", self.text), ("judge", self.judge)):
            if value:
                out[name] = value
        return out

    @property
    def any(self) -> bool:
        return self != Filters()

    def without_text(self) -> Filters:
        return replace(self, text="")


def flags_of(entry: Entry, types: Sequence[str | None]) -> dict[str, int]:
    """Per outcome, the constraints of the pair with it under any judge (masks)."""
    out = {"failed": 0, "unparsed": 0, "errors": 0, "disagree": disagree(entry.marks)}
    for m in entry.marks:
        out["failed"] |= m.failed
        out["unparsed"] |= m.unparsed
        out["errors"] |= m.errors
    if any(m.status_error and not m.errors for m in entry.marks):
        out["errors"] |= (1 << max(len(types), 1)) - 1  # a verdict in error without rows: all of it
    return out


def _type_mask(types: Sequence[str | None], ctype: str) -> int:
    return sum(1 << i for i, t in enumerate(types) if t == ctype)


def _keeps(f: Filters, entry: Entry, types: Sequence[str | None]) -> bool:
    if f.judge:
        entry = Entry(entry.instance_id, [m for m in entry.marks if (m.judge or "") == f.judge])
    flags = flags_of(entry, types)
    scope = _type_mask(types, f.ctype) if f.ctype else -1
    wanted = [name for name in _FLAGS if getattr(f, name)]
    if f.ctype and not wanted and scope == 0:
        return False
    return all(flags[name] & scope for name in wanted)


def select(
    entries: Iterable[Entry],
    types_of: Callable[[str], Sequence[str | None]],
    f: Filters,
    texts_of: Callable[[Entry], Iterable[str]] | None = None,
) -> list[Entry]:
    """The entries the filters keep, in the index's order. `texts_of` gives a pair's searchable texts
    (its id is always searched); without it the text filter is ignored."""
    kept = [e for e in entries if _keeps(f, e, types_of(e.instance_id))]
    if not f.text or texts_of is None:
        return kept
    needle = f.text.casefold()
    return [
        e
        for e in kept
        if needle in e.instance_id.casefold() or any(needle in t.casefold() for t in texts_of(e))
    ]


def searchable(records: Iterable[Mapping[str, Any] | None]) -> Iterable[str]:
    """The texts of records (answers, judge replies) a search looks in."""
    for rec in records:
        if rec is not None and isinstance(rec.get("text"), str):
            yield rec["text"]
