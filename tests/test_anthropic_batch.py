"""Anthropic's Message Batches, natively over aiohttp, against the simulator's: the API and the client's
translation both ways (inline requests with cache_control at the end of a shared prefix, results as
the endpoint's output lines, expiry, errors, cancel), a sweep whose model and judge are Anthropic models
in batch mode against the same sweep sent interactively (identical verdicts, half the cost with cache
prices inside batches), a kill -9 while polling resumed without a request submitted twice,
`ifsweep batches` listing and cancelling them, and `batch = true` refused for untested providers."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from sweeps import stored_records, toml_config
from test_anthropic import CLAUDE, SHARED, bill
from test_batch import child, kill, wait_for_submitted

from ifsweep import benchmarks
from ifsweep.providers.batch.anthropic import AnthropicBatchClient, message_params
from ifsweep.providers.pricing import litellm_price
from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import ConfigError, parse_config
from ifsweep.runner.engine.batches import open_batches
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings, FaultRates
from ifsweep.simulator.server import CLIENT_HEADERS

HAIKU = "anthropic/claude-haiku-4-5"
FAST = "max_age_s = 0.3, poll_s = 0.1, poll_max_s = 0.5"


def line(custom_id: str, question: str, **params: Any) -> bytes:
    """One line of the endpoint's JSONL input (OpenAI's batch shape, a chat request as its body)."""
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": SHARED + question}]
    body = {"model": "claude-x", "messages": messages, "max_tokens": 64} | params
    return orjson.dumps(
        {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}
    )


async def outputs(client: AnthropicBatchClient, batch_id: str) -> list[dict[str, Any]]:
    info = await client.retrieve(batch_id)
    assert info.over and info.output_file_id is not None
    return [orjson.loads(x) for x in (await client.content(info.output_file_id)).splitlines()]


# ------------------------------------------------------------------------------------ the API and client


def test_message_batches_round_trip_with_cache_control_at_the_shared_prefix() -> None:
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=0.5))) as sim:

        async def go() -> None:
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatchClient(session, sim.root_url, "sk-ant-test")
                data = b"\n".join(line(f"k{i}", f"Question {i}?") for i in range(4)) + b"\n"
                file_id = await client.upload(data)
                created = await client.create(file_id, {"ifsweep_intent": "x"})
                assert (
                    created.status == "in_progress"
                    and created.total == 4
                    and created.input_file_id == file_id
                )
                results = f"{sim.root_url}/v1/messages/batches/{created.id}/results"
                async with session.get(results, headers=CLIENT_HEADERS) as early:
                    assert early.status == 400  # no results before the batch has ended
                assert [b.id for b in await client.listing()] == [created.id]
                await anyio.sleep(0.6)
                out = await outputs(client, created.id)
                done = await client.retrieve(created.id)
                assert (done.status, done.completed, done.failed) == ("completed", 4, 0)
                second = await client.create(await client.upload(data), {})
                assert (await client.cancel(second.id)).status == "cancelling"
                cancelled = await outputs(client, second.id)
                assert (await client.retrieve(second.id)).status == "cancelled"
            assert sorted(r["custom_id"] for r in out) == ["k0", "k1", "k2", "k3"]
            usages = [r["response"]["body"]["usage"] for r in out]
            # The four share SHARED: the first writes it, the other three read it, and prompt_tokens counts
            # every prompt token (Anthropic's input_tokens, reads and writes added up).
            writes = [u["cache_creation_input_tokens"] for u in usages]
            reads = [u["prompt_tokens_details"]["cached_tokens"] for u in usages]
            assert writes.count(0) == 3 and max(writes) > 1024 and sorted(reads) == [0, *[max(writes)] * 3]
            served = [s for s in sim.stats.log if s.batch]
            assert [u["prompt_tokens"] for u in usages] == [s.prompt_tokens for s in served]
            assert all(r["response"]["body"]["choices"][0]["message"]["content"] for r in out)
            assert {r["error"]["code"] for r in cancelled} == {"batch_cancelled"}

        anyio.run(go)
        assert sim.stats.batches_created == 2 and sim.stats.requests == 0
        # The ledger: the first batch's four answered and billed, the cancelled one's four unanswered.
        ledger = sim.stats.ledger
        assert [b.via for b in ledger.bills] == ["batch"] * 4
        assert [s.outcome for s in ledger.submissions] == ["answered"] * 4 + ["unanswered"] * 4
        # The requests went inline with cache_control where their shared prefix ends (the same text).
        (first, *_) = sim.anthropic.batches.batches.values()
        params = first.requests[0]["params"]
        blocks = params["messages"][0]["content"]
        assert blocks[0] == {
            "type": "text",
            "text": SHARED + "Question ",
            "cache_control": {"type": "ephemeral"},
        }
        assert params["system"] == [{"type": "text", "text": "Judge."}] and params["max_tokens"] == 64


def test_expired_errored_and_refused_requests() -> None:
    settings = BatchSettings(expire_rate=1.0, expire_done_share=0.5)
    with SimulatorThread(SimConfig(seed=5, batch=settings, context_window=2000)) as sim:

        async def go() -> tuple[list[Any], list[Any]]:
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatchClient(session, sim.root_url, "k")
                data = b"\n".join(line(f"k{i}", "?") for i in range(4)) + b"\n"
                expired = await outputs(client, (await client.create(await client.upload(data), {})).id)
                sim.set_config(SimConfig(seed=5, batch=BatchSettings(fail_rate=1.0)))
                failed = await outputs(client, (await client.create(await client.upload(data), {})).id)
                return expired, failed

        expired, failed = anyio.run(go)
    # Half answered (here: refused as too long, a 400 naming both sizes), half expired.
    answered = [r for r in expired if r["response"]]
    assert len(answered) == 2 and {r["error"]["code"] for r in expired if r["error"]} == {"batch_expired"}
    assert all(r["response"]["status_code"] == 400 for r in answered)
    assert "prompt is too long" in answered[0]["response"]["body"]["error"]["message"]
    assert {r["response"]["status_code"] for r in failed} == {500}


def test_chat_params_without_an_anthropic_equivalent_are_refused_by_name() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0, "stop": "END"}
    params = message_params(body)
    assert params["stop_sequences"] == ["END"] and params["max_tokens"] == 4096 and "system" not in params
    with pytest.raises(ValueError, match="'logprobs' has no Anthropic Messages equivalent"):
        message_params(body | {"logprobs": True})


# ------------------------------------------------------------------------------------ sweeps


def anthropic_sweep(
    out: Path, sim: SimulatorThread, *, batch: bool, data: Path | None = None, limit: int | None = None
) -> str:
    """EIFBench's sample answered by claude-haiku-4-5 and judged by claude-sonnet-4-5, both at the
    simulator (prices from LiteLLM's map), both in batch mode when `batch`."""
    data = data or benchmarks.get("eifbench").fixture_dir()
    text = toml_config(
        out, sim.base_url, models=("alpha",), bench=("eifbench",), data={"eifbench": data}, limit=limit
    )
    extra = f'api_base = "{sim.root_url}"' + (f"\nbatch = {{ {FAST} }}" if batch else "")
    text = text.replace(
        f'model = "openai/sim-alpha"\napi_base = "{sim.base_url}"', f'model = "{HAIKU}"\n{extra}'
    )
    judge = f'model = "{CLAUDE}"\n{extra}\nparams = {{ max_tokens = 256 }}'
    return text.replace(f'model = "openai/sim-judge"\napi_base = "{sim.base_url}"', judge)


def run(cfg: Path, text: str) -> tuple[int, dict[str, Any]]:
    cfg.write_text(text)
    code = main(["run", str(cfg)])
    out = Path(text.split('output_dir = "', 1)[1].split('"', 1)[0])
    return code, json.loads((out / "summary.json").read_text())


def verdicts(run_dir: Path) -> dict[tuple[str, str], list[Any]]:
    return {(r["benchmark"], r["instance_id"]): r["rows"] for r in stored_records(run_dir, {"verdict"})}


@pytest.fixture(scope="module")
def interactive(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The same sweep sent call by call through LiteLLM's anthropic route: the baseline."""
    tmp = tmp_path_factory.mktemp("interactive")
    with SimulatorThread(SimConfig(seed=5)) as sim:
        code, summary = run(tmp / "i.toml", anthropic_sweep(tmp / "run", sim, batch=False))
    assert code == 0
    return summary, verdicts(tmp / "run")


def test_batch_sweep_matches_interactive_at_half_the_cost_with_cache_prices_inside(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    """EIFBench's real party set (judge prompts of thousands of tokens sharing most of them), 2 tasks."""
    data = shared_benchmarks / "EIFBench"
    with SimulatorThread(SimConfig(seed=5)) as sim:
        code, base = run(
            tmp_path / "i.toml", anthropic_sweep(tmp_path / "i", sim, batch=False, data=data, limit=2)
        )
        assert code == 0
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=0.3))) as sim:
        code, summary = run(
            tmp_path / "b.toml", anthropic_sweep(tmp_path / "b", sim, batch=True, data=data, limit=2)
        )
        served = list(sim.stats.log)
        assert sim.stats.requests == 0  # nothing went through /v1/messages
        assert sim.stats.batches_created >= 2 and max(sim.stats.batch_requests.values()) == 1
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(tmp_path / "b") == verdicts(tmp_path / "i")
    assert summary["spent_usd"] / base["spent_usd"] <= 0.52
    # Each record is what the simulator served, at the batch prices: half, cache reads and writes too.
    judged = stored_records(tmp_path / "b", {"judgment"})
    read = sum(j["cached_tokens"] for j in judged)
    assert read == sum(s.cached_tokens for s in served) > 0.8 * sum(j["input_tokens"] for j in judged)
    for model, kind in ((HAIKU, "generation"), (CLAUDE, "judgment")):
        price = litellm_price(model)
        assert price is not None
        mine = [s for s in served if s.model == model.partition("/")[2]]
        spent = sum(r["cost_usd"] for r in stored_records(tmp_path / "b", {kind}))
        assert spent == pytest.approx(bill(mine, price.for_batch()), rel=1e-9)
        assert price.for_batch().cache_write_per_mtok == pytest.approx(price.cache_write_per_mtok / 2)
    assert not open_batches(tmp_path / "b")


def test_errored_results_are_sent_again_in_later_batches(
    tmp_path: Path, interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    faults = FaultRates(server_error=0.15, rate_limit=0.05)
    config = SimConfig(
        seed=5, faults=faults, batch=BatchSettings(delay_s=0.1, expire_rate=0.3, expire_done_share=0.5)
    )
    with SimulatorThread(config) as sim:
        text = anthropic_sweep(tmp_path / "run", sim, batch=True).replace(FAST, FAST + ", max_retries = 8")
        code, summary = run(tmp_path / "b.toml", text)
        resent = [k for k, n in sim.stats.batch_requests.items() if n > 1]
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(tmp_path / "run") == interactive[1]
    assert resent


def test_kill_9_while_polling_resumes_without_submitting_again(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    interactive: tuple[dict[str, Any], dict[Any, Any]],
) -> None:
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=60))) as sim:
        cfg = tmp_path / "b.toml"
        run_dir = tmp_path / "run"
        cfg.write_text(anthropic_sweep(run_dir, sim, batch=True))
        proc = child(cfg)
        try:
            wait_for_submitted(run_dir, proc)
            anyio.run(anyio.sleep, 0.5)  # polling now
        finally:
            kill(proc)
        submitted = dict(sim.stats.batch_requests)
        assert submitted and len(open_batches(run_dir)) == sim.stats.batches_created
        capsys.readouterr()
        assert main(["batches", str(run_dir)]) == 0
        listed = capsys.readouterr().out
        assert all(f"{b.batch_id}: in_progress" in listed for b in open_batches(run_dir))
        sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2)))
        code, summary = run(cfg, cfg.read_text())
        counts = sim.stats.batch_requests
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(run_dir) == interactive[1]
    # Every request the killed process submitted was collected from its batch, never sent again.
    assert max(counts.values()) == 1 and all(counts[k] == 1 for k in submitted)
    assert not open_batches(run_dir)


def test_batch_mode_is_refused_for_providers_whose_batches_are_untested() -> None:
    def parse(model: str, extra: str = "batch = true") -> Any:
        raw = f'[[benchmarks]]\nname = "cfbench"\n[[models]]\nmodel = "{model}"\n{extra}\n'
        return parse_config(tomllib.loads(raw), Path("/tmp/c.toml"))

    for model in (
        "gemini/gemini-2.0-flash",
        "vertex_ai/gemini-1.5-pro",
        "bedrock/anthropic.claude-3",
        "gpt-4o",
    ):
        with pytest.raises(ConfigError) as info:
            parse(model)
        assert info.value.key == "models[0].batch"
        assert "openai/..., hosted_vllm/..., custom_openai/..., anthropic/..." in str(info.value)
        assert parse(model, "batch = false").models[0].batch is None
    assert parse(CLAUDE).models[0].batch is not None
    assert parse("openai/gpt-4o").models[0].batch is not None


def test_breakpoints_inside_a_batch_mark_the_task_and_each_answer() -> None:
    """Two answers to one task, three questions each: every request is marked where the task's shared
    part ends (all six alike) and where its answer's ends (three alike), the text unchanged."""
    from ifsweep.providers.send.prefix import with_breakpoints
    from ifsweep.providers.send.prefix_groups import nested_ends

    task, answers = "The task, at length. " * 200, ("First answer. " * 40, "Second answer. " * 40)
    prompts = [
        [{"role": "system", "content": "Judge."}, {"role": "user", "content": task + a + f"Question {q}?"}]
        for a in answers
        for q in range(3)
    ]
    ends = nested_ends(prompts)
    assert all(len(e) == 2 for e in ends)
    assert len({e[0] for e in ends}) == 1 and len({e[1] for e in ends}) == 2
    for i, (prompt, end) in enumerate(zip(prompts, ends, strict=True)):
        blocks = with_breakpoints(prompt, end)[1]["content"]
        assert "".join(b["text"] for b in blocks) == prompt[1]["content"]
        marked = [b["text"] for b in blocks if "cache_control" in b]
        assert marked == [task, answers[i // 3] + "Question "]


def test_batches_command_cancels_and_the_next_run_sends_the_cancelled_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=60))) as sim:
        cfg, run_dir = tmp_path / "b.toml", tmp_path / "run"
        cfg.write_text(anthropic_sweep(run_dir, sim, batch=True))
        proc = child(cfg)
        try:
            wait_for_submitted(run_dir, proc)
        finally:
            kill(proc)
        ids = [b.batch_id for b in open_batches(run_dir)]
        capsys.readouterr()
        assert ids and main(["batches", str(run_dir), "--cancel"]) == 0
        out = capsys.readouterr().out
        assert all(f"{i}: cancelling" in out for i in ids)
        sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2)))
        code, summary = run(cfg, cfg.read_text())
        counts = sim.stats.batch_requests
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(run_dir) == interactive[1]
    assert max(counts.values()) == 2  # the cancelled ones, once more


def one_batch_call(api_base: str | None, prompt: str) -> Any:
    """One call through Message Batches from a pool of its own: its Completion."""
    from ifsweep.providers.batch.endpoint import MemoryJournal
    from ifsweep.providers.budget import Budget
    from ifsweep.providers.pool import ProviderPool
    from ifsweep.providers.records import BatchPolicy, EndpointSpec, Price

    policy = BatchPolicy(max_age_s=0.05, poll_s=0.05, poll_max_s=0.1)
    params = {"max_tokens": 64}
    spec = EndpointSpec("j", CLAUDE, api_base=api_base, params=params, price=Price(3.0, 15.0), batch=policy)

    async def go() -> Any:
        async with ProviderPool(budget=Budget(None), journal=MemoryJournal()) as pool:
            endpoint = pool.caller(spec)
            async with anyio.create_task_group() as tg:
                await tg.start(pool.run_batches)
                with anyio.fail_after(30):
                    done = await endpoint.complete([{"role": "user", "content": prompt}], key="k1")
                tg.cancel_scope.cancel()
        return done

    return anyio.run(go)


def test_no_key_for_message_batches_is_an_auth_error_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    done = one_batch_call(None, "hi")
    assert done.status == "error" and done.error_kind == "auth"
    assert "API key missing for Anthropic's Message Batches: set api_key_env" in (done.error_message or "")


def test_a_prompt_over_the_window_in_a_batch_is_a_context_length_error() -> None:
    with SimulatorThread(SimConfig(context_window=500, batch=BatchSettings(delay_s=0.05))) as sim:
        done = one_batch_call(sim.root_url, "word " * 3000)
        assert sim.stats.batch_requests == {"k1": 1}  # refused, not sent again
    assert done.status == "error" and done.error_kind == "context_length"
    assert "prompt is too long: 3751 tokens > 500 maximum" in (done.error_message or "")


def test_results_lines_read_as_the_endpoints_output_lines() -> None:
    from ifsweep.providers.batch.anthropic import output_line
    from ifsweep.providers.send.fast import parse_chat_body, reply_status

    usage = {
        "input_tokens": 7,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 50,
        "output_tokens": 9,
    }
    message = {"content": [{"type": "text", "text": "No."}], "stop_reason": "refusal", "usage": usage}
    line = orjson.loads(
        output_line(orjson.dumps({"custom_id": "k", "result": {"type": "succeeded", "message": message}}))
    )
    reply = parse_chat_body(orjson.dumps(line["response"]["body"]), {})
    assert (reply.input_tokens, reply.cached_tokens, reply.cache_write_tokens, reply.output_tokens) == (
        1057,
        1000,
        50,
        9,
    )
    assert reply_status(reply) == "refused"
    errored = {
        "type": "errored",
        "error": {"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
    }
    assert (
        orjson.loads(output_line(orjson.dumps({"custom_id": "k", "result": errored})))["response"][
            "status_code"
        ]
        == 529
    )
    assert output_line(b"not json") == b"not json"  # the endpoint reports it and sends its keys again


def resumed_call_with_intent(sim: SimulatorThread, created: list[str]) -> tuple[Any, list[dict[str, Any]]]:
    """A pool whose journal holds an intent for key "k1" with no batch id (the create's answer never
    reached the journal), while the provider holds a batch created after it for each custom id in
    `created`: one batch-mode call for "k1", and the journal's records."""
    from ifsweep.providers.batch.endpoint import MemoryJournal
    from ifsweep.providers.budget import Budget
    from ifsweep.providers.pool import ProviderPool
    from ifsweep.providers.records import BatchPolicy, EndpointSpec, Price

    policy = BatchPolicy(max_age_s=0.05, poll_s=0.05, poll_max_s=0.1)
    spec = EndpointSpec(
        "j", CLAUDE, api_base=sim.root_url, params={"max_tokens": 64}, price=Price(3.0, 15.0), batch=policy
    )
    journal = MemoryJournal()
    intent = {"kind": "batch", "key": "i1", "state": "intent", "endpoint": "j", "model": CLAUDE}
    journal.append(intent | {"custom_ids": ["k1"], "input_file_id": "inline-lost", "reserved_usd": 0.01})
    journal.records[0]["submitted_at"] = anyio.run(_now)

    async def go() -> Any:
        async with aiohttp.ClientSession() as session:
            client = AnthropicBatchClient(session, sim.root_url, "sk-ant-test")
            for custom_id in created:
                await client.create(await client.upload(line(custom_id, "say something") + b"\n"), {})
        async with ProviderPool(budget=Budget(None), journal=journal) as pool:
            endpoint = pool.caller(spec)
            async with anyio.create_task_group() as tg:
                await tg.start(pool.run_batches)
                with anyio.fail_after(30):
                    done = await endpoint.complete([{"role": "user", "content": "say something"}], key="k1")
                tg.cancel_scope.cancel()
        return done

    return anyio.run(go), journal.records


async def _now() -> float:
    import time

    return time.time()


def test_a_batch_whose_create_answer_was_lost_is_collected_not_created_again() -> None:
    """A kill between Anthropic's create and the journal's `submitted` record: a Message Batch carries
    no metadata and no input file to find it by, so it was taken for never created and its requests
    were bought again. It is found by its size and time and collected; nothing is sent again."""
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2))) as sim:
        done, records = resumed_call_with_intent(sim, ["k1"])
        created, requests = sim.stats.batches_created, dict(sim.stats.batch_requests)
    assert done.status != "error" and done.text  # the killed process's request, answered
    assert created == 1 and requests == {"k1": 1}
    assert [r["batch_id"] for r in records if r["key"] == "i1" and r["state"] == "submitted"] == [
        "msgbatch_sim000001"
    ]


def test_a_batch_found_only_perhaps_that_holds_other_requests_sends_its_own_again() -> None:
    """The batch of the same size created since the intent is another's (its results name other custom
    ids): once it ends, the intent's requests, which it did not hold, go in a batch of their own."""
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2))) as sim:
        done, _ = resumed_call_with_intent(sim, ["other"])
        created, requests = sim.stats.batches_created, dict(sim.stats.batch_requests)
    assert done.status == "ok" and done.text
    assert created == 2 and requests == {"other": 1, "k1": 1}
