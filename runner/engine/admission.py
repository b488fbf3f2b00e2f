"""Judge admission: how many judge tasks may exist at once, whatever the number of pairs in flight.

Workers are bounded by the worker budget (twice the global concurrency), but one pair's judge work is
not: an EIFBench pair plans about 80 judge tasks, each with its prompt (about 4 KB of text), its key
and its request. Started all at once behind a judge that takes 64 calls at a time, a thousand such
pairs held some 80,000 waiting tasks and their prompts: 1.7 GB at 40 models (issue 35). A pair now
takes one slot per judge task before it starts them (all its tasks at once, or the whole capacity if
it has more), and gives each back as its task ends; a pair that must wait holds its instance and
answer, not its plan (the pipeline plans again once admitted). So what is alive of the judge's work
is bounded by the capacity, not by pairs x tasks. The sweep sets it to the run's concurrency and a
quarter more (runner/engine/sweep.py).

FIFO: a pair of 80 tasks is not passed over forever by pairs of one. Nothing here is used by a
sweep without judges.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import anyio


@dataclass(slots=True)
class _Waiter:
    want: int
    granted: anyio.Event


@dataclass(slots=True)
class Admission:
    """A counting semaphore taken `n` slots at a time (n clamped to the capacity), first come first
    served: a request that does not fit waits, and so does every later one."""

    capacity: int
    free: int = -1  # set from capacity
    _waiting: deque[_Waiter] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"an admission needs at least one slot, got {self.capacity}")
        if self.free < 0:
            self.free = self.capacity

    def clamp(self, n: int) -> int:
        """What asking for `n` slots takes: at most the whole capacity, so any request can be met."""
        return min(n, self.capacity)

    def try_take(self, n: int) -> bool:
        """Take `clamp(n)` slots now if they are free and nobody waits before; else take nothing."""
        n = self.clamp(n)
        if self._waiting or self.free < n:
            return False
        self.free -= n
        return True

    async def take(self, n: int) -> None:
        """Take `clamp(n)` slots, waiting in line for them. Cancelled while waiting, it takes none."""
        if self.try_take(n):
            return
        waiter = _Waiter(self.clamp(n), anyio.Event())
        self._waiting.append(waiter)
        try:
            await waiter.granted.wait()
        except BaseException:
            if waiter.granted.is_set():  # granted, then cancelled before it resumed: hand them back
                self.give(waiter.want)
            else:
                self._waiting.remove(waiter)
                self._grant()  # it may have been first in line, holding back smaller requests
            raise

    def give(self, n: int) -> None:
        """Return `n` slots taken by `take` or `try_take` (each slot once)."""
        self.free += n
        if self.free > self.capacity:
            raise RuntimeError(f"admission over-returned: {self.free} free of {self.capacity}")
        self._grant()

    @property
    def in_use(self) -> int:
        return self.capacity - self.free

    def _grant(self) -> None:
        while self._waiting and self._waiting[0].want <= self.free:
            waiter = self._waiting.popleft()
            self.free -= waiter.want
            waiter.granted.set()
