"""One conversation per call key on every route (issue 32, item 1): Anthropic refuses a message with
empty content but a final assistant one, and an empty or whitespace-only text block; an empty judge
reply goes back to the judge on InFoBench's multi-turn protocol and on every re-ask. The simulator
refuses as Anthropic does (unless a test asks for leniency by name), and ifsweep sends the same turns
interactively (LiteLLM) and in Message Batches, none of them empty."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson
from capture import CaptureProxy
from sweeps import stored_records, toml_config

from ifsweep import benchmarks
from ifsweep.providers.batch.anthropic import AnthropicBatchClient, message_params
from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.conversation import EMPTY_TURN, conversation
from ifsweep.providers.send.fast import FastSender
from ifsweep.providers.send.prefix import PrefixEnd
from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.keys import generation_key, judge_key
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings

CLAUDE = "anthropic/claude-sonnet-4-5"
HAIKU = "anthropic/claude-haiku-4-5"
NON_EMPTY = "all messages must have non-empty content except for the optional final assistant message"
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
# A judge's second turn after an empty first reply (InFoBench), and a re-ask after a blank one.
TURNS = [
    {"role": "system", "content": "Answer YES or NO."},
    {"role": "user", "content": "Question 1?"},
    {"role": "assistant", "content": ""},
    {"role": "user", "content": "Question 2?"},
    {"role": "assistant", "content": " \n"},
    {"role": "user", "content": "Your reply above could not be read."},
]


def _flat(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of each message, its text blocks joined: the conversation a model reads."""
    out = []
    for m in messages:
        content = m["content"]
        text = content if isinstance(content, str) else "".join(b["text"] for b in content)
        out.append((m["role"], text))
    return out


def test_anthropic_gets_no_empty_turn_and_other_providers_get_theirs_as_they_are() -> None:
    sent = conversation("anthropic", TURNS)
    assert [m["content"] for m in sent] == [
        "Answer YES or NO.",
        "Question 1?",
        EMPTY_TURN,
        "Question 2?",
        EMPTY_TURN,
        "Your reply above could not be read.",
    ]
    assert TURNS[2]["content"] == ""  # the caller's list is not changed
    # A final assistant turn may stay empty (a prefill of nothing); a system prompt of no text goes.
    tail = [
        {"role": "system", "content": " "},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": ""},
    ]
    assert conversation("anthropic", tail) == tail[1:]
    assert conversation("anthropic", [{"role": "user", "content": []}])[0]["content"] == EMPTY_TURN
    for provider in ("openai", "hosted_vllm", "gemini"):
        assert conversation(provider, TURNS) is TURNS  # nothing to copy where empty content is taken
    # The key names the body sent: an empty turn and the placeholder are one request to Anthropic.
    endpoint = {"provider": "anthropic", "api_base": None, "model": "claude-x", "path": "litellm"}
    assert judge_key(endpoint, {}, TURNS, 0) == judge_key(endpoint, {}, conversation("anthropic", TURNS), 0)
    openai = endpoint | {"provider": "openai"}
    assert judge_key(openai, {}, TURNS, 0) != judge_key(openai, {}, conversation("anthropic", TURNS), 0)


def test_batch_params_carry_the_same_turns_and_no_whitespace_block() -> None:
    params = message_params({"model": "claude-x", "messages": TURNS})
    assert _flat(params["messages"]) == _flat([dict(m) for m in conversation("anthropic", TURNS)[1:]])
    # A breakpoint whose rest of the message is whitespace alone keeps it in the marked block.
    marked = message_params(
        {"model": "claude-x", "messages": [{"role": "user", "content": "shared part\n\n"}]},
        [PrefixEnd(0, len("shared part"))],
    )
    assert marked["messages"][0]["content"] == [
        {"type": "text", "text": "shared part\n\n", "cache_control": {"type": "ephemeral"}}
    ]


def _post(sim: SimulatorThread, messages: list[dict[str, Any]]) -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        body = {"model": "claude-x", "max_tokens": 20, "messages": messages}
        async with (
            aiohttp.ClientSession() as s,
            s.post(sim.root_url + "/v1/messages", json=body, headers=HEADERS) as r,
        ):
            return r.status, await r.json()

    return anyio.run(go)


def test_simulator_refuses_empty_content_as_anthropic_does_unless_asked_to_be_lenient() -> None:
    user = {"role": "user", "content": "q"}
    refused = {
        f"messages.1: {NON_EMPTY}": [
            user,
            {"role": "assistant", "content": ""},
            user,
        ],
        "messages.0.content.1.text: text content blocks must be non-empty": [
            {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": ""}]}
        ],
        "messages.1: text content blocks must contain non-whitespace text": [
            user,
            {"role": "assistant", "content": "  "},
            user,
        ],
    }
    with SimulatorThread() as sim:
        for message, messages in refused.items():
            status, body = _post(sim, messages)
            assert (status, body["error"]["type"]) == (400, "invalid_request_error")
            assert body["error"]["message"] == message
        # The one exception: an empty final assistant turn.
        assert _post(sim, [user, {"role": "assistant", "content": ""}])[0] == 200
        # Each request of a Message Batch meets the same rule (answered "errored").
        for messages in refused.values():
            kind, error = sim.anthropic.answer_one(
                {"model": "m", "max_tokens": 5, "messages": messages}, None
            )
            assert (kind, error["error"]["type"]) == ("errored", "invalid_request_error")
    with SimulatorThread(SimConfig(lenient=frozenset({"empty_content"}))) as sim:
        assert all(_post(sim, messages)[0] == 200 for messages in refused.values())


def test_one_judge_conversation_is_one_body_interactively_and_in_a_message_batch() -> None:
    """The same turns through LiteLLM's anthropic route and through Message Batches, as captured on
    the wire: equal, and the strict simulator answers both."""
    with SimulatorThread() as sim, CaptureProxy(sim.root_url) as proxy:
        spec = EndpointSpec("j", CLAUDE, api_base=proxy.root_url, params={"max_tokens": 400})

        async def go() -> Any:
            async with ProviderPool(budget=Budget(None)) as pool:
                done = await pool.endpoint(spec).complete(TURNS)
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatchClient(session, proxy.root_url, "k")
                line = {
                    "custom_id": "c1",
                    "body": {"model": "claude-sonnet-4-5", "max_tokens": 400, "messages": TURNS},
                }
                created = await client.create(await client.upload(json.dumps(line).encode()), {})
            return done, created

        done, created = anyio.run(go)
        interactive = [
            e.json() for e in proxy.to("/v1/messages") if e.method == "POST" and e.path == "/v1/messages"
        ]
        batch = [e.json() for e in proxy.to("/v1/messages/batches") if e.method == "POST"]
    assert done.status == "ok", done.error_message
    assert created.id
    (sent,) = interactive
    (params,) = [r["params"] for r in batch[0]["requests"]]
    assert _flat(sent["messages"]) == _flat(params["messages"])
    assert (sent["messages"][1]["role"], _flat(sent["messages"])[1][1]) == ("assistant", EMPTY_TURN)


def _infobench_sweep(out: Path, root: str, base: str) -> str:
    """InFoBench's sample (a multi-turn judge) answered by claude-haiku-4-5 and judged by
    claude-sonnet-4-5 in batch mode, both at `root`."""
    text = toml_config(
        out,
        base,
        models=("alpha",),
        bench=("infobench",),
        data={"infobench": benchmarks.get("infobench").fixture_dir()},
    )
    batch = f'api_base = "{root}"\nbatch = {{ max_age_s = 0.3, poll_s = 0.1, poll_max_s = 0.5 }}'
    text = text.replace(f'model = "openai/sim-alpha"\napi_base = "{base}"', f'model = "{HAIKU}"\n{batch}')
    judge = f'model = "{CLAUDE}"\n{batch}\nparams = {{ max_tokens = 256 }}'
    return text.replace(f'model = "openai/sim-judge"\napi_base = "{base}"', judge)


def test_a_batch_sweep_whose_judge_answers_empty_ends_without_a_refused_request(tmp_path: Path) -> None:
    """Before: every empty judge reply sent back in a Message Batch was refused by a strict endpoint,
    a judge:bad_request error again on every run."""
    config = SimConfig(seed=3, faults=FaultRates(empty=0.3), batch=BatchSettings(delay_s=0.2))
    with SimulatorThread(config) as sim, CaptureProxy(sim.root_url) as proxy:
        cfg = tmp_path / "s.toml"
        cfg.write_text(_infobench_sweep(tmp_path / "run", proxy.root_url, sim.base_url))
        code = main(["run", str(cfg)])
        created = [
            e.json()
            for e in proxy.to("/v1/messages/batches")
            if e.method == "POST" and e.path == "/v1/messages/batches"
        ]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    errors = [
        r for r in stored_records(tmp_path / "run", {"judgment", "generation"}) if r["status"] == "error"
    ]
    assert errors == [] and code == 0 and summary["status"] == "complete"
    turns = [m for b in created for r in b["requests"] for m in r["params"]["messages"]]
    assert any(_flat([m]) == [("assistant", EMPTY_TURN)] for m in turns)  # the case did arise
    assert all(_flat([m])[0][1].strip() for m in turns)


# A CFBench-like conversation: non-ASCII prompts (a str of 2 bytes a character), an ASCII turn.
_CHINESE = [
    {"role": "system", "content": "只回答“是”或“否”。"},
    {"role": "user", "content": "请用三句话介绍长城，每句不超过二十个字。" * 50},
    {"role": "assistant", "content": "是"},
    {"role": "user", "content": "plain ASCII turn"},
]


def test_a_prompt_that_is_not_ascii_is_keyed_and_sent_without_growing() -> None:
    """orjson leaves the UTF-8 it encodes a non-ASCII str into inside that str for its life: a prompt
    hashed for its key and encoded as a body in place grew by 1.5-3x for as long as it was held (issue
    35). Keyed and sent, the prompts keep their size; the keys are the ones the code before wrote
    (8be8355, the same input), so runs written before resume; the server gets the same body bytes."""
    messages = [dict(m) for m in _CHINESE]
    sizes = [sys.getsizeof(m["content"]) for m in messages]
    endpoint = {"provider": "openai", "api_base": "http://127.0.0.1:1/v1", "model": "sim-a", "path": "fast"}
    assert judge_key(endpoint, {"max_tokens": 8}, messages, 0) == "2b1b376e198d1127f01c6d69c82a8943"
    assert generation_key(endpoint, {"max_tokens": 8}, messages) == "95944aae68a7c0cb2fa4444540e18756"
    with SimulatorThread() as sim, CaptureProxy(sim.root_url) as proxy:

        async def send() -> None:
            async with aiohttp.ClientSession() as session:
                sender = FastSender(lambda: session, proxy.base_url, "sim-a", {"max_tokens": 8})
                reply = await sender.send(messages, "k")
                assert reply.text

        anyio.run(send)
        [sent] = [e.body for e in proxy.to("/v1/chat/completions")]
    assert [sys.getsizeof(m["content"]) for m in messages] == sizes
    assert sent == orjson.dumps({"model": "sim-a", "messages": [dict(m) for m in _CHINESE], "max_tokens": 8})
    # What the rule guards against, on the same strings: encoding them in place grows them.
    orjson.dumps(messages)
    assert sys.getsizeof(messages[1]["content"]) > sizes[1] * 2
