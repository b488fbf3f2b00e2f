"""FollowBench English and Chinese in one sweep: two tables of one config, reported as two benchmarks
("followbench" and "followbench-zh") by the summary, `status`, `plan` and every report format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import ConfigError, load_config
from ifsweep.simulator import SimConfig, SimulatorThread


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=7)) as s:
        yield s


def _config(out: Path, base: str, data: Path, tables: list[str]) -> str:
    lines = ["[run]", f"output_dir = {json.dumps(str(out))}", 'progress = "off"', "reask = 0", ""]
    for table in tables:
        # 2 units of the seeded order = 2 groups of 5 levels: the 10 instances each language had with
        # `limit = 10` in file order (issue 34).
        lines += ["[[benchmarks]]", 'name = "followbench"', f"data = {json.dumps(str(data))}", "limit = 2"]
        lines += [table, ""]
    lines += ["[[models]]", 'id = "m"', 'model = "openai/sim-m"', f'api_base = "{base}"', ""]
    lines += ["[judge]", 'model = "openai/sim-judge"', f'api_base = "{base}"', ""]
    return "\n".join(lines)


def test_both_languages_in_one_sweep(
    tmp_path: Path, shared_benchmarks: Path, sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_benchmarks / "FollowBench"
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(_config(out, sim.base_url, data, ['language = "en"', 'language = "zh"']))
    assert main(["run", str(cfg)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["planned"] == summary["done"] == 20
    assert {(r["benchmark"], r["done"]) for r in summary["by_model"]} == {
        ("followbench", 10),
        ("followbench-zh", 10),
    }
    # The languages share instance ids (content:1:1 is in both) and keep a verdict each.
    capsys.readouterr()
    assert main(["status", str(out)]) == 0
    status = capsys.readouterr().out
    assert "followbench-zh" in status and "\nm " in status
    assert main(["report", str(out), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    heads = {(r["benchmark"], r["metric"]) for r in rows if r["slice"] == "all"}
    assert {("followbench", "HSR"), ("followbench-zh", "HSR")} <= heads
    coverage = {r["benchmark"]: r["n"] for r in rows if r["metric"] == "coverage"}
    assert coverage == {"followbench": 10, "followbench-zh": 10}
    assert main(["report", str(out)]) == 0
    table = capsys.readouterr().out
    assert "FollowBench (zh)" in table
    assert main(["plan", str(cfg)]) == 0
    assert "followbench-zh" in capsys.readouterr().out


def test_one_language_twice_is_still_refused(tmp_path: Path, shared_benchmarks: Path) -> None:
    cfg = tmp_path / "sweep.toml"
    data = shared_benchmarks / "FollowBench"
    cfg.write_text(
        _config(tmp_path / "run", "http://127.0.0.1:9/v1", data, ['language = "zh"', 'language = "zh"'])
    )
    with pytest.raises(
        ConfigError, match=r"benchmarks\[1\]\.name: benchmark 'followbench-zh' is already listed"
    ):
        load_config(cfg)
    # A Chinese language folder given as the data, without the option, is Chinese too.
    cfg.write_text(_config(tmp_path / "run", "http://127.0.0.1:9/v1", data / "data_zh", ["", ""]))
    with pytest.raises(ConfigError, match="'followbench-zh' is already listed"):
        load_config(cfg)
    cfg.write_text(_config(tmp_path / "run", "http://127.0.0.1:9/v1", data, ['language = "en"', ""]))
    with pytest.raises(ConfigError, match="'followbench' is already listed"):
        load_config(cfg)
