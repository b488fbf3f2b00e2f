"""The simulator's rate limits: one token bucket for requests, one for tokens, as an OpenAI server keeps.

A request is admitted only when both buckets hold enough; a refused request takes nothing from either,
so a client that waits as told by Retry-After gets in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]


class TokenBucket:
    """Capacity `limit * burst_s / 60`, refilled continuously at `limit / 60` per second; starts full."""

    __slots__ = ("_clock", "_last", "_level", "capacity", "limit", "rate")

    def __init__(self, limit: int, burst_s: float, clock: Clock = time.monotonic) -> None:
        self.limit = limit
        self.rate = limit / 60.0
        # A bucket smaller than one request would never admit anything.
        self.capacity = max(1.0, limit * burst_s / 60.0)
        self._clock = clock
        self._last = clock()
        self._level = self.capacity

    def _refill(self) -> float:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._last) * self.rate)
        self._last = now
        return self._level

    def level(self) -> float:
        return self._refill()

    def wait_for(self, cost: float) -> float:
        """Seconds until `cost` fits (0 when it fits now). Costs above capacity wait for a full bucket."""
        need = min(cost, self.capacity)
        level = self._refill()
        return 0.0 if level >= need else (need - level) / self.rate

    def take(self, cost: float) -> None:
        self._refill()
        self._level -= min(cost, self.capacity)

    def reset_in(self) -> float:
        """Seconds until the bucket is full again (what x-ratelimit-reset-* reports)."""
        return (self.capacity - self._refill()) / self.rate


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    retry_after_s: float  # 0 when admitted


class RateLimits:
    """The request and token buckets of one server. Either may be absent (no limit)."""

    def __init__(self, rpm: int | None, tpm: int | None, burst_s: float, clock: Clock = time.monotonic):
        self.requests = TokenBucket(rpm, burst_s, clock) if rpm else None
        self.tokens = TokenBucket(tpm, burst_s, clock) if tpm else None

    def admit(self, tokens: int) -> Admission:
        wait = 0.0
        if self.requests is not None:
            wait = max(wait, self.requests.wait_for(1))
        if self.tokens is not None:
            wait = max(wait, self.tokens.wait_for(tokens))
        if wait > 0:
            return Admission(False, wait)
        if self.requests is not None:
            self.requests.take(1)
        if self.tokens is not None:
            self.tokens.take(tokens)
        return Admission(True, 0.0)

    def headers(self) -> dict[str, str]:
        """x-ratelimit-* headers in OpenAI's shape, for the limits that are set."""
        out: dict[str, str] = {}
        for kind, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is None:
                continue
            out[f"x-ratelimit-limit-{kind}"] = str(bucket.limit)
            out[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(bucket.level())))
            out[f"x-ratelimit-reset-{kind}"] = format_reset(bucket.reset_in())
        return out


def format_reset(seconds: float) -> str:
    """Durations the way OpenAI writes them: "35ms", "1.2s", "6m0s"."""
    if seconds < 1.0:
        return f"{math.ceil(seconds * 1000)}ms"
    if seconds < 60.0:
        text = f"{seconds:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    minutes, rest = divmod(seconds, 60.0)
    return f"{int(minutes)}m{int(rest)}s"


def retry_after_headers(seconds: float) -> dict[str, str]:
    """Retry-After in whole seconds rounded up (never 0), retry-after-ms in milliseconds rounded up."""
    return {
        "Retry-After": str(max(1, math.ceil(seconds))),
        "retry-after-ms": str(max(1, math.ceil(seconds * 1000))),
    }
