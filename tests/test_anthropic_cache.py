"""Anthropic's prompt cache as documented (issue 32, item 8): the shortest prefix cached depends on the
model (1,024 tokens; 2,048 for Haiku 3.x; 4,096 for Haiku 4.5 and Opus 4.5/4.6), and an entry lives
5 minutes, or an hour with `ttl: "1h"`, from its write or its last read. The simulator's /v1/messages
over real HTTP, on a clock the test moves."""

from __future__ import annotations

from typing import Any

import aiohttp
import anyio

from ifsweep.simulator import Simulator
from ifsweep.simulator.prefix import anthropic_min_tokens
from ifsweep.simulator.server import CLIENT_HEADERS
from ifsweep.simulator.text import count_tokens

SHARED = "The shared judging context repeats here. " * 300  # about 3,000 simulator tokens
LONGER = SHARED * 2  # about 6,000


def test_each_model_has_its_documented_minimum() -> None:
    assert count_tokens(SHARED) < 4096 < count_tokens(LONGER) and count_tokens(SHARED) > 2048
    for model, minimum in {
        "claude-sonnet-4-5": 1024,
        "claude-opus-4-1-20250805": 1024,
        "claude-haiku-4-5-20251001": 4096,
        "claude-opus-4-5": 4096,
        "claude-opus-4-6": 4096,
        "claude-3-5-haiku-latest": 2048,
        "claude-3-haiku-20240307": 2048,
    }.items():
        assert anthropic_min_tokens(model) == minimum, model


def _body(model: str, prefix: str, question: str, ttl: str | None = None) -> dict[str, Any]:
    mark: dict[str, Any] = {"type": "ephemeral"} | ({"ttl": ttl} if ttl else {})
    content = [{"type": "text", "text": prefix, "cache_control": mark}, {"type": "text", "text": question}]
    return {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": content}]}


def test_the_cache_keeps_to_each_models_minimum_and_each_entrys_ttl() -> None:
    now = [0.0]

    async def go() -> None:
        async with Simulator(clock=lambda: now[0]) as sim, aiohttp.ClientSession(headers=CLIENT_HEADERS) as s:

            async def use(body: dict[str, Any]) -> tuple[int, int]:
                async with s.post(sim.root_url + "/v1/messages", json=body) as r:
                    assert r.status == 200, await r.text()
                    usage = (await r.json())["usage"]
                    return usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]

            # Haiku 4.5 caches nothing of 3,000 tokens; 6,000 it does. Sonnet caches the 3,000.
            assert await use(_body("claude-haiku-4-5", SHARED, "a")) == (0, 0)
            assert await use(_body("claude-haiku-4-5", SHARED, "b")) == (0, 0)
            written, _ = await use(_body("claude-haiku-4-5", LONGER, "a"))
            assert written > 4096 and (await use(_body("claude-haiku-4-5", LONGER, "b")))[1] == written
            written, _ = await use(_body("claude-sonnet-4-5", SHARED, "a"))
            assert written > 1024
            # 5 minutes from the last use: a read at 4 minutes keeps it to 9; at 15 it is gone.
            now[0] = 240.0
            assert await use(_body("claude-sonnet-4-5", SHARED, "b")) == (0, written)
            now[0] = 530.0
            assert await use(_body("claude-sonnet-4-5", SHARED, "c")) == (0, written)
            now[0] = 900.0
            assert await use(_body("claude-sonnet-4-5", SHARED, "d")) == (written, 0)  # written again
            # An hour with ttl 1h.
            other = "Another context, kept an hour. " * 300
            written, _ = await use(_body("claude-sonnet-4-5", other, "a", ttl="1h"))
            now[0] = 900.0 + 3000.0
            assert await use(_body("claude-sonnet-4-5", other, "b", ttl="1h")) == (0, written)
            now[0] += 3601.0
            assert (await use(_body("claude-sonnet-4-5", other, "c", ttl="1h")))[1] == 0
            async with s.post(
                sim.root_url + "/v1/messages", json=_body("claude-x", other, "d", ttl="2h")
            ) as r:
                assert r.status == 400 and "ttl" in (await r.json())["error"]["message"]

    anyio.run(go)
