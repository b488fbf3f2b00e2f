"""Anthropic's Message Batches over aiohttp, behind the BatchClient interface the OpenAI client has.

The batch endpoint (providers/batch/endpoint.py) speaks OpenAI's batch shapes: a JSONL input file of
chat requests, batch objects, output and error files. Anthropic takes a batch's requests inline and
answers with one results JSONL, so this client translates both ways:
- `upload`: nothing is sent. The chat requests become Messages requests (system apart, `max_tokens`
  always set, OpenAI's `stop` as `stop_sequences`; any other parameter is refused by name), each with
  `cache_control` where the prefixes it shares with others of the batch end (providers/send/
  prefix_groups.nested_ends: the same task, and the same task and answer), so the batch's later
  requests read what an earlier one wrote. They are kept under a file id made of their
  content, for `create`.
- `create`: POST {root}/v1/messages/batches with the requests inline.
- `retrieve`, `listing`, `cancel`: message_batch objects as BatchInfo. An ended batch is "cancelled"
  when a cancel was asked, "expired" when some requests expired, else "completed"; its output "file" is
  the batch id, read from {root}/v1/messages/batches/{id}/results (never a URL the answer names: the
  key goes to the configured base alone).
- `content`: each result as an OpenAI output line. succeeded: a chat completion whose usage counts
  every prompt token in prompt_tokens (Anthropic's input_tokens excludes cache reads and writes), reads
  in prompt_tokens_details.cached_tokens, writes in cache_creation_input_tokens; errored: the HTTP
  status of its error type; canceled / expired: batch_cancelled / batch_expired (sent again).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from ifsweep.providers.batch.clients import (
    BatchInfo,
    BatchLimits,
    BatchTooLarge,
    Page,
    cursor_page,
    json_body,
    list_back,
)
from ifsweep.providers.send.conversation import conversation
from ifsweep.providers.send.fast import error_detail
from ifsweep.providers.send.prefix import PrefixEnd, with_breakpoints
from ifsweep.providers.send.prefix_groups import nested_ends
from ifsweep.providers.send.retry import HttpStatusError, MalformedResponse, error_code

if TYPE_CHECKING:  # loaded with the first send
    import aiohttp

ANTHROPIC_ROOT = "https://api.anthropic.com"
ANTHROPIC_LIMITS = BatchLimits(100_000, 256_000_000)
API_VERSION = "2023-06-01"
_DEFAULT_MAX_TOKENS = 4096  # Anthropic requires max_tokens; what a request without one is given
_PASSED = frozenset({"temperature", "top_p", "top_k"})
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "content_filter"}
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def api_root(api_base: str | None) -> str:
    """The server root, as LiteLLM reads an anthropic `api_base` (it adds /v1/messages unless there)."""
    base = (api_base or ANTHROPIC_ROOT).rstrip("/")
    return base.removesuffix("/v1/messages")


def message_params(body: Mapping[str, Any], ends: Sequence[PrefixEnd] = ()) -> dict[str, Any]:
    """A chat-completions request body -> Messages request params, cache breakpoints at `ends` (of the
    conversation as sent: `sent_messages`)."""
    messages = with_breakpoints(sent_messages(body), ends)
    system = [m["content"] for m in messages if m.get("role") == "system"]
    params: dict[str, Any] = {
        "model": body.get("model"),
        "max_tokens": body.get("max_tokens") or body.get("max_completion_tokens") or _DEFAULT_MAX_TOKENS,
        "messages": [m for m in messages if m.get("role") != "system"],
    }
    if system:
        params["system"] = [b for c in system for b in (c if isinstance(c, list) else [_text(c)])]
    for name, value in body.items():
        if name in _PASSED:
            params[name] = value
        elif name == "stop":
            params["stop_sequences"] = [value] if isinstance(value, str) else value
        elif name not in ("model", "messages", "max_tokens", "max_completion_tokens"):
            raise ValueError(
                f"parameter {name!r} has no Anthropic Messages equivalent: leave it out in batch mode"
            )
    return params


def sent_messages(body: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The conversation Anthropic is sent, by the one rule every route follows (issue 32: no empty
    turn but a final assistant one), so this route sends what the interactive one sends for a key."""
    return conversation("anthropic", body.get("messages") or [])


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def batch_requests(data: bytes) -> list[dict[str, Any]]:
    """The endpoint's JSONL input (OpenAI batch lines) as Message Batch requests, each marked where the
    prefixes it shares with others of the batch end."""
    lines = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    bodies = [line["body"] for line in lines]
    ends = nested_ends([sent_messages(b) for b in bodies])
    return [
        {"custom_id": line["custom_id"], "params": message_params(body, ends[i])}
        for i, (line, body) in enumerate(zip(lines, bodies, strict=True))
    ]


def _status(batch: Mapping[str, Any], counts: Mapping[str, int]) -> str:
    status = batch.get("processing_status")
    if status == "in_progress":
        return "in_progress"
    if status == "canceling":
        return "cancelling"
    if status != "ended":
        raise MalformedResponse(f"message batch has processing_status {status!r}")
    if batch.get("cancel_initiated_at"):
        return "cancelled"
    return "expired" if counts.get("expired") else "completed"


def message_batch_info(batch: Any, input_file_id: str | None = None) -> BatchInfo:
    """A message_batch object -> BatchInfo; MalformedResponse when it is none."""
    if not isinstance(batch, dict) or not isinstance(batch.get("id"), str):
        raise MalformedResponse("message batch object has no id")
    raw = batch.get("request_counts")
    counts = {k: v for k, v in raw.items() if isinstance(v, int)} if isinstance(raw, dict) else {}
    status = _status(batch, counts)
    over = status in ("completed", "expired", "cancelled")
    return BatchInfo(
        id=batch["id"],
        status=status,
        input_file_id=input_file_id,
        output_file_id=batch["id"] if over else None,
        error_file_id=None,
        total=sum(counts.values()),
        completed=counts.get("succeeded", 0),
        failed=sum(counts.get(k, 0) for k in ("errored", "canceled", "expired")),
        metadata={},
        errors="",
        created_at=_epoch(batch.get("created_at")),
        # "The time at which the Message Batch was archived and its results became unavailable."
        results_gone=batch.get("archived_at") is not None,
    )


def _epoch(text: Any) -> float | None:
    """An RFC 3339 time (`2026-11-26T11:00:00.123Z`) as seconds since the epoch; None when it is none."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def output_line(result_line: bytes) -> bytes:
    """One line of a results JSONL as the OpenAI output line the endpoint reads (a line that is not JSON
    goes as it is: the endpoint sends again whatever it leaves without a result)."""
    try:
        rec = orjson.loads(result_line)
    except orjson.JSONDecodeError:
        return result_line
    custom_id = rec.get("custom_id") if isinstance(rec, dict) else None
    result = rec.get("result") if isinstance(rec, dict) else None
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    out: dict[str, Any] = {"custom_id": custom_id, "response": None, "error": None}
    if kind == "succeeded":
        out["response"] = {"status_code": 200, "body": chat_completion(result.get("message"))}
    elif kind == "errored":
        error = result.get("error")
        inner = error.get("error") if isinstance(error, dict) else None
        status = _ERROR_STATUS.get(str(inner.get("type")), 500) if isinstance(inner, dict) else 500
        out["response"] = {"status_code": status, "body": error}
    elif kind in ("canceled", "expired"):
        code = "batch_cancelled" if kind == "canceled" else "batch_expired"
        out["error"] = {"code": code, "message": f"the request was {kind} before it was processed"}
    else:
        out["error"] = {"code": "malformed", "message": f"result of type {kind!r}"}
    return orjson.dumps(out)


def chat_completion(message: Any) -> dict[str, Any]:
    """A Message as the chat completion the endpoint parses (providers/send/fast.parse_chat_body)."""
    if not isinstance(message, dict):
        return {}
    blocks = message.get("content")
    text = (
        "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        if isinstance(blocks, list)
        else None
    )
    stop = message.get("stop_reason")
    body: dict[str, Any] = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": text if stop == "refusal" else None,
                },
                "finish_reason": _STOP.get(str(stop), stop),
            }
        ]
    }
    usage = message.get("usage")
    if isinstance(usage, dict):
        read, written = (
            usage.get("cache_read_input_tokens") or 0,
            usage.get("cache_creation_input_tokens") or 0,
        )
        plain = usage.get("input_tokens")
        body["usage"] = {
            "prompt_tokens": plain + read + written if isinstance(plain, int) else None,
            "completion_tokens": usage.get("output_tokens"),
            "prompt_tokens_details": {"cached_tokens": read},
            "cache_creation_input_tokens": written,
        }
    return body


class AnthropicBatchClient:
    """POST /v1/messages/batches, GET /v1/messages/batches[/{id}[/results]], POST .../{id}/cancel."""

    names_batches = False  # a Message Batch carries no metadata and no input file
    # "100,000 Message requests or 256 MB in size, whichever is reached first"; the bytes are checked
    # again on the Messages form (upload), which differs from the JSONL the endpoint measures.
    limits = ANTHROPIC_LIMITS

    def __init__(self, session: aiohttp.ClientSession, api_base: str | None, api_key: str) -> None:
        self._session = session
        self._root = api_root(api_base)
        self._headers = {
            "x-api-key": api_key,
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        self._inputs: dict[str, bytes] = {}

    async def _read(self, method: str, path: str, **kwargs: Any) -> bytes:
        url = self._root + "/v1/messages/batches" + path
        async with self._session.request(method, url, headers=self._headers, **kwargs) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise HttpStatusError(resp.status, resp.headers, error_detail(raw), error_code(raw))
            return raw

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return json_body(await self._read(method, path, **kwargs), f"message batches{path}")

    async def upload(self, data: bytes) -> str:
        file_id = "inline-" + hashlib.sha256(data).hexdigest()[:32]
        body = orjson.dumps({"requests": batch_requests(data)})
        if len(body) > self.limits.max_bytes:
            raise BatchTooLarge(f"a Message Batch of {len(body)} bytes: Anthropic takes up to 256 MB")
        self._inputs[file_id] = body
        return file_id

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> BatchInfo:
        """`metadata` has nowhere to go: a Message Batch carries none."""
        raw = self._inputs.pop(input_file_id, None)
        if raw is None:
            raise ValueError(f"{input_file_id}: no requests uploaded under this id in this process")
        # A file-like body: aiohttp warns (and a test run fails) on a raw body above 1 MB.
        body = io.BytesIO(raw)
        try:
            created = await self._json("POST", "", data=body)
        except HttpStatusError as exc:
            if exc.status_code == 413:  # request_too_large: Anthropic measured it over 256 MB
                raise BatchTooLarge(f"a Message Batch of {len(raw)} bytes: {exc.message}") from exc
            raise
        return message_batch_info(created, input_file_id)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return message_batch_info(await self._json("GET", f"/{batch_id}"))

    async def listing(self, since: float | None = None) -> list[BatchInfo]:
        async def page(after: str | None) -> Page:
            # 1000: the most a page holds (Anthropic's limit ranges 1-1000); `after_id` the older page.
            params = {"limit": "1000"} | ({"after_id": after} if after else {})
            return cursor_page(
                await self._json("GET", "", params=params), "message batch list", message_batch_info
            )

        return await list_back(page, since)

    async def content(self, file_id: str) -> bytes:
        raw = await self._read("GET", f"/{file_id}/results")
        return b"".join(output_line(line) + b"\n" for line in raw.splitlines() if line.strip())

    async def cancel(self, batch_id: str) -> BatchInfo:
        return message_batch_info(await self._json("POST", f"/{batch_id}/cancel"))


__all__ = [
    "ANTHROPIC_ROOT",
    "AnthropicBatchClient",
    "api_root",
    "chat_completion",
    "message_params",
    "output_line",
]
