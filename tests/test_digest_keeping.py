"""A running sweep keeps the shards' digest as they grow (runner/store/keeping.py, issue 35): a child
process digests each round of new bytes, so the first `status` parses only the last round; what it
kept reads as a reading from scratch does, and a child stopped mid-round leaves the digest whole."""

from __future__ import annotations

import time
from pathlib import Path

from test_digest import figures, fresh_copy, sweep

from ifsweep.runner.store.digest import DIGEST_DIR
from ifsweep.runner.store.keeping import DigestKeeper
from ifsweep.runner.store.shards import RunStore, record_key
from ifsweep.simulator import SimConfig, SimulatorThread


def _parts(run: Path) -> list[str]:
    return sorted(p.name for p in (run / DIGEST_DIR).glob("*/*.parquet"))


def _wait(keeper: DigestKeeper) -> None:
    child = keeper._child
    assert child is not None
    assert child.wait(timeout=120) == 0


def test_a_sweeps_keeper_digests_each_round_of_new_bytes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        sweep(tmp_path, run, sim.base_url, 4)
    size = sum(p.stat().st_size for p in (run / "shards").glob("*.jsonl"))
    keeper = DigestKeeper(run, every_bytes=size + 1)
    assert not keeper.poke() and _parts(run) == []  # not grown by a round yet
    keeper.every_bytes = size
    assert keeper.poke()
    assert not keeper.poke()  # one round at a time, and no growth since
    _wait(keeper)
    kept = _parts(run)
    assert kept and all(name.startswith("000000000000-") for name in kept)
    # The shards grow by a round: the next round keeps the new bytes in a part of their own.
    with RunStore.open(run, fsync=False) as store:
        for n in range(400):
            rec = {"v": 2, "kind": "generation", "key": record_key(("k", n)), "status": "ok"}
            store.append({**rec, "model": "m", "benchmark": "followbench", "instance_id": str(n), "ts": 1.0})
    keeper.every_bytes = 1
    assert keeper.poke()
    _wait(keeper)
    assert set(kept) < set(_parts(run))
    assert figures(run) == figures(fresh_copy(run, tmp_path / "fresh"))


def test_a_round_stopped_midway_leaves_the_digest_whole(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=4)) as sim:
        sweep(tmp_path, run, sim.base_url, 6)
    keeper = DigestKeeper(run, every_bytes=1)
    assert keeper.poke()
    time.sleep(0.3)  # the child's interpreter is starting or digesting: stopped either way
    keeper.close()
    assert keeper._child is None
    assert figures(run) == figures(fresh_copy(run, tmp_path / "fresh"))
