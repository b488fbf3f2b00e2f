"""Which client speaks a provider's Batch API: Anthropic's own Message Batches, the OpenAI protocol over
aiohttp for OpenAI-compatible servers, LiteLLM's batch functions otherwise. One choice for the sweep
(providers/pool.py) and `ifsweep batches` (runner/engine/batches.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ifsweep.providers.batch.anthropic import AnthropicBatchClient, api_root
from ifsweep.providers.batch.clients import BatchClient, LiteLLMBatchClient, OpenAIBatchClient
from ifsweep.providers.send.fast import DUMMY_KEY

if TYPE_CHECKING:
    import aiohttp

# What sends a provider's batches, by LiteLLM provider name, where it is not LiteLLM.
NATIVE_BATCHES = frozenset({"anthropic"})
# Providers whose Batch API is tested end to end (against the simulator's OpenAI Batch API and Anthropic
# Message Batches). `batch = true` on any other is refused when the config loads: Gemini, Vertex AI and
# Bedrock batch through LiteLLM cannot be tested offline, and would fail mid-run instead.
TESTED_BATCH_PROVIDERS = ("openai", "hosted_vllm", "custom_openai", "anthropic")


def batch_client(
    provider: str,
    api_base: str | None,
    api_key: str | None,
    session: Callable[[str], aiohttp.ClientSession],
    *,
    fast: bool,
) -> BatchClient:
    """The client for one endpoint's batches. `session(base)` gives the aiohttp session for a base URL;
    `fast`: the endpoint speaks OpenAI's protocol at `api_base`."""
    if provider == "anthropic":
        # Without api_key_env, what an interactive call sends: a stand-in to a server of one's own, else
        # the variable LiteLLM reads.
        key = api_key or (DUMMY_KEY if api_base else os.environ.get("ANTHROPIC_API_KEY"))
        if not key:
            # Worded so that retry.classify calls it an auth error, as LiteLLM's missing key is.
            raise ValueError("API key missing for Anthropic's Message Batches: set api_key_env")
        root = api_root(api_base)
        return AnthropicBatchClient(session(root), root, key)
    if fast and api_base:
        return OpenAIBatchClient(session(api_base), api_base, api_key or DUMMY_KEY)
    return LiteLLMBatchClient(provider, api_base, api_key)


__all__ = ["NATIVE_BATCHES", "TESTED_BATCH_PROVIDERS", "batch_client"]
