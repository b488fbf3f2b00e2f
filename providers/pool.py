"""ProviderPool and Endpoint: where limits, retries, budget and scrubbing wrap the two send paths once."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.abc

from ifsweep.providers.batch.choose import NATIVE_BATCHES, batch_client
from ifsweep.providers.batch.clients import BatchClient
from ifsweep.providers.batch.endpoint import BatchEndpoint, BatchJournal, MemoryJournal
from ifsweep.providers.budget import Budget, IntentLog, Reservation
from ifsweep.providers.coord.interfaces import RateCoordinator
from ifsweep.providers.limits import Admission, Clock, EndpointLimiter, MonotonicClock, ProviderEvent
from ifsweep.providers.pricing import estimate_tokens, import_litellm, resolve_price
from ifsweep.providers.records import (
    Completion,
    EndpointSpec,
    ErrorKind,
    Price,
    UnknownPrice,
)
from ifsweep.providers.send.context import overflow_in
from ifsweep.providers.send.conversation import conversation
from ifsweep.providers.send.fast import (
    DEFAULT_BASES,
    DUMMY_KEY,
    FAST_PROVIDERS,
    FastSender,
    Reply,
    reply_status,
)
from ifsweep.providers.send.params import sent_params
from ifsweep.providers.send.prefix import CacheHint, cache_params, caches_prefixes
from ifsweep.providers.send.retry import RetryDecision, RetryPolicy, classify, out_of_quota, quota_advice
from ifsweep.providers.send.scrub import redact_values, scrub, secret_values
from ifsweep.providers.send.via_litellm import LiteLLMSender

if TYPE_CHECKING:
    import aiohttp

Path = Literal["fast", "litellm"]
# Calls allowed in flight per endpoint key when the config gives no max_concurrency.
DEFAULT_MAX_CONCURRENCY = 64
# Seconds of TPM a limiter may spend at once, like RequestPacer's one second of RPM: providers enforce
# finer windows than a minute, and a minute's tokens sent in one burst draws a run of 429s (scheduler.md).
TPM_BURST_S = 1.0
# Output tokens reserved (TPM and budget) when params set no max_tokens: an assumption, see providers.md.
DEFAULT_RESERVE_OUTPUT_TOKENS = 4096
_DEFAULT_RETRY = RetryPolicy()
# Attempt outcomes after which the provider may have run (and billed) the prompt, when the request was
# sent (`RetryDecision.sent`): a connection never made bills nothing.
_AMBIGUOUS: frozenset[ErrorKind] = frozenset({"timeout", "connection", "malformed"})
# Provider prefixes routed without asking litellm when an api_base is given (saves its 3 s import).
_OPENAI_PREFIXES = ("openai", "hosted_vllm", "custom_openai")


@dataclass(frozen=True, slots=True)
class Route:
    provider: str
    model: str  # the name the provider knows (prefix stripped) on the fast path; spec.model otherwise
    api_base: str | None
    path: Path


def resolve_route(spec: EndpointSpec) -> Route:
    """Which path serves `spec`, and where. litellm is asked only when the model string needs it."""
    prefix, _, rest = spec.model.partition("/")
    if rest and prefix in _OPENAI_PREFIXES and spec.api_base and not spec.force_litellm:
        return Route(prefix, rest, spec.api_base, "fast")
    if rest and prefix == "openai" and not spec.force_litellm:
        # What litellm.get_llm_provider answers for "openai/<model>" (no base of its own) and the lines
        # below then choose, without its 3 s import: a resumed sweep of hosted models need not pay it.
        return Route("openai", rest, _openai_base(), "fast")
    litellm = import_litellm()
    model, provider, _, base = litellm.get_llm_provider(spec.model, api_base=spec.api_base)
    base = spec.api_base or base
    if base is None and provider == "openai":
        base = _openai_base()
    base = base or DEFAULT_BASES.get(provider)
    if provider in FAST_PROVIDERS and base and not spec.force_litellm:
        return Route(provider, model, base, "fast")
    return Route(provider, spec.model, spec.api_base, "litellm")


def _openai_base() -> str:
    """OpenAI's base URL as its own client reads it: the environment, else the public API."""
    return os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or DEFAULT_BASES["openai"]


@dataclass(frozen=True, slots=True)
class EndpointStats:
    endpoint: str
    calls: int
    in_flight: int
    tokens_per_min: int
    rpm_limit: int | None
    tpm_limit: int | None
    rpm_learned: bool
    tpm_learned: bool
    concurrency_limit: int
    max_concurrency: int
    backoff_until: float | None  # clock time the endpoint-wide pause ends, None when not paused
    rate_limited: int  # attempts answered 429
    errors: int  # calls that ended in an error Completion
    usage_estimated: int  # calls whose provider sent no usage: tokens and cost are estimates


@dataclass(slots=True)
class _Counters:
    calls: int = 0
    rate_limited: int = 0
    errors: int = 0
    usage_estimated: int = 0
    error_kinds_told: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Shared:
    """State shared by every spec with the same endpoint key."""

    limiter: EndpointLimiter
    counters: _Counters
    # Set by the first 429 that no wait fixes (the account is out of credit): every later call of the
    # endpoint ends at once with this message, nothing sent.
    out_of_quota: str | None = None


class ProviderPool:
    """Owns one aiohttp session per base URL and one limiter per endpoint key. Use as `async with`."""

    def __init__(
        self,
        *,
        budget: Budget,
        retry: RetryPolicy = _DEFAULT_RETRY,
        on_event: Callable[[ProviderEvent], None] | None = None,
        global_concurrency: int | None = None,
        clock: Clock | None = None,
        coordinator: RateCoordinator | None = None,
        journal: BatchJournal | None = None,
        intents: IntentLog | None = None,
    ) -> None:
        self.budget = budget
        self._intents = intents  # where capped calls record their intent before each send
        self._journal = journal  # where batch mode records its batches (the run's shards)
        self._batch_endpoints: dict[int, BatchEndpoint] = {}
        self._coordinator = coordinator  # shares each endpoint's RPM/TPM with other processes
        self.retry = retry
        self._on_event = on_event
        self._clock: Clock = clock or MonotonicClock()
        self._global = asyncio.Semaphore(global_concurrency) if global_concurrency else None
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._shared: dict[tuple[str, str | None, str | None, str], _Shared] = {}
        # By identity: specs hold a params dict, so they are not hashable.
        self._endpoints: dict[int, Endpoint] = {}
        self._key_envs: set[str] = set()
        self._secrets: tuple[int, tuple[str, ...]] | None = None  # (len(_key_envs) when read, values)
        self._rng = retry.rng()
        self._open = False
        self._used_litellm = False

    async def __aenter__(self) -> ProviderPool:
        self._open = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._open = False
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()
        if self._used_litellm:
            await _close_litellm_clients()

    def endpoint(self, spec: EndpointSpec) -> Endpoint:
        """The Endpoint for `spec`; specs with the same (provider, api_base, key variable, model) share
        one limiter. Raises UnknownPrice when a cap applies and no price is known."""
        if not self._open:
            raise RuntimeError("ProviderPool is not open: use it as `async with ProviderPool(...)`")
        existing = self._endpoints.get(id(spec))
        if existing is not None and existing.spec is spec:
            return existing
        if spec.max_usd is not None:
            self.budget.add_scope(spec.label, spec.max_usd)
        price = resolve_price(spec)
        if price is None and self.budget.has_cap(spec.label):
            raise UnknownPrice(
                f"{spec.label} ({spec.model}) has a budget cap but no known price: give it "
                "price = { input_per_mtok = ..., output_per_mtok = ... } in the config"
            )
        route = resolve_route(spec)
        key = (route.provider, route.api_base, spec.api_key_env, route.model)
        shared = self._shared.get(key)
        if shared is None:
            limiter = EndpointLimiter(
                spec.model,
                rpm=spec.rpm,
                tpm=spec.tpm,
                max_concurrency=spec.max_concurrency or DEFAULT_MAX_CONCURRENCY,
                clock=self._clock,
                emit=self._emit,
                tpm_burst_s=TPM_BURST_S,
                shared=self._coordinator.rates(key) if self._coordinator is not None else None,
            )
            shared = self._shared[key] = _Shared(limiter, _Counters())
        else:
            shared.limiter.tighten(rpm=spec.rpm, tpm=spec.tpm, max_concurrency=spec.max_concurrency)
        if spec.api_key_env:
            self._key_envs.add(spec.api_key_env)
        if route.path == "fast":
            assert route.api_base is not None
            base = route.api_base
            sender: FastSender | LiteLLMSender = FastSender(
                lambda: self._session(base), base, route.model, sent_params(spec)
            )
        else:
            sender = LiteLLMSender(route.model, route.api_base, sent_params(spec), route.provider)
            self._used_litellm = True
        endpoint = Endpoint(self, spec, route, price, shared, sender)
        self._endpoints[id(spec)] = endpoint
        return endpoint

    def caller(self, spec: EndpointSpec) -> Endpoint | BatchEndpoint:
        """What sends `spec`'s calls: its Endpoint, or in batch mode (`spec.batch`) a BatchEndpoint over
        the provider's Batch API, whose driver `run_batches` runs."""
        endpoint = self.endpoint(spec)
        if spec.batch is None:
            return endpoint
        existing = self._batch_endpoints.get(id(spec))
        if existing is not None:
            return existing
        route = endpoint._route
        model = route.model.partition("/")[2] or route.model if route.path == "litellm" else route.model

        def client() -> BatchClient:
            fast = route.path == "fast"
            return batch_client(route.provider, route.api_base, endpoint._api_key(), self._session, fast=fast)

        batch = BatchEndpoint(
            spec,
            spec.batch,
            model=model,
            client=client,
            journal=self._journal if self._journal is not None else MemoryJournal(),
            budget=self.budget,
            price=endpoint.price(),
            path="fast" if route.provider in NATIVE_BATCHES else route.path,  # our own aiohttp client
            where={
                "model": spec.model,
                "provider": route.provider,
                "api_base": route.api_base,
                "api_key_env": spec.api_key_env,
            },
            stats=endpoint.stats,
            redact=self.redact_answer,
            scrub=self.scrub,
        )
        self._batch_endpoints[id(spec)] = batch
        return batch

    @property
    def batch_endpoints(self) -> list[BatchEndpoint]:
        return list(self._batch_endpoints.values())

    async def run_batches(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Every batch endpoint's driver (submit, poll, deliver) until cancelled. Start it with
        `await task_group.start(pool.run_batches)`: calls are taken once it has started."""
        async with anyio.create_task_group() as tg:
            for batch in self._batch_endpoints.values():
                await tg.start(batch.run)
            task_status.started()

    def _session(self, base: str) -> aiohttp.ClientSession:
        session = self._sessions.get(base)
        if session is None:
            if not self._open:  # a session made now would never be closed
                raise RuntimeError("ProviderPool is closed: send inside `async with ProviderPool(...)`")
            import aiohttp  # at the first call: a run that sends nothing need not load it

            # No per-session timeout: the per-call deadline (spec.timeout_s) is enforced around each call.
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None), raise_for_status=False
            )
            self._sessions[base] = session
        return session

    def has_room(self) -> bool:
        """A call started now would not queue for the pool-wide concurrency cap."""
        return self._global is None or not self._global.locked()

    def _secret_names(self) -> set[str]:
        # Also the conventional *_API_KEY variables litellm reads on its own when no api_key_env is set.
        return self._key_envs | {name for name in os.environ if name.endswith("API_KEY")}

    def scrub(self, text: str) -> str:
        return scrub(text, self._secret_names())

    def redact_answer(self, text: str) -> str:
        """A model's answer with any key value it repeats replaced (and nothing else touched). The
        values are read once per endpoint set: this runs on every answer."""
        if self._secrets is None or self._secrets[0] != len(self._key_envs):
            self._secrets = (len(self._key_envs), secret_values(self._secret_names()))
        return redact_values(text, self._secrets[1])

    def _emit(self, event: ProviderEvent) -> None:
        if self._on_event is not None:
            self._on_event(ProviderEvent(event.kind, event.endpoint, self.scrub(event.message), event.wait_s))

    def _delay(self, attempt: int) -> float:
        return self.retry.delay_s(attempt, self._rng)


async def _close_litellm_clients() -> None:
    """litellm caches an aiohttp session per event loop and never closes it: close and forget them, or
    each pool leaves "Unclosed client session" warnings and a later loop finds a closed client."""
    litellm = import_litellm()
    await litellm.close_litellm_async_clients()
    litellm.in_memory_llm_clients_cache.flush_cache()


class _CallFailed(Exception):
    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(slots=True)
class _Attempts:
    count: int = 0
    rate_limited: int = 0
    ambiguous: int = 0
    started: float | None = None
    worst: float = 0.0  # the worst case of one attempt
    reservation: Reservation | None = None  # what the call holds: one worst case per attempt that may bill
    intents: list[str] = field(default_factory=list)

    def reservation_parts(self) -> int:
        return self.reservation.parts if self.reservation is not None else 1

    def worst_case_usd(self) -> float:
        """What the attempts that may have been billed are charged: each its worst case (a cut or
        malformed answer may have been billed in full, and the provider's usage of it is unknown)."""
        return self.ambiguous * self.worst


class Endpoint:
    """One configured model in a pool. `complete` never raises for provider faults, only BudgetExhausted."""

    def __init__(
        self,
        pool: ProviderPool,
        spec: EndpointSpec,
        route: Route,
        price: Price | None,
        shared: _Shared,
        sender: FastSender | LiteLLMSender,
    ) -> None:
        self.spec = spec
        self.path: Path = route.path
        self._pool = pool
        self._route = route
        self._price = price
        self._shared = shared
        self._limiter = shared.limiter
        self._sender = sender
        params = spec.params
        max_out = params.get("max_tokens", params.get("max_completion_tokens"))
        self._max_out = max_out if isinstance(max_out, int) else DEFAULT_RESERVE_OUTPUT_TOKENS
        # Whether callers warm a shared prompt prefix with one call before the rest (runner/engine/warmup.py).
        self.caches_prefixes = caches_prefixes(spec, route.provider, route.api_base)

    def price(self) -> Price | None:
        return self._price

    def estimate_tokens(self, messages: Sequence[Mapping[str, str]]) -> int:
        return estimate_tokens(messages)

    def worst_case_cost(self, messages: Sequence[Mapping[str, str]]) -> float | None:
        if self._price is None:
            return None
        return self._price.worst_case(self.estimate_tokens(messages), self._max_out)

    def congested(self) -> bool:
        """More calls would only queue at this endpoint's own limits (see EndpointLimiter.congested)."""
        return self._limiter.congested

    def stats(self) -> EndpointStats:
        lim, counters = self._limiter, self._shared.counters
        left = lim.pause_left_s()
        return EndpointStats(
            endpoint=self.spec.model,
            calls=counters.calls,
            in_flight=lim.concurrency.in_flight,
            tokens_per_min=lim.tokens_per_min,
            rpm_limit=lim.rpm_limit,
            tpm_limit=lim.tpm_limit,
            rpm_learned=lim.rpm_learned,
            tpm_learned=lim.tpm_learned,
            concurrency_limit=lim.concurrency.limit,
            max_concurrency=lim.concurrency.max_limit,
            backoff_until=lim.paused_until if left > 0 else None,
            rate_limited=counters.rate_limited,
            errors=counters.errors,
            usage_estimated=counters.usage_estimated,
        )

    def _api_key(self) -> str | None:
        env = self.spec.api_key_env
        if env is None:
            # Hosted providers on the litellm path: litellm reads their usual variable (ANTHROPIC_API_KEY,
            # ...) itself. With an api_base it is a local server that wants no key, but some need one sent.
            return DUMMY_KEY if self.path == "fast" or self.spec.api_base else None
        value = os.environ.get(env)
        if not value:
            raise _CallFailed(
                "auth",
                f"environment variable {env} is not set: export it with the API key for {self.spec.model}",
            )
        return value

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        cache: CacheHint | None = None,
        *,
        key: str | None = None,
    ) -> Completion:
        """One logical call: reserve, pace, send, retry, settle. Raises only BudgetExhausted. `cache`
        says which prefix the prompt shares with other calls (a routing hint; the prompt is unchanged);
        `key`, the caller's name for the call, matters only in batch mode (providers/batch/endpoint.py)."""
        self._shared.counters.calls += 1
        start = time.perf_counter()
        # What the provider takes, on either path (the key names this body: runner/store/keys.py).
        messages = conversation(self._route.provider, messages)
        if self._shared.out_of_quota is not None:
            return self._error("quota", self._shared.out_of_quota, _Attempts(), start)
        try:
            api_key = self._api_key()
        except _CallFailed as failed:
            return self._error(failed.kind, failed.message, _Attempts(), start)
        prompt_tokens = estimate_tokens(messages)
        # Worst case stays worst: no cache hit assumed, and every prompt token at the cache-write price
        # where that is dearer.
        worst = self._price.worst_case(prompt_tokens, self._max_out) if self._price else 0.0
        budget = self._pool.budget
        attempts = _Attempts(worst=worst)
        attempts.reservation = await budget.reserve_when_settled([self.spec.label], worst)
        completion: Completion | None = None
        try:
            if self._pool._intents is not None and budget.has_cap(self.spec.label):
                await self._intend(attempts, key)
            completion = await self._call(messages, api_key, prompt_tokens, attempts, start, cache, key)
            if attempts.intents:  # only under a cap: without one the hot path pays nothing here
                completion = dataclasses.replace(completion, intents=tuple(attempts.intents))
            return completion
        finally:
            # Cancelled mid-call (or stopped by the budget before a retry): every attempt it holds for
            # may have been billed, so the hold is charged as the worst case it is.
            held = attempts.reservation
            if completion is None:
                budget.settle(held, held.amount_usd, worst_case_usd=held.amount_usd)
            else:
                budget.settle(held, completion.cost_usd, worst_case_usd=completion.worst_case_usd)

    async def _intend(self, attempts: _Attempts, key: str | None) -> None:
        """The durable intent of the send the newest hold covers (only under a cap, where the first send
        made one: runner/store/intents.py)."""
        intents = self._pool._intents
        assert intents is not None
        attempts.intents.append(await intents.intend(self.spec.label, attempts.worst, key))

    async def _hold_another(self, attempts: _Attempts, key: str | None) -> None:
        """Before a retry whose last attempt may have been billed: hold another worst case (or raise
        BudgetExhausted), so that the call never costs more than it holds."""
        assert attempts.reservation is not None
        if attempts.worst > 0:
            attempts.reservation = await self._pool.budget.grow(attempts.reservation, attempts.worst)
        if attempts.intents:
            await self._intend(attempts, key)

    async def _call(
        self,
        messages: Sequence[Mapping[str, str]],
        api_key: str | None,
        prompt_tokens: int,
        attempts: _Attempts,
        start: float,
        cache: CacheHint | None,
        key: str | None = None,
    ) -> Completion:
        loop = asyncio.get_running_loop()
        try:
            # No deadline until the first attempt holds its slots (set in _send): queueing behind
            # our own limits is not the provider being slow.
            async with asyncio.timeout(None) as deadline:
                while True:
                    result = await self._attempt(
                        messages, api_key, prompt_tokens, attempts, deadline, loop, cache
                    )
                    if isinstance(result, Completion):
                        return result
                    if attempts.ambiguous >= attempts.reservation_parts():
                        await self._hold_another(attempts, key)
        except TimeoutError:
            message = f"no answer within timeout_s={self.spec.timeout_s:g} s ({attempts.count} attempts)"
            return self._error("timeout", message, attempts, start)

    async def _attempt(
        self,
        messages: Sequence[Mapping[str, str]],
        api_key: str | None,
        prompt_tokens: int,
        attempts: _Attempts,
        deadline: asyncio.Timeout,
        loop: asyncio.AbstractEventLoop,
        cache: CacheHint | None = None,
    ) -> Completion | None:
        """One try; returns a Completion when the call is over, None to try again."""
        limiter = self._limiter
        admission = await limiter.admit(prompt_tokens + self._max_out)
        attempts.count += 1
        try:
            reply = await self._send(messages, api_key, attempts, deadline, loop, cache)
        except Exception as exc:
            return await self._failed(exc, admission, attempts, prompt_tokens, deadline, loop)
        except BaseException:
            # Cancelled (deadline or caller): the provider may have run it; keep the token reservation.
            attempts.ambiguous += 1
            limiter.release(admission, used_tokens=None, ok=False)
            raise
        return self._done(reply, admission, messages, attempts, prompt_tokens)

    async def _send(
        self,
        messages: Sequence[Mapping[str, str]],
        api_key: str | None,
        attempts: _Attempts,
        deadline: asyncio.Timeout,
        loop: asyncio.AbstractEventLoop,
        cache: CacheHint | None,
    ) -> Reply:
        # The deadline (and latency_s) starts when the first attempt holds every slot: queueing behind
        # our own limiter or the sweep's global cap is not the provider being slow. Measured: 1,280
        # workers on 256 global slots queue about 1 s, which a slow provider would turn into timeouts.
        glob = self._pool._global
        async with nullcontext() if glob is None else glob:
            if attempts.started is None:
                attempts.started = time.perf_counter()
                deadline.reschedule(loop.time() + self.spec.timeout_s)
            sender = self._sender
            if isinstance(sender, FastSender):
                assert api_key is not None
                return await sender.send(messages, api_key, cache_params(self._route.provider, cache))
            # A constant timeout, not the time left: litellm caches its HTTP client keyed on the call's
            # arguments, timeout included, so a varying one builds (and leaks) a client per call. The
            # deadline itself is enforced around the whole call.
            return await sender.send(messages, api_key, self.spec.timeout_s, cache)

    async def _failed(
        self,
        exc: Exception,
        admission: Admission,
        attempts: _Attempts,
        prompt_tokens: int,
        deadline: asyncio.Timeout,
        loop: asyncio.AbstractEventLoop,
    ) -> Completion | None:
        limiter = self._limiter
        decision = classify(exc)
        ambiguous = decision.kind in _AMBIGUOUS and decision.sent
        attempts.ambiguous += ambiguous
        if decision.kind == "rate_limit":
            attempts.rate_limited += 1
            self._shared.counters.rate_limited += 1
            limiter.on_rate_limited(admission, decision.retry_after_s)  # while still holding the slot
        limiter.release(admission, used_tokens=None if ambiguous else 0, ok=False)
        detail = self._pool.scrub(str(exc) or type(exc).__name__)
        if not decision.retry:
            advice = self._advice(decision, detail)
            if out_of_quota(decision):
                self._shared.out_of_quota = advice
            return self._error(decision.kind, advice, attempts, None)
        wait = max(decision.retry_after_s or 0.0, self._pool._delay(attempts.count))
        when = deadline.when()
        out_of_time = when is not None and loop.time() + wait >= when
        if attempts.count >= self._pool.retry.max_attempts or out_of_time:
            why = "attempts" if attempts.count >= self._pool.retry.max_attempts else "time"
            message = f"{detail} (gave up after {attempts.count} attempts: out of {why})"
            return self._error(decision.kind, message, attempts, None)
        self._pool._emit(self._backoff_event(decision, detail, wait))
        await self._limiter.clock.sleep(wait)
        return None

    def _backoff_event(self, decision: RetryDecision, detail: str, wait: float) -> ProviderEvent:
        model = self.spec.model
        if decision.kind == "rate_limit":
            return ProviderEvent("rate_limited", model, f"429 from {model}: waiting {_secs(wait)}", wait)
        return ProviderEvent(
            "backoff",
            model,
            f"{decision.kind} error from {model} ({detail[:120]}): waiting {_secs(wait)}",
            wait,
        )

    def _advice(self, decision: RetryDecision, detail: str) -> str:
        spec, route = self.spec, self._route
        where = route.api_base or route.provider
        if decision.kind == "auth":
            if spec.api_key_env:
                env = spec.api_key_env
                return f"{spec.model} refused the key in {env}: check it holds a valid key ({detail})"
            return f"{spec.model} needs a key: set api_key_env to the variable holding it ({detail})"
        if decision.kind == "not_found":
            return (
                f"{where} does not know model {route.model!r}: check the model name and api_base ({detail})"
            )
        if decision.kind == "context_length":
            found = overflow_in(detail)
            said = (
                found.describe(spec.model)
                if found is not None
                else f"the prompt exceeds {spec.model}'s window"
            )
            return f"{said}: set a longer context on the server, or leave this benchmark out ({detail})"
        if decision.kind == "quota":
            return quota_advice(where, spec.model, detail)
        if decision.kind == "bad_request":
            keys = ", ".join(sorted(spec.params)) or "none"
            return f"{spec.model} rejected the request: check params ({keys}) and prompt length ({detail})"
        return detail

    def _done(
        self,
        reply: Reply,
        admission: Admission,
        messages: Sequence[Mapping[str, str]],
        attempts: _Attempts,
        prompt_tokens: int,
    ) -> Completion:
        estimated = reply.input_tokens is None or reply.output_tokens is None
        inp = reply.input_tokens if reply.input_tokens is not None else prompt_tokens
        if reply.output_tokens is not None:
            out = reply.output_tokens
        else:
            # Never above max_tokens: the provider cannot have produced (and billed) more.
            guess = estimate_tokens([{"content": reply.text or ""}]) - 7 if reply.text else 0
            out = min(guess, self._max_out)
        if estimated:
            self._shared.counters.usage_estimated += 1
        self._limiter.release(admission, used_tokens=inp + out, ok=True)
        if reply.headers:
            self._limiter.observe(reply.headers, admission)
        cached = min(reply.cached_tokens, inp)
        written = min(reply.cache_write_tokens, inp - cached)
        cost = saved = 0.0
        if self._price:
            cost = self._price.cost(inp, out, cached, written)
            saved = self._price.cost(inp, out) - cost
        uncertain = attempts.worst_case_usd()
        return Completion(
            status=reply_status(reply),
            text=self._pool.redact_answer(reply.text) if reply.text else reply.text,
            finish_reason=reply.finish_reason,
            input_tokens=inp,
            output_tokens=out,
            cost_usd=cost + uncertain,
            latency_s=time.perf_counter() - (attempts.started or time.perf_counter()),
            attempts=attempts.count,
            rate_limited=attempts.rate_limited,
            path=self.path,
            usage_estimated=estimated,
            cached_tokens=cached,
            cache_write_tokens=written,
            cache_saved_usd=saved,
            worst_case_usd=uncertain,
        )

    def _error(
        self,
        kind: ErrorKind,
        message: str,
        attempts: _Attempts,
        start: float | None,
    ) -> Completion:
        counters = self._shared.counters
        counters.errors += 1
        scrubbed = self._pool.scrub(message)
        if kind not in counters.error_kinds_told:
            # Once per kind and endpoint: a bad key would otherwise flood the progress display.
            counters.error_kinds_told.add(kind)
            self._pool._emit(ProviderEvent("error", self.spec.model, f"{kind} error: {scrubbed}", None))
        began = attempts.started if attempts.started is not None else start
        return Completion(
            status="error",
            text=None,
            cost_usd=attempts.worst_case_usd(),
            worst_case_usd=attempts.worst_case_usd(),
            latency_s=time.perf_counter() - began if began is not None else 0.0,
            attempts=attempts.count,
            rate_limited=attempts.rate_limited,
            error_kind=kind,
            error_message=scrubbed,
            path=self.path,
        )


def _secs(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds:.2f} s"


__all__ = ["DEFAULT_MAX_CONCURRENCY", "Endpoint", "EndpointStats", "ProviderPool", "Route", "resolve_route"]
