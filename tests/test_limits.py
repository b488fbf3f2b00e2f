"""Limiters driven directly, with an injected clock where they take one."""

from __future__ import annotations

import asyncio
import time

import pytest

from ifsweep.providers.limits import (
    AdaptiveConcurrency,
    EndpointLimiter,
    ProviderEvent,
    RequestPacer,
    TokenBucket,
)


class FakeClock:
    """Time moves only when someone sleeps."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += max(0.0, seconds)
        await asyncio.sleep(0)


def test_token_bucket_reserve_and_refund() -> None:
    async def run() -> None:
        clock = FakeClock()
        bucket = TokenBucket(600, clock)  # 10 tokens/s
        assert await bucket.acquire(500) == 500
        assert bucket.available == pytest.approx(100)
        bucket.refund(300)  # the call used 200 of its 500
        assert bucket.available == pytest.approx(400)
        assert await bucket.acquire(450) == 450  # needs 50 more: 5 s
        assert clock.t == pytest.approx(5.0)
        # a request bigger than a minute's worth takes the whole bucket rather than waiting forever
        assert await bucket.acquire(10_000) == 600
        assert clock.t == pytest.approx(65.0)
        bucket.refund(10_000)
        assert bucket.available == pytest.approx(600)  # never above capacity

    asyncio.run(run())


def test_aimd_halves_once_per_burst_and_recovers() -> None:
    async def run() -> None:
        aimd = AdaptiveConcurrency(8, increase_every=2)
        gens = [await aimd.acquire() for _ in range(8)]
        assert aimd.in_flight == 8
        assert aimd.on_rate_limited(gens[0]) is True
        assert aimd.limit == 4
        # seven more 429s from calls sent before the cut do not cut again
        assert not any(aimd.on_rate_limited(g) for g in gens[1:])
        assert aimd.limit == 4
        for _ in range(8):
            aimd.release()
        gens = [await aimd.acquire() for _ in range(3)]
        # a fresh 429 after the cut does cut: to half of what was really in flight (3), not of 4
        assert aimd.on_rate_limited(gens[0]) and aimd.limit == 1
        for _ in range(3):
            aimd.release()
        for _ in range(4):
            aimd.on_success()
        assert aimd.limit == 3  # +1 per 2 successes
        for _ in range(100):
            aimd.on_success()
        assert aimd.limit == 8  # capped at max

    asyncio.run(run())


def test_aimd_blocks_at_limit_and_serves_fifo() -> None:
    async def run() -> None:
        aimd = AdaptiveConcurrency(2)
        await aimd.acquire()
        await aimd.acquire()
        order: list[int] = []

        async def waiter(i: int) -> None:
            await aimd.acquire()
            order.append(i)

        tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
        await asyncio.sleep(0.01)
        assert order == []
        aimd.release()
        await asyncio.sleep(0.01)
        assert order == [0]
        tasks[1].cancel()  # a cancelled waiter does not swallow a slot
        aimd.release()
        await asyncio.sleep(0.01)
        assert order == [0, 2]
        assert aimd.in_flight == 2
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())


def test_request_pacer_is_smooth() -> None:
    async def run() -> list[float]:
        pacer = RequestPacer(1200)  # 20/s: at most one second's quota (20) at once
        start = time.perf_counter()
        stamps = []
        for _ in range(40):
            await pacer.acquire()
            stamps.append(time.perf_counter() - start)
        return stamps

    stamps = asyncio.run(run())
    assert stamps[19] < 0.5  # the first second's quota is allowed at once
    assert stamps[39] > 0.85  # then 20 more take about a second, not an instant
    # a leaky bucket allows burst + rate * w in any window w: here at most 20 + 10 in half a second
    # (a minute's quota in one burst would be 1200)
    assert all(sum(1 for t in stamps if s <= t < s + 0.5) <= 31 for s in stamps)


def test_endpoint_limiter_learns_limits_and_slows_before_the_wall() -> None:
    async def run() -> None:
        clock = FakeClock()
        events: list[ProviderEvent] = []
        lim = EndpointLimiter(
            "openai/x", rpm=None, tpm=None, max_concurrency=16, clock=clock, emit=events.append
        )
        lim.observe({"x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "30000"})
        assert (lim.rpm_limit, lim.tpm_limit, lim.rpm_learned, lim.tpm_learned) == (500, 30000, True, True)
        assert [e.kind for e in events] == ["limit_learned", "limit_learned"]
        assert "500 requests/min" in events[0].message
        slots = [await lim.admit(0) for _ in range(8)]
        # plenty left for the 8 calls in flight: no pause
        lim.observe({"x-ratelimit-remaining-requests": "400", "x-ratelimit-reset-requests": "2s"})
        assert lim.pause_left_s() == 0.0
        # 3 left but 8 in flight: wait until the provider refills the 6 missing (6 / 500 per min = 0.72 s)
        lim.observe(
            {
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "3",
                "x-ratelimit-reset-requests": "1.5s",
            }
        )
        assert lim.pause_left_s() == pytest.approx(0.72)
        assert events[-1].kind == "backoff" and events[-1].wait_s == pytest.approx(0.72)
        assert "3 requests left of 500/min" in events[-1].message
        # ...but never longer than the announced reset
        lim.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "0.9s"})
        assert lim.pause_left_s() == pytest.approx(0.9)
        for slot in slots:
            lim.release(slot, used_tokens=0, ok=False)
        admission = await lim.admit(100)
        assert clock.t == pytest.approx(0.9)  # admit waited out the pause
        lim.release(admission, used_tokens=40, ok=True)
        assert lim.tokens_per_min == 40

    asyncio.run(run())


def test_configured_limits_are_not_overridden_by_headers() -> None:
    lim = EndpointLimiter("m", rpm=60, tpm=None, max_concurrency=2, clock=FakeClock())
    lim.observe({"x-ratelimit-limit-requests": "10000"})
    assert lim.rpm_limit == 60 and not lim.rpm_learned
    lim.tighten(rpm=30, tpm=1000, max_concurrency=1)  # a second spec on the same key: strictest wins
    assert (lim.rpm_limit, lim.tpm_limit, lim.concurrency.max_limit) == (30, 1000, 1)


def test_rate_limited_pauses_whole_endpoint_and_refunds_tokens() -> None:
    async def run() -> None:
        clock = FakeClock()
        lim = EndpointLimiter("m", rpm=None, tpm=6000, max_concurrency=4, clock=clock)
        a = await lim.admit(1000)
        b = await lim.admit(1000)
        assert lim.bucket is not None and lim.bucket.available == pytest.approx(4000)
        lim.on_rate_limited(a, 3.0)
        lim.release(a, used_tokens=0, ok=False)  # a 429 used nothing: refund it all
        assert lim.concurrency.limit == 1  # 2 were in flight
        lim.release(b, used_tokens=None, ok=False)  # outcome unknown: keep its tokens
        assert lim.bucket.available == pytest.approx(5000)
        await lim.admit(10)
        assert clock.t == pytest.approx(3.0)

    asyncio.run(run())


def test_usage_window_stays_bounded() -> None:
    async def run() -> None:
        clock = FakeClock()
        lim = EndpointLimiter("m", rpm=None, tpm=None, max_concurrency=1, clock=clock)
        for _ in range(500):
            lim.release(await lim.admit(0), used_tokens=10, ok=True)
            clock.t += 1.0
        assert lim.tokens_per_min == 600  # the last 60 calls: one per second
        assert len(lim._usage) <= 61  # memory is a minute of calls, not the whole sweep
        for _ in range(5000):  # a burst within one second adds to its entry, not to the memory
            lim.release(await lim.admit(0), used_tokens=2, ok=True)
        assert lim.tokens_per_min == 600 + 10_000
        assert len(lim._usage) <= 61
        assert lim._tokens_per_call() == 10_600 // 5060
        clock.t += 60.5  # the window is whole seconds: second 500 is still in it at 560.5...
        assert lim.tokens_per_min == 10_000
        clock.t += 0.5  # ...and out of it at 561
        assert lim.tokens_per_min == 0 and not lim._usage

    asyncio.run(run())
