"""How long a sweep has left: what each model still has to do, benchmark by benchmark, played forward
at what each endpoint can do (docs/design/progress.md).

A pair costs its model one generation call and the judge some number of calls that depends on the
benchmark (0 for FollowBench's rule-scored categories, about 80 for an EIFBench party task), so pairs
are no unit of time. A model takes its benchmarks one after another; while it works through one, it
runs as fast as the tightest of: its own endpoint (rpm, tpm, and its concurrency over its latency), its
workers over the time one pair takes, its share of the judge, and its share of the sweep's slots for
calls in flight. The judge and the slots are shared by water-filling (a model that asks for little gets
all it asks; the rest is split evenly among the others), which is how a FIFO queue treats a model whose
pairs need one judge call beside one whose pairs need eighty. Between two moments when some model
moves on to its next benchmark (or ends) every rate is constant, so the whole future is a short list of
such steps: `walk.outlook` walks them (runner/watch/walk.py, with numpy, loaded when an ETA is first
needed). Here: what the walk reads and what it says.

Everything here is a pure function of the numbers handed in; nothing reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

INF = math.inf
EPS = 1e-9  # below this a count is zero (the walk moves through floats)
# The least time left shown while work is left: the board reads it as "<1s", never as done.
OVERDUE_S = 0.01


@dataclass(frozen=True, slots=True)
class Phase:
    """What one model has left of one benchmark. Counts are floats: the walk moves through them."""

    pairs: float  # pairs not finished, those in flight included
    gen_calls: float  # generation calls still to make (a pair in flight may have made its own)
    judge_calls: float  # judge calls still to make
    gen_tokens: float = 0.0  # tokens (prompt and answer) of one generation call
    judge_tokens: float = 0.0  # of one judge call
    judge_depth: float = 0.0  # judge calls made one after another in a pair (turns of its longest task)


@dataclass(frozen=True, slots=True)
class Lane:
    """One model's remaining work, its phases in the order the scheduler takes them."""

    label: str
    phases: tuple[Phase, ...]
    workers: int  # pairs the model may have in flight at once

    @property
    def busy(self) -> bool:
        return any(has_work(p) for p in self.phases)


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one endpoint can do per second, and what sets that."""

    calls_per_s: float = INF
    tokens_per_s: float = INF
    latency_s: float | None = None  # mean seconds one call takes, once known
    calls_bound: str = ""  # "rpm" or "concurrency": which bound sets calls_per_s


# What an endpoint's own capacity is bounded by (rather than a share of the judge or of the slots).
OWN_BOUNDS = frozenset({"rpm", "tpm", "concurrency", "workers"})


def capacity(
    *, rpm: int | None, tpm: int | None, concurrency: int, latency_s: float | None
) -> Capacity | None:
    """An endpoint's capacity from its limits (configured or learned) and Little's law: no more calls
    per second than calls allowed in flight over the seconds each takes. None while nothing bounds it
    (no limit and no call answered yet): its pace is unknown."""
    calls, bound = (rpm / 60.0, "rpm") if rpm else (INF, "")
    if latency_s is not None and latency_s > 0 and concurrency / latency_s < calls:
        calls, bound = concurrency / latency_s, "concurrency"
    tokens = tpm / 60.0 if tpm else INF
    if calls == INF and tokens == INF:
        return None
    return Capacity(calls, tokens, latency_s, bound)


def scaled(cap: Capacity | None, efficiency: float) -> Capacity | None:
    """`cap` at the share of it the endpoint achieves (its latency is measured, so it stays)."""
    if cap is None or efficiency == 1.0:
        return cap
    return Capacity(
        cap.calls_per_s * efficiency, cap.tokens_per_s * efficiency, cap.latency_s, cap.calls_bound
    )


@dataclass(frozen=True, slots=True)
class Outlook:
    """Where the walk ends. `seconds`: None when some endpoint with work left has no known capacity,
    INF when nothing can move. `finish_s`: per endpoint label (models and the judge), when its last
    call is expected. `bound`: what holds each endpoint back now (`OWN_BOUNDS`: its own capacity).
    `calls_per_s`: per endpoint, the calls per second the walk expects of it now (see
    `progress.ProgressState`, which compares them with what the endpoints achieve)."""

    seconds: float | None
    finish_s: Mapping[str, float] = field(default_factory=dict)
    bound: Mapping[str, str] = field(default_factory=dict)
    calls_per_s: Mapping[str, float] = field(default_factory=dict)

    def without(self, done: set[str]) -> Outlook:
        """The same outlook once the lanes in `done` have nothing left (the walk may be a second old)."""
        if not done or self.seconds is None:
            return self
        return Outlook(
            self.seconds,
            {k: 0.0 if k in done else v for k, v in self.finish_s.items()},
            {k: v for k, v in self.bound.items() if k not in done},
            self.calls_per_s,
        )

    def later(self, elapsed_s: float) -> Outlook:
        """The same outlook `elapsed_s` after it was made: every time left is that much shorter."""
        if self.seconds is None or elapsed_s <= 0:
            return self
        return Outlook(
            max(0.0, self.seconds - elapsed_s),
            {k: max(0.0, v - elapsed_s) for k, v in self.finish_s.items()},
            self.bound,
            self.calls_per_s,
        )

    def at_least(self, floor_s: float, busy: set[str]) -> Outlook:
        """The same outlook with no less than `floor_s` left, overall and for each endpoint in `busy`."""
        if self.seconds is None:
            return self
        return Outlook(
            max(floor_s, self.seconds),
            {k: max(floor_s, v) if k in busy else v for k, v in self.finish_s.items()},
            self.bound,
            self.calls_per_s,
        )


UNKNOWN = Outlook(None)


def has_work(p: Phase) -> bool:
    """Whether a phase still asks anything of anyone."""
    return p.pairs > EPS and (p.gen_calls > EPS or p.judge_calls > EPS)
