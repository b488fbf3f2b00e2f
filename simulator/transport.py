"""How an answer leaves the simulator, whatever protocol it speaks: whole, or broken on the wire (a TCP
reset, a body cut short, a body trickled out, a wrong content type). The OpenAI and Anthropic endpoints
share these, so a fault looks the same to a client on either."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct

from aiohttp import web

from ifsweep.simulator.stats import SimStats

JSON = "application/json"
_TRICKLE_CHUNKS = 25


async def deliver(
    request: web.Request,
    data: bytes,
    headers: dict[str, str],
    stats: SimStats,
    fault: str | None,
    canonical: bytes,
) -> web.StreamResponse:
    """A 200 with `data`, broken the way `fault` says (cut_body, trickle, wrong_content_type) or whole."""
    if fault == "cut_body":
        return await _cut_body(request, data, headers, stats)
    if fault == "trickle":
        return await _trickle(request, data, headers, stats, canonical)
    content_type = "text/html" if fault == "wrong_content_type" else JSON
    stats.status_counts[200] += 1
    return web.Response(body=data, content_type=content_type, headers=headers)


def reset(request: web.Request) -> web.StreamResponse:
    """Drop the connection with a TCP reset; aiohttp then finds the transport closed and writes nothing."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response(status=200)


async def _started(
    request: web.Request, data: bytes, headers: dict[str, str], stats: SimStats
) -> web.StreamResponse:
    """A 200 whose headers (Content-Length: all of `data`) are sent, its body not yet."""
    response = web.StreamResponse(status=200, headers=headers)
    response.content_type = JSON
    response.content_length = len(data)
    stats.status_counts[200] += 1
    await response.prepare(request)
    return response


async def _cut_body(
    request: web.Request, data: bytes, headers: dict[str, str], stats: SimStats
) -> web.StreamResponse:
    """Promise the whole body in Content-Length, send half of it, then close the connection."""
    response = await _started(request, data, headers, stats)
    await response.write(data[: len(data) // 2])
    transport = request.transport
    if transport is not None:
        transport.close()  # a FIN after the flushed half: the client sees a short body
    return response


async def _trickle(
    request: web.Request, data: bytes, headers: dict[str, str], stats: SimStats, canonical: bytes
) -> web.StreamResponse:
    """The full body, a few bytes at a time, over 2-5 s (fixed per request)."""
    response = await _started(request, data, headers, stats)
    total_s = random.Random(b"trickle" + canonical).uniform(2.0, 5.0)
    step = max(1, -(-len(data) // _TRICKLE_CHUNKS))
    starts = range(0, len(data), step)
    pause = total_s / max(1, len(starts) - 1)
    for start in starts:
        if start:  # no pause after the last piece: the connection would idle before its next request
            await asyncio.sleep(pause)
        await response.write(data[start : start + step])
    await response.write_eof()
    return response


__all__ = ["JSON", "deliver", "reset"]
