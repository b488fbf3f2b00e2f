"""The instance page: prompt, answer, each constraint's outcome per judge, and every judge call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ifsweep.benchmarks import Constraint, Message
from ifsweep.runner.view.detail import Detail, JudgeView, Turn
from ifsweep.runner.view.html import Links, anchor, crumbs, esc, link, page, usd
from ifsweep.runner.view.pieces import pieces_script

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


# A prompt or judge call longer than this is folded: the page opens short, a click shows it.
FOLD_CHARS = 1500
# A judge with more calls than this shows them folded, each its one summary line.
OPEN_CALLS = 4


def _folded(summary: str, body: str, size: int, cls: str = "") -> str:
    """`body` under a `<details>` opened only when it is short."""
    c = f' class="{cls}"' if cls else ""
    return f"<details{c}{' open' if size <= FOLD_CHARS else ''}><summary>{summary}</summary>{body}</details>"


def _prompt(d: Detail) -> str:
    if d.instance is not None and d.prompt_proven:
        size = sum(len(m.content) for m in d.instance.messages)
        body = _folded(
            f"the prompt ({size:,} characters)", _messages(d.instance.messages, "prompt"), size, "fold"
        )
        return (
            '<section id="prompt"><h2>Prompt <span class="proof">matches the stored key</span></h2>'
            f"{body}</section>"
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


def _turn_id(d: Detail, judge: str | None, t: Turn) -> str:
    return anchor(
        "t", d.benchmark, d.model, d.instance_id, judge or "rules only", f"{t.task_idx}.{t.turn_idx}.{t.ask}"
    )


def _constraint_id(d: Detail, i: int) -> str:
    return anchor("c", d.benchmark, d.model, d.instance_id, str(i))


def _deciders(d: Detail) -> list[dict[int, str]]:
    """Per judge: constraint index -> the anchor of the call that decided it (the last ask of its turn:
    the reply that was parsed, or the last one tried)."""
    return [{i: _turn_id(d, v.judge, t) for t in v.turns for i in t.decides} for v in d.judges]


def _sub_instructions(d: Detail) -> dict[int, str]:
    """instruction index -> its text, when the instance's data names its sub-instructions (EIFBench)."""
    found = (d.instance.meta.get("sub_instructions") if d.instance is not None else None) or ()
    out = {}
    for s in found:
        if isinstance(s, Mapping) and isinstance(s.get("idx"), int):
            key, text = s.get("key"), s.get("instruction")
            out[int(s["idx"])] = f"{key}: {text}" if key else str(text or "")
    return out


def _constraints(d: Detail, gold: tuple[int, int] | None = None) -> str:
    per_judge = [_outcomes(v.verdict) for v in d.judges]
    deciders = _deciders(d)
    n = max([len(d.types), *(max(o, default=-1) + 1 for o in per_judge)])
    if d.instance is not None:
        n = max(n, len(d.instance.constraints))
    heads = ["#", "type", "constraint", *(esc(v.judge) if v.judge else "verdict" for v in d.judges)]
    heads += ["gold", ""] if gold is not None else [""]
    subs, group = _sub_instructions(d), None
    rows = []
    for i in range(n):
        con = (
            d.instance.constraints[i] if d.instance is not None and i < len(d.instance.constraints) else None
        )
        if con is not None and con.instruction_idx is not None and con.instruction_idx != group:
            group = con.instruction_idx
            title = subs.get(group, f"sub-instruction {group}")
            rows.append(f'<tr class="sub"><td colspan="{len(heads)}">{esc(title)}</td></tr>')
        rows.append(_constraint_row(d, i, con, per_judge, deciders, gold))
    body = "".join(rows)
    ths = "".join(f"<th>{h}</th>" for h in heads)
    grid = f'<table class="grid constraints"><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>'
    return f'<section id="constraints"><h2>Constraints</h2>{grid}</section>'


def _constraint_row(
    d: Detail,
    i: int,
    con: Constraint | None,
    per_judge: Sequence[Mapping[int, tuple[str, str]]],
    deciders: Sequence[Mapping[int, str]],
    gold: tuple[int, int] | None = None,
) -> str:
    ctype = con.type if con is not None else (d.types[i] if i < len(d.types) else None)
    said = "" if gold is None else "yes" if gold[0] >> i & 1 else "no" if gold[1] >> i & 1 else ""
    cells = []
    for o, calls in zip(per_judge, deciders, strict=True):
        outcome, source = o.get(i, ("", ""))
        call = f' <a class="call" href="#{calls[i]}">call ›</a>' if i in calls else ""
        off = (
            ' <span class="flag gold-off">≠ gold</span>'
            if said and outcome in ("yes", "no") and outcome != said
            else ""
        )
        cells.append(f"{_OUTCOME.get(outcome, '–')} <span class='src'>{esc(source)}</span>{call}{off}")
    split = {"yes", "no"} <= {o.get(i, ("", ""))[0] for o in per_judge}
    text = f'<span class="ctext">{esc(con.text)}</span>' if con is not None else ""
    flag = '<span class="flag">judges disagree</span>' if split else ""
    golds = [] if gold is None else [f'<span class="gold">{_OUTCOME.get(said, "–")}</span>']
    tds = "".join(f"<td>{c}</td>" for c in [str(i), esc(ctype), text, *cells, *golds, flag])
    return f'<tr id="{_constraint_id(d, i)}">{tds}</tr>'


class Deferred:
    """What a served page keeps out of its HTML until it is opened: each judge call's sent messages
    (they repeat the instance's input in every call: EIFBench, 180 calls of one long input) and the body
    of each folded call. The page carries them once, as shared pieces (pieces.py) that viewer.js
    builds when their `<details>` opens. An export holds them inline: its pages are shared pieces already."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def add(self, body: str) -> int:
        self.bodies.append(body)
        return len(self.bodies) - 1

    def script(self) -> str:
        return pieces_script("ifsweep-sent", self.bodies) if self.bodies else ""


def _sent(t: Turn, deferred: Deferred | None) -> str:
    assert t.messages is not None
    size = sum(len(m.content) for m in t.messages)
    summary = f"<summary>messages sent ({len(t.messages)}, {size:,} characters)</summary>"
    body = _messages(t.messages, "sent")
    if deferred is None:
        return f'<details class="messages">{summary}{body}</details>'
    return f'<details class="messages" data-sent="{deferred.add(body)}">{summary}</details>'


def _turn(d: Detail, judge: str | None, t: Turn, open_: bool, deferred: Deferred | None) -> str:
    rec = t.record
    parse = rec.get("parse")
    label = f"task {t.task_idx} · turn {t.turn_idx} · " + ("first ask" if t.ask == 0 else f"re-ask {t.ask}")
    sent = (
        _sent(t, deferred)
        if t.messages is not None
        else '<p class="muted note">messages not shown: the benchmark data was not found or does '
        "not match this call's key</p>"
    )
    decides = " ".join(f'<a class="decides" href="#{_constraint_id(d, i)}">#{i}</a>' for i in t.decides)
    head = f'{label} <span class="parse parse-{esc(parse)}">{esc(parse or rec.get("status"))}</span>' + (
        f' <span class="muted">decides</span> {decides}' if decides else ""
    )
    body = f'{sent}<pre class="reply">{esc(rec.get("text") or "")}</pre>{_call_stats(rec)}'
    # A folded call of a served page: its body is built when it is opened (one summary line each).
    later = "" if open_ or deferred is None else f' data-sent="{deferred.add(body)}"'
    return (
        f'<details class="turn" id="{_turn_id(d, judge, t)}" data-key="{esc(rec.get("key"))}"'
        f"{' open' if open_ else ''}{later}><summary><h4>{head}</h4></summary>"
        f"{'' if later else body}</details>"
    )


def _judge(v: JudgeView, d: Detail, deferred: Deferred | None) -> str:
    name = v.judge if v.judge is not None else "rules only"
    verdict = v.verdict or {}
    status = esc(verdict.get("status") or "no verdict yet")
    few = len(v.turns) <= OPEN_CALLS
    turns = "".join(_turn(d, v.judge, t, few, deferred) for t in v.turns)
    turns = turns or '<p class="muted">no judge calls</p>'
    calls = f"{len(v.turns)} call{'' if len(v.turns) == 1 else 's'}"
    count = f'<span class="vstatus">{calls}{"" if few else ", folded"}</span>'
    return (
        f'<section class="judge-calls" id="{anchor("j", d.benchmark, d.model, d.instance_id, name)}" '
        f'data-judge="{esc(name)}"><h3>Judge {esc(name)} <span class="vstatus">verdict: {status}</span> '
        f"{count}</h3>{turns}</section>"
    )


def instance_body(
    d: Detail, links: Links, *, defer: bool = False, gold: tuple[int, int] | None = None
) -> str:
    """`defer`: the calls' sent messages as one script of shared pieces (a served page), else inline.
    `gold`: the pair's gold (yes and no masks), shown beside each judge's verdict."""
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
    deferred = Deferred() if defer else None
    calls = "".join(_judge(v, d, deferred) for v in d.judges) + (deferred.script() if deferred else "")
    return (
        f"{head}{facts}</p>{nav}{_prompt(d)}{_answer(d)}{_constraints(d, gold)}"
        f'<section id="judges"><h2>Judge calls</h2>{calls}</section>'
    )


def instance_page(
    d: Detail, links: Links, run: str, walk: Walk | None = None, gold: tuple[int, int] | None = None
) -> str:
    """`walk`: where the instance stands in the list it was opened from (its filters kept); `gold`:
    the pair's gold labels, when the viewer has a gold file."""
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
    body = nav + instance_body(d, links, defer=True, gold=gold)
    return page(f"{d.instance_id} · {d.model} · ifsweep view", body, crumbs=trail)


@dataclass(frozen=True, slots=True)
class Walk:
    query: Mapping[str, str]
    previous: str | None
    next: str | None
    position: int  # 1-based
    total: int
