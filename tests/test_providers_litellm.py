"""The LiteLLM side: same Completion as the fast path, lazy and offline import, price refusal.

The subprocess tests prove what `import providers` and `import_litellm` do to a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_providers_support import ScriptedServer, Step

from ifsweep.providers.budget import Budget
from ifsweep.providers.limits import ProviderEvent
from ifsweep.providers.pool import ProviderPool, resolve_route
from ifsweep.providers.pricing import check_prices, estimate_tokens, import_litellm, resolve_price
from ifsweep.providers.records import Completion, EndpointSpec, Price, UnknownPrice
from ifsweep.providers.send.retry import RetryPolicy
from ifsweep.simulator import FaultRates, SimConfig, Simulator

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name three rivers."}]
PRICE = Price(input_per_mtok=0.5, output_per_mtok=1.5)
RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, seed=0)
REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )


def test_fast_and_litellm_paths_give_equal_completions() -> None:
    async def run() -> tuple[list[Completion], list[Completion], int, int]:
        # Two simulators with one config and seed meet both paths with the same faults in the same order.
        cfg = SimConfig(faults=FaultRates(length=0.2, refusal=0.2, content_filter=0.1), seed=4)
        async with (
            Simulator(cfg) as sim_a,
            Simulator(cfg) as sim_b,
            ProviderPool(budget=Budget(None), retry=RETRY) as pool,
        ):
            common = {"model": "openai/sim-x", "price": PRICE, "params": {"max_tokens": 400}}
            fast = pool.endpoint(EndpointSpec(label="fast", api_base=sim_a.base_url, **common))  # type: ignore[arg-type]
            slow = pool.endpoint(
                EndpointSpec(label="slow", api_base=sim_b.base_url, force_litellm=True, **common)  # type: ignore[arg-type]
            )
            assert (fast.path, slow.path) == ("fast", "litellm")
            prompts = [[*MSGS[:1], {"role": "user", "content": f"Question {i}"}] for i in range(10)]
            a = [await fast.complete(p) for p in prompts]
            b = [await slow.complete(p) for p in prompts]
            return a, b, sim_a.stats.requests, sim_b.stats.requests

    fast, slow, requests_a, requests_b = asyncio.run(run())
    # exactly one attempt per call on both paths
    assert requests_a == requests_b == 10, [(c.error_kind, c.error_message) for c in slow]
    assert {c.status for c in fast} >= {"ok", "refused", "truncated"}
    for x, y in zip(fast, slow, strict=True):
        assert x.path == "fast" and y.path == "litellm"
        assert dataclasses.replace(x, latency_s=0.0, path="litellm") == dataclasses.replace(y, latency_s=0.0)


def test_litellm_path_retries_429_itself_and_does_not_retry_401() -> None:
    async def run() -> None:
        events: list[ProviderEvent] = []
        steps = [Step(429, {"error": {"message": "slow"}}, {"retry-after-ms": "100"}), Step()]
        async with (
            ScriptedServer(steps) as server,
            ProviderPool(budget=Budget(None), retry=RETRY, on_event=events.append) as pool,
        ):
            spec = EndpointSpec(
                label="l", model="openai/m", api_base=server.base_url, price=PRICE, force_litellm=True
            )
            done = await pool.endpoint(spec).complete(MSGS)
            assert done.status == "ok" and done.attempts == 2 and done.rate_limited == 1, done
            assert server.requests == 2  # litellm itself made one attempt each time
            assert events and events[0].kind == "rate_limited" and events[0].wait_s == pytest.approx(0.1)
        async with (
            ScriptedServer([Step(401, {"error": {"message": "bad key"}})]) as server,
            ProviderPool(budget=Budget(None), retry=RETRY) as pool,
        ):
            spec = EndpointSpec(label="l", model="openai/m", api_base=server.base_url, force_litellm=True)
            done = await pool.endpoint(dataclasses.replace(spec, price=PRICE)).complete(MSGS)
            assert done.error_kind == "auth" and done.attempts == 1 and server.requests == 1
            assert "api_key_env" in (done.error_message or "")

    asyncio.run(run())


def test_routes() -> None:
    def route(model: str, base: str | None = None, force: bool = False) -> tuple[str, str, str | None, str]:
        r = resolve_route(EndpointSpec(label="x", model=model, api_base=base, force_litellm=force))
        return r.path, r.model, r.api_base, r.provider

    assert route("openai/foo", "http://h/v1") == ("fast", "foo", "http://h/v1", "openai")
    assert route("hosted_vllm/q/w", "http://h/v1") == ("fast", "q/w", "http://h/v1", "hosted_vllm")
    assert route("groq/llama-3.1-8b")[:3] == ("fast", "llama-3.1-8b", "https://api.groq.com/openai/v1")
    assert route("together_ai/meta/llama")[0] == "fast"
    assert route("openrouter/openai/gpt-4o")[2] == "https://openrouter.ai/api/v1"
    assert route("anthropic/claude-sonnet-4-5") == (
        "litellm",
        "anthropic/claude-sonnet-4-5",
        None,
        "anthropic",
    )
    assert route("gemini/gemini-2.5-pro")[0] == "litellm"
    assert route("openai/foo", "http://h/v1", force=True)[0] == "litellm"


def test_prices_from_config_then_litellm_map() -> None:
    own = Price(9.0, 9.0)
    assert resolve_price(EndpointSpec(label="a", model="openai/gpt-4o-mini", price=own)) == own
    mini = resolve_price(EndpointSpec(label="a", model="openai/gpt-4o-mini"))
    # The map gives cache_read_input_token_cost, and the Batch API price (half, for OpenAI models).
    assert mini == Price(
        0.15, 0.6, cached_input_per_mtok=0.075, batch_input_per_mtok=0.075, batch_output_per_mtok=0.3
    )
    assert resolve_price(EndpointSpec(label="a", model="openai/no-such-model-xyz")) is None
    import_litellm()
    import litellm

    assert "openai/no-such-model-xyz" not in litellm.model_cost  # looking up did not write to the map


def test_unknown_price_is_refused_when_a_cap_is_set() -> None:
    unknown = EndpointSpec(
        label="mystery", model="openai/no-such-model-xyz", api_base="http://127.0.0.1:9/v1"
    )
    with pytest.raises(UnknownPrice, match=r"mystery \(openai/no-such-model-xyz\).*input_per_mtok"):
        check_prices([unknown])
    check_prices([unknown], sweep_cap=False)  # no cap anywhere: fine
    with pytest.raises(UnknownPrice):
        check_prices([dataclasses.replace(unknown, max_usd=1.0)], sweep_cap=False)

    async def run() -> None:
        async with ProviderPool(budget=Budget(5.0)) as pool:
            with pytest.raises(UnknownPrice, match="mystery"):
                pool.endpoint(unknown)
        async with ProviderPool(budget=Budget(None)) as pool:
            assert pool.endpoint(unknown).price() is None  # no cap: allowed, cost 0

    asyncio.run(run())


def test_cheap_estimate_leans_high_against_litellm_counter() -> None:
    litellm = import_litellm()
    samples = [
        "Write a 3-paragraph essay about the ocean, using exactly 5 bullet points and no commas.",
        "请用不超过100个字介绍一下长城的历史，并且使用正式的语气。",
        "def f(x):\n    return [i ** 2 for i in range(x) if i % 3]\n" * 5,
    ]
    for text in samples:
        msgs = [{"role": "user", "content": text}]
        exact = litellm.token_counter(model="gpt-4o-mini", messages=msgs)
        assert exact <= estimate_tokens(msgs) <= 2.5 * exact + 10, text


def test_import_providers_and_pool_do_not_import_litellm() -> None:
    out = _run(
        """
        import asyncio, sys
        import ifsweep.providers, ifsweep.providers.pool
        import ifsweep.providers.send.fast, ifsweep.providers.limits
        import ifsweep.providers.send.retry, ifsweep.providers.budget, ifsweep.providers.pricing
        import ifsweep.providers.send.scrub, ifsweep.providers.send.via_litellm
        from ifsweep.providers.budget import Budget
        from ifsweep.providers.pool import ProviderPool
        from ifsweep.providers.records import EndpointSpec, Price

        async def main():
            async with ProviderPool(budget=Budget(1.0)) as pool:
                spec = EndpointSpec(label="a", model="openai/x", api_base="http://127.0.0.1:9/v1",
                                    price=Price(1.0, 1.0))
                pool.endpoint(spec)
        asyncio.run(main())
        print("litellm" in sys.modules, "LITELLM_LOCAL_MODEL_COST_MAP" in __import__("os").environ)
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]  # and no environment mutation either


def test_import_litellm_makes_no_network_request() -> None:
    out = _run(
        """
        import ipaddress, os, socket, sys
        attempts = []
        real_connect = socket.socket.connect

        def guarded(self, address):
            host = address[0] if isinstance(address, tuple) else address
            try:
                loopback = ipaddress.ip_address(host).is_loopback
            except ValueError:
                loopback = host == "localhost"
            if not loopback:
                attempts.append(str(address))
                raise OSError("network disabled by test")
            return real_connect(self, address)

        socket.socket.connect = guarded
        real_getaddrinfo = socket.getaddrinfo

        def no_dns(host, *args, **kw):
            if host not in ("127.0.0.1", "localhost", "::1", None):
                attempts.append(f"dns {host}")
                raise OSError("dns disabled by test")
            return real_getaddrinfo(host, *args, **kw)

        socket.getaddrinfo = no_dns
        from ifsweep.providers.pricing import import_litellm, resolve_price
        from ifsweep.providers.pool import resolve_route
        from ifsweep.providers.records import EndpointSpec
        litellm = import_litellm()
        assert "LITELLM_LOCAL_MODEL_COST_MAP" not in os.environ  # set for the import alone
        assert litellm.suppress_debug_info is True
        print(resolve_price(EndpointSpec(label="a", model="openai/gpt-4o")))
        print(resolve_route(EndpointSpec(label="a", model="anthropic/claude-sonnet-4-5")).path)
        print(litellm.token_counter(model="gpt-4o", messages=[{"role": "user", "content": "hello"}]) > 0)
        print("attempts", attempts)
        """
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "attempts []", out.stdout
    assert lines[0] == (
        "Price(input_per_mtok=2.5, output_per_mtok=10.0, cached_input_per_mtok=1.25, "
        "cache_write_per_mtok=None, batch_input_per_mtok=1.25, batch_output_per_mtok=5.0)"
    )
    assert lines[1:3] == ["litellm", "True"]
