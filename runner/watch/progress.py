"""What the sweep is doing: a live rich board on a terminal, a plain line every few seconds otherwise
(CI, logs) and the whole board at the end. Reads the pipeline's counters, the endpoints' limiter
statistics and provider events; never touches the scheduler's state. The layout is runner/watch/board.py,
the ETA runner/watch/eta.py (docs/design/progress.md)."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import anyio

from ifsweep.providers import EndpointStats, ProviderEvent
from ifsweep.runner.watch.board import Board, Limits, Pace, duration, plain_line, rich_board, table_lines
from ifsweep.runner.watch.eta import OWN_BOUNDS, UNKNOWN, Outlook
from ifsweep.runner.watch.outcomes import Counters, JudgeCounters
from ifsweep.runner.watch.pace import LIMIT_WINDOW_S, RATE_WINDOW_S, Window
from ifsweep.runner.watch.reading import Reading, SweepPlan, make_board, settled
from ifsweep.runner.watch.settling import stop_text
from ifsweep.runner.watch.workload import Tally, Use, use_by_endpoint

if TYPE_CHECKING:
    from rich.text import Text

    from ifsweep.providers.batch.endpoint import BatchProgress

T = TypeVar("T")
PLAIN_EVERY_S = 5.0  # how often the plain (no terminal) mode prints its line
SAMPLE_EVERY_S = 1.0  # how often the plain mode samples the totals (the rates need samples)
RICH_EVERY_S = 0.5  # how often the live table is redrawn
# The walk (walk.outlook) is redone at most every ETA_EVERY_S, and never more often than COST_SHARE of
# the time; the view as a whole waits at least 1 / VIEW_SHARE times what its last refresh cost. With
# 200 models a refresh costs about 15 ms and a walk a few (perf/progress_perf.py): the view must not
# slow the sweep, whatever the number of models.
ETA_EVERY_S = 1.0
COST_SHARE = 0.02
VIEW_SHARE = 0.02


@dataclass(slots=True)
class Backoff:
    message: str
    until: float
    kind: str = "backoff"


@dataclass(slots=True)
class _Efficiency:
    """How much of its modelled capacity each endpoint achieves, measured while its own limit holds
    it (runner/watch/eta.py's OWN_BOUNDS; the judge at its limit): a model paced to 60 rpm whose workers
    also wait on a busy judge makes fewer than 60 calls a minute, and the walk should know. Running
    totals per endpoint, sampled into the window: calls made, and calls the walk expected of the
    endpoint at full capacity, over the same spells."""

    made: dict[str, float] = field(default_factory=dict)
    modelled: dict[str, float] = field(default_factory=dict)
    last_made: dict[str, int] = field(default_factory=dict)
    factor: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class ProgressState:
    counters: Mapping[tuple[str, str], Counters]
    spent: Callable[[str | None], float]  # spent dollars by label (None: whole sweep)
    caps: Mapping[str | None, float | None]
    backoffs: dict[str, Backoff] = field(default_factory=dict)
    plan: SweepPlan | None = None
    # Limiter statistics by label, the judge's included (set once the provider pool is open).
    endpoints: dict[str, Callable[[], EndpointStats]] = field(default_factory=dict)
    # Batch mode's endpoints by label (providers/batch/endpoint.py), for the batches line.
    batches: dict[str, Callable[[], BatchProgress]] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    window: Window = field(default_factory=lambda: Window(LIMIT_WINDOW_S))  # a full minute for rpm / tpm
    _outlook: Outlook = UNKNOWN
    _due: float = 0.0  # when the walk is redone
    _walked: float = 0.0  # when it was last done
    _sampled: float | None = None  # when the window was last sampled
    _efficiency: _Efficiency = field(default_factory=_Efficiency)
    # Each judge's verdicts and calls (the pipeline's JudgeCounters), by label.
    judges: Mapping[str, JudgeCounters] = field(default_factory=dict)
    # The coordinator's state in a few words (providers/coord/redis_state.py), when there is one.
    coordinator: Callable[[], str] | None = None
    # `[run] stop_when`: each model's intervals and whether it is settled (StopWatch.view).
    stopping: Callable[[], dict[str, Any]] | None = None

    def on_backoff(self, endpoint: str, message: str, wait_s: float | None, kind: str = "backoff") -> None:
        self.backoffs[endpoint] = Backoff(message, self.clock() + (wait_s or 2.0), kind)

    def on_event(self, event: ProviderEvent) -> None:
        """The provider pool's `on_event`: back-offs and 429 waits show until they end."""
        if event.kind in ("backoff", "rate_limited"):
            self.on_backoff(event.endpoint, event.message, event.wait_s, event.kind)

    def waiting(self) -> list[str]:
        now = self.clock()
        return [b.message for b in self.backoffs.values() if b.until > now]

    # ------------------------------------------------------------------------------------ the board

    def board(self) -> Board:
        """Sample the counters and build the board; redoes the walk when it is due."""
        now = self.clock()
        tallies = {k: Tally.of(c) for k, c in self.counters.items()}
        use = use_by_endpoint(tallies, self.plan.judge if self.plan is not None else None)
        panel = self.plan.panel if self.plan is not None else ()
        if len(panel) > 1:
            # One row per judge: its own calls and tokens, and the panel's mean latency (the ETA's walk
            # models the panel as one endpoint: docs/design/judges.md).
            whole = use.pop(panel[0], Use())
            for label in panel:
                jc = self.judges.get(label, JudgeCounters())
                use[label] = Use(
                    jc.calls,
                    jc.input_tokens + jc.output_tokens,
                    whole.latency_s * jc.calls / max(whole.calls, 1),
                )
        self._sample(now, use)
        due = self.plan is not None and now >= self._due
        reading = self.reading(now, tallies, use, latency=due)
        lanes = reading.lanes()
        if due:
            # numpy loads with the first walk (about 0.1-0.2 s): that is no walk's cost, and timed with
            # it the next walk waited 5-10 s, the board counting down an outlook made from nothing.
            importlib.import_module("ifsweep.runner.watch.walk")
            started = time.perf_counter()
            self._outlook, self._walked = reading.outlook(lanes), now
            self._due = now + max(ETA_EVERY_S, (time.perf_counter() - started) / COST_SHARE)
        paced = self.window.per_s("calls") is not None and any(u.calls for u in use.values())
        seen = self._outlook.later(now - self._walked) if paced else UNKNOWN
        board = make_board(reading, lanes, settled(seen, lanes, list(use), reading.judge))
        if self.batches:
            board = dataclasses.replace(board, batches=batch_text([get() for get in self.batches.values()]))
        if self.coordinator is not None:
            board = dataclasses.replace(board, coordinator=self.coordinator())
        if self.stopping is not None:
            board = dataclasses.replace(board, stopping=stop_text(self.stopping()))
        return board

    def reading(
        self, now: float, tallies: Mapping[tuple[str, str], Tally], use: Mapping[str, Use], *, latency: bool
    ) -> Reading:
        """What the board shows now. `latency`: also what the walk needs (recent latencies, and the
        share of its capacity each endpoint achieves), worked out only when the walk is due."""
        stats = {label: get() for label, get in self.endpoints.items()}
        tokens_per_s = self.window.per_s("tokens")
        if latency:
            self._update_efficiency()
        return Reading(
            tallies=tallies,
            plan=self.plan,
            limits={label: limits_of(s) for label, s in stats.items()},
            pace={label: self._pace(label, latency) for label in use},
            efficiency=dict(self._efficiency.factor),
            spent={label: self.spent(label) for label in (None, *use)},
            caps=self.caps,
            calls_per_s=self.window.per_s("calls"),
            tokens_per_min=None if tokens_per_s is None else tokens_per_s * 60,
            pair_errors=sum(c.errors for c in self.counters.values()),
            waits={label: self._waits(s.endpoint, now) for label, s in stats.items()},
            judge_calls={label: jc.calls for label, jc in self.judges.items()},
        )

    def _sample(self, now: float, use: Mapping[str, Use]) -> None:
        """Add the running totals to the window. For each endpoint its own limit held since the last
        sample, count the calls it made and the calls the walk expected of it at full capacity."""
        eff, o = self._efficiency, self._outlook
        dt = 0.0 if self._sampled is None else now - self._sampled
        for label, rate in o.calls_per_s.items():
            if o.bound.get(label, "") in OWN_BOUNDS and label in use:
                factor = eff.factor.get(label, 1.0)
                eff.modelled[label] = eff.modelled.get(label, 0.0) + rate / factor * dt
                eff.made[label] = eff.made.get(label, 0.0) + use[label].calls - eff.last_made.get(label, 0)
        eff.last_made = {label: u.calls for label, u in use.items()}
        self._sampled = now
        totals: dict[str, float] = {
            "calls": sum(u.calls for u in use.values()),
            "tokens": sum(u.tokens for u in use.values()),
        }
        for label, u in use.items():
            totals |= {
                f"calls:{label}": u.calls,
                f"tokens:{label}": u.tokens,
                f"latency:{label}": u.latency_s,
            }
        for label, n in eff.made.items():
            totals |= {f"made:{label}": n, f"modelled:{label}": eff.modelled[label]}
        self.window.add(now, totals)

    def _update_efficiency(self) -> None:
        eff = self._efficiency
        for label in eff.made:
            ratio = self.window.ratio(f"made:{label}", f"modelled:{label}")
            if ratio is not None:
                eff.factor[label] = ratio

    def _pace(self, label: str, latency: bool) -> Pace:
        # Measured over a full minute, as the limits are: never a few seconds scaled up past them.
        calls, tokens = (
            self.window.per_min_counted(f"calls:{label}"),
            self.window.per_min_counted(f"tokens:{label}"),
        )
        return Pace(
            None if calls is None else round(calls),
            None if tokens is None else round(tokens),
            self._latency(label) if latency else None,
        )

    def _latency(self, label: str) -> float | None:
        """Mean seconds per call of the last seconds (calls slow down as a machine or a provider gets
        busy), or since the start while the window holds no call."""
        d = self.window.deltas((f"latency:{label}", f"calls:{label}"), RATE_WINDOW_S)
        if d is not None and d[0][1] > 0:
            return d[0][0] / d[0][1]
        last = self.window.last()
        calls = last.get(f"calls:{label}", 0.0)
        return last[f"latency:{label}"] / calls if calls else None

    def _waits(self, endpoint: str, now: float) -> str:
        """A back-off or 429 wait of this endpoint in a few words, while it lasts."""
        b = self.backoffs.get(endpoint)
        left = 0.0 if b is None else b.until - now
        if b is None or left <= 0:
            return ""
        if b.kind == "rate_limited":
            return f"waiting {left:.1f} s"
        if " error from " in b.message:
            return f"{b.message.split(' error from ')[0]} error, retry in {left:.1f} s"
        return f"pausing {left:.1f} s near its limit"

    def summary_fields(self) -> dict[str, Any]:
        """What `ifsweep status` needs to redo this ETA from the shards (written into summary.json)."""
        if self.plan is None:
            return {}
        limits = {label: limits_of(get()).as_json() for label, get in self.endpoints.items()}
        return {
            "progress": self.plan.as_json()
            | {
                "limits": limits,
                "efficiency": dict(self._efficiency.factor),
                "cap_usd": self.caps.get(None),
                "caps": {k: v for k, v in self.caps.items() if k is not None},
            },
            # Each judge's progress and spend (a pair is done when every judge has its verdict).
            "by_judge": [
                {
                    "judge": label,
                    "planned": jc.planned,
                    "done": jc.done,
                    "cached": jc.cached,
                    "errors": jc.errors,
                    "calls": jc.calls,
                    "spent_usd": self.spent(label),
                }
                for label, jc in self.judges.items()
            ],
        }


def batch_text(items: list[BatchProgress]) -> str:
    """batches: 3 submitted, 2 running, 1 done, 40 requests collecting, ETA 5m"""
    submitted = sum(b.submitted for b in items)
    running = sum(b.running for b in items)
    done = sum(b.done for b in items)
    waiting = sum(b.requests_waiting for b in items)
    etas = [b.eta_s for b in items if b.running]
    text = f"batches: {submitted} submitted, {running} running, {done} done"
    if waiting:
        text += f", {waiting} requests collecting"
    if gone := sum(b.results_gone for b in items):
        text += f", {gone} requests' results gone at the provider (errors: run again to send them)"
    if running:
        known = [e for e in etas if e is not None]
        text += f", ETA {duration(max(known))}" if len(known) == len(etas) else ", ETA unknown"
    return text


def limits_of(s: EndpointStats) -> Limits:
    return Limits(
        rpm=s.rpm_limit,
        tpm=s.tpm_limit,
        rpm_learned=s.rpm_learned,
        tpm_learned=s.tpm_learned,
        concurrency=s.concurrency_limit,
        rate_limited=s.rate_limited,
        errors=s.errors,
    )


async def run_progress(state: ProgressState, mode: str, out: TextIO | None = None) -> None:
    """Until cancelled. `mode`: rich | plain | off | auto (rich on a terminal, plain otherwise)."""
    out = out or sys.stderr
    if mode == "off":
        await anyio.sleep_forever()
    if mode == "auto":
        mode = "rich" if out.isatty() else "plain"
    if mode == "plain":
        await _run_plain(state, out)
    else:
        await _run_rich(state, out)


async def _run_plain(state: ProgressState, out: TextIO) -> None:
    """A line every PLAIN_EVERY_S (sampling about every SAMPLE_EVERY_S for the rates); the whole board
    at the end."""
    next_line = state.clock() + PLAIN_EVERY_S
    try:
        while True:
            board, cost = _timed(state.board)
            if state.clock() >= next_line:
                next_line += PLAIN_EVERY_S
                print(plain_line(board), file=out, flush=True)
            await anyio.sleep(max(SAMPLE_EVERY_S, cost / VIEW_SHARE))
    finally:
        # The whole board only: its first line is the totals a last plain line would say again.
        print("\n".join(table_lines(state.board())), file=out, flush=True)


async def _run_rich(state: ProgressState, out: TextIO) -> None:
    from rich.console import Console
    from rich.live import Live

    console = Console(file=out)

    def render() -> Text:
        return rich_board(state.board(), console.size.height, console.size.width)

    with Live(render(), console=console, auto_refresh=False, transient=False) as live:
        try:
            while True:
                cost = _timed(lambda: live.update(render(), refresh=True))[1]
                await anyio.sleep(max(RICH_EVERY_S, cost / VIEW_SHARE))
        finally:
            live.update(render(), refresh=True)


def _timed(f: Callable[[], T]) -> tuple[T, float]:
    """f() and the CPU seconds it took (this thread's: the sweep's other threads do not count)."""
    started = time.thread_time()
    out = f()
    return out, time.thread_time() - started
