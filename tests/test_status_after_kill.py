"""What `ifsweep status` says of a run killed under a cap (issue 27 item 1): the calls the kill cut off
count at their worst case, as the resumed run's budget counts them. A real `ifsweep run` process, a real
SIGKILL, then status and the resumed run read the same shards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweeps import stored_records
from test_budget_kill import child, full_cost, kill_in_flight, summary, write_config
from test_coordination_sweep import followbench_copies

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread


def test_status_after_a_kill_shows_the_spend_the_resumed_run_starts_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = followbench_copies(tmp_path, 12)
    cap = full_cost(tmp_path, data) * 0.6
    run = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=4, latency_ms=300)) as sim:
        cfg = write_config(tmp_path, "run", sim.base_url, data, f"max_usd = {cap!r}")
        kill_in_flight(child(cfg), sim, after=8)
        resolved = {i for r in stored_records(run, {"generation"}) for i in r.get("intents", ())}
        cut_off = [r for r in stored_records(run, {"intent"}) if r["key"] not in resolved]
        assert len(cut_off) >= 3, "no call was in flight at the kill: the test did not test"
        paid = sum(float(r["cost_usd"]) for r in stored_records(run, {"generation"}))
        capsys.readouterr()
        assert main(["status", str(run), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert main(["status", str(run)]) == 0
        text = capsys.readouterr().out
        assert main(["run", str(cfg)]) == 3  # the resumed run stops at the cap
    resumed = summary(run)
    # What the resumed run paid for is in its own call records: the rest is the spend it started from.
    paid_since = sum(float(r["cost_usd"]) for r in stored_records(run, {"generation"})) - paid
    worst = sum(float(r["worst_usd"]) for r in cut_off)
    assert status["worst_case_usd"] == pytest.approx(worst) and worst > 0
    assert status["spent_usd"] == pytest.approx(paid + worst)
    assert status["paid_usd"] == pytest.approx(paid)
    assert resumed["spent_usd"] - paid_since == pytest.approx(status["spent_usd"], abs=1e-9)
    assert resumed["worst_case_usd"] == pytest.approx(status["worst_case_usd"], abs=1e-9)
    assert f"${status['spent_usd']:.4f} spent (${status['paid_usd']:.4f} paid" in text, text
