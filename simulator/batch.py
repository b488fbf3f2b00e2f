"""The simulator's Batch API, shaped like OpenAI's: files and batches.

POST /v1/files (multipart, purpose=batch), GET /v1/files/{id}, GET /v1/files/{id}/content,
POST /v1/batches, GET /v1/batches (list), GET /v1/batches/{id}, POST /v1/batches/{id}/cancel.

A batch is worked out lazily, when it is read after its delay (`BatchSettings.delay_s`): each request
is answered by the same code as /v1/chat/completions (no latency, no rate limits), so a request gets
the same answer in a batch as alone. The per-request fault draw applies too: server errors and 429s
become error-file lines, content faults change the answer. Per batch, a seeded draw at create picks a
failure (status "failed", nothing answered) or an expiry (status "expired": the first share answered,
the rest "batch_expired" lines in the error file). State lives in memory: a client that dies and comes
back finds its batches, as with the real service.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from ifsweep.simulator.config import BatchSettings
from ifsweep.simulator.faults import error_body
from ifsweep.simulator.ledger import Submission, body_digest
from ifsweep.simulator.stats import SimStats

_JSON = "application/json"
# (status code, body) of one request, answered as /v1/chat/completions would; `fault` from the server's draw.
Answer = Callable[[bytes, str | None], tuple[int, dict[str, Any]]]


@dataclass(slots=True)
class _File:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int

    def obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass(slots=True)
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    window: str
    metadata: dict[str, Any] | None
    created: float  # monotonic
    created_at: int
    fate: str  # completed | failed | expired, drawn at create
    total: int
    why: str  # the failure's message
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    completed: int = 0
    failed: int = 0
    ended_at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Its lines in the ledger, in file order: marked answered or unanswered when the batch ends.
    submissions: list[Submission] = field(default_factory=list)

    def settle(self, answered: set[str]) -> None:
        for sub in self.submissions:
            sub.outcome = "answered" if sub.custom_id in answered else "unanswered"

    def obj(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": self.window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "in_progress_at": self.created_at,
            "expires_at": self.created_at + 86400,
            "completed_at": self.ended_at if self.status == "completed" else None,
            "failed_at": self.ended_at if self.status == "failed" else None,
            "expired_at": self.ended_at if self.status == "expired" else None,
            "cancelled_at": self.ended_at if self.status == "cancelled" else None,
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "metadata": self.metadata,
            **self.extra,
        }


class BatchAPI:
    """Files and batches of one simulator. `answer` answers one request body; `fault` draws the
    per-request fault; `settings` reads the current BatchSettings (they may change while serving)."""

    def __init__(
        self,
        answer: Answer,
        fault: Callable[[], str | None],
        settings: Callable[[], BatchSettings],
        stats: SimStats,
        seed: int,
    ) -> None:
        self._answer = answer
        self._fault = fault
        self._settings = settings
        self._stats = stats
        self._rng = random.Random(f"batch-{seed}")
        self._ids = itertools.count(1)
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}", self._file)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list)
        app.router.add_get("/v1/batches/{id}", self._retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)

    # --- files -------------------------------------------------------------------------------------
    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if not isinstance(purpose, str) or purpose not in (
            "batch",
            "batch_output",
            "assistants",
            "fine-tune",
        ):
            return _error(400, f"'purpose' must be 'batch', got {purpose!r}")
        if upload is None or isinstance(upload, str | bytes) or not hasattr(upload, "file"):
            return _error(400, "'file' must be a multipart file field")
        data = upload.file.read()
        if not isinstance(data, bytes):
            return _error(400, "'file' could not be read")
        f = self._new_file(purpose, str(getattr(upload, "filename", "") or "upload.jsonl"), data)
        return _ok(f.obj())

    def _new_file(self, purpose: str, filename: str, data: bytes) -> _File:
        f = _File(f"file-sim{next(self._ids):06d}", purpose, filename, data, int(time.time()))
        self.files[f.id] = f
        return f

    async def _file(self, request: web.Request) -> web.Response:
        f = self.files.get(request.match_info["id"])
        return _ok(f.obj()) if f is not None else _error(404, "no such file", "not_found_error")

    async def _content(self, request: web.Request) -> web.Response:
        f = self.files.get(request.match_info["id"])
        if f is None:
            return _error(404, "no such file", "not_found_error")
        return web.Response(body=f.data, content_type="application/octet-stream")

    # --- batches -----------------------------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.Response:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        f = self.files.get(str(body.get("input_file_id")))
        if f is None or f.purpose != "batch":
            return _error(400, f"input_file_id {body.get('input_file_id')!r} is no uploaded batch file")
        if body.get("endpoint") != "/v1/chat/completions":
            return _error(400, "the simulator batches only /v1/chat/completions")
        if body.get("completion_window") != "24h":
            return _error(400, "completion_window must be '24h'")
        metadata = body.get("metadata")
        fate = draw_fate(self._rng, self._settings())
        lines = [line for line in f.data.splitlines() if line.strip()]
        ids = [_custom_id(line) for line in lines]
        why = "simulated validation failure"
        if len(set(ids)) < len(ids):  # as OpenAI's validation does
            fate, why = "failed", "custom_id values must be unique within a batch"
        batch = _Batch(
            id=f"batch_sim{next(self._ids):06d}",
            input_file_id=f.id,
            endpoint="/v1/chat/completions",
            window="24h",
            metadata=metadata if isinstance(metadata, dict) else None,
            created=time.monotonic(),
            created_at=int(time.time()),
            fate=fate,
            total=len(lines),
            why=why,
        )
        self.batches[batch.id] = batch
        self._stats.batches_created += 1
        for custom_id, line in zip(ids, lines, strict=True):
            self._stats.batch_requests[custom_id] += 1
            batch.submissions.append(self._stats.ledger.submit(_body_digest(line), custom_id, batch.id))
        return _ok(batch.obj())

    async def _list(self, request: web.Request) -> web.Response:
        data = [self._advance(b).obj() for b in reversed(self.batches.values())]
        return _ok({"object": "list", "data": data, "has_more": False})

    async def _retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _error(404, "no such batch", "not_found_error")
        return _ok(self._advance(batch).obj())

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["id"])
        if batch is None:
            return _error(404, "no such batch", "not_found_error")
        self._advance(batch)
        if batch.status in ("validating", "in_progress"):
            batch.status, batch.ended_at, batch.completed = "cancelled", int(time.time()), 0
            batch.settle(set())
        return _ok(batch.obj())

    def _advance(self, batch: _Batch) -> _Batch:
        """Bring `batch` to where its delay says it is; work it out when the delay has passed."""
        if batch.status not in ("validating", "in_progress"):
            return batch
        done = progress(batch.created, self._settings().delay_s, batch.total)
        if done is not None:
            batch.status, batch.completed = "in_progress", done
            return batch
        batch.completed = 0
        batch.ended_at = int(time.time())
        if batch.fate == "failed":
            batch.status = "failed"
            batch.errors = [{"code": "invalid_request", "message": batch.why, "line": 1}]
            batch.settle(set())
            return batch
        self._work_out(batch)
        return batch

    def _work_out(self, batch: _Batch) -> None:
        lines = [line for line in self.files[batch.input_file_id].data.splitlines() if line.strip()]
        answered = len(lines)
        if batch.fate == "expired":
            answered = int(len(lines) * self._settings().expire_done_share)
        out: list[bytes] = []
        err: list[bytes] = []
        answered_ids: set[str] = set()
        for n, line in enumerate(lines):
            custom_id, status, payload = self._one(line, expired=n >= answered)
            record: dict[str, Any] = {"id": f"batch_req_{batch.id}_{n}", "custom_id": custom_id}
            if status == 0:
                record |= {"response": None, "error": payload}
                err.append(orjson.dumps(record))
            elif status == 200:
                record |= {
                    "response": {"status_code": 200, "request_id": f"req_{n}", "body": payload},
                    "error": None,
                }
                out.append(orjson.dumps(record))
                answered_ids.add(str(custom_id))
            else:
                record |= {
                    "response": {"status_code": status, "request_id": f"req_{n}", "body": payload},
                    "error": None,
                }
                err.append(orjson.dumps(record))
        batch.completed = sum(1 for _ in out)
        batch.failed = len(err)
        if out:
            batch.output_file_id = self._new_file("batch_output", "output.jsonl", b"\n".join(out) + b"\n").id
        if err:
            batch.error_file_id = self._new_file("batch_output", "errors.jsonl", b"\n".join(err) + b"\n").id
        batch.status = "expired" if batch.fate == "expired" else "completed"
        batch.settle(answered_ids)

    def _one(self, line: bytes, *, expired: bool) -> tuple[Any, int, dict[str, Any]]:
        """(custom_id, HTTP status or 0 for a request-level error, body or error object)."""
        try:
            req = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None, 0, {"code": "invalid_json", "message": "line is not JSON"}
        custom_id = req.get("custom_id") if isinstance(req, dict) else None
        if not isinstance(custom_id, str):
            return custom_id, 0, {"code": "invalid_request", "message": "custom_id must be a string"}
        if expired:
            return custom_id, 0, {"code": "batch_expired", "message": "not processed within the window"}
        body = req.get("body")
        if req.get("url") != "/v1/chat/completions" or not isinstance(body, dict):
            return (
                custom_id,
                400,
                error_body("url must be /v1/chat/completions with a body", "invalid_request_error"),
            )
        status, payload = self._answer(orjson.dumps(body), self._fault())
        return custom_id, status, payload


def draw_fate(rng: random.Random, settings: BatchSettings) -> str:
    """What becomes of a batch, drawn once at create: "failed", "expired" or "completed"."""
    draw = rng.random()
    if draw < settings.fail_rate:
        return "failed"
    return "expired" if draw < settings.fail_rate + settings.expire_rate else "completed"


def progress(created: float, delay_s: float, total: int) -> int | None:
    """Requests done by now of a batch created at `created` (monotonic) that takes `delay_s`; None
    once it is over."""
    elapsed = time.monotonic() - created
    return int(total * elapsed / delay_s) if elapsed < delay_s else None


def _custom_id(line: bytes) -> str:
    with contextlib.suppress(orjson.JSONDecodeError, AttributeError, TypeError):
        return str(orjson.loads(line).get("custom_id"))
    return "None"


def _body_digest(line: bytes) -> str:
    """The ledger's name of a batch line's request body, as for a chat request (an unreadable line is
    named by its own bytes)."""
    with contextlib.suppress(orjson.JSONDecodeError, AttributeError, TypeError):
        body = orjson.loads(line).get("body")
        if isinstance(body, dict):
            return body_digest(body)
    return hashlib.sha256(line).hexdigest()


def _ok(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type=_JSON)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.Response(status=status, body=orjson.dumps(error_body(message, kind)), content_type=_JSON)


__all__ = ["BatchAPI", "draw_fate", "progress"]
