"""The built-in simulator: a real aiohttp server on 127.0.0.1.

Speaks POST /v1/chat/completions, GET /v1/models, GET /health and the Batch API (simulator/batch.py),
and Anthropic's Messages API and Message Batches (simulator/anthropic.py, simulator/anthropic_batch.py).
Answers are deterministic (see simulator/text.py), rate limits are token buckets
(simulator/limits.py) and faults are drawn per request from a seeded RNG (simulator/faults.py).
Design notes: docs/design/simulator.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

import orjson
from aiohttp import web

from ifsweep.simulator.anthropic import AnthropicAPI, error_payload
from ifsweep.simulator.batch import BatchAPI
from ifsweep.simulator.config import (
    CONTEXT_STYLES,
    FAULT_NAMES,
    LENIENT_RULES,
    BatchSettings,
    FaultRates,
    SimConfig,
)
from ifsweep.simulator.faults import (
    CONTENT_FAULTS,
    NEVER_RAN,
    QUOTA_MESSAGE,
    FaultPicker,
    apply_content_fault,
    error_body,
)
from ifsweep.simulator.judges import Judges
from ifsweep.simulator.ledger import UNDELIVERED_FAULTS, Via, body_digest
from ifsweep.simulator.limits import RateLimits, retry_after_headers
from ifsweep.simulator.prefix import Blocks, PrefixCache, blocks_of, prompt_text
from ifsweep.simulator.stats import Served, SimStats
from ifsweep.simulator.text import ANSWER_MAX_TOKENS, answer, count_tokens, prompt_tokens
from ifsweep.simulator.transport import JSON, deliver, reset

__all__ = ["FaultRates", "SimConfig", "SimStats", "Simulator", "SimulatorThread", "serve_main"]

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_SPURIOUS_RETRY_S = 0.25  # what a spurious 429 asks the client to wait
_SHUTDOWN_TIMEOUT_S = 2.0
_DEFAULT_CONFIG = SimConfig()


class _BadRequest(Exception):
    pass


def _limits_for(config: SimConfig) -> RateLimits:
    return RateLimits(config.rpm, config.tpm, config.burst_s)


def _requested_max_tokens(body: Mapping[str, Any]) -> int | None:
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _BadRequest(f"{name} must be a positive integer, got {value!r}")
        return value
    return None


def _parse_request(raw: bytes) -> tuple[dict[str, Any], str, list[dict[str, Any]], int | None]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _BadRequest(f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise _BadRequest("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _BadRequest("'model' must be a non-empty string")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise _BadRequest("'messages' must be a non-empty list of objects")
    if body.get("stream"):
        raise _BadRequest("the simulator does not stream; send stream=false")
    return body, model, messages, _requested_max_tokens(body)


# OpenAI's reasoning models by name (o1, o3-mini, o4-mini, gpt-5...): they refuse max_tokens and any
# sampling parameter not at its default.
_REASONING = re.compile(r"^(?:o\d+(?:-|$)|gpt-5)")
_SAMPLING_DEFAULTS = {"temperature": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}
_NEVER_TAKEN = ("max_tokens", "logprobs", "top_logprobs", "logit_bias")


def reasoning_refusal(body: Mapping[str, Any], model: str) -> dict[str, Any] | None:
    """The 400 an OpenAI reasoning model answers a parameter it does not take, or None."""
    if not _REASONING.match(model):
        return None
    for name in _NEVER_TAKEN:
        if body.get(name) not in (None, False):
            hint = ": send max_completion_tokens" if name == "max_tokens" else ""
            message = f"{name} is not supported by reasoning model {model} (simulated){hint}"
            return error_body(message, "invalid_request_error", "unsupported_parameter", name)
    for name, default in _SAMPLING_DEFAULTS.items():
        if name in body and body[name] != default:
            message = f"{name} takes only its default ({default}) on reasoning model {model} (simulated)"
            return error_body(message, "invalid_request_error", "unsupported_value", name)
    return None


# What a hand-written client of the simulator sends (tests, perf scripts): a key for either protocol
# and the Anthropic version ifsweep pins.
CLIENT_HEADERS = {
    "Authorization": "Bearer sim-key",
    "x-api-key": "sim-key",
    "anthropic-version": "2023-06-01",
}
# The Anthropic API versions the simulator knows; 2026-10-21 removed temperature, top_p and top_k.
ANTHROPIC_VERSIONS = frozenset({"2023-01-01", "2023-06-01", "2026-10-21"})
_VERSION_REMOVED = {"2026-10-21": ("temperature", "top_p", "top_k")}


def guarded(method: str, path: str) -> str | None:
    """Which provider's key rules a request falls under: "anthropic" (Messages and Message Batches),
    "openai" (chat completions, files, batches), or None (the simulator's own routes, /v1/models)."""
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        return "anthropic"
    if path == "/v1/chat/completions":
        return "openai" if method == "POST" else None
    if path.startswith(("/v1/files", "/v1/batches")):
        return "openai"
    return None


def missing_credentials(path: str, headers: Mapping[str, str]) -> tuple[int, dict[str, Any]] | None:
    """The 401 OpenAI's routes or Anthropic's answer a request without a key (chat completions, files
    and batches; Messages and Message Batches)."""
    bearer = headers.get("Authorization", "")
    if path == "/v1/messages" or path.startswith("/v1/messages/"):
        # x-api-key, or a bearer token: what the official SDK sends (anthropic 2.15.0 `_api_key_auth`).
        if headers.get("x-api-key") or (bearer.startswith("Bearer ") and bearer[7:].strip()):
            return None
        return 401, error_payload("authentication_error", "x-api-key header is required (simulated)")
    if bearer.startswith("Bearer ") and bearer[7:].strip():
        return None
    message = "No API key was sent (simulated): send Authorization: Bearer <key>"
    return 401, error_body(message, "invalid_request_error")


def version_refusal(headers: Mapping[str, str], body: Any, *, batch: bool = False) -> dict[str, Any] | None:
    """Anthropic's 400 for a Messages request (or, `batch`, a Message Batch create: each request's
    params) without a known anthropic-version, or with a parameter its version removed; None when the
    request is fine."""
    version = headers.get("anthropic-version")
    if version is None:
        return error_payload("invalid_request_error", "anthropic-version: header is required")
    if version not in ANTHROPIC_VERSIONS:
        return error_payload("invalid_request_error", f"anthropic-version: unknown version {version!r}")
    bodies: list[tuple[str, Any]] = [("", body)]
    if batch:
        requests = body.get("requests") if isinstance(body, dict) else None
        bodies = [
            (f"requests.{n}.params.", r.get("params") if isinstance(r, dict) else None)
            for n, r in enumerate(requests if isinstance(requests, list) else [])
        ]
    for where, params in bodies:
        removed = [n for n in _VERSION_REMOVED.get(version, ()) if isinstance(params, dict) and n in params]
        if removed:
            message = f"{where}{removed[0]}: not supported by anthropic-version {version} (simulated)"
            return error_payload("invalid_request_error", message)
    return None


class Simulator:
    """The simulator server, run in the current event loop: `async with Simulator(cfg) as sim: ...`."""

    def __init__(
        self,
        config: SimConfig = _DEFAULT_CONFIG,
        host: str = "127.0.0.1",
        port: int = 0,
        judges: Judges | None = None,
        clock: Callable[[], float] = time.monotonic,  # what Anthropic's cache entries expire on
    ) -> None:
        self._config = config
        self._judges = Judges.registered() if judges is None else judges
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._stats = SimStats()
        self._limits = _limits_for(config)
        self._faults = FaultPicker(config.faults, config.seed)
        self._prefixes = PrefixCache()
        self._runner: web.AppRunner | None = None
        self._closing: asyncio.Event | None = None
        self._answered = 0
        self.batches = BatchAPI(
            self._answer_one,
            lambda: self._faults.pick(),
            lambda: self._config.batch,
            self._stats,
            config.seed,
        )
        self.anthropic = AnthropicAPI(self, config.seed, clock)

    # --- lifecycle -------------------------------------------------------------------------------------
    async def __aenter__(self) -> Simulator:
        self._closing = asyncio.Event()
        # Above the providers' batch limits (OpenAI's 200 MB file, Anthropic's 256 MB batch), which the
        # batch handlers enforce themselves, with the providers' own answers.
        app = web.Application(client_max_size=300_000_000, middlewares=[self._provider_rules])
        app.on_response_prepare.append(self._request_id)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        self.batches.add_routes(app)
        self.anthropic.add_routes(app)
        app.router.add_get("/props", self._props)
        app.router.add_get("/sim/ledger", self._ledger)
        # No access log: its default format prints request headers (User-Agent, Referer), and a
        # client's Authorization must never reach a log. Handler cancellation lets a hung answer end
        # when its client gives up.
        runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=_SHUTDOWN_TIMEOUT_S
        )
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._requested_port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._closing is not None:
            self._closing.set()  # releases hung answers at once instead of after shutdown_timeout
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _provider_rules(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        """The headers the providers require on every route of theirs, the batch ones too (SimConfig.lenient
        "auth", "api_version" waive them), checked before the request is read as one."""
        lenient = self._config.lenient
        provider = guarded(request.method, request.path)
        if provider is None:
            return await handler(request)
        refused = None if "auth" in lenient else missing_credentials(request.path, request.headers)
        if refused is not None:
            return self._json(*refused)
        if provider == "anthropic" and "api_version" not in lenient:
            # The header on every route; the parameters a version removed on /v1/messages and on each
            # request of a Message Batch create.
            body = None
            if request.method == "POST" and request.path in ("/v1/messages", "/v1/messages/batches"):
                try:
                    body = orjson.loads(await request.read())
                except orjson.JSONDecodeError:
                    body = None  # the handler says so
            wrong = version_refusal(request.headers, body, batch=request.path != "/v1/messages")
            if wrong is not None:
                return self._json(400, wrong)
        return await handler(request)

    async def _request_id(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer names itself as the provider's do: request-id (Anthropic), x-request-id (OpenAI)."""
        self._answered += 1
        name = "request-id" if request.path.startswith("/v1/messages") else "x-request-id"
        response.headers[name] = f"req_sim{self._answered:012d}"

    # --- public state ----------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("Simulator is not running: use it as `async with Simulator(...)`")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server's root: the `api_base` of an Anthropic model (LiteLLM and Anthropic's own clients
        add /v1/messages to it)."""
        return f"http://{self._host}:{self.port}"

    @property
    def stats(self) -> SimStats:
        return self._stats

    @property
    def config(self) -> SimConfig:
        return self._config

    @property
    def judges(self) -> Judges:
        return self._judges

    @property
    def rate_limits(self) -> RateLimits:
        return self._limits

    def draw_fault(self) -> tuple[str | None, int]:
        """This request's fault, and the status of a server error (drawn now, not after the latency
        sleep, so concurrent requests cannot reorder the seeded draws)."""
        fault = self._faults.pick()
        return fault, self._faults.server_status() if fault == "server_error" else 0

    def note_request(self, model: str, body: Mapping[str, Any]) -> tuple[bytes, str]:
        """Count a parsed request: its canonical body (a count above 1 in stats.bodies is a resend) and
        the ledger's name for it, which its bill reuses."""
        self._stats.by_model[model] += 1
        canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        self._stats.bodies[hashlib.sha256(canonical).hexdigest()] += 1
        digest = body_digest(body)
        self._stats.ledger.receive(digest, model)
        return canonical, digest

    async def wait_latency(self, model: str, canonical: bytes) -> None:
        self._stats.enter_model(model)
        try:
            await self._sleep_latency(self._config, canonical)
        finally:
            self._stats.leave_model(model)

    def set_config(self, config: SimConfig) -> None:
        """Swap settings while serving. Limits restart full only when they change; the fault RNG restarts
        only when the seed changes, so a rate change keeps the seeded sequence going."""
        old = self._config
        self._config = config
        if (old.rpm, old.tpm, old.burst_s) != (config.rpm, config.tpm, config.burst_s):
            self._limits = _limits_for(config)
        if old.seed != config.seed:
            self._faults = FaultPicker(config.faults, config.seed)
        else:
            self._faults.set_rates(config.faults)

    # --- handlers --------------------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(body=b'{"status":"ok"}', content_type=JSON)

    async def _ledger(self, request: web.Request) -> web.Response:
        # What it received and billed (simulator/ledger.py): the chaos harness's independent account.
        return web.Response(body=orjson.dumps(self._stats.ledger.snapshot()), content_type=JSON)

    async def _models(self, request: web.Request) -> web.Response:
        names = sorted(self._stats.by_model) or ["sim-model"]
        window = self._config.context_window
        vllm = window is not None and self._config.context_style == "openai"
        extra = {"max_model_len": window} if vllm else {}  # as vLLM reports its window
        data = [
            {"id": n, "object": "model", "created": 0, "owned_by": "ifsweep-simulator", **extra}
            for n in names
        ]
        return web.Response(body=orjson.dumps({"object": "list", "data": data}), content_type=JSON)

    async def _props(self, request: web.Request) -> web.Response:
        # llama.cpp's GET /props: the context each slot has (one slot here). Only a llama.cpp-style
        # server has it; the others answer 404, as vLLM does.
        if self._config.context_style != "llamacpp":
            return self._json(404, error_body("Not Found", "not_found_error"))
        settings = {"n_ctx": self._config.context_window or 0}
        body = {"default_generation_settings": settings, "total_slots": 1}
        return web.Response(body=orjson.dumps(body), content_type=JSON)

    def _over_context(self, n_prompt: int, max_tokens: int | None) -> web.Response | None:
        """The 400 a server with this context window answers a prompt too long for it, or None."""
        config = self._config
        window = config.context_window
        if window is None:
            return None
        if config.context_style == "llamacpp":
            if n_prompt <= window:
                return None
            self._stats.faults["context_length"] += 1
            error = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": n_prompt,
                "n_ctx": window,
            }
            return self._json(400, {"error": error})
        wanted = n_prompt + (max_tokens or 0)
        if wanted <= window:
            return None
        self._stats.faults["context_length"] += 1
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested {wanted} "
            f"tokens ({n_prompt} in the messages, {max_tokens or 0} in the completion). Please reduce the "
            "length of the messages or completion."
        )
        return self._json(400, error_body(message, "invalid_request_error", "context_length_exceeded"))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        with self._stats.serving():
            return await self._chat_inner(request)

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> web.Response:
        self._stats.status_counts[status] += 1
        return web.Response(status=status, body=orjson.dumps(payload), content_type=JSON, headers=headers)

    def _limit_headers(self) -> dict[str, str]:
        return self._limits.headers() if self._config.send_ratelimit_headers else {}

    async def _chat_inner(self, request: web.Request) -> web.StreamResponse:
        try:
            body, model, messages, max_tokens = _parse_request(await request.read())
        except _BadRequest as exc:
            return self._json(400, error_body(str(exc), "invalid_request_error"))
        unsupported = self._unsupported(body, model)
        if unsupported is not None:
            return self._json(400, unsupported)
        stats = self._stats
        canonical, digest = self.note_request(model, body)
        config = self._config
        fault, error_status = self.draw_fault()
        n_prompt = prompt_tokens(messages)
        refused = self._refused(n_prompt, max_tokens)
        if refused is not None:
            return refused
        if fault is not None:
            stats.faults[fault] += 1
        arrived = time.monotonic()
        blocks = blocks_of(prompt_text(messages), model) if config.prefix_cache else Blocks("", [])
        # Looked up on arrival, filled on completion: requests sent together all miss.
        n_cached = self._prefixes.lookup(blocks, n_prompt)
        # Built before the latency and billed now, as a provider bills a call its client has left.
        payload = self._completion(body, model, messages, max_tokens, n_prompt, canonical, fault)
        if fault not in NEVER_RAN:
            self._bill(digest, model, "chat", (n_prompt, n_cached), payload, fault)
        if fault == "missing_usage":
            del payload["usage"]
        await self.wait_latency(model, canonical)
        early = await self._fault_without_completion(request, fault, error_status, config)
        if early is not None:
            return early

        self._prefixes.store(blocks)
        cache_key = body.get("prompt_cache_key")
        key = cache_key if isinstance(cache_key, str) else None
        stats.served(Served(model, arrived, time.monotonic(), n_prompt, n_cached, key))
        if "usage" in payload:
            payload["usage"]["prompt_tokens_details"] = {"cached_tokens": n_cached}
        return await deliver(request, orjson.dumps(payload), self._limit_headers(), stats, fault, canonical)

    def _unsupported(self, body: Mapping[str, Any], model: str) -> dict[str, Any] | None:
        if "reasoning_params" in self._config.lenient:
            return None
        return reasoning_refusal(body, model)

    def _refused(self, n_prompt: int, max_tokens: int | None) -> web.Response | None:
        """The 400 of a prompt too long for the context window or the 429 of the rate limits, or None."""
        too_long = self._over_context(n_prompt, max_tokens)
        if too_long is not None:
            return too_long
        # Like OpenAI, the token bucket is charged what the request may use: prompt + max_tokens.
        admission = self._limits.admit(n_prompt + (max_tokens or ANSWER_MAX_TOKENS))
        if admission.admitted:
            return None
        self._stats.faults["limit"] += 1
        headers = self._limit_headers()
        if self._config.send_retry_after:
            headers.update(retry_after_headers(admission.retry_after_s))
        return self._json(
            429, error_body("Rate limit reached (simulated).", "requests", "rate_limit_exceeded"), headers
        )

    async def _fault_without_completion(
        self, request: web.Request, fault: str | None, error_status: int, config: SimConfig
    ) -> web.StreamResponse | None:
        """The answer of a fault that replaces the completion entirely, or None for the others."""
        if fault == "server_error":
            error = error_body("The server had an error (simulated).", "server_error")
            return self._json(error_status, error, self._limit_headers())
        if fault == "rate_limit":
            headers = self._limit_headers()
            if config.send_retry_after:
                headers.update(retry_after_headers(_SPURIOUS_RETRY_S))
            error = error_body("Rate limit reached (simulated, spurious).", "requests", "rate_limit_exceeded")
            return self._json(429, error, headers)
        if fault == "rate_limit_no_header":
            return self._json(
                429, error_body("Too many requests (simulated).", "requests", "rate_limit_exceeded")
            )
        if fault == "quota":
            return self._json(429, error_body(QUOTA_MESSAGE, "insufficient_quota", "insufficient_quota"))
        if fault == "reset":
            return reset(request)
        if fault == "context_length":
            window = config.context_window or 4096
            message = (
                f"This model's maximum context length is {window} tokens. Please reduce the length of the "
                "messages or completion. (simulated)"
            )
            return self._json(400, error_body(message, "invalid_request_error", "context_length_exceeded"))
        if fault == "hang":
            return await self.hang(request)
        if fault == "malformed":
            self._stats.status_counts[200] += 1
            return web.Response(
                body=b"upstream returned an incomplete answer\n",
                content_type=JSON,
                headers=self._limit_headers(),
            )
        return None

    async def _sleep_latency(self, config: SimConfig, canonical: bytes) -> None:
        if config.latency_ms <= 0 and config.jitter_ms <= 0:
            return
        jitter = 0.0
        if config.jitter_ms > 0:
            # Seeded by the request so a replayed request waits the same time.
            jitter = random.Random(canonical).uniform(-config.jitter_ms, config.jitter_ms)
        delay = max(0.0, config.latency_ms + jitter) / 1000.0
        if delay > 0:
            await asyncio.sleep(delay)

    def _completion(
        self,
        body: Mapping[str, Any],
        model: str,
        messages: list[dict[str, Any]],
        max_tokens: int | None,
        n_prompt: int,
        canonical: bytes,
        fault: str | None,
    ) -> dict[str, Any]:
        reply = answer(model, messages, max_tokens, self._config.seed, self._judges, self._config.judge_echo)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None}
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": reply.finish_reason,
            "logprobs": None,
        }
        apply_content_fault(fault, message, choice)
        content = message["content"]
        n_completion = count_tokens(content) if content else 0
        payload: dict[str, Any] = {
            "id": "chatcmpl-sim-" + hashlib.blake2b(canonical, digest_size=12).hexdigest(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "ifsweep-sim",
            "choices": [choice],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_completion,
                "total_tokens": n_prompt + n_completion,
            },
        }
        return payload

    def _bill(
        self, digest: str, model: str, via: Via, prompt: tuple[int, int], payload: Any, fault: str | None
    ) -> None:
        """Charge a request its `prompt` (tokens, cached tokens) and the completion in `payload`."""
        content = payload["choices"][0]["message"]["content"]
        n_completion = count_tokens(content) if content else 0
        delivered = fault not in UNDELIVERED_FAULTS
        self._stats.ledger.bill(digest, model, via, (*prompt, n_completion), delivered=delivered)

    def _answer_one(self, raw: bytes, fault: str | None) -> tuple[int, dict[str, Any]]:
        """One request of a batch, answered as /v1/chat/completions would without latency or limits:
        (200, completion) or (status, error body) for a bad request or a drawn server error / 429."""
        try:
            body, model, messages, max_tokens = _parse_request(raw)
        except _BadRequest as exc:
            return 400, error_body(str(exc), "invalid_request_error")
        unsupported = self._unsupported(body, model)
        if unsupported is not None:
            return 400, unsupported
        canonical, digest = self.note_request(model, body)
        if fault is not None:
            self._stats.faults[fault] += 1
        if fault == "server_error":
            return 500, error_body("The server had an error (simulated).", "server_error")
        if fault in ("rate_limit", "rate_limit_no_header"):
            return 429, error_body("Rate limit reached (simulated).", "requests", "rate_limit_exceeded")
        if fault == "quota":
            return 429, error_body(QUOTA_MESSAGE, "insufficient_quota", "insufficient_quota")
        content = fault if fault in CONTENT_FAULTS else None
        n_prompt = prompt_tokens(messages)
        payload = self._completion(body, model, messages, max_tokens, n_prompt, canonical, content)
        self._bill(digest, model, "batch", (n_prompt, 0), payload, content)
        if content == "missing_usage":
            del payload["usage"]
        return 200, payload

    async def hang(self, request: web.Request) -> web.StreamResponse:
        """No answer until the client gives up or hang_s passes, then a reset."""
        # Cancelled by aiohttp when the client disconnects (handler_cancellation=True).
        assert self._closing is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), timeout=self._config.hang_s)
        return reset(request)


class SimulatorThread:
    """The same server on a background thread with its own event loop, for sync code and subprocess tests.

    `stats` is mutated on that thread; read counts once the client is done with them.
    """

    def __init__(self, config: SimConfig = _DEFAULT_CONFIG, host: str = "127.0.0.1", port: int = 0) -> None:
        self._sim = Simulator(config, host, port)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self) -> SimulatorThread:
        self._thread = threading.Thread(target=self._run, name="ifsweep-simulator", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced to __enter__ when it happens during startup
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self._sim:
            self._ready.set()
            await self._stop.wait()

    @property
    def base_url(self) -> str:
        return self._sim.base_url

    @property
    def port(self) -> int:
        return self._sim.port

    @property
    def root_url(self) -> str:
        return self._sim.root_url

    @property
    def anthropic(self) -> AnthropicAPI:
        """The Anthropic endpoints' state (read it once the client is done, like `stats`)."""
        return self._sim.anthropic

    @property
    def batches(self) -> BatchAPI:
        """The OpenAI Batch API's files and batches (read it once the client is done, like `stats`)."""
        return self._sim.batches

    @property
    def stats(self) -> SimStats:
        return self._sim.stats

    def set_config(self, config: SimConfig) -> None:
        """Applied on the server's loop; returns once the new settings are in force."""
        if self._loop is None or self._thread is None:  # not serving: nothing else touches the server
            self._sim.set_config(config)
            return
        done = threading.Event()

        def apply() -> None:
            self._sim.set_config(config)
            done.set()

        self._loop.call_soon_threadsafe(apply)
        done.wait()


# --- command line --------------------------------------------------------------------------------------


def _fault_arg(text: str) -> tuple[str, float]:
    name, sep, rate = text.partition("=")
    if not sep or name not in FAULT_NAMES:
        raise argparse.ArgumentTypeError(
            f"expected NAME=RATE with NAME one of {', '.join(FAULT_NAMES)}; got {text!r}"
        )
    try:
        value = float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(f"rate of {name} is not a number: {rate!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"rate of {name} must be in [0, 1], got {value}")
    return name, value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ifsweep serve-mock",
        description="Run the simulator: OpenAI's chat completions and Batch API under /v1, Anthropic's "
        "Messages API and Message Batches under /v1/messages (an Anthropic model's api_base is the root, "
        "without /v1).",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port (printed at start)")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--rpm", type=int, default=None)
    p.add_argument("--tpm", type=int, default=None)
    p.add_argument("--context-window", type=int, default=None, help="refuse longer prompts with a 400")
    p.add_argument("--context-style", choices=CONTEXT_STYLES, default="openai", help="that 400's shape")
    p.add_argument("--burst-s", type=float, default=2.0)
    p.add_argument("--no-retry-after", action="store_true", help="send no Retry-After on limit 429s")
    p.add_argument("--no-ratelimit-headers", action="store_true", help="send no x-ratelimit-* headers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hang-s", type=float, default=3600.0)
    p.add_argument("--no-prefix-cache", action="store_true", help="serve no prompt prefix from cache")
    p.add_argument("--batch-delay-s", type=float, default=0.0, help="how long a Batch API batch takes")
    p.add_argument("--batch-fail-rate", type=float, default=0.0, help="share of batches that fail")
    p.add_argument("--batch-expire-rate", type=float, default=0.0, help="share of batches that expire")
    p.add_argument(
        "--judge-echo",
        type=float,
        default=0.0,
        metavar="RATE",
        help="share of judge requests answered with text copied from the request (an unparsable reply)",
    )
    p.add_argument(
        "--lenient",
        choices=LENIENT_RULES,
        action="append",
        default=[],
        metavar="RULE",
        help="waive one of the providers' rules the simulator enforces (repeatable)",
    )
    p.add_argument(
        "--fault",
        type=_fault_arg,
        action="append",
        default=[],
        metavar="NAME=RATE",
        help="inject a fault at this rate per request (repeatable)",
    )
    return p


def config_from_args(args: argparse.Namespace) -> SimConfig:
    return SimConfig(
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter_ms,
        rpm=args.rpm,
        tpm=args.tpm,
        context_window=args.context_window,
        context_style=args.context_style,
        burst_s=args.burst_s,
        send_retry_after=not args.no_retry_after,
        send_ratelimit_headers=not args.no_ratelimit_headers,
        faults=FaultRates(**dict(args.fault)),
        seed=args.seed,
        hang_s=args.hang_s,
        prefix_cache=not args.no_prefix_cache,
        batch=BatchSettings(
            delay_s=args.batch_delay_s, fail_rate=args.batch_fail_rate, expire_rate=args.batch_expire_rate
        ),
        judge_echo=args.judge_echo,
        lenient=frozenset(args.lenient),
    )


async def _serve_forever(config: SimConfig, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Simulator(config, host, port) as sim:
            print(f"listening on {sim.base_url}", flush=True)
            print(
                f'serve-mock: give its endpoints server_id = "{config.server_id}" beside api_base, and a '
                "restart on another port resumes their runs",
                file=sys.stderr,
                flush=True,
            )
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def serve_main(argv: list[str] | None = None) -> int:
    """`ifsweep serve-mock` / `python -m ifsweep.simulator`: serve until SIGINT or SIGTERM."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = config_from_args(args)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    try:
        asyncio.run(_serve_forever(config, args.host, args.port))
    except OSError as exc:
        print(f"serve-mock: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    return 0
