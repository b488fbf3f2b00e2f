"""The scheduler against a real simulator: fairness between a fast and a throttled model, the global cap
on calls in flight, judge calls interleaved with generation, 429s end to end, back-off events reaching
the progress state."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweeps import stored_records

from ifsweep import benchmarks
from ifsweep.providers import Budget, ProviderEvent, ProviderPool
from ifsweep.providers.records import EndpointSpec
from ifsweep.providers.send.retry import RetryPolicy
from ifsweep.runner.commands.cli import main
from ifsweep.runner.engine.scheduler import Work, count_planned, initial_workers, pairs_for, worker_budget
from ifsweep.runner.watch.board import plain_line
from ifsweep.runner.watch.outcomes import Counters
from ifsweep.runner.watch.progress import ProgressState
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=5)) as s:
        yield s


def model_table(label: str, base: str, extra: str = "") -> str:
    return "\n".join(
        [
            "[[models]]",
            f'id = "{label}"',
            f'model = "openai/sim-{label}"',
            f'api_base = "{base}"',
            "params = { temperature = 0, max_tokens = 64 }",
            extra,
            "",
        ]
    )


def config(
    out: Path,
    base: str,
    models: str,
    *,
    bench: str = "followbench",
    limit: int | None = None,
    run_extra: str = "",
    judge: bool = True,
    judge_extra: str = "",
) -> str:
    data = benchmarks.get(bench).fixture_dir()
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', run_extra, ""]
    lines += ["[[benchmarks]]", f'name = "{bench}"', f'data = "{data}"']
    if limit is not None:
        lines.append(f"limit = {limit}")
    lines += ["", models]
    if judge:
        lines += [
            "[judge]",
            'id = "judge"',
            'model = "openai/sim-judge"',
            f'api_base = "{base}"',
            judge_extra,
        ]
    return "\n".join(lines)


def summary(out: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return body


def test_throttled_model_does_not_hold_back_the_fast_one(tmp_path: Path, sim: SimulatorThread) -> None:
    # "slow" is paced to 120 requests/min (2/s) by its own limiter; "fast" has no limit. With only 4
    # calls in flight in the whole sweep, the slow model's workers wait in its limiter, never in a
    # global slot, so the fast model runs at its own pace.
    out = tmp_path / "run"
    models = model_table("fast", sim.base_url) + model_table("slow", sim.base_url, "rpm = 120")
    cfg = tmp_path / "sweep.toml"
    # File order: `limit` = the first 8 instances (in the seeded order it would be 8 groups of 5).
    cfg.write_text(config(out, sim.base_url, models, limit=8, run_extra='concurrency = 4\norder = "file"'))
    assert main(["run", str(cfg)]) == 0
    gens = stored_records(out, {"generation"})
    ts = {m: sorted(g["ts"] for g in gens if g["model"] == m) for m in ("fast", "slow")}
    assert len(ts["fast"]) == len(ts["slow"]) == 8
    start = min(ts["fast"][0], ts["slow"][0])
    # 8 slow calls at 2/s after a burst of 2: at least 3 s. The fast model is done long before.
    assert ts["slow"][-1] - start >= 2.5
    assert ts["fast"][-1] - start < 1.5, ts
    verdicts = stored_records(out, {"verdict"})
    fast_done = max(v["ts"] for v in verdicts if v["model"] == "fast")
    assert fast_done - start < 2.0  # its judge calls were not queued behind the slow model either
    by_model = {r["model"]: r for r in summary(out)["by_model"]}
    assert by_model["fast"]["done"] == by_model["slow"]["done"] == 8


def example_copies(folder: Path, copies: int) -> Path:
    """FollowBench's fixture example file, `copies` times over as distinct rule-scored instances."""
    rows = json.loads(
        (benchmarks.get("followbench").fixture_dir() / "data" / "example_constraints.json").read_text()
    )
    out = [
        r | {"example_id": r["example_id"] + 1000 * k, "instruction": f"{r['instruction']} ({k})"}
        for k in range(copies)
        for r in rows
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "example_constraints.json").write_text(json.dumps(out, ensure_ascii=False))
    return folder


def test_a_fast_model_among_throttled_ones_grows_past_its_start(tmp_path: Path) -> None:
    # 12 models share 24 calls in flight and a budget of 48 workers, 4 each at the start. Eleven are
    # paced by their own limiters to 200 requests/min (about one call in flight at 300 ms each): their
    # workers queue there, so all but one of each retire, which leaves workers and room in the pool for
    # the unthrottled model to grow (at most one worker per finished call) to its own cap, 16.
    # The peak is counted at the server, so each call's latency must dwarf the client's work between two
    # calls of a worker (scoring, the record), which a loaded machine stretches: at 100 ms, a load of
    # 10 on 2 cores kept 16 workers to 8-11 requests at the server, on the code before the merges too.
    data = example_copies(tmp_path / "data", 12)  # 60 rule-scored instances: no judge calls
    with SimulatorThread(SimConfig(latency_ms=300, seed=3)) as sim:
        out = tmp_path / "run"
        models = model_table("fast", sim.base_url, "max_concurrency = 16")
        models += "".join(model_table(f"slow{i}", sim.base_url, "rpm = 200") for i in range(11))
        lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 24", ""]
        lines += ["[[benchmarks]]", 'name = "followbench"', f'data = "{data}"', 'categories = ["example"]']
        lines += ["", models]
        cfg = tmp_path / "sweep.toml"
        cfg.write_text("\n".join(lines))
        assert main(["run", str(cfg)]) == 0
        peak = sim.stats.max_waiting_by_model
        assert 12 <= peak["sim-fast"] <= 16, peak
        assert max(peak[f"sim-slow{i}"] for i in range(11)) <= 4, peak  # their start, at most
        assert sim.stats.max_in_flight <= 24
        assert sim.stats.requests == 12 * 60


def test_initial_workers_share_the_worker_budget() -> None:
    assert worker_budget(64, 40) == 128 and worker_budget(64, 160) == 160  # 2 x global, or 1 per model
    assert initial_workers(32, 64, 1) == 32  # one model: its cap
    assert initial_workers(32, 64, 40) == 3  # 128 // 40
    assert initial_workers(32, 64, 160) == 1  # never fewer than one
    assert initial_workers(1, 64, 4) == 1  # nor more than the model's own cap


def test_calls_in_flight_never_exceed_run_concurrency(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(latency_ms=30, seed=1)) as sim:
        out = tmp_path / "run"
        models = "".join(model_table(m, sim.base_url) for m in ("a", "b", "c"))
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(config(out, sim.base_url, models, bench="cfbench", run_extra="concurrency = 5"))
        assert main(["run", str(cfg)]) == 0
        assert sim.stats.max_in_flight == 5  # reached, and never more
        assert sim.stats.requests == 3 * 12 * 2  # CFBench fixture: 12 instances, one judge call each


def test_judge_calls_start_while_generation_goes_on(tmp_path: Path) -> None:
    # No stage barrier: the first judgment is stored before the last generation.
    with SimulatorThread(SimConfig(latency_ms=10, seed=2)) as sim:
        out = tmp_path / "run"
        models = "".join(model_table(m, sim.base_url) for m in ("a", "b"))
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(config(out, sim.base_url, models, bench="cfbench", run_extra="concurrency = 4"))
        assert main(["run", str(cfg)]) == 0
    gens = stored_records(out, {"generation"})
    judged = stored_records(out, {"judgment"})
    assert len(gens) == 24 and len(judged) == 24
    assert min(j["ts"] for j in judged) < max(g["ts"] for g in gens)


def test_models_interleave_in_one_stream() -> None:
    bench = benchmarks.get("cfbench")
    from ifsweep.runner.config import BenchmarkConfig
    from ifsweep.runner.engine.pipeline import BenchJob

    insts = tuple(bench.load(bench.fixture_dir(), {}))
    job = BenchJob(BenchmarkConfig("cfbench", None, None, "paper", 0), bench, bench.template_version())
    work = Work(jobs=((job, insts),))
    spec = EndpointSpec(label="x", model="openai/x", api_base="http://127.0.0.1:9/v1")
    source = pairs_for(work, spec, None)
    assert not isinstance(source, list | tuple)  # lazy: nothing per pair is built in advance
    assert [inst.instance_id for _, inst in source] == [i.instance_id for i in insts]
    half = pairs_for(work, spec, lambda key: key < "8")
    kept = list(half)
    assert 0 < len(kept) < len(insts)
    planned = count_planned(work, [spec], lambda key: key < "8")
    assert planned[("x", "cfbench")].planned == len(kept)
    assert count_planned(work, [spec], None)[("x", "cfbench")].planned == len(insts)


@pytest.mark.parametrize(
    ("retry_after", "told"), [(True, False), (False, False), (True, True), (False, True)]
)
def test_rpm_enforced_by_the_server_completes_with_few_429s(
    tmp_path: Path, retry_after: bool, told: bool
) -> None:
    # Each model (and the judge) is its own server allowing 600/min with room for 10 at once, as
    # providers limit per model. Told: the config gives rpm = 600. Not told: the client learns the limit
    # from the x-ratelimit-* headers, and waits as Retry-After says (or backs off on its own without it).
    cfg_sim = SimConfig(rpm=600, burst_s=1.0, send_retry_after=retry_after, seed=3)
    with SimulatorThread(cfg_sim) as a, SimulatorThread(cfg_sim) as b, SimulatorThread(cfg_sim) as j:
        out = tmp_path / "run"
        rpm = "rpm = 600" if told else ""
        models = model_table("a", a.base_url, rpm) + model_table("b", b.base_url, rpm)
        cfg = tmp_path / "sweep.toml"
        run = "concurrency = 16"
        text = config(out, j.base_url, models, bench="cfbench", limit=10, run_extra=run, judge_extra=rpm)
        cfg.write_text(text)
        assert main(["run", str(cfg)]) == 0
        sims = (a, b, j)
        too_many = sum(s.stats.status_counts[429] for s in sims)
        answered = sum(s.stats.status_counts[200] for s in sims)
        resent = [n for s in sims for n in s.stats.bodies.values() if n > 1]
    s = summary(out)
    assert s["status"] == "complete" and s["done"] == s["planned"] == 20 and s["errors"] == 0
    calls = stored_records(out, {"generation", "judgment"})
    assert len(calls) == 40 and all(c["status"] in ("ok", "truncated") for c in calls)
    assert answered == 40
    # Told, the client paces below the server. Not told, only the bursts before and just after the first
    # headers can overrun a server (10 measured, of 40 calls across three servers).
    assert too_many <= (1 if told else 12), f"{too_many} 429s for 40 calls"
    assert len(resent) == too_many  # each 429 cost exactly one resend
    assert sum(int(c["rate_limited"]) for c in calls) == too_many


def test_backoff_events_reach_the_progress_state() -> None:
    counters = {("a", "cfbench"): Counters(planned=4)}
    state = ProgressState(counters=counters, spent=lambda _label: 0.0, caps={None: 1.0})
    endpoints = []

    async def run(base: str) -> None:
        policy = RetryPolicy(max_attempts=30, base_delay_s=0.01, max_delay_s=0.02, seed=0)
        async with ProviderPool(budget=Budget(None), retry=policy, on_event=state.on_event) as pool:
            ep = pool.endpoint(EndpointSpec(label="a", model="openai/sim-a", api_base=base))
            endpoints.append(ep)
            for _ in range(4):
                await ep.complete([{"role": "user", "content": "hello"}])

    # Half the answers are 429 with retry-after-ms 250: the pool waits, and says so.
    with SimulatorThread(SimConfig(faults=FaultRates(rate_limit=0.5), seed=4)) as sim:
        asyncio.run(run(sim.base_url))
        assert sim.stats.status_counts[429] >= 1
    assert set(state.backoffs) == {"openai/sim-a"}, "no back-off event reached the progress state"
    assert state.backoffs["openai/sim-a"].message == "429 from openai/sim-a: waiting 0.25 s"
    # While a wait lasts it is in the endpoint's row, beside its count of 429s.
    now = 100.0
    state.clock = lambda: now
    state.endpoints["a"] = endpoints[0].stats
    state.on_event(ProviderEvent("rate_limited", "openai/sim-a", "429 from openai/sim-a: waiting 3.2 s", 3.2))
    (row,) = state.board().rows
    assert row.waits == "waiting 3.2 s" and row.limits.rate_limited == sim.stats.status_counts[429]
    line = plain_line(state.board())
    assert line.startswith("[ifsweep] pairs 0/4 0% | calls 0/? | - calls/s"), line
    assert "$0.00/$1.00" in line and "|| a waiting 3.2 s unknown" in line, line
    now += 4.0
    assert state.board().rows[0].waits == ""  # over


def test_events_other_than_backoffs_are_not_shown() -> None:
    state = ProgressState(counters={}, spent=lambda _label: 0.0, caps={})
    state.on_event(ProviderEvent("limit_learned", "m", "m announces 600 requests/min", None))
    state.on_event(ProviderEvent("backoff", "m", "3 requests left of 600/min at m: pausing 1.0 s", 1.0))
    assert state.waiting() == ["3 requests left of 600/min at m: pausing 1.0 s"]


def test_waiting_for_a_global_slot_does_not_count_against_the_call_timeout() -> None:
    # One global slot, 0.4 s per answer, timeout 0.6 s: the third call queues 0.8 s for the slot but
    # is sent in time; only the provider's own time counts (and is reported as latency).
    async def run(base: str) -> list[Any]:
        async with ProviderPool(budget=Budget(None), global_concurrency=1) as pool:
            spec = EndpointSpec(label="a", model="openai/sim-a", api_base=base, timeout_s=0.6)
            ep = pool.endpoint(spec)
            msgs = [{"role": "user", "content": f"question {i}"} for i in range(3)]
            return list(await asyncio.gather(*(ep.complete([m]) for m in msgs)))

    with SimulatorThread(SimConfig(latency_ms=400, seed=6)) as sim:
        done = asyncio.run(run(sim.base_url))
        assert sim.stats.max_in_flight == 1
    assert [d.status for d in done] == ["ok"] * 3, [d.error_message for d in done]
    assert all(0.35 < d.latency_s < 0.6 for d in done), [d.latency_s for d in done]
