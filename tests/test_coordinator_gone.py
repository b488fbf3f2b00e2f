"""A coordinator that goes away (issue 27 item 2): its state shows in the board's totals line and the
plain lines; `[run] coordinator_timeout_s` stops the run, resumable, with exit 1 and the reason; Ctrl-C
keeps its "up to N s" promise while Redis is down. Real `ifsweep run` processes, a real redis-server
killed with SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from redis_server import RedisServer
from sweeps import toml_config
from test_coordination_sweep import followbench_copies

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import scan_shards
from ifsweep.simulator import SimConfig, SimulatorThread

PACED = "rpm = 600\nprice = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"


def write_config(
    root: Path, base: str, data: Path, run: str, *, category: str = "example", judge: bool = False
) -> Path:
    """One model (and with `judge` a judge, paced and priced alike) on FollowBench's `category`."""
    text = toml_config(
        root / "run",
        base,
        models=("m",),
        bench=("followbench",),
        data={"followbench": data},
        judge=judge,
        extra_run=run,
        extra_model=PACED,
    ).replace('name = "followbench"', f'name = "followbench"\ncategories = ["{category}"]')
    text = text.replace('progress = "off"', 'progress = "plain"')
    if judge:
        text += PACED + "\n"  # the [judge] table is the last one
    path = root / "sweep.toml"
    path.write_text(text)
    return path


def child(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_for_answers(run_dir: Path, proc: subprocess.Popen[bytes], n: int) -> None:
    deadline = time.monotonic() + 60
    while sum(1 for _ in scan_shards(run_dir, kinds=("generation",))) < n:
        assert proc.poll() is None, proc.communicate()[1].decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_coordinator_gone_for_good_shows_then_stops_the_run_resumably(tmp_path: Path) -> None:
    data = followbench_copies(tmp_path, 40)  # 200 calls at 600 rpm: about 20 s
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        with SimulatorThread(SimConfig(rpm=600)) as sim:
            run = f'max_usd = 50\ncoordinator = "{server.url}?lease_s=2"\ncoordinator_timeout_s = 6'
            cfg = write_config(tmp_path, sim.base_url, data, run)
            proc = child(cfg)
            wait_for_answers(tmp_path / "run", proc, 10)
            server.stop()  # SIGKILL: gone for good
            gone = time.monotonic()
            _, err = proc.communicate(timeout=60)
            took = time.monotonic() - gone
            said = err.decode()
            assert proc.returncode == 1, said
            assert 6 <= took <= 6 + 10, took  # generous: a loaded machine is slow to wind down
            # The plain lines said so while it waited: the totals line carries the coordinator's state.
            assert "| coordinator unreachable" in said and "stops at 6 s" in said, said
            summary = json.loads((tmp_path / "run" / "summary.json").read_text())
            assert summary["status"] == "failed" and "coordinator_timeout_s = 6" in summary["message"]
            assert "run the same command again" in summary["message"]
            server.start()  # back (empty): the same command resumes to the end
            assert main(["run", str(cfg)]) == 0
            assert max(sim.stats.bodies.values()) == 1, "a call was sent twice"
    finally:
        server.stop()


def test_ctrl_c_keeps_its_promise_while_redis_is_down(tmp_path: Path) -> None:
    data = followbench_copies(tmp_path, 40)
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        with SimulatorThread(SimConfig(rpm=600)) as sim:
            # The default lease (20 s): the old exit waited it out on top of the stop deadline.
            run = f'max_usd = 50\ncoordinator = "{server.url}"\nstop_deadline_s = 3'
            proc = child(write_config(tmp_path, sim.base_url, data, run))
            wait_for_answers(tmp_path / "run", proc, 10)
            server.stop()
            time.sleep(1.0)
            proc.send_signal(signal.SIGINT)
            asked = time.monotonic()
            _, err = proc.communicate(timeout=60)
            took = time.monotonic() - asked
    finally:
        server.stop()
    said = err.decode()
    assert proc.returncode == 130, said
    assert "up to 3 s" in said
    # Before, the exit waited out the 20 s lease on top: 23 s. A margin for a loaded machine.
    assert took <= 3 + 6.0, f"Ctrl-C promised up to 3 s and took {took:.1f} s"
