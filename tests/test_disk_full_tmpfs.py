"""A full disk wherever it strikes, on a real tmpfs mounted for the test (skipped where mounting is not
permitted): the periodic summary.json, the manifest of a resume, the shards. Each time the run stops
with the disk-full message and its resume advice (exit 1, no traceback, no bare `[Errno 28]`), leaves
no temporary file, and resumes to completion once there is room."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweeps import toml_config

from ifsweep.simulator import SimConfig, SimulatorThread

ADVICE = "free space (or raise the limit) and run the same command again to resume"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of its own."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk` with one file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)
    return filler


def ifsweep(*args: str, timeout: float = 180) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", *args], capture_output=True, timeout=timeout
    )
    return done.returncode, done.stderr.decode()


def temporary_files(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.rglob("*") if p.name.endswith(".tmp"))


def assert_disk_full_stop(code: int, err: str) -> None:
    assert code == 1, err
    assert "Traceback" not in err and "OSError" not in err, err
    assert "disk full or file size limit reached" in err and ADVICE in err, err


def test_a_full_disk_at_the_summary_or_the_manifest_is_the_disk_full_stop(disk: Path, tmp_path: Path) -> None:
    # Answers take 8 s: the periodic summary (every 2 s) is the only thing the run writes meanwhile.
    with SimulatorThread(SimConfig(seed=2, latency_ms=8000)) as sim:
        run_dir, cfg = disk / "run", tmp_path / "s.toml"
        cfg.write_text(toml_config(run_dir, sim.base_url, bench=("cfbench",), models=("alpha",), limit=2))
        proc = subprocess.Popen(
            [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        end = time.monotonic() + 60
        while not (run_dir / "summary.json").exists():
            assert proc.poll() is None and time.monotonic() < end
            time.sleep(0.05)
        shard_bytes = sum(p.stat().st_size for p in (run_dir / "shards").glob("*.jsonl"))
        filler = fill(disk)
        _, raw = proc.communicate(timeout=120)
        err = raw.decode()
        assert_disk_full_stop(proc.returncode, err)
        assert "summary.json: not written" in err, err
        assert not temporary_files(run_dir)
        assert sum(p.stat().st_size for p in (run_dir / "shards").glob("*.jsonl")) == shard_bytes
        # The last summary says how the run ended, written in the room the old one took.
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "failed" and ADVICE in summary["message"]

        # Run again on the still-full disk: the manifest is the first write, and the same stop.
        code, err = ifsweep("run", str(cfg))
        assert_disk_full_stop(code, err)
        assert "manifest.json: not written" in err and "nothing was run" in err, err
        assert not temporary_files(run_dir)

        filler.unlink()
        sim.set_config(SimConfig(seed=2, latency_ms=1))
        code, err = ifsweep("run", str(cfg))
        assert code == 0, err
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "complete"


def test_a_full_disk_at_the_shards_is_the_same_stop_and_resumes(disk: Path, tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(seed=2, latency_ms=5)) as sim:
        run_dir, cfg = disk / "run", tmp_path / "s.toml"
        cfg.write_text(toml_config(run_dir, sim.base_url, bench=("followbench", "cfbench", "infobench")))
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (1024 * 1024 - 96 * 1024))  # leaves about 96 kB: a few shard lines
        code, err = ifsweep("run", str(cfg))
        assert_disk_full_stop(code, err)
        assert not temporary_files(run_dir)
        filler.unlink()
        code, err = ifsweep("run", str(cfg))
        assert code == 0, err
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "complete"


def test_a_full_disk_at_the_coordination_id_is_the_disk_full_stop(disk: Path) -> None:
    # Chaos seed 3009: partitions starting on a full disk died with a traceback writing coordination.json.
    from ifsweep.runner.engine.coordinator import SWEEP_ID_NAME, sweep_id
    from ifsweep.runner.store.shards import DiskFullError

    run_dir = disk / "run"
    run_dir.mkdir()
    filler = fill(disk)
    with pytest.raises(DiskFullError, match="disk full or file size limit reached"):
        sweep_id(run_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == []  # no temporary file, no half an id
    filler.unlink()
    ident, created = sweep_id(run_dir)
    assert created and (run_dir / SWEEP_ID_NAME).exists()
    assert sweep_id(run_dir) == (ident, False)
