"""What a person reads about a sweep: the totals first, then one row per endpoint (the judge
included), what holds the sweep back on top. One board feeds the live table, the plain line for logs,
the table printed at the end and `ifsweep status`; it is built from live counters (runner/watch/progress.py)
or from a run directory (runner/watch/status.py), and laid out here without reading anything else.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ifsweep.runner.watch.eta import OWN_BOUNDS

if TYPE_CHECKING:
    from rich.text import Text

PLAIN_WIDTH = 200  # a plain line never exceeds this
PLAIN_ENDPOINTS = 3  # endpoints named on a plain line
# Lines the live board needs besides its rows and totals: the header, its rule, and the line the cursor
# rests on.
RICH_CHROME = 3


_KEPT_LIMITS = ("rpm", "tpm", "rpm_learned", "tpm_learned", "concurrency")


@dataclass(frozen=True, slots=True)
class Limits:
    """One endpoint's limits as its limiter knows them (configured, or learned from headers), and
    what it has been through."""

    rpm: int | None = None
    tpm: int | None = None
    rpm_learned: bool = False
    tpm_learned: bool = False
    concurrency: int = 1  # calls allowed in flight now (cut after 429s)
    rate_limited: int = 0  # 429 answers
    errors: int = 0  # calls that ended in an error

    def as_json(self) -> dict[str, Any]:
        """The limits alone: the counters (`rate_limited`, `errors`) are the moment's, not kept."""
        return {name: getattr(self, name) for name in _KEPT_LIMITS}

    @classmethod
    def from_json(cls, where: str, obj: object) -> Limits:
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected an object")
        for name in ("rpm", "tpm"):
            if obj.get(name) is not None and not isinstance(obj.get(name), int):
                raise ValueError(f"{where}.{name}: expected an integer or null")
        concurrency = obj.get("concurrency")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"{where}.concurrency: expected a positive integer")
        return cls(
            obj.get("rpm"),
            obj.get("tpm"),
            bool(obj.get("rpm_learned")),
            bool(obj.get("tpm_learned")),
            concurrency,
        )


@dataclass(frozen=True, slots=True)
class Pace:
    """One endpoint's recent pace: calls and tokens per minute, seconds per call (None: not known)."""

    calls_per_min: int | None = None
    tokens_per_min: int | None = None
    latency_s: float | None = None


@dataclass(frozen=True, slots=True)
class EndpointRow:
    label: str
    role: str  # "model" or "judge"
    calls: int  # calls made
    calls_expected: float | None  # made + expected left; None when the plan is unknown
    pace: Pace  # of the last seconds (pace.RATE_WINDOW_S)
    limits: Limits = Limits()  # its limits, and the 429s and errors it has been through
    waits: str = ""  # a back-off or 429 wait in words, while it lasts
    spent: float = 0.0
    cap: float | None = None
    eta_s: float | None = None  # when its last call is expected; None: unknown
    held_by: str = ""  # rpm | tpm | concurrency | workers | judge | slots | ""

    @property
    def limit_use(self) -> float:
        """The larger of rpm and tpm use against the limit (0 without limits)."""
        uses = [0.0]
        pace, lim = self.pace, self.limits
        if lim.rpm and pace.calls_per_min is not None:
            uses.append(pace.calls_per_min / lim.rpm)
        if lim.tpm and pace.tokens_per_min is not None:
            uses.append(pace.tokens_per_min / lim.tpm)
        return max(uses)

    @property
    def failing(self) -> bool:
        return self.limits.errors > 0 or bool(self.waits)


@dataclass(frozen=True, slots=True)
class Totals:
    pairs_done: int  # done or failed
    pairs_planned: int | None
    calls: int
    calls_expected: float | None
    calls_per_s: float | None
    tokens_per_min: float | None
    spent: float
    cap: float | None
    errors: int  # pairs that failed
    eta_s: float | None  # None: unknown; inf: stalled
    state: str = "running"  # running | a final status | "not running"


@dataclass(frozen=True, slots=True)
class Board:
    totals: Totals
    rows: tuple[EndpointRow, ...]  # what holds the sweep back first (see `ordered`)
    batches: str = ""  # batch mode: batches submitted / running / done and their ETA, when there are any
    coordinator: str = ""  # the coordinator's state, when the sweep has one (shown in the totals line)
    stopping: str = ""  # `[run] stop_when`: each model's intervals and "settled" (runner/watch/settling.py)


# ------------------------------------------------------------------------------------------- order


_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=4096)  # the same few hundred labels are sorted at every refresh
def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """m2 before m10: digit runs compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text) if part)


def _pressure(row: EndpointRow) -> int:
    if row.role == "judge":
        return 2 if row.held_by else 0
    return 2 if row.held_by in OWN_BOUNDS else 1 if row.held_by else 0


def ordered(rows: Sequence[EndpointRow]) -> tuple[EndpointRow, ...]:
    """What holds the sweep back first: the latest to finish, then what its own limit holds (the judge
    at its limit before the models waiting on it), then the most used limit, errors, natural name."""

    def key(r: EndpointRow) -> tuple[float, int, float, int, tuple[tuple[int, int | str], ...]]:
        eta = -1.0 if r.eta_s is None else r.eta_s
        use = 0.0 if eta == 0 else round(r.limit_use, 1)  # what is done needs no ranking
        return (
            -(round(eta) if eta < math.inf else eta),
            -_pressure(r),
            -use,
            -r.limits.errors,
            natural_key(r.label),
        )

    return tuple(sorted(rows, key=key))


def fit(rows: Sequence[EndpointRow], room: int) -> tuple[list[EndpointRow], EndpointRow | None]:
    """At most `room` lines: all rows if they fit; else the judge (it makes most of the calls), the
    failing rows and the first (slowest) ones, in order, and one row summing the rest."""
    if len(rows) <= room:
        return list(rows), None
    keep_n = max(room - 1, 0)
    judge = [r for r in rows if r.role == "judge"][:keep_n]
    failing = [r for r in rows if r.failing and r.role != "judge"][: keep_n // 2]
    chosen = {id(r) for r in (*judge, *failing)}
    for r in rows:
        if len(chosen) >= keep_n:
            break
        chosen.add(id(r))
    shown = [r for r in rows if id(r) in chosen]
    return shown, _sum_rows([r for r in rows if id(r) not in chosen])


def _sum_rows(rest: Sequence[EndpointRow]) -> EndpointRow:
    etas = [r.eta_s for r in rest if r.eta_s is not None]
    return EndpointRow(
        label=f"+{len(rest)} more",
        role="rest",
        calls=sum(r.calls for r in rest),
        calls_expected=None
        if any(r.calls_expected is None for r in rest)
        else sum(r.calls_expected or 0 for r in rest),
        pace=Pace(calls_per_min=sum(r.pace.calls_per_min or 0 for r in rest)),
        limits=Limits(
            rate_limited=sum(r.limits.rate_limited for r in rest), errors=sum(r.limits.errors for r in rest)
        ),
        spent=sum(r.spent for r in rest),
        eta_s=max(etas, default=0.0) if len(etas) == len(rest) else None,
    )


# ------------------------------------------------------------------------------------------- words


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    if seconds == math.inf:
        return "stalled"
    if 0 < seconds < 0.5:
        return "<1s"  # left, but under a second: "0s" would read as done
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def count(n: float) -> str:
    if n < 10_000:
        return f"{n:,.0f}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1e6:.2f}M"


def money(spent: float, cap: float | None) -> str:
    return f"${spent:.2f}" + (f"/${cap:.2f}" if cap is not None else "")


def _done_of(done: float, expected: float | None) -> str:
    return count(done) + ("/?" if expected is None else f"/{count(expected)}")


def _limit(now: int | None, limit: int | None, learned: bool) -> str:
    pace = "-" if now is None else count(now)
    return f"{pace}/{count(limit)}" + ("*" if learned else "") if limit else pace


def totals_text(t: Totals) -> str:
    pct = f" {100 * t.pairs_done / t.pairs_planned:.0f}%" if t.pairs_planned else ""
    parts = [
        f"pairs {_done_of(t.pairs_done, t.pairs_planned)}{pct}",
        f"calls {_done_of(t.calls, t.calls_expected)}",
        "- calls/s" if t.calls_per_s is None else f"{t.calls_per_s:,.1f} calls/s",
        "- tok/min" if t.tokens_per_min is None else f"{count(t.tokens_per_min)} tok/min",
        money(t.spent, t.cap),
        f"{t.errors} err",
        f"ETA {duration(t.eta_s)}" if t.state == "running" else t.state,
    ]
    return " | ".join(parts)


def head_text(board: Board) -> str:
    """The totals line: the totals, and the coordinator's state when there is one."""
    head = totals_text(board.totals)
    return f"{head} | {board.coordinator}" if board.coordinator else head


def _waits(r: EndpointRow) -> str:
    told = f"429 x{r.limits.rate_limited}" if r.limits.rate_limited else ""
    return ", ".join(x for x in (told, r.waits) if x)


def _short(r: EndpointRow) -> str:
    """An endpoint in a few words for the plain line."""
    words = [r.label]
    if r.held_by:
        words.append(f"by {r.held_by}")
    if r.limit_use:
        words.append(f"{100 * r.limit_use:.0f}%")
    if r.limits.errors:
        words.append(f"{r.limits.errors} err")
    if r.waits:
        words.append(r.waits)
    words.append(duration(r.eta_s))
    return " ".join(words)


def plain_line(board: Board, width: int = PLAIN_WIDTH) -> str:
    """One line for logs: the totals, then at most PLAIN_ENDPOINTS endpoints that hold the sweep back."""
    head = f"[ifsweep] {head_text(board)}"
    if board.batches:
        head += f" | {board.batches}"
    busy = [r for r in board.rows if r.eta_s is None or r.eta_s > 0 or r.failing][:PLAIN_ENDPOINTS]
    line = head
    for i, r in enumerate(busy):
        more = f"{line}{' || ' if i == 0 else '; '}{_short(r)}"
        if len(more) > width:
            break
        line = more
    return line[:width]


# ------------------------------------------------------------------------------------------- tables

COLUMNS = ("endpoint", "calls", "rpm", "tpm", "429 / waits", "err", "spent", "ETA", "held by")


def _cells(r: EndpointRow) -> tuple[str, ...]:
    name = f"{r.label} (judge)" if r.role == "judge" else r.label
    return (
        name,
        _done_of(r.calls, r.calls_expected),
        _limit(r.pace.calls_per_min, r.limits.rpm, r.limits.rpm_learned),
        _limit(r.pace.tokens_per_min, r.limits.tpm, r.limits.tpm_learned),
        _waits(r),
        str(r.limits.errors),
        money(r.spent, r.cap),
        duration(r.eta_s),
        r.held_by,
    )


def _aligned(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return [
        "  ".join(
            c.ljust(w) if i in _LEFT else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


_LEFT = (0, 4, 8)  # columns of words; the others are figures


def _table(rows: Sequence[EndpointRow]) -> list[str]:
    """The header, a rule, then one line per row."""
    head, *body = _aligned([COLUMNS, *(_cells(r) for r in rows)])
    return [head, "-" * len(head), *body]


def table_lines(board: Board) -> list[str]:
    """The whole board as plain text: the totals, then every endpoint. For the end of a plain run and
    for `ifsweep status`."""
    batches = [board.batches] if board.batches else []
    batches += [board.stopping] if board.stopping else []
    learned = any(
        (lim.rpm and lim.rpm_learned) or (lim.tpm and lim.tpm_learned)
        for lim in (r.limits for r in board.rows)
    )  # the note explains a "*" only where a cell shows one (`_limit`)
    return [head_text(board), *batches, "", *_table(board.rows), *([LEARNED_NOTE] if learned else [])]


LEARNED_NOTE = "* learned from the provider's headers"


def rich_board(board: Board, height: int, width: int) -> Text:
    """The live view: the totals, then as many endpoint rows as the terminal holds (`fit`), as the
    same plain table `table_lines` prints, coloured (rich's own Table costs ~30 ms to lay out 40 rows,
    too much for a redraw twice a second)."""
    from rich.text import Text

    totals = head_text(board) + (f"\n{board.batches}" if board.batches else "")
    totals += f"\n{board.stopping}" if board.stopping else ""
    totals_lines = sum(max(1, math.ceil(len(part) / max(width, 1))) for part in totals.split("\n"))
    shown, rest = fit(board.rows, max(1, height - RICH_CHROME - totals_lines))
    lines = _table([*shown, *([rest] if rest is not None else [])])
    text = Text(totals, style="bold", no_wrap=False, end="\n")
    for line, r in zip(lines, [None, None, *shown, *([rest] if rest is not None else [])], strict=True):
        style = (
            "bold"
            if r is None
            else "red"
            if r.limits.errors
            else "yellow"
            if r.waits
            else "dim"
            if r.role == "rest"
            else ""
        )
        text.append("\n" + line[:width], style=style)
    return text
