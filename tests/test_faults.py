"""Every simulated provider fault has one defined outcome, on both send paths (docs/reliability.md).

Calls go through ProviderPool over real HTTP to the simulator on 127.0.0.1. A fault at rate 1 shows the
permanent outcome (after every retry); at rate 0.5 the transient ones must end ok.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest

from ifsweep.providers.budget import Budget
from ifsweep.providers.limits import AdaptiveConcurrency
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import Completion, EndpointSpec, Price
from ifsweep.providers.send.retry import RetryDecision, RetryPolicy, classify
from ifsweep.simulator import FaultRates, SimConfig, Simulator
from ifsweep.simulator.config import FAULT_NAMES

MSGS = [{"role": "user", "content": "Write two sentences about rivers."}]
PRICE = Price(input_per_mtok=1.0, output_per_mtok=2.0)
RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.005, max_delay_s=0.02, seed=0)


@dataclass(frozen=True)
class Outcome:
    status: str
    kind: str | None = None
    transient: bool = False  # retried: at rate 0.5 the call ends ok


# The table of docs/reliability.md. Where the two paths name a fault differently, (fast, litellm).
TABLE: dict[str, Outcome | tuple[Outcome, Outcome]] = {
    "server_error": Outcome("error", "server", transient=True),
    "rate_limit": Outcome("error", "rate_limit", transient=True),
    "rate_limit_no_header": Outcome("error", "rate_limit", transient=True),
    "malformed": Outcome("error", "malformed", transient=True),
    "cut_body": (Outcome("error", "malformed", True), Outcome("error", "connection", True)),
    "reset": Outcome("error", "connection", transient=True),
    "hang": Outcome("error", "timeout"),
    "trickle": Outcome("ok"),
    "wrong_content_type": Outcome("ok"),
    "missing_usage": Outcome("ok"),
    "null_content": Outcome("empty"),
    "empty": Outcome("empty"),
    "length": Outcome("truncated"),
    "content_filter": Outcome("refused"),
    "refusal": Outcome("refused"),
    "context_length": Outcome("error", "context_length"),
    # Never retried, and the endpoint sends nothing more in the run (tests/test_quota.py).
    "quota": Outcome("error", "quota"),
}


def expected(fault: str, path: str) -> Outcome:
    row = TABLE[fault]
    if isinstance(row, tuple):
        return row[0] if path == "fast" else row[1]
    return row


def spec(base: str, path: str, fault: str) -> EndpointSpec:
    return EndpointSpec(
        label="m",
        model="openai/sim-model",
        api_base=base,
        params={"max_tokens": 400},
        price=PRICE,
        # A hang must meet the deadline soon; a trickle (2-5 s) must fit inside it.
        timeout_s=1.0 if fault == "hang" else 12.0,
        force_litellm=path == "litellm",
    )


def run_calls(fault: str, rate: float, path: str, n: int, retry: RetryPolicy = RETRY) -> list[Completion]:
    async def main() -> list[Completion]:
        cfg = SimConfig(faults=FaultRates(**{fault: rate}), seed=4, hang_s=30.0)
        async with ProviderPool(budget=Budget(None), retry=retry) as pool, Simulator(cfg) as sim:
            ep = pool.endpoint(spec(sim.base_url, path, fault))
            # One at a time: the simulator's draws then meet the calls in a fixed order.
            results = [await ep.complete(MSGS) for _ in range(n)]
            assert sum(r.attempts for r in results) == sim.stats.requests
            return results

    return asyncio.run(main())


def test_the_table_covers_every_simulated_fault() -> None:
    assert set(TABLE) == set(FAULT_NAMES)


@pytest.mark.parametrize("fault", FAULT_NAMES)
def test_fault_outcome_fast_path(fault: str) -> None:
    check_outcome(fault, "fast")


@pytest.mark.parametrize(
    "fault", ["server_error", "rate_limit", "malformed", "cut_body", "reset", "null_content", "length"]
)
def test_fault_outcome_litellm_path(fault: str) -> None:
    check_outcome(fault, "litellm")


def check_outcome(fault: str, path: str) -> None:
    want = expected(fault, path)
    results = run_calls(fault, 1.0, path, 2)
    for i, r in enumerate(results):
        assert (r.status, r.error_kind) == (want.status, want.kind), (fault, r)
        assert r.path == path
        if r.status == "error":
            assert r.text is None and r.error_message
            # Retried faults use every attempt; a hang uses the whole deadline on its first one; after
            # a quota answer the endpoint sends nothing more.
            once = 0 if want.kind == "quota" and i else 1
            assert r.attempts == (RETRY.max_attempts if want.transient else once)
        else:
            assert r.attempts == 1 and r.error_kind is None and r.error_message is None
    if fault == "missing_usage":
        assert all(r.usage_estimated and r.input_tokens > 0 and r.output_tokens > 0 for r in results)
    if fault in ("content_filter", "null_content"):
        assert all(r.text is None for r in results)
    if fault == "refusal":
        assert all(r.text for r in results)


@pytest.mark.parametrize("fault", [f for f in FAULT_NAMES if expected(f, "fast").transient])
def test_transient_faults_end_ok(fault: str) -> None:
    retry = RetryPolicy(max_attempts=8, base_delay_s=0.005, max_delay_s=0.02, seed=1)
    results = run_calls(fault, 0.5, "fast", 8, retry)
    assert [r.status for r in results] == ["ok"] * 8
    assert sum(r.attempts for r in results) > 8, "the seeded draws never hit the fault"
    if fault.startswith("rate_limit"):
        assert sum(r.rate_limited for r in results) == sum(r.attempts for r in results) - 8


def test_a_trickle_past_the_deadline_is_a_timeout() -> None:
    async def main() -> Completion:
        cfg = SimConfig(faults=FaultRates(trickle=1.0), seed=4)
        async with ProviderPool(budget=Budget(None), retry=RETRY) as pool, Simulator(cfg) as sim:
            s = spec(sim.base_url, "fast", "trickle")
            fast = EndpointSpec(**{**_fields(s), "timeout_s": 1.0})
            return await pool.endpoint(fast).complete(MSGS)

    done = asyncio.run(main())
    assert (done.status, done.error_kind, done.attempts) == ("error", "timeout", 1)
    assert "timeout_s=1" in (done.error_message or "")


def _fields(s: EndpointSpec) -> dict[str, Any]:
    return {name: getattr(s, name) for name in s.__slots__}


# --- classification of LiteLLM's wrapped errors (constructed the way litellm chains them) ---------------


class InternalServerError(Exception):
    status_code = 500


class ServiceUnavailableError(Exception):
    status_code = 503


def _chained(outer: Exception, inner: BaseException) -> Exception:
    outer.__cause__ = inner
    return outer


def test_litellm_500_wrapping_a_json_error_is_malformed() -> None:
    try:
        json.loads("<html>")
    except json.JSONDecodeError as exc:
        err = _chained(InternalServerError("OpenAIException - Expecting value"), exc)
    assert classify(err) == RetryDecision(True, "malformed")


def test_litellm_500_wrapping_a_reset_is_a_connection_fault() -> None:
    inner = _chained(OSError("client os error"), ConnectionResetError(104, "reset"))
    err = _chained(InternalServerError("OpenAIException - Connection error."), inner)
    assert classify(err) == RetryDecision(True, "connection")


def test_a_genuine_503_is_a_server_fault() -> None:
    assert classify(ServiceUnavailableError("down")) == RetryDecision(True, "server")
    assert classify(InternalServerError("boom")) == RetryDecision(True, "server")


# --- a deadline that fires while a retry waits for a concurrency slot ----------------------------------


def test_a_waiter_cancelled_while_a_slot_is_released_leaves_the_limiter_sound() -> None:
    """Seen in the 100k soak: the call's deadline cancelled a retry queued for a slot in the same tick
    as another call released one; the limiter raised ValueError out of `complete` and ended the run."""

    async def main() -> None:
        slots = AdaptiveConcurrency(1)
        await slots.acquire()
        waiting = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)  # now queued
        waiting.cancel()  # cancels its future at once ...
        slots.release()  # ... which the release drops before the waiter runs its handler
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert slots.in_flight == 0
        await asyncio.wait_for(slots.acquire(), 1.0)
        assert slots.in_flight == 1

    asyncio.run(main())
