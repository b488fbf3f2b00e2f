"""ProviderPool / Endpoint over real HTTP on 127.0.0.1: the simulator, or a scripted server for odd cases.

Everything here stays on the fast path with explicit prices, so litellm is never imported (fast tests).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_providers_support import ScriptedServer, Step, ok_body

from ifsweep.providers.budget import Budget
from ifsweep.providers.limits import ProviderEvent
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import BudgetExhausted, Completion, EndpointSpec, Price
from ifsweep.providers.send.retry import RetryPolicy
from ifsweep.providers.send.scrub import scrub
from ifsweep.simulator import FaultRates, SimConfig, Simulator

MSGS = [{"role": "user", "content": "Write two sentences about rivers."}]
PRICE = Price(input_per_mtok=1.0, output_per_mtok=2.0)
FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, seed=0)


def spec_for(base: str, **kw: Any) -> EndpointSpec:
    fields: dict[str, Any] = {
        "label": "m",
        "model": "openai/sim-model",
        "api_base": base,
        "params": {"max_tokens": 400},  # the simulator answers 30-300 tokens
        "price": PRICE,
        "timeout_s": 10.0,
    }
    fields.update(kw)
    return EndpointSpec(**fields)


Body = Callable[[ProviderPool, list[ProviderEvent]], Awaitable[None]]


def with_pool(
    body: Body, budget: Budget | None = None, retry: RetryPolicy = FAST_RETRY
) -> list[ProviderEvent]:
    events: list[ProviderEvent] = []

    async def run() -> None:
        async with ProviderPool(budget=budget or Budget(None), retry=retry, on_event=events.append) as pool:
            await body(pool, events)

    asyncio.run(run())
    return events


def test_ok_call_costs_tokens_times_price() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(seed=3)) as sim:
            ep = pool.endpoint(spec_for(sim.base_url))
            assert ep.path == "fast" and pool.endpoint(ep.spec) is ep
            done = await ep.complete(MSGS)
            assert done.status == "ok" and done.text and done.attempts == 1 and done.path == "fast"
            assert done.input_tokens > 0 and done.output_tokens > 0
            assert done.cost_usd == pytest.approx(PRICE.cost(done.input_tokens, done.output_tokens))
            assert pool.budget.spent_usd == pytest.approx(done.cost_usd)
            assert pool.budget.spent_by("m") == pytest.approx(done.cost_usd)
            assert pool.budget.reserved_usd == 0.0
            assert sim.stats.requests == 1
            worst = ep.worst_case_cost(MSGS)
            assert worst is not None and worst >= done.cost_usd

    with_pool(body)


@pytest.mark.parametrize(
    ("fault", "status"),
    [("length", "truncated"), ("content_filter", "refused"), ("refusal", "refused"), ("empty", "empty")],
)
def test_status_mapping(fault: str, status: str) -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=FaultRates(**{fault: 1.0}))) as sim:
            done = await pool.endpoint(spec_for(sim.base_url)).complete(MSGS)
            assert done.status == status and done.error_kind is None and done.attempts == 1

    with_pool(body)


def test_null_content_is_empty_and_missing_usage_is_estimated() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=FaultRates(null_content=1.0))) as sim:
            ep = pool.endpoint(spec_for(sim.base_url))
            assert (await ep.complete(MSGS)).status == "empty"
            sim.set_config(SimConfig(faults=FaultRates(missing_usage=1.0)))
            done = await ep.complete(MSGS)
            assert done.status == "ok" and done.input_tokens > 0 and done.output_tokens > 0
            assert done.cost_usd > 0
            assert ep.stats().usage_estimated == 1

    with_pool(body)


def test_429_with_retry_after_pauses_the_whole_endpoint() -> None:
    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        # Capacity of one request, refilled at 2/s; no x-ratelimit headers so nothing is learned.
        cfg = SimConfig(rpm=120, burst_s=0.5, send_retry_after=True, send_ratelimit_headers=False)
        async with Simulator(cfg) as sim:
            ep = pool.endpoint(spec_for(sim.base_url))
            start = time.perf_counter()
            results = await asyncio.gather(*(ep.complete(MSGS) for _ in range(4)))
            elapsed = time.perf_counter() - start
            assert [r.status for r in results] == ["ok"] * 4
            assert sum(r.rate_limited for r in results) >= 1
            limited = [e for e in events if e.kind == "rate_limited"]
            assert limited and limited[0].wait_s is not None and limited[0].wait_s >= 0.4
            assert limited[0].message.startswith("429 from openai/sim-model: waiting ")
            assert sum(r.rate_limited for r in results) == sim.stats.status_counts[429]
            assert elapsed >= 0.45  # the server's 500 ms was honoured (our own back-off is <= 50 ms)
            assert ep.stats().concurrency_limit <= 2  # AIMD cut the 4 in flight to 2 or fewer

    with_pool(body, retry=RetryPolicy(max_attempts=6, base_delay_s=0.01, max_delay_s=0.05, seed=0))


def test_retry_after_holds_calls_that_were_not_rate_limited() -> None:
    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        steps = [Step(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}), Step()]
        async with ScriptedServer(steps) as server:
            ep = pool.endpoint(spec_for(server.base_url))
            first = asyncio.ensure_future(ep.complete(MSGS))
            await server.received.wait()
            await asyncio.sleep(0.05)
            second = await ep.complete(MSGS)  # never rate limited itself, yet it waits out the pause
            assert second.rate_limited == 0 and second.status == "ok"
            assert (await first).rate_limited == 1
            assert server.requests == 3
            assert server.times[1] - server.times[0] >= 0.95
            assert server.times[2] - server.times[0] >= 0.95
            assert [e.wait_s for e in events] == [1.0]

    with_pool(body)


def test_429_without_retry_after_backs_off_and_succeeds() -> None:
    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        cfg = SimConfig(faults=FaultRates(rate_limit_no_header=0.5), seed=5)
        async with Simulator(cfg) as sim:
            ep = pool.endpoint(spec_for(sim.base_url))
            results = await asyncio.gather(*(ep.complete(MSGS) for _ in range(10)))
            assert all(r.status == "ok" for r in results)
            limited = sum(r.rate_limited for r in results)
            assert limited == sim.stats.status_counts[429] > 0
            assert ep.stats().rate_limited == limited
            assert all(e.wait_s is not None and e.wait_s <= 0.05 for e in events if e.kind == "rate_limited")

    with_pool(body, retry=RetryPolicy(max_attempts=10, base_delay_s=0.01, max_delay_s=0.05, seed=0))


def test_limits_learned_from_headers() -> None:
    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(rpm=6000, tpm=900_000)) as sim:
            ep = pool.endpoint(spec_for(sim.base_url))
            assert ep.stats().rpm_limit is None
            assert (await ep.complete(MSGS)).status == "ok"
            stats = ep.stats()
            assert (stats.rpm_limit, stats.tpm_limit) == (6000, 900_000)
            assert stats.rpm_learned and stats.tpm_learned
            assert [e.kind for e in events].count("limit_learned") == 2

    with_pool(body)


def test_learned_limits_pace_calls_under_the_wall() -> None:
    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        # 2,400 requests/min with room for 20 at once; the client is told nothing but the headers.
        async with Simulator(SimConfig(rpm=2400, burst_s=0.5)) as sim:
            ep = pool.endpoint(spec_for(sim.base_url, max_concurrency=16))
            await ep.complete(MSGS)  # learn
            start = time.perf_counter()
            results = await asyncio.gather(*(ep.complete(MSGS) for _ in range(60)))
            elapsed = time.perf_counter() - start
            assert all(r.status == "ok" for r in results)
            assert sim.stats.status_counts[429] <= 2  # without the headers: dozens (see rate-limits.md)
            assert 0.7 < elapsed < 3.0  # about (60 - 19) / 40 per s: paced, not stalled
            assert ep.stats().concurrency_limit == 16

    with_pool(body, retry=RetryPolicy(max_attempts=10, seed=0))


def test_tpm_reservation_is_refunded_after_the_call() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig()) as sim:
            # Each call reserves prompt + 50,000 of a 60,000 TPM bucket but uses at most 310. Without
            # refunds the 2nd call would wait about 50 s; with them 20 calls run back to back.
            ep = pool.endpoint(spec_for(sim.base_url, tpm=60_000, params={"max_tokens": 50_000}))
            start = time.perf_counter()
            results = [await ep.complete(MSGS) for _ in range(20)]
            assert all(r.status == "ok" for r in results)
            assert time.perf_counter() - start < 10.0
            used = sum(r.input_tokens + r.output_tokens for r in results)
            assert ep.stats().tokens_per_min == used
            assert ep.stats().tpm_limit == 60_000

    with_pool(body)


def test_aimd_cuts_on_429_and_grows_back() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=FaultRates(rate_limit_no_header=0.6), seed=1)) as sim:
            ep = pool.endpoint(spec_for(sim.base_url, max_concurrency=16))
            await asyncio.gather(*(ep.complete(MSGS) for _ in range(16)))
            cut = ep.stats().concurrency_limit
            assert cut <= 8
            sim.set_config(SimConfig())
            await asyncio.gather(*(ep.complete(MSGS) for _ in range(60)))
            assert ep.stats().concurrency_limit >= min(16, cut + 5)  # +1 per 10 successes

    with_pool(body, retry=RetryPolicy(max_attempts=20, base_delay_s=0.001, max_delay_s=0.01, seed=0))


def test_500_is_retried_then_ok() -> None:
    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        steps = [Step(500, {"error": {"message": "boom"}}), Step(503, {"error": {"message": "busy"}}), Step()]
        async with ScriptedServer(steps) as server:
            done = await pool.endpoint(spec_for(server.base_url)).complete(MSGS)
            assert done.status == "ok" and done.text == "hello" and done.attempts == 3
            assert (done.input_tokens, done.output_tokens) == (11, 3)
            assert server.requests == 3
            assert [e.kind for e in events] == ["backoff", "backoff"]
            assert "server error from openai/sim-model (HTTP 500: boom)" in events[0].message

    with_pool(body)


def test_retries_stop_at_max_attempts() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=FaultRates(malformed=1.0))) as sim:
            done = await pool.endpoint(spec_for(sim.base_url)).complete(MSGS)
            assert done.status == "error" and done.error_kind == "malformed"
            assert done.attempts == FAST_RETRY.max_attempts == sim.stats.requests
            assert "gave up after 4 attempts" in (done.error_message or "")

    with_pool(body)


def test_401_is_not_retried_names_the_variable_and_hides_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("IFSWEEP_TEST_KEY", secret)

    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        async with ScriptedServer([Step(401, {"echo_auth": True})]) as server:
            ep = pool.endpoint(spec_for(server.base_url, api_key_env="IFSWEEP_TEST_KEY"))
            done = await ep.complete(MSGS)
            assert server.auth_headers == [f"Bearer {secret}"]  # the key was sent...
            assert done.status == "error" and done.error_kind == "auth" and done.attempts == 1
            message = done.error_message or ""
            assert "IFSWEEP_TEST_KEY" in message and "valid key" in message
            assert secret not in message and "Bearer sk" not in message  # ...and never reported
            assert "[REDACTED]" in message
            assert server.requests == 1
            assert [e.kind for e in events] == ["error"]  # told once, scrubbed like the record
            assert secret not in events[0].message and events[0].message.endswith("[REDACTED])")
            await ep.complete(MSGS)
            assert len(events) == 1 and ep.stats().errors == 2

    with_pool(body)


def test_404_says_check_model_and_api_base() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with ScriptedServer([Step(404, {"error": {"message": "model not found"}})]) as server:
            done = await pool.endpoint(spec_for(server.base_url)).complete(MSGS)
            assert done.error_kind == "not_found" and done.attempts == 1 and server.requests == 1
            assert "check the model name and api_base" in (done.error_message or "")
            assert "'sim-model'" in (done.error_message or "")

    with_pool(body)


def test_missing_key_variable_is_an_auth_error_without_a_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IFSWEEP_UNSET_KEY", raising=False)

    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with ScriptedServer([Step()]) as server:
            done = await pool.endpoint(spec_for(server.base_url, api_key_env="IFSWEEP_UNSET_KEY")).complete(
                MSGS
            )
            assert done.status == "error" and done.error_kind == "auth" and done.attempts == 0
            assert "IFSWEEP_UNSET_KEY is not set" in (done.error_message or "")
            assert server.requests == 0 and pool.budget.reserved_usd == 0.0

    with_pool(body)


def test_deadline_ends_a_hung_call() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=FaultRates(hang=1.0))) as sim:
            ep = pool.endpoint(spec_for(sim.base_url, timeout_s=0.5))
            start = time.perf_counter()
            done = await ep.complete(MSGS)
            elapsed = time.perf_counter() - start
            assert done.status == "error" and done.error_kind == "timeout" and done.attempts == 1
            assert "timeout_s=0.5" in (done.error_message or "")
            assert 0.45 <= elapsed < 2.0
            # a timed-out call may have been billed in full: its worst case is charged, and said to be one
            assert pool.budget.spent_usd == done.cost_usd == done.worst_case_usd == ep.worst_case_cost(MSGS)
            assert pool.budget.reserved_usd == 0.0 and ep.stats().in_flight == 0

    with_pool(body)


def test_budget_exhaustion_mid_stream_never_overspends() -> None:
    cap = 0.01
    budget = Budget(cap)

    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(latency_ms=5)) as sim:
            # worst case per call is about 400 output tokens at $20/Mtok = $0.008: 1-2 fit at once
            ep = pool.endpoint(spec_for(sim.base_url, price=Price(10.0, 20.0)))

            async def one() -> Completion | None:
                try:
                    return await ep.complete(MSGS)
                except BudgetExhausted:
                    return None

            results = await asyncio.gather(*(one() for _ in range(40)))
            done = [r for r in results if r is not None]
            refused = results.count(None)
            assert done and refused
            assert budget.exhausted
            assert budget.spent_usd <= cap
            assert budget.spent_usd == pytest.approx(sum(r.cost_usd for r in done))
            assert sim.stats.requests == len(done)  # a refused call sent nothing

    with_pool(body, budget=budget)


def test_per_model_cap() -> None:
    budget = Budget(None)

    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig()) as sim:
            ep = pool.endpoint(spec_for(sim.base_url, max_usd=0.0005, price=Price(1.0, 2.0)))
            with pytest.raises(BudgetExhausted) as info:
                for _call in range(100):
                    await ep.complete(MSGS)
            assert info.value.scope == "m"
            assert budget.spent_by("m") <= 0.0005

    with_pool(body, budget=budget)


def test_specs_sharing_an_endpoint_key_share_its_limiter() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig()) as sim:
            a = pool.endpoint(spec_for(sim.base_url, label="a", rpm=600))
            b = pool.endpoint(spec_for(sim.base_url, label="b", rpm=300, params={"temperature": 0.0}))
            other = pool.endpoint(spec_for(sim.base_url, label="c", model="openai/another"))
            assert a.stats().rpm_limit == b.stats().rpm_limit == 300
            assert other.stats().rpm_limit is None
            await a.complete(MSGS)
            await b.complete(MSGS)
            assert a.stats().calls == b.stats().calls == 2

    with_pool(body)


def test_request_body_and_dummy_key() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with ScriptedServer([Step(200, ok_body(usage=False))]) as server:
            spec = spec_for(server.base_url, params={"max_tokens": 7, "temperature": 0.2})
            await pool.endpoint(spec).complete(MSGS)
            assert server.bodies == [
                {"model": "sim-model", "messages": MSGS, "max_tokens": 7, "temperature": 0.2}
            ]
            assert server.auth_headers[0].startswith("Bearer ") and len(server.auth_headers[0]) > 7

    with_pool(body)


def test_pool_must_be_entered() -> None:
    pool = ProviderPool(budget=Budget(None))
    with pytest.raises(RuntimeError, match="async with"):
        pool.endpoint(spec_for("http://127.0.0.1:9/v1"))


def test_scrub_removes_key_values_and_bearer_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IFSWEEP_SCRUB_KEY", "abc-very-secret-123")
    text = (
        "failed: {'Authorization': 'Bearer sk-live-XYZ', 'x-api-key': 'k-999999'} "
        "key=abc-very-secret-123 api_key=zzz-888888 Authorization: Bearer tok.en-1"
    )
    out = scrub(text, ["IFSWEEP_SCRUB_KEY", "IFSWEEP_NOT_SET"])
    for secret in ("sk-live-XYZ", "k-999999", "abc-very-secret-123", "zzz-888888", "tok.en-1"):
        assert secret not in out
    assert out.startswith("failed: {'Authorization': 'Bearer [REDACTED]'")
    assert scrub("plain words stay", ["IFSWEEP_SCRUB_KEY"]) == "plain words stay"
    assert scrub(out, ["IFSWEEP_SCRUB_KEY"]) == out  # idempotent
    assert scrub("(HTTP 401: Bearer sk-1234567)") == "(HTTP 401: Bearer [REDACTED])"


def test_backoff_events_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IFSWEEP_EVENT_KEY", "sk-event-secret-42")

    async def body(pool: ProviderPool, events: list[ProviderEvent]) -> None:
        # a 500 whose body quotes the key back, then success
        async with ScriptedServer([Step(500, {"echo_auth": True}), Step()]) as server:
            done = await pool.endpoint(spec_for(server.base_url, api_key_env="IFSWEEP_EVENT_KEY")).complete(
                MSGS
            )
            assert done.status == "ok" and done.attempts == 2
            assert events and all("sk-event-secret-42" not in e.message for e in events)
            assert "[REDACTED]" in events[0].message

    with_pool(body)


def test_cancelled_call_frees_its_slot_and_charges_the_worst_case() -> None:
    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=FaultRates(hang=1.0))) as sim:
            ep = pool.endpoint(spec_for(sim.base_url))
            task = asyncio.ensure_future(ep.complete(MSGS))
            await asyncio.sleep(0.2)
            assert ep.stats().in_flight == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert ep.stats().in_flight == 0
            assert pool.budget.reserved_usd == 0.0
            # it was sent and may be billed: the reservation stays spent
            assert pool.budget.spent_usd == pytest.approx(ep.worst_case_cost(MSGS))

    with_pool(body, budget=Budget(1.0))


def test_global_concurrency_caps_calls_across_endpoints() -> None:
    async def run() -> int:
        async with (
            Simulator(SimConfig(latency_ms=50)) as sim,
            ProviderPool(budget=Budget(None), global_concurrency=3) as pool,
        ):
            eps = [
                pool.endpoint(spec_for(sim.base_url, label=f"m{i}", model=f"openai/m{i}")) for i in range(3)
            ]
            peak = 0

            async def watch() -> None:
                nonlocal peak
                for _ in range(40):
                    peak = max(peak, sim.stats.in_flight)
                    await asyncio.sleep(0.01)

            await asyncio.gather(watch(), *(ep.complete(MSGS) for ep in eps for _ in range(4)))
            return peak

    assert asyncio.run(run()) == 3


def test_every_call_ends_as_a_record_under_mixed_faults() -> None:
    faults = FaultRates(
        server_error=0.1,
        rate_limit=0.05,
        rate_limit_no_header=0.05,
        malformed=0.05,
        cut_body=0.05,
        reset=0.05,
        wrong_content_type=0.05,
        missing_usage=0.05,
        null_content=0.05,
        length=0.05,
        refusal=0.05,
    )
    budget = Budget(100.0)

    async def body(pool: ProviderPool, _: list[ProviderEvent]) -> None:
        async with Simulator(SimConfig(faults=faults, seed=11)) as sim:
            ep = pool.endpoint(spec_for(sim.base_url, max_concurrency=32))
            results = await asyncio.gather(*(ep.complete(MSGS) for _ in range(150)))
            statuses = {r.status for r in results}
            assert statuses >= {"ok", "empty", "truncated", "refused"}
            assert all((r.status == "error") == (r.error_kind is not None) for r in results)
            assert all(r.text is None for r in results if r.status == "error")
            assert sum(r.attempts for r in results) == sim.stats.requests
            assert budget.spent_usd == pytest.approx(sum(r.cost_usd for r in results))
            assert budget.reserved_usd == pytest.approx(0.0, abs=1e-12)
            stats = ep.stats()
            assert stats.in_flight == 0 and stats.calls == 150
            assert stats.errors == sum(r.status == "error" for r in results)

    with_pool(
        body, budget=budget, retry=RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.01, seed=0)
    )


@given(
    key=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=6, max_size=60),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
)
def test_scrub_never_leaks_a_configured_key(key: str, before: str, after: str) -> None:
    name = "IFSWEEP_PROPERTY_KEY"
    os.environ[name] = key
    try:
        for text in (before + key + after, f"{before}Authorization: Bearer {key}{after}"):
            out = scrub(text, [name])
            assert key not in out or key in before + after  # only where the text had it by chance
            assert scrub(out, [name]) == out
    finally:
        del os.environ[name]
