"""Judge economy, prefix caching (issue 13 part A), over real HTTP against the simulator: its prefix
cache, settlement at the cached price, cached tokens in the shards, and warm-then-fan-out dispatch seen
from the server's side (arrival and answer times)."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from sweeps import stored_records, toml_config

from ifsweep import benchmarks
from ifsweep.providers.budget import Budget
from ifsweep.providers.pool import ProviderPool
from ifsweep.providers.records import EndpointSpec, Price
from ifsweep.providers.send.prefix import CacheHint, PrefixEnd, with_breakpoint
from ifsweep.runner.commands.cli import main
from ifsweep.runner.commands.planning import estimate
from ifsweep.runner.commands.reporting import render_status
from ifsweep.runner.config import ConfigError, load_config
from ifsweep.runner.engine.sweep import load_work
from ifsweep.runner.engine.warmup import MIN_PREFIX_TOKENS, group_by_prefix
from ifsweep.runner.watch.status import status_table
from ifsweep.simulator import SimConfig, Simulator, SimulatorThread
from ifsweep.simulator.prefix import BLOCK_TOKENS, MIN_CACHED_TOKENS

CACHED_PRICE = Price(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.2)
SHARED = "The shared judging context repeats here. " * 300  # about 12,000 characters


def _spec(base: str, **kw: Any) -> EndpointSpec:
    fields: dict[str, Any] = {
        "label": "j",
        "model": "openai/sim-judge",
        "api_base": base,
        "params": {"max_tokens": 400},
        "price": CACHED_PRICE,
        "timeout_s": 10.0,
    }
    fields.update(kw)
    return EndpointSpec(**fields)


def _prompt(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Judge."}, {"role": "user", "content": SHARED + question}]


def test_simulator_caches_a_prefix_only_after_a_request_carrying_it_completed() -> None:
    async def run() -> None:
        async with Simulator(SimConfig(latency_ms=60)) as sim:
            spec = _spec(sim.base_url)
            async with ProviderPool(budget=Budget(None)) as pool:
                ep = pool.endpoint(spec)
                together = await asyncio.gather(*(ep.complete(_prompt(f"Q{i}?")) for i in range(3)))
                assert [c.cached_tokens for c in together] == [0, 0, 0]
                later = await ep.complete(_prompt("Q9?"))
                short = await ep.complete([{"role": "user", "content": "short " * 100}])
            # What the server says it served from cache is what the client settled.
            served = list(sim.stats.log)
            assert served[-2].cached_tokens == later.cached_tokens
            assert later.cached_tokens >= MIN_CACHED_TOKENS
            assert later.cached_tokens % BLOCK_TOKENS == 0
            # The shared part runs to about 3,000 simulator tokens; the cache covers it up to a block.
            shared_tokens = len(SHARED) // 4
            assert shared_tokens - BLOCK_TOKENS <= later.cached_tokens <= shared_tokens + BLOCK_TOKENS
            assert short.status == "ok" and short.cached_tokens == 0

    asyncio.run(run())


@pytest.mark.parametrize("force_litellm", [False, True])
def test_cached_tokens_settle_at_the_cached_price(force_litellm: bool) -> None:
    async def run() -> None:
        async with Simulator(SimConfig()) as sim:
            spec = _spec(sim.base_url, force_litellm=force_litellm)
            budget = Budget(None)
            async with ProviderPool(budget=budget) as pool:
                ep = pool.endpoint(spec)
                first = await ep.complete(_prompt("First?"))
                second = await ep.complete(_prompt("Second?"))
            served = list(sim.stats.log)
            assert first.cached_tokens == 0 and served[0].cached_tokens == 0
            assert second.cached_tokens == served[1].cached_tokens > 0
            assert second.input_tokens == served[1].prompt_tokens
            p = CACHED_PRICE
            plain = second.input_tokens - second.cached_tokens
            expected = (
                plain * p.input_per_mtok
                + second.cached_tokens * (p.cached_input_per_mtok or 0)
                + second.output_tokens * p.output_per_mtok
            ) / 1e6
            assert second.cost_usd == pytest.approx(expected, rel=1e-12)
            full = (second.input_tokens * p.input_per_mtok + second.output_tokens * p.output_per_mtok) / 1e6
            assert second.cache_saved_usd == pytest.approx(full - expected, rel=1e-9)
            assert first.cost_usd == pytest.approx(
                (first.input_tokens * 2.0 + first.output_tokens * 8.0) / 1e6, rel=1e-12
            )
            assert budget.spent_usd == pytest.approx(first.cost_usd + second.cost_usd, rel=1e-12)

    asyncio.run(run())


def test_reservation_stays_worst_case_with_dear_cache_writes() -> None:
    price = Price(1.0, 4.0, cached_input_per_mtok=0.1, cache_write_per_mtok=1.25)
    assert price.worst_case(1000, 100) == pytest.approx((1000 * 1.25 + 100 * 4.0) / 1e6)
    # Reads cheaper, writes dearer, the rest plain.
    assert price.cost(1000, 100, cached_tokens=600, cache_write_tokens=300) == pytest.approx(
        (100 * 1.0 + 600 * 0.1 + 300 * 1.25 + 100 * 4.0) / 1e6
    )


def test_breakpoint_splits_the_prefix_message_without_changing_its_text() -> None:
    prompt = _prompt("Is it so?")
    hint = CacheHint("k", PrefixEnd(1, len(SHARED)))
    sent = with_breakpoint("anthropic", prompt, hint)
    blocks = sent[1]["content"]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"}
    assert "".join(b["text"] for b in blocks) == prompt[1]["content"]
    assert blocks[0]["text"] == SHARED
    assert sent[0] == prompt[0]
    assert with_breakpoint("openai", prompt, hint) == prompt


def test_groups_need_a_long_enough_shared_prefix() -> None:
    prompts = [_prompt(f"Question {i}?") for i in range(5)] + [[{"role": "user", "content": "tiny"}]]
    groups = group_by_prefix(prompts, "scope")
    assert len(groups) == 1
    assert groups[0].members == (0, 1, 2, 3, 4)
    assert groups[0].tokens >= MIN_PREFIX_TOKENS
    assert groups[0].end == PrefixEnd(1, len(SHARED) + len("Question "))
    short = [[{"role": "user", "content": "a" * 100 + str(i)}] for i in range(4)]
    assert group_by_prefix(short, "scope") == []


def _eif_sweep(tmp_path: Path, base: str, name: str, dispatch: bool | None, data: Path) -> tuple[Path, Path]:
    out = tmp_path / name
    cfg = tmp_path / f"{name}.toml"
    # The real party set (its judge prompts run to thousands of tokens), two tasks.
    text = toml_config(out, base, models=("alpha",), bench=("eifbench",), data={"eifbench": data}, limit=2)
    judge_extra = "price = { input_per_mtok = 2.0, output_per_mtok = 8.0, cached_input_per_mtok = 0.2 }"
    if dispatch is not None:
        judge_extra += f"\ncache_dispatch = {'true' if dispatch else 'false'}"
    text = text.replace('model = "openai/sim-judge"', f'model = "openai/sim-judge"\n{judge_extra}')
    cfg.write_text(text)
    return out, cfg


def _judge_log(sim: SimulatorThread) -> list[Any]:
    return [s for s in sim.stats.log if s.model == "sim-judge"]


def test_warm_then_fan_out_at_the_simulator(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_benchmarks / "EIFBench"
    with SimulatorThread(SimConfig(latency_ms=80, seed=3)) as sim:
        out, cfg = _eif_sweep(tmp_path, sim.base_url, "warm", None, data)
        assert main(["run", str(cfg)]) == 0
        served = _judge_log(sim)
        by_key: dict[str, list[Any]] = defaultdict(list)
        for s in served:
            assert s.prompt_cache_key is not None, "every judge call of a task shares its prefix here"
            by_key[s.prompt_cache_key].append(s)
        assert len(by_key) == 2  # one group per task
        for group in by_key.values():
            group.sort(key=lambda s: s.arrived)
            first, rest = group[0], group[1:]
            assert rest, "a group has the warm call and its followers"
            # Nothing of the group reached the server before the warm call was answered...
            assert all(s.arrived >= first.answered for s in rest)
            # ...so the first pays in full and every follower finds the prefix cached.
            assert first.cached_tokens == 0
            assert all(s.cached_tokens > 0 for s in rest)
        judged = stored_records(out, {"judgment"})
        assert sum(r["cached_tokens"] for r in judged) == sum(s.cached_tokens for s in served)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "complete"
        # status: the cached share and the dollars it saved, from the shards.
        (row,) = status_table(out)
        assert row["cached_tokens"] == sum(s.cached_tokens for s in sim.stats.log)
        assert row["input_tokens"] == sum(s.prompt_tokens for s in sim.stats.log)
        saved = sum(r["cache_saved_usd"] for r in stored_records(out, {"judgment", "generation"}))
        assert row["cache_saved_usd"] == pytest.approx(saved) and saved > 0
        # The judge's cached tokens cost 0.2 instead of 2.0 per million; nothing else is discounted.
        assert saved == pytest.approx(sum(r["cached_tokens"] for r in judged) * 1.8 / 1e6)
        shown = render_status(out)
        assert f"{row['cached_tokens'] / row['input_tokens']:.0%}" in shown
        # The report's run analytics: the same share and dollars.
        capsys.readouterr()
        assert main(["report", str(out), "--format", "md"]) == 0
        report = capsys.readouterr().out
        assert "cached in" in report and "cache saved" in report
        assert f"{row['cached_tokens'] / row['input_tokens']:.1%}" in report
        assert f"${row['cache_saved_usd']:,.4f}" in report

    # The same sweep with dispatch off (on a fresh simulator: a cold cache) sends a task's judge calls
    # together, so most of them miss.
    with SimulatorThread(SimConfig(latency_ms=80, seed=3)) as sim:
        out_off, cfg_off = _eif_sweep(tmp_path, sim.base_url, "fanout", False, data)
        assert main(["run", str(cfg_off)]) == 0
        off = _judge_log(sim)
    assert all(s.prompt_cache_key is None for s in off)
    assert len(off) == len(served)
    share_on = sum(s.cached_tokens for s in served) / sum(s.prompt_tokens for s in served)
    share_off = sum(s.cached_tokens for s in off) / sum(s.prompt_tokens for s in off)
    assert share_on > share_off
    # Identical verdicts either way.
    verdicts = {(r["model"], r["instance_id"]): r["rows"] for r in stored_records(out, {"verdict"})}
    verdicts_off = {(r["model"], r["instance_id"]): r["rows"] for r in stored_records(out_off, {"verdict"})}
    assert verdicts == verdicts_off


def _plan_config(tmp_path: Path, data: Path, base: str, judge_extra: str, limit: int = 3) -> Path:
    bench = "eifbench"
    text = toml_config(
        tmp_path / "run", base, models=("alpha",), bench=(bench,), data={bench: data}, limit=limit
    )
    text = text.replace(
        "params = { temperature = 0, max_tokens = 128 }",
        "params = { temperature = 0, max_tokens = 128 }\n"
        "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }",
    )
    text = text.replace(
        'model = "openai/sim-judge"',
        'model = "openai/sim-judge"\nparams = { max_tokens = 64 }\n'
        "price = { input_per_mtok = 2.0, output_per_mtok = 8.0, cached_input_per_mtok = 0.2 }\n"
        + judge_extra,
    )
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def test_plan_shows_cost_with_and_without_caching(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_benchmarks / "EIFBench"
    cfg = load_config(_plan_config(tmp_path, data, "http://127.0.0.1:9/v1", ""))
    work = load_work(cfg)
    (row,) = estimate(cfg, work)
    assert row.cost_low is not None and row.cost_cached_low is not None and row.cost_cached_high is not None
    assert row.judge_cached_tokens > 0
    # Cached tokens cost a tenth: the difference is exactly their discount (no write price here).
    assert row.cost_low - row.cost_cached_low == pytest.approx(row.judge_cached_tokens * (2.0 - 0.2) / 1e6)
    # Most of a task's judge prompt is shared: most of the input is read from cache.
    assert row.judge_cached_tokens > 0.5 * row.input_tokens
    assert main(["plan", str(_plan_config(tmp_path, data, "http://127.0.0.1:9/v1", ""))]) == 0
    out = capsys.readouterr().out
    assert "with caching $" in out and "cl100k_base" in out

    off = load_config(_plan_config(tmp_path, data, "http://127.0.0.1:9/v1", "cache_dispatch = false"))
    (row_off,) = estimate(off, work)
    assert row_off.cost_cached_low is None and row_off.judge_cached_tokens == 0
    assert row_off.cost_low == pytest.approx(row.cost_low)
    assert (
        main(["plan", str(_plan_config(tmp_path, data, "http://127.0.0.1:9/v1", "cache_dispatch = false"))])
        == 0
    )
    assert "with caching" not in capsys.readouterr().out


def test_plan_counts_real_tokens_and_the_outputs_a_run_has_seen(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    data = shared_benchmarks / "EIFBench"
    with SimulatorThread(SimConfig(seed=4)) as sim:
        path = _plan_config(tmp_path, data, sim.base_url, "", limit=6)  # MIN_SEEN_CALLS answers and more
        cfg = load_config(path)
        work = load_work(cfg)
        (rough,) = estimate(cfg, work, real_tokens=False)
        (real,) = estimate(cfg, work)
        # Chinese prompts: the character estimate reads well above cl100k's count.
        assert real.input_tokens < rough.input_tokens
        assert not real.outputs_seen and real.output_low < real.output_high
        assert main(["run", str(path)]) == 0
    gens = stored_records(tmp_path / "run", {"generation"})
    judged = stored_records(tmp_path / "run", {"judgment"})
    (resumed,) = estimate(cfg, work)
    assert resumed.outputs_seen
    mean_gen = sum(r["output_tokens"] for r in gens) / len(gens)
    mean_judge = sum(r["output_tokens"] for r in judged) / len(judged)
    assert resumed.output_low == resumed.output_high
    assert resumed.output_low == round(len(gens) * mean_gen) + round(resumed.judge_calls * mean_judge)


def test_config_reads_cache_prices_and_dispatch_and_names_bad_values(tmp_path: Path) -> None:
    base = "http://127.0.0.1:9/v1"
    path = _plan_config(tmp_path, benchmarks.get("eifbench").fixture_dir(), base, "cache_dispatch = false")
    text = path.read_text().replace(
        "cached_input_per_mtok = 0.2", "cached_input_per_mtok = 0.2, cache_write_per_mtok = 2.5"
    )
    path.write_text(text)
    cfg = load_config(path)
    assert cfg.judge is not None and cfg.judge.cache_dispatch is False
    assert cfg.judge.price == Price(2.0, 8.0, cached_input_per_mtok=0.2, cache_write_per_mtok=2.5)
    assert cfg.models[0].cache_dispatch is None  # unset: the provider decides
    path.write_text(text.replace("cache_dispatch = false", 'cache_dispatch = "sometimes"'))
    with pytest.raises(ConfigError, match=r"judge\.cache_dispatch"):
        load_config(path)
    path.write_text(text.replace("cache_write_per_mtok = 2.5", "cache_write_per_mtok = -1"))
    with pytest.raises(ConfigError, match=r"judge\.price\.cache_write_per_mtok"):
        load_config(path)


@pytest.mark.parametrize("force_litellm", [False, True])
def test_prompt_cache_key_reaches_an_openai_endpoint_on_both_paths(force_litellm: bool) -> None:
    async def run() -> None:
        async with Simulator(SimConfig()) as sim:
            spec = _spec(sim.base_url, force_litellm=force_litellm)
            async with ProviderPool(budget=Budget(None)) as pool:
                ep = pool.endpoint(spec)
                assert ep.caches_prefixes  # openai with an api_base: a server that caches prefixes
                hint = CacheHint("group-key", PrefixEnd(1, len(SHARED)))
                done = await ep.complete(_prompt("Hinted?"), hint)
                plain = await ep.complete(_prompt("Plain?"))
            assert done.status in ("ok", "truncated") and plain.status in ("ok", "truncated")
            assert [s.prompt_cache_key for s in sim.stats.log] == ["group-key", None]

    asyncio.run(run())
