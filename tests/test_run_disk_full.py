"""A full disk in the middle of a real `ifsweep run`: RLIMIT_FSIZE makes every write past the limit fail
with EFBIG (SIGXFSZ ignored), as ENOSPC would. The run must stop with one clear message and exit 1, leave
only whole, valid lines, and resume to the same verdicts once the limit is gone."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from test_resume_crash import SEED, sweep_toml, verdicts

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import DamageReport, RunStore, scan_shards, shard_files
from ifsweep.simulator import SimConfig, SimulatorThread

LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from ifsweep.runner.commands.cli import main
sys.exit(main(sys.argv[2:]))
"""

LIMIT = 120_000  # the finished shard is about 290 kB: the limit is met mid-run


def test_full_disk_stops_cleanly_and_the_run_resumes(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(seed=SEED)) as sim:
        ref = tmp_path / "reference"
        ref_cfg = tmp_path / "reference.toml"
        ref_cfg.write_text(sweep_toml(ref, sim.base_url, bench=("followbench", "cfbench", "infobench")))
        assert main(["run", str(ref_cfg)]) == 0

        # Latency and short group commits make many small batches, so some land before the limit.
        sim.set_config(SimConfig(seed=SEED, latency_ms=20))
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        extra = "flush_ms = 20\nconcurrency = 8"
        cfg.write_text(
            sweep_toml(out, sim.base_url, bench=("followbench", "cfbench", "infobench"), extra_run=extra)
        )
        proc = subprocess.run(
            [sys.executable, "-c", LIMITED, str(LIMIT), "run", str(cfg)], capture_output=True, timeout=120
        )
        err = proc.stderr.decode()
        assert proc.returncode == 1, err
        assert "Traceback" not in err, err
        assert "disk full or file size limit reached" in err and "run the same command again" in err, err
        assert "[ifsweep] failed:" in err, err

        # Nothing corrupted: every byte on disk is a whole, valid line, and the shard stayed under the limit.
        (_, _, shard), *more = shard_files(out)
        assert not more
        data = shard.read_bytes()
        assert 0 < len(data) <= LIMIT and data.endswith(b"\n")
        damaged: list[DamageReport] = []
        written = sum(1 for _ in scan_shards(out, damaged))
        assert not damaged and written == data.count(b"\n")
        with RunStore.open(out, writer_id="check") as s:
            assert not s.damaged
        sent = sim.stats.requests

        assert main(["run", str(cfg)]) == 0
        assert sim.stats.requests > sent
    assert verdicts(out) == verdicts(ref)
    keys = Counter(sl.key for sl in scan_shards(out))
    assert max(keys.values()) == 1
