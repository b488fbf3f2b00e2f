"""The providers' headers and version rules in the simulator, and ifsweep keeping them (issue 32, item
8, interactive routes): a key on every chat-completions and Messages request, Anthropic's
anthropic-version (pinned at 2023-06-01 by ifsweep, whose requests carry temperature / top_p / top_k,
which 2026-10-21 removes), request-id / x-request-id on every answer, and no Message without usage."""

from __future__ import annotations

from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from anthropic.types import ErrorResponse, Message
from capture import CaptureProxy

from ifsweep.providers.batch.anthropic import API_VERSION, AnthropicBatchClient
from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import EndpointSpec
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread

CHAT = {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, Any]:
    async def go() -> tuple[int, Any, Any]:
        async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers) as r:
            return r.status, await r.json(), r.headers

    return anyio.run(go)


def test_requests_without_a_key_or_an_anthropic_version_are_refused_as_the_providers_do() -> None:
    anthropic = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    with SimulatorThread() as sim:
        chat, messages = sim.base_url + "/chat/completions", sim.root_url + "/v1/messages"
        status, body, headers = _post(chat, CHAT, {})
        assert status == 401 and body["error"]["type"] == "invalid_request_error"
        assert headers["x-request-id"].startswith("req_")
        assert _post(chat, CHAT, {"Authorization": "Bearer "})[0] == 401
        status, body, headers = _post(messages, CHAT, {"anthropic-version": "2023-06-01"})
        assert status == 401 and ErrorResponse.model_validate(body).error.type == "authentication_error"
        assert headers["request-id"].startswith("req_")
        status, body, _ = _post(messages, CHAT, {"x-api-key": "k"})
        assert (status, body["error"]["message"]) == (400, "anthropic-version: header is required")
        assert _post(messages, CHAT, {"x-api-key": "k", "anthropic-version": "2099-01-01"})[0] == 400
        # 2026-10-21 removed the sampling parameters; 2023-06-01 takes them.
        sampled = {**CHAT, "temperature": 0}
        status, body, _ = _post(messages, sampled, {**anthropic, "anthropic-version": "2026-10-21"})
        assert status == 400 and "temperature" in body["error"]["message"]
        status, body, headers = _post(messages, sampled, anthropic)
        assert status == 200 and headers["request-id"] != ""
        ids = {_post(chat, CHAT, {"Authorization": "Bearer k"})[2]["x-request-id"] for _ in range(3)}
        assert len(ids) == 3  # each answer its own
    with SimulatorThread(SimConfig(lenient=frozenset({"auth", "api_version"}))) as sim:
        assert _post(sim.base_url + "/chat/completions", CHAT, {})[0] == 200
        assert _post(sim.root_url + "/v1/messages", CHAT, {})[0] == 200


def _request(method: str, url: str, headers: dict[str, str], body: Any = None) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        async with aiohttp.ClientSession() as s, s.request(method, url, json=body, headers=headers) as r:
            raw = await r.read()
            return r.status, orjson.loads(raw) if raw.startswith(b"{") else raw

    return anyio.run(go)


# Every batch route (issue 32): OpenAI's files and batches, Anthropic's Message Batches.
OPENAI_BATCH_ROUTES = (
    ("GET", "/files/file-nope"),
    ("GET", "/files/file-nope/content"),
    ("DELETE", "/files/file-nope"),
    ("POST", "/batches"),
    ("GET", "/batches"),
    ("GET", "/batches/batch_nope"),
    ("POST", "/batches/batch_nope/cancel"),
    ("POST", "/files"),
)
ANTHROPIC_BATCH_ROUTES = (
    ("POST", ""),
    ("GET", ""),
    ("GET", "/msgbatch_nope"),
    ("POST", "/msgbatch_nope/cancel"),
    ("GET", "/msgbatch_nope/results"),
)


def test_the_batch_routes_refuse_a_request_without_a_key_or_an_anthropic_version() -> None:
    """As the interactive routes: 401 without a key (OpenAI's body, Anthropic's authentication_error),
    400 without a known anthropic-version; with them, the route's own answer (here a 404 or 400 of
    its own, or a page). Before: the batch routes answered whatever was asked."""
    anthropic = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    with SimulatorThread() as sim:
        for method, path in OPENAI_BATCH_ROUTES:
            url = sim.base_url + path
            for headers in ({}, {"Authorization": "Bearer "}, {"x-api-key": "k"}):
                status, body = _request(method, url, headers)
                assert status == 401 and body["error"]["type"] == "invalid_request_error", (method, path)
            assert _request(method, url, {"Authorization": "Bearer k"})[0] != 401, (method, path)
        for method, path in ANTHROPIC_BATCH_ROUTES:
            url = sim.root_url + "/v1/messages/batches" + path
            status, body = _request(method, url, {"anthropic-version": "2023-06-01"})
            assert status == 401, (method, path)
            assert ErrorResponse.model_validate(body).error.type == "authentication_error"
            status, body = _request(method, url, {"x-api-key": "k"})
            assert (status, body["error"]["message"]) == (400, "anthropic-version: header is required")
            assert _request(method, url, {**anthropic, "anthropic-version": "2099-01-01"})[0] == 400
            status, body = _request(method, url, anthropic)
            assert status not in (401,) and "anthropic-version" not in str(body), (method, path)
        # What the routes answer with the headers: a page of no batches, a refusal of the empty create.
        assert _request("GET", sim.root_url + "/v1/messages/batches", anthropic)[1]["data"] == []
        assert _request("GET", sim.base_url + "/batches", {"Authorization": "Bearer k"})[1]["data"] == []
    with SimulatorThread(SimConfig(lenient=frozenset({"auth", "api_version"}))) as sim:
        assert _request("GET", sim.base_url + "/batches", {})[0] == 200
        assert _request("GET", sim.root_url + "/v1/messages/batches", {})[0] == 200


def test_a_message_batch_create_refuses_the_params_its_anthropic_version_removed() -> None:
    """As /v1/messages does: under 2026-10-21 a request's temperature / top_p / top_k is refused (400
    naming the request and the parameter); under 2023-06-01 the same batch is created. Before: created."""
    anthropic = {"x-api-key": "k", "anthropic-version": "2026-10-21"}
    url = ""

    def create(params: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, Any]:
        plain = {"custom_id": "a", "params": CHAT}
        return _post(url, {"requests": [plain, {"custom_id": "b", "params": {**CHAT, **params}}]}, headers)

    with SimulatorThread() as sim:
        url = sim.root_url + "/v1/messages/batches"
        for name in ("temperature", "top_p", "top_k"):
            status, body, _ = create({name: 0}, anthropic)
            assert status == 400, (name, body)
            assert ErrorResponse.model_validate(body).error.message.startswith(f"requests.1.params.{name}:")
        status, body, _ = create({}, anthropic)
        assert status == 200 and body["type"] == "message_batch"
        status, body, _ = create({"temperature": 0}, {**anthropic, "anthropic-version": "2023-06-01"})
        assert status == 200 and body["type"] == "message_batch"


@pytest.mark.parametrize("route", ["interactive", "batch"])
def test_ifsweeps_anthropic_requests_keep_the_pinned_version_with_their_sampling_parameters(
    route: str,
) -> None:
    """If the pin moved to 2026-10-21 while temperature is forwarded, the strict simulator refuses
    these requests and this test fails."""
    params = {"max_tokens": 400, "temperature": 0, "top_p": 0.5}
    with SimulatorThread() as sim, CaptureProxy(sim.root_url) as proxy:

        async def go() -> Any:
            if route == "interactive":
                spec = EndpointSpec(
                    "j", "anthropic/claude-sonnet-4-5", api_base=proxy.root_url, params=params
                )
                async with ProviderPool(budget=Budget(None)) as pool:
                    return (await pool.endpoint(spec).complete([{"role": "user", "content": "hi"}])).status
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatchClient(session, proxy.root_url, "k")
                body = {
                    "model": "claude-sonnet-4-5",
                    "messages": [{"role": "user", "content": "hi"}],
                    **params,
                }
                line = orjson.dumps({"custom_id": "c1", "body": body})
                return (await client.create(await client.upload(line), {})).status

        status = anyio.run(go)
        posts = [e for e in proxy.to("/v1/messages") if e.method == "POST"]
    assert status in ("ok", "in_progress", "completed")
    (sent,) = posts
    assert sent.status == 200, sent.response
    assert sent.headers["anthropic-version"] == API_VERSION == "2023-06-01"
    body = sent.json()
    carried = body if route == "interactive" else body["requests"][0]["params"]
    assert carried["temperature"] == 0 and carried["top_p"] == 0.5


def test_the_missing_usage_fault_leaves_anthropics_message_whole() -> None:
    """Anthropic never sends a Message without usage (its SDK requires it): the fault is OpenAI's."""
    config = SimConfig(faults=FaultRates(missing_usage=1.0))
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    with SimulatorThread(config) as sim:
        status, body, _ = _post(sim.root_url + "/v1/messages", CHAT, headers)
        assert status == 200
        assert Message.model_validate(body).usage.output_tokens > 0
        kind, message = sim.anthropic.answer_one(CHAT, "missing_usage")
        assert kind == "succeeded" and Message.model_validate(message).usage.input_tokens > 0
        status, body, _ = _post(sim.base_url + "/chat/completions", CHAT, {"Authorization": "Bearer k"})
        assert status == 200 and "usage" not in body  # where a provider can leave it out
