"""Prompt-prefix caching as the providers offer it: which endpoints cache, and the hints a call carries.

What a hint may change is how the provider routes and stores the prompt, never the prompt's text:
OpenAI takes `prompt_cache_key` (requests with one key go to the same cache shards); Anthropic caches
only up to a `cache_control` breakpoint, which LiteLLM passes through on a message content block, so
the message whose text the shared prefix ends in is split there into two text blocks (the same text).
A reply depends on the prompt alone, so no hint enters a call's key (runner/store/keys.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ifsweep.providers.records import EndpointSpec

# Providers that cache prompt prefixes on their own (OpenAI from 1,024 tokens, DeepSeek, Gemini
# implicitly) or with breakpoints (Anthropic), by LiteLLM provider name.
CACHING_PROVIDERS = frozenset({"openai", "anthropic", "deepseek", "gemini", "vertex_ai", "hosted_vllm"})
# Self-hosted OpenAI-compatible servers (vLLM, SGLang, llama.cpp) cache prefixes too.
_SELF_HOSTED = frozenset({"openai", "custom_openai", "hosted_vllm"})
# Providers that take prompt_cache_key (others may reject an unknown field).
_CACHE_KEY_PROVIDERS = frozenset({"openai"})
_BREAKPOINT_PROVIDERS = frozenset({"anthropic"})
MAX_BREAKPOINTS = 4  # blocks marked cache_control Anthropic accepts in one request
_EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True, slots=True)
class PrefixEnd:
    """Where a shared prefix ends: every message before `message` whole, then `chars` characters of
    that message's content."""

    message: int
    chars: int


@dataclass(frozen=True, slots=True)
class CacheHint:
    """What a call sharing a prefix with others tells its provider: the group's key, and where the
    shared part of its prompt ends."""

    key: str
    end: PrefixEnd


def caches_prefixes(spec: EndpointSpec, provider: str, api_base: str | None) -> bool:
    """Whether calls to this endpoint should warm a shared prefix before fanning out: the config's
    `cache_dispatch` when given, else whether the provider (or a self-hosted server) caches prefixes."""
    if spec.cache_dispatch is not None:
        return spec.cache_dispatch
    return provider in CACHING_PROVIDERS or (api_base is not None and provider in _SELF_HOSTED)


def cache_params(provider: str, hint: CacheHint | None) -> dict[str, Any]:
    """Extra request fields for `hint` on this provider (none where it takes none)."""
    if hint is None or provider not in _CACHE_KEY_PROVIDERS:
        return {}
    return {"prompt_cache_key": hint.key}


def with_breakpoint(
    provider: str, messages: Sequence[Mapping[str, Any]], hint: CacheHint | None
) -> list[dict[str, Any]]:
    """`messages` with an Anthropic cache breakpoint at the end of the shared prefix (other providers:
    unchanged). The text is not altered: the message the prefix ends in becomes two text blocks whose
    concatenation is its content, the first marked `cache_control`."""
    if hint is None or provider not in _BREAKPOINT_PROVIDERS:
        return [dict(m) for m in messages]
    return with_breakpoints(messages, [hint.end])


def with_breakpoints(
    messages: Sequence[Mapping[str, Any]], ends: Sequence[PrefixEnd]
) -> list[dict[str, Any]]:
    """`messages` with a cache_control breakpoint at each of `ends` (Anthropic takes at most
    MAX_BREAKPOINTS: the longest prefixes are kept). A message holding breakpoints becomes text blocks
    cut there, in order, whose concatenation is its content; an end at a message's start marks the
    message before it whole. Ends in a message whose content is not a string are left out."""
    out: list[dict[str, Any]] = [dict(m) for m in messages]
    cuts: dict[int, set[int]] = {}
    for end in ends:
        idx, chars = end.message, end.chars
        if chars <= 0 and idx > 0:  # the prefix ends with the message before: mark that one whole
            idx, chars = idx - 1, len(str(out[idx - 1].get("content") or ""))
        if 0 <= idx < len(out) and chars > 0 and isinstance(out[idx].get("content"), str):
            cuts.setdefault(idx, set()).add(chars)
    kept = sorted((i, c) for i, found in cuts.items() for c in found)[-MAX_BREAKPOINTS:]
    for idx in {i for i, _ in kept}:
        content: str = out[idx]["content"]
        blocks: list[dict[str, Any]] = []
        start = 0
        for cut in sorted(c for i, c in kept if i == idx):
            blocks.append(
                {"type": "text", "text": content[start:cut], "cache_control": {"type": "ephemeral"}}
            )
            start = cut
        rest = content[start:]
        if rest.strip():
            blocks.append({"type": "text", "text": rest})
        elif rest:  # Anthropic refuses a block of whitespace alone: it joins the marked one before
            blocks[-1]["text"] += rest
        out[idx]["content"] = blocks
    return out
