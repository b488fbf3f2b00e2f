"""Pieces every benchmark's simulated judge uses to read a request (see `Benchmark.simulated_judge_reply`)."""

from __future__ import annotations

from collections.abc import Sequence

from ifsweep.benchmarks.records import Message

__all__ = ["between", "user_texts"]


def user_texts(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


def between(text: str, start: str, end: str) -> str | None:
    """The text after the first `start` and before the last `end` that follows it."""
    a = text.find(start)
    if a < 0:
        return None
    a += len(start)
    b = text.rfind(end)
    return text[a:b] if b >= a else None
