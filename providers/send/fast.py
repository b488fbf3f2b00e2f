"""The fast path: OpenAI chat completions over one shared aiohttp session, orjson bodies.

About 30x less client CPU per call than litellm.acompletion (docs/design/providers.md); used for every
provider that speaks the OpenAI chat-completions protocol. Only translates: limits, retries and budget
wrap it once in providers/pool.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ifsweep.providers.records import CallStatus
from ifsweep.providers.send.conversation import detached
from ifsweep.providers.send.retry import HttpStatusError, MalformedResponse, error_code

if TYPE_CHECKING:
    import aiohttp

# LiteLLM provider names whose endpoints speak OpenAI chat completions.
FAST_PROVIDERS = frozenset(
    {
        "openai",
        "hosted_vllm",
        "custom_openai",
        "together_ai",
        "groq",
        "deepseek",
        "fireworks_ai",
        "openrouter",
    }
)
# litellm.get_llm_provider returns no base for these; the defaults its own clients would use.
DEFAULT_BASES = {"openai": "https://api.openai.com/v1", "openrouter": "https://openrouter.ai/api/v1"}
# Local servers (vLLM, the simulator) ignore the key but some reject a missing Authorization header.
DUMMY_KEY = "no-key-needed"


@dataclass(frozen=True, slots=True)
class Reply:
    """One successful attempt, whichever path sent it."""

    text: str | None
    finish_reason: str | None
    refused: bool
    input_tokens: int | None
    output_tokens: int | None
    headers: Mapping[str, str]
    cached_tokens: int = 0  # of input_tokens: read from the provider's prefix cache
    cache_write_tokens: int = 0  # of input_tokens: written to it (billed apart by Anthropic)


def reply_status(reply: Reply) -> CallStatus:
    """What a reply is worth: refused, cut by the length limit, empty, or ok (both send paths and
    batch results)."""
    if reply.refused or reply.finish_reason == "content_filter":
        return "refused"
    if reply.finish_reason == "length":
        return "truncated"
    if not reply.text or not reply.text.strip():
        return "empty"
    return "ok"


def parse_chat_body(raw: bytes, headers: Mapping[str, str]) -> Reply:
    """A 2xx chat-completions body -> Reply; anything else is MalformedResponse (retried)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedResponse(f"body is not JSON ({len(raw)} bytes): {exc}") from None
    if not isinstance(body, dict):
        raise MalformedResponse("body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = body.get("error")
        detail = f": {error}" if error else ""
        raise MalformedResponse(f"body has no choices{detail}")
    choice: dict[str, Any] = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0] has no message object")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedResponse(f"message content is {type(content).__name__}, not a string")
    finish = choice.get("finish_reason")
    usage = body.get("usage")
    inp = out = None
    cached = written = 0
    if isinstance(usage, dict):
        inp = _count(usage.get("prompt_tokens"))
        out = _count(usage.get("completion_tokens"))
        cached = cached_prompt_tokens(usage, body.get("timings"))
        # Anthropic's cache writes, in the name LiteLLM gives them (Message Batches results are read
        # in this shape: providers/batch/anthropic.py).
        written = _count(usage.get("cache_creation_input_tokens")) or 0
    return Reply(
        text=content,
        finish_reason=finish if isinstance(finish, str) else None,
        refused=bool(message.get("refusal")),
        input_tokens=inp,
        output_tokens=out,
        headers=headers,
        cached_tokens=min(cached, inp) if inp is not None else 0,
        cache_write_tokens=min(written, inp - min(cached, inp)) if inp is not None else 0,
    )


def cached_prompt_tokens(usage: Mapping[str, Any], timings: object = None) -> int:
    """Prompt tokens the server read from its prefix cache, however it says so: OpenAI (and vLLM, the
    simulator) in prompt_tokens_details.cached_tokens, DeepSeek in prompt_cache_hit_tokens, llama.cpp
    in timings.cache_n. 0 when it says nothing: an unreported hit is billed as a miss."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        found = _count(details.get("cached_tokens"))
        if found is not None:
            return found
    found = _count(usage.get("prompt_cache_hit_tokens"))
    if found is not None:
        return found
    if isinstance(timings, dict):
        found = _count(timings.get("cache_n"))
        if found is not None:
            return found
    return 0


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def clip(text: str, limit: int = 300) -> str:
    """`text` of at most `limit` characters: cut at the last space before the limit (a word is never
    cut in two, unless one word alone is longer), and "…" says that more was said."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,.;:") + "…"


def error_detail(raw: bytes) -> str:
    """The provider's own words from an error body, short."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return clip(raw[:400].decode("utf-8", "replace"), 200)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            # llama.cpp puts the sizes of a context overflow beside its message: keep them.
            sizes = "".join(
                f", {k}={error[k]}" for k in ("n_prompt_tokens", "n_ctx") if isinstance(error.get(k), int)
            )
            return clip(str(error["message"])) + (f" ({sizes[2:]})" if sizes else "")
        return clip(str(error))
    return clip(str(body))


class FastSender:
    """Sends one attempt for one endpoint: precomputed URL and params, a body per call. `session` gives
    the shared aiohttp session, made (and aiohttp imported) at the first send: a resumed run with
    nothing left to send never pays for either."""

    def __init__(
        self,
        session: Callable[[], aiohttp.ClientSession],
        api_base: str,
        model: str,
        params: Mapping[str, Any],
    ):
        self._session = session
        self._url = api_base.rstrip("/") + "/chat/completions"
        self._model = model
        self._params = dict(params)

    async def send(
        self, messages: Sequence[Mapping[str, str]], api_key: str, extra: Mapping[str, Any] | None = None
    ) -> Reply:
        sent = detached(messages)  # encoded once here: the prompts held after keep no UTF-8 copy
        body = orjson.dumps({"model": self._model, "messages": sent, **self._params, **(extra or {})})
        del sent
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        async with self._session().post(self._url, data=body, headers=headers) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise HttpStatusError(resp.status, resp.headers, error_detail(raw), error_code(raw))
            return parse_chat_body(raw, resp.headers)
