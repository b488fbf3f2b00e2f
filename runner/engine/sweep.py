"""One `ifsweep run`: load, check, open the run directory, run the models, write the summary.

Everything that can be wrong with the config or the data is found before the run directory is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from ifsweep import benchmarks
from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.params import sent_params
from ifsweep.runner.config import ConfigError, SweepConfig
from ifsweep.runner.engine.coordinator import join as join_coordinator
from ifsweep.runner.engine.coordinator import totals as spend_totals
from ifsweep.runner.engine.order import (
    SEEDED_ORDER,
    interleave,
    seeded_units,
    strata_units,
    units_of,
)
from ifsweep.runner.engine.pipeline import BenchJob, Pipeline
from ifsweep.runner.engine.scheduler import (
    EXIT_CODES,
    Elastic,
    Keep,
    StopControl,
    SweepStatus,
    Work,
    all_pairs,
    count_planned,
    run_models,
    worker_cap,
)
from ifsweep.runner.store.atomic import atomic_write
from ifsweep.runner.store.intents import INTENT, SPEND_KINDS, SpendScan, StoreIntents
from ifsweep.runner.store.keeping import DigestKeeper
from ifsweep.runner.store.keys import endpoint_identity, older_slots
from ifsweep.runner.store.locks import lock_run
from ifsweep.runner.store.manifest import (
    TEMPLATE_SCHEME,
    BenchmarkEntry,
    Manifest,
    ModelEntry,
    carry_plans,
    compare,
    older_records,
    read_manifest,
    relabel_legacy_judge,
    write_manifest,
)
from ifsweep.runner.store.seen import Owner
from ifsweep.runner.store.shards import DISK_FULL_ADVICE, DiskFullError, shard_files
from ifsweep.runner.store.spooled import SpooledInstances
from ifsweep.runner.store.verify import IncompleteVerdicts, Planned, check_sweep_verdicts, planned_verdicts
from ifsweep.runner.watch.outcomes import SPEND_DECIMALS, Counters, ErrorTally, SpendTally, errors_message
from ifsweep.runner.watch.progress import ProgressState, run_progress
from ifsweep.runner.watch.reading import SweepPlan
from ifsweep.runner.watch.status import summary_name
from ifsweep.runner.watch.workload import bench_shapes

SUMMARY_EVERY_S = 2.0  # how often a running sweep rewrites its summary.json

if TYPE_CHECKING:
    from ifsweep.runner.engine.process import OwnedProcess
    from ifsweep.runner.engine.stopping import LiveStop, StopWatch


@dataclass(frozen=True, slots=True)
class SweepResult:
    """How a sweep ended. `status`: complete | failed | budget_exhausted | interrupted; `planned`,
    `done` and `errors` count (model, instance) pairs; `spent_usd` is every call this run and earlier
    runs of the directory paid for; `message` says why a sweep did not complete."""

    status: SweepStatus
    planned: int
    done: int
    errors: int
    spent_usd: float
    message: str = ""
    # Of spent_usd, the worst case charged for calls whose bill is unknown (cut off, cancelled or killed
    # in flight: the provider may have billed them); the rest was reported by the providers.
    worst_case_usd: float = 0.0
    # Pairs that ended in error, by why: an answer's error kind ("context_length", "timeout", ...) or
    # "judge:KIND" when a judge call failed. A sweep with any is "failed" (exit 1): run it again to retry.
    errors_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    # Verdicts this run derived anew from stored replies because what they depend on changed (the
    # scoring code, above all: benchmarks/versions.py); each replaced the verdict its slot held.
    rescored: int = 0
    max_usd: float | None = None  # the sweep's cap in force (`ifsweep run --max-usd`, else the config's)

    @property
    def complete(self) -> bool:
        """Every planned pair is done, none in error."""
        return self.status == "complete"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def specs_of(cfg: SweepConfig) -> list[EndpointSpec]:
    """The models, then the judges."""
    return [*cfg.models, *cfg.judges]


def sweep_plan(cfg: SweepConfig, work: Work) -> SweepPlan:
    """What the progress board and its ETA need to know of the sweep's shape."""
    n = max(1, len(cfg.judges))
    # Every judge of the panel makes a pair's judge calls: the walk sees them all (runner/watch/reading.py).
    shapes = {b: replace(s, judge_calls=s.judge_calls * n) for b, s in bench_shapes(work).items()}
    return SweepPlan(
        order=tuple(job.cfg.label for job, _ in work.jobs),
        shapes=shapes,
        workers={s.label: worker_cap(s, cfg) for s in cfg.models},
        slots=cfg.run.concurrency,
        judge=cfg.judge.label if cfg.judge is not None else None,
        judges=tuple(s.label for s in cfg.judges),
    )


def load_work(cfg: SweepConfig) -> Work:
    """Every benchmark's instances, validated, in the run's order (`[run] order`,
    runner/engine/order.py). Raises ConfigError or DataError; writes nothing."""
    seeded = cfg.run.order == SEEDED_ORDER
    jobs, units, population = [], [], []
    for i, bc in enumerate(cfg.benchmarks):
        bench = benchmarks.get(bc.name)
        data_dir = bc.data if bc.data is not None else _download(bc.name, bench.release)
        # File order keeps `limit` as the first N instances; the seeded order needs them all to draw
        # its first N units from.
        spool = SpooledInstances(bench.load(data_dir, bc.options), limit=None if seeded else bc.limit)
        if not spool:
            raise ConfigError(
                cfg.path, f"benchmarks[{i}]", f"no {bc.name} instances selected from {data_dir}"
            )
        found = units_of(spool)
        # The population a partial run's estimates speak for: every unit selected, before `limit`.
        population.append(strata_units(found))
        if seeded:
            found = seeded_units(found, cfg.run.order_seed, bc.label)[: bc.limit]
            ordered = SpooledInstances(spool[m] for u in found for m in u.members)
            spool.close()
            spool = ordered
        units.append(found)
        job = BenchJob(cfg=bc, bench=bench, template_version=bench.template_version(), data_dir=data_dir)
        jobs.append((job, spool))
    sequence = interleave([[len(u.members) for u in found] for found in units], cfg.run.order_seed)
    return Work(
        jobs=tuple(jobs),
        sequence=sequence if seeded else None,
        strata=tuple(population),
    )


def _download(name: str, release: benchmarks.Release) -> Path:
    from ifsweep.runner.engine.datasets import ensure_release

    return ensure_release(name, release)


def needs_judge(work: Work) -> bool:
    """Whether any loaded instance is judge-scored; an empty answer shows the plan's shape."""
    for job, instances in work.jobs:
        for inst in instances:
            if job.bench.plan(inst, "", job.cfg.scoring).judge_tasks:
                return True
    return False


def check_ready(cfg: SweepConfig, work: Work) -> None:
    if cfg.run.stop_when is not None:
        check_stop_when(cfg, work)
    if not cfg.judges and needs_judge(work):
        raise ConfigError(
            cfg.path, "judge", "missing: the selected benchmarks need a judge model ([judge] table)"
        )
    from ifsweep.providers.pricing import check_prices

    check_prices(specs_of(cfg), sweep_cap=cfg.run.cap_usd is not None)


def check_stop_when(cfg: SweepConfig, work: Work) -> None:
    """`stop_when.metric` must be a headline metric of every benchmark of the config that the watch
    can score per unit (runner/engine/stopping.py, UNIT_SCORES): each benchmark's units are watched by
    that metric's contribution, so one a benchmark lacks would leave it unwatched."""
    stop = cfg.run.stop_when
    if stop is None or stop.metric is None:
        return
    from ifsweep.runner.engine.stopping import UNIT_SCORES

    field = "run.stop_when.metric"
    heads = {job.cfg.label: {m for bm in job.bench.metrics() for m in bm.headline} for job, _ in work.jobs}
    known = sorted(set().union(*heads.values()))
    if stop.metric not in known:
        raise ConfigError(
            cfg.path,
            field,
            f"unknown metric {stop.metric!r}; these benchmarks' headline metrics: {', '.join(known)}",
        )
    for label, names in heads.items():
        if stop.metric not in names:
            raise ConfigError(
                cfg.path,
                field,
                f"{stop.metric!r} is not a metric of benchmark {label!r} (its headline metrics: "
                f"{', '.join(sorted(names))}); give a metric every benchmark has, or leave `metric` out",
            )
    if stop.metric not in UNIT_SCORES:
        raise ConfigError(
            cfg.path,
            field,
            f"{stop.metric!r} is not a per-unit score the sweep can watch (it is counted over a group's "
            f"levels); watchable: {', '.join(m for m in known if m in UNIT_SCORES)}",
        )


async def run_sweep(
    cfg: SweepConfig,
    work: Work,
    *,
    partition: tuple[int, int] | None = None,
    progress: str | None = None,
    retry_errors: bool | None = None,
    process: OwnedProcess | None = None,
) -> SweepResult:
    """Run (or resume) the sweep into cfg.run.output_dir. Changes no process-wide state unless the
    program that owns the process passes `process` (the CLI: signal handling, the GC freeze, malloc
    settings; runner/engine/process.py). Cancelling the task that awaits it stops the sweep: what was
    stored is flushed, the summary says "interrupted", and running it again resumes."""
    if partition is not None and cfg.run.stop_when is not None:
        # Each partition sees part of every model's units: none could tell when a model is settled.
        raise ConfigError(
            cfg.path, "run.stop_when", "needs the whole sweep in one process; not with partitions"
        )
    if process is not None:
        process.prepare()
    writer_id = "main" if partition is None else f"p{partition[0]}of{partition[1]}"
    retry = cfg.run.retry_errors if retry_errors is None else retry_errors
    lock, store, older = _open_run(cfg, work, writer_id, retry, shared=partition is not None)
    run = _Run(cfg, work, store, writer_id, retry, process, started=time.time())
    if cfg.run.stop_when is not None:
        # Only a sweep that asks for it loads the confidence sequences (and with them metrics' Polars).
        from ifsweep.runner.engine.stopping import build_watch

        run.watch = build_watch(cfg.run.stop_when, [s.label for s in cfg.models], work.jobs)
    if older:  # once per directory: its verdicts under keys of the older scheme, by slot
        run.older_slots = older_slots(store.iter_records({"verdict"}))
    try:
        books = await _open_books(run, partition)
        ended = await _drive(run, books, progress or cfg.run.progress)
        return await _finish(run, books, ended)
    except anyio.get_cancelled_exc_class():
        # Cancelled by whoever awaits the sweep (the library's caller): keep what was stored, say so,
        # and let the cancellation go on. Before the books exist (while joining the coordinator)
        # nothing was sent, so there is nothing to summarize.
        if run.books is not None:
            _note_cancelled(run, run.books)
        raise
    finally:
        if run.coordinator is not None:
            with anyio.CancelScope(shield=True):
                await run.coordinator.close()  # a no-op if closed above; else its holds go at once
        try:
            with contextlib.suppress(DiskFullError):  # reported above; the next run redoes what was lost
                store.close()
        finally:
            os.close(lock)


def _open_run(
    cfg: SweepConfig, work: Work, writer_id: str, retry: bool, *, shared: bool
) -> tuple[int, Any, bool]:
    """The run lock (exclusive for a plain run, shared among partitions), then the manifest, then the
    store: a second run on the directory is refused before it writes anything. The last of the three:
    whether the directory was written before verdict keys named slots (`prepare_run_dir`)."""
    from ifsweep.runner.store.shards import SHARDS_DIR, RunStore

    run_dir = cfg.run.output_dir
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_run(run_dir, shared=shared, shards_dir=run_dir / SHARDS_DIR)
    except OSError as e:  # a directory this user may not write (another run's is WriterBusyError)
        raise ConfigError(
            cfg.path, "run.output_dir", f"cannot write to {run_dir}: {e.strerror or e}"
        ) from None
    store = None
    try:
        older = prepare_run_dir(run_dir, cfg, work)  # refuses incompatible changes before any append
        store = RunStore.open(run_dir, writer_id=writer_id, flush_ms=cfg.run.flush_ms, retry_errors=retry)
        check_batches_off(cfg, store)
    except BaseException:
        try:
            if store is not None:
                store.close()
        finally:
            os.close(lock)
        raise
    return lock, store, older


def check_batches_off(cfg: SweepConfig, store: Any) -> None:
    """Refuse (ConfigError, exit 2) an endpoint whose `batch` is off, or that left the config, while
    batches of its calls are open at the provider: sending those calls interactively would pay for them
    twice, and a batch nobody collects is billed and counted nowhere."""
    if not store.batch_records:
        return  # no batch was ever submitted here: no scan
    from ifsweep.runner.engine.batches import open_batches

    specs = specs_of(cfg)
    off = {s.label for s in specs if s.batch is None}
    kept = {s.label for s in specs}
    left = [
        b
        for b in open_batches(store.run_dir)
        if (b.endpoint in off or b.endpoint not in kept) and b.state != "cancelled"
    ]
    if not left:
        return
    label = left[0].endpoint
    mine = [b for b in left if b.endpoint == label]
    n, requests = len(mine), sum(b.requests for b in mine)
    batches = f"{n} Batch API batch{'es' if n != 1 else ''} of '{label}' ({requests} requests)"
    are = "are" if n != 1 else "is"
    cancel = f"cancel them with `ifsweep batches {store.run_dir} --cancel`"
    if label not in kept:
        raise ConfigError(
            cfg.path,
            "models"
            if any(b.model for b in mine if b.endpoint in {s.label for s in cfg.models})
            else "judges",
            f"'{label}' left the config, but {batches} {are} still open at the provider: their bill would "
            f"be counted nowhere. Either keep '{label}' until a run has collected them, or {cancel}",
        )
    raise ConfigError(
        cfg.path,
        _batch_key(cfg, label),
        f"off, but {batches} {are} still open at the provider, and sending those calls again would pay "
        f"for them twice. Either set `batch = true` again (the run collects them), or {cancel} "
        "(requests they already finished are then sent and paid again)",
    )


def _batch_key(cfg: SweepConfig, label: str) -> str:
    """Where `label`'s batch setting lives in the config file."""
    for i, spec in enumerate(cfg.models):
        if spec.label == label:
            return f"models[{i}].batch"
    if "judge" in cfg.raw:
        return "judge.batch"
    return f"judges[{[s.label for s in cfg.judges].index(label)}].batch"


@dataclass(eq=False, slots=True)
class _Run:
    """One sweep's fixed parts, and what it joins on the way (the coordinator, its books)."""

    cfg: SweepConfig
    work: Work
    store: Any
    writer_id: str
    retry: bool
    process: OwnedProcess | None
    started: float
    coordinator: Any = None
    books: _Books | None = None
    older_slots: frozenset[str] = frozenset()  # slots holding a verdict of the older key scheme
    watch: StopWatch | None = None  # `[run] stop_when`'s live check (runner/engine/stopping.py)

    @property
    def run_dir(self) -> Path:
        return self.cfg.run.output_dir


@dataclass(eq=False, slots=True)
class _Books:
    """What a sweep counts: its pairs, its spend (the budget and the per-row tally), its live board."""

    tally: SpendTally
    budget: Any
    keep: Keep
    counters: dict[tuple[str, str], Counters]
    state: ProgressState
    shared_at: str | None  # the coordinator's display address, when spend is shared


@dataclass(eq=False, slots=True)
class _Ended:
    """How the run of the models ended, before the verdicts are checked."""

    stop: StopControl
    pipeline: Pipeline
    status: SweepStatus
    message: str
    still_open: int  # batches left running at the provider
    watch: StopWatch | None = None


async def _open_books(run: _Run, partition: tuple[int, int] | None) -> _Books:
    """The spend so far (from the shards, or the coordinator's ledger), the budget that starts from it,
    which pairs are this writer's, and the board that shows them."""
    from ifsweep.runner.engine.partition import in_partition

    cfg = run.cfg
    tally = SpendTally()
    shared_at = None
    # Without a coordinator a partition's caps bind its own process (docs/resume.md): it starts from
    # what its own writer spent; the directory's whole spend is `ifsweep status`'s to add up.
    own = run.writer_id if partition is not None and cfg.run.coordinator is None else None
    spent = _already_spent(run.store, tally, own)
    if cfg.run.coordinator is not None:
        run.coordinator, baseline = await join_coordinator(
            cfg.run.coordinator, run.run_dir, run.writer_id, give_up_s=cfg.run.coordinator_timeout_s
        )
        spent.total, spent.by = spend_totals(baseline)
        shared_at = run.coordinator.settings.display
    run.store.on_append = tally.add
    budget = _budget(cfg, spent, run.coordinator)

    keep: Keep = None
    if partition is not None:
        index, count = partition

        def keep(key: str) -> bool:
            return in_partition(key, index, count)

    counters = count_planned(run.work, cfg.models, keep)
    state = ProgressState(
        counters=counters,
        spent=lambda label: budget.spent_usd if label is None else budget.spent_by(label),
        caps={None: cfg.run.cap_usd, **{s.label: s.max_usd for s in specs_of(cfg)}},
        plan=sweep_plan(cfg, run.work),
    )
    if run.coordinator is not None:
        run.coordinator.emit = state.on_event
        state.coordinator = run.coordinator.state
    run.books = _Books(tally, budget, keep, counters, state, shared_at)
    return run.books


async def _drive(run: _Run, books: _Books, progress: str) -> _Ended:
    """Run every model's pairs through the pool; a bug or an I/O failure ends it "failed", resumable."""
    from ifsweep.providers.pool import ProviderPool
    from ifsweep.runner.engine.batches import StoreJournal

    cfg, state = run.cfg, books.state
    stop = StopControl(anyio.Event())
    status: SweepStatus = "complete"
    message = ""
    async with ProviderPool(
        budget=books.budget,
        on_event=state.on_event,
        global_concurrency=cfg.run.concurrency,
        coordinator=run.coordinator,
        journal=StoreJournal(run.store),
        intents=StoreIntents(run.store),
    ) as pool:
        judges = [pool.caller(s) for s in cfg.judges]
        endpoints = [pool.caller(s) for s in cfg.models]
        state.endpoints.update({e.spec.label: e.stats for e in (*endpoints, *judges)})
        state.batches.update({b.spec.label: b.progress for b in pool.batch_endpoints})
        pipeline = Pipeline(
            store=run.store,
            judges=judges,
            retry_errors=run.retry,
            counters=books.counters,
            replacing=run.older_slots,
            # Judge tasks alive per judge (runner/engine/admission.py): the calls in flight and a
            # quarter more, so no slot idles. As many as the workers (2x concurrency) kept 1,024 alive
            # for 512 slots at full size: 113 MB, 0.457 CPU ms a call, against 107 MB, 0.386 with 640.
            judge_slots=cfg.run.concurrency + max(1, cfg.run.concurrency // 4),
        )
        state.judges = pipeline.judge_counters
        if run.watch is not None:
            state.stopping = run.watch.view
        pairs = sum(c.planned for c in books.counters.values())
        for jc in pipeline.judge_counters.values():
            jc.planned = pairs
        by_label = {e.spec.label: e for e in endpoints}
        elastic = Elastic(
            # Asked after every pair: without judges, the pool's room alone.
            room=(lambda: pool.has_room() and not any(j.congested() for j in judges))
            if judges
            else pool.has_room,
            congested=lambda label: by_label[label].congested(),
        )
        try:
            with run.process.frozen() if run.process is not None else contextlib.nullcontext():
                async with anyio.create_task_group() as outer:
                    await _start_helpers(run, books, outer, pool, stop, progress)
                    try:
                        hook = _live_stop(run.watch, pipeline)
                        await run_models(cfg, run.work, pipeline, endpoints, stop, books.keep, elastic, hook)
                    finally:
                        outer.cancel_scope.cancel()
        except Exception as e:  # a bug or an I/O failure: the run stays resumable
            status, message = "failed", _describe(e)
        still_open = sum(len(b.open_batches()) for b in pool.batch_endpoints)
    return _Ended(stop, pipeline, status, message, still_open, run.watch)


async def _start_helpers(
    run: _Run, books: _Books, outer: Any, pool: Any, stop: StopControl, progress: str
) -> None:
    """The tasks beside the workers: group commit, the board, signals, the summary, the coordinator
    and the batch collector (started, so the pool can take batch calls, before any pair runs)."""
    process = run.process
    outer.start_soon(run.store.flusher)
    outer.start_soon(run_progress, books.state, progress)
    if process is not None:
        outer.start_soon(process.watch, stop, run.cfg.run.stop_deadline_s, outer.cancel_scope, run.store)
    outer.start_soon(_write_summary_every, run, books, process.trim if process is not None else None)
    if run.coordinator is not None:
        outer.start_soon(run.coordinator.run)
    if pool.batch_endpoints:
        await outer.start(pool.run_batches)


def _ending(
    ended: _Ended, counters: dict[tuple[str, str], Counters], run_dir: Path
) -> tuple[SweepStatus, str]:
    """The sweep's status and message from why it stopped, before its verdicts are checked."""
    stop, judges_out = ended.stop, ended.pipeline.exhausted_judges
    status, message = ended.status, ended.message
    if stop.reason is not None:
        status = stop.reason
        if status == "budget_exhausted" and judges_out and not message:
            message = "budget reached for " + ", ".join(f"judge {j}" for j in sorted(judges_out))
    elif (stop.exhausted_models or judges_out) and status == "complete":
        status = "budget_exhausted"
        message = "budget reached for " + ", ".join(
            [*sorted(stop.exhausted_models), *(f"judge {j}" for j in sorted(judges_out))]
        )
    elif status == "complete" and any(c.done + c.errors < c.planned for c in counters.values()):
        settled = ended.watch is not None and ended.watch.settled_models
        status, message = ("settled", "") if settled else ("failed", "some pairs did not finish")
    if ended.still_open and status != "complete":
        # Left running at the provider (never cancelled on exit): the next run collects them.
        n = ended.still_open
        message = (message + "; " if message else "") + (
            f"{n} batch{'es' if n != 1 else ''} still running at the provider: run the "
            f"same command again to collect the results (`ifsweep batches {run_dir} --cancel` cancels)"
        )
    return status, message


async def _finish(run: _Run, books: _Books, ended: _Ended) -> SweepResult:
    """Check the verdicts, flush, leave the coordinator, and write the final summary."""
    cfg, counters = run.cfg, books.counters
    status, message = _ending(ended, counters, run.run_dir)
    if status == "complete":
        try:
            pipeline = ended.pipeline
            check_sweep_verdicts(
                run.store,
                pipeline.seen,
                lambda: _owners(pipeline, cfg, run.work, books.keep),
                lambda: _planned(pipeline, cfg, run.work, books.keep),
            )
        except IncompleteVerdicts as e:
            status, message = "failed", str(e)
    errors = sum(c.errors for c in counters.values())
    if status in ("complete", "settled") and errors:
        status = "failed"  # said below, once the kinds are counted
    if status == "settled" and run.watch is not None:
        from ifsweep.runner.engine.stopping import plan_cost, stop_message

        message = stop_message(run.watch, plan_cost(counters, _spent_by_group(books.tally, counters)))
    try:
        run.store.flush()
    except DiskFullError as e:
        status, message = "failed", _describe(e)
    if run.coordinator is not None and not await run.coordinator.close():
        print("[ifsweep] coordinator unreachable at exit: the last spend is not shared", file=sys.stderr)
    result = _result(status, counters, books.budget, message)
    if errors:
        by_kind = _errors_by_kind(run.store, cfg, run.work, books.keep)
        told = errors_message(errors, by_kind)
        said = f"{result.message}; {told}" if result.message else told
        result = dataclasses.replace(result, errors_by_kind=by_kind, message=said)
    try:
        write_summary(
            run.run_dir,
            result.status,
            result,
            counters,
            books.tally,
            run.started,
            run.writer_id,
            books.state,
            books.shared_at,
        )
    except OSError as e:  # the same full disk: the shards, not the summary, are what resume reads
        print(f"[ifsweep] could not write the summary: {e}", file=sys.stderr)
    return result


def _errors_by_kind(store: Any, cfg: SweepConfig, work: Work, keep: Keep) -> dict[str, int]:
    """Why this sweep's pairs in error failed, from what is stored: one pass over the records, made
    only when some pair failed (a clean resume never pays for it)."""
    tally = ErrorTally()
    for rec in store.iter_records({"generation", "judgment", "verdict"}):
        tally.add(rec)
    planned = {
        (s.label, job.cfg.label, inst.instance_id) for s, job, inst in all_pairs(work, cfg.models, keep)
    }
    return tally.by_kind(lambda pair, _judge: pair in planned)


def _owners(pipeline: Pipeline, cfg: SweepConfig, work: Work, keep: Keep) -> Iterator[Owner]:
    judges = [judge.spec.label if judge is not None else None for judge in pipeline.panel()]
    for spec, job, inst in all_pairs(work, cfg.models, keep):
        for judge in judges:
            yield spec.label, job.cfg.label, inst.instance_id, judge


def _planned(pipeline: Pipeline, cfg: SweepConfig, work: Work, keep: Keep) -> Iterator[Planned]:
    for spec, job, inst in all_pairs(work, cfg.models, keep):
        yield from planned_verdicts(pipeline, spec, job, inst)


class IncompatibleRun(ValueError):
    """The run directory holds results made under settings this config would change."""


def build_manifest(cfg: SweepConfig, work: Work) -> Manifest:
    from ifsweep.runner.store.shards import record_key

    def entry(spec: EndpointSpec) -> ModelEntry:
        params, sent = dict(spec.params), sent_params(spec)
        return ModelEntry(model=spec.model, params=params, endpoint=endpoint_identity(spec), sent=sent)

    return Manifest(
        ifsweep_version=_version(),
        config_hash=record_key(dict(cfg.raw)),
        benchmarks={
            job.cfg.label: BenchmarkEntry(
                data_hash=data_hash(_data_dir(job)),
                template_version=job.template_version,
                scoring=job.cfg.scoring,
                settings={"reask": job.cfg.reask, **dict(job.cfg.options)},
                instances=tuple(inst.instance_id for inst in instances),
                strata=work.strata[i] if work.strata else None,
                data_path=str(_data_dir(job).resolve()),
            )
            for i, (job, instances) in enumerate(work.jobs)
        },
        models={s.label: entry(s) for s in cfg.models},
        judge=entry(cfg.judge) if cfg.judge is not None else None,
        judges={s.label: entry(s) for s in cfg.judges},
        judge_order=tuple(s.label for s in cfg.judges),
        model_order=tuple(s.label for s in cfg.models),
        benchmark_order=tuple(job.cfg.label for job, _ in work.jobs),
        budget_usd=cfg.run.max_usd,
        limits={"concurrency": cfg.run.concurrency},
        order=_order_entry(cfg),
    )


def _order_entry(cfg: SweepConfig) -> dict[str, Any]:
    if cfg.run.order == SEEDED_ORDER:
        return {"kind": cfg.run.order, "seed": cfg.run.order_seed}
    return {"kind": cfg.run.order}


def _data_dir(job: BenchJob) -> Path:
    # load_work records where it read (a local copy or the verified download): hash that, without a
    # second download check.
    if job.data_dir is None:
        raise ValueError(f"{job.cfg.name}: job built without the data directory it was loaded from")
    return job.data_dir


def data_hash(path: Path) -> str:
    """sha256 over the data files' names and bytes; a `limit` or option change leaves it alone."""
    h = hashlib.sha256()
    files = (
        [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
    )
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ifsweep")
    except PackageNotFoundError:
        return "unknown"


def prepare_run_dir(run_dir: Path, cfg: SweepConfig, work: Work) -> bool:
    """Refuse a resume that would mix settings; otherwise (re)write the manifest before any result.
    True when the directory was written before verdict keys named slots (manifest.TEMPLATE_SCHEME)."""
    new = build_manifest(cfg, work)
    old = read_manifest(run_dir)
    older = old is not None and any(b.template_scheme < TEMPLATE_SCHEME for b in old.benchmarks.values())
    if old is None and (why := older_records(run_dir)) is not None:
        raise IncompatibleRun(why)
    if old is not None:
        old = relabel_legacy_judge(old, new)
        verdict = compare(old, new, has_results=_has_results(run_dir))
        if not verdict.ok:
            raise IncompatibleRun(f"{run_dir}: {verdict.message()}")
        # Keep what the earlier run recorded for benchmarks and models this config leaves out.
        new = Manifest(
            ifsweep_version=new.ifsweep_version,
            config_hash=new.config_hash,
            benchmarks={**old.benchmarks, **new.benchmarks},
            models={**old.models, **new.models},
            judge=new.judge,
            # A judge left out of the config keeps its entry (its verdicts stay in the shards); the
            # order names the configured panel, whose first judge reports show by default.
            judges={**old.judges, **new.judges},
            judge_order=new.judge_order,
            model_order=new.model_order,
            benchmark_order=new.benchmark_order,
            budget_usd=new.budget_usd,
            limits=new.limits,
            order=new.order,
        )
        new = carry_plans(old, new)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_manifest(run_dir, new)
    except DiskFullError:
        raise  # the disk-full stop (resumable), not a config to fix
    except OSError as e:
        raise ConfigError(
            cfg.path, "run.output_dir", f"cannot write to {run_dir}: {e.strerror or e}"
        ) from None
    return older


def _has_results(run_dir: Path) -> bool:
    """Whether any shard of RUN_DIR holds a record (an earlier run may have left empty ones)."""
    return any(path.stat().st_size > 0 for _, _, path in shard_files(run_dir))


def _describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_describe(x) for x in e.exceptions))
    if isinstance(e, DiskFullError):
        return f"{e.strerror or e}; {DISK_FULL_ADVICE}"
    return f"{type(e).__name__}: {e}"


def _budget(cfg: SweepConfig, spent: SpendScan, coordinator: Any) -> Any:
    """The sweep's Budget with a scope per model (and the judge), starting from what was spent."""
    from ifsweep.providers.budget import Budget

    budget = Budget(
        cfg.run.cap_usd, spent_usd=spent.total, shared=coordinator.ledger if coordinator else None
    )
    budget.worst_case_usd = spent.worst_case
    for spec in specs_of(cfg):
        budget.add_scope(spec.label, spec.max_usd, spent_usd=spent.by.get(spec.label, 0.0))
    return budget


def _already_spent(store: Any, tally: SpendTally, writer: str | None = None) -> SpendScan:
    """Dollars recorded in the shards (by `writer` alone, if given), so a resumed run's caps count what
    earlier runs spent, calls a kill cut off included (their intents, at their worst case); each call
    record also goes into `tally` (the summary's per-(model, benchmark) spend)."""
    scan = SpendScan()
    for rec in store.iter_records(SPEND_KINDS, writer=writer):
        if rec["kind"] != INTENT:
            tally.add(rec)
        scan.add(rec)
    return scan.finish()


def _note_cancelled(run: _Run, books: _Books) -> None:
    """The summary of a sweep whose task was cancelled: "interrupted", after the shards are flushed."""
    message = "cancelled; run the same sweep again to resume"
    try:
        run.store.flush()
        result = _result("interrupted", books.counters, books.budget, message)
        write_summary(
            run.run_dir,
            result.status,
            result,
            books.counters,
            books.tally,
            run.started,
            run.writer_id,
            books.state,
        )
    except OSError as e:  # a full disk: the shards, not the summary, are what resume reads
        print(f"[ifsweep] could not write the summary: {e}", file=sys.stderr)


def _result(
    status: SweepStatus, counters: dict[tuple[str, str], Counters], budget: Any, message: str
) -> SweepResult:
    return SweepResult(
        status=status,
        planned=sum(c.planned for c in counters.values()),
        done=sum(c.done for c in counters.values()),
        errors=sum(c.errors for c in counters.values()),
        # Rounded as `ifsweep status` rounds: a resumed run adds the same bills in another order, and
        # the float sum's last digits must not read as money spent again.
        spent_usd=round(budget.spent_usd, SPEND_DECIMALS),
        worst_case_usd=round(budget.worst_case_usd, SPEND_DECIMALS),
        message=message,
        rescored=sum(c.rescored for c in counters.values()),
        max_usd=budget.max_usd,
    )


def _live_stop(watch: StopWatch | None, pipeline: Pipeline) -> LiveStop | None:
    """The scheduler's hook for `[run] stop_when`, None without it (nothing of stopping.py is loaded)."""
    if watch is None:
        return None
    from ifsweep.runner.engine.stopping import LiveStop

    return LiveStop(watch, pipeline)


def _spent_by_group(
    tally: SpendTally, counters: dict[tuple[str, str], Counters]
) -> dict[tuple[str, str], float]:
    return {g: float(tally.fields(g)["spent_usd"]) for g in counters}


async def _write_summary_every(run: _Run, books: _Books, trim: Callable[[], None] | None) -> None:
    # The shards' digest kept as they grow, by a child process (runner/store/keeping.py): the first
    # `ifsweep status` of this run parses the last round's bytes, not the whole run.
    keeper = DigestKeeper(run.run_dir)
    try:
        while True:
            await anyio.sleep(SUMMARY_EVERY_S)
            result = _result("complete", books.counters, books.budget, "")
            data = summary_bytes(
                "running", result, books.counters, books.tally, run.started, books.state, books.shared_at
            )
            # The fsync can take tens of ms on a busy disk: not on the event loop, where it would hold
            # every answer waiting to be read. The body was built here, where the counters live.
            await anyio.to_thread.run_sync(atomic_write, run.run_dir / summary_name(run.writer_id), data)
            if trim is not None:
                await anyio.to_thread.run_sync(trim)
            keeper.poke()
    finally:
        keeper.close()


def write_summary(
    run_dir: Path,
    status: str,
    result: SweepResult,
    counters: dict[tuple[str, str], Counters],
    tally: SpendTally,
    started: float,
    writer_id: str = "main",
    state: ProgressState | None = None,
    coordinator: str | None = None,
) -> None:
    """RUN_DIR/summary.json (summary-p0of4.json for a partition: `status.summary_name`), replaced
    atomically so a reader never sees half of it. `status` is the sweep's status, or "running".
    `coordinator`: the shared ledger's URL, when `spent_usd` is the total of every process."""
    data = summary_bytes(status, result, counters, tally, started, state, coordinator)
    atomic_write(run_dir / summary_name(writer_id), data, in_place_if_full=True)


def summary_bytes(
    status: str,
    result: SweepResult,
    counters: dict[tuple[str, str], Counters],
    tally: SpendTally,
    started: float,
    state: ProgressState | None = None,
    coordinator: str | None = None,
) -> bytes:
    """`spent_usd` at the top is every call this run directory paid for (the shared ledger's total
    under a coordinator); each by_model row's `spent_usd` is that (model, benchmark)'s answers plus
    its judge calls, `judge_usd` the judge calls alone: the figures `ifsweep status` computes."""
    body: dict[str, Any] = {
        "status": status,
        "complete": status == "complete",
        "message": result.message,
        "planned": result.planned,
        "done": result.done,
        "errors": result.errors,
        "errors_by_kind": dict(result.errors_by_kind),
        "rescored": result.rescored,
        "spent_usd": result.spent_usd,
        # Of spent_usd: what providers reported (or we estimated from an answer), and the worst case
        # charged for calls whose bill is unknown (cut off, cancelled or killed in flight).
        "paid_usd": max(0.0, result.spent_usd - result.worst_case_usd),
        "worst_case_usd": result.worst_case_usd,
        "max_usd": result.max_usd,
        "started_at": started,
        "updated_at": time.time(),
        "by_model": [
            {
                "model": model,
                "benchmark": bench,
                "planned": c.planned,
                "done": c.done,
                "errors": c.errors,
                "calls": c.calls + c.judge.calls,
                **tally.fields((model, bench)),
            }
            for (model, bench), c in sorted(counters.items())
        ],
    }
    if state is not None and state.stopping is not None:  # `[run] stop_when`: runner/engine/stopping.py
        from ifsweep.runner.engine.stopping import plan_cost

        body["stop_when"] = {**state.stopping(), **plan_cost(counters, _spent_by_group(tally, counters))}
    if state is not None:  # what `ifsweep status` needs to redo the ETA (runner/watch/status.py)
        body.update(state.summary_fields())
    if coordinator is not None:
        body["coordinator"] = coordinator
    return orjson.dumps(body, option=orjson.OPT_INDENT_2)
