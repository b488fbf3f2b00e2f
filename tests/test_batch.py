"""Batch mode over real HTTP against the simulator's Batch API: the API itself (upload, create, poll,
output and error files, cancel, failed and expired batches), sweeps in batch mode against the same sweep
sent interactively (identical verdicts, half the cost), expiry and failure retried in new batches, a
`ifsweep run` killed with SIGKILL while polling resumed without submitting any request twice, the
`ifsweep batches` command listing and cancelling, the budget binding, and the LiteLLM route."""

from __future__ import annotations

import gc
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from sweeps import stored_records, toml_config

from ifsweep.providers.batch.clients import OpenAIBatchClient
from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import ConfigError, parse_config
from ifsweep.runner.engine.batches import open_batches
from ifsweep.runner.store.shards import scan_shards
from ifsweep.simulator import SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings, FaultRates
from ifsweep.simulator.server import CLIENT_HEADERS

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"
FAST = "max_age_s = 0.3, poll_s = 0.1, poll_max_s = 0.5"


def sweep_toml(
    out: Path, base: str, *, batch: str | None, extra_run: str = "", litellm: bool = False, limit: int = 3
) -> str:
    """followbench + infobench (a judge with multi-turn conversations and re-asks), one model and the
    judge, both in batch mode when `batch` is given (the inside of a `batch = { ... }` table)."""
    extra = PRICE + (f"\nbatch = {{ {batch} }}" if batch is not None else "")
    text = toml_config(
        out,
        base,
        models=("alpha",),
        bench=("followbench", "infobench"),
        limit=limit,
        extra_model=extra,
        extra_run=extra_run,
    )
    judge = 'model = "openai/sim-judge"'
    return text.replace(judge, f"{judge}\n{extra}" + ("\nuse_litellm = true" if litellm else ""))


def verdicts(run_dir: Path) -> dict[tuple[str, str], list[Any]]:
    return {(r["benchmark"], r["instance_id"]): r["rows"] for r in stored_records(run_dir, {"verdict"})}


def run(cfg: Path, text: str) -> tuple[int, dict[str, Any]]:
    cfg.write_text(text)
    code = main(["run", str(cfg)])
    out = Path(text.split('output_dir = "', 1)[1].split('"', 1)[0])
    return code, json.loads((out / "summary.json").read_text())


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=5, batch=BatchSettings(delay_s=0.3))) as s:
        yield s


@pytest.fixture(scope="module")
def interactive(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The same sweep sent call by call: its summary and verdicts are the baseline."""
    tmp = tmp_path_factory.mktemp("interactive")
    with SimulatorThread(SimConfig(seed=5)) as s:
        code, summary = run(tmp / "i.toml", sweep_toml(tmp / "run", s.base_url, batch=None))
    assert code == 0
    return summary, verdicts(tmp / "run")


# ------------------------------------------------------------------------------------ the API itself


def test_simulator_batch_api_round_trip(sim: SimulatorThread) -> None:
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=0.5)))

    async def go() -> None:
        async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
            client = OpenAIBatchClient(session, sim.base_url, "sk-test")
            lines = [
                {
                    "custom_id": f"k{i}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": "sim-a", "messages": [{"role": "user", "content": f"say {i}"}]},
                }
                for i in range(3)
            ]
            file_id = await client.upload(b"".join(orjson.dumps(line) + b"\n" for line in lines))
            created = await client.create(file_id, {"ifsweep_intent": "x"})
            assert created.status in ("validating", "in_progress") and created.total == 3
            assert (await client.retrieve(created.id)).status == "in_progress"
            listed = await client.listing()
            assert [b.id for b in listed] == [created.id] and listed[0].metadata == {"ifsweep_intent": "x"}
            await anyio.sleep(0.6)
            done = await client.retrieve(created.id)
            assert done.status == "completed" and done.completed == 3 and done.error_file_id is None
            assert done.output_file_id is not None
            out = [orjson.loads(x) for x in (await client.content(done.output_file_id)).splitlines()]
            assert sorted(r["custom_id"] for r in out) == ["k0", "k1", "k2"]
            for r in out:
                body = r["response"]["body"]
                assert r["response"]["status_code"] == 200 and body["choices"][0]["message"]["content"]
                assert body["usage"]["prompt_tokens"] > 0
            # The same request alone gets the same answer as in the batch.
            async with session.post(sim.base_url + "/chat/completions", json=lines[0]["body"]) as resp:
                alone = await resp.json()
            first = next(r for r in out if r["custom_id"] == "k0")
            assert alone["choices"][0]["message"] == first["response"]["body"]["choices"][0]["message"]
            # Cancel a second one while it runs.
            second = await client.create(file_id, {})
            assert (await client.cancel(second.id)).status == "cancelling"  # as OpenAI's
            cancelled = await client.retrieve(second.id)
            assert cancelled.status == "cancelled" and cancelled.output_file_id is None  # none done yet

    anyio.run(go)
    assert sim.stats.batches_created == 2
    assert sim.stats.batch_requests == {"k0": 2, "k1": 2, "k2": 2}


def test_simulator_failed_and_expired_batches(sim: SimulatorThread) -> None:
    async def one(settings: BatchSettings, n: int) -> tuple[str, list[Any], list[Any]]:
        sim.set_config(SimConfig(seed=5, batch=settings))
        async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
            client = OpenAIBatchClient(session, sim.base_url, "sk-test")
            body = {"model": "sim-a", "messages": [{"role": "user", "content": "hi"}]}
            data = b"".join(
                orjson.dumps(
                    {"custom_id": f"k{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}
                )
                + b"\n"
                for i in range(n)
            )
            info = await client.retrieve((await client.create(await client.upload(data), {})).id)
            out = err = []
            if info.output_file_id:
                out = [orjson.loads(x) for x in (await client.content(info.output_file_id)).splitlines()]
            if info.error_file_id:
                err = [orjson.loads(x) for x in (await client.content(info.error_file_id)).splitlines()]
            return info.status, out, err

    status, out, err = anyio.run(one, BatchSettings(fail_rate=1.0), 4)
    assert (status, out, err) == ("failed", [], [])
    status, out, err = anyio.run(one, BatchSettings(expire_rate=1.0, expire_done_share=0.5), 4)
    assert status == "expired" and len(out) == 2 and len(err) == 2
    assert {e["error"]["code"] for e in err} == {"batch_expired"}


# ------------------------------------------------------------------------------------ sweeps


def test_batch_sweep_matches_interactive_at_half_the_cost(
    tmp_path: Path, sim: SimulatorThread, interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    code, summary = run(tmp_path / "b.toml", sweep_toml(tmp_path / "run", sim.base_url, batch=FAST))
    assert code == 0 and summary["status"] == "complete"
    base_summary, base_verdicts = interactive
    assert verdicts(tmp_path / "run") == base_verdicts
    ratio = summary["spent_usd"] / base_summary["spent_usd"]
    assert 0.45 < ratio <= 0.52
    stats = sim.stats
    assert stats.requests == 0  # nothing went through /chat/completions
    assert stats.batches_created >= 2 and max(stats.batch_requests.values()) == 1
    # Every stored call is settled at the batch price (half of 1.0 / 4.0 per million), every batch closed.
    for rec in stored_records(tmp_path / "run", {"generation", "judgment"}):
        assert rec["cost_usd"] == pytest.approx((rec["input_tokens"] + 4 * rec["output_tokens"]) / 2e6)
    assert not open_batches(tmp_path / "run")


def test_expired_and_failed_batches_are_retried_in_new_batches(
    tmp_path: Path, sim: SimulatorThread, interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    batch = BatchSettings(delay_s=0.1, expire_rate=0.3, fail_rate=0.2, expire_done_share=0.5)
    # And inside batches that complete, some requests answered 500 or 429 (error-file lines).
    sim.set_config(SimConfig(seed=5, batch=batch, faults=FaultRates(server_error=0.1, rate_limit=0.05)))
    text = sweep_toml(tmp_path / "run", sim.base_url, batch=FAST + ", max_retries = 8")
    code, summary = run(tmp_path / "b.toml", text)
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(tmp_path / "run") == interactive[1]
    resent = [k for k, n in sim.stats.batch_requests.items() if n > 1]
    assert resent  # some requests went again after their batch (or they alone) failed or expired
    assert sim.stats.faults["server_error"] > 0 and sim.stats.faults["rate_limit"] > 0


def test_requests_of_a_batch_that_keeps_expiring_end_as_errors(tmp_path: Path, sim: SimulatorThread) -> None:
    sim.set_config(
        SimConfig(seed=5, batch=BatchSettings(delay_s=0.05, expire_rate=1.0, expire_done_share=0.0))
    )
    text = sweep_toml(tmp_path / "run", sim.base_url, batch=FAST + ", max_retries = 1", limit=1)
    _, summary = run(tmp_path / "b.toml", text)
    assert summary["errors"] == summary["planned"] > 0 and summary["done"] == 0
    gens = stored_records(tmp_path / "run", {"generation"})
    assert gens and all(g["status"] == "error" and g["error_kind"] == "timeout" for g in gens)
    assert all("expired" in g["error_message"] for g in gens)
    assert set(sim.stats.batch_requests.values()) == {2}  # the first batch and one retry, no more


def test_budget_binds_in_batch_mode(tmp_path: Path, sim: SimulatorThread) -> None:
    cap = 0.002
    text = sweep_toml(tmp_path / "run", sim.base_url, batch=FAST, extra_run=f"max_usd = {cap}", limit=6)
    code, summary = run(tmp_path / "b.toml", text)
    assert code == 3 and summary["status"] == "budget_exhausted"
    assert 0 < summary["spent_usd"] <= cap
    assert 0 < summary["done"] < summary["planned"]


def test_config_validates_batch() -> None:
    def parse(extra: str) -> Any:
        raw = f'[[benchmarks]]\nname = "cfbench"\n[[models]]\nmodel = "openai/x"\n{extra}\n'
        import tomllib

        return parse_config(tomllib.loads(raw), Path("/tmp/c.toml"))

    assert parse("batch = true").models[0].batch.max_requests == 1000
    assert parse("").models[0].batch is None
    policy = parse("batch = { max_requests = 5, max_age_s = 2.5, max_retries = 0 }").models[0].batch
    assert (policy.max_requests, policy.max_age_s, policy.max_retries) == (5, 2.5, 0)
    price = (
        parse("price = { input_per_mtok = 2.0, output_per_mtok = 8.0, batch_input_per_mtok = 0.5 }")
        .models[0]
        .price
    )
    assert (price.batch_input_per_mtok, price.batch_output_per_mtok) == (0.5, None)
    for bad, key in (
        ('batch = "yes"', "models[0].batch"),
        ("batch = { size = 5 }", "models[0].batch.size"),
        ("batch = { max_requests = 0 }", "models[0].batch.max_requests"),
        ("batch = { poll_s = 10, poll_max_s = 1 }", "models[0].batch.poll_max_s"),
    ):
        with pytest.raises(ConfigError) as info:
            parse(bad)
        assert info.value.key == key


# ------------------------------------------------------------------------------------ kill -9, batches


def child(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


def wait_for_submitted(
    run_dir: Path, proc: subprocess.Popen[bytes], n: int = 1, deadline_s: float = 60
) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if (run_dir / "shards").is_dir():
            states = [sl.record().get("state") for sl in scan_shards(run_dir, kinds=("batch",))]
            if states.count("submitted") >= n:
                return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
    raise AssertionError("no batch was submitted in time")


def test_kill_9_while_polling_resumes_without_submitting_again(
    tmp_path: Path, sim: SimulatorThread, interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=60)))  # the batches outlive the process
    cfg = tmp_path / "b.toml"
    run_dir = tmp_path / "run"
    cfg.write_text(sweep_toml(run_dir, sim.base_url, batch=FAST))
    proc = child(cfg)
    try:
        wait_for_submitted(run_dir, proc)
        time.sleep(0.5)  # polling now
    finally:
        kill(proc)
    created = sim.stats.batches_created
    submitted = dict(sim.stats.batch_requests)
    assert created >= 1 and submitted
    assert len(open_batches(run_dir)) == created
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2)))
    code, summary = run(cfg, cfg.read_text())
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(run_dir) == interactive[1]
    # Every request the killed process submitted was collected from its batch, never sent again.
    assert max(sim.stats.batch_requests.values()) == 1
    assert all(sim.stats.batch_requests[k] == 1 for k in submitted)
    assert not open_batches(run_dir)


def test_batches_command_lists_and_cancels_then_run_resends_the_cancelled(
    tmp_path: Path,
    sim: SimulatorThread,
    capsys: pytest.CaptureFixture[str],
    interactive: tuple[dict[str, Any], dict[Any, Any]],
) -> None:
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=60)))
    cfg = tmp_path / "b.toml"
    run_dir = tmp_path / "run"
    cfg.write_text(sweep_toml(run_dir, sim.base_url, batch=FAST))
    proc = child(cfg)
    try:
        wait_for_submitted(run_dir, proc)
    finally:
        kill(proc)
    capsys.readouterr()
    assert main(["batches", str(run_dir)]) == 0
    listed = capsys.readouterr().out
    ids = [b.batch_id for b in open_batches(run_dir)]
    assert ids and all(f"{i}: in_progress" in listed for i in ids)
    assert main(["batches", str(run_dir), "--cancel"]) == 0
    said = capsys.readouterr().out
    assert all(f"{i}: cancelling" in said for i in ids)  # OpenAI's answer to a cancel
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2)))
    code, summary = run(cfg, cfg.read_text())
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(run_dir) == interactive[1]
    assert max(sim.stats.batch_requests.values()) == 2  # the cancelled ones, once more


# LiteLLM's openai files and batches functions build an AsyncOpenAI client per call and never close it
# (litellm 1.106): its sockets are collected below, inside this test, and their warnings ignored here.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_litellm_route_against_the_simulator(
    tmp_path: Path, sim: SimulatorThread, interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    """The judge through litellm.acreate_file / acreate_batch / aretrieve_batch / afile_content (its
    openai provider with api_base: Anthropic's and Gemini's batch services cannot be reached offline)."""
    text = sweep_toml(tmp_path / "run", sim.base_url, batch=FAST, litellm=True)
    code, summary = run(tmp_path / "b.toml", text)
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(tmp_path / "run") == interactive[1]
    judged = stored_records(tmp_path / "run", {"judgment"})
    assert judged and {j["path"] for j in judged} == {"litellm"}
    assert sim.stats.requests == 0
    gc.collect()


def test_ctrl_c_leaves_submitted_batches_running_and_says_how_to_resume(
    tmp_path: Path, sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=3600)))
    cfg = tmp_path / "b.toml"
    run_dir = tmp_path / "run"
    cfg.write_text(sweep_toml(run_dir, sim.base_url, batch=FAST, extra_run="stop_deadline_s = 0.5"))
    proc = child(cfg)
    wait_for_submitted(run_dir, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "still running at the provider: run the same command again" in err.decode()
    ids = [b.batch_id for b in open_batches(run_dir)]
    assert ids and sim.stats.batches_created == len(ids)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "interrupted"
    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    assert f"{len(ids)} Batch API batches open" in capsys.readouterr().out


def test_a_batch_created_but_not_recorded_is_found_at_the_provider_not_created_again(
    tmp_path: Path, sim: SimulatorThread, interactive: tuple[dict[str, Any], dict[Any, Any]]
) -> None:
    """Killed between the create and its `submitted` record: only the intent (input file, custom_ids)
    is in the shards. The resume finds the batch by its input file instead of creating another."""
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=60)))
    cfg = tmp_path / "b.toml"
    run_dir = tmp_path / "run"
    cfg.write_text(sweep_toml(run_dir, sim.base_url, batch=FAST))
    proc = child(cfg)
    try:
        wait_for_submitted(run_dir, proc)
    finally:
        kill(proc)
    for shard in (run_dir / "shards").glob("*.jsonl"):  # whole lines out: the others stay valid
        lines = shard.read_bytes().splitlines(keepends=True)
        shard.write_bytes(b"".join(line for line in lines if b'"state":"submitted"' not in line))
    unconfirmed = open_batches(run_dir)
    assert unconfirmed and all(b.batch_id is None for b in unconfirmed)
    created = sim.stats.batches_created
    assert created == len(unconfirmed)
    before_kill = {b.id for b in anyio.run(listing, sim)}
    sim.set_config(SimConfig(seed=5, batch=BatchSettings(delay_s=0.2)))
    code, summary = run(cfg, cfg.read_text())
    assert code == 0 and summary["status"] == "complete"
    assert verdicts(run_dir) == interactive[1]
    assert max(sim.stats.batch_requests.values()) == 1
    # Each unconfirmed intent was adopted: a `submitted` record naming the batch created before the kill.
    adopted = {
        r["key"]: r["batch_id"]
        for r in (sl.record() for sl in scan_shards(run_dir, kinds=("batch",)))
        if r["state"] == "submitted"
    }
    assert {adopted.get(b.intent) for b in unconfirmed} == before_kill


async def listing(sim: SimulatorThread) -> list[Any]:
    async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
        return await OpenAIBatchClient(session, sim.base_url, "sk-test").listing()


def test_batch_progress_line() -> None:
    from ifsweep.providers.batch.endpoint import BatchProgress
    from ifsweep.runner.watch.progress import batch_text

    running = BatchProgress("judge", submitted=3, running=2, done=1, requests_waiting=40, eta_s=300.0)
    idle = BatchProgress("m", submitted=1, running=0, done=1, requests_waiting=0, eta_s=None)
    text = batch_text([running, idle])
    assert text.startswith("batches: 4 submitted, 2 running, 2 done, 40 requests collecting, ETA ")
    assert "unknown" not in text
    unknown = BatchProgress("m", submitted=1, running=1, done=0, requests_waiting=0, eta_s=None)
    assert batch_text([running, unknown]).endswith("ETA unknown")
    assert batch_text([idle]) == "batches: 1 submitted, 0 running, 1 done"


def test_plan_prices_batch_mode_at_the_batch_price(tmp_path: Path) -> None:
    from ifsweep.runner.commands.planning import estimate
    from ifsweep.runner.config import load_config
    from ifsweep.runner.engine.sweep import load_work

    def costs(batch: str | None) -> list[tuple[float | None, float | None]]:
        cfg_path = tmp_path / f"{batch is not None}.toml"
        cfg_path.write_text(sweep_toml(tmp_path / "run", "http://127.0.0.1:9/v1", batch=batch))
        cfg = load_config(cfg_path)
        return [(e.cost_low, e.cost_high) for e in estimate(cfg, load_work(cfg))]

    interactive, batched = costs(None), costs("max_requests = 10")
    assert interactive and len(batched) == len(interactive)
    for (lo, hi), (blo, bhi) in zip(interactive, batched, strict=True):
        assert lo and hi and blo == pytest.approx(lo / 2) and bhi == pytest.approx(hi / 2)


@pytest.mark.timeout(120)  # before the fix, the first asker waited for ever
def test_one_request_asked_twice_at_once_is_submitted_once_and_paid_once(
    tmp_path: Path, sim: SimulatorThread
) -> None:
    """Two model ids on one endpoint: the same answers, so the same judge requests at the same time.
    A batch may hold each custom_id once (the simulator fails a batch that repeats one, as OpenAI does)."""
    text = sweep_toml(tmp_path / "run", sim.base_url, batch=FAST)
    first = text.index("[[models]]")
    table = text[first : text.index("[judge]")]
    text = text.replace(table, table + table.replace('id = "alpha"', 'id = "alpha2"'), 1)
    code, summary = run(tmp_path / "b.toml", text)
    assert code == 0 and summary["status"] == "complete"
    assert max(sim.stats.batch_requests.values()) == 1
    rows = stored_records(tmp_path / "run", {"verdict"})
    by_model = {
        m: sorted((r["instance_id"], str(r["rows"])) for r in rows if r["model"] == m)
        for m in ("alpha", "alpha2")
    }
    assert by_model["alpha"] == by_model["alpha2"] and by_model["alpha"]
    judged = stored_records(tmp_path / "run", {"judgment"})
    paid = [j for j in judged if j["cost_usd"] > 0]
    assert len({j["key"] for j in paid}) == len(paid)  # each judge request paid for once


def one_call_with_journal(sim: SimulatorThread, record: dict[str, Any]) -> tuple[Any, Any]:
    """One batch-mode call for key "k1" from a pool whose journal holds `record` for batch "i1"."""
    from ifsweep.providers.batch.endpoint import MemoryJournal
    from ifsweep.providers.budget import Budget
    from ifsweep.providers.pool import ProviderPool
    from ifsweep.providers.records import BatchPolicy, EndpointSpec, Price

    messages = [{"role": "user", "content": "say something"}]
    spec = EndpointSpec(
        label="m",
        model="openai/sim-m",
        api_base=sim.base_url,
        params={"max_tokens": 512},
        price=Price(1.0, 4.0),  # no price lookup (and no LiteLLM import)
        batch=BatchPolicy(max_age_s=0.05, poll_s=0.05, poll_max_s=0.1),
    )

    async def go() -> tuple[Any, MemoryJournal]:
        async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as session:
            client = OpenAIBatchClient(session, sim.base_url, "sk-test")
            file_id = await client.upload(
                b'{"custom_id":"k1","method":"POST","url":"/v1/chat/completions"}\n'
            )
        journal = MemoryJournal()
        journal.append(
            {
                "kind": "batch",
                "key": "i1",
                "endpoint": "m",
                "model": "openai/sim-m",
                "custom_ids": ["k1"],
                "input_file_id": file_id,
                "reserved_usd": 0.0,
            }
            | record
        )
        async with ProviderPool(budget=Budget(None), journal=journal) as pool:
            endpoint = pool.caller(spec)
            async with anyio.create_task_group() as tg:
                await tg.start(pool.run_batches)
                with anyio.fail_after(30):
                    completion = await endpoint.complete(messages, key="k1")
                tg.cancel_scope.cancel()
        return completion, journal

    return anyio.run(go)


def test_an_intent_whose_batch_was_never_created_is_sent_in_a_new_batch(sim: SimulatorThread) -> None:
    """The journal holds an intent (its input file uploaded) but the provider has no batch for it: the
    create never happened. Its requests go in a new batch, once; the intent is closed as never created."""
    completion, journal = one_call_with_journal(sim, {"state": "intent"})
    assert completion.status == "ok" and completion.text
    assert completion.cost_usd == pytest.approx(
        (completion.input_tokens + 4 * completion.output_tokens) / 2e6
    )
    assert sim.stats.batches_created == 1 and sim.stats.batch_requests == {"k1": 1}
    states = [(r["key"], r["state"], r.get("reason")) for r in journal.records]
    assert ("i1", "closed", "never created") in states
    assert any(state == "submitted" and key != "i1" for key, state, _ in states)


def test_a_batch_gone_at_the_provider_sends_its_requests_again(sim: SimulatorThread) -> None:
    completion, journal = one_call_with_journal(sim, {"state": "submitted", "batch_id": "batch_gone"})
    assert completion.status == "ok" and completion.text
    assert sim.stats.batches_created == 1 and sim.stats.batch_requests == {"k1": 1}
    states = [(r["key"], r["state"], r.get("status")) for r in journal.records]
    assert ("i1", "ended", "failed") in states
