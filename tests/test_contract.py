"""Contract tests against references nobody here wrote (issue 32): the official `openai` and `anthropic`
SDKs (pinned in the dev extra). Non-batch routes: every answer the simulator can give on chat
completions and Messages (each fault, errors, limits, the cache) validates with the SDK's pydantic
models (`model_validate`: every required field, every literal known, no field the model lacks); every
request ifsweep sends on the fast path, through LiteLLM and to Anthropic interactively, captured on
the wire by a sweep, validates against the SDK's request TypedDicts plus the documented rules the
types cannot say (keys, versions, non-empty content, breakpoints)."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, get_type_hints

import aiohttp
import anyio
import pytest
from anthropic.types import ErrorResponse, Message
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from capture import CaptureProxy, Exchange
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.shared import ErrorObject
from pydantic import BaseModel, TypeAdapter
from sweeps import toml_config

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread
from ifsweep.simulator.config import FAULT_NAMES
from ifsweep.simulator.server import CLIENT_HEADERS

# Faults that break the HTTP exchange itself have no body to validate (tests/test_simulator.py).
NO_BODY = {"malformed", "cut_body", "reset", "hang", "trickle"}
JSON_FAULTS = [f for f in FAULT_NAMES if f not in NO_BODY]
PROMPT = [{"role": "user", "content": "Write two sentences about rivers."}]
LONG = "The shared judging context repeats here. " * 300  # past every cache minimum
# Anthropic 2023-06-01 takes these; the current SDK's types (written for 2026-10-21) no longer list them.
SAMPLING_2023 = {"temperature", "top_p", "top_k"}


def _unknown(model: BaseModel, where: str = "") -> list[str]:
    """Fields of `model` (and the models inside it) that the SDK's type does not declare."""
    out = [f"{where}{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        value = getattr(model, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, BaseModel):
                out += _unknown(item, f"{where}{name}.")
    return out


def _validate(model: type[BaseModel], body: Any) -> BaseModel:
    parsed = model.model_validate(body)
    assert _unknown(parsed) == [], (model.__name__, body)
    return parsed


def _post(url: str, body: Any, headers: dict[str, str] = CLIENT_HEADERS) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        async with aiohttp.ClientSession(headers=headers) as s, s.post(url, json=body) as r:
            return r.status, await r.json(content_type=None)

    return anyio.run(go)


def _chat_answer(status: int, body: Any) -> None:
    if status == 200:
        _validate(ChatCompletion, body)
    else:
        assert set(body) == {"error"}, body
        _validate(ErrorObject, body["error"])


def _message_answer(status: int, body: Any) -> None:
    if status == 200:
        _validate(Message, body)
    else:
        _validate(ErrorResponse, body)


@pytest.mark.parametrize("fault", [None, *JSON_FAULTS])
def test_every_chat_completion_and_message_the_simulator_gives_validates_with_the_sdks(
    fault: str | None,
) -> None:
    faults = FaultRates(**{fault: 1.0}) if fault else FaultRates()
    with SimulatorThread(SimConfig(faults=faults)) as sim:
        status, body = _post(sim.base_url + "/chat/completions", {"model": "m", "messages": PROMPT})
        _chat_answer(status, body)
        anthropic = {"model": "claude-x", "max_tokens": 400, "messages": PROMPT}
        status, body = _post(sim.root_url + "/v1/messages", anthropic)
        _message_answer(status, body)
        # Each result a Message Batch can carry: succeeded (a Message) or errored (an error body).
        kind, answer = sim.anthropic.answer_one(anthropic, fault)
        _message_answer(200 if kind == "succeeded" else 400, answer)


def test_errors_limits_and_cache_answers_validate_with_the_sdks() -> None:
    too_long = SimConfig(context_window=50)
    limited = SimConfig(rpm=1, burst_s=1)
    with SimulatorThread(too_long) as sim:
        chat_long = {"model": "m", "messages": [{"role": "user", "content": LONG}]}
        status, body = _post(sim.base_url + "/chat/completions", chat_long)
        assert status == 400 and body["error"]["code"] == "context_length_exceeded"
        _chat_answer(status, body)
        status, body = _post(sim.root_url + "/v1/messages", {**chat_long, "max_tokens": 5})
        assert status == 400
        _message_answer(status, body)
    with SimulatorThread(limited) as sim:
        answers = [
            _post(sim.base_url + "/chat/completions", {"model": "m", "messages": PROMPT}) for _ in range(3)
        ]
        assert 429 in {s for s, _ in answers}
        for status, body in answers:
            _chat_answer(status, body)
        anthropic = {"model": "c", "max_tokens": 50, "messages": PROMPT}
        answers = [_post(sim.root_url + "/v1/messages", anthropic) for _ in range(3)]
        assert 429 in {s for s, _ in answers}
        for status, body in answers:
            _message_answer(status, body)
    with SimulatorThread() as sim:
        # Refusals: a bad body, a reasoning model's max_tokens, five breakpoints, no version.
        _chat_answer(*_post(sim.base_url + "/chat/completions", {"model": "m"}))
        reasoning = {"model": "o3-mini", "max_tokens": 5, "messages": PROMPT}
        status, body = _post(sim.base_url + "/chat/completions", reasoning)
        assert status == 400 and _validate(ErrorObject, body["error"]).param == "max_tokens"
        marked = [
            {"type": "text", "text": f"{i} {LONG}", "cache_control": {"type": "ephemeral"}} for i in range(5)
        ]
        five = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": marked}]}
        status, body = _post(sim.root_url + "/v1/messages", five)
        assert status == 400
        _message_answer(status, body)
        # No key, no version, an unknown version, a parameter the version removed.
        status, body = _post(sim.base_url + "/chat/completions", {"model": "m", "messages": PROMPT}, {})
        assert status == 401
        _chat_answer(status, body)
        anthropic = {"model": "c", "max_tokens": 50, "messages": PROMPT, "temperature": 0}
        for headers in ({}, {"x-api-key": "k"}, {"x-api-key": "k", "anthropic-version": "1999-01-01"}):
            status, body = _post(sim.root_url + "/v1/messages", anthropic, headers)
            assert status in (400, 401)
            _message_answer(status, body)
        status, body = _post(
            sim.root_url + "/v1/messages", anthropic, {**CLIENT_HEADERS, "anthropic-version": "2026-10-21"}
        )
        assert status == 400
        _message_answer(status, body)
        # The cache, both protocols: a long prefix twice reads it the second time.
        cached = {"model": "m", "messages": [{"role": "user", "content": LONG + "one"}]}
        _post(sim.base_url + "/chat/completions", cached)
        status, body = _post(
            sim.base_url + "/chat/completions",
            {**cached, "messages": [{"role": "user", "content": LONG + "two"}]},
        )
        usage = _validate(ChatCompletion, body).usage  # type: ignore[attr-defined]
        assert usage.prompt_tokens_details.cached_tokens > 0
        block = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
        for tail in ("one", "two"):
            msg = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 400,
                "messages": [{"role": "user", "content": [*block, {"type": "text", "text": tail}]}],
            }
            status, body = _post(sim.root_url + "/v1/messages", msg)
        read = _validate(Message, body).usage.cache_read_input_tokens  # type: ignore[attr-defined]
        assert read and read > 0


# ------------------------------------------------------------------------------------ requests


def _sweep(out: Path, proxy: CaptureProxy) -> str:
    """CFBench and InFoBench (a multi-turn judge) answered by a fast-path model, a LiteLLM one and an
    Anthropic one, judged by an Anthropic judge whose empty replies go back to it; all through `proxy`."""
    data = {n: benchmarks.get(n).fixture_dir() for n in ("cfbench", "infobench")}
    text = toml_config(
        out, proxy.base_url, models=("alpha", "beta", "gamma"), bench=tuple(data), data=data, limit=2
    )
    text = text.replace('id = "beta"', 'id = "beta"\nuse_litellm = true')
    text = text.replace(
        f'model = "openai/sim-gamma"\napi_base = "{proxy.base_url}"',
        f'model = "anthropic/claude-haiku-4-5"\napi_base = "{proxy.root_url}"',
    )
    params = "params = { max_tokens = 300, temperature = 0 }"
    judge = f'model = "anthropic/claude-sonnet-4-5"\napi_base = "{proxy.root_url}"\n{params}'
    return text.replace(f'model = "openai/sim-judge"\napi_base = "{proxy.base_url}"', judge)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> list[Exchange]:
    tmp = tmp_path_factory.mktemp("contract")
    config = SimConfig(seed=2, faults=FaultRates(empty=0.2, rate_limit=0.05))
    with SimulatorThread(config) as sim, CaptureProxy(sim.root_url) as proxy:
        cfg = tmp / "s.toml"
        cfg.write_text(_sweep(tmp / "run", proxy))
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()) as err:
            code = main(["run", str(cfg)])
        exchanges = list(proxy.exchanges)
    assert code == 0, err.getvalue()[-2000:]
    assert json.loads((tmp / "run" / "summary.json").read_text())["status"] == "complete"
    return exchanges


def _keys(typed: Any) -> set[str]:
    return set(get_type_hints(typed))


def _drained(value: Any) -> Any:
    """pydantic validates an Iterable field lazily: walk it so that every item is validated."""
    if isinstance(value, dict):
        return {k: _drained(v) for k, v in value.items()}
    if isinstance(value, list | tuple | str | int | float | bool) or value is None:
        return value
    return [_drained(v) for v in value]


def test_every_chat_request_ifsweep_sends_validates_against_openais_params(captured: list[Exchange]) -> None:
    chats = [e for e in captured if e.path == "/v1/chat/completions"]
    by_path = {"fast": 0, "litellm": 0}
    adapter = TypeAdapter(CompletionCreateParamsNonStreaming)
    for e in chats:
        body = e.json()
        _drained(adapter.validate_python(body))
        assert set(body) <= _keys(CompletionCreateParamsNonStreaming), set(body) - _keys(
            CompletionCreateParamsNonStreaming
        )
        assert e.headers["authorization"].startswith("Bearer ") and e.headers["content-type"].startswith(
            "application/json"
        )
        by_path[
            "litellm"
            if "litellm" in e.headers.get("user-agent", "").lower() or body["model"] == "sim-beta"
            else "fast"
        ] += 1
    assert by_path["fast"] > 0 and by_path["litellm"] > 0


def test_every_messages_request_ifsweep_sends_validates_against_anthropics_params_and_rules(
    captured: list[Exchange],
) -> None:
    sent = [e for e in captured if e.path == "/v1/messages" and e.method == "POST"]
    assert sent
    adapter = TypeAdapter(MessageCreateParamsNonStreaming)
    known = _keys(MessageCreateParamsNonStreaming)
    assistant_turns = 0
    for e in sent:
        body = e.json()
        assert e.headers["x-api-key"] and e.headers["anthropic-version"] == "2023-06-01"
        # The sampling parameters only under the version that takes them (checked above).
        _drained(adapter.validate_python({k: v for k, v in body.items() if k not in SAMPLING_2023}))
        assert set(body) <= known | SAMPLING_2023, set(body) - known
        assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
        assert body["messages"][0]["role"] == "user"
        marks = 0
        for n, m in enumerate(body["messages"]):
            blocks = (
                m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            )
            final_assistant = n == len(body["messages"]) - 1 and m["role"] == "assistant"
            assert final_assistant or any(b["text"].strip() for b in blocks), (n, m)
            assert all(b["text"].strip() for b in blocks) or final_assistant, (n, m)
            marks += sum("cache_control" in b for b in blocks)
            assistant_turns += m["role"] == "assistant"
        for b in body.get("system") or []:
            assert b["text"].strip()
            marks += "cache_control" in b
        assert marks <= 4
    assert assistant_turns > 0  # multi-turn judge conversations (and re-asks) were among them
