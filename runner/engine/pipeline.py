"""One (model, instance) through the stages: generate -> rule checks and judge turns -> verdict record.

Every call goes through the content-addressed store first: a key already there (and not an error to
retry) is never sent again, which is all that resume needs. Multi-turn judging resumes turn by turn,
because each turn's key covers the whole conversation before it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio

from ifsweep.benchmarks import Benchmark, Instance, JudgeTask, Message, TurnOutcome, scoring_version
from ifsweep.providers.records import BudgetExhausted, Completion, EndpointSpec
from ifsweep.providers.send.params import sent_params
from ifsweep.providers.send.prefix import CacheHint
from ifsweep.runner.config import BenchmarkConfig
from ifsweep.runner.engine.admission import Admission
from ifsweep.runner.engine.warmup import WarmGate, hints_for
from ifsweep.runner.store import keys
from ifsweep.runner.store.keys import Identity, endpoint_identity
from ifsweep.runner.store.seen import SeenVerdicts, verdict_problem
from ifsweep.runner.store.shards import RunStore
from ifsweep.runner.watch.outcomes import Counters, JudgeCounters

Outcome = Literal["done", "cached", "error", "skipped"]
# The "v" of every record this module writes; 2 since keys carry the endpoint and the instance
# (runner.store.keys).
RECORD_VERSION = keys.KEY_SCHEMA
# A constraint's (value, source, status) by its index.
Values = dict[int, tuple[bool | None, str, str]]


class SupportsComplete(Protocol):
    spec: EndpointSpec
    caches_prefixes: (
        bool  # whether calls sharing a prompt prefix should warm it first (runner/engine/warmup.py)
    )

    # `cache`: a shared-prefix hint (runner/engine/warmup.py); `key`: the call's content key, which batch mode
    # uses as the request's custom_id (providers/batch/endpoint.py).
    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        cache: CacheHint | None = None,
        *,
        key: str | None = None,
    ) -> Completion: ...


@dataclass(frozen=True, slots=True)
class BenchJob:
    cfg: BenchmarkConfig
    bench: Benchmark
    template_version: str
    data_dir: Path | None = None  # where the instances were read from (the manifest hashes it)

    @property
    def scoring_version(self) -> str:
        """The version of the code that turns this benchmark's replies into verdicts (derived from it)."""
        return scoring_version(self.bench)


@dataclass(frozen=True, slots=True)
class VerdictRef:
    """Where one judge's verdict on a pair is stored (its slot's key) and what it must be derived from.
    `replaces`: the slot holds a verdict derived from something else, which this one replaces."""

    key: str
    basis: str
    replaces: bool = False


@dataclass(frozen=True, slots=True)
class _JudgeCall:
    """What one judge turn's calls share: the pair, the task and turn, the judge, the counters."""

    job: BenchJob
    spec: EndpointSpec
    inst: Instance
    task: JudgeTask
    turn_idx: int
    judge: SupportsComplete
    c: Counters


@dataclass(slots=True)
class Pipeline:
    store: RunStore
    # The panel: every judge judges every pair into a verdict record of its own (its key names the
    # judge), from the one generation. Empty when no benchmark of the sweep needs a judge.
    judges: Sequence[SupportsComplete]
    retry_errors: bool
    counters: dict[tuple[str, str], Counters]  # (model label, benchmark table's report name)
    # What an answer depends on besides the request (runner.store.keys); an import answers from files instead.
    identify: Callable[[EndpointSpec], Identity] = endpoint_identity
    judge_counters: dict[str, JudgeCounters] = field(default_factory=dict)  # by judge label
    # Judges whose own cap (max_usd) ran out: they judge nothing more, the rest of the panel goes on.
    exhausted_judges: set[str] = field(default_factory=set)
    # Slots holding a verdict of the older key scheme (runner.store.keys.older_slots): a verdict written
    # there replaces it, and counts as re-scored.
    replacing: frozenset[str] = frozenset()
    # Keys of calls in flight (_once), each with the event its waiters wait on: made by the first waiter,
    # so a call nobody else asks for makes none.
    _pending: dict[str, anyio.Event | None] = field(default_factory=dict)
    # Every verdict written or found, checked as it was: the check after the sweep reads this.
    seen: SeenVerdicts = field(default_factory=SeenVerdicts)
    # Judge tasks alive at once per judge (runner/engine/admission.py); None: as many as pairs plan.
    judge_slots: int | None = None
    _gates: dict[str, Admission] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for j in self.judges:
            self.judge_counters.setdefault(j.spec.label, JudgeCounters())

    def panel(self) -> tuple[SupportsComplete | None, ...]:
        """The judges a pair gets a verdict from; (None,) without any: one verdict of rule values."""
        return tuple(self.judges) if self.judges else (None,)

    # ------------------------------------------------------------------------------------------ keys

    def generation_key(self, spec: EndpointSpec, inst: Instance) -> str:
        return keys.generation_key(self.identify(spec), sent_params(spec), _msgs(inst.messages))

    def verdict_ref(
        self,
        gen_key: str,
        spec: EndpointSpec,
        job: BenchJob,
        inst: Instance,
        unscored: frozenset[int] = frozenset(),
        judge: SupportsComplete | None = None,
    ) -> VerdictRef:
        """The slot and basis of `judge`'s verdict on the pair (None: a sweep without judges)."""
        js = judge.spec if judge is not None else None
        key = keys.verdict_key(
            benchmark=job.cfg.label,
            instance_id=inst.instance_id,
            model=spec.label,
            judge=None if js is None else js.label,
            scoring=job.cfg.scoring,
        )
        basis = keys.verdict_basis(
            gen_key=gen_key,
            judge=None if js is None else (self.identify(js), sent_params(js)),
            reask=job.cfg.reask,
            template=job.template_version,
            code=job.scoring_version,
            unscored=unscored,
        )
        return VerdictRef(key, basis)

    def _judge_key(self, judge: SupportsComplete, messages: Sequence[Message], ask: int) -> str:
        spec = judge.spec
        return keys.judge_key(self.identify(spec), sent_params(spec), _msgs(messages), ask)

    def _cached(self, key: str) -> dict[str, Any] | None:
        rec = self.store.get(key)
        if rec is None:
            return None
        if rec.get("status") == "error" and self.retry_errors:
            return None
        return rec

    # ------------------------------------------------------------------------------------------ stages

    async def evaluate(
        self,
        endpoint: SupportsComplete,
        job: BenchJob,
        inst: Instance,
        *,
        unscored: frozenset[int] = frozenset(),
    ) -> Outcome:
        """Score `inst` with `endpoint`'s answer into a verdict record per judge. `unscored` (imports
        only): constraints the reference tool leaves out of its scores; they get no row and no judge
        call. A judge added to a finished run finds every generation stored and sends only its calls."""
        spec = endpoint.spec
        c = self.counters[(spec.label, job.cfg.label)]
        gen_key = self.generation_key(spec, inst)
        todo, kept_error = self._to_derive(spec, job, inst, gen_key, unscored)
        if not todo:
            if kept_error:
                c.errors += 1
                return "error"
            c.cached += 1
            c.done += 1
            return "cached"
        gen = await self._generation(endpoint, job, inst, gen_key, c)
        found: list[str] = ["skipped"] * len(todo)

        async def judge_one(i: int, judge: SupportsComplete | None, ref: VerdictRef) -> None:
            found[i] = await self._verdict(judge, endpoint, job, inst, gen, gen_key, ref, unscored, c)
            if ref.replaces and found[i] != "skipped":
                c.rescored += 1

        if len(todo) == 1:
            await judge_one(0, *todo[0])
        else:
            await _together(
                [functools.partial(judge_one, i, judge, ref) for i, (judge, ref) in enumerate(todo)]
            )
        if "skipped" in found:
            return "skipped"  # a judge's own cap ran out: the pair is not finished (summary says why)
        if kept_error or "error" in found:
            c.errors += 1
            return "error"
        c.done += 1
        return "done"

    def _to_derive(
        self, spec: EndpointSpec, job: BenchJob, inst: Instance, gen_key: str, unscored: frozenset[int]
    ) -> tuple[list[tuple[SupportsComplete | None, VerdictRef]], bool]:
        """The panel's verdicts on the pair still to derive, and whether one stays kept in error; the
        ones stored and current are counted (and noted as seen)."""
        todo: list[tuple[SupportsComplete | None, VerdictRef]] = []
        kept_error = False
        for judge in self.panel():
            ref = self.verdict_ref(gen_key, spec, job, inst, unscored, judge)
            cached = self._cached(ref.key)
            if cached is not None and cached.get("basis") != ref.basis:
                ref, cached = replace(ref, replaces=True), None  # derived from something else: anew
            elif cached is None and ref.key in self.replacing:
                ref = replace(ref, replaces=True)
            jc = self.judge_counters.get(judge.spec.label) if judge is not None else None
            if cached is None:
                todo.append((judge, ref))
                continue
            self._saw(ref, cached, spec, job, inst, judge)
            if cached.get("status") == "error":  # kept as is under --no-retry-errors: still an error
                kept_error = True
                if jc is not None:
                    jc.errors += 1
            elif jc is not None:
                jc.cached += 1
                jc.done += 1
        return todo, kept_error

    async def _verdict(
        self,
        judge: SupportsComplete | None,
        endpoint: SupportsComplete,
        job: BenchJob,
        inst: Instance,
        gen: Mapping[str, Any],
        gen_key: str,
        ref: VerdictRef,
        unscored: frozenset[int],
        c: Counters,
    ) -> str:
        """One judge's verdict record on the pair: "ok", "error", or "skipped" when the judge's own
        budget is spent (then no record: a later run with a higher cap judges it)."""
        spec = endpoint.spec
        label = judge.spec.label if judge is not None else None
        if label is not None and label in self.exhausted_judges:
            return "skipped"
        values: Values = {}
        audit: Values = {}  # an audit task's verdicts on constraints a rule decides (status not counted)
        if gen["status"] != "error":
            values, judge_tasks = _plan(job, inst, gen, unscored)
            if judge_tasks:
                if judge is None:
                    raise RuntimeError(f"{job.cfg.label} needs a [judge] for {inst.instance_id}")
                gate = self._gate(judge)
                slots = 0 if gate is None else gate.clamp(len(judge_tasks))
                if gate is not None and not gate.try_take(slots):
                    # Wait holding the instance and the answer, not the plan's prompts (an EIFBench
                    # plan is about 80 of them): the plan is a pure function of both, made again.
                    del judge_tasks
                    await gate.take(slots)
                    values, judge_tasks = _plan(job, inst, gen, unscored)
                judged = await self._judge_all(job, spec, inst, judge_tasks, c, judge, slots)
                if judged is None:
                    return "skipped"
                # An audit task's verdicts go beside the rule's rows, never in their place.
                audited = _audited(judge_tasks)
                values.update({i: v for i, v in judged.items() if i not in unscored and i not in audited})
                audit = {i: (v, "audit", st) for i, (v, _, st) in judged.items() if i in audited}
        rows, status = _verdict_rows(inst, values, unscored, gen_error=gen["status"] == "error")
        rows += [_row(con.idx, inst, *audit[con.idx]) for con in inst.constraints if con.idx in audit]
        rec = self._write_verdict(ref, gen_key, spec, job, inst, rows, status, judge)
        self._saw(ref, rec, spec, job, inst, judge)
        jc = self.judge_counters.get(label) if label is not None else None
        if jc is not None:
            if status == "error":
                jc.errors += 1
            else:
                jc.done += 1
        return status

    def _gate(self, judge: SupportsComplete) -> Admission | None:
        """`judge`'s admission (runner/engine/admission.py), None when the pipeline bounds nothing. A
        judge in batch mode may hold a whole batch's tasks at once."""
        if self.judge_slots is None:
            return None
        label = judge.spec.label
        gate = self._gates.get(label)
        if gate is None:
            batch = judge.spec.batch
            gate = Admission(max(self.judge_slots, batch.max_requests if batch is not None else 0))
            self._gates[label] = gate
        return gate

    async def _judge_all(
        self,
        job: BenchJob,
        spec: EndpointSpec,
        inst: Instance,
        tasks: Sequence[JudgeTask],
        c: Counters,
        judge: SupportsComplete,
        slots: int = 0,
    ) -> Values | None:
        """`judge`'s values over every task of the pair, its tasks run at once; None when the judge's
        own cap ran out (it stops, the rest of the panel and the models go on; with no judge left the
        sweep stops: answers nobody can judge are not bought). `slots`: taken from the judge's
        admission for these tasks: that many runners share them, each giving its slot back when no
        task is left for it, so a pair never has more tasks alive than it holds slots."""
        # None until the task's turns all completed: a task cut off (cancelled by a stop, or by a
        # native CancelledError such as a coordinator batch abandoned at give-up, which a task group
        # does not report) leaves its None, and then the pair gets no verdict.
        results: list[Values | None] = [None for _ in tasks]
        admission = self._gates[judge.spec.label] if slots else None
        held = [slots]  # not yet given back: the rest goes back at the end, however it ended
        gate = WarmGate()
        pending = iter(enumerate(tasks))

        async def runner() -> None:
            try:
                for i, task in pending:  # next() never awaits: no task is taken twice
                    results[i] = await self._judge_task(job, spec, inst, task, c, judge, hints.get(i), gate)
            finally:
                if admission is not None:
                    held[0] -= 1
                    admission.give(1)

        try:
            hints = _cache_hints(judge, tasks)
            await _together([runner] * (slots or len(tasks)))
        except BudgetExhausted as exhausted:
            if exhausted.scope == judge.spec.label:
                self.exhausted_judges.add(judge.spec.label)
                if all(j.spec.label in self.exhausted_judges for j in self.judges):
                    raise
                return None
            raise
        finally:
            if admission is not None and held[0]:
                admission.give(held[0])
        if any(r is None for r in results):
            # A cut-off turn is no verdict (the resume judges it): end as the cancellation it was.
            raise anyio.get_cancelled_exc_class()(f"judge {judge.spec.label}: turns cut off")
        return {idx: v for r in results if r is not None for idx, v in r.items()}

    async def _once(self, key: str, fetch: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Single flight for every kind of call: the stored record for `key`, else the one `fetch`
        sends for and stores. A key in flight is awaited and its record taken (an error included,
        which this run just tried), never sent again: instances with equal messages share a
        generation, two model ids on one endpoint share it and then their judge calls."""
        while True:
            rec = self._cached(key)
            if rec is not None:
                return rec
            if key not in self._pending:
                break
            pending = self._pending[key]
            if pending is None:
                pending = self._pending[key] = anyio.Event()
            await pending.wait()
            rec = self.store.get(key)
            if rec is not None:
                return rec
        self._pending[key] = None
        try:
            return await fetch()
        finally:
            done = self._pending.pop(key)
            if done is not None:
                done.set()

    async def _generation(
        self, endpoint: SupportsComplete, job: BenchJob, inst: Instance, key: str, c: Counters
    ) -> dict[str, Any]:
        """The stored answer for `key`, or a fresh one (bought once however many pairs ask at once)."""

        async def fetch() -> dict[str, Any]:
            completion = await endpoint.complete(_msgs(inst.messages), key=key)
            gen = completion_record("generation", key, completion) | {
                "model": endpoint.spec.label,
                "benchmark": job.cfg.label,
                "instance_id": inst.instance_id,
            }
            self.store.append(gen)
            c.add(completion)
            return gen

        return await self._once(key, fetch)

    async def _judge_task(
        self,
        job: BenchJob,
        spec: EndpointSpec,
        inst: Instance,
        task: JudgeTask,
        c: Counters,
        judge: SupportsComplete,
        hint: CacheHint | None = None,
        gate: WarmGate | None = None,
    ) -> Values:
        """`hint`: the first turn's shared prefix, if any; its first sender warms it through `gate`
        while the others sharing it wait (cache-aware dispatch, runner/engine/warmup.py). Keys are
        unchanged: what a reply depends on is the prompt, and the hint does not change the prompt."""
        out: Values = {}
        replies: list[str] = []
        for turn_idx, turn in enumerate(task.turns):
            call = _JudgeCall(job, spec, inst, task, turn_idx, judge, c)
            asked = await self._ask_turn(call, tuple(replies), hint if turn_idx == 0 else None, gate)
            if asked is None:
                return _fill(out, task, "error")
            outcome, reply = asked
            idxs = turn.constraint_idxs
            if outcome.values is None:
                for idx in idxs:
                    out[idx] = (None, "judge", "unparsed")
            else:
                for idx, v in zip(idxs, outcome.values, strict=True):
                    out[idx] = (v, "judge", "ok" if v is not None else "unparsed")
            replies.append(reply)
            if outcome.stop:
                # The reference protocol never asks the rest: they get no row at all, as there.
                return _fill(out, task, "skipped")
        return _fill(out, task, "unparsed")

    async def _ask_turn(
        self, call: _JudgeCall, replies: tuple[str, ...], hint: CacheHint | None, gate: WarmGate | None
    ) -> tuple[TurnOutcome, str] | None:
        """One turn's parsed reply, re-asked while unparsed; None when a call ended in error.

        A re-ask is a follow-up, not the same request again (at temperature 0 that mostly gets the
        same reply): the unparsed replies, each followed by the benchmark's format rule
        (docs/design/reask.md). The key covers exactly what is sent, so resume stays exact."""
        job, inst, task = call.job, call.inst, call.task
        unparsed: list[str] = []
        for ask in range(job.cfg.reask + 1):
            messages = task.messages_for_ask(call.turn_idx, replies, tuple(unparsed))
            key = self._judge_key(call.judge, messages, ask)
            parsed: list[TurnOutcome] = []  # filled when this asker is the one that sends
            send = functools.partial(self._judge_call, call, messages, key, ask, hint, gate, parsed)
            rec = await self._once(key, send)
            if rec["status"] == "error":
                return None
            reply = rec.get("text") or ""
            outcome = (
                parsed[0] if parsed else job.bench.parse(inst, task, call.turn_idx, reply, job.cfg.scoring)
            )
            if outcome.parsed:
                return outcome, reply
            call.c.unparsed += 1
            if ask == job.cfg.reask:
                return outcome, reply
            unparsed.append(reply)
        raise AssertionError("unreachable: the last ask returns")

    async def _judge_call(
        self,
        call: _JudgeCall,
        messages: Sequence[Message],
        key: str,
        ask: int,
        hint: CacheHint | None,
        gate: WarmGate | None,
        parsed: list[TurnOutcome],
    ) -> dict[str, Any]:
        """Send one judge request and store its record (parsed: whether the benchmark read it)."""
        judge, job = call.judge, call.job
        if hint is not None and gate is not None:
            async with gate.warm(hint.key):
                completion = await judge.complete(_msgs(messages), hint, key=key)
        else:
            completion = await judge.complete(_msgs(messages), key=key)
        rec = completion_record("judgment", key, completion) | {
            "judge": judge.spec.label,
            "model": call.spec.label,
            "benchmark": job.cfg.label,
            "instance_id": call.inst.instance_id,
            "task_idx": call.task.task_idx,
            "turn_idx": call.turn_idx,
            "ask": ask,
            "parse": None,
        }
        _count_judge_call(call.c, self.judge_counters, judge.spec.label, completion)
        if rec["status"] != "error":
            outcome = job.bench.parse(
                call.inst, call.task, call.turn_idx, rec.get("text") or "", job.cfg.scoring
            )
            rec["parse"] = "ok" if outcome.parsed else "unparsed"
            parsed.append(outcome)
        self.store.append(rec)
        return rec

    def _saw(
        self,
        ref: VerdictRef,
        rec: Mapping[str, Any],
        spec: EndpointSpec,
        job: BenchJob,
        inst: Instance,
        judge: SupportsComplete | None,
    ) -> None:
        """Note the verdict record now in `ref`'s slot, checked against the pair it is for."""
        owner = (spec.label, job.cfg.label, inst.instance_id, judge.spec.label if judge else None)
        problem = verdict_problem(rec, owner, ref.basis, len(inst.constraints))
        self.seen.note(ref.key, problem, owner, error=rec.get("status") == "error")

    def _write_verdict(
        self,
        ref: VerdictRef,
        gen_key: str,
        spec: EndpointSpec,
        job: BenchJob,
        inst: Instance,
        rows: list[dict[str, Any]],
        status: str,
        judge: SupportsComplete | None = None,
    ) -> dict[str, Any]:
        rec = {  # key, kind and status first: the order of the shard line (shards.encode_line)
            "key": ref.key,
            "kind": "verdict",
            "status": status,
            "v": RECORD_VERSION,
            "basis": ref.basis,
            "code": job.scoring_version,  # for a reader: which scoring code derived it
            "model": spec.label,
            "judge": judge.spec.label if judge is not None else None,
            "benchmark": job.cfg.label,
            "instance_id": inst.instance_id,
            "group_id": inst.group_id,
            "level": inst.level,
            "category": inst.category,
            "split": inst.split,
            "gen_key": gen_key,
            "scoring": job.cfg.scoring,
            "rows": rows,
            # Constraints left without a row by the benchmark's (or the reference's) rule: with the
            # rows they account for every constraint, which check_verdicts verifies.
            "skipped": len(inst.constraints) - len(rows),
            "ts": time.time(),
        }
        self.store.append(rec)
        return rec


def _plan(
    job: BenchJob, inst: Instance, gen: Mapping[str, Any], unscored: frozenset[int]
) -> tuple[Values, list[JudgeTask]]:
    """The benchmark's plan for the answer: the rule values, and the judge tasks that decide anything."""
    plan = job.bench.plan(inst, gen.get("text") or "", job.cfg.scoring)
    # A rule value of None means the benchmark does not score that constraint at all (as its
    # reference does not): no row, so it is neither a failure nor a gap in coverage.
    values: Values = {
        idx: (v, "rule", "ok" if v is not None else "skipped") for idx, v in plan.rule_values.items()
    }
    values.update(dict.fromkeys(unscored, (None, "rule", "skipped")))
    return values, [t for t in plan.judge_tasks if not _decides_only(t, unscored)]


def _verdict_rows(
    inst: Instance, values: Values, unscored: frozenset[int], *, gen_error: bool
) -> tuple[list[dict[str, Any]], str]:
    """The verdict's rows and status: every scored constraint in error when the generation failed,
    else its value (unparsed when no judge reached it); constraints "skipped" get no row."""
    if gen_error:
        rows = [
            _row(con.idx, inst, None, "judge", "error") for con in inst.constraints if con.idx not in unscored
        ]
        return rows, "error"
    rows = []
    status = "ok"
    for con in inst.constraints:
        v, source, st = values.get(con.idx, (None, "judge", "unparsed"))
        if st == "skipped":
            continue
        rows.append(_row(con.idx, inst, v, source, st))
        if st == "error":
            status = "error"
    return rows, status


def _count_judge_call(
    c: Counters, by_judge: dict[str, JudgeCounters], judge: str, completion: Completion
) -> None:
    """A judge call counts for the pair's (model, benchmark) and for the judge (no throwaway
    JudgeCounters per call: this runs on every judge call)."""
    c.judge.add(completion)
    jc = by_judge.get(judge)
    if jc is None:
        jc = by_judge[judge] = JudgeCounters()
    jc.add(completion)


def _cache_hints(judge: SupportsComplete, tasks: Sequence[JudgeTask]) -> dict[int, CacheHint]:
    """Which of `tasks` share a first-turn prefix worth warming, when `judge` caches prefixes."""
    if not judge.caches_prefixes or len(tasks) < 2:
        return {}
    prompts = [_msgs(t.messages_for_turn(0, ())) for t in tasks]
    return hints_for(prompts, f"{judge.spec.model}@{judge.spec.api_base}")


async def _together(calls: Sequence[Callable[[], Awaitable[None]]]) -> None:
    """Run `calls` at once. The budget running out under one is the scheduler's signal to stop
    dispatching, not a failure: the others run to their end (a call of theirs already sent may have
    been billed; cancelled, its answer would be lost and bought again by the next run: chaos seed
    2009), then the first BudgetExhausted is raised, unwrapped, as a single call would raise it. Any
    other exception cancels the rest and comes out of the task group as it did."""
    exhausted: list[BudgetExhausted] = []

    async def run(call: Callable[[], Awaitable[None]]) -> None:
        try:
            await call()
        except BudgetExhausted as e:
            exhausted.append(e)

    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(run, call)
    if exhausted:
        raise exhausted[0]


def completion_record(kind: str, key: str, c: Completion) -> dict[str, Any]:
    rec: dict[str, Any] = {  # key, kind and status first: the order of the shard line (shards.encode_line)
        "key": key,
        "kind": kind,
        "status": c.status,
        "v": RECORD_VERSION,
        "text": c.text,
        "finish_reason": c.finish_reason,
        "input_tokens": c.input_tokens,
        "output_tokens": c.output_tokens,
        "cost_usd": c.cost_usd,
        "latency_s": c.latency_s,
        "attempts": c.attempts,
        "rate_limited": c.rate_limited,
        "error_kind": c.error_kind,
        "error_message": c.error_message,
        "path": c.path,
        "usage_estimated": c.usage_estimated,
        # Of input_tokens, read from / written to the provider's prefix cache; what the cache saved.
        "cached_tokens": c.cached_tokens,
        "cache_write_tokens": c.cache_write_tokens,
        "cache_saved_usd": c.cache_saved_usd,
        "ts": time.time(),
    }
    # Only when there are any (readers default them): a run without faults or a cap writes what it did.
    if c.worst_case_usd:  # of cost_usd, the worst case of attempts whose bill is unknown
        rec["worst_case_usd"] = c.worst_case_usd
    if c.intents:  # the intents this call resolves (runner/store/intents.py)
        rec["intents"] = list(c.intents)
    return rec


def _decides_only(task: JudgeTask, idxs: frozenset[int]) -> bool:
    """Whether every constraint `task` decides is among `idxs` (then nothing would use its replies)."""
    return bool(idxs) and all(i in idxs for turn in task.turns for i in turn.constraint_idxs)


def _fill(out: Values, task: JudgeTask, status: str) -> Values:
    """Constraints of turns never reached (an error, or an early stop) get `status`."""
    for turn in task.turns:
        for idx in turn.constraint_idxs:
            out.setdefault(idx, (None, "judge", status))
    return out


def _audited(tasks: Sequence[JudgeTask]) -> frozenset[int]:
    """The constraints audit tasks judge (their verdicts are rows of source "audit")."""
    return frozenset(i for t in tasks if t.audit for turn in t.turns for i in turn.constraint_idxs)


def _row(idx: int, inst: Instance, v: bool | None, source: str, status: str) -> dict[str, Any]:
    con = inst.constraints[idx]
    return {
        "constraint_idx": idx,
        "instruction_idx": con.instruction_idx,
        "constraint_type": con.type,
        "priority": con.priority,
        "satisfied": v if status == "ok" else None,
        "source": source,
        "status": status,
    }


def _msgs(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [m.as_dict() for m in messages]
