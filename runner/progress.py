"""What the sweep is doing, per model: a live rich table on a terminal, a plain line every few seconds
otherwise (CI, logs). Reads counters and provider events; never touches the scheduler's state."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

import anyio

from ifsweep.providers import ProviderEvent
from ifsweep.runner.pipeline import Counters
from ifsweep.runner.scheduler import eta_s

PLAIN_EVERY_S = 5.0  # how often the plain (no terminal) mode prints its line


@dataclass(slots=True)
class Backoff:
    message: str
    until: float


@dataclass(slots=True)
class ProgressState:
    counters: Mapping[tuple[str, str], Counters]
    spent: Callable[[str | None], float]  # spent dollars by model label (None: whole sweep)
    caps: Mapping[str | None, float | None]
    backoffs: dict[str, Backoff] = field(default_factory=dict)

    def on_backoff(self, endpoint: str, message: str, wait_s: float | None) -> None:
        self.backoffs[endpoint] = Backoff(message, time.monotonic() + (wait_s or 2.0))

    def on_event(self, event: ProviderEvent) -> None:
        """The provider pool's `on_event`: back-offs and 429 waits show until they end."""
        if event.kind in ("backoff", "rate_limited"):
            self.on_backoff(event.endpoint, event.message, event.wait_s)

    def per_model(self) -> list[tuple[str, Counters]]:
        merged: dict[str, Counters] = {}
        for (model, _bench), c in self.counters.items():
            m = merged.setdefault(model, Counters(started=c.started))
            for name in ("planned", "done", "cached", "errors", "calls", "judge_calls", "unparsed"):
                setattr(m, name, getattr(m, name) + getattr(c, name))
            m.input_tokens += c.input_tokens
            m.output_tokens += c.output_tokens
        return sorted(merged.items())

    def waiting(self) -> list[str]:
        now = time.monotonic()
        return [b.message for b in self.backoffs.values() if b.until > now]


def _money(spent: float, cap: float | None) -> str:
    return f"${spent:.4f}" + (f" / ${cap:.2f}" if cap is not None else "")


def _eta(c: Counters) -> str:
    e = eta_s(c)
    if e is None:
        return "?"
    if e == float("inf"):
        return "stalled"
    return f"{e:.0f}s" if e < 120 else f"{e / 60:.1f}m"


def plain_line(state: ProgressState, now: float | None = None) -> str:
    """One line for logs: per model done/total, calls/s, ETA; dollars vs cap; back-offs in words."""
    now = time.monotonic() if now is None else now
    parts = []
    for model, c in state.per_model():
        rate = (c.calls + c.judge_calls) / max(now - c.started, 1e-9)
        errors = f" ({c.errors} err)" if c.errors else ""
        parts.append(f"{model} {c.done + c.errors}/{c.planned}{errors} {rate:.1f} calls/s ETA {_eta(c)}")
    total = _money(state.spent(None), state.caps.get(None))
    waiting = state.waiting()
    tail = f" | {'; '.join(waiting)}" if waiting else ""
    return f"[ifsweep] {' | '.join(parts)} | spent {total}{tail}"


async def run_progress(state: ProgressState, mode: str, out: TextIO | None = None) -> None:
    """Until cancelled. `mode`: rich | plain | off | auto (rich on a terminal, plain otherwise)."""
    out = out or sys.stderr
    if mode == "off":
        await anyio.sleep_forever()
    if mode == "auto":
        mode = "rich" if out.isatty() else "plain"
    if mode == "plain":
        try:
            while True:
                await anyio.sleep(PLAIN_EVERY_S)
                print(plain_line(state), file=out, flush=True)
        finally:
            print(plain_line(state), file=out, flush=True)
    await _run_rich(state, out)


async def _run_rich(state: ProgressState, out: TextIO) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    def render() -> Table:
        t = Table(title="ifsweep", expand=False)
        for col in ("model", "done/total", "errors", "calls/s", "tokens/min", "spent", "ETA"):
            t.add_column(col, justify="right" if col != "model" else "left")
        now = time.monotonic()
        for model, c in state.per_model():
            elapsed = max(now - c.started, 1e-9)
            t.add_row(
                model,
                f"{c.done + c.errors}/{c.planned}",
                str(c.errors),
                f"{(c.calls + c.judge_calls) / elapsed:.1f}",
                f"{(c.input_tokens + c.output_tokens) / elapsed * 60:,.0f}",
                _money(state.spent(model), state.caps.get(model)),
                _eta(c),
            )
        waiting = state.waiting()
        t.caption = f"spent {_money(state.spent(None), state.caps.get(None))}" + (
            "  |  " + "; ".join(waiting) if waiting else ""
        )
        return t

    with Live(render(), console=Console(file=out), refresh_per_second=4, transient=False) as live:
        try:
            while True:
                await anyio.sleep(0.25)
                live.update(render())
        finally:
            live.update(render())
