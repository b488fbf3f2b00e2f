"""The viewer finds the run's data itself (issue 31 item 7): the manifest records where the sweep read
each benchmark's data (`data_path`, with its hash), `--data DIR` is searched below by the benchmarks'
registered names, and an export whose pages lack their prompts says how many. Before, `ifsweep view
RUN_DIR` (as the README says) showed no prompt on any instance and `--export` wrote such pages with no
word; a folder of benchmarks given as --data was not searched below."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sweeps import toml_config

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.runner.view.html import esc
from ifsweep.simulator import SimConfig, SimulatorThread

MISSING = "lack their prompt and constraint texts"


def own_data(root: Path) -> tuple[Path, list[str]]:
    """CFBench's sample less its last record (so the built-in sample is not this run's data), in
    root/CFBench/data as the benchmark's own repository lays it out; and the prompts it holds."""
    records = json.loads((benchmarks.get("cfbench").fixture_dir() / "cfbench_data.json").read_text())[:-1]
    data = root / "CFBench" / "data"
    data.mkdir(parents=True)
    (data / "cfbench_data.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return data, [str(r["prompt"]) for r in records]


def export(capsys: pytest.CaptureFixture[str], run_dir: Path, out: Path, *extra: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["view", str(run_dir), "--export", str(out), "--sample", "50", *extra]) == 0
    return out.read_text(encoding="utf-8"), capsys.readouterr().err


def shown(page: str, prompt: str) -> bool:
    # The first line of a prompt, as the page escapes it.
    return esc(prompt.strip().splitlines()[0]) in page


def test_the_viewer_finds_the_recorded_data_then_below_a_data_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, prompts = own_data(tmp_path / "bench")
    run_dir, cfg = tmp_path / "run", tmp_path / "sweep.toml"
    with SimulatorThread(SimConfig(seed=2)) as sim:
        cfg.write_text(
            toml_config(run_dir, sim.base_url, models=("alpha",), bench=("cfbench",), data={"cfbench": data})
        )
        assert main(["run", str(cfg)]) == 0
    recorded = json.loads((run_dir / "manifest.json").read_text())["benchmarks"]["cfbench"]
    assert recorded["data_path"] == str(data.resolve())

    # 1. Nothing given: the manifest's path.
    page, err = export(capsys, run_dir, tmp_path / "a.html")
    assert all(shown(page, p) for p in prompts) and MISSING not in err

    # 2. The data moved: every page lacks its prompt, and the export says so.
    moved = tmp_path / "elsewhere" / "benchmarks"
    moved.parent.mkdir()
    shutil.move(tmp_path / "bench", moved)
    page, err = export(capsys, run_dir, tmp_path / "b.html")
    assert not any(shown(page, p) for p in prompts)
    assert f"warning: {len(prompts)} of {len(prompts)} exported pages {MISSING}" in err
    assert "pass its directory with --data" in err

    # 3. --data of the folder above the folder of benchmarks: found below it by the registered name.
    page, err = export(capsys, run_dir, tmp_path / "c.html", "--data", str(tmp_path / "elsewhere"))
    assert all(shown(page, p) for p in prompts) and MISSING not in err
