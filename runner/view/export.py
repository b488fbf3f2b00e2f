"""`ifsweep view RUN_DIR --export FILE.html`: the overview and chosen instances in one file that needs
no server and no network (CSS and JS inline, links are anchors), for sharing and CI artifacts.

Without filters it holds what deserves a look: every pair where judges disagree, a reply was unparsed or
something ended in error, plus a sample of the rest (seeded, so the same run exports the same file).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path

from ifsweep.runner.view.detail import instance_detail
from ifsweep.runner.view.filters import Filters, flags_of, select
from ifsweep.runner.view.gold import GoldMarks, audit_html, disagrees
from ifsweep.runner.view.html import AnchorLinks, anchor, esc, link, page, table
from ifsweep.runner.view.index import RunIndex
from ifsweep.runner.view.instance_page import instance_body
from ifsweep.runner.view.marks import Entry
from ifsweep.runner.view.overview import Overview, leaderboards, overview
from ifsweep.runner.view.pages import marks_cell, overview_body, pair_texts
from ifsweep.runner.view.pieces import pieces_script
from ifsweep.runner.view.sources import InstanceSource

__all__ = ["Chosen", "Exported", "Selection", "choose", "export_html"]


@dataclass(frozen=True, slots=True)
class Selection:
    filters: Filters = field(default_factory=Filters)
    benchmark: str = ""
    model: str = ""
    sample: int = 20  # pairs drawn from the rest, over the whole run
    limit: int = 1000  # at most this many pairs in the file
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Chosen:
    bench: str
    model: str
    entry: Entry
    why: str  # disagree | unparsed | errors | filter | sample


def _why(entry: Entry, types: tuple[str | None, ...]) -> str:
    flags = flags_of(entry, types)
    return next((name for name in ("disagree", "unparsed", "errors") if flags[name]), "")


def choose(index: RunIndex, sel: Selection, gold: GoldMarks | None = None) -> list[Chosen]:
    """The pairs an export holds: the filters' (or the flagged ones), then the sample, up to the limit.
    When the flagged pairs are more than the limit leaves room for, every (benchmark, model) gets its
    turn (round robin), so the file shows each model rather than the first ones in full."""
    picked: list[list[Chosen]] = []
    rest: list[tuple[str, str, Entry]] = []
    for bench, model in index.groups:
        if (sel.benchmark and bench != sel.benchmark) or (sel.model and model != sel.model):
            continue
        mine, others = _split(index, (bench, model), index.ordered((bench, model)), sel.filters, gold)
        picked.append([Chosen(bench, model, e, why) for e, why in mine])
        rest += [(bench, model, e) for e in others]

    def draw(item: tuple[str, str, Entry]) -> bytes:
        return hashlib.sha256(f"{sel.seed}\0{item[0]}\0{item[1]}\0{item[2].instance_id}".encode()).digest()

    sample = [Chosen(b, m, e, "sample") for b, m, e in sorted(rest, key=draw)[: sel.sample]]
    room = max(0, sel.limit - len(sample))
    flagged = [c for turn in zip_longest(*picked) for c in turn if c is not None][:room]
    order = {id(c): i for i, c in enumerate(c for group in picked for c in group)}
    return (sorted(flagged, key=lambda c: order[id(c)]) + sample)[: sel.limit]


def _split(
    index: RunIndex,
    group: tuple[str, str],
    entries: Iterable[Entry],
    filters: Filters,
    gold: GoldMarks | None = None,
) -> tuple[list[tuple[Entry, str]], list[Entry]]:
    """(the pairs of one group the filters keep, or else the flagged ones, with why; the others)."""
    bench, model = group

    def types_of(iid: str) -> tuple[str | None, ...]:
        return index.types.get((bench, iid), ())

    entries = list(entries)
    if filters.any:
        found = select(entries, types_of, filters, pair_texts(index, filters.text))
        if filters.gold:  # a judge decided a constraint against its gold (the list's filter)
            found = [
                e
                for e in found
                if gold is not None and disagrees(e, gold.of(bench, model, e.instance_id), filters.judge)
            ]
        kept = {id(e) for e in found}
        return [(e, "filter") for e in entries if id(e) in kept], [e for e in entries if id(e) not in kept]
    whys = [(e, _why(e, types_of(e.instance_id))) for e in entries]
    return [(e, why) for e, why in whys if why], [e for e, why in whys if not why]


@dataclass(frozen=True, slots=True)
class Exported:
    """What an export holds: its pairs, and those of them whose page lacks the prompt and constraint
    texts (the data was not found, or is not the data the run was made from), with why."""

    pairs: int
    without_prompt: int = 0
    why: str = ""  # the first such page's reason


def export_html(
    index: RunIndex,
    source: InstanceSource,
    sel: Selection,
    panel: tuple[str, ...] = (),
    gold: GoldMarks | None = None,
) -> tuple[str, Exported]:
    """The file's text, and what it holds. `gold`: a gold file's labels, shown as the served view
    shows them (the overview's audit section, the gold beside each verdict)."""
    chosen = choose(index, sel, gold)
    links = AnchorLinks(
        included=frozenset((c.bench, c.model, c.entry.instance_id) for c in chosen),
        groups=frozenset((c.bench, c.model) for c in chosen),
    )
    ov = _narrowed(overview(index, leaderboards(index.run_dir), panel), sel)
    judges = [j for j in panel if j in index.judges] + [j for j in index.judges if j not in panel]
    judges = judges or [None]
    groups: dict[tuple[str, str], list[Chosen]] = {}
    for c in chosen:
        groups.setdefault((c.bench, c.model), []).append(c)
    audit = (
        ""
        if gold is None
        else audit_html(gold, [(g, index.ordered(g)) for g in sorted(index.groups)], judges)
    )
    parts = [f'<section id="overview">{overview_body(ov, links, audit)}</section>', _heading(sel, chosen)]
    for (bench, model), items in groups.items():
        head = ["instance", *(esc(j) if j is not None else "verdict" for j in judges), "why"]
        rows = [
            [
                link(links.instance(bench, model, c.entry.instance_id), c.entry.instance_id, "iid"),
                *(marks_cell(c.entry.mark(j)) for j in judges),
                f'<span class="flag">{esc(c.why)}</span>',
            ]
            for c in items
        ]
        parts.append(
            f'<section class="export-group" id="{anchor("g", bench, model)}">'
            f"<h2>{esc(bench)} · {esc(model)}</h2>{table(head, rows, 'grid list')}</section>"
        )
    lacking: list[str] = []
    bodies: list[str] = []
    for c in chosen:
        d = instance_detail(index, source, c.bench, c.model, c.entry.instance_id, panel)
        if d is not None and d.data_note:
            lacking.append(d.data_note)
        if d is not None:
            # Each pair is a page of its own, empty until shown (viewer.js builds it from the pieces).
            parts.append(
                f'<section class="export-instance" id="{anchor("i", c.bench, c.model, c.entry.instance_id)}" '
                f'data-page="{len(bodies)}"></section>'
            )
            back = link(links.group(c.bench, c.model) or "#overview", f"‹ {c.bench} · {c.model}", "back")
            nav = f'<nav class="walk">{link("#overview", "‹ overview")} {back}</nav>'
            mine = gold.of(c.bench, c.model, c.entry.instance_id) if gold is not None else None
            bodies.append(nav + instance_body(d, links, gold=mine))
    parts.append(pieces_script("ifsweep-pages", bodies))
    text = page(f"{ov.run} · ifsweep export", "".join(parts), inline=True)
    return text, Exported(len(chosen), len(lacking), lacking[0] if lacking else "")


def _narrowed(ov: Overview, sel: Selection) -> Overview:
    """The overview of what `--benchmark` and `--model` chose: their boards and rows only."""
    boards = tuple(
        replace(b, rows=tuple(r for r in b.rows if not sel.model or r.model == sel.model))
        for b in ov.boards
        if not sel.benchmark or b.benchmark == sel.benchmark
    )
    return replace(ov, boards=boards)


def _heading(sel: Selection, chosen: list[Chosen]) -> str:
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    what = (
        "the pairs the filters keep"
        if sel.filters.any
        else "every pair where judges disagree, a judge reply was unparsed or something ended in error"
    )
    counts: dict[str, int] = {}
    for c in chosen:
        counts[c.why] = counts.get(c.why, 0) + 1
    tally = ", ".join(f"{k}: {n}" for k, n in counts.items()) or "none"
    sample = f", plus a sample of {sel.sample} of the rest" if sel.sample else ""
    return (
        f'<section id="selection"><h2>Instances in this file</h2><p>{len(chosen)} pairs: {esc(what)}'
        f"{sample} (at most {sel.limit} in all) · {esc(tally)} · exported {made}</p></section>"
    )


def write_export(
    index: RunIndex,
    source: InstanceSource,
    sel: Selection,
    out: Path,
    panel: tuple[str, ...] = (),
    gold: GoldMarks | None = None,
) -> Exported:
    """Write the export atomically; returns what it holds."""
    text, n = export_html(index, source, sel, panel, gold)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return n
