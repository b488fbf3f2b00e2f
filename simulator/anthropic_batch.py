"""The simulator's Message Batches, shaped like Anthropic's: requests inline, results as JSONL.

POST /v1/messages/batches (`{"requests": [{"custom_id", "params"}]}`), GET /v1/messages/batches (newest
first; `limit`, `before_id`, `after_id`), GET /v1/messages/batches/{id}, POST .../{id}/cancel, GET
.../{id}/results (the `results_url` of an ended batch). A batch object carries `processing_status`
(in_progress | canceling | ended), `request_counts` (processing, succeeded, errored, canceled, expired),
`created_at`, `expires_at` (24 h on), `ended_at`, `cancel_initiated_at`, `archived_at` and `results_url`.
As Anthropic documents: the counts are zero until the batch has ended ("zero until processing of the
entire Message Batch has ended"), a batch holds at most 100,000 requests and 256 MB, and with
`results_kept_s` an ended batch is archived that long after it ended (`archived_at` set, its results
404: "its results became unavailable").

As the OpenAI-shaped Batch API (simulator/batch.py): a batch is worked out when read after its delay,
each request answered as /v1/messages would answer it (no latency, no limits, the prefix cache in
request order, so the cache_control breakpoints of a batch's requests are read by its later requests),
with the per-request fault draw (server faults become `errored` results). Per batch a seeded draw picks
an expiry (`expire_rate`: the first `expire_done_share` answered, the rest `expired`) or, since a
Message Batch never fails whole, a batch whose every request is `errored` with api_error (`fail_rate`).
A cancelled batch ends with the requests done by then answered and the rest `canceled`.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson
from aiohttp import web

from ifsweep.simulator.batch import draw_fate, progress
from ifsweep.simulator.config import BatchSettings, SimConfig
from ifsweep.simulator.ledger import Submission, body_digest
from ifsweep.simulator.stats import SimStats

# ("succeeded", message) or ("errored", error) for one request's params; `fault` from the server's draw.
Answer = Callable[[Any, str | None], tuple[str, dict[str, Any]]]
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_MAX_REQUESTS = 100_000
_WINDOW = timedelta(hours=24)
_OUTCOMES = ("succeeded", "errored", "canceled", "expired")


class BatchServer(Protocol):
    """What Message Batches use of the server they are part of."""

    @property
    def config(self) -> SimConfig: ...
    @property
    def stats(self) -> SimStats: ...
    def draw_fault(self) -> tuple[str | None, int]: ...


def _rfc3339(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class _MessageBatch:
    id: str
    requests: list[dict[str, Any]]
    created: float  # monotonic
    created_at: datetime
    fate: str  # completed | failed | expired, drawn at create
    status: str = "in_progress"
    done: int = 0  # requests processed, while in progress
    results: bytes | None = None
    counts: dict[str, int] | None = None
    ended_at: datetime | None = None
    ended: float | None = None  # monotonic
    cancel_initiated_at: datetime | None = None
    # Its requests in the ledger, in order: marked answered or unanswered when the batch ends.
    submissions: list[Submission] = field(default_factory=list)

    def archived(self, kept_s: float | None) -> bool:
        return kept_s is not None and self.ended is not None and time.monotonic() - self.ended >= kept_s

    def obj(self, origin: str, kept_s: float | None = None) -> dict[str, Any]:
        counts = self.counts or {}  # zero until the batch has ended, as Anthropic's
        processing = len(self.requests) - sum(counts.values())
        ended = self.status == "ended"
        archived_at = None
        if self.ended_at is not None and kept_s is not None and self.archived(kept_s):
            archived_at = _rfc3339(self.ended_at + timedelta(seconds=kept_s))
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": {"processing": processing} | {k: counts.get(k, 0) for k in _OUTCOMES},
            "created_at": _rfc3339(self.created_at),
            "expires_at": _rfc3339(self.created_at + _WINDOW),
            "ended_at": _rfc3339(self.ended_at) if self.ended_at else None,
            "cancel_initiated_at": _rfc3339(self.cancel_initiated_at) if self.cancel_initiated_at else None,
            "archived_at": archived_at,
            "results_url": f"{origin}/v1/messages/batches/{self.id}/results" if ended else None,
        }


class MessageBatches:
    """Message Batches of one simulator. `answer` answers one request's params; `server` draws the
    per-request fault and holds the current BatchSettings (they may change while serving)."""

    def __init__(self, answer: Answer, server: BatchServer, seed: int) -> None:
        self._answer = answer
        self._server = server
        self._stats = server.stats
        self._rng = random.Random(f"message-batch-{seed}")
        self._ids = itertools.count(1)
        self.batches: dict[str, _MessageBatch] = {}

    def _settings(self) -> BatchSettings:
        return self._server.config.batch

    def _kept(self) -> float | None:
        return self._settings().results_kept_s

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages/batches", self._create)
        app.router.add_get("/v1/messages/batches", self._list)
        app.router.add_get("/v1/messages/batches/{id}", self._retrieve)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._cancel)
        app.router.add_get("/v1/messages/batches/{id}/results", self._results)

    async def _create(self, request: web.Request) -> web.Response:
        raw = await request.read()
        most = self._settings().anthropic_max_bytes
        if len(raw) > most:
            return _error(
                413, f"request is {len(raw)} bytes: a batch may be up to {most:,} bytes", "request_too_large"
            )
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _error(400, "request body is not JSON")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not 0 < len(requests) <= _MAX_REQUESTS:
            return _error(400, f"requests: must be a list of 1 to {_MAX_REQUESTS} requests")
        seen: set[str] = set()
        for n, r in enumerate(requests):
            custom_id = r.get("custom_id") if isinstance(r, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                return _error(400, f"requests.{n}.custom_id: 1-64 characters of [a-zA-Z0-9_-] required")
            if not isinstance(r.get("params"), dict):
                return _error(400, f"requests.{n}.params: must be an object")
            if custom_id in seen:
                return _error(400, f"requests.{n}.custom_id: {custom_id!r} is not unique within the batch")
            seen.add(custom_id)
        batch = _MessageBatch(
            id=f"msgbatch_sim{next(self._ids):06d}",
            requests=requests,
            created=time.monotonic(),
            created_at=datetime.now(UTC),
            fate=draw_fate(self._rng, self._settings()),
        )
        self.batches[batch.id] = batch
        self._stats.batches_created += 1
        for r in requests:
            self._stats.batch_requests[r["custom_id"]] += 1
            sub = self._stats.ledger.submit(body_digest(r["params"]), r["custom_id"], batch.id)
            batch.submissions.append(sub)
        return _ok(batch.obj(_origin(request), self._kept()))

    async def _list(self, request: web.Request) -> web.Response:
        newest = [self._advance(b) for b in reversed(self.batches.values())]
        try:
            limit = max(1, min(1000, int(request.query.get("limit", "20"))))
        except ValueError:
            return _error(400, "limit: must be an integer")
        ids = [b.id for b in newest]
        after, before = request.query.get("after_id"), request.query.get("before_id")
        if after in ids:
            newest = newest[ids.index(after) + 1 :]
        elif before in ids:
            newest = newest[: ids.index(before)][-limit:]
        page = newest[:limit]
        return _ok(
            {
                "data": [b.obj(_origin(request), self._kept()) for b in page],
                "has_more": len(newest) > len(page),
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            }
        )

    def _find(self, request: web.Request) -> _MessageBatch | None:
        batch = self.batches.get(request.match_info["id"])
        return self._advance(batch) if batch is not None else None

    async def _retrieve(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        return _ok(batch.obj(_origin(request), self._kept())) if batch is not None else _missing()

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        if batch is None:
            return _missing()
        if batch.status == "in_progress":
            batch.status, batch.cancel_initiated_at = "canceling", datetime.now(UTC)
        return _ok(batch.obj(_origin(request), self._kept()))

    async def _results(self, request: web.Request) -> web.Response:
        batch = self._find(request)
        if batch is None:
            return _missing()
        if batch.results is None:
            return _error(400, f"batch {batch.id} has not ended: its results are not available yet")
        if batch.archived(self._kept()):
            return _error(
                404, f"batch {batch.id} is archived: its results are no longer available", "not_found_error"
            )
        return web.Response(body=batch.results, content_type="application/binary")

    def _advance(self, batch: _MessageBatch) -> _MessageBatch:
        """Bring `batch` to where its delay says it is; work it out once it is over or cancelled."""
        if batch.status == "ended":
            return batch
        done = progress(batch.created, self._settings().delay_s, len(batch.requests))
        if batch.status == "canceling":
            self._work_out(batch, answered=batch.done, rest="canceled")
        elif done is not None:
            batch.done = done
        elif batch.fate == "expired":
            share = self._settings().expire_done_share
            self._work_out(batch, answered=int(len(batch.requests) * share), rest="expired")
        else:
            self._work_out(batch, answered=len(batch.requests), rest="expired")
        return batch

    def _work_out(self, batch: _MessageBatch, *, answered: int, rest: str) -> None:
        lines: list[bytes] = []
        counts = dict.fromkeys(_OUTCOMES, 0)
        for n, r in enumerate(batch.requests):
            result: dict[str, Any]
            if n >= answered:
                result = {"type": rest}
            elif batch.fate == "failed":
                error = {"type": "api_error", "message": "Internal server error (simulated batch)."}
                result = {"type": "errored", "error": {"type": "error", "error": error}}
            else:
                outcome, payload = self._answer(r["params"], self._server.draw_fault()[0])
                result = {"type": outcome, "message" if outcome == "succeeded" else "error": payload}
            counts[result["type"]] += 1
            batch.submissions[n].outcome = "answered" if result["type"] == "succeeded" else "unanswered"
            lines.append(orjson.dumps({"custom_id": r["custom_id"], "result": result}))
        batch.results = b"\n".join(lines) + b"\n"
        batch.counts, batch.status, batch.ended_at = counts, "ended", datetime.now(UTC)
        batch.ended = time.monotonic()


def _origin(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _ok(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


def _missing() -> web.Response:
    return _error(404, "no such message batch", "not_found_error")


__all__ = ["MessageBatches"]
