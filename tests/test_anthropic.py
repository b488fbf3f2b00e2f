"""Anthropic over its own protocol, interactive calls: the simulator's POST /v1/messages (request and
answer shapes, breakpoint caching with Anthropic's usage meaning, errors, anthropic-ratelimit headers)
and the LiteLLM anthropic route end to end against it: cache_control placed at the end of a shared
prefix, warm-then-fan-out on an EIFBench judge, settlement from Anthropic's usage fields, context-length
errors named as such, 429 / 529 retried, limits learned from the headers."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sweeps import stored_records, toml_config

from ifsweep.providers.budget import Budget
from ifsweep.providers.limits import ProviderEvent, with_anthropic_limits
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.pricing import litellm_price
from ifsweep.providers.records import EndpointSpec, Price
from ifsweep.providers.send.prefix import CacheHint, PrefixEnd
from ifsweep.providers.send.retry import RetryPolicy
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import FaultRates, SimConfig, Simulator, SimulatorThread
from ifsweep.simulator.prefix import ANTHROPIC_MIN_TOKENS
from ifsweep.simulator.server import CLIENT_HEADERS
from ifsweep.simulator.stats import Served

CLAUDE = "anthropic/claude-sonnet-4-5"
SHARED = "The shared judging context repeats here. " * 300  # about 3,000 simulator tokens


def _spec(root: str, **kw: Any) -> EndpointSpec:
    fields: dict[str, Any] = {"label": "j", "model": CLAUDE, "api_base": root, "params": {"max_tokens": 400}}
    return EndpointSpec(**(fields | kw))


def _prompt(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Judge."}, {"role": "user", "content": SHARED + question}]


def bill(served: list[Served], price: Price) -> float:
    """What the simulated provider charges for what it served, from its own counts: plain input, cache
    reads and cache writes each at their price (Anthropic's meaning of its usage fields)."""
    total = 0.0
    for s in served:
        plain = s.prompt_tokens - s.cached_tokens - s.cache_write_tokens
        total += (
            plain * price.input_per_mtok
            + s.cached_tokens * (price.cached_input_per_mtok or 0.0)
            + s.cache_write_tokens * (price.cache_write_per_mtok or 0.0)
            + s.output_tokens * price.output_per_mtok
        )
    return total / 1e6


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any, Any]:
    async with session.post(url, json=body, headers={"x-api-key": "k"}) as resp:
        return resp.status, await resp.json(), resp.headers


# ------------------------------------------------------------------------------------ the endpoint


def test_messages_endpoint_speaks_anthropics_shapes_and_caches_at_breakpoints() -> None:
    marked = {"type": "text", "text": SHARED, "cache_control": {"type": "ephemeral"}}

    def body(question: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        content = [*blocks, {"type": "text", "text": question}]
        return {
            "model": "claude-x",
            "max_tokens": 50,
            "system": "Judge.",
            "messages": [{"role": "user", "content": content}],
        }

    async def run() -> None:
        async with Simulator(SimConfig(rpm=600, tpm=6_000_000)) as sim:
            url = sim.root_url + "/v1/messages"
            async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
                status, first, headers = await _post(session, url, body("A?", marked))
                assert status == 200 and first["type"] == "message" and first["role"] == "assistant"
                assert first["content"][0]["type"] == "text" and first["stop_reason"] in (
                    "end_turn",
                    "max_tokens",
                )
                _, second, _ = await _post(session, url, body("B?", marked))
                _, unmarked, _ = await _post(session, url, body("C?", {"type": "text", "text": SHARED}))
                short_mark = {"type": "text", "text": "short", "cache_control": {"type": "ephemeral"}}
                _, short, _ = await _post(session, url, body("D?", short_mark))
                too_many = await _post(session, url, body("E?", *[short_mark] * 5))
                no_max = await _post(
                    session, url, {"model": "m", "messages": [{"role": "user", "content": "x"}]}
                )
            log = list(sim.stats.log)
            billed = sim.stats.billed_tokens("claude-x")
        # Every request that reached the model is billed (the refused ones did not).
        assert billed == (sum(s.prompt_tokens for s in log), sum(s.output_tokens for s in log))
        u1, u2, u3, u4 = (r["usage"] for r in (first, second, unmarked, short))
        # The first writes the marked prefix, the second reads it: input_tokens counts neither.
        assert (
            u1["cache_creation_input_tokens"] >= ANTHROPIC_MIN_TOKENS and u1["cache_read_input_tokens"] == 0
        )
        assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"]
        assert u2["cache_creation_input_tokens"] == 0
        total = log[1].prompt_tokens
        assert u2["input_tokens"] == total - u2["cache_read_input_tokens"] < 10
        # No breakpoint, nothing cached; a marked prefix under the minimum, nothing either.
        assert (u3["cache_read_input_tokens"], u3["cache_creation_input_tokens"]) == (0, 0)
        assert u3["input_tokens"] == log[2].prompt_tokens
        assert (u4["cache_read_input_tokens"], u4["cache_creation_input_tokens"]) == (0, 0)
        for status, payload in (too_many[:2], no_max[:2]):
            assert status == 400 and payload["type"] == "error"
            assert payload["error"]["type"] == "invalid_request_error"
        assert (
            "cache_control" in too_many[1]["error"]["message"]
            and "max_tokens" in no_max[1]["error"]["message"]
        )
        assert headers["anthropic-ratelimit-requests-limit"] == "600"
        assert headers["anthropic-ratelimit-tokens-limit"] == "6000000"
        reset = datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"].replace("Z", "+00:00"))
        assert timedelta(0) <= reset - datetime.now(UTC) <= timedelta(seconds=3)
        assert "x-ratelimit-limit-requests" not in headers  # Anthropic's names only

    asyncio.run(run())


def test_same_text_gets_the_same_reply_over_either_protocol() -> None:
    async def run() -> None:
        async with Simulator(SimConfig(seed=3)) as sim:
            chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
            anthropic = {
                "model": "m",
                "max_tokens": 100,
                "system": [{"type": "text", "text": "Be brief."}],
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "Name a "}, {"type": "text", "text": "colour."}],
                    }
                ],
            }
            async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
                _, msg, _ = await _post(session, sim.root_url + "/v1/messages", anthropic)
                _, completion, _ = await _post(
                    session,
                    sim.base_url + "/chat/completions",
                    {"model": "m", "messages": chat, "max_tokens": 100},
                )
        assert msg["content"][0]["text"] == completion["choices"][0]["message"]["content"]

    asyncio.run(run())


# ------------------------------------------------------------------------------------ through LiteLLM


def test_litellm_route_places_the_breakpoint_and_settles_from_anthropics_usage() -> None:
    price = litellm_price(CLAUDE)
    assert price is not None and price.cache_write_per_mtok and price.cached_input_per_mtok

    async def run() -> None:
        async with Simulator(SimConfig()) as sim:
            budget = Budget(None)
            async with ProviderPool(budget=budget) as pool:
                ep = pool.endpoint(_spec(sim.root_url))
                assert ep.path == "litellm" and ep.caches_prefixes
                hint = CacheHint("g", PrefixEnd(1, len(SHARED)))
                first = await ep.complete(_prompt("First?"), hint)
                second = await ep.complete(_prompt("Second?"), hint)
                plain = await ep.complete(_prompt("Third?"))  # no hint: no breakpoint, nothing cached
            served = list(sim.stats.log)
        assert first.cache_write_tokens == served[0].cache_write_tokens > 0 and first.cached_tokens == 0
        assert second.cached_tokens == served[1].cached_tokens == first.cache_write_tokens
        assert second.cache_write_tokens == 0
        assert plain.cached_tokens == plain.cache_write_tokens == 0
        for c, s in zip((first, second, plain), served, strict=True):
            # input_tokens counts every prompt token: Anthropic's three fields added up.
            assert c.input_tokens == s.prompt_tokens and c.output_tokens == s.output_tokens
            assert c.cost_usd == pytest.approx(bill([s], price), rel=1e-12)
        assert budget.spent_usd == pytest.approx(bill(served, price), rel=1e-12)
        # Reads at a tenth of the input price, writes at 1.25x: the second saves, the first pays more.
        assert second.cache_saved_usd > 0 > first.cache_saved_usd

    asyncio.run(run())


def test_context_length_error_is_named_with_both_sizes() -> None:
    async def run() -> None:
        async with Simulator(SimConfig(context_window=500)) as sim:
            async with ProviderPool(budget=Budget(None)) as pool:
                c = await pool.endpoint(_spec(sim.root_url)).complete(
                    [{"role": "user", "content": "word " * 3000}]
                )
            assert sim.stats.faults["context_length"] == 1
        assert c.status == "error" and c.error_kind == "context_length" and c.attempts == 1
        assert f"a prompt of 3751 tokens exceeds {CLAUDE}'s context window of 500 tokens" in (
            c.error_message or ""
        )

    asyncio.run(run())


def test_rate_limit_and_overloaded_are_retried_with_the_servers_wait() -> None:
    events: list[ProviderEvent] = []

    async def run() -> None:
        faults = FaultRates(server_error=0.4, rate_limit=0.3)
        async with Simulator(SimConfig(faults=faults, seed=2)) as sim:
            retry = RetryPolicy(max_attempts=10, base_delay_s=0.01)
            async with ProviderPool(budget=Budget(None), retry=retry, on_event=events.append) as pool:
                ep = pool.endpoint(_spec(sim.root_url, params={"max_tokens": 400}))
                done = await asyncio.gather(
                    *(ep.complete([{"role": "user", "content": f"hi {i}"}]) for i in range(6))
                )
            counts = sim.stats.status_counts
        assert all(c.status != "error" for c in done)
        assert counts[429] > 0 and counts[529] > 0 and counts[500] > 0
        assert sum(c.rate_limited for c in done) == counts[429]
        # Anthropic's retry-after (1 s) is what the client waited on each 429.
        waits = [e.wait_s for e in events if e.kind == "rate_limited"]
        assert waits and all(w is not None and w >= 1.0 for w in waits)

    asyncio.run(run())


def test_limits_are_learned_from_anthropic_ratelimit_headers() -> None:
    async def run() -> None:
        async with Simulator(SimConfig(rpm=30, tpm=90_000)) as sim:
            async with ProviderPool(budget=Budget(None)) as pool:
                ep = pool.endpoint(_spec(sim.root_url, params={"max_tokens": 20}))
                for i in range(3):  # one request fits the simulator's burst: the rest wait their turn
                    assert (await ep.complete([{"role": "user", "content": f"q{i}"}])).status != "error"
                stats = ep.stats()
            assert sim.stats.faults["limit"] == 0  # paced from the headers, never refused
        assert (stats.rpm_limit, stats.tpm_limit) == (30, 90_000)
        assert stats.rpm_learned and stats.tpm_learned and stats.rate_limited == 0

    asyncio.run(run())


def test_anthropic_ratelimit_headers_read_as_the_limiters_names() -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    sent = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": soon,
        "llm_provider-anthropic-ratelimit-tokens-limit": "40000",  # as LiteLLM passes them on
        "content-type": "application/json",
    }
    seen = with_anthropic_limits(sent)
    assert seen["x-ratelimit-limit-requests"] == "50" and seen["x-ratelimit-remaining-requests"] == "0"
    assert 28.0 <= float(seen["x-ratelimit-reset-requests"]) <= 30.0
    assert seen["x-ratelimit-limit-tokens"] == "40000" and seen["content-type"] == "application/json"
    assert with_anthropic_limits({"x-ratelimit-limit-requests": "5"}) == {"x-ratelimit-limit-requests": "5"}
    assert "x-ratelimit-reset-requests" not in with_anthropic_limits(
        {"anthropic-ratelimit-requests-reset": "soon"}
    )


# ------------------------------------------------------------------------------------ an EIFBench judge


def eif_judge_sweep(
    out: Path, sim: SimulatorThread, data: Path, *, batch: str | None = None, limit: int = 2
) -> str:
    """One simulated model answering EIFBench's party set, judged by claude-sonnet-4-5 at the simulator
    (prices from LiteLLM's map: cache reads and writes at their own prices)."""
    text = toml_config(
        out, sim.base_url, models=("alpha",), bench=("eifbench",), data={"eifbench": data}, limit=limit
    )
    params = "params = { temperature = 0, max_tokens = 128 }"
    text = text.replace(params, params + "\nprice = { input_per_mtok = 1.0, output_per_mtok = 4.0 }")
    judge = f'model = "{CLAUDE}"\napi_base = "{sim.root_url}"\nparams = {{ max_tokens = 256 }}'
    if batch is not None:
        judge += f"\nbatch = {{ {batch} }}"
    return text.replace(f'model = "openai/sim-judge"\napi_base = "{sim.base_url}"', judge)


def test_eifbench_judge_warms_then_fans_out_and_spends_what_the_simulator_bills(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    price = litellm_price(CLAUDE)
    assert price is not None
    with SimulatorThread(SimConfig(latency_ms=60, seed=3)) as sim:
        cfg = tmp_path / "eif.toml"
        cfg.write_text(eif_judge_sweep(tmp_path / "run", sim, shared_benchmarks / "EIFBench"))
        assert main(["run", str(cfg)]) == 0
        served = [s for s in sim.stats.log if s.model == "claude-sonnet-4-5"]
    judged = stored_records(tmp_path / "run", {"judgment"})
    assert judged and {j["path"] for j in judged} == {"litellm"} and len(judged) == len(served)
    # One warm call per task writes its shared prefix; every other judge call of the task reads it, and
    # none reached the server before its warm call had been answered.
    writers = [s for s in served if s.cache_write_tokens]
    assert len(writers) == 2
    followers: dict[int, list[Served]] = defaultdict(list)
    for s in served:
        if not s.cache_write_tokens:
            (warm,) = [w for w in writers if w.cache_write_tokens == s.cached_tokens]
            assert s.arrived >= warm.answered
            followers[id(warm)].append(s)
    assert all(followers[id(w)] for w in writers)
    share = sum(s.cached_tokens for s in served) / sum(s.prompt_tokens for s in served)
    assert share > 0.85
    # What the run stored is what the simulator counted, and the judge's spend is its bill.
    assert sum(j["cached_tokens"] for j in judged) == sum(s.cached_tokens for s in served)
    assert sum(j["cache_write_tokens"] for j in judged) == sum(s.cache_write_tokens for s in served)
    assert sum(j["cost_usd"] for j in judged) == pytest.approx(bill(served, price), rel=1e-9)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "complete"
