"""The simulator's Batch API, shaped like OpenAI's: files and batches.

POST /v1/files (multipart, purpose=batch), GET /v1/files/{id}, GET /v1/files/{id}/content, DELETE
/v1/files/{id}, POST /v1/batches, GET /v1/batches (list: newest first, `limit` 1-100, default 20,
`after`), GET /v1/batches/{id}, POST /v1/batches/{id}/cancel.

OpenAI's documented limits and states: a batch file up to 200 MB (a larger upload is refused) and 50,000
requests (a batch of more fails validation); with `enqueued_token_limit`, a batch whose prompt tokens
and those of its model's open batches exceed it fails with `token_limit_exceeded`; a cancel makes the
batch `cancelling` for `cancel_s`, then `cancelled` with the requests done by then in its output file;
with `results_kept_s`, an ended batch's output and error files are gone (404) that long after it ended.

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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from ifsweep.simulator.config import BatchSettings
from ifsweep.simulator.faults import QUOTA_MESSAGE, error_body
from ifsweep.simulator.ledger import Submission, body_digest
from ifsweep.simulator.stats import SimStats
from ifsweep.simulator.text import prompt_tokens

_JSON = "application/json"
# OpenAI's per-batch limits ("up to 50,000 requests, and can be up to 200 MB in size").
MAX_REQUESTS = 50_000
MAX_FILE_BYTES = 200_000_000
_OPEN = ("validating", "in_progress", "finalizing", "cancelling")
# (status code, body) of one request, answered as /v1/chat/completions would; `fault` from the server's draw.
Answer = Callable[[bytes, str | None], tuple[int, dict[str, Any]]]


@dataclass(slots=True)
class _File:
    id: str
    purpose: str
    filename: str
    data: bytes
    created_at: int
    expires: float | None = None  # monotonic: gone after this

    def obj(self) -> dict[str, Any]:
        left = None if self.expires is None else max(0.0, self.expires - time.monotonic())
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.data),
            "created_at": self.created_at,
            "expires_at": None if left is None else int(time.time() + left),
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
    code: str = "invalid_request"  # the failure's code
    invalid: bool = False  # refused by validation (duplicates, limits): failed at its first read
    model: str = ""
    tokens: int = 0  # prompt tokens of its requests (what OpenAI's enqueued-token limit counts)
    status: str = "validating"
    cancel_at: float | None = None  # monotonic, when a cancel was asked
    cancelled_done: int = 0  # requests done when the cancel was asked
    cancelling_at: int | None = None
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
            "cancelling_at": self.cancelling_at,
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
        self.downloads: Counter[str] = Counter()  # file contents served, by file id

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}", self._file)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_delete("/v1/files/{id}", self._delete)
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
        if len(data) > MAX_FILE_BYTES:
            return _error(400, f"file is {len(data)} bytes: a batch file may be up to 200 MB")
        f = self._new_file(purpose, str(getattr(upload, "filename", "") or "upload.jsonl"), data)
        return _ok(f.obj())

    def _new_file(self, purpose: str, filename: str, data: bytes) -> _File:
        f = _File(f"file-sim{next(self._ids):06d}", purpose, filename, data, int(time.time()))
        self.files[f.id] = f
        return f

    def _live(self, file_id: str) -> _File | None:
        """The file, unless it is gone (deleted, or expired: then deleted now)."""
        f = self.files.get(file_id)
        if f is not None and f.expires is not None and time.monotonic() >= f.expires:
            del self.files[file_id]
            return None
        return f

    async def _file(self, request: web.Request) -> web.Response:
        f = self._live(request.match_info["id"])
        return _ok(f.obj()) if f is not None else _error(404, "no such file", "not_found_error")

    async def _content(self, request: web.Request) -> web.Response:
        f = self._live(request.match_info["id"])
        if f is None:
            return _error(404, "no such file", "not_found_error")
        self.downloads[f.id] += 1
        return web.Response(body=f.data, content_type="application/octet-stream")

    async def _delete(self, request: web.Request) -> web.Response:
        f = self._live(request.match_info["id"])
        if f is None:
            return _error(404, "no such file", "not_found_error")
        del self.files[f.id]
        return _ok({"id": f.id, "object": "file", "deleted": True})

    # --- batches -----------------------------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.Response:
        if self._settings().no_credit:
            self._stats.faults["quota"] += 1  # each create refused so
            body = error_body(QUOTA_MESSAGE, "insufficient_quota", "insufficient_quota")
            return web.Response(status=429, body=orjson.dumps(body), content_type=_JSON)
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
        model, tokens = _model_tokens(lines)
        why, code = "simulated validation failure", "invalid_request"
        if len(set(ids)) < len(ids):  # as OpenAI's validation does
            fate, why = "failed", "custom_id values must be unique within a batch"
        elif len(lines) > MAX_REQUESTS:
            fate, why = (
                "failed",
                f"the input file holds {len(lines)} requests: a batch may hold {MAX_REQUESTS}",
            )
        elif (over := self._enqueued_over(model, tokens)) is not None:
            fate, why, code = "failed", over, "token_limit_exceeded"
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
            code=code,
            invalid=fate == "failed" and why != "simulated validation failure",
            model=model,
            tokens=tokens,
        )
        self.batches[batch.id] = batch
        self._stats.batches_created += 1
        for custom_id, line in zip(ids, lines, strict=True):
            self._stats.batch_requests[custom_id] += 1
            batch.submissions.append(self._stats.ledger.submit(_body_digest(line), custom_id, batch.id))
        return _ok(batch.obj())

    async def _list(self, request: web.Request) -> web.Response:
        """Newest first, `limit` (1-100, default 20) a page, `after` the id the next page starts after."""
        try:
            limit = int(request.query.get("limit", "20"))
        except ValueError:
            return _error(400, "limit: must be an integer")
        if not 1 <= limit <= 100:
            return _error(400, f"limit: must be between 1 and 100, got {limit}")
        newest = list(reversed(self.batches.values()))
        after = request.query.get("after")
        if after is not None:
            ids = [b.id for b in newest]
            if after not in ids:
                return _error(400, f"after: no batch {after!r}")
            newest = newest[ids.index(after) + 1 :]
        page = [self._advance(b).obj() for b in newest[:limit]]
        return _ok(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(newest) > limit,
            }
        )

    def _enqueued_over(self, model: str, tokens: int) -> str | None:
        """Why a batch of `tokens` prompt tokens for `model` is over the enqueued-token limit, if it is."""
        limit = self._settings().enqueued_token_limit
        if limit is None:
            return None
        enqueued = sum(
            b.tokens for b in self.batches.values() if b.model == model and self._advance(b).status in _OPEN
        )
        if enqueued + tokens <= limit:
            return None
        return (
            f"Enqueued token limit reached for {model} in organization org-sim. Limit: {limit:,} enqueued "
            "tokens. Please try again once some in_progress batches have been completed."
        )

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
            # "The batch will be in status cancelling for up to 10 minutes, before changing to
            # cancelled, where it will have partial results (if any) available in the output file."
            batch.status, batch.cancel_at, batch.cancelled_done = (
                "cancelling",
                time.monotonic(),
                batch.completed,
            )
            batch.cancelling_at = int(time.time())
        return _ok(batch.obj())

    def _advance(self, batch: _Batch) -> _Batch:
        """Bring `batch` to where its delay says it is; work it out when the delay has passed."""
        if batch.status == "cancelling" and batch.cancel_at is not None:
            if time.monotonic() - batch.cancel_at >= self._settings().cancel_s:
                batch.ended_at = int(time.time())
                self._work_out(batch, batch.cancelled_done, "cancelled")
            return batch
        if batch.status not in ("validating", "in_progress"):
            return batch
        done = progress(batch.created, self._settings().delay_s, batch.total)
        if done is not None and not batch.invalid:
            batch.status, batch.completed = "in_progress", done
            return batch
        batch.completed = 0
        batch.ended_at = int(time.time())
        if batch.fate == "failed":
            batch.status = "failed"
            batch.errors = [{"code": batch.code, "message": batch.why, "line": None}]
            batch.settle(set())
            return batch
        expired = batch.fate == "expired"
        share = self._settings().expire_done_share if expired else 1.0
        self._work_out(batch, int(batch.total * share), "expired" if expired else "completed")
        return batch

    def _work_out(self, batch: _Batch, answered: int, end: str) -> None:
        """End `batch` as `end`: its first `answered` requests answered, the rest `batch_expired` lines
        when it expired, no line at all when it was cancelled."""
        lines = [line for line in self.files[batch.input_file_id].data.splitlines() if line.strip()]
        out: list[bytes] = []
        err: list[bytes] = []
        answered_ids: set[str] = set()
        for n, line in enumerate(lines):
            if n >= answered and end == "cancelled":
                break
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
        kept = self._settings().results_kept_s
        for lines_of, name, attr in (
            (out, "output.jsonl", "output_file_id"),
            (err, "errors.jsonl", "error_file_id"),
        ):
            if lines_of:
                f = self._new_file("batch_output", name, b"\n".join(lines_of) + b"\n")
                f.expires = None if kept is None else time.monotonic() + kept
                setattr(batch, attr, f.id)
        batch.status = end
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


def _model_tokens(lines: list[bytes]) -> tuple[str, int]:
    """The model a batch's requests name (the first line's), and their prompt tokens."""
    model, tokens = "", 0
    for line in lines:
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError, TypeError):
            body = orjson.loads(line).get("body") or {}
            model = model or str(body.get("model") or "")
            messages = body.get("messages")
            tokens += prompt_tokens(messages) if isinstance(messages, list) else 0
    return model, tokens


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
