"""Groups of prompts sharing a prefix long enough for a provider to cache: where their common part
ends, and a key naming it. Pure functions of the prompts. Cache-aware dispatch warms one prompt of each
group before the rest (runner/engine/warmup.py), `ifsweep plan` counts the cached tokens from the same
groups, and Anthropic's Message Batches client marks each group's shared prefix with cache_control
(providers/batch/anthropic.py).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ifsweep.providers.pricing import estimate_tokens
from ifsweep.providers.send.prefix import PrefixEnd

# Providers cache prefixes from 1,024 tokens (OpenAI; Anthropic's smallest minimum); shorter shared
# parts are not worth a round trip of waiting.
MIN_PREFIX_TOKENS = 1024

Prompt = Sequence[Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class PrefixGroup:
    """Prompts (by index) that share a prefix of at least MIN_PREFIX_TOKENS; `tokens` is its estimate."""

    members: tuple[int, ...]
    end: PrefixEnd
    tokens: int
    key: str


def common_prefix(a: Prompt, b: Prompt) -> PrefixEnd:
    """Where the longest common prefix of two prompts ends (roles must match for a message to count)."""
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if i == len(a) or i == len(b) or a[i].get("role") != b[i].get("role"):
        return PrefixEnd(i, 0)
    return PrefixEnd(i, _common_chars(a[i].get("content") or "", b[i].get("content") or ""))


def _common_chars(x: str, y: str) -> int:
    """Length of the common prefix of two strings; a binary search over slice comparisons (done in C),
    since judge prompts run to tens of thousands of characters."""
    lo, hi = 0, min(len(x), len(y))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if x[:mid] == y[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def prefix_of(prompt: Prompt, end: PrefixEnd) -> list[dict[str, str]]:
    """The messages of `prompt` up to `end`, the last one cut."""
    out = [dict(m) for m in prompt[: end.message]]
    if end.chars and end.message < len(prompt):
        last = dict(prompt[end.message])
        last["content"] = (last.get("content") or "")[: end.chars]
        out.append(last)
    return out


def _order(end: PrefixEnd) -> tuple[int, int]:
    return end.message, end.chars


def _sort_key(prompt: Prompt) -> tuple[tuple[str, str], ...]:
    return tuple((m.get("role") or "", m.get("content") or "") for m in prompt)


def group_by_prefix(prompts: Sequence[Prompt], scope: str) -> list[PrefixGroup]:
    """Groups of two or more prompts sharing a prefix of at least MIN_PREFIX_TOKENS (estimated; the
    estimate leans high, so a borderline group waits one round trip rather than missing the cache).

    Sorted prompts put those with long common prefixes next to each other, and a run's common prefix is
    the shortest common prefix of neighbours in it: one pass cuts a run wherever adding the next prompt
    would bring the run's prefix under the threshold. `scope` (the endpoint) goes into each group's key.
    """
    order = sorted(range(len(prompts)), key=lambda i: _sort_key(prompts[i]))
    groups: list[PrefixGroup] = []
    run: list[int] = []
    run_end: PrefixEnd | None = None

    def close() -> None:
        if len(run) >= 2 and run_end is not None:
            shared = prefix_of(prompts[run[0]], run_end)
            digest = hashlib.sha256(scope.encode() + b"\x00" + _sort_key_bytes(shared)).hexdigest()[:32]
            tokens = estimate_tokens(shared)
            groups.append(PrefixGroup(tuple(sorted(run)), run_end, tokens, digest))

    for i in order:
        if run:
            end = common_prefix(prompts[run[-1]], prompts[i])
            new_end = end if run_end is None or _order(end) < _order(run_end) else run_end
            if estimate_tokens(prefix_of(prompts[i], new_end)) >= MIN_PREFIX_TOKENS:
                run.append(i)
                run_end = new_end
                continue
            close()
        run, run_end = [i], None
    close()
    return groups


def nested_ends(prompts: Sequence[Prompt]) -> list[list[PrefixEnd]]:
    """For each prompt, where its group's shared prefix ends (group_by_prefix) and, inside the group,
    where the longer prefix of its closest kin ends: a group may join prompts of one task judging two
    answers, whose common part stops where the answers start, while each answer's prompts share the
    answer too. Kin are the runs between the group's weakest links (neighbours in sorted order whose
    common prefix is the group's). Every member of a group, and of a run, is marked at the same places,
    so one that has cached a prefix serves the others."""
    ends: list[list[PrefixEnd]] = [[] for _ in prompts]
    for group in group_by_prefix(prompts, ""):
        members = sorted(group.members, key=lambda i: _sort_key(prompts[i]))
        for i in members:
            ends[i].append(group.end)
        run, run_end = [members[0]], None
        for a, b in itertools.pairwise(members):
            link = common_prefix(prompts[a], prompts[b])
            if _order(link) <= _order(group.end):
                _mark_run(ends, run, run_end, group.end)
                run, run_end = [b], None
                continue
            run.append(b)
            run_end = link if run_end is None or _order(link) < _order(run_end) else run_end
        _mark_run(ends, run, run_end, group.end)
    return ends


def _mark_run(ends: list[list[PrefixEnd]], run: list[int], end: PrefixEnd | None, outer: PrefixEnd) -> None:
    if len(run) >= 2 and end is not None and _order(end) > _order(outer):
        for i in run:
            ends[i].append(end)


def _sort_key_bytes(messages: Sequence[Mapping[str, str]]) -> bytes:
    return b"".join(
        (m.get("role") or "").encode() + b"\x1f" + (m.get("content") or "").encode() + b"\x1e"
        for m in messages
    )


__all__ = [
    "MIN_PREFIX_TOKENS",
    "PrefixGroup",
    "Prompt",
    "common_prefix",
    "group_by_prefix",
    "nested_ends",
    "prefix_of",
]
