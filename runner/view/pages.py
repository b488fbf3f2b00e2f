"""The overview page and the instance list of one (benchmark, model)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import orjson

from ifsweep.runner.view.filters import PAGE_SIZE, SORTS, Filters, flags_of, in_order, select
from ifsweep.runner.view.gold import GoldMarks, disagrees
from ifsweep.runner.view.html import Links, crumbs, esc, link, page, table, usd
from ifsweep.runner.view.index import RunIndex
from ifsweep.runner.view.marks import Entry, Mark
from ifsweep.runner.view.overview import Board, Overview

__all__ = [
    "board_html",
    "list_page",
    "marks_cell",
    "matching",
    "overview_body",
    "overview_page",
    "pair_texts",
    "summary_html",
]


DAMAGED_SHOWN = 5  # damaged lines named on the overview; the rest counted

# Seconds between the overview's reloads while the first pass indexes (perf/reading_perf.py polls as often).
INDEXING_REFRESH_S = 2


def summary_html(ov: Overview) -> str:
    state = ov.state or "no summary.json"
    kinds = ", ".join(f"{k}: {n}" for k, n in ov.errors_by_kind.items())
    parts = [
        f'<span class="state state-{esc(ov.state.replace(" ", "-"))}">{esc(state)}</span>',
        *(
            [f'<span class="indexing warn">{esc(ov.indexing)}; the counts are of those</span>']
            if ov.indexing
            else []
        ),
        f"spent {usd(ov.spent_usd)}",
        f"pairs in error: {esc(kinds)}" if kinds else "no pairs in error",
    ]
    if not ov.indexing:
        parts.append('<span class="whole">index whole</span>')
    if ov.damaged:
        shown = "; ".join(ov.damaged[:DAMAGED_SHOWN])
        more = f"; and {len(ov.damaged) - DAMAGED_SHOWN} more" if len(ov.damaged) > DAMAGED_SHOWN else ""
        parts.append(
            f'<span class="warn damaged">{len(ov.damaged)} damaged shard lines skipped: {esc(shown)}{more}'
            "</span>"
        )
    when = time.strftime("%H:%M:%S", time.localtime(ov.made_at))
    metrics = time.strftime("%H:%M:%S", time.localtime(ov.metrics_at)) if ov.metrics_at else "-"
    parts.append(f'<span class="muted">read at {when}, metrics as of {metrics}</span>')
    return '<p class="summary">' + " · ".join(parts) + "</p>"


def board_html(board: Board, links: Links) -> str:
    judge = f' <span class="judge">judge {esc(board.judge)}</span>' if board.judge is not None else ""
    head = [
        "model",
        *map(esc, board.headers),
        "pairs",
        "judged",
        "errors",
        "unparsed",
        "disagree",
        "spent (answers + every judge)",
    ]
    rows = []
    for r in board.rows:

        def count(n: int, flag: str, model: str = r.model) -> str:
            href = links.group(board.benchmark, model, {flag: "1"}) if n else ""
            return link(href, n, "num bad" if n else "num")

        rows.append(
            [
                link(links.group(board.benchmark, r.model), r.model, "model"),
                *(f'<span class="num">{esc(v)}</span>' for v in r.values),
                f'<span class="num">{r.instances}</span>',
                f'<span class="num">{r.judged}</span>',
                count(r.errors, "errors"),
                count(r.unparsed, "unparsed"),
                count(r.disagree, "disagree"),
                f'<span class="num">{usd(r.cost_usd)}</span>',
            ]
        )
    banner = f'<p class="warn partial">{esc(board.partial)}</p>' if board.partial else ""
    grid = table(head, rows, "grid sortable")  # viewer.js sorts it on a header's click
    return f'<section class="board"><h2>{esc(board.title)}{judge}</h2>{banner}{grid}</section>'


def overview_body(ov: Overview, links: Links, audit: str = "") -> str:
    """`audit`: the judges against a gold file (runner/view/gold.audit_html), after the boards."""
    note = f'<p class="warn">{esc(ov.note)}</p>' if ov.note else ""
    boards = "".join(board_html(b, links) for b in ov.boards) or "<p>No records yet.</p>"
    return f"<h1>Run {esc(ov.run)}</h1>{summary_html(ov)}{note}{boards}{audit}"


def overview_page(ov: Overview, links: Links, audit: str = "") -> str:
    return page(
        f"{ov.run} · ifsweep view",
        overview_body(ov, links, audit),
        refresh_s=INDEXING_REFRESH_S if ov.indexing else 5 if ov.state == "running" else 0,
        crumbs=crumbs(links, ov.run),
    )


def marks_cell(mark: Mark | None) -> str:
    """One judge's verdict on a pair, in counts: satisfied, failed, unparsed, error."""
    if mark is None:
        return '<span class="muted">pending</span>'
    if mark.status_error and not mark.errors:
        return '<span class="v-error">error</span>'
    parts = [
        ("v-yes", "✓", mark.satisfied),
        ("v-no", "✗", mark.failed),
        ("v-unparsed", "?", mark.unparsed),
        ("v-error", "!", mark.errors),
    ]
    return " ".join(f'<span class="{c}">{sym}{m.bit_count()}</span>' for c, sym, m in parts if m)


def _form(f: Filters, types: Sequence[str], judges: Sequence[str | None], gold: bool = False) -> str:
    named = [
        ("failed", "failed constraints"),
        ("unparsed", "unparsed"),
        ("errors", "errors"),
        ("disagree", "judges disagree"),
    ]
    if gold:  # only with a gold file (`ifsweep view --gold FILE`)
        named.append(("gold", "judge disagrees with gold"))
    boxes = "".join(
        f'<label><input type="checkbox" name="{name}" value="1"{" checked" if getattr(f, name) else ""}>'
        f" {label}</label>"
        for name, label in named
    )
    opts = "".join(
        f'<option value="{esc(t)}"{" selected" if t == f.ctype else ""}>{esc(t)}</option>' for t in types
    )
    jopts = "".join(
        f'<option value="{esc(j)}"{" selected" if j == f.judge else ""}>{esc(j)}</option>'
        for j in judges
        if j is not None
    )
    judge = f'<label>judge <select name="judge"><option value="">any</option>{jopts}</select></label>'
    sorts = "".join(
        f'<option value="{k}"{" selected" if k == f.sort else ""}>{esc(v)}</option>' for k, v in SORTS.items()
    )
    order = (
        f'<label>order <select name="sort"><option value="">instance order</option>{sorts}</select></label>'
    )
    return (
        f'<form class="filters" method="get">{boxes}'
        f'<label>constraint type <select name="type"><option value="">any</option>{opts}</select></label>'
        f"{judge if len(judges) > 1 else ''}{order}"
        f'<label>text <input type="search" name="q" value="{esc(f.text)}" placeholder="id, answer, reply">'
        '</label><button type="submit">Apply</button><a href="?" class="clear">clear</a></form>'
    )


def list_page(
    index: RunIndex,
    bench: str,
    model: str,
    f: Filters,
    page_no: int,
    links: Links,
    judges: Sequence[str | None],
    progress: str = "",
    gold: GoldMarks | None = None,
) -> str:
    """`progress`: how far the server's first pass over the shards is, while it runs; `gold`: the
    gold file's labels, if the viewer was given one (a filter, and a flag on the pairs it holds)."""
    group = index.groups.get((bench, model), {})
    kept = matching(index, bench, model, f, gold)
    pages = max(1, -(-len(kept) // PAGE_SIZE))
    page_no = min(max(page_no, 1), pages)
    shown = kept[(page_no - 1) * PAGE_SIZE : page_no * PAGE_SIZE]
    head = ["instance", "answer", "constraints", *(esc(j) if j is not None else "verdict" for j in judges)]
    head.append("flags")
    rows = [_list_row(index, (bench, model), e, links, judges, f, gold) for e in shown]
    all_types = sorted(index.ctypes.get(bench, ()))
    pager = _pager(links, bench, model, f, page_no, pages)
    body = (
        f"<h1>{esc(bench)} · {esc(model)}</h1>{_form(f, all_types, judges, gold is not None)}"
        f'<p class="count"><span id="matched">{len(kept)}</span> of {len(group)} instances'
        f" · page {page_no} of {pages}{_indexing(progress)}</p>{table(head, rows, 'grid list')}{pager}"
    )
    trail = crumbs(links, index.run_dir.resolve().name, (links.group(bench, model), f"{bench} · {model}"))
    return page(f"{bench} · {model} · ifsweep view", body, crumbs=trail)


def _indexing(progress: str) -> str:
    return f' · <span class="indexing warn">{esc(progress)}: the list holds those</span>' if progress else ""


def matching(
    index: RunIndex, bench: str, model: str, f: Filters, gold: GoldMarks | None = None
) -> list[Entry]:
    """The pairs of one (benchmark, model) the filters keep, in the order they ask for (by default the
    benchmark's instance order). The gold filter keeps no pair without `gold`."""

    def types_of(iid: str) -> tuple[str | None, ...]:
        return index.types.get((bench, iid), ())

    entries = index.ordered((bench, model))
    kept = select(entries, types_of, f, pair_texts(index, f.text)) if f.any else entries
    if f.gold:
        kept = [
            e
            for e in kept
            if gold is not None and disagrees(e, gold.of(bench, model, e.instance_id), f.judge)
        ]
    return in_order(kept, f.sort)


def pair_texts(index: RunIndex, needle: str) -> Callable[[Entry], Iterator[str]]:
    """A pair's texts a search for `needle` looks in: its answer and judge replies. A record whose raw
    line cannot hold the needle is not decoded: for a needle of plain ASCII (no quote, backslash or
    control character), a text holding it puts those very bytes, lower-cased, in an ASCII line."""
    folded = needle.casefold()
    plain = folded.isascii() and '"' not in folded and "\\" not in folded and folded.isprintable()
    probe = folded.encode()

    def texts_of(e: Entry) -> Iterator[str]:
        for key in [e.gen_key, *e.calls]:
            line = index.line(key) if key else None
            if line is None or (plain and line.isascii() and probe not in line.lower()):
                continue
            text = orjson.loads(line).get("text")
            if isinstance(text, str):
                yield text

    return texts_of


def _preview(index: RunIndex, e: Entry) -> str:
    """The answer's start on one line (its whole text is on the instance page)."""
    gen = index.record(e.gen_key) if e.gen_key else None
    if gen is None:
        return '<span class="muted">–</span>'
    if gen.get("status") == "error":
        return f'<span class="v-error">{esc(gen.get("error_kind") or "error")}</span>'
    text = " ".join(str(gen.get("text") or "").split())
    return f'<span class="preview">{esc(text[:110] + ("…" if len(text) > 110 else ""))}</span>'


def _list_row(
    index: RunIndex,
    group: tuple[str, str],
    e: Entry,
    links: Links,
    judges: Sequence[str | None],
    f: Filters,
    gold: GoldMarks | None = None,
) -> list[str]:
    bench, model = group
    types = index.types.get((bench, e.instance_id), ())
    notes = [name for name in ("disagree",) if flags_of(e, types)[name]]
    if gold is not None and disagrees(e, gold.of(bench, model, e.instance_id)):
        notes.append("off gold")
    return [
        link(links.instance(bench, model, e.instance_id, f.query()), e.instance_id, "iid"),
        _preview(index, e),
        f'<span class="num">{len(types)}</span>',
        *(marks_cell(e.mark(j)) for j in judges),
        " ".join(f'<span class="flag">{n}</span>' for n in notes),
    ]


def _pager(links: Links, bench: str, model: str, f: Filters, page_no: int, pages: int) -> str:
    def to(n: int, text: str) -> str:
        return link(links.group(bench, model, {**f.query(), "page": str(n)}), text, "pagelink")

    prev = to(page_no - 1, "‹ previous") if page_no > 1 else ""
    nxt = to(page_no + 1, "next ›") if page_no < pages else ""
    return f'<nav class="pager">{prev} {nxt}</nav>'
