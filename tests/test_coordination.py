"""The Redis coordinator driven directly, against a real redis-server: two coordinators in one process
stand for two processes (each has its own instance id, writer and connections)."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
import redis
from redis_server import free_port, redis_server

from ifsweep.providers.budget import Budget
from ifsweep.providers.coord.interfaces import CoordinatorError, parse_coordinator
from ifsweep.providers.coord.redis_state import Baseline, RedisCoordinator
from ifsweep.providers.limits import EndpointLimiter, ProviderEvent
from ifsweep.providers.records import BudgetExhausted

ENDPOINT = ("openai", "http://127.0.0.1:1/v1", None, "m")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


def coordinator(
    url: str,
    sweep: str,
    writer: str,
    *,
    lease_s: float = 20.0,
    rescan: Callable[[], Baseline] = dict,
    emit: Callable[[ProviderEvent], None] | None = None,
) -> RedisCoordinator:
    settings = parse_coordinator(f"{url}?lease_s={lease_s}")
    return RedisCoordinator(settings, sweep_id=sweep, writer=writer, rescan=rescan, emit=emit)


async def started(
    c: RedisCoordinator, baseline: Baseline | None = None, *, new: bool = True
) -> RedisCoordinator:
    await c.start(baseline or {}, new_sweep=new)
    return c


def limiter(
    c: RedisCoordinator, *, tpm: int | None = None, emit: Callable[[ProviderEvent], None] | None = None
) -> EndpointLimiter:
    return EndpointLimiter(
        "m", rpm=None, tpm=tpm, max_concurrency=64, shared=c.rates(ENDPOINT), tpm_burst_s=1.0, emit=emit
    )


def test_two_processes_share_one_cap(url: str) -> None:
    sweep = secrets.token_hex(8)

    async def run() -> None:
        a = await started(coordinator(url, sweep, "p0of2"))
        b = await started(coordinator(url, sweep, "p1of2"), new=False)
        budget_a, budget_b = Budget(1.0, shared=a.ledger), Budget(1.0, shared=b.ledger)
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run)
            tg.start_soon(b.run)
            held = await budget_a.reserve_when_settled([], 0.6)
            granted = anyio.Event()

            async def second() -> None:
                reservation = await budget_b.reserve_when_settled([], 0.6)
                granted.set()
                budget_b.settle(reservation, 0.5)

            tg.start_soon(second)
            await anyio.sleep(0.3)
            assert not granted.is_set()  # 0.6 + 0.6 > 1.0 while a's hold is outstanding
            budget_a.settle(held, 0.3)  # a's call cost less than its worst case: b now fits
            with anyio.fail_after(5):
                await granted.wait()
            await b.flush()
            snap = await a.snapshot()
            assert snap["spent"]["sweep"] == pytest.approx(0.8) and snap["holds"] == {}
            for budget in (budget_a, budget_b):  # nothing in flight anywhere: refused at once
                with pytest.raises(BudgetExhausted) as e:
                    await budget.reserve_when_settled([], 0.3)
                assert e.value.scope == "sweep"
            assert budget_b.spent_usd == pytest.approx(0.8)  # the shared figure, not b's own 0.5
            tg.cancel_scope.cancel()
        assert await a.close() and await b.close()

    anyio.run(run)


def test_a_model_cap_is_shared_too(url: str) -> None:
    sweep = secrets.token_hex(8)

    async def run() -> None:
        a = await started(coordinator(url, sweep, "p0of2"))
        b = await started(coordinator(url, sweep, "p1of2"), new=False)
        budgets = [Budget(None, shared=c.ledger) for c in (a, b)]
        for budget in budgets:
            budget.add_scope("alpha", 0.5)
        first = await budgets[0].reserve_when_settled(["alpha"], 0.4)
        budgets[0].settle(first, 0.4)
        await a.flush()
        with pytest.raises(BudgetExhausted) as e:
            await budgets[1].reserve_when_settled(["alpha"], 0.2)
        assert e.value.scope == "alpha"
        await budgets[1].reserve_when_settled(["beta"], 0.2)  # other models are not capped
        assert await a.close() and await b.close()

    anyio.run(run)


def test_settles_never_count_twice_and_a_wiped_ledger_is_rebuilt(url: str) -> None:
    sweep = secrets.token_hex(8)
    shards = {"old": {"sweep": 1.0}}  # what a finished writer's shards say it spent

    async def run() -> None:
        a = await started(coordinator(url, sweep, "p0of2", lease_s=2, rescan=lambda: shards), shards)
        budget = Budget(10.0, spent_usd=1.0, shared=a.ledger)
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run)
            first = await budget.reserve_when_settled([], 0.5)
            budget.settle(first, 0.2)
            await a.flush()
            # The same settlement again (a reply lost, the update resent): counted once.
            args = [a.ns, a.ledger.epoch, a.instance, a.writer, 1, first.tokens[0], "sweep", repr(0.2)]
            for _ in range(2):
                await a.script("SETTLE", [], args)
            assert (await a.snapshot())["spent"] == {"sweep": pytest.approx(1.2)}
            outstanding = await budget.reserve_when_settled([], 0.4)

            redis.Redis.from_url(url).flushall()  # a restart without persistence
            b = await started(coordinator(url, sweep, "p1of2", rescan=lambda: shards), shards, new=False)
            # b made a new ledger; a notices within a heartbeat and puts back its spend and its hold,
            # before b may reserve (the grace period).
            start = time.monotonic()
            late = await Budget(10.0, shared=b.ledger).reserve_when_settled([], 0.1)
            assert time.monotonic() - start >= (b.grace_ms / 1000) * 0.8
            snap = await b.snapshot()
            assert snap["spent"] == {"sweep": pytest.approx(1.2)}  # old 1.0 + a's 0.2, once each
            assert snap["held"]["sweep"] == pytest.approx(0.5) and snap["holds"] == {"sweep": 2}
            budget.settle(outstanding, 0.1)
            await a.flush()
            assert (await b.snapshot())["spent"] == {"sweep": pytest.approx(1.3)}
            assert late.amount_usd == 0.1
            tg.cancel_scope.cancel()
        assert await a.close() and await b.close()

    anyio.run(run)


def test_holds_of_a_silent_process_are_charged_when_its_lease_expires(url: str) -> None:
    """A dead process's calls in flight may have been billed (issue 27 item 1): when its lease runs
    out its holds become its writer's spend, never simply released."""
    sweep = secrets.token_hex(8)

    async def run() -> None:
        a = await started(coordinator(url, sweep, "p0of2", lease_s=1))  # never renews: no run()
        b = await started(coordinator(url, sweep, "p1of2"), new=False)
        await Budget(1.0, shared=a.ledger).reserve_when_settled([], 0.9)
        assert a.instance in (await b.snapshot())["leases_ms"]
        refused = Budget(1.0, shared=b.ledger)
        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.run)  # its heartbeat makes waiting reservations look again
            with anyio.fail_after(10), pytest.raises(BudgetExhausted):
                await refused.reserve_when_settled([], 0.5)  # waits for a's hold, which is then spent
            waited = time.monotonic() - start
            assert 0.5 < waited < 1.0 + b.beat_s + 1.0
            snap = await b.snapshot()
            assert a.instance not in snap["leases_ms"]
            assert snap["spent"] == {"sweep": pytest.approx(0.9)} and snap["holds"] == {}
            await refused.reserve_when_settled([], 0.1)  # what is left under the cap still fits
            tg.cancel_scope.cancel()
        await b.close()
        await a.close(timeout_s=0)

    anyio.run(run)


def test_two_limiters_pace_to_one_shared_rpm(url: str) -> None:
    sweep = secrets.token_hex(8)
    endpoint_key = ("openai", f"http://127.0.0.1:1/{sweep}", None, "m")

    async def run() -> None:
        a = await started(coordinator(url, sweep, "p0of2"))
        b = await started(coordinator(url, sweep, "p1of2"), new=False)
        limiters = [
            EndpointLimiter("m", rpm=1200, tpm=None, max_concurrency=64, shared=c.rates(endpoint_key))
            for c in (a, b)
        ]

        async def calls(lim: EndpointLimiter, n: int) -> None:
            for _ in range(n):
                lim.release(await lim.admit(10), used_tokens=10, ok=True)

        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            for lim in limiters:
                for _ in range(3):
                    tg.start_soon(calls, lim, 10)
        elapsed = time.monotonic() - start
        # 60 calls at 20/s after a burst of 20: 2 s. Each limiter alone would allow its 30 in 0.5 s.
        assert 1.9 <= elapsed < 8.0
        await a.close()
        await b.close()

    anyio.run(run)


def test_pauses_learned_limits_and_refunds_are_shared(url: str) -> None:
    sweep = secrets.token_hex(8)
    events: list[ProviderEvent] = []

    async def run() -> None:
        a = await started(coordinator(url, sweep, "p0of2"))
        b = await started(coordinator(url, sweep, "p1of2"), new=False)
        la, lb = limiter(a, tpm=6000), limiter(b, tpm=6000, emit=events.append)  # 100 tokens/s, 1 s burst

        # A provider's Retry-After seen by a holds b's calls too.
        limited = await la.admit(1)
        la.on_rate_limited(limited, 1.0)
        la.release(limited, used_tokens=0, ok=False)
        await a.flush()
        start = time.monotonic()
        lb.release(await lb.admit(1), used_tokens=1, ok=True)
        assert time.monotonic() - start >= 0.8

        # A limit a learned from headers paces b, which has none configured.
        la.observe({"x-ratelimit-limit-requests": "600"})
        await a.flush()
        lb.release(await lb.admit(1), used_tokens=1, ok=True)
        assert lb.rpm_limit == 600 and lb.rpm_learned
        assert any(e.kind == "limit_learned" and "another process" in e.message for e in events)

        # Unused tokens go back to the shared bucket: a full burst is free again at once ...
        await anyio.sleep(1.1)
        admission = await lb.admit(100)
        lb.release(admission, used_tokens=0, ok=False)
        await b.flush()
        start = time.monotonic()
        admission = await la.admit(100)
        assert time.monotonic() - start < 0.5
        # ... and used ones are not: the next 100 tokens wait for the refill.
        la.release(admission, used_tokens=100, ok=True)
        await a.flush()
        start = time.monotonic()
        await lb.admit(100)
        assert time.monotonic() - start >= 0.8
        await a.close()
        await b.close()

    anyio.run(run)


def test_a_server_that_never_answers_is_a_clear_error() -> None:
    settings = parse_coordinator(f"redis://127.0.0.1:{free_port()}/0")
    c = RedisCoordinator(settings, sweep_id="x", writer="main", rescan=dict, connect_timeout_s=0.5)

    async def run() -> None:
        with pytest.raises(CoordinatorError, match=r"did not answer within 0.5 s .*redis-server"):
            await c.start({}, new_sweep=True)
        await c.close(timeout_s=0)

    anyio.run(run)


def test_without_the_redis_client_a_coordinator_is_refused_clearly(tmp_path: Path) -> None:
    """The client is an optional extra: a config naming a coordinator says how to install it (exit 2),
    and nothing else ever imports it."""
    cfg = tmp_path / "s.toml"
    cfg.write_text(
        '[run]\ncoordinator = "redis://127.0.0.1:1/0"\nprogress = "off"\n'
        '[[benchmarks]]\nname = "followbench"\n'
        '[[models]]\nmodel = "openai/sim"\napi_base = "http://127.0.0.1:1/v1"\n'
    )
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import ifsweep.runner.engine.sweep, ifsweep.providers.pool\n"
        "from ifsweep.runner.engine.coordinator import join\n"
        "from ifsweep.runner.config import load_config\n"
        "import anyio\n"
        f"cfg = load_config({str(cfg)!r})\n"
        "try:\n"
        "    anyio.run(join, cfg.run.coordinator, cfg.path.parent, 'main')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("CoordinatorError"), out.stderr
    assert "pip install 'ifsweep[redis]'" in out.stdout
    light = (
        "import sys, ifsweep.runner.engine.sweep, ifsweep.runner.commands.cli; print('redis' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", light], capture_output=True, text=True).stdout == "False\n"
