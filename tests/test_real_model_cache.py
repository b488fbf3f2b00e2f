"""The real-model tier for prefix caching: llama.cpp reports the prompt tokens its slot cache served
(usage.prompt_tokens_details.cached_tokens), and ifsweep settles them at the cached price. Only a real
server shows that its report is read as it really comes."""

from __future__ import annotations

import asyncio

import pytest
from llamaserver import LlamaServer

from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import EndpointSpec, Price

pytestmark = pytest.mark.real_model

PRICE = Price(input_per_mtok=1.0, output_per_mtok=2.0, cached_input_per_mtok=0.1)
# About 1,300 SmolLM2 tokens of shared context (a few seconds of prompt reading on 2 cores).
SHARED = " ".join(f"Rule {i}: an answer must name the number {i} once." for i in range(90))


def _prompt(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You judge answers."},
        {"role": "user", "content": SHARED + question},
    ]


def test_llama_cpp_cache_hits_are_read_and_settled_at_the_cached_price(llama_server: LlamaServer) -> None:
    async def run() -> None:
        spec = EndpointSpec(
            label="judge",
            model="openai/smollm2-135m-instruct",
            api_base=llama_server.api_base,
            params={"max_tokens": 4, "temperature": 0},
            price=PRICE,
            timeout_s=600.0,
        )
        budget = Budget(None)
        async with ProviderPool(budget=budget) as pool:
            ep = pool.endpoint(spec)
            assert ep.caches_prefixes  # an OpenAI-compatible server of our own: on by default
            first = await ep.complete(_prompt(" Does the answer follow rule 3?"))
            second = await ep.complete(_prompt(" Does the answer follow rule 7?"))
        assert first.status != "error" and second.status != "error", (first, second)
        # The first reads the whole prompt; the second finds the shared part in its slot.
        assert first.cached_tokens < 0.1 * first.input_tokens
        assert 0.8 * second.input_tokens < second.cached_tokens < second.input_tokens
        for c in (first, second):
            expected = (
                (c.input_tokens - c.cached_tokens) * PRICE.input_per_mtok
                + c.cached_tokens * 0.1
                + c.output_tokens * PRICE.output_per_mtok
            ) / 1e6
            assert c.cost_usd == pytest.approx(expected, rel=1e-12)
        assert budget.spent_usd == pytest.approx(first.cost_usd + second.cost_usd, rel=1e-12)

    asyncio.run(run())
