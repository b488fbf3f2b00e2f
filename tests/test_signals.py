"""Ctrl-C on a real `ifsweep run` subprocess against a simulator with latency: the first SIGINT stops
dispatch and lets in-flight calls finish (exit 130, status interrupted); a second exits at once. Both
leave a run that resumes to completion."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ifsweep import benchmarks
from ifsweep.runner.store.shards import RunStore
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"  # a known price: litellm stays unloaded


def write_config(tmp_path: Path, base: str, deadline_s: float) -> tuple[Path, Path]:
    out = tmp_path / "run"
    data = benchmarks.get("cfbench").fixture_dir()
    lines = [
        "[run]",
        f'output_dir = "{out}"',
        'progress = "off"',
        "concurrency = 4",
        f"stop_deadline_s = {deadline_s}",
        "",
        "[[benchmarks]]",
        'name = "cfbench"',
        f'data = "{data}"',
        "",
    ]
    for m in ("a", "b"):
        lines += ["[[models]]", f'id = "{m}"', f'model = "openai/sim-{m}"', f'api_base = "{base}"', PRICE, ""]
    lines += ["[judge]", 'model = "openai/sim-judge"', f'api_base = "{base}"', PRICE, ""]
    cfg = tmp_path / "sweep.toml"
    cfg.write_text("\n".join(lines))
    return cfg, out


def start(cfg: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(cond: Callable[[], bool], timeout_s: float = 30.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def stored_calls(out: Path) -> int:
    store = RunStore.open(out, writer_id="test_reader")
    try:
        return sum(1 for _ in store.iter_records({"generation", "judgment"}))
    finally:
        store.close()


def summary(out: Path) -> dict[str, object]:
    body: dict[str, object] = json.loads((out / "summary.json").read_text())
    return body


def resume(cfg: Path, out: Path) -> None:
    proc = start(cfg)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    s = summary(out)
    assert s["status"] == "complete" and s["done"] == s["planned"] == 24 and s["errors"] == 0


def test_first_sigint_finishes_in_flight_calls_then_resumes(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(latency_ms=400, seed=7)) as sim:
        cfg, out = write_config(tmp_path, sim.base_url, deadline_s=20)
        proc = start(cfg)
        wait_until(lambda: sim.stats.in_flight >= 4)  # the sweep is under way, 4 calls in flight
        sent_at_signal = sim.stats.requests
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - t0
        assert proc.returncode == 130, err
        assert "interrupted: finishing calls in flight" in err
        assert elapsed < 5.0  # the calls in flight took 0.4 s; the deadline (20 s) was not needed
        s = summary(out)
        assert s["status"] == "interrupted" and 0 < int(str(s["done"])) < 24
        # Dispatch stopped: at most the judge calls of pairs already under way started afterwards, and
        # every call sent was recorded (nothing in flight was abandoned, so nothing is paid twice).
        assert sim.stats.requests < 24 + 24
        assert stored_calls(out) == sim.stats.requests >= sent_at_signal
        sim.set_config(SimConfig(seed=7))
        resume(cfg, out)
        assert max(sim.stats.bodies.values()) == 1, "a call was sent twice"
        assert sim.stats.requests == 48


def test_second_sigint_exits_at_once_and_leaves_a_resumable_run(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(latency_ms=5000, seed=8)) as sim:
        cfg, out = write_config(tmp_path, sim.base_url, deadline_s=60)
        proc = start(cfg)
        wait_until(lambda: sim.stats.in_flight >= 4)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)  # the first is handled: dispatch stops, the 4 calls in flight keep going
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert time.monotonic() - t0 < 2.0  # not the 5 s of the calls in flight, nor the 60 s deadline
        assert "second interrupt: exiting now" in err
        in_flight_lost = sim.stats.requests
        sim.set_config(SimConfig(seed=8))
        resume(cfg, out)
        # Only the calls that were in flight at the second Ctrl-C were sent again.
        assert sum(n - 1 for n in sim.stats.bodies.values()) <= in_flight_lost <= 4
