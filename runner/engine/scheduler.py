"""The sweep: every (model, instance) pair streamed through bounded workers, under limits and budgets.

Each model gets its own workers pulling from its own lazy stream of instances, so a slow or throttled
model only ever holds its own workers; the provider pool bounds calls in flight globally and per
endpoint. Workers are elastic within a budget of twice the global concurrency (or one per model, if
that is more): a model starts with its share; after each pair a worker retires if its model's
endpoint is congested (calls already queue in its own limiter) and the model keeps another, and
otherwise adds a sibling if the model is under its cap, the budget allows and the pool has room. So a
throttled model gives its workers to the ones that can use them, a model that finishes hands its
share on, and idle workers (each holds a prepared request and its instance, tens of KB) stay few
however many models there are. Memory therefore grows with concurrency, not with the number of
instances or models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
import anyio.lowlevel

from ifsweep.benchmarks import Instance
from ifsweep.providers.records import BatchPolicy, BudgetExhausted, EndpointSpec
from ifsweep.providers.send.params import sent_params
from ifsweep.runner.config import DEFAULT_MODEL_CONCURRENCY, SweepConfig
from ifsweep.runner.engine.pipeline import BenchJob, Pipeline, SupportsComplete
from ifsweep.runner.store.keys import endpoint_identity, generation_key
from ifsweep.runner.watch.outcomes import Counters

# "settled": `[run] stop_when` stopped the models it settled (runner/engine/stopping.py); not a failure.
SweepStatus = Literal["complete", "settled", "budget_exhausted", "interrupted", "failed"]
EXIT_CODES: dict[SweepStatus, int] = {
    "complete": 0,
    "settled": 0,
    "failed": 1,
    "budget_exhausted": 3,
    "interrupted": 130,
}


@dataclass(slots=True)
class StopControl:
    """Shared between the signal handler, the budget and the workers: once set, no new pair starts."""

    event: anyio.Event
    reason: SweepStatus | None = None
    # Models whose own cap (max_usd) ran out: only their workers stop, the others go on.
    exhausted_models: set[str] = field(default_factory=set)

    def stop(self, reason: SweepStatus) -> None:
        if self.reason is None:
            self.reason = reason
        self.event.set()

    @property
    def stopped(self) -> bool:
        return self.event.is_set()


@dataclass(frozen=True, slots=True)
class Work:
    """The instances of every benchmark, loaded once and shared by every model (runner/store/spooled.py keeps
    them on disk during a sweep)."""

    jobs: tuple[tuple[BenchJob, Sequence[Instance]], ...]
    # The order pairs are walked in, as (job index, instance position): the benchmarks interleaved
    # unit by unit (runner/engine/order.py). None: each benchmark's instances in turn, as listed.
    sequence: Sequence[tuple[int, int]] | None = None
    # Per job: the sampling units' ids per stratum of everything selected before `limit` (the
    # population `ifsweep plan` shows and a partial run's estimates weight by); empty if not computed.
    strata: tuple[Mapping[str, tuple[str, ...]], ...] = ()

    def walk(self) -> Iterator[tuple[BenchJob, Instance]]:
        """Every (job, instance) once, in the sweep's order."""
        if self.sequence is None:
            for job, instances in self.jobs:
                yield from ((job, inst) for inst in instances)
            return
        for b, i in self.sequence:
            job, instances = self.jobs[b]
            yield job, instances[i]


class StopHook(Protocol):
    """What `run_models` asks of `[run] stop_when` (runner/engine/stopping.py, LiveStop)."""

    def halted(self, model: str) -> bool: ...
    async def hold(
        self, model: str, job: BenchJob, inst: Instance, lead: int, stopped: Callable[[], bool]
    ) -> bool: ...
    def after(self, spec: EndpointSpec, job: BenchJob, inst: Instance, outcome: str) -> None: ...


# Selects this process's partition by generation key; None = every pair (no key is hashed to decide).
Keep = Callable[[str], bool] | None
MIN_WORKERS = 1  # a model's workers never retire below this: it always makes progress


@dataclass(frozen=True, slots=True)
class Elastic:
    """What elastic workers ask of the provider pool (see the module docstring)."""

    room: Callable[[], bool]  # one more call could start now without queueing for a global slot
    congested: Callable[[str], bool]  # calls of the model with this label already queue at its limits


def worker_budget(global_concurrency: int, models: int) -> int:
    return max(2 * global_concurrency, MIN_WORKERS * models)


def worker_cap(spec: EndpointSpec, cfg: SweepConfig) -> int:
    """The most workers (pairs in flight) a model may grow to. In batch mode (the model's or any
    judge's) a batch holds only what is in flight, so enough pairs to fill one run at once."""
    cap = min(spec.max_concurrency or DEFAULT_MODEL_CONCURRENCY, cfg.run.concurrency)
    return max([cap, *(p.max_requests for p in _batch_policies(spec, cfg))])


def _batch_policies(spec: EndpointSpec, cfg: SweepConfig) -> list[BatchPolicy]:
    return [p for p in (spec.batch, *(j.batch for j in cfg.judges)) if p is not None]


def initial_workers(cap: int, global_concurrency: int, models: int) -> int:
    """A model's workers at the start: its share of the budget, MIN_WORKERS <= n <= cap."""
    share = worker_budget(global_concurrency, models) // max(models, 1)
    return min(cap, max(MIN_WORKERS, share))


def pairs_for(work: Work, spec: EndpointSpec, keep: Keep) -> Iterator[tuple[BenchJob, Instance]]:
    """One model's pairs in the sweep's order, lazily: nothing per pair is held in advance."""
    for job, inst in work.walk():
        if _kept(keep, spec, inst):
            yield job, inst


def all_pairs(
    work: Work, specs: Sequence[EndpointSpec], keep: Keep
) -> Iterator[tuple[EndpointSpec, BenchJob, Instance]]:
    """Every model's pairs, reading each spooled instance once for all models."""
    for job, inst in work.walk():
        for spec in specs:
            if _kept(keep, spec, inst):
                yield spec, job, inst


def _kept(keep: Keep, spec: EndpointSpec, inst: Instance) -> bool:
    return keep is None or keep(partition_key(spec, inst))


def partition_key(spec: EndpointSpec, inst: Instance) -> str:
    """The pair's generation key: pairs that share an answer land in the same partition, so no two
    processes pay for it."""
    return generation_key(endpoint_identity(spec), sent_params(spec), [m.as_dict() for m in inst.messages])


async def run_models(
    cfg: SweepConfig,
    work: Work,
    pipeline: Pipeline,
    endpoints: Sequence[SupportsComplete],
    stop: StopControl,
    keep: Keep,
    elastic: Elastic | None = None,
    hook: StopHook | None = None,
) -> None:
    """Run every model's pairs to the end, or until `stop` is set (then in-flight pairs finish).
    Without `elastic`, every model runs its cap of workers from start to end. `hook` (`[run]
    stop_when`, runner/engine/stopping.py): sees every pair's outcome, holds a model running ahead of
    what it has checked and says which pairs need not be sent; without it the loop makes two `is not
    None` tests per pair."""
    workers: dict[str, int] = {}
    total = 0  # sum of workers.values(), kept beside it: grow() asks after every pair
    budget = worker_budget(cfg.run.concurrency, len(endpoints))

    def retire(label: str) -> bool:
        if elastic is None or workers[label] <= MIN_WORKERS:
            return False
        return elastic.congested(label)

    def grow(label: str, cap: int) -> bool:
        if elastic is None or workers[label] >= cap or total >= budget:
            return False
        return elastic.room() and not elastic.congested(label)

    def stopped(label: str) -> bool:
        return stop.stopped or label in stop.exhausted_models

    async def worker(
        endpoint: SupportsComplete, source: Iterator[tuple[BenchJob, Instance]], cap: int
    ) -> None:
        nonlocal total
        label = endpoint.spec.label
        try:
            # Workers of one model share one iterator: next() never awaits, so no pair is taken twice.
            while not stopped(label):
                item = next(source, None)
                if item is None:
                    return
                job, inst = item
                # The hook holds a pair running more than twice the model's workers ahead of what the
                # rule has checked, so that what a settled model sent past its stop stays small.
                if hook is not None:
                    if await hook.hold(label, job, inst, 2 * cap, lambda: stopped(label)):
                        if hook.halted(label):
                            return
                        await anyio.lowlevel.checkpoint()  # a run of skipped pairs must not hold the loop
                        continue
                    if stopped(label):  # while the pair was held: it is not sent
                        return
                try:
                    outcome = await pipeline.evaluate(endpoint, job, inst)
                except BudgetExhausted as e:
                    if e.scope == label:
                        stop.exhausted_models.add(label)
                    else:  # the sweep's cap, or the judge's, which every model needs
                        stop.stop("budget_exhausted")
                    return
                if hook is not None:
                    hook.after(endpoint.spec, job, inst, outcome)
                if retire(label):
                    return
                if grow(label, cap):
                    workers[label] += 1
                    total += 1
                    tg.start_soon(worker, endpoint, source, cap)
        finally:
            workers[label] -= 1
            total -= 1

    async with anyio.create_task_group() as tg:
        for endpoint in endpoints:
            spec = endpoint.spec
            cap = worker_cap(spec, cfg)
            # Batch mode starts every worker at once: growing one at a time per finished pair would take
            # a batch's latency (hours) per step.
            batched = bool(_batch_policies(spec, cfg))
            n = (
                cap
                if elastic is None or batched
                else initial_workers(cap, cfg.run.concurrency, len(endpoints))
            )
            workers[spec.label] = n
            total += n
            source = pairs_for(work, spec, keep)
            for _ in range(n):
                tg.start_soon(worker, endpoint, source, cap)


def count_planned(work: Work, specs: Sequence[EndpointSpec], keep: Keep) -> dict[tuple[str, str], Counters]:
    counters: dict[tuple[str, str], Counters] = {}
    for spec in specs:
        for job, instances in work.jobs:
            counters[(spec.label, job.cfg.label)] = Counters(planned=len(instances) if keep is None else 0)
    if keep is not None:
        for spec, job, _inst in all_pairs(work, specs, keep):
            counters[(spec.label, job.cfg.label)].planned += 1
    return counters
