"""Batch mode: an endpoint whose `complete` sends its request through the provider's Batch API.

`BatchEndpoint.complete(messages, key=...)` reserves the worst case at the batch price, joins the
collector and waits; the endpoint's driver (`run`, started by the sweep) submits what was collected once
`max_requests` wait or the oldest has waited `max_age_s`, polls every open batch with back-off, and hands
each result back to its caller as a Completion, so parsing and re-asks (the pipeline) stay as they are.
A re-ask is a new call and joins the next batch.

Durability: a batch's custom_ids are the callers' own call keys. Its input file is uploaded, then an
"intent" record naming the file and the keys is written and fsynced (the journal, the run's shards),
then the batch is created and a "submitted" record names it. A killed sweep finds both on start: an
open batch is polled again and its results go to whoever asks for those keys; an intent without a batch
id is looked up among the provider's batches by its input file before anything is created again, so a
request is never submitted twice. A batch is "closed" once each of its keys has a stored result (or has
moved to a later batch), and is not polled again.

Failures: a failed, expired or cancelled batch, and a request answered 429 / 5xx / "batch_expired",
sends its requests again in a later batch, each up to `max_retries` times in one run (a batch found
open at start counts as this run's first); other request errors come back as error Completions, like
the interactive path's. An answer that the account is out of credit (retry.out_of_quota) ends the
endpoint's submissions for the run: later calls end `quota` at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
import anyio.abc
import orjson

from ifsweep.providers.batch.clients import (
    BatchClient,
    BatchInfo,
    BatchTooLarge,
    created_for,
    maybe_created_for,
)
from ifsweep.providers.budget import Budget, Reservation
from ifsweep.providers.pricing import estimate_tokens
from ifsweep.providers.records import (
    BATCH_KIND,
    BatchPolicy,
    BudgetExhausted,
    Completion,
    EndpointSpec,
    ErrorKind,
    Price,
)
from ifsweep.providers.send.fast import Reply, clip, parse_chat_body, reply_status
from ifsweep.providers.send.params import sent_params
from ifsweep.providers.send.retry import (
    HttpStatusError,
    RetryDecision,
    classify,
    error_code,
    out_of_quota,
    quota_advice,
)

# What every record of a batch repeats (see BatchEndpoint._record).
_CARRIED = ("custom_ids", "input_file_id", "batch_id", "reserved_usd", "line_worst_usd", "submitted_at")
# Transient failures of the Batch API's own calls (upload, create, poll, download) are retried this
# often, with back-off from the policy's poll interval, before the requests involved fail.
_OP_ATTEMPTS = 5
_RETRY_KINDS: frozenset[ErrorKind] = frozenset({"rate_limit", "server", "timeout", "connection", "malformed"})
# Request-level error codes in an error file that mean "not done, send again".
_AGAIN_CODES = frozenset({"batch_expired", "batch_cancelled", "batch_failed", "rate_limit_exceeded"})
# A finished batch whose output or error file answers 404 is read again at this many polls (a file can
# be missing for a moment after the batch ends) before its results are taken for gone.
_GONE_POLLS = 3
# OpenAI's organisation queue is full: the batch failed before anything ran (openai-python#2084).
_QUEUE_FULL = "token_limit_exceeded"


def merge_batches(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each batch's records (in write order) merged into one, by intent, oldest batch first: later
    records win, except that a batch once closed stays closed (a record of another writer, read
    later, cannot reopen it)."""
    merged: dict[str, dict[str, Any]] = {}
    for rec in records:
        intent = str(rec["key"])
        closed = merged.get(intent, {}).get("state") == "closed"
        merged.setdefault(intent, {}).update(rec)
        if closed:
            merged[intent]["state"] = "closed"
    return merged


class BatchJournal(Protocol):
    """Where batch records go: the run's shards (runner/engine/batches.py), or memory for a library caller."""

    def append(self, record: Mapping[str, Any]) -> None: ...
    def sync(self) -> None: ...  # what was appended is durable when this returns
    def answered(self, key: str) -> bool: ...  # a result the sweep keeps (a success) is stored for `key`
    # The batch records this writer collects, in write order (`adopted`: a batch another writer began).
    def batches(self) -> Iterable[Mapping[str, Any]]: ...


@dataclass(slots=True)
class MemoryJournal:
    records: list[dict[str, Any]] = field(default_factory=list)
    done: set[str] = field(default_factory=set)

    def append(self, record: Mapping[str, Any]) -> None:
        self.records.append(dict(record))

    def sync(self) -> None:
        pass

    def answered(self, key: str) -> bool:
        return key in self.done

    def batches(self) -> Iterable[Mapping[str, Any]]:
        return list(self.records)


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """What the progress board shows of one batch endpoint."""

    label: str
    submitted: int  # batches created this run or found open at start
    running: int
    done: int
    requests_waiting: int  # collected, not yet submitted
    eta_s: float | None  # until the last running batch ends (_eta)
    results_gone: int = 0  # requests whose batch ended but whose results were gone (error results_gone)


@dataclass(slots=True)
class _Call:
    key: str
    body: bytes  # the JSONL line's "body"
    worst: float
    reservation: Reservation | None
    waiter: anyio.Event = field(default_factory=anyio.Event)
    result: Completion | None = None
    cancelled: bool = False
    resumed: bool = False  # a stand-in for a key of a batch found open at start, before anyone asks
    queued_at: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class _Open:
    intent: str  # the journal key
    batch_id: str
    input_file_id: str
    keys: tuple[str, ...]
    submitted_at: float  # wall clock
    interval: float
    due: float  # monotonic
    facts: Mapping[str, Any] = field(default_factory=dict)  # what its journal records repeat
    info: BatchInfo | None = None
    cancel_asked: bool = False  # `ifsweep batches --cancel` cancelled it (the journal says so)
    missing_reads: int = 0  # polls at which one of its files answered 404


@dataclass(slots=True)
class _Failure:
    kind: ErrorKind
    message: str
    again: bool  # worth another batch


class BatchEndpoint:
    """One configured model in batch mode. `complete` raises only BudgetExhausted; `run` is the driver."""

    def __init__(
        self,
        spec: EndpointSpec,
        policy: BatchPolicy,
        *,
        model: str,  # the name the provider knows, written into each request body
        client: Callable[[], BatchClient],  # built on first use (it may need the API key)
        journal: BatchJournal,
        budget: Budget,
        price: Price | None,
        path: Literal["fast", "litellm"],
        where: Mapping[str, Any],  # route facts the journal keeps for `ifsweep batches`
        stats: Callable[[], Any],
        redact: Callable[[str], str] = lambda text: text,  # key values out of answers
        scrub: Callable[[str], str] = lambda text: text,  # keys and headers out of error messages
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.path = path
        self.caches_prefixes = False  # no warm-then-fan-out: a batch's calls go together in any order
        self._model = model
        self._make_client = client
        self._client: BatchClient | None = None
        self._journal = journal
        self._budget = budget
        self._price = price.for_batch() if price is not None else None
        self._where = dict(where)
        self._stats = stats
        self._redact = redact
        self._scrub = scrub
        self._max_out = _max_out(spec.params)
        self._params = sent_params(spec)  # what the model takes, as on the interactive routes
        self._queue: list[_Call] = []
        self._waiting: dict[str, _Call] = {}  # submitted, by key
        self._calls: dict[str, _Call] = {}  # queued or submitted this run, by key
        self._taken: dict[str, Completion] = {}  # results of batches found open at start, once handed out
        self._ready: dict[str, Completion] = {}  # results of batches found open at start, nobody asked yet
        self._latest: dict[str, str] = {}  # key -> intent of the newest batch holding it
        self._tries: dict[str, int] = {}  # key -> batches it has been in
        self._open: dict[str, _Open] = {}
        self._ended: dict[str, _Open] = {}  # over, not yet closed
        # Keys of batches found open at start, with what is held for each (None: the cap had no room).
        self._resumed_holds: dict[str, Reservation | None] = {}
        self._adopted: set[str] = set()  # keys of batches another writer began (BatchJournal.batches)
        # Keys whose result from that batch (by intent) was an error: nothing in it is worth collecting
        # again (an error is retried by a new call), so they do not keep the batch open.
        self._errored: dict[str, set[str]] = {}
        self._wake_collect = anyio.Event()  # a call joined the collector
        self._wake_poll = anyio.Event()  # a batch was submitted
        self._loading = False
        self._loaded = anyio.Event()
        self._submitted = 0
        self._done = 0
        self._gone = 0  # requests whose results were gone at the provider
        self._durations: list[float] = []  # seconds from submission to the end, of batches ended this run
        self._queue_full = False  # the enqueued-token limit refused a batch (_queue_was_full)
        self._queue_cap: int | None = None  # then: at most this many requests a batch
        # Set by the first out-of-credit answer (retry.out_of_quota): no batch is submitted after it.
        self._out_of_quota: str | None = None
        self.running_driver = False

    # ------------------------------------------------------------------------------------ interface

    def price(self) -> Price | None:
        return self._price

    def congested(self) -> bool:
        return False  # a batch takes whatever it is given

    def stats(self) -> Any:
        return self._stats()

    def progress(self) -> BatchProgress:
        now = time.time()
        etas = [_eta(b, now, self._durations) for b in self._open.values()]
        known = [e for e in etas if e is not None]
        return BatchProgress(
            label=self.spec.label,
            submitted=self._submitted,
            running=len(self._open),
            done=self._done,
            requests_waiting=len(self._queue),
            eta_s=max(known) if known and len(known) == len(etas) else None,
            results_gone=self._gone,
        )

    def open_batches(self) -> list[str]:
        return [b.batch_id for b in self._open.values()]

    async def complete(
        self, messages: Sequence[Mapping[str, str]], cache: object = None, *, key: str | None = None
    ) -> Completion:
        """`cache` (a shared-prefix hint) is ignored: a batch holds its calls together anyway, and
        warming one first would cost a whole batch cycle."""
        body = orjson.dumps({"model": self._model, "messages": list(messages), **self._params})
        key = key or hashlib.sha256(body).hexdigest()[:32]  # the shards' key length
        if not self.running_driver:
            raise RuntimeError(f"{self.spec.label}: batch mode needs the endpoint's driver running (run())")
        await self._load()
        waiting = self._waiting.get(key)
        if waiting is not None:
            # In a batch found open at start (or asked twice at once): its result is on the way.
            await waiting.waiter.wait()
            if not waiting.resumed:
                assert waiting.result is not None
                return waiting.result
        ready = self._ready.pop(key, None)
        if ready is not None:
            self._settle_resumed(key, ready.cost_usd)
            self._taken[key] = ready
            return ready
        taken = self._taken.get(key)
        if taken is not None:  # asked twice at once, answered from a batch found open at start
            return dataclasses.replace(taken, cost_usd=0.0)
        self._settle_resumed(key, 0.0)  # its batch failed it: it goes again, as a fresh call
        while (leader := self._calls.get(key)) is not None:
            # The same request asked twice at once (two model ids on one endpoint judged alike): one
            # line per custom_id in a batch, and one payment; the second asker records no cost.
            await leader.waiter.wait()
            if leader.result is not None:
                return dataclasses.replace(leader.result, cost_usd=0.0)
        if (
            self._out_of_quota is not None
        ):  # nothing more goes to this endpoint: an error a resume sends again
            return self._error("quota", self._out_of_quota, 0.0)
        worst = self._worst(messages)
        reservation = await self._budget.reserve_when_settled([self.spec.label], worst)
        call = self._calls[key] = _Call(key, body, worst, reservation)
        self._queue.append(call)
        self._wake_collect.set()
        try:
            await call.waiter.wait()
        except BaseException:
            call.cancelled = True
            if call in self._queue:  # never submitted: nothing was billed
                self._queue.remove(call)
                self._release(call, 0.0)
                self._calls.pop(key, None)
                call.waiter.set()  # whoever waits on it asks for itself
            raise
        assert call.result is not None
        return call.result

    def _worst(self, messages: Sequence[Mapping[str, str]]) -> float:
        return self._price.worst_case(estimate_tokens(messages), self._max_out) if self._price else 0.0

    def _release(self, call: _Call, cost: float) -> None:
        if call.reservation is not None:
            self._budget.settle(call.reservation, cost)
            call.reservation = None

    def _settle_resumed(self, key: str, cost: float, *, worst_case_usd: float = 0.0) -> None:
        """A key of a batch found open at start: its bill was committed by an earlier run, so all of
        it is recorded, whatever was held for it (a batch's holds are its keys' worst cases, or an
        equal share of the batch's in an older journal; none when the cap had no room left)."""
        if key not in self._resumed_holds:
            return
        hold = self._resumed_holds.pop(key)
        above = cost if hold is None else self._budget.settle(hold, cost, worst_case_usd=worst_case_usd)
        if above > 0:
            self._budget.charge([self.spec.label], above, worst_case_usd=worst_case_usd)

    # ------------------------------------------------------------------------------------ the driver

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Submit and poll until cancelled. Batches already submitted keep running at the provider."""
        self.running_driver = True
        task_status.started()
        try:
            await self._load()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._collect)
                tg.start_soon(self._poll)
        finally:
            self.running_driver = False
            self._close_answered()
            for key in list(self._resumed_holds):
                # Answered but never asked for: its cost; else its batch still runs: assume the worst.
                # Not for a batch another writer began: its pairs are that writer's, whose run stores
                # the result, and pays for it, when it collects it (a shared ledger would count it twice).
                ready = self._ready.get(key)
                waiting = self._waiting.get(key)
                worst = waiting.worst if ready is None and waiting is not None else 0.0
                cost = ready.cost_usd if ready is not None else worst
                if key in self._adopted:
                    cost = worst = 0.0
                self._settle_resumed(key, cost, worst_case_usd=worst)

    def client(self) -> BatchClient:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    async def _load(self) -> None:
        """Once: every batch the journal knows for this endpoint; the open ones are polled again. Calls
        wait until it is done, or one could be submitted again before its open batch is known."""
        if self._loaded.is_set():
            return
        if self._loading:
            await self._loaded.wait()
            return
        self._loading = True
        try:
            await self._load_now()
        finally:
            self._loaded.set()

    async def _load_now(self) -> None:
        mine = [
            r
            for r in self._journal.batches()
            if r.get("endpoint") == self.spec.label and r.get("model") == self._where.get("model")
        ]
        merged = merge_batches(mine)
        for intent, rec in merged.items():
            keys = rec.get("custom_ids")
            if isinstance(keys, list):
                for k in keys:
                    self._latest[k] = intent
        for intent, rec in merged.items():
            if rec.get("state") == "closed":
                continue
            batch_id = rec.get("batch_id")
            file_id = str(rec.get("input_file_id"))
            if not isinstance(batch_id, str):
                # Written before a create whose answer never came back: did it happen?
                try:
                    found = await self._find_created(intent, rec)
                except _OpFailed as failed:
                    raise RuntimeError(
                        f"{self.spec.label}: cannot tell whether the batch of input file {file_id} was "
                        f"created ({self._scrub(failed.message)}); run again once the provider answers"
                    ) from None
                if found is None:
                    self._journal.append(self._record(intent, "closed", rec, reason="never created"))
                    continue
                batch_id = found.id
                self._journal.append(self._record(intent, "submitted", rec, batch_id=batch_id))
            keys = tuple(rec.get("custom_ids") or ())
            if all(self._settled(k, intent) for k in keys):
                self._journal.append(self._record(intent, "closed", rec, batch_id=batch_id))
                continue
            self._track(intent, batch_id, rec, cancel_asked=rec.get("state") == "cancelled")
            self._submitted += 1
            self._resume(intent, rec, keys)
        self._journal.sync()

    def _resume(self, intent: str, rec: Mapping[str, Any], keys: tuple[str, ...]) -> None:
        """Wait for the keys of open batch `intent` (found at start) and hold each one's worst case."""
        for k, worst in zip(keys, _line_worst(rec, len(keys)), strict=True):
            if self._settled(k, intent):
                continue
            # Retries are counted per run, as the interactive path's are: only this open batch counts.
            # Earlier runs' batches did not, or a transient error line collected here would be kept as
            # the pair's answer with no retry left.
            self._tries[k] = 1
            self._waiting[k] = _Call(k, b"", worst, None, resumed=True)
            # Already committed at the provider: a cap can no longer refuse it, only hold what it may
            # cost while it runs (no room: it is charged whole when it ends, _settle_resumed).
            try:
                self._resumed_holds[k] = self._budget.reserve([self.spec.label], worst)
            except BudgetExhausted:
                self._resumed_holds[k] = None
            if rec.get("adopted"):
                self._adopted.add(k)

    async def _find_created(self, intent: str, facts: Mapping[str, Any]) -> BatchInfo | None:
        """The batch a create whose answer never came back made, if it made one: by its input file or
        metadata where the provider's batches carry them, else (Anthropic) perhaps by its size and time."""
        client = self.client()
        since = float(facts.get("submitted_at") or 0.0)
        listed: list[BatchInfo] = await self._op(lambda: client.listing(since))
        found = created_for(listed, intent, str(facts.get("input_file_id")))
        if found is not None or client.names_batches:
            return found
        known = {str(r["batch_id"]) for r in self._journal.batches() if r.get("batch_id")}
        return maybe_created_for(listed, len(facts.get("custom_ids") or ()), since, known)

    def _track(
        self, intent: str, batch_id: str, facts: Mapping[str, Any], *, cancel_asked: bool = False
    ) -> None:
        p = self.policy
        facts = {k: facts[k] for k in _CARRIED if k in facts} | {"batch_id": batch_id}
        self._open[intent] = _Open(
            intent,
            batch_id,
            str(facts.get("input_file_id")),
            tuple(facts.get("custom_ids") or ()),
            float(facts.get("submitted_at") or time.time()),
            p.poll_s,
            time.monotonic() + p.poll_s,
            facts,
            cancel_asked=cancel_asked,
        )
        self._wake_poll.set()

    async def _collect(self) -> None:
        p = self.policy
        while True:
            if not self._queue:
                self._wake_collect = anyio.Event()
                await self._wake_collect.wait()
                continue
            if self._queue_full and self._open:  # the provider's queue is full: wait for ours to end
                self._wake_collect = anyio.Event()
                await self._wake_collect.wait()
                continue
            self._queue_full = False
            oldest = self._queue[0].queued_at  # appended as they come: the first waited longest
            left = oldest + p.max_age_s - time.monotonic()
            most = min(p.max_requests, self._queue_cap or p.max_requests)
            if len(self._queue) < most and left > 0 and self._out_of_quota is None:
                self._wake_collect = anyio.Event()
                with anyio.move_on_after(left):
                    await self._wake_collect.wait()
                continue
            take, self._queue = self._queue[:most], self._queue[most:]
            await self._submit([c for c in take if not c.cancelled])

    async def _submit(self, calls: list[_Call]) -> None:
        """Submit `calls` in as many batches as the provider's own per-batch limits need (requests and
        bytes), whatever max_requests says; a batch the client still finds too large goes in halves."""
        if not calls:
            return
        if self._out_of_quota is not None:  # out of credit: no new batch, each call ends so
            for c in calls:
                self._answer(c, self._error("quota", self._out_of_quota, 0.0))
            return
        try:
            limits = self.client().limits
        except Exception as exc:  # no client (a key missing, ...): the upload's error, for each call
            decision = classify(exc)
            for c in calls:
                self._answer(c, self._error(decision.kind, f"batch upload failed: {exc}", 0.0))
            return
        for chunk in split_by_limits(
            calls, lambda c: len(_jsonl_line(c)), limits.max_requests, limits.max_bytes
        ):
            try:
                await self._submit_one(chunk)
            except BatchTooLarge:
                if len(chunk) == 1:
                    for c in chunk:
                        self._answer(
                            c, self._error("bad_request", "request over the provider's batch size limit", 0.0)
                        )
                    continue
                half = len(chunk) // 2
                await self._submit(chunk[:half])
                await self._submit(chunk[half:])

    async def _submit_one(self, calls: list[_Call]) -> None:
        lines = b"".join(_jsonl_line(c) for c in calls)
        keys = tuple(c.key for c in calls)
        try:
            file_id = await self._op(lambda: self.client().upload(lines))
        except _OpFailed as failed:
            if isinstance(failed.__cause__, BatchTooLarge):
                raise failed.__cause__ from None
            self._stop_if_out_of_quota(failed.kind, failed.message)
            for c in calls:
                self._answer(c, self._error(failed.kind, f"batch upload failed: {failed.message}", 0.0))
            return
        # The journal's key for this batch, as long as the shards' keys.
        seed = f"{self.spec.label}\0{file_id}\0{time.time()}".encode()
        intent = hashlib.sha256(seed).hexdigest()[:32]
        worst = [c.worst for c in calls]  # each line's own, for a run that finds the batch open
        base = {"custom_ids": list(keys), "input_file_id": file_id, "submitted_at": time.time()}
        base |= {"line_worst_usd": worst}
        reserved = sum(worst)
        self._journal.append(self._record(intent, "intent", base, reserved_usd=reserved))
        self._journal.sync()  # on disk before the batch can exist
        for c in calls:
            self._tries[c.key] = self._tries.get(c.key, 0) + 1
            self._latest[c.key] = intent
            self._waiting[c.key] = c
        try:
            info = await self._op(lambda: self.client().create(file_id, {"ifsweep_intent": intent}))
        except _OpFailed as failed:
            too_large = failed.__cause__ if isinstance(failed.__cause__, BatchTooLarge) else None
            # Perhaps created after all (the answer was lost): look before giving up on it. A batch the
            # provider measured over its size limit (413) was not.
            found = None if too_large else await self._maybe(lambda: self._find_created(intent, base))
            if found is None:
                self._never_created(intent, base, calls, failed.message)
                if too_large is not None:
                    for c in calls:
                        self._tries[c.key] -= 1  # never in a batch: the halves are their first
                    raise too_large from None  # _submit sends it in halves
                self._stop_if_out_of_quota(failed.kind, failed.message)
                for c in calls:
                    self._answer(c, self._error(failed.kind, f"batch create failed: {failed.message}", 0.0))
                return
            info = found
        self._journal.append(self._record(intent, "submitted", base, batch_id=info.id, reserved_usd=reserved))
        self._journal.sync()
        self._submitted += 1
        self._track(intent, info.id, base | {"reserved_usd": reserved})

    def _never_created(self, intent: str, base: Mapping[str, Any], calls: list[_Call], why: str) -> None:
        """The create of `intent`'s batch failed and it does not exist: closed, its calls in no batch."""
        self._journal.append(self._record(intent, "closed", base, reason=why))
        for c in calls:
            self._waiting.pop(c.key, None)

    async def _poll(self) -> None:
        while True:
            now = time.monotonic()
            due = [b for b in self._open.values() if b.due <= now]
            for b in due:
                try:
                    info = await self._op(lambda b=b: self.client().retrieve(b.batch_id))  # type: ignore[misc]
                except _OpFailed as failed:
                    if failed.kind == "not_found":  # gone at the provider: its requests go again
                        info = BatchInfo(b.batch_id, "failed", None, None, None, 0, 0, 0, {}, failed.message)
                    elif failed.kind in _RETRY_KINDS:
                        b.interval = min(b.interval * 2, self.policy.poll_max_s)
                        b.due = time.monotonic() + b.interval
                        continue
                    else:
                        # A refused key, say: the batch may still run and bill, so stop (the run is
                        # resumable and polls it again) rather than answer its calls with errors.
                        raise RuntimeError(
                            f"{self.spec.label}: cannot poll batch {b.batch_id}: {failed.kind} error "
                            f"({self._scrub(failed.message)}); fix it and run the same command again"
                        ) from None
                b.info = info
                if info.over:
                    await self._finish(b, info)
                else:
                    b.interval = min(b.interval * 2, self.policy.poll_max_s)
                    b.due = time.monotonic() + b.interval
            self._close_answered()
            wait = min((b.due for b in self._open.values()), default=now + 3600) - time.monotonic()
            if wait > 0:
                self._wake_poll = anyio.Event()
                with anyio.move_on_after(wait):
                    await self._wake_poll.wait()

    async def _finish(self, b: _Open, info: BatchInfo) -> None:
        """Read the output and error files of a batch that is over and answer every key it holds."""
        read = await self._read_results(b, info)
        if read is None:
            b.due = time.monotonic() + b.interval  # try the whole batch again later
            return
        results, gone = read
        del self._open[b.intent]
        self._ended[b.intent] = b
        self._done += 1
        self._durations.append(max(0.0, time.time() - b.submitted_at))
        self._journal.append(
            self._record(
                b.intent, "ended", {"custom_ids": list(b.keys)}, batch_id=b.batch_id, status=info.status
            )
        )
        if info.status == "failed" and _QUEUE_FULL in info.error_codes:
            self._queue_was_full(b, info)
        else:
            why = f"batch {b.batch_id} {info.status}" + (f": {info.errors}" if info.errors else "")
            unasked = info.status == "cancelled" and not b.cancel_asked
            for key in b.keys:
                if self._latest.get(key) == b.intent and (call := self._waiting.pop(key, None)) is not None:
                    self._conclude(call, b, results.get(key), why, gone=gone, unasked=unasked)
        self._wake_collect.set()

    async def _read_results(
        self, b: _Open, info: BatchInfo
    ) -> tuple[dict[str, Completion | _Failure], bool] | None:
        """Each key's result from the batch's files, and whether its results are gone at the provider
        (said so, or a file answered 404 at `_GONE_POLLS` polls); None: read again later."""
        results: dict[str, Completion | _Failure] = {}
        if info.results_gone:
            return results, True
        missing = False
        for file_id in (info.output_file_id, info.error_file_id):
            if file_id is None:
                continue
            try:
                raw = await self._op(lambda f=file_id: self.client().content(f))  # type: ignore[misc]
            except _OpFailed as failed:
                if failed.kind != "not_found":
                    return None
                missing = True
                continue
            for line in raw.splitlines():
                if line.strip():
                    key, result = self._read_line(line, b)
                    if key is not None:
                        results[key] = result
        if missing:
            b.missing_reads += 1
            if b.missing_reads < _GONE_POLLS:
                return None
        return results, missing

    def _conclude(
        self,
        call: _Call,
        b: _Open,
        result: Completion | _Failure | None,
        why: str,
        *,
        gone: bool,
        unasked: bool,
    ) -> None:
        """Answer `call` from its batch's result: sent again in a later batch when worth it (not when
        the batch was cancelled by someone else: a run never answers a cancel by resubmitting)."""
        key = call.key
        if result is None and gone:
            # Run and billed, perhaps, but unreadable: charged its worst case (the only bound known);
            # an error, so the next run sends it again.
            self._gone += 1
            message = f"{why}; its results are gone at the provider (expired, archived or deleted)"
            result = self._error("results_gone", message, call.worst, worst_case_usd=call.worst)
        elif result is None:
            result = _Failure("server", f"{why}; no result for this request", True)
        if isinstance(result, _Failure) and result.again and unasked:
            result = _Failure(
                "cancelled", "the batch was cancelled, not by this run: run again to send it", False
            )
        if isinstance(result, _Failure):
            self._stop_if_out_of_quota(result.kind, result.message)
            if result.again and self._tries.get(key, 0) <= self.policy.max_retries:
                self._again(call)
                return
            result = self._error(result.kind, f"{why}: {result.message}", 0.0)
        if result.status == "error":
            self._errored.setdefault(b.intent, set()).add(key)
        if call.resumed:
            self._ready[key] = result  # for whoever asks for this key
            call.waiter.set()
        else:
            self._answer(call, result)

    def _stop_if_out_of_quota(self, kind: ErrorKind, detail: str) -> None:
        """After an answer of `kind`: when it says the account is out of credit, the endpoint submits
        no batch more this run (its open batches are still collected: they may have been billed)."""
        if self._out_of_quota is None and out_of_quota(RetryDecision(False, kind)):
            where = str(self._where.get("api_base") or self._where.get("provider") or self.spec.label)
            self._out_of_quota = quota_advice(where, self.spec.model, self._scrub(detail))
            self._wake_collect.set()  # what waits in the collector ends now, not at max_age_s

    def _again(self, call: _Call) -> None:
        """`call` goes in a later batch."""
        if call.resumed:  # nobody's request yet: whoever asks sends it again
            call.waiter.set()
        elif not call.cancelled:
            call.queued_at = time.monotonic()
            self._queue.append(call)
        else:  # its asker is gone: nothing was billed; whoever else waits asks for itself
            self._release(call, 0.0)
            if self._calls.get(call.key) is call:
                del self._calls[call.key]
            call.waiter.set()

    def _queue_was_full(self, b: _Open, info: BatchInfo) -> None:
        """OpenAI's enqueued-token limit refused batch `b` before anything ran: its requests wait for
        this endpoint's open batches to end and go again, their retries untouched. With none open, the
        batch alone is over the limit: the next go in halves, and a request alone over it is an error."""
        self._queue_full = True
        alone = not self._open
        over = alone and len(b.keys) == 1
        if alone and not over:
            self._queue_cap = len(b.keys) // 2
        for key in b.keys:
            if self._latest.get(key) != b.intent or (call := self._waiting.pop(key, None)) is None:
                continue
            self._tries[key] = max(0, self._tries.get(key, 1) - 1)
            if over:
                message = f"batch {b.batch_id} failed: {info.errors} (this request alone is over the limit)"
                self._errored.setdefault(b.intent, set()).add(key)
                self._conclude(
                    call, b, self._error("bad_request", message, 0.0), "", gone=False, unasked=False
                )
            else:
                self._again(call)

    def _answer(self, call: _Call, result: Completion) -> None:
        if self._calls.get(call.key) is call:
            del self._calls[call.key]
        self._release(call, result.cost_usd)
        call.result = result
        call.waiter.set()
        if call.cancelled and result.status != "error":
            self._ready[call.key] = result  # paid for: whoever asks next gets it

    def _close_answered(self) -> None:
        """Close each ended batch whose every key is answered by a record the sweep keeps, has moved
        on to a later batch, or got an error from it. Only those: an older error record of a key is
        no answer to this batch, whose result is paid for and must be collected."""
        for intent, b in list(self._ended.items()):
            errored = self._errored.get(intent, set())
            if all(self._settled(k, intent) or k in errored for k in b.keys):
                self._journal.append(self._record(intent, "closed", b.facts, batch_id=b.batch_id))
                del self._ended[intent]
                self._errored.pop(intent, None)

    def _settled(self, key: str, intent: str) -> bool:
        return self._latest.get(key) != intent or self._journal.answered(key)

    def _read_line(self, line: bytes, b: _Open) -> tuple[str | None, Completion | _Failure]:
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None, _Failure("malformed", "result line is not JSON", True)
        if not isinstance(rec, dict) or not isinstance(rec.get("custom_id"), str):
            return None, _Failure("malformed", "result line has no custom_id", True)
        key = rec["custom_id"]
        error = rec.get("error")
        response = rec.get("response")
        if isinstance(error, dict) and error:
            code = str(error.get("code") or "")
            message = str(error.get("message") or code)
            kind: ErrorKind = (
                "timeout" if code == "batch_expired" else "server" if code in _AGAIN_CODES else "bad_request"
            )
            return key, _Failure(kind, message, code in _AGAIN_CODES)
        if not isinstance(response, dict):
            return key, _Failure("malformed", "result has neither response nor error", True)
        status = response.get("status_code")
        body = response.get("body")
        if status != 200:
            http = status if isinstance(status, int) else 500
            # The provider's own name for the error (OpenAI's insufficient_quota) decides as on the fast path.
            name = error_code(orjson.dumps(body)) if isinstance(body, dict) else None
            decision = classify(HttpStatusError(http, {}, clip(str(body)), name))
            message = f"HTTP {http}: {clip(str(body))}"
            return key, _Failure(decision.kind, message, decision.kind in _RETRY_KINDS)
        try:
            reply = parse_chat_body(orjson.dumps(body), {})
        except Exception as exc:
            return key, _Failure("malformed", str(exc), True)
        return key, self._completion(reply, key, b)

    def _completion(self, reply: Reply, key: str, b: _Open) -> Completion:
        estimated = reply.input_tokens is None or reply.output_tokens is None
        inp = reply.input_tokens if reply.input_tokens is not None else 0
        out = reply.output_tokens if reply.output_tokens is not None else 0
        if estimated:
            call = self._waiting.get(key)
            worst = call.worst if call is not None else 0.0
            cost = worst  # no usage: charge the reservation, the only bound we have
        else:
            cost = (
                self._price.cost(inp, out, reply.cached_tokens, reply.cache_write_tokens)
                if self._price
                else 0.0
            )
        saved = self._price.cost(inp, out) - cost if self._price and not estimated else 0.0
        return Completion(
            status=reply_status(reply),
            text=self._redact(reply.text) if reply.text else reply.text,
            finish_reason=reply.finish_reason,
            input_tokens=inp,
            output_tokens=out,
            cost_usd=cost,
            latency_s=max(0.0, time.time() - b.submitted_at),
            attempts=self._tries.get(key, 1),
            path=self.path,
            usage_estimated=estimated,
            cached_tokens=reply.cached_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            cache_saved_usd=saved,
        )

    def _error(
        self, kind: ErrorKind, message: str, cost: float, *, worst_case_usd: float = 0.0
    ) -> Completion:
        return Completion(
            status="error",
            text=None,
            cost_usd=cost,
            worst_case_usd=worst_case_usd,
            error_kind=kind,
            error_message=self._scrub(message),
            path=self.path,
        )

    def _record(self, intent: str, state: str, base: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        """One journal record of batch `intent`. From `base` (a batch's earlier record, or the fields
        at hand) only the batch's own facts carry over; each record repeats them, so the newest alone
        says everything."""
        facts = {k: base[k] for k in _CARRIED if k in base}
        return {
            "kind": BATCH_KIND,
            "key": intent,
            "state": state,
            "endpoint": self.spec.label,
            **self._where,
            **facts,
            **extra,
            "ts": time.time(),
        }

    async def _op(self, fn: Callable[[], Awaitable[Any]]) -> Any:
        """One Batch API operation, retried with back-off on transient failures."""
        delay = min(self.policy.poll_s, 2.0)
        for attempt in range(1, _OP_ATTEMPTS + 1):
            try:
                return await fn()
            except Exception as exc:
                decision = classify(exc)
                if not decision.retry or attempt == _OP_ATTEMPTS:
                    raise _OpFailed(decision.kind, clip(str(exc)) or type(exc).__name__) from exc
                await anyio.sleep(max(decision.retry_after_s or 0.0, delay))
                delay = min(delay * 2, self.policy.poll_max_s)
        raise AssertionError("unreachable")

    async def _maybe(self, fn: Callable[[], Awaitable[BatchInfo | None]]) -> BatchInfo | None:
        try:
            return await fn()
        except _OpFailed:
            return None


class _OpFailed(Exception):
    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _max_out(params: Mapping[str, Any]) -> int:
    """The most output tokens a request of these params may be billed (what its worst case assumes)."""
    max_out = params.get("max_tokens", params.get("max_completion_tokens"))
    return max_out if isinstance(max_out, int) else 4096


def _line_worst(rec: Mapping[str, Any], n: int) -> list[float]:
    """Each line's worst case of a batch's journal record: as written at submission, or (a journal
    older than that field) an equal share of the batch's reservation."""
    each = rec.get("line_worst_usd")
    if isinstance(each, list) and len(each) == n and all(isinstance(w, int | float) for w in each):
        return [float(w) for w in each]
    return [float(rec.get("reserved_usd") or 0.0) / max(1, n)] * n


def _eta(b: _Open, now: float, durations: Sequence[float]) -> float | None:
    """Seconds until `b` ends: extrapolated from its own request counts once some are done, else from
    how long this endpoint's batches that ended took (Anthropic's counts stay zero until a batch has
    ended); None when neither is known."""
    info = b.info
    elapsed = max(0.0, now - b.submitted_at)
    if info is not None and info.total > 0 and info.completed + info.failed > 0:
        done = info.completed + info.failed
        return max(0.0, elapsed * (info.total - done) / done)
    if durations:
        return max(0.0, sum(durations) / len(durations) - elapsed)
    return None


def _jsonl_line(c: _Call) -> bytes:
    """The batch input file's line of `c` (custom_id = its key), as uploaded."""
    return (
        b'{"custom_id":' + orjson.dumps(c.key) + b',"method":"POST","url":"/v1/chat/completions",'
        b'"body":' + c.body + b"}\n"
    )


def split_by_limits(
    items: Sequence[Any], size: Callable[[Any], int], max_items: int, max_bytes: int
) -> list[list[Any]]:
    """`items` in order, in runs of at most `max_items` whose `size`s add up to at most `max_bytes` (an
    item alone over it goes alone: the provider says what it makes of it)."""
    chunks: list[list[Any]] = []
    current: list[Any] = []
    total = 0
    for item in items:
        n = size(item)
        if current and (len(current) >= max_items or total + n > max_bytes):
            chunks.append(current)
            current, total = [], 0
        current.append(item)
        total += n
    if current:
        chunks.append(current)
    return chunks


__all__ = [
    "BATCH_KIND",
    "BatchEndpoint",
    "BatchJournal",
    "BatchProgress",
    "MemoryJournal",
    "merge_batches",
    "split_by_limits",
]
