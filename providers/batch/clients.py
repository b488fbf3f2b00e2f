"""The Batch API's remote operations: the OpenAI-compatible files + batches protocol over aiohttp (the
fast path), and LiteLLM's batch functions (`openai/` models with use_litellm; LiteLLM 1.106 cannot batch
Anthropic, which has its own client in providers/batch/anthropic.py, and the other providers are refused
by the config: providers/batch/choose.py). Only translates; collecting, polling, retries and durability
are providers/batch/endpoint.py."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ifsweep.providers.pricing import import_litellm
from ifsweep.providers.send.fast import error_detail
from ifsweep.providers.send.retry import HttpStatusError, MalformedResponse, error_code

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
    error_codes: tuple[str, ...] = ()  # the codes of `errors` (`token_limit_exceeded`, ...)
    # The provider says its results can no longer be read (Anthropic's `archived_at`).
    results_gone: bool = False

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


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What one batch may hold at a provider: requests, and bytes of its input."""

    max_requests: int
    max_bytes: int


# "up to 50,000 requests, and can be up to 200 MB in size" (OpenAI's CreateBatchRequest).
OPENAI_LIMITS = BatchLimits(50_000, 200_000_000)


class BatchTooLarge(ValueError):
    """The client's own form of a batch is over the provider's size limit: send it in smaller batches."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a batch list, newest first, and the cursor of the next (older) one, if any."""

    batches: list[BatchInfo]
    next_cursor: str | None


async def list_back(fetch: Callable[[str | None], Awaitable[Page]], since: float | None) -> list[BatchInfo]:
    """Every batch of the list, page by page from the newest, until a page reaches batches created
    before `since` less the clock skew (older pages cannot hold what was created since), or the end.
    `fetch(cursor)` reads one page (cursor None: the first)."""
    out: list[BatchInfo] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = await fetch(cursor)
        out.extend(page.batches)
        oldest = min((b.created_at for b in page.batches if b.created_at is not None), default=None)
        if page.next_cursor is None or not page.batches:
            return out
        if since is not None and oldest is not None and oldest < since - CLOCK_SKEW_S:
            return out
        if page.next_cursor in seen:  # a list that does not move on would be read for ever
            raise MalformedResponse(f"batch list repeats its cursor {page.next_cursor!r}")
        seen.add(page.next_cursor)
        cursor = page.next_cursor


def cursor_page(body: Any, what: str, info: Callable[[Any], BatchInfo]) -> Page:
    """A `{"data": [...], "has_more", "last_id"}` list reply as a Page (the next cursor: `last_id`, else
    the last batch's id, while `has_more`)."""
    batches = listed(body, what, info)
    more = body.get("has_more") is True
    last = body.get("last_id")
    cursor = last if isinstance(last, str) and last else (batches[-1].id if batches else None)
    return Page(batches, cursor if more else None)


class BatchClient(Protocol):
    # Whether a listed batch names its input file or metadata (`created_for` finds it exactly); when not,
    # a batch whose create answer was lost is found by `maybe_created_for`.
    names_batches: bool
    limits: BatchLimits  # the provider's own, split by whatever max_requests says

    async def upload(self, data: bytes) -> str: ...
    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> BatchInfo: ...
    async def retrieve(self, batch_id: str) -> BatchInfo: ...
    # The provider's batches, newest first, back to those created before `since` (None: all of them).
    async def listing(self, since: float | None = None) -> list[BatchInfo]: ...
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
    data = [e if isinstance(e, dict) else _as_dict(e) for e in errors.get("data") or [] if e is not None]
    reasons = "; ".join(str(e.get("message") or e) for e in data)
    codes = tuple(str(e["code"]) for e in data if e.get("code"))
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
        error_codes=codes,
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
    limits = OPENAI_LIMITS

    def __init__(self, session: aiohttp.ClientSession, api_base: str, api_key: str) -> None:
        self._session = session
        self._base = api_base.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"}

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        async with self._session.request(method, self._base + path, headers=self._headers, **kwargs) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise HttpStatusError(resp.status, resp.headers, error_detail(raw), error_code(raw))
        return json_body(raw, path)

    async def upload(self, data: bytes) -> str:
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        # A file-like part, not raw bytes: aiohttp warns (ResourceWarning) on a raw part over 1 MiB, and
        # where warnings are errors (pytest's filterwarnings, `python -W error`) that warning failed the
        # upload ("Can not serialize value type: <class 'bytes'>") and every request of the batch.
        form.add_field("file", io.BytesIO(data), filename="requests.jsonl", content_type="application/jsonl")
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

    async def listing(self, since: float | None = None) -> list[BatchInfo]:
        async def page(after: str | None) -> Page:
            # 100: the most a page holds (OpenAI's limit ranges 1-100, default 20).
            params = {"limit": "100"} | ({"after": after} if after else {})
            return cursor_page(await self._json("GET", "/batches", params=params), "batch list", batch_info)

        return await list_back(page, since)

    async def content(self, file_id: str) -> bytes:
        async with self._session.get(f"{self._base}/files/{file_id}/content", headers=self._headers) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise HttpStatusError(resp.status, resp.headers, error_detail(raw), error_code(raw))
            return raw

    async def cancel(self, batch_id: str) -> BatchInfo:
        return batch_info(await self._json("POST", f"/batches/{batch_id}/cancel"))


class LiteLLMBatchClient:
    """The same operations through litellm.acreate_file / acreate_batch / aretrieve_batch / alist_batches /
    afile_content / acancel_batch, for `custom_llm_provider` (anthropic, vertex_ai, openai, ...)."""

    names_batches = True
    limits = OPENAI_LIMITS  # the openai provider's (the only one tested on this route)

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
        # LiteLLM's success hook downloads a completed batch's output file to price it, which the
        # endpoint downloads anyway: this flag turns that hook off, so each file is fetched once.
        quiet = {"litellm_metadata": {"batch_ignore_default_logging": True}}
        return batch_info(await self._litellm.aretrieve_batch(batch_id=batch_id, **self._kwargs, **quiet))

    async def listing(self, since: float | None = None) -> list[BatchInfo]:
        async def page(after: str | None) -> Page:
            reply = await self._litellm.alist_batches(limit=100, after=after, **self._kwargs)
            body = reply if isinstance(reply, dict) else _as_dict(reply)
            return cursor_page(body, "batch list", batch_info)

        return await list_back(page, since)

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


__all__ = [
    "OPENAI_LIMITS",
    "TERMINAL",
    "BatchClient",
    "BatchInfo",
    "BatchLimits",
    "BatchTooLarge",
    "LiteLLMBatchClient",
    "OpenAIBatchClient",
    "batch_info",
]
