"""The batch routes against references nobody here wrote (issue 32): the official SDKs' types.

A capture proxy on 127.0.0.1 stands between ifsweep's batch clients and the simulator and keeps every
exchange. Every response the simulator gives on the batch routes (files, batches and their lists, the
output and error lines, Message Batches, their lists and results, their errors) validates with the
SDK's pydantic models (`model_validate`: each required field there, each status a known literal), and
names no field the model does not know. Every request ifsweep sends on the OpenAI batch route (over
aiohttp and over LiteLLM) and on Anthropic's Message Batches validates against the SDK's param types
(pydantic TypeAdapter over the TypedDicts, no key they do not know) plus the documented rules the types
cannot say (purpose batch, custom_id shapes, limits of a list page, the headers)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email.parser import BytesParser
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from aiohttp import web
from pydantic import BaseModel, TypeAdapter
from test_batch_provider_rules import CLAUDE, ask, claude_spec, intent, jsonl, openai_line, openai_spec

from ifsweep.providers.batch.anthropic import API_VERSION, AnthropicBatchClient
from ifsweep.providers.batch.clients import BatchClient, LiteLLMBatchClient, OpenAIBatchClient
from ifsweep.providers.batch.endpoint import MemoryJournal
from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import BatchPolicy, EndpointSpec
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings, FaultRates

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

POLICY = BatchPolicy(max_requests=3, max_age_s=0.05, poll_s=0.05, poll_max_s=0.1, max_retries=1)
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Under the pinned anthropic-version 2023-06-01 these are Messages parameters; anthropic 2.15.0's
# TypedDict (written for 2026-10-21, which removes them) no longer lists them.
_OLD_VERSION_KEYS = frozenset({"temperature", "top_p", "top_k"})


@dataclass(slots=True)
class Exchange:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    status: int = 0
    answer: bytes = b""


@dataclass(slots=True)
class Capture:
    """A proxy to `target` (the simulator's root) that keeps every exchange."""

    target: str
    seen: list[Exchange] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        ex = Exchange(request.method, request.path, dict(request.query), dict(request.headers), body)
        self.seen.append(ex)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                request.method, self.target + request.path_qs, headers=headers, data=body
            ) as resp,
        ):
            ex.status, ex.answer = resp.status, await resp.read()
            return web.Response(status=resp.status, body=ex.answer, content_type=resp.content_type)


async def proxied(capture: Capture, body: Callable[[], Any]) -> Any:
    app = web.Application(client_max_size=300_000_000)
    app.router.add_route("*", "/{tail:.*}", capture.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    capture.url = f"http://127.0.0.1:{port}"
    try:
        return await body()
    finally:
        await runner.cleanup()


# ------------------------------------------------------------------------------------ the checks


def strict(model: type[BaseModel], raw: Any, where: str) -> BaseModel:
    """`raw` as the SDK's model, naming no field the model does not know."""
    obj = model.model_validate(raw)
    unknown = set(raw) - set(model.model_fields) if isinstance(raw, dict) else set()
    assert not unknown, f"{where}: fields {model.__name__} does not know: {sorted(unknown)}"
    return obj


def params(td: Any, value: Any, where: str, also: frozenset[str] = frozenset()) -> None:
    """`value` valid as the SDK's TypedDict `td`, with no key it does not know (but `also`)."""
    TypeAdapter(td).validate_python(value)
    known = td.__required_keys__ | td.__optional_keys__ | also
    assert isinstance(value, dict) and not set(value) - known, f"{where}: unknown {set(value) - known}"


def lines(raw: bytes) -> Iterator[Any]:
    return (orjson.loads(x) for x in raw.splitlines() if x.strip())


def check_openai_response(ex: Exchange) -> str:
    """Validate one OpenAI-shaped answer; its kind, for the test's tally."""
    from openai.types import Batch, BatchError, FileDeleted, FileObject
    from openai.types.chat import ChatCompletion
    from openai.types.shared import ErrorObject

    where = f"{ex.method} {ex.path} -> {ex.status}"
    if ex.status >= 300:
        body = orjson.loads(ex.answer)
        assert set(body) == {"error"}, where
        strict(ErrorObject, body["error"], where)
        return "error"
    if ex.path.endswith("/content"):
        for rec in lines(ex.answer):
            # OpenAPI BatchRequestOutput: id, custom_id, response {status_code, request_id, body}, error.
            assert set(rec) == {"id", "custom_id", "response", "error"}, where
            if rec["error"] is not None:
                strict(BatchError, rec["error"], where)
            else:
                response = rec["response"]
                assert set(response) == {"status_code", "request_id", "body"}, where
                if response["status_code"] == 200:
                    strict(ChatCompletion, response["body"], where)
                else:
                    strict(ErrorObject, response["body"]["error"], where)
        return "lines"
    body = orjson.loads(ex.answer)
    if ex.path.startswith("/v1/files"):
        strict(FileDeleted if ex.method == "DELETE" else FileObject, body, where)
        return "file"
    if ex.method == "GET" and ex.path == "/v1/batches":
        assert set(body) == {"object", "data", "first_id", "last_id", "has_more"}, where
        # SyncCursorPage's fields, with the spec's ListBatchesResponse ids.
        assert isinstance(body["has_more"], bool) and body["object"] == "list", where
        ids = [b["id"] for b in body["data"]]
        assert (body["first_id"], body["last_id"]) == ((ids[0], ids[-1]) if ids else (None, None)), where
        for b in body["data"]:
            strict(Batch, b, where)
        return "list"
    return "batch:" + str(strict(Batch, body, where).status)  # type: ignore[attr-defined]


def check_openai_request(ex: Exchange) -> None:
    """Validate one request of the OpenAI batch route against the SDK's params and the spec's rules."""
    from openai.types import batch_create_params, batch_list_params
    from openai.types.chat import completion_create_params

    where = f"{ex.method} {ex.path}"
    assert ex.headers.get("Authorization", "").startswith("Bearer "), where
    if ex.method == "POST" and ex.path == "/v1/files":
        parts = multipart(ex)
        assert parts["purpose"][0] == b"batch", where
        data, filename = parts["file"]
        assert filename and filename.endswith(".jsonl")
        ids = []
        for rec in lines(data):
            # OpenAPI BatchRequestInput: custom_id, method POST, url, body (a chat request).
            assert set(rec) == {"custom_id", "method", "url", "body"}, where
            assert rec["method"] == "POST" and rec["url"] == "/v1/chat/completions", where
            params(completion_create_params.CompletionCreateParamsNonStreaming, rec["body"], where)
            ids.append(rec["custom_id"])
        assert len(set(ids)) == len(ids) and len(ids) <= 50_000 and len(data) <= 200_000_000, where
    elif ex.method == "POST" and ex.path == "/v1/batches":
        body = orjson.loads(ex.body)
        params(batch_create_params.BatchCreateParams, body, where)
        assert body["endpoint"] == "/v1/chat/completions" and body["completion_window"] == "24h"
        meta = body.get("metadata") or {}
        assert len(meta) <= 16 and all(len(k) <= 64 and len(v) <= 512 for k, v in meta.items()), where
    elif ex.method == "GET" and ex.path == "/v1/batches":
        query: dict[str, Any] = dict(ex.query)
        if "limit" in query:
            query["limit"] = int(query["limit"])
            assert 1 <= query["limit"] <= 100, where
        params(batch_list_params.BatchListParams, query, where)
    else:
        assert ex.method in ("GET", "POST") and re.fullmatch(
            r"/v1/(batches/[\w-]+(/cancel)?|files/[\w-]+(/content)?)", ex.path
        ), where
        assert not ex.body or ex.method == "POST", where


def multipart(ex: Exchange) -> dict[str, tuple[bytes, str | None]]:
    head = b"Content-Type: " + ex.headers["Content-Type"].encode() + b"\r\n\r\n"
    msg = BytesParser().parsebytes(head + ex.body)
    out = {}
    for part in msg.get_payload():  # type: ignore[union-attr]
        name = part.get_param("name", header="content-disposition")
        out[str(name)] = (part.get_payload(decode=True), part.get_filename())
    return out


def check_anthropic_response(ex: Exchange) -> str:
    from anthropic.types import ErrorResponse
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

    where = f"{ex.method} {ex.path} -> {ex.status}"
    if ex.status >= 300:
        strict(ErrorResponse, orjson.loads(ex.answer), where)
        return "error"
    if ex.path.endswith("/results"):
        kinds = {strict(MessageBatchIndividualResponse, rec, where).result.type for rec in lines(ex.answer)}  # type: ignore[attr-defined]
        return "results:" + ",".join(sorted(kinds))
    body = orjson.loads(ex.answer)
    if ex.method == "GET" and ex.path == "/v1/messages/batches":
        assert set(body) == {"data", "has_more", "first_id", "last_id"}, where
        for b in body["data"]:
            strict(MessageBatch, b, where)
        return "list"
    batch = strict(MessageBatch, body, where)
    return "batch:" + str(batch.processing_status) + (":archived" if batch.archived_at else "")  # type: ignore[attr-defined]


def check_anthropic_request(ex: Exchange) -> None:
    from anthropic.types import message_create_params
    from anthropic.types.messages import batch_create_params, batch_list_params

    where = f"{ex.method} {ex.path}"
    assert ex.headers.get("x-api-key") and ex.headers.get("anthropic-version") == API_VERSION, where
    if ex.method == "POST" and ex.path == "/v1/messages/batches":
        body = orjson.loads(ex.body)
        params(batch_create_params.BatchCreateParams, body, where)
        requests = body["requests"]
        assert 1 <= len(requests) <= 100_000 and len(ex.body) <= 256_000_000, where
        ids = [r["custom_id"] for r in requests]
        assert len(set(ids)) == len(ids) and all(_CUSTOM_ID.match(i) for i in ids), where
        also = _OLD_VERSION_KEYS if API_VERSION == "2023-06-01" else frozenset()
        for r in requests:
            params(message_create_params.MessageCreateParamsNonStreaming, r["params"], where, also)
            assert r["params"]["max_tokens"] > 0, where
    elif ex.method == "GET" and ex.path == "/v1/messages/batches":
        query: dict[str, Any] = dict(ex.query)
        if "limit" in query:
            query["limit"] = int(query["limit"])
            assert 1 <= query["limit"] <= 1000, where
        params(batch_list_params.BatchListParams, query, where)
    else:
        assert re.fullmatch(r"/v1/messages/batches/[\w-]+(/cancel|/results)?", ex.path), where


# ------------------------------------------------------------------------------------ the routes


async def drive(spec: EndpointSpec, journal: MemoryJournal, keys: list[str]) -> None:
    """The endpoint's whole cycle for `keys` (collect, upload, create, poll, download; the lookup of
    the journal's lost create first)."""
    async with ProviderPool(budget=Budget(None), journal=journal) as pool:
        endpoint = pool.caller(spec)
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run_batches)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as calls:
                    for k in keys:
                        calls.start_soon(ask(k, f"say {k}"), endpoint)
            tg.cancel_scope.cancel()


async def openai_fates(client: BatchClient, sim: SimulatorThread, base: str) -> None:
    """Batches the endpoint's sweep did not meet: failed (validation, queue), expired, cancelled with
    partial results, a deleted file, an unknown batch."""
    data = jsonl(*(openai_line(f"f{i}") for i in range(4)))
    for settings in (
        BatchSettings(fail_rate=1.0),
        BatchSettings(expire_rate=1.0),
        BatchSettings(enqueued_token_limit=1),
    ):
        sim.set_config(SimConfig(seed=5, batch=settings))
        info = await client.retrieve((await client.create(await client.upload(data), {})).id)
        for f in (info.output_file_id, info.error_file_id):
            if f:
                await client.content(f)
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=4.0, cancel_s=0.1)))
    created = await client.create(await client.upload(data), {})
    for _ in range(100):  # some done before the cancel
        if (await client.retrieve(created.id)).completed:
            break
        await anyio.sleep(0.1)
    await client.cancel(created.id)
    for _ in range(100):
        if (done := await client.retrieve(created.id)).status != "cancelling":
            break
        await anyio.sleep(0.1)
    assert done.status == "cancelled" and done.output_file_id
    await client.content(done.output_file_id)
    async with aiohttp.ClientSession() as session:
        for method, path in (
            ("GET", f"/files/{done.output_file_id}"),
            ("DELETE", f"/files/{done.output_file_id}"),
            ("GET", f"/files/{done.output_file_id}/content"),
            ("GET", "/batches/batch_nope"),
            ("GET", "/batches?limit=2"),
        ):
            async with session.request(method, base + path, headers={"Authorization": "Bearer k"}) as r:
                await r.read()


def faulty(**batch: Any) -> SimConfig:
    """Request lines answered 5xx and 429 besides 200s."""
    return SimConfig(
        seed=5, batch=BatchSettings(**batch), faults=FaultRates(server_error=0.2, rate_limit=0.2)
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.parametrize("route", ["aiohttp", "litellm"])
def test_openai_batch_route_requests_and_every_simulator_answer_match_the_sdk(route: str) -> None:
    import gc
    import time

    with SimulatorThread(faulty(delay_s=0.1)) as sim:
        capture = Capture(sim.root_url)

        async def go() -> None:
            base = capture.url + "/v1"
            spec = dataclasses.replace(
                openai_spec(sim, POLICY), api_base=base, force_litellm=route == "litellm"
            )
            journal = MemoryJournal()
            journal.append(intent("m", "openai/sim-m", ["lost"], "file-none", time.time()))
            await drive(spec, journal, [f"k{i}" for i in range(7)])
            if route == "litellm":
                client: BatchClient = LiteLLMBatchClient("openai", base, "sk-test")
                await openai_fates(client, sim, base)
            else:
                async with aiohttp.ClientSession() as session:
                    await openai_fates(OpenAIBatchClient(session, base, "sk-test"), sim, base)

        anyio.run(proxied, capture, go)
    seen = capture.seen
    assert seen
    kinds = {check_openai_response(ex) for ex in seen}
    for ex in seen:
        if ex.method != "DELETE":  # the test's own delete, not ifsweep's request
            check_openai_request(ex)
    assert {"file", "list", "lines", "error", "batch:completed", "batch:failed", "batch:expired"} <= kinds
    assert {"batch:cancelling", "batch:cancelled", "batch:in_progress"} & kinds
    posted = [ex for ex in seen if ex.method == "POST" and ex.path == "/v1/batches"]
    assert len(posted) >= 3  # the sweep's batches of at most 3 requests, and the fates'
    gc.collect()


def test_anthropic_batch_route_requests_and_every_simulator_answer_match_the_sdk() -> None:
    import time

    with SimulatorThread(faulty(delay_s=0.1)) as sim:
        capture = Capture(sim.root_url)

        async def go() -> None:
            spec = dataclasses.replace(
                claude_spec(sim, POLICY), api_base=capture.url, params={"max_tokens": 512, "temperature": 0}
            )
            journal = MemoryJournal()
            journal.append(intent("j", CLAUDE, ["lost"], "inline-none", time.time()))
            await drive(spec, journal, [f"k{i}" for i in range(7)])
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatchClient(session, capture.url, "sk-ant")
                data = jsonl(*(openai_line(f"f{i}") for i in range(4)))
                for settings in (BatchSettings(expire_rate=1.0), BatchSettings(fail_rate=1.0)):
                    sim.set_config(SimConfig(seed=5, batch=settings))
                    await client.content((await client.create(await client.upload(data), {})).id)
                sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=30)))
                created = await client.create(await client.upload(data), {})
                await client.cancel(created.id)
                await client.content(created.id)
                sim.set_config(SimConfig(seed=5, batch=BatchSettings(results_kept_s=0.0)))
                archived = await client.retrieve(created.id)
                assert archived.results_gone
                with pytest.raises(Exception, match="404"):
                    await client.content(created.id)
                await client.listing()

        anyio.run(proxied, capture, go)
    seen = capture.seen
    kinds = {check_anthropic_response(ex) for ex in seen}
    for ex in seen:
        check_anthropic_request(ex)
    assert {"list", "error", "batch:in_progress", "batch:canceling", "batch:ended:archived"} <= kinds
    results = ",".join(k for k in kinds if k.startswith("results:"))
    assert all(t in results for t in ("succeeded", "errored", "expired", "canceled")), kinds
