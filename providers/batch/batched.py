"""Requests from many tasks to one remote operation, sent together.

A round trip to Redis costs about 120 us of client CPU whatever it carries (perf/coordination_perf.py),
so the coordinator sends every rate booking (or reservation) a process has waiting for one endpoint in
one script: while one batch is on its way the next collects, and a lone request goes at once. Each
request still gets its own answer, so nothing is less exact than one call at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Req = TypeVar("Req")
Res = TypeVar("Res")


class Batch(Generic[Req, Res]):
    """`submit` queues a request and waits for its result; the owner's sender task calls `drain`.
    Without a sender running (`running()` false) a request is sent alone, at once.

    `send` maps requests to their results, in order. `orphan` receives a result whose caller stopped
    waiting (cancelled), so what it obtained can be given back."""

    def __init__(
        self,
        send: Callable[[list[Req]], Awaitable[list[Res]]],
        *,
        wake: Callable[[], None],
        running: Callable[[], bool],
        orphan: Callable[[Req, Res], None] | None = None,
    ) -> None:
        self._send = send
        self._wake = wake
        self._running = running
        self._orphan = orphan
        self._queue: list[tuple[Req, asyncio.Future[Res]]] = []

    @property
    def queued(self) -> bool:
        return bool(self._queue)

    async def submit(self, request: Req) -> Res:
        if not self._running():
            return (await self._send([request]))[0]
        future: asyncio.Future[Res] = asyncio.get_running_loop().create_future()
        self._queue.append((request, future))
        self._wake()
        return await future

    async def drain(self) -> None:
        """Send what is queued now as one batch and hand each caller its result."""
        batch = [(req, fut) for req, fut in self._queue if not fut.done()]
        self._queue = []
        if not batch:
            return
        try:
            results = await self._send([req for req, _ in batch])
        except Exception as e:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
            raise
        except BaseException:
            self._abandon(batch)
            raise
        for (req, fut), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)
            elif self._orphan is not None:
                self._orphan(req, result)

    def abandon(self) -> None:
        """The sender stops: whoever still waits is cancelled (the sweep is ending around them)."""
        batch, self._queue = self._queue, []
        self._abandon(batch)

    @staticmethod
    def _abandon(batch: list[tuple[Req, asyncio.Future[Res]]]) -> None:
        for _, fut in batch:
            fut.cancel()


__all__ = ["Batch"]
