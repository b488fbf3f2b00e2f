"""The LiteLLM path: providers that do not speak OpenAI chat completions (anthropic, gemini, bedrock, ...)
or specs with force_litellm. Translates litellm's response and exceptions into the fast path's shapes.

num_retries=0 makes exactly one attempt (unset makes 3; num_retries=k makes 2k+1, docs/design/providers.md):
our own retry loop in providers/pool.py decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ifsweep.providers.pricing import import_litellm
from ifsweep.providers.send.fast import Reply
from ifsweep.providers.send.prefix import CacheHint, cache_params, with_breakpoint
from ifsweep.providers.send.retry import MalformedResponse


class LiteLLMSender:
    def __init__(
        self, model: str, api_base: str | None, params: Mapping[str, Any], provider: str = ""
    ) -> None:
        self._model = model
        self._provider = provider
        self._api_base = api_base
        self._params = dict(params)
        self._litellm = import_litellm()
        # litellm builds its HTTP client on first use per event loop and caches one; calls that race
        # into that first use each build their own and leak it ("Unclosed client session"). So the
        # first call goes alone.
        self._first: asyncio.Lock | None = asyncio.Lock()

    async def send(
        self,
        messages: Sequence[Mapping[str, str]],
        api_key: str | None,
        timeout_s: float,
        cache: CacheHint | None = None,
    ) -> Reply:
        first = self._first
        if first is None:
            return await self._send(messages, api_key, timeout_s, cache)
        async with first:
            if self._first is None:
                return await self._send(messages, api_key, timeout_s, cache)
            try:
                return await self._send(messages, api_key, timeout_s, cache)
            finally:
                self._first = None

    async def _send(
        self,
        messages: Sequence[Mapping[str, str]],
        api_key: str | None,
        timeout_s: float,
        cache: CacheHint | None,
    ) -> Reply:
        try:
            resp = await self._litellm.acompletion(
                model=self._model,
                messages=with_breakpoint(self._provider, messages, cache),
                api_base=self._api_base,
                api_key=api_key,
                num_retries=0,
                timeout=timeout_s,
                **self._params,
                **cache_params(self._provider, cache),
            )
        except Exception as exc:
            # A provider's safety refusal is an answer (status refused), not a fault to retry.
            if any(cls.__name__ == "ContentPolicyViolationError" for cls in type(exc).__mro__):
                return Reply(None, "content_filter", True, None, None, _headers(exc))
            raise
        return _to_reply(resp)


def _headers(obj: Any) -> Mapping[str, str]:
    headers = getattr(obj, "litellm_response_headers", None)
    if headers is None:
        hidden = getattr(obj, "_hidden_params", None) or {}
        headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    return headers if isinstance(headers, Mapping) else {}


def _to_reply(resp: Any) -> Reply:
    choices = getattr(resp, "choices", None)
    if not choices:
        raise MalformedResponse("litellm returned no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise MalformedResponse("litellm returned a choice without a message")
    content = getattr(message, "content", None)
    refusal = getattr(message, "refusal", None)
    extra = getattr(message, "provider_specific_fields", None)
    if not refusal and isinstance(extra, dict):
        refusal = extra.get("refusal")
    usage = getattr(resp, "usage", None)
    inp = getattr(usage, "prompt_tokens", None) if usage is not None else None
    out = getattr(usage, "completion_tokens", None) if usage is not None else None
    finish = getattr(choice, "finish_reason", None)
    cached, written = _cache_counts(usage)
    return Reply(
        text=content if isinstance(content, str) else None,
        finish_reason=finish if isinstance(finish, str) else None,
        refused=bool(refusal),
        input_tokens=inp if isinstance(inp, int) else None,
        output_tokens=out if isinstance(out, int) else None,
        headers=_headers(resp),
        cached_tokens=cached,
        cache_write_tokens=written,
    )


def _cache_counts(usage: Any) -> tuple[int, int]:
    """(cache reads, cache writes) as litellm's Usage surfaces them: reads in
    prompt_tokens_details.cached_tokens (every provider) or cache_read_input_tokens (Anthropic), writes
    in cache_creation_input_tokens (Anthropic). litellm counts both within prompt_tokens."""
    if usage is None:
        return 0, 0
    details = getattr(usage, "prompt_tokens_details", None)
    read = getattr(details, "cached_tokens", None) if details is not None else None
    if not isinstance(read, int):
        read = getattr(usage, "cache_read_input_tokens", None)
    written = getattr(usage, "cache_creation_input_tokens", None)
    return (
        read if isinstance(read, int) and read > 0 else 0,
        written if isinstance(written, int) and written > 0 else 0,
    )
