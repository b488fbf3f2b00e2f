"""`ifsweep run --partition i/4` as four live processes sharing one run directory: together they do
exactly the work of one unpartitioned run, `report` merges their shards, and `status` adds up the plans
each partition wrote to its own summary file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_resume_crash import SEED, resends, sweep_toml, verdicts

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.shards import shard_files
from ifsweep.runner.watch.status import status_table, summary_name
from ifsweep.simulator import SimConfig, SimulatorThread

BENCH = ("followbench", "cfbench", "infobench")


def report_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "json"]) == 0
    rows: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return rows


def test_four_partition_processes_equal_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SimulatorThread(SimConfig(seed=SEED, latency_ms=5)) as sim:
        # Same directory name in both, so the `run` column of the two reports agrees.
        ref, part = tmp_path / "a" / "run", tmp_path / "b" / "run"
        ref_cfg, cfg = tmp_path / "a.toml", tmp_path / "b.toml"
        ref_cfg.write_text(sweep_toml(ref, sim.base_url, bench=BENCH))
        cfg.write_text(sweep_toml(part, sim.base_url, bench=BENCH))
        assert main(["run", str(ref_cfg)]) == 0
        sent = sim.stats.requests
        sim.stats.reset()

        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ifsweep.runner.commands.cli",
                    "run",
                    str(cfg),
                    "--partition",
                    f"{i}/4",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for i in range(4)
        ]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        # The partitions split the work: the same number of calls, none sent by two of them.
        assert sim.stats.requests == sent and resends(sim) == 0

    assert {w for w, _, _ in shard_files(part)} == {f"p{i}of4" for i in range(4)}
    assert verdicts(part) == verdicts(ref)
    assert report_json(part, capsys) == report_json(ref, capsys)

    # Each partition planned only its own keys; status adds the four plans up.
    assert not (part / "summary.json").exists()
    plans = [json.loads((part / summary_name(f"p{i}of4")).read_text())["planned"] for i in range(4)]
    assert all(n > 0 for n in plans)
    got = {(r["model"], r["benchmark"]): r for r in status_table(part)}
    want = {(r["model"], r["benchmark"]): r for r in status_table(ref)}
    assert got.keys() == want.keys() and sum(plans) == sum(r["planned"] for r in want.values())
    for k, r in want.items():
        assert (got[k]["planned"], got[k]["done"], got[k]["errors"]) == (r["planned"], r["done"], 0), k
        assert got[k]["spent_usd"] == pytest.approx(r["spent_usd"]) and r["spent_usd"] > 0

    capsys.readouterr()
    assert main(["status", str(part)]) == 0
    text = capsys.readouterr().out
    alpha_cf = next(x for x in text.splitlines() if x.split()[:2] == ["alpha", "cfbench"])
    assert alpha_cf.split()[2:5] == [str(want[("alpha", "cfbench")]["planned"])] * 2 + ["0"], text

    # A partition that never wrote its summary leaves the plan known: the manifest records it, and the
    # run's one reading (runner/store/current.py) counts it (issue 31) ...
    missing = part / summary_name("p3of4")
    missing.unlink()
    assert {(r["model"], r["benchmark"]): r["planned"] for r in status_table(part)} == {
        k: r["planned"] for k, r in want.items()
    }
    # ... and a complete set of summaries says the same.
    (part / "summary.json").write_bytes((ref / "summary.json").read_bytes())
    got = {(r["model"], r["benchmark"]): r["planned"] for r in status_table(part)}
    assert got == {k: r["planned"] for k, r in want.items()}
    os.utime(part / "summary.json", (0, 0))  # file times do not matter: `updated_at` inside does
    assert {(r["model"], r["benchmark"]): r["planned"] for r in status_table(part)} == got
