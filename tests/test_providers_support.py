"""Shared helpers for the providers tests (no tests here): a scripted OpenAI-shaped server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web


def ok_body(text: str = "hello", finish: str = "stop", usage: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    return body


@dataclass
class Step:
    status: int = 200
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class ScriptedServer:
    """Answers requests with `steps` in order (the last one repeats); records what it was sent."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.requests = 0
        self.auth_headers: list[str] = []
        self.times: list[float] = []
        self.received = asyncio.Event()  # set at the first request
        self.bodies: list[Any] = []
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def _chat(self, request: web.Request) -> web.Response:
        self.times.append(time.monotonic())
        self.received.set()
        self.auth_headers.append(request.headers.get("Authorization", ""))
        self.bodies.append(await request.json())
        step = self.steps[min(self.requests, len(self.steps) - 1)]
        self.requests += 1
        body = dict(step.body) if step.body is not None else ok_body()
        if "echo_auth" in body:  # error bodies that quote the request's key, as some providers do
            body = {"error": {"message": f"Incorrect API key: {request.headers.get('Authorization')}"}}
        elif "echo_key_in_answer" in body:  # a successful answer that repeats the bare key
            key = str(request.headers.get("Authorization", "")).removeprefix("Bearer ")
            body = ok_body(f"Sure. The key you sent me is {key}, and the weather is fine.")
        return web.json_response(body, status=step.status, headers=dict(step.headers))

    async def __aenter__(self) -> ScriptedServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
