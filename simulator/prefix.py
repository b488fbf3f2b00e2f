"""The simulator's prompt-prefix cache, shaped like the real services' (OpenAI, vLLM, llama.cpp).

A prompt is cut into blocks of BLOCK_CHARS characters; each block is named by a hash chained over every
block before it, so a name stands for the whole prefix up to it. A request reads the longest run of
leading blocks already named; the simulator tokens of that prefix (text.count_tokens), in steps of
BLOCK_TOKENS, are cached, and only from MIN_CACHED_TOKENS up (OpenAI caches prefixes of 1,024 tokens
and more, in steps of 128). Blocks are
named when a request carrying them has *completed*: requests started together all miss, which is what
makes dispatch order matter. The least recently used names go first once `capacity` is reached.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ifsweep.simulator.text import count_tokens, message_text

BLOCK_TOKENS = 128
MIN_CACHED_TOKENS = 1024
BLOCK_CHARS = 128  # 32 tokens of English, 128 of Chinese


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt as one string, roles included, so equal text under another role is another prefix."""
    return "".join(f"\x1e{m.get('role', '')}\x1f{message_text(m)}" for m in messages)


@dataclass(frozen=True, slots=True)
class Blocks:
    text: str
    names: list[bytes]


def blocks_of(text: str, model: str) -> Blocks:
    """The chained name of every full block of `text` (per model: caches are per model)."""
    names = []
    previous = hashlib.blake2b(model.encode(), digest_size=16).digest()
    for start in range(0, len(text) - BLOCK_CHARS + 1, BLOCK_CHARS):
        block = text[start : start + BLOCK_CHARS].encode("utf-8", "surrogatepass")
        previous = hashlib.blake2b(previous + block, digest_size=16).digest()
        names.append(previous)
    return Blocks(text, names)


class PrefixCache:
    def __init__(self, capacity: int = 1_000_000) -> None:
        self._names: OrderedDict[bytes, None] = OrderedDict()
        self._capacity = capacity

    def lookup(self, blocks: Blocks, prompt_tokens: int) -> int:
        """Prompt tokens served from cache for a prompt cut into `blocks`."""
        hit = 0
        for name in blocks.names:
            if name not in self._names:
                break
            self._names.move_to_end(name)
            hit += 1
        if not hit:
            return 0
        tokens = min(count_tokens(blocks.text[: hit * BLOCK_CHARS]) - 1, prompt_tokens)
        cached = tokens - tokens % BLOCK_TOKENS
        return cached if cached >= MIN_CACHED_TOKENS else 0

    def store(self, blocks: Blocks) -> None:
        """Name every block of a completed request's prompt."""
        for name in blocks.names:
            self._names[name] = None
            self._names.move_to_end(name)
        while len(self._names) > self._capacity:
            self._names.popitem(last=False)

    def clear(self) -> None:
        self._names.clear()


# Anthropic caches nothing shorter than this (Claude Sonnet, Opus 4 and 4.1: 1,024 tokens); some models
# need more (anthropic_min_tokens). An entry lives 5 minutes, or an hour with `ttl: "1h"`, from its
# write or its last read (the docs, as quoted in anthropics/anthropic-sdk-python#1194).
ANTHROPIC_MIN_TOKENS = 1024
_LONGER_MINIMUMS = (
    (("claude-haiku-4-5", "claude-opus-4-5", "claude-opus-4-6"), 4096),
    (("claude-3-haiku", "claude-3-5-haiku", "claude-haiku-3"), 2048),
)
TTL_S = {"5m": 300.0, "1h": 3600.0}


def anthropic_min_tokens(model: str) -> int:
    """The shortest prefix `model` caches (a model id with or without its date suffix)."""
    for prefixes, minimum in _LONGER_MINIMUMS:
        if model.startswith(prefixes):
            return minimum
    return ANTHROPIC_MIN_TOKENS


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A block marked `cache_control`: the chained name of the prompt up to and including it, the
    prompt tokens that prefix holds, and how long an entry it writes lives."""

    name: bytes
    tokens: int
    ttl_s: float = TTL_S["5m"]


@dataclass(frozen=True, slots=True)
class CacheUse:
    """Prompt tokens read from the cache and written to it by one request (the rest is plain input)."""

    read: int
    written: int


class BreakpointCache:
    """Anthropic's prompt cache: a prefix is cached only up to a block marked `cache_control`, only from
    the model's minimum up (anthropic_min_tokens), for its ttl from the last write or read, and read
    only where a later request marks the same prefix. A request reads the longest of its marked
    prefixes still alive and writes the rest up to its last mark; names are added when the request has
    completed (like PrefixCache, requests sent together all write). `clock`: seconds, monotonic."""

    def __init__(self, capacity: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._expires: OrderedDict[bytes, float] = OrderedDict()
        self._capacity = capacity
        self._clock = clock

    def lookup(self, marks: Sequence[Breakpoint], minimum: int = ANTHROPIC_MIN_TOKENS) -> CacheUse:
        read = 0
        now = self._clock()
        for mark in reversed(marks):
            expires = self._expires.get(mark.name)
            if expires is None:
                continue
            if expires <= now:
                del self._expires[mark.name]
                continue
            self._expires[mark.name] = max(expires, now + mark.ttl_s)  # a read refreshes the entry
            self._expires.move_to_end(mark.name)
            read = mark.tokens
            break
        last = marks[-1].tokens if marks else 0
        written = last - read if last >= minimum and last > read else 0
        return CacheUse(read, written)

    def store(self, marks: Sequence[Breakpoint], minimum: int = ANTHROPIC_MIN_TOKENS) -> None:
        now = self._clock()
        for mark in marks:
            if mark.tokens >= minimum:
                self._expires[mark.name] = max(self._expires.get(mark.name, 0.0), now + mark.ttl_s)
                self._expires.move_to_end(mark.name)
        while len(self._expires) > self._capacity:
            self._expires.popitem(last=False)
