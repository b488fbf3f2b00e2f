"""Split a run's work between processes by key, so several machines (or cores) can share one run dir.

Each partition process writes its own shards (writer id `p{i}of{n}`) into the same run directory, and
every reader merges all writers, so partitions never coordinate: the key alone decides the owner.
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

__all__ = ["Partition", "in_partition", "parse_partition"]

_SPEC_RE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


class Partition(NamedTuple):
    """Partition `i` (0-based) of `n`; a plain (i, n) tuple to callers that unpack it."""

    i: int
    n: int

    @property
    def writer_id(self) -> str:
        return f"p{self.i}of{self.n}"

    def owns(self, key: str) -> bool:
        return in_partition(key, self.i, self.n)


def in_partition(key: str, index: int, count: int) -> bool:
    """True for exactly one index in 0..count-1 per key. Rehashing makes the split even whatever the
    key looks like (content keys are already uniform, but nothing here depends on that)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"partition {index}/{count}: need count >= 1 and 0 <= index < count")
    if count == 1:
        return True
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return h % count == index


def parse_partition(spec: str) -> Partition:
    """Parse "i/n" (0-based index i of n partitions), e.g. "0/4" .. "3/4"."""
    m = _SPEC_RE.fullmatch(spec)
    if m is None:
        raise ValueError(f"partition {spec!r}: expected 'i/n' with whole numbers, e.g. '0/4'")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1:
        raise ValueError(f"partition {spec!r}: the number of partitions must be at least 1")
    if index >= count:
        raise ValueError(f"partition {spec!r}: index is 0-based, so it must be in 0..{count - 1}")
    return Partition(index, count)
