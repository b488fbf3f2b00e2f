"""`[run] stop_when`: a sweep that stops each model once its figures are settled (issue 34, item 3).

After every pair the scheduler hands the watch the pair's verdict; a unit's score (its instances'
shares of satisfied constraints, or with `metric` their contributions to that metric, averaged:
docs/metrics.md) joins the model's sequence once every
instance of the unit is done, in the order every model walks (runner/engine/order.py), so a model's
units are always a prefix of that order and two models' common units are the shorter prefix. Each
(model, benchmark) keeps an anytime-valid confidence sequence of its mean unit score, and each pair of
models one of their paired difference and a sign test of it (metrics/sampling/confseq.py), updated in
constant time per unit. A (model, benchmark) is settled when
- `halfwidth = H`: its interval is at most H wide on each side, or
- `ranking = C, tie = T`: ranked by mean so far, each neighbour's sign test at C has decided (the
  betting sequence of the difference excludes 0) or its difference sequence lies within [-T, T].
A settled (model, benchmark) sends nothing more (its pairs are skipped); the model is settled when
every benchmark is. The watch is built only when `stop_when` is set: without it the scheduler makes two
`is not None` tests per pair (before and after it) and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import anyio

from ifsweep.benchmarks import Instance
from ifsweep.metrics.sampling.confseq import BernsteinSequence, PairedDifference
from ifsweep.providers.records import EndpointSpec
from ifsweep.runner.config import StopWhen
from ifsweep.runner.engine.pipeline import BenchJob, Pipeline

__all__ = [
    "UNIT_SCORES",
    "LiveStop",
    "StepGate",
    "StopWatch",
    "build_watch",
    "instance_score",
    "plan_cost",
    "rule_text",
    "stop_message",
    "unit_score",
]


Rows = Sequence[Mapping[str, Any]]


def _satisfied(rows: Rows) -> list[bool]:
    # An unparsed or errored row (satisfied None) counts as not satisfied.
    return [r.get("satisfied") is True for r in rows]


def _share(rows: Rows) -> float:
    """The share of satisfied constraints (CSR, SSR, CLAcc; DRFR's pooled ratio, per instance)."""
    sat = _satisfied(rows)
    return sum(sat) / len(sat)


def _every(rows: Rows) -> float:
    """1 when every constraint is satisfied (HSR, ISR, GAcc)."""
    return float(all(_satisfied(rows)))


def _sub_instructions(rows: Rows) -> float:
    """EIFBench's ILAcc: the share of sub-instructions whose constraints are all satisfied (rows
    without an instruction_idx form one sub-instruction, as benchmarks/eifbench/_metrics.py has it)."""
    subs: dict[Any, bool] = {}
    for r in rows:
        i = r.get("instruction_idx")
        subs[i] = subs.get(i, True) and r.get("satisfied") is True
    return sum(subs.values()) / len(subs)


def _priority(rows: Rows) -> float:
    """CFBench's PSR, its paper's priority rule (benchmarks/cfbench/_metrics.py): any unsatisfied
    primary requirement fails; else no secondary ones pass; else with no primary ones CSR > 0.8
    passes; else 0.5 + 0.5 * mean(secondary) > 0.8 does."""
    primary = [r for r in rows if r.get("priority") == "primary"]
    secondary = [r for r in rows if r.get("priority") == "secondary"]
    if not all(_satisfied(primary)):
        return 0.0
    if not secondary:
        return 1.0
    if not primary:
        return float(_share(rows) > 0.8)
    return float(0.5 + 0.5 * _share(secondary) > 0.8)


# A headline metric's contribution of one instance, in [0, 1]; a unit's score is its instances' mean,
# so each metric below is a mean over units of the benchmark whose headline it is. FollowBench's CSL
# (consecutive levels of a group) is not here: it is counted in levels, not per instance.
UNIT_SCORES: dict[str, Callable[[Rows], float]] = {
    "CSR": _share,
    "SSR": _share,
    "CLAcc": _share,
    "DRFR": _share,
    "HSR": _every,
    "ISR": _every,
    "GAcc": _every,
    "ILAcc": _sub_instructions,
    "PSR": _priority,
}


HOLD_STALL_S = 20.0  # a benchmark's step unmoved this long opens its gate (StepGate.hold)
HOLD_POLL_S = 1.0  # how often a held pair looks at the sweep's stop


def instance_score(record: Mapping[str, Any] | None, metric: str | None = None) -> tuple[float, float]:
    """A verdict record's part of its unit's score, as (numerator, weight): a unit scores the sum of
    its instances' numerators over the sum of their weights. With `metric`, its contribution
    (UNIT_SCORES) and weight 1 (the unit's mean of them); without, its satisfied constraints and its
    constraints: the unit's share of satisfied constraints, pooled over its instances (a FollowBench
    group's 15 constraints weigh alike, which is less noisy than a mean of its five instances' shares).
    A verdict without rows scores (0, 1)."""
    rows = (record or {}).get("rows") or []
    if not rows:
        return 0.0, 1.0
    if metric is None:
        return float(sum(_satisfied(rows))), float(len(rows))
    return UNIT_SCORES[metric](rows), 1.0


def unit_score(parts: Sequence[tuple[float, float]]) -> float:
    """A unit's score from its instances' `instance_score`s."""
    return sum(n for n, _ in parts) / sum(w for _, w in parts)


def rule_text(rule: StopWhen) -> str:
    if rule.halfwidth is not None:
        text = f"halfwidth {rule.halfwidth:g} at {rule.confidence:g}"
    else:
        text = f"ranking {rule.ranking:g}" + (f", tie {rule.tie:g}" if rule.tie else "")
    return text + (f", metric {rule.metric}" if rule.metric else "")


@dataclass(slots=True)
class _Lane:
    """One (model, benchmark): its unit scores so far (a prefix of the order) and its sequence."""

    seq: BernsteinSequence
    scores: list[float] = field(default_factory=list)
    pending: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # unit -> instances' parts
    settled: bool = False


class StopWatch:
    """The live check of one sweep (see the module docstring)."""

    def __init__(
        self, rule: StopWhen, models: Sequence[str], units: Mapping[str, Sequence[tuple[str, int]]]
    ) -> None:
        """`units`: per benchmark, its planned units (id, instances) in the order every model walks."""
        self.rule = rule
        self.models = list(models)
        self.alpha = 1 - (rule.ranking if rule.ranking is not None else rule.confidence)
        self.order = {b: [u for u, _ in us] for b, us in units.items()}
        self.size = {b: dict(us) for b, us in units.items()}
        self.lanes = {
            (m, b): _Lane(BernsteinSequence(len(us), self.alpha)) for m in models for b, us in units.items()
        }
        self.pairs = {
            (a, c, b): PairedDifference(len(us), self.alpha)
            for i, a in enumerate(models)
            for c in models[i + 1 :]
            for b, us in units.items()
        }
        self.settled_models: set[str] = set()
        self.step = dict.fromkeys(units, 0)  # per benchmark: the units the rule has been checked at
        # Per benchmark: each unit's first pair in the walk, and (last) the plan's size in pairs.
        self.offset: dict[str, dict[str, int]] = {}
        for b, us in units.items():
            at, first = 0, {}
            for u, n in us:
                first[u] = at
                at += n
            self.offset[b] = first
        self.pairs_planned = {b: sum(n for _, n in us) for b, us in units.items()}

    def ahead(self, bench: str, unit: str) -> int:
        """How many pairs of the walk lie between the checked step and `unit`'s first pair: what a
        model sends there is used only once every model still going has come as far."""
        order, k = self.order[bench], self.step[bench]
        checked = self.offset[bench][order[k]] if k < len(order) else self.pairs_planned[bench]
        return self.offset[bench][unit] - checked

    def skip(self, model: str, bench: str) -> bool:
        """Whether the pair need not be sent: its (model, benchmark) is settled."""
        lane = self.lanes.get((model, bench))
        return lane is not None and lane.settled

    def done(self, model: str, bench: str, inst: Instance, score: tuple[float, float]) -> bool:
        """Take one pair's score; True when some model has just become settled on every benchmark."""
        lane = self.lanes.get((model, bench))
        if lane is None or lane.settled:
            return False
        lane.pending.setdefault(inst.group_id, []).append(score)
        if not self._advance(bench, lane) or not self._steps(bench):
            return False
        new = {
            m
            for m in self.models
            if m not in self.settled_models and all(self.lanes[(m, b)].settled for b in self.order)
        }
        self.settled_models |= new
        return bool(new)

    def _advance(self, bench: str, lane: _Lane) -> bool:
        """Move the lane's prefix on over every unit now whole; whether it moved."""
        order, sizes, moved = self.order[bench], self.size[bench], False
        while len(lane.scores) < len(order):
            unit = order[len(lane.scores)]
            got = lane.pending.get(unit)
            if got is None or len(got) < sizes[unit]:
                break
            del lane.pending[unit]
            lane.scores.append(unit_score(got))
            moved = True
        return moved

    def _steps(self, bench: str) -> bool:
        """Check the rule at each unit k every model still going has reached, in turn: the sequences
        take unit k of every such model together, so what settles when depends on the scores and
        the order alone, never on which model answered first (a resume settles where the run did)."""
        going = [m for m in self.models if not self.lanes[(m, bench)].settled]
        moved = False
        while going:
            k = self.step[bench]
            if any(len(self.lanes[(m, bench)].scores) <= k for m in going):
                break
            for m in going:
                lane = self.lanes[(m, bench)]
                lane.seq.add(lane.scores[k])
            for a, c in combinations(going, 2):
                xa, xc = self.lanes[(a, bench)].scores[k], self.lanes[(c, bench)].scores[k]
                self.pairs[(a, c, bench)].add(xa, xc)
            self.step[bench] = k + 1
            self._settle(bench)
            going = [m for m in going if not self.lanes[(m, bench)].settled]
            moved = True
        return moved

    def _settle(self, bench: str) -> None:
        """Mark the benchmark's lanes the rule now settles."""
        if self.rule.halfwidth is not None:
            for m in self.models:
                lane = self.lanes[(m, bench)]
                close = lane.seq.t > 0 and lane.seq.last.halfwidth <= self.rule.halfwidth
                lane.settled = lane.settled or close
            return
        ranked = sorted(self.models, key=lambda m: -self._mean(m, bench))
        for i, m in enumerate(ranked):
            lane = self.lanes[(m, bench)]
            if lane.settled or lane.seq.t == 0:
                continue
            neighbours = [ranked[j] for j in (i - 1, i + 1) if 0 <= j < len(ranked)]
            lane.settled = all(self._verdict(m, o, bench) for o in neighbours)

    def _mean(self, model: str, bench: str) -> float:
        """The mean of the units the model's sequence took (a settled model's stays where it stopped)."""
        seq = self.lanes[(model, bench)].seq
        return seq.total / seq.t if seq.t else 0.5

    def _verdict(self, model: str, other: str, bench: str) -> str | None:
        """Whether mean(model) - mean(other) on their common units is settled: its sign or a tie (the
        pair is kept once, in config order; which side it is does not matter here)."""
        first, second = (
            (model, other) if self.models.index(model) < self.models.index(other) else (other, model)
        )
        return self.pairs[(first, second, bench)].verdict(self.rule.tie)

    def view(self) -> dict[str, Any]:
        """What the board, `ifsweep status` and summary.json show: per model and benchmark the
        interval of its mean unit score, its units and whether it is settled, and the pairs the sign
        tests have ordered (JSON-able)."""
        models = []
        for m in self.models:
            benches = []
            for b in self.order:
                lane = self.lanes[(m, b)]
                iv = lane.seq.last
                benches.append(
                    {
                        "benchmark": b,
                        "mean": self._mean(m, b),
                        "low": iv.low,
                        "high": iv.high,
                        "units": lane.seq.t,
                        "planned": len(self.order[b]),
                        "settled": lane.settled,
                    }
                )
            models.append({"model": m, "settled": m in self.settled_models, "benchmarks": benches})
        return {"rule": rule_text(self.rule), "models": models, "separated": self._separated()}

    def _separated(self) -> list[list[str]]:
        """[benchmark, higher, lower] of every pair whose sign test has decided, in config order."""
        out = []
        for (a, c, b), pair in self.pairs.items():
            if pair.sign.side is not None:
                out.append([b, a, c] if pair.sign.side == "above" else [b, c, a])
        return out


class StepGate:
    """Holds a model that runs ahead of the benchmark's checked step. A model settled on one benchmark
    puts every worker on the others, and there it would send pairs the lockstep check reaches only
    after it has settled: spend, never a figure (what settles when depends on the scores and the
    order alone). When a benchmark's step has not moved for `stall_s` (a pair in error holds its unit
    back until a resume; a batch takes hours), its gate stands open until the step moves again, so
    the hold never stops a sweep."""

    def __init__(self, watch: StopWatch, stall_s: float = HOLD_STALL_S) -> None:
        self.watch = watch
        self.stall_s = stall_s
        self._moved: dict[str, anyio.Event] = {}  # per benchmark: set when its checked step moves
        self._open: set[str] = set()  # benchmarks whose step stalled: no pair waits there

    async def hold(
        self, model: str, bench: str, unit: str, lead: int, stopped: Callable[[], bool] = lambda: False
    ) -> bool:
        """Wait while `unit` lies `lead` pairs or more past the benchmark's checked step, then say
        whether the pair need not be sent (its model settled meanwhile). A held pair looks at
        `stopped` (the sweep's stop: Ctrl-C, a cap) at least every second and is let go when it is
        set, so the caller, which checks the stop again, never waits out a stall to end a sweep."""
        watch = self.watch
        stalled = 0.0
        while not watch.skip(model, bench) and bench not in self._open and not stopped():
            if watch.ahead(bench, unit) < lead:
                return False
            if stalled >= self.stall_s:
                self._open.add(bench)
                break
            moved = self._moved.setdefault(bench, anyio.Event())
            wait = min(self.stall_s - stalled, HOLD_POLL_S)
            with anyio.move_on_after(wait) as waited:
                await moved.wait()
            stalled = stalled + wait if waited.cancelled_caught else 0.0
        return watch.skip(model, bench)

    def done(self, model: str, bench: str, inst: Instance, score: tuple[float, float]) -> None:
        """`StopWatch.done`, waking the pairs held on the benchmark when its step moves."""
        step = self.watch.step[bench]
        self.watch.done(model, bench, inst, score)
        if self.watch.step[bench] != step or self.watch.skip(model, bench):
            self._open.discard(bench)
            moved = self._moved.pop(bench, None)
            if moved is not None:
                moved.set()


class LiveStop:
    """The scheduler's stop hook: the watch fed from the pipeline's stored verdicts (the panel's first
    judge's: the figures a report shows by default)."""

    def __init__(self, watch: StopWatch, pipeline: Pipeline) -> None:
        self.watch = watch
        self.pipeline = pipeline
        self.judge = pipeline.panel()[0]
        self.gate = StepGate(watch)

    def halted(self, model: str) -> bool:
        return model in self.watch.settled_models

    async def hold(
        self, model: str, job: BenchJob, inst: Instance, lead: int, stopped: Callable[[], bool]
    ) -> bool:
        return await self.gate.hold(model, job.cfg.label, inst.group_id, lead, stopped)

    def after(self, spec: EndpointSpec, job: BenchJob, inst: Instance, outcome: str) -> None:
        """A pair ended: its verdict's score joins the watch (a pair in error or unfinished holds its
        unit back, so the model's prefix stops there until a resume completes it)."""
        if outcome not in ("done", "cached"):
            return
        p = self.pipeline
        bench = job.cfg.label
        ref = p.verdict_ref(p.generation_key(spec, inst), spec, job, inst, judge=self.judge)
        score = instance_score(p.store.get(ref.key), self.watch.rule.metric)
        self.gate.done(spec.label, bench, inst, score)


def build_watch(
    rule: StopWhen, models: Sequence[str], jobs: Sequence[tuple[BenchJob, Sequence[Instance]]]
) -> StopWatch:
    """The watch of a sweep's plan: each benchmark's units (group ids) in the order its instances
    are walked, with their instance counts."""
    units: dict[str, list[tuple[str, int]]] = {}
    for job, instances in jobs:
        counts: dict[str, int] = {}
        for inst in instances:
            counts[inst.group_id] = counts.get(inst.group_id, 0) + 1
        units[job.cfg.label] = list(counts.items())
    return StopWatch(rule, models, units)


def plan_cost(
    counters: Mapping[tuple[str, str], Any], spent: Mapping[tuple[str, str], float]
) -> dict[str, Any]:
    """What the sweep sent and spent against its whole plan: pairs done and planned, and the full
    plan's cost extrapolated per (model, benchmark) from what its done pairs cost (a group with none
    done is priced at the mean pair of the others: the figure is labelled an estimate)."""
    done = sum(c.done for c in counters.values())
    planned = sum(c.planned for c in counters.values())
    paid = sum(spent.get(g, 0.0) for g in counters)
    per_pair = paid / done if done else 0.0
    full = sum(
        spent.get(g, 0.0) / c.done * c.planned if c.done else per_pair * c.planned
        for g, c in counters.items()
    )
    return {"pairs_done": done, "pairs_planned": planned, "spent_usd": paid, "full_plan_usd_estimate": full}


def stop_message(watch: StopWatch, cost: Mapping[str, Any]) -> str:
    """The final line of a sweep `stop_when` stopped: why, what it spent, what the plan would have."""
    settled = [m for m in watch.models if m in watch.settled_models]
    share = cost["pairs_done"] / cost["pairs_planned"] if cost["pairs_planned"] else 0.0
    who = "every model settled" if len(settled) == len(watch.models) else f"settled: {', '.join(settled)}"
    return (
        f"stopped by stop_when ({rule_text(watch.rule)}): {who}; {cost['pairs_done']} of "
        f"{cost['pairs_planned']} planned pairs ({100 * share:.1f}%), ${cost['spent_usd']:.4f} spent of "
        f"the full plan's estimated ${cost['full_plan_usd_estimate']:.4f}"
    )
