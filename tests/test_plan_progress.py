"""`ifsweep plan` on a directory with results shows what remains first, then what is done; `ifsweep run
--max-usd X` caps that run in place of the config's max_usd, recorded in the summary (issue 36 item 7).
Before, plan showed the whole sweep's cost whatever was done, and raising a cap meant editing the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sweeps import toml_config

from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"
JUDGE = 'model = "openai/sim-judge"'


def config(out: Path, base: str, limit: int, extra_run: str = "") -> str:
    text = toml_config(out, base, bench=("cfbench",), limit=limit, extra_model=PRICE, extra_run=extra_run)
    return text.replace(JUDGE, f"{JUDGE}\n{PRICE}\nparams = {{ max_tokens = 128 }}")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    got = capsys.readouterr()
    return code, got.out, got.err


def total_cost(text: str) -> tuple[float, float]:
    found = re.search(r"^total cost \$([0-9.]+)-\$([0-9.]+)", text, re.M)
    assert found, text
    return float(found.group(1)), float(found.group(2))


def test_plan_shows_what_remains_first_then_what_is_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, small, big, fresh = tmp_path / "run", tmp_path / "a.toml", tmp_path / "b.toml", tmp_path / "c.toml"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        small.write_text(config(out, sim.base_url, 3))
        big.write_text(config(out, sim.base_url, 6))
        fresh.write_text(config(tmp_path / "fresh", sim.base_url, 6))
        assert cli(capsys, "run", str(small))[0] == 0
        spent = json.loads((out / "summary.json").read_text())["spent_usd"]
        code, text, _ = cli(capsys, "plan", str(big))
        assert code == 0
        lines = text.splitlines()
        # Two models x 6 CFBench instances planned, 3 of each done: the remaining cost comes first.
        assert lines[0].startswith("remaining: 6 of 12 planned pairs, cost $"), text
        assert f"done: 6 of 12 pairs; spent so far ${spent:.4f}" in text
        left = total_cost(text)
        whole = total_cost(cli(capsys, "plan", str(fresh))[1])
        assert 0 < left[1] < whole[1]
        # The remaining table counts 3 generations a model, not 6.
        assert re.search(r"^alpha\s+cfbench\s+3\s+3\s", text, re.M), text

        assert cli(capsys, "run", str(big))[0] == 0
        code, text, _ = cli(capsys, "plan", str(big))
    assert text.splitlines()[0].startswith("remaining: 0 of 12 planned pairs, cost $0.0000-$0.0000"), text
    assert "done: 12 of 12 pairs" in text


def test_run_max_usd_overrides_the_configs_cap_for_that_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        cfg.write_text(config(out, sim.base_url, 4, extra_run="max_usd = 0.002"))
        assert cli(capsys, "run", str(cfg))[0] == 3  # the config's cap stops it
        stopped = json.loads((out / "summary.json").read_text())
        assert stopped["status"] == "budget_exhausted" and stopped["max_usd"] == 0.002
        # Raised for one run, without editing the file.
        code, _, err = cli(capsys, "run", str(cfg), "--max-usd", "5")
        assert code == 0, err
        assert "budget cap $5 for this run (--max-usd; config: $0.002)" in err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["max_usd"] == 5.0
        assert summary["spent_usd"] > 0.002
        # The config, unedited, still resumes the directory (nothing left to do: complete).
        code, _, err = cli(capsys, "run", str(cfg))
        assert code in (0, 3), err
        again = json.loads((out / "summary.json").read_text())
        assert again["max_usd"] == 0.002 and again["done"] == again["planned"]
    with pytest.raises(SystemExit):
        main(["run", str(cfg), "--max-usd", "-1"])
