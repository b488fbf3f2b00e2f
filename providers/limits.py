"""Per-endpoint rate limiting: request pacing, token reservations, adaptive concurrency, pauses.

Small classes with an injected clock so each is tested directly; `EndpointLimiter` composes them for
one endpoint key and is shared by every spec that uses that key. No UI here: notable moments are handed
to an `emit` callback as ProviderEvent values.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

from aiolimiter import AsyncLimiter

from ifsweep.providers.coord.interfaces import RateGrant, SharedRates, Window
from ifsweep.providers.send.retry import header, parse_duration

EventKind = Literal["backoff", "rate_limited", "limit_learned", "error"]


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    kind: EventKind
    endpoint: str
    message: str
    wait_s: float | None = None


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class TokenBucket:
    """Tokens per minute, refilled continuously. Callers reserve before a call and refund the unused part.

    The bucket holds `burst_s` seconds' worth. With a short burst a request larger than the bucket waits
    for a full bucket and then takes all it needs, leaving the level negative (a debt later calls wait
    out), so big requests are paced at the true rate instead of being under-counted.
    A lock makes waiters FIFO so a large request is not starved by a stream of small ones.
    """

    def __init__(self, per_minute: int, clock: Clock, *, burst_s: float = 60.0) -> None:
        if per_minute < 1:
            raise ValueError(f"tokens per minute must be >= 1, got {per_minute}")
        if not 0 < burst_s <= 60:
            raise ValueError(f"burst_s must be in (0, 60], got {burst_s}")
        self._clock = clock
        self._burst_s = burst_s
        self._rate = float(per_minute)
        self._capacity = self._rate * burst_s / 60.0
        self._level = self._capacity
        self._stamp = clock.now()
        self._lock = asyncio.Lock()

    @property
    def per_minute(self) -> int:
        return int(self._rate)

    @property
    def available(self) -> float:
        self._refill()
        return self._level

    def set_rate(self, per_minute: int) -> None:
        self._refill()
        self._rate = float(max(1, per_minute))
        self._capacity = self._rate * self._burst_s / 60.0
        self._level = min(self._level, self._capacity)

    def _refill(self) -> None:
        now = self._clock.now()
        self._level = min(self._capacity, self._level + (now - self._stamp) * self._rate / 60.0)
        self._stamp = now

    async def acquire(self, tokens: int) -> int:
        """Wait until `tokens` fit (or the bucket is full) and take them; returns what was taken (never
        more than one minute's worth, or a request larger than the limit could never start)."""
        async with self._lock:
            take = min(float(tokens), self._rate)
            need = min(take, self._capacity)
            while True:
                self._refill()
                if self._level >= need:
                    self._level -= take
                    return int(take)
                await self._clock.sleep((need - self._level) * 60.0 / self._rate)

    def refund(self, tokens: int) -> None:
        if tokens > 0:
            self._refill()
            self._level = min(self._capacity, self._level + tokens)


class AdaptiveConcurrency:
    """AIMD on the number of calls in flight: halve on a 429, +1 after `increase_every` successes.

    Each slot carries the generation it was taken in; a 429 from a call started before the last cut
    does not cut again, so one burst of rejections halves once rather than down to 1. Waiters are served
    FIFO through futures (like asyncio.Semaphore, but with a limit that moves).
    """

    def __init__(self, max_limit: int, *, increase_every: int = 10) -> None:
        if max_limit < 1:
            raise ValueError(f"max concurrency must be >= 1, got {max_limit}")
        self.max_limit = max_limit
        self.limit = max_limit
        self.in_flight = 0
        self._increase_every = increase_every
        self._successes = 0
        self._generation = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> int:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return self._generation
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Granted and cancelled in the same tick: hand the slot on.
                self.release()
            elif waiter in self._waiters:  # a release may already have dropped the cancelled waiter
                self._waiters.remove(waiter)
            raise
        return self._generation

    def release(self) -> None:
        self.in_flight -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def on_success(self) -> None:
        self._successes += 1
        if self._successes >= self._increase_every and self.limit < self.max_limit:
            self.limit += 1
            self._successes = 0
            self._dispatch()

    def on_rate_limited(self, generation: int) -> bool:
        """Halve the calls in flight if this 429 is news; returns whether the limit was cut."""
        if generation != self._generation:
            return False
        self._generation += 1
        self._successes = 0
        # Halve what was really in flight (call this before releasing the slot): halving an unused
        # limit of 64 when 4 calls already overran the provider would change nothing.
        self.limit = max(1, min(self.limit, self.in_flight) // 2)
        return True

    def set_max(self, max_limit: int) -> None:
        self.max_limit = max(1, max_limit)
        self.limit = min(self.limit, self.max_limit)


class RequestPacer:
    """Requests per minute through aiolimiter, paced smoothly: at most one second's quota at once
    (a minute's quota in one burst is what trips providers' finer-grained windows)."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = 0
        self._limiter = AsyncLimiter(1, 1.0)
        self.set_rate(per_minute)

    def set_rate(self, per_minute: int) -> None:
        if per_minute < 1:
            raise ValueError(f"requests per minute must be >= 1, got {per_minute}")
        burst = max(1, math.ceil(per_minute / 60))
        self.per_minute = per_minute
        self._limiter = AsyncLimiter(burst, burst * 60.0 / per_minute)

    async def acquire(self) -> None:
        await self._limiter.acquire()


@dataclass(frozen=True, slots=True)
class Admission:
    """A granted slot: the concurrency generation it was taken in and the tokens reserved for it."""

    generation: int
    tokens: int
    booked: tuple[float, float] = (0.0, 0.0)  # shared allowances: RateGrant.booked


# Shorter slow-downs happen constantly near a limit; only longer ones are worth an event.
_ANNOUNCE_PAUSE_S = 0.5
# A reset header further out than this is treated as garbage rather than obeyed.
MAX_PAUSE_S = 120.0


class EndpointLimiter:
    """Everything that gates calls to one endpoint key (provider, api_base, key variable, model).

    With `shared` (a coordinator's SharedRates), the RPM and TPM allowances live there, summed over every
    process calling the endpoint, instead of in this process's pacer and bucket; Retry-After pauses and
    learned limits are passed on to it. Concurrency (AIMD) stays per process.
    """

    def __init__(
        self,
        name: str,
        *,
        rpm: int | None,
        tpm: int | None,
        max_concurrency: int,
        clock: Clock | None = None,
        emit: Callable[[ProviderEvent], None] | None = None,
        increase_every: int = 10,
        tpm_burst_s: float = 60.0,
        shared: SharedRates | None = None,
    ) -> None:
        self.name = name
        self.clock: Clock = clock or MonotonicClock()
        self._emit = emit
        self._tpm_burst_s = tpm_burst_s
        self.shared = shared
        # Shared: the limits paced to (configured or learned); the allowances themselves live in `shared`.
        self._shared_limits: dict[str, int | None] = {"requests": rpm, "tokens": tpm}
        self.pacer = RequestPacer(rpm) if rpm and shared is None else None
        self.bucket = TokenBucket(tpm, self.clock, burst_s=tpm_burst_s) if tpm and shared is None else None
        self._rpm_configured = rpm is not None
        self._tpm_configured = tpm is not None
        self.rpm_learned = False
        self.tpm_learned = False
        self.concurrency = AdaptiveConcurrency(max_concurrency, increase_every=increase_every)
        self.paused_until = 0.0
        self.waiting = 0  # calls inside admit(): queued behind a pause, a slot, the pacer or the bucket
        # Tokens and calls of the last minute, summed per second: [second, tokens, calls] entries, so
        # memory is at most 61 entries whatever the call rate.
        self._usage: deque[list[int]] = deque()
        self._usage_sum = 0
        self._usage_calls = 0

    @property
    def rpm_limit(self) -> int | None:
        if self.shared is not None:
            return self._shared_limits["requests"]
        return self.pacer.per_minute if self.pacer else None

    @property
    def tpm_limit(self) -> int | None:
        if self.shared is not None:
            return self._shared_limits["tokens"]
        return self.bucket.per_minute if self.bucket else None

    def tighten(self, *, rpm: int | None, tpm: int | None, max_concurrency: int | None) -> None:
        """Another spec shares this key: the strictest configured limit wins."""
        if rpm is not None:
            known = self.rpm_limit
            if known is None or not self._rpm_configured or rpm < known:
                self._set_rpm(rpm)
            self._rpm_configured = True
        if tpm is not None:
            known = self.tpm_limit
            if known is None or not self._tpm_configured or tpm < known:
                self._set_tpm(tpm)
            self._tpm_configured = True
        if max_concurrency is not None and max_concurrency < self.concurrency.max_limit:
            self.concurrency.set_max(max_concurrency)

    def _set_rpm(self, rpm: int) -> None:
        if self.shared is not None:
            self._shared_limits["requests"] = rpm
        elif self.pacer is None:
            self.pacer = RequestPacer(rpm)
        else:
            self.pacer.set_rate(rpm)

    def _set_tpm(self, tpm: int) -> None:
        if self.shared is not None:
            self._shared_limits["tokens"] = tpm
        elif self.bucket is None:
            self.bucket = TokenBucket(tpm, self.clock, burst_s=self._tpm_burst_s)
        else:
            self.bucket.set_rate(tpm)

    async def _wait_pause(self) -> None:
        while (left := self.paused_until - self.clock.now()) > 0:
            await self.clock.sleep(left)

    async def admit(self, tokens: int) -> Admission:
        """Wait for a pause to end, a concurrency slot, a request slot and `tokens` of TPM."""
        self.waiting += 1
        try:
            await self._wait_pause()
            generation = await self.concurrency.acquire()
            try:
                await self._wait_pause()  # a 429 elsewhere may have paused the endpoint while we queued
                booked = (0.0, 0.0)
                if self.shared is not None:
                    taken, booked = await self._take_shared(self.shared, tokens)
                else:
                    if self.pacer is not None:
                        await self.pacer.acquire()
                    taken = await self.bucket.acquire(tokens) if self.bucket is not None else 0
            except BaseException:
                self.concurrency.release()
                raise
        finally:
            self.waiting -= 1
        return Admission(generation, taken, booked)

    async def _take_shared(self, shared: SharedRates, tokens: int) -> tuple[int, tuple[float, float]]:
        """Book this call's slot in the shared allowances and sleep until it starts."""
        limits = self._shared_limits
        grant = await shared.take(
            tokens,
            rpm=limits["requests"] if self._rpm_configured else None,
            tpm=limits["tokens"] if self._tpm_configured else None,
            fallback=(limits["requests"], limits["tokens"]),
            tpm_burst_s=self._tpm_burst_s,
        )
        self._adopt(grant)
        if grant.wait_s > 0:
            await self.clock.sleep(grant.wait_s)
        return grant.tokens, grant.booked

    def _adopt(self, grant: RateGrant) -> None:
        """Limits another process learned from the provider's headers, taken over as if learned here."""
        for window in grant.learned:
            limit = grant.rpm if window == "requests" else grant.tpm
            if limit is not None and self._shared_limits[window] != limit:
                self._shared_limits[window] = limit
                if window == "requests":
                    self.rpm_learned = True
                else:
                    self.tpm_learned = True
                self._say("limit_learned", f"{self.name}: another process learned {limit} {window}/min", None)

    @property
    def congested(self) -> bool:
        """More calls would only queue here: some already wait to be admitted, or a back-off holds all."""
        # paused_until stays 0 until a first pause: a sweep never paused reads no clock here.
        return self.waiting > 0 or (self.paused_until > 0 and self.pause_left_s() > 0)

    def release(self, admission: Admission, *, used_tokens: int | None, ok: bool) -> None:
        """Free the slot. `used_tokens` None means unknown (the call may have run): keep the reservation."""
        self.concurrency.release()
        if used_tokens is not None:
            if self.shared is not None:
                tpm = self._shared_limits["tokens"]
                if tpm:
                    self.shared.refund(admission.tokens - used_tokens, tpm)
            elif self.bucket is not None:
                self.bucket.refund(admission.tokens - used_tokens)
        if ok:
            self.concurrency.on_success()
            if used_tokens:
                self._record_usage(used_tokens)

    def on_rate_limited(self, admission: Admission, wait_s: float | None) -> None:
        self.concurrency.on_rate_limited(admission.generation)
        if wait_s is not None and wait_s > 0:
            self.pause(wait_s)
            if self.shared is not None:
                self.shared.pause(min(wait_s, MAX_PAUSE_S))

    def pause(self, seconds: float) -> bool:
        """Hold every call to this endpoint for `seconds`; returns whether that extended the pause."""
        until = self.clock.now() + min(seconds, MAX_PAUSE_S)
        if until <= self.paused_until:
            return False
        self.paused_until = until
        return True

    def pause_left_s(self) -> float:
        return max(0.0, self.paused_until - self.clock.now())

    @property
    def tokens_per_min(self) -> int:
        self._prune_usage()
        return self._usage_sum

    def _record_usage(self, tokens: int) -> None:
        second = int(self.clock.now())
        if self._usage and self._usage[-1][0] == second:
            self._usage[-1][1] += tokens
            self._usage[-1][2] += 1
        else:
            self._usage.append([second, tokens, 1])
        self._usage_sum += tokens
        self._usage_calls += 1
        self._prune_usage()

    def _prune_usage(self) -> None:
        horizon = int(self.clock.now()) - 60
        while self._usage and self._usage[0][0] < horizon:
            _, tokens, calls = self._usage.popleft()
            self._usage_sum -= tokens
            self._usage_calls -= calls

    def observe(self, headers: Mapping[str, str], admission: Admission | None = None) -> None:
        """Learn limits a provider announces, and slow down before its window runs dry: when what is
        left would not cover the calls already in flight, wait until the provider has refilled the
        shortfall (never longer than its announced reset). With shared allowances, what is left
        caps the shared bucket instead."""
        headers = with_anthropic_limits(headers)
        for window, (limit_name, remaining_name, reset_name) in _WINDOW_HEADERS:
            limit = _int(header(headers, limit_name))
            if limit is not None and limit > 0:
                self._learn(window, limit)
            remaining = _int(header(headers, remaining_name))
            if remaining is None:
                continue
            known = limit or (self.rpm_limit if window == "requests" else self.tpm_limit)
            if self.shared is not None:
                if window == "tokens" and admission is not None:
                    self._sync_shared(self.shared, remaining, admission)
                continue
            need = self.concurrency.in_flight * (1 if window == "requests" else self._tokens_per_call())
            if not known or remaining >= need + 1:
                continue
            wait = (need + 1 - remaining) * 60.0 / known
            reset_text = header(headers, reset_name)
            reset = parse_duration(reset_text) if reset_text else None
            if reset is not None:
                wait = min(wait, reset)
            if wait > 0 and self.pause(wait) and wait >= _ANNOUNCE_PAUSE_S:
                self._say(
                    "backoff",
                    f"{remaining} {window} left of {known}/min at {self.name} with "
                    f"{self.concurrency.in_flight} calls in flight: pausing {wait:.1f} s",
                    wait,
                )

    def _sync_shared(self, shared: SharedRates, remaining: int, admission: Admission) -> None:
        """Shared allowances: the tokens the provider says remain correct the shared bucket for every
        process (a local pause would not: the others, and this one after it, would find the bucket
        full). Requests need no correction: nothing refunds them."""
        if self.tpm_limit:
            capacity = self.tpm_limit * self._tpm_burst_s / 60
            shared.sync(remaining, self.tpm_limit, capacity, admission.booked)

    def _tokens_per_call(self) -> int:
        return self._usage_sum // self._usage_calls if self._usage_calls else 1

    def _learn(self, window: Window, limit: int) -> None:
        if window == "requests":
            if self._rpm_configured or self.rpm_limit == limit:
                return
            self._set_rpm(limit)
            self.rpm_learned = True
        else:
            if self._tpm_configured or self.tpm_limit == limit:
                return
            self._set_tpm(limit)
            self.tpm_learned = True
        if self.shared is not None:
            self.shared.learn(window, limit)
        self._say("limit_learned", f"{self.name} announces {limit} {window}/min: pacing to it", None)

    def _say(self, kind: EventKind, message: str, wait_s: float | None) -> None:
        if self._emit is not None:
            self._emit(ProviderEvent(kind, self.name, message, wait_s))


# Per window, the headers `observe` reads: (window, (limit, remaining, reset)).
_WINDOW_HEADERS: tuple[tuple[Window, tuple[str, str, str]], ...] = tuple(
    (w, (f"x-ratelimit-limit-{w}", f"x-ratelimit-remaining-{w}", f"x-ratelimit-reset-{w}"))
    for w in ("requests", "tokens")
)


def with_anthropic_limits(headers: Mapping[str, str]) -> Mapping[str, str]:
    """Anthropic's anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset} (as sent, or as LiteLLM
    passes them on, prefixed llm_provider-) under the x-ratelimit-* names `observe` reads; a reset, an
    RFC 3339 time there, becomes seconds from now. Other headers come back unchanged."""
    # One lowered string of the names, not one per name: this runs on every reply.
    if "anthropic-ratelimit-" not in "\n".join(headers).lower():
        return headers
    found: dict[str, str] = {}
    for window in ("requests", "tokens"):
        for part in ("limit", "remaining", "reset"):
            name = f"anthropic-ratelimit-{window}-{part}"
            value = header(headers, name) or header(headers, "llm_provider-" + name)
            if value is not None and part == "reset":
                value = _seconds_until(value)
            if value is not None:
                found[f"x-ratelimit-{part}-{window}"] = value
    return {**headers, **found} if found else headers


def _seconds_until(stamp: str) -> str | None:
    try:
        when = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return f"{max(0.0, (when - datetime.now(UTC)).total_seconds()):.3f}"


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(float(text))
    except ValueError:
        return None
