"""A run that gives up on its coordinator keeps no half-judged verdict (chaos seeds 5021, 5028): judge
calls cut off by the stop leave no verdict, so the resume judges them, and every verdict then equals a
fault-free run's. Real `ifsweep run` processes, a real redis-server killed with SIGKILL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from redis_server import RedisServer
from sweeps import stored_records
from test_coordination_sweep import followbench_copies
from test_coordinator_gone import child, wait_for_answers, write_config

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread


def _verdicts(run_dir: Path) -> dict[str, list[Any]]:
    """Each verdict's rows by its key: the last record of a key is the one that counts."""
    out: dict[str, list[Any]] = {}
    for rec in stored_records(run_dir, {"verdict"}):
        out[rec["key"]] = [(r["constraint_idx"], r["satisfied"], r["status"]) for r in rec["rows"]]
    return out


def test_a_give_up_keeps_no_verdict_from_judge_calls_it_cut_off(tmp_path: Path) -> None:
    data = followbench_copies(tmp_path, 20, "style")  # judged
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        with SimulatorThread(SimConfig()) as sim:  # the runs pace themselves (rpm = 600)
            (tmp_path / "clean").mkdir()
            (tmp_path / "gone").mkdir()
            clean = write_config(tmp_path / "clean", sim.base_url, data, "", category="style", judge=True)
            assert main(["run", str(clean)]) == 0
            run = f'max_usd = 50\ncoordinator = "{server.url}?lease_s=2"\ncoordinator_timeout_s = 3'
            cfg = write_config(tmp_path / "gone", sim.base_url, data, run, category="style", judge=True)
            proc = child(cfg)
            wait_for_answers(tmp_path / "gone" / "run", proc, 10)
            server.stop()  # SIGKILL: gone for good, while judge calls are in flight
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 1, err.decode()
            kept = _verdicts(tmp_path / "gone" / "run")
            unparsed = [k for k, rows in kept.items() if any(st == "unparsed" for _, _, st in rows)]
            server.start()
            assert main(["run", str(cfg)]) == 0
    finally:
        server.stop()
    expected = _verdicts(tmp_path / "clean" / "run")
    assert len(expected) == 20 * 5  # every pair of the fault-free run (5 style rows a copy are scored)
    assert _verdicts(tmp_path / "gone" / "run") == expected, f"kept unparsed after the give-up: {unparsed}"
