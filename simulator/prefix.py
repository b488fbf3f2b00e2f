"""The simulator's prompt-prefix cache, shaped like the real services' (OpenAI, vLLM, llama.cpp).

A prompt is cut into blocks of BLOCK_TOKENS simulator tokens (four characters each, as text.py counts);
each block is named by a hash chained over every block before it, so a name stands for the whole prefix
up to it. A request reads the longest run of leading blocks already named, and counts as cached only
from MIN_CACHED_TOKENS up (OpenAI caches prefixes of 1,024 tokens and more, in steps of 128). Blocks are
named when a request carrying them has *completed*: requests started together all miss, which is what
makes dispatch order matter. The least recently used names go first once `capacity` is reached.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ifsweep.simulator.text import message_text

BLOCK_TOKENS = 128
MIN_CACHED_TOKENS = 1024
_CHARS_PER_TOKEN = 4  # text.count_tokens
_BLOCK_CHARS = BLOCK_TOKENS * _CHARS_PER_TOKEN


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The prompt as one string, roles included, so equal text under another role is another prefix."""
    return "".join(f"\x1e{m.get('role', '')}\x1f{message_text(m)}" for m in messages)


def block_names(text: str, model: str) -> list[bytes]:
    """The chained name of every full block of `text` (per model: caches are per model)."""
    names = []
    previous = hashlib.blake2b(model.encode(), digest_size=16).digest()
    # Blocks over characters, not bytes, so that a block is BLOCK_TOKENS simulator tokens of any script.
    for start in range(0, len(text) - _BLOCK_CHARS + 1, _BLOCK_CHARS):
        block = text[start : start + _BLOCK_CHARS].encode("utf-8", "surrogatepass")
        previous = hashlib.blake2b(previous + block, digest_size=16).digest()
        names.append(previous)
    return names


class PrefixCache:
    def __init__(self, capacity: int = 1_000_000) -> None:
        self._names: OrderedDict[bytes, None] = OrderedDict()
        self._capacity = capacity

    def lookup(self, names: Sequence[bytes], prompt_tokens: int) -> int:
        """Prompt tokens served from cache for a prompt whose blocks are `names`."""
        hit = 0
        for name in names:
            if name not in self._names:
                break
            self._names.move_to_end(name)
            hit += 1
        cached = min(hit * BLOCK_TOKENS, prompt_tokens)
        return cached if cached >= MIN_CACHED_TOKENS else 0

    def store(self, names: Sequence[bytes]) -> None:
        """Name every block of a completed request's prompt."""
        for name in names:
            self._names[name] = None
            self._names.move_to_end(name)
        while len(self._names) > self._capacity:
            self._names.popitem(last=False)

    def clear(self) -> None:
        self._names.clear()
