"""The ETA's pure parts: capacities (runner/watch/eta.py), the walk over phases (runner/watch/walk.py), rates
over a window (runner/watch/pace.py), what is left of a (model, benchmark) (runner/watch/workload.py), and the
live state's ETA on an injected clock."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from ifsweep.providers import EndpointStats
from ifsweep.runner.watch.board import duration
from ifsweep.runner.watch.eta import (
    INF,
    OVERDUE_S,
    Capacity,
    Lane,
    Outlook,
    Phase,
    capacity,
    has_work,
    scaled,
)
from ifsweep.runner.watch.outcomes import Counters
from ifsweep.runner.watch.pace import MIN_SPAN_S, Window
from ifsweep.runner.watch.progress import ProgressState
from ifsweep.runner.watch.reading import SweepPlan, settled
from ifsweep.runner.watch.walk import outlook, waterfill
from ifsweep.runner.watch.workload import (
    PRIOR_CALLS,
    BenchShape,
    Tally,
    calls_per_turn,
    judge_per_pair,
    lanes_of,
    phase_of,
    token_means,
)


def rpm(n: float) -> Capacity:
    return Capacity(calls_per_s=n / 60, calls_bound="rpm")


def lane(label: str, *phases: Phase, workers: int = 8) -> Lane:
    return Lane(label, phases, workers)


def pairs(n: float, judge_per_pair: float = 0.0, **kw: float) -> Phase:
    return Phase(n, n, n * judge_per_pair, **kw)


# --- capacity ---------------------------------------------------------------------------------------


def test_capacity_from_limits_and_littles_law() -> None:
    assert capacity(rpm=600, tpm=None, concurrency=64, latency_s=None) == Capacity(10.0, INF, None, "rpm")
    # 4 calls in flight of 0.5 s each: at most 8 calls/s, below the rpm limit's 10
    cap = capacity(rpm=600, tpm=60_000, concurrency=4, latency_s=0.5)
    assert cap == Capacity(8.0, 1000.0, 0.5, "concurrency")
    assert capacity(rpm=None, tpm=None, concurrency=64, latency_s=None) is None  # no pace yet
    assert scaled(Capacity(10.0, 100.0, 0.2, "rpm"), 0.5) == Capacity(5.0, 50.0, 0.2, "rpm")


def test_waterfill_gives_small_demands_all_they_ask() -> None:
    assert waterfill([1, 2, 3], 10) == INF  # everything fits
    assert waterfill([1, 5, 5], 7) == 3  # 1 fits; the two others share 6
    assert waterfill([INF, 1], 3) == 2
    assert waterfill([], 1) == INF


# --- the walk ----------------------------------------------------------------------------------------


def test_one_model_at_its_rpm() -> None:
    o = outlook([lane("a", pairs(60))], {"a": rpm(60)})
    assert o.seconds == pytest.approx(60)
    assert o.bound == {"a": "rpm"} and o.calls_per_s["a"] == pytest.approx(1.0)


def test_benchmarks_one_after_another_add_up() -> None:
    # 30 rule-scored pairs at 1/s, then 4 pairs of 80 judge calls each on a judge doing 20 calls/s
    # (0.25 pairs/s, the 4 generations going on meanwhile): 30 s, then 16 s. The slowest endpoint
    # alone (34 s of generations, 16 s of judging) would say 34 s.
    lanes = [lane("m", pairs(30), pairs(4, 80))]
    o = outlook(lanes, {"m": rpm(60), "judge": rpm(1200)}, judge="judge")
    assert o.seconds == pytest.approx(46)
    assert o.finish_s["judge"] == pytest.approx(o.seconds)


def test_the_judge_is_shared_by_water_filling() -> None:
    # "light" asks 1 judge call/s (2 pairs/s x 0.5); "heavy" would ask 80 calls/s of a 10/s judge.
    # Light gets its 1 call/s and runs at its own pace; heavy gets the other 9.
    lanes = [lane("light", pairs(20, 0.5)), lane("heavy", pairs(9, 80))]
    o = outlook(lanes, {"light": rpm(120), "heavy": rpm(600), "judge": rpm(600)}, judge="judge")
    assert o.finish_s["light"] == pytest.approx(10)
    assert o.bound == {"light": "rpm", "heavy": "judge", "judge": "rpm"}
    # 10 + 720 judge calls in all at 10/s: the judge ends at 73 s
    assert o.seconds == pytest.approx(73)


def test_tokens_per_minute_bound_the_calls_of_big_prompts() -> None:
    # A judge allowing 60,000 tokens/min (1,000/s): 2,000-token calls go at 0.5/s, 100-token ones at 10/s
    big = [lane("m", pairs(10, 1, judge_tokens=2000))]
    small = [lane("m", pairs(10, 1, judge_tokens=100))]
    caps = {"m": rpm(6000), "judge": Capacity(INF, 1000.0)}
    assert outlook(big, caps, judge="judge").seconds == pytest.approx(20)
    assert outlook(small, caps, judge="judge").seconds == pytest.approx(1, rel=0.01)
    assert outlook(big, caps, judge="judge").bound["judge"] == "tpm"


def test_workers_and_latency_bound_an_unlimited_model() -> None:
    # 4 workers, 0.1 s per generation and one 0.3 s judge turn per pair: 10 pairs/s
    lanes = [lane("m", pairs(100, 1, judge_depth=1), workers=4)]
    caps = {"m": Capacity(INF, INF, 0.1), "judge": Capacity(INF, INF, 0.3)}
    o = outlook(lanes, caps, judge="judge")
    assert o.seconds == pytest.approx(10) and o.bound["m"] == "workers"


def test_slots_for_calls_in_flight_are_shared() -> None:
    # Two unlimited models, calls of 0.1 s, 2 slots in the whole sweep: 20 calls/s between them
    lanes = [lane("a", pairs(100), workers=64), lane("b", pairs(100), workers=64)]
    caps = {"a": Capacity(INF, INF, 0.1), "b": Capacity(INF, INF, 0.1)}
    o = outlook(lanes, caps, slots=2)
    assert o.seconds == pytest.approx(10) and o.bound == {"a": "slots", "b": "slots"}


def test_unknown_without_a_pace_and_stalled_without_capacity() -> None:
    assert outlook([lane("a", pairs(5))], {"a": None}).seconds is None
    assert outlook([lane("a", pairs(5, 1))], {"a": rpm(60)}, judge="judge").seconds is None
    assert outlook([lane("a", pairs(5))], {"a": Capacity(0.0)}).seconds == INF
    # nothing left: done now, whatever is unknown
    assert outlook([lane("a", pairs(0))], {"a": None}).seconds == 0.0


def test_later_counts_down() -> None:
    o = outlook([lane("a", pairs(60))], {"a": rpm(60)}).later(15)
    assert o.seconds == pytest.approx(45) and o.finish_s["a"] == pytest.approx(45)


# --- windows ----------------------------------------------------------------------------------------


def test_window_rates_need_some_seconds_behind_them() -> None:
    w = Window(span_s=30)
    w.add(0.0, {"calls": 0})
    w.add(1.0, {"calls": 10})
    assert w.per_s("calls") is None  # 1 s < MIN_SPAN_S
    for t in range(2, 61):
        w.add(float(t), {"calls": 10.0 * t + (100 if t > 50 else 0), "modelled": 20.0 * t})
    assert MIN_SPAN_S <= 3
    assert w.per_s("calls", over_s=5) == pytest.approx(10)
    assert w.per_s("calls", over_s=20) == pytest.approx(15)  # the jump at 51 s is in these 20 s
    assert w.ratio("calls", "modelled", over_s=5) == pytest.approx(0.5)
    assert len(w._samples) <= 32  # old samples go


# --- what is left ------------------------------------------------------------------------------------

SHAPE = BenchShape(judge_calls=80.0, judge_depth=1.0, prompt_tokens=500.0, judge_prompt_tokens=2000.0)


def test_pairs_in_flight_have_made_some_calls() -> None:
    # 10 planned, 4 finished (1 from stored results), 5 generations and 300 judge calls made:
    # 6 pairs left, 2 of them already generated, 300 - 3 x 80 = 60 judge calls made by those in flight.
    t = Tally(planned=10, finished=4, cached=1, gen_calls=5, judge_calls=300)
    p = phase_of(t, SHAPE, 600.0, 2100.0, 80.0)
    assert (p.pairs, p.gen_calls, p.judge_calls) == (6, 4, 6 * 80 - 60)
    done = phase_of(Tally(planned=3, finished=3, gen_calls=3, judge_calls=240), SHAPE, 1, 1, 80.0)
    assert (done.pairs, done.gen_calls, done.judge_calls) == (0, 0, 0)


def test_judge_calls_per_pair_learn_what_the_calls_made_allow() -> None:
    shapes = {"eif": SHAPE}  # the plan: 80 judge calls a pair
    assert judge_per_pair({("m", "eif"): Tally(planned=10, finished=0)}, shapes, {"m": 2}) == {"eif": 80}
    # Re-asks: 4 pairs done, at most 2 in flight (the workers), 840 calls made: at least 140 a pair
    reasked = {("m", "eif"): Tally(planned=10, finished=4, gen_calls=6, judge_calls=840)}
    assert judge_per_pair(reasked, shapes, {"m": 2}) == {"eif": 140}
    # Stops: 10 pairs done with 400 calls between them: at most 40 a pair
    stopped = {("m", "eif"): Tally(planned=20, finished=10, gen_calls=10, judge_calls=400)}
    assert judge_per_pair(stopped, shapes, {"m": 2}) == {"eif": 40}
    # Within the bounds the plan holds: 2 pairs done, 2 in flight half-way
    assert judge_per_pair({("m", "eif"): Tally(10, 2, 0, 4, 240)}, shapes, {"m": 2}) == {"eif": 80}


def test_judge_calls_per_pair_learn_the_reasks_before_any_pair_is_done() -> None:
    # Every pair in flight, none done: half the replies unparsed, each asked again up to twice
    shapes = {"eif": BenchShape(80.0, 1.0, 500.0, 2000.0, reask=2)}
    t = Tally(planned=6, finished=0, gen_calls=6, judge_calls=350, unparsed=175)
    assert calls_per_turn(0.5, 2) == 1.75 and calls_per_turn(0.0, 2) == 1 and calls_per_turn(3.0, 1) == 2
    assert judge_per_pair({("m", "eif"): t}, shapes, {"m": 8}) == {"eif": 140}
    assert BenchShape.from_json("s", shapes["eif"].as_json()) == shapes["eif"]
    # One garbled reply is no share of 1: a benchmark's first replies weigh against the judge's share
    shapes["fb"] = BenchShape(1.0, 1.0, 100.0, 500.0, reask=2)
    first = {
        ("m", "eif"): Tally(6, 0, 0, 6, 1, unparsed=1),
        ("m", "fb"): Tally(200, 100, 0, 100, 100, unparsed=40),
    }
    share = (1 + PRIOR_CALLS * 41 / 101) / (1 + PRIOR_CALLS)
    assert judge_per_pair(first, shapes, {"m": 8})["eif"] == pytest.approx(80 * calls_per_turn(share, 2))
    assert judge_per_pair(first, shapes, {"m": 8})["eif"] < 130  # not 80 x 3 = 240
    assert BenchShape.from_json("s", {k: 1 for k in ("judge_calls", "judge_depth", "prompt_tokens",
                                                     "judge_prompt_tokens")}).reask == 0  # fmt: skip


def test_a_pair_answered_but_not_judged_has_a_judge_call_to_come() -> None:
    # Far more calls made than the plan had room for: each of the 2 answered pairs still has one
    t = Tally(planned=5, finished=3, gen_calls=5, judge_calls=10_000)
    p = phase_of(t, SHAPE, 1, 1, 80.0)
    assert (p.pairs, p.gen_calls, p.judge_calls) == (2, 0, 2)
    assert has_work(p)


def test_time_left_never_reads_zero_while_work_is_left() -> None:
    busy = [lane("m", pairs(2, 1.0))]
    stale = Outlook(3.0, {"m": 3.0, "judge": 3.0}).later(5.0)  # the countdown ran past the walk's figure
    assert stale.seconds == 0.0
    now = settled(stale, busy, ["m", "judge"], "judge")
    assert now.seconds == OVERDUE_S and now.finish_s == {"m": OVERDUE_S, "judge": OVERDUE_S}
    assert duration(now.seconds) == "<1s" and duration(0.0) == "0s" and duration(0.7) == "1s"
    assert settled(stale, [lane("m", pairs(0))], ["m"]).seconds == 0.0  # nothing left: done


def test_token_means_switch_from_prompts_to_what_was_seen() -> None:
    shapes = {"eif": SHAPE}
    fresh = token_means({("m", "eif"): Tally(planned=5, finished=0)}, shapes)
    assert fresh.gen["eif"] == 500 + 256 and fresh.judge["eif"] > 2000
    seen = token_means({("m", "eif"): Tally(5, 5, 0, 5, 400, 5000, 1000, 800_000)}, shapes)
    assert seen.gen["eif"] == 1000 and seen.judge["eif"] == 2000


def test_lanes_follow_the_benchmark_order() -> None:
    tallies = {("m2", "b"): Tally(4, 0), ("m2", "a"): Tally(2, 0), ("m10", "a"): Tally(1, 0)}
    shapes = {"a": SHAPE, "b": SHAPE}
    lanes = lanes_of(tallies, shapes, ("a", "b"), {"m2": 3})
    assert [(ln.label, [p.pairs for p in ln.phases], ln.workers) for ln in lanes] == [
        ("m2", [2, 4], 3),
        ("m10", [1], 1),
    ]


# --- the live state on an injected clock --------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def stats(model: str, rpm_limit: int | None) -> EndpointStats:
    return EndpointStats(
        endpoint=model, calls=0, in_flight=0, tokens_per_min=0, rpm_limit=rpm_limit, tpm_limit=None,
        rpm_learned=False, tpm_learned=False, concurrency_limit=64, max_concurrency=64, backoff_until=None,
        rate_limited=0, errors=0, usage_estimated=0,
    )  # fmt: skip


def test_live_eta_is_unknown_until_a_pace_then_follows_the_limits() -> None:
    clock = Clock()
    counters = {("a", "x"): Counters(planned=120, started=clock.t)}
    plan = SweepPlan(
        order=("x",), shapes={"x": BenchShape(0, 0, 10, 0)}, workers={"a": 4}, slots=None, judge=None
    )
    state = ProgressState(counters, spent=lambda _l: 0.0, caps={}, plan=plan, clock=clock)
    state.endpoints["a"] = lambda: stats("openai/a", 60)
    assert state.board().totals.eta_s is None  # nothing done yet
    c = counters[("a", "x")]
    for _ in range(20):  # one pair a second, as 60 rpm allows
        clock.t += 1.0
        c.done += 1
        c.calls += 1
        c.latency_s += 0.05
        board = state.board()
    # 100 pairs left at 1/s
    assert board.totals.eta_s == pytest.approx(100, abs=1.5)
    assert board.totals.calls_per_s == pytest.approx(1.0)
    (row,) = board.rows
    # rpm is counted over a full minute: before one has passed, the calls so far (never scaled up)
    assert (row.label, row.held_by, row.calls, row.pace.calls_per_min, row.limits.rpm) == (
        "a",
        "rpm",
        20,
        20,
        60,
    )
    for _ in range(50):
        clock.t += 1.0
        c.done += 1
        c.calls += 1
        board = state.board()
    assert board.rows[0].pace.calls_per_min == 60  # a full minute at 1/s


def test_live_rpm_is_never_a_burst_scaled_past_what_any_minute_saw() -> None:
    """Issue 36, item 12: 40 calls in 5 s after a quiet start showed 160 rpm (the last 20 s, times 3)
    where no minute held more than 40 calls."""
    clock = Clock()
    counters = {("a", "x"): Counters(planned=1000, started=clock.t)}
    state = ProgressState(counters, spent=lambda _l: 0.0, caps={}, clock=clock)
    state.endpoints["a"] = lambda: stats("openai/a", 300)
    c = counters[("a", "x")]
    made: list[tuple[float, int]] = []
    for second in range(40):
        clock.t += 1.0
        if 10 <= second < 15:
            c.calls += 8
        made.append((clock.t, c.calls))
        rpm = state.board().rows[0].pace.calls_per_min
        most = max(n - next(m for t0, m in made if t0 >= t - 60) for t, n in made)  # any minute's calls
        assert rpm is None or rpm <= max(most, 8), (second, rpm, most)


FIRST_WALK = """
import json, sys
from ifsweep.providers import EndpointStats
from ifsweep.runner.watch.outcomes import Counters
from ifsweep.runner.watch.progress import ProgressState
from ifsweep.runner.watch.reading import SweepPlan
from ifsweep.runner.watch.workload import BenchShape
assert "numpy" not in sys.modules  # as in a sweep's process before its first ETA

now = [1000.0]
counters = {("a", "x"): Counters(planned=120, started=now[0])}
shapes = {"x": BenchShape(0, 0, 10, 0)}
plan = SweepPlan(order=("x",), shapes=shapes, workers={"a": 4}, slots=None, judge=None)
state = ProgressState(counters, spent=lambda _l: 0.0, caps={}, plan=plan, clock=lambda: now[0])
state.endpoints["a"] = lambda: EndpointStats(  # no limit: a pace once calls are answered
    endpoint="openai/a", calls=0, in_flight=0, tokens_per_min=0, rpm_limit=None, tpm_limit=None,
    rpm_learned=False, tpm_learned=False, concurrency_limit=4, max_concurrency=4, backoff_until=None,
    rate_limited=0, errors=0, usage_estimated=0,
)
etas = [state.board().totals.eta_s]
for _ in range(6):
    now[0] += 1.0
    counters[("a", "x")].done += 1
    counters[("a", "x")].calls += 1
    counters[("a", "x")].latency_s += 0.05
    etas.append(state.board().totals.eta_s)
print(json.dumps(etas))
"""


def test_the_first_walk_is_not_timed_with_numpys_import() -> None:
    """The walk is redone every second unless it is slow; numpy loads with the first one (0.1-0.3 s),
    and timed with it the next walk waited 5-10 s while the board showed the first outlook, made before
    any call was answered. In a fresh process: the ETA is known 4 s in."""
    run = subprocess.run([sys.executable, "-c", FIRST_WALK], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    etas = json.loads(run.stdout)
    assert etas[0] is None and etas[4] is not None, etas


def test_live_eta_learns_an_endpoint_that_falls_short_of_its_limit() -> None:
    # Paced to 60 rpm, the model manages 0.8 calls/s (its workers also wait elsewhere): after a window
    # of that, the ETA counts 0.8/s, not 1/s.
    clock = Clock()
    counters = {("a", "x"): Counters(planned=400, started=clock.t)}
    plan = SweepPlan(
        order=("x",), shapes={"x": BenchShape(0, 0, 10, 0)}, workers={"a": 4}, slots=None, judge=None
    )
    state = ProgressState(counters, spent=lambda _l: 0.0, caps={}, plan=plan, clock=clock)
    state.endpoints["a"] = lambda: stats("openai/a", 60)
    c = counters[("a", "x")]
    for i in range(1, 81):
        clock.t += 1.0
        c.done = c.calls = math.floor(0.8 * i)
        board = state.board()
    left = 400 - c.done
    assert board.totals.eta_s == pytest.approx(left / 0.8, rel=0.05)
