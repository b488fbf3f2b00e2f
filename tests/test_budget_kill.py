"""kill -9 under a cap (issue 27 item 1): the calls in flight when a process dies are billed by the
provider all the same (the simulator bills every request that reached the model, its client gone or
not), so they must count. Alone, through the intents the killed run left in its shards; coordinated,
through the Redis ledger charging a dead process's holds when its lease runs out. Real `ifsweep run`
processes, a real SIGKILL, a real redis-server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from redis_server import redis_server
from sweeps import stored_records, toml_config
from test_coordination_sweep import followbench_copies

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

IN_PER_MTOK, OUT_PER_MTOK = 1.0, 20.0  # output dear: a call's worst case is near what it is billed
PRICE = f"price = {{ input_per_mtok = {IN_PER_MTOK}, output_per_mtok = {OUT_PER_MTOK} }}"


def write_config(root: Path, name: str, base: str, data: Path, run: str) -> Path:
    text = toml_config(
        root / name,
        base,
        models=("m",),
        bench=("followbench",),
        data={"followbench": data},
        judge=False,
        extra_run=f"concurrency = 6\n{run}",
        extra_model=PRICE,
    ).replace('name = "followbench"', 'name = "followbench"\ncategories = ["example"]')
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


def summary(run_dir: Path, name: str = "summary.json") -> dict[str, Any]:
    out: dict[str, Any] = json.loads((run_dir / name).read_text())
    return out


def full_cost(root: Path, data: Path) -> float:
    """What the whole sweep costs, uncapped, on a simulator answering alike (same seed)."""
    with SimulatorThread(SimConfig(seed=4)) as sim:
        assert main(["run", str(write_config(root, "full", sim.base_url, data, ""))]) == 0
    return float(summary(root / "full")["spent_usd"])


def child(cfg: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def kill_in_flight(proc: subprocess.Popen[bytes], sim: SimulatorThread, *, after: int) -> None:
    """SIGKILL once `after` requests arrived and at least 3 are being answered."""
    deadline = time.monotonic() + 60
    while not (sim.stats.requests >= after and sim.stats.in_flight >= 3):
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()


def billed(sim: SimulatorThread) -> float:
    return sim.stats.billed_usd(IN_PER_MTOK, OUT_PER_MTOK)


def test_a_killed_runs_calls_in_flight_count_toward_the_cap_of_the_next(tmp_path: Path) -> None:
    data = followbench_copies(tmp_path, 12)
    cap = full_cost(tmp_path, data) * 0.6
    with SimulatorThread(SimConfig(seed=4, latency_ms=300)) as sim:
        cfg = write_config(tmp_path, "run", sim.base_url, data, f"max_usd = {cap!r}")
        kill_in_flight(child(cfg), sim, after=8)
        cut_off = len(stored_records(tmp_path / "run", {"intent"})) - len(
            [i for r in stored_records(tmp_path / "run", {"generation"}) for i in r.get("intents", ())]
        )
        assert cut_off >= 3, "no call was in flight at the kill: the test did not test"
        assert main(["run", str(cfg)]) == 3  # the resumed run stops at the cap
        bill = billed(sim)
    s = summary(tmp_path / "run")
    assert bill <= cap, f"the provider billed ${bill:.6f} against a ${cap:.6f} cap"
    assert bill >= cap * 0.7  # the cap bound: most of it was spent
    assert bill <= s["spent_usd"] <= cap + 1e-12
    # The calls cut off are counted at their worst case, and said to be.
    assert s["worst_case_usd"] > 0
    assert s["paid_usd"] == s["spent_usd"] - s["worst_case_usd"]


def test_a_dead_partitions_holds_are_charged_when_its_lease_expires(tmp_path: Path) -> None:
    data = followbench_copies(tmp_path, 12)
    cap = full_cost(tmp_path, data) * 0.4
    with (
        redis_server(tmp_path / "redis") as server,
        SimulatorThread(SimConfig(seed=4, latency_ms=300)) as sim,
    ):
        run = f'max_usd = {cap!r}\ncoordinator = "{server.url}?lease_s=2"'
        cfg = write_config(tmp_path, "run", sim.base_url, data, run)
        victim, other = child(cfg, "--partition", "1/2"), child(cfg, "--partition", "0/2")
        kill_in_flight(victim, sim, after=10)
        _, err = other.communicate(timeout=240)
        assert other.returncode == 3, err.decode()  # the survivor stops at the cap
        bill = billed(sim)
    assert bill <= cap, f"the provider billed ${bill:.6f} against a ${cap:.6f} cap"
    assert bill >= cap * 0.6
