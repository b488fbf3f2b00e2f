"""The simulator over real HTTP on 127.0.0.1, with aiohttp (and urllib from sync code) as the client."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ifsweep.simulator import Simulator, SimulatorThread, serve_main
from ifsweep.simulator.config import FAULT_NAMES, FaultRates, SimConfig
from ifsweep.simulator.faults import FaultPicker
from ifsweep.simulator.judges import Judges
from ifsweep.simulator.limits import TokenBucket, format_reset
from ifsweep.simulator.server import CLIENT_HEADERS
from ifsweep.simulator.text import count_tokens, cut_to_tokens, model_quality, read_quality

BENCH = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")
JUDGES = Judges.registered()
Json = dict[str, Any]


def run(coro: Awaitable[T]) -> T:
    async def wrap() -> T:
        return await coro

    return asyncio.run(wrap())


def user(content: str) -> list[Json]:
    return [{"role": "user", "content": content}]


async def post(
    session: aiohttp.ClientSession, sim: Simulator, body: Json, deadline_s: float = 10.0
) -> tuple[int, dict[str, str], bytes]:
    async with session.post(
        sim.base_url + "/chat/completions",
        json=body,
        headers={"Authorization": "Bearer sk-not-a-real-key"},
        timeout=aiohttp.ClientTimeout(total=deadline_s),
    ) as resp:
        return resp.status, dict(resp.headers), await resp.read()


async def chat(
    sim: Simulator, session: aiohttp.ClientSession, model: str, messages: list[Json], **params: Any
) -> Json:
    status, _, data = await post(session, sim, {"model": model, "messages": messages, **params})
    assert status == 200, data
    parsed: Json = json.loads(data)
    return parsed


def with_sim(config: SimConfig, fn: Callable[[Simulator, aiohttp.ClientSession], Awaitable[T]]) -> T:
    async def go() -> T:
        async with Simulator(config) as sim, aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
            return await fn(sim, session)

    return asyncio.run(go())


def content_of(reply: Json) -> str:
    text = reply["choices"][0]["message"]["content"]
    assert isinstance(text, str)
    return text


# --- generation ----------------------------------------------------------------------------------------


def test_answers_are_deterministic_model_dependent_and_openai_shaped() -> None:
    messages = user("Write three sentences about autumn.")

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[Json]:
        return [
            await chat(sim, s, "alpha", messages),
            await chat(sim, s, "alpha", messages),
            await chat(sim, s, "beta", messages),
            await chat(sim, s, "alpha", user("Something else entirely.")),
        ]

    a1, a2, b, other = with_sim(SimConfig(), go)
    assert content_of(a1) == content_of(a2)
    assert content_of(a1) != content_of(b)
    assert content_of(a1) != content_of(other)
    assert a1["object"] == "chat.completion" and a1["model"] == "alpha" and a1["id"].startswith("chatcmpl-")
    assert isinstance(a1["created"], int) and abs(a1["created"] - time.time()) < 60
    choice = a1["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    text = content_of(a1)
    usage = a1["usage"]
    assert usage["prompt_tokens"] == count_tokens(messages[0]["content"])
    assert usage["completion_tokens"] == count_tokens(text)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 30 <= usage["completion_tokens"] <= 300
    first_line = text.splitlines()[0]
    assert first_line == f"(sim-quality {model_quality('alpha'):.2f})"
    assert read_quality(text) == model_quality("alpha")


def test_model_quality_spread_and_range() -> None:
    qualities = [model_quality(f"model-{i}") for i in range(200)]
    assert all(0.35 <= q <= 0.95 for q in qualities)
    assert max(qualities) - min(qualities) > 0.5
    assert len(set(qualities)) > 30


def test_max_tokens_cuts_the_answer_with_finish_reason_length() -> None:
    messages = user("Tell me a long story.")

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> tuple[Json, Json]:
        return (await chat(sim, s, "gamma", messages, max_tokens=10), await chat(sim, s, "gamma", messages))

    cut, full = with_sim(SimConfig(), go)
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] <= 10
    assert content_of(full).startswith(content_of(cut))
    assert full["usage"]["completion_tokens"] > 10


def test_prompt_tokens_count_every_message_and_list_content() -> None:
    messages: list[Json] = [
        {"role": "system", "content": "You are helpful." * 10},
        {"role": "user", "content": [{"type": "text", "text": "abcd" * 25}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "again"},
    ]
    reply = with_sim(SimConfig(), lambda sim, s: chat(sim, s, "m", messages))
    expected = (
        count_tokens("You are helpful." * 10)
        + count_tokens("abcd" * 25)
        + count_tokens("ok")
        + count_tokens("again")
    )
    assert reply["usage"]["prompt_tokens"] == expected


def test_models_health_and_bad_requests() -> None:
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        await chat(sim, s, "zeta", user("hi"))
        async with s.get(sim.base_url + "/models") as r:
            models = await r.json()
        assert [m["id"] for m in models["data"]] == ["zeta"]
        async with s.get(sim.base_url.removesuffix("/v1") + "/health") as r:
            assert r.status == 200 and (await r.json()) == {"status": "ok"}
        async with s.post(sim.base_url + "/chat/completions", data=b"{not json") as r:
            assert r.status == 400
            assert "not JSON" in (await r.json())["error"]["message"]
        status, _, data = await post(s, sim, {"messages": user("x")})
        assert status == 400 and b"model" in data
        status, _, data = await post(s, sim, {"model": "m", "messages": user("x"), "max_tokens": 0})
        assert status == 400 and b"max_tokens" in data
        assert sim.stats.status_counts == {200: 1, 400: 3}

    with_sim(SimConfig(), go)


def test_stats_count_requests_bodies_and_in_flight() -> None:
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        body = {"model": "m", "messages": user("same"), "temperature": 0}
        await post(s, sim, body)
        await post(s, sim, dict(reversed(list(body.items()))))  # same canonical body, other key order
        await post(s, sim, {**body, "temperature": 1})
        assert sim.stats.requests == 3
        assert sorted(sim.stats.bodies.values()) == [1, 2]
        sim.stats.reset()
        assert sim.stats.requests == 0 and not sim.stats.bodies
        sim.set_config(SimConfig(latency_ms=200))
        start = time.perf_counter()
        await asyncio.gather(*(post(s, sim, {"model": f"m{i}", "messages": user("x")}) for i in range(12)))
        elapsed = time.perf_counter() - start
        assert 0.2 <= elapsed < 1.5
        assert sim.stats.max_in_flight == 12 and sim.stats.in_flight == 0
        assert sim.stats.by_model == {f"m{i}": 1 for i in range(12)}

    with_sim(SimConfig(), go)


# --- judge-shaped replies (prompts written here) ---------------------------------------------------------


def followbench_prompt(answer: str, n: int) -> str:
    # The shape of FollowBench's judge prompt (code/gpt4_based_evaluation.py), written out for the test.
    plural = "1 constraint" if n == 1 else f"{n} constraints"
    lines = [
        "Given an initial instruction, we add constraints.",
        "",
        "#Initial Instruction#",
        "Write a poem.",
        "",
    ]
    lines += [f"#Answer of Initial Instruction + {plural}#", answer, "", "#System#"]
    count = "1 element" if n == 1 else f"{n} elements"
    lines += [f"3) In the final line, only output a Python LIST with {count} ('YES' or 'NO') indicating ..."]
    return "\n".join(lines)


@pytest.mark.parametrize("n", [1, 3, 5])
def test_followbench_judge_replies_a_list_of_n(n: int) -> None:
    prompt = followbench_prompt("A poem.\n(sim-quality 0.80)", n)
    reply = with_sim(SimConfig(), lambda sim, s: chat(sim, s, "judge", user(prompt)))
    text = content_of(reply)
    lines = text.strip().split("\n")
    assert len(lines) >= 2
    verdicts = ast.literal_eval(lines[-1])
    assert isinstance(verdicts, list) and len(verdicts) == n
    assert set(verdicts) <= {"YES", "NO"}


def test_judge_yes_rate_follows_the_quality_of_the_judged_answer() -> None:
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> dict[float, float]:
        rates = {}
        for q in (0.9, 0.4):
            prompt = followbench_prompt(f"Some answer.\n(sim-quality {q})", 400)
            verdicts = ast.literal_eval(content_of(await chat(sim, s, "judge", user(prompt))).split("\n")[-1])
            rates[q] = verdicts.count("YES") / len(verdicts)
        no_quality = followbench_prompt("An answer with no marker.", 400)
        verdicts = ast.literal_eval(content_of(await chat(sim, s, "judge", user(no_quality))).split("\n")[-1])
        rates[0.5] = verdicts.count("YES") / len(verdicts)
        return rates

    rates = with_sim(SimConfig(), go)
    for q, rate in rates.items():
        assert abs(rate - q) < 0.08, (q, rate)


def test_judge_verdicts_are_deterministic_and_independent_of_the_judge_model() -> None:
    prompt = followbench_prompt("Same answer.\n(sim-quality 0.6)", 20)

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[str]:
        return [content_of(await chat(sim, s, m, user(prompt))).split("\n")[-1] for m in ("j1", "j1", "j2")]

    a, b, c = with_sim(SimConfig(), go)
    assert a == b == c
    other_seed = with_sim(SimConfig(seed=1), go)
    assert other_seed[0] != a


INFOBENCH_HEAD = (
    "Based on the provided Input (if any) and Generated Text, "
    "answer the ensuing Questions with either a YES or NO choice."
)


def test_infobench_judge_answers_yes_or_no_per_question_turn() -> None:
    first = (
        f'{INFOBENCH_HEAD}\n\nInput:\n"x"\n\n'
        'Generated Text:\n"Some text.\n(sim-quality 0.5)"\n\nQuestion:\nIs it short?\n'
    )

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[str]:
        messages = [{"role": "user", "content": first}]
        replies = []
        for i in range(40):
            text = content_of(await chat(sim, s, "judge", messages))
            replies.append(text)
            messages = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"Q{i}?\n"},
            ]
        return replies

    replies = with_sim(SimConfig(), go)
    assert set(replies) == {"YES", "NO"}  # one word, and the decision changes with the question turn


def test_cfbench_judge_answers_each_criterion_with_tab_score() -> None:
    criteria = ["回答是关于天气的", "回答包含三段", "回答使用正式语气"]
    prompt = (
        "我想让你扮演一个质量评估器的角色。\n[样例1]:\n    [评估标准]:\n    例子\n\n"
        "[用户指令]: 写一首诗\n\n[参考答案]: \n\n"
        "[模型答案]: 一首诗。\n(sim-quality 0.7)\n\n[评估标准]: "
        + "\n\n".join(criteria)
        + "\n\n[你的评估]: \n"
    )
    text = content_of(with_sim(SimConfig(), lambda sim, s: chat(sim, s, "judge", user(prompt))))
    items = text.split("\n\n")
    assert [item.split("\t")[0] for item in items] == criteria
    assert all(item.split("\t")[1] in {"0", "1"} for item in items)


def test_eifbench_judge_answers_analysis_and_yes_or_no() -> None:
    prompt = (
        "[System]\n请你作为评委，选择“是”或“否”来回答随后的**约束**是否满足。\n"
        "## 输出格式\n分析：xxx\n答案：是/否\n\n"
        "**输入指令**：\n任务\n- **模型回复**：\n回复内容\n(sim-quality 0.9)\n"
        "- **子任务**：\nsub_instruction_0:写总结\n"
        "- **约束**: \n{q}\n请进行分析回答**模型回复**是否满足**问题**：\n\n—OUTPUT—"
    )

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[str]:
        return [content_of(await chat(sim, s, "judge", user(prompt.format(q=f"约束{i}")))) for i in range(30)]

    replies = with_sim(SimConfig(), go)
    assert all(re.fullmatch(r"分析：[^\n]+\n答案：[是否]", r) for r in replies)
    yes = sum(r.endswith("答案：是") for r in replies)
    assert yes >= 20  # quality 0.9 over 30 questions


# --- judge-shaped replies (prompts from the benchmarks' own template files) -------------------------------

needs_bench = pytest.mark.skipif(not BENCH.is_dir(), reason="shared benchmark data not present")


def sim_answer(sim: Simulator, s: aiohttp.ClientSession, model: str, prompt: str) -> Awaitable[Json]:
    return chat(sim, s, model, user(prompt))


@needs_bench
def test_infobench_template_file() -> None:
    sys_msg = (BENCH / "InFoBench" / "prompts" / "sys_msg.txt").read_text(encoding="utf-8")

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[str]:
        generated = content_of(await sim_answer(sim, s, "gen-model", "Describe a cat."))
        first = (
            f'{sys_msg}\n\nInput:\n"Describe a cat."\n\n'
            f'Generated Text:\n"{generated}"\n\nQuestion:\nIs it about a cat?\n'
        )
        messages = [{"role": "user", "content": first}]
        out = []
        for i in range(30):
            text = content_of(await chat(sim, s, "judge", messages))
            out.append(text)
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"Question {i}?\n"},
            ]
        return out

    replies = with_sim(SimConfig(), go)
    assert set(replies) <= {"YES", "NO"} and len(set(replies)) == 2
    # The decision follows the judged answer's quality: the share of YES is near it.
    q = model_quality("gen-model")
    assert abs(replies.count("YES") / 30 - q) < 0.35


@needs_bench
def test_cfbench_template_file_with_real_checklists() -> None:
    template = (BENCH / "CFBench" / "prompts" / "judge_prompt.txt").read_text(encoding="utf-8")
    instances = json.loads((BENCH / "CFBench" / "data" / "cfbench_data.json").read_text(encoding="utf-8"))[:5]

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[tuple[list[str], str]]:
        out = []
        for inst in instances:
            criteria = [c[0] for c in inst["criteria"]]
            response = content_of(await sim_answer(sim, s, "gen-model", inst["prompt"]))
            prompt = (
                template.replace("{prompt}", inst["prompt"])
                .replace("{gold_ans}", inst["gold"])
                .replace("{response}", response)
                .replace("{criteria}", "\n\n".join(criteria))
            )
            out.append((criteria, content_of(await chat(sim, s, "judge", user(prompt)))))
        return out

    for criteria, reply in with_sim(SimConfig(), go):
        items = reply.split("\n\n")
        assert [item.rsplit("\t", 1)[0] for item in items] == criteria
        assert all(item.rsplit("\t", 1)[1] in {"0", "1"} for item in items)


@needs_bench
def test_eifbench_template_file() -> None:
    template = (BENCH / "EIFBench" / "prompts" / "score_prompt.txt").read_text(encoding="utf-8")

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[str]:
        response = content_of(await sim_answer(sim, s, "gen-model", "写一段总结"))
        out = []
        for i in range(10):
            prompt = (
                template.replace("{input}", "写一段总结")
                .replace("{output}", response)
                .replace("{sub_instruction}", "sub_instruction_0:写一段总结")
                .replace("{question}", f"总结不少于{i + 50}字。")
            )
            out.append(
                content_of(
                    await chat(
                        sim,
                        s,
                        "judge",
                        [{"role": "system", "content": "You are a helpful assistant."}, *user(prompt)],
                    )
                )
            )
        return out

    replies = with_sim(SimConfig(), go)
    assert all(re.fullmatch(r"分析：[^\n]+\n答案：[是否]", r) for r in replies)


@needs_bench
def test_followbench_real_instruction_is_not_mistaken_for_a_judge_prompt() -> None:
    rows = json.loads(
        (BENCH / "FollowBench" / "data" / "content_constraints.json").read_text(encoding="utf-8")
    )
    instruction = next(r["instruction"] for r in rows if r.get("level", 0) > 0)
    reply = with_sim(SimConfig(), lambda sim, s: sim_answer(sim, s, "gen-model", instruction))
    assert content_of(reply).startswith(f"(sim-quality {model_quality('gen-model'):.2f})\n")


# --- rate limits ---------------------------------------------------------------------------------------


def test_rpm_limit_answers_429_with_retry_after_and_does_not_consume() -> None:
    # rpm 120 with burst 1 s: a bucket of 2 requests refilled at 2 per second.
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        body = {"model": "m", "messages": user("x")}
        first = await post(s, sim, body)
        second = await post(s, sim, body)
        assert first[0] == second[0] == 200
        assert first[1]["x-ratelimit-limit-requests"] == "120"
        assert first[1]["x-ratelimit-remaining-requests"] == "1"
        status, headers, data = await post(s, sim, body)
        assert status == 429
        assert json.loads(data)["error"]["code"] == "rate_limit_exceeded"
        assert headers["Retry-After"] == "1"
        wait_ms = int(headers["retry-after-ms"])
        assert 300 <= wait_ms <= 500
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert re.fullmatch(r"\d+ms|\d+(\.\d+)?s", headers["x-ratelimit-reset-requests"])
        # A string of refusals takes nothing: waiting as told is enough.
        for _ in range(5):
            assert (await post(s, sim, body))[0] == 429
        await asyncio.sleep(wait_ms / 1000 + 0.05)
        assert (await post(s, sim, body))[0] == 200
        assert sim.stats.status_counts == {200: 3, 429: 6}

    with_sim(SimConfig(rpm=120, burst_s=1.0), go)


def test_rpm_throughput_is_close_to_the_limit() -> None:
    # rpm 1200: 20 per second after a burst of 10 (burst_s 0.5); clients retry as Retry-After-ms says.
    duration = 2.0

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> int:
        done = 0
        deadline = time.monotonic() + duration

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                status, headers, _ = await post(s, sim, {"model": "m", "messages": user("x")})
                if status == 200:
                    done += 1
                else:
                    await asyncio.sleep(int(headers["retry-after-ms"]) / 1000)

        await asyncio.gather(*(worker() for _ in range(8)))
        return done

    done = with_sim(SimConfig(rpm=1200, burst_s=0.5), go)
    ideal = 10 + 20 * duration
    assert 0.8 * ideal <= done <= ideal + 2, done


def test_tpm_limit_charges_prompt_plus_max_tokens() -> None:
    # tpm 6000 with burst 1 s: 100 tokens.
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        status, headers, _ = await post(s, sim, {"model": "m", "messages": user("x"), "max_tokens": 60})
        assert status == 200
        assert headers["x-ratelimit-limit-tokens"] == "6000"
        assert headers["x-ratelimit-remaining-tokens"] in {"38", "39"}  # 100 - (1 prompt token + 60)
        status, headers, _ = await post(s, sim, {"model": "m", "messages": user("x"), "max_tokens": 60})
        assert status == 429
        assert "x-ratelimit-limit-requests" not in headers  # no rpm configured
        status, _, _ = await post(s, sim, {"model": "m", "messages": user("x"), "max_tokens": 30})
        assert status == 200

    with_sim(SimConfig(tpm=6000, burst_s=1.0), go)


def test_limit_headers_can_be_switched_off() -> None:
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        body = {"model": "m", "messages": user("x")}
        ok = await post(s, sim, body)
        limited = await post(s, sim, body)
        assert ok[0] == 200 and limited[0] == 429
        for _, headers, _ in (ok, limited):
            assert not any(h.lower().startswith(("x-ratelimit", "retry-after")) for h in headers)

    with_sim(SimConfig(rpm=30, burst_s=2.0, send_retry_after=False, send_ratelimit_headers=False), go)


def test_token_bucket_with_injected_clock() -> None:
    now = [100.0]
    bucket = TokenBucket(600, burst_s=1.0, clock=lambda: now[0])  # capacity 10, 10 per second
    assert bucket.capacity == 10 and bucket.wait_for(10) == 0
    bucket.take(10)
    assert bucket.wait_for(1) == pytest.approx(0.1)
    now[0] += 0.5
    assert bucket.level() == pytest.approx(5)
    assert bucket.reset_in() == pytest.approx(0.5)
    assert bucket.wait_for(50) == pytest.approx(0.5)  # above capacity: waits for a full bucket
    assert [format_reset(x) for x in (0.0351, 1.2, 6.0, 360.0)] == ["36ms", "1.2s", "6s", "6m0s"]


# --- faults --------------------------------------------------------------------------------------------


def fault_config(name: str, **kw: Any) -> SimConfig:
    return SimConfig(faults=FaultRates(**{name: 1.0}), **kw)


async def outcome(
    sim: Simulator, s: aiohttp.ClientSession, deadline_s: float = 10.0
) -> tuple[str, Any, dict[str, str]]:
    """What a client sees: ('exc', exception class name) or ('http', status, headers) plus the body."""
    try:
        async with s.post(
            sim.base_url + "/chat/completions",
            json={"model": "m", "messages": user("hello")},
            timeout=aiohttp.ClientTimeout(total=deadline_s),
        ) as resp:
            body = await resp.read()
            return "http", (resp.status, resp.content_type, body), dict(resp.headers)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return "exc", type(exc).__name__, {}


def body_json(result: tuple[str, Any, dict[str, str]]) -> Json:
    assert result[0] == "http"
    parsed: Json = json.loads(result[1][2])
    return parsed


FAST_FAULTS = [n for n in FAULT_NAMES if n not in {"hang", "trickle"}]


@pytest.mark.parametrize("name", FAST_FAULTS)
def test_each_fault_is_reachable(name: str) -> None:
    result = with_sim(fault_config(name), lambda sim, s: outcome(sim, s))
    kind, value, headers = result
    if name == "server_error":
        assert kind == "http" and value[0] in {500, 502, 503}
        assert body_json(result)["error"]["type"] == "server_error"
    elif name == "rate_limit":
        assert kind == "http" and value[0] == 429
        assert headers["Retry-After"] == "1" and headers["retry-after-ms"] == "250"
    elif name == "rate_limit_no_header":
        assert kind == "http" and value[0] == 429
        assert not any(h.lower().startswith(("retry-after", "x-ratelimit")) for h in headers)
    elif name == "malformed":
        assert kind == "http" and value[0] == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(value[2])
    elif name == "cut_body":
        assert (kind, value) == ("exc", "ClientPayloadError")
    elif name == "reset":
        assert kind == "exc" and value in {"ClientOSError", "ServerDisconnectedError"}
    elif name == "context_length":
        assert kind == "http" and value[0] == 400
        assert body_json(result)["error"]["code"] == "context_length_exceeded"
    elif name == "quota":
        assert kind == "http" and value[0] == 429
        error = body_json(result)["error"]
        assert error["code"] == error["type"] == "insufficient_quota"
    elif name == "wrong_content_type":
        assert value[0] == 200 and value[1] == "text/html"
        assert content_of(body_json(result))
    else:
        reply = body_json(result)
        choice = reply["choices"][0]
        message = choice["message"]
        if name == "missing_usage":
            assert "usage" not in reply and message["content"]
        elif name == "null_content":
            assert message["content"] is None
        elif name == "empty":
            assert message["content"] == "" and reply["usage"]["completion_tokens"] == 0
        elif name == "length":
            assert choice["finish_reason"] == "length" and message["content"]
            # cut to a third of the answer it would have given
            assert reply["usage"]["completion_tokens"] <= 100
        elif name == "content_filter":
            assert choice["finish_reason"] == "content_filter" and message["content"] is None
        elif name == "refusal":
            assert message["refusal"] == message["content"] == "I can't help with that."
        else:
            raise AssertionError(f"untested fault {name}")


def test_hang_ends_when_the_client_gives_up_or_after_hang_s() -> None:
    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        start = time.perf_counter()
        assert await outcome(sim, s, deadline_s=0.3) == ("exc", "TimeoutError", {})
        assert time.perf_counter() - start < 1.0
        await asyncio.sleep(0.1)
        assert sim.stats.in_flight == 0  # the handler ended with the client's connection
        sim.set_config(fault_config("hang", hang_s=0.2))
        kind, value, _ = await outcome(sim, s, deadline_s=5)
        assert kind == "exc" and value in {"ClientOSError", "ServerDisconnectedError"}

    with_sim(fault_config("hang"), go)


def test_hung_requests_do_not_delay_shutdown() -> None:
    async def go() -> float:
        async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as s:
            async with Simulator(fault_config("hang")) as sim:
                task = asyncio.ensure_future(outcome(sim, s, deadline_s=30))
                await asyncio.sleep(0.2)
                start = time.perf_counter()
            closed_in = time.perf_counter() - start
            result = await task
            assert result[0] == "exc"
            return closed_in

    assert run(go()) < 1.0


def test_trickle_sends_the_whole_body_slowly() -> None:
    start = time.perf_counter()
    result = with_sim(fault_config("trickle"), lambda sim, s: outcome(sim, s, deadline_s=10))
    elapsed = time.perf_counter() - start
    assert content_of(body_json(result))
    assert 2.0 <= elapsed <= 6.0


def classify(result: tuple[str, Any, dict[str, str]]) -> str:
    if result[0] == "exc":
        return str(result[1])
    status, _, body = result[1]
    if status != 200:
        return str(status)
    message = json.loads(body)["choices"][0]["message"]
    return "refusal" if message["refusal"] else ("empty" if message["content"] == "" else "ok")


def test_seeded_fault_rates_are_reproducible() -> None:
    faults = FaultRates(server_error=0.1, empty=0.2, refusal=0.1)

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> list[str]:
        return [classify(await outcome(sim, s)) for _ in range(300)]

    first = with_sim(SimConfig(faults=faults, seed=7), go)
    again = with_sim(SimConfig(faults=faults, seed=7), go)
    other = with_sim(SimConfig(faults=faults, seed=8), go)
    assert first == again
    assert first != other
    n = len(first)
    errors = sum(k in {"500", "502", "503"} for k in first)
    for count, rate in ((errors, 0.1), (first.count("empty"), 0.2), (first.count("refusal"), 0.1)):
        assert abs(count - rate * n) < 4 * math.sqrt(n * rate * (1 - rate)), (count, rate)


def test_fault_picker_shares_the_draw_when_rates_sum_above_one() -> None:
    picker = FaultPicker(FaultRates(empty=1.0, refusal=1.0), seed=3)
    picks = [picker.pick() for _ in range(2000)]
    assert None not in picks
    assert 800 < picks.count("empty") < 1200
    picker = FaultPicker(FaultRates(), seed=3)
    assert {picker.pick() for _ in range(100)} == {None}


def test_fault_rates_are_validated() -> None:
    with pytest.raises(ValueError, match=r"FaultRates\.empty"):
        FaultRates(empty=1.5)
    with pytest.raises(ValueError, match=r"SimConfig\.rpm"):
        SimConfig(rpm=0)


# --- threads and processes -----------------------------------------------------------------------------


def sync_post(base_url: str, body: Json) -> tuple[int, Json]:
    request = urllib.request.Request(
        base_url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-x"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_simulator_thread_serves_sync_code() -> None:
    with SimulatorThread(SimConfig()) as sim:
        assert sim.base_url == f"http://127.0.0.1:{sim.port}/v1"
        status, reply = sync_post(sim.base_url, {"model": "m", "messages": user("hi")})
        assert status == 200 and reply["choices"][0]["message"]["content"]
        sim.set_config(fault_config("server_error"))
        status, reply = sync_post(sim.base_url, {"model": "m", "messages": user("hi")})
        assert status in {500, 502, 503} and reply["error"]["type"] == "server_error"
        assert sim.stats.requests == 2
        assert sum(sim.stats.status_counts.values()) == 2
    # Stopped: the port no longer answers.
    with pytest.raises(OSError):
        sync_post(sim.base_url, {"model": "m", "messages": user("hi")})


def test_module_runs_as_a_subprocess_and_exits_on_sigterm() -> None:
    env = dict(os.environ)
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ifsweep.simulator",
            "--port",
            "0",
            "--fault",
            "empty=1.0",
            "--seed",
            "3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline().strip()
            match = re.fullmatch(r"listening on (http://127\.0\.0\.1:(\d+)/v1)", line)
            assert match, line
            status, reply = sync_post(match.group(1), {"model": "m", "messages": user("hi")})
            assert status == 200 and reply["choices"][0]["message"]["content"] == ""
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
            # Nothing went wrong on the way out (runpy warns when `-m` runs a module its package has
            # imported already; the package's __main__ avoids that).
            err = proc.stderr.read()
            assert "Traceback" not in err and "RuntimeWarning" not in err
        finally:
            if proc.poll() is None:
                proc.kill()


def test_serve_main_rejects_an_unknown_fault(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        serve_main(["--fault", "gremlins=0.5"])
    assert exc.value.code == 2
    assert "gremlins" in capsys.readouterr().err


def test_request_headers_never_reach_a_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    rates = FaultRates(server_error=0.2, malformed=0.2, reset=0.2, cut_body=0.2)
    headers = {"Authorization": "Bearer sk-not-a-real-key", "User-Agent": "ua-marker-123"}

    async def go(sim: Simulator, s: aiohttp.ClientSession) -> None:
        url = sim.base_url + "/chat/completions"
        for _ in range(20):
            with contextlib.suppress(aiohttp.ClientError):
                async with s.post(url, json={"model": "m", "messages": user("x")}, headers=headers) as r:
                    await r.read()
        async with s.post(url, data=b"nope", headers=headers) as r:
            assert r.status == 400

    with_sim(SimConfig(faults=rates, seed=1), go)
    assert "sk-not-a-real-key" not in caplog.text
    assert "ua-marker-123" not in caplog.text  # the access log's default format would print it


# --- properties of the pure parts ----------------------------------------------------------------------

criterion_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\t\n\r"),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(criteria=st.lists(criterion_text, min_size=1, max_size=8), response=st.text(max_size=80))
def test_cfbench_reply_lists_every_criterion_in_order(criteria: list[str], response: str) -> None:
    prompt = (
        "[样例1]:\n    [评估标准]:\n    x\n\n[用户指令]: p\n\n[参考答案]: \n\n[模型答案]: "
        + response
        + "\n\n[评估标准]: "
        + "\n\n".join(criteria)
        + "\n\n[你的评估]: \n"
    )
    reply = JUDGES.reply(user(prompt), seed=0)
    assert reply is not None
    items = reply.split("\n\n")
    assert [i.rsplit("\t", 1)[0] for i in items] == criteria
    assert {i.rsplit("\t", 1)[1] for i in items} <= {"0", "1"}


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=2000), max_tokens=st.integers(min_value=1, max_value=600))
def test_cut_to_tokens_respects_max_tokens(text: str, max_tokens: int) -> None:
    reply = cut_to_tokens(text, max_tokens)
    assert count_tokens(reply.text) <= max_tokens
    assert text.startswith(reply.text)
    assert (reply.finish_reason == "stop") == (reply.text == text)


def test_serve_mock_help_and_bad_options_reach_the_simulators_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ifsweep.runner.commands.cli import main

    with pytest.raises(SystemExit) as done:
        main(["serve-mock", "--help"])
    assert done.value.code == 0
    assert "--latency-ms" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["serve-mock", "--rpm", "many"])
    assert bad.value.code == 2
    assert "--rpm" in capsys.readouterr().err
