"""The budget running out inside an instance's concurrent judge tasks stops the sweep cleanly (exit 3),
just as it does between generations."""

from __future__ import annotations

import json
from pathlib import Path

from sweeps import toml_config

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"


def test_budget_exhausted_during_judging_exits_3_and_resumes(tmp_path: Path) -> None:
    with SimulatorThread(SimConfig(seed=5, latency_ms=5)) as sim:
        out = tmp_path / "run"
        cfg = tmp_path / "sweep.toml"
        text = toml_config(
            out, sim.base_url, models=("alpha",), bench=("eifbench",), extra_run="max_usd = 0.008"
        )
        text = text.replace(
            'model = "openai/sim-judge"',
            f'model = "openai/sim-judge"\n{PRICE}\nparams = {{ max_tokens = 64 }}',
        )
        text = text.replace(
            "params = { temperature = 0, max_tokens = 128 }", f"params = {{ max_tokens = 128 }}\n{PRICE}"
        )
        cfg.write_text(text)
        assert main(["run", str(cfg)]) == 3
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "budget_exhausted"
        assert 0 < summary["spent_usd"] <= 0.008
        assert summary["done"] < summary["planned"]

        cfg.write_text(text.replace("max_usd = 0.008", "max_usd = 50.0"))
        sent = sim.stats.requests
        assert main(["run", str(cfg)]) == 0
        final = json.loads((out / "summary.json").read_text())
        assert final["status"] == "complete" and final["done"] == final["planned"]
        # Nothing already paid for is bought again: the resumed run sends only what was missing.
        assert sum(c - 1 for c in sim.stats.bodies.values() if c > 1) == 0, sim.stats.requests - sent
