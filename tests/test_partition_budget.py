"""Without a coordinator, each partition's budget and summary count its own writer's spend (issue 31
item 10): partition 1 run after partition 0 completed, with a cap of 1.25 x its own cost, completes
(before: its budget started from partition 0's spend too, exit 3, its summary saying both partitions'
spend). `ifsweep status` adds up the directory's whole spend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import subprocess_env
from sweeps import toml_config

from ifsweep.runner.commands.cli import main
from ifsweep.runner.watch.status import summary_name
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 4.0 }"


def config(out: Path, base: str, max_usd: float | None = None) -> str:
    text = toml_config(
        out, base, bench=("followbench", "cfbench"), limit=4, extra_model=PRICE,
        extra_run="" if max_usd is None else f"max_usd = {max_usd}",
    )  # fmt: skip
    judge = f'model = "openai/sim-judge"\n{PRICE}\nparams = {{ max_tokens = 128 }}'
    return text.replace('model = "openai/sim-judge"', judge)


def partition(cfg: Path, text: str, i: int, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    cfg.write_text(text, encoding="utf-8")
    code = main(["run", str(cfg), "--partition", f"{i}/2"])
    capsys.readouterr()
    out = Path(text.split('output_dir = "', 1)[1].split('"', 1)[0])
    return code, json.loads((out / summary_name(f"p{i}of2")).read_text(encoding="utf-8"))


def test_an_uncoordinated_partition_is_capped_by_its_own_spend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimulatorThread(SimConfig(seed=11)) as sim:
        # Partition 1's own cost, measured alone in a directory of its own.
        alone = tmp_path / "alone"
        code, own = partition(tmp_path / "alone.toml", config(alone, sim.base_url), 1, capsys)
        assert code == 0 and own["spent_usd"] > 0
        cost = own["spent_usd"]

        shared, cfg = tmp_path / "run", tmp_path / "sweep.toml"
        code, first = partition(cfg, config(shared, sim.base_url), 0, capsys)
        assert code == 0 and first["status"] == "complete" and first["spent_usd"] > 0.3 * cost
        code, second = partition(cfg, config(shared, sim.base_url, max_usd=1.25 * cost), 1, capsys)
    assert code == 0, second
    assert second["status"] == "complete"
    assert second["spent_usd"] == pytest.approx(cost, rel=1e-6)
    # The directory's spend is status's: both partitions.
    assert main(["status", str(shared), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["spent_usd"] == pytest.approx(first["spent_usd"] + second["spent_usd"], rel=1e-6)


def test_two_uncoordinated_partitions_started_together_each_finish_under_their_own_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The partitions started at once (subprocesses) under one cap each would exceed with the other's spend:
    both complete, whatever the timing."""
    with SimulatorThread(SimConfig(seed=11, latency_ms=5)) as sim:
        costs = []
        for i in range(2):
            alone = tmp_path / f"alone{i}"
            code, own = partition(tmp_path / f"alone{i}.toml", config(alone, sim.base_url), i, capsys)
            assert code == 0
            costs.append(own["spent_usd"])
        shared = tmp_path / "run"
        # One cap for both (a run's budget can only grow, so two caps would race on which partition writes
        # the manifest first), below what the two together cost: it binds only if a partition's budget
        # counted the other's spend.
        cap = 1.25 * max(costs)
        assert cap < sum(costs)
        procs = []
        for i in range(2):
            cfg = tmp_path / f"p{i}.toml"
            cfg.write_text(config(shared, sim.base_url, max_usd=cap), encoding="utf-8")
            cmd = [
                sys.executable,
                "-m",
                "ifsweep.runner.commands.cli",
                "run",
                str(cfg),
                "--partition",
                f"{i}/2",
            ]
            procs.append(
                subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=subprocess_env())
            )
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err.decode()
    for i, cost in enumerate(costs):
        summary = json.loads((shared / summary_name(f"p{i}of2")).read_text(encoding="utf-8"))
        assert summary["status"] == "complete" and summary["spent_usd"] == pytest.approx(cost, rel=1e-6)
