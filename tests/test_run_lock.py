"""The run-level lock over real processes: a plain `ifsweep run` holds its directory alone, partitions
share it with each other only, a refusal names the process that holds it (pid, host, command) and
writes nothing, and a holder killed with SIGKILL leaves the directory free."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweeps import toml_config

from ifsweep.simulator import SimConfig, SimulatorThread


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    # Slow answers: the first run is still going when the second starts.
    with SimulatorThread(SimConfig(seed=3, latency_ms=20000)) as s:
        yield s


def start(cfg: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def holding(run_dir: Path, writer: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait until `proc` holds the run as `writer` (its lock file exists; once it names a process,
    that is `proc`)."""
    lock = run_dir / "shards" / f"{writer}.lock"
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if lock.exists():
            data = lock.read_bytes()
            assert not data or json.loads(data).get("pid") == proc.pid
            return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
    raise AssertionError(f"{writer} never took the run")


def refused(cfg: Path, *args: str) -> str:
    proc = start(cfg, *args)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err.decode()
    return err.decode()


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


def shard_sizes(run_dir: Path) -> dict[str, int]:  # by shard file name
    return {p.name: p.stat().st_size for p in (run_dir / "shards").glob("*.jsonl")}


def test_a_plain_run_refuses_a_second_run_and_names_it(tmp_path: Path, sim: SimulatorThread) -> None:
    cfg, run_dir = tmp_path / "s.toml", tmp_path / "run"
    cfg.write_text(toml_config(run_dir, sim.base_url, limit=4))
    first = start(cfg)
    try:
        holding(run_dir, "main", first)
        for args in ((), ("--partition", "1/2")):
            err = refused(cfg, *args)
            assert f"'main' (pid {first.pid} on {socket.gethostname()}" in err and f"run {cfg}" in err
        # Refused before writing: no shard and no writer lock of the partition, no second main shard.
        assert set(shard_sizes(run_dir)) == {"main-00001.jsonl"}
        assert not (run_dir / "shards" / "p1of2.lock").exists()
    finally:
        stop(first)
    # Killed with SIGKILL: the kernel dropped its locks, and the directory runs again.
    sim.set_config(SimConfig(seed=3, latency_ms=1))
    again = start(cfg)
    _, err = again.communicate(timeout=180)
    assert again.returncode == 0, err.decode()


def test_partitions_share_the_run_but_a_plain_run_is_refused_beside_them(
    tmp_path: Path, sim: SimulatorThread
) -> None:
    cfg, run_dir = tmp_path / "s.toml", tmp_path / "run"
    cfg.write_text(toml_config(run_dir, sim.base_url, limit=4))
    parts = [start(cfg, "--partition", f"{i}/2") for i in range(2)]
    try:
        for i, p in enumerate(parts):
            holding(run_dir, f"p{i}of2", p)  # both run at once
        err = refused(cfg)
        assert "a plain run cannot run beside it" in err.lower()
        for i, p in enumerate(parts):
            assert f"'p{i}of2' (pid {p.pid} on {socket.gethostname()}" in err
        assert not (run_dir / "shards" / "main.lock").exists()
    finally:
        for p in parts:
            stop(p)
    assert os.path.exists(run_dir / "run.lock")


def test_two_library_sweeps_on_one_directory_in_one_process(tmp_path: Path, sim: SimulatorThread) -> None:
    """`ifsweep.arun` holds the run lock too: a second sweep of the directory started while the first
    runs (in the same process, a notebook say) is refused naming this process, and writes nothing."""
    import anyio

    import ifsweep
    from ifsweep.runner.store.locks import WriterBusyError

    cfg = tmp_path / "s.toml"
    run_dir = tmp_path / "run"
    cfg.write_text(toml_config(run_dir, sim.base_url, limit=2))
    refusal: list[str] = []

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ifsweep.arun, str(cfg))
            with anyio.fail_after(60):
                while not (run_dir / "shards" / "main.lock").exists():  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            try:
                await ifsweep.arun(str(cfg), partition=(0, 2))
            except WriterBusyError as e:
                refusal.append(str(e))
            tg.cancel_scope.cancel()

    anyio.run(both)
    assert refusal and f"'main' (pid {os.getpid()} on {socket.gethostname()}" in refusal[0]
    assert not (run_dir / "shards" / "p0of2.lock").exists()


def test_an_import_is_refused_beside_a_running_sweep_and_writes_nothing(
    tmp_path: Path, sim: SimulatorThread
) -> None:
    """`ifsweep import` into a directory a sweep writes now: the sweep may be judging the very pairs the
    import replays, two current verdicts of one slot. It is refused like a second run, naming it."""
    from ifsweep import benchmarks

    cfg, run_dir = tmp_path / "s.toml", tmp_path / "run"
    cfg.write_text(toml_config(run_dir, sim.base_url, limit=4))
    data = benchmarks.get("infobench").fixture_dir() / "InfoBench.json"
    entries = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    outputs = tmp_path / "m_DecomposeEval.json"
    outputs.write_text(
        "".join(
            json.dumps({**e, "output": "an answer", "eval": [True] * len(e["decomposed_questions"])}) + "\n"
            for e in entries
        )
    )
    first = start(cfg)
    try:
        holding(run_dir, "main", first)
        before = shard_sizes(run_dir)
        imp = subprocess.run(
            [
                *(sys.executable, "-m", "ifsweep.runner.commands.cli", "import", "infobench", str(outputs)),
                *("--out", str(run_dir), "--scoring", "reference", "--data", str(data.parent)),
            ],
            capture_output=True,
            timeout=120,
        )
        err = imp.stderr.decode()
        assert imp.returncode == 2, err
        assert "An import cannot run beside it" in err and f"'main' (pid {first.pid}" in err
        assert not (run_dir / "shards" / "import.lock").exists()
        assert shard_sizes(run_dir).keys() == before.keys()  # no import shard
        assert first.poll() is None  # the sweep goes on
    finally:
        stop(first)
