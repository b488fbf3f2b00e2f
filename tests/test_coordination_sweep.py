"""Four `ifsweep run --partition i/4` processes sharing one account through a real redis-server, against
one simulator that enforces the account's limit: they pace to it together, stop together at the cap,
survive a partition's kill -9 and a Redis restart. Smaller than perf/coordination_perf.py (which prints
the full-scale figures) and with looser throughput bounds, so a loaded machine does not fail them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import redis
from redis_server import RedisServer, redis_server
from sweeps import toml_config
from test_resume_crash import verdicts

from ifsweep import benchmarks
from ifsweep.providers.budget import SWEEP_SCOPE
from ifsweep.providers.coord.interfaces import parse_coordinator
from ifsweep.providers.coord.redis_state import RedisCoordinator
from ifsweep.runner.commands.cli import main
from ifsweep.runner.engine.coordinator import sweep_id
from ifsweep.runner.store.shards import scan_shards, shard_files
from ifsweep.runner.watch.status import status_report
from ifsweep.simulator import SimConfig, SimulatorThread

pytestmark = pytest.mark.slow

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"
PARTS = 4


def followbench_copies(root: Path, copies: int, category: str = "example") -> Path:
    """The FollowBench fixture's rows of `category`, `copies` times over, each copy a distinct instance."""
    name = f"{category}_constraints.json"
    rows = json.loads((benchmarks.get("followbench").fixture_dir() / "data" / name).read_text())
    out = [
        r | {"example_id": r["example_id"] + 1000 * k, "instruction": r["instruction"] + f"\n(variant {k})"}
        for k in range(copies)
        for r in rows
    ]
    folder = root / "data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(out))
    return folder


def config(
    root: Path,
    name: str,
    api_base: str,
    data: Path,
    *,
    coordinator: str | None,
    run: str = "",
    model: str = "",
) -> Path:
    text = toml_config(
        root / name,
        api_base,
        models=("m",),
        bench=("followbench",),
        data={"followbench": data},
        judge=False,
        extra_run=(f'coordinator = "{coordinator}"\n' if coordinator else "") + run,
        extra_model=f"{PRICE}\n{model}",
    ).replace('name = "followbench"', 'name = "followbench"\ncategories = ["example"]')
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


def start_partitions(cfg: Path, indexes: range = range(PARTS)) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ifsweep.runner.commands.cli",
                "run",
                str(cfg),
                "--partition",
                f"{i}/{PARTS}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in indexes
    ]


def finish(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    codes = []
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode in (0, 3), err.decode()
        codes.append(p.returncode)
    return codes


def ledger(url: str, run_dir: Path) -> dict[str, object]:
    """The sweep's ledger as Redis holds it (dead processes' holds dropped first)."""
    ident, _ = sweep_id(run_dir)
    c = RedisCoordinator(parse_coordinator(url), sweep_id=ident, writer="test", rescan=dict)

    async def read() -> dict[str, object]:
        try:
            return await c.snapshot()
        finally:
            await c.close(timeout_s=0)

    return anyio.run(read)


def generation_times(run_dir: Path) -> list[float]:
    return sorted(float(sl.record()["ts"]) for sl in scan_shards(run_dir, kinds=("generation",)))


def steady_rate_per_min(times: list[float]) -> float:
    """Calls per minute between the 10th and the 90th percentile of completion times: the pace once
    every process runs, without the start-up burst or the stragglers."""
    n = len(times)
    lo, hi = n // 10, n * 9 // 10
    return (hi - lo) / (times[hi] - times[lo]) * 60


def test_four_partitions_pace_together_to_one_account_limit(tmp_path: Path) -> None:
    rpm = 1200
    data = followbench_copies(tmp_path, 48)  # 240 calls: about 12 s at the limit
    with redis_server(tmp_path / "redis") as server, SimulatorThread(SimConfig(rpm=rpm, burst_s=2.0)) as sim:
        cfg = config(tmp_path, "run", sim.base_url, data, coordinator=server.url, model=f"rpm = {rpm}")
        assert finish(start_partitions(cfg)) == [0] * PARTS
        limited, requests = sim.stats.status_counts[429], sim.stats.requests
    times = generation_times(tmp_path / "run")
    assert len(times) == 240
    rate = steady_rate_per_min(times)
    # Measured at full scale (perf/coordination_perf.py): 99-100% of the limit and no 429s; without a
    # coordinator the same four processes draw 429s on about a third of their requests.
    assert rate >= 0.9 * rpm, f"{rate:.0f}/min is {rate / rpm:.0%} of {rpm}"
    assert rate <= 1.05 * rpm
    assert limited <= 0.01 * requests, f"{limited} 429s of {requests} requests"


def test_four_partitions_stop_together_at_the_shared_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The whole sweep costs about 0.27, each partition's share about 0.068: more than the cap, so none can
    # finish its share alone and exit 0 before the others have started (a loaded machine starts the four
    # processes seconds apart; with a share below the cap, the first one to start often did).
    cap = 0.03
    data = followbench_copies(tmp_path, 192)
    with redis_server(tmp_path / "redis") as server, SimulatorThread(SimConfig(latency_ms=20)) as sim:
        cfg = config(tmp_path, "run", sim.base_url, data, coordinator=server.url, run=f"max_usd = {cap}")
        assert finish(start_partitions(cfg)) == [3] * PARTS  # every partition: budget_exhausted
        shared = ledger(server.url, tmp_path / "run")
    report = status_report(tmp_path / "run")
    assert cap * 0.95 <= report.spent_usd <= cap
    assert shared["spent"] == {"sweep": pytest.approx(report.spent_usd), "m": pytest.approx(report.spent_usd)}
    assert shared["holds"] == {}  # every process left cleanly: nothing held

    capsys.readouterr()
    assert main(["status", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    rows = [
        line.split() for line in text.splitlines() if line.split()[:1] in (["0/4"], ["1/4"], ["2/4"], ["3/4"])
    ]
    assert [r[1] for r in rows] == ["budget_exhausted"] * PARTS
    assert sum(float(r[5]) for r in rows) == pytest.approx(report.spent_usd, abs=1e-3)
    assert f"spent by all partitions: ${report.spent_usd:.4f}" in text
    assert f"shared ledger at {server.url}: $" in text


def victims_holds(url: str, run_dir: Path, inst: str, writer: str) -> tuple[int, float, float]:
    """(lease ms left, dollars held, the writer's spent) of one instance in the sweep's ledger, read in
    one transaction: while its lease runs, nothing has charged its holds yet."""
    ns = f"ifsweep:sweep:{sweep_id(run_dir)[0]}"
    client = redis.Redis.from_url(url)
    try:
        pipe = client.pipeline(transaction=True)
        pipe.pttl(f"{ns}:lease:{inst}").hvals(f"{ns}:res:{inst}").hget(
            f"{ns}:spent", f"{SWEEP_SCOPE}\x1f{writer}"
        )
        ttl, holds, spent = pipe.execute()
    finally:
        client.close()
    held = sum(float(json.loads(h)[0]) for h in holds)
    return int(ttl), held, float(spent or 0.0)


def test_a_killed_partition_charges_its_holds_and_reruns_to_the_same_verdicts(tmp_path: Path) -> None:
    """A dead partition's holds are charged to its writer when its lease runs out, never simply
    released (issue 27 item 1: the provider may well have billed its calls in flight)."""
    lease_s = 3.0
    data = followbench_copies(tmp_path, 24)  # 120 calls at 600/min: about 12 s
    with SimulatorThread(SimConfig(seed=3)) as sim:  # the reference: one process, no limits
        ref = config(tmp_path, "ref", sim.base_url, data, coordinator=None)
        assert main(["run", str(ref)]) == 0
    with redis_server(tmp_path / "redis") as server, SimulatorThread(SimConfig(seed=3, rpm=600)) as sim:
        url = f"{server.url}?lease_s={lease_s:g}"
        cfg = config(
            tmp_path, "run", sim.base_url, data, coordinator=url, run="max_usd = 100", model="rpm = 600"
        )
        procs = start_partitions(cfg)
        victim = procs[1]
        while sum(1 for _ in scan_shards(tmp_path / "run", kinds=("generation",))) < 20:
            assert victim.poll() is None
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        victim.communicate()  # reaps it and closes its pipe
        mine = [i for i in ledger(server.url, tmp_path / "run")["leases_ms"] if f":{victim.pid}:" in i]  # type: ignore[union-attr]
        assert mine, "the killed partition held nothing: the test did not test"
        ttl, held, spent = victims_holds(server.url, tmp_path / "run", mine[0], "p1of4")
        assert ttl > 0 and held > 0, "the killed partition held nothing: the test did not test"
        while any(f":{victim.pid}:" in i for i in ledger(server.url, tmp_path / "run")["leases_ms"]):  # type: ignore[union-attr]
            time.sleep(0.1)
        assert time.monotonic() - killed <= lease_s + 1.0  # its holds are gone within the lease
        # ... and charged to its writer at their worst case: only the dead process wrote as p1of4.
        _, left, charged = victims_holds(server.url, tmp_path / "run", mine[0], "p1of4")
        assert left == 0 and charged == pytest.approx(spent + held)
        assert finish([p for p in procs if p is not victim]) == [0] * (PARTS - 1)
        assert finish(start_partitions(cfg, range(1, 2))) == [0]  # the rerun completes partition 1
    assert verdicts(tmp_path / "run") == verdicts(tmp_path / "ref")


@pytest.mark.parametrize("persist", [False, True], ids=["empty", "aof"])
def test_a_redis_restart_pauses_the_sweep_and_counts_nothing_twice(tmp_path: Path, persist: bool) -> None:
    """Redis killed mid-sweep and started again on its port, empty or with its append-only file: the
    partitions wait, then go on; the ledger ends equal to what the shards say was spent."""
    data = followbench_copies(tmp_path, 40)  # 200 calls at 1200/min: about 10 s
    server = RedisServer(tmp_path / "redis", persist=persist)
    server.start()
    try:
        with SimulatorThread(SimConfig(rpm=1200, burst_s=2.0)) as sim:
            url = f"{server.url}?lease_s=3"
            cfg = config(
                tmp_path, "run", sim.base_url, data, coordinator=url, run="max_usd = 100", model="rpm = 1200"
            )
            procs = start_partitions(cfg)
            while sum(1 for _ in scan_shards(tmp_path / "run", kinds=("generation",))) < 40:
                time.sleep(0.05)
            server.restart(down_s=1.5)
            assert finish(procs) == [0] * PARTS
            answered = sim.stats.status_counts[200]
        shared = ledger(server.url, tmp_path / "run")
    finally:
        server.stop()
    report = status_report(tmp_path / "run")
    assert answered == 200  # every call answered once: nothing was sent twice
    assert sum(r["done"] for r in report.rows) == 200
    assert shared["spent"] == {"sweep": pytest.approx(report.spent_usd), "m": pytest.approx(report.spent_usd)}


def test_a_partition_with_calls_in_flight_and_none_settled_when_redis_returns_empty_publishes_no_worst_case(
    tmp_path: Path,
) -> None:
    """Redis comes back empty while a partition's first calls are all in flight: it rebuilds the ledger
    from the shards, which hold those calls as open intents at their worst case. Its own entry is its
    own account (nothing settled yet), not those intents: published, they stayed in the ledger, merged
    by maximum, above what the calls then cost (the Redis restart test caught it when one partition
    started late)."""
    data = followbench_copies(tmp_path, 8)  # 40 calls, about 10 a partition: all in flight at once
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        with SimulatorThread(SimConfig(latency_ms=6000)) as sim:
            cfg = config(
                tmp_path, "run", sim.base_url, data, coordinator=f"{server.url}?lease_s=3",
                run="max_usd = 100\nconcurrency = 32",
            )  # fmt: skip
            procs = start_partitions(cfg, range(0, 1))
            while sim.stats.in_flight < 3:  # the calls are out, their intents written before them
                assert procs[0].poll() is None, procs[0].communicate()[1].decode()
                time.sleep(0.01)
            server.restart(down_s=0.5)
            restarted_before_any_answer = not any(
                True for _ in scan_shards(tmp_path / "run", kinds=("generation",))
            )
            assert restarted_before_any_answer, (
                "the calls ended before Redis came back: the test did not test"
            )
            assert finish(procs) == [0]
        shared = ledger(server.url, tmp_path / "run")
    finally:
        server.stop()
    report = status_report(tmp_path / "run")
    assert report.worst_case_usd == 0 and report.spent_usd > 0
    assert shared["spent"] == {"sweep": pytest.approx(report.spent_usd), "m": pytest.approx(report.spent_usd)}


def intents_of(run_dir: Path, writer: str) -> int:
    writers = [w for w, _, _ in shard_files(run_dir)]
    return sum(writers[sl.file_no] == writer for sl in scan_shards(run_dir, kinds=("intent",)))


def test_a_partition_joining_counts_no_live_partitions_calls_in_flight(tmp_path: Path) -> None:
    """A partition joining while another has calls in flight publishes what the shards say each writer
    spent: the other's open intents are its calls in flight, held in the ledger by their live process,
    not calls a kill cut off. Charged at their worst case and merged by maximum, they stayed in the
    ledger above what was paid (the Redis restart test caught it now and then)."""
    data = followbench_copies(tmp_path, 8)  # 40 calls, about 10 a partition: all in flight at once
    with redis_server(tmp_path / "redis") as server, SimulatorThread(SimConfig(latency_ms=4000)) as sim:
        cfg = config(
            tmp_path, "run", sim.base_url, data, coordinator=server.url, run="max_usd = 100\nconcurrency = 32"
        )
        first = start_partitions(cfg, range(0, 1))
        while sim.stats.in_flight < 3:  # partition 0's calls are out, their intents written before them
            assert first[0].poll() is None, first[0].communicate()[1].decode()
            time.sleep(0.01)
        assert not any(True for _ in scan_shards(tmp_path / "run", kinds=("generation",)))
        second = start_partitions(cfg, range(1, 2))
        while not intents_of(tmp_path / "run", "p1of4"):  # partition 1 joined: it calls only after that
            assert second[0].poll() is None, second[0].communicate()[1].decode()
            time.sleep(0.01)
        joined_before_any_answer = not any(True for _ in scan_shards(tmp_path / "run", kinds=("generation",)))
        assert joined_before_any_answer, (
            "partition 0's calls ended before partition 1 joined: the test did not test"
        )
        assert finish(first + second) == [0, 0]
        shared = ledger(server.url, tmp_path / "run")
    report = status_report(tmp_path / "run")
    assert report.worst_case_usd == 0  # every intent resolved
    assert shared["spent"] == {"sweep": pytest.approx(report.spent_usd), "m": pytest.approx(report.spent_usd)}
