"""A run whose `limit` is lowered after more instances were judged: `status` counts done only among the
instances the config now selects (done never above planned) and lists the others apart, and `report`
(and `ifsweep.scores`) score exactly the selected instances, as a fresh run with the lower limit does,
saying in the table that more were left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweeps import toml_config

import ifsweep
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

BENCH = ("cfbench", "followbench")


def status_rows(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["status", str(run_dir), "--json"]) == 0
    rows: list[dict[str, object]] = json.loads(capsys.readouterr().out)["rows"]
    return rows


def report(run_dir: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", fmt]) == 0
    return capsys.readouterr().out


def test_a_lowered_limit_keeps_status_and_report_to_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimulatorThread(SimConfig(seed=4)) as sim:
        run_dir, fresh = tmp_path / "run", tmp_path / "fresh" / "run"
        cfg = tmp_path / "s.toml"
        cfg.write_text(toml_config(run_dir, sim.base_url, bench=BENCH, limit=5))
        assert main(["run", str(cfg)]) == 0
        cfg.write_text(toml_config(run_dir, sim.base_url, bench=BENCH, limit=2))
        sent = sim.stats.requests
        assert main(["run", str(cfg)]) == 0
        assert sim.stats.requests == sent  # nothing to send: the first 2 were judged already
        fresh_cfg = tmp_path / "fresh.toml"
        fresh_cfg.write_text(toml_config(fresh, sim.base_url, bench=BENCH, limit=2))
        assert main(["run", str(fresh_cfg)]) == 0

    rows = status_rows(run_dir, capsys)
    # `limit` counts sampling units of the seeded order (issue 34): a FollowBench group is five
    # instances, a CFBench unit one; the first 2 units of the order are the first 2 of its 5.
    size = {"cfbench": 1, "followbench": 5}
    assert rows and all(r["planned"] == r["done"] == 2 * size[str(r["benchmark"])] for r in rows), rows
    assert all(r["beyond_plan"] == 3 * size[str(r["benchmark"])] for r in rows), rows
    capsys.readouterr()
    assert main(["status", str(run_dir)]) == 0
    text = capsys.readouterr().out
    assert "3 more done, judged under an earlier, higher `limit`" in text
    assert all("beyond_plan" not in r for r in status_rows(fresh, capsys))

    # The same scores as the fresh run with the lower limit (the run column aside: both are "run").
    assert json.loads(report(run_dir, "json", capsys)) == json.loads(report(fresh, "json", capsys))
    table = report(run_dir, "table", capsys)
    # 3 CFBench units and 3 FollowBench groups of 5 beyond the plan: 18 instances, for each of 2 models.
    assert "36 (model, instance) pairs judged under an earlier, higher `limit` left out" in table, table
    assert "left out" not in report(fresh, "table", capsys)
    assert ifsweep.scores(run_dir).equals(ifsweep.scores(fresh))
