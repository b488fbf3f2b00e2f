"""The Batch API's remote operations: the OpenAI-compatible files + batches protocol over aiohttp (the
fast path), and LiteLLM's batch functions (`openai/` models with use_litellm; LiteLLM 1.106 cannot batch
Anthropic, which has its own client in providers/batch/anthropic.py, and the other providers are refused
by the config: providers/batch/choose.py). Only translates; collecting, polling, retries and durability
are providers/batch/endpoint.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ifsweep.providers.pricing import import_litellm
from ifsweep.providers.send.fast import error_detail
from ifsweep.providers.send.retry import HttpStatusError, MalformedResponse

if TYPE_CHECKING:  # loaded with the first send: a resume that sends nothing need not import aiohttp
    import aiohttp

# Batch states after which nothing more happens.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True, slots=True)
class BatchInfo:
    id: str
    status: (
        str  # validating | in_progress | finalizing | completed | failed | expired | cancelling | cancelled
    )
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    total: int
    completed: int
    failed: int
    metadata: Mapping[str, Any]
    errors: str  # why the whole batch failed, when it did
    created_at: float | None = None  # the provider's clock, seconds since the epoch

    @property
    def over(self) -> bool:
        return self.status in TERMINAL


# How far the provider's clock may lag ours when a batch is looked for by when it was created.
CLOCK_SKEW_S = 600.0


def created_for(listed: list[BatchInfo], intent: str, file_id: str) -> BatchInfo | None:
    """The listed batch that names this intent or input file (OpenAI's batches carry both), if any."""
    return next(
        (i for i in listed if i.input_file_id == file_id or i.metadata.get("ifsweep_intent") == intent), None
    )


def maybe_created_for(
    listed: list[BatchInfo], requests: int, since: float, known: set[str]
) -> BatchInfo | None:
    """For a provider whose batches carry neither (Anthropic's Message Batches): the batch of `requests`
    requests created at or after `since` (the intent's time, less the clock skew) that no record of the
    run knows, the earliest such. Only perhaps this intent's: its results say, by their custom ids, when
    it ends, and the requests it turns out not to hold are sent again."""
    cutoff = since - CLOCK_SKEW_S
    candidates = [
        i
        for i in listed
        if i.id not in known and i.total == requests and i.created_at is not None and i.created_at >= cutoff
    ]
    return min(candidates, key=lambda i: i.created_at or 0.0, default=None)


class BatchClient(Protocol):
    # Whether a listed batch names its input file or metadata (`created_for` finds it exactly); when not,
    # a batch whose create answer was lost is found by `maybe_created_for`.
    names_batches: bool

    async def upload(self, data: bytes) -> str: ...
    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> BatchInfo: ...
    async def retrieve(self, batch_id: str) -> BatchInfo: ...
    async def listing(self) -> list[BatchInfo]: ...
    async def content(self, file_id: str) -> bytes: ...
    async def cancel(self, batch_id: str) -> BatchInfo: ...


def batch_info(obj: Any) -> BatchInfo:
    """An OpenAI batch object (a dict, or LiteLLM's typed one) -> BatchInfo; MalformedResponse otherwise."""
    body = obj if isinstance(obj, dict) else _as_dict(obj)
    batch_id, status = body.get("id"), body.get("status")
    if not isinstance(batch_id, str) or not isinstance(status, str):
        raise MalformedResponse("batch object has no id or status")
    counts = body.get("request_counts") or {}
    if not isinstance(counts, dict):
        counts = _as_dict(counts)
    errors = body.get("errors") or {}
    if not isinstance(errors, dict):
        errors = _as_dict(errors)
    data = errors.get("data") or []
    reasons = "; ".join(
        str((e if isinstance(e, dict) else _as_dict(e)).get("message") or e) for e in data if e is not None
    )
    metadata = body.get("metadata")
    return BatchInfo(
        id=batch_id,
        status=status,
        input_file_id=_opt_str(body.get("input_file_id")),
        output_file_id=_opt_str(body.get("output_file_id")),
        error_file_id=_opt_str(body.get("error_file_id")),
        total=_int(counts.get("total")),
        completed=_int(counts.get("completed")),
        failed=_int(counts.get("failed")),
        metadata=metadata if isinstance(metadata, dict) else {},
        errors=reasons,
        created_at=float(created) if isinstance(created := body.get("created_at"), int | float) else None,
    )


def json_body(raw: bytes, where: str) -> Any:
    """A batch API's 2xx body, parsed; MalformedResponse (naming `where`) when it is not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise MalformedResponse(f"{where}: body is not JSON ({exc})") from None


def listed(body: Any, what: str, info: Callable[[Any], BatchInfo]) -> list[BatchInfo]:
    """The batches of a list reply (`{"data": [...]}`), each read by `info`."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise MalformedResponse(f"{what} has no data")
    return [info(b) for b in data]


class OpenAIBatchClient:
    """POST /files, POST /batches, GET /batches[/{id}], GET /files/{id}/content, POST /batches/{id}/cancel."""

    names_batches = True

    def __init__(self, session: aiohttp.ClientSession, api_base: str, api_key: str) -> None:
        self._session = session
        self._base = api_base.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"}

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        async with self._session.request(method, self._base + path, headers=self._headers, **kwargs) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise HttpStatusError(resp.status, resp.headers, error_detail(raw))
        return json_body(raw, path)

    async def upload(self, data: bytes) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename="requests.jsonl", content_type="application/jsonl")
        body = await self._json("POST", "/files", data=form)
        file_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(file_id, str):
            raise MalformedResponse("file upload answered without an id")
        return file_id

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> BatchInfo:
        request = {
            "input_file_id": input_file_id,
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": dict(metadata),
        }
        return batch_info(await self._json("POST", "/batches", json=request))

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return batch_info(await self._json("GET", f"/batches/{batch_id}"))

    async def listing(self) -> list[BatchInfo]:
        return listed(await self._json("GET", "/batches", params={"limit": "100"}), "batch list", batch_info)

    async def content(self, file_id: str) -> bytes:
        async with self._session.get(f"{self._base}/files/{file_id}/content", headers=self._headers) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise HttpStatusError(resp.status, resp.headers, error_detail(raw))
            return raw

    async def cancel(self, batch_id: str) -> BatchInfo:
        return batch_info(await self._json("POST", f"/batches/{batch_id}/cancel"))


class LiteLLMBatchClient:
    """The same operations through litellm.acreate_file / acreate_batch / aretrieve_batch / alist_batches /
    afile_content / acancel_batch, for `custom_llm_provider` (anthropic, vertex_ai, openai, ...)."""

    names_batches = True

    def __init__(self, provider: str, api_base: str | None, api_key: str | None) -> None:
        self._litellm = import_litellm()
        self._provider = provider
        self._kwargs: dict[str, Any] = {"custom_llm_provider": provider}
        if api_base:
            self._kwargs["api_base"] = api_base
        if api_key:
            self._kwargs["api_key"] = api_key

    async def upload(self, data: bytes) -> str:
        f = await self._litellm.acreate_file(
            file=("requests.jsonl", data, "application/jsonl"), purpose="batch", **self._kwargs
        )
        file_id = getattr(f, "id", None)
        if not isinstance(file_id, str):
            raise MalformedResponse("file upload answered without an id")
        return file_id

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> BatchInfo:
        b = await self._litellm.acreate_batch(
            completion_window="24h",
            endpoint="/v1/chat/completions",
            input_file_id=input_file_id,
            metadata=dict(metadata),
            **self._kwargs,
        )
        return batch_info(b)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return batch_info(await self._litellm.aretrieve_batch(batch_id=batch_id, **self._kwargs))

    async def listing(self) -> list[BatchInfo]:
        page = await self._litellm.alist_batches(limit=100, **self._kwargs)
        data = page.get("data") if isinstance(page, dict) else getattr(page, "data", None)
        return [batch_info(b) for b in (data or [])]

    async def content(self, file_id: str) -> bytes:
        resp = await self._litellm.afile_content(file_id=file_id, **self._kwargs)
        raw = getattr(resp, "content", None)
        if isinstance(raw, bytes):
            return raw
        text = getattr(resp, "text", None)
        if isinstance(text, str):
            return text.encode()
        raise MalformedResponse("file content answered without bytes")

    async def cancel(self, batch_id: str) -> BatchInfo:
        return batch_info(await self._litellm.acancel_batch(batch_id=batch_id, **self._kwargs))


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        out = dump()
        return out if isinstance(out, dict) else {}
    return dict(vars(obj)) if hasattr(obj, "__dict__") else {}


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


__all__ = ["TERMINAL", "BatchClient", "BatchInfo", "LiteLLMBatchClient", "OpenAIBatchClient", "batch_info"]
