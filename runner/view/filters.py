"""The instance list's filters: which pairs of one (benchmark, model) a list page or an export shows.

Every filter but the text search is a bit test on the marks the index holds; the search reads the
answers and judge replies back from the shards, only for the pairs the other filters kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ifsweep.runner.view.marks import Entry, outcomes

__all__ = ["PAGE_SIZE", "SORTS", "Filters", "flags_of", "in_order", "select"]

PAGE_SIZE = 50
_FLAGS = ("failed", "unparsed", "errors", "disagree")  # in the order of marks.outcomes


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
    gold: bool = (
        False  # a judge (`judge`, or any) decided a constraint against its gold (runner/view/gold.py)
    )
    sort: str = ""  # the list's order: "" instance order, or one of SORTS (not a filter: keeps all)

    @classmethod
    def from_query(cls, q: Mapping[str, str]) -> Filters:
        flags = {name: q.get(name, "") not in ("", "0") for name in _FLAGS}
        sort = q.get("sort", "")
        return cls(
            **flags,
            ctype=q.get("type", ""),
            text=q.get("q", "").strip(),
            judge=q.get("judge", ""),
            gold=q.get("gold", "") not in ("", "0"),
            sort=sort if sort in SORTS else "",
        )

    def query(self) -> dict[str, str]:
        """The query string that gives these filters back (for links that keep them)."""
        out = {name: "1" for name in _FLAGS if getattr(self, name)}
        if self.gold:
            out["gold"] = "1"
        for name, value in (
            ("type", self.ctype),
            ("q", self.text),
            ("judge", self.judge),
            ("sort", self.sort),
        ):
            if value:
                out[name] = value
        return out

    @property
    def any(self) -> bool:
        """Some filter is set (an order alone keeps every pair)."""
        return replace(self, sort="") != Filters()

    def without_text(self) -> Filters:
        return replace(self, text="")


# The list's orders besides the instance order, with what the form calls them.
SORTS = {
    "failed": "most failed first",
    "unparsed": "most unparsed first",
    "reverse": "instance order, reversed",
}


def in_order(entries: Sequence[Entry], sort: str) -> list[Entry]:
    """`entries` (in instance order) in the order `sort` names; ties keep the instance order."""
    if sort == "reverse":
        return entries[::-1] if isinstance(entries, list) else list(entries)[::-1]
    if sort in ("failed", "unparsed"):
        at = 0 if sort == "failed" else 1
        return sorted(entries, key=lambda e: -e.outcomes[at].bit_count())
    return list(entries)


def flags_of(entry: Entry, types: Sequence[str | None]) -> dict[str, int]:
    """Per outcome, the constraints of the pair with it under any judge (masks)."""
    return dict(zip(_FLAGS, entry.outcomes, strict=True))


def _type_mask(types: Sequence[str | None], ctype: str) -> int:
    return sum(1 << i for i, t in enumerate(types) if t == ctype)


def _keeps(
    f: Filters, wanted: Sequence[int], entry: Entry, types: tuple[str | None, ...], scopes: dict[Any, int]
) -> bool:
    scope = -1
    if f.ctype:
        scope = scopes.get(types, -1)
        if scope < 0:
            scope = scopes[types] = _type_mask(types, f.ctype)  # instances share a few type lists
        if not scope:  # no constraint of that type: neither the type alone nor a flag on it holds
            return False
    if f.judge:
        flags = outcomes([m for m in entry.marks if (m.judge or "") == f.judge], len(types))
    else:
        flags = entry.outcomes
    return all(flags[i] & scope for i in wanted)


def _typed(
    entries: Iterable[Entry], types_of: Callable[[str], tuple[str | None, ...]], ctype: str, wanted: list[int]
) -> list[Entry]:
    """`_keeps` without a judge filter, inlined: a type filter runs over every pair of a 100k list."""
    scopes: dict[tuple[str | None, ...], int] = {}
    out = []
    for e in entries:
        types = types_of(e.instance_id)
        scope = scopes.get(types)
        if scope is None:
            scope = scopes[types] = _type_mask(types, ctype)
        if scope:
            flags = e.outcomes
            for i in wanted:
                if not flags[i] & scope:
                    break
            else:
                out.append(e)
    return out


def select(
    entries: Iterable[Entry],
    types_of: Callable[[str], tuple[str | None, ...]],
    f: Filters,
    texts_of: Callable[[Entry], Iterable[str]] | None = None,
) -> list[Entry]:
    """The entries the filters keep, in the index's order. `texts_of` gives a pair's searchable texts
    (its id is always searched); without it the text filter is ignored."""
    wanted = [i for i, name in enumerate(_FLAGS) if getattr(f, name)]
    if f.judge:
        scopes: dict[Any, int] = {}
        kept = [e for e in entries if _keeps(f, wanted, e, types_of(e.instance_id), scopes)]
    elif f.ctype:
        kept = _typed(entries, types_of, f.ctype, wanted)
    else:  # flags alone: one test of each pair's summary bits
        need = sum(1 << i for i in wanted)
        kept = [e for e in entries if e.summary & need == need]
    if not f.text or texts_of is None:
        return kept
    needle = f.text.casefold()
    return [
        e
        for e in kept
        if needle in e.instance_id.casefold() or any(needle in t.casefold() for t in texts_of(e))
    ]
