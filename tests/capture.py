"""A recording proxy for tests: a real aiohttp server on 127.0.0.1 that forwards every request to a
server (the simulator) and keeps what went each way, so a test reads exactly what ifsweep sent (path,
headers, body) and what it was answered. Runs on a thread of its own, like SimulatorThread."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import orjson
from aiohttp import web

# Hop-by-hop headers, and the ones aiohttp computes again for the forwarded message.
_DROP = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-encoding"})


@dataclass(frozen=True, slots=True)
class Exchange:
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lowercase names
    body: bytes
    status: int
    response_headers: dict[str, str]
    response: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    def response_json(self) -> Any:
        return orjson.loads(self.response)


class CaptureProxy:
    """`with CaptureProxy(target_root) as proxy:` point clients at `proxy.root_url` (Anthropic) or
    `proxy.base_url` (OpenAI); `proxy.exchanges` lists what passed, in the order answered."""

    def __init__(self, target_root: str) -> None:
        self._target = target_root.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._port = 0
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def to(self, path_prefix: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.startswith(path_prefix)]

    def __enter__(self) -> CaptureProxy:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced to __enter__ when it happens at startup
            self._error = exc
            self._ready.set()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            app = web.Application(client_max_size=256 * 1024 * 1024)

            async def forward(request: web.Request) -> web.Response:
                return await self._forward(session, request)

            app.router.add_route("*", "/{tail:.*}", forward)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._port = int(runner.addresses[0][1])
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

    async def _forward(self, session: aiohttp.ClientSession, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        sent = {k: v for k, v in headers.items() if k not in _DROP}
        url = self._target + request.path_qs
        async with session.request(request.method, url, data=body, headers=sent) as resp:
            answer = await resp.read()
            back = {k.lower(): v for k, v in resp.headers.items()}
        self.exchanges.append(
            Exchange(request.method, request.path_qs, headers, body, resp.status, back, answer)
        )
        return web.Response(
            status=resp.status, body=answer, headers={k: v for k, v in back.items() if k not in _DROP}
        )
