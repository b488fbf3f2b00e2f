"""The chaos harness (perf/chaos.py) and the simulator's ledger it checks against: the ledger over real
HTTP (a call is billed once admitted, even when its client leaves; a fault without an answer is not; batch
lines by body and outcome), the invariant checks over real runs that break them, the shrinker, and the
quick profile: a few fixed seeds of the real harness, each ending with 0 violations."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson
import pytest
from sweeps import toml_config

from ifsweep.runner.commands.cli import main as cli_main
from ifsweep.runner.store.shards import encode_line
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings
from ifsweep.simulator.server import CLIENT_HEADERS

PERF = Path(__file__).resolve().parents[1] / "perf"
sys.path.insert(0, str(PERF))

from _chaos import checks, records  # noqa: E402
from _chaos.ledger import fetch  # noqa: E402
from _chaos.play import Round, ending_checks  # noqa: E402
from _chaos.procs import Proc, start_run  # noqa: E402
from _chaos.scenario import draw  # noqa: E402
from _chaos.shrink import shrink  # noqa: E402
from _chaos.sweepfile import Stage, served  # noqa: E402

BODY = {"model": "sim-m1", "messages": [{"role": "user", "content": "Name three rivers."}], "max_tokens": 64}
QUICK_SEEDS = (3, 9, 13)  # partitions, a Redis restart, binding caps, batches, a panel, hangs, edits


def digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


async def post_chat(base: str, timeout_s: float) -> int | str:
    try:
        async with (
            aiohttp.ClientSession(headers=CLIENT_HEADERS) as s,
            s.post(
                base + "/chat/completions", json=BODY, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as r,
        ):
            await r.read()
            return r.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return type(exc).__name__


def chat(base: str, timeout_s: float = 10.0) -> int | str:
    return anyio.run(post_chat, base, timeout_s)


# --- the simulator's ledger --------------------------------------------------------------------------


def test_a_call_is_billed_when_admitted_even_if_its_client_leaves() -> None:
    with SimulatorThread(SimConfig(latency_ms=600)) as sim:
        assert chat(sim.base_url, timeout_s=0.1) == "TimeoutError"
        time.sleep(0.7)
        ledger = fetch(sim.base_url)
    assert [r["body"] for r in ledger.received] == [digest(BODY)]
    (bill,) = ledger.bills
    assert bill["body"] == digest(BODY) and bill["model"] == "sim-m1" and bill["via"] == "chat"
    assert bill["prompt_tokens"] > 0 and 0 < bill["completion_tokens"] <= 64


@pytest.mark.parametrize("fault", ["server_error", "rate_limit", "context_length"])
def test_a_fault_answered_before_the_model_runs_is_received_but_not_billed(fault: str) -> None:
    with SimulatorThread(SimConfig(faults=FaultRates(**{fault: 1.0}))) as sim:
        status = chat(sim.base_url)
        ledger = fetch(sim.base_url)
    if fault == "context_length":
        assert status == 400
    assert len(ledger.received) == 1 and ledger.bills == []


@pytest.mark.parametrize("fault", ["malformed", "reset"])
def test_an_answer_lost_on_the_way_is_billed_undelivered_and_its_retry_is_no_double_payment(
    fault: str,
) -> None:
    with SimulatorThread(SimConfig(faults=FaultRates(**{fault: 1.0}))) as sim:
        chat(sim.base_url)
        sim.set_config(SimConfig())
        assert chat(sim.base_url) == 200
        ledger = fetch(sim.base_url)
    assert [b["delivered"] for b in ledger.bills] == [False, True]
    assert checks.paid_once(ledger, [], 1.0) == []


async def post_bodies(base: str, bodies: list[dict[str, Any]]) -> list[int]:
    async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as s:
        statuses = []
        for body in bodies:
            async with s.post(base + "/chat/completions", json=body) as r:
                await r.read()
                statuses.append(r.status)
        return statuses


def test_a_routing_hint_does_not_rename_a_request() -> None:
    hinted = [BODY | {"prompt_cache_key": "a"}, BODY | {"prompt_cache_key": "b"}]
    with SimulatorThread(SimConfig()) as sim:
        assert anyio.run(post_bodies, sim.base_url, hinted) == [200, 200]
        ledger = fetch(sim.base_url)
    assert [b["body"] for b in ledger.bills] == [digest(BODY)] * 2
    (found,) = checks.paid_once(ledger, [], 1.0)
    assert found.startswith("I3: 1 requests billed again that no kill explains (0 a kill does)")


def test_missing_usage_is_still_billed() -> None:
    with SimulatorThread(SimConfig(faults=FaultRates(missing_usage=1.0))) as sim:
        assert chat(sim.base_url) == 200
        assert len(fetch(sim.base_url).bills) == 1


async def submit_batch(base: str, bodies: list[dict[str, Any]]) -> str:
    lines = b"\n".join(
        orjson.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": b})
        for i, b in enumerate(bodies)
    )
    async with aiohttp.ClientSession(headers=CLIENT_HEADERS) as s:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", lines, filename="in.jsonl")
        async with s.post(base + "/files", data=form) as r:
            file_id = (await r.json())["id"]
        create = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
        async with s.post(base + "/batches", json=create) as r:
            batch_id: str = (await r.json())["id"]
            return batch_id


@pytest.mark.parametrize("fate", ["completed", "failed", "expired"])
def test_batch_lines_are_kept_by_body_with_their_outcome(fate: str) -> None:
    settings = BatchSettings(
        fail_rate=1.0 if fate == "failed" else 0.0,
        expire_rate=1.0 if fate == "expired" else 0.0,
        expire_done_share=0.5,
    )
    other = BODY | {"max_tokens": 32}
    with SimulatorThread(SimConfig(batch=settings)) as sim:
        batch_id = anyio.run(submit_batch, sim.base_url, [BODY, other])
        ledger = fetch(sim.base_url)  # lists the batches first, which works them out
    subs = {s["custom_id"]: s for s in ledger.submissions}
    assert {s["batch_id"] for s in subs.values()} == {batch_id}
    assert subs["c0"]["body"] == digest(BODY) and subs["c1"]["body"] == digest(other)
    want = {
        "completed": ("answered", "answered"),
        "failed": ("unanswered", "unanswered"),
        "expired": ("answered", "unanswered"),
    }[fate]
    assert (subs["c0"]["outcome"], subs["c1"]["outcome"]) == want
    billed = [b["body"] for b in ledger.bills]
    assert billed == [digest(b) for b, o in zip((BODY, other), want, strict=True) if o == "answered"]
    assert all(b["via"] == "batch" for b in ledger.bills)
    assert ledger.batch_faults == (0 if fate == "completed" else 1)


# --- the checks find what they look for, in real runs ------------------------------------------------


def test_a_request_paid_twice_without_a_kill_is_a_violation() -> None:
    with SimulatorThread(SimConfig()) as sim:
        assert chat(sim.base_url) == 200
        once = fetch(sim.base_url)
        assert checks.paid_once(once, [], 1.0) == []
        time.sleep(0.3)
        assert chat(sim.base_url) == 200
        twice = fetch(sim.base_url)
    (found,) = checks.paid_once(twice, [], 1.0)
    assert found.startswith("I3: 1 requests billed again that no kill explains (0 a kill does), e.g. sim-m1")
    # Excused only by a kill between the two bills, soon after the first: a call the kill left unsaved.
    first, again = (b["at"] for b in twice.bills)
    assert checks.paid_once(twice, [first + 0.05], 1.0) == []
    # So is one sent during a round that hit a full disk (its result could not be written).
    assert checks.paid_once(twice, [], 1.0, [(first - 0.01, first + 0.01)]) == []
    assert checks.paid_once(twice, [again + 0.01], 1.0) != []


def test_a_batch_line_submitted_again_after_its_answer_is_a_violation() -> None:
    with SimulatorThread(SimConfig()) as sim:
        anyio.run(submit_batch, sim.base_url, [BODY])
        fetch(sim.base_url)  # worked out: answered
        assert checks.paid_once(fetch(sim.base_url), [], 1.0) == []
        anyio.run(submit_batch, sim.base_url, [BODY])
        ledger = fetch(sim.base_url)
    found = checks.paid_once(ledger, [], 1.0)
    assert any(v.startswith("I3: batch request submitted twice: c0") for v in found), found


def test_a_bill_over_a_cap_is_a_violation() -> None:
    with SimulatorThread(SimConfig()) as sim:
        assert chat(sim.base_url) == 200
        ledger = fetch(sim.base_url)
    roles = {served("m1"): "model"}
    (bill,) = ledger.bills
    usd = (bill["prompt_tokens"] * 1.0 + bill["completion_tokens"] * 2.0) / 1e6
    assert checks.caps_held(ledger, Stage(judges=(), caps=(("run", usd), ("m1", usd))), roles) == []
    over = checks.caps_held(ledger, Stage(judges=(), caps=(("m1", usd * 0.9),)), roles)
    assert len(over) == 1 and over[0].startswith("I2: billed $")


def sweep(tmp: Path, name: str, base: str) -> Path:
    cfg = tmp / f"{name}.toml"
    cfg.write_text(toml_config(tmp / name, base, models=("alpha",), bench=("followbench",), limit=2))
    assert cli_main(["run", str(cfg), "--progress", "off"]) == 0
    return tmp / name


def test_a_second_current_verdict_or_a_changed_one_is_a_violation(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(seed=4)) as sim:
        ref = sweep(tmp_path, "ref", sim.base_url)
        run = sweep(tmp_path, "run", sim.base_url)
    assert checks.same_verdicts(run, ref, ("judge",)) == []
    shard = next((run / "shards").glob("main-*.jsonl"))
    lines = shard.read_bytes().splitlines()
    verdict = json.loads(next(line for line in lines if b'"kind":"verdict"' in line.replace(b" ", b"")))
    flipped = [dict(r, satisfied=not r["satisfied"]) for r in verdict["rows"]]
    stale = verdict | {"key": "0" * 32, "rows": flipped}
    stale.pop("_c")
    with shard.open("ab") as f:  # as a writer would have appended it, checksum and all
        f.write(encode_line(stale))
    found = checks.same_verdicts(run, ref, ("judge",))
    pair = ("alpha", "followbench", verdict["instance_id"], "judge")
    assert found == [f"I1: 2 current verdicts for {pair}"]


def test_an_exit_code_its_summary_contradicts_is_a_violation() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "raise SystemExit(0)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    p = Proc(proc, None)
    p.finish()
    assert checks.exit_truthful(p, {"status": "complete", "complete": True}, True) == []
    assert checks.exit_truthful(p, {"status": "failed", "complete": False}, True) == [
        "I4: plain run exited 0 but its summary says status='failed' complete=False"
    ]
    assert checks.exit_truthful(p, {"status": "complete", "complete": True}, False) == [
        "I4: plain run exited 0 (complete) but the records lack or differ in planned verdicts"
    ]


def test_two_plain_runs_one_after_the_other_are_each_held_to_their_own_ending(tmp_path: Path) -> None:
    """Chaos seed 7033: the second plain run of an overlap round took the lock once the first had
    ended (failed: pairs in error) and finished the sweep, rewriting summary.json as complete; the
    round's check read that summary as the first run's and reported its exit 1 as a contradiction.
    Each run is now held to the ending it printed; a run whose exit code contradicts it still is one."""
    run_dir, cfg = tmp_path / "run", tmp_path / "s.toml"
    with SimulatorThread(SimConfig(seed=1, faults=FaultRates(context_length=1.0))) as sim:
        cfg.write_text(toml_config(run_dir, sim.base_url, bench=("cfbench",), models=("m1",), limit=1))
        first = start_run(cfg, "sk-chaos-test")
        first.finish()
        sim.set_config(SimConfig(seed=1))
        second = start_run(cfg, "sk-chaos-test")
        second.finish()
    assert (first.code, second.code) == (1, 0), first.err + second.err
    assert (records.summary(run_dir, None) or {}).get("status") == "complete"  # the second run's
    rnd = Round(Stage(judges=("judge",)), overlap=True)
    assert ending_checks(rnd, [first, second], run_dir, complete=True) == []
    first.err = first.err.replace("[ifsweep] failed:", "[ifsweep] complete:")
    assert ending_checks(rnd, [first, second], run_dir, complete=True) == [
        "I4: plain run exited 1 but printed that it ended complete"
    ]


def test_a_secret_in_a_run_file_or_an_output_is_found(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "shards").mkdir(parents=True)
    (run / "summary.json").write_text('{"status": "complete"}')
    assert records.secret_hits([run], ["all fine"], ["sk-chaos-1234"]) == []
    (run / "shards" / "main-00001.jsonl").write_text('{"error_message": "bad key sk-chaos-1234"}\n')
    found = records.secret_hits([run], ["Authorization: Bearer x"], ["sk-chaos-1234"])
    assert found == ["output of process 0", str(run / "shards" / "main-00001.jsonl")]


# --- the shrinker ------------------------------------------------------------------------------------


def test_shrinking_keeps_only_the_parts_the_failure_needs() -> None:
    s = draw(11)
    assert len(s.components()) >= 4
    culprit = s.components()[0]
    runs: list[tuple[str, ...]] = []

    def run(t: Any) -> list[str]:
        runs.append(t.dropped)
        return [] if culprit in t.dropped else ["I2: over the cap"]

    small = shrink(s, ["I2: over the cap"], run, budget=100)
    assert culprit in small.components() and culprit not in small.dropped
    assert all(p == culprit or p in small.dropped for p in s.components())


# --- the quick profile -------------------------------------------------------------------------------


@pytest.mark.slow
def test_quick_profile_ends_with_no_violations() -> None:
    args = ["--seeds", "1", "--no-shrink"]
    lines: list[str] = []
    for seed in QUICK_SEEDS:
        done = subprocess.run(
            [sys.executable, str(PERF / "chaos.py"), "--seed", str(seed), *args],
            capture_output=True,
            text=True,
            timeout=170,
        )
        last = done.stdout.strip().splitlines()[-1]
        assert last == f"chaos: 1 runs, {last.split()[3]} faults, {last.split()[5]} kills, 0 violations", (
            done.stdout + done.stderr[-3000:]
        )
        assert done.returncode == 0
        lines.append(last)
    assert sum(int(line.split()[3]) for line in lines) > 0, "the quick profile injected no fault"
    assert sum(int(line.split()[5]) for line in lines) > 0, "the quick profile killed nothing"
