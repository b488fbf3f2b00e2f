"""The simulator's Anthropic Messages API: POST /v1/messages; Message Batches in anthropic_batch.py.

Request and answer in Anthropic's shapes: `system` (a string or text blocks) apart from `messages`,
content as a string or text blocks, `max_tokens` required, at most 4 blocks marked `cache_control`.
The answer is the one /v1/chat/completions gives for the same text (the prompt flattened to chat
messages, system first), so a request gets the same reply over either protocol.

Usage with Anthropic's meaning (simulator/prefix.py, BreakpointCache): `input_tokens` counts only what
was neither read from nor written to the cache, `cache_read_input_tokens` and
`cache_creation_input_tokens` apart. Errors in Anthropic's shape (`{"type": "error", "error": {"type",
"message"}}`): `rate_limit_error` (429, retry-after), `overloaded_error` (529), `api_error` (500),
`invalid_request_error` (400; "prompt is too long: N tokens > M maximum" over the context window).
`anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` headers, resets as RFC 3339 times.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson
from aiohttp import web

from ifsweep.simulator.anthropic_batch import BatchServer, MessageBatches
from ifsweep.simulator.faults import CONTENT_FAULTS, NEVER_RAN, apply_content_fault
from ifsweep.simulator.judges import Judges
from ifsweep.simulator.ledger import UNDELIVERED_FAULTS
from ifsweep.simulator.limits import RateLimits
from ifsweep.simulator.prefix import TTL_S, Breakpoint, BreakpointCache, CacheUse, anthropic_min_tokens
from ifsweep.simulator.stats import Served
from ifsweep.simulator.text import answer, count_tokens, prompt_tokens
from ifsweep.simulator.transport import JSON, deliver, reset

_MAX_BREAKPOINTS = 4  # Anthropic refuses a request with more blocks marked cache_control
# Anthropic's own words (its 400 invalid_request_error for an account without credit): a client can
# tell it from other 400s by this message alone (providers/send/retry.py).
_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade "
    "or purchase credits."
)
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


class Host(BatchServer, Protocol):
    """What the Anthropic endpoints use of the server they are part of (simulator/server.py)."""

    @property
    def judges(self) -> Judges: ...
    @property
    def rate_limits(self) -> RateLimits: ...
    def note_request(self, model: str, body: Mapping[str, Any]) -> tuple[bytes, str]: ...
    async def wait_latency(self, model: str, canonical: bytes) -> None: ...
    async def hang(self, request: web.Request) -> web.StreamResponse: ...


class AnthropicError(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message

    def payload(self) -> dict[str, Any]:
        return error_payload(self.kind, self.message)


def error_payload(kind: str, message: str) -> dict[str, Any]:
    """Anthropic's error shape."""
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass(frozen=True, slots=True)
class MessagesRequest:
    body: Mapping[str, Any]
    model: str
    max_tokens: int
    chat: list[dict[str, str]]  # the prompt as plain chat messages, system first: what the answer reads
    marks: tuple[Breakpoint, ...]  # the blocks marked cache_control, in prompt order


def _bad(message: str) -> AnthropicError:
    return AnthropicError(400, "invalid_request_error", message)


def _ttl(block: Mapping[str, Any], where: str) -> float | None:
    """How long the entry a block marked `cache_control` writes lives; None for an unmarked block."""
    mark = block.get("cache_control")
    if mark is None:
        return None
    ttl = mark.get("ttl", "5m") if isinstance(mark, dict) else None
    if ttl not in TTL_S:
        raise _bad(f"{where}.cache_control.ttl: must be one of '5m', '1h', got {ttl!r}")
    return TTL_S[ttl]


def _blocks(content: Any, where: str) -> list[tuple[str, float | None]]:
    """(text, ttl when marked cache_control) of each block of a string or a list of text blocks."""
    if isinstance(content, str):
        return [(content, None)]
    if not isinstance(content, list):
        raise _bad(f"{where}: expected a string or a list of content blocks")
    out = []
    for n, block in enumerate(content):
        if (
            not isinstance(block, dict)
            or block.get("type") != "text"
            or not isinstance(block.get("text"), str)
        ):
            raise _bad(f"{where}.{n}: the simulator takes text blocks only")
        out.append((block["text"], _ttl(block, f"{where}.{n}")))
    return out


def _require_text(
    where: str, content: Any, blocks: list[tuple[str, float | None]], *, final_assistant: bool
) -> None:
    """Anthropic's rule on content (a 400 that no retry fixes): every message has text but an optional
    final assistant one, and no text block is empty or only whitespace."""
    if content == "" or content == []:
        if final_assistant:
            return
        raise _bad(
            f"{where}: all messages must have non-empty content except for the optional final "
            "assistant message"
        )
    for m, (text, _) in enumerate(blocks):
        at = f"{where}.content.{m}.text" if isinstance(content, list) else where
        if not text:
            raise _bad(f"{at}: text content blocks must be non-empty")
        if not text.strip():
            raise _bad(f"{at}: text content blocks must contain non-whitespace text")


def _turns(body: Mapping[str, Any], strict: bool) -> list[tuple[str, list[tuple[str, float | None]]]]:
    """(role, blocks) of the system prompt (when there is one) and every message, in prompt order."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: must be a non-empty list")
    turns = []
    system = body.get("system")
    if system is not None:
        blocks = _blocks(system, "system")
        if strict and isinstance(system, list):
            _require_text("system", system, blocks, final_assistant=False)
        turns.append(("system", blocks))
    for n, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("user", "assistant"):
            raise _bad(f"messages.{n}.role: must be 'user' or 'assistant' (system goes in 'system')")
        content = m.get("content")
        blocks = _blocks(content, f"messages.{n}.content")
        if strict:
            final = n == len(messages) - 1 and role == "assistant"
            _require_text(f"messages.{n}", content, blocks, final_assistant=final)
        turns.append((str(role), blocks))
    return turns


def parse_messages(body: Any, *, strict: bool = True) -> MessagesRequest:
    """A Messages API request body -> MessagesRequest; AnthropicError (400) names what is wrong.
    `strict`: Anthropic's rule on empty content (waived only by SimConfig.lenient "empty_content")."""
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    model, max_tokens = body.get("model"), body.get("max_tokens")
    if not isinstance(model, str) or not model:
        raise _bad("model: must be a non-empty string")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _bad(f"max_tokens: a positive integer is required, got {max_tokens!r}")
    if body.get("stream"):
        raise _bad("stream: the simulator does not stream; send stream=false")
    chat: list[dict[str, str]] = []
    marks: list[Breakpoint] = []
    name = hashlib.blake2b(model.encode(), digest_size=16).digest()
    before = 0  # prompt tokens of the turns before this one
    for role, blocks in _turns(body, strict):
        text = ""
        for part, ttl in blocks:
            text += part
            name = hashlib.blake2b(name + f"{role}\x1f{part}\x1e".encode("utf-8", "surrogatepass")).digest()
            if ttl is not None:
                marks.append(Breakpoint(name, before + count_tokens(text), ttl))
        chat.append({"role": role, "content": text})
        before += count_tokens(text)
    if len(marks) > _MAX_BREAKPOINTS:
        raise _bad(
            f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}."
        )
    return MessagesRequest(body, model, max_tokens, chat, tuple(marks))


def message_payload(
    req: MessagesRequest, text: str, finish: str, use: CacheUse, n_prompt: int, fault: str | None, msg_id: str
) -> dict[str, Any]:
    """The Message object answering `req` with `text`, changed as a content fault says (usage kept)."""
    message: dict[str, Any] = {"content": text, "refusal": None}
    choice: dict[str, Any] = {"finish_reason": finish}
    apply_content_fault(fault, message, choice)
    content = message["content"]
    stop = "refusal" if message["refusal"] else _STOP_REASONS.get(choice["finish_reason"], "end_turn")
    payload: dict[str, Any] = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": [{"type": "text", "text": content}] if content else [],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": n_prompt - use.read - use.written,
            "cache_creation_input_tokens": use.written,
            "cache_read_input_tokens": use.read,
            "output_tokens": count_tokens(content) if content else 0,
        },
    }
    return payload


def ratelimit_headers(limits: RateLimits) -> dict[str, str]:
    """anthropic-ratelimit-* for the limits that are set; resets as RFC 3339 times, as Anthropic sends."""
    out: dict[str, str] = {}
    now = datetime.now(UTC)
    for kind, bucket in (("requests", limits.requests), ("tokens", limits.tokens)):
        if bucket is None:
            continue
        # Whole seconds, rounded up: a client waiting until then finds the bucket full.
        reset_at = now.replace(microsecond=0) + timedelta(seconds=math.ceil(bucket.reset_in()) + 1)
        out[f"anthropic-ratelimit-{kind}-limit"] = str(bucket.limit)
        out[f"anthropic-ratelimit-{kind}-remaining"] = str(max(0, int(bucket.level())))
        out[f"anthropic-ratelimit-{kind}-reset"] = reset_at.isoformat(timespec="seconds").replace(
            "+00:00", "Z"
        )
    return out


class AnthropicAPI:
    """The Messages endpoint and Message Batches of one simulator (`host`)."""

    def __init__(self, host: Host, seed: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._host = host
        self.cache = BreakpointCache(clock=clock)  # entries expire on `clock` (a test's own)
        self.batches = MessageBatches(self.answer_one, host, seed)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        self.batches.add_routes(app)

    def _strict(self) -> bool:
        return "empty_content" not in self._host.config.lenient

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> web.Response:
        self._host.stats.status_counts[status] += 1
        return web.Response(status=status, body=orjson.dumps(payload), content_type=JSON, headers=headers)

    def _limit_headers(self) -> dict[str, str]:
        return ratelimit_headers(self._host.rate_limits) if self._host.config.send_ratelimit_headers else {}

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        with self._host.stats.serving():
            return await self._messages_inner(request)

    async def _messages_inner(self, request: web.Request) -> web.StreamResponse:
        host, stats = self._host, self._host.stats
        try:
            req = parse_messages(orjson.loads(await request.read()), strict=self._strict())
        except orjson.JSONDecodeError as exc:
            return self._json(400, error_payload("invalid_request_error", f"request body is not JSON: {exc}"))
        except AnthropicError as exc:
            return self._json(exc.status, exc.payload())
        canonical, digest = host.note_request(req.model, req.body)
        fault, error_status = host.draw_fault()
        n_prompt = prompt_tokens(req.chat)
        refused = self._refusal(n_prompt, req.max_tokens)
        if refused is not None:
            return refused
        if fault is not None:
            stats.faults[fault] += 1
        arrived = time.monotonic()
        use = (
            self.cache.lookup(req.marks, anthropic_min_tokens(req.model))
            if host.config.prefix_cache
            else CacheUse(0, 0)
        )
        payload, out = self._message(req, n_prompt, use, fault, canonical)
        if fault not in NEVER_RAN:  # billed once it reached the model, whether the client waits or not
            delivered = fault not in UNDELIVERED_FAULTS
            stats.ledger.bill(digest, req.model, "chat", (n_prompt, use.read, out), delivered=delivered)
        await host.wait_latency(req.model, canonical)
        early = await self._fault_reply(request, fault, error_status)
        if early is not None:
            return early
        self._served(req, n_prompt, use, arrived, out, batch=False)
        data = orjson.dumps(payload)
        return await deliver(request, data, self._limit_headers(), stats, fault, canonical)

    def _message(
        self, req: MessagesRequest, n_prompt: int, use: CacheUse, fault: str | None, canonical: bytes
    ) -> tuple[dict[str, Any], int]:
        """The Message answering `req`, and its output tokens."""
        host, config = self._host, self._host.config
        reply = answer(req.model, req.chat, req.max_tokens, config.seed, host.judges, config.judge_echo)
        msg_id = "msg_sim" + hashlib.blake2b(canonical, digest_size=12).hexdigest()
        payload = message_payload(req, reply.text, reply.finish_reason, use, n_prompt, fault, msg_id)
        # No missing_usage here: Anthropic's Message always carries usage (its SDK requires it), so
        # that fault, drawn on this route, leaves the answer whole.
        return payload, int(payload["usage"]["output_tokens"])

    def _lookup(self, req: MessagesRequest) -> CacheUse:
        if not self._host.config.prefix_cache:
            return CacheUse(0, 0)
        return self.cache.lookup(req.marks, anthropic_min_tokens(req.model))

    def _served(
        self, req: MessagesRequest, n_prompt: int, use: CacheUse, arrived: float, out: int, *, batch: bool
    ) -> None:
        """Name the request's marked prefixes in the cache and log what was served."""
        host = self._host
        if host.config.prefix_cache:
            self.cache.store(req.marks, anthropic_min_tokens(req.model))
        host.stats.served(
            Served(req.model, arrived, time.monotonic(), n_prompt, use.read, None, use.written, out, batch)
        )

    def _too_long(self, n_prompt: int) -> dict[str, Any] | None:
        """Anthropic's error for a prompt over the context window, or None when it fits."""
        window = self._host.config.context_window
        if window is None or n_prompt <= window:
            return None
        self._host.stats.faults["context_length"] += 1
        message = f"prompt is too long: {n_prompt} tokens > {window} maximum"
        return error_payload("invalid_request_error", message)

    def _refusal(self, n_prompt: int, max_tokens: int) -> web.Response | None:
        """The 400 of a prompt over the context window, or the 429 of a request over the limits."""
        host = self._host
        too_long = self._too_long(n_prompt)
        if too_long is not None:
            return self._json(400, too_long)
        admission = host.rate_limits.admit(n_prompt + max_tokens)
        if admission.admitted:
            return None
        host.stats.faults["limit"] += 1
        headers = self._limit_headers()
        if host.config.send_retry_after:
            headers["retry-after"] = str(max(1, math.ceil(admission.retry_after_s)))
        message = "This request would exceed your organization's rate limit (simulated)."
        return self._json(429, error_payload("rate_limit_error", message), headers)

    async def _fault_reply(
        self, request: web.Request, fault: str | None, status: int
    ) -> web.StreamResponse | None:
        """The answer of a fault that replaces the message, or None for the others."""
        if fault == "server_error":
            if status == 503:  # Anthropic says it is overloaded with a 529
                return self._json(529, error_payload("overloaded_error", "Overloaded (simulated)."))
            return self._json(500, error_payload("api_error", "Internal server error (simulated)."))
        if fault in ("rate_limit", "rate_limit_no_header"):
            headers = self._limit_headers() if fault == "rate_limit" else {}
            if fault == "rate_limit" and self._host.config.send_retry_after:
                headers["retry-after"] = "1"
            return self._json(
                429, error_payload("rate_limit_error", "Rate limited (simulated, spurious)."), headers
            )
        if fault == "quota":  # Anthropic says so with a 400, not a 429
            return self._json(400, error_payload("invalid_request_error", _CREDIT))
        if fault == "reset":
            return reset(request)
        if fault == "hang":
            return await self._host.hang(request)
        if fault == "malformed":
            self._host.stats.status_counts[200] += 1
            return web.Response(body=b"upstream returned an incomplete answer\n", content_type=JSON)
        return None

    def answer_one(self, params: Any, fault: str | None) -> tuple[str, dict[str, Any]]:
        """One request of a Message Batch, answered as /v1/messages would without latency or limits:
        ("succeeded", message) or ("errored", error) for a bad request or a drawn server fault."""
        try:
            req = parse_messages(params, strict=self._strict())
        except AnthropicError as exc:
            return "errored", exc.payload()
        host = self._host
        canonical, digest = host.note_request(req.model, req.body)
        if fault is not None:
            host.stats.faults[fault] += 1
        n_prompt = prompt_tokens(req.chat)
        too_long = self._too_long(n_prompt)
        if too_long is not None:
            return "errored", too_long
        if fault == "server_error":
            return "errored", error_payload("api_error", "Internal server error (simulated).")
        if fault in ("rate_limit", "rate_limit_no_header"):
            return "errored", error_payload("overloaded_error", "Overloaded (simulated).")
        if fault == "quota":
            return "errored", error_payload("invalid_request_error", _CREDIT)
        content = fault if fault in CONTENT_FAULTS else None
        arrived = time.monotonic()
        use = (
            self.cache.lookup(req.marks, anthropic_min_tokens(req.model))
            if host.config.prefix_cache
            else CacheUse(0, 0)
        )
        payload, out = self._message(req, n_prompt, use, content, canonical)
        self._served(req, n_prompt, use, arrived, out, batch=True)
        host.stats.ledger.bill(digest, req.model, "batch", (n_prompt, use.read, out))
        return "succeeded", payload


__all__ = [
    "AnthropicAPI",
    "AnthropicError",
    "MessagesRequest",
    "error_payload",
    "parse_messages",
    "ratelimit_headers",
]
