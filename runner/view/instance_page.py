"""The instance page: prompt, answer, each constraint's outcome per judge, and every judge call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ifsweep.benchmarks import Message
from ifsweep.runner.view.detail import Detail, JudgeView, Turn
from ifsweep.runner.view.html import Links, anchor, crumbs, esc, link, page, table, usd

__all__ = ["Walk", "instance_body", "instance_page"]

_OUTCOME = {
    "yes": ('<span class="v-yes">✓ satisfied</span>'),
    "no": ('<span class="v-no">✗ failed</span>'),
    "unparsed": ('<span class="v-unparsed">? unparsed</span>'),
    "error": ('<span class="v-error">! error</span>'),
}


def _messages(messages: Sequence[Message], cls: str) -> str:
    return "".join(
        f'<div class="msg role-{esc(m.role)}"><div class="role">{esc(m.role)}</div>'
        f'<pre class="{cls}">{esc(m.content)}</pre></div>'
        for m in messages
    )


def _call_stats(rec: Mapping[str, Any]) -> str:
    """Tokens, cached tokens, cost, latency, attempts, 429s and the error of a call record."""
    cells = [
        ("status", rec.get("status")),
        ("finish", rec.get("finish_reason")),
        ("input tokens", rec.get("input_tokens")),
        ("cached tokens", rec.get("cached_tokens")),
        ("output tokens", rec.get("output_tokens")),
        ("cost", usd(float(rec["cost_usd"])) if isinstance(rec.get("cost_usd"), int | float) else "–"),
        ("latency", f"{rec['latency_s']:.2f} s" if isinstance(rec.get("latency_s"), int | float) else "–"),
        ("attempts", rec.get("attempts")),
        ("429s", rec.get("rate_limited")),
    ]
    out = "".join(
        f'<span class="stat"><span class="k">{k}</span> '
        f'<span class="v" data-stat="{k}">{esc(v)}</span></span>'
        for k, v in cells
    )
    if rec.get("error_kind") or rec.get("error_message"):
        out += (
            f'<div class="error"><span class="kind">{esc(rec.get("error_kind"))}</span> '
            f'<span class="message">{esc(rec.get("error_message"))}</span></div>'
        )
    return f'<div class="stats">{out}</div>'


def _prompt(d: Detail) -> str:
    if d.instance is not None and d.prompt_proven:
        return (
            '<section id="prompt"><h2>Prompt <span class="proof">matches the stored key</span></h2>'
            f"{_messages(d.instance.messages, 'prompt')}</section>"
        )
    note = d.data_note or "no answer stored yet"
    return f'<section id="prompt"><h2>Prompt</h2><p class="muted note">{esc(note)}</p></section>'


def _answer(d: Detail) -> str:
    gen = d.generation
    if gen is None:
        return '<section id="answer"><h2>Answer</h2><p class="muted">not stored yet</p></section>'
    return (
        f'<section id="answer"><h2>Answer</h2><pre class="answer">{esc(gen.get("text") or "")}</pre>'
        f"{_call_stats(gen)}</section>"
    )


def _outcomes(verdict: Mapping[str, Any] | None) -> dict[int, tuple[str, str]]:
    """constraint index -> (outcome, source) of a verdict record's rows."""
    out: dict[int, tuple[str, str]] = {}
    for row in (verdict or {}).get("rows") or []:
        status, sat = row.get("status"), row.get("satisfied")
        outcome = status if status in ("unparsed", "error") else "yes" if sat is True else "no"
        out[int(row.get("constraint_idx", -1))] = (outcome, str(row.get("source") or ""))
    return out


def _constraints(d: Detail) -> str:
    per_judge = [_outcomes(v.verdict) for v in d.judges]
    n = max([len(d.types), *(max(o, default=-1) + 1 for o in per_judge)])
    if d.instance is not None:
        n = max(n, len(d.instance.constraints))
    heads = ["#", "type", "constraint", *(esc(v.judge) if v.judge else "verdict" for v in d.judges), ""]
    rows = []
    for i in range(n):
        con = (
            d.instance.constraints[i] if d.instance is not None and i < len(d.instance.constraints) else None
        )
        ctype = con.type if con is not None else (d.types[i] if i < len(d.types) else None)
        cells = []
        for o in per_judge:
            outcome, source = o.get(i, ("", ""))
            cells.append(f"{_OUTCOME.get(outcome, '–')} <span class='src'>{esc(source)}</span>")
        split = {"yes", "no"} <= {o.get(i, ("", ""))[0] for o in per_judge}
        text = f'<span class="ctext">{esc(con.text)}</span>' if con is not None else ""
        rows.append(
            [str(i), esc(ctype), text, *cells, '<span class="flag">judges disagree</span>' if split else ""]
        )
    return f'<section id="constraints"><h2>Constraints</h2>{table(heads, rows, "grid")}</section>'


def _turn(t: Turn) -> str:
    rec = t.record
    parse = rec.get("parse")
    label = f"task {t.task_idx} · turn {t.turn_idx} · " + ("first ask" if t.ask == 0 else f"re-ask {t.ask}")
    sent = (
        f"<details><summary>messages sent ({len(t.messages)})</summary>"
        f"{_messages(t.messages, 'sent')}</details>"
        if t.messages is not None
        else '<p class="muted note">messages not shown: the benchmark data was not found or does '
        "not match this call's key</p>"
    )
    return (
        f'<div class="turn" data-key="{esc(rec.get("key"))}"><h4>{label} '
        f'<span class="parse parse-{esc(parse)}">{esc(parse or rec.get("status"))}</span></h4>'
        f'{sent}<pre class="reply">{esc(rec.get("text") or "")}</pre>{_call_stats(rec)}</div>'
    )


def _judge(v: JudgeView, d: Detail) -> str:
    name = v.judge if v.judge is not None else "rules only"
    verdict = v.verdict or {}
    status = esc(verdict.get("status") or "no verdict yet")
    turns = "".join(_turn(t) for t in v.turns) or '<p class="muted">no judge calls</p>'
    return (
        f'<section class="judge-calls" id="{anchor("j", d.benchmark, d.model, d.instance_id, name)}" '
        f'data-judge="{esc(name)}"><h3>Judge {esc(name)} <span class="vstatus">verdict: {status}</span></h3>'
        f"{turns}</section>"
    )


def instance_body(d: Detail, links: Links) -> str:
    head = f'<h1 class="iid">{esc(d.instance_id)}</h1>'
    facts = f'<p class="facts">{esc(d.benchmark)} · model <b>{esc(d.model)}</b>'
    if d.instance is not None:
        extra = [f"{k} {v}" for k, v in (("category", d.instance.category), ("level", d.instance.level)) if v]
        extra += [f"split {d.instance.split}"] if d.instance.split else []
        facts += "".join(f" · {esc(x)}" for x in extra)
    others = " ".join(
        link(links.instance(d.benchmark, m, d.instance_id), m, "other-model")
        for m in d.other_models
        if m != d.model
    )
    judges = " ".join(
        link(
            "#" + anchor("j", d.benchmark, d.model, d.instance_id, v.judge or "rules only"),
            v.judge or "rules",
        )
        for v in d.judges
    )
    nav = f'<p class="others">other models: {others or "none"}</p><p class="others">judges: {judges}</p>'
    calls = "".join(_judge(v, d) for v in d.judges)
    return (
        f"{head}{facts}</p>{nav}{_prompt(d)}{_answer(d)}{_constraints(d)}"
        f'<section id="judges"><h2>Judge calls</h2>{calls}</section>'
    )


def instance_page(d: Detail, links: Links, run: str, walk: Walk | None = None) -> str:
    """`walk`: where the instance stands in the list it was opened from (its filters kept)."""
    query = dict(walk.query) if walk is not None else {}
    trail = crumbs(
        links,
        run,
        (links.group(d.benchmark, d.model, query), f"{d.benchmark} · {d.model}"),
        (links.instance(d.benchmark, d.model, d.instance_id, query), d.instance_id),
    )
    nav = ""
    if walk is not None:

        def to(iid: str | None, text: str, rel: str) -> str:
            if iid is None:
                return f'<span class="muted">{text}</span>'
            return f'<a rel="{rel}" href="{esc(links.instance(d.benchmark, d.model, iid, query))}">{text}</a>'

        nav = (
            f'<nav class="walk">{to(walk.previous, "‹ previous", "prev")} '
            f'<span class="at">{walk.position} of {walk.total}</span> {to(walk.next, "next ›", "next")}</nav>'
        )
    return page(f"{d.instance_id} · {d.model} · ifsweep view", nav + instance_body(d, links), crumbs=trail)


@dataclass(frozen=True, slots=True)
class Walk:
    query: Mapping[str, str]
    previous: str | None
    next: str | None
    position: int  # 1-based
    total: int
