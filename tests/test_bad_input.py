"""Bad input to `ifsweep run`: exit 2, one message naming the file, key or record and what is expected,
no traceback, and an existing run directory left byte for byte as it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sweeps import toml_config

from ifsweep import benchmarks
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

DATA_CASES = {"not_json_at_record", "schema_broken", "schema_broken_cfbench"}
UNSET = "IFSWEEP_BAD_INPUT_SURELY_UNSET"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=5)) as s:
        yield s


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sim: SimulatorThread) -> tuple[Path, str]:
    """A finished run directory and the config that made it."""
    root = tmp_path_factory.mktemp("bad")
    for name, file in (("infobench", "InfoBench.json"), ("cfbench", "cfbench_data.json")):
        (root / name).mkdir()
        shutil.copy(benchmarks.get(name).fixture_dir() / file, root / name / file)
    out = root / "run"
    data = {"infobench": root / "infobench", "cfbench": root / "cfbench"}
    good = toml_config(out, sim.base_url, models=("a",), bench=("infobench", "cfbench"), data=data, limit=2)
    cfg = root / "good.toml"
    cfg.write_text(good)
    assert main(["run", str(cfg)]) == 0
    return root, good


def snapshot(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def broken_data(root: Path, name: str, file: str, edit: Callable[[str], str]) -> Path:
    folder = root / f"{name}-{abs(hash(edit))}"
    folder.mkdir(exist_ok=True)
    text = (root / name / file).read_text(encoding="utf-8")
    (folder / file).write_text(edit(text), encoding="utf-8")
    return folder


def _cut_second_line(text: str) -> str:
    lines = text.splitlines()
    lines[1] = lines[1][:50]
    return "\n".join(lines) + "\n"


def _drop_field_of_second_line(text: str) -> str:
    lines = text.splitlines()
    lines[1] = lines[1].replace('"decomposed_questions"', '"decomposed_qs"')
    return "\n".join(lines) + "\n"


def _cfbench_bad_type(text: str) -> str:
    return text.replace('"criteria": [', '"criteria": 7, "x": [', 1)


def case(root: Path, good: str, name: str) -> tuple[str, list[str]]:
    """(config text, words the one message must contain)."""
    info = str(root / "infobench")
    if name == "malformed_toml":
        return good.replace("[run]", "[run", 1), ["(syntax)", "not valid TOML", "line 1"]
    if name == "unknown_key":
        return good.replace("limit = 2", "limt = 2", 1), ["benchmarks[0].limt", "did you mean 'limit'"]
    if name == "unknown_model_key":
        return good.replace('id = "a"', 'id = "a"\nmax_concurency = 4', 1), [
            "models[0].max_concurency",
            "did you mean 'max_concurrency'",
        ]
    if name == "wrong_type":
        return good.replace("limit = 2", 'limit = "2"', 1), ["benchmarks[0].limit", "positive integer", "'2'"]
    if name == "wrong_type_table":
        return good.replace("params = {", "params = 3 #", 1), ["models[0].params", "expected a table"]
    if name == "missing_data":
        return good.replace(info, str(root / "nowhere"), 1), ["benchmarks[0].data", "does not exist"]
    if name == "unreadable_data":
        folder = root / "unreadable"
        (folder / "InfoBench.json").mkdir(parents=True, exist_ok=True)  # a folder where the file should be
        return good.replace(info, str(folder), 1), ["cannot be read", str(folder)]
    if name == "not_json_at_record":
        folder = broken_data(root, "infobench", "InfoBench.json", _cut_second_line)
        return good.replace(info, str(folder), 1), ["InfoBench.json", "record 2", "not valid JSON"]
    if name == "schema_broken":
        folder = broken_data(root, "infobench", "InfoBench.json", _drop_field_of_second_line)
        return good.replace(info, str(folder), 1), ["InfoBench.json", "record 2", "decomposed_questions"]
    if name == "schema_broken_cfbench":
        cf = str(root / "cfbench")
        folder = broken_data(root, "cfbench", "cfbench_data.json", _cfbench_bad_type)
        return good.replace(cf, str(folder), 1), ["cfbench_data.json", "record", "criteria"]
    if name == "duplicate_model":
        block = good[good.index("[[models]]") : good.index("[judge]")]
        return good + "\n" + block, ["models[1].id", "duplicate model id 'a'"]
    if name == "unknown_benchmark":
        return good.replace('name = "infobench"', 'name = "infobnch"', 1), [
            "benchmarks[0].name",
            "did you mean 'infobench'",
        ]
    if name == "unset_key_env":
        return good.replace('id = "a"', f'id = "a"\napi_key_env = "{UNSET}"', 1), [
            "models[0].api_key_env",
            UNSET,
            "not set",
        ]
    if name == "unwritable_output":
        (root / "a-file").write_text("x")
        out = good.split('output_dir = "', 1)[1].split('"', 1)[0]
        return good.replace(out, str(root / "a-file" / "run"), 1), ["run.output_dir", "not a directory"]
    raise AssertionError(name)


CASES = [
    "malformed_toml",
    "unknown_key",
    "unknown_model_key",
    "wrong_type",
    "wrong_type_table",
    "missing_data",
    "unreadable_data",
    "not_json_at_record",
    "schema_broken",
    "schema_broken_cfbench",
    "duplicate_model",
    "unknown_benchmark",
    "unset_key_env",
    "unwritable_output",
]


@pytest.mark.parametrize("name", CASES)
def test_bad_input_exits_2_with_one_message(
    name: str, world: tuple[Path, str], sim: SimulatorThread, capsys: pytest.CaptureFixture[str]
) -> None:
    root, good = world
    os.environ.pop(UNSET, None)
    text, words = case(root, good, name)
    cfg = root / f"{name}.toml"
    cfg.write_text(text, encoding="utf-8")
    before = snapshot(root / "run")
    sent = sim.stats.requests
    capsys.readouterr()

    code = main(["run", str(cfg)])

    captured = capsys.readouterr()
    assert code == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ifsweep: error: "), captured.err
    assert captured.out == ""
    for word in words:
        assert word in lines[0], (word, lines[0])
    if name not in DATA_CASES:  # a broken data file names itself; everything else the config file
        assert str(cfg) in lines[0]
    assert snapshot(root / "run") == before, "the run directory changed"
    assert sim.stats.requests == sent, "a call was sent"


def test_a_real_process_prints_no_traceback(world: tuple[Path, str]) -> None:
    root, good = world
    text, _ = case(root, good, "schema_broken")
    cfg = root / "subprocess.toml"
    cfg.write_text(text, encoding="utf-8")
    before = snapshot(root / "run")
    proc = subprocess.run(
        [sys.executable, "-m", "ifsweep.runner.commands.cli", "run", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "record 2" in proc.stderr
    assert snapshot(root / "run") == before
