"""A reading of a sweep: everything its board shows, taken either from the live counters and limiters
(runner/watch/progress.py) or from a run directory (runner/watch/status.py). One function turns a reading into
capacities and an outlook (runner/watch/eta.py), one into the board (runner/watch/board.py), for both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ifsweep.runner.watch.board import Board, EndpointRow, Limits, Pace, Totals, ordered
from ifsweep.runner.watch.eta import EPS, OVERDUE_S, Capacity, Lane, Outlook, capacity, scaled
from ifsweep.runner.watch.workload import BenchShape, Tally, calls_left, lanes_of


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """What the board needs to know of a sweep beyond its counters."""

    order: tuple[str, ...]  # benchmarks in the order every model takes them
    shapes: Mapping[str, BenchShape]
    workers: Mapping[str, int]  # per model label: pairs it may have in flight
    slots: int | None  # the sweep's cap on calls in flight
    # The first judge's label: the ETA's walk models the panel as this one endpoint carrying every
    # judge's calls at the panel's capacity (`panel_capacity`; docs/design/judges.md).
    judge: str | None
    judges: tuple[str, ...] = ()  # every judge of the panel, in config order

    @property
    def panel(self) -> tuple[str, ...]:
        return self.judges or ((self.judge,) if self.judge is not None else ())

    def as_json(self) -> dict[str, Any]:
        return {
            "order": list(self.order),
            "shapes": {b: s.as_json() for b, s in self.shapes.items()},
            "workers": dict(self.workers),
            "slots": self.slots,
            "judge": self.judge,
            "judges": list(self.panel),
        }

    @classmethod
    def from_json(cls, where: str, obj: Mapping[str, Any]) -> SweepPlan:
        order, shapes, workers = obj.get("order"), obj.get("shapes"), obj.get("workers")
        slots, judge = obj.get("slots"), obj.get("judge")
        if not isinstance(order, list) or not all(isinstance(b, str) for b in order):
            raise ValueError(f"{where}.order: expected a list of benchmark names")
        if not isinstance(shapes, dict):
            raise ValueError(f"{where}.shapes: expected an object")
        if not isinstance(workers, dict) or not all(isinstance(n, int) for n in workers.values()):
            raise ValueError(f"{where}.workers: expected an object of integers")
        if slots is not None and not isinstance(slots, int):
            raise ValueError(f"{where}.slots: expected an integer or null")
        if judge is not None and not isinstance(judge, str):
            raise ValueError(f"{where}.judge: expected a label or null")
        judges = obj.get("judges", [judge] if judge is not None else [])
        if not isinstance(judges, list) or not all(isinstance(j, str) for j in judges):
            raise ValueError(f"{where}.judges: expected a list of labels")
        return cls(
            tuple(order),
            {b: BenchShape.from_json(f"{where}.shapes.{b}", s) for b, s in shapes.items()},
            workers,
            slots,
            judge,
            tuple(judges),
        )


@dataclass(frozen=True, slots=True)
class Reading:
    tallies: Mapping[tuple[str, str], Tally]  # by (model label, benchmark)
    plan: SweepPlan | None
    limits: Mapping[str, Limits]  # by endpoint label, the judge's included
    pace: Mapping[str, Pace]
    efficiency: Mapping[str, float]  # share of its modelled capacity each endpoint achieves
    spent: Mapping[str | None, float]  # by label; None: the whole sweep
    caps: Mapping[str | None, float | None]
    calls_per_s: float | None  # the whole sweep's recent pace
    tokens_per_min: float | None
    pair_errors: int
    waits: Mapping[str, str] = field(default_factory=dict)  # a back-off in words, by label
    state: str = "running"
    # Calls made by each judge of a panel (by label); with one judge its calls are the tallies' own.
    judge_calls: Mapping[str, int] = field(default_factory=dict)

    @property
    def judge(self) -> str | None:
        return self.plan.judge if self.plan is not None else None

    def lanes(self) -> list[Lane]:
        if self.plan is None:
            return []
        return lanes_of(self.tallies, self.plan.shapes, self.plan.order, self.plan.workers)

    def capacities(self) -> dict[str, Capacity | None]:
        """What each endpoint can do: its limits and Little's law at its recent latency, times the
        share of that it achieves."""
        return {
            label: scaled(
                capacity(
                    rpm=lim.rpm, tpm=lim.tpm, concurrency=lim.concurrency, latency_s=self._latency(label)
                ),
                self.efficiency.get(label, 1.0),
            )
            for label, lim in self.limits.items()
        }

    def _latency(self, label: str) -> float | None:
        pace = self.pace.get(label)
        return None if pace is None else pace.latency_s

    def outlook(self, lanes: list[Lane]) -> Outlook:
        # Imported here for start-up time: the walk needs numpy (about 0.1 s), the CLI does not.
        from ifsweep.runner.watch.walk import outlook

        plan = self.plan
        if plan is None:
            return Outlook(None)
        caps = self.capacities()
        if len(plan.panel) > 1 and plan.judge is not None:
            caps[plan.judge] = panel_capacity([caps.get(j) for j in plan.panel])
        return outlook(lanes, caps, judge=plan.judge, slots=plan.slots)

    def made(self) -> dict[str, int]:
        """Calls made per endpoint label: each model's generations; the judge's calls."""
        made: dict[str, int] = {}
        for (model, _b), t in self.tallies.items():
            made[model] = made.get(model, 0) + t.gen_calls
        panel = self.plan.panel if self.plan is not None else ()
        if len(panel) > 1:
            for label in panel:
                made[label] = self.judge_calls.get(label, 0)
        elif self.judge is not None:
            made[self.judge] = sum(t.judge_calls for t in self.tallies.values())
        return made


def panel_capacity(caps: list[Capacity | None]) -> Capacity | None:
    """A panel of judges as the one judge endpoint the walk knows: each judge makes an equal share of
    the panel's calls, so together they manage as many times the slowest judge's pace as there are
    judges; a pair waits for the slowest reply (the judges answer it at once). None while any judge's
    pace is unknown."""
    if not caps or any(c is None for c in caps):
        return None
    known = [c for c in caps if c is not None]
    n = len(known)
    slowest = min(known, key=lambda c: c.calls_per_s)
    latencies = [c.latency_s for c in known if c.latency_s is not None]
    return Capacity(
        n * slowest.calls_per_s,
        n * min(c.tokens_per_s for c in known),
        max(latencies) if latencies else None,
        slowest.calls_bound,
    )


def settled(seen: Outlook, lanes: list[Lane], labels: list[str], judge: str | None = None) -> Outlook:
    """`seen` (possibly a few seconds old) with the lanes that have nothing left done now. While work
    is left, no time left reads zero: a countdown that ran out before the next walk is overdue, not
    done (the walk is redone within a second or two)."""
    if lanes and not any(lane.busy for lane in lanes):
        return Outlook(0.0, dict.fromkeys(labels, 0.0))  # nothing left to estimate
    now = seen.without({lane.label for lane in lanes if not lane.busy})
    busy = {lane.label for lane in lanes if lane.busy}
    if judge is not None and any(p.judge_calls > EPS for lane in lanes for p in lane.phases):
        busy.add(judge)
    return now.at_least(OVERDUE_S, busy)


def make_board(reading: Reading, lanes: list[Lane], seen: Outlook) -> Board:
    """The board of a reading, at the outlook `seen` (from `reading.outlook`, perhaps cached)."""
    made = reading.made()
    left = calls_left(lanes, reading.judge) if reading.plan is not None else None
    panel = reading.plan.panel if reading.plan is not None else ()
    if left is not None and len(panel) > 1 and reading.judge in left:
        # The walk carries the whole panel's calls on the first judge; each judge makes its share.
        share = left.pop(reading.judge) / len(panel)
        left.update(dict.fromkeys(panel, share))
    rows = [_row(reading, label, n, left, seen) for label, n in made.items()]
    calls = sum(made.values())
    totals = Totals(
        pairs_done=sum(t.finished for t in reading.tallies.values()),
        pairs_planned=sum(t.planned for t in reading.tallies.values()),
        calls=calls,
        calls_expected=None if left is None else calls + sum(left.values()),
        calls_per_s=reading.calls_per_s,
        tokens_per_min=reading.tokens_per_min,
        spent=reading.spent.get(None, 0.0),
        cap=reading.caps.get(None),
        errors=reading.pair_errors,
        eta_s=seen.seconds,
        state=reading.state,
    )
    return Board(totals, ordered(rows))


def _row(
    reading: Reading, label: str, calls: int, left: Mapping[str, float] | None, seen: Outlook
) -> EndpointRow:
    lim = reading.limits.get(label, Limits())
    pace = reading.pace.get(label, Pace())
    panel = reading.plan.panel if reading.plan is not None else ()
    walked = reading.judge if label in panel and reading.judge is not None else label  # the panel's
    return EndpointRow(
        label=label,
        role="judge" if label == reading.judge or label in panel else "model",
        calls=calls,
        calls_expected=None if left is None else calls + left.get(label, 0.0),
        pace=pace,
        limits=lim,
        waits=reading.waits.get(label, ""),
        spent=reading.spent.get(label, 0.0),
        cap=reading.caps.get(label),
        eta_s=None if seen.seconds is None else seen.finish_s.get(walked),
        held_by=seen.bound.get(walked, ""),
    )
