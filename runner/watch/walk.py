"""The ETA's walk (runner/watch/eta.py says what it models): the lanes as arrays, one step per moment a
model moves on to its next benchmark, each step a few vector operations. Pure: numbers in, an
Outlook out. Its own module so that numpy loads when an ETA is first needed, not when the CLI starts."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np

from ifsweep.runner.watch.eta import EPS, INF, UNKNOWN, Capacity, Lane, Outlook, Phase, has_work


class _Walk:
    """The lanes as arrays, so one step of the walk is a few vector operations (a sweep of 200 models
    and 4 benchmarks takes 800 steps). Within a phase a lane's rate on its own and its use of the judge
    and of the slots per pair do not change: they are worked out when the lane enters the phase."""

    def __init__(
        self, lanes: list[Lane], queues: list[list[Phase]], caps: list[Capacity], judge: Capacity | None
    ) -> None:
        self.lanes, self.queues, self.caps, self.judge = lanes, queues, caps, judge
        n = len(lanes)
        self.pairs = np.zeros(n)
        self.own = np.zeros(n)
        self.judge_use = np.zeros(n)  # seconds of the judge's capacity per pair
        self.slot_use = np.zeros(n)  # seconds of one slot for calls in flight per pair
        self.own_bound = [""] * n
        for i in range(n):
            self.load(i)

    def load(self, i: int) -> None:
        p, cap, judge = self.queues[i][0], self.caps[i], self.judge
        g, j = p.gen_calls / p.pairs, p.judge_calls / p.pairs
        self.pairs[i] = p.pairs
        self.own[i], self.own_bound[i] = _own(self.lanes[i].workers, p, g, cap, judge)
        self.judge_use[i] = j * _judge_seconds(p, judge) if judge is not None and j > 0 else 0.0
        judge_latency = judge.latency_s or 0.0 if judge is not None else 0.0
        self.slot_use[i] = g * (cap.latency_s or 0.0) + j * judge_latency

    def idle(self, i: int) -> None:
        self.pairs[i], self.own[i], self.judge_use[i], self.slot_use[i] = 1.0, 0.0, 0.0, 0.0

    def rates(self, slots: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pairs per second of each lane now, and which lanes the judge or the slots cut."""
        rate = self.own
        by_judge = by_slots = np.zeros(len(rate), dtype=bool)
        if self.judge is not None:
            rate, by_judge = _share(rate, self.judge_use, 1.0)
        if slots:
            rate, by_slots = _share(rate, self.slot_use, float(slots))
        return rate, by_judge, by_slots


def _own(workers: int, p: Phase, g: float, cap: Capacity, judge: Capacity | None) -> tuple[float, str]:
    """Pairs per second a lane could run with the judge and the slots to itself, and what bounds it."""
    best, why = INF, ""
    if g > 0:
        if cap.calls_per_s / g < best:
            best, why = cap.calls_per_s / g, cap.calls_bound
        if p.gen_tokens > 0 and cap.tokens_per_s / (g * p.gen_tokens) < best:
            best, why = cap.tokens_per_s / (g * p.gen_tokens), "tpm"
    pair_s = g * (cap.latency_s or 0.0)
    if judge is not None and p.judge_depth > 0 and p.judge_calls > 0:
        pair_s += p.judge_depth * (judge.latency_s or 0.0)
    if pair_s > 0 and workers / pair_s < best:
        best, why = workers / pair_s, "workers"
    return best, why


def _judge_seconds(p: Phase, judge: Capacity) -> float:
    """Seconds of the judge's capacity one of the phase's judge calls takes."""
    per_call = 1.0 / judge.calls_per_s if judge.calls_per_s < INF else 0.0
    if p.judge_tokens > 0 and judge.tokens_per_s < INF:
        per_call = max(per_call, p.judge_tokens / judge.tokens_per_s)
    return per_call


def _share(rate: np.ndarray, use: np.ndarray, supply: float) -> tuple[np.ndarray, np.ndarray]:
    """Cut the lanes' rates so their use of one shared resource fits its supply (water-filling);
    also says which lanes were cut."""
    demand = rate * use
    demand[use == 0] = 0.0  # an unbounded lane that does not use the resource asks nothing of it
    if demand.sum() <= supply:  # an infinite demand makes the sum infinite
        return rate, np.zeros(len(rate), dtype=bool)
    level = waterfill(demand, supply)
    cut = demand > level
    out = rate.copy()
    out[cut] = level / use[cut]
    return out, cut


def waterfill(demands: Sequence[float] | np.ndarray, supply: float) -> float:
    """The level L with sum(min(d, L)) == supply (INF when every demand fits): each demand gets at
    most L, demands below L get all they ask."""
    d = np.sort(np.asarray(demands, dtype=float))
    if len(d) == 0:
        return INF
    before = np.empty_like(d)  # what the smaller demands take (exclusive sum: no inf - inf)
    before[0] = 0.0
    np.cumsum(d[:-1], out=before[1:])
    with np.errstate(invalid="ignore"):
        share = (supply - before) / _left_counts(len(d))
    over = d > share
    return float(share[over.argmax()]) if over.any() else INF


@functools.lru_cache(maxsize=8)
def _left_counts(n: int) -> np.ndarray:
    """n, n-1, ..., 1: how many demands share what is left at each rank."""
    return np.arange(n, 0, -1, dtype=float)


def outlook(
    lanes: Sequence[Lane],
    caps: Mapping[str, Capacity | None],
    *,
    judge: str | None = None,
    slots: int | None = None,
) -> Outlook:
    """Walk the lanes forward until every one is done. `caps` holds every lane's endpoint (by lane
    label) and the judge's (by `judge`); `slots` is the sweep's cap on calls in flight."""
    queues = [[p for p in lane.phases if has_work(p)] for lane in lanes]
    judge_cap = caps.get(judge) if judge is not None else None
    if judge_cap is None and any(p.judge_calls > EPS for q in queues for p in q):
        return UNKNOWN
    finish: dict[str, float] = {lane.label: 0.0 for lane in lanes}
    if judge is not None:
        finish[judge] = 0.0
    busy = [(lane, q) for lane, q in zip(lanes, queues, strict=True) if q]
    if not busy:
        return Outlook(0.0, finish)
    lane_caps = [caps.get(lane.label) for lane, _ in busy]
    if any(c is None for c in lane_caps):
        return UNKNOWN
    walk = _Walk(
        [lane for lane, _ in busy], [q for _, q in busy], [c or Capacity() for c in lane_caps], judge_cap
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _walk(walk, finish, judge, slots)


def _walk(walk: _Walk, finish: dict[str, float], judge: str | None, slots: int | None) -> Outlook:
    t = 0.0
    alive = np.ones(len(walk.lanes), dtype=bool)
    rate, by_judge, by_slots = walk.rates(slots)
    bound = {
        lane.label: "judge" if j else "slots" if s else walk.own_bound[i]
        for i, (lane, j, s) in enumerate(zip(walk.lanes, by_judge, by_slots, strict=True))
    }
    if judge is not None and walk.judge is not None:
        bound.update(_judge_bound(walk, rate, judge))
    first_pace = _endpoint_rates(walk, rate, judge)
    while alive.any():
        left = np.where(alive & (rate > 0), walk.pairs / np.where(rate > 0, rate, 1.0), INF)
        dt = float(left.min())
        if dt == INF:
            return Outlook(INF, {k: INF for k in finish}, bound, first_pace)
        t += dt
        walk.pairs -= np.where(alive, np.minimum(rate * dt, walk.pairs), 0.0)
        for i in np.flatnonzero(alive & (walk.pairs <= EPS * np.maximum(1.0, left))):
            _next_phase(walk, int(i), alive, finish, judge, t)
        rate, _j, _s = walk.rates(slots)
    return Outlook(t, finish, bound, first_pace)


def _endpoint_rates(walk: _Walk, rate: np.ndarray, judge: str | None) -> dict[str, float]:
    """Calls per second the walk's first step expects of each endpoint."""
    out: dict[str, float] = {}
    judge_calls = 0.0
    for i, (lane, q) in enumerate(zip(walk.lanes, walk.queues, strict=True)):
        p = q[0]
        r = float(rate[i]) if np.isfinite(rate[i]) else 0.0
        out[lane.label] = r * p.gen_calls / p.pairs
        judge_calls += r * p.judge_calls / p.pairs
    if judge is not None:
        out[judge] = judge_calls
    return out


def _next_phase(
    walk: _Walk, i: int, alive: np.ndarray, finish: dict[str, float], judge: str | None, t: float
) -> None:
    q = walk.queues[i]
    if judge is not None and q[0].judge_calls > EPS:
        finish[judge] = t
    q.pop(0)
    if q:
        walk.load(i)
    else:
        alive[i] = False
        finish[walk.lanes[i].label] = t
        walk.idle(i)


def _judge_bound(walk: _Walk, rate: np.ndarray, judge: str) -> dict[str, str]:
    """The judge's own limit, when the lanes use all of it."""
    cap = walk.judge
    assert cap is not None
    calls = tokens = 0.0
    for i, q in enumerate(walk.queues):
        p = q[0]
        if p.judge_calls > 0 and np.isfinite(rate[i]):
            per_s = rate[i] * p.judge_calls / p.pairs
            calls += per_s
            tokens += per_s * p.judge_tokens
    by_calls, by_tokens = calls / cap.calls_per_s, tokens / cap.tokens_per_s
    if max(by_calls, by_tokens) < 0.98:
        return {}
    return {judge: cap.calls_bound if by_calls >= by_tokens else "tpm"}
