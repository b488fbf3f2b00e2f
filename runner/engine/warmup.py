"""Cache-aware dispatch: warm a shared prompt prefix with one call, then fan out the calls that share it.

A provider caches a prefix only once a request carrying it has been processed, so calls started
together all pay for it in full. The judge calls of one instance repeat the same input, answer and
rubric and differ near the end; `group_by_prefix` (providers/send/prefix_groups.py) finds the groups
whose shared prefix is long enough to be cached (MIN_PREFIX_TOKENS: OpenAI's threshold), and a
`WarmGate` lets the first call of a group go alone and the rest go when it has returned. `ifsweep plan`
counts the cached tokens from the same groups (runner/commands/planning.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio

from ifsweep.providers.send.prefix import CacheHint
from ifsweep.providers.send.prefix_groups import (
    MIN_PREFIX_TOKENS,
    PrefixGroup,
    Prompt,
    common_prefix,
    group_by_prefix,
    prefix_of,
)

__all__ = [
    "MIN_PREFIX_TOKENS",
    "PrefixGroup",
    "Prompt",
    "WarmGate",
    "common_prefix",
    "group_by_prefix",
    "hints_for",
    "prefix_of",
]


def hints_for(prompts: Sequence[Prompt], scope: str) -> dict[int, CacheHint]:
    """Each grouped prompt's hint (prompts in no group get none: they go at once)."""
    return {i: CacheHint(g.key, g.end) for g in group_by_prefix(prompts, scope) for i in g.members}


class WarmGate:
    """Per group key: the first caller goes; the others wait until its call has returned (however it
    ended: a failed warm-up costs the rest only the wait). One gate per batch of related calls (one
    instance's judge calls), so it holds nothing once they are done."""

    def __init__(self) -> None:
        self._warmed: dict[str, anyio.Event] = {}

    @asynccontextmanager
    async def warm(self, key: str | None) -> AsyncIterator[None]:
        if key is None:
            yield
            return
        event = self._warmed.get(key)
        if event is not None:
            await event.wait()
            yield
            return
        event = self._warmed[key] = anyio.Event()
        try:
            yield
        finally:
            event.set()
